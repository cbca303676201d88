// gemmlab/grouped.cuh: pieces of persistent grouped GEMM kernels (issue 44; mixture-of-experts
// layers: G products of different M_g with shared N and K, the M_g known only on the device).
//
// Header-only, NVRTC-safe (no host code). Reference: PTX ISA (docs.nvidia.com/cuda/
// parallel-thread-execution) 9.7.9.25.5 cp.async.bulk.tensor (.3d tile mode), 9.7.8.7 shfl.sync.
//   tma_load_3d          one 3-D TMA box (a per-group map: gemmlab.contract.hookspecs.TensorMap
//                        per_group=True, dims (cols, rows of one group's slab, G)) into shared memory
//   GroupTiles           the one tile queue over all groups: per group g its tile count
//                        ceil(M_g / BM) x tiles_n, their exclusive prefix sum (tile_start[g],
//                        tile_start[G] = the total) and M_g, built once per CTA from the device's
//                        group arrays into shared memory (2 G + 1 ints); an empty group
//                        (M_g = 0) has no tiles, so no CTA ever visits it
//   GroupCursor          maps the CTA's increasing tile indices to (group, tile row, tile column)
//                        by a forward-only walk over tile_start (amortised O(1) per tile; empty
//                        groups skipped by the same comparison), tile rows GROUP_M at a time inside
//                        a group (the tile row fastest) for L2 reuse of the group's B
// plugins/wgmma_grouped.py (tile_map) replays GroupTiles + GroupCursor in Python; keep them equal.
#pragma once

#include "gemmlab/tma.cuh"

namespace gemmlab {

/// `cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [tmap, {c0, c1, c2}], [bar];`
/// TMA: copy the 3-D box at element coordinates (c0 innermost, c1, c2 outermost) of the tensor map
/// into shared memory `dst` (1024-byte aligned for the 128-byte swizzle) and complete the box's
/// byte count on `bar`. Out-of-bounds elements (past a group's slab too) are zero-filled and
/// still counted. Issue from one thread. PTX ISA: cp.async.bulk.tensor (sm_90).
__device__ __forceinline__ void tma_load_3d(void *dst_smem, const CUtensorMap *tmap, int c0, int c1, int c2,
                                            unsigned long long *bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];\n"
               ::"r"(smem_addr(dst_smem)), "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(c0), "r"(c1),
               "r"(c2), "r"(smem_addr(bar))
               : "memory");
}

/// The tile queue over all groups, in shared memory: 2 G + 1 ints at `words` (the caller's
/// dynamic shared memory, 4-byte aligned): tile_start[0..G], rows[0..G-1] (M_g). A group's first
/// row in A and C (first_row) is group_offsets[g] (contiguous, read through the read-only cache
/// when the cursor enters the group) or g x M_max (masked: `group_offsets` null).
struct GroupTiles {
  int *tile_start, *rows;
  const int *group_offsets;
  int G, M_max;

  __device__ GroupTiles(int *words, int G_, const int *group_offsets_, int M_max_)
      : tile_start(words), rows(words + G_ + 1), group_offsets(group_offsets_), G(G_), M_max(M_max_) {}

  /// The first row of group g in A and C.
  __device__ __forceinline__ int first_row(int g) const { return group_offsets ? __ldg(group_offsets + g) : g * M_max; }

  /// Every thread of the block calls this once (it has two __syncthreads): all threads load the
  /// group arrays (one global latency), warp 0 scans the tile counts ceil(M_g / BM) x tiles_n,
  /// 32 groups per step (shfl.up inclusive scan plus the running carry). M_g is clamped to
  /// [0, the group's slot rows]: a count outside the layout (never in the contract) cannot make the
  /// kernel read or write outside A and C.
  template <int BM>
  __device__ __forceinline__ void build(const int *__restrict__ group_m, int tiles_n) {
    for (int g = threadIdx.x; g < G; g += blockDim.x) {
      const int slot = group_offsets ? __ldg(group_offsets + g + 1) - __ldg(group_offsets + g) : M_max;
      rows[g] = max(0, min(__ldg(group_m + g), slot));
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x;
      int carry = 0;
      if (lane == 0) tile_start[0] = 0;
      for (int base = 0; base < G; base += 32) {
        const int g = base + lane;
        int x = g < G ? (rows[g] + BM - 1) / BM * tiles_n : 0;
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
          const int y = __shfl_up_sync(0xffffffffu, x, d);
          if (lane >= d) x += y;
        }
        if (g < G) tile_start[g + 1] = carry + x;
        carry += __shfl_sync(0xffffffffu, x, 31);
      }
    }
    __syncthreads();
  }

  /// Tiles of all groups (the queue's length).
  __device__ __forceinline__ int total() const { return tile_start[G]; }
};

/// One tile of the queue: group g, its tile row m_blk (rows m_blk x BM.. of the group) and tile
/// column n_blk; the group's valid rows M_g and its first row in A and C.
struct GroupTile {
  int g, m_blk, n_blk, rows, first_row;
};

/// Walks a CTA's tiles (increasing indices) to their groups: `seek(t)` moves forward past every
/// group whose tiles end at or before t (empty ones included), then maps the tile's index inside
/// its group to (m_blk, n_blk): GROUP_M tile rows per band, the row index fastest in a band.
struct GroupCursor {
  int g = 0, first_row = -1, first_g = -1;

  template <int GROUP_M>
  __device__ __forceinline__ GroupTile seek(const GroupTiles &q, int t, int tiles_n) {
    while (q.tile_start[g + 1] <= t) g++;
    const int local = t - q.tile_start[g];
    const int tiles_m = (q.tile_start[g + 1] - q.tile_start[g]) / tiles_n;
    const int per_band = GROUP_M * tiles_n;
    const int band = local / per_band, first = band * GROUP_M;
    const int band_rows = min(tiles_m - first, GROUP_M);
    const int in_band = local - band * per_band;
    GroupTile out;
    out.g = g;
    out.m_blk = first + in_band % band_rows;
    out.n_blk = in_band / band_rows;
    out.rows = q.rows[g];
    if (first_g != g) first_row = q.first_row(g), first_g = g;  // one read per group entered
    out.first_row = first_row;
    return out;
  }
};

}  // namespace gemmlab
