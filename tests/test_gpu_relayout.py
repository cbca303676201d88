"""GPU tests of the relayout path (marker ``gpu``; an sm_90 GPU): the partial-tile suite (1x1x1,
31x33x17, 63x65x33, 4097x1x3, 35x79x19, 100x100x100, 129x260x36) through wgmma_bf16 (B row- and
column-major) and wgmma_tf32 (row/col and row/row), where TMA cannot take a stored row stride the
plan pad-copies that operand into the workspace first and a TF32 row-major B is transposed into a
K-major copy; verified against float64 with gemmlab's own pipeline (NaN-filled C, guard bands
around A, B, C and the workspace, inputs unchanged, repeat stability); the record lists the copy
steps; compute-sanitizer memcheck and racecheck are clean at small shapes."""

from __future__ import annotations

import pytest

from tcpoint import ok as _ok, run as _run

pytestmark = pytest.mark.gpu

SUITE = [(1, 1, 1), (31, 33, 17), (63, 65, 33), (4097, 1, 3), (35, 79, 19), (100, 100, 100), (129, 260, 36)]
CASES = [("wgmma_bf16", "bf16", "row"), ("wgmma_bf16", "bf16", "col"), ("wgmma_tf32", "tf32", "col"),
         ("wgmma_tf32", "tf32", "row")]


def _copies(precision, layout_b, shape):
    m, n, k = shape
    vec = 8 if precision == "bf16" else 4
    out = ["pad"] if k % vec else []
    if precision == "tf32" and layout_b == "row":
        out.append("transpose")
    elif (k if layout_b == "col" else n) % vec:
        out.append("pad")
    return out


@pytest.mark.parametrize("kernel, precision, layout_b", CASES, ids=str)
@pytest.mark.parametrize("shape", SUITE, ids=str)
def test_partial_tiles_through_the_relayout_path(tmp_path, kernel, precision, layout_b, shape):
    rec = _ok(_run(tmp_path, kernel, precision, layout_b, shape))
    kinds = [line.split("(")[1].split(")")[0] for line in rec["plan"][:-1]]
    assert kinds == _copies(precision, layout_b, shape) and rec["plan"][-1].startswith("main kernel")  # + a note where C is stored from registers
    assert (rec["workspace_bytes"] > 0) == bool(kinds)


@pytest.mark.parametrize("kernel, precision, layout_b, shape, params", [
    ("wgmma_bf16", "bf16", "row", (2100, 2050, 1001), {}),  # A and B padded, several tiles per CTA, ring wraps
    ("wgmma_bf16", "bf16", "col", (2100, 2050, 1001), {"CLUSTER": 2}),
    ("wgmma_tf32", "tf32", "row", (2100, 2050, 1000), {}),  # transpose only
    ("wgmma_tf32", "tf32", "row", (2100, 2050, 999), {"SCHED": 2, "BN": 128, "CLUSTER": 2}),
], ids=str)
def test_relayout_on_multi_tile_shapes(tmp_path, kernel, precision, layout_b, shape, params):
    _ok(_run(tmp_path, kernel, precision, layout_b, shape, params))


@pytest.mark.parametrize("kernel, precision, layout_b, shape, tool", [
    ("wgmma_bf16", "bf16", "row", (63, 65, 33), "memcheck"),
    ("wgmma_tf32", "tf32", "row", (35, 79, 19), "memcheck"),
    ("wgmma_tf32", "tf32", "row", (129, 260, 36), "racecheck"),
    ("wgmma_bf16", "bf16", "col", (31, 33, 17), "racecheck"),
], ids=str)
def test_sanitizer_clean_on_the_relayout_path(tmp_path, kernel, precision, layout_b, shape, tool):
    rec = _run(tmp_path, kernel, precision, layout_b, shape, sanitizer=tool)
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok", rec.get("error")
