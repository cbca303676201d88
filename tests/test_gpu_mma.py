"""GPU tests of the mma.sync rungs (marker ``gpu``): mma_bf16 (bf16 and fp16) and mma_tf32, B row-
and column-major, with shared-memory rows padded (``SWIZZLE=0``) and XOR-swizzled
(``SWIZZLE=1``, the default; gemmlab/mma_sync.cuh ``smem_offset``), verified against float64 on the partial-tile
suite (the 16-byte cp.async path where the row strides allow it, the element path elsewhere), on
multi-block shapes whose K spans more k-tiles than stages (the ring wraps), with small tiles whose
shared rows hold 2 or 4 chunks (the swizzle's rows-per-line branch); racecheck clean with the
swizzled layout. gemmlab's own pipeline: NaN-filled C, guard bands, inputs unchanged, repeat
stability (tests/tcpoint.py)."""

from __future__ import annotations

import pytest

from tcpoint import ok as _ok, run as _run

pytestmark = pytest.mark.gpu

PARTIAL = [(1, 1, 1), (31, 33, 17), (63, 65, 33), (4097, 1, 3), (35, 79, 19), (100, 100, 100), (64, 256, 64)]
MULTI = (300, 520, 1000)  # 3 x 3 blocks of 128 x 256 (partial), 32 k-tiles of 32 (> STAGES): the ring wraps
RUNGS = [("mma_bf16", "bf16", "row"), ("mma_bf16", "bf16", "col"), ("mma_bf16", "fp16", "row"),
         ("mma_tf32", "tf32", "row"), ("mma_tf32", "tf32", "col")]


@pytest.mark.parametrize("swizzle", [0, 1])
@pytest.mark.parametrize("shape", PARTIAL, ids=str)
@pytest.mark.parametrize("kernel, precision, layout_b", RUNGS, ids=str)
def test_partial_tiles(tmp_path, kernel, precision, layout_b, shape, swizzle):
    rec = _ok(_run(tmp_path, kernel, precision, layout_b, shape, {"SWIZZLE": swizzle}))
    assert rec["compile"]["sass"]["histogram"]["HMMA"] > 0


@pytest.mark.parametrize("params", [{"SWIZZLE": 0}, {"SWIZZLE": 1},
                                    {"SWIZZLE": 1, "BK": 16, "BM": 64, "BN": 64, "WM": 32, "WN": 32},
                                    {"SWIZZLE": 1, "BK": 64, "STAGES": 2}], ids=str)
@pytest.mark.parametrize("kernel, precision, layout_b", RUNGS, ids=str)
def test_multi_block_shapes(tmp_path, kernel, precision, layout_b, params):
    _ok(_run(tmp_path, kernel, precision, layout_b, MULTI, params))


@pytest.mark.parametrize("kernel, precision, layout_b", [("mma_bf16", "bf16", "row"), ("mma_tf32", "tf32", "row"),
                                                         ("mma_bf16", "bf16", "col")], ids=str)
def test_swizzled_racecheck_clean(tmp_path, kernel, precision, layout_b):
    rec = _run(tmp_path, kernel, precision, layout_b, (300, 264, 200), {"SWIZZLE": 1}, sanitizer="racecheck")
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok", rec.get("error")
