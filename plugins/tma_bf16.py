"""Built-in kernel ``tma_bf16``: BF16 GEMM on Hopper (sm_90a) fed by TMA and computed with wgmma
(kernels/tma_bf16.cu): A and B tiles arrive by cp.async.bulk.tensor (128-byte swizzle) in a
STAGES-deep ring of mbarrier-completed stages; one warpgroup runs wgmma.mma_async m64nBNk16.

Precision ``bf16``; layouts A row-major, B column-major (both operands K-major, as wgmma reads
them untransposed). TMA rule for this kernel: the row stride of both stored matrices is K*2
bytes, which TMA needs to be a multiple of 16, so K % 8 == 0 (M, N free: out-of-bounds box
elements arrive as zeros). Parameters: BN (64 or 128), STAGES (2..8). Block tile 64 x BN x 64.
Needs an sm_90 device (compiled for sm_90a).
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import (DeviceFacts, Dim, KernelOptions, KernelSpec, Launch, Matrix, Problem, Shape,
                                        TensorMap, hookimpl)
from gemmlab.contract.plugin_utils import cdiv, count_hits, require
from gemmlab.contract.regimes import RANK_TENSOR_CORE, Preference, fill

BM = BK = 64
BN_VALUES = (64, 128)  # wgmma m64n64 / m64n128


def shared_bytes(p) -> int:
    """STAGES x (A 64x64 + B BNx64) bf16, plus 1024 bytes of slack to align the ring to 1024."""
    return p["STAGES"] * (BM * BK + p["BN"] * BK) * 2 + 1024


class TmaBf16Kernel(KernelSpec):
    """64 x BN x 64 block tile, one warpgroup, TMA + mbarrier ring, wgmma (sm_90a)."""

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        p = params
        require(device.arch == "90", "kernel",
                f"tma_bf16 needs an sm_90 GPU (wgmma, sm_90a); the compile target is sm_{device.arch} on {device.name}")
        require(p["BN"] in BN_VALUES, "kernel.BN", f"BN={p['BN']} must be 64 or 128 (wgmma m64n64 / m64n128)")
        require(2 <= p["STAGES"] <= 8, "kernel.STAGES", f"STAGES={p['STAGES']} must be 2..8")
        require(problem.K % 8 == 0, "shape",
                f"TMA needs row strides that are multiples of 16 bytes: K*2={problem.K * 2} bytes, so K must be "
                f"a multiple of 8 (got K={problem.K})")
        require(shared_bytes(p) <= device.max_shared_per_block_optin, "kernel.STAGES",
                f"dynamic shared memory {shared_bytes(p)} bytes exceeds {device.max_shared_per_block_optin}")

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape, "bf16", "row", "col"), params, device)

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules (bf16, B column-major): a tensor-core candidate of ``decode``, ``k_heavy``
        and ``tensor_core``: its defaults at rank 103 where a wave of 128x128 tiles exists, else
        BN = 64 at rank 102 (more tiles)."""
        if regime not in ("decode", "k_heavy", "tensor_core"):
            return []
        if fill(problem.shape, device.sm_count) == "under_a_wave":
            return [Preference(RANK_TENSOR_CORE + 2, {"BN": 64}, "wgmma fed by TMA, 64x64 tiles")]
        return [Preference(RANK_TENSOR_CORE + 3, {}, "wgmma fed by TMA")]

    def instance(self, problem: Problem, params) -> str:
        return f"gemm_tma_wgmma<{params['BN']}, {params['STAGES']}>"

    def entry(self, params) -> str:
        return f"gemm_tma_wgmma<{params['BN']}, {params['STAGES']}>"

    def options(self, problem: Problem, params, device: DeviceFacts) -> KernelOptions:
        return KernelOptions(arch_specific=True)

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        return (TensorMap("A", (BM, BK), swizzle="128B"), TensorMap("B", (params["BN"], BK), swizzle="128B"),
                Matrix("C"), Dim("M"), Dim("N"), Dim("K"))

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        return Launch(grid=(cdiv(problem.N, params["BN"]), cdiv(problem.M, BM), 1), block=(128, 1, 1),
                      shared_bytes=shared_bytes(params))

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return self.geometry(Problem(shape, "bf16", "row", "col"), params, device)

    def ownership(self, shape: Shape, params):
        """Stores: the wgmma m64nBN accumulator layout (warp w rows 16w.., m16n8 fragments along
        N). Loads: one TMA box per operand and stage writes the whole tile once (modelled as the
        box itself)."""
        BN = params["BN"]
        gy, gx = cdiv(shape.M, BM), cdiv(shape.N, BN)
        by, bx, w, j, lane, half, v = np.ix_(range(gy), range(gx), range(4), range(BN // 8), range(32),
                                             range(2), range(2))
        row = by * BM + w * 16 + lane // 4 + half * 8
        col = bx * BN + j * 8 + 2 * (lane % 4) + v
        stores = count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N))
        r, c = np.ix_(range(BM), range(BK))
        rb, cb = np.ix_(range(BN), range(BK))
        return stores, {"A": count_hits((BM, BK), r, c), "B": count_hits((BN, BK), rb, cb)}


@hookimpl
def gemmlab_kernels():
    return [TmaBf16Kernel(name="tma_bf16", source="tma_bf16.cu", defaults={"BN": 128, "STAGES": 4},
                          description="BF16 sm_90a: TMA (128B swizzle) + mbarrier ring + wgmma m64n128k16, one warpgroup",
                          precisions=("bf16",), layouts=(("row", "col"),), param_values={"BN": BN_VALUES},
                          sass_classes=("HGMMA", "UTMALDG"))]
