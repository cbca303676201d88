"""GPU tests of the wgmma rungs (marker ``gpu``; an sm_90 GPU): wgmma_bf16 (B column- and
row-major) and wgmma_tf32 verified against float64 on the partial-tile suite in its
TMA-describable form (K a multiple of 8 for bf16 / 4 for tf32, N a multiple of 8 for row-major
bf16 B; M free), with the 2-CTA cluster and ping-pong variants on shapes where each CTA computes
several tiles (the shapes TMA cannot describe take the relayout path: tests/test_gpu_relayout.py); SPLIT_K
(K not a multiple of SPLIT_K x BK) and the stream-K tail (TAIL=2) on partial tiles and multi-tile
shapes, bitwise repeatable (the split tiles' ordered reduction); SPLIT_K with REDUCE=2 (workspace
slabs + reduce step) on the same partial tiles, with the relayout pad / transpose copies and TF32; compute-sanitizer
racecheck and memcheck are clean at small shapes. gemmlab's own pipeline: NaN-filled C, guard
bands, inputs unchanged, repeat stability."""

from __future__ import annotations

import pytest

from gemmlab.run.pipeline import run_point
from tcpoint import FAST, ok as _ok, run as _run

pytestmark = pytest.mark.gpu

# the partial-tile suite (1x1x1, 31x33x17, 63x65x33, 4097x1x3, 35x79x19, 100x100x100) made TMA-describable
BF16_COL = [(1, 1, 8), (31, 33, 24), (63, 65, 40), (4097, 1, 8), (35, 79, 24), (100, 100, 104)]
BF16_ROW = [(1, 8, 8), (31, 40, 24), (63, 72, 40), (4097, 8, 8), (35, 80, 24), (100, 104, 104)]
TF32 = [(1, 1, 4), (31, 33, 20), (63, 65, 36), (4097, 1, 4), (35, 79, 20), (100, 100, 100)]
MULTI = (2100, 2050, 1000)  # 17 x 17 tiles of 128, 16 k-tiles (> STAGES): several tiles per CTA, ring wraps


@pytest.mark.parametrize("shape", BF16_COL, ids=str)
def test_wgmma_bf16_col_partial_tiles(tmp_path, shape):
    rec = _ok(_run(tmp_path, "wgmma_bf16", "bf16", "col", shape))
    assert rec["compile"]["sass"]["histogram"]["HGMMA"] > 0


@pytest.mark.parametrize("shape", BF16_ROW, ids=str)
def test_wgmma_bf16_row_partial_tiles(tmp_path, shape):
    _ok(_run(tmp_path, "wgmma_bf16", "bf16", "row", shape))


@pytest.mark.parametrize("shape", TF32, ids=str)
def test_wgmma_tf32_partial_tiles(tmp_path, shape):
    _ok(_run(tmp_path, "wgmma_tf32", "tf32", "col", shape))


@pytest.mark.parametrize("kernel, precision, layout_b, shape, params", [
    ("wgmma_bf16", "bf16", "col", MULTI, {}),
    ("wgmma_bf16", "bf16", "col", MULTI, {"CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "col", (300, 129, 200), {"CLUSTER": 2}),  # odd tile-row count: idle pair partner
    ("wgmma_bf16", "bf16", "row", (2100, 2056, 1000), {"CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "col", MULTI, {"SCHED": 2, "BN": 128, "STAGES": 6}),
    ("wgmma_bf16", "bf16", "row", (2100, 2056, 1000), {"SCHED": 2, "BN": 128, "CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "col", MULTI, {"BM": 256, "BN": 128}),
    ("wgmma_tf32", "tf32", "col", MULTI, {"SCHED": 2, "BN": 128, "CLUSTER": 2}),
], ids=str)
def test_variants_on_multi_tile_shapes(tmp_path, kernel, precision, layout_b, shape, params):
    rec = _ok(_run(tmp_path, kernel, precision, layout_b, shape, params))
    assert rec["launch"]["grid"][0] <= rec["device"]["sm_count"]


PP128 = {"SCHED": 2, "BN": 128, "STAGES": 6}


@pytest.mark.parametrize("kernel, precision, layout_b, shape, params", [
    ("wgmma_bf16", "bf16", "col", (100, 100, 1000), {"SPLIT_K": 4}),   # 16 k-tiles: 4 slices of 4 (K % 256 = 232)
    ("wgmma_bf16", "bf16", "col", (31, 33, 1000), {"SPLIT_K": 3}),     # 3 slices of 6, 6, 4
    ("wgmma_bf16", "bf16", "col", (1, 1, 4104), {"SPLIT_K": 16}),      # 65 k-tiles: 13 slices of 5
    ("wgmma_bf16", "bf16", "col", (4097, 1, 520), {"SPLIT_K": 7}),     # 9 k-tiles: 5 slices of 2, 2, 2, 2, 1
    ("wgmma_bf16", "bf16", "row", (63, 72, 1000), {"SPLIT_K": 4}),
    ("wgmma_bf16", "bf16", "col", (300, 129, 2000), {"SPLIT_K": 4, "CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "col", MULTI, {"SPLIT_K": 3, **PP128}),
    ("wgmma_bf16", "bf16", "col", (256, 256, 16384), {"SPLIT_K": 16}),
    ("wgmma_tf32", "tf32", "col", (35, 79, 500), {"SPLIT_K": 4}),
    ("wgmma_bf16", "bf16", "col", MULTI, {"TAIL": 2}),                 # 153 tiles on 132 SMs: 21 in the tail
    ("wgmma_bf16", "bf16", "col", (1024, 1024, 1024), {"TAIL": 2}),    # 32 tiles: all tail, ~4 k-tiles per CTA
    ("wgmma_bf16", "bf16", "row", (2100, 2056, 1000), {"TAIL": 2, "CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "col", MULTI, {"TAIL": 2, **PP128}),
    ("wgmma_tf32", "tf32", "col", MULTI, {"TAIL": 2}),
    ("wgmma_bf16", "bf16", "col", MULTI, {"TAIL": 3}),                 # the k-aligned tail order
    ("wgmma_bf16", "bf16", "col", (1024, 1024, 1024), {"TAIL": 3}),
    ("wgmma_bf16", "bf16", "row", (2100, 2056, 1000), {"TAIL": 3, "CLUSTER": 2}),
], ids=str)
def test_split_k_and_tail(tmp_path, kernel, precision, layout_b, shape, params):
    """Split tiles reduced in C in rank order: verified, NaN-free (every element stored by its
    rank-0 item), and the last timed launch equals the first bitwise (_ok: repeat_stable)."""
    _ok(_run(tmp_path, kernel, precision, layout_b, shape, params))


R2 = {"REDUCE": 2}


@pytest.mark.parametrize("kernel, precision, layout_a, layout_b, shape, params", [
    ("wgmma_bf16", "bf16", "row", "col", (100, 100, 1000), {"SPLIT_K": 4, **R2}),   # 16 k-tiles: 4 slices, K % 256 = 232
    ("wgmma_bf16", "bf16", "row", "col", (31, 33, 1000), {"SPLIT_K": 3, **R2}),     # slices of 6, 6, 4; M*N % 4 = 3
    ("wgmma_bf16", "bf16", "row", "col", (1, 1, 4104), {"SPLIT_K": 16, **R2}),      # 13 slices of 5: S < SPLIT_K
    ("wgmma_bf16", "bf16", "row", "col", (4097, 1, 520), {"SPLIT_K": 7, **R2}),
    ("wgmma_bf16", "bf16", "row", "row", (63, 72, 1000), {"SPLIT_K": 4, **R2}),
    ("wgmma_bf16", "bf16", "row", "col", (300, 129, 2000), {"SPLIT_K": 4, "CLUSTER": 2, **R2}),
    ("wgmma_bf16", "bf16", "row", "col", MULTI, {"SPLIT_K": 3, **PP128, **R2}),    # 867 items: several per CTA
    ("wgmma_bf16", "bf16", "row", "col", (256, 256, 16384), {"SPLIT_K": 16, "BN": 128, **R2}),
    ("wgmma_bf16", "bf16", "row", "col", (31, 33, 1001), {"SPLIT_K": 4, **R2}),     # pad copies of A and B first
    ("wgmma_bf16", "bf16", "row", "row", (35, 79, 1001), {"SPLIT_K": 4, **R2}),     # pad copies (K and N odd)
    ("wgmma_tf32", "tf32", "row", "col", (35, 79, 500), {"SPLIT_K": 4, **R2}),
    ("wgmma_tf32", "tf32", "row", "row", (35, 79, 502), {"SPLIT_K": 4, **R2}),      # transposed B copy + pad A
], ids=str)
def test_split_k_reduce_workspace(tmp_path, kernel, precision, layout_a, layout_b, shape, params):
    """REDUCE=2: partial tiles stored into workspace slabs (after any relayout copy), the reduce
    step sums them into C: verified, NaN-free (the reduce writes every C element), and bitwise
    repeatable (_ok: repeat_stable); the record's plan ends with the reduce step."""
    cfg = {"kernel": {"name": kernel, **params}, "shape": list(shape), "precision": precision,
           "layout": {"a": layout_a, "b": layout_b}, "timing": dict(FAST)}
    rec = _ok(run_point(cfg, tmp_path / "run"))
    assert "wgmma_split_reduce" in rec["plan"][-1] and "main kernel" in rec["plan"][-2], rec["plan"]


E2 = {"EPI": 2}


@pytest.mark.parametrize("kernel, precision, layout_b, shape, params", [
    ("wgmma_bf16", "bf16", "col", (1, 4, 8), E2),          # one element row: the box clipped to 1 x 4
    ("wgmma_bf16", "bf16", "col", (31, 36, 24), E2),
    ("wgmma_bf16", "bf16", "col", (63, 68, 40), E2),
    ("wgmma_bf16", "bf16", "col", (4097, 4, 8), E2),        # 33 tile rows, one 4-column chunk
    ("wgmma_bf16", "bf16", "col", (100, 100, 104), E2),
    ("wgmma_bf16", "bf16", "row", (35, 80, 24), E2),
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), E2),   # several tiles per CTA: staging buffers reused
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), {**E2, "CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "row", (2100, 2056, 1000), {**E2, **PP128}),
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), {**E2, "BM": 256, "BN": 128}),
    ("wgmma_tf32", "tf32", "col", (35, 80, 20), E2),
    ("wgmma_tf32", "tf32", "col", MULTI[:1] + (2052, 1000), E2),
    ("wgmma_tf32", "tf32", "row", (300, 132, 200), E2),     # transposed-B copy, then the TMA store
    # split tiles in this entry: rank 0 TMA-stores, ranks >= 1 TMA reduce-add after the flag
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), {**E2, "TAIL": 2}),  # 153 tiles: 132 whole, 21 split
    ("wgmma_bf16", "bf16", "col", (300, 132, 1000), {**E2, "SPLIT_K": 3}),       # every tile split
    ("wgmma_bf16", "bf16", "col", (256, 512, 16384), {**E2, "SPLIT_K": 16}),     # chains of 16 ranks
    ("wgmma_bf16", "bf16", "col", (1024, 1024, 1024), {**E2, "TAIL": 2}),        # all tail: several ranks per tile
    ("wgmma_bf16", "bf16", "row", (2100, 2056, 1000), {**E2, "TAIL": 2, "CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), {**E2, **PP128, "TAIL": 2}),
    ("wgmma_tf32", "tf32", "col", MULTI[:1] + (2052, 1000), {**E2, "TAIL": 2}),
    ("wgmma_bf16", "bf16", "col", (1024, 1024, 1024), {**E2, "TAIL": 3}),        # k-aligned order, all tail
    ("wgmma_tf32", "tf32", "col", MULTI[:1] + (2052, 1000), {**E2, "TAIL": 3}),
    # EPI=5: the tile's last ring stage held as more staging (released per warp once its boxes are read)
    ("wgmma_bf16", "bf16", "col", (31, 36, 24), {"EPI": 5}),
    ("wgmma_bf16", "bf16", "col", (4097, 4, 8), {"EPI": 5}),
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), {"EPI": 5}),
    ("wgmma_bf16", "bf16", "row", (2100, 2056, 1000), {"EPI": 5, "CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), {"EPI": 5, "BM": 256, "BN": 128}),
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), {"EPI": 5, "BN": 128, "STAGES": 6}),  # 2 held boxes of 4
    ("wgmma_bf16", "bf16", "col", (300, 132, 1000), {"EPI": 5, "BN": 64, "STAGES": 8}),            # 1 held box of 2
    ("wgmma_tf32", "tf32", "col", MULTI[:1] + (2052, 1000), {"EPI": 5}),
    # EPI=7: each tile's right half stored during the CTA's next main loop (one box per warp after
    # k-tiles 2, 4, 6, 8; the rest after the loop when it has fewer k-tiles); the last tile's at once
    ("wgmma_bf16", "bf16", "col", (31, 36, 24), {"EPI": 7}),                 # one item: both halves at once
    ("wgmma_bf16", "bf16", "col", (4097, 4, 8), {"EPI": 7}),
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), {"EPI": 7}),     # 16 k-tiles: boxes inside the loop
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 200), {"EPI": 7}),      # 4 k-tiles: two boxes after the loop
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 64), {"EPI": 7}),       # 1 k-tile: all four after the loop
    ("wgmma_bf16", "bf16", "row", (2100, 2056, 1000), {"EPI": 7, "CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "col", (4100, 4100, 520), {"EPI": 7}),            # 33 x 17 partial tiles, 4-5 per CTA
    ("wgmma_tf32", "tf32", "col", MULTI[:1] + (2052, 1000), {"EPI": 7}),
    ("wgmma_tf32", "tf32", "row", (300, 2052, 200), {"EPI": 7}),
], ids=str)
def test_tma_store_epilogue(tmp_path, kernel, precision, layout_b, shape, params):
    """EPI=2: the accumulators leave through shared-memory staging and TMA stores (clipped at M, N):
    verified, NaN-free (every element of C written), bitwise repeatable; the SASS has UTMASTG (and
    UTMAREDG where tiles are split: the adders' TMA reductions, in the chain's order)."""
    rec = _ok(_run(tmp_path, kernel, precision, layout_b, shape, params))
    assert rec["compile"]["name_expression"].startswith("gemm_wgmma_tma_store<"), rec["compile"]["name_expression"]
    hist = rec["compile"]["sass"]["histogram"]
    assert hist.get("UTMASTG", 0) > 0, hist
    assert (hist.get("UTMAREDG", 0) > 0) == (params.get("SPLIT_K", 1) > 1 or params.get("TAIL", 1) >= 2), hist


E4 = {"EPI": 4}


@pytest.mark.parametrize("kernel, precision, layout_b, shape, params", [
    ("wgmma_bf16", "bf16", "col", (1, 4, 8), E4),
    ("wgmma_bf16", "bf16", "col", (31, 36, 24), E4),
    ("wgmma_bf16", "bf16", "col", (4097, 4, 8), E4),
    ("wgmma_bf16", "bf16", "row", (100, 104, 104), E4),
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), E4),
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), {**E4, "CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "row", (2100, 2056, 1000), {**E4, **PP128}),
    ("wgmma_bf16", "bf16", "col", MULTI[:1] + (2052, 1000), {**E4, "TAIL": 2}),
    ("wgmma_tf32", "tf32", "col", (35, 80, 20), E4),
], ids=str)
def test_staged_store_epilogue(tmp_path, kernel, precision, layout_b, shape, params):
    """EPI=4: accumulators staged in shared memory per warp, stored back as whole 16-byte units
    (st.global.v4): verified, NaN-free, bitwise repeatable; LDS.128 in the SASS, no TMA store."""
    rec = _ok(_run(tmp_path, kernel, precision, layout_b, shape, params))
    assert rec["compile"]["name_expression"].endswith(", 3>"), rec["compile"]["name_expression"]
    hist = rec["compile"]["sass"]["histogram"]
    assert hist["LDS.128"] > 0 and hist.get("UTMASTG", 0) == 0, hist


@pytest.mark.parametrize("shape, params, entry", [
    ((63, 65, 40), {"EPI": 2}, "gemm_wgmma<"),             # N % 4 != 0: C is no TMA target, registers store
    (MULTI, {"EPI": 3}, "gemm_wgmma<"),                    # the diagnostic: every full-tile store twice
], ids=str)
def test_epilogue_fallback_and_diagnostic(tmp_path, shape, params, entry):
    rec = _ok(_run(tmp_path, "wgmma_bf16", "bf16", "col", shape, params))
    assert rec["compile"]["name_expression"].startswith(entry), rec["compile"]["name_expression"]


@pytest.mark.parametrize("kernel, precision, layout_b, shape, params, tool", [
    ("wgmma_bf16", "bf16", "col", (65, 129, 200), {}, "racecheck"),
    ("wgmma_bf16", "bf16", "row", (63, 72, 40), {}, "memcheck"),
    ("wgmma_bf16", "bf16", "col", (300, 129, 200), {"CLUSTER": 2}, "racecheck"),
    ("wgmma_tf32", "tf32", "col", (31, 33, 20), {}, "memcheck"),
    ("wgmma_bf16", "bf16", "col", (100, 100, 1000), {"SPLIT_K": 4}, "memcheck"),
    ("wgmma_bf16", "bf16", "col", (300, 129, 2000), {"SPLIT_K": 4}, "racecheck"),
    ("wgmma_bf16", "bf16", "col", (100, 100, 1000), {"SPLIT_K": 4, **R2}, "memcheck"),
    ("wgmma_bf16", "bf16", "col", (31, 33, 1001), {"SPLIT_K": 3, **R2}, "memcheck"),   # pad copies + slabs
    ("wgmma_bf16", "bf16", "col", (300, 129, 2000), {"SPLIT_K": 4, **R2}, "racecheck"),
    ("wgmma_bf16", "bf16", "col", (300, 132, 200), E2, "racecheck"),
    ("wgmma_bf16", "bf16", "col", (65, 132, 200), E2, "memcheck"),
    ("wgmma_bf16", "bf16", "col", (300, 132, 200), E4, "racecheck"),
    ("wgmma_bf16", "bf16", "col", (300, 132, 1000), {"EPI": 5}, "racecheck"),
    ("wgmma_bf16", "bf16", "col", (2100, 2052, 200), {"EPI": 7}, "racecheck"),   # 153 tiles: deferred halves
    ("wgmma_bf16", "bf16", "col", (2100, 2052, 136), {"EPI": 7}, "memcheck"),
    ("wgmma_bf16", "bf16", "col", (300, 132, 1000), {**E2, "SPLIT_K": 4}, "racecheck"),  # TMA store + reduce-add chain
    ("wgmma_bf16", "bf16", "col", (100, 132, 1000), {**E2, "SPLIT_K": 4}, "memcheck"),
    # the stream-K tail at shapes where every tile is split (fewer tiles than SMs): flag chain, TMA
    # reduce-add (EPI 2) and the register adders, the whole-k order (TAIL 2) and the k-aligned one (3)
    ("wgmma_bf16", "bf16", "col", (300, 132, 1000), {**E2, "TAIL": 2}, "racecheck"),
    ("wgmma_bf16", "bf16", "col", (300, 132, 1000), {**E2, "TAIL": 3}, "racecheck"),
    ("wgmma_bf16", "bf16", "col", (100, 132, 1000), {**E2, "TAIL": 3}, "memcheck"),
    ("wgmma_bf16", "bf16", "col", (300, 129, 1000), {"TAIL": 3}, "racecheck"),
    ("wgmma_bf16", "bf16", "col", (100, 129, 1000), {"TAIL": 3}, "memcheck"),
], ids=str)
def test_sanitizer_clean(tmp_path, kernel, precision, layout_b, shape, params, tool):
    rec = _run(tmp_path, kernel, precision, layout_b, shape, params, sanitizer=tool)
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok", rec.get("error")


# --- layout.a=col (issue 43): bf16 reads A M-major (wgmma's transpose bit), tf32 its K-major copy ---------

#: the partial-tile suite as it is (shapes TMA cannot take as stored: pad copies; tf32: A transposed first)
SUITE = [(1, 1, 1), (31, 33, 17), (63, 65, 33), (4097, 1, 3), (35, 79, 19), (100, 100, 100), (129, 260, 36)]
#: the suite made TMA-describable for a column-major bf16 A (M % 8 == 0: A's stored rows are M long) and
#: B (K % 8 for column-major B, N % 8 for row-major): A read as stored, no copy
BF16_COL_A = [(8, 8, 8), (32, 40, 24), (64, 72, 40), (4096, 8, 8), (40, 80, 24), (104, 104, 104), (136, 264, 40)]
COL_A_CASES = [("wgmma_bf16", "bf16", "col"), ("wgmma_bf16", "bf16", "row"), ("wgmma_tf32", "tf32", "col"),
               ("wgmma_tf32", "tf32", "row")]


def _col_a(tmp_path, kernel, precision, layout_b, shape, params=None, **over):
    return _run(tmp_path, kernel, precision, layout_b, shape, params, layout={"a": "col", "b": layout_b}, **over)


@pytest.mark.parametrize("kernel, precision, layout_b", COL_A_CASES, ids=str)
@pytest.mark.parametrize("shape", SUITE + BF16_COL_A, ids=str)
def test_column_major_a_partial_tiles(tmp_path, kernel, precision, layout_b, shape):
    """Verified against float64 with gemmlab's own pipeline (NaN-filled C, guard bands, inputs
    unchanged, bitwise repeatable); the plan copies exactly what the plugin says it must (bf16: a
    pad of A where M % 8 != 0; tf32: A transposed, always)."""
    rec = _ok(_col_a(tmp_path, kernel, precision, layout_b, shape))
    assert rec["layout"] == {"a": "col", "b": layout_b}
    kinds = [line.split("(")[1].split(")")[0] for line in rec["plan"][:-1]]
    m, n, k = shape
    vec = 8 if precision == "bf16" else 4
    a = ["transpose"] if precision == "tf32" else ["pad"] if m % vec else []
    b = ["transpose"] if precision == "tf32" and layout_b == "row" else ["pad"] if (k if layout_b == "col" else n) % vec else []
    assert kinds == a + b, rec["plan"]
    if precision == "bf16":
        assert rec["compile"]["name_expression"].split(", ")[4] == ("3" if layout_b == "row" else "2")


@pytest.mark.parametrize("kernel, precision, layout_b, params", [
    ("wgmma_bf16", "bf16", "col", {}),                                   # EPI=7: deferred right halves
    ("wgmma_bf16", "bf16", "row", {}),
    ("wgmma_bf16", "bf16", "col", {"CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "row", {"SCHED": 2, "BN": 128, "CLUSTER": 2}),
    ("wgmma_bf16", "bf16", "col", {"SCHED": 2, "BM": 64, "STAGES": 4}),   # one A box per stage
    ("wgmma_bf16", "bf16", "col", {"BM": 256, "BN": 128}),                # four A boxes per stage
    ("wgmma_bf16", "bf16", "col", {"EPI": 1}),
    ("wgmma_bf16", "bf16", "col", {"EPI": 4}),
    ("wgmma_bf16", "bf16", "row", {"EPI": 5}),
    ("wgmma_bf16", "bf16", "col", {"SPLIT_K": 3, **PP128}),
    ("wgmma_bf16", "bf16", "col", {"SPLIT_K": 3, **PP128, **R2}),
    ("wgmma_bf16", "bf16", "col", {"TAIL": 2}),
    ("wgmma_bf16", "bf16", "row", {"TAIL": 3, "CLUSTER": 2}),
    ("wgmma_tf32", "tf32", "col", {}),
    ("wgmma_tf32", "tf32", "row", {"SCHED": 2, "BN": 128, "CLUSTER": 2}),
    ("wgmma_tf32", "tf32", "col", {"SPLIT_K": 4, **R2}),
], ids=str)
@pytest.mark.parametrize("shape", [(2104, 2056, 1000), (2100, 2050, 1001)], ids=str)  # several tiles per CTA; the second padded
def test_column_major_a_on_multi_tile_shapes(tmp_path, kernel, precision, layout_b, params, shape):
    _ok(_col_a(tmp_path, kernel, precision, layout_b, shape, params))


@pytest.mark.parametrize("kernel, precision, layout_b, shape, params, tool", [
    ("wgmma_bf16", "bf16", "col", (64, 129, 200), {}, "racecheck"),
    ("wgmma_bf16", "bf16", "row", (63, 72, 40), {}, "memcheck"),
    ("wgmma_bf16", "bf16", "col", (304, 129, 200), {"CLUSTER": 2}, "racecheck"),
    ("wgmma_bf16", "bf16", "col", (2104, 2052, 136), {"EPI": 7}, "memcheck"),
    ("wgmma_tf32", "tf32", "row", (35, 79, 19), {}, "memcheck"),
], ids=str)
def test_column_major_a_sanitizer_clean(tmp_path, kernel, precision, layout_b, shape, params, tool):
    rec = _col_a(tmp_path, kernel, precision, layout_b, shape, params, sanitizer=tool)
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok", rec.get("error")


# --- precision=fp16 (issue 41 item 3): wgmma_bf16 with wgmma's .f16.f16 form and FLOAT16 tensor maps ----
# (entries gemm_wgmma_f16 / gemm_wgmma_tma_store_f16; CPU side: tests/test_wgmma_fp16.py)

def _fp16(tmp_path, layout_a, layout_b, shape, params=None, **over):
    rec = _run(tmp_path, "wgmma_bf16", "fp16", layout_b, shape, params, layout={"a": layout_a, "b": layout_b}, **over)
    if rec["status"] == "ok":  # the fp16 entry ran, its maps (or its pad copies' maps) moved float16
        assert rec["compile"]["name_expression"].split("<")[0].endswith("_f16"), rec["compile"]["name_expression"]
        assert [m["dtype"] for m in rec["tensor_maps"][:2]] == ["float16", "float16"], rec["tensor_maps"]
    return rec


@pytest.mark.parametrize("layout_a, layout_b, shape", [
    *[("row", "col", s) for s in BF16_COL], *[("row", "row", s) for s in BF16_ROW],
    *[("row", "col", s) for s in SUITE],                                  # as is: pad copies of A and B
    *[("col", "col", s) for s in SUITE], *[("col", "row", s) for s in SUITE + BF16_COL_A[-2:]],
], ids=str)
def test_wgmma_fp16_partial_tiles(tmp_path, layout_a, layout_b, shape):
    """The partial-tile suite in fp16, every layout pair, TMA-describable and padded: verified against
    float64 of the fp16-rounded inputs, NaN-free, guard bands intact, bitwise repeatable."""
    rec = _ok(_fp16(tmp_path, layout_a, layout_b, shape))
    assert rec["compile"]["sass"]["histogram"]["HGMMA"] > 0


W = (2100, 2052, 1000)   # 17 x 9 tiles of 128 x 256, N % 4 == 0 (the TMA-store epilogues), 16 k-tiles
WR = (2100, 2056, 1000)  # the same for a row-major B (N % 8 == 0)


@pytest.mark.parametrize("layout_a, layout_b, shape, params", [
    ("row", "col", W, {}),                                       # EPI=7: deferred right halves
    ("row", "col", MULTI, {}),                                   # N % 4 != 0: register epilogue
    ("row", "row", WR, {"CLUSTER": 2}),
    ("row", "col", W, PP128),
    ("row", "row", WR, {"SCHED": 2, "BN": 128, "CLUSTER": 2}),
    ("row", "col", W, {"SCHED": 2, "BM": 64}),
    ("row", "col", W, {"BM": 256, "BN": 128}),
    ("row", "col", W, {"EPI": 1}),
    ("row", "col", W, {"EPI": 2}),
    ("row", "col", W, {"EPI": 4}),
    ("row", "row", WR, {"EPI": 5, "CLUSTER": 2}),
    ("row", "col", (100, 100, 1000), {"SPLIT_K": 4}),             # register adders (red.global.add)
    ("row", "col", (300, 132, 1000), {"SPLIT_K": 3, "EPI": 2}),   # TMA reduce-add chain
    ("row", "col", (256, 512, 16384), {"SPLIT_K": 16, "EPI": 2}),
    ("row", "col", (256, 256, 16384), {"SPLIT_K": 16, "BN": 128, **R2}),
    ("row", "row", (35, 79, 1001), {"SPLIT_K": 4, **R2}),        # pad copies, then slabs
    ("row", "col", W, {"TAIL": 2}),
    ("row", "col", (1024, 1024, 1024), {"TAIL": 2}),
    ("row", "row", WR, {"TAIL": 3, "CLUSTER": 2}),
    ("row", "col", (1024, 1024, 1024), {"TAIL": 3}),
    ("col", "col", (2104, 2056, 1000), {}),
    ("col", "row", (2100, 2050, 1001), {}),                      # padded A and B
    ("col", "col", (2104, 2056, 1000), {"SPLIT_K": 3, **PP128, **R2}),
    ("col", "row", (2104, 2056, 1000), {"TAIL": 3, "CLUSTER": 2}),
], ids=str)
def test_wgmma_fp16_variants(tmp_path, layout_a, layout_b, shape, params):
    """Each path of the kernel in fp16 on shapes where every CTA computes several tiles (the ring
    wraps): verified, NaN-free, bitwise repeatable (the split tiles' ordered reductions)."""
    rec = _ok(_fp16(tmp_path, layout_a, layout_b, shape, params))
    assert rec["launch"]["grid"][0] <= rec["device"]["sm_count"]


@pytest.mark.parametrize("shape", [(16384, 2048, 8192), (256, 16384, 2048)], ids=str)
def test_auto_fp16_runs_wgmma(tmp_path, shape):
    """kernel=auto at session 31's fp16 shapes (B column-major): wgmma_bf16 is chosen (mma_bf16 before) and verifies."""
    cfg = {"kernel": {"name": "auto"}, "shape": list(shape), "precision": "fp16", "layout": {"a": "row", "b": "col"},
           "timing": dict(FAST)}
    rec = _ok(run_point(cfg, tmp_path / "run"))
    assert rec["dispatch"]["chosen"] == "wgmma_bf16", rec["dispatch"]


@pytest.mark.parametrize("layout_a, layout_b, shape, params, tool", [
    ("row", "col", (300, 132, 1000), {"EPI": 2, "SPLIT_K": 4}, "racecheck"),
    ("row", "col", (2100, 2052, 200), {}, "racecheck"),          # EPI=7's deferred halves
    ("col", "row", (63, 72, 40), {}, "memcheck"),
    ("row", "row", (35, 79, 1001), {"SPLIT_K": 3, **R2}, "memcheck"),
], ids=str)
def test_wgmma_fp16_sanitizer_clean(tmp_path, layout_a, layout_b, shape, params, tool):
    rec = _fp16(tmp_path, layout_a, layout_b, shape, params, sanitizer=tool)
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok", rec.get("error")
