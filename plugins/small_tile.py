"""Built-in kernel ``small_tile`` (issue 10): tiny and skinny shapes (kernels/small_tile.cu).

One output per thread in a BX x BY block (the ``naive`` kernel's mapping, from seed 000: the
real-device naive vs register-tiled GEMM lab gemmlab grew from) with the reduction split into
KS contiguous slices along threadIdx.z, added in shared memory: the serial chain per thread is
K/KS long, so a launch-bound tiny GEMM (or a K-heavy one with few outputs) finishes sooner.
Block = (BX, BY, KS), at most 1024 threads; grid = (cdiv(N, BX), cdiv(M, BY)). Any shape.

Precisions fp32 and tf32 (issue 41): ``precision=tf32`` allows TF32 tensor-core math but does not
require it (cuBLAS itself runs GEMV-like TF32 problems on FP32 units), so this kernel serves it
as it is: the float32 inputs are read unrounded and multiplied on FP32 CUDA cores (FFMA), hence
``tf32_rounding="none"`` (the TF32 verification's reference then rounds no input; the float32
accumulation bound applies).
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import DeviceFacts, KernelSpec, Launch, Shape, hookimpl
from gemmlab.contract.plugin_utils import FP32_TF32, cdiv, count_hits, require
from gemmlab.contract.space import PowerOfTwo, Restriction, Space
from gemmlab.contract.regimes import RANK_FIRST, Preference


def slices(k: int) -> int:
    """KS for a problem: K split in up to 4 slices of at least 32 (1 below K = 64)."""
    return 1 if k < 64 else 2 if k < 128 else 4


class SmallTileKernel(KernelSpec):
    """BX x BY outputs per block, one per thread, K split in KS slices reduced in shared memory."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        p = params
        threads = p["BX"] * p["BY"] * p["KS"]
        require(threads <= device.max_threads_per_block, "kernel.KS",
                f"BX*BY*KS = {threads} threads exceeds the device limit {device.max_threads_per_block}")
        require(p["KS"] <= 64, "kernel.KS", f"KS slices are threadIdx.z: at most 64 (CUDA limit), got {p['KS']}")
        require(cdiv(shape.M, p["BY"]) <= 65535, "shape",
                f"M = {shape.M} needs {cdiv(shape.M, p['BY'])} blocks along y (CUDA limit 65535); raise BY")

    def preferences(self, problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules (fp32, and tf32 on FP32 CUDA cores): ``tiny`` second (1^3: 1.25 us on the
        H200, cuBLAS 3.18) and ``small`` third with 16x16 blocks and KS = :func:`slices`; ``k_heavy``
        rank 14 with 16x8 blocks and 8 slices."""
        if regime in ("tiny", "small"):
            return [Preference(RANK_FIRST + (1 if regime == "tiny" else 2), {"BX": 16, "BY": 16, "KS": slices(problem.K)},
                               "one output per thread, K in slices")]
        if regime == "k_heavy":
            return [Preference(RANK_FIRST + 14, {"BX": 16, "BY": 8, "KS": 8}, "one output per thread, K in 8 slices")]
        return []

    def sweep_variants(self, problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep (fp32 tiny): 16x16 with 1 and 4 slices, 32x8 with 4."""
        if problem.precision != "fp32" or family != "tiny":
            return []
        return [{"BX": 16, "BY": 16, "KS": 1}, {"BX": 16, "BY": 16, "KS": 4}, {"BX": 32, "BY": 8, "KS": 4}]

    def entry(self, params) -> str:
        p = params
        return f"gemm_small_tile<{p['BX']}, {p['BY']}, {p['KS']}>"

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        p = params
        return Launch(grid=(cdiv(shape.N, p["BX"]), cdiv(shape.M, p["BY"]), 1), block=(p["BX"], p["BY"], p["KS"]))

    def ownership(self, shape: Shape, params):
        """Stores: only z = 0 threads store (every output once). Loads: the reduction of one
        output covers every k exactly once over the KS slices (modelled for the first output as
        a (1, K) count), and each partial slot is written by one thread."""
        p = params
        bx, by, ks = p["BX"], p["BY"], p["KS"]
        gx, gy = cdiv(shape.N, bx), cdiv(shape.M, by)
        block_y, block_x, ty, tx = np.ix_(range(gy), range(gx), range(by), range(bx))
        row, col = block_y * by + ty, block_x * bx + tx
        stores = count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N))  # z == 0 only
        slice_ = cdiv(shape.K, ks)
        z, i = np.ix_(range(ks), range(slice_))
        kk = z * slice_ + i
        k_hits = count_hits((1, shape.K), 0 * kk, kk, kk < shape.K)
        z2, y2, x2 = np.ix_(range(ks), range(by), range(bx))
        part = count_hits((ks, by * bx), z2 + 0 * y2 * x2, y2 * bx + x2)
        return stores, {"K": k_hits, "partials": part}


#: the declared tuning space (issue 41): check()'s thread rule as a restriction (KS <= 64 by its domain)
SPACE = Space(
    params={"BX": PowerOfTwo(8, 32), "BY": PowerOfTwo(4, 32), "KS": PowerOfTwo(1, 16)},
    restrictions=(
        Restriction("block_threads", lambda p: p["BX"] * p["BY"] * p["KS"] <= 1024, "BX*BY*KS threads: at most 1024",
                    over=("BX", "BY", "KS")),
    ))


@hookimpl
def gemmlab_kernels():
    return [SmallTileKernel(name="small_tile", source="small_tile.cu", defaults={"BX": 16, "BY": 16, "KS": 4}, space=SPACE,
                            description="tiny/skinny: one output per thread, K split in KS slices (shared-memory sum)",
                            sass_classes=("FFMA",), precisions=FP32_TF32, tf32_rounding="none")]
