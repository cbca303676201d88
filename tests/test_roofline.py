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


# --- each precision's own peak, the memory floor and the plausibility gate (issue 40) ---------------

def test_each_precision_has_its_own_peak_on_sm90():
    from gemmlab.stages.roofline import peak_flops
    # 132 SMs at 1830 MHz: the H100 whitepaper's dense figures (TFLOP/s)
    expect = {"fp32": 61.8, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}
    for precision, tflops in expect.items():
        assert peak_flops("90", precision, 132, 1830) / 1e12 == pytest.approx(tflops, rel=1e-3)
    assert peak_flops("86", "bf16", 84, 1700) is None  # a tensor rate not in the table: unknown
    assert peak_flops("86", "fp32", 84, 1700) == 84 * 256 * 1700e6


def test_bf16_record_says_its_percent_of_the_bf16_peak():
    n = 4096
    r = roofline(n, n, n, median_ms=0.2, sm_count=132, arch="90", sm_mhz=1980, dram_bytes_per_s=3.35e12,
                 ab_bytes=2, precision="bf16")
    assert r["pct_fp32_peak"] > 1000  # the number the old record showed as its only percentage
    assert r["pct_peak"] == pytest.approx(100 * 2 * n**3 / 0.2e-3 / (132 * 4096 * 1980e6), abs=0.01)
    assert r["units"] == "BF16 tensor cores (dense)"


def test_memory_floor_levels():
    from gemmlab.stages.roofline import memory_floor
    l2 = 50 << 20
    warm_small = memory_floor(1, 4096, 4096, 2, "warm", l2, 132, 1980, 3.35e12)
    assert warm_small["level"].startswith("L2") and warm_small["bytes"] == 2 * (4096 + 4096 * 4096) + 4 * 4096
    assert warm_small["bytes_per_s"] == 132 * 128 * 1980e6
    cold = memory_floor(1, 4096, 4096, 2, "cold", l2, 132, 1980, 3.35e12)
    assert cold["level"].startswith("DRAM") and cold["bytes"] == 2 * (4096 + 4096 * 4096)
    assert cold["seconds"] == pytest.approx(cold["bytes"] / 3.35e12)
    big = memory_floor(1, 8192, 8192, 4, "warm", l2, 132, 1980, 3.35e12)
    assert big["bytes"] == 4 * (8192 + 8192 * 8192) + 4 * 8192 - l2 and big["level"].startswith("DRAM")


def test_plausibility_refuses_a_lazy_figure_and_passes_a_real_one():
    from gemmlab.stages.roofline import plausibility
    n = 1024
    # the lazy kernel of issue 40: 643 TFLOP/s "fp32" at 1024^3
    lazy = plausibility(n, n, n, 2 * n**3 / 643e12 * 1e3, 132, "90", 1980, 3.35e12, 4, "fp32", "warm", 50 << 20)
    assert not lazy["passed"] and "above the FP32 CUDA cores peak" in lazy["reason"] and "TFLOP/s" in lazy["reason"]
    real = plausibility(n, n, n, 2 * n**3 / 50e12 * 1e3, 132, "90", 1980, 3.35e12, 4, "fp32", "warm", 50 << 20)
    assert real["passed"] and real["reason"] is None
    # bf16 at 700 TFLOP/s is fine for bf16, impossible for fp32
    t = 2 * n**3 / 700e12 * 1e3
    assert plausibility(n, n, n, t, 132, "90", 1980, 3.35e12, 2, "bf16", "warm", 50 << 20)["passed"]
    assert not plausibility(n, n, n, t, 132, "90", 1980, 3.35e12, 4, "fp32", "warm", 50 << 20)["passed"]


def test_plausibility_memory_floor_cold_and_margin():
    from gemmlab.stages.roofline import MARGIN, plausibility
    ab = 2 * (1 + 4096 * 4096)  # a 1x4096x4096 bf16 product reads B once: ~33.6 MB
    floor_ms = ab / 3.35e12 * 1e3
    args = (1, 4096, 4096)
    ok = plausibility(*args, floor_ms / (1 + MARGIN / 2), 132, "90", 1980, 3.35e12, 2, "bf16", "cold", 50 << 20)
    assert ok["passed"]  # inside the margin
    bad = plausibility(*args, floor_ms / 2, 132, "90", 1980, 3.35e12, 2, "bf16", "cold", 50 << 20)
    assert not bad["passed"] and "DRAM" in bad["reason"] and "TB/s" in bad["reason"]
    # the same time with a warm L2 is legitimate (the working set fits in L2)
    assert plausibility(*args, floor_ms / 2, 132, "90", 1980, 3.35e12, 2, "bf16", "warm", 50 << 20)["passed"]


def test_plausibility_unknown_rates_are_not_applied():
    from gemmlab.stages.roofline import plausibility
    r = plausibility(64, 64, 64, 1e-9, 84, "86", None, None, 2, "bf16", "warm", 0)
    assert r["passed"] and r["compute_floor_ms"] is None and r["memory_floor_ms"] is None
