"""Built-in kernel ``mma_bf16``: BF16/FP16 tensor cores through mma.sync.m16n8k16 (float32
accumulate), ldmatrix fragment loads and a cp.async multistage pipeline (kernels/mma_bf16.cu).

Parameters: BM x BN block tile, BK reduction chunk (multiple of 16), WM x WN warp tile
((BM/WM)*(BN/WN) warps), STAGES shared-memory stages, MIN_BLOCKS the resident blocks per SM
asked of ptxas (``__launch_bounds__`` second argument: it caps registers at 64K/(threads*MIN_BLOCKS)).
Precisions ``bf16`` and ``fp16`` (the
instance picks ``__nv_bfloat16`` or ``__half``); layouts A row-major, B row- or column-major.
Any M, N, K: when every row stride is a multiple of 8 elements (16 bytes) the tiles are staged by
16-byte cp.async with zero-fill past the edges, otherwise by guarded element loads (slow path).
"""

from __future__ import annotations

from gemmlab.hookspecs import DeviceFacts, KernelSpec, Launch, Problem, Shape, hookimpl
from gemmlab.plugin_utils import cdiv, check_mma_tiles, chunk_loads, mma_block_stores

ELEMENT = {"bf16": "__nv_bfloat16", "fp16": "__half"}
PAD = 8  # elements of row padding in shared memory (16 bytes)


def shared_bytes(p, b_col: bool) -> int:
    """Dynamic shared memory: STAGES x (A tile BM x (BK+8) + B tile, 2-byte elements)."""
    b = p["BN"] * (p["BK"] + PAD) if b_col else p["BK"] * (p["BN"] + PAD)
    return p["STAGES"] * (p["BM"] * (p["BK"] + PAD) + b) * 2


def aligned(problem: Problem) -> bool:
    """16-byte cp.async usable: the row strides of A (lda) and B (ldb) are multiples of 8 elements."""
    return problem.lda % 8 == 0 and problem.ldb % 8 == 0


class MmaBf16Kernel(KernelSpec):
    """128x256x32 block tile, 2x4 warps of 64x64, 3 stages (defaults: the fastest tile measured at
    4096^3 on the H200, docs/results/contract-h200.md); m16n8k16 BF16/FP16 MMA."""

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        check_mma_tiles(params, 16, 8, device, shared_bytes(params, problem.layout_b == "col"))

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape, "bf16"), params, device)

    def instance(self, problem: Problem, params) -> str:
        p = params
        b_col = "true" if problem.layout_b == "col" else "false"
        return (f"gemm_mma16<{ELEMENT[problem.precision]}, {p['BM']}, {p['BN']}, {p['BK']}, {p['WM']}, "
                f"{p['WN']}, {p['STAGES']}, {b_col}, {'true' if aligned(problem) else 'false'}, {p['MIN_BLOCKS']}>")

    def entry(self, params) -> str:
        return self.instance(Problem(Shape(8, 8, 8), "bf16"), params)

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        p = params
        threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
        return Launch(grid=(cdiv(problem.N, p["BN"]), cdiv(problem.M, p["BM"]), 1), block=(threads, 1, 1),
                      shared_bytes=shared_bytes(p, problem.layout_b == "col"))

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return self.geometry(Problem(shape, "bf16"), params, device)

    def ownership(self, shape: Shape, params):
        """Stores: the m16n8 fragment layout over the warp grid. Loads (row/row, 16-byte path):
        A as BM x BK and B as BK x BN in 8-element chunks; ``model`` covers the other paths."""
        return model(shape, params, b_col=False, vector=8)


def model(shape: Shape, params, b_col: bool, vector: int):
    """Ownership model for B row (``b_col`` False: B tile BK x BN) or column-major (BN x BK), with
    ``vector`` = 8 (16-byte cp.async) or 1 (element-wise path)."""
    p = params
    threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
    stores = mma_block_stores(shape, p["BM"], p["BN"], p["WM"], p["WN"])
    b_rows, b_cols = (p["BN"], p["BK"]) if b_col else (p["BK"], p["BN"])
    return stores, {"A": chunk_loads(p["BM"], p["BK"], vector, threads),
                    "B": chunk_loads(b_rows, b_cols, vector, threads)}


@hookimpl
def gemmlab_kernels():
    return [MmaBf16Kernel(name="mma_bf16", source="mma_bf16.cu",
                          defaults={"BM": 128, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "STAGES": 3,
                                    "MIN_BLOCKS": 1},
                          description="BF16/FP16 mma.sync m16n8k16 + ldmatrix, cp.async 3-stage, 128x256x32, 64x64 warps",
                          precisions=("bf16", "fp16"), layouts=(("row", "row"), ("row", "col")))]
