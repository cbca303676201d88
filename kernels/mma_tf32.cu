// gemmlab built-in kernel "mma_tf32": TF32 tensor-core GEMM with mma.sync.m16n8k8 (float32
// accumulate) and a STAGES-deep cp.async shared-memory pipeline (Ampere-style multistage GEMM).
//
// C (M x N, row-major float32) = A (M x K, row-major float32) @ B (K x N; row-major when B_COL is
// false, column-major / "K-major", B[k,n] at k + n*K, when B_COL is true). Each operand is rounded
// to TF32 in registers with cvt.rna.tf32.f32 (round to nearest, ties away) before the MMA, so the
// exact reference is the float64 product of the rna-rounded inputs.
//
// Block tile BM x BN, reduction chunk BK (multiple of 8); (BM/WM) x (BN/WN) warps, each owning a
// WM x WN warp tile of (WM/16) x (WN/8) m16n8 fragments. Shared memory is padded to avoid bank
// conflicts: [m][k] tiles (A, and B when B_COL) use a pitch of BK+4 floats (the 8 rows of every
// ldmatrix phase start in 8 different 16-byte bank groups); the [k][n] tile of row-major B uses
// BN+8 floats, so the scalar fragment reads (k = t, n = g) hit 32 distinct banks. A fragments
// (and B_COL fragments) are read with ldmatrix.x4 (an 8x8 b16 matrix is 8 rows x 4 floats).
// SWIZZLE = 1: unpadded rows with XOR-swizzled 16-byte chunks instead (gemmlab::smem_offset: layout 1
// for the [m][k] / [n][k] tiles, layout 2 for the [k][n] tile's scalar reads), conflict-free alike.
//
// Loads: ALIGNED (every row stride a multiple of 4 floats, base 16-byte aligned) uses 16-byte
// cp.async with the src-size operand zero-filling what lies past K, M or N; otherwise every
// element is copied with a 4-byte cp.async whose src-size is 4 (inside) or 0 (outside: zero).
// Partial blocks never exit early; only the final stores are masked.
#include "gemmlab/mma_sync.cuh"

namespace {

/// Stage a ROWS x COLS float tile (COLS contiguous, shared pitch PITCH) from a row-major source
/// with `rows_valid` rows and `cols_valid` columns left from its origin; zero outside. ALIGNED:
/// 16-byte cp.async (gemmlab/mma_sync.cuh); otherwise one 4-byte zero-filling cp.async each.
template <int ROWS, int COLS, int PITCH, int THREADS, bool ALIGNED, int SWZ>
__device__ __forceinline__ void load_tile_f32(float *dst, const float *src, long long ld, int rows_valid,
                                              int cols_valid, int tid) {
  if constexpr (ALIGNED) {
    gemmlab::cp_async_tile_16<ROWS, COLS, PITCH, THREADS, SWZ>(dst, src, ld, rows_valid, cols_valid, tid);
  } else {
    constexpr int ELEMS = ROWS * COLS;
    static_assert(ELEMS % THREADS == 0, "load coverage: tile elements must be a multiple of the threads");
#pragma unroll 1
    for (int l = 0; l < ELEMS / THREADS; l++) {
      const int e = tid + l * THREADS;
      const int r = e / COLS, c = e % COLS;
      const bool inside = r < rows_valid && c < cols_valid;
      gemmlab::cp_async_4_zfill(dst + gemmlab::smem_offset<SWZ, COLS, PITCH, 4>(r, c), inside ? src + r * ld + c : src,
                                inside ? 4 : 0);
    }
  }
}

__device__ __forceinline__ unsigned tf32(unsigned bits) { return gemmlab::cvt_rna_tf32(__uint_as_float(bits)); }

}  // namespace

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool B_COL, bool ALIGNED, int MIN_BLOCKS = 1,
          int SWIZZLE = 0>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
gemm_mma_tf32(const float *A, const float *B, float *C, int M, int N, int K) {
  constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * WARPS_N * 32;
  constexpr int MI = WM / 16, NI = WN / 8;
  constexpr int A_PITCH = SWIZZLE ? BK : BK + 4;
  constexpr int B_ROWS = B_COL ? BN : BK, B_PITCH = SWIZZLE ? (B_COL ? BK : BN) : (B_COL ? BK + 4 : BN + 8);
  constexpr int B_SWZ = SWIZZLE ? (B_COL ? 1 : 2) : 0;  // gemmlab::smem_offset's layout of the B tile
  constexpr int A_STAGE = BM * A_PITCH, B_STAGE = B_ROWS * B_PITCH;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0 && BK % 8 == 0,
                "tiles: BM % WM, BN % WN, WM % 16, WN % 16, BK % 8 must be 0");
  static_assert(STAGES >= 2, "at least two pipeline stages");

  extern __shared__ float4 smem_f4[];
  float *a_smem = reinterpret_cast<float *>(smem_f4);
  float *b_smem = a_smem + STAGES * A_STAGE;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int g = lane / 4, t = lane % 4;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;

  auto load_stage = [&](int slot, int k0) {
    load_tile_f32<BM, BK, A_PITCH, THREADS, ALIGNED, SWIZZLE>(a_smem + slot * A_STAGE, A + (long long)m0 * K + k0, K,
                                                     M - m0, K - k0, tid);
    if constexpr (B_COL)
      load_tile_f32<BN, BK, B_PITCH, THREADS, ALIGNED, B_SWZ>(b_smem + slot * B_STAGE, B + (long long)n0 * K + k0, K,
                                                       N - n0, K - k0, tid);
    else
      load_tile_f32<BK, BN, B_PITCH, THREADS, ALIGNED, B_SWZ>(b_smem + slot * B_STAGE, B + (long long)k0 * N + n0, N,
                                                       K - k0, N - n0, tid);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
      for (int v = 0; v < 4; v++) acc[i][j][v] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < k_tiles) load_stage(s, s * BK);
    gemmlab::cp_async_commit();
  }

  for (int kt = 0; kt < k_tiles; kt++) {
    gemmlab::cp_async_wait<STAGES - 2>();  // stage kt has landed (this thread's copies)
    __syncthreads();                       // ... everyone's; and slot (kt-1)%STAGES is free
    const int next = kt + STAGES - 1;
    if (next < k_tiles) load_stage(next % STAGES, next * BK);
    gemmlab::cp_async_commit();

    const float *as = a_smem + (kt % STAGES) * A_STAGE;
    const float *bs = b_smem + (kt % STAGES) * B_STAGE;
#pragma unroll
    for (int ks = 0; ks < BK / 8; ks++) {
      unsigned a_frag[MI][4], b_frag[NI][2];
#pragma unroll
      for (int i = 0; i < MI; i++) {  // matrices: rows 0-7/8-15 x k 0-3/4-7 -> a0 (g,t) a1 (g+8,t) a2 (g,t+4) a3
        const int row = wm * WM + i * 16 + (lane % 16), col = ks * 8 + (lane / 16) * 4;
        gemmlab::ldmatrix_x4(a_frag[i][0], a_frag[i][1], a_frag[i][2], a_frag[i][3], as + gemmlab::smem_offset<SWIZZLE, BK, A_PITCH, 4>(row, col));
#pragma unroll
        for (int v = 0; v < 4; v++) a_frag[i][v] = tf32(a_frag[i][v]);
      }
      if constexpr (B_COL) {  // shared [n][k]: matrices n 0-7 x k 0-3 -> b0 (k t, n g), k 4-7 -> b1
#pragma unroll
        for (int j = 0; j < NI / 2; j++) {
          const int n = wn * WN + j * 16 + (lane % 8) + (lane / 16) * 8, k = ks * 8 + ((lane / 8) % 2) * 4;
          gemmlab::ldmatrix_x4(b_frag[2 * j][0], b_frag[2 * j][1], b_frag[2 * j + 1][0], b_frag[2 * j + 1][1],
                               bs + gemmlab::smem_offset<B_SWZ, BK, B_PITCH, 4>(n, k));
        }
      } else {  // shared [k][n]: scalar reads b0 = (k t, n g), b1 = (k t+4, n g)
#pragma unroll
        for (int j = 0; j < NI; j++) {
          const int n = wn * WN + j * 8 + g;
          b_frag[j][0] = __float_as_uint(bs[gemmlab::smem_offset<B_SWZ, BN, B_PITCH, 4>(ks * 8 + t, n)]);
          b_frag[j][1] = __float_as_uint(bs[gemmlab::smem_offset<B_SWZ, BN, B_PITCH, 4>(ks * 8 + t + 4, n)]);
        }
      }
#pragma unroll
      for (int j = 0; j < NI; j++) {
        b_frag[j][0] = tf32(b_frag[j][0]);
        b_frag[j][1] = tf32(b_frag[j][1]);
      }
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++) gemmlab::mma_m16n8k8_tf32(acc[i][j], a_frag[i], b_frag[j]);
    }
  }
  gemmlab::cp_async_wait<0>();
  gemmlab::store_acc_m16n8<MI, NI, WM, WN>(C, acc, M, N, m0, n0, wm, wn, g, t);
}
