"""The Triton agreement's summary (gemmlab/run/triton_agreement.py) with gemmlab's clock telemetry: a
throttled warm point gets the ratio against its unthrottled samples and a note saying so; the
agreement verdict stays on the plain medians. CPU only: the points and Triton's timers are stand-ins
with the figures of the H100 run of session 35 (docs/results/triton/README.md)."""

from __future__ import annotations

import pytest

from gemmlab.run import triton_agreement as ta


def _record(median, throttled, unthrottled, mhz):
    return {"status": "ok", "device": {"name": "NVIDIA H100 80GB HBM3"},
            "timing": {"median_ms": median, "samples_ms": [median] * 30, "throttled_samples": throttled,
                       "median_unthrottled_ms": unthrottled, "median_sm_mhz": mhz, "max_sm_mhz": 1980}}


class Session:
    def __init__(self, graph, cold):
        self.records = {"graph": graph, "cold": cold}

    def run_point(self, cfg, out_dir):
        return self.records[out_dir.name]


@pytest.mark.parametrize("throttled", [27, 0])
def test_a_throttled_warm_point_gets_the_unthrottled_ratio(tmp_path, monkeypatch, throttled):
    monkeypatch.setattr(ta, "triton_timers", lambda *a, **k: {"do_bench_cudagraph_ms": 1.5460, "do_bench_ms": 1.6069})
    graph = _record(1.6106, throttled, 1.5763 if throttled else 1.6106, 1530.0 if throttled else 1980.0)
    summary, records = ta.agreement("triton_tma_persistent", "bf16", "col", (8192, 8192, 8192), tmp_path,
                                    session=Session(graph, _record(1.4361, 0, 1.4361, 1980.0)))
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
    monkeypatch.setattr(ta, "triton_timers", lambda *a, **k: {"do_bench_cudagraph_ms": 1.5460, "do_bench_ms": 1.6069})
    summary, _ = ta.agreement("triton_tma_persistent", "bf16", "col", (8192, 8192, 8192), tmp_path,
                              session=Session(_record(1.6106, 30, None, 1500.0), _record(1.4361, 0, 1.4361, 1980.0)))
    assert "ratio_graph_unthrottled" not in summary
    assert summary["throttled_note"].endswith("every sample was throttled: no unthrottled ratio")
