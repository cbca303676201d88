"""Sweep summaries find points in any ``hydra.sweep.subdir`` layout, leave a sanitizer child out,
and end the multirun with the exit status of the records on disk, whatever the launcher
(issue 11 item 5; issue 12 item 3: no module-level channel for the outcome)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gemmlab.cli import sweep
from gemmlab.cli.sweep import SweepFinished, SweepOutcome, collect, summarize


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


def test_a_failing_summary_fails_the_sweep(tmp_path, monkeypatch, capsys):
    from omegaconf import OmegaConf
    _put(tmp_path / "0", _rec())
    monkeypatch.setattr(sweep, "write_summary", lambda d: 1 / 0)
    cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}, "sweeper": {"_target_": "basic"}}})
    with pytest.raises(SweepFinished) as info:
        sweep.SweepSummary().on_multirun_end(cfg)
    assert info.value.code == 1 and "summary of" in capsys.readouterr().err


def test_no_module_level_outcome_channels():
    for name in ("FAILED_POINTS", "SEARCH"):
        assert not hasattr(sweep, name), name


@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=gemmlab_gpus", "hydra.launcher.n_jobs=2"]],
                         ids=["in_process", "joblib_2_workers"])
def test_nested_subdir_sweep_fails_when_a_point_failed(tmp_path, run_module, launcher):
    """A point that fails in a worker process still fails the sweep, in a nested subdir layout."""
    sweep_dir = tmp_path / "sw"
    proc = run_module("gemmlab", "-m", *launcher, "kernel=tiled", "kernel.TM=3,8", "mode=compile",
                      f"hydra.sweep.dir={sweep_dir}", "hydra.sweep.subdir=${kernel.name}/TM${kernel.TM}/${hydra.job.num}",
                      cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    with open(sweep_dir / "summary.csv", newline="") as f:
        rows = [(r["point"], r["status"]) for r in csv.DictReader(f)]
    assert rows == [("tiled/TM3/0", "invalid"), ("tiled/TM8/1", "compiled")]
    assert "2 points: 0 verified and timed, 1 compiled only, 1 failed" in proc.stdout


def test_console_table_keeps_square_brackets(tmp_path):
    """Cells are plain text, not rich markup: ``pip install 'gemmlab[cublas]'`` stays whole."""
    import io

    from rich.console import Console
    _put(tmp_path / "0", _rec(status="unavailable", error="install the extra: pip install 'gemmlab[cublas]'"))
    buf = io.StringIO()
    sweep.write_summary(tmp_path, console=Console(file=buf, width=200))
    assert "gemmlab[cublas]" in buf.getvalue()


def test_summary_names_precision_and_layout_only_when_they_vary(tmp_path):
    _put(tmp_path / "a" / "0", _rec())
    sweep.write_summary(tmp_path / "a", console=None)
    assert "precision" not in (tmp_path / "a" / "summary.md").read_text().splitlines()[0]
    _put(tmp_path / "b" / "0", _rec())
    _put(tmp_path / "b" / "1", _rec(config={"kernel": {"name": "tiled"}, "shape": [8, 8, 8], "precision": "tf32",
                                             "layout": {"a": "row", "b": "col"}}))
    import io

    from rich.console import Console
    buf = io.StringIO()
    sweep.write_summary(tmp_path / "b", console=Console(file=buf, width=200))
    md = (tmp_path / "b" / "summary.md").read_text().splitlines()
    assert md[0].startswith("| point | kernel | shape | precision | layout |")
    assert "| fp32 | row/row |" in md[2] and "| tf32 | row/col |" in md[3]
    with open(tmp_path / "b" / "summary.csv") as f:
        assert [r["layout"] for r in csv.DictReader(f)] == ["row/row", "row/col"]
    assert "row/col" in buf.getvalue()
