// gemmlab built-in kernel "wgmma_grouped" (issue 44, item 3): persistent, warp-specialised Hopper
// grouped GEMM in BF16 (sm_90a) for mixture-of-experts layers, kinds contiguous, masked and general
// (gemmlab/contract/grouped.py).
//
// C_g (M_g x N, float32) = A_g (M_g x K, bf16, row-major) @ B_g (bf16; B_MN_MAJOR = 0: stored N x K,
// nn.Linear's weight, K-major; 1: stored K x N, row-major, wgmma's transposed-B mode), g = 0..G-1.
// contiguous: A is R x K, group g's M_g = group_m[g] rows from row group_offsets[g] (each group
// padded to the contract's alignment; R = group_offsets[G]); C R x N with the same rows.
// masked: A is G x M_max x K, group g's first group_m[g] rows of its slot valid; C G x M_max x N.
// B is G x N x K (or G x K x N) for both kinds. Rows past M_g (padding / masked rows) are never
// written: the contract requires them untouched.
//
// One launch, one tile queue over all groups (gemmlab/grouped.cuh): each CTA builds, from the
// device's group arrays, every group's tile count ceil(M_g / BM) x ceil(N / BN) and their prefix sum
// in shared memory (the M_g are known only on the device), then takes tiles blockIdx.x,
// blockIdx.x + gridDim.x, ... of the queue; a tile index maps to (group, tile row, tile column) by a
// forward-only cursor over the prefix sum. An empty group (M_g = 0) has no tiles: it costs its
// prefix-sum entry and nothing else. Inside a group the tiles go GROUP_M tile rows at a time, the
// row fastest (the group's B panel is shared by the concurrent CTAs in L2).
//
// TMA, one descriptor per operand for all groups: A a 2-D map over the whole stored A (box BM x 64),
// the tile's rows at first_row(g) + m_blk x BM; B a per-group 3-D map (dims K, N, G for the N x K
// experts, box 64 x BN x 1; row-major: N, K, G, boxes 64 x 64 x 1), so a box at the end of one
// expert's K or N is zero-filled, never the next expert's. A tile's last rows may read padding rows
// (NaN in the contract's inputs) or the next group's rows: they only reach accumulator rows past M_g,
// which are not stored (each output row depends on its own A row only).
//
// general (G independent (M_g, N_g, K_g), each matrix packed at its own element offset): every
// operand has one 2-D map per group (A_g M_g x K_g, B_g N_g x K_g or K_g x N_g, C_g M_g x N_g),
// built on the host once per point and copied to global memory (the kernel gets pointers to the
// G maps of each); a thread fences a group's map (fence.proxy.tensormap::generic.acquire) before its
// first TMA through it. The queue (GeneralTiles) takes each group's own tile columns
// ceil(N_g / BN) from group_dims, each tile its group's K tiles ceil(K_g / 64); a box past M_g or K_g
// reads zeros from the group's own map; C_g's rows start at its element offset (registers) or row 0
// of its map (TMA store).
//
// Block: 3 warpgroups (384 threads), as kernels/wgmma_bf16.cu's cooperative schedule: warpgroup 0
// the producer (setmaxnreg.dec 40; one thread issues every TMA load), warpgroups 1 and 2 consumers
// (setmaxnreg.inc 232), each BM/2 rows of the BM x BN tile (MI = BM/128 m64 blocks), wgmma
// m64nBNk16 from shared memory, float32 accumulators in registers. Ring: STAGES stages of
// (A BM x 64, B BN x 64) bf16 = 128-byte swizzle rows, a "full" mbarrier (producer arrive_expect_tx
// + TMA complete_tx) and an "empty" one (one arrival per consumer warp) per stage; the producer waits
// on "empty" with the opposite parity (a fresh barrier's previous phase counts as complete).
//
// Epilogue (EPI): 0 registers straight to C (float2 where N is even), rows < M_g and columns < N only;
// 1 per warp and 16 x 32 box: where the warp's 16 rows all lie inside M_g, the box is staged in
// shared memory (gemmlab/epilogue.cuh, two 2 KiB buffers per warp) and TMA-stored through a 2-D map of
// C (clipped at N by the map), else (the group's last, partial 16-row band) from registers with the
// row mask; needs N % 4 == 0 (C's row stride a multiple of 16 bytes: the plugin picks 0 otherwise).
// Accumulator layout of m64nN: warp w of the warpgroup owns rows 16w..16w+15;
//   d[4j + 2h + v] = D(16w + g + 8h, 8j + 2t + v), g = lane / 4, t = lane % 4.
#include "gemmlab/ptx.cuh"
#include "gemmlab/wgmma.cuh"
#include "gemmlab/grouped.cuh"
#include "gemmlab/epilogue.cuh"

/// Dynamic shared memory of the kernel, bytes (plugins/wgmma_grouped.py shared_bytes): 1024 of
/// alignment slack, the ring, the epilogue's staging (EPI 1: 8 warps x 2 x 2 KiB), the tile queue.
template <int BM, int BN, int STAGES, int EPI>
__host__ __device__ constexpr unsigned grouped_ring_bytes() {
  return STAGES * (BM + BN) * 128u + (EPI == 1 ? 8u * 2u * 2048u : 0u);
}

/// The queue of the kind: GroupTiles over group_offsets (contiguous) or g x M_max (masked: null
/// offsets), GeneralTiles over group_dims and the element offsets (general).
template <bool GENERAL>
__device__ __forceinline__ auto make_queue(int *words, int G, const int *group_offsets, int M_max,
                                           const int *group_dims, const long long *element_offsets) {
  if constexpr (GENERAL) return gemmlab::GeneralTiles(words, G, group_dims, element_offsets);
  else return gemmlab::GroupTiles(words, G, group_offsets, M_max);
}

/// The kernel body; `group_offsets` null for the masked kind (first rows g x M_max). GENERAL (the
/// general kind): tensor_a, tensor_b, tensor_c point at G per-group maps in global memory (map g
/// over A_g, B_g, C_g; each thread fences a map before its first TMA through it), the queue comes
/// from group_dims, each tile has its group's N_g and K_g, C_g starts at element_offsets[3g + 2];
/// N and K are unused.
template <int BM, int BN, int STAGES, int B_MN_MAJOR, int GROUP_M, int EPI, bool GENERAL = false>
__device__ __forceinline__ void wgmma_grouped(const CUtensorMap *tensor_a, const CUtensorMap *tensor_b,
                                              const CUtensorMap *tensor_c, float *C, const int *group_offsets,
                                              const int *group_m, int G, int M_max, int N, int K,
                                              const int *group_dims = nullptr,
                                              const long long *element_offsets = nullptr) {
  constexpr int BK = 64;               // bf16 of K per stage: one 128-byte swizzle row
  constexpr int KSTEP = 16;            // K per wgmma
  constexpr int WM = BM / 2;           // rows per consumer warpgroup
  constexpr int MI = WM / 64;          // m64 blocks per consumer warpgroup
  constexpr unsigned A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
  constexpr int B_BOXES = B_MN_MAJOR ? BN / 64 : 1;  // TMA boxes per B tile
  constexpr unsigned B_BOX_BYTES = B_BYTES / B_BOXES;
  constexpr unsigned EPI_BUF = 16 * 128;             // one staging buffer: 16 rows x 32 floats
  static_assert(BM == 128 || BM == 256, "BM is 128 or 256 (whole m64 blocks per consumer warpgroup)");
  static_assert(BN == 64 || BN == 128 || BN == 256, "BN is 64, 128 or 256 (wgmma n)");
  static_assert(MI * (BN / 2) <= 128, "at most 128 accumulators per consumer thread");
  static_assert(EPI == 0 || EPI == 1, "EPI 0 (registers) or 1 (TMA store of whole 16-row boxes)");
  static_assert(GROUP_M >= 1, "GROUP_M >= 1");

  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  const unsigned raw = gemmlab::smem_u32(smem_raw);
  unsigned char *ring = smem_raw + ((1024u - (raw & 1023u)) & 1023u);  // 128-byte swizzle atoms: 1024-aligned
  unsigned char *const epi_stage = ring + STAGES * STAGE_BYTES;
  auto queue = make_queue<GENERAL>(reinterpret_cast<int *>(ring + grouped_ring_bytes<BM, BN, STAGES, EPI>()), G,
                                   group_offsets, M_max, group_dims, element_offsets);
  using Cursor = typename gemmlab::Pick<GENERAL, gemmlab::GeneralCursor, gemmlab::GroupCursor>::type;

  const int tid = threadIdx.x;
  const int tiles_n = (N + BN - 1) / BN;
  const int k_tiles = (K + BK - 1) / BK;

  if (tid == 0) {
    if constexpr (!GENERAL) {  // the general kind's per-group maps: fenced when a thread first uses one
      gemmlab::prefetch_tensormap(tensor_a);
      gemmlab::prefetch_tensormap(tensor_b);
      if constexpr (EPI == 1) gemmlab::prefetch_tensormap(tensor_c);
    }
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
      gemmlab::mbarrier_init(&full[s], 1);
      gemmlab::mbarrier_init(&empty[s], 8);  // the 8 consumer warps read each stage
    }
    gemmlab::fence_barrier_init();
  }
  if constexpr (GENERAL) queue.template build<BM, BN>();  // two __syncthreads: the barriers exist too
  else queue.template build<BM>(group_m, tiles_n);
  const int total = queue.total();
  // the tile's group figures the general kind's cursor reads; the other kinds' are the launch's
  auto seek = [&](Cursor &cursor, int t) {
    gemmlab::GroupTile tile;
    if constexpr (GENERAL) {
      tile = cursor.template seek<GROUP_M, BN>(queue, t);
    } else {
      tile = cursor.template seek<GROUP_M>(queue, t, tiles_n);
      tile.n = N;
      tile.k_tiles = k_tiles;
      tile.c_off = (long long)tile.first_row * N;
    }
    return tile;
  };

  const int warpgroup = tid / 128;
  if (warpgroup == 0) {
    gemmlab::setmaxnreg_dec<40>();
    if (tid == 0) {
      int it = 0, fenced = -1;
      Cursor cursor;
      for (int t = blockIdx.x; t < total; t += gridDim.x) {
        const gemmlab::GroupTile tile = seek(cursor, t);
        const int a_row = tile.first_row + tile.m_blk * BM, n0 = tile.n_blk * BN;
        const CUtensorMap *map_a = GENERAL ? tensor_a + tile.g : tensor_a;
        const CUtensorMap *map_b = GENERAL ? tensor_b + tile.g : tensor_b;
        if (GENERAL && fenced != tile.g) {  // the group's maps, copied by the host: fence before first use
          gemmlab::acquire_tensormap(map_a);
          gemmlab::acquire_tensormap(map_b);
          fenced = tile.g;
        }
        for (int kt = 0; kt < tile.k_tiles; kt++, it++) {
          const int s = it % STAGES;
          gemmlab::mbarrier_try_wait_parity(&empty[s], ((it / STAGES) & 1) ^ 1);
          unsigned char *slot = ring + s * STAGE_BYTES;
          gemmlab::mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);
          gemmlab::tma_load_2d(slot, map_a, kt * BK, a_row, &full[s]);
#pragma unroll
          for (int box = 0; box < B_BOXES; box++) {
            unsigned char *dst = slot + A_BYTES + box * B_BOX_BYTES;
            if constexpr (GENERAL) {  // B_g's own 2-D map: (N_g, K_g) or, MN-major, (K_g, N_g)
              if constexpr (B_MN_MAJOR) gemmlab::tma_load_2d(dst, map_b, n0 + box * 64, kt * BK, &full[s]);
              else gemmlab::tma_load_2d(dst, map_b, kt * BK, n0, &full[s]);
            } else {
              if constexpr (B_MN_MAJOR) gemmlab::tma_load_3d(dst, map_b, n0 + box * 64, kt * BK, tile.g, &full[s]);
              else gemmlab::tma_load_3d(dst, map_b, kt * BK, n0, tile.g, &full[s]);
            }
          }
        }
      }
    }
  } else {
    gemmlab::setmaxnreg_inc<232>();
    const int wg = warpgroup - 1, warp = (tid / 32) % 4, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    unsigned char *const my_stage = epi_stage + (wg * 4 + warp) * 2 * EPI_BUF;
    float d[MI][BN / 2];
    int it = 0, epi_chunk = 0, fenced = -1;
    Cursor cursor;
    for (int t = blockIdx.x; t < total; t += gridDim.x) {
      const gemmlab::GroupTile tile = seek(cursor, t);
      const int m0 = tile.m_blk * BM, n0 = tile.n_blk * BN, n_cols = tile.n;
      const CUtensorMap *map_c = GENERAL ? tensor_c + tile.g : tensor_c;
      if (GENERAL && EPI == 1 && lane == 0 && fenced != tile.g) {  // lane 0 stores through C_g's map
        gemmlab::acquire_tensormap(map_c);
        fenced = tile.g;
      }
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int i = 0; i < BN / 2; i++) d[mi][i] = 0.0f;
      for (int kt = 0; kt < tile.k_tiles; kt++, it++) {
        const int s = it % STAGES;
        gemmlab::mbarrier_try_wait_parity(&full[s], (it / STAGES) & 1);
        unsigned char *slot = ring + s * STAGE_BYTES;
        gemmlab::wgmma_fence_operands(d);
        gemmlab::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; kk++) {
          const unsigned long long db =
              B_MN_MAJOR ? gemmlab::wgmma_desc_128b(slot + A_BYTES + kk * KSTEP * 128, BK * 128, 1024)
                         : gemmlab::wgmma_desc_128b(slot + A_BYTES + kk * 32, 16, 1024);
#pragma unroll
          for (int mi = 0; mi < MI; mi++) {
            const unsigned long long da = gemmlab::wgmma_desc_128b(slot + (wg * WM + mi * 64) * 128 + kk * 32, 16, 1024);
            gemmlab::wgmma_bf16<B_MN_MAJOR>(d[mi], da, db);
          }
        }
        gemmlab::wgmma_commit();
        gemmlab::wgmma_wait<1>();
        gemmlab::wgmma_fence_operands(d);
        if (kt > 0 && lane == 0) gemmlab::mbarrier_arrive(&empty[(it - 1) % STAGES]);
      }
      gemmlab::wgmma_wait<0>();
      gemmlab::wgmma_fence_operands(d);
      if (tile.k_tiles > 0 && lane == 0) gemmlab::mbarrier_arrive(&empty[(it - 1) % STAGES]);

      // epilogue: rows m0 + r of the group (r < BM) exist where m0 + r < M_g; row first_row + m0 + r of
      // C's map, element c_off + (m0 + r) x N of C (the group's N_g for the general kind)
      const bool full_n = n0 + BN <= n_cols && (n_cols % 2) == 0;
#pragma unroll
      for (int mi = 0; mi < MI; mi++) {
        const int band = m0 + wg * WM + mi * 64 + warp * 16;  // this warp's first row in the group
        if (band >= tile.rows) continue;                      // all 16 rows past M_g: nothing to store
        const int grow0 = tile.first_row + band;  // the band's first row in C's map
        if (EPI == 1 && band + 16 <= tile.rows) {
          // whole 16-row band inside M_g: TMA-store boxes of 16 x 32 (clipped at N by the map of C)
#pragma unroll
          for (int cc = 0; cc < BN / 32; cc++, epi_chunk++) {
            unsigned char *buf = my_stage + (epi_chunk & 1) * EPI_BUF;
            if (lane == 0) gemmlab::bulk_wait_group_read<1>();  // the buffer's previous box has been read
            __syncwarp();
            gemmlab::stage_box_128b(gemmlab::smem_u32(buf), d[mi], cc, g, t4);
            gemmlab::fence_proxy_async();
            __syncwarp();
            if (lane == 0 && n0 + 32 * cc < n_cols) {
              gemmlab::tma_store_2d(map_c, buf, n0 + 32 * cc, grow0);
            }
            if (lane == 0) gemmlab::bulk_commit_group();
          }
          continue;
        }
        // registers, masked at M_g and N
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int r = band + g + 8 * h;
          if (r >= tile.rows) continue;
          float *row = C + tile.c_off + (long long)r * n_cols;
#pragma unroll
          for (int j = 0; j < BN / 8; j++) {
            const int col = n0 + j * 8 + 2 * t4;
            const float v0 = d[mi][4 * j + 2 * h], v1 = d[mi][4 * j + 2 * h + 1];
            if (full_n) {
              *reinterpret_cast<float2 *>(row + col) = make_float2(v0, v1);
            } else if ((n_cols % 2) == 0 && col + 1 < n_cols) {
              *reinterpret_cast<float2 *>(row + col) = make_float2(v0, v1);
            } else {
              if (col < n_cols) row[col] = v0;
              if (col + 1 < n_cols) row[col + 1] = v1;
            }
          }
        }
      }
    }
    if constexpr (EPI == 1) {
      if (lane == 0) gemmlab::bulk_wait_group<0>();  // each warp's last stores done before the CTA leaves
    }
  }
}

/// Contiguous kind: tensor maps of A (2-D, BM x 64 boxes), B (per group, 3-D) and C (2-D, 16 x 32
/// float32 boxes; unused with EPI 0), C, group_offsets (G + 1), group_m (G), G, N, K.
template <int BM, int BN, int STAGES, int B_MN_MAJOR, int GROUP_M, int EPI>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_grouped_contiguous(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
                              const __grid_constant__ CUtensorMap tensor_c, float *C, const int *group_offsets,
                              const int *group_m, int G, int N, int K) {
  wgmma_grouped<BM, BN, STAGES, B_MN_MAJOR, GROUP_M, EPI>(&tensor_a, &tensor_b, &tensor_c, C, group_offsets, group_m,
                                                          G, 0, N, K);
}

/// Masked kind: tensor maps of A, B, C as above (A and C over G x M_max rows), C, group_m (G), G,
/// M_max, N, K.
template <int BM, int BN, int STAGES, int B_MN_MAJOR, int GROUP_M, int EPI>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_grouped_masked(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
                          const __grid_constant__ CUtensorMap tensor_c, float *C, const int *group_m, int G, int M_max,
                          int N, int K) {
  wgmma_grouped<BM, BN, STAGES, B_MN_MAJOR, GROUP_M, EPI>(&tensor_a, &tensor_b, &tensor_c, C, nullptr, group_m, G,
                                                          M_max, N, K);
}

/// General kind (issue 44: G independent (M_g, N_g, K_g), gemmlab/contract/grouped.py): per-group
/// tensor maps of A_g (BM x 64 boxes), B_g (BN x 64, or 64 x 64 MN-major) and C_g (16 x 32 float32
/// boxes; with EPI 0 A's maps again in its place, never read), G of each in global memory (built on
/// the host once per point, group g at index g), C, group_dims (G x 3: M_g, N_g, K_g), the int64
/// element offsets of A_g, B_g, C_g (G x 3), G.
template <int BM, int BN, int STAGES, int B_MN_MAJOR, int GROUP_M, int EPI>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_grouped_general(const CUtensorMap *maps_a, const CUtensorMap *maps_b, const CUtensorMap *maps_c, float *C,
                           const int *group_dims, const long long *group_offsets, int G) {
  wgmma_grouped<BM, BN, STAGES, B_MN_MAJOR, GROUP_M, EPI, true>(maps_a, maps_b, maps_c, C, nullptr, nullptr, G, 0, 0, 0,
                                                                group_dims, group_offsets);
}
