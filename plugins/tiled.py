"""Built-in kernel ``tiled``: the shared- and register-tiled GEMM (kernels/tiled.cu) of seed 000,
the real-device naive vs register-tiled GEMM lab gemmlab grew from.

Parameters (seed values): BM=64, BN=64 output block; BK=16 reduction chunk; TM=8, TN=2 thread
tile. The thread block is (BN/TN, BM/TM) = (32, 8).
"""

from __future__ import annotations


from gemmlab.contract.hookspecs import DeviceFacts, KernelSpec, Launch, Shape, hookimpl
from gemmlab.contract.plugin_utils import cdiv, check_tiled_tiles, strided_loads, thread_tile_stores, tiled_threads


class TiledKernel(KernelSpec):
    """64x64 block tile, (32,8) threads, 8x2 accumulators per thread, BK=16 (seed 000)."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        check_tiled_tiles(params, device)

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
                        sass_classes=("FFMA",))]
