"""Triton kernels on the GPU (issue 46): the built-in ``triton_matmul`` on the partial-tile suite
(tests/test_gpu_shapes.py's shapes) in every precision and B layout, verified by the core
(NaN-filled C against float64, guard bands; check_only), and one graph-timed 1024^3 point per
precision against cuBLAS in the same run (the core's timing: CUDA-graph capture of the Triton
launch on the run's stream, never Triton's timer). Skipped with the reason where no GPU is usable
or Triton (the optional extra gemmlab[triton]) cannot be imported."""

from __future__ import annotations

import pytest

from gemmlab.gpu.triton_compile import unavailable
from gemmlab.run.pipeline import run_point

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(unavailable() is not None, reason=f"Triton not importable: {unavailable()}")]

SHAPES = [(1, 1, 1), (5, 37, 33), (16, 4097, 1000), (64, 130, 4099), (35, 79, 19), (129, 255, 1000), (3, 4096, 515),
          (68, 100, 1000), (20, 44, 84)]  # tests/test_gpu_shapes.py's partial-tile suite
PRECISIONS = ["fp32", "tf32", "bf16", "fp16"]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layout_b", ["row", "col"])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_triton_matmul_partial_tiles_verify(tmp_path, precision, layout_b, shape):
    rec = run_point({"kernel": {"name": "triton_matmul"}, "shape": list(shape), "precision": precision,
                     "layout": {"a": "row", "b": layout_b}, "inputs": {"distribution": "integers"}},
                    tmp_path / "p", check_only=True)
    assert rec["status"] == "checked", rec["error"]
    assert rec["verification"]["passed"] and rec["guard_bands"] == "intact"
    assert rec["kernel"]["backend"] == "triton" and rec["compile"]["driver_attributes"]["registers"] > 0


def test_triton_matmul_other_tiles_verify(tmp_path):
    """Parameters away from the defaults (a 64x128 tile, BLOCK_K 64, 8 warps, 3 stages, no grouping)."""
    rec = run_point({"kernel": {"name": "triton_matmul", "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 1,
                                "num_warps": 8, "num_stages": 3},
                     "shape": [129, 255, 1000], "precision": "bf16", "inputs": {"distribution": "integers"}},
                    tmp_path / "p", check_only=True)
    assert rec["status"] == "checked", rec["error"]


def _cublas_unavailable():
    from gemmlab.contract.registry import load_registry
    return load_registry().get("cublas").available()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_triton_matmul_graph_timed_vs_cublas_at_1024(tmp_path, precision):
    if _cublas_unavailable():
        pytest.skip(_cublas_unavailable())
    rec = run_point({"kernel": {"name": "triton_matmul"}, "shape": [1024, 1024, 1024], "precision": precision,
                     "baseline": "cublas", "timing": {"mode": "graph", "warmup": 5, "repeat": 10}}, tmp_path / "p")
    assert rec["status"] == "ok", rec["error"]
    assert rec["verification"]["passed"] and rec["baseline"]["verification"]["passed"]
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"] and rec["repeat_stable"]
    assert rec["timing"]["median_ms"] > 0 and rec["baseline"]["timing"]["median_ms"] > 0
    assert rec["ratio_to_baseline"]["median_time"] > 0
