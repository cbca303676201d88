"""The Triton agreement's summary (gemmlab/run/triton_agreement.py) with gemmlab's clock telemetry: a
throttled warm point gets the ratio against its unthrottled samples and a note saying so; the
agreement verdict stays on the plain medians. The matched point (gemmlab's graph timing shaped like
do_bench_cudagraph: 10 samples of max(1, int(20 ms / graph median)) launches) gets its own ratio and
verdict, the duty-cycle note states both protocols' figures, and the clock poll run during
do_bench_cudagraph summarises NVML readings. .ci/triton_agreement.py's exit status follows the
matched verdict where measured. CPU only: the points, Triton's timers and NVML are stand-ins with the
figures of the H100 run of session 35 (docs/results/triton/README.md)."""

from __future__ import annotations

import importlib.util
import math
import threading
from pathlib import Path

import pytest

from gemmlab.errors import ConfigError
from gemmlab.gpu.monitor import Reading
from gemmlab.run import triton_agreement as ta
from gemmlab.stages.config import check_field

ROOT = Path(__file__).resolve().parents[1]
CASE = ("triton_tma_persistent", "bf16", "col", (8192, 8192, 8192))


def _record(median, throttled, unthrottled, mhz, samples=30):
    return {"status": "ok", "device": {"name": "NVIDIA H100 80GB HBM3"},
            "timing": {"median_ms": median, "samples_ms": [median] * samples, "throttled_samples": throttled,
                       "median_unthrottled_ms": unthrottled, "median_sm_mhz": mhz, "max_sm_mhz": 1980}}


class Session:
    """A stand-in for gemmlab.run.session.Session: each point's record by its folder's name; the
    configs it was given, in run order."""

    def __init__(self, graph, cold, matched=None):
        self.records = {"graph": graph, "cold": cold, "matched": matched or graph}
        self.configs = {}

    def run_point(self, cfg, out_dir):
        self.configs[out_dir.name] = cfg
        return self.records[out_dir.name]


def _timers(graph_ms=1.5460, clocks=None):
    out = {"do_bench_cudagraph_ms": graph_ms, "do_bench_ms": 1.6069}
    if clocks is not None:
        out["do_bench_cudagraph_clocks"] = clocks
    return lambda *a, **k: dict(out)


@pytest.mark.parametrize("throttled", [27, 0])
def test_a_throttled_warm_point_gets_the_unthrottled_ratio(tmp_path, monkeypatch, throttled):
    monkeypatch.setattr(ta, "triton_timers", _timers())
    graph = _record(1.6106, throttled, 1.5763 if throttled else 1.6106, 1530.0 if throttled else 1980.0)
    summary, records = ta.agreement(*CASE, tmp_path, session=Session(graph, _record(1.4361, 0, 1.4361, 1980.0)))
    assert summary["ratio_graph"] == pytest.approx(1.5460 / 1.6106) and summary["within_tolerance"] is False
    assert summary["gemmlab_graph_clocks"] == {"median_sm_mhz": graph["timing"]["median_sm_mhz"], "max_sm_mhz": 1980,
                                               "throttled_samples": throttled, "samples": 30,
                                               "median_unthrottled_ms": graph["timing"]["median_unthrottled_ms"]}
    if throttled:
        assert summary["ratio_graph_unthrottled"] == pytest.approx(1.5460 / 1.5763)
        assert summary["throttled_note"].startswith("27 of 30 gemmlab samples throttled (median SM clock 1530.0 MHz, "
                                                    "highest seen 1980 MHz)")
        assert summary["throttled_note"].endswith("0.9808")
    else:
        assert "ratio_graph_unthrottled" not in summary and "throttled_note" not in summary


def test_clocks_of_a_record_without_timing_is_empty():
    assert ta.clocks({"status": "invalid"}) == {}


def test_every_sample_throttled_is_said(tmp_path, monkeypatch):
    monkeypatch.setattr(ta, "triton_timers", _timers())
    summary, _ = ta.agreement(*CASE, tmp_path,
                              session=Session(_record(1.6106, 30, None, 1500.0), _record(1.4361, 0, 1.4361, 1980.0)))
    assert "ratio_graph_unthrottled" not in summary
    assert summary["throttled_note"].endswith("every sample was throttled: no unthrottled ratio")


# --- the matched point -------------------------------------------------------------------------------

TRITON_CLOCKS = {"readings": 120, "missed": 0, "wall_ms": 260.0, "median_sm_mhz": 1980, "min_sm_mhz": 1755,
                 "max_sm_mhz": 1980, "throttled_share": 0.1, "reasons_seen": ["sw_power_cap"]}


def test_the_matched_point_takes_triton_s_shape_and_its_own_verdict(tmp_path, monkeypatch):
    """8192^3: the default ratio is outside 2%, the matched one inside; the verdicts are separate."""
    monkeypatch.setattr(ta, "triton_timers", _timers(1.5460, TRITON_CLOCKS))
    session = Session(_record(1.6106, 27, 1.5763, 1530.0), _record(1.4361, 0, 1.4361, 1980.0),
                      matched=_record(1.5500, 2, 1.5490, 1755.0, samples=10))
    summary, records = ta.agreement(*CASE, tmp_path, session=session)
    assert list(session.configs) == ["graph", "matched", "cold"]
    assert session.configs["matched"]["timing"] == {"mode": "graph", "l2": "warm", "warmup": 10, "repeat": 10,
                                                    "batch": 12}  # int(20 / 1.6106)
    assert session.configs["matched"]["kernel"] == session.configs["graph"]["kernel"] == {"name": CASE[0]}
    assert session.configs["matched"]["isolation"] == {"process": False}
    assert set(records) == {"graph", "matched", "cold"}
    assert summary["matched_batch"] == 12 and "matched_batch_note" not in summary
    assert summary["gemmlab_matched_ms"] == 1.5500
    assert summary["ratio_matched"] == pytest.approx(1.5460 / 1.5500)
    assert summary["within_tolerance"] is False and summary["within_tolerance_matched"] is True
    assert summary["gemmlab_matched_clocks"] == {"median_sm_mhz": 1755.0, "max_sm_mhz": 1980, "throttled_samples": 2,
                                                 "samples": 10, "median_unthrottled_ms": 1.5490}
    assert summary["do_bench_cudagraph_clocks"] == TRITON_CLOCKS
    assert summary["duty_cycle_note"] == (
        "gemmlab's default protocol: 30 samples of 20 launches (32.2 ms each) at median 1530 MHz; "
        "do_bench_cudagraph: 10 replays of about 12 launches (18.6 ms each) at median 1980 MHz; "
        "gemmlab with Triton's shape (10 samples of 12 launches, 18.6 ms each, at median 1755 MHz): ratio 0.9974")


def test_a_matched_ratio_outside_is_its_own_verdict(tmp_path, monkeypatch):
    """4096^3: the default ratio inside 2%, the matched one outside (0.2153 ms: 92 launches a sample)."""
    monkeypatch.setattr(ta, "triton_timers", _timers(0.2130, TRITON_CLOCKS))
    session = Session(_record(0.2153, 0, 0.2153, 1980.0), _record(0.2500, 0, 0.2500, 1980.0),
                      matched=_record(0.2200, 0, 0.2200, 1980.0, samples=10))
    summary, _ = ta.agreement("triton_tma_persistent", "bf16", "col", (4096, 4096, 4096), tmp_path, session=session)
    assert session.configs["matched"]["timing"]["batch"] == 92 == summary["matched_batch"]
    assert summary["ratio_graph"] == pytest.approx(0.2130 / 0.2153) and summary["within_tolerance"] is True
    assert summary["ratio_matched"] == pytest.approx(0.2130 / 0.2200)
    assert summary["within_tolerance_matched"] is False
    assert summary["duty_cycle_note"].endswith("(10 samples of 92 launches, 20.2 ms each, at median 1980 MHz): "
                                               "ratio 0.9682")


def test_matched_false_runs_no_matched_point(tmp_path, monkeypatch):
    monkeypatch.setattr(ta, "triton_timers", _timers(1.5460, {"error": "NVML unavailable: no GPU"}))
    session = Session(_record(1.6106, 0, 1.6106, None), _record(1.4361, 0, 1.4361, 1980.0))
    summary, records = ta.agreement(*CASE, tmp_path, session=session, matched=False)
    assert list(session.configs) == ["graph", "cold"] and set(records) == {"graph", "cold"}
    for key in ("gemmlab_matched_ms", "matched_batch", "ratio_matched", "within_tolerance_matched",
                "gemmlab_matched_clocks"):
        assert key not in summary
    assert summary["duty_cycle_note"] == (
        "gemmlab's default protocol: 30 samples of 20 launches (32.2 ms each) at median an unread SM clock; "
        "do_bench_cudagraph: 10 replays of about 12 launches (18.6 ms each) at median an unread SM clock")


def test_a_failed_matched_point_is_an_error_before_triton(tmp_path, monkeypatch):
    def no_timers(*a, **k):
        raise AssertionError("Triton's timers ran after a failed point")
    monkeypatch.setattr(ta, "triton_timers", no_timers)
    session = Session(_record(1.6106, 0, 1.6106, 1980.0), _record(1.4361, 0, 1.4361, 1980.0),
                      matched={"status": "failed", "error": "timing: shared_gpu"})
    summary, records = ta.agreement(*CASE, tmp_path, session=session)
    assert summary["error"] == "matched: failed: timing: shared_gpu"
    assert summary["matched_batch"] == 12 and "ratio_graph" not in summary


def test_a_failed_graph_point_runs_no_matched_point(tmp_path, monkeypatch):
    monkeypatch.setattr(ta, "triton_timers", _timers())
    session = Session({"status": "invalid", "error": "shape"}, _record(1.4361, 0, 1.4361, 1980.0))
    summary, records = ta.agreement(*CASE, tmp_path, session=session)
    assert list(session.configs) == ["graph", "cold"] and "matched_batch" not in summary
    assert summary["error"] == "graph: invalid: shape"


def test_a_batch_beyond_timing_batch_s_range_is_clamped_and_said(tmp_path, monkeypatch):
    monkeypatch.setattr(ta, "triton_timers", _timers(0.0001))
    session = Session(_record(0.0001, 0, 0.0001, 1980.0), _record(0.0002, 0, 0.0002, 1980.0))
    summary, _ = ta.agreement(*CASE, tmp_path, session=session)
    assert session.configs["matched"]["timing"]["batch"] == 100_000 == summary["matched_batch"]
    assert summary["matched_batch_note"] == ("do_bench_cudagraph's shape asks for 200000 launches per sample; "
                                             "timing.batch allows 1..100000: clamped to 100000")


@pytest.mark.parametrize("median, want", [(1.6106, (12, 12)), (0.2153, (92, 92)), (25.0, (1, 1)), (20.0, (1, 1)),
                                          (0.0001, (100_000, 200_000))])
def test_matched_batch(median, want):
    assert ta.matched_batch(median) == want


@pytest.mark.parametrize("median", [0, -1.0, math.inf, math.nan])
def test_matched_batch_refuses_a_median_that_is_not_positive(median):
    with pytest.raises(ValueError, match="positive finite"):
        ta.matched_batch(median)


def test_batch_range_is_timing_batch_s_range():
    low, high = ta.BATCH_RANGE
    assert check_field("timing.batch", low) == low and check_field("timing.batch", high) == high
    for outside in (low - 1, high + 1):
        with pytest.raises(ConfigError):
            check_field("timing.batch", outside)


# --- the clock poll ---------------------------------------------------------------------------------

def _reading(mhz, reasons, throttled):
    return Reading(sm_mhz=mhz, mem_mhz=2619, temp_c=55, power_w=690.0, reasons=reasons, throttled=throttled)


class FakeMonitor:
    """Gives its scripted reads in order, then None (setting ``done``)."""

    def __init__(self, script, error=None):
        self.script = list(script)
        self.error = error
        self.done = threading.Event()

    def read(self):
        if self.script:
            return self.script.pop(0)
        self.done.set()
        return None


def test_the_clock_poll_summarises_its_readings():
    monitor = FakeMonitor([_reading(1980, 0x0, False), _reading(1530, 0x4, True), None,
                           _reading(1755, 0x1 | 0x4, True), _reading(1980, 0x1, False)])
    with ta.ClockPoll(monitor, interval_s=0.0005) as poll:
        assert monitor.done.wait(10), "the poll thread never read the whole script"
    summary = poll.summary()
    assert summary.pop("missed") >= 1  # the scripted None, and any read after the script
    assert summary.pop("wall_ms") > 0
    assert summary == {"readings": 4, "median_sm_mhz": 1867.5, "min_sm_mhz": 1530, "max_sm_mhz": 1980,
                       "throttled_share": 0.5, "reasons_seen": ["gpu_idle", "sw_power_cap"]}
    assert not poll._thread.is_alive()


@pytest.mark.parametrize("error", ["NVML unavailable: LookupError: the GPU's PCI bus id is unknown", None])
def test_a_clock_poll_without_readings_gives_only_an_error(error):
    monitor = FakeMonitor([], error=error)
    with ta.ClockPoll(monitor, interval_s=0.0005) as poll:
        assert monitor.done.wait(10)
    summary = poll.summary()
    assert list(summary) == ["error"]
    if error:
        assert summary["error"] == error
    else:
        assert summary["error"].startswith("NVML gave no reading in ")


def test_a_clock_poll_is_entered_once():
    poll = ta.ClockPoll(FakeMonitor([]), interval_s=0.0005)
    with poll:
        with pytest.raises(RuntimeError, match="entered twice"):
            poll.__enter__()


# --- .ci/triton_agreement.py ------------------------------------------------------------------------

def _ci_module():
    spec = importlib.util.spec_from_file_location("ci_triton_agreement", ROOT / ".ci" / "triton_agreement.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _summary(within, within_matched):
    summary = {"gemmlab_graph_ms": 1.6106, "do_bench_cudagraph_ms": 1.5460, "ratio_graph": 1.5460 / 1.6106,
               "within_tolerance": within, "gemmlab_cold_ms": 1.4361, "do_bench_ms": 1.6069,
               "ratio_cold": 1.6069 / 1.4361, "gemmlab_graph_clocks": {"median_sm_mhz": 1530.0},
               "do_bench_cudagraph_clocks": {"median_sm_mhz": 1980}, "duty_cycle_note": "the note"}
    if within_matched is not None:
        summary.update(gemmlab_matched_ms=1.5500, matched_batch=12, ratio_matched=1.5460 / 1.5500,
                       within_tolerance_matched=within_matched, gemmlab_matched_clocks={"median_sm_mhz": 1755.0})
    return summary


@pytest.mark.parametrize("within, within_matched, status", [(False, True, 0), (True, False, 1), (False, None, 1),
                                                            (True, None, 0)])
def test_ci_exit_status_follows_the_matched_verdict(tmp_path, monkeypatch, capsys, within, within_matched, status):
    ci = _ci_module()
    monkeypatch.setattr(ci, "agreement", lambda *a, **k: (_summary(within, within_matched), {"graph": {"status": "ok"}}))
    assert ci.main([str(tmp_path / "out"), ta.case_name(*CASE)]) == status
    line = capsys.readouterr().out.splitlines()[0]
    if within_matched is None:
        assert "matched" not in line
        assert "median SM clock: gemmlab graph 1530 MHz, do_bench_cudagraph 1980 MHz" in line
    else:
        assert "; matched (batch 12) 1.5500 ms, ratio 0.9974 (" in line
        assert "median SM clock: gemmlab graph 1530 MHz, matched 1755 MHz, do_bench_cudagraph 1980 MHz" in line


@pytest.mark.parametrize("argv, says", [
    (["triton_matmul-bf16-col-4096x4096x4096"], "OUTDIR: 'triton_matmul-bf16-col-4096x4096x4096' is a case name"),
    (["OUT", "nosuch"], "CASE: unknown 'nosuch'; known: triton_tma_persistent-bf16-col-4096x4096x4096"),
    ([], "the following arguments are required: outdir")], ids=["lone-case", "unknown-case", "none"])
def test_ci_refuses_bad_arguments_in_one_line_before_any_point(tmp_path, monkeypatch, capsys, argv, says):
    ci = _ci_module()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ci, "agreement", lambda *a, **k: pytest.fail("a case ran"))
    with pytest.raises(SystemExit) as exc:
        ci.main(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "\n" not in err and says in err
    assert not any(tmp_path.iterdir())  # no folder made


@pytest.mark.parametrize("status", ["no_gpu", "unavailable"])
def test_ci_stops_after_a_case_that_no_case_could_pass(tmp_path, monkeypatch, capsys, status):
    """No GPU (or no Triton): the first case says so and the other five are not run."""
    ci = _ci_module()
    calls = []

    def agreement(*a, **k):
        calls.append(a)
        return {"error": f"graph: {status}: why"}, {"graph": {"status": status}}
    monkeypatch.setattr(ci, "agreement", agreement)
    assert ci.main([str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert len(calls) == 1 and f"{status}: the other 5 case(s) not run" in out
