"""Sweeps (gemmlab/cli/sweep.py), on the CPU (mode=compile): summaries find points in any
``hydra.sweep.subdir`` layout, leave a sanitizer child out, and end the multirun with the exit
status of the records on disk, whatever the launcher (issue 11 item 5; issue 12 item 3: no
module-level channel for the outcome); the progress label and lines; the summary table on an
80-column terminal; the Optuna search experiment (failed trials pruned, never best); best_row and
count_jobs; the submitit-local and joblib launchers."""

from __future__ import annotations

import csv
import io
import json
import sys
import time
import re
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf
from rich.console import Console

import gemmlab.cli.app
import gemmlab.gpu.device
import gemmlab.paths
from gemmlab.cli import sweep
from gemmlab.cli.sweep import SweepFinished, count_jobs, is_search
from gemmlab.results import summary
from gemmlab.results.summary import SweepOutcome, best_row, collect, summarize
from gemmlab.contract.hookspecs import ParamError, Shape
from gemmlab.contract.registry import load_registry


def _rec(status="compiled", kernel="tiled", **extra):
    rec = {"schema": "gemmlab.result/1", "status": status, "valid": status in ("ok", "compiled", "checked"),
           "error": None if status in ("ok", "compiled", "checked") else f"{status}: broke",
           "config": {"kernel": {"name": kernel}, "shape": [8, 8, 8]},
           "kernel": {"name": kernel, "params": {"BM": 64}}, "shape": {"M": 8, "N": 8, "K": 8}}
    rec.update(extra)
    return rec


def _put(path: Path, rec: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "result.json").write_text(json.dumps(rec))


def test_nested_layout_and_sanitizer_child(tmp_path):
    _put(tmp_path / "tiled" / "10", _rec())
    _put(tmp_path / "tiled" / "2", _rec(status="invalid"))
    _put(tmp_path / "naive" / "BM=64" / "0", _rec(kernel="naive"))
    _put(tmp_path / "tiled" / "10" / "sanitizer-racecheck" / "run", _rec(status="checked"))
    rows = collect(tmp_path)
    assert [(r["point"], r["status"]) for r in rows] == [("naive/BM=64/0", "compiled"), ("tiled/2", "invalid"),
                                                         ("tiled/10", "compiled")]


def test_outcome_exit_status():
    ok, bad = {"point": "0", "status": "compiled"}, {"point": "1", "status": "invalid"}
    assert SweepOutcome(Path("."), [ok]).exit_status == 0
    assert SweepOutcome(Path("."), [ok, bad]).exit_status == 1
    assert SweepOutcome(Path("."), [ok, bad], search=True).exit_status == 0  # failed trials are pruned
    assert SweepOutcome(Path("."), [bad], search=True).exit_status == 1      # no valid trial
    assert SweepOutcome(Path("."), []).exit_status == 1                     # no record at all
    assert SweepOutcome(Path("."), [ok, bad]).failed == ["1"]
    # points run in this process may fail without a record (e.g. refusing to overwrite one)
    assert SweepOutcome(Path("."), [ok]).exit_status_with([0, 2]) == 2
    assert SweepOutcome(Path("."), [ok, bad]).exit_status_with([0, 2]) == 1
    assert SweepOutcome(Path("."), [ok, bad], search=True).exit_status_with([2]) == 0
    assert SweepOutcome(Path("."), []).exit_status_with([2]) == 2


def test_summarize_returns_the_outcome_and_the_callback_exits_with_it(tmp_path, capsys):
    _put(tmp_path / "a" / "0", _rec(status="wrong_result"))
    outcome = summarize(tmp_path)
    assert outcome.failed == ["a/0"] and outcome.exit_status == 1
    assert (tmp_path / "summary.csv").is_file() and "1 failed" in capsys.readouterr().out
    from omegaconf import OmegaConf
    cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}, "sweeper": {"_target_": "basic"}}})
    (tmp_path / "summary.csv").unlink()
    with pytest.raises(SweepFinished) as info:
        sweep.SweepSummary().on_multirun_end(cfg)
    assert info.value.code == 1 and info.value.outcome.failed == ["a/0"]
    assert isinstance(info.value, SystemExit) and not isinstance(info.value, Exception)  # Hydra lets it pass


def test_the_summary_with_stdout_closed_keeps_the_sweeps_exit_status(tmp_path, monkeypatch):
    """``gemmlab -m ... >&-`` (stdout closed: ``sys.stdout`` is None): the summary's flush raised,
    Hydra only warned, and the sweep exited 2 instead of its records' status (a new-user trial)."""
    from omegaconf import OmegaConf
    _put(tmp_path / "0", _rec(status="wrong_result"))
    monkeypatch.setattr(sys, "stdout", None)
    cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}, "sweeper": {"_target_": "basic"}}})
    with pytest.raises(SweepFinished) as info:
        sweep.SweepSummary().on_multirun_end(cfg)
    assert info.value.code == 1 and (tmp_path / "summary.csv").is_file()


def test_a_failing_summary_fails_the_sweep(tmp_path, monkeypatch, capsys):
    from omegaconf import OmegaConf
    _put(tmp_path / "0", _rec())
    monkeypatch.setattr(summary, "write_summary", lambda d: 1 / 0)
    cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}, "sweeper": {"_target_": "basic"}}})
    with pytest.raises(SweepFinished) as info:
        sweep.SweepSummary().on_multirun_end(cfg)
    assert info.value.code == 1 and "summary of" in capsys.readouterr().err


def test_no_module_level_outcome_channels():
    for name in ("FAILED_POINTS", "SEARCH"):
        assert not hasattr(sweep, name), name


#: a sweep over one valid and one invalid tile set (kernel.TM=3 breaks the tile rules), in a nested subdir layout
FAILING_NESTED = ["kernel=tiled", "kernel.TM=3,8", "mode=compile",
                  "hydra.sweep.subdir=${kernel.name}/TM${kernel.TM}/${hydra.job.num}"]


@pytest.fixture(scope="module")
def joblib_2_workers_failing_sweep(tmp_path_factory, cli):
    """``(proc, sweep_dir)`` of :data:`FAILING_NESTED` through joblib with 2 workers, run once for the
    module: test_nested_subdir_sweep_fails_when_a_point_failed[joblib_2_workers] and
    test_launcher_reports_failed_point[joblib_2_workers] both read it (a start of the command,
    Hydra and two loky workers less). Each point runs in its loky worker (``isolation.process=false``,
    not part of the folder names): what is checked is the launcher's and the summary's word on a
    point that failed in another process, and a point worker under each loky worker would add an
    interpreter start and its imports (test_launcher_runs_compile_sweep[joblib_2_workers] keeps them)."""
    tmp = tmp_path_factory.mktemp("joblib2fail")
    sweep_dir = tmp / "sw"
    proc = cli(["-m", *LAUNCHERS["joblib_2_workers"], *FAILING_NESTED, "isolation.process=false",
                f"hydra.sweep.dir={sweep_dir}"], tmp,
               in_process=False)  # joblib's worker processes are started from a real command
    return proc, sweep_dir


@pytest.mark.parametrize("launcher", ["in_process", "joblib_2_workers"])
def test_nested_subdir_sweep_fails_when_a_point_failed(tmp_path, cli, launcher, joblib_2_workers_failing_sweep):
    """A point that fails in a worker process still fails the sweep, in a nested subdir layout."""
    if launcher == "joblib_2_workers":
        proc, sweep_dir = joblib_2_workers_failing_sweep
    else:
        sweep_dir = tmp_path / "sw"
        proc = cli(["-m", *FAILING_NESTED, f"hydra.sweep.dir={sweep_dir}"], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    with open(sweep_dir / "summary.csv", newline="") as f:
        rows = [(r["point"], r["status"]) for r in csv.DictReader(f)]
    assert rows == [("tiled/TM3/0", "invalid"), ("tiled/TM8/1", "compiled")]
    assert "2 points: 0 verified and timed, 1 compiled only, 1 failed" in proc.stdout


# --- the progress label and the summary table on a terminal -----------------------------------

class FakeBar:
    def __init__(self):
        self.descriptions = []

    def update(self, task, description):
        self.descriptions.append(description)

def test_progress_label_is_the_job_number():
    progress = sweep.SweepProgress()
    progress.bar, progress.task, progress.done = FakeBar(), 0, 0
    for num in (0, 1):
        cfg = OmegaConf.create({"hydra": {"job": {"num": num}, "overrides": {"task": [f"kernel={['naive', 'tiled'][num]}"]}}})
        progress.on_job_start(cfg)
        progress.done += 1
    assert progress.bar.descriptions == ["point #0: kernel=naive", "point #1: kernel=tiled"]

def test_progress_line_says_what_each_point_left(tmp_path, capsys):
    """The plain progress line names the outcome: ``done`` for a valid record, ``failed
    (<status>)``, ``skipped (...)`` where the job kept an earlier record (resume=true or a refusal)
    instead of ``done`` for every point (a new-user trial)."""
    import os
    progress = sweep.SweepProgress()
    progress.bar, progress.total, progress.done, progress.started = None, 5, 0, time.perf_counter()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "result.json").write_text(json.dumps({"status": "ok", "valid": True}))
    os.utime(kept / "result.json", ns=(time.time_ns() - 10**10, time.time_ns() - 10**10))  # 10 s before the job
    cases = {"ok": {"status": "compiled", "valid": True}, "bad": {"status": "compile_error", "valid": False},
             "resumed": {"status": "ok", "valid": True, "resumed": True, "resumed_from": "3"}}
    for name, record in [*cases.items(), ("kept", None), ("empty", None)]:
        cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(tmp_path / name)},
                                          "overrides": {"task": [f"point={name}"]}}})
        progress.on_job_start(cfg)
        if record is not None:
            (tmp_path / name).mkdir()
            (tmp_path / name / "result.json").write_text(json.dumps(record))
        progress.on_job_end(cfg, None)
    lines = capsys.readouterr().err.splitlines()
    assert [l.split(" (")[0] if "failed" not in l and "skipped" not in l else l.split(": point")[0] for l in lines] == [
        "[1/5] done: point=ok", "[2/5] failed (compile_error)", "[3/5] skipped (resume=true)",
        "[4/5] skipped (kept its earlier record)", "[5/5] no record: point=empty"], lines


def make_sweep(root, n=3):
    for i in range(n):
        (root / str(i)).mkdir(parents=True)
        rec = {"status": "wrong_result" if i == 1 else "ok", "kernel": {"name": "ladder_strip", "params":
               {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}}, "shape": {"M": 4096, "N": 4096, "K": 4096},
               "timing": {"median_ms": 1.23456, "gflops": 40000.0},
               "ratio_to_baseline": {"median_time": 1.5, "baseline": "cublas"},
               "verification": {"max_abs_error": 0.001},
               "error": "wrong result from ladder_strip: FAIL (bound): max abs err 3, 17 mismatches" if i == 1 else None}
        (root / str(i) / "result.json").write_text(json.dumps(rec))

def test_summary_table_fits_an_80_column_terminal(tmp_path):
    make_sweep(tmp_path)
    out = io.StringIO()
    rows = summary.write_summary(tmp_path, console=Console(file=out, width=80, force_terminal=True, color_system=None))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert sum("ladder_strip" in line for line in lines) == len(rows) == 3  # one line per point
    assert any("wrong_result" in line for line in lines)
    assert "BM=128 BN=128 BK=8 TM=8 TN=8" in (tmp_path / "summary.md").read_text()  # every column kept there

def test_summary_table_is_whole_in_a_log_file(tmp_path):
    make_sweep(tmp_path)
    out = io.StringIO()
    summary.write_summary(tmp_path, console=Console(file=out, width=80))
    assert "vs_baseline" in out.getvalue() and "1.500x cublas" in out.getvalue()


# --- the Optuna experiment --------------------------------------------------------------------

OPTUNA_PARAMS = {"kernel.BM", "kernel.BN", "kernel.BK", "kernel.TM", "kernel.TN"}

def _summary(sweep: Path) -> list[dict]:
    with open(sweep / "summary.csv", newline="") as f:
        return list(csv.DictReader(f))

def _statuses(sweep: Path) -> dict[str, str]:
    return {p.parent.name: json.loads(p.read_text())["status"] for p in sweep.glob("*/result.json")}

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

#: trials of the search run below and the sampler's seed: with seed 239 the first trial is an invalid
#: tile set and the next two valid ones (so the search survives a failed trial, and a failed trial
#: counted as a value, the 0.0 of a compile-only point, would be the best: it comes first). The
#: experiment's own seed 0 (checked above) needs 4 trials for that, whose two valid tile sets
#: (BK=32 TM=8 TN=8: 2048 unrolled FFMAs a thread) take about 3 CPU s more of NVRTC than seed 239's
#: two small ones (BK*TM*TN = 128 each); the seed is incidental to what the tests below check
OPTUNA_TRIALS = 3
OPTUNA_SEED = 239

@pytest.fixture(scope="module")
def optuna_run(tmp_path_factory, cli):
    tmp = tmp_path_factory.mktemp("optuna")
    sweep = tmp / "opt"
    proc = cli(["experiment=optuna_tiled", "mode=compile", f"hydra.sweeper.n_trials={OPTUNA_TRIALS}",
                f"hydra.sweeper.sampler.seed={OPTUNA_SEED}", f"hydra.sweep.dir={sweep}"], tmp)
    return proc, sweep

def test_optuna_search_cli(optuna_run):
    proc, sweep = optuna_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    assert "alembic" not in out  # Optuna's database layer's INFO lines are not gemmlab's to show
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    best = results["best_params"]
    assert set(best) == OPTUNA_PARAMS
    params = {k.split(".")[1]: int(v) for k, v in best.items()}
    load_registry().get("tiled").check(Shape(2048, 2048, 2048), params, gemmlab.gpu.device.offline_facts("90"))
    assert results["best_value"] == 0.0  # compile-only trials: valid, no speed known

    statuses = _statuses(sweep)
    assert len(statuses) == OPTUNA_TRIALS
    assert set(statuses.values()) <= {"compiled", "invalid"}
    invalid = sorted(k for k, v in statuses.items() if v == "invalid")
    assert invalid, f"seed {OPTUNA_SEED} with {OPTUNA_TRIALS} trials must hit an invalid tile set"
    assert len(invalid) < OPTUNA_TRIALS - 1, "and at least two valid ones, to pick the best among"
    # the best trial is one of the valid ones
    best_dirs = [p.parent.name for p in sweep.glob("*/result.json")
                 if json.loads(p.read_text()).get("kernel", {}).get("params") == params]
    assert best_dirs and all(statuses[d] == "compiled" for d in best_dirs)

    rows = _summary(sweep)
    assert len(rows) == OPTUNA_TRIALS
    assert sorted(r["point"] for r in rows if r["status"] == "invalid") == invalid
    for r in rows:
        if r["status"] == "invalid":
            assert r["error"].startswith("kernel."), r
    m = re.search(r"(\d+) pruned", proc.stdout)
    assert m and int(m.group(1)) == len(invalid), proc.stdout
    assert f"{OPTUNA_TRIALS} trials" in proc.stdout
    assert not (sweep / "best.txt").exists()  # no timed point, so no best verified point

def test_optuna_failed_trials_are_failed_for_the_sweeper(optuna_run):
    proc, sweep = optuna_run
    # Hydra's Optuna sweeper marks a None return as a failed trial (never best), in gemmlab's words
    out = proc.stdout + proc.stderr
    invalid = sum(v == "invalid" for v in _statuses(sweep).values())
    assert "float-castable" not in out and invalid > 0
    assert out.count("Failed experiment: the point gave no valid measurement (its error is above)") == invalid


# --- best_row / count_jobs --------------------------------------------------------------------

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

def test_count_jobs_expands_a_kernel_glob():
    """``kernel=glob(*ladder*)``: the progress lines said ``[1/?]``; the glob is matched against the
    kernel group's options, as Hydra does (a glob over another group stays unknown)."""
    cfg = OmegaConf.create({"hydra": {"sweeper": {"_target_": BASIC, "params": None},
                                      "overrides": {"task": ["kernel=glob(*ladder*)", "shape=[8,8,8],[16,16,16]"]}}})
    assert count_jobs(cfg) == 3 * 2  # ladder_starter, ladder_strip, ladder_tile2d
    cfg.hydra.overrides.task = ["kernel=glob(sgemm_*,exclude=sgemm_block2d)"]
    assert count_jobs(cfg) == 2  # sgemm_warptile, sgemm_pipelined
    cfg.hydra.overrides.task = ["timing=glob(*)"]
    assert count_jobs(cfg) is None


def test_count_jobs_resolves_a_sweep_a_resolver_gives():
    """experiment=shapes sweeps ``shape: ${gemmlab_suite:}``: counted unresolved it was one value,
    and the progress lines went [1/1], [2/1], ... with a negative ETA (a second trial)."""
    from gemmlab.cli.app import register_resolvers
    register_resolvers()
    cfg = OmegaConf.create({"hydra": {"sweeper": {"_target_": BASIC, "params": {"shape": "${gemmlab_suite:tiny}"}},
                                      "overrides": {"task": ["kernel=naive,tiled"]}}})
    assert count_jobs(cfg) == 6 * 2


def test_count_jobs_grid_without_sweeper_params():
    for params in (None, {}):
        cfg = OmegaConf.create({"hydra": {"sweeper": {"_target_": BASIC, "params": params},
                                          "overrides": {"task": ["kernel=naive,tiled", "mode=compile"]}}})
        assert count_jobs(cfg) == 2


# --- progress lines ---------------------------------------------------------------------------

DONE = re.compile(r"\[(\d+)/(\d+|\?)\] done: ")

@pytest.fixture
def seed_lab_run(seed_lab_sweep):
    """``(proc, sweep_dir)`` of the session's ``experiment=seed_lab mode=compile`` run (conftest's
    ``seed_lab_sweep``, also read by tests/test_cli.py)."""
    proc, _, sweep = seed_lab_sweep
    assert sweep is not None, proc.stdout + proc.stderr
    return proc, sweep

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


# --- launchers --------------------------------------------------------------------------------

LAUNCHERS = {"submitit_local": ["hydra/launcher=gemmlab_local"],
             "joblib": ["hydra/launcher=gemmlab_gpus"],  # n_jobs = GPU count, at least 1
             "joblib_2_workers": ["hydra/launcher=gemmlab_gpus", "hydra.launcher.n_jobs=2"]}

#: launchers whose sweep runs in the test process (submitit's local jobs are fresh interpreters
#: started per point; joblib with one job runs the points in the calling process); joblib with 2
#: workers (loky's reusable worker processes) is started from a real command
IN_PROCESS_LAUNCHERS = {"submitit_local", "joblib"}


#: seconds between two checks of the test process on a submitit job being done (submitit's own: 1)
SUBMITIT_POLL_S = 0.05


@pytest.fixture
def quick_submitit_polls(monkeypatch, launcher):
    """Under submitit's local launcher, its ``Job.wait`` (what Hydra's launcher waits on, through
    ``job.results()``) checks whether the job's result file is there every SUBMITIT_POLL_S s
    instead of every second: the test then ends when the jobs do, not up to a second later, and
    a check is a stat of one file. The jobs, their processes and what they leave are submitit's own."""
    if launcher == "submitit_local":
        from submitit.core import core

        def wait(self) -> None:
            while not self.done():
                time.sleep(SUBMITIT_POLL_S)
        monkeypatch.setattr(core.Job, "wait", wait)


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_launcher_runs_compile_sweep(cli, tmp_path, launcher, quick_submitit_polls):
    sweep = tmp_path / "sw"
    proc = cli(["-m", *LAUNCHERS[launcher], "kernel=naive,tiled", "mode=compile",
                f"hydra.sweep.dir={sweep}"], tmp_path, in_process=launcher in IN_PROCESS_LAUNCHERS)
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
def test_launcher_reports_failed_point(cli, tmp_path, launcher, joblib_2_workers_failing_sweep, quick_submitit_polls):
    """A failing point in a worker process still fails the sweep (the summary reads the files).
    joblib with 2 workers: the module's run of that sweep (nested layout,
    :func:`joblib_2_workers_failing_sweep`); submitit: its own run (flat layout), each point in its
    submitit job's process (``isolation.process=false``: a point worker under each job would add an
    interpreter start; test_launcher_runs_compile_sweep[submitit_local] keeps them)."""
    if launcher == "joblib_2_workers":
        proc, sweep = joblib_2_workers_failing_sweep
    else:
        sweep = tmp_path / "sw"
        proc = cli(["-m", *LAUNCHERS[launcher], "kernel=tiled", "kernel.TM=3,8", "mode=compile",
                    "isolation.process=false", f"hydra.sweep.dir={sweep}"], tmp_path,
                   in_process=launcher in IN_PROCESS_LAUNCHERS)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    statuses = [json.loads(p.read_text())["status"] for p in sweep.rglob("result.json")]
    assert sorted(statuses) == ["compiled", "invalid"]



def test_a_file_in_a_points_place_under_joblib_workers_is_one_line(cli, tmp_path):
    """Under a launcher whose points run in other processes (joblib's loky workers), Hydra's
    run_job in the worker met a file where point #0's folder goes and the sweep ended with the
    worker's traceback (FileExistsError: 'S/0'); gemmlab's in-process guard cannot make that cost
    one point there, so it is one line naming the file, and the sweep stops (exit 2)."""
    sweep = tmp_path / "S"
    sweep.mkdir()
    (sweep / "0").write_text("not a folder")
    proc = cli(["-m", *LAUNCHERS["joblib_2_workers"], "kernel=naive,tiled", "mode=compile", "hydra.sweep.dir=S"],
               tmp_path, in_process=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "gemmlab: error: hydra.sweep.dir: S/0 is a file, not a folder; give a folder gemmlab can create and write; "
        "the sweep stopped there (its points run in other processes: the points that finished keep their records)")
    assert (sweep / "0").read_text() == "not a folder"

# --- gemmlab's sweeper (hydra_plugins/gemmlab_sweeper): each job composed once ----------------------

def _job_files(sweep: Path) -> dict[str, str]:
    """Each job's ``.hydra/config.yaml`` and ``overrides.yaml`` (by job folder) of a sweep."""
    return {f"{p.parent.parent.name}/{p.name}": p.read_text()
            for name in ("config.yaml", "overrides.yaml") for p in sorted(sweep.glob(f"*/.hydra/{name}"))}


def test_gemmlab_sweeper_gives_each_job_hydras_config(cli, tmp_path):
    """The sweeper that hands the batch check's composed configs to the launcher gives every job
    the config Hydra's own basic sweeper composes for it (the same files, in every job folder), and
    is the default of a plain sweep."""
    common = ["-m", "kernel=naive", "kernel.BX=7,8", "mode=compile", "verify.tolerance=exact"]  # each point invalid
    ours, basic = tmp_path / "ours", tmp_path / "basic"
    for extra, sweep_dir in (([], ours), (["hydra/sweeper=basic"], basic)):
        proc = cli([*common, *extra, f"hydra.sweep.dir={sweep_dir}"], tmp_path)
        assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr  # exact: invalid
    assert len(_job_files(ours)) == 4 and _job_files(ours) == _job_files(basic)
    hydra = yaml.safe_load((ours / "0" / ".hydra" / "hydra.yaml").read_text())["hydra"]
    assert hydra["sweeper"]["_target_"] == "hydra_plugins.gemmlab_sweeper.GemmlabSweeper"
    assert hydra["runtime"]["choices"]["hydra/sweeper"] == "gemmlab"


def test_a_job_that_does_not_compose_refuses_the_sweep_before_any_point(cli, tmp_path):
    """Hydra's batch check stays: the second job's config does not compose (an unknown timing option
    that gemmlab's pre-check leaves to Hydra under --config-dir), so no point runs, not even the
    first: one line, exit 2."""
    sweep_dir = tmp_path / "sw"
    (tmp_path / "extra").mkdir()
    proc = cli(["-m", "-cd", tmp_path / "extra", "kernel=naive", "mode=compile", "shape=[8,8,8]", "timing=seed,nope",
                f"hydra.sweep.dir={sweep_dir}"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == ["gemmlab: error: timing: unknown option 'nope'; available: adaptive, "
                                                "cold, graph, seed"], proc.stderr
    assert not list(sweep_dir.glob("*/result.json")) and not (sweep_dir / "0").exists()


def test_console_table_keeps_square_brackets(tmp_path):
    """Cells are plain text, not rich markup: ``pip install 'gemmlab[cublas]'`` stays whole."""
    import io

    from rich.console import Console
    _put(tmp_path / "0", _rec(status="unavailable", error="install the extra: pip install 'gemmlab[cublas]'"))
    buf = io.StringIO()
    summary.write_summary(tmp_path, console=Console(file=buf, width=200))
    assert "gemmlab[cublas]" in buf.getvalue()


def test_summary_names_precision_and_layout_only_when_they_vary(tmp_path):
    _put(tmp_path / "a" / "0", _rec())
    summary.write_summary(tmp_path / "a", console=None)
    assert "precision" not in (tmp_path / "a" / "summary.md").read_text().splitlines()[0]
    _put(tmp_path / "b" / "0", _rec())
    _put(tmp_path / "b" / "1", _rec(config={"kernel": {"name": "tiled"}, "shape": [8, 8, 8], "precision": "tf32",
                                             "layout": {"a": "row", "b": "col"}}))
    import io

    from rich.console import Console
    buf = io.StringIO()
    summary.write_summary(tmp_path / "b", console=Console(file=buf, width=200))
    md = (tmp_path / "b" / "summary.md").read_text().splitlines()
    assert md[0].startswith("| point | kernel | shape | precision | layout |")
    assert "| fp32 | row/row |" in md[2] and "| tf32 | row/col |" in md[3]
    with open(tmp_path / "b" / "summary.csv") as f:
        assert [r["layout"] for r in csv.DictReader(f)] == ["row/row", "row/col"]
    assert "row/col" in buf.getvalue()


def test_a_foreign_result_json_is_no_point_of_the_sweep(tmp_path):
    """A JSON object that is no gemmlab record (another tool's result.json) is not counted."""
    _put(tmp_path / "0", _rec())
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "result.json").write_text("{}")
    rows = collect(tmp_path)
    assert [r["point"] for r in rows] == ["0"] and rows[0]["status"] == "compiled"


def test_a_refused_point_shows_its_shape_as_the_others_do(tmp_path):
    """A refused point's record has no validated shape, only the config's list: the summary still
    writes it MxNxK like the measured points (it wrote "[256, 256, 256]"); a malformed one as given."""
    _put(tmp_path / "0", _rec())
    bad = _rec(status="invalid", config={"kernel": {"name": "tiled"}, "shape": [256, 256, 256]})
    bad.pop("shape")
    _put(tmp_path / "1", bad)
    odd = _rec(status="invalid", config={"kernel": {"name": "tiled"}, "shape": [64, -1, 64]})
    odd.pop("shape")
    _put(tmp_path / "2", odd)
    assert [r["shape"] for r in collect(tmp_path)] == ["8x8x8", "256x256x256", "[64, -1, 64]"]


EXCLUDE_BX = "hydra.job.config.override_dirname.exclude_keys=[kernel.BX]"


SUBDIR_REFUSALS = [
    ("${hydra.job.name}", "names the same folder for every point of the sweep"),
    ("${now:%Y}", "names the same folder for every point of the sweep"),
    ("${hydra.job.num}/..", "puts points in the sweep's folder itself"),
    ("../up${hydra.job.num}", "puts points outside the sweep's folder"),
    ("{abs}/${hydra.job.num}", "puts points outside the sweep's folder"),
    ("${hydra.job.override_dirname}", "gives point #0 and point #1 the same folder"),  # BX left out of the name
    ("summary.md/${hydra.job.num}", "puts points under summary.md, a file of the sweep's own"),  # its summary failed
]


@pytest.mark.parametrize("sweeper, subdir, says", [
    (sweeper, subdir, says) for sweeper in ("gemmlab", "basic") for subdir, says in SUBDIR_REFUSALS])
def test_a_subdir_that_resolves_to_a_shared_or_outside_folder_is_refused_before_any_point(cli, tmp_path, subdir, says,
                                                                                         sweeper):
    """One folder for two points (the second found the first's result, Hydra rewrote that folder's
    .hydra/, the progress line said done) or a folder outside the sweep (its summary then found
    nothing) is one line, exit 2, and no point runs (a new-user trial): what the subdir's text
    tells, for every sweeper, before Hydra starts; what only each job's resolved folder tells
    (override_dirname without the swept key), by gemmlab's sweeper before any job runs."""
    outside = tmp_path / "abs"
    proc = cli(["-m", f"hydra/sweeper={sweeper}", "kernel=naive", "kernel.BX=16,32", "mode=compile", EXCLUDE_BX,
                f"hydra.sweep.dir={tmp_path / 'sw'}", "hydra.sweep.subdir=" + subdir.replace("{abs}", str(outside))],
               tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.startswith("gemmlab:")]
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: hydra.sweep.subdir: ") and says in lines[0], lines
    assert not list(tmp_path.rglob("result.json")) and not outside.exists() and not (tmp_path / "up0").exists()
    assert not (tmp_path / "sw").exists()  # the folder the refused sweep made is not left behind


def test_a_sweep_into_the_working_directory_is_not_taken_for_one_outside_it(cli, tmp_path):
    """``hydra.sweep.dir=.``: the points' folders 0 and 1 lie inside it (a second trial found it refused
    as 'outside the sweep folder .')."""
    proc = cli(["-m", "kernel=naive,tiled", "mode=compile", "shape=[8,8,8]", "hydra.sweep.dir=."], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "0" / "result.json").is_file() and (tmp_path / "1" / "result.json").is_file()


def test_a_refused_sweep_leaves_a_folder_it_did_not_make_and_anything_more_as_it_was(cli, tmp_path):
    """Only a folder this command made, holding only its lock and multirun.yaml, is removed after a
    refusal; a folder the user made before, or one with anything else in it, stays."""
    from gemmlab.run import folders
    made_before = tmp_path / "mine"
    made_before.mkdir()
    proc = cli(["-m", "kernel=naive,tiled", "mode=compile", f"hydra.sweep.dir={made_before}",
                "hydra.sweep.subdir=${hydra.job.name}"], tmp_path)
    assert proc.returncode == 2 and made_before.is_dir()
    busy = tmp_path / "busy"
    handle = folders.claim(busy, "hydra.sweep.dir")
    (busy / "notes.txt").write_text("mine")
    assert not folders.discard_refused_sweep(busy) and (busy / "notes.txt").exists()
    handle.close()


@pytest.mark.parametrize("value, says", [
    ("range(5,1)", "range(5,1) gives no value, so the sweep would run no point"),
    ("range(2,4),8", "Hydra does not expand a range or choice inside a comma list"),
])
def test_a_sweep_value_hydra_would_mishandle_is_one_line_before_any_folder(cli, tmp_path, value, says):
    """``kernel.TM=range(5,1)``: Hydra launched 0 jobs, left a folder with its lock and exited 1 with
    'no result.json found'; ``range(2,4),8``: Hydra failed with 'tags: Unexpected type annotation:
    Set[str]'. Both: one line naming the field, exit 2, no folder."""
    proc = cli(["-m", "kernel=tiled", f"kernel.TM={value}", "mode=compile", f"hydra.sweep.dir={tmp_path / 'sw'}"],
               tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: kernel.TM: ") and says in lines[0], lines
    assert not (tmp_path / "sw").exists()


def _tree(folder: Path) -> dict:
    """Every file under ``folder`` (relative name -> bytes) but the lock, which names the last command."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".gemmlab.lock"}


@pytest.mark.parametrize("refusal", [["hydra.sweep.subdir=${hydra.job.override_dirname}", EXCLUDE_BX],
                                     ["+hydra.sweeper.foo=1"]], ids=["shared-subdir", "sweeper-argument"])
def test_a_sweep_refused_in_an_earlier_sweeps_folder_leaves_it_as_it_was(cli, tmp_path, refusal):
    """resume=true into an earlier sweep's folder, refused before any point ran (two points given one
    folder; an argument the sweeper does not take, refused when Hydra makes the sweeper): the
    earlier multirun.yaml and each point's .hydra were moved aside at the start and stayed so (a
    new-user trial found the refused command's multirun.yaml in their place); now the folder is
    byte for byte what it was. In a new folder the refusal leaves none (the sweeper's argument
    left one holding only .gemmlab.lock)."""
    sweep = tmp_path / "sw"
    first = cli(["-m", "kernel=naive", "kernel.BX=16,32", "mode=compile", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    before = _tree(sweep)
    proc = cli(["-m", "kernel=naive", "kernel.BX=16,8", "mode=compile", f"hydra.sweep.dir={sweep}", "resume=true",
                *refusal], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert _tree(sweep) == before
    proc = cli(["-m", "kernel=naive", "kernel.BX=16,8", "mode=compile", f"hydra.sweep.dir={tmp_path / 'new'}",
                *refusal], tmp_path)
    assert proc.returncode == 2 and not (tmp_path / "new").exists(), proc.stdout + proc.stderr


def test_hydras_basic_sweeper_refuses_points_sharing_a_folder_before_any_point(cli, tmp_path):
    """``hydra/sweeper=basic`` resolves no job folder before its jobs as gemmlab's sweeper does: with
    a subdir whose text cannot tell (``${kernel.name}`` over a sweep of shapes) the first point ran
    and the second was refused as it started (a new-user trial). The launcher gets the whole
    batch, so now the batch is refused before any point runs, as with gemmlab's sweeper: one line,
    exit 2, no record, no folder left."""
    sweep = tmp_path / "sw"
    proc = cli(["-m", "hydra/sweeper=basic", "kernel=tiled", "shape=[63,65,33],[31,33,20]", "mode=compile",
                f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${kernel.name}"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.startswith("gemmlab:")]
    assert len(lines) == 1 and "gives point #0 and point #1 the same folder" in lines[0], lines
    assert "Launching" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.rglob("result.json")) and not sweep.exists()


@pytest.mark.parametrize("sweeper", ["gemmlab", "basic"])
def test_a_constant_subdir_is_fine_for_a_one_point_sweep(cli, tmp_path, sweeper):
    """A constant ``hydra.sweep.subdir`` gives every point one folder, so a sweep of several points is
    refused (above); a multirun of one point (nothing swept, no experiment, a grid sweeper) has no
    second point to collide with: it runs into that folder (it was refused, a new-user trial)."""
    sweep = tmp_path / "sw"
    proc = cli(["-m", f"hydra/sweeper={sweeper}", "kernel=naive", "mode=compile", "shape=[8,8,8]",
                f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=one"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((sweep / "one" / "result.json").read_text())["status"] == "compiled"
    assert "1 point: 0 verified and timed, 1 compiled only, 0 failed" in proc.stdout
    proc = cli(["-m", f"hydra/sweeper={sweeper}", "kernel=naive", "kernel.BX=16,32", "mode=compile",
                f"hydra.sweep.dir={tmp_path / 'sw2'}", "hydra.sweep.subdir=one"], tmp_path)
    assert proc.returncode == 2 and "names the same folder for every point" in proc.stderr, proc.stderr
    assert not (tmp_path / "sw2").exists()


@pytest.mark.parametrize("sweeper", ["gemmlab", "basic"])
def test_a_subdir_reaching_a_sweep_file_only_once_resolved_is_refused(cli, tmp_path, sweeper):
    """``summary.md/${hydra.job.num}`` is refused from its text; the same folder reached through an
    interpolation (``${oc.env:SUB}/${hydra.job.num}`` with SUB=summary.md) passes that check, so
    the check of each resolved point folder (gemmlab's sweeper: before any point; Hydra's basic:
    as the point starts) refuses it too: one line, exit 2, no record under summary.md."""
    sweep = tmp_path / "sw"
    proc = cli(["-m", f"hydra/sweeper={sweeper}", "kernel=naive", "kernel.BX=16,32", "mode=compile",
                f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${oc.env:SUB}/${hydra.job.num}"], tmp_path,
               env={"SUB": "summary.md"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.startswith("gemmlab:")]
    assert len(lines) == 1 and "under summary.md, a file of the sweep's own" in lines[0], lines
    assert "Traceback" not in proc.stderr
    assert not list(sweep.rglob("result.json"))


# The xdist worker that runs the module's Optuna search (optuna_run) runs this one too: importing
# Hydra's Optuna sweeper (Optuna with SciPy, SQLAlchemy, Alembic, matplotlib) costs about 2.5 CPU s
# a process, paid once there instead of in both workers; the test itself is unchanged.
@pytest.mark.xdist_group(f"{__name__}::optuna_run")
def test_a_search_whose_every_trial_failed_is_one_line_with_its_summary(cli, tmp_path):
    """Every Optuna trial invalid: the sweeper's ``study.best_trial`` raised Optuna's
    'No trials are completed yet.' (a traceback, exit 1). Now the summary of the failed trials,
    one line saying no trial gave a measurement, exit 1."""
    sweep = tmp_path / "opt"
    proc = cli(["experiment=optuna_tiled", "mode=compile", "hydra.sweeper.n_trials=2",
                'hydra.sweeper.params={kernel.TM:"choice(3,5)"}', f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "2 trials: 0 verified and timed, 0 compiled only, 2 pruned as failed trials" in proc.stdout
    assert "optimizer:" not in proc.stdout  # Optuna wrote no optimization_results.yaml
    lines = [l for l in proc.stderr.splitlines() if l.startswith("gemmlab:") and "kernel.TM: " not in l]
    assert lines == ["gemmlab: error: hydra.sweeper: no trial of the search gave a valid measurement (each failed "
                     "or was invalid; the summary above says why), so there is no best one"], proc.stderr
    assert (sweep / "summary.md").is_file() and len(list(sweep.glob("*/result.json"))) == 2


def make_compile_sweep(root, modes=("compile", "compile", "compile")):
    for i, mode in enumerate(modes):
        (root / str(i)).mkdir(parents=True)
        rec = {"status": "compile_error" if i == 1 else "compiled", "mode": mode,
               "kernel": {"name": "mytile", "params": {"TILE": 32, "RPT": 4}}, "shape": {"M": 256, "N": 256, "K": 256},
               "config": {"mode": mode}, "launch": {"shared_bytes": 1024},
               "compile": None if i == 1 else {"resources": {"registers": 40, "spill_store_bytes": 8, "spill_load_bytes": 4,
                                                             "stack_frame_bytes": 0, "static_shared_bytes": 8192}},
               "occupancy": None if i == 1 else {"theoretical_occupancy": 0.75},
               "error": "NVRTC failed on mytile.cu" if i == 1 else None}
        (root / str(i) / "result.json").write_text(json.dumps(rec))


def test_compile_only_summary_shows_what_compiling_reports(tmp_path):
    """A mode=compile sweep's summary had only empty timing columns (new-user trial 22): it has the
    registers, spills, shared memory per block and occupancy of each compiled point instead."""
    make_compile_sweep(tmp_path)
    rows = summary.write_summary(tmp_path, console=Console(file=io.StringIO(), width=200))
    header = (tmp_path / "summary.csv").read_text().splitlines()[0].split(",")
    assert header == ["point", "kernel", "shape", "params", "status", "registers", "spills", "smem_bytes", "occupancy",
                      "error"]
    with open(tmp_path / "summary.csv") as f:
        first, failed = list(csv.DictReader(f))[:2]
    assert (first["registers"], first["spills"], first["smem_bytes"], first["occupancy"]) == ("40", "8/4", "9216", "0.75")
    assert failed["registers"] == "" and failed["status"] == "compile_error"
    assert "| 40 | 8/4 | 9216 | 0.75 |" in (tmp_path / "summary.md").read_text()
    out = io.StringIO()
    summary.write_summary(tmp_path, console=Console(file=out, width=80, force_terminal=True, color_system=None))
    assert all(len(line) <= 80 for line in out.getvalue().splitlines()) and "registers" in out.getvalue()
    assert len(rows) == 3


def test_sweep_of_runs_and_compiles_keeps_timing_and_adds_compile_columns(tmp_path):
    make_compile_sweep(tmp_path, modes=("run", "compile", "compile"))
    cols = summary.columns(summary.collect(tmp_path))
    assert set(summary.TIMING_COLUMNS) <= set(cols) and cols.index("occupancy") < cols.index("error")
    make_sweep(tmp_path / "runs")
    assert summary.columns(summary.collect(tmp_path / "runs")) == summary.COLUMNS  # a run sweep's summary as it was


@pytest.mark.parametrize("line, batch", [(["a=1,2", "b=x,y,z", "c=3"], None), (["a=1,2", "b=range(0,5)", "a=7,8"], 3),
                                         (["kernel=naive,tiled", "shape=[1,2,3],[4,5,6]"], 1)])
def test_gemmlabs_grid_is_hydras_basic_sweep(line, batch):
    """gemmlab's sweeper expands a sweep on Hydra's public override API
    (hydra_plugins.gemmlab_sweeper.grid): the same jobs, order and batches as Hydra's BasicSweeper."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # the test may read Hydra's private class
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.gemmlab_sweeper import grid
    parsed = OverridesParser.create().parse_overrides(line)
    assert grid(parsed, batch) == BasicSweeper.split_arguments(parsed, batch)
