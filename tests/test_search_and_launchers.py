"""Sweeps at scale, on the CPU (mode=compile): the Optuna search experiment (failed trials pruned,
never best), the objective, best_row, count_jobs and the progress lines, the submitit-local and
joblib launchers, and device=auto (NVML count + one lock file per GPU).
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

import gemmlab
import gemmlab.cli.app
import gemmlab.gpu.device
import gemmlab.paths
from gemmlab.stages.config import parse_config
from gemmlab.errors import ConfigError, NoGPUError
from gemmlab.contract.hookspecs import ParamError, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.cli.sweep import best_row, count_jobs, is_search

OPTUNA_PARAMS = {"kernel.BM", "kernel.BN", "kernel.BK", "kernel.TM", "kernel.TN"}


def _summary(sweep: Path) -> list[dict]:
    with open(sweep / "summary.csv", newline="") as f:
        return list(csv.DictReader(f))


def _statuses(sweep: Path) -> dict[str, str]:
    return {p.parent.name: json.loads(p.read_text())["status"] for p in sweep.glob("*/result.json")}


# --- the Optuna experiment ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def optuna_cfg():
    from hydra import compose, initialize_config_dir
    gemmlab.cli.app.register_resolvers()
    with initialize_config_dir(config_dir=str(gemmlab.paths.CONF_DIR), version_base="1.3"):
        return compose("config", overrides=["experiment=optuna_tiled"], return_hydra_config=True)


def test_optuna_experiment_composes(optuna_cfg):
    sweeper = optuna_cfg.hydra.sweeper
    assert "optuna" in sweeper._target_.lower()
    assert sweeper.direction == "maximize"
    assert set(sweeper.params) == OPTUNA_PARAMS
    for value in sweeper.params.values():
        assert str(value).startswith("choice(")
    assert sweeper.max_failure_rate == 1.0
    assert sweeper.sampler.seed == 0
    assert list(optuna_cfg.shape) == [2048, 2048, 2048]
    assert optuna_cfg.kernel.name == "tiled"
    assert is_search(optuna_cfg)
    assert count_jobs(optuna_cfg) == sweeper.n_trials


def test_optuna_search_space_contains_invalid_tile_sets(optuna_cfg):
    """The search space is a grid of choices, some of which break the tile rules (so the search
    has to survive failed trials)."""
    import itertools
    spec = load_registry().get("tiled")
    facts = gemmlab.gpu.device.offline_facts("90")
    space = {k.split(".")[1]: [int(x) for x in re.findall(r"\d+", str(v))]
             for k, v in optuna_cfg.hydra.sweeper.params.items()}
    bad = 0
    for combo in itertools.product(*space.values()):
        try:
            spec.check(Shape(2048, 2048, 2048), dict(zip(space, combo)), facts)
        except ParamError:
            bad += 1
    assert 0 < bad < len(list(itertools.product(*space.values())))


@pytest.fixture(scope="module")
def optuna_run(tmp_path_factory, cli):
    tmp = tmp_path_factory.mktemp("optuna")
    sweep = tmp / "opt"
    proc = cli(["experiment=optuna_tiled", "mode=compile", "hydra.sweeper.n_trials=12",
                 f"hydra.sweep.dir={sweep}"], tmp)
    return proc, sweep


def test_optuna_search_cli(optuna_run):
    proc, sweep = optuna_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    best = results["best_params"]
    assert set(best) == OPTUNA_PARAMS
    params = {k.split(".")[1]: int(v) for k, v in best.items()}
    load_registry().get("tiled").check(Shape(2048, 2048, 2048), params, gemmlab.gpu.device.offline_facts("90"))
    assert results["best_value"] == 0.0  # compile-only trials: valid, no speed known

    statuses = _statuses(sweep)
    assert len(statuses) == 12
    assert set(statuses.values()) <= {"compiled", "invalid"}
    invalid = sorted(k for k, v in statuses.items() if v == "invalid")
    assert invalid, "seed 0 with 12 trials must hit an invalid tile set"
    # the best trial is one of the valid ones
    best_dirs = [p.parent.name for p in sweep.glob("*/result.json")
                 if json.loads(p.read_text()).get("kernel", {}).get("params") == params]
    assert best_dirs and all(statuses[d] == "compiled" for d in best_dirs)

    rows = _summary(sweep)
    assert len(rows) == 12
    assert sorted(r["point"] for r in rows if r["status"] == "invalid") == invalid
    for r in rows:
        if r["status"] == "invalid":
            assert r["error"].startswith("kernel."), r
    m = re.search(r"(\d+) pruned", proc.stdout)
    assert m and int(m.group(1)) == len(invalid), proc.stdout
    assert "12 trials" in proc.stdout
    assert not (sweep / "best.txt").exists()  # no timed point, so no best verified point


def test_optuna_failed_trials_are_failed_for_the_sweeper(optuna_run):
    proc, _ = optuna_run
    # Hydra's Optuna sweeper marks a None return as a failed trial (never best)
    assert "Failed experiment" in proc.stdout + proc.stderr


# --- objective / best_row / count_jobs -----------------------------------------------------------

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


def _row(point, status, gflops=""):
    return {"point": str(point), "kernel": "tiled", "params": "", "shape": "8x8x8", "status": status,
            "gflops": gflops, "median_ms": "1.0" if gflops else ""}


def test_best_row_ignores_failed_and_picks_max_gflops():
    rows = [_row(0, "ok", "999.0"), _row(1, "wrong_result", "50000.0"), _row(2, "ok", "1000.5"),
            _row(3, "compiled"), _row(4, "unstable", "20000.0"), _row(5, "ok", "87.0"),
            _row(6, "invalid")]
    best = best_row(rows)
    assert best is not None and best["point"] == "2"  # numeric, not string, max (999.0 < 1000.5)


def test_best_row_none_without_timed_rows():
    assert best_row([]) is None
    assert best_row([_row(0, "compiled"), _row(1, "wrong_result", "5.0"), _row(2, "invalid")]) is None


BASIC = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def test_count_jobs_grid_with_sweeper_params():
    cfg = OmegaConf.create({"hydra": {"sweeper": {"_target_": BASIC, "params": {"shape": "[8,8,8],[16,16,16]"}},
                                      "overrides": {"task": ["kernel=naive,tiled", "mode=compile"]}}})
    assert count_jobs(cfg) == 4


def test_count_jobs_command_line_overrides_params():
    cfg = OmegaConf.create({"hydra": {"sweeper": {"_target_": BASIC,
                                                  "params": {"kernel": "naive,tiled", "shape": "[8,8,8],[16,16,16]"}},
                                      "overrides": {"task": ["kernel=naive,tiled,ladder_starter"]}}})
    assert count_jobs(cfg) == 6


def test_count_jobs_optuna_is_n_trials():
    cfg = OmegaConf.create({"hydra": {"sweeper": {
        "_target_": "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper", "n_trials": 17,
        "params": {"kernel.BM": "choice(32, 64)"}}, "overrides": {"task": ["experiment=optuna_tiled"]}}})
    assert count_jobs(cfg) == 17


def test_count_jobs_grid_without_sweeper_params():
    for params in (None, {}):
        cfg = OmegaConf.create({"hydra": {"sweeper": {"_target_": BASIC, "params": params},
                                          "overrides": {"task": ["kernel=naive,tiled", "mode=compile"]}}})
        assert count_jobs(cfg) == 2


# --- progress lines --------------------------------------------------------------------------------

DONE = re.compile(r"\[(\d+)/(\d+|\?)\] done: ")


@pytest.fixture(scope="module")
def seed_lab_run(tmp_path_factory, cli):
    tmp = tmp_path_factory.mktemp("seedlab")
    sweep = tmp / "sl"
    return cli(["experiment=seed_lab", "mode=compile", f"hydra.sweep.dir={sweep}"], tmp), sweep


def test_progress_lines_with_total_and_eta(seed_lab_run):
    proc, sweep = seed_lab_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    flat = " ".join(proc.stderr.split())  # rich may wrap a long line
    found = re.findall(r"\[(\d+)/6\] done: .*?\(\d+ s elapsed, ETA \d+ s\)", flat)
    assert found == [str(i) for i in range(1, 7)], proc.stderr
    assert "done:" not in proc.stdout  # progress goes to stderr
    assert set(_statuses(sweep).values()) == {"compiled"} and len(_statuses(sweep)) == 6


def test_progress_is_one_line_per_point(seed_lab_run):
    proc, _ = seed_lab_run
    lines = [l for l in proc.stderr.splitlines() if DONE.search(l)]
    assert len(lines) == 6
    for line in lines:
        assert re.search(r"\(\d+ s elapsed, ETA \d+ s\)\s*$", line), line


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory, cli):
    tmp = tmp_path_factory.mktemp("grid")
    sweep = tmp / "g"
    return cli(["-m", "kernel=naive,tiled", "shape=[8,8,8]", "mode=compile", f"hydra.sweep.dir={sweep}"], tmp), sweep


def test_progress_lines_for_command_line_sweep(grid_run):
    proc, _ = grid_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [m.group(1) for m in DONE.finditer(proc.stderr)] == ["1", "2"], proc.stderr


def test_progress_lines_for_command_line_sweep_have_total_and_eta(grid_run):
    proc, _ = grid_run
    flat = " ".join(proc.stderr.split())
    assert "[1/2] done:" in flat and "[2/2] done:" in flat, proc.stderr
    assert len(re.findall(r"ETA \d+ s\)", flat)) == 2, proc.stderr


# --- launchers -------------------------------------------------------------------------------------

LAUNCHERS = {"submitit_local": ["hydra/launcher=gemmlab_local"],
             "joblib": ["hydra/launcher=gemmlab_gpus"],  # n_jobs = GPU count, at least 1
             "joblib_2_workers": ["hydra/launcher=gemmlab_gpus", "hydra.launcher.n_jobs=2"]}


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_launcher_runs_compile_sweep(cli, tmp_path, launcher):
    sweep = tmp_path / "sw"
    proc = cli(["-m", *LAUNCHERS[launcher], "kernel=naive,tiled", "mode=compile",
                f"hydra.sweep.dir={sweep}"], tmp_path, in_process=False)  # the launchers' own processes, from a real one
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    for point, kernel in (("0", "naive"), ("1", "tiled")):
        rec = json.loads((sweep / point / "result.json").read_text())
        assert rec["status"] == "compiled" and rec["valid"] is True, rec["error"]
        assert rec["kernel"]["name"] == kernel
    assert (sweep / "summary.md").is_file()
    assert [(r["point"], r["status"]) for r in _summary(sweep)] == [("0", "compiled"), ("1", "compiled")]
    assert "2 points: 0 verified and timed, 2 compiled only, 0 failed" in proc.stdout
    if launcher == "submitit_local":
        assert (sweep / ".submitit").is_dir()  # really went through submitit
    else:
        assert "Joblib.Parallel(n_jobs=" in out


@pytest.mark.parametrize("launcher", ["submitit_local", "joblib_2_workers"])
def test_launcher_reports_failed_point(cli, tmp_path, launcher):
    """A failing point in a worker process still fails the sweep (the summary reads the files)."""
    sweep = tmp_path / "sw"
    proc = cli(["-m", *LAUNCHERS[launcher], "kernel=tiled", "kernel.TM=3,8", "mode=compile",
                f"hydra.sweep.dir={sweep}"], tmp_path, in_process=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert sorted(_statuses(sweep).values()) == ["compiled", "invalid"]


# --- device=auto -------------------------------------------------------------------------------------

CFG = {"kernel": {"name": "naive"}, "shape": [8, 8, 8]}


def test_parse_config_device_values():
    assert parse_config({**CFG, "device": "auto"}).device == "auto"
    assert parse_config({**CFG, "device": 0}).device == 0
    assert parse_config({**CFG, "device": 3}).device == 3
    for bad in ("gpu0", -1, True, False, 1.0, None, "AUTO", [0]):
        with pytest.raises(ConfigError) as info:
            parse_config({**CFG, "device": bad})
        assert info.value.field == "device", bad
        assert "auto" in str(info.value)


@pytest.fixture
def no_held_locks():
    gemmlab.gpu.device.release_held_locks()
    yield
    gemmlab.gpu.device.release_held_locks()


def test_pick_device_without_gpus_raises(monkeypatch, no_held_locks, tmp_path):
    monkeypatch.setattr(gemmlab.gpu.device, "gpu_count", lambda: 0)
    with pytest.raises(NoGPUError) as info:
        gemmlab.gpu.device.pick_device(str(tmp_path / "locks"))
    assert "device=auto" in str(info.value)


def test_pick_device_keeps_its_gpu(monkeypatch, no_held_locks, tmp_path):
    monkeypatch.setattr(gemmlab.gpu.device, "gpu_count", lambda: 2)
    first = gemmlab.gpu.device.pick_device(str(tmp_path / "locks"))
    assert first == 0
    assert gemmlab.gpu.device.pick_device(str(tmp_path / "locks")) == first
    assert (tmp_path / "locks" / "gpu0.lock").exists()


def test_run_point_device_auto_without_gpu_is_no_gpu(monkeypatch, no_held_locks, tmp_path):
    monkeypatch.setattr(gemmlab.gpu.device, "gpu_count", lambda: 0)
    from gemmlab.run.pipeline import run_point
    rec = run_point({**CFG, "device": "auto", "mode": "run"}, tmp_path / "p")
    assert rec["status"] == "no_gpu" and rec["valid"] is False
    assert "device=auto" in rec["error"]


PICK = textwrap.dedent("""
    import sys, time
    import gemmlab.gpu.device as d
    d.gpu_count = lambda: 2
    print(d.pick_device(sys.argv[1]), flush=True)
    time.sleep(2)
""")


def test_pick_device_two_processes_get_distinct_gpus(tmp_path, cli_env):
    locks = str(tmp_path / "locks")
    procs = [subprocess.Popen([sys.executable, "-c", PICK, locks], env=cli_env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert sorted(int(out.strip()) for out, _ in outs) == [0, 1]


def test_device_index_out_of_range_message(monkeypatch):
    from cuda.core import Device
    monkeypatch.setattr(Device, "get_all_devices", staticmethod(lambda: (object(),)))
    with pytest.raises(NoGPUError) as info:
        gemmlab.gpu.device.open_gpu(1)
    text = str(info.value)
    assert "index 1 does not exist" in text and "1 GPU(s) visible" in text
    assert 1 not in gemmlab.gpu.device._OPEN
