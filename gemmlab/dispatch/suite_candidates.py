"""The candidates ``gemmlab-tune sweep`` measures for a shape of the suite: kernel=auto's own choice, then
the family's variants.

:func:`candidates` gives, for one shape of the suite (:mod:`gemmlab.dispatch.shapes`), the rules'
own choice (:func:`gemmlab.dispatch.auto.choose` with no table) first, then the family's hand-picked
variants (:func:`variants` for fp32, :func:`variants_tc` for bf16/fp16), then what the kernels of
drop-in and entry-point plugins offer (:func:`plugin_candidates`: their declared spaces, issue 41);
only registered kernels that support the precision and whose check accepts the shape, no
duplicates. Candidates only name kernels that are registered: ``sgemm_*`` with their defaults,
``splitk`` with SPLITS sized by the SM count, ``streamk`` and ``splitk_warptile`` with the rules'
tile, WPS and SPLITS variants. The sweep that measures them is :mod:`gemmlab.run.tune_sweep`.
"""

from __future__ import annotations

from types import MappingProxyType

from gemmlab.contract.hookspecs import Shape
from gemmlab.dispatch import auto as dispatch

# kernels of other branches, tried with their defaults where registered
LARGE_KERNELS = ("sgemm_pipelined", "sgemm_warptile", "sgemm_block2d")
SPLIT_KERNELS = ("splitk",)
SEED_TILE = MappingProxyType({"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2})
OPTUNA_TILE = MappingProxyType({"BM": 128, "BN": 128, "BK": 32, "TM": 16, "TN": 4})


def _sk(bm: int, bn: int, ks: int, bk: int = 16) -> tuple[str, dict]:
    return ("slicedk", {"BM": bm, "BN": bn, "BK": bk, "TM": 4, "TN": 4, "KS": ks})


def variants(shape: Shape, family: str) -> list[tuple[str, dict]]:
    """The family's extra candidates (before filtering), cheapest-to-measure families widest."""
    m = shape.M
    mt = 1
    while mt < min(m, 16):
        mt *= 2
    sms = dispatch.DEFAULT_SM_COUNT
    streamk = dispatch._streamk_params(shape, sms)
    out: list[tuple[str, dict]] = []
    if family == "decode":
        if m <= 16:
            for nt in (16, 32, 64):
                for u in (4, 8):
                    out.append(("gemv_rows", {"MT": mt, "NT": nt, "KW": 8, "U": u}))
            if m >= 8:  # half or all of a 16-row warp tile used: stream-K over 16 x 128 tiles
                out.append(("streamk", dict(dispatch.STREAMK_16)))
            out += [_sk(16, 32, 8, bk=8)]
        else:
            out += [("streamk", {**streamk, "WPS": 2}), ("splitk_warptile", dispatch._splitk_wt_params(shape, sms)),
                    _sk(32, 32, 4), _sk(16, 32, 8, bk=8), _sk(32, 64, 4), _sk(64, 64, 2),
                    ("gemv_rows", {"MT": 16, "NT": 32, "KW": 8, "U": 8}), ("tiled", dict(SEED_TILE))]
        out += [(k, dispatch._splitk_params(shape, sms)) for k in SPLIT_KERNELS]
    elif family == "tiny":
        out += [_sk(16, 16, 2, bk=8), _sk(16, 16, 4, bk=8), _sk(16, 16, 16, bk=8),
                ("small_tile", {"BX": 16, "BY": 16, "KS": 1}), ("small_tile", {"BX": 16, "BY": 16, "KS": 4}),
                ("small_tile", {"BX": 32, "BY": 8, "KS": 4}), _sk(16, 32, 8, bk=8), _sk(32, 32, 4),
                ("naive", {"BX": 16, "BY": 16}), ("tiled", {"BM": 32, "BN": 32, "BK": 16, "TM": 4, "TN": 1})]
    elif family == "k_heavy":
        wt = dispatch._splitk_wt_params(shape, sms)
        out += [("splitk_warptile", {**wt, "SPLITS": s}) for s in sorted({max(1, wt["SPLITS"] // 2), wt["SPLITS"]})]
        out += [("streamk", {**streamk, "WPS": 1, "MINB": 1})]
        splits = dispatch._splitk_params(shape, sms)["SPLITS"]
        out += [(k, {"SPLITS": s}) for k in SPLIT_KERNELS for s in sorted({max(1, splits // 2), splits, 2 * splits})]
        out += [_sk(16, 16, 16, bk=8), _sk(16, 32, 8, bk=8), _sk(16, 32, 8), _sk(32, 32, 4), _sk(32, 64, 4)]
    else:  # large, medium, odd, skinny: the big kernels, stream-K, two tiled tiles, slicedk where tiles are few
        out += [("streamk", streamk)] + [(k, {}) for k in LARGE_KERNELS]
        out += [("tiled", dict(OPTUNA_TILE)), ("tiled", dict(SEED_TILE))]
        if family in ("tall_skinny", "short_wide", "odd"):
            out += [_sk(32, 32, 4), _sk(64, 64, 2)]
        out += ([(k, dispatch._splitk_params(shape, sms)) for k in SPLIT_KERNELS]
                if family in ("tall_skinny", "short_wide") else [])
    return out


def variants_tc(shape: Shape, family: str) -> list[tuple[str, dict]]:
    """bf16/fp16 candidates beyond the rules' choice (before filtering): ``decode_bf16`` around its
    rule parameters (twice the splits, at most 8; 8 warps with half the splits, and with the same
    splits where K-heavy or unsplit; for M > 32 also 32-row
    blocks, and 64-row blocks of 8 warps) for decode and K-heavy shapes, ``wgmma_bf16`` SPLIT_K
    (where the kernel has it) for K-heavy ones, and for the other families the three
    ``wgmma_bf16`` tiles of least estimated cost (:func:`gemmlab.dispatch.auto._wgmma_params`'s
    model; the first also with TAIL=2 (stream-K) where its tiles leave a partial last wave) and ``mma_bf16``
    64x64; decode: also wgmma_bf16 64x128 (M > 32: and 64x256) ping-pong with SPLIT_K. Empty for tiny shapes (every kernel's defaults are measured)."""
    sms = dispatch.DEFAULT_SM_COUNT
    out: list[tuple[str, dict]] = []
    if family in ("decode", "k_heavy"):
        rules = dispatch.rules(shape, "bf16", dispatch.DEFAULT_LAYOUT, sms)
        p = next((dict(c[1]) for r in rules for c in r.candidates if c[0] == "decode_bf16"),
                 dispatch._decode16_params(shape, sms))
        s = p["SPLITS"]
        out += [("decode_bf16", {**p, "SPLITS": min(dispatch.DECODE16_MAX_SPLITS, 2 * s)}),
                ("decode_bf16", {**p, "KW": 8, "SPLITS": max(1, s // 2)})]
        if family == "k_heavy" or s == 1:
            out.append(("decode_bf16", {**p, "KW": 8}))
        if shape.M > 32 and p["MT"] == 4:
            out += [("decode_bf16", {**p, "MT": 2, "U": 2}), ("decode_bf16", {**p, "KW": 8, "SPLITS": max(1, s // 2),
                                                                             "U": 1})]
        if family == "decode":  # 64-row ping-pong wgmma tiles with split K (REDUCE=2), where wgmma_bf16 has it
            out += [("wgmma_bf16", dispatch._wgmma_split_params(shape, sms, (64, bn, 2)))
                    for bn in ((128, 256) if shape.M > 32 else (128,))]
        if family == "k_heavy":
            wg = dispatch._wgmma_split_params(shape, sms)
            out += [("wgmma_bf16", {**wg, "SPLIT_K": max(1, wg["SPLIT_K"] // 2)}),
                    ("wgmma_bf16", dispatch._wgmma_split_params(shape, sms, (128, 128, 1))),
                    ("wgmma_bf16", dispatch._wgmma_split_params(shape, sms, (64, 256, 2)))]
        return out
    if family == "tiny":
        return out
    ranked = sorted(dispatch._WGMMA_TILES, key=lambda t: dispatch._cdiv(dispatch._cdiv(shape.M, t[0])
                                                                        * dispatch._cdiv(shape.N, t[1]), sms)
                    * t[0] * t[1] / t[3])
    out += [("wgmma_bf16", {"BM": bm, "BN": bn, "SCHED": sched}) for bm, bn, sched, _ in ranked[:3]]
    bm, bn, sched, _ = ranked[0]
    tiles = dispatch._cdiv(shape.M, bm) * dispatch._cdiv(shape.N, bn)
    if tiles > sms and tiles % sms:  # a partial last wave: the stream-K tail (TAIL=2), where wgmma_bf16 has it
        out.append(("wgmma_bf16", {"BM": bm, "BN": bn, "SCHED": sched, "TAIL": 2}))
    out.append(dispatch._MMA16_64)
    return out


def candidates(shape: Shape, family: str, registry, table_sms: int = dispatch.DEFAULT_SM_COUNT,
               precision: str = dispatch.DEFAULT_PRECISION) -> list[tuple[str, dict]]:
    """Candidate (kernel, full params) pairs for ``shape``: the rules' choice first, then the
    family's :func:`variants` (fp32), :func:`variants_tc` (bf16, fp16) or, where those have
    none, every registered kernel with its defaults; only registered NVRTC
    kernels that support the precision and whose check accepts the shape, no duplicates. Where an
    ``sgemm_*`` rung is registered, ``tiled`` is no variant for the large-shape families."""
    from gemmlab.gpu.device import offline_facts
    facts = offline_facts("90")
    out: list[tuple[str, dict]] = []
    try:
        first = dispatch.choose(shape, registry, dispatch.Table(device={"sm_count": table_sms}), precision)
        out.append((first.kernel, dict(first.params)))
    except Exception:  # no kernel at all: the variants may still have one
        pass
    extra = (variants(shape, family) if precision == "fp32"
             else variants_tc(shape, family) or [(name, {}) for name in registry.kernels])
    extra += plugin_candidates(shape, registry, precision, facts)
    if any(k in registry.kernels for k in LARGE_KERNELS) and family not in ("tiny", "k_heavy", "decode"):
        extra = [(k, p) for k, p in extra if k != "tiled"]  # the sgemm rungs beat it (docs/results/ladder-h200.md)
    for name, params in extra:
        full, _ = dispatch._try(registry, name, params, shape, precision, dispatch.DEFAULT_LAYOUT, facts)
        if full is not None and (name, full) not in out:
            out.append((name, full))
    return out


#: candidates per shape of each kernel from a plugin other than the built-in ones (each is a measured point)
PLUGIN_CANDIDATES = 8


def plugin_candidates(shape: Shape, registry, precision: str, facts, limit: int = PLUGIN_CANDIDATES
                      ) -> list[tuple[str, dict]]:
    """What the kernels of drop-in and entry-point plugins offer for ``shape`` (issue 41: their
    declared spaces or their own ``candidates()``, through :func:`gemmlab.dispatch.candidates.enumerate`),
    at most ``limit`` each: a new kernel takes part in the sweep with no change here. The built-in
    kernels keep the hand-picked :func:`variants` / :func:`variants_tc` (their measured tables and
    tests rest on them)."""
    from gemmlab.contract.hookspecs import Problem
    from gemmlab.contract.registry import BUILTIN_PACKAGE
    from gemmlab.dispatch.candidates import enumerate as enumerate_candidates
    origins = getattr(registry, "origins", None) or {}
    others = [name for name, origin in origins.items() if not str(origin).startswith(f"{BUILTIN_PACKAGE}.")]
    if not others:
        return []
    problem = Problem(shape, precision, *dispatch.DEFAULT_LAYOUT)
    return [(c.kernel, dict(c.params)) for c in enumerate_candidates(registry, problem, facts, kernels=others, limit=limit)]
