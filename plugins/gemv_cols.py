"""Built-in kernel ``gemv_cols`` (issue 41, item 3): decode-like GEMMs with B column-major, the
nn.Linear layout (B stored N x K, K contiguous), on FP32 CUDA cores (kernels/gemv_cols.cu).

Every output is a dot product of two K-contiguous rows (a row of A, a stored row of B), so the
lanes of a warp stride along K with float4 loads (one 512-byte segment per load instruction). A
block is WN x KW warps: warp (g, s) owns CW columns (column group g) and the block's MT rows, and
takes the 128-long K steps j = s, s + KW, ... of them (U steps of CW columns in flight per round);
the MT x CW partial sums are reduced over the lanes by a butterfly reduce-scatter and over the KW
warps through shared memory in s order (one launch, no workspace, no atomics, deterministic). B
is streamed from DRAM once (the row blocks of one column range are consecutive in launch order:
a second row block finds B in L2); the floor is the bytes of B over the DRAM bandwidth
(1x1536x2048 fp32: 12.6 MB, ~3.8 us at 3.35 TB/s on an H100).

Parameters: MT rows per block (1..32, a power of two), CW columns per warp (1, 2, 4, 8), WN
column groups and KW K-slice warps per block (powers of two, 32*WN*KW <= 1024 threads), U K steps
per load round (1, 2, 4). MT*CW <= 64 partial sums per lane and MT*CW + 4*U*CW + 2*(MT+CW) <= 120
(a register estimate: sums, B in flight, row pointers; the kernel is capped at 128 registers). Layouts A row-major, B column-major only (``gemv_rows`` serves a
row-major B); any M, N, K (float4 loads need K % 4 == 0, else four guarded scalar loads; edges
masked). Fast where B dominates the traffic: M <= 16..32.

Precisions fp32 and tf32 (issue 41): ``precision=tf32`` allows TF32 tensor-core math but does not
require it (cuBLAS itself runs GEMV-like TF32 problems on FP32 units), so this kernel serves it as
it is: the float32 inputs are read unrounded and multiplied on FP32 CUDA cores (FFMA), hence
``tf32_rounding="none"`` (the TF32 verification's reference then rounds no input; the float32
accumulation bound applies).

The whole GEMM contract (issue 43): ``gemv_cols`` declares the full epilogue (:data:`FULL`: alpha,
beta·C0, a float32 bias, every activation, a float32/bf16/fp16 C rounded once, leading dimensions,
strided batches in gridDim.z with shared operands). Such a problem compiles ``gemm_gemv_cols_epi``
with ``-DGEMMLAB_EPI``: the same loop with the pitches lda/ldb (float4 loads only where they are
multiples of 4 and A, B 16-byte aligned) and the fused operation of gemmlab/fused.cuh applied by the
one thread that stores each output; a plain problem compiles ``gemm_gemv_cols`` as before.

:func:`emulate` replays the kernel's work split and reduction order in numpy (the fake GPU of the
CPU tests runs it in place of the kernel); :meth:`GemvColsKernel.ownership` its index arithmetic.
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import FULL, DeviceFacts, KernelOptions, KernelSpec, Launch, Problem, Shape, hookimpl
from gemmlab.contract.plugin_utils import (FP32_TF32, STATIC_SHARED_BYTES, cdiv, count_hits,
                                          epilogue_arguments, epilogue_options, fused_entry, require)
from gemmlab.contract.space import Choice, PowerOfTwo, Restriction, Space
from gemmlab.contract.regimes import RANK_FIRST, Preference

STEP = 128  # K elements per warp step: 32 lanes x one float4
DECODE_FIRST_M = 32  # tf32 decode: first up to this M, after split-K wgmma_tf32 above it (kernel=auto's rules)
MT_VALUES = (1, 2, 4, 8, 16, 32)
CW_VALUES = (1, 2, 4, 8)
U_VALUES = (1, 2, 4)
MAX_SUMS = 64  # MT*CW partial sums per lane
MAX_LIVE = 120  # register estimate per lane: MT*CW sums + 4*U*CW floats of B in flight + 2*(MT+CW) row pointers
TARGET_WARPS_PER_SM = 16  # the sized candidate splits K over warps until the grid has this many per SM


def _pow2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


def _live(p) -> int:
    """Register estimate per lane: MT*CW sums + 4*U*CW floats of B in flight + 2*(MT+CW) for the
    64-bit row pointers of A and B. At most :data:`MAX_LIVE` = 120 compiles without spills under the
    kernel's 128-register cap (NVRTC 13.5, sm_90: MT=16 CW=4 U=1 105 registers; MT=8 CW=8 U=1, 128,
    spilled 60 B; MT=32 CW=2 U=1 spilled 416 B; MT=16 CW=4 U=2 spilled 796 B)."""
    return p["MT"] * p["CW"] + 4 * p["U"] * p["CW"] + 2 * (p["MT"] + p["CW"])


def _smem(p) -> int:
    """Static shared memory in bytes: the KW x WN x MT*CW cross-warp partials (one float when KW = 1)."""
    return 4 * (p["KW"] * p["WN"] * p["MT"] * p["CW"] if p["KW"] > 1 else 1)


def holders(V: int) -> tuple[np.ndarray, np.ndarray]:
    """After the butterfly reduce-scatter of V partial sums over 32 lanes: (lanes holding sums,
    first slot each holds); each holds max(1, V/32) consecutive slots (the kernel's slot0)."""
    lanes = np.arange(32)
    if V >= 32:
        return lanes, lanes * (V // 32)
    spread = 32 // V
    held = lanes[lanes % spread == 0]
    return held, held // spread


def butterfly(v: np.ndarray) -> np.ndarray:
    """The kernel's reduce-scatter of ``v`` (..., 32 lanes, V) in float32, step by step: at xor
    offset 16, 8, 4, 2, 1 a lane holding width > 1 values keeps the half its lane bit selects and
    adds its partner's copy of that half; with one value it adds its partner's. Returns (..., 32,
    max(1, V/32)): what each lane holds (meaningful on :func:`holders`' lanes)."""
    v = v.astype(np.float32).copy()
    V = v.shape[-1]
    lanes = np.arange(32)
    for st in range(5):
        off, width = 16 >> st, V >> st
        partner = lanes ^ off
        if width > 1:
            h = width // 2
            upper = ((lanes & off) != 0)[:, None]
            lo, hi = v[..., :h], v[..., h:width]
            keep = np.where(upper, hi, lo)
            send = np.where(upper, lo, hi)  # what each lane sends; a lane receives its partner's
            v = (keep + send[..., partner, :]).astype(np.float32)
        else:
            v = (v + v[..., partner, :]).astype(np.float32)
    return v[..., :max(1, V // 32)]


def emulate(A: np.ndarray, B: np.ndarray, params) -> np.ndarray:
    """C (M, N) float32 as the kernel computes it from A (M, K) and B (K, N) (float32 arrays of the
    values; the stored layout does not matter here): per warp (g, s) and lane the float32 sums over
    its K subset (steps j = s mod KW, k = 128 j + 4 lane + e), the butterfly reduce-scatter, the
    slots the holder lanes write, and the sum of the KW slices in s order. A wrong slot mapping or
    K split gives a wrong C."""
    p = params
    mt, cw, wn, kw = p["MT"], p["CW"], p["WN"], p["KW"]
    M, K = A.shape
    N = B.shape[1]
    steps = cdiv(K, STEP)
    Ap = np.zeros((cdiv(M, mt) * mt, steps * STEP), np.float64)
    Ap[:M, :K] = A
    cols = cdiv(N, wn * cw) * wn * cw
    Bp = np.zeros((steps * STEP, cols), np.float64)
    Bp[:K, :N] = B
    A4 = Ap.reshape(Ap.shape[0], steps, 32, 4)
    B4 = Bp.reshape(steps, 32, 4, cols)
    # partial[s, lane, m, n]: the lane's float32 sum over its steps (rounded once: a float64 dot)
    partial = np.stack([np.einsum("mjle,jlen->lmn", A4[:, s::kw], B4[s::kw]) for s in range(kw)]).astype(np.float32)
    V = mt * cw
    # v[s, row block, column group, lane, slot = i*CW + c]
    rb, cg = Ap.shape[0] // mt, cols // cw
    v = partial.reshape(kw, 32, rb, mt, cg, cw).transpose(0, 2, 4, 1, 3, 5).reshape(kw, rb, cg, 32, V)
    held = butterfly(v)
    lanes, slot0 = holders(V)
    sums = np.zeros((kw, rb, cg, V), np.float32)
    for q in range(held.shape[-1]):
        sums[..., slot0 + q] = held[..., lanes, q]
    total = np.zeros((rb, cg, V), np.float32)
    for s in range(kw):
        total = (total + sums[s]).astype(np.float32)
    C = total.reshape(rb, cg, mt, cw).transpose(0, 2, 1, 3).reshape(rb * mt, cg * cw)
    return C[:M, :N].copy()


class GemvColsKernel(KernelSpec):
    """MT rows x WN*CW columns of C per block, lanes along K (float4), K split over KW warps."""

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        p = params
        require(p["MT"] in MT_VALUES, "kernel.MT", f"MT={p['MT']} rows per block must be one of "
                f"{', '.join(map(str, MT_VALUES))} (a power of two: the lanes' reduce-scatter halves MT*CW sums)")
        require(p["CW"] in CW_VALUES, "kernel.CW", f"CW={p['CW']} columns per warp must be one of "
                f"{', '.join(map(str, CW_VALUES))}")
        require(p["U"] in U_VALUES, "kernel.U", f"U={p['U']} K steps per load round must be one of "
                f"{', '.join(map(str, U_VALUES))}")
        require(_pow2(p["WN"]), "kernel.WN", f"WN={p['WN']} column groups per block must be a power of two")
        require(_pow2(p["KW"]), "kernel.KW", f"KW={p['KW']} K-slice warps per block must be a power of two")
        require(p["MT"] * p["CW"] <= MAX_SUMS, "kernel.CW",
                f"MT*CW = {p['MT'] * p['CW']} partial sums per lane exceeds {MAX_SUMS}; lower CW or MT")
        require(_live(p) <= MAX_LIVE, "kernel.U",
                f"MT*CW + 4*U*CW + 2*(MT+CW) = {_live(p)} registers of sums, B in flight and row pointers per "
                f"lane exceeds {MAX_LIVE} (spills under the 128-register cap); lower U, CW or MT")
        threads = 32 * p["WN"] * p["KW"]
        require(threads <= min(1024, device.max_threads_per_block), "kernel.KW",
                f"32*WN*KW = {threads} threads exceeds the device limit {min(1024, device.max_threads_per_block)}")
        require(_smem(p) <= min(STATIC_SHARED_BYTES, device.max_shared_per_block), "kernel.KW",
                f"static shared memory 4*KW*WN*MT*CW = {_smem(p)} bytes exceeds "
                f"{min(STATIC_SHARED_BYTES, device.max_shared_per_block)}")
        require(cdiv(problem.N, p["WN"] * p["CW"]) <= 65535, "shape",
                f"N = {problem.N} needs {cdiv(problem.N, p['WN'] * p['CW'])} blocks along y (CUDA limit 65535); "
                "raise CW or WN")
        require(cdiv(problem.M, p["MT"]) <= 2 ** 31 - 1, "shape", f"M = {problem.M}: too many row blocks; raise MT")

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape, "fp32", "row", "col"), params, device)

    def shortlist(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """Sized to the problem first (:func:`sized`), then that with twice and half the K-slice
        warps, then with half the steps in flight (U)."""
        base = sized(problem.shape, device.sm_count)
        out = [base]
        for kw in (2 * base["KW"], base["KW"] // 2):
            if 1 <= kw <= 16 and 32 * base["WN"] * kw <= 1024:
                out.append({**base, "KW": kw})
        if base["U"] > 1:
            out.append({**base, "U": base["U"] // 2})
        return out

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """:meth:`shortlist`, then the declared space."""
        return self.shortlist(problem, device) + super().candidates(problem, device)

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules, tf32 only (fp32 with B column-major takes the rules' last resort, the
        defaults): ``decode`` first up to M = :data:`DECODE_FIRST_M` (B streamed once by K-contiguous
        float4 loads on FP32 CUDA cores), above it after split-K wgmma (rank 2: M*N*K FLOPs stop hiding
        under B's bytes on CUDA cores); ``tiny`` first; ``k_heavy`` rank 10. Each rank holds
        :meth:`shortlist` in order (the first its check accepts is taken)."""
        if problem.precision != "tf32":
            return []
        rank = {"decode": 0 if problem.M <= DECODE_FIRST_M else 2, "tiny": 0, "k_heavy": 10}.get(regime)
        return ([] if rank is None else
                [Preference(RANK_FIRST + rank, p, "B streamed once, K-contiguous float4 loads on CUDA cores")
                 for p in self.shortlist(problem, device)])

    def entry(self, params) -> str:
        p = params
        return f"gemm_gemv_cols<{p['MT']}, {p['CW']}, {p['WN']}, {p['KW']}, {p['U']}>"

    def instance(self, problem: Problem, params) -> str:
        """:meth:`entry`; beyond the plain contract ``gemm_gemv_cols_epi<MT, CW, WN, KW, U, ACT, BIAS, BETA,
        BIAS_T, OUT_T>`` (issue 43)."""
        return fused_entry(self.entry(params), problem)

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        """:meth:`launch`, with one grid layer (z) per batch."""
        launch = self.launch(problem.shape, params, device)
        return Launch(grid=(launch.grid[0], launch.grid[1], problem.batch), block=launch.block)

    def options(self, problem: Problem, params, device: DeviceFacts) -> KernelOptions:
        """``-DGEMMLAB_EPI`` beyond the plain contract (the fused entry, issue 43), else none."""
        return epilogue_options(problem)

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """(A, B, C, M, N, K) for a plain problem; beyond it the fused entry's
        (:func:`~gemmlab.contract.plugin_utils.epilogue_arguments`)."""
        return epilogue_arguments(problem) if problem.extended else super().arguments(problem, params, device)

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        p = params
        return Launch(grid=(cdiv(shape.M, p["MT"]), cdiv(shape.N, p["WN"] * p["CW"]), 1),
                      block=(32 * p["WN"] * p["KW"], 1, 1))

    def ownership(self, shape: Shape, params):
        """Stores over the whole grid: with KW = 1 the holder lanes' slots (:func:`holders`), else
        the block's loop o = t + r*threads < WN*MT*CW (column group o // V, slot o % V); slot
        i*CW + c is row m0 + i, column n0 + g*CW + c, masked to M x N. Loads, for one block: the B
        elements of its columns (WN*CW x K as stored: each (column, k) once over the KW warps,
        their rounds, U steps, lanes and the 4 of a float4), the A rows per column group (MT x K,
        each once), and the cross-warp partials (KW x WN*MT*CW, each written once)."""
        p = params
        mt, cw, wn, kw, u = p["MT"], p["CW"], p["WN"], p["KW"], p["U"]
        V, threads = mt * cw, 32 * wn * kw
        gx, gy = cdiv(shape.M, mt), cdiv(shape.N, wn * cw)
        lanes, slot0 = holders(V)
        if kw == 1:
            bx, by, g, li, q = np.ix_(range(gx), range(gy), range(wn), range(len(lanes)), range(max(1, V // 32)))
            slot = slot0[li] + q
            row, col = bx * mt + slot // cw, by * wn * cw + g * cw + slot % cw
            stores = count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N))
            part = np.ones((1, 1), dtype=np.int64)
        else:
            bx, by, t, r = np.ix_(range(gx), range(gy), range(threads), range(cdiv(wn * V, threads)))
            o = t + r * threads
            gg, slot = o // V, o % V
            row, col = bx * mt + slot // cw, by * wn * cw + gg * cw + slot % cw
            stores = count_hits((shape.M, shape.N), row, col, (o < wn * V) & (row < shape.M) & (col < shape.N))
            s, g, li, q = np.ix_(range(kw), range(wn), range(len(lanes)), range(max(1, V // 32)))
            part = count_hits((kw, wn * V), s + 0 * li, g * V + slot0[li] + q)
        steps = cdiv(shape.K, STEP)
        rounds = cdiv(steps, kw * u)
        s, r, uu, lane, e = np.ix_(range(kw), range(rounds), range(u), range(32), range(4))
        k = (s + r * kw * u + uu * kw) * STEP + 4 * lane + e
        ks = np.broadcast_to(k, np.broadcast_shapes(k.shape)).ravel()
        ks = ks[ks < shape.K]
        b_hits = np.zeros((wn * cw, shape.K), dtype=np.int64)
        b_hits[:, :] = np.bincount(ks, minlength=shape.K)[None, :]  # every column of the block: the same k set
        a_hits = np.zeros((mt, shape.K), dtype=np.int64)
        a_hits[:, :] = np.bincount(ks, minlength=shape.K)[None, :]
        return stores, {"B": b_hits, "A (per column group)": a_hits, "partials": part}


def sized(shape: Shape, sms: int) -> dict:
    """The parameters sized to a problem: MT = the next power of two >= min(M, 16) (M > 16: two or
    more row blocks, the later ones reading B from L2), CW = 4 (at most 64 sums per lane), KW = the
    fewest K-slice warps (at most 8, each with at least one 128-long step) that give the grid
    :data:`TARGET_WARPS_PER_SM` warps per SM, WN = 8 / KW column groups (256 threads), U = the K
    steps each warp has left, at most 4 (2 with MT = 8, 1 with MT = 16: :func:`_live`)."""
    mt = 1
    while mt < min(shape.M, 16):
        mt *= 2
    cw = min(4, MAX_SUMS // mt)
    steps = cdiv(shape.K, STEP)
    groups = cdiv(shape.N, cw) * cdiv(shape.M, mt)  # warps with one K slice
    kw = 1
    while kw < 8 and 2 * kw <= steps and groups * kw < TARGET_WARPS_PER_SM * sms:
        kw *= 2
    u = 1
    while u < (1 if mt >= 16 else 2 if mt >= 8 else 4) and 2 * u <= cdiv(steps, kw):
        u *= 2
    return {"MT": mt, "CW": cw, "WN": max(1, 8 // kw), "KW": kw, "U": u}


#: the declared tuning space (issue 41): check_problem()'s parameter rules as domains and restrictions
SPACE = Space(
    params={"MT": Choice(MT_VALUES), "CW": Choice(CW_VALUES), "WN": PowerOfTwo(1, 8), "KW": PowerOfTwo(1, 16),
            "U": Choice(U_VALUES)},
    restrictions=(
        Restriction("sums", lambda p: p["MT"] * p["CW"] <= MAX_SUMS, f"MT*CW partial sums per lane: at most {MAX_SUMS}",
                    over=("MT", "CW")),
        Restriction("live_registers", lambda p: _live(p) <= MAX_LIVE,
                    f"MT*CW sums + 4*U*CW floats of B in flight + 2*(MT+CW) pointer registers: at most {MAX_LIVE}",
                    over=("MT", "CW", "U")),
        Restriction("block_threads", lambda p: 32 * p["WN"] * p["KW"] <= 1024, "32*WN*KW threads: at most 1024",
                    over=("WN", "KW")),
    ))


@hookimpl
def gemmlab_kernels():
    return [GemvColsKernel(name="gemv_cols", source="gemv_cols.cu", defaults={"MT": 1, "CW": 4, "WN": 1, "KW": 8, "U": 2},
                           param_values={"MT": MT_VALUES, "CW": CW_VALUES, "U": U_VALUES}, space=SPACE,
                           description="decode-like M <= 32 with B column-major (nn.Linear): lanes along K with "
                                       "float4 loads, K split over KW warps, B streamed once",
                           precisions=FP32_TF32, layouts=(("row", "col"),), tf32_rounding="none", epilogue=FULL,
                           sass_classes=("FFMA", "LDG.128"))]
