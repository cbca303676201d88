"""The per-family view (gemmlab.results.families) over real H200 records (tests/data/h200): grouping by the
suite's families, same-run percentages, geometric means, target verdicts, files, bad input."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from gemmlab.results import families
from gemmlab.errors import ConfigError

DATA = Path(__file__).resolve().parent / "data" / "h200"


def test_groups_by_family_with_same_run_ratios():
    points = families.collect([DATA])
    by = {(Path(p.path).parent.name): p for p in points}
    assert by["naive-256"].family == "tiny" and by["tiled-4096"].family == "square"
    ratio = json.loads((DATA / "naive-256" / "result.json").read_text())["ratio_to_baseline"]["median_time"]
    assert by["naive-256"].pct == pytest.approx(100 / ratio, rel=1e-6)
    assert by["cublas-256"].pct is None  # no baseline in that record
    assert not by["broken-tiled_drop_last_chunk"].valid
    rows, checks = families.summarize(points)
    tiny = next(r for r in rows if r.family == "tiny")
    expect = [100 / json.loads((DATA / n / "result.json").read_text())["ratio_to_baseline"]["median_time"]
              for n in ("naive-256", "tiled-256", "ladder_strip-256")]
    assert tiny.geomean_pct == pytest.approx(math.exp(sum(map(math.log, expect)) / 3))
    assert tiny.min_pct == pytest.approx(min(expect)) and tiny.min_shape == "256x256x256"
    assert checks["tiny_points"] == 3 and checks["valid"] == 12 and checks["no_baseline"] == 3
    assert not any(checks["verdicts"].values())  # the seed kernels meet none of issue 10's targets


def test_targets_pass_when_met(tmp_path):
    rec = json.loads((DATA / "naive-256" / "result.json").read_text())
    rec["timing"]["median_ms"] = rec["baseline"]["timing"]["median_ms"] * 0.9  # faster than cuBLAS
    for shape, name in (((1, 4096, 4096), "d"), ((256, 256, 256), "t")):
        rec["shape"] = dict(zip("MNK", shape))
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps(rec))
    points = families.collect([tmp_path])
    _, checks = families.summarize(points)
    assert all(checks["verdicts"].values()), checks["verdicts"]
    assert [p.family for p in points] == ["decode", "tiny"]


def test_targets_without_points_to_judge_say_no_data_not_fail(tmp_path, capsys):
    """Compile-only records (no timing, no baseline) and a suite without decode points: the targets
    they cannot judge are NO DATA, not FAIL (a new user's compile-mode trial read 5 FAILs)."""
    rec = json.loads((DATA / "naive-256" / "result.json").read_text())
    rec["status"] = "compiled"
    for key in ("timing", "baseline", "ratio_to_baseline"):
        rec.pop(key, None)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "result.json").write_text(json.dumps(rec))
    points = families.collect([tmp_path])
    _, checks = families.summarize(points)
    judged = checks["verdicts"]
    assert judged["geomean >= 90% of baseline"] is None and judged["decode M <= 16 every point >= 80%"] is None
    assert judged["tiny (M*N*K <= 256^3) time <= 1.5x baseline"] is None and judged["no point below 50%"] is None
    assert families.main([str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "NO DATA: geomean >= 90% of baseline" in printed and "FAIL: geomean" not in printed
    assert "NO DATA: decode M <= 16" in (tmp_path / "out" / "families.md").read_text()


def test_cli_writes_files_and_bad_path_is_one_line(tmp_path, capsys):
    assert families.main([str(DATA), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "| tiny | 4 | 4 |" in printed and "FAIL: geomean >= 90% of baseline" in printed
    md = (tmp_path / "out" / "families.md").read_text()
    assert "| tiny | 256x256x256 | naive | BX=16 BY=16 | - | ok |" in md
    assert (tmp_path / "out" / "families.png").stat().st_size > 1000
    assert families.main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file or directory" in err
    shutil.copytree(DATA / "naive-256", tmp_path / "x")
    with pytest.raises(ConfigError):
        families.collect([tmp_path / "nope"])


def test_cli_out_never_overwrites(tmp_path, capsys):
    out = tmp_path / "out"
    assert families.main([str(DATA), "--out", str(out)]) == 0
    before = (out / "families.md").read_bytes()
    capsys.readouterr()
    assert families.main([str(DATA), "--out", str(out)]) == 2
    said = capsys.readouterr()
    err = said.err.strip().splitlines()
    assert len(err) == 1 and "out:" in err[0] and "already exists" in err[0]
    assert said.out == ""  # refused before the table (it was printed, then the refusal)
    assert (out / "families.md").read_bytes() == before


def test_an_interrupt_while_writing_leaves_no_partial_output(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM) while families.png is drawn left families.md and .csv behind, so the same
    command then refused its --out; now the files and the folders it made go, and the interrupt
    says so."""
    out = tmp_path / "new" / "out"

    def interrupted(points, path):
        raise KeyboardInterrupt
    monkeypatch.setattr(families, "plot", interrupted)
    with pytest.raises(KeyboardInterrupt) as stop:
        families.main([str(DATA), "--out", str(out)])
    assert str(stop.value) == f"nothing was written (the partial files in {out} were removed)"
    assert not (tmp_path / "new").exists()
    monkeypatch.undo()
    assert families.main([str(DATA), "--out", str(out)]) == 0 and (out / "families.png").is_file()


def test_sigterm_to_the_module_is_one_line(tmp_path):
    """``python -m gemmlab.results.families`` has no console script: SIGTERM ended it with Python's
    default (nothing said, status -15), Ctrl-C with a traceback; its ``python -m`` block now runs it
    through gemmlab.console.run_command: one line, exit 143."""
    import signal
    import subprocess
    import sys
    import time

    from clirun import command_env
    # 'ready' is printed from inside the command (its record search), so the signal handlers are in place:
    # a fixed delay after start lost the race on a loaded 2-core machine (exit -15)
    proc = subprocess.Popen([sys.executable, "-c", "import sys, time, runpy; import gemmlab.stages.record_model as m; "
                             "m.find_records = lambda *a, **k: (print('ready', flush=True), time.sleep(60)); "
                             "sys.argv = ['families', '.']; runpy.run_module('gemmlab.results.families', run_name='__main__')"],
                            cwd=tmp_path, env=command_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.strip() == "python -m gemmlab.results.families: terminated (SIGTERM); no record was changed", err


def test_help_is_plain_text(capsys):
    from gemmlab.results import families
    with pytest.raises(SystemExit):
        families.main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and ":mod:" not in out and ":func:" not in out


def test_a_foreign_result_json_is_no_point(tmp_path, capsys):
    """``{}`` or another tool's result.json in the tree: skipped with one notice, not a failed point."""
    shutil.copytree(DATA / "naive-256", tmp_path / "ours")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "result.json").write_text('{"tool": "nsys", "runs": 3}')
    points = families.collect([tmp_path])
    assert len(points) == 1 and points[0].status == "ok"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "other/result.json: not a gemmlab record" in err[0]


def test_cli_out_that_cannot_be_written_is_one_line(tmp_path, capsys):
    (tmp_path / "afile").write_text("x\n")
    assert families.main([str(DATA), "--out", str(tmp_path / "afile" / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"{families.PROG}: error: out: cannot create or write {tmp_path / 'afile' / 'out'}: "
                          "[Errno 20] Not a directory")


def test_plot_leaves_matplotlib_as_the_caller_set_it(tmp_path, monkeypatch):
    """families.png is drawn on an Agg canvas of its own: matplotlib's backend is not switched
    (``matplotlib.use``), pyplot is not imported by the plot and its figure list is untouched."""
    import sys

    import matplotlib
    monkeypatch.setattr(matplotlib, "use", lambda *a, **k: pytest.fail("families.plot switched matplotlib's backend"))
    before = sys.modules.get("matplotlib.pyplot")
    figures = before.get_fignums() if before else None
    assert families.plot(families.collect([DATA]), tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sys.modules.get("matplotlib.pyplot") is before
    if before is not None:
        assert before.get_fignums() == figures


def test_mixed_precisions_and_fixed_kernels_are_said():
    """A new-user trial: fp32 and bf16 kernel=auto records given together were pooled in each
    family's geomean with no word (the per-shape table has no precision column), and records of
    fixed kernels (cuBLAS among them) were read as kernel=auto's; the notes now say both."""
    from gemmlab.results.families import Point, mixture_notes
    auto = dict(family="square", shape=(64, 64, 64), kernel="tiled", dispatch="table", status="ok", valid=True)
    same = [Point("a", precision="fp32", **auto), Point("b", precision="fp32", **auto)]
    assert mixture_notes(same) == []
    mixed = [*same, Point("c", precision="bf16", **{**auto, "kernel": "wgmma_bf16"})]
    assert mixture_notes(mixed) == ["records of 2 precisions (bf16, fp32) are pooled in each family's figures; give "
                                    "one precision's records for its verdicts"]
    fixed = [*same, Point("d", precision="fp32", **{**auto, "kernel": "cublas", "dispatch": ""})]
    assert mixture_notes(fixed) == ["1 of 3 points are not kernel=auto's (no dispatch field: cublas x1); the targets "
                                    "are kernel=auto's"]


def test_the_cli_says_the_records_are_not_kernel_autos(capsys):
    from gemmlab.results import families
    assert families.main([str(DATA)]) == 0
    assert "points are not kernel=auto's (no dispatch field" in capsys.readouterr().out
