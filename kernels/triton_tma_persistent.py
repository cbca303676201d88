"""A Hopper persistent matmul in Triton whose A and B tiles arrive by TMA (issue 46, item 2):
C (M x N, row-major float32) = A (M x K, row-major) @ B, A and B bfloat16 or float16, float32
accumulation on the tensor cores (wgmma on sm_90).

- Persistent: the grid is at most one program per SM (``tl.num_programs(0)``, set by the plugin from
  the device's SM count); each program walks the output tiles ``pid, pid + programs, ...`` in the
  GROUP_M-swizzled order (GROUP_M tile rows side by side, so concurrently computed tiles share A
  rows and B columns in L2).
- TMA: the tensor descriptors are made on the device (``tl.make_tensor_descriptor``), once per
  program before the tile loop; Triton writes each 128-byte CUtensorMap into the launch's global
  scratch (the core allocates it: gemmlab.gpu.backends.TritonBackend), so no host-side descriptor is
  encoded per launch. B is described as stored: column-major B (``B_COL=1``) as an N x K matrix
  with rows of K (tiles BLOCK_N x BLOCK_K, transposed in shared memory for the dot), row-major B as K
  x N (tiles BLOCK_K x BLOCK_N). TMA fills the part of a box outside the matrix with zeros, so
  partial M, N and K tiles need no masks on the loads; the row strides must be multiples of 16 bytes
  (the plugin refuses other shapes).
- C leaves through masked stores (any N), 64-bit row offsets.
- ``FLATTEN=1`` lets Triton's pipeliner flatten the tile and K loops into one (``tl.range(...,
  flatten=True)``), so the next tile's loads start during this tile's epilogue; the epilogue's tile
  indices come from a second counter (the pattern of Triton's persistent-matmul tutorial, which
  keeps values used in the prologue and the epilogue apart for the pipeliner).

Loaded by path by gemmlab.gpu.triton_compile for the built-in plugin plugins/triton_tma_persistent.py;
it imports Triton, so nothing imports it unless a Triton kernel runs. Needs Triton >= 3.3
(``tl.make_tensor_descriptor``); written against 3.6 and 3.9.
"""

import triton
import triton.language as tl


@triton.jit
def _tile_coords(tile, tiles_per_group, tiles_m, GROUP_M: tl.constexpr):
    """Tile index -> (tile row, tile column) in the GROUP_M-swizzled order."""
    group = tile // tiles_per_group
    first_m = group * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    return first_m + (tile % tiles_per_group) % rows, (tile % tiles_per_group) // rows


@triton.jit
def matmul_tma_persistent(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr, B_COL: tl.constexpr, FLATTEN: tl.constexpr):
    start = tl.program_id(axis=0)
    programs = tl.num_programs(axis=0)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[lda, 1], block_shape=[BLOCK_M, BLOCK_K])
    if B_COL:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[ldb, 1], block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[ldb, 1], block_shape=[BLOCK_K, BLOCK_N])

    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    tiles = tiles_m * tiles_n
    tiles_per_group = GROUP_M * tiles_n
    tile_c = start - programs  # the epilogue's own tile counter

    for tile in tl.range(start, tiles, programs, flatten=FLATTEN):
        pid_m, pid_n = _tile_coords(tile, tiles_per_group, tiles_m, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k_tiles):
            off_k = kk * BLOCK_K
            a = a_desc.load([off_m, off_k])
            if B_COL:
                b = b_desc.load([off_n, off_k]).T
            else:
                b = b_desc.load([off_k, off_n])
            acc = tl.dot(a, b, acc)

        tile_c += programs
        pid_m, pid_n = _tile_coords(tile_c, tiles_per_group, tiles_m, GROUP_M)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * ldc + offs_n[None, :]
        tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
