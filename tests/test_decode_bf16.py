"""CPU tests of the ``decode_bf16`` kernel (kernels/decode_bf16.cu): the ownership model (one
owner per output and split, every staged/loaded element once, every K chunk in one warp of one
split), the k-permuted mma.sync fragments replayed in numpy against the PTX ISA m16n8k16 fragment
layouts (both layouts of B), the parameter and shape rules, the launch plan, and a compile with its
SASS (HMMA, 128-bit global loads, the cluster barrier, no RED/ATOM). GPU verification: tests/test_gpu_shapes.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.contract.hookspecs import Main, ParamError, Problem, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.gpu.device import offline_facts

FACTS = offline_facts("90")
REGISTRY = load_registry(entry_points=False)
SPEC = REGISTRY.get("decode_bf16")


def params(**overrides):
    return {**SPEC.defaults, **overrides}


def assert_all_ones(counts, what):
    counts = np.asarray(counts)
    zero, multi = int((counts == 0).sum()), int((counts > 1).sum())
    assert counts.size and not zero and not multi, f"{what}: {zero} never hit, {multi} hit more than once, of {counts.size}"


# the suite's decode shapes, partial tiles along every axis, and K shorter than one chunk
SHAPES = [Shape(1, 4096, 4096), Shape(8, 11008, 4096), Shape(16, 4096, 14336), Shape(64, 4096, 4096),
          Shape(3, 72, 40), Shape(17, 136, 1000), Shape(33, 200, 8), Shape(65, 64, 96), Shape(1, 8, 8)]
VARIANTS = [{}, dict(MT=2, KW=8, U=1, SPLITS=1), dict(MT=4, KW=2, U=1, SPLITS=7), dict(MT=1, KW=16, U=4, SPLITS=8),
            dict(MT=1, KW=1, U=1, SPLITS=3)]


@pytest.mark.parametrize("p", VARIANTS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()) or "defaults")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.M}x{s.N}x{s.K}")
def test_one_owner_and_exact_load_coverage(shape, p):
    stores, loads = SPEC.ownership(shape, params(**p))
    assert stores.shape == (shape.M, shape.N)
    assert_all_ones(stores, "stores")
    for what, hits in loads.items():
        assert_all_ones(hits, what)


def test_model_catches_a_dropped_chunk(monkeypatch):
    """A split run that rounds its length down leaves K chunks to no warp: the model must say so."""
    import gemmlab_plugins.decode_bf16 as dk
    monkeypatch.setattr(dk, "k_runs", lambda K, s: [(z * (dk.cdiv(K, 32) // s), (z + 1) * (dk.cdiv(K, 32) // s))
                                                   for z in range(s)])
    stores, loads = SPEC.ownership(Shape(1, 64, 32 * 10), params(SPLITS=3))
    assert (loads["K chunks"] == 0).any()


# --- the fragments: the kernel's k permutation against the PTX ISA m16n8k16 layouts ---------------

def _words(v8):
    """The 4 32-bit words of a 16-byte load of 8 elements: word w = elements 2w, 2w+1."""
    return [(v8[2 * w], v8[2 * w + 1]) for w in range(4)]


def _accumulate(out, D, i: int, j: int, b_col: bool) -> None:
    """Add one m16n8 result D (16 x 8) of m16 tile ``i`` and n-tile ``j`` into the block's ``out`` the way
    the kernel stores its accumulators: lane (g, q)'s d[e] is row 16i + g + 8(e >> 1) and, for logical
    column 2q + (e & 1), physical column 8j + 2q + v (B column-major) or 16q + 8v + j (B row-major)."""
    for lane in range(32):
        g, q = lane // 4, lane % 4
        for e in range(4):
            row, v = 16 * i + g + 8 * (e >> 1), e & 1
            col = 8 * j + 2 * q + v if b_col else 16 * q + 8 * v + j
            out[row, col] += D[g + 8 * (e >> 1), 2 * q + v]


def replay_block(A, B, mt: int, b_col: bool, wrong_half: bool = False):
    """C of one block (16·MT x 64) computed the way one warp of kernels/decode_bf16.cu does it:
    per 32-long chunk each lane's 16-byte loads, the fragment words it builds for steps s = 0, 1,
    the mma of PTX's m16n8k16 (A fragment: a0a1 = (g, 2q..), a2a3 = (g+8, 2q..), a4a5 = (g, 2q+8..),
    a6a7 = (g+8, 2q+8..); B: b0b1 = (2q.., g), b2b3 = (2q+8.., g); D: d0d1 = (g, 2q..), d2d3 =
    (g+8, 2q..)), and the store of each accumulator to its physical column. ``wrong_half`` takes
    the other half-word in the row-major B pack (a wrong __byte_perm selector)."""
    rows, K = A.shape
    out = np.zeros((rows, 64))
    for c in range(K // 32):
        for s in range(2):
            for i in range(mt):
                for j in range(8):
                    Af, Bf = np.zeros((16, 16)), np.zeros((16, 8))
                    for lane in range(32):
                        g, q = lane // 4, lane % 4
                        k0 = 32 * c + 8 * q
                        a_lo, a_hi = _words(A[16 * i + g, k0:k0 + 8]), _words(A[16 * i + g + 8, k0:k0 + 8])
                        a = [a_lo[2 * s], a_hi[2 * s], a_lo[2 * s + 1], a_hi[2 * s + 1]]
                        if b_col:
                            bw = _words(B[k0:k0 + 8, 8 * j + g])
                            b = [bw[2 * s], bw[2 * s + 1]]
                        else:  # __byte_perm of rows 4s, 4s+1 (and 4s+2, 4s+3): low half for even j, high for odd
                            rw = [_words(B[k0 + r, 8 * g:8 * g + 8])[j >> 1] for r in range(8)]
                            hf = (j & 1) ^ int(wrong_half)
                            b = [(rw[4 * s][hf], rw[4 * s + 1][hf]), (rw[4 * s + 2][hf], rw[4 * s + 3][hf])]
                        for e in range(2):
                            Af[g, 2 * q + e], Af[g + 8, 2 * q + e] = a[0][e], a[1][e]
                            Af[g, 2 * q + 8 + e], Af[g + 8, 2 * q + 8 + e] = a[2][e], a[3][e]
                            Bf[2 * q + e, g], Bf[2 * q + 8 + e, g] = b[0][e], b[1][e]
                    _accumulate(out, Af @ Bf, i, j, b_col)
    return out


@pytest.mark.parametrize("b_col", [False, True], ids=["B row-major", "B column-major"])
@pytest.mark.parametrize("mt", [1, 2])
def test_k_permuted_fragments_give_the_product(mt, b_col):
    rng = np.random.default_rng(mt + 2 * b_col)
    A = rng.integers(-4, 5, size=(16 * mt, 64)).astype(np.float64)
    B = rng.integers(-4, 5, size=(64, 64)).astype(np.float64)
    np.testing.assert_array_equal(replay_block(A, B, mt, b_col), A @ B)


def test_replay_catches_a_wrong_selector():
    """The wrong __byte_perm selector breaks the product: the replay can fail."""
    rng = np.random.default_rng(5)
    A = rng.integers(-4, 5, size=(16, 32)).astype(np.float64)
    B = rng.integers(-4, 5, size=(32, 64)).astype(np.float64)
    assert not np.array_equal(replay_block(A, B, 1, False, wrong_half=True), A @ B)


# --- rules, plan, compile -------------------------------------------------------------------------

@pytest.mark.parametrize("shape, layout, p, field", [
    (Shape(1, 4096, 4100), "row", {}, "shape"),       # K % 8
    (Shape(1, 4097, 4096), "row", {}, "shape"),       # N % 8 with row-major B
    (Shape(1, 4096, 4096), "row", dict(MT=3), "kernel.MT"),
    (Shape(1, 4096, 4096), "row", dict(KW=17), "kernel.KW"),
    (Shape(1, 4096, 4096), "row", dict(U=5), "kernel.U"),
    (Shape(1, 4096, 4096), "row", dict(SPLITS=0), "kernel.SPLITS"),
    (Shape(1, 4096, 4096), "row", dict(SPLITS=9), "kernel.SPLITS"),  # a cluster holds at most 8 blocks
])
def test_rules_refuse_with_the_field(shape, layout, p, field):
    with pytest.raises(ParamError) as exc:
        SPEC.check_problem(Problem(shape, "bf16", "row", layout), params(**p), FACTS)
    assert exc.value.field == field


def test_column_major_b_takes_any_n():
    SPEC.check_problem(Problem(Shape(35, 79, 24), "bf16", "row", "col"), params(), FACTS)


def test_one_launch_and_a_cluster_per_tile_when_splitting():
    prob = Problem(Shape(1, 4096, 4096), "bf16")
    assert SPEC.plan(prob, params(SPLITS=4), FACTS) == (Main(),)
    launch = SPEC.geometry(prob, params(SPLITS=4, MT=2, KW=8), FACTS)
    assert launch.grid == (64, 1, 4) and launch.cluster == (1, 1, 4) and launch.block == (256, 1, 1)
    assert launch.shared_bytes == 8 * 32 * 64 * 4
    assert SPEC.geometry(prob, params(SPLITS=1), FACTS).cluster is None


@pytest.mark.parametrize("layout", ["row", "col"])
def test_compiles_to_hmma_and_128_bit_loads(layout):
    """Compile (NVRTC, sm_90): no spills, HMMA per chunk as the replay says (2 steps x 8 n-tiles
    x MT per chunk, U chunks per round), 128-bit global loads, DSMEM loads and the cluster
    barrier when splitting, no atomics."""
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.gpu.sass import histogram
    from gemmlab.paths import KERNELS_DIR
    prob = Problem(Shape(16, 4096, 4096), "bf16", "row", layout)
    p = params(SPLITS=4)
    SPEC.check_problem(prob, p, FACTS)
    options = CompileOptions.for_kernel("90", SPEC.options(prob, p, FACTS))
    compiled = compile_kernel(KERNELS_DIR / SPEC.source, SPEC.instance(prob, p), options,
                              persistent=True)  # the session's disk cache (tests/conftest.py)
    res = compiled.resources
    assert res is not None and res.spill_store_bytes == 0 and res.spill_load_bytes == 0
    h = histogram(compiled.sass_text)
    assert h["HMMA"] == 2 * 8 * p["MT"] * p["U"] and h["LDG.128"] >= 8 * p["U"], h
    assert "UCGABAR_ARV" in compiled.sass_text and "UCGABAR_WAIT" in compiled.sass_text
    assert "REDG" not in compiled.sass_text and "ATOMG" not in compiled.sass_text


# --- decode_tf32: the same loop on float32 storage, mma.sync m16n8k8 TF32 ----------------------------

TF32 = REGISTRY.get("decode_tf32")


def replay_block_tf32(A, B, mt: int, b_col: bool, wrong_word: bool = False):
    """C of one block (16·MT x 64) as one warp of kernels/decode_bf16.cu computes it with T = float:
    per 32-long chunk lane (g, q) holds the 8 words of its physical k 8q .. 8q+7 (two 16-byte pieces),
    step s = 0..3 takes words 2s and 2s+1 as logical k q and q+4 (PTX ISA m16n8k8 tf32: A a0 (g, q),
    a1 (g+8, q), a2 (g, q+4), a3 (g+8, q+4); B b0 (q, g), b1 (q+4, g); D as m16n8k16), and stores
    each accumulator at the 16-bit loop's physical column. B row-major: lane (g, q)'s rows k0 + r,
    columns 8g .. 8g+7, n-tile j's b0/b1 = word j of rows 2s and 2s+1. ``wrong_word`` takes word j ^ 1
    of the second row (a wrong column pairing)."""
    rows, K = A.shape
    out = np.zeros((rows, 64))
    for c in range(K // 32):
        for s in range(4):
            for i in range(mt):
                for j in range(8):
                    Af, Bf = np.zeros((16, 8)), np.zeros((8, 8))
                    for lane in range(32):
                        g, q = lane // 4, lane % 4
                        k0 = 32 * c + 8 * q
                        lo, hi = A[16 * i + g, k0:k0 + 8], A[16 * i + g + 8, k0:k0 + 8]
                        Af[g, q], Af[g + 8, q], Af[g, q + 4], Af[g + 8, q + 4] = lo[2 * s], hi[2 * s], lo[2 * s + 1], hi[2 * s + 1]
                        if b_col:
                            bw = B[k0:k0 + 8, 8 * j + g]
                            b = (bw[2 * s], bw[2 * s + 1])
                        else:
                            rw = B[k0:k0 + 8, 8 * g:8 * g + 8]
                            b = (rw[2 * s][j], rw[2 * s + 1][j ^ int(wrong_word)])
                        Bf[q, g], Bf[q + 4, g] = b
                    _accumulate(out, Af @ Bf, i, j, b_col)
    return out


@pytest.mark.parametrize("b_col", [False, True], ids=["B row-major", "B column-major"])
@pytest.mark.parametrize("mt", [1, 2])
def test_tf32_fragments_give_the_product(mt, b_col):
    rng = np.random.default_rng(7 + mt + 2 * b_col)
    A = rng.integers(-4, 5, size=(16 * mt, 64)).astype(np.float64)
    B = rng.integers(-4, 5, size=(64, 64)).astype(np.float64)
    np.testing.assert_array_equal(replay_block_tf32(A, B, mt, b_col), A @ B)
    if not b_col:
        assert not np.array_equal(replay_block_tf32(A, B, mt, b_col, wrong_word=True), A @ B)


@pytest.mark.parametrize("shape", SHAPES[:4] + SHAPES[4:], ids=lambda s: f"{s.M}x{s.N}x{s.K}")
@pytest.mark.parametrize("p", [{}, dict(MT=2, KW=8, U=2, SPLITS=1), dict(MT=1, KW=16, U=2, SPLITS=8)], ids=str)
def test_tf32_one_owner_and_exact_load_coverage(shape, p):
    stores, loads = TF32.ownership(shape, {**TF32.defaults, **p})
    assert_all_ones(stores, "stores")
    for what, hits in loads.items():
        assert_all_ones(hits, what)


@pytest.mark.parametrize("p, field", [(dict(MT=4), "kernel.MT"), (dict(U=3), "kernel.U"), (dict(SPLITS=9), "kernel.SPLITS")])
def test_tf32_rules_refuse_with_the_field(p, field):
    with pytest.raises(ParamError) as exc:
        TF32.check_problem(Problem(Shape(16, 4096, 4096), "tf32", "row", "col"), {**TF32.defaults, **p}, FACTS)
    assert exc.value.field == field


def test_tf32_offers_candidates_only_at_decode_m():
    assert TF32.candidates(Problem(Shape(16, 4096, 4096), "tf32", "row", "col"), FACTS)
    assert TF32.candidates(Problem(Shape(4096, 4096, 4096), "tf32", "row", "col"), FACTS) == []
    assert TF32.sized(Problem(Shape(32, 4096, 4096), "tf32"), FACTS)["MT"] == 2


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("p", [dict(MT=1, KW=4, U=1, SPLITS=4), dict(MT=2, KW=8, U=2, SPLITS=1)], ids=str)
def test_tf32_compiles_to_hmma_with_rounding_and_no_spills(layout, p):
    """4 steps x 8 n-tiles x MT HMMA per chunk (U chunks a round), two 128-bit loads per 8 k, no
    spills; the rounding (cvt.rna.tf32.f32) is declared, and the GPU tests' TF32 bound holds it to that."""
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.gpu.sass import histogram
    from gemmlab.paths import KERNELS_DIR
    prob = Problem(Shape(16, 4096, 4096), "tf32", "row", layout)
    TF32.check_problem(prob, p, FACTS)
    assert TF32.instance(prob, p).startswith("gemm_decode16<float, ")
    options = CompileOptions.for_kernel("90", TF32.options(prob, p, FACTS))
    compiled = compile_kernel(KERNELS_DIR / TF32.source, TF32.instance(prob, p), options, persistent=True)
    res = compiled.resources
    assert res is not None and res.spill_store_bytes == 0 and res.spill_load_bytes == 0
    h = histogram(compiled.sass_text)
    assert h["HMMA"] == 4 * 8 * p["MT"] * p["U"] and h["LDG.128"] >= 16 * p["U"], h
    assert TF32.tf32_rounding == "rna"


@pytest.mark.parametrize("name, p, free", [
    ("decode_bf16", dict(MT=2, KW=8, U=4), True), ("decode_bf16", dict(MT=2, KW=16, U=1), True),
    ("decode_bf16", dict(MT=4, KW=8, U=1), True), ("decode_bf16", dict(MT=4, KW=16, U=1), False),
    ("decode_tf32", dict(MT=2, KW=8, U=2), True), ("decode_tf32", dict(MT=1, KW=16, U=2), True),
    ("decode_tf32", dict(MT=2, KW=16, U=2), False)], ids=str)
def test_the_registers_restriction_matches_ptxas(name, p, free):
    """The declared spaces' ``registers`` restriction (spill_free) at its corners, against ptxas's
    spill count for both B layouts: a point the space keeps compiles without spills, one it drops spills."""
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.paths import KERNELS_DIR
    from gemmlab_plugins.decode_bf16 import spill_free
    spec = REGISTRY.get(name)
    p = {**p, "SPLITS": 2}
    assert spill_free(p, name == "decode_tf32") is free
    assert spec.space.contains(p) is free
    spills = []
    for layout in ("row", "col"):
        prob = Problem(Shape(16, 4096, 4096), "tf32" if name == "decode_tf32" else "bf16", "row", layout)
        options = CompileOptions.for_kernel("90", spec.options(prob, p, FACTS))
        res = compile_kernel(KERNELS_DIR / spec.source, spec.instance(prob, p), options, persistent=True).resources
        spills.append(res.spill_store_bytes)
    assert (max(spills) == 0) is free, spills
