"""Issue 11.3 and 11.8: gemmlab's early command-line checks may add one-line errors for gemmlab's
own fields but never refuse or alter what Hydra itself accepts (shell completion, every flag
form, hydra.* keys, sweep syntax, globs over plugin kernels). Run in-process (tests/clirun.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest


FAULTY = str(Path(__file__).resolve().parent / "plugins_faulty")


def records(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("result.json"))]


def test_shell_completion_install(cli, tmp_path):
    proc = cli(["-sc", "install=bash"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "complete" in proc.stdout and "gemmlab: error" not in proc.stderr


@pytest.mark.parametrize("args", [["-i", "defaults", "kernel=naive"], ["--info", "defaults", "kernel=naive"],
                                  ["kernel=naive", "--info"], ["--info=plugins"], ["--cfg", "job", "kernel=naive"],
                                  ["-c=job", "kernel=naive"]])
def test_hydra_info_and_cfg(cli, tmp_path, args):
    proc = cli(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "gemmlab: error" not in proc.stderr
    assert not (tmp_path / "outputs").exists()


def test_hydra_mode_multirun_sweeps(cli, tmp_path):
    sweep = tmp_path / "sw"
    proc = cli(["hydra.mode=MULTIRUN", "kernel=naive,tiled", "mode=compile", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads((sweep / i / "result.json").read_text())["kernel"]["name"] for i in "01"] == ["naive", "tiled"]


@pytest.mark.parametrize("form", ["--config-dir={d}", "-cd={d}", "--config-dir {d}", "-cd {d}"])
def test_config_dir_forms(cli, tmp_path, form):
    extra = tmp_path / "extra"
    (extra / "timing").mkdir(parents=True)
    (extra / "timing" / "quick.yaml").write_text("mode: events\nwarmup: 1\nrepeat: 2\n")
    proc = cli([*form.format(d=extra).split(), "timing=quick", "kernel=naive", "mode=compile",
                    f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads((tmp_path / "run" / "result.json").read_text())
    assert rec["status"] == "compiled" and rec["config"]["timing"]["repeat"] == 2


def test_glob_sweep_keeps_plugin_kernels(cli, tmp_path):
    sweep = tmp_path / "sw"
    proc = cli(["-m", "kernel=glob(sim_*)", f"plugin_dirs=[{FAULTY}]", "mode=compile", "shape=[8,8,8]",
                    f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [r["kernel"]["name"] for r in records(sweep)] == ["sim_fault"]


def test_glob_sweep_over_builtins(cli, tmp_path):
    sweep = tmp_path / "sw"
    proc = cli(["-m", "kernel=glob([naive,tiled])", "mode=compile", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(r["kernel"]["name"] for r in records(sweep)) == ["naive", "tiled"]


@pytest.mark.parametrize("override", ["+kernel.FOO=1", "++kernel.FOO=1", "kernel.FOO=1"])
def test_unknown_kernel_parameter_is_refused_before_any_directory(cli, tmp_path, override):
    proc = cli([override, "kernel=naive", "mode=compile"], tmp_path)
    assert proc.returncode == 2
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert lines == ["gemmlab: error: kernel.FOO: kernel 'naive' has no parameter FOO; its parameters: BX, BY"]
    assert not (tmp_path / "outputs").exists()


def test_added_unknown_top_level_key_is_refused(cli, tmp_path):
    proc = cli(["+foo=1", "mode=compile"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("gemmlab: error: foo: unknown config key")
    assert not (tmp_path / "outputs").exists()


def test_sweep_without_multirun_is_one_line(cli, tmp_path):
    proc = cli(["kernel=naive,tiled", "mode=compile"], tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "run it with -m" in proc.stderr


def test_help_with_a_broken_plugin_folder_still_helps(cli, tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "bad.py").write_text("raise ImportError('nope')\n")
    proc = cli(["--help", f"plugin_dirs=[{tmp_path / 'p'}]"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "plugins failed to load" in proc.stdout and "bad.py" in proc.stdout


def test_nothing_carries_over_between_commands(cli, tmp_path):
    """Issue 12: each command keeps its state in its own gemmlab.cli.app.Invocation (no module-level
    channel), so in one process a failed point's exit status and one command's plugin folders never
    reach the next command."""
    for d in "abcd":
        (tmp_path / d).mkdir()
    bad = cli(["kernel.BK=7", "mode=compile", "shape=[63,65,33]"], tmp_path / "a")  # an invalid point
    assert bad.returncode == 2, bad.stderr
    ok = cli(["kernel=naive", "mode=compile", "shape=[31,33,17]"], tmp_path / "b")
    assert ok.returncode == 0, ok.stderr
    with_faulty = cli(["--help", f"plugin_dirs=[{FAULTY}]"], tmp_path / "c")
    listed = re.compile(r"^sim_fault\s", re.M)  # a line of the help's kernel list
    assert with_faulty.returncode == 0 and listed.search(with_faulty.stdout)  # the folder's kernels are listed
    plain = cli(["--help"], tmp_path / "d")
    assert plain.returncode == 0 and not listed.search(plain.stdout)  # ... only by the command naming it


@pytest.mark.parametrize("args, field", [
    (["--cfg", "job", "kernel=nosuch"], "kernel: unknown kernel 'nosuch'"),
    (["--cfg", "job", "nokey=1"], "nokey: unknown config key"),
    (["--cfg", "job", "kernel.BOGUS=1"], "kernel.BOGUS: kernel 'tiled' has no parameter BOGUS"),
])
def test_cfg_gets_gemmlab_one_line_for_what_hydra_refuses_too(cli, tmp_path, args, field):
    proc = cli(args, tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip() == proc.stderr.strip().splitlines()[0]
    assert proc.stderr.startswith(f"gemmlab: error: {field}")


def test_cfg_still_prints_what_hydra_accepts(cli, tmp_path):
    """``--cfg`` prints the config Hydra composes and runs no point: values Hydra accepts are not
    refused (the value checks of a command that runs points refused ``--cfg job timing.repeat=0``)."""
    proc = cli(["--cfg", "job", "shape=abc", "timing.repeat=0", "kernel.BK=0", "arch=sm_xx"], tmp_path)
    assert proc.returncode == 0 and "gemmlab: error" not in proc.stderr, proc.stderr
    assert "shape: abc" in proc.stdout and "BK: 0" in proc.stdout


@pytest.mark.parametrize("args", [["experiment=shapes", "mode=compile", "hydra.sweeper.params.shape=${gemmlab_suite:bogus}"],
                                  ["-m", "shape=${gemmlab_suite:tiny,bogus}", "mode=compile"]])
def test_unknown_suite_family_is_one_line(cli, tmp_path, args):
    proc = cli(args, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("gemmlab: error: shape: ${gemmlab_suite:") and "unknown family 'bogus'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("args, start", [
    (["--config-dir=/does/not/exist"], "--config-dir: /does/not/exist is not a directory"),
    (["-cd", "/nope"], "--config-dir: /nope is not a directory"),
    (["--config-name=nope"], "--config-name: no primary config 'nope'"),
    (["-cn", "nope"], "--config-name: no primary config 'nope'"),
    (["--config-path=/nope"], "--config-path: /nope is not a config folder"),
    (["hydra/launcher=nope"], "hydra/launcher: unknown option 'nope'; available: basic, "),
    (["hydra/sweeper=nope"], "hydra/sweeper: unknown option 'nope'; available: basic, gemmlab, optuna"),
    (["-m", "kernel=naive,tiled", "+hydra.sweeper.foo=1"],  # was "command line: Error in call to target ..."
     "hydra.sweeper.foo: GemmlabSweeper takes no argument 'foo'; its arguments: max_batch_size, params"),
    (["-m", "kernel=naive,tiled", "+hydra.launcher.foo=1"], "hydra.launcher.foo: GemmlabLauncher takes no argument 'foo'"),
    (["-m", "kernel=naive,tiled", "hydra/launcher=gemmlab_local", "+hydra.launcher.foo=1"],  # was submitit's traceback
     "hydra.launcher.foo: submitit's local executor takes no argument 'foo'; its arguments: setup"),
    (["hydra/job_logging=nope"], "hydra/job_logging: unknown option 'nope'; available: default, "),
    (["hydra.mode=NOPE"], "hydra.mode: Error merging override hydra.mode=NOPE: Invalid value 'NOPE', expected one of"),
    (["hydra.job.chdir=maybe"], "hydra.job.chdir: "),
    (["-m", "hydra/launcher=basic", "hydra.launcher.foo=1"], "hydra.launcher.foo: Could not override"),
    (["hydra.run.dir=${oc.env:GEMMLAB_TEST_NO_SUCH_VAR}"], "hydra.run.dir: the environment variable "
     "GEMMLAB_TEST_NO_SUCH_VAR is not set (in ${oc.env:GEMMLAB_TEST_NO_SUCH_VAR}); set it, or give a default"),
    (["--cfg", "nope"], "--cfg: invalid choice: 'nope' (choose from 'job', 'hydra', 'all')"),
    (["--info", "nope"], "--info: invalid choice: 'nope'"),
    (["--nope"], "command line: unrecognized arguments: --nope (see gemmlab --help)"),
    (["-m", "kernel=naive,"], "kernel: cannot parse override 'kernel=naive,': an empty value in a comma list: write A,B,C"),
    (["shape=[8,8,8]", "--cfg", "job", "precision=fp4"],  # a flag between overrides: argparse stops there
     "command line: unrecognized arguments: precision=fp4 mode=compile kernel=naive; options such as -m or --cfg go "
     "before the overrides"),
    (["--cfg", "job", "-m"], "command line: Only one of --run, --multirun"),
    (["--resolve"], "--resolve: "),
    (["=5"], "override: "),
    (["hydra.run.dir={tmp}/a", "b"], "b: not an override (key=value); if it belongs to 'hydra.run.dir="),
    (["kernel=naive", "foo"], "foo: not an override: an override is key=value, e.g. kernel=tiled"),
    (["foo"], "foo: not an override: an override is key=value"),
    (["shape=[8,", "8,", "8]"], "shape: cannot parse override 'shape=[8,': the shell split it at a space: write "
                               "lists and sweeps without spaces, [8,8,8] or naive,tiled, or quote the override"),
    (["-m", "kernel=naive,", "tiled"], "kernel: cannot parse override 'kernel=naive,': the shell split it at a space"),
    (["shape=[8,8,8"], "shape: cannot parse override 'shape=[8,8,8': no viable alternative at input '[8,8,8' "
                       "(lists are written [a,b,c]"),
    (["kernel.BM=64)"], "kernel.BM: cannot parse override 'kernel.BM=64)': Hydra's override grammar does not "
                        "accept it"),
    # a new-user trial: "quote them in the shell" did not help; Hydra's quotes inside the list do
    (["plugin_dirs=[~/x]"], "plugin_dirs: cannot parse override 'plugin_dirs=[~/x]': LexerNoViableAltException: "
                            "plugin_dirs=[~/x] (an element with characters the grammar does not take bare, such as ~ "
                            "or a space, is quoted for Hydra inside the list and the whole override for the shell: "
                            "'plugin_dirs=[\"~/x\"]')"),
    # a new-user trial (issue 45): a non-ASCII path got Hydra's lexer error alone, the space case a quoting hint
    (["hydra.run.dir=out/é"], "hydra.run.dir: cannot parse override 'hydra.run.dir=out/é': LexerNoViableAltException: "
                              "hydra.run.dir=out/é (a value with characters the grammar does not take bare, such as é, "
                              "is quoted for Hydra and the whole override for the shell: 'hydra.run.dir=\"out/é\"')"),
    (["-m", "kernel=naive,tiled", "hydra.sweep.dir=ü/s"], "hydra.sweep.dir: cannot parse override "
     "'hydra.sweep.dir=ü/s': LexerNoViableAltException: hydra.sweep.dir=ü/s (a value with characters the grammar does "
     "not take bare, such as ü, is quoted for Hydra and the whole override for the shell: 'hydra.sweep.dir=\"ü/s\"')"),
    (["experiment=tc_ladder", "hydra.sweeper.params.tc_rung=mma_bf16_rr,mma_tf32_rr"],
     "hydra.sweeper.params.tc_rung: mma_bf16_rr,mma_tf32_rr is a comma list, i.e. a sweep, and Hydra does not "
     "sweep its own hydra.* keys; quote the value to give it as one string: "
     "\"hydra.sweeper.params.tc_rung='mma_bf16_rr,mma_tf32_rr'\""),
    (["-cd", "{tmp}", "kernel=nope"], "kernel: unknown kernel 'nope'"),
    (["-cd", "{tmp}", "experiment=nope"], "experiment: unknown experiment 'nope'; available: batched, epilogue, fp8, heldout, ladder, layouts, "),  # as without -cd
    (["--experimental-rerun", "{tmp}/nope.pickle"], "--experimental-rerun: "),  # Hydra's UserWarning came first
    (["-m", "kernel=naive", "hydra.sweep.dir="], "hydra.sweep.dir: is empty; give a folder"),  # swept into the cwd
    (["kernel=naive", "hydra.run.dir=''"], "hydra.run.dir: is empty; give a folder"),
], ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_hydra_errors_are_one_line(cli, tmp_path, args, start):
    """Hydra's own errors (config folders and names, group options, overrides it cannot merge,
    its argument parser) are gemmlab's one line, exit 2, before any run directory exists."""
    extra = ["mode=compile"] + ([] if any(a.startswith("kernel=") for a in args) else ["kernel=naive"])
    proc = cli([a.replace("{tmp}", str(tmp_path)) for a in args] + extra, tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text
    assert "Traceback" not in text and "HYDRA_FULL_ERROR" not in text
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gemmlab: error: {start}"), proc.stderr
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("body, want", [
    ("bogus: 1\n", "gemmlab: error: bogus: unknown config key (in experiment/bad); known: arch, "),
    ("verify:\n  bogus: 1\n", "gemmlab: error: verify.bogus: unknown key in verify (in experiment/bad); known: after_timing, atol, "),
])
def test_unknown_key_in_a_users_experiment_file_is_named(cli, tmp_path, body, want):
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "bad.yaml").write_text("# @package _global_\n" + body)
    proc = cli(["-cd", str(tmp_path / "conf"), "experiment=bad", "mode=compile"], tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(want), proc.stderr
    assert not (tmp_path / "outputs").exists()


_SWEEP = "hydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n"


@pytest.mark.parametrize("body, want", [
    # a new-user trial: Hydra's "Could not override 'kernel.FOO'; To append to your config use +kernel.FOO=1"
    # the command line's check reads the file's sweep first (its words); Hydra's own error is the fallback
    (_SWEEP + "      kernel.FOO: 1,2\n", "kernel.FOO: kernel 'tiled' has no parameter FOO (in experiment bad's "
     "hydra.sweeper.params.kernel.FOO); its parameters: BM, BN, BK, TM, TN"),
    (_SWEEP + "      kernel: tiled,naive\n      kernel.BK: 8\n", "kernel.BK: kernel 'naive' has no parameter BK (in "
     "experiment bad's hydra.sweeper.params.kernel.BK); its parameters: "),
    (_SWEEP + "      timing.repeats: 1,2\n", "timing.repeats: unknown key in timing (in experiment/bad's "
     "hydra.sweeper.params); known: batch, "),
    (_SWEEP + "      foo: 1,2\n", "foo: unknown config key (in experiment/bad's hydra.sweeper.params); known: arch, "),
    # errors of the file that were the "command line"'s
    ("defaults:\n  - /kernel: naive\n  - _self_\n", "kernel: experiment/bad's defaults list has '- /kernel: naive', "
     "but the config already chose a kernel; write '- override /kernel: naive' to replace it"),
    ("timing: [1, 2]\n", "timing: a list ([1, 2]) where a group of fields is expected (in experiment/bad); write its "
     "fields as key: value lines under 'timing:'; known: batch, "),
    (_SWEEP + "      kernel.BK: ${foo}\n", "kernel.BK: the interpolation ${foo} names no key of the config (in "
     "experiment/bad's hydra.sweeper.params)"),
    ("defaults:\n  - override /kernel: tiledd\n", "kernel: unknown option 'tiledd' (in experiment/bad's defaults); "
     "available: auto, "),
    (None, "experiment: unknown config key (in experiment/bad); known: arch, "),
], ids=["param", "param-of-one-kernel", "section-key", "top-key", "no-override", "section-list", "interpolation",
        "group-option", "no-package"])
def test_an_experiment_files_error_names_the_file_and_key(cli, tmp_path, body, want):
    """Errors Hydra raises about a user's experiment file (also while it composes a point of the
    file's sweep) name the file and the key, with what is allowed, never the command line or
    Hydra's '+key' advice (a new-user trial)."""
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    text = "mode: compile\nshape: [32, 32, 32]\n" if body is None else "# @package _global_\nmode: compile\n" + body
    (tmp_path / "conf" / "experiment" / "bad.yaml").write_text(text)
    proc = cli(["-cd", str(tmp_path / "conf"), "experiment=bad", "mode=compile"], tmp_path)
    lines = [l for l in proc.stderr.strip().splitlines() if l.startswith("gemmlab: error: ")]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("gemmlab: error: " + want), proc.stderr
    assert "command line" not in lines[0] and "+" not in lines[0], lines[0]
    if body is None:
        assert lines[0].endswith("an experiment file starts with the line '# @package _global_' (its keys are then "
                                 "the config's own, not the experiment's)"), lines[0]


def test_an_unknown_kernel_parameter_under_a_config_folder_lists_the_parameters(cli, tmp_path):
    """With -cd the pre-check leaves keys to Hydra: its '+kernel.FOO=1' advice was the answer."""
    proc = cli(["-cd", str(tmp_path), "kernel.FOO=1", "mode=compile"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip() == ("gemmlab: error: kernel.FOO: kernel 'tiled' has no "
                                                            "parameter FOO; its parameters: BM, BN, BK, TM, TN"), proc.stderr


@pytest.mark.parametrize("override", ["hydra.sweeper.params.kernel.BK=8,16", "hydra.sweeper.params.kernel.BK='8,16'"])
def test_a_dotted_sweep_param_on_the_command_line_says_what_works(cli, tmp_path, override, sass_not_read):
    """A new-user trial: unquoted, the advice was to quote the value; quoted, Hydra said "Key 'kernel'
    is not in struct" and advised a '+' that fails too. The advice given now works."""
    # the advice's sweep runs its points in this process (isolation.process=false, beside the advised
    # params mapping) with sass_not_read: its records' configs are read, not the SASS (the nvdisasm
    # runs of tiled with BK=8 and 16 skipped)
    proc = cli(["-m", override, "mode=compile"], tmp_path)
    want = ("gemmlab: error: hydra.sweeper.params.kernel.BK: the sweep's params key kernel.BK has a dot, which an "
            "override path reads as a level (params has no kernel); sweep the key itself: gemmlab -m kernel.BK=8,16, "
            "or give params the entry as a mapping: \"hydra.sweeper.params={kernel.BK:'8,16'}\"")
    assert proc.returncode == 2 and proc.stderr.strip() == want, proc.stderr
    sweep_dir = tmp_path / "sw"
    proc = cli(["-m", "hydra.sweeper.params={kernel.BK:'8,16'}", "mode=compile", "kernel=tiled",
                f"hydra.sweep.dir={sweep_dir}", "isolation.process=false"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["config"]["kernel"]["BK"] for r in records(sweep_dir)) == [8, 16]



@pytest.mark.parametrize("override", ["+hydra.sweeper.params.kernel.BK=", "+hydra.sweeper.params.kernel.BK=8,16",
                                      "++hydra.sweeper.params.kernel.BK='8,16'"])
def test_a_dotted_sweep_param_added_with_a_plus_says_what_works(cli, tmp_path, override):
    """A new-user trial typed Hydra's own '+' advice by hand, ``+hydra.sweeper.params.kernel.BK=``:
    Hydra nests it (params.kernel.BK, which no sweeper reads) and the sweeper then failed with
    "kernel: no viable alternative at input '{'BK''"; it gets the dotted key's advice now."""
    proc = cli(["-m", override, "mode=compile"], tmp_path)
    value = override.split("=", 1)[1].strip("'") or "a,b"
    want = ("gemmlab: error: hydra.sweeper.params.kernel.BK: the sweep's params key kernel.BK has a dot, which an "
            f"override path reads as a level (params has no kernel); sweep the key itself: gemmlab -m kernel.BK={value}, "
            f"or give params the entry as a mapping: \"hydra.sweeper.params={{kernel.BK:'{value}'}}\"")
    assert proc.returncode == 2 and proc.stderr.strip() == want, proc.stderr

def test_an_unavailable_kernel_is_said_once(cli, tmp_path, monkeypatch):
    """``gemmlab kernel=cublas mode=compile`` without the cuBLAS extra: the reason once (the
    ``gemmlab: error:`` line), not also in the run block."""
    import sys

    from gemmlab.run import isolation, pipeline
    for name in ("nvmath", "nvmath.bindings", "nvmath.bindings.cublas"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(isolation, "run_point", lambda cfg, out_dir: pipeline.run_point(cfg, out_dir))
    proc = cli(["kernel=cublas", "mode=compile"], tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert text.count("gemmlab[cublas]") == 1 and "gemmlab: error: " in proc.stderr, text


def test_rerun_into_an_existing_sweep_says_the_refusal_once(cli, tmp_path):
    sweep_dir = tmp_path / "sw"
    args = ["-m", "mode=compile", "kernel=naive,tiled", "shape=[64,64,64],[32,32,32]", f"hydra.sweep.dir={sweep_dir}"]
    assert cli(args, tmp_path).returncode == 0
    again = cli(args, tmp_path)
    assert again.returncode == 2, again.stderr
    assert again.stderr.count("already holds a result.json") == 1, again.stderr


@pytest.mark.parametrize("kernel_arg", [[], ["kernel=tiled"]])
def test_an_experiment_setting_kernel_name_is_refused_in_one_line(cli, tmp_path, kernel_arg):
    """An experiment that sets ``kernel.name`` itself (not ``override /kernel``) would run that
    kernel with the parameters of the group the command line chose: refused, naming the fix."""
    extra = tmp_path / "extra"
    (extra / "experiment").mkdir(parents=True)
    (extra / "experiment" / "mine.yaml").write_text("# @package _global_\nkernel:\n  name: naive\n")
    proc = cli([f"--config-dir={extra}", "experiment=mine", *kernel_arg, "mode=compile",
                f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("gemmlab: error: kernel.name: the config names kernel 'naive' but the kernel group "
                               "chose 'tiled'") and "override /kernel: naive" in lines[0], lines[0]
    rec = json.loads((tmp_path / "run" / "result.json").read_text())  # an invalid record, as for any refused input
    assert rec["status"] == "invalid" and rec["valid"] is False and rec["error"] == lines[0].removeprefix("gemmlab: error: ")


def test_an_experiment_choosing_its_kernel_in_the_defaults_list_yields_to_the_command_line(cli, tmp_path):
    extra = tmp_path / "extra"
    (extra / "experiment").mkdir(parents=True)
    (extra / "experiment" / "mine.yaml").write_text("# @package _global_\ndefaults:\n  - override /kernel: naive\n")
    for args, name in (([], "naive"), (["kernel=tiled"], "tiled")):
        run = tmp_path / f"run-{name}"
        proc = cli([f"--config-dir={extra}", "experiment=mine", *args, "mode=compile", "shape=[8,8,8]",
                    f"hydra.run.dir={run}"], tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert json.loads((run / "result.json").read_text())["kernel"]["name"] == name


MINE_SWEEPS = ("# @package _global_\ndefaults:\n  - override /kernel: naive\nhydra:\n  mode: MULTIRUN\n"
               "  sweeper:\n    params:\n      kernel.BX: 16,32\n      timing.repeat: {repeat}\n")


def test_a_config_dir_experiments_own_sweep_is_checked_before_any_folder(cli, tmp_path):
    """``--config-dir DIR experiment=mine``: the sweep DIR/experiment/mine.yaml defines had no
    up-front check (every point a failed record for a bad value, a new-user trial); with only a
    config folder added, gemmlab's config is still the one composed, so its experiment sweeps and
    the fields checked alone (resume, timing.*, ...) get the one line, exit 2, no folder. A good
    sweep there runs."""
    extra = tmp_path / "extra"
    (extra / "experiment").mkdir(parents=True)
    mine = extra / "experiment" / "mine.yaml"
    mine.write_text(MINE_SWEEPS.format(repeat="5,0"))
    proc = cli([f"--config-dir={extra}", "experiment=mine", "mode=compile", f"hydra.sweep.dir={tmp_path / 'bad'}"],
               tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == ["gemmlab: error: timing.repeat: must be an integer >= 1 and <= 100000, got 0 "
                                        "(in experiment mine's hydra.sweeper.params.timing.repeat)"]  # the file named
    assert not (tmp_path / "bad").exists()
    proc = cli([f"--config-dir={extra}", "kernel=naive", "resume=maybe", "mode=compile"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.splitlines() == ["gemmlab: error: resume: must be true or false, got 'maybe'"]
    mine.write_text(MINE_SWEEPS.format(repeat="5").replace("kernel.BX: 16,32", "kernel.BX: range(4,2)"))
    proc = cli([f"--config-dir={extra}", "experiment=mine", "mode=compile", f"hydra.sweep.dir={tmp_path / 'empty'}"],
               tmp_path)  # Hydra launched 0 jobs, left the folder and exited 1
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("gemmlab: error: kernel.BX: range(4,2) gives no value"), proc.stderr
    assert "(in experiment mine's hydra.sweeper.params.kernel.BX)" in proc.stderr and not (tmp_path / "empty").exists()
    mine.write_text(MINE_SWEEPS.format(repeat="5"))
    proc = cli([f"--config-dir={extra}", "experiment=mine", "mode=compile", "shape=[8,8,8]",
                f"hydra.sweep.dir={tmp_path / 'good'}"], tmp_path)
    assert proc.returncode == 0 and len(list((tmp_path / "good").glob("*/result.json"))) == 2, proc.stdout + proc.stderr


def test_hydra_full_error_adds_the_traceback_and_keeps_the_exit_status(cli, tmp_path):
    """HYDRA_FULL_ERROR=1 (Hydra's documented switch) shows Hydra's traceback; the exit status and
    the closing one-line error stay those of the plain run (2), so a script's check does not change."""
    args = ["kernel=tiled", "hydra.mode=NOPE", "mode=compile", f"hydra.run.dir={tmp_path / 'run'}"]
    plain = cli(args, tmp_path)
    full = cli(args, tmp_path, env={"HYDRA_FULL_ERROR": "1"})
    assert plain.returncode == full.returncode == 2, (plain.stderr, full.stderr)
    assert "Traceback" not in plain.stderr and "Traceback" in full.stderr
    last = [l for l in full.stderr.splitlines() if l.strip()][-1]
    assert last == plain.stderr.strip() and last.startswith("gemmlab: error: hydra.mode: "), (last, plain.stderr)


@pytest.mark.parametrize("text,says", [
    ("# @package _global_\nmode: [compile\n", "experiment: {d}/experiment/mine.yaml, line 2 column 7: not valid YAML: "
     "while parsing a flow sequence; expected ',' or ']'"),
    ("# @package _global_\n- a\n- b\n", "experiment: {d}/experiment/mine.yaml holds a YAML list, but a config file "
     "must be a mapping"),
    ("- mode: compile\n", "experiment: {d}/experiment/mine.yaml holds a YAML list, but a config file must be a mapping"),
])
def test_a_user_config_file_that_is_not_a_yaml_mapping_is_one_line(cli, tmp_path, text, says):
    """The tester's 102-line yaml.parser.ParserError, and Hydra's 'Cannot merge DictConfig with
    ListConfig' under the field 'command line': the file, its line, what a config file is."""
    extra = tmp_path / "extra"
    (extra / "experiment").mkdir(parents=True)
    (extra / "experiment" / "mine.yaml").write_text(text)
    proc = cli([f"--config-dir={extra}", "experiment=mine", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("gemmlab: error: " + says.format(d=extra)), proc.stderr


def test_a_kernel_glob_that_matches_no_kernel_is_one_line(cli, tmp_path):
    """Hydra launched 0 jobs, printed an empty table and exited 1."""
    proc = cli(["-m", "kernel=glob(nothing*)", "mode=compile", f"hydra.sweep.dir={tmp_path / 's'}"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("gemmlab: error: kernel: glob(nothing*) matches no kernel; kernels: ")
    assert "tiled" in proc.stderr and "naive" in proc.stderr
    assert not (tmp_path / "s").exists()


def test_plugin_dirs_not_a_list_names_the_value_once(cli, tmp_path):
    proc = cli([f"plugin_dirs={tmp_path / 'mykernels'}", "mode=compile"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (f"gemmlab: error: plugin_dirs: must be a list of directory paths like [dir1,dir2], "
                                   f"got '{tmp_path / 'mykernels'}' (write plugin_dirs=[{tmp_path / 'mykernels'}])")


def test_a_sweep_of_one_point_says_1_point(cli, tmp_path):
    proc = cli(["-m", "kernel=naive", "mode=compile", "shape=[8,8,8]", f"hydra.sweep.dir={tmp_path / 's'}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 point: 0 verified and timed, 1 compiled only, 0 failed" in proc.stdout, proc.stdout
    from gemmlab.console import count
    assert (count(0, "point"), count(1, "point"), count(2, "trial")) == ("0 points", "1 point", "2 trials")


@pytest.mark.parametrize("override, line", [
    ("resume=maybe", "resume: must be true or false, got 'maybe'"),
    ("timing.repeat=0", "timing.repeat: must be an integer >= 1 and <= 100000, got 0"),
    ("timing.mode=events,fast", "timing.mode: must be one of events, graph, both, got 'fast'"),
    ("device=-1", "device: must be a GPU index >= 0 or auto, got -1"),
    ("baseline=none", "baseline: unknown kernel 'none'; registered kernels: "),
    ("hydra.sweeper.max_batch_size=0", "hydra.sweeper.max_batch_size: must be an integer >= 1 (jobs per batch) or null"),
    ("mode=null", "mode: must be one of run, compile, got null"),  # was "got None"
    ("resume=true,false", "resume: true,false is a sweep; resume is one choice for the whole command"),
    ("experiment=seed_lab,ladder", "experiment: seed_lab,ladder is a sweep of experiments, and seed_lab, ladder sweep "
                                   "points of their own, which Hydra would not expand"),
    ("experiment=glob(seed*)", "experiment: glob(seed*) is a sweep of experiments, and seed_lab sweeps points of its "
                               "own, which Hydra would not expand (one point per experiment); name it alone: "
                               "experiment=seed_lab"),  # ran 1 point of tiled, exit 0
    ("kernel.TM=glob(*)", "kernel.TM: glob(*): a glob picks options of a config group (experiment, kernel, llm_pass, moe_expert, "
                          "tc_rung, timing); kernel.TM is a value: list the values (e.g. 2,4,8)"),  # Hydra launched 0 jobs
    ("shape=glob(*)", "shape: glob(*): a glob picks options of a config group (experiment, kernel, llm_pass, moe_expert, "
                      "tc_rung, timing); shape is a value: list the shapes (e.g. [64,64,64],[128,128,128])"),  # the hint said 2,4,8
    ("baseline=glob(*)", "baseline: glob(*): a glob picks options of a config group (experiment, kernel, llm_pass, moe_expert, "
                         "tc_rung, timing); baseline is a value: list the values, comma-separated (baseline=A,B)"),
    ("timing=glob(zzz*)", "timing: glob(zzz*) matches no timing; available: "),  # 0 jobs, folder left
    ("kernel.BX=range(1,100000000)", "kernel.BX: range(1,100000000) gives 99999999 values; a sweep takes at most "
                                     "100000 per key"),  # grew to 18 GB before a point ran
    # a new-user trial: a bad shape, tile parameter or arch of a sweep became a failed point after the others ran
    ("shape=[63,65,33],[4,5]", "shape: must be a list [M, N, K] of three positive integers, got [4, 5]"),
    ("shape=[63,65,33],[0,65,33]", "shape: M must be a positive integer, got 0 in [0, 65, 33] (shape is [M, N, K]"),
    ("hydra.sweeper.params.shape='[8,8,8],[4,5]'", "shape: must be a list [M, N, K] of three positive integers, "
                                                  "got [4, 5]"),
    ("kernel.BY=16,0", "kernel.BY: must be an integer >= 1 and <= 4096, got 0"),
    ("kernel.BY=range(0,2)", "kernel.BY: must be an integer >= 1 and <= 4096, got 0"),
    ("arch=sm_90,sm_xx", "arch: must be a CUDA SM target like sm_90 (or null for the device's own), got 'sm_xx'"),
])
def test_a_bad_value_of_a_field_checked_alone_refuses_the_sweep_before_any_point(cli, tmp_path, override, line):
    """A value no point could accept (also one value of a sweep) is one line and exit 2 before
    Hydra makes a folder, not a failed record in every point (a new-user trial: a sweep with
    resume=maybe ran every point as invalid and exited 1)."""
    proc = cli(["-m", "kernel=naive", "kernel.BX=16,32", "mode=compile", override], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: " + line), lines
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "multirun").exists()


@pytest.mark.parametrize("value", ["bogus", "none", "auto"])
def test_a_bad_baseline_names_null_and_not_auto(value):
    """The unknown-baseline line listed the kernels, then "or auto" (a kernel choice, not a
    baseline: baseline=auto was refused by a line offering auto) and never null, which measures
    no baseline."""
    from gemmlab.contract.registry import load_registry
    from gemmlab.errors import ConfigError
    from gemmlab.stages.config import check_baseline
    registry = load_registry()
    with pytest.raises(ConfigError) as err:
        check_baseline(value, lambda name: registry.get(name).defaults)
    text = str(err.value)
    assert text.startswith(f"baseline: unknown kernel '{value}'; registered kernels: ") and "or auto" not in text, text
    assert "; or null (no baseline)" in text and ("a baseline is one fixed kernel" in text) == (value == "auto"), text
    assert ("baseline=null measures no baseline" in text) == (value == "none"), text
    assert check_baseline(None, lambda name: registry.get(name).defaults) is None


def test_the_point_check_and_the_command_line_check_say_the_same(tmp_path):
    """Both read gemmlab.stages.config.FIELD_RULES: a bad value in a config handed to parse_config
    (a point, gemmlab-tune) gets the message the command line gives."""
    from gemmlab.errors import ConfigError
    from gemmlab.stages.config import FIELD_RULES, check_field, parse_config
    base = {"kernel": {"name": "naive", "BX": 16, "BY": 16}, "shape": [64, 64, 64]}
    bad = {"resume": "maybe", "timing.repeat": 0, "verify.trials": 0, "layout.b": "diag", "isolation.timeout_s": -1,
           "sanitizer": "leakcheck", "timing.budget_s": "long", "cache.enabled": "yes"}
    assert set(bad) <= set(FIELD_RULES)
    for key, value in bad.items():
        top, _, sub = key.partition(".")
        cfg = {**base, top: {sub: value} if sub else value}
        with pytest.raises(ConfigError) as from_point:
            parse_config(cfg)
        with pytest.raises(ConfigError) as from_line:
            check_field(key, value)
        assert str(from_point.value) == str(from_line.value) and from_line.value.field == key
    assert check_field("timing.max_repeat", None) is None and check_field("plugin_dirs", "anything") == "anything"
    with pytest.raises(ConfigError, match=r"^sanitizer: must be one of memcheck, racecheck, synccheck, initcheck or "
                                          r"null, got 'leak'$"):  # a field that may be null says so
        check_field("sanitizer", "leak")


def test_an_unknown_option_in_an_experiments_group_sweep_is_refused_before_a_folder(cli, tmp_path):
    """``hydra.sweeper.params.tc_rung='a,bogus'``: Hydra refused it only after making the sweep's
    folder and writing multirun.yaml there (a new-user trial); now one line, nothing written."""
    proc = cli(["-m", "experiment=tc_ladder", "mode=compile", "hydra.sweeper.params.tc_rung='mma_bf16_rr,bogus'"],
               tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "gemmlab: error: tc_rung: unknown option 'bogus' in hydra.sweeper.params.tc_rung; available: mma_bf16_rc,"), lines
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("override, line", [
    ("+hydra.sweeper.params.resume=maybe", "resume: must be true or false, got 'maybe'"),
    ("+hydra.sweeper.params.timing.repeat='1,0'", "timing.repeat: must be an integer >= 1"),
    ("hydra.sweeper.params.tc_rung='glob(bogus*)'", "tc_rung: glob(bogus*) in hydra.sweeper.params.tc_rung matches no "
                                                    "option; available: mma_bf16_rc,"),
    ("timing.repeat=range(0,2)", "timing.repeat: must be an integer >= 1"),
    ("timing.repeat=tag(a,range(0,2))", "timing.repeat: must be an integer >= 1"),
])
def test_values_of_a_sweepers_params_and_ranges_are_checked_before_any_folder(cli, tmp_path, override, line):
    """A field's values in ``hydra.sweeper.params`` and in a ``range()`` are checked as the
    command line's own are, and a glob over a group's options must match one (a new-user trial:
    these ran every point as invalid, or launched 0 jobs into a new folder)."""
    proc = cli(["-m", "experiment=tc_ladder", "mode=compile", override], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: " + line), lines
    assert not (tmp_path / "outputs").exists()


def test_an_experiment_files_own_sweep_values_are_checked(cli, tmp_path, monkeypatch):
    """The sweep an experiment file declares (``hydra.sweeper.params``) is checked too, unless the
    command line gives that key itself."""
    from gemmlab.stages import config_files
    real = config_files.experiment_sweeps
    monkeypatch.setattr(config_files, "experiment_sweeps", lambda name, *dirs: {**real(name, *dirs), "resume": "true,maybe"})
    proc = cli(["-m", "experiment=seed_lab", "mode=compile"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip() == ("gemmlab: error: resume: must be true or false, got 'maybe' "
                                                            "(in experiment seed_lab's hydra.sweeper.params.resume)")
    assert not (tmp_path / "outputs").exists()
    assert real("seed_lab")["kernel"] and real("no_such_experiment") == {}


@pytest.mark.parametrize("module, args, start", [
    ("gemmlab.results.report", ["{data}", "--out", ""], "gemmlab-report: error: argument --out: is empty"),
    ("gemmlab.results.compare", ["{data}", "{data}", "--out", " "], "gemmlab-compare: error: argument --out: is empty"),
    ("gemmlab.results.families", ["{data}", "--out", ""], "python -m gemmlab.results.families: error: argument --out: is empty"),
    ("gemmlab.cli.tune", ["sweep", "--mode", "compile", "--out", ""], "gemmlab-tune: error: sweep: argument --out: is empty"),
    ("gemmlab.cli.tune", ["build", "{data}", "-o", ""], "gemmlab-tune: error: build: argument -o/--out: is empty"),
])
def test_an_empty_output_path_is_one_line(cli, tmp_path, module, args, start):
    """A new-user trial: ``gemmlab-tune sweep --out ''`` wrote 316 points into the working folder,
    ``gemmlab-report --out ''`` said ``error: : already exists``. An empty (or blank) output path is
    refused by each command's parser: one line naming the option, exit 2, nothing written."""
    data = Path(__file__).resolve().parent / "data" / "h200"
    proc = cli([a.replace("{data}", str(data)) for a in args], tmp_path, module=module)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and proc.stderr.startswith(start), proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_own_config_with_the_name_of_gemmlabs_is_refused(cli, tmp_path):
    """A new-user trial: ``-cd myconf experiment=seed_lab`` with their own
    ``myconf/experiment/seed_lab.yaml`` (compile mode, one small shape) ran gemmlab's seed_lab
    instead, silently: Hydra's search path puts gemmlab's conf/ before a --config-dir. One line,
    exit 2, nothing run; a name of one's own still runs."""
    conf = tmp_path / "myconf" / "experiment"
    conf.mkdir(parents=True)
    text = "# @package _global_\ndefaults:\n  - override /kernel: naive\nmode: compile\nshape: [48, 48, 48]\n"
    (conf / "seed_lab.yaml").write_text(text)
    proc = cli(["-cd", str(tmp_path / "myconf"), "experiment=seed_lab"], tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"gemmlab: error: experiment: seed_lab: {conf / 'seed_lab.yaml'} has the name of "
                                  "gemmlab's own experiment seed_lab"), proc.stderr
    assert not (tmp_path / "outputs").exists()
    (conf / "mine.yaml").write_text(text)
    proc = cli(["-cd", str(tmp_path / "myconf"), "experiment=mine", "hydra.run.dir=r"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "r" / "result.json").read_text())["shape"] == {"M": 48, "N": 48, "K": 48}


_FILE_SWEEP = "# @package _global_\nmode: compile\nhydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n      {param}\n"


@pytest.mark.parametrize("param, line", [
    # each value of the file's sweep by the kernel's parameter rule, as on the command line (a new-user trial:
    # 10 points, 3 invalid records, exit 1)
    ("kernel.BK: range(4090,4100)", "gemmlab: error: kernel.BK: must be an integer >= 1 and <= 4096, got 4097 "
     "(in experiment sw's hydra.sweeper.params.kernel.BK)"),
    # every point composed one by one for over a minute, a folder holding only .gemmlab.lock
    ("kernel.BK: range(1,100000)", "gemmlab: error: kernel.BK: must be an integer >= 1 and <= 4096, got 4097 "
     "(in experiment sw's hydra.sweeper.params.kernel.BK)"),
    ("kernel.BX: 8,16", "gemmlab: error: kernel.BX: kernel 'tiled' has no parameter BX (in experiment sw's "
     "hydra.sweeper.params.kernel.BX); its parameters: BM, BN, BK, TM, TN"),
    # a YAML list is one value to Hydra's sweepers: one bogus invalid point each
    ("kernel.BK: []", "gemmlab: error: kernel.BK: {file} gives hydra.sweeper.params.kernel.BK an empty YAML list ([]); "
     "a sweep is written as one comma string, e.g. kernel.BK: 8,16"),
    ("shape: [[32,32,32],[64,64,64]]", "gemmlab: error: shape: {file} gives hydra.sweeper.params.shape a YAML list "
     "([[32, 32, 32], [64, 64, 64]]); a sweep is written as one comma string, e.g. shape: \"[32,32,32],[64,64,64]\""),
    ("kernel: [tiled, naive]", "gemmlab: error: kernel: {file} gives hydra.sweeper.params.kernel a YAML list "
     "([\"tiled\", \"naive\"]); a sweep is written as one comma string, e.g. kernel: tiled,naive"),
])
def test_experiment_file_sweep_values_checked_up_front(cli, tmp_path, param, line):
    """An experiment file's ``hydra.sweeper.params`` gets the command line's value checks (kernel
    parameter rules; a YAML list refused): one line, exit 2, no sweep folder."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    path = conf / "experiment" / "sw.yaml"
    path.write_text(_FILE_SWEEP.format(param=param))
    proc = cli(["-cd", str(conf), "experiment=sw", f"hydra.sweep.dir={tmp_path / 'out'}"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [line.format(file=path)]
    assert not (tmp_path / "out").exists()


def test_experiment_sweep_in_single_run_warns(cli, tmp_path):
    """A file's sweeper params without -m or ``hydra.mode: MULTIRUN`` ran one point silently: now
    one warning line says the sweep is ignored (the point still runs)."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "sw.yaml").write_text(
        _FILE_SWEEP.format(param="kernel: tiled,naive").replace("  mode: MULTIRUN\n", ""))
    proc = cli(["-cd", str(conf), "experiment=sw", f"hydra.run.dir={tmp_path / 'one'}"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [s for s in proc.stderr.splitlines() if s.startswith("gemmlab: warning:")]
    assert warnings == ["gemmlab: warning: hydra.sweeper.params sweeps kernel, but this command is a single run, which "
                        "ignores the sweep (one point of the config's own values): run it with -m (gemmlab -m ...) "
                        "or set hydra.mode: MULTIRUN in the experiment file to sweep"], proc.stderr
    proc = cli(["-m", "-cd", str(conf), "experiment=sw", f"hydra.sweep.dir={tmp_path / 'two'}"], tmp_path)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
