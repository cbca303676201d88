// gemmlab built-in kernel "wgmma_fp8" (issue 42, item 4): warp-specialised, persistent Hopper FP8
// GEMM (sm_90a) with promoted accumulation and the scales applied by the kernel.
//
// C (M x N, row-major float32 or bf16) = (A_q * A_scale) (M x K, row-major, FP8) @ (B_q * B_scale)
// (K x N, stored column-major: N x K, K contiguous, FP8); FA / FB: 0 = E4M3, 1 = E5M2 per operand.
// Both operands K-major (FP8 wgmma has no transpose mode). Scale layouts: gemmlab.contract.hookspecs
// Problem (SCALING 0 tensor: one float each; 1 row: A_scale[m], B_scale[n]; 2 block: A_scale[kb * M + m]
// per 1 x 128 group, B_scale[(n / 128) * L4 + kb] per 128 x 128 block, L4 = ceil(ceil(K/128) / 4) * 4).
//
// Block: 3 warpgroups (384 threads), as kernels/wgmma_bf16.cu's cooperative schedule. Warpgroup 0
// is the producer (setmaxnreg.dec to 40; one thread issues every TMA load), warpgroups 1 and 2 are
// consumers (setmaxnreg.inc to 232). BM = 128 / 256: each consumer owns BM/2 rows (MI = BM/128 m64
// blocks) and all BN columns of the BM x BN tile; BM = 64 (small M, issue 42 item 4): both consumers
// share the 64 rows and each owns BN/2 columns (WN = BN/2, one m64nWNk32 per k-step; its B operand
// starts WN rows into the stage's B box), so a tile wastes at most 63 zero rows instead of 127. Ring: STAGES stages of (A BM x 128, B BN x 128) bytes = 128 elements of K, each loaded by
// two TMA boxes with the 128-byte swizzle, a "full" mbarrier (producer arrive_expect_tx + TMA
// complete_tx) and an "empty" one (one arrival per consumer warp); the producer waits for "empty"
// with the opposite parity (a fresh barrier's previous phase counts as complete).
// Persistent: at most one CTA per SM; CTA b takes tiles b, b + #CTAs, ..., ordered in groups of
// GROUP_M tile rows (the row index fastest inside a group) so concurrent CTAs share panels in L2.
//
// Promotion (the FP8 tensor core keeps ~14 bits in its accumulator: DeepSeek-V3 report, 3.3.2; the
// fix described there): every stage (128 of K = 4 wgmma m64nBNk32 k-steps) is accumulated in a
// register partial sum T (the first k-step with scale-d = 0, so T starts fresh), the warpgroup waits
// for it (wgmma.wait_group) and adds it into the float32 accumulator on the CUDA cores:
// acc += T (tensor, row scaling) or acc = fma(T, A_scale[kb, m] * B_scale[n / 128, kb], acc) (block
// scaling: the scales of 128-group kb are applied at its promotion). So the declared accumulation is
// fp8_accumulation = 128 (the plugin). OVERLAP = 1: two partial-sum banks T0, T1; stage kt + 1's
// wgmma group is issued into the other bank before stage kt's is awaited (wait_group 1), so the
// tensor cores work while the CUDA cores promote; OVERLAP = 0: one bank, wait_group 0 every stage.
// Epilogue: tensor scaling multiplies by A_scale[0] * B_scale[0], row scaling by A_scale[m] *
// B_scale[n], block none (applied already); stores from registers (float2 / bf16x2 where N is even,
// masked at the edges). Edges: TMA zero-fills box elements outside M, N, K (their bytes still count),
// so a partial k-group (K not a multiple of 128) adds zeros; rows >= M and columns >= N are not stored.
// Accumulator layout of m64nN: warp w of the warpgroup owns rows 16w..16w+15;
//   d[4j + 2h + v] = D(16w + g + 8h, 8j + 2t + v), g = lane / 4, t = lane % 4.
#include <cuda_bf16.h>
#include "gemmlab/ptx.cuh"

// Test-only mutant (tests/plugins_fp8_mutant, -D WGMMA_FP8_NO_PROMOTION=1; OVERLAP=0, tensor or row
// scaling): the partial sum is never promoted; all of K accumulates in the tensor core's
// accumulator, while the plugin still declares promotion every 128. The fp8 bound must catch it at
// large K. 0 (the default): the shipped kernel.
#ifndef WGMMA_FP8_NO_PROMOTION
#define WGMMA_FP8_NO_PROMOTION 0
#endif
#include "gemmlab/wgmma.cuh"
#include "gemmlab/wgmma_fp8.cuh"

/// Rows of one A or B stage row: 128 bytes = 128 FP8 elements of K = one 128-byte swizzle row = one
/// block-scaling group (hookspecs.SCALE_BLOCK).
constexpr int FP8_BK = 128;

/// One stage's wgmma group into the partial-sum bank `t` (MI m64 blocks x WN columns): 4 k-steps of
/// 32, the first with scale-d = 0 where `fresh` (a new partial sum; the test-only mutant passes false
/// after its tile's first stage); `slot` the stage's shared memory (A BM x 128 bytes, then B BN x 128),
/// `a_row0` this warpgroup's first row of the A tile, `b_bytes` the offset of its first B row (A's
/// bytes + the warpgroup's first column x 128; a multiple of 1024, the swizzle atom). Commits the
/// group; does not wait.
template <int FA, int FB, int MI, int WN>
__device__ __forceinline__ void fp8_stage_mma(float (&t)[MI][WN / 2], const unsigned char *slot, int a_row0,
                                              int b_bytes, bool fresh = true) {
  gemmlab::wgmma_fence_operands(t);
  gemmlab::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < FP8_BK / 32; kk++) {
    const unsigned long long db = gemmlab::wgmma_desc_128b(slot + b_bytes + kk * 32, 16, 1024);
#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
      const unsigned long long da = gemmlab::wgmma_desc_128b(slot + (a_row0 + mi * 64) * 128 + kk * 32, 16, 1024);
      gemmlab::wgmma_fp8<FA, FB>(t[mi], da, db, kk > 0 || !fresh ? 1 : 0);
    }
  }
  gemmlab::wgmma_commit();
}

/// The block-scaling factors of k-group `kb` for this thread's accumulators: sa[mi][h] = A_scale of
/// row (row0 + 64 mi + 8 h) (0 outside M), sb[c] = B_scale of the 128-column block of tile column
/// block c (c = 0: the block holding column n0, this warpgroup's first, c = 1: the next; its WN <= 192
/// columns span at most two). GUARD_N0 (BM = 64): n0 may lie past N (the second consumer of a tile
/// narrower than BN/2), so B's first scale is read only inside the last block.
template <int MI, bool GUARD_N0>
__device__ __forceinline__ void fp8_block_scales(float (&sa)[MI][2], float (&sb)[2], const float *__restrict__ A_scale,
                                                 const float *__restrict__ B_scale, int kb, int row0, int n0, int M,
                                                 int nblocks, int L4) {
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = row0 + 64 * mi + 8 * h;
      sa[mi][h] = row < M ? __ldg(A_scale + (long long)kb * M + row) : 0.0f;
    }
  const int nb = n0 / 128;
  sb[0] = !GUARD_N0 || nb < nblocks ? __ldg(B_scale + (long long)nb * L4 + kb) : 0.0f;
  sb[1] = nb + 1 < nblocks ? __ldg(B_scale + (long long)(nb + 1) * L4 + kb) : 0.0f;
}

/// Promote the partial sums `t` into `acc`: acc += t (SCALING 0, 1) or acc = fma(t, sa * sb, acc)
/// with sb the B scale of the column's 128-block (SCALING 2). `n_off` = n0 % 128 (tile column 0's
/// offset inside its 128-block): column 8 j + 2 t + v of the tile is in block c = (n_off + col) / 128.
template <int MI, int BN, int SCALING>  // BN: the warpgroup's columns (WN)
__device__ __forceinline__ void fp8_promote(float (&acc)[MI][BN / 2], const float (&t)[MI][BN / 2],
                                            const float (&sa)[MI][2], const float (&sb)[2], int n_off, int tq) {
#pragma unroll
  for (int mi = 0; mi < MI; mi++) {
    if constexpr (SCALING == 2) {
      const float s00 = sa[mi][0] * sb[0], s10 = sa[mi][1] * sb[0];
      const float s01 = sa[mi][0] * sb[1], s11 = sa[mi][1] * sb[1];
#pragma unroll
      for (int j = 0; j < BN / 8; j++) {
        // both columns 8j + 2tq + {0, 1} lie in one 128-block (pairs start even, blocks are 128-aligned)
        const bool second = n_off + 8 * j + 2 * tq >= 128;
        const float lo = second ? s01 : s00, hi = second ? s11 : s10;  // rows g (h = 0) and g + 8 (h = 1)
        acc[mi][4 * j + 0] = fmaf(t[mi][4 * j + 0], lo, acc[mi][4 * j + 0]);
        acc[mi][4 * j + 1] = fmaf(t[mi][4 * j + 1], lo, acc[mi][4 * j + 1]);
        acc[mi][4 * j + 2] = fmaf(t[mi][4 * j + 2], hi, acc[mi][4 * j + 2]);
        acc[mi][4 * j + 3] = fmaf(t[mi][4 * j + 3], hi, acc[mi][4 * j + 3]);
      }
    } else {
#pragma unroll
      for (int i = 0; i < BN / 2; i++) acc[mi][i] += t[mi][i];
    }
  }
}

/// The persistent FP8 GEMM (header comment). Arguments: TMA maps of A (boxes BM x 128 bytes) and B
/// (BN x 128), the scale buffers, C (float* or __nv_bfloat16* by OUT_BF16), M, N, K.
template <int FA, int FB, int BM, int BN, int STAGES, int GROUP_M, int SCALING, int OUT_BF16, int OVERLAP>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_fp8(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
               const float *__restrict__ A_scale, const float *__restrict__ B_scale, void *C, int M, int N, int K) {
  constexpr bool SPLIT_N = BM == 64;             // the two consumers split the columns, not the rows
  constexpr int WM = SPLIT_N ? 64 : BM / 2;      // rows per consumer warpgroup
  constexpr int WN = SPLIT_N ? BN / 2 : BN;      // columns per consumer warpgroup (its wgmma n)
  constexpr int MI = WM / 64;
  constexpr unsigned A_BYTES = BM * FP8_BK, B_BYTES = BN * FP8_BK, STAGE_BYTES = A_BYTES + B_BYTES;
  static_assert(BM == 64 || BM == 128 || BM == 256, "BM is 64 (column split), 128 or 256 (whole m64 blocks per consumer)");
  static_assert(SPLIT_N ? (BN == 128 || BN == 192 || BN == 256) : (BN % 32 == 0 && BN >= 64 && BN <= 192),
                "BN: 64..192, a multiple of 32 (BM 128, 256); 128, 192 or 256 (BM 64: WN = BN/2 a wgmma n of gemmlab/wgmma_fp8.cuh)");
  static_assert(SCALING >= 0 && SCALING <= 2 && (OUT_BF16 == 0 || OUT_BF16 == 1) && (OVERLAP == 0 || OVERLAP == 1),
                "SCALING 0..2, OUT_BF16 0/1, OVERLAP 0/1");
  static_assert(MI * WN * (2 + OVERLAP) / 2 <= 192, "accumulator + partial-sum registers per consumer thread <= 192");
  static_assert(!WGMMA_FP8_NO_PROMOTION || (OVERLAP == 0 && SCALING != 2), "the no-promotion mutant: OVERLAP=0, tensor or row scaling");

  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  const unsigned raw = gemmlab::smem_u32(smem_raw);
  unsigned char *ring = smem_raw + ((1024u - (raw & 1023u)) & 1023u);  // 128-byte swizzle atoms: 1024-aligned

  const int tid = threadIdx.x;
  const int num_m = (M + BM - 1) / BM, num_n = (N + BN - 1) / BN;
  const int tiles = num_m * num_n;
  const int k_tiles = (K + FP8_BK - 1) / FP8_BK;

  if (tid == 0) {
    gemmlab::prefetch_tensormap(&tensor_a);
    gemmlab::prefetch_tensormap(&tensor_b);
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
      gemmlab::mbarrier_init(&full[s], 1);
      gemmlab::mbarrier_init(&empty[s], 8);  // the 8 consumer warps read each stage
    }
    gemmlab::fence_barrier_init();
  }
  __syncthreads();

  // tile -> (row block, column block): GROUP_M row blocks per group, the row index fastest
  auto tile_of = [&](int tile, int &m_blk, int &n_blk) {
    const int per_group = GROUP_M * num_n;
    const int group = tile / per_group, first = group * GROUP_M;
    const int rows = min(num_m - first, GROUP_M);
    const int in_group = tile - group * per_group;
    m_blk = first + in_group % rows;
    n_blk = in_group / rows;
  };

  const int warpgroup = tid / 128;
  if (warpgroup == 0) {
    gemmlab::setmaxnreg_dec<40>();
    if (tid == 0) {
      int it = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int m_blk, n_blk;
        tile_of(tile, m_blk, n_blk);
        for (int kt = 0; kt < k_tiles; kt++, it++) {
          const int s = it % STAGES;
          gemmlab::mbarrier_try_wait_parity(&empty[s], ((it / STAGES) & 1) ^ 1);
          unsigned char *slot = ring + s * STAGE_BYTES;
          gemmlab::mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);
          gemmlab::tma_load_2d(slot, &tensor_a, kt * FP8_BK, m_blk * BM, &full[s]);
          gemmlab::tma_load_2d(slot + A_BYTES, &tensor_b, kt * FP8_BK, n_blk * BN, &full[s]);
        }
      }
    }
  } else {
    gemmlab::setmaxnreg_inc<232>();
    const int wg = warpgroup - 1, warp = (tid / 32) % 4, lane = tid % 32, g = lane / 4, tq = lane % 4;
    const int nblocks = (N + 127) / 128, L4 = ((k_tiles + 3) / 4) * 4;
    float tensor_scale = 1.0f;
    if constexpr (SCALING == 0) tensor_scale = __ldg(A_scale) * __ldg(B_scale);
    float acc[MI][WN / 2], t0[MI][WN / 2];
    float t1[OVERLAP ? MI : 1][OVERLAP ? WN / 2 : 1];
    float sa0[MI][2], sb0[2], sa1[MI][2], sb1[2];
    int it = 0;
    auto release = [&](int s) {
      if (lane == 0) gemmlab::mbarrier_arrive(&empty[s]);
    };
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int m_blk, n_blk;
      tile_of(tile, m_blk, n_blk);
      const int a_row0 = SPLIT_N ? 0 : wg * WM, b_col0 = SPLIT_N ? wg * WN : 0;  // this warpgroup's part
      const int m0 = m_blk * BM, n0 = n_blk * BN + b_col0;  // n0: this warpgroup's first column
      const int row0 = m0 + a_row0 + warp * 16 + g;  // this thread's first row (then + 8 h + 64 mi)
      const int n_off = n0 % 128;
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int i = 0; i < WN / 2; i++) acc[mi][i] = 0.0f;
      // stage kt of this tile: its ring slot after the full wait (scales fetched first: their load
      // latency hides behind the wait and the wgmma group)
      auto issue = [&](auto &t, auto &sa, auto &sb, int kt, bool fresh = true) {
        if constexpr (SCALING == 2) fp8_block_scales<MI, SPLIT_N>(sa, sb, A_scale, B_scale, kt, row0, n0, M, nblocks, L4);
        const int s = (it + kt) % STAGES;
        gemmlab::mbarrier_try_wait_parity(&full[s], ((it + kt) / STAGES) & 1);
        fp8_stage_mma<FA, FB, MI, WN>(t, ring + s * STAGE_BYTES, a_row0, A_BYTES + b_col0 * FP8_BK, fresh);
      };
      if constexpr (OVERLAP) {
        // bank 0 holds stage kt (in flight) at the top of each pass; stage kt + 1 goes into bank 1
        // before kt is awaited (wait_group 1), then kt + 2 into bank 0 before kt + 1 is awaited.
        // Branch-free passes (the last one or two stages after the loop): ptxas tracks the banks'
        // groups exactly only then (a conditional wait_group inside the loop serialized every wgmma)
        issue(t0, sa0, sb0, 0);
        int kt = 0;
        for (; kt + 2 < k_tiles; kt += 2) {
          issue(t1, sa1, sb1, kt + 1);
          gemmlab::wgmma_wait<1>();
          gemmlab::wgmma_fence_operands(t0);
          release((it + kt) % STAGES);
          fp8_promote<MI, WN, SCALING>(acc, t0, sa0, sb0, n_off, tq);
          issue(t0, sa0, sb0, kt + 2);
          gemmlab::wgmma_wait<1>();
          gemmlab::wgmma_fence_operands(t1);
          release((it + kt + 1) % STAGES);
          fp8_promote<MI, WN, SCALING>(acc, t1, sa1, sb1, n_off, tq);
        }
        if (kt + 1 < k_tiles) {  // two stages left: kt in bank 0 (in flight), kt + 1
          issue(t1, sa1, sb1, kt + 1);
          gemmlab::wgmma_wait<1>();
          gemmlab::wgmma_fence_operands(t0);
          release((it + kt) % STAGES);
          fp8_promote<MI, WN, SCALING>(acc, t0, sa0, sb0, n_off, tq);
          gemmlab::wgmma_wait<0>();
          gemmlab::wgmma_fence_operands(t1);
          release((it + kt + 1) % STAGES);
          fp8_promote<MI, WN, SCALING>(acc, t1, sa1, sb1, n_off, tq);
        } else {  // one stage left: kt in bank 0
          gemmlab::wgmma_wait<0>();
          gemmlab::wgmma_fence_operands(t0);
          release((it + kt) % STAGES);
          fp8_promote<MI, WN, SCALING>(acc, t0, sa0, sb0, n_off, tq);
        }
      } else {
        for (int kt = 0; kt < k_tiles; kt++) {
          issue(t0, sa0, sb0, kt, !WGMMA_FP8_NO_PROMOTION || kt == 0);
          gemmlab::wgmma_wait<0>();
          gemmlab::wgmma_fence_operands(t0);
          release((it + kt) % STAGES);
          if (!WGMMA_FP8_NO_PROMOTION) fp8_promote<MI, WN, SCALING>(acc, t0, sa0, sb0, n_off, tq);
        }
        if (WGMMA_FP8_NO_PROMOTION) fp8_promote<MI, WN, SCALING>(acc, t0, sa0, sb0, n_off, tq);  // once, at the end
      }
      it += k_tiles;

      // epilogue: scales (tensor, row), then stores from registers, masked at M and N
#pragma unroll
      for (int mi = 0; mi < MI; mi++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int row = row0 + 64 * mi + 8 * h;
          if (row >= M) continue;
          float rs = tensor_scale;
          if constexpr (SCALING == 1) rs = __ldg(A_scale + row);
#pragma unroll
          for (int j = 0; j < WN / 8; j++) {
            const int col = n0 + 8 * j + 2 * tq;
            if (col >= N) continue;
            const bool pair = col + 1 < N;
            float v0 = acc[mi][4 * j + 2 * h], v1 = acc[mi][4 * j + 2 * h + 1];
            if constexpr (SCALING == 1) {
              v0 *= rs * __ldg(B_scale + col);
              v1 *= pair ? rs * __ldg(B_scale + col + 1) : 0.0f;
            } else if constexpr (SCALING == 0) {
              v0 *= rs, v1 *= rs;
            }
            const long long at = (long long)row * N + col;
            if constexpr (OUT_BF16) {
              __nv_bfloat16 *out = static_cast<__nv_bfloat16 *>(C) + at;
              if (pair && (N % 2) == 0) *reinterpret_cast<__nv_bfloat162 *>(out) = __floats2bfloat162_rn(v0, v1);
              else {
                out[0] = __float2bfloat16_rn(v0);
                if (pair) out[1] = __float2bfloat16_rn(v1);
              }
            } else {
              float *out = static_cast<float *>(C) + at;
              if (pair && (N % 2) == 0) *reinterpret_cast<float2 *>(out) = make_float2(v0, v1);
              else {
                out[0] = v0;
                if (pair) out[1] = v1;
              }
            }
          }
        }
      }
    }
  }
}
