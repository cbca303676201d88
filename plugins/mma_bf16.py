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

from types import MappingProxyType

from gemmlab.contract.hookspecs import Problem, hookimpl
from gemmlab.contract.plugin_utils import MmaSyncKernel, mma_model, mma_space
from gemmlab.contract.regimes import RANK_TENSOR_CORE, Preference, fill

ELEMENT = {"bf16": "__nv_bfloat16", "fp16": "__half"}
PAD = 8  # elements of row padding in shared memory (16 bytes; SWIZZLE=0)


def shared_bytes(p, b_col: bool) -> int:
    """Dynamic shared memory: STAGES x (A tile BM x (BK+8) + B tile, 2-byte elements); with
    SWIZZLE=1 the rows are unpadded."""
    pad = 0 if p.get("SWIZZLE", 0) else PAD
    b = p["BN"] * (p["BK"] + pad) if b_col else p["BK"] * (p["BN"] + pad)
    return p["STAGES"] * (p["BM"] * (p["BK"] + pad) + b) * 2


#: kernel=auto's 128x128 (2x4 warps of 64x32, 4 stages) and 64x64 (2x2 warps of 32x32, BK = 64) tiles
TILE_128 = MappingProxyType({"BM": 128, "BN": 128, "WN": 32, "STAGES": 4})
TILE_64 = MappingProxyType({"BM": 64, "BN": 64, "WM": 32, "WN": 32, "BK": 64})


class MmaBf16Kernel(MmaSyncKernel):
    """128x256x32 block tile, 2x4 warps of 64x64, 3 stages (defaults: the fastest tile measured at
    4096^3 on the H200, docs/results/contract-h200.md); m16n8k16 BF16/FP16 MMA, 8-element cp.async
    chunks."""

    home_precision = "bf16"
    k_step = 16
    vector = 8
    scalar_b_reads = False  # row-major B through ldmatrix.trans

    def shared_bytes(self, params, b_col: bool) -> int:
        return shared_bytes(params, b_col)

    def preferences(self, problem: Problem, device, regime: str) -> list:
        """kernel=auto's rules (bf16, fp16): a tensor-core candidate of ``decode``, ``k_heavy`` and
        ``tensor_core`` (ranks from 100), its tile by :func:`gemmlab.contract.regimes.fill`: with a full
        wave of 128x256 tiles its 128x256 default (102) then :data:`TILE_128` (104); with a wave of
        128x128 tiles :data:`TILE_128` (102) then :data:`TILE_64` (104); below that :data:`TILE_64`
        (101: smaller tiles fill more SMs) then :data:`TILE_128` (104)."""
        if regime not in ("decode", "k_heavy", "tensor_core"):
            return []
        f = fill(problem.shape, device.sm_count)
        picks = (((2, {}), (4, TILE_128)) if f == "128x256" else ((2, TILE_128), (4, TILE_64)) if f == "128x128"
                 else ((1, TILE_64), (4, TILE_128)))
        return [Preference(RANK_TENSOR_CORE + r, p, f"mma.sync {p.get('BM', 128)}x{p.get('BN', 256)}") for r, p in picks]

    def sweep_variants(self, problem: Problem, device, family: str) -> list[dict]:
        """gemmlab-tune sweep: :data:`TILE_64` for every family but decode, k_heavy and tiny."""
        return [] if family in ("decode", "k_heavy", "tiny") else [dict(TILE_64)]

    def instance(self, problem: Problem, params) -> str:
        return f"gemm_mma16<{ELEMENT[problem.precision]}, {self.template_args(problem, params)}>"


model = mma_model  # the ownership model of every load path (tests/test_tckernels.py)

#: the declared tuning space (issue 41): :func:`gemmlab.contract.plugin_utils.mma_space` for k-step 16,
#: 8-element 16-byte chunks; the SWIZZLE layout and shared-memory rules stay in check_problem
SPACE = mma_space(16, 8, (2, 6))


@hookimpl
def gemmlab_kernels():
    return [MmaBf16Kernel(name="mma_bf16", source="mma_bf16.cu",
                          defaults={"BM": 128, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "STAGES": 3,
                                    "MIN_BLOCKS": 1, "SWIZZLE": 1},
                          description="BF16/FP16 mma.sync m16n8k16 + ldmatrix, cp.async 3-stage, 128x256x32, 64x64 warps",
                          precisions=("bf16", "fp16"), layouts=(("row", "row"), ("row", "col")),
                          param_values={"SWIZZLE": (0, 1)}, space=SPACE,
                          sass_classes=("HMMA",))]
