"""The ``gemmlab`` command in a temporary directory: in-process (the ``cli`` fixture, a fresh command
each call) and, where a real process is the point (its exit status, two commands at once), as a
subprocess (``python -m gemmlab``).

No GPU is needed: everything runs in ``mode=compile`` (NVRTC only) or is rejected before a GPU is
opened (one in-process test drives ``run_point`` in ``mode=run`` against a fake GPU to check the
status a failed launch gets). The contract under test (gemmlab/cli/app.py): exit 0 when every point
is valid, 2 for invalid input with exactly one stderr line ``gemmlab: error: <field>: ...`` and no
traceback, 1 for any other failure; every result.json written for a bad input has ``"valid": false``.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gemmlab.cli.app
from gemmlab.paths import KERNELS_DIR
from gemmlab.run import isolation

BUILTIN_KERNELS = ("naive", "tiled", "ladder_starter", "ladder_strip", "ladder_tile2d", "sgemm_block2d",
                   "sgemm_warptile", "sgemm_pipelined", "cublas", "mma_tf32", "mma_bf16", "splitk", "tma_bf16",
                   "cluster_tiled", "gemv_rows", "gemv_cols", "small_tile", "slicedk", "splitk_warptile", "streamk",
                   "wgmma_bf16", "wgmma_tf32", "decode_bf16", "decode_tf32", "triton_matmul",
                   "splitk_dot", "triton_tma_persistent", "wgmma_fp8", "cublas_grouped_loop", "cublas_grouped",
                   "grouped_ref", "wgmma_grouped")


def results(root: Path) -> list[Path]:
    return sorted((root / "outputs").rglob("result.json")) if (root / "outputs").exists() else []


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def stderr_lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


@functools.lru_cache(maxsize=1)
def gpu_present() -> bool:
    try:
        from cuda.core import Device
        return len(Device.get_all_devices()) > 0
    except Exception:
        return False


def assert_invalid(proc, field: str, cwd: Path) -> None:
    """Exit 2, one stderr line naming ``field``, no traceback, any record written is invalid."""
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text
    assert proc.returncode == 2, text
    lines = stderr_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gemmlab: error: "), lines[0]
    assert lines[0].startswith(f"gemmlab: error: {field}: "), lines[0]
    assert len(lines[0]) > len(f"gemmlab: error: {field}: ") + 5  # says what is allowed
    assert "no CUDA" not in text  # rejected before any GPU is looked for
    written = results(cwd)
    assert len(written) <= 1
    for path in written:
        record = load(path)
        assert record["valid"] is False
        assert record["status"] == "invalid"
        assert record["error"].startswith(f"{field}: ")


# --- invalid input --------------------------------------------------------------------------------

BAD_INPUTS = [
    (["shape=[1,2]"], "shape"),
    (["shape=[1,2,3,4]"], "shape"),
    (["shape=[0,1,1]"], "shape"),
    (["shape=[-1,2,3]"], "shape"),
    (["shape=[1.5,2,3]"], "shape"),
    (["shape=abc"], "shape"),
    (["shape=[a,b,c]"], "shape"),
    (["shape=null"], "shape"),
    (["shape=[true,2,3]"], "shape"),
    (["shape=[100000,100000,1]"], "shape"),  # C has 1e10 elements (> 2**31 - 1)
    (["kernel=foo"], "kernel"),
    (["kernel.XX=3"], "kernel.XX"),
    (["+kernel.XX=3"], "kernel.XX"),
    (["kernel=naive", "kernel.BK=8"], "kernel.BK"),
    (["kernel.BK=7"], "kernel.BK"),
    (["kernel.BK=0"], "kernel.BK"),
    (["kernel.BK=5000"], "kernel.BK"),
    (["kernel.BK=x"], "kernel.BK"),
    (["kernel.TM=3"], "kernel.TM"),
    (["kernel.TM=1", "kernel.TN=1"], "kernel.TM"),
    (["kernel=naive", "kernel.BX=64", "kernel.BY=64"], "kernel.BX"),
    (["kernel=ladder_strip", "kernel.TM=3", "shape=[128,128,128]"], "kernel.TM"),
    (["kernel=ladder_strip", "shape=[63,65,33]"], "shape"),
    (["kernel=ladder_starter", "shape=[96,96,96]"], "shape"),
    (["timing.repeat=0"], "timing.repeat"),
    (["timing.batch=-1"], "timing.batch"),
    (["timing.warmup=x"], "timing.warmup"),
    (["verify.atol=-1"], "verify.atol"),
    (["verify.rtol=nan"], "verify.rtol"),
    (["verify.rtol=2"], "verify.rtol"),
    (["arch=sm_xx"], "arch"),
    (["device=-1"], "device"),
    (["inputs.seed=-1"], "inputs.seed"),
    (["inputs.distribution=zeros"], "inputs.distribution"),
    (["plugin_dirs=[/nonexistent/gemmlab/plugins]"], "plugin_dirs"),
    (["plugin_dirs=/tmp"], "plugin_dirs"),
    # measurement-protocol fields
    (["timing.mode=foo"], "timing.mode"),
    (["timing.l2=hot"], "timing.l2"),
    (["timing.max_repeat=3"], "timing.max_repeat"),
    (["timing.budget_s=x"], "timing.budget_s"),
    (["verify.tolerance=loose"], "verify.tolerance"),
    (["verify.tolerance=exact"], "verify.tolerance"),
    (["inputs.distribution=integers", f"shape=[4,4,{2**19 + 1}]"], "inputs.distribution"),
    (["kernel=naive", "precision=fp16"], "precision"),
    (["precision=tf32"], "precision"),  # the default kernel (tiled): FP32 FFMA with fp32, bf16 or fp16 inputs
    (["kernel=naive", "precision=tf32"], "precision"),
    (["sanitizer=foo"], "sanitizer"),
    (["baseline=3"], "baseline"),
]


@pytest.mark.parametrize("args, field", BAD_INPUTS, ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_bad_input_compile_mode(cli, tmp_path, args, field):
    assert_invalid(cli([*args, "mode=compile"], tmp_path), field, tmp_path)


@pytest.mark.parametrize("args, field", [
    (["cache.dir=' '"], "cache.dir"),
    (["cache.dir=''"], "cache.dir"),
    (["kernel=auto", "kernel.table=''"], "kernel.table"),
    (["kernel=auto", "kernel.table=' '"], "kernel.table"),
    (["-m", "cache.dir=FOLDER,' '"], "cache.dir"),  # one value of a sweep, quoted
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_blank_path_value_is_one_line_before_any_folder(cli, tmp_path, args, field):
    """A new-user trial: ``cache.dir=' '`` made a folder named blank in the working directory (and
    ``kernel.table=''`` read the working directory as a table); a blank path is refused up front, as
    ``hydra.run.dir=''`` is: one line naming the key, exit 2, nothing written."""
    args = [a.replace("FOLDER", str(tmp_path / "cache")) for a in args]
    proc = cli([*args, *([] if "kernel=auto" in args else ["kernel=tiled"]), "mode=compile"], tmp_path)
    assert_invalid(proc, field, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_quoted_sweep_values_are_checked_as_hydra_composes_them():
    """The early value check read a quoted value of a sweep as Hydra's parse object, so a valid one
    was refused (``-m sanitizer='memcheck',null``: ``got QuotedString(text='memcheck', ...)``) and a
    blank one passed; a value with an interpolation inside a list is left to Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from gemmlab.cli import precheck
    parse = OverridesParser.create().parse_overrides
    (swept,) = parse(["sanitizer='memcheck',null"])
    assert precheck.typed_values(swept) == ["memcheck", None]
    precheck.config_check.check_values(precheck._setting(swept, None), None)  # valid: no error
    (listed,) = parse(["shape=[${oc.env:M},8,8],[8,8,8]"])
    assert precheck.typed_values(listed) == [[8, 8, 8]]


def test_a_listed_parameters_bad_sweep_value_is_one_line_before_any_point(cli, tmp_path):
    """A tile parameter that takes a few codes (mma_bf16's SWIZZLE: 0, 1) is checked up front by
    its own list, as the point would: ``kernel.SWIZZLE=1,-1`` ran point 0 and failed point 1."""
    proc = cli(["-m", "kernel=mma_bf16", "precision=bf16", "mode=compile", "kernel.SWIZZLE=1,-1"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert stderr_lines(proc) == ["gemmlab: error: kernel.SWIZZLE: must be one of 0, 1, got -1"], proc.stderr
    assert not (tmp_path / "outputs").exists()


def test_bad_mode(cli, tmp_path):
    proc = cli(["mode=fast"], tmp_path, in_process=False)  # exit 2 and one line from a real process
    assert_invalid(proc, "mode", tmp_path)
    assert "run, compile" in proc.stderr


@pytest.mark.parametrize("args, field", [
    (["shape=[1,2]"], "shape"),
    (["kernel=foo"], "kernel"),
    (["kernel.XX=3"], "kernel.XX"),
    (["kernel.BK=7"], "kernel.BK"),
    (["timing.repeat=0"], "timing.repeat"),
    (["verify.rtol=nan"], "verify.rtol"),
    (["arch=sm_xx"], "arch"),
    (["kernel=ladder_strip", "shape=[63,65,33]"], "shape"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_bad_input_run_mode_without_gpu_is_still_invalid(cli, tmp_path, args, field):
    # default mode=run: invalid input must be reported as such (exit 2), not as "no GPU" (exit 1)
    assert_invalid(cli(args, tmp_path), field, tmp_path)


def test_invalid_record_contents(cli, tmp_path):
    proc = cli(["kernel.BK=7", "mode=compile", "shape=[63,65,33]"], tmp_path)
    assert_invalid(proc, "kernel.BK", tmp_path)
    (path,) = results(tmp_path)
    record = load(path)
    assert record["schema"] == "gemmlab.result/1"
    assert record["kernel"]["params"] == {"BM": 64, "BN": 64, "BK": 7, "TM": 8, "TN": 2}
    assert record["shape"] == {"M": 63, "N": 65, "K": 33}
    assert "compile" not in record  # nothing was compiled
    assert record["config"]["kernel"]["BK"] == 7
    assert not (path.parent / "compile.log").exists()


@pytest.mark.parametrize("args", [["shape=[1,2"], ["kernel=naive,tiled"]], ids=" ".join)
def test_unparseable_override_is_invalid_input(cli, tmp_path, args):
    proc = cli([*args, "mode=compile"], tmp_path)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2
    lines = stderr_lines(proc)
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: ")


@pytest.mark.parametrize("args", [["kernel=naive", "shape=[2000000,1,1]"], ["kernel=tiled", "shape=[5000000,1,1]"]],
                         ids=" ".join)
def test_grid_beyond_cuda_limit_is_invalid(cli, tmp_path, args):
    proc = cli([*args, "mode=compile"], tmp_path)
    assert proc.returncode == 2
    assert stderr_lines(proc)[0].startswith("gemmlab: error: ")


# --- mode=compile succeeds ------------------------------------------------------------------------

@pytest.mark.parametrize("kernel, shape, grid, block, entry", [
    ("naive", "[63,65,33]", [5, 4, 1], [16, 16, 1], "gemm_naive<16, 16>"),
    ("tiled", "[63,65,33]", [2, 1, 1], [32, 8, 1], "gemm_tiled<64, 64, 16, 8, 2>"),
    ("ladder_starter", "[128,128,128]", [4, 1, 1], [256, 1, 1], "gemm_ladder_starter<8>"),
    ("ladder_strip", "[128,128,128]", [4, 1, 1], [256, 1, 1], "gemm_ladder_strip<16, 8>"),
])
def test_compile_mode_succeeds(cli, tmp_path, kernel, shape, grid, block, entry):
    proc = cli([f"kernel={kernel}", f"shape={shape}", "mode=compile"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "gemmlab: error" not in proc.stderr
    (path,) = results(tmp_path)
    record = load(path)
    assert record["status"] == "compiled"
    assert record["valid"] is True
    assert record["error"] is None
    assert record["mode"] == "compile"
    assert record["kernel"]["name"] == kernel
    assert record["kernel"]["plugin"].startswith("gemmlab_plugins.")
    m, n, k = json.loads(shape)
    assert record["shape"] == {"M": m, "N": n, "K": k}
    assert record["flops"] == 2 * m * n * k
    comp = record["compile"]
    assert comp["resources"]["registers"] > 0
    assert re.fullmatch(r"[0-9a-f]{64}", comp["source_sha256"])
    assert comp["source_sha256"] == hashlib.sha256((KERNELS_DIR / f"{kernel}.cu").read_bytes()).hexdigest()
    assert comp["name_expression"] == entry
    assert "-arch=sm_90" in comp["options"]
    assert record["device"]["arch"] == "sm_90"
    assert record["launch"]["grid"] == grid and record["launch"]["block"] == block
    assert (path.parent / "compile.log").is_file()
    assert f"result  {path}" in proc.stdout or str(path.resolve()) in proc.stdout
    assert "[compiled]" in proc.stdout


def test_compile_mode_other_arch(cli, tmp_path):
    proc = cli(["kernel=naive", "arch=sm_80", "mode=compile"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = load(results(tmp_path)[0])
    assert record["status"] == "compiled"
    assert "-arch=sm_80" in record["compile"]["options"]
    assert record["device"]["arch"] == "sm_80"


def test_compile_mode_kernel_parameter_override(cli, tmp_path, sass_not_read):
    # the point in this process (isolation.process=false) with sass_not_read: what is read here (the
    # name expression, the launch, the ptxas report) is the compile's, and this kernel's SASS is not
    # (its nvdisasm run, about 0.4 s, skipped; no other test compiles it)
    proc = cli(["kernel.BM=128", "kernel.BN=128", "kernel.BK=8", "kernel.TM=8", "kernel.TN=8", "mode=compile",
                "isolation.process=false"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = load(results(tmp_path)[0])
    assert record["compile"]["name_expression"] == "gemm_tiled<128, 128, 8, 8, 8>"
    assert record["launch"]["block"] == [16, 16, 1]
    assert record["compile"]["resources"]["static_shared_bytes"] == 4 * (128 * 8 + 8 * 128)


# --- help -----------------------------------------------------------------------------------------

def test_a_plugin_kernel_of_an_earlier_command_is_not_offered_to_the_next(cli, tmp_path):
    """The kernel group's nodes for plugin kernels live in Hydra's ConfigStore (one per process): a
    command with plugin_dirs must not leave its kernels to the next command of the same process."""
    faulty = str(Path(__file__).resolve().parent / "plugins_faulty")
    assert "sim_fault" in cli(["--help", f"plugin_dirs=[{faulty}]"], tmp_path).stdout
    after = cli(["--help"], tmp_path).stdout
    assert "sim_fault" not in after, [l for l in after.splitlines() if "sim_fault" in l]


def test_each_point_folder_keeps_its_console_lines_in_app_log(cli, tmp_path):
    """Hydra's job log (app.log) was always empty (gemmlab prints); it now holds what the command
    printed for the point: the summary, or the one-line error of an invalid point (finding 16)."""
    sweep = tmp_path / "sw"
    # tf32 is a point's error (the kernel's precisions), not one the command line refuses up front
    proc = cli(["-m", "kernel=tiled", "shape=[16,16,16]", "precision=fp32,tf32", "mode=compile",
                f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    ok, bad = (sweep / "0" / "app.log").read_text(), (sweep / "1" / "app.log").read_text()
    assert ok.startswith("tiled 16x16x16 ") and "  sass    " in ok and f"  result  {sweep / '0' / 'result.json'}" in ok
    assert bad == "gemmlab: error: precision: kernel tiled supports fp32, bf16, fp16; got tf32\n", bad


def test_help_with_a_broken_plugin_says_why_and_still_lists_the_builtin_kernels(cli, tmp_path):
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "bad.py").write_text("def oops(:\n")
    out = cli(["--help", f"plugin_dirs=[{tmp_path / 'plug'}]"], tmp_path).stdout
    assert "plugins failed to load: plugin_dirs: could not import" in out and "SyntaxError" in out
    assert re.search(r"^wgmma_bf16\s", out, re.M) and re.search(r"^tiled\s", out, re.M)


def test_output_that_is_no_terminal_gets_no_colour_codes_from_libraries(monkeypatch, capsys):
    """Optuna's log handler colours its lines whatever the stream; with stderr not a terminal the
    command sets NO_COLOR (no-color.org), which colorlog honours (new-user finding 17)."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setattr("sys.argv", ["gemmlab", "--version"])
    with pytest.raises(SystemExit):
        gemmlab.cli.app.main()
    assert __import__("os").environ.get("NO_COLOR") == "1"
    colorlog = pytest.importorskip("colorlog", reason="colorlog comes with the search extra (Optuna)")
    line = colorlog.ColoredFormatter("%(log_color)s%(message)s").format(
        __import__("logging").LogRecord("optuna", 20, __file__, 1, "trial", None, None))
    assert "\x1b[" not in line
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR")
    with pytest.raises(SystemExit):
        gemmlab.cli.app.main()
    assert "NO_COLOR" not in __import__("os").environ  # asked for colour: left alone


def test_help_lists_kernels_and_groups(cli, tmp_path):
    proc = cli(["--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for name in BUILTIN_KERNELS:
        assert re.search(rf"^{name}\s", out, re.M), name
    assert ("experiment: batched, epilogue, fp8, heldout, ladder, layouts, moe, moe_general, optuna_ladder_tile2d, "
            "optuna_sgemm_block2d, "
            "optuna_sgemm_pipelined, optuna_sgemm_warptile, optuna_tiled, seed_lab, sgemm_ladder, shapes, tc_ladder, "
            "train") in out
    assert ("kernel: " + ", ".join(sorted(BUILTIN_KERNELS + ("auto",)))) in out
    assert "timing: adaptive, cold, graph, seed" in out
    assert "defaults: BM=64 BN=64 BK=16 TM=8 TN=2" in out
    # what each kernel accepts: precisions, layouts and the listed parameter values
    assert "precision: fp32; layout.a/b: row/row\n" in out
    assert ("precision: bf16, fp16; layout.a/b: row/col, row/row, col/col, col/row; values: BM 64|128|192|256, BN 64|128|256, "
            "STAGES 2|3|4|5|6|7|8, CLUSTER 1|2, SCHED 1|2, TAIL 1|2|3, REDUCE 1|2, EPI 1|2|3|4|5") in out
    assert re.search(r"^cublas\s+cuBLAS SGEMM", out, re.M)
    assert "plugins failed to load" not in out
    assert not (tmp_path / "outputs").exists()  # --help runs nothing


# --- sweeps ---------------------------------------------------------------------------------------

def sweep_dirs(root: Path) -> list[Path]:
    base = root / "outputs" / "multirun"
    return sorted(p for p in base.glob("*/*") if p.is_dir()) if base.exists() else []


def test_sweep_continues_past_invalid_point(cli, tmp_path):
    # in this process: the exit status of a real sweep process with a failed point is
    # tests/test_sweep.py's (joblib with 2 workers, started from a real command) and tests/test_slurm.py's
    proc = cli(["-m", "kernel=tiled", "kernel.BK=16,7", "mode=compile"], tmp_path)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [line for line in stderr_lines(proc) if line.startswith("gemmlab: error: ")]
    assert len(errors) == 1 and errors[0].startswith("gemmlab: error: kernel.BK: "), proc.stderr
    (sweep,) = sweep_dirs(tmp_path)
    assert (sweep / "summary.csv").is_file() and (sweep / "summary.md").is_file()
    with open(sweep / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["point"], r["kernel"], r["status"]) for r in rows] == [("0", "tiled", "compiled"), ("1", "tiled", "invalid")]
    assert "BK=16" in rows[0]["params"] and "BK=7" in rows[1]["params"]
    assert rows[1]["error"].startswith("kernel.BK: ")
    md = (sweep / "summary.md").read_text()
    assert md.count("\n") == 4  # header, rule, two points
    assert "| 0 | tiled |" in md and "| compiled |" in md and "| invalid |" in md
    first, second = load(sweep / "0" / "result.json"), load(sweep / "1" / "result.json")
    assert (first["status"], first["valid"]) == ("compiled", True)
    assert (second["status"], second["valid"]) == ("invalid", False)
    assert "2 points: 0 verified and timed, 1 compiled only, 1 failed" in proc.stdout
    # a compile-only sweep: what compiling reports, not the (always empty) timing columns
    assert "vs_baseline" not in md and "median_ms" not in rows[0]
    assert int(rows[0]["registers"]) > 0 and rows[0]["occupancy"] and rows[1]["registers"] == ""


def test_seed_lab_experiment_compiles_six_points(seed_lab_sweep):
    """The session's run of the experiment (conftest's ``seed_lab_sweep``, also read by tests/test_sweep.py)."""
    proc, root, _ = seed_lab_sweep
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    (sweep,) = sweep_dirs(root)
    points = sorted(p.parent.name for p in sweep.glob("*/result.json"))
    assert points == ["0", "1", "2", "3", "4", "5"]
    seen = set()
    for p in points:
        record = load(sweep / p / "result.json")
        assert record["status"] == "compiled" and record["valid"] is True
        seen.add((record["kernel"]["name"], tuple(record["shape"].values())))
    assert seen == {(k, s) for k in ("naive", "tiled") for s in ((256, 256, 256), (31, 33, 17), (63, 65, 33))}
    with open(sweep / "summary.csv", newline="") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["compiled"] * 6
    assert "6 points: 0 verified and timed, 6 compiled only, 0 failed" in proc.stdout


# --- concurrency ----------------------------------------------------------------------------------

#: two commands at once, each a real process; their points run in the command's own process
#: (``isolation.process=false``, left out of the folder's name): the folders are chosen by the command,
#: so a point worker per command (another interpreter, about 0.6 CPU s each) proves nothing more here
IN_THE_COMMAND = "isolation.process=false"


def test_simultaneous_runs_get_separate_directories(tmp_path, gemmlab_cmd, cli_env):
    procs = [subprocess.Popen(gemmlab_cmd + ["kernel=naive", "mode=compile", IN_THE_COMMAND], cwd=tmp_path, env=cli_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    written = results(tmp_path)
    assert len(written) == 2
    assert written[0].parent != written[1].parent
    for path in written:
        assert load(path)["status"] == "compiled"


def test_simultaneous_sweeps_get_separate_directories(tmp_path, gemmlab_cmd, cli_env):
    # two points of one kernel (two shapes): one compile a command (the kernel's is what the sweep's folders
    # need, not two kernels)
    procs = [subprocess.Popen(gemmlab_cmd + ["-m", "kernel=naive", "shape=[31,33,17],[63,65,33]", "mode=compile",
                                             IN_THE_COMMAND], cwd=tmp_path,
                              env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    sweeps = sweep_dirs(tmp_path)
    assert len(sweeps) == 2
    for sweep in sweeps:
        assert sorted(p.parent.name for p in sweep.glob("*/result.json")) == ["0", "1"]
        assert (sweep / "summary.csv").is_file()


# --- failure status of a kernel launch (in process, fake GPU) ---------------------------------------

def test_launch_failure_is_recorded_as_cuda_error(tmp_path, monkeypatch):
    # The fake GPU keeps device memory on the host (guard-banded buffers at raw addresses, as
    # gemmlab.gpu.guards allocates them) but launches through the real Gpu.launcher, whose cuda.core
    # launch is made to fail.
    import cuda.core
    from cuda.core._utils.cuda_utils import CUDAError

    import gemmlab.gpu.device
    from fakegpu import HostGpu
    from gemmlab.gpu.device import Gpu
    from gemmlab.run.pipeline import exit_status, run_point

    class FailingLaunchGpu(HostGpu):
        launcher = Gpu.launcher  # the real one: cuda.core.launch inside, CUDAError -> CudaError

    calls = []

    def failing_launch(*args, **kwargs):
        calls.append(args)
        raise CUDAError("CUDA_ERROR_INVALID_VALUE: parameters not within an acceptable range")

    gpu = FailingLaunchGpu()
    monkeypatch.setattr(cuda.core, "launch", failing_launch)
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    cfg = {"kernel": {"name": "naive", "BX": 16, "BY": 16}, "shape": [31, 33, 17], "mode": "run"}
    record = run_point(cfg, tmp_path / "point")
    assert len(calls) == 1  # the correctness launch was attempted ...
    stream, config, kernel, *args = calls[0]
    assert len(args) == 6 and int(args[3]) == 31 and int(args[4]) == 33 and int(args[5]) == 17
    assert all(int(a) in range(min(gpu.memory), gpu.next_address) for a in args[:3])  # raw device addresses
    assert record["valid"] is False
    assert "CUDA_ERROR_INVALID_VALUE" in record["error"]  # the failure itself is reported ...
    assert exit_status(record) == 1
    assert record["status"] == "cuda_error"  # ... but as a CUDA error, not an unexpected one
    assert not (tmp_path / "point" / "traceback.txt").exists()
    assert json.loads((tmp_path / "point" / "result.json").read_text())["status"] == "cuda_error"
    assert sorted(gpu.freed) == sorted(gpu.memory)  # every buffer released on the failure path


# --- optional components (cublas needs nvmath-python, absent here) ---------------------------------

def nvmath_installed() -> bool:
    try:
        import nvmath.bindings.cublas  # noqa: F401
        return True
    except Exception:
        return False


@pytest.mark.parametrize("args", [["kernel=cublas"], ["kernel=cublas", "precision=tf32"]], ids=" ".join)
def test_cublas_without_nvmath_is_unavailable(cli, tmp_path, args):
    if nvmath_installed():
        pytest.skip("nvmath-python is installed: this test covers its absence")
    proc = cli([*args, "mode=compile"], tmp_path)
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text
    assert proc.returncode == 1, text
    lines = stderr_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gemmlab: error: kernel: kernel cublas needs nvmath-python"), lines  # field first
    assert "gemmlab[cublas]" in lines[0]
    (path,) = results(tmp_path)
    record = load(path)
    assert record["status"] == "unavailable" and record["valid"] is False
    assert "gemmlab[cublas]" in record["error"]
    assert not (path.parent / "compile.log").exists()  # nothing compiled: refused before


@pytest.mark.parametrize("args", [["kernel=tiled", "baseline=cublas"],
                                  ["kernel=naive", "baseline=cublas", "shape=[31,33,17]"]], ids=" ".join)
def test_cublas_baseline_without_nvmath_is_skipped_in_compile_mode(cli, tmp_path, args):
    """mode=compile needs no baseline: the kernel compiles, the record notes the skipped cuBLAS
    baseline and the install hint (a run on a GPU still needs the extra)."""
    if nvmath_installed():
        pytest.skip("nvmath-python is installed: this test covers its absence")
    proc = cli([*args, "mode=compile"], tmp_path)
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text
    assert proc.returncode == 0, text
    assert "baseline cublas: skipped" in proc.stdout and "gemmlab[cublas]" in proc.stdout
    (path,) = results(tmp_path)
    record = load(path)
    assert record["status"] == "compiled"
    assert "gemmlab[cublas]" in record["baseline"]["skipped"]
    assert (path.parent / "kernel.sass").exists()


def test_cublas_baseline_without_nvmath_names_the_baseline_field(cli, tmp_path):
    """A timed run (mode=run) needs the baseline: one line whose field is baseline, exit 1."""
    if nvmath_installed():
        pytest.skip("nvmath-python is installed: this test covers its absence")
    proc = cli(["kernel=naive", "baseline=cublas", "shape=[8,8,8]"], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = stderr_lines(proc)
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: baseline: kernel cublas needs nvmath-python"), lines


def test_cublas_bad_parameter_is_invalid_before_availability(cli, tmp_path):
    proc = cli(["kernel=cublas", "kernel.BM=64", "mode=compile"], tmp_path)
    assert_invalid(proc, "kernel.BM", tmp_path)


def test_unknown_baseline_is_invalid(cli, tmp_path):
    proc = cli(["baseline=nope", "mode=compile"], tmp_path)
    assert_invalid(proc, "baseline", tmp_path)
    assert "'nope'" in proc.stderr


@pytest.mark.parametrize("timing", ["graph", "adaptive", "cold"])
def test_timing_configs_in_compile_mode(cli, tmp_path, timing):
    proc = cli([f"timing={timing}", "kernel=naive", "shape=[31,33,17]", "mode=compile"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = load(results(tmp_path)[0])
    assert record["status"] == "compiled"
    # timing.shared is the schema's (tests/conftest.py sets its default: GEMMLAB_TIMING_SHARED), not the file's
    assert record["config"]["timing"] == {"shared": "allow", **load_yaml_timing(timing)}


def load_yaml_timing(name: str) -> dict:
    from omegaconf import OmegaConf
    from gemmlab.paths import CONF_DIR
    return OmegaConf.to_container(OmegaConf.load(CONF_DIR / "timing" / f"{name}.yaml"))


def test_unknown_timing_config_is_invalid(cli, tmp_path):
    proc = cli(["timing=turbo", "mode=compile"], tmp_path)
    assert_invalid(proc, "timing", tmp_path)
    assert "adaptive" in proc.stderr and "cold" in proc.stderr


# --- no GPU ---------------------------------------------------------------------------------------

def test_run_mode_without_gpu_says_use_compile(cli, tmp_path):
    if gpu_present():
        pytest.skip("a CUDA GPU is present: this test covers the no-GPU message")
    proc = cli(["kernel=tiled", "shape=[63,65,33]"], tmp_path, in_process=False)  # a real process
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 1
    lines = stderr_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gemmlab: error: ")
    assert "mode=compile" in lines[0]
    (path,) = results(tmp_path)
    record = load(path)
    assert record["status"] == "no_gpu" and record["valid"] is False
    assert "mode=compile" in record["error"]


# --- Ctrl-C advice and the sweeper's objective ------------------------------------------------

def test_interrupt_message_names_the_sweep_folder(cli, tmp_path, monkeypatch):
    real = isolation.run_point
    calls = []

    def interrupt_second(cfg, out_dir):
        calls.append(out_dir)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(cfg, out_dir)

    monkeypatch.setattr(isolation, "run_point", interrupt_second)
    sweep_dir = tmp_path / "sw"
    proc = cli(["-m", "mode=compile", "kernel=naive,tiled", f"hydra.sweep.dir={sweep_dir}"], tmp_path)
    assert proc.returncode == 130
    last = proc.stderr.strip().splitlines()[-1]
    assert "<its directory>" not in last
    assert f"hydra.sweep.dir={sweep_dir} resume=true" in last, last
    assert json.loads((sweep_dir / "0" / "result.json").read_text())["status"] == "compiled"
    # Hydra's end-of-sweep callback never runs after Ctrl-C: the summary of the points so far is written
    assert last.endswith(f"; the summary of the 1 points so far: {sweep_dir / 'summary.md'}"), last
    assert "| 0 |" in (sweep_dir / "summary.md").read_text() and (sweep_dir / "summary.csv").is_file()


def test_ctrl_c_while_gemmlabs_sweeper_checks_its_points_says_nothing_was_measured(cli, tmp_path, monkeypatch):
    """The trial's case end to end: Ctrl-C while gemmlab's sweeper composes and checks its points
    (no point run) was given the sweeper's own resume line; the sweeper now says what
    gemmlab.cli.sweep.sweep_interrupted says, like an interrupt inside a point."""
    from gemmlab.cli import folders

    def stopped(*args, **kwargs):  # the sweeper checks each point's folder as it composes the batch
        raise KeyboardInterrupt

    monkeypatch.setattr(folders, "job_folder", stopped)
    sweep_dir = tmp_path / "sw"
    proc = cli(["-m", "mode=compile", "kernel=naive,tiled", f"hydra.sweep.dir={sweep_dir}"], tmp_path)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("gemmlab: interrupted; no point of the sweep had finished, "
                                                           "so nothing was measured"), proc.stderr
    assert not list(sweep_dir.rglob("result.json"))


def test_an_interrupt_before_the_sweeps_first_point_names_no_folder_to_resume(tmp_path, monkeypatch):
    """A new-user trial: Ctrl-C while a long sweep was still being composed (no point run yet)
    said to re-run with hydra.sweep.dir=<that folder> resume=true, which then said the folder
    holds no earlier result. The line now says no point had finished (the folder made or not)."""
    from hydra.core.hydra_config import HydraConfig

    from gemmlab.cli.app import Invocation, _interrupted_advice

    def outside_a_job(*args):
        raise ValueError("HydraConfig was not set")

    monkeypatch.setattr(HydraConfig, "get", outside_a_job)
    sweep_dir = tmp_path / "sw"
    invocation = Invocation(multirun=True, sweep_dir=str(sweep_dir))
    assert _interrupted_advice(invocation) == (f"no point of the sweep had finished, so nothing was measured (its folder "
                                               f"{sweep_dir} was not made)")
    (sweep_dir / "0").mkdir(parents=True)
    assert _interrupted_advice(invocation).endswith(f"(its folder {sweep_dir} holds no record)")
    (sweep_dir / "0" / "result.json").write_text(json.dumps({"schema": "gemmlab.result/1", "status": "compiled"}))
    assert _interrupted_advice(invocation).startswith("finished points keep their result.json; to finish the sweep")


def test_a_late_ctrl_c_leaves_a_finished_commands_exit_status(tmp_path):
    """console.settled_exit around the process's last call (``python -m gemmlab`` and the console
    scripts): a SIGINT once the command has ended (in Python's clean-up, as a Ctrl-C pressed while
    the command finishes) no longer prints "Exception ignored ... KeyboardInterrupt" from Python's
    shutdown or ends the process by SIGINT: the exit status stays the command's."""
    from clirun import REPO_ROOT, command_env
    code = ("import os, signal, sys\n"
            "from gemmlab.console import settled_exit\n"
            "import atexit\n"
            "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), print('clean-up done', flush=True)))\n"
            "with settled_exit():\n"
            "    sys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=command_env(), capture_output=True, text=True,
                          timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "clean-up done\n", "")
    import inspect
    from gemmlab.console import start_command  # the console scripts' start (gemmlab.cli.entry)
    assert "settled_exit()" in (REPO_ROOT / "gemmlab/__main__.py").read_text()
    assert "settled_exit()" in inspect.getsource(start_command)


def test_objective():
    ok = {"valid": True, "status": "ok", "timing": {"gflops": 1234.5, "median_ms": 1.0}}
    value = gemmlab.cli.app.objective(ok)
    assert isinstance(value, float) and value == 1234.5
    assert isinstance(gemmlab.cli.app.objective({"valid": True, "status": "ok", "timing": {"gflops": 7}}), float)
    compiled = gemmlab.cli.app.objective({"valid": True, "status": "compiled"})
    assert compiled == 0.0 and isinstance(compiled, float)
    assert gemmlab.cli.app.objective({"valid": False, "status": "wrong_result", "timing": {"gflops": 9e9}}) is None
    assert gemmlab.cli.app.objective({"valid": False, "status": "invalid", "error": "kernel.TM: ..."}) is None
    assert gemmlab.cli.app.objective({"status": "no_gpu"}) is None


@pytest.mark.parametrize("args, composes", [
    # a single run: Hydra's get_mode composes, then the run (before issue 45 a run-time replacement of
    # Hydra's get_mode skipped the first: no public API answers the mode without composing)
    (["kernel=naive", "mode=compile", "verify.tolerance=exact"], 2),
    (["hydra.mode=RUN", "kernel=naive", "mode=compile", "verify.tolerance=exact"], 2),  # the same
    # a sweep of two points: the sweep's compose, then each job's once (gemmlab's sweeper hands the
    # config its batch check composed to the launcher; hydra_plugins/gemmlab_sweeper)
    (["-m", "kernel=naive", "kernel.BX=7,8", "mode=compile", "verify.tolerance=exact"], 4),
    # Hydra's own basic sweeper: each job's twice (its batch check, then the launcher)
    (["-m", "hydra/sweeper=basic", "kernel=naive", "kernel.BX=7,8", "mode=compile", "verify.tolerance=exact"], 6),
], ids=["read", "asked", "sweep", "basic-sweeper"])
def test_a_command_composes_its_config_once(cli, tmp_path, monkeypatch, args, composes):
    """A command composes its config for Hydra's ``get_mode`` and once more for the run (a sweep:
    the sweep's config, then each job's once); Hydra's basic sweeper composes each job twice."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    calls = []
    real = ConfigLoaderImpl.load_configuration  # every compose: get_mode's, the run's, each sweep job's
    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration",
                        lambda self, *a, **k: calls.append(k.get("run_mode")) or real(self, *a, **k))
    proc = cli(args, tmp_path)
    if "-m" in args:  # a sweep: its invalid points fail it (exit 1), each with its one line
        assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    else:  # a rule across fields (exact needs integer inputs): the point's, after composing
        assert_invalid(proc, "verify.tolerance", tmp_path)
    assert len(calls) == composes, calls


@pytest.mark.parametrize("signum, code, word", [(signal.SIGINT, 130, "interrupted"),
                                               (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_ctrl_c_while_the_command_starts_is_one_line(cli, tmp_path, monkeypatch, signum, code, word):
    """Ctrl-C (or SIGTERM) while gemmlab still reads the command line and loads the plugins is
    held back until that is done: one line, exit 130 (143), nothing written (a new-user trial
    pressed it in the first half second and got a traceback, or an OmegaConf error the interrupt
    left behind)."""
    from gemmlab.cli import app
    real = app._prepare

    def signalled(args, invocation):
        os.kill(os.getpid(), signum)  # a real signal, in the middle of the start
        return real(args, invocation)

    monkeypatch.setattr(app, "_prepare", signalled)
    before = signal.getsignal(signal.SIGINT)  # Python's default_int_handler; SIG_IGN when pytest runs in a
    proc = cli(["kernel=naive", "mode=compile"], tmp_path)  # shell's background job (`pytest &`)
    assert proc.returncode == code and proc.stderr.strip() == f"gemmlab: {word} while starting; nothing was run"
    assert not (tmp_path / "outputs").exists()
    assert signal.getsignal(signal.SIGINT) is before  # handlers given back


@pytest.mark.parametrize("script", ["gemmlab", "gemmlab_report", "gemmlab_compare", "gemmlab_tune"])
def test_ctrl_c_while_a_console_script_imports_its_command_is_one_line(script, monkeypatch, capsys):
    """The console scripts (pyproject.toml) import their command with SIGINT held back
    (gemmlab.cli.entry): Ctrl-C during those imports (Hydra, numpy, rich: about half a second) is
    one line and exit 130 once they are done."""
    import importlib

    from gemmlab.cli import entry
    real = importlib.import_module

    def signalled(name):
        os.kill(os.getpid(), signal.SIGINT)
        return real(name)

    monkeypatch.setattr(importlib, "import_module", signalled)
    with pytest.raises(SystemExit) as stop:
        getattr(entry, script)()
    assert stop.value.code == 130
    assert capsys.readouterr().err == f"{script.replace('_', '-')}: interrupted while starting; nothing was run\n"
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert f'{script.replace("_", "-")} = "gemmlab.cli.entry:{script}"' in text


def test_an_interrupt_a_command_does_not_handle_is_one_line(monkeypatch, capsys):
    """gemmlab-tune's sweep (and report, compare) do not handle Ctrl-C themselves: the console
    script turns it, or an error a library raised while handling it, into one line and exit 130."""
    import importlib
    import types

    from gemmlab.cli import entry

    def broken_cleanup():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")

    from gemmlab.cli import tune
    module = types.SimpleNamespace(main=broken_cleanup, INTERRUPTED=tune.INTERRUPTED)
    monkeypatch.setattr(importlib, "import_module", lambda name: module)
    with pytest.raises(SystemExit) as stop:
        entry.gemmlab_tune()
    assert stop.value.code == 130
    assert capsys.readouterr().err == ("gemmlab-tune: interrupted; the points it finished keep their records; run the "
                                       "same command again to resume\n")
    module.main = lambda: (_ for _ in ()).throw(ValueError("a real bug"))  # other errors stay tracebacks
    with pytest.raises(ValueError):
        entry.gemmlab_tune()


@pytest.mark.parametrize("script", ["gemmlab_report", "gemmlab_compare", "gemmlab_tune"])
def test_sigterm_stops_a_command_with_one_line(monkeypatch, capsys, script):
    """SIGTERM (``kill``, a batch system's time limit) to gemmlab-report, -compare or -tune ended
    it with nothing said (Python's default action); the console script turns it into an interrupt:
    one line, exit 143, the interrupt's own text when it carries one (the report removed its
    partial folder). The handler is put back when the command returns."""
    import importlib
    import signal
    import types

    from gemmlab.cli import entry
    from gemmlab.errors import Terminated

    def terminated_while_running():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the handler raises before this ends

    real = {"gemmlab_report": "gemmlab.results.report", "gemmlab_compare": "gemmlab.results.compare",
            "gemmlab_tune": "gemmlab.cli.tune"}[script]
    module = types.SimpleNamespace(main=terminated_while_running,
                                   INTERRUPTED=getattr(importlib.import_module(real), "INTERRUPTED", None))
    monkeypatch.setattr(importlib, "import_module", lambda name: module)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stop:
        getattr(entry, script)()
    assert stop.value.code == 143
    name = script.replace("_", "-")
    said = ("no record was changed" if name != "gemmlab-tune" else  # what each keeps: tune its finished points
            "the points it finished keep their records; run the same command again to resume")
    assert capsys.readouterr().err == f"{name}: terminated (SIGTERM); {said}\n"
    assert signal.getsignal(signal.SIGTERM) is before

    def carries_its_text():
        raise Terminated("nothing was written (the partial report R was removed)")
    module.main = carries_its_text
    with pytest.raises(SystemExit) as stop:
        getattr(entry, script)()
    assert stop.value.code == 143
    assert capsys.readouterr().err == f"{name}: terminated (SIGTERM); nothing was written (the partial report R was removed)\n"


def test_a_single_run_stopped_before_its_point_gets_no_sweep_advice(monkeypatch):
    """Ctrl-C in the half second before Hydra starts a single run's point (no job config yet): the
    line said how to resume a sweep (a new-user trial); the command line's own reading
    (``Invocation.multirun``, set by the pre-check) tells a run from a sweep."""
    from hydra.core.hydra_config import HydraConfig

    from gemmlab.cli.app import Invocation, _interrupted_advice
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)
    assert _interrupted_advice(Invocation(multirun=False)) == "the run stopped before its point started; nothing was measured"
    for sweep_or_unknown in (Invocation(multirun=True), Invocation(), None):
        assert "resume=true" in _interrupted_advice(sweep_or_unknown)
    invocation = Invocation()
    gemmlab.cli.app._prepare(["kernel=tiled", "mode=compile"], invocation)
    assert invocation.multirun is False
    gemmlab.cli.app._prepare(["-m", "kernel=tiled,naive", "mode=compile"], invocation)
    assert invocation.multirun is True
    gemmlab.cli.app._prepare(["experiment=seed_lab", "mode=compile"], invocation)  # the file may set hydra.mode:
    assert invocation.multirun is None  # known once Hydra composes (gemmlab's sweeper or launcher notes a sweep)


def test_an_error_left_by_ctrl_c_inside_hydra_is_the_interrupt(cli, tmp_path, monkeypatch):
    """Ctrl-C inside Hydra's or OmegaConf's code can leave their state half-built, so their clean-up
    raises another error (seen: ``'NoneType' object has no attribute '_invalidate_flags_cache'``),
    which gemmlab took for bad input (exit 2). An error raised while handling an interrupt is the
    interrupt: exit 130 and the interrupt's line."""
    def broken(cfg, out_dir):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")

    monkeypatch.setattr(isolation, "run_point", broken)
    proc = cli(["kernel=naive", "mode=compile", f"hydra.run.dir={tmp_path / 'r'}"], tmp_path)
    assert proc.returncode == 130, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("gemmlab: interrupted; "), proc.stderr


def test_gemmlab_main_runs_outside_the_main_thread(tmp_path, monkeypatch):
    """``gemmlab.cli.app.main`` called from another thread (a notebook's or a tool's worker thread)
    stopped at once with ``ValueError: signal only works in main thread`` (it set its own SIGTERM
    handler); its interrupt handling is now gemmlab.console.run_command's, which leaves signals
    alone outside the main thread, so the command runs and writes its record."""
    import threading

    from hydra.core.global_hydra import GlobalHydra

    import gemmlab
    gemmlab.clear_caches()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["gemmlab", "kernel=tiled", "mode=compile", "shape=[63,65,33]", "hydra.run.dir=r"])
    outcome = {}

    def command():
        try:
            gemmlab.cli.app.main()
        except SystemExit as exc:
            outcome["code"] = exc.code
        except BaseException as exc:  # what the old code raised
            outcome["raised"] = repr(exc)

    try:
        thread = threading.Thread(target=command)
        thread.start()
        thread.join(timeout=120)
    finally:
        isolation.end_command()
        GlobalHydra.instance().clear()
    assert outcome == {"code": 0}
    assert json.loads((tmp_path / "r" / "result.json").read_text())["status"] == "compiled"


def test_an_interrupt_past_gemmlabs_own_handling_is_not_said_to_have_changed_nothing(monkeypatch, capsys):
    """The ``gemmlab`` console script wraps gemmlab.cli.app.main, which handles every interrupt
    while the command runs; one that reaches the script came as the command ended (a Ctrl-C sent
    right after a run's result.json appeared): it said "no record was changed" beside a written
    record. It now says the command had ended and what it wrote is complete."""
    from gemmlab.cli import app, entry

    def ended_then_interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(app, "main", ended_then_interrupted)
    with pytest.raises(SystemExit) as stop:
        entry.gemmlab()
    assert stop.value.code == 130
    assert capsys.readouterr().err == f"gemmlab: interrupted; {app.INTERRUPTED}\n"
    assert "record was changed" not in app.INTERRUPTED


BROKEN_PLUGIN = '''from pathlib import Path
from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
class Broken(KernelSpec):
    def entry(self, params):
        return f"gemm_broken<{params['T']}>"
    def launch(self, shape, params, device):
        return Launch(grid=(1, 1, 1), block=(32, 1, 1))
@hookimpl
def gemmlab_kernels():
    return [Broken(name="broken", source=str(Path(__file__).with_name("broken.cu")), defaults={"T": 2})]
'''


def test_compile_error_is_one_line_naming_the_log(cli, tmp_path):
    """A compile error prints NVRTC's first error (the source named by its path) and where the whole
    log is, not the log itself (warnings and all: new-user trial 22); compile.log keeps it whole."""
    plug = tmp_path / "plug"
    plug.mkdir()
    (plug / "broken.py").write_text(BROKEN_PLUGIN)
    (plug / "broken.cu").write_text("template <int T>\n__global__ void gemm_broken(float *c) {\n"
                                    "  int unused = 1;\n  float x = {}\n  c[0] = T;\n}\n")
    proc = cli(["kernel=broken", f"plugin_dirs=[{plug}]", "mode=compile"], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (path,) = results(tmp_path)
    lines = stderr_lines(proc)
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: NVRTC failed on "), proc.stderr
    assert "plug/broken.cu(5): error" in lines[0] and f"(full compile log: {path.parent / 'compile.log'})" in lines[0]
    log = (path.parent / "compile.log").read_text()
    assert "warning" in log and "broken.cu(5): error" in log and "\x00" not in log
    assert "\x00" not in path.read_text() and "\\u0000" not in path.read_text()


def test_the_pre_checks_argument_parser_is_hydras():
    """gemmlab reads the command line with a copy of Hydra's parser (Hydra's own is private:
    gemmlab.cli.precheck.hydra_args_parser); each flag is Hydra's, with the same names, values,
    choices and defaults, so the pre-check reads a command line as Hydra will."""
    from hydra._internal.utils import get_args_parser  # the test may read Hydra's private parser

    from gemmlab.cli.precheck import hydra_args_parser

    def flags(parser):
        return sorted((a.dest, tuple(a.option_strings), type(a).__name__, str(a.nargs), repr(a.const),
                       repr(a.default), tuple(a.choices or ())) for a in parser._actions)

    assert flags(hydra_args_parser()) == flags(get_args_parser())
