"""kernel=auto's rules for the wgmma kernels ``wgmma_bf16`` and ``wgmma_tf32`` (issue 41): the tile, the
stream-K tail and split K they would run for a problem, and where they stand in each regime
(:meth:`gemmlab.contract.hookspecs.KernelBase.preferences`; the rank scale of
:mod:`gemmlab.contract.regimes`). A helper of the plugin :mod:`gemmlab_plugins.wgmma_bf16` (whose
:class:`WgmmaKernel` serves both kernels), kept beside it; not a plugin itself."""

from __future__ import annotations

import math

from gemmlab.contract.regimes import RANK_FIRST, RANK_TENSOR_CORE, TINY, Preference, fill, tiles

#: (BM, BN, SCHED, guessed relative efficiency per output element): bigger tiles reuse more of each
#: staged byte; a 64-row tile needs the ping-pong schedule (SCHED=2)
TILES = ((128, 256, 1, 1.0), (128, 128, 1, 0.85), (64, 256, 2, 0.8), (128, 64, 1, 0.65), (64, 128, 2, 0.6),
         (64, 64, 2, 0.45))
TAIL_MIN_WAVES = 8  # the stream-K tail (TAIL=2) from this many waves of 128x256 tiles on, measured on
# the H200 (docs/results/tc-ladder-h200.md "Session 7", % of cuBLAS BF16 row/col, graph timing, TAIL=2 vs
# TAIL=1 in the same call): 6144^3 (8.7 waves) 101.2 vs 99.8, 8192x8192x2048 (15.5) 102.0 vs 101.8,
# 8192x8192x4096 103.7 vs 101.7, 10240x10240x4096 (24.2) 101.8 vs 100.5, 8192^3 104.0-105.3 vs
# 101.6-103.4 (4 calls); below: 4096^3 (3.9 waves) 95.6-96.1 vs 98.3-99.7, 4096x4096x2048 96.5 vs 99.6 (the
# tail's ~12-16 us of fixed cost outweighs the ~3% of a short launch it saves)
TAIL_MIN_K = 5120  # ... and only from this K on: with TAIL=2 the EPI=7 default runs as EPI=2 (its deferred
# right half needs whole tiles), and EPI=7 saves a fixed epilogue per tile, a larger share at small K. Measured on
# the H200 (docs/results/tc-ladder-h200.md "Sessions 12-13", calls 5-6, EPI=7 / TAIL=2 in the same run, % of cuBLAS
# BF16 row/col): K = 4096 EPI=7 ahead in 8 of 8 pairs (8192x8192x4096 104.0 / 103.2, 104.1 / 103.6, 104.1 / 103.4,
# 103.9 / 103.4; 10240x10240x4096 102.8 / 100.6, 101.9 / 101.0, 102.2 / 100.9; 16384x4096x4096 103.8 / 103.2);
# K = 6144 the tail ahead or even (8192x8192x6144 103.5 / 104.2, 103.7 / 104.4; 6144^3 101.2 / 101.9, 101.5 / 101.3);
# 8192^3 the tail ahead in 4 of 4 (+0.1 to +2.3); K = 5120 lies between, not measured
MAX_SPLIT_K = 32  # REDUCE=2 (workspace slabs + a parallel reduce step), measured on the H200 (branch wsplit,
# 64x128 ping-pong STAGES=6, one wave of items): 256x256x65536 SPLIT_K=16 81.8% of cuBLAS, 128x1024x32768 8:
# 85.8%, 512x512x16384 4: 73.4%; more slices than one wave lose (S=64: 50%)
BF16_K_TILE, TF32_K_TILE = 64, 32  # K elements of a 128-byte stage row


def tile(shape, sms: int) -> dict:
    """The (BM, BN, SCHED) of :data:`TILES` with the least estimated time, whole waves of the persistent
    grid (ceil(tiles / SMs)) times the tile area over its efficiency, so a shape with too few 128x256
    tiles (512x4096: 64 tiles on 132 SMs) takes 128x128, and a 64-wide side a 64-wide tile (65536x64:
    128x64; 64x65536: 64x256 ping-pong). With the 128x256 tile, at least :data:`TAIL_MIN_WAVES` waves
    of it and K >= :data:`TAIL_MIN_K`, also ``TAIL=2`` (the stream-K tail over the last partial wave)."""
    best, best_cost = TILES[0], math.inf
    for t in TILES:
        cost = -(-tiles(shape, t[0], t[1]) // sms) * t[0] * t[1] / t[3]
        if cost < best_cost:
            best, best_cost = t, cost
    params = {"BM": best[0], "BN": best[1], "SCHED": best[2]}
    if tail_waves(shape, params, sms) and shape[2] >= TAIL_MIN_K:
        params["TAIL"] = 2
    return params


def tail_waves(shape, params, sms: int) -> bool:
    """Whether ``params`` (the cooperative 128x256 tile) fill at least :data:`TAIL_MIN_WAVES` waves."""
    return ((params["BM"], params["BN"], params.get("SCHED", 1)) == (128, 256, 1)
            and tiles(shape, 128, 256) >= TAIL_MIN_WAVES * sms)


def split(shape, sms: int, t: tuple[int, int, int] = (64, 128, 2), k_tile: int = BF16_K_TILE) -> dict:
    """Split K for few tiles and long K: tile ``t`` = (BM, BN, SCHED) with 6 stages and SPLIT_K = the
    most K slices whose work units still fit one CTA per SM, each at least 8 k-tiles of ``k_tile``
    elements, at most :data:`MAX_SPLIT_K`; split tiles reduced through the workspace (REDUCE=2)."""
    bm, bn, sched = t
    s = max(1, min(MAX_SPLIT_K, sms // tiles(shape, bm, bn), -(-shape[2] // k_tile) // 8))
    return {"BM": bm, "BN": bn, "SCHED": sched, "STAGES": 6, "SPLIT_K": s, **({"REDUCE": 2} if s > 1 else {})}


def tf32_tile(shape, sms: int) -> tuple[dict, str]:
    """wgmma_tf32's parameters and why: :func:`tile` without the tail (measured for bf16 only); where even
    64x128 ping-pong tiles leave more than half the SMs idle and K holds 2+ slices, :func:`split` with
    TF32's k-tile of 32."""
    sp = split(shape, sms, k_tile=TF32_K_TILE)
    n = tiles(shape, 64, 128)
    if sp["SPLIT_K"] > 1 and 2 * n <= sms:
        return sp, f"split K: {n} tiles of 64x128 fill at most half of {sms} SMs, so SPLIT_K={sp['SPLIT_K']}"
    p = tile(shape, sms)
    p.pop("TAIL", None)
    return p, f"tile {p['BM']}x{p['BN']} (fewest waves x tile area / efficiency)"


def fused(params) -> dict:
    """``params`` for a problem beyond C = A·B (issue 43: the wgmma kernels' fused entries): whole tiles,
    so no split K, workspace reduction or stream-K tail (the fused operation is not additive: a tile's
    partial sums cannot each pass through it), and the TMA-store epilogue (``EPI=7``: deferred right half
    on the cooperative 128x256 tile, else ``EPI=2``; the register path where C's map cannot be made).
    ``EPI`` 1, 2 and 7 are kept, the plain-C experiments (3, 4, 5) become 7. Not measured yet with the
    fused epilogue: a guess from the plain kernel, whose TMA store beat its register stores at 4096^3
    BF16 (98.6% vs 96.2% of cuBLAS, docs/results/tc-ladder-h200.md "Session 6")."""
    epi = params.get("EPI", 7)
    return {**params, "SPLIT_K": 1, "REDUCE": 1, "TAIL": 1, "EPI": epi if epi in (1, 2, 7) else 7}


def preferences(problem, device, regime: str) -> list:
    """:func:`plain_preferences`; for a problem with an epilogue (``Problem.extended``, every precision)
    the same without the split-K ones, each with :func:`fused` parameters (the TMA-store epilogue, whole
    tiles)."""
    out = plain_preferences(problem, device, regime)
    if not problem.extended:
        return out
    return [Preference(p.rank, fused(p.params), (p.why.split(";")[0] if p.params.get("TAIL", 1) > 1 else p.why)
                       + "; fused epilogue, whole tiles")
            for p in out if p.params.get("SPLIT_K", 1) == 1]


def plain_preferences(problem, device, regime: str) -> list:
    """The preferences of :class:`gemmlab_plugins.wgmma_bf16.WgmmaKernel` (bf16 and fp16: wgmma_bf16, tf32:
    wgmma_tf32).

    bf16 and fp16 alike (issue 41 item 3: the same kernel with wgmma's f16 form, so the same tiles; the
    rules below were measured in bf16) (``decode``, ``k_heavy``, ``tensor_core``): :func:`tile` first among the tensor-core
    candidates (rank 100; below a wave of 128x128 tiles only outside tiny shapes and with min(M, N) >=
    64), then the defaults (101; 103 below a wave, after mma.sync 64x64 and TMA BN=64); ``k_heavy``
    first of all (rank 0) with :func:`split`.

    tf32: :func:`tf32_tile` then the defaults at 100/101 where B is column-major or a wave of 128x128
    tiles exists (a row-major B is transposed first: 89.2% / 97.2% of cuBLAS TF32 at 4096^3 / 8192^3
    on the H200, docs/results/tc-ladder-h200.md "Relayout"), else at 105/106 after mma.sync (B read as
    stored); ``decode`` with B column-major :func:`split` (k-tile 32) at rank 1 (after gemv_cols up to M
    = 32); ``k_heavy`` that split first (min(M, N) >= 64) or at rank 50 (after the CUDA-core split-K).
    """
    shape, sms = problem.shape, device.sm_count
    m, n, k = shape
    if regime not in ("decode", "k_heavy", "tensor_core"):
        return []
    out = []
    if problem.precision == "tf32":
        sp = split(shape, sms, k_tile=TF32_K_TILE)
        if regime == "decode" and problem.layout_b == "col":
            out.append(Preference(RANK_FIRST + 1, sp, f"TF32 tensor cores, split-K 64x128 (SPLIT_K={sp['SPLIT_K']})"))
        moved = ", B transposed first" if problem.layout_b == "row" else ""
        if regime == "k_heavy":
            out.append(Preference(RANK_FIRST + (0 if min(m, n) >= 64 else 50), sp,
                                  f"split-K wgmma_tf32 64x128 (SPLIT_K={sp['SPLIT_K']}{moved})"))
        p, why = tf32_tile(shape, sms)
        why += moved
        late = problem.layout_b == "row" and tiles(shape, 128, 128) < sms
        base = RANK_TENSOR_CORE + (5 if late else 0)
        return out + [Preference(base, p, why), Preference(base + 1, {}, "its defaults")]
    if regime == "k_heavy":
        out.append(Preference(RANK_FIRST, split(shape, sms), "split K across blocks"))
    wg = tile(shape, sms)
    why = f"tile {wg['BM']}x{wg['BN']}"
    if tail_waves(shape, wg, sms):  # the record says why the tail was added, or left out for K alone
        n = tiles(shape, 128, 256)
        why += (f"; {n} tiles >= {TAIL_MIN_WAVES} waves and K >= {TAIL_MIN_K}: stream-K tail (TAIL=2)" if wg.get("TAIL") == 2
                else f"; {n} tiles >= {TAIL_MIN_WAVES} waves but K < {TAIL_MIN_K}: no tail, the EPI=7 epilogue gains more")
    if fill(shape, sms) != "under_a_wave":
        return out + [Preference(RANK_TENSOR_CORE, wg, why), Preference(RANK_TENSOR_CORE + 1, {}, "its defaults")]
    if m * n * k > TINY and min(m, n) >= 64:
        out.append(Preference(RANK_TENSOR_CORE, wg, why))
    return out + [Preference(RANK_TENSOR_CORE + 3, {}, "its defaults")]


def sweep_variants(problem, device, family: str) -> list[dict]:
    """gemmlab-tune sweep (bf16 and fp16; wgmma_tf32 has none): decode: 64-row ping-pong tiles with split K
    (REDUCE=2; 64x128, and for M > 32 also 64x256); k_heavy: :func:`split` with half the slices, and
    128x128 and 64x256 tiles split; tiny: none; otherwise the three :data:`TILES` of least estimated time
    (:func:`tile`'s model), the first also with the stream-K tail (TAIL=2) where it leaves a partial last
    wave."""
    if problem.precision not in ("bf16", "fp16") or family == "tiny":
        return []
    shape, sms = problem.shape, device.sm_count
    if family == "decode":
        return [split(shape, sms, (64, bn, 2)) for bn in ((128, 256) if shape[0] > 32 else (128,))]
    if family == "k_heavy":
        wg = split(shape, sms)
        return [{**wg, "SPLIT_K": max(1, wg["SPLIT_K"] // 2)}, split(shape, sms, (128, 128, 1)), split(shape, sms, (64, 256, 2))]
    ranked = sorted(TILES, key=lambda t: -(-tiles(shape, t[0], t[1]) // sms) * t[0] * t[1] / t[3])
    out = [{"BM": bm, "BN": bn, "SCHED": sched} for bm, bn, sched, _ in ranked[:3]]
    n = tiles(shape, ranked[0][0], ranked[0][1])
    if n > sms and n % sms:
        out.append({**out[0], "TAIL": 2})
    return out
