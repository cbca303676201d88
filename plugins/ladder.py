"""Built-in kernels ``ladder_starter``, ``ladder_strip`` and ``ladder_tile2d``: the
register-blocking harness of seed 002, the "Matmul Ladder I" lab gemmlab grew from
(``ladder_tile2d`` is that lab's "where to go next": a 4x4 micro-tile
per thread with float4 loads).

Harness contract: a 1-D grid of (N/64)^2 blocks, each recovering its 64x64 tile of C from
blockIdx.x; square problems (M = N = K) with N a multiple of 64, so there are no partial tiles.
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import DeviceFacts, KernelSpec, Launch, Shape, hookimpl
from gemmlab.contract.plugin_utils import count_hits, require

TILE = 64


def _check_square(shape: Shape) -> None:
    require(shape.M == shape.N == shape.K and shape.N % TILE == 0, "shape",
            f"the ladder harness needs a square problem M = N = K with N a multiple of {TILE}, "
            f"got [{shape.M}, {shape.N}, {shape.K}]")


def _check_bk(params, threads: int) -> None:
    bk = params["BK"]
    require(bk >= 1 and TILE % bk == 0, "kernel.BK", f"BK={bk} must divide {TILE} (no k masking)")
    require((TILE * bk) % threads == 0, "kernel.BK",
            f"load coverage: each tile has 64*BK={TILE * bk} elements, not a multiple of the "
            f"{threads} threads that stage it")


def _tile_origin(shape: Shape):
    blocks = np.arange((shape.N // TILE) ** 2)
    return (blocks // (shape.N // TILE)) * TILE, (blocks % (shape.N // TILE)) * TILE


def _staging(params, threads: int):
    bk = params["BK"]
    i = np.arange(threads)[:, None] + np.arange(TILE * bk // threads)[None, :] * threads
    return {"A": count_hits((TILE, bk), i // bk, i % bk), "B": count_hits((bk, TILE), i // TILE, i % TILE)}


class LadderStarter(KernelSpec):
    """One output per thread: 256 threads sweep the 64x64 tile in 16 sub-passes (seed 002)."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        _check_square(shape)
        _check_bk(params, 256)

    def entry(self, params) -> str:
        return f"gemm_ladder_starter<{params['BK']}>"

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return Launch(grid=((shape.N // TILE) ** 2, 1, 1), block=(256, 1, 1))

    def ownership(self, shape: Shape, params):
        base_row, base_col = _tile_origin(shape)
        idx = np.arange(16)[:, None] * 256 + np.arange(256)[None, :]
        row = base_row[:, None, None] + (idx // TILE)[None]
        col = base_col[:, None, None] + (idx % TILE)[None]
        return count_hits((shape.M, shape.N), row, col), _staging(params, 256)


class LadderStrip(KernelSpec):
    """TM outputs per thread in a column strip held in registers (seed 002; TM=16: 256 threads)."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        _check_square(shape)
        tm = params["TM"]
        require(tm >= 1 and TILE % tm == 0, "kernel.TM",
                f"ownership: TM={tm} must divide {TILE} so the strips tile each column exactly once")
        threads = TILE * TILE // tm
        require(threads <= device.max_threads_per_block, "kernel.TM",
                f"64*64/TM={threads} threads exceeds the device limit {device.max_threads_per_block}; use TM >= 4")
        _check_bk(params, threads)

    def entry(self, params) -> str:
        return f"gemm_ladder_strip<{params['TM']}, {params['BK']}>"

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return Launch(grid=((shape.N // TILE) ** 2, 1, 1), block=(TILE * TILE // params["TM"], 1, 1))

    def ownership(self, shape: Shape, params):
        tm = params["TM"]
        threads = TILE * TILE // tm
        base_row, base_col = _tile_origin(shape)
        tid, i = np.ix_(range(threads), range(tm))
        row = base_row[:, None, None] + ((tid // TILE) * tm + i)[None]
        col = base_col[:, None, None] + (tid % TILE + 0 * i)[None]
        return count_hits((shape.M, shape.N), row, col), _staging(params, threads)


class LadderTile2d(KernelSpec):
    """4x4 micro-tile per thread (256 threads), float4 global loads, A transposed in shared memory."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        _check_square(shape)
        bk = params["BK"]
        require(bk >= 4 and bk % 4 == 0 and TILE % bk == 0, "kernel.BK",
                f"BK={bk} must be a multiple of 4 (float4 loads) dividing {TILE}")

    def entry(self, params) -> str:
        return f"gemm_ladder_tile2d<{params['BK']}>"

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return Launch(grid=((shape.N // TILE) ** 2, 1, 1), block=(256, 1, 1))

    def ownership(self, shape: Shape, params):
        bk = params["BK"]
        base_row, base_col = _tile_origin(shape)
        tid, i, j = np.ix_(range(256), range(4), range(4))
        row = base_row[:, None, None, None] + ((tid // 16) * 4 + i + 0 * j)[None]
        col = base_col[:, None, None, None] + ((tid % 16) * 4 + j + 0 * i)[None]
        # float4 index v = tid + l*256 < 16*BK; A: row v / (BK/4), k 4*(v % (BK/4)) + q;
        # B: k v / 16, column 4*(v % 16) + q
        v = np.arange(256)[:, None] + np.arange(-(-16 * bk // 256))[None, :] * 256
        v = v[v < 16 * bk][:, None]
        q = np.arange(4)[None, :]
        loads = {"A": count_hits((TILE, bk), v // (bk // 4) + 0 * q, 4 * (v % (bk // 4)) + q),
                 "B": count_hits((bk, TILE), v // 16 + 0 * q, 4 * (v % 16) + q)}
        return count_hits((shape.M, shape.N), row, col), loads


@hookimpl
def gemmlab_kernels():
    return [
        LadderStarter(name="ladder_starter", source="ladder_starter.cu", defaults={"BK": 8},
                      description="seed 002: 1-D grid of 64x64 tiles, one output per thread, 16 sub-passes",
                      sass_classes=("FFMA",)),
        LadderStrip(name="ladder_strip", source="ladder_strip.cu", defaults={"TM": 16, "BK": 8},
                    description="seed 002: 1-D grid of 64x64 tiles, TM=16 column strip per thread",
                    sass_classes=("FFMA",)),
        LadderTile2d(name="ladder_tile2d", source="ladder_tile2d.cu", defaults={"BK": 16},
                     description="seed 002's next rung: 4x4 micro-tile per thread, float4 loads",
                     sass_classes=("FFMA",)),
    ]
