"""Built-in kernel ``slicedk`` (issue 10): register-tiled GEMM with K sliced inside the block
(kernels/slicedk.cu), for shapes with few output tiles: K-heavy (256x256x65536), short M or N,
decode with M = 64, tiny. No workspace, no second launch: the KS slices' partial tiles are added
in shared memory.

Parameters: BM x BN output tile per block, BK k rows per staged chunk, TM x TN micro-tile per
thread (multiples of 4: float4 shared-memory reads), KS slices of (BM/TM)*(BN/TN) threads each.
Block = KS*(BM/TM)*(BN/TN) threads (1-D); grid = (cdiv(N, BN), cdiv(M, BM)). Any shape.

Precisions fp32 and tf32 (issue 41): ``precision=tf32`` allows TF32 tensor-core math but does not
require it (cuBLAS itself runs GEMV-like TF32 problems on FP32 units), so this kernel serves it
as it is: the float32 inputs are read unrounded and multiplied on FP32 CUDA cores (FFMA), hence
``tf32_rounding="none"`` (the TF32 verification's reference then rounds no input; the float32
accumulation bound applies).
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import DeviceFacts, KernelSpec, Launch, Shape, hookimpl
from gemmlab.contract.plugin_utils import (FP32_TF32, STATIC_SHARED_BYTES, cdiv, count_hits, require,
                                          require_divides)
from gemmlab.contract.space import Choice, PowerOfTwo, Restriction, Space
from gemmlab.contract.regimes import RANK_FIRST, Preference


def _threads(p) -> tuple[int, int]:
    """(threads per slice, threads per block)."""
    ts = (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])
    return ts, ts * p["KS"]


# (BM, BN, KS, BK), largest tile first; BK = 8 for the many-slice tiles keeps them at <= 128
# registers (2 blocks per SM; ptxas report, NVRTC 13.5)
TILES = ((64, 64, 2, 16), (32, 64, 4, 16), (32, 32, 4, 16), (16, 32, 8, 8), (16, 16, 16, 8))


def sized(shape: Shape, sms: int) -> dict:
    """The largest tile of :data:`TILES` (64x64 KS=2, 32x64 4, 32x32 4, 16x32 8, 16x16 16) that still
    gives at least one block per SM (else the smallest); 4x4 per thread."""
    pick = next((t for t in TILES if cdiv(shape.M, t[0]) * cdiv(shape.N, t[1]) >= sms), TILES[-1])
    return {"BM": pick[0], "BN": pick[1], "BK": pick[3], "TM": 4, "TN": 4, "KS": pick[2]}


def tile(bm: int, bn: int, ks: int, bk: int = 16) -> dict:
    """A BM x BN tile with KS slices, BK k rows per chunk, 4x4 per thread."""
    return {"BM": bm, "BN": bn, "BK": bk, "TM": 4, "TN": 4, "KS": ks}


def tiny_sized(k: int) -> dict:
    """Tiny shapes with short K: 16x16 tiles, BK = 8, one chunk per slice (KS = ceil(K/8), at most 16),
    so each thread waits for one load round trip instead of K dependent ones."""
    return {"BM": 16, "BN": 16, "BK": 8, "TM": 4, "TN": 4, "KS": min(16, cdiv(k, 8))}


def smem_bytes(p) -> int:
    """Static shared memory: max(KS slices of BK*(BM+4) + BK*BN floats, KS*BM*BN partials)."""
    stage = p["KS"] * (p["BK"] * (p["BM"] + 4) + p["BK"] * p["BN"])
    return 4 * max(stage, p["KS"] * p["BM"] * p["BN"])


class SlicedKKernel(KernelSpec):
    """BM x BN tile per block, TM x TN per thread, K interleaved over KS slices, shared-memory sum."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        p = params
        for name in ("TM", "TN"):
            require(p[name] % 4 == 0 and p[name] <= 16, f"kernel.{name}",
                    f"{name} must be 4, 8, 12 or 16 (float4 reads of the micro-tile), got {p[name]}")
        require_divides(p, "TM", "BM", "ownership (each output row has exactly one owner)")
        require_divides(p, "TN", "BN", "ownership (each output column has exactly one owner)")
        _, threads = _threads(p)
        require(threads <= device.max_threads_per_block, "kernel.KS",
                f"KS*(BM/TM)*(BN/TN) = {threads} threads exceeds the device limit {device.max_threads_per_block}")
        smem = smem_bytes(p)
        require(smem <= device.max_shared_per_block, "kernel.BK",
                f"static shared memory {smem} bytes (KS slices of BK*(BM+4)+BK*BN floats, or KS*BM*BN partials) "
                f"exceeds {device.max_shared_per_block}; lower KS, BK or the tile")
        require(cdiv(shape.M, p["BM"]) <= 65535, "shape",
                f"M = {shape.M} needs {cdiv(shape.M, p['BM'])} blocks along y (CUDA limit 65535); raise BM")

    def preferences(self, problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules (fp32, and tf32 on FP32 CUDA cores), with :func:`sized` unless said:

        - ``tiny`` first: K >= 64 and M*N*K >= 64^3 sized; else (K >= 8, M*N*K >= 16^3) :func:`tiny_sized`
          (16x16x16 on the H200: KS=2 2.14 us, 104.8% of cuBLAS; small_tile KS=1 3.57 us, 61.6%);
        - ``small`` first (smaller tiles fill more SMs); ``decode`` third; ``k_heavy`` rank 13 (K sliced
          inside the block, after the split-K kernels)."""
        s, sms = problem.shape, device.sm_count
        if regime == "tiny":
            m, n, k = s
            if k >= 64 and m * n * k >= 64 ** 3:
                return [Preference(RANK_FIRST, sized(s, sms), "K sliced inside the block")]
            if k >= 8 and m * n * k >= 16 ** 3:
                return [Preference(RANK_FIRST, tiny_sized(k), "one BK = 8 chunk per slice")]
            return []
        rank = {"small": 0, "decode": 2, "k_heavy": 13}.get(regime)
        return [] if rank is None else [Preference(RANK_FIRST + rank, sized(s, sms), "K sliced inside the block")]

    def sweep_variants(self, problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep (fp32): tiles of :func:`tile` per family (decode, tiny, k_heavy, and the
        skinny and odd families where tiles are few)."""
        if problem.precision != "fp32":
            return []
        picks = {"tiny": ((16, 16, 2, 8), (16, 16, 4, 8), (16, 16, 16, 8), (16, 32, 8, 8), (32, 32, 4, 16)),
                 "k_heavy": ((16, 16, 16, 8), (16, 32, 8, 8), (16, 32, 8, 16), (32, 32, 4, 16), (32, 64, 4, 16)),
                 "tall_skinny": ((32, 32, 4, 16), (64, 64, 2, 16)), "short_wide": ((32, 32, 4, 16), (64, 64, 2, 16)),
                 "odd": ((32, 32, 4, 16), (64, 64, 2, 16))}.get(family, ())
        if family == "decode":
            picks = (((16, 32, 8, 8),) if problem.M <= 16 else
                     ((32, 32, 4, 16), (16, 32, 8, 8), (32, 64, 4, 16), (64, 64, 2, 16)))
        return [tile(*t) for t in picks]

    def entry(self, params) -> str:
        p = params
        return f"gemm_slicedk<{p['BM']}, {p['BN']}, {p['BK']}, {p['TM']}, {p['TN']}, {p['KS']}>"

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        p = params
        return Launch(grid=(cdiv(shape.N, p["BN"]), cdiv(shape.M, p["BM"]), 1), block=(_threads(p)[1], 1, 1))

    def ownership(self, shape: Shape, params):
        """Stores (one thread per output over the grid); per slice and chunk the A stage (BK x BM,
        transposed) and B stage (BK x BN), each element written once, by the scalar path and (BK a
        multiple of 4) by the float4 path; every k of the reduction in
        exactly one slice's chunk (1 x K); each partial-tile slot (KS x BM*BN) written once."""
        p = params
        bm, bn, bk, ks = p["BM"], p["BN"], p["BK"], p["KS"]
        ts, threads = _threads(p)
        gx, gy = cdiv(shape.N, bn), cdiv(shape.M, bm)
        by, bx, t, i = np.ix_(range(gy), range(gx), range(threads), range(cdiv(bm * bn, threads)))
        o = t + i * threads
        row, col = by * bm + o // bn, bx * bn + o % bn
        stores = count_hits((shape.M, shape.N), row, col, (o < bm * bn) & (row < shape.M) & (col < shape.N))
        u, j = np.ix_(range(ts), range(cdiv(bm * bk, ts)))
        e = u + j * ts
        a_hits = count_hits((bk, bm), e % bk, e // bk, e < bm * bk)
        u, j = np.ix_(range(ts), range(cdiv(bk * bn, ts)))
        e = u + j * ts
        b_hits = count_hits((bk, bn), e // bn, e % bn, e < bk * bn)
        if bk % 4 == 0:  # the float4 path (K % 4 == 0 and N % 4 == 0): vectors e -> 4 elements each
            u, j, q = np.ix_(range(ts), range(cdiv(bm * bk // 4, ts)), range(4))
            e = u + j * ts
            a4 = count_hits((bk, bm), 4 * (e % (bk // 4)) + q, e // (bk // 4), e < bm * bk // 4)
            u, j, q = np.ix_(range(ts), range(cdiv(bk * bn // 4, ts)), range(4))
            e = u + j * ts
            b4 = count_hits((bk, bn), e // (bn // 4), 4 * (e % (bn // 4)) + q, e < bk * bn // 4)
        steps = cdiv(cdiv(shape.K, bk), ks)
        step, s, kk = np.ix_(range(steps), range(ks), range(bk))
        kidx = (step * ks + s) * bk + kk
        k_hits = count_hits((1, shape.K), 0 * kidx, kidx, kidx < shape.K)
        tx_n = bn // p["TN"]
        s, uu, ii, jj = np.ix_(range(ks), range(ts), range(p["TM"]), range(p["TN"]))
        r, cc = (uu // tx_n) * p["TM"] + ii, (uu % tx_n) * p["TN"] + jj
        part = count_hits((ks, bm * bn), s + 0 * r, r * bn + cc)
        loads = {"A": a_hits, "B": b_hits, "K": k_hits, "partials": part}
        if bk % 4 == 0:
            loads.update({"A (float4 path)": a4, "B (float4 path)": b4})
        return stores, loads


#: the declared tuning space (issue 41): check()'s rules as restrictions
SPACE = Space(
    params={"BM": PowerOfTwo(16, 64), "BN": PowerOfTwo(16, 64), "BK": Choice((16, 8)), "TM": Choice((4, 8)),
            "TN": Choice((4, 8)), "KS": PowerOfTwo(1, 16)},
    restrictions=(
        Restriction("ownership", lambda p: p["BM"] % p["TM"] == 0 and p["BN"] % p["TN"] == 0,
                    "TM divides BM and TN divides BN (each output one owner)", over=("BM", "BN", "TM", "TN")),
        Restriction("block_threads", lambda p: _threads(p)[1] <= 1024, "KS*(BM/TM)*(BN/TN) threads: at most 1024",
                    over=("BM", "BN", "TM", "TN", "KS")),
        Restriction("static_shared", lambda p: smem_bytes(p) <= STATIC_SHARED_BYTES,
                    "KS slices of BK*(BM+4)+BK*BN floats, or KS*BM*BN partials: at most 48 KiB",
                    over=("BM", "BN", "BK", "KS")),
    ))


@hookimpl
def gemmlab_kernels():
    return [SlicedKKernel(name="slicedk", source="slicedk.cu",
                          defaults={"BM": 32, "BN": 32, "BK": 16, "TM": 4, "TN": 4, "KS": 4},
                          param_values={"TM": (4, 8, 12, 16), "TN": (4, 8, 12, 16)}, space=SPACE,
                          description="few output tiles: TMxTN register tiles, K sliced over KS thread groups",
                          sass_classes=("FFMA",), precisions=FP32_TF32, tf32_rounding="none")]
