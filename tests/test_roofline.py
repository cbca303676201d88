"""gemmlab.stages.roofline: the numbers for known cases (Williams et al. roofline model, FP32 FMA peak)."""

from __future__ import annotations

import json

import pytest

from gemmlab.stages.roofline import FP32_LANES_PER_SM, roofline


def test_h200_4096_cube():
    n = 4096
    r = roofline(n, n, n, median_ms=5.0, sm_count=132, arch="90", sm_mhz=1980, dram_bytes_per_s=4.8e12)
    flops = 2 * n**3
    assert r["flops"] == flops == 137_438_953_472
    assert r["min_bytes"] == 4 * 3 * n * n
    assert r["arithmetic_intensity"] == pytest.approx(682.667, abs=1e-3)  # 2n^3 / (12 n^2) = n / 6
    # 132 SMs x 128 FP32 lanes x 2 FLOP (FMA) x 1.98 GHz = 66.9 TFLOP/s
    assert r["fp32_peak_gflops"] == pytest.approx(66_908.16)
    assert r["gflops"] == pytest.approx(flops / 5e-3 / 1e9)  # 27.49 TFLOP/s
    assert r["gflops"] == pytest.approx(27_487.79, abs=0.01)
    assert r["pct_fp32_peak"] == pytest.approx(41.08, abs=0.005)
    assert r["min_bytes_per_s"] == pytest.approx(4 * 3 * n * n / 5e-3)
    assert r["pct_dram_bandwidth"] == pytest.approx(100 * 4 * 3 * n * n / 5e-3 / 4.8e12, abs=0.005)
    assert r["sm_mhz_used"] == 1980
    assert r["dram_peak_bytes_per_s"] == 4.8e12
    json.dumps(r, allow_nan=False)


def test_small_skinny_case():
    r = roofline(1, 1, 1, median_ms=1.0, sm_count=1, arch="80", sm_mhz=1000, dram_bytes_per_s=None)
    assert r["flops"] == 2 and r["min_bytes"] == 12
    assert r["arithmetic_intensity"] == pytest.approx(0.167)
    assert r["fp32_peak_gflops"] == pytest.approx(64 * 2 * 1000 * 1e6 / 1e9)  # sm_80: 64 FP32 lanes per SM
    assert r["pct_dram_bandwidth"] is None and r["dram_peak_bytes_per_s"] is None


@pytest.mark.parametrize("arch, sm_mhz", [("100", 1980), ("90", None), ("90", 0)])
def test_unknown_peak_is_none(arch, sm_mhz):
    r = roofline(64, 64, 64, median_ms=0.01, sm_count=132, arch=arch, sm_mhz=sm_mhz, dram_bytes_per_s=4.8e12)
    assert r["fp32_peak_gflops"] is None and r["pct_fp32_peak"] is None
    assert r["gflops"] > 0 and r["pct_dram_bandwidth"] is not None
    json.dumps(r, allow_nan=False)


def test_lane_table():
    assert FP32_LANES_PER_SM["90"] == 128
    assert FP32_LANES_PER_SM["80"] == 64
