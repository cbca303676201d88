"""Built-in kernel ``splitk``: split-K float32 GEMM on CUDA cores in two launches
(kernels/splitk.cu), for few output tiles and long K (skinny / K-heavy shapes).

Launch plan: ``Main`` = ``gemm_splitk_partial<BM, BN, BK, TM, TN>`` over a grid
(ceil(N/BN), ceil(M/BM), SPLITS) writing SPLITS partial C blocks into the workspace
(SPLITS*M*N float32, every element written once, so no Memset), then ``Extra`` =
``gemm_splitk_reduce`` summing the partials in fixed split order into C (deterministic).
Parameters: BM, BN, BK, TM, TN as in ``tiled``; SPLITS >= 1.

Precisions fp32 and tf32 (issue 41): ``precision=tf32`` allows TF32 tensor-core math but does not
require it (cuBLAS itself runs GEMV-like TF32 problems on FP32 units), so this kernel serves it
as it is: the float32 inputs are read unrounded and multiplied on FP32 CUDA cores (FFMA), hence
``tf32_rounding="none"`` (the TF32 verification's reference then rounds no input; the float32
accumulation bound applies).
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import (DeviceFacts, Dim, Extra, KernelSpec, Launch, Main, Matrix, Problem, Shape, Value,
                               Workspace, hookimpl)
from gemmlab.contract.plugin_utils import (FP32_TF32, STATIC_SHARED_BYTES, cdiv, check_tiled_tiles, count_hits, require,
                                  strided_loads, thread_tile_stores, tiled_threads)
from gemmlab.contract.space import Choice, PowerOfTwo, Restriction, Space
from gemmlab.contract.regimes import RANK_FIRST, Preference

REDUCE_THREADS = 256


def k_ranges(K: int, BK: int, splits: int) -> list[tuple[int, int]]:
    """The [begin, end) K range of each split, as the kernel computes it."""
    per = cdiv(cdiv(K, splits), BK) * BK
    return [(min(K, z * per), min(K, (z + 1) * per)) for z in range(splits)]


class SplitKKernel(KernelSpec):
    """tiled-style 64x64 partial blocks (8x2 per thread, BK=16) over SPLITS K slices + a reduction."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        p = params
        check_tiled_tiles(p, device)
        require(1 <= p["SPLITS"] <= 65535, "kernel.SPLITS", f"SPLITS={p['SPLITS']} must be 1..65535 (grid z)")

    def entry(self, params) -> str:
        p = params
        return f"gemm_splitk_partial<{p['BM']}, {p['BN']}, {p['BK']}, {p['TM']}, {p['TN']}>"

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        p = params
        return Launch(grid=(cdiv(shape.N, p["BN"]), cdiv(shape.M, p["BM"]), p["SPLITS"]),
                      block=(p["BN"] // p["TN"], p["BM"] // p["TM"], 1))

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        return (Matrix("A"), Matrix("B"), Workspace(), Dim("M"), Dim("N"), Dim("K"))

    def workspace_bytes(self, problem: Problem, params, device: DeviceFacts) -> int:
        return 4 * params["SPLITS"] * problem.M * problem.N

    def reduce_launch(self, problem: Problem, device: DeviceFacts) -> Launch:
        """Grid-stride reduction: at most 8 blocks of 256 threads per SM."""
        blocks = max(1, min(cdiv(problem.M * problem.N, REDUCE_THREADS), 8 * device.sm_count))
        return Launch(grid=(blocks, 1, 1), block=(REDUCE_THREADS, 1, 1))

    def plan(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        return (Main(), Extra("gemm_splitk_reduce", self.reduce_launch(problem, device),
                              (Workspace(), Matrix("C"), Dim("M"), Dim("N"), Value(params["SPLITS"], "int32"))))

    def splits(self, problem: Problem, sms: int) -> int:
        """SPLITS for a problem: enough K slices of the default tile for two blocks per SM, each slice
        at least 512 long."""
        tiles = cdiv(problem.M, self.defaults["BM"]) * cdiv(problem.N, self.defaults["BN"])
        return max(1, min(cdiv(2 * sms, tiles), problem.K // 512))

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules (fp32, and tf32 on FP32 CUDA cores): the last of ``decode`` (rank 3, 4
        above M = 16) and rank 12 of ``k_heavy`` (after the warp-tiled split-K and stream-K), with
        :meth:`splits`."""
        rank = {"decode": 3 if problem.M <= 16 else 4, "k_heavy": 12}.get(regime)
        return ([] if rank is None else
                [Preference(RANK_FIRST + rank, {"SPLITS": self.splits(problem, device.sm_count)}, "split K, 64x64 tiles")])

    def sweep_variants(self, problem: Problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep (fp32): :meth:`splits` for decode and the skinny families; half, it and
        twice it for k_heavy."""
        if problem.precision != "fp32":
            return []
        s = self.splits(problem, device.sm_count)
        if family == "k_heavy":
            return [{"SPLITS": v} for v in sorted({max(1, s // 2), s, 2 * s})]
        return [{"SPLITS": s}] if family in ("decode", "tall_skinny", "short_wide") else []

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """The default tile with SPLITS sized to the problem first (:meth:`splits`; half and twice
        that), then the declared space's points."""
        s = self.splits(problem, device.sm_count)
        sized = [{**self.defaults, "SPLITS": v} for v in dict.fromkeys((s, max(1, s // 2), 2 * s)) if v <= 4096]
        return sized + super().candidates(problem, device)

    def ownership(self, shape: Shape, params):
        """Stores: C elements written by the reduction's grid-stride loop (with the default
        device's grid), after checking that every workspace element of every split is written
        exactly once by the partial kernel; loads: the ``tiled`` cooperative staging."""
        p = params
        threads = tiled_threads(p)
        partial = thread_tile_stores(shape, p, cdiv(shape.N, p["BN"]), cdiv(shape.M, p["BM"]))
        if not (partial == 1).all():  # each split's partial block: one writer per element
            return partial, {}
        total = shape.M * shape.N
        blocks = max(1, min(cdiv(total, REDUCE_THREADS), 8 * 132))
        stride = blocks * REDUCE_THREADS
        index = np.arange(stride)[:, None] + stride * np.arange(cdiv(total, stride))[None, :]
        stores = count_hits((shape.M, shape.N), index // shape.N, index % shape.N, index < total)
        loads = {"A": strided_loads(p["BM"], p["BK"], threads), "B": strided_loads(p["BK"], p["BN"], threads)}
        return stores, loads


#: the declared tuning space (issue 41): the ``tiled`` scheme's rules (:func:`check_tiled_tiles`) as
#: restrictions, SPLITS a power of two up to 64 (:meth:`SplitKKernel.candidates` adds the count sized to
#: the problem)
SPACE = Space(
    params={"BM": PowerOfTwo(32, 128), "BN": PowerOfTwo(32, 128), "BK": Choice((8, 16, 32)), "TM": Choice((2, 4, 8)),
            "TN": Choice((1, 2, 4)), "SPLITS": PowerOfTwo(1, 64)},
    restrictions=(
        Restriction("ownership", lambda p: p["BM"] % p["TM"] == 0 and p["BN"] % p["TN"] == 0,
                    "TM divides BM and TN divides BN (each output one owner)", over=("BM", "BN", "TM", "TN")),
        Restriction("block_threads", lambda p: tiled_threads(p) <= 1024, "(BN/TN)*(BM/TM) threads: at most 1024",
                    over=("BM", "BN", "TM", "TN")),
        Restriction("load_coverage", lambda p: (p["BM"] * p["BK"]) % tiled_threads(p) == 0
                    and (p["BK"] * p["BN"]) % tiled_threads(p) == 0,
                    "the A and B tiles split evenly over the threads", over=("BM", "BN", "BK", "TM", "TN")),
        Restriction("static_shared", lambda p: 4 * (p["BM"] * p["BK"] + p["BK"] * p["BN"]) <= STATIC_SHARED_BYTES,
                    "4*(BM*BK+BK*BN) bytes of static shared memory: at most 48 KiB", over=("BM", "BN", "BK")),
    ))


@hookimpl
def gemmlab_kernels():
    return [SplitKKernel(name="splitk", source="splitk.cu",
                         defaults={"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2, "SPLITS": 4},
                         description="split-K fp32: SPLITS partial 64x64 GEMMs into a workspace + reduction launch",
                         sass_classes=("FFMA",), precisions=FP32_TF32, tf32_rounding="none", space=SPACE)]
