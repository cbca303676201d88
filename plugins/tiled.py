"""Built-in kernel ``tiled``: the shared- and register-tiled GEMM (kernels/tiled.cu) of seed 000,
the real-device naive vs register-tiled GEMM lab gemmlab grew from.

Parameters (seed values): BM=64, BN=64 output block; BK=16 reduction chunk; TM=8, TN=2 thread
tile. The thread block is (BN/TN, BM/TM) = (32, 8).

The whole GEMM contract (issue 43): ``tiled`` declares the full epilogue (:data:`FULL`: alpha,
beta·C0, a float32 or input-typed bias, every activation, a float32/bf16/fp16 C, leading
dimensions, strided batches with shared operands) and bf16/fp16 inputs (converted to float32 as
they are staged: float32 FMA, like precision=fp32). A problem beyond C = A·B, or with bf16/fp16
inputs, compiles ``gemm_tiled_epi`` (the same main loop, strides and the epilogue in its stores,
batch = blockIdx.z) with ``-DGEMMLAB_TILED_EPI``; a plain fp32 problem compiles ``gemm_tiled``
exactly as before (the define is off, so the preprocessed program is unchanged). It is the
correctness reference of the epilogue, not a fast kernel.
"""

from __future__ import annotations


from gemmlab.contract.hookspecs import FULL, DeviceFacts, KernelOptions, KernelSpec, Launch, Problem, Shape, hookimpl
from gemmlab.contract.plugin_utils import (cdiv, check_tiled_tiles, epilogue_arguments, strided_loads, thread_tile_stores,
                                          tiled_threads)
from gemmlab.contract.regimes import RANK_FIRST, Preference

#: 128x128x32 (TM=16, TN=4): the Optuna search's best tile at 2048^3 on the H200 (28.95 TFLOP/s vs 25.9
#: for the seed tile: docs/results/sweeps-h200.md); 32x32 for few output tiles
OPTUNA_TILE = {"BM": 128, "BN": 128, "BK": 32, "TM": 16, "TN": 4}
SEED_TILE = {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2}
TILE_32 = {"BM": 32, "BN": 32, "BK": 16, "TM": 4, "TN": 1}


#: ``epilogue.activation`` -> gemm_tiled_epi's ACT; ``Problem.c_dtype`` -> its OUT_T
ACT_CODES = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4}
OUT_TYPES = {"float32": "float", "bfloat16": "__nv_bfloat16", "float16": "__half"}


def _epi(problem: Problem) -> bool:
    """Whether ``problem`` runs gemm_tiled_epi: beyond the plain contract, or 2-byte inputs."""
    return problem.extended or problem.precision != "fp32"


class TiledKernel(KernelSpec):
    """64x64 block tile, (32,8) threads, 8x2 accumulators per thread, BK=16 (seed 000); with the
    full epilogue of issue 43 (module docstring)."""

    def instance(self, problem: Problem, params) -> str:
        """``gemm_tiled<...>`` for a plain problem, ``gemm_tiled_epi<..., ACT, BIAS, BETA, OUT_T>`` beyond it."""
        if not _epi(problem):
            return self.entry(params)
        p, ep = params, problem.epilogue
        act, bias, beta = (ACT_CODES[ep.activation], int(ep.bias != "none"), int(ep.beta != 0.0)) if ep else (0, 0, 0)
        return (f"gemm_tiled_epi<{p['BM']}, {p['BN']}, {p['BK']}, {p['TM']}, {p['TN']}, {act}, {bias}, {beta}, "
                f"{OUT_TYPES[problem.ab_dtype]}, {OUT_TYPES[problem.bias_dtype or 'float32']}, "
                f"{OUT_TYPES[problem.c_dtype]}>")

    def options(self, problem: Problem, params, device: DeviceFacts) -> KernelOptions:
        return KernelOptions(defines={"GEMMLAB_TILED_EPI": 1}) if _epi(problem) else KernelOptions()

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        launch = self.launch(problem.shape, params, device)
        return Launch(grid=(launch.grid[0], launch.grid[1], problem.batch), block=launch.block)

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """(A, B, C, M, N, K) for a plain fp32 problem; else (A, B, C, C0 or null, bias or null, M, N,
        K, lda, ldb, ldc, stride_a, stride_b, stride_c, alpha, beta)."""
        return epilogue_arguments(problem) if _epi(problem) else super().arguments(problem, params, device)

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        check_tiled_tiles(params, device)

    def preferences(self, problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules: the last resort of ``large`` (:data:`OPTUNA_TILE`, rank 13, after the
        sgemm ladder), ``medium`` (:data:`SEED_TILE`, rank 3), ``k_heavy`` (:data:`TILE_32`, rank 15)
        and ``small`` (:data:`TILE_32`, then the defaults)."""
        return {"large": [Preference(RANK_FIRST + 13, OPTUNA_TILE, "the Optuna tile")],
                "medium": [Preference(RANK_FIRST + 3, SEED_TILE, "the seed tile")],
                "k_heavy": [Preference(RANK_FIRST + 15, TILE_32, "32x32 tiles")],
                "small": [Preference(RANK_FIRST + 3, TILE_32, "32x32 tiles"), Preference(RANK_FIRST + 4, {}, "the seed tile")],
                }.get(regime, [])

    def sweep_variants(self, problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep (fp32): decode above 16 rows the seed tile, tiny 32x32; none for the
        large-shape families (the sgemm ladder's rungs beat it there: docs/results/ladder-h200.md)."""
        if problem.precision != "fp32":
            return []
        if family == "decode":
            return [dict(SEED_TILE)] if problem.M > 16 else []
        return [dict(TILE_32)] if family == "tiny" else []

    def entry(self, params) -> str:
        p = params
        return f"gemm_tiled<{p['BM']}, {p['BN']}, {p['BK']}, {p['TM']}, {p['TN']}>"

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        p = params
        return Launch(grid=(cdiv(shape.N, p["BN"]), cdiv(shape.M, p["BM"]), 1),
                      block=(p["BN"] // p["TN"], p["BM"] // p["TM"], 1))

    def ownership(self, shape: Shape, params):
        p = params
        threads = tiled_threads(p)
        stores = thread_tile_stores(shape, p, cdiv(shape.N, p["BN"]), cdiv(shape.M, p["BM"]))
        loads = {"A": strided_loads(p["BM"], p["BK"], threads), "B": strided_loads(p["BK"], p["BN"], threads)}
        return stores, loads


@hookimpl
def gemmlab_kernels():
    return [TiledKernel(name="tiled", source="tiled.cu",
                        defaults={"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2},
                        description="seed 000: 64x64 block tile, (32,8) threads, 8x2 per thread, BK=16",
                        sass_classes=("FFMA",), epilogue=FULL, precisions=("fp32", "bf16", "fp16"))]
