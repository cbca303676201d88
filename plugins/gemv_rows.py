"""Built-in kernel ``gemv_rows`` (issue 10): decode-like GEMMs, M small against a weight-sized B
(kernels/gemv_rows.cu).

Parameters: MT rows of C per block (1..16; M > MT uses cdiv(M, MT) blocks along x, consecutive in
launch order so they share each B slice in L2), NT columns per block (4, 8, 16, 32, 64 or 128:
NT/4 lanes read float4s of a B row), KW warps splitting K inside the block (reduced through shared
memory), U float4 loads of B in flight per thread per chunk. Any shape runs (edges are masked);
it is fast only where B dominates the traffic (M <= 16 or so).

Precisions fp32 and tf32 (issue 41): ``precision=tf32`` allows TF32 tensor-core math but does not
require it (cuBLAS itself runs GEMV-like TF32 problems on FP32 units), so this kernel serves it
as it is: the float32 inputs are read unrounded and multiplied on FP32 CUDA cores (FFMA), hence
``tf32_rounding="none"`` (the TF32 verification's reference then rounds no input; the float32
accumulation bound applies).

The whole GEMM contract (issue 43): ``gemv_rows`` declares the full epilogue (:data:`FULL`: alpha,
beta·C0, a float32 bias, every activation, a float32/bf16/fp16 C rounded once, leading dimensions,
strided batches in gridDim.z with shared operands). Such a problem compiles ``gemm_gemv_rows_epi``
with ``-DGEMMLAB_EPI``: the same loop with the pitches lda/ldb (float4 paths only where they are
multiples of 4 and A, B 16-byte aligned) and the fused operation of gemmlab/fused.cuh applied by
the one thread that stores each output; a plain problem compiles ``gemm_gemv_rows`` as before.
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import FULL, DeviceFacts, KernelOptions, KernelSpec, Launch, Problem, Shape, hookimpl
from gemmlab.contract.plugin_utils import (FP32_TF32, STATIC_SHARED_BYTES, cdiv, count_hits,
                                          epilogue_arguments, epilogue_options, fused_entry, require)
from gemmlab.contract.space import Choice, PowerOfTwo, Range, Restriction, Space
from gemmlab.contract.regimes import RANK_FIRST, Preference

NT_CHOICES = (4, 8, 16, 32, 64, 128)


def _geometry(p):
    """(threads, L lanes per B row segment, KSTEP k rows per step, KC k rows per chunk)."""
    threads = 32 * p["KW"]
    lanes = p["NT"] // 4
    kstep = threads // lanes
    return threads, lanes, kstep, p["U"] * kstep


class GemvRowsKernel(KernelSpec):
    """MT x NT block of C per block, K split over KW warps, B streamed once with float4 loads."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        p = params
        require(p["NT"] in NT_CHOICES, "kernel.NT",
                f"NT must be one of {', '.join(map(str, NT_CHOICES))} (NT/4 lanes, a divisor of 32, cover a B row "
                f"segment with float4 loads), got {p['NT']}")
        require(p["MT"] <= 16, "kernel.MT", f"MT rows per block must be 1..16 (4*MT accumulators per thread), "
                f"got {p['MT']}")
        require(p["U"] <= 16, "kernel.U", f"U float4 loads in flight per thread must be 1..16, got {p['U']}")
        threads, _, _, kc = _geometry(p)
        require(threads <= device.max_threads_per_block, "kernel.KW",
                f"32*KW = {threads} threads exceeds the device limit {device.max_threads_per_block}")
        smem = 4 * max(p["MT"] * kc, p["KW"] * p["MT"] * p["NT"])
        require(smem <= device.max_shared_per_block, "kernel.KW",
                f"static shared memory 4*max(MT*KC, KW*MT*NT) = {smem} bytes exceeds {device.max_shared_per_block} "
                f"(KC = U*32*KW/(NT/4) = {kc}); lower KW, U or NT")
        require(cdiv(shape.N, p["NT"]) <= 65535, "shape",
                f"N = {shape.N} needs {cdiv(shape.N, p['NT'])} blocks along y (CUDA limit 65535); raise NT")

    def preferences(self, problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules (fp32, and tf32 on FP32 CUDA cores): ``decode`` first for M <= 8 (B streamed
        once with float4 loads, K split over warps), second for 8 < M <= 16 (after stream-K's 16-row tile),
        fourth for 16 < M <= 64; parameters :func:`sized`."""
        if regime != "decode":
            return []
        rank = 0 if problem.M <= 8 else 1 if problem.M <= 16 else 3
        return [Preference(RANK_FIRST + rank, sized(problem.shape, device.sm_count), "stream B once, K split over warps")]

    def sweep_variants(self, problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep (fp32 decode): M <= 16 NT 16/32/64 x U 4/8 at 8 warps; above, 16x32 U=8."""
        if problem.precision != "fp32" or family != "decode":
            return []
        mt = sized(problem.shape, device.sm_count)["MT"]
        if problem.M <= 16:
            return [{"MT": mt, "NT": nt, "KW": 8, "U": u} for nt in (16, 32, 64) for u in (4, 8)]
        return [{"MT": 16, "NT": 32, "KW": 8, "U": 8}]

    def entry(self, params) -> str:
        p = params
        return f"gemm_gemv_rows<{p['MT']}, {p['NT']}, {p['KW']}, {p['U']}>"

    def instance(self, problem: Problem, params) -> str:
        """:meth:`entry`; beyond the plain contract ``gemm_gemv_rows_epi<MT, NT, KW, U, ACT, BIAS, BETA, BIAS_T,
        OUT_T>`` (issue 43)."""
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
        return Launch(grid=(cdiv(shape.M, p["MT"]), cdiv(shape.N, p["NT"]), 1), block=(32 * p["KW"], 1, 1))

    def ownership(self, shape: Shape, params):
        """Stores of the whole grid; per block and chunk: the A stage (KC x MT, written once each, by
        the element path and, when KC % 4 == 0, by the float4 path),
        the B rows read into registers (KC x NT, each once) and the cross-warp partials
        (KW x MT*NT, each written once)."""
        p = params
        threads, lanes, kstep, kc = _geometry(p)
        mt, nt = p["MT"], p["NT"]
        gx, gy = cdiv(shape.M, mt), cdiv(shape.N, nt)
        # final stores: o = t + i*threads < MT*NT; row m0 + o // NT, column n0 + o % NT
        per = cdiv(mt * nt, threads)
        bx, by, t, i = np.ix_(range(gx), range(gy), range(threads), range(per))
        o = t + i * threads
        row, col = bx * mt + o // nt, by * nt + o % nt
        stores = count_hits((shape.M, shape.N), row, col, (o < mt * nt) & (row < shape.M) & (col < shape.N))
        # A stage: idx = t + j*threads < MT*KC -> As[kk = idx // MT][mm = idx % MT]
        t2, j = np.ix_(range(threads), range(cdiv(mt * kc, threads)))
        idx = t2 + j * threads
        a_hits = count_hits((kc, mt), idx // mt, idx % mt, idx < mt * kc)
        loads = {"A": a_hits}
        if kc % 4 == 0:  # the float4 path (K % 4 == 0): e -> row e % MT, k rows 4*(e // MT) .. +3
            t4, j4, q = np.ix_(range(threads), range(cdiv(mt * kc // 4, threads)), range(4))
            e = t4 + j4 * threads
            loads["A (float4 path)"] = count_hits((kc, mt), 4 * (e // mt) + q, e % mt + 0 * q, e < mt * kc // 4)
        # B: thread t reads row krow + u*KSTEP, columns 4*(t % L) .. +3
        t3, u, q = np.ix_(range(threads), range(p["U"]), range(4))
        b_hits = count_hits((kc, nt), t3 // lanes + u * kstep, 4 * (t3 % lanes) + q)
        # partials: lanes < L of each warp write row (warp*MT + i), columns 4*lane + q
        w, lane, i2, q2 = np.ix_(range(p["KW"]), range(lanes), range(mt), range(4))
        part = count_hits((p["KW"], mt * nt), w + 0 * lane, i2 * nt + 4 * lane + q2)
        loads.update({"B": b_hits, "partials": part})
        return stores, loads


def sized(shape: Shape, sms: int) -> dict:
    """Parameters for a decode-like problem: MT rows per block (the next power of two >= min(M, 16)),
    NT columns per block as wide as still gives at least 2 blocks per SM (128, 64, 32, else 16), 8
    warps over K (4 with NT = 128, so the cross-warp partials KW*MT*NT fit the 48 KiB of static shared
    memory), U = 8."""
    mt = 1
    while mt < min(shape.M, 16):
        mt *= 2
    nt = next((c for c in (128, 64, 32) if cdiv(shape.N, c) * cdiv(shape.M, mt) >= 2 * sms), 16)
    return {"MT": mt, "NT": nt, "KW": 4 if nt == 128 else 8}


def _smem(p) -> int:
    """Static shared memory in bytes: 4 * max(MT * KC, KW * MT * NT) (:meth:`GemvRowsKernel.check`)."""
    return 4 * max(p["MT"] * _geometry(p)[3], p["KW"] * p["MT"] * p["NT"])


#: the declared tuning space (issue 41): check()'s ranges as domains, its shared-memory rule as a restriction
SPACE = Space(
    params={"MT": Range(1, 16), "NT": Choice(NT_CHOICES), "KW": PowerOfTwo(1, 32), "U": PowerOfTwo(1, 16)},
    restrictions=(
        Restriction("static_shared", lambda p: _smem(p) <= STATIC_SHARED_BYTES,
                    "4*max(MT*KC, KW*MT*NT) bytes of static shared memory (KC = U*32*KW/(NT/4)): at most 48 KiB",
                    over=("MT", "NT", "KW", "U")),
    ))


@hookimpl
def gemmlab_kernels():
    return [GemvRowsKernel(name="gemv_rows", source="gemv_rows.cu", defaults={"MT": 1, "NT": 32, "KW": 8, "U": 8},
                           param_values={"NT": NT_CHOICES}, space=SPACE,
                           description="decode-like M <= 16: B streamed once (float4), K split over KW warps",
                           sass_classes=("FFMA",), precisions=FP32_TF32, tf32_rounding="none", epilogue=FULL)]
