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
//   GeneralTiles,        the same queue for the general kind (G independent (M_g, N_g, K_g), each
//   GeneralCursor        group's tile columns its own ceil(N_g / BN)): 3 G + 1 ints (tile_start,
//                        M_g, N_g) built from group_dims; the cursor also reads K_g and C_g's
//                        element offset once per group entered
//   acquire_tensormap    the fence a thread runs before its first TMA through a tensor map the host
//                        copied to global memory (the general kind's per-group maps)
// plugins/wgmma_grouped.py (tile_map) replays the queues and cursors in Python; keep them equal.
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

/// Pick<B, T, F>::type is T where B, else F (std::conditional, without the standard library).
template <bool B, class T, class F>
struct Pick {
  using type = T;
};
template <class T, class F>
struct Pick<false, T, F> {
  using type = F;
};

/// `fence.proxy.tensormap::generic.acquire.sys [tmap], 128;` make a tensor map that the host wrote to
/// global memory (cudaMemcpy before the launch) visible to this thread's later TMA through it. The
/// CUDA Programming Guide ("Using TMA to transfer multi-dimensional arrays") requires it once per
/// thread and map before first use; scope .sys as the writer is the host. PTX ISA: membar/fence
/// (.proxy.tensormap::generic, sm_90).
__device__ __forceinline__ void acquire_tensormap(const CUtensorMap *tmap) {
  asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;\n"
               ::"l"(reinterpret_cast<unsigned long long>(tmap)) : "memory");
}

/// Warp 0 of the block writes the exclusive prefix sum of count(g), g < G, to tile_start[0..G]
/// (tile_start[G] the total): 32 groups per step, shfl.up inclusive scan plus the running carry.
/// The caller synchronises the block before and after.
template <class Count>
__device__ __forceinline__ void scan_tile_counts(int *tile_start, int G, Count count) {
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int carry = 0;
    if (lane == 0) tile_start[0] = 0;
    for (int base = 0; base < G; base += 32) {
      const int g = base + lane;
      int x = g < G ? count(g) : 0;
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const int y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
      }
      if (g < G) tile_start[g + 1] = carry + x;
      carry += __shfl_sync(0xffffffffu, x, 31);
    }
  }
}

/// Tile `local` of a group's tiles_m x tiles_n tiles, GROUP_M tile rows per band, the row fastest
/// inside a band: (m_blk, n_blk).
template <int GROUP_M>
__device__ __forceinline__ void band_tile(int local, int tiles_m, int tiles_n, int &m_blk, int &n_blk) {
  const int per_band = GROUP_M * tiles_n;
  const int band = local / per_band, first = band * GROUP_M;
  const int band_rows = min(tiles_m - first, GROUP_M);
  const int in_band = local - band * per_band;
  m_blk = first + in_band % band_rows;
  n_blk = in_band / band_rows;
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
    const int *r = rows;
    scan_tile_counts(tile_start, G, [=](int g) { return (r[g] + BM - 1) / BM * tiles_n; });
    __syncthreads();
  }

  /// Tiles of all groups (the queue's length).
  __device__ __forceinline__ int total() const { return tile_start[G]; }
};

/// One tile of the queue: group g, its tile row m_blk (rows m_blk x BM.. of the group) and tile
/// column n_blk; the group's valid rows M_g and its first row in A's and C's maps (general: 0, the
/// group's own maps). General only (GeneralCursor; the caller fills them for the other kinds): the
/// group's N_g, its K tiles ceil(K_g / 64) and C_g's element offset in C.
struct GroupTile {
  int g, m_blk, n_blk, rows, first_row;
  int n, k_tiles;
  long long c_off;
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
    GroupTile out;
    out.g = g;
    band_tile<GROUP_M>(local, tiles_m, tiles_n, out.m_blk, out.n_blk);
    out.rows = q.rows[g];
    if (first_g != g) first_row = q.first_row(g), first_g = g;  // one read per group entered
    out.first_row = first_row;
    return out;
  }
};

/// The general kind's queue (issue 44: G independent (M_g, N_g, K_g), gemmlab/contract/grouped.py):
/// 3 G + 1 ints at `words`: tile_start[0..G], rows[0..G-1] (M_g), cols[0..G-1] (N_g); group g has
/// ceil(M_g / BM) x ceil(N_g / BN) tiles (none when M_g = 0). K_g and C_g's element offset are
/// read from the device arrays when a cursor enters the group.
struct GeneralTiles {
  int *tile_start, *rows, *cols;
  const int *group_dims;
  const long long *group_offsets;
  int G;

  __device__ GeneralTiles(int *words, int G_, const int *group_dims_, const long long *group_offsets_)
      : tile_start(words), rows(words + G_ + 1), cols(words + 2 * G_ + 1), group_dims(group_dims_),
        group_offsets(group_offsets_), G(G_) {}

  /// Every thread of the block calls this once (two __syncthreads): all threads load group_dims
  /// (M_g clamped at 0, N_g at 1), warp 0 scans the tile counts.
  template <int BM, int BN>
  __device__ __forceinline__ void build() {
    for (int g = threadIdx.x; g < G; g += blockDim.x) {
      rows[g] = max(0, __ldg(group_dims + 3 * g));
      cols[g] = max(1, __ldg(group_dims + 3 * g + 1));
    }
    __syncthreads();
    const int *r = rows, *c = cols;
    scan_tile_counts(tile_start, G, [=](int g) { return (r[g] + BM - 1) / BM * ((c[g] + BN - 1) / BN); });
    __syncthreads();
  }

  /// Tiles of all groups (the queue's length).
  __device__ __forceinline__ int total() const { return tile_start[G]; }
};

/// GroupCursor for the general kind: the group's own tile columns ceil(N_g / BN); first_row 0
/// (A_g's and C_g's rows start at 0 in the group's own maps); n, k_tiles (of 64) and c_off set.
struct GeneralCursor {
  int g = 0, entered = -1, k_tiles = 0;
  long long c_off = 0;

  template <int GROUP_M, int BN>
  __device__ __forceinline__ GroupTile seek(const GeneralTiles &q, int t) {
    while (q.tile_start[g + 1] <= t) g++;
    const int tiles_n = (q.cols[g] + BN - 1) / BN;
    const int local = t - q.tile_start[g];
    const int tiles_m = (q.tile_start[g + 1] - q.tile_start[g]) / tiles_n;
    GroupTile out;
    out.g = g;
    band_tile<GROUP_M>(local, tiles_m, tiles_n, out.m_blk, out.n_blk);
    out.rows = q.rows[g];
    out.first_row = 0;
    out.n = q.cols[g];
    if (entered != g) {  // one read of K_g and C_g's offset per group entered
      k_tiles = (max(1, __ldg(q.group_dims + 3 * g + 2)) + 63) / 64;
      c_off = __ldg(q.group_offsets + 3 * g + 2);
      entered = g;
    }
    out.k_tiles = k_tiles;
    out.c_off = c_off;
    return out;
  }
};

}  // namespace gemmlab
