"""GPU tests for the measurement protocol and safety nets (marker ``gpu``; run on the H200).

cuBLAS baseline (needs the optional nvmath-python), graph/cold/adaptive timing, launch floor,
telemetry, roofline, guard bands, input immutability, repeat stability, sanitizer, integer
inputs with exact comparison, sampled verification.
"""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.run.pipeline import run_point

pytestmark = pytest.mark.gpu


def _cfg(kernel="tiled", shape=(63, 65, 33), params=None, **over):
    cfg = {"kernel": {"name": kernel, **(params or {})}, "shape": list(shape), "mode": "run",
           "timing": {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events"}}
    for key, value in over.items():
        if isinstance(value, dict):
            cfg.setdefault(key, {}).update(value)
        else:
            cfg[key] = value
    return cfg


def _ok(rec):
    assert rec["status"] == "ok", rec.get("error")
    return rec


@pytest.fixture(scope="module")
def cublas_available():
    from gemmlab.contract.registry import load_registry
    reason = load_registry().get("cublas").available()
    if reason:
        pytest.skip(reason)


def test_cublas_fp32_is_exact_on_1024_5(cublas_available):
    """1x1x1, A=[[1024.5]], B=[[1.0]]: float32 SGEMM must give exactly 1024.5 (TF32 would round it)."""
    from gemmlab.gpu import guards
    from gemmlab.gpu.device import open_gpu
    from gemmlab.contract.hookspecs import DevicePointers, Shape
    from gemmlab.contract.registry import load_registry
    gpu = open_gpu(0)
    spec = load_registry().get("cublas")
    a = guards.allocate(gpu, "A", (1, 1), np.array([[1024.5]], np.float32))
    b = guards.allocate(gpu, "B", (1, 1), np.array([[1.0]], np.float32))
    c = guards.allocate(gpu, "C", (1, 1))
    enqueue, close = spec.enqueue_function(Shape(1, 1, 1), {}, DevicePointers(a.address, b.address, c.address,
                                                                                int(gpu.stream.handle)), "fp32")
    try:
        enqueue()
        gpu.sync()
        assert guards.read(gpu, c)[0, 0] == np.float32(1024.5)
    finally:
        close()
        guards.release(a, b, c)


@pytest.mark.parametrize("shape", [(1, 1, 1), (63, 65, 33), (256, 256, 256)])
def test_cublas_verifies_like_any_kernel(cublas_available, shape, tmp_path):
    rec = _ok(run_point(_cfg("cublas", shape), tmp_path))
    assert rec["verification"]["passed"] and rec["library"].startswith("cuBLAS")


def test_baseline_ratio_is_recorded(cublas_available, tmp_path):
    rec = _ok(run_point(_cfg("tiled", (256, 256, 256), baseline="cublas"), tmp_path))
    r = rec["ratio_to_baseline"]
    assert r["baseline"] == "cublas"
    assert r["median_time"] == pytest.approx(rec["timing"]["median_ms"] / rec["baseline"]["timing"]["median_ms"])
    assert rec["baseline"]["verification"]["passed"]
    assert len(rec["baseline"]["timing"]["samples_ms"]) == len(rec["timing"]["samples_ms"]) == 3


def test_tf32_is_labelled_and_verified_with_its_tolerance(cublas_available, tmp_path):
    rec = _ok(run_point(_cfg("cublas", (256, 256, 1024), precision="tf32"), tmp_path))
    assert rec["precision"].startswith("tf32")


def test_graph_and_both_modes_record_overhead_and_floor(tmp_path):
    rec = _ok(run_point(_cfg("tiled", (256, 256, 256), timing={"mode": "both"}), tmp_path))
    t = rec["timing"]
    assert t["protocol"] == "graph" and set(t["protocols"]) == {"events", "graph"}
    assert "host_overhead_per_launch_ms" in t
    assert set(t["launch_floor_ms"]) == {"events", "graph"} and all(v > 0 for v in t["launch_floor_ms"].values())
    assert t["median_over_floor"] > 0


def test_cold_l2_uses_one_launch_per_sample(tmp_path):
    rec = _ok(run_point(_cfg("tiled", (512, 512, 512), timing={"mode": "graph", "l2": "cold", "repeat": 4}), tmp_path))
    assert rec["timing"]["batch"] == 1 and rec["timing"]["l2"] == "cold"
    assert "L2 cold" in rec["timing"]["description"]


def test_adaptive_stopping_keeps_raw_samples(tmp_path):
    rec = _ok(run_point(_cfg("tiled", (256, 256, 256), timing={"mode": "graph", "repeat": 5, "max_repeat": 40,
                                                                "target_rel_spread": 1e-9, "budget_s": 0.2}), tmp_path))
    t = rec["timing"]
    assert t["stopped_by"]["graph"] in ("budget", "max_repeat") and 5 <= len(t["samples_ms"]) <= 40


def test_telemetry_roofline_and_resources(tmp_path):
    rec = _ok(run_point(_cfg("tiled", (1024, 1024, 1024)), tmp_path))
    t = rec["timing"]
    assert isinstance(t["throttled_samples"], int) and t["median_sm_mhz"] > 0
    assert all(s is not None and s["sm_mhz"] > 0 for s in t["telemetry"])
    roof = rec["roofline"]
    assert roof["arithmetic_intensity"] == pytest.approx(2 * 1024**3 / (4 * 3 * 1024**2), rel=1e-3)
    assert 0 < roof["pct_fp32_peak"] < 100 and 0 < roof["pct_dram_bandwidth"] < 100
    occ = rec["occupancy"]
    assert occ["max_active_blocks_per_sm"] >= 1 and occ["blocks"] == 256
    assert rec["compile"]["driver_attributes"]["registers"] > 0


def test_nets_report_clean_run(tmp_path):
    rec = _ok(run_point(_cfg("tiled", (63, 65, 33)), tmp_path))
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"] is True and rec["repeat_stable"] is True


def test_integer_inputs_compare_exactly(tmp_path):
    rec = _ok(run_point(_cfg("tiled", (129, 255, 1000), inputs={"distribution": "integers"}), tmp_path))
    assert rec["verification"]["rule"] == "exact" and rec["verification"]["max_abs_error"] == 0.0


def test_sampled_verification_with_freivalds(tmp_path):
    rec = _ok(run_point(_cfg("tiled", (1024, 1024, 1024), verify={"method": "sampled", "sample": 64}), tmp_path))
    v = rec["verification"]
    assert v["method"].startswith("sampled") and v["freivalds"]["passed"]


def test_memcheck_clean_on_tiled(tmp_path):
    rec = run_point(_cfg("tiled", (31, 33, 17), sanitizer="memcheck"), tmp_path)
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok"


BIG_SMEM_PLUGIN = '''
from pathlib import Path
from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv

class BigSmem(KernelSpec):
    def entry(self, params):
        return f"gemm_bigsmem<{params['KB'] * 256}>"
    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1),
                      shared_bytes=params["KB"] * 1024)

@hookimpl
def gemmlab_kernels():
    return [BigSmem(name="bigsmem", source=str(Path(__file__).with_name("bigsmem.cu")), defaults={"KB": 96})]
'''

BIG_SMEM_SOURCE = '''
// Naive GEMM whose accumulators live at the top of a dynamic shared buffer larger than 48 KiB.
template <int FLOATS>
__global__ void gemm_bigsmem(const float *a, const float *b, float *c, int m, int n, int k) {
  extern __shared__ float scratch[];
  const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  const int slot = FLOATS - 256 + threadIdx.y * 16 + threadIdx.x;
  scratch[slot] = 0.0f;
  if (row < m && col < n) {
    for (int i = 0; i < k; i++) scratch[slot] += a[(long long)row * k + i] * b[(long long)i * n + col];
    c[(long long)row * n + col] = scratch[slot];
  }
}
'''


def test_dynamic_shared_memory_above_48k_opt_in(tmp_path):
    d = tmp_path / "plug"
    d.mkdir()
    (d / "bigsmem.py").write_text(BIG_SMEM_PLUGIN)
    (d / "bigsmem.cu").write_text(BIG_SMEM_SOURCE)
    rec = _ok(run_point(_cfg("bigsmem", (63, 65, 33), plugin_dirs=[str(d)]), tmp_path / "run"))
    assert rec["launch"]["shared_bytes"] == 96 * 1024
    assert rec["occupancy"]["max_active_blocks_per_sm"] >= 1


def test_disk_cache_hit_loads_and_runs(tmp_path):
    cache = {"enabled": True, "dir": str(tmp_path / "cache")}
    first = _ok(run_point(_cfg("tiled", (63, 65, 33), params={"BK": 8}, cache=cache), tmp_path / "a"))
    from gemmlab.gpu import compile as compile_stage
    compile_stage.clear_cache()  # force the on-disk path, as a new process would
    second = _ok(run_point(_cfg("tiled", (63, 65, 33), params={"BK": 8}, cache=cache), tmp_path / "b"))
    assert first["compile"]["disk_cache"] == "miss" and second["compile"]["disk_cache"] == "hit"


def test_too_many_threads_for_the_registers_is_invalid_not_a_crash(tmp_path):
    rec = run_point(_cfg("tiled", (256, 256, 256), params={"BM": 128, "BN": 128, "BK": 8, "TM": 4, "TN": 4}),
                    tmp_path)
    assert rec["status"] in ("invalid", "ok")  # 1024 threads: fits only if registers allow
    if rec["status"] == "invalid":
        assert "registers per thread" in rec["error"]


def test_same_kernel_other_tile_as_baseline_is_measured_separately(tmp_path):
    """baseline=tiled (default tile) beside tiled with another tile: two candidates, two series."""
    rec = _ok(run_point(_cfg("tiled", (1024, 1024, 1024), params={"BM": 128, "BN": 128, "BK": 32, "TM": 16, "TN": 4},
                             baseline="tiled"), tmp_path))
    assert rec["kernel"]["params"]["BM"] == 128 and rec["baseline"]["params"]["BM"] == 64
    assert rec["timing"]["samples_ms"] != rec["baseline"]["timing"]["samples_ms"]
