"""Built-in kernel ``naive``: the one-output-per-thread GEMM (kernels/naive.cu) of seed 000, the
real-device naive vs register-tiled GEMM lab gemmlab grew from."""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import DeviceFacts, KernelSpec, Launch, Shape, hookimpl
from gemmlab.contract.plugin_utils import cdiv, count_hits, require
from gemmlab.contract.regimes import RANK_FIRST, Preference


class NaiveKernel(KernelSpec):
    """One output per thread in a BX x BY block (seed 000: 16 x 16), masked; any shape."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        threads = params["BX"] * params["BY"]
        require(threads <= device.max_threads_per_block, "kernel.BX",
                f"BX*BY={threads} threads exceeds the device limit {device.max_threads_per_block}")

    def preferences(self, problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules: ``tiny`` third (16x16 blocks), after slicedk and small_tile."""
        return [Preference(RANK_FIRST + 2, {"BX": 16, "BY": 16}, "one output per thread")] if regime == "tiny" else []

    def sweep_variants(self, problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep (fp32 tiny): 16x16 blocks."""
        return [{"BX": 16, "BY": 16}] if problem.precision == "fp32" and family == "tiny" else []

    def entry(self, params) -> str:
        return f"gemm_naive<{params['BX']}, {params['BY']}>"

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        bx, by = params["BX"], params["BY"]
        return Launch(grid=(cdiv(shape.N, bx), cdiv(shape.M, by), 1), block=(bx, by, 1))

    def ownership(self, shape: Shape, params):
        bx, by = params["BX"], params["BY"]
        gx, gy = cdiv(shape.N, bx), cdiv(shape.M, by)
        block_y, block_x, ty, tx = np.ix_(range(gy), range(gx), range(by), range(bx))
        row, col = block_y * by + ty, block_x * bx + tx
        return count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N)), {}


@hookimpl
def gemmlab_kernels():
    return [NaiveKernel(name="naive", source="naive.cu", defaults={"BX": 16, "BY": 16},
                        description="seed 000: one output per thread, 16x16 block, masked",
                        sass_classes=("FFMA",))]
