"""The Triton persistent TMA matmul ``triton_tma_persistent`` on the GPU (issue 46, item 2; an sm_90
GPU and Triton): the partial-tile suite in its TMA-describable form (K a multiple of 8; N a
multiple of 8 with a row-major B; M free) in bf16 and fp16 and both B layouts, plus a multi-tile
shape where each program walks several tiles (more tiles than SMs), verified by the core
(NaN-filled C against float64, guard bands of A, B, C and the core-allocated global scratch that
holds the device-side TMA descriptors; check_only); non-default parameters (flattened loops, other
tiles, no grouping); compute-sanitizer memcheck and racecheck at a small shape; and a graph-timed
4096^3 point against cuBLAS in the same run (gemmlab's timing of the Triton launch, never Triton's
timer). Skipped with the reason without a GPU or Triton."""

from __future__ import annotations

import pytest

from gemmlab.gpu.triton_compile import unavailable
from gemmlab.run.pipeline import run_point

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(unavailable() is not None, reason=f"Triton not importable: {unavailable()}")]

NAME = "triton_tma_persistent"
MULTI = (2100, 2056, 1000)  # 17 x 9 = 153 tiles of 128x256 > 132 SMs: programs take a second tile
# tests/test_gpu_shapes.py's partial-tile suite with K rounded up to a multiple of 8 (and N for a row-major B)
COL = [(1, 1, 8), (5, 37, 40), (16, 4097, 1000), (64, 130, 4104), (35, 79, 24), (129, 255, 1000), (3, 4096, 520),
       (68, 100, 1000), (20, 44, 88), MULTI]
ROW = [(1, 8, 8), (5, 40, 40), (16, 4104, 1000), (64, 136, 4104), (35, 80, 24), (129, 256, 1000), (3, 4096, 520),
       (68, 104, 1000), (20, 48, 88), MULTI]
CASES = [(layout, shape) for layout, shapes in (("col", COL), ("row", ROW)) for shape in shapes]


def _check(tmp_path, precision, layout_b, shape, params=None, **over):
    rec = run_point({"kernel": {"name": NAME, **(params or {})}, "shape": list(shape), "precision": precision,
                     "layout": {"a": "row", "b": layout_b}, "inputs": {"distribution": "integers"}, **over},
                    tmp_path / "p", check_only=not over)
    return rec


@pytest.mark.parametrize("layout_b, shape", CASES, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v)
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_persistent_tma_partial_tiles_verify(tmp_path, precision, layout_b, shape):
    rec = _check(tmp_path, precision, layout_b, shape)
    assert rec["status"] == "checked", rec["error"]
    assert rec["verification"]["passed"] and rec["verification"]["nan_outputs"] == 0
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    tiles = -(-shape[0] // 128) * -(-shape[1] // 256)
    assert rec["launch"]["grid"][0] == min(rec["device"]["sm_count"], tiles)
    assert rec["workspace_bytes"] == 256 * rec["launch"]["grid"][0]  # the descriptors' global scratch
    assert rec["sass_check"]["verdict"] == "present"


@pytest.mark.parametrize("params", [
    {"FLATTEN": 1, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 4},
    {"FLATTEN": 1, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    {"BLOCK_K": 128, "num_stages": 2, "GROUP_M": 1},
    {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "GROUP_M": 16, "num_stages": 5},
], ids=str)
@pytest.mark.parametrize("layout_b, shape", [("col", MULTI), ("col", (35, 79, 24)), ("row", (129, 256, 1000))], ids=str)
def test_persistent_tma_other_parameters_verify(tmp_path, layout_b, shape, params):
    rec = _check(tmp_path, "bf16", layout_b, shape, params)
    assert rec["status"] == "checked", rec["error"]
    assert rec["verification"]["passed"] and rec["guard_bands"] == "intact"


@pytest.mark.parametrize("tool, shape", [("memcheck", (300, 132, 200)), ("racecheck", (300, 520, 200))], ids=str)
def test_persistent_tma_sanitizer_clean(tmp_path, tool, shape):
    rec = _check(tmp_path, "bf16", "col", shape, sanitizer=tool, timing={"warmup": 1, "repeat": 3, "mode": "events"})
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok", rec.get("error")


def test_persistent_tma_graph_timed_vs_cublas_at_4096(tmp_path):
    from gemmlab.contract.registry import load_registry
    why = load_registry().get("cublas").available()
    if why:
        pytest.skip(why)
    rec = run_point({"kernel": {"name": NAME}, "shape": [4096, 4096, 4096], "precision": "bf16",
                     "layout": {"a": "row", "b": "col"}, "baseline": "cublas",
                     "timing": {"mode": "graph", "warmup": 5, "repeat": 10}}, tmp_path / "p")
    assert rec["status"] == "ok", rec["error"]
    assert rec["verification"]["passed"] and rec["baseline"]["verification"]["passed"]
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"] and rec["repeat_stable"]
    assert rec["compile"]["sass"]["histogram"]["HGMMA"] > 0 and rec["compile"]["sass"]["histogram"]["UTMALDG"] > 0
    assert rec["timing"]["median_ms"] > 0 and rec["ratio_to_baseline"]["median_time"] > 0
