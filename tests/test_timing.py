"""gemmlab.stages.timing without a GPU: options, the spread statistic, the description, and
``measure`` driven by a fake GPU whose events read a fake clock that every launch advances.

The fake's log records, in order, every launch (candidate name), event record ("event") and L2
flush ("flush"), so the tests can check what falls inside each timed interval.
"""

from __future__ import annotations

import itertools
import json
import statistics

import pytest

from gemmlab.stages import timing
from gemmlab.gpu.monitor import Reading
from gemmlab.stages.timing import DESCRIPTIONS, Series, TimingOptions, describe, measure, rel_spread


class Event:
    def __init__(self, t):
        self.t = t

    def sync(self):
        pass

    def __sub__(self, other):
        return self.t - other.t


class Stream:
    def __init__(self, gpu):
        self.gpu = gpu

    def record(self, options=None):
        assert options is not None and options.timing_enabled  # events must be timing events
        self.gpu.log.append("event")
        return Event(self.gpu.clock)


class Monitor:
    error = None

    def __init__(self, readings=None):
        self.readings = iter(readings) if readings is not None else None

    def read(self):
        return next(self.readings) if self.readings is not None else None


class FakeGpu:
    def __init__(self, readings=None):
        self.clock = 0.0
        self.log: list[str] = []
        self.stream = Stream(self)
        self.monitor = Monitor(readings)
        self.captured: list[int] = []
        self.syncs = 0
        self.released = 0

    def sync(self):
        self.syncs += 1

    def capture(self, enqueue, count):
        self.captured.append(count)
        self.log.append("capture")

        def replay():
            for _ in range(count):
                enqueue()

        return replay

    def release_graphs(self):
        self.released += 1

    def kernel(self, name, durations):
        """An enqueue function: logs ``name`` and advances the clock by the next duration (ms)."""
        durations = itertools.cycle(durations) if isinstance(durations, (list, tuple)) else itertools.repeat(durations)

        def enqueue():
            self.log.append(name)
            self.clock += next(durations)

        return enqueue

    def flush(self):
        self.log.append("flush")
        self.clock += 1000.0  # outside the timed interval: must not show in any sample


def launches(log, names=("k", "b")):
    return [e for e in log if e in names]


def sampling_log(gpu, warmup_launches):
    """The log after the warm-up launches (and any graph captures)."""
    rest = [e for e in gpu.log if e != "capture"]
    return rest[warmup_launches:]


# --- options, statistics, description --------------------------------------------------------------

def test_rel_spread():
    assert rel_spread([]) == 0.0
    assert rel_spread([5.0]) == 0.0
    assert rel_spread([2.0, 2.0, 2.0]) == 0.0
    assert rel_spread([1.0, 2.0, 3.0]) == pytest.approx(0.5)  # stdev 1, mean 2
    assert rel_spread([2.0, 4.0]) == pytest.approx(2**0.5 / 3)
    assert rel_spread([10.0, 11.0, 9.0]) == pytest.approx(statistics.stdev([10, 11, 9]) / 10)


@pytest.mark.parametrize("mode, expected", [("events", ("events",)), ("graph", ("graph",)),
                                            ("both", ("events", "graph"))])
def test_protocols(mode, expected):
    assert TimingOptions(mode=mode).protocols == expected


def test_launches_per_sample():
    assert TimingOptions(batch=20).launches_per_sample == 20
    assert TimingOptions(batch=20, l2="warm").launches_per_sample == 20
    assert TimingOptions(batch=20, l2="cold").launches_per_sample == 1  # later launches would find L2 warm


def test_defaults_are_seed_protocol():
    o = TimingOptions()
    assert (o.mode, o.l2, o.warmup, o.repeat, o.max_repeat, o.target_rel_spread, o.budget_s, o.batch, o.floor) == (
        ("events", "warm", 5, 10, None, None, None, 20, True))


def test_describe_events():
    text = describe(TimingOptions(mode="events"))
    assert "host submission gaps between launches are included" in text
    assert "excluded;" not in text.split("compilation")[0]
    assert "L2 warm" in text
    assert "compilation, transfers and verification are excluded" in text


def test_describe_graph_cold():
    text = describe(TimingOptions(mode="graph", l2="cold"))
    assert "CUDA graph" in text and "host submission gaps are excluded" in text
    assert "included" not in text
    assert "L2 cold" in text and "2x-L2" in text and "one launch per sample" in text


def test_describe_both():
    text = describe(TimingOptions(mode="both"))
    assert text.startswith(DESCRIPTIONS["events"] + "; " + DESCRIPTIONS["graph"])
    assert "included" in text and "excluded" in text


# --- measure: fixed repeat ------------------------------------------------------------------------

def test_fixed_repeat_samples_alternate_and_divide_by_batch():
    gpu = FakeGpu()
    opts = TimingOptions(mode="events", warmup=2, repeat=4, batch=3, floor=False)
    out = measure(gpu, {"k": gpu.kernel("k", 2.0), "b": gpu.kernel("b", 3.0)}, opts)
    series = out["protocols"]["events"]
    assert list(series) == ["k", "b"]
    assert series["k"].samples_ms == [2.0] * 4  # per launch: the interval / batch
    assert series["b"].samples_ms == [3.0] * 4
    assert out["stopped_by"] == {"events": "repeat"}
    assert out["floor"] == {}
    # warm-up first (each candidate warmup times), then alternate: one sample of k, one of b, ...
    assert launches(gpu.log)[:4] == ["k", "k", "b", "b"]
    sample = ["event", "k", "k", "k", "event", "event", "b", "b", "b", "event"]
    assert sampling_log(gpu, 4) == sample * 4
    assert series["k"].telemetry == [None] * 4  # NVML absent: no reading, no failure
    assert gpu.captured == []  # events protocol: no graph
    assert gpu.released == 1 and gpu.syncs >= 2


def test_graph_protocol_captures_batch_once_per_candidate():
    gpu = FakeGpu()
    opts = TimingOptions(mode="graph", warmup=1, repeat=3, batch=5, floor=False)
    out = measure(gpu, {"k": gpu.kernel("k", 0.5), "b": gpu.kernel("b", 0.25)}, opts)
    assert gpu.captured == [5, 5]
    assert out["protocols"]["graph"]["k"].samples_ms == [0.5] * 3
    assert out["protocols"]["graph"]["b"].samples_ms == [0.25] * 3
    assert out["stopped_by"] == {"graph": "repeat"}
    assert gpu.released == 1


def test_both_protocols_run_each_with_repeat_samples():
    gpu = FakeGpu()
    opts = TimingOptions(mode="both", warmup=1, repeat=3, batch=2, floor=False)
    out = measure(gpu, {"k": gpu.kernel("k", 1.0)}, opts)
    assert list(out["protocols"]) == ["events", "graph"]
    for protocol in ("events", "graph"):
        assert out["protocols"][protocol]["k"].samples_ms == [1.0] * 3
    assert out["stopped_by"] == {"events": "repeat", "graph": "repeat"}
    assert gpu.captured == [2]  # only the graph protocol captures
    # warm-up + samples per protocol, plus the graph's one untimed upload replay of its 2 launches
    assert launches(gpu.log, ("k",)).count("k") == 2 * (1 + 3 * 2) + 2
    assert gpu.released == 2


# --- measure: adaptive stopping -------------------------------------------------------------------

def test_adaptive_stops_at_repeat_when_converged():
    gpu = FakeGpu()
    opts = TimingOptions(mode="events", warmup=0, repeat=5, max_repeat=50, target_rel_spread=0.01, batch=1,
                         floor=False)
    out = measure(gpu, {"k": gpu.kernel("k", 1.0), "b": gpu.kernel("b", 2.0)}, opts)
    assert out["stopped_by"] == {"events": "converged"}
    assert len(out["protocols"]["events"]["k"].samples_ms) == 5
    assert len(out["protocols"]["events"]["b"].samples_ms) == 5


def test_adaptive_stops_at_max_repeat_when_never_converging():
    gpu = FakeGpu()
    opts = TimingOptions(mode="events", warmup=0, repeat=5, max_repeat=12, target_rel_spread=0.01, batch=1,
                         floor=False)
    out = measure(gpu, {"k": gpu.kernel("k", [1.0, 2.0]), "b": gpu.kernel("b", 1.0)}, opts)
    assert out["stopped_by"] == {"events": "max_repeat"}
    k = out["protocols"]["events"]["k"].samples_ms
    assert k == [1.0, 2.0] * 6  # every raw sample kept
    assert len(out["protocols"]["events"]["b"].samples_ms) == 12  # the converged one keeps alternating


def test_adaptive_waits_for_every_candidate():
    # k converges at once; b only after its noisy start has been outweighed
    gpu = FakeGpu()
    opts = TimingOptions(mode="events", warmup=0, repeat=3, max_repeat=1000, target_rel_spread=0.05, batch=1,
                         floor=False)
    out = measure(gpu, {"k": gpu.kernel("k", 1.0), "b": gpu.kernel("b", [2.0, 1.0] + [1.0] * 1000)}, opts)
    b = out["protocols"]["events"]["b"].samples_ms
    assert out["stopped_by"] == {"events": "converged"}
    assert rel_spread(b) <= 0.05 < rel_spread(b[:-1])  # stopped at the first sample that converged
    assert len(out["protocols"]["events"]["k"].samples_ms) == len(b) > 3


def test_adaptive_stops_on_budget():
    gpu = FakeGpu()
    opts = TimingOptions(mode="events", warmup=0, repeat=5, max_repeat=2000, target_rel_spread=0.01,
                         budget_s=1e-9, batch=1, floor=False)
    out = measure(gpu, {"k": gpu.kernel("k", [1.0, 2.0])}, opts)
    assert out["stopped_by"] == {"events": "budget"}
    assert len(out["protocols"]["events"]["k"].samples_ms) == 5  # never fewer than repeat


def test_max_repeat_equal_to_repeat_without_target_is_fixed():
    gpu = FakeGpu()
    out = measure(gpu, {"k": gpu.kernel("k", [1.0, 3.0])}, TimingOptions(warmup=0, repeat=4, max_repeat=4,
                                                                          batch=1, floor=False))
    assert out["stopped_by"] == {"events": "repeat"}
    assert out["protocols"]["events"]["k"].samples_ms == [1.0, 3.0, 1.0, 3.0]


# --- measure: cold L2 ------------------------------------------------------------------------------

def test_cold_flushes_before_every_sample_one_launch_each():
    gpu = FakeGpu()
    opts = TimingOptions(mode="events", l2="cold", warmup=1, repeat=3, batch=20, floor=False)
    out = measure(gpu, {"k": gpu.kernel("k", 2.0), "b": gpu.kernel("b", 4.0)}, opts, flush=gpu.flush)
    assert out["protocols"]["events"]["k"].samples_ms == [2.0] * 3  # the flush is outside the interval
    assert out["protocols"]["events"]["b"].samples_ms == [4.0] * 3
    one = lambda name: ["flush", "event", name, "event"]  # noqa: E731
    assert sampling_log(gpu, 2) == (one("k") + one("b")) * 3
    assert gpu.log.count("flush") == 6


def test_cold_graph_captures_one_launch():
    gpu = FakeGpu()
    opts = TimingOptions(mode="graph", l2="cold", warmup=0, repeat=2, batch=20, floor=False)
    out = measure(gpu, {"k": gpu.kernel("k", 2.0)}, opts, flush=gpu.flush)
    assert gpu.captured == [1]
    assert out["protocols"]["graph"]["k"].samples_ms == [2.0, 2.0]
    assert gpu.log.count("flush") == 2


def test_warm_never_flushes():
    gpu = FakeGpu()
    measure(gpu, {"k": gpu.kernel("k", 1.0)}, TimingOptions(warmup=0, repeat=3, batch=2, floor=False),
            flush=gpu.flush)
    assert "flush" not in gpu.log


# --- measure: launch floor ---------------------------------------------------------------------------

def test_floor_series_has_repeat_samples():
    gpu = FakeGpu()
    opts = TimingOptions(mode="both", warmup=1, repeat=4, batch=2, floor=True)
    out = measure(gpu, {"k": gpu.kernel("k", 1.0)}, opts, floor_enqueue=gpu.kernel("floor", 0.0078125))
    assert set(out["floor"]) == {"events", "graph"}
    for protocol in ("events", "graph"):
        assert out["floor"][protocol].samples_ms == [0.0078125] * 4


def test_floor_has_repeat_samples_under_adaptive_stopping():
    gpu = FakeGpu()
    opts = TimingOptions(mode="events", warmup=0, repeat=3, max_repeat=9, target_rel_spread=0.001, batch=1,
                         floor=True)
    out = measure(gpu, {"k": gpu.kernel("k", [1.0, 2.0])}, opts, floor_enqueue=gpu.kernel("floor", 0.5))
    assert len(out["protocols"]["events"]["k"].samples_ms) == 9
    assert len(out["floor"]["events"].samples_ms) == 3


def test_floor_off_or_absent():
    gpu = FakeGpu()
    out = measure(gpu, {"k": gpu.kernel("k", 1.0)}, TimingOptions(warmup=0, repeat=2, batch=1, floor=False),
                  floor_enqueue=gpu.kernel("floor", 0.5))
    assert out["floor"] == {} and "floor" not in gpu.log
    out = measure(FakeGpu(), {"k": FakeGpu().kernel("k", 1.0)}, TimingOptions(warmup=0, repeat=2, batch=1))
    assert out["floor"] == {}


# --- telemetry and the series record ---------------------------------------------------------------

def reading(sm, reasons):
    return Reading(sm_mhz=sm, mem_mhz=3200, temp_c=50, power_w=400.0, reasons=reasons,
                   throttled=bool(reasons & 0xEC))


def test_telemetry_read_after_each_sample():
    gpu = FakeGpu(readings=[reading(1980, 0), reading(1700, 0x4), reading(1980, 0x1)])
    out = measure(gpu, {"k": gpu.kernel("k", 1.0)}, TimingOptions(warmup=0, repeat=3, batch=1, floor=False))
    tel = out["protocols"]["events"]["k"].telemetry
    assert [t["sm_mhz"] for t in tel] == [1980, 1700, 1980]
    assert [t["throttled"] for t in tel] == [False, True, False]


def test_series_record():
    tel = [reading(1980, 0).record(), reading(1500, 0x4).record(), None, reading(1900, 0x1).record()]
    s = Series(samples_ms=[1.0, 2.0, 3.0, 10.0], telemetry=tel)
    rec = s.record(flops=2 * 10**9)
    assert rec["samples_ms"] == [1.0, 2.0, 3.0, 10.0]
    assert rec["median_ms"] == 2.5 and rec["min_ms"] == 1.0 and rec["max_ms"] == 10.0
    assert rec["gflops"] == pytest.approx(2e9 / 2.5e-3 / 1e9)
    assert rec["rel_spread"] == pytest.approx(rel_spread([1.0, 2.0, 3.0, 10.0]))
    assert rec["throttled_samples"] == 1
    assert rec["median_unthrottled_ms"] == 3.0  # median of 1, 3, 10
    assert rec["median_sm_mhz"] == 1900
    json.dumps(rec, allow_nan=False)


def test_series_record_without_telemetry():
    rec = Series(samples_ms=[1.0, 3.0], telemetry=[None, None]).record(flops=10)
    assert rec["throttled_samples"] == 0 and rec["median_unthrottled_ms"] == 2.0 and rec["median_sm_mhz"] is None


def test_floor_source_exists():
    assert timing.floor_source().is_file()
    assert "gemmlab_empty" in timing.floor_source().read_text()
    assert timing.FLOOR_ENTRY.startswith("gemmlab_empty<")


def test_budget_stops_a_fixed_count_protocol():
    """budget_s also ends sampling when no target_rel_spread is set (wall-clock budget)."""
    import time as _time
    gpu = FakeGpu()
    k = gpu.kernel("k", 1.0)

    def slow():
        _time.sleep(0.01)
        k()

    out = measure(gpu, {"k": slow}, TimingOptions(mode="events", warmup=0, repeat=3, max_repeat=1000,
                                                  budget_s=0.1, batch=1, floor=False))
    n = len(out["protocols"]["events"]["k"].samples_ms)
    assert out["stopped_by"]["events"] == "budget" and 3 <= n < 50
