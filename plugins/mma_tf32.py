"""Built-in kernel ``mma_tf32``: TF32 tensor cores through mma.sync.m16n8k8 (float32 accumulate,
operands rounded with cvt.rna.tf32.f32) and a cp.async multistage pipeline (kernels/mma_tf32.cu).

Parameters: BM x BN block tile, BK reduction chunk (multiple of 8), WM x WN warp tile
((BM/WM)*(BN/WN) warps), STAGES shared-memory stages, MIN_BLOCKS the resident blocks per SM
asked of ptxas (``__launch_bounds__`` second argument: it caps registers at 64K/(threads*MIN_BLOCKS)).
Precision ``tf32``; layouts A row-major,
B row- or column-major. Any M, N, K: when every row stride is a multiple of 4 floats (16 bytes)
tiles are staged by 16-byte cp.async with zero-fill past the edges, otherwise by 4-byte cp.async
with src-size 4 or 0 (zero-fill).
"""

from __future__ import annotations

from gemmlab.hookspecs import DeviceFacts, KernelSpec, Launch, Problem, Shape, hookimpl
from gemmlab.plugin_utils import cdiv, check_mma_tiles, chunk_loads, mma_block_stores


def shared_bytes(p, b_col: bool) -> int:
    """Dynamic shared memory: STAGES x (A BM x (BK+4) + B (BN x (BK+4) or BK x (BN+8))) floats."""
    b = p["BN"] * (p["BK"] + 4) if b_col else p["BK"] * (p["BN"] + 8)
    return p["STAGES"] * (p["BM"] * (p["BK"] + 4) + b) * 4


def aligned(problem: Problem) -> bool:
    """16-byte cp.async usable: the row strides lda and ldb are multiples of 4 floats."""
    return problem.lda % 4 == 0 and problem.ldb % 4 == 0


class MmaTf32Kernel(KernelSpec):
    """128x256x32 block tile, 2x4 warps of 64x64, 4 stages (defaults: the fastest tile measured at
    4096^3 on the H200, docs/results/contract-h200.md); m16n8k8 TF32 MMA."""

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        check_mma_tiles(params, 8, 4, device, shared_bytes(params, problem.layout_b == "col"))

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape, "tf32"), params, device)

    def instance(self, problem: Problem, params) -> str:
        p = params
        b_col = "true" if problem.layout_b == "col" else "false"
        return (f"gemm_mma_tf32<{p['BM']}, {p['BN']}, {p['BK']}, {p['WM']}, {p['WN']}, {p['STAGES']}, "
                f"{b_col}, {'true' if aligned(problem) else 'false'}, {p['MIN_BLOCKS']}>")

    def entry(self, params) -> str:
        return self.instance(Problem(Shape(8, 8, 8), "tf32"), params)

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        p = params
        threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
        return Launch(grid=(cdiv(problem.N, p["BN"]), cdiv(problem.M, p["BM"]), 1), block=(threads, 1, 1),
                      shared_bytes=shared_bytes(p, problem.layout_b == "col"))

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return self.geometry(Problem(shape, "tf32"), params, device)

    def ownership(self, shape: Shape, params):
        """Stores: the m16n8 fragment layout over the warp grid. Loads (row/row, 16-byte path):
        A as BM x BK and B as BK x BN in 4-float chunks; ``model`` covers the other paths."""
        return model(shape, params, b_col=False, vector=4)


def model(shape: Shape, params, b_col: bool, vector: int):
    """Ownership model for B row (``b_col`` False) or column-major, ``vector`` = 4 (16-byte
    cp.async) or 1 (4-byte cp.async path)."""
    p = params
    threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
    stores = mma_block_stores(shape, p["BM"], p["BN"], p["WM"], p["WN"])
    b_rows, b_cols = (p["BN"], p["BK"]) if b_col else (p["BK"], p["BN"])
    return stores, {"A": chunk_loads(p["BM"], p["BK"], vector, threads),
                    "B": chunk_loads(b_rows, b_cols, vector, threads)}


@hookimpl
def gemmlab_kernels():
    return [MmaTf32Kernel(name="mma_tf32", source="mma_tf32.cu",
                          defaults={"BM": 128, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4,
                                    "MIN_BLOCKS": 1},
                          description="TF32 mma.sync m16n8k8, cp.async 4-stage, padded smem, 128x256x32, 64x64 warps",
                          precisions=("tf32",), layouts=(("row", "row"), ("row", "col")))]
