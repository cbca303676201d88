""".ci/tune_exhaustive.py (issue 41: first-use tuning against an exhaustive search) on the CPU: a
stand-in point runner gives the three points of each shape; the row compares the exhaustive point's
fastest verified candidate with its own median of the default point's choice, says whether the second
run took the cache and whether the tuning kept its budget; bad arguments are one line; kernel.tune_k
takes an exhaustive count."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gemmlab.errors import ConfigError
from gemmlab.stages.config import check_field

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("ci_tune_exhaustive", ROOT / ".ci" / "tune_exhaustive.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tried(*entries):
    return [{"name": f"{k}[{p}]", "kernel": k, "params": {"P": p}, "median_ms": ms, "status": st,
             "verified": st == "ok", "predicted_ms": 1.0, "error": None} for k, p, ms, st in entries]


class Fake:
    """Three points per shape: the default chooses kernel a P=1 (1.00 ms) in 2.5 s of 60; the
    second run takes the cache; the exhaustive point times a P=1 at ``mine`` ms, b P=2 at 0.98 ms, a
    failing c and one not reached."""

    def __init__(self, mine=1.0, cache_hit=True):
        self.calls, self.mine, self.cache_hit = [], mine, cache_hit

    def __call__(self, cfg, folder):
        self.calls.append(cfg)
        kind = folder.name
        base = {"status": "ok", "device": {"driver_version": "13.0"}}
        if kind == "default":
            return {**base, "dispatch": {"path": "first_use", "chosen": "a", "params": {"P": 1}, "measured_ms": 1.0,
                                         "tuning": {"elapsed_s": 2.5, "budget_s": 60.0,
                                                    "tried": tried(("a", 1, 1.0, "ok"), ("b", 2, 1.2, "ok"))}}}
        if kind == "again":
            return {**base, "dispatch": {"path": "cache" if self.cache_hit else "first_use", "chosen": "a",
                                         "params": {"P": 1}}}
        return {**base, "dispatch": {"path": "first_use", "chosen": "b", "params": {"P": 2},
                                     "tuning": {"elapsed_s": 40.0, "budget_s": 1800.0,
                                                "tried": tried(("a", 1, self.mine, "ok"), ("b", 2, 0.98, "ok"),
                                                               ("c", 3, 0.5, "wrong_result"),
                                                               ("d", 4, None, "not_reached"))}}}


def test_the_row_compares_the_choice_with_the_exhaustive_best_in_the_same_point(script, tmp_path, capsys):
    run, ahead = Fake(), []
    rc = script.main([str(tmp_path / "o"), "--shapes", "1x4096x4096,16x3072x4096", "--precision", "bf16:col",
                      "--draw", "device"], run=run, compile_ahead=lambda *a: ahead.append(a) or {"instances": 3})
    assert rc == 0 and len(run.calls) == 6
    default, again, exhaustive = run.calls[:3]
    assert default["kernel"] == {"name": "auto", "rank": "model", "tune": "first_use",
                                 "tune_cache": str(tmp_path / "o" / "cache" / "1x4096x4096" / "default")}
    assert again == default and default["inputs"] == {"draw": "device"} and default["layout"]["b"] == "col"
    assert exhaustive["kernel"]["tune_k"] == script.EXHAUSTIVE_K and exhaustive["kernel"]["tune_budget_s"] == 1800.0
    assert exhaustive["kernel"]["tune_cache"].endswith("1x4096x4096/exhaustive")
    assert ahead[0] == ((1, 4096, 4096), "bf16", "col", "13.0")  # compiled ahead with the machine's driver
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    row = summary["rows"][0]
    assert row["ratio"] == pytest.approx(0.98) and row["within"] is True  # 2% slower than the best
    assert row["best"] == {"name": "b[2]", "median_ms": 0.98} and row["choice_in_exhaustive_ms"] == 1.0
    assert (row["exhaustive_candidates"], row["exhaustive_timed"], row["exhaustive_not_reached"]) == (4, 2, 1)
    assert row["again_cache_hit"] and row["again_same_choice"] and row["kept_budget"]
    assert row["default_choice"] == "a P=1" and row["tuning_s"] == 2.5 and row["budget_s"] == 60.0
    assert (summary["within"], summary["compared"], summary["cache_hits"]) == (2, 2, 2)
    out = capsys.readouterr().out
    assert "within 3%: 2 of 2; geomean best/choice 0.9800" in out
    from gemmlab.stages.archive import read_archive
    kinds = [m.record["tune_exhaustive"]["kind"] for m in read_archive(tmp_path / "o" / "records.jsonl.xz")]
    assert kinds == ["default", "again", "exhaustive"] * 2


def test_a_choice_more_than_3_percent_off_and_no_cache_hit_are_said(script, tmp_path):
    assert script.main([str(tmp_path / "o"), "--shapes", "8x4096x4096"], run=Fake(mine=1.05, cache_hit=False),
                       compile_ahead=lambda *a: {}) == 0
    row = json.loads((tmp_path / "o" / "summary.json").read_text())["rows"][0]
    assert row["ratio"] == pytest.approx(0.98 / 1.05) and row["within"] is False and row["again_cache_hit"] is False


def test_a_point_that_raises_is_recorded_and_the_shape_has_no_ratio(script, tmp_path):
    def run(cfg, folder):
        if folder.name == "exhaustive":
            raise RuntimeError("worker died")
        return Fake()(cfg, folder)
    assert script.main([str(tmp_path / "o"), "--shapes", "8x4096x4096"], run=run, compile_ahead=lambda *a: {}) == 0
    row = json.loads((tmp_path / "o" / "summary.json").read_text())["rows"][0]
    assert row["exhaustive_status"] == "error" and row["ratio"] is None and row["within"] is False


@pytest.mark.parametrize("argv, says", [(["--precision", "int8:col"], "--precision: 'int8:col'"),
                                        (["--shapes", "1x2"], "--shapes: '1x2'"),
                                        (["--shapes", "axbxc"], "--shapes: 'axbxc'"),
                                        (["--count", "0"], "--count: must be >= 1")])
def test_bad_arguments_are_one_line(script, tmp_path, capsys, argv, says):
    with pytest.raises(SystemExit) as exc:
        script.main([str(tmp_path / "o"), *argv], run=Fake(), compile_ahead=lambda *a: {})
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "\n" not in err and says in err


def test_the_default_shapes_are_held_out_decode_and_medium(script):
    from gemmlab.dispatch.shapeset import load_shapeset
    shapes = script.default_shapes("bf16", "col", 10)
    test = {(e.shape.M, e.shape.N, e.shape.K): e for e in load_shapeset().select("test")}
    assert len(shapes) == 10 and all(s in test and test[s].region in ("decode", "medium") for s in shapes)
    assert all(4 * m * n <= script.MAX_C_BYTES for m, n, _ in shapes)  # one C per candidate must fit the GPU


def test_tune_k_takes_an_exhaustive_count():
    assert check_field("kernel.tune_k", 1024) == 1024
    with pytest.raises(ConfigError, match="kernel.tune_k"):
        check_field("kernel.tune_k", 1025)


def test_the_exhaustive_config_is_a_valid_point(script, tmp_path):
    """The exhaustive point's config passes gemmlab's checks (tune_k 1024, the budget, inputs.draw, the
    isolation timeout): in compile mode it ranks every candidate (no GPU: first-use tuning is skipped)."""
    from gemmlab.run.pipeline import run_point
    cfg = script.point_config((16, 512, 512), "bf16", "col", tmp_path / "cache", "device", script.EXHAUSTIVE_K,
                              script.EXHAUSTIVE_BUDGET_S)
    rec = run_point({**cfg, "mode": "compile"}, tmp_path / "p")
    assert rec["status"] == "compiled", rec.get("error")
    assert rec["dispatch"]["model"]["candidates"] >= 100 and "skipped" in rec["dispatch"]["tuning"]
