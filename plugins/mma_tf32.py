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

from types import MappingProxyType

from gemmlab.contract.hookspecs import Problem, hookimpl
from gemmlab.contract.plugin_utils import MmaSyncKernel, mma_model, mma_space
from gemmlab.contract.regimes import RANK_FIRST, RANK_TENSOR_CORE, Preference, tiles


def shared_bytes(p, b_col: bool) -> int:
    """Dynamic shared memory: STAGES x (A BM x (BK+4) + B (BN x (BK+4) or BK x (BN+8))) floats;
    with SWIZZLE=1 the rows are unpadded (BK, BN)."""
    pa, pb = (0, 0) if p.get("SWIZZLE", 0) else (4, 4 if b_col else 8)
    b = p["BN"] * (p["BK"] + pb) if b_col else p["BK"] * (p["BN"] + pb)
    return p["STAGES"] * (p["BM"] * (p["BK"] + pa) + b) * 4


#: kernel=auto's 128x128 (2x2 warps of 64x64) and 64x64 (2x2 warps of 32x32) tiles
TILE_128 = MappingProxyType({"BM": 128, "BN": 128, "WM": 64, "WN": 64})
TILE_64 = MappingProxyType({"BM": 64, "BN": 64, "WM": 32, "WN": 32})


class MmaTf32Kernel(MmaSyncKernel):
    """128x256x32 block tile, 2x4 warps of 64x64, 4 stages (defaults: the fastest tile measured at
    4096^3 on the H200, docs/results/contract-h200.md); m16n8k8 TF32 MMA, 4-float cp.async chunks."""

    home_precision = "tf32"
    k_step = 8
    vector = 4

    def shared_bytes(self, params, b_col: bool) -> int:
        return shared_bytes(params, b_col)

    def preferences(self, problem: Problem, device, regime: str) -> list:
        """kernel=auto's rules (tf32): a tensor-core candidate of ``decode``, ``k_heavy`` and
        ``tensor_core`` (ranks 102-104: after wgmma_tf32's tile where B is column-major or a wave of
        128x128 tiles exists, before it otherwise): below a wave of 128x128 tiles :data:`TILE_64`,
        :data:`TILE_128`, the 128x256 default; else the reverse. ``tiny`` with B column-major: second
        (rank 1) with :data:`TILE_64`."""
        if regime == "tiny":
            return [Preference(RANK_FIRST + 1, TILE_64, "mma.sync 64x64")] if problem.layout_b == "col" else []
        if regime not in ("decode", "k_heavy", "tensor_core"):
            return []
        order = ((TILE_64, TILE_128, {}) if tiles(problem.shape, 128, 128) < device.sm_count
                 else ({}, TILE_128, TILE_64))
        how = " (B read as stored, no transpose)" if problem.layout_b == "row" else ""
        return [Preference(RANK_TENSOR_CORE + 2 + i, p, f"mma_tf32 {p.get('BM', 128)}x{p.get('BN', 256)}{how}")
                for i, p in enumerate(order)]

    def instance(self, problem: Problem, params) -> str:
        return f"gemm_mma_tf32<{self.template_args(problem, params)}>"


model = mma_model  # the ownership model of every load path (tests/test_tckernels.py)

#: the declared tuning space (issue 41): :func:`gemmlab.contract.plugin_utils.mma_space` for k-step 8,
#: 4-element 16-byte chunks; the SWIZZLE layout and shared-memory rules stay in check_problem
SPACE = mma_space(8, 4, (2, 6))


@hookimpl
def gemmlab_kernels():
    return [MmaTf32Kernel(name="mma_tf32", source="mma_tf32.cu",
                          defaults={"BM": 128, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4,
                                    "MIN_BLOCKS": 1, "SWIZZLE": 1},
                          description="TF32 mma.sync m16n8k8, cp.async 4-stage, XOR-swizzled smem, 128x256x32, 64x64 warps",
                          precisions=("tf32",), layouts=(("row", "row"), ("row", "col")),
                          param_values={"SWIZZLE": (0, 1)}, space=SPACE,
                          sass_classes=("HMMA",), tf32_rounding="rna")]  # cvt.rna.tf32.f32 before each MMA
