"""gemmlab-compare: bootstrap ratio of medians, verdicts, matching, and the command (CPU only).

The CLI tests run on copies of the real H200 records in tests/data/h200 (13 records: 12 timed
points with 10 samples each, one wrong_result point)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from gemmlab.results.compare import (FAILED, FAST, INVALID, ONLY_AFTER, ONLY_BEFORE, SAME, SLOW, UNSURE, UNTIMED,
                                     CompareError, beyond_threshold, bootstrap_ratio, compare, load_points, main,
                                     markdown, verdict)

from clirun import REPO_ROOT  # noqa: E402  (the checkout, defined once)
H200 = REPO_ROOT / "tests" / "data" / "h200"
TIMED_POINTS = 12


def noisy(n, scale=1.0, rel=0.01, seed=0):
    """n positive samples around ``scale`` (multiplicative normal noise ``rel``)."""
    rng = np.random.default_rng(seed)
    return scale * (1.0 + rel * rng.standard_normal(n))


def boot_verdict(before, after, threshold=0.05, seed=0):
    _, low, high = bootstrap_ratio(before, after, 0.95, 2000, np.random.default_rng(seed))
    return verdict(low, high, threshold), beyond_threshold(low, high, threshold)


# --- statistics ----------------------------------------------------------------------------------

def test_identical_distributions_same():
    b = noisy(50, seed=1)
    assert boot_verdict(b, b.copy()) == (SAME, False)
    assert boot_verdict(b, noisy(50, seed=2)) == (SAME, False)  # two draws of one distribution


def test_slower_by_20_percent_is_slow_beyond_threshold():
    b = noisy(30, seed=1)
    after = b * 1.2 * (1 + 0.005 * np.random.default_rng(3).standard_normal(30))
    ratio, low, high = bootstrap_ratio(b, after, 0.95, 2000, np.random.default_rng(0))
    assert 1.15 < low <= ratio <= high < 1.25
    assert verdict(low, high, 0.05) == SLOW and beyond_threshold(low, high, 0.05)


def test_faster_by_20_percent_is_fast():
    b = noisy(30, seed=1)
    assert boot_verdict(b, b * 0.8) == (FAST, True)


def test_tiny_or_very_noisy_samples_unsure():
    # huge noise: the interval straddles 1 and reaches far beyond the 5 % band
    b, a = noisy(8, rel=0.5, seed=4), noisy(8, rel=0.5, seed=5)
    b, a = np.abs(b) + 0.1, np.abs(a) + 0.1
    ratio, low, high = bootstrap_ratio(b, a, 0.95, 2000, np.random.default_rng(0))
    assert low < 1 < high and (low < 0.95 or high > 1.05)
    assert verdict(low, high, 0.05) == UNSURE


def test_verdict_rule_edges():
    assert verdict(1.001, 1.02, 0.05) == SLOW and not beyond_threshold(1.001, 1.02, 0.05)
    assert verdict(1.06, 1.2, 0.05) == SLOW and beyond_threshold(1.06, 1.2, 0.05)
    assert verdict(0.9, 0.99, 0.05) == FAST and beyond_threshold(0.8, 0.94, 0.05)
    assert verdict(0.96, 1.04, 0.05) == SAME
    assert verdict(1.0, 1.0, 0.0) == SAME
    assert verdict(0.97, 1.08, 0.05) == UNSURE
    assert verdict(0.90, 1.01, 0.05) == UNSURE


def test_interval_covers_true_ratio():
    """Lognormal samples with a known ratio of population medians (exp(mu) each): the 95 %
    interval covers it in most of 40 independent experiments, and covers it in a fixed one."""
    true = 1.1
    rng = np.random.default_rng(123)
    covered = 0
    for i in range(40):
        b = rng.lognormal(0.0, 0.05, 40)
        a = rng.lognormal(np.log(true), 0.05, 40)
        _, low, high = bootstrap_ratio(b, a, 0.95, 1000, np.random.default_rng(i))
        covered += low <= true <= high
    assert covered >= 34, f"covered {covered}/40"
    b = np.random.default_rng(7).lognormal(0.0, 0.05, 60)
    a = np.random.default_rng(8).lognormal(np.log(true), 0.05, 60)
    ratio, low, high = bootstrap_ratio(b, a, 0.95, 2000, np.random.default_rng(0))
    assert low < true < high and low < ratio < high


def test_seeded_determinism():
    b, a = noisy(20, seed=1), noisy(20, scale=1.03, seed=2)
    r1 = bootstrap_ratio(b, a, 0.95, 2000, np.random.default_rng(42))
    r2 = bootstrap_ratio(b, a, 0.95, 2000, np.random.default_rng(42))
    r3 = bootstrap_ratio(b, a, 0.95, 2000, 42)  # a seed works too
    r4 = bootstrap_ratio(b, a, 0.95, 2000, np.random.default_rng(43))
    assert r1 == r2 == r3
    assert r1[0] == r4[0] and r1[1:] != r4[1:]


def test_bootstrap_rejects_bad_input():
    with pytest.raises(ValueError):
        bootstrap_ratio([], [1.0], 0.95, 100, 0)
    with pytest.raises(ValueError):
        bootstrap_ratio([1.0, 2.0], [1.0, float("nan")], 0.95, 100, 0)
    with pytest.raises(ValueError):
        bootstrap_ratio([1.0], [1.0], 1.5, 100, 0)


# --- records and matching ------------------------------------------------------------------------

def record(kernel="tiled", params=None, shape=(256, 256, 256), samples=None, status="ok",
           protocol="graph", device="NVIDIA H200", created="2026-01-01T00:00:00+00:00"):
    """A minimal gemmlab.result/1 record."""
    rec = {"schema": "gemmlab.result/1", "status": status, "valid": status == "ok",
           "error": None if status == "ok" else f"{status}: something broke", "created_utc": created,
           "config": {"kernel": {"name": kernel}, "shape": list(shape)},
           "kernel": {"name": kernel, "params": dict(params or {"BM": 64}), "plugin": "x", "backend": "nvrtc"},
           "shape": dict(zip("MNK", shape))}
    if device:
        rec["device"] = {"name": device, "arch": "sm_90", "uuid": "u"}
    if status == "ok":
        s = [float(v) for v in (samples if samples is not None else noisy(10, 0.1, seed=sum(shape)))]
        rec["timing"] = {"protocol": protocol, "samples_ms": s, "median_ms": float(np.median(s)),
                         "protocols": {protocol: {"samples_ms": s}}}
    return rec


def write(root: Path, name: str, rec: dict) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "result.json").write_text(json.dumps(rec))
    return d / "result.json"


def by_kernel(pairs):
    return {(p.point.kernel, p.point.shape): p for p in pairs}


def test_matching_by_kernel_params_shape_device(tmp_path):
    b, a = tmp_path / "b", tmp_path / "a"
    s = noisy(10, 0.1, seed=9)
    write(b, "0", record("tiled", {"BM": 64}, samples=s))
    write(a, "0", record("tiled", {"BM": 64}, samples=s))
    write(b, "1", record("tiled", {"BM": 64}, shape=(512, 512, 512)))
    write(a, "1", record("tiled", {"BM": 128}, shape=(512, 512, 512)))   # params change: no match
    write(b, "2", record("naive", shape=(64, 64, 64)))
    write(a, "2", record("naive", shape=(64, 64, 64), device="NVIDIA A100"))  # other device
    write(b, "3", record("naive", shape=(32, 32, 32), protocol="graph"))
    write(a, "3", record("naive", shape=(32, 32, 32), protocol="events"))     # other protocol
    pairs = compare(b, a)
    verdicts = sorted((p.point.kernel, p.point.shape, p.verdict, json.dumps(p.point.params)) for p in pairs)
    assert [v for v in verdicts if v[2] == SAME] == [("tiled", (256, 256, 256), SAME, '{"BM": 64}')]
    only = [(v[0], v[1], v[2]) for v in verdicts if v[2] in (ONLY_BEFORE, ONLY_AFTER)]
    assert sorted(only) == sorted([
        ("tiled", (512, 512, 512), ONLY_BEFORE), ("tiled", (512, 512, 512), ONLY_AFTER),
        ("naive", (64, 64, 64), ONLY_BEFORE), ("naive", (64, 64, 64), ONLY_AFTER),
        ("naive", (32, 32, 32), ONLY_BEFORE), ("naive", (32, 32, 32), ONLY_AFTER)])
    moved = [p for p in pairs if p.point.kernel == "tiled" and p.point.shape == (512, 512, 512)]
    assert {json.dumps(p.point.params) for p in moved} == {'{"BM": 64}', '{"BM": 128}'}


def test_failed_in_after_is_failed_and_exit_1(tmp_path, capsys):
    b, a = tmp_path / "b", tmp_path / "a"
    write(b, "0", record("tiled"))
    write(a, "0", record("tiled", status="wrong_result", device=None))  # failed, even before a GPU
    write(b, "1", record("naive", status="compile_error"))
    write(a, "1", record("naive"))                                       # fixed: listed, not a regression
    pairs = by_kernel(compare(b, a))
    failed, fixed = pairs[("tiled", (256, 256, 256))], pairs[("naive", (256, 256, 256))]
    assert failed.verdict == FAILED and failed.regression and "wrong_result" in failed.note
    assert fixed.verdict == INVALID and not fixed.regression and "compile_error" in fixed.note
    assert main([str(b), str(a)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "regression gate: FAIL" in out


def test_fewer_than_three_samples_unsure(tmp_path):
    b, a = tmp_path / "b", tmp_path / "a"
    write(b, "0", record(samples=[1.0, 1.01]))
    write(a, "0", record(samples=[2.0, 2.0, 2.01, 2.02]))
    (pair,) = compare(b, a)
    assert pair.verdict == UNSURE and pair.low is None and pair.ratio == pytest.approx(2.005 / 1.005)
    assert "BEFORE has 2 samples (< 3)" in pair.note and not pair.regression


def test_untimed_and_duplicates(tmp_path):
    b, a = tmp_path / "b", tmp_path / "a"
    rec = record(status="ok")
    del rec["timing"]
    rec["status"] = "compiled"  # mode=compile: valid, never timed
    write(b, "0", rec)
    write(a, "0", rec)
    (pair,) = compare(b, a)
    assert pair.verdict == UNTIMED
    # two records of one point in AFTER: the newest is used
    s = noisy(10, 0.1, seed=5)
    b2, a2 = tmp_path / "b2", tmp_path / "a2"
    write(b2, "0", record(samples=s))
    write(a2, "old", record(samples=s * 2, created="2026-01-01T00:00:00+00:00"))
    write(a2, "new", record(samples=s, created="2026-01-02T00:00:00+00:00"))
    (pair,) = compare(b2, a2)
    assert pair.verdict == SAME and "2 records in AFTER, newest used" in pair.note


def test_load_points_errors(tmp_path):
    with pytest.raises(CompareError, match="no such file"):
        load_points(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match="no result.json"):
        load_points(tmp_path / "empty")
    bad = tmp_path / "bad" / "result.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    with pytest.raises(CompareError, match="not a readable JSON"):
        load_points(bad)
    bad.write_text(json.dumps({"schema": "other/2"}))
    with pytest.raises(CompareError, match="schema"):
        load_points(bad)


def test_foreign_json_in_a_tree_is_skipped(tmp_path, run_cli):
    """A result.json in a directory that is no gemmlab record ({} or another tool's JSON) is no
    point and no error: skipped with a one-line notice naming it; named directly it is refused."""
    before, after = tmp_path / "b", tmp_path / "a"
    write(before, "0", record())
    write(after, "0", record())
    junk = [write(after, "junk", {}), write(before, "tool", {"schema": "bench/3", "status": "ok"})]
    skipped: list = []
    (pair,) = compare(before, after, skipped=skipped)
    assert pair.verdict == SAME
    assert sorted(r.path for r in skipped) == sorted(map(str, junk))
    proc = run_cli(before, after, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and "Traceback" not in proc.stderr
    for path in junk:
        assert any(line.startswith(f"gemmlab-compare: notice: skipped {path}: not a gemmlab record (")
                   for line in lines), lines
    with pytest.raises(CompareError, match="schema"):
        load_points(junk[1])  # a file named directly must be a record
    only = tmp_path / "only"
    write(only, "x", {})
    with pytest.raises(CompareError, match="no result.json under it that is a gemmlab record"):
        load_points(only)


def test_a_damaged_record_in_a_tree_is_named_and_fails_the_gate_the_rest_is_compared(tmp_path, run_cli):
    """A truncated result.json (or a JSON list) under AFTER: the other points are still compared, the
    damaged file is named in a notice and counted in the summary, and the gate fails (exit 1), as
    gemmlab-report lists it (new-user finding 10: one damaged file made compare exit 2, no verdicts)."""
    before, after = tmp_path / "b", tmp_path / "a"
    write(before, "0", record())
    write(after, "0", record())
    (after / "cut").mkdir()
    (after / "cut" / "result.json").write_text('{"schema": "gemmlab.re')
    (after / "list").mkdir()
    (after / "list" / "result.json").write_text("[1, 2]")
    proc = run_cli(before, after, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    notices = [l for l in proc.stderr.splitlines() if l.startswith("gemmlab-compare: notice: unreadable ")]
    assert len(notices) == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "1 SAME" in proc.stdout and "2 unreadable result.json files; regression gate: FAIL" in proc.stdout
    with pytest.raises(CompareError, match="not a readable JSON record"):
        load_points(after / "cut" / "result.json")  # named directly: refused
    only = tmp_path / "only"
    write(only, "x", {})
    proc = run_cli(before, only, cwd=tmp_path)
    assert proc.returncode == 2 and "(1 skipped: not a record, or not readable)" in proc.stderr, proc.stderr


def test_a_folder_and_a_link_to_nowhere_named_result_json_are_named_and_counted_as_the_report_does(
        tmp_path, run_cli, odd_result_entries):
    """A new-user trial: a folder named result.json was passed over in silence; it and a link to
    nowhere are now each one notice with the reason the report gives (tests/test_report.py),
    counted as unreadable, failing the gate as a damaged record does."""
    before, after = tmp_path / "b", tmp_path / "a"
    write(before, "0", record())
    write(after, "0", record())
    odd = odd_result_entries(after)
    proc = run_cli(before, after, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    why = {odd["folder"]: "cannot read the file: a folder",
           odd["link"]: f"cannot read the file: a link to nowhere (-> {after / 'nowhere.json'})"}
    assert sorted(proc.stderr.splitlines()) == sorted(
        f"gemmlab-compare: notice: unreadable {path}: {text} (its point is not compared, which fails the comparison)"
        for path, text in why.items()), proc.stderr
    assert "1 SAME" in proc.stdout and "2 unreadable result.json files; regression gate: FAIL" in proc.stdout


def test_real_records_load():
    points = load_points(H200)
    assert len(points) == 13
    timed = [p for p in points if p.timed]
    assert len(timed) == TIMED_POINTS and all(p.protocol == "graph" and p.samples.size == 10 for p in timed)
    (broken,) = [p for p in points if not p.valid]
    assert broken.status == "wrong_result" and broken.protocol is None


# --- the command ---------------------------------------------------------------------------------

@pytest.fixture
def run_cli(cli):
    """``run_cli(*args, cwd=...)``: ``python -m gemmlab.results.compare ARGS`` (conftest's ``cli``)."""
    return lambda *args, cwd=None: cli(args, cwd, module="gemmlab.results.compare")


@pytest.fixture
def before_after(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    shutil.copytree(H200, before)
    shutil.copytree(H200, after)
    return before, after


def test_cli_identical_all_same(before_after, tmp_path, run_cli):
    before, after = before_after
    md = tmp_path / "report" / "cmp.md"
    proc = run_cli(before, after, "--out", md, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{TIMED_POINTS} SAME" in proc.stdout and "regression gate: pass" in proc.stdout
    assert "0 SLOW" in proc.stdout and "1 INVALID" in proc.stdout  # the broken point, failed on both sides
    text = md.read_text()
    assert text.count("| SAME |") == TIMED_POINTS
    assert ("| kernel | params | shape | device | protocol | before median ms | after median ms | ratio | "
            "CI low | CI high | verdict |") in text


def test_cli_one_point_slower(before_after, tmp_path, run_cli):
    before, after = before_after
    f = after / "tiled-1024" / "result.json"
    rec = json.loads(f.read_text())
    rec["timing"]["samples_ms"] = [v * 1.3 for v in rec["timing"]["samples_ms"]]
    f.write_text(json.dumps(rec))
    md = tmp_path / "cmp.md"
    proc = run_cli(before, after, "--out", md, "--seed", "3", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 SLOW (1 beyond 5%)" in proc.stdout and f"{TIMED_POINTS - 1} SAME" in proc.stdout
    (slow,) = [line for line in md.read_text().splitlines() if "SLOW >5%" in line]
    cells = [c.strip() for c in slow.strip("|").split("|")]
    assert cells[0] == "tiled" and cells[2] == "1024x1024x1024" and cells[4] == "graph"
    assert float(cells[7]) == pytest.approx(1.3, abs=1e-3) and float(cells[8]) > 1.05
    # a generous threshold: still significantly slower, but no longer a gate failure
    proc = run_cli(before, after, "--threshold", "0.5", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 SLOW (0 beyond 50%)" in proc.stdout


def test_cli_single_files_and_module_main(before_after, capsys):
    before, after = before_after
    f = "naive-4096/result.json"
    assert main([str(before / f), str(after / f)]) == 0
    assert "1 SAME" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["{tmp}/nope", "{after}"], "nope: no such file or directory"),
    (["{before}", "{after}", "--threshold", "-0.1"], "--threshold"),
    (["{before}", "{after}", "--confidence", "1.5"], "--confidence"),
    (["{before}", "{after}", "--resamples", "5"], "--resamples"),
    (["{before}"], "AFTER"),
])
def test_cli_bad_arguments_exit_2(before_after, tmp_path, args, message, run_cli):
    before, after = before_after
    argv = [a.format(tmp=tmp_path, before=before, after=after) for a in args]
    proc = run_cli(*argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gemmlab-compare: error: "), proc.stderr
    assert message in lines[0] and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_markdown_marks_regressions(tmp_path):
    b, a = tmp_path / "b", tmp_path / "a"
    s = noisy(10, 0.1, seed=5)
    write(b, "0", record(samples=s))
    write(a, "0", record(samples=s * 1.5))
    text = markdown(compare(b, a), "b", "a")
    assert "**SLOW >5%**" in text and "regression gate: FAIL" in text



def test_the_stated_gate_names_every_rule_that_fails_it(tmp_path, capsys):
    """A new-user trial read the Markdown's rule, "Exit 1 when any point is SLOW beyond 5% ... or
    FAILED", and was surprised by a gate failed for missing points: the Markdown and --help state
    every rule of gemmlab.results.compare_render.gate_failures."""
    from gemmlab.results import compare as compare_module
    b, a = tmp_path / "b", tmp_path / "a"
    write(b, "0", record(samples=noisy(10, 0.1, seed=5)))
    write(b, "1", record(samples=noisy(10, 0.1, seed=6), shape=[64, 64, 64]))
    write(a, "0", record(samples=noisy(10, 0.1, seed=5)))
    pairs = compare(b, a)
    text = markdown(pairs, "b", "a")
    assert "regression gate: FAIL (1 valid point of BEFORE missing from AFTER" in text  # the rule applies here
    with pytest.raises(SystemExit):
        compare_module.main(["--help"])
    helped = " ".join(capsys.readouterr().out.split())
    for stated in (" ".join(text.split()), helped):
        for rule in ("SLOW beyond", "FAILED", "missing from AFTER (unless --allow-missing)",
                     "an unreadable result.json", "no point of BEFORE matching one of AFTER"):
            assert rule in stated, (rule, stated[:400])

def test_entry_point_declared():
    text = (REPO_ROOT / "pyproject.toml").read_text()
    assert 'gemmlab-compare = "gemmlab.cli.entry:gemmlab_compare"' in text  # starts gemmlab.results.compare.main
    import inspect

    from gemmlab.cli import entry
    assert '"gemmlab.results.compare", "main"' in inspect.getsource(entry.gemmlab_compare)


# --- gate and output rules added after a fresh-user trial ----------------------------------------

def test_point_missing_after_fails_the_gate(before_after, tmp_path, run_cli):
    a, b = before_after
    shutil.rmtree(b / "tiled-1024")
    proc = run_cli(a, b, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "only in BEFORE" in proc.stdout
    assert run_cli(a, b, "--allow-missing", cwd=tmp_path).returncode == 0


def test_compare_refuses_existing_out(before_after, tmp_path, run_cli):
    a, b = before_after
    out = tmp_path / "cmp.md"
    out.write_text("keep me")
    proc = run_cli(a, b, "--out", out, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "already exists" in proc.stderr
    assert out.read_text() == "keep me"


def test_compare_malformed_record_is_one_line(before_after, tmp_path, run_cli):
    a, b = before_after
    path = b / "tiled-1024" / "result.json"
    rec = json.loads(path.read_text())
    rec["timing"]["samples_ms"] = ["fast", "slow", "x"]
    path.write_text(json.dumps(rec))
    proc = run_cli(a, b, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("gemmlab-compare: error:")


# --- the match key holds every field that changes a measurement (issue 11 item 5) ----------------

def with_config(rec, **cfg):
    """``rec`` with config fields set (``timing_l2`` -> ``config.timing.l2``, ``inputs`` ->
    ``config.inputs.distribution``)."""
    rec = json.loads(json.dumps(rec))
    for key, value in cfg.items():
        if key == "timing_l2":
            rec["config"].setdefault("timing", {})["l2"] = value
            rec["timing"]["l2"] = value
        elif key == "inputs":
            rec["config"]["inputs"] = {"distribution": value, "seed": 0}
        else:
            rec["config"][key] = value
    return rec


def test_cublas_fp32_and_tf32_are_two_points(tmp_path):
    b, a = tmp_path / "b", tmp_path / "a"
    fp32, tf32 = noisy(10, 0.1, seed=1), noisy(10, 0.03, seed=2)
    for root in (b, a):
        write(root, "fp32", with_config(record("cublas", {}, samples=fp32), precision="fp32"))
        write(root, "tf32", with_config(record("cublas", {}, samples=tf32), precision="tf32"))
    pairs = compare(b, a)
    assert len(pairs) == 2 and {p.verdict for p in pairs} == {SAME}
    assert not any("newest used" in p.note for p in pairs)
    assert sorted(p.point.settings["precision"] for p in pairs) == ["fp32", "tf32"]
    # the rows tell the two apart
    text = markdown(pairs)
    assert "| cublas | BM=64 precision=fp32 |" in text and "| cublas | BM=64 precision=tf32 |" in text
    # a record older than the precision field is fp32 (its precision text, else the default)
    old = record("cublas", {}, samples=fp32)
    write(tmp_path / "old", "0", old)
    (pair,) = [p for p in compare(tmp_path / "old", a) if p.before is not None]
    assert pair.after.settings["precision"] == "fp32" and pair.verdict == SAME


@pytest.mark.parametrize("change", [{"layout": {"a": "col", "b": "row"}}, {"timing_l2": "cold"},
                                    {"inputs": "integers"}, {"arch": "sm_80"}])
def test_other_measurement_settings_do_not_match(tmp_path, change):
    b, a = tmp_path / "b", tmp_path / "a"
    s = noisy(10, 0.1, seed=4)
    write(b, "0", record(samples=s))
    write(a, "0", with_config(record(samples=s), **change))
    assert sorted(p.verdict for p in compare(b, a)) == sorted([ONLY_BEFORE, ONLY_AFTER])


def test_absent_fields_stand_for_their_old_defaults(tmp_path):
    b, a = tmp_path / "b", tmp_path / "a"
    s = noisy(10, 0.1, seed=4)
    write(b, "0", record(samples=s))  # no precision, layout, l2, inputs, arch
    write(a, "0", with_config(record(samples=s), precision="fp32", layout={"a": "row", "b": "row"},
                              timing_l2="warm", inputs="normal", arch="sm_90"))
    (pair,) = compare(b, a)
    assert pair.verdict == SAME


def test_failed_point_matches_only_its_own_precision(tmp_path):
    b, a = tmp_path / "b", tmp_path / "a"
    write(b, "fp32", with_config(record("cublas", {}), precision="fp32"))
    write(b, "tf32", with_config(record("cublas", {}), precision="tf32"))
    write(a, "fp32", with_config(record("cublas", {}), precision="fp32"))
    write(a, "tf32", with_config(record("cublas", {}, status="cuda_error", device=None), precision="tf32"))
    pairs = {p.point.settings["precision"]: p for p in compare(b, a)}
    assert pairs["tf32"].verdict == FAILED and pairs["fp32"].verdict == SAME


def test_sanitizer_child_record_is_not_a_point(tmp_path):
    """A racecheck run leaves the child's record inside the run directory: part of that run."""
    b, a = tmp_path / "b", tmp_path / "a"
    s = noisy(10, 0.1, seed=6)
    run_b = write(b, "run", dict(record(samples=s), sanitizer={"tool": "racecheck", "verdict": "clean"})).parent
    child = record(status="ok")
    child.update(status="checked", valid=True)
    del child["timing"]
    write(run_b / "sanitizer-racecheck", "run", child)
    write(a, "run", record(samples=s))
    pairs = compare(b, a)
    assert [p.verdict for p in pairs] == [SAME] and not any(p.regression for p in pairs)
    assert main([str(b), str(a)]) == 0
    # the child's record named directly is still read
    assert len(load_points(run_b / "sanitizer-racecheck" / "run" / "result.json")) == 1


def test_allow_missing_does_not_outlive_its_call(before_after, capsys):
    """--allow-missing used to set a module global that changed every later comparison."""
    a, b = before_after
    shutil.rmtree(b / "tiled-1024")
    assert main([str(a), str(b), "--allow-missing"]) == 0
    (missing,) = [p for p in compare(a, b) if p.verdict == ONLY_BEFORE]  # a later comparison in the process
    assert missing.regression
    assert main([str(a), str(b)]) == 1
    pairs = compare(a, b, allow_missing=True)
    assert not any(p.regression for p in pairs) and any(p.verdict == ONLY_BEFORE for p in pairs)


@pytest.mark.parametrize("command", ["compare", "report"])
def test_a_path_that_is_no_file_or_folder_is_one_line(tmp_path, command, capsys):
    """``gemmlab-compare DIR /dev/null``: a traceback ending in FileNotFoundError (a second trial);
    gemmlab-report said "no such file or directory" for a path that exists. Both: one line naming
    what the path is, exit 2."""
    from gemmlab.results import compare, report
    run = Path(__file__).resolve().parent / "data" / "h200" / "naive-256"  # a folder of records
    if command == "compare":
        code = compare.main([str(run), "/dev/null"])
    else:
        code = report.main(["/dev/null", "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"gemmlab-{command}: error: /dev/null: not a file or folder of results "
                                 "(a device, a pipe or a socket)\n"), err


def test_out_under_a_file_names_the_file(tmp_path, capsys):
    """``--out nj.json/sub`` where nj.json is a file said "cannot write (File exists)" (a third trial)."""
    from gemmlab.results import compare
    run = Path(__file__).resolve().parent / "data" / "h200" / "naive-256"
    (tmp_path / "nj.json").write_text("{}")
    code = compare.main([str(run), str(run), "--out", str(tmp_path / "nj.json" / "sub.md")])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"gemmlab-compare: error: {tmp_path / 'nj.json' / 'sub.md'}: cannot write "
                                 f"({tmp_path / 'nj.json'} is a file, not a folder)\n"), err


def test_out_through_a_link_to_nowhere_is_refused(tmp_path, capsys):
    """A new-user trial: ``--out dang`` (a link to a missing file) wrote the comparison through the
    link and created its target; it is an existing name like any other: refused, exit 2."""
    from gemmlab.results import compare
    data = Path(__file__).resolve().parent / "data" / "h200"
    (tmp_path / "dang").symlink_to(tmp_path / "nowhere.md")
    assert compare.main([str(data), str(data), "--out", str(tmp_path / "dang")]) == 2
    assert "--out:" in capsys.readouterr().err and not (tmp_path / "nowhere.md").exists()


# --- gate reasons and notices added after a second new-user trial --------------------------------

def test_no_point_matched_fails_the_gate_naming_what_differs(tmp_path, capsys):
    """fp32 records against bf16 ones, --allow-missing: 0 points compared used to pass the gate."""
    from gemmlab.results.compare import what_differs
    b, a = tmp_path / "b", tmp_path / "a"
    s = noisy(10, 0.1, seed=6)
    write(b, "0", with_config(record(samples=s), precision="fp32"))
    write(a, "0", with_config(record(samples=s), precision="bf16"))
    assert main([str(b), str(a), "--allow-missing"]) == 1
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "regression gate" in x]
    assert line.endswith("regression gate: FAIL (no point of BEFORE matches one of AFTER, they differ in "
                         "precision fp32 vs bf16)"), line
    assert what_differs(compare(b, a)) == "precision fp32 vs bf16"


def test_the_gate_line_names_the_rules_that_failed(tmp_path):
    from gemmlab.results.compare import gate_failures, summary
    b, a = tmp_path / "b", tmp_path / "a"
    s = noisy(10, 0.1, seed=7)
    write(b, "slow", record("tiled", samples=s))
    write(a, "slow", record("tiled", samples=s * 1.5))
    write(b, "failed", record("naive", samples=s))
    write(a, "failed", record("naive", status="failed"))
    write(b, "gone", record("small_tile", samples=s))
    pairs = compare(b, a)
    assert gate_failures(pairs) == ["1 SLOW beyond 5%", "1 FAILED (valid in BEFORE, failed in AFTER)",
                                    "1 valid point of BEFORE missing from AFTER (--allow-missing allows that)"]
    assert summary(pairs).endswith("regression gate: FAIL (1 SLOW beyond 5%; 1 FAILED (valid in BEFORE, failed in "
                                   "AFTER); 1 valid point of BEFORE missing from AFTER (--allow-missing allows that))")
    assert summary(compare(b, a, allow_missing=True), unreadable=2).endswith(
        "; 2 unreadable result.json files)")
    assert summary(compare(b, b)).endswith("regression gate: pass")


def test_the_real_contract_runs_name_the_missing_points(run_cli, tmp_path):
    runs = REPO_ROOT / "docs" / "results" / "contract-h200.jsonl.xz"  # the runs' records archive
    proc = run_cli(runs / "run1", runs / "run2", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "regression gate: FAIL (22 valid points of BEFORE missing from AFTER" in proc.stdout


def test_comparing_the_same_records_is_a_notice(before_after, capsys):
    a, b = before_after
    assert main([str(a), str(a) + "/"]) == 0
    err = capsys.readouterr().err
    assert "gemmlab-compare: notice: BEFORE and AFTER are the same records (the same 13 files)" in err
    assert main([str(a / "naive-256" / "result.json"), str(a / "naive-256")]) == 0
    assert "same records (the same file)" in capsys.readouterr().err
    assert main([str(a), str(b)]) == 0  # copies: other files
    assert "same records" not in capsys.readouterr().err
