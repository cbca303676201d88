"""Built-in kernel ``cluster_tiled``: float32 CUDA-core GEMM launched in 2-CTA thread-block
clusters (sm_90) whose CTAs share the A tile through distributed shared memory
(kernels/cluster_tiled.cu): each CTA stages half of the BM x BK A slice from global memory and
copies the other half from its peer (mapa + ld.shared::cluster) between two cluster barriers.

Parameters as ``tiled`` (BM, BN, BK, TM, TN; BM even). Launch: grid
(2*ceil(ceil(N/BN)/2), ceil(M/BM)) blocks in clusters of (2, 1, 1); any M, N, K.
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import DeviceFacts, KernelSpec, Launch, Shape, hookimpl
from gemmlab.contract.plugin_utils import (cdiv, check_tiled_tiles, count_hits, require, strided_linear, strided_loads,
                                  thread_tile_stores, tiled_threads)

CLUSTER = (2, 1, 1)


class ClusterTiledKernel(KernelSpec):
    """tiled's 64x64 / (32,8) / 8x2 / BK=16 scheme, A tile shared by a 2-CTA cluster through DSMEM."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        p = params
        require(device.max_cluster_size >= 2, "kernel",
                f"thread-block clusters need sm_90 or newer; {device.name} (sm_{device.arch}) has none")
        require(p["BM"] % 2 == 0, "kernel.BM", f"BM={p['BM']} must be even (each CTA stages half of A)")
        check_tiled_tiles(p, device, a_rows=p["BM"] // 2, a_label="A half")

    def entry(self, params) -> str:
        p = params
        return f"gemm_cluster_tiled<{p['BM']}, {p['BN']}, {p['BK']}, {p['TM']}, {p['TN']}>"

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        p = params
        return Launch(grid=(2 * cdiv(cdiv(shape.N, p["BN"]), 2), cdiv(shape.M, p["BM"]), 1),
                      block=(p["BN"] // p["TN"], p["BM"] // p["TM"], 1), cluster=CLUSTER)

    def ownership(self, shape: Shape, params):
        """Stores over the padded grid (guarded); loads of one CTA's A tile: its own half staged
        from global memory plus the peer's half copied over DSMEM (each element once), for
        either rank; B as in ``tiled``."""
        p = params
        threads, half = tiled_threads(p), p["BM"] // 2
        stores = thread_tile_stores(shape, p, 2 * cdiv(cdiv(shape.N, p["BN"]), 2), cdiv(shape.M, p["BM"]))
        a_linear = strided_linear(half * p["BK"], threads)
        loads = {}
        for rank in (0, 1):
            own_rows = rank * half + a_linear // p["BK"]
            peer_rows = (rank ^ 1) * half + a_linear // p["BK"]
            rows = np.concatenate([own_rows, peer_rows], axis=1)
            cols = np.concatenate([a_linear % p["BK"]] * 2, axis=1)
            loads[f"A rank {rank}"] = count_hits((p["BM"], p["BK"]), rows, cols)
        loads["B"] = strided_loads(p["BK"], p["BN"], threads)
        return stores, loads


@hookimpl
def gemmlab_kernels():
    return [ClusterTiledKernel(name="cluster_tiled", source="cluster_tiled.cu",
                               defaults={"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2},
                               description="fp32 tiled GEMM in 2-CTA clusters sharing the A tile through DSMEM",
                               sass_classes=("FFMA",))]
