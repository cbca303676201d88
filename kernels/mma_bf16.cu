// gemmlab built-in kernel "mma_bf16": BF16/FP16 tensor-core GEMM with mma.sync.m16n8k16 (float32
// accumulate), ldmatrix fragment loads and a STAGES-deep cp.async shared-memory pipeline
// (Ampere-style; the usual structure of e.g. CUTLASS's sm80 multistage GEMM).
//
// C (M x N, row-major float32) = A (M x K, row-major) @ B (K x N; row-major when B_COL is false,
// column-major / "K-major", B[k,n] at k + n*K, when B_COL is true). T is __nv_bfloat16 or __half.
//
// Block tile BM x BN, reduction chunk BK (multiple of 16); (BM/WM) x (BN/WN) warps, each owning a
// WM x WN warp tile = (WM/16) x (WN/8) m16n8 accumulator fragments. SWIZZLE = 0: shared memory rows
// are padded by 8 elements (16 bytes): with that pitch the 8 row addresses of every ldmatrix phase
// fall in 8 different 16-byte bank groups (no bank conflicts), and 16-byte cp.async stays aligned.
// SWIZZLE = 1: unpadded rows whose 16-byte chunks are XOR-swizzled (gemmlab::smem_offset): the same
// conflict-free phases without the padding's shared memory.
//
// Loads: ALIGNED (every row stride a multiple of 8 elements, base 16-byte aligned) uses 16-byte
// cp.async with the src-size operand zero-filling the part of a chunk past K, M or N (and src-size
// 0 for chunks wholly outside). Otherwise each element is loaded with a guarded 2-byte load and
// stored to shared memory (correct for any stride; slow path). Partial blocks never exit early;
// only the final stores are masked.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "gemmlab/mma16.cuh"
#include "gemmlab/mma_sync.cuh"

namespace {

using gemmlab::Mma16;

/// Stage a ROWS x COLS tile (COLS contiguous in memory and in shared memory, pitch PITCH) from a
/// row-major source with `rows_valid` rows and `cols_valid` columns left from (row0, col0).
/// ALIGNED: 16-byte cp.async (gemmlab/mma_sync.cuh); otherwise guarded 2-byte loads and stores.
template <int ROWS, int COLS, int PITCH, int THREADS, bool ALIGNED, int SWZ>
__device__ __forceinline__ void load_tile(unsigned short *dst, const unsigned short *src, long long ld,
                                          int rows_valid, int cols_valid, int tid) {
  if constexpr (ALIGNED) {
    gemmlab::cp_async_tile_16<ROWS, COLS, PITCH, THREADS, SWZ>(dst, src, ld, rows_valid, cols_valid, tid);
  } else {
    constexpr int ELEMS = ROWS * COLS;
    static_assert(ELEMS % THREADS == 0, "load coverage: tile elements must be a multiple of the threads");
#pragma unroll 4
    for (int l = 0; l < ELEMS / THREADS; l++) {
      const int e = tid + l * THREADS;
      const int r = e / COLS, c = e % COLS;
      dst[gemmlab::smem_offset<SWZ, COLS, PITCH, 8>(r, c)] =
          (r < rows_valid && c < cols_valid) ? src[r * ld + c] : (unsigned short)0;
    }
  }
}

}  // namespace

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, bool B_COL, bool ALIGNED, int MIN_BLOCKS = 1,
          int SWIZZLE = 0>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
gemm_mma16(const T *A, const T *B, float *C, int M, int N, int K) {
  constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * WARPS_N * 32;
  constexpr int MI = WM / 16, NI = WN / 8;
  constexpr int PAD = SWIZZLE ? 0 : 8, A_PITCH = BK + PAD;
  constexpr int B_ROWS = B_COL ? BN : BK, B_PITCH = (B_COL ? BK : BN) + PAD;
  constexpr int A_STAGE = BM * A_PITCH, B_STAGE = B_ROWS * B_PITCH;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0,
                "tiles: BM % WM, BN % WN, WM % 16, WN % 16, BK % 16 must be 0");
  static_assert(STAGES >= 2, "at least two pipeline stages");

  extern __shared__ uint4 smem_raw[];
  unsigned short *a_smem = reinterpret_cast<unsigned short *>(smem_raw);
  unsigned short *b_smem = a_smem + STAGES * A_STAGE;
  const unsigned short *a16 = reinterpret_cast<const unsigned short *>(A);
  const unsigned short *b16 = reinterpret_cast<const unsigned short *>(B);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;

  auto load_stage = [&](int slot, int k0) {
    load_tile<BM, BK, A_PITCH, THREADS, ALIGNED, SWIZZLE>(a_smem + slot * A_STAGE, a16 + (long long)m0 * K + k0, K,
                                                 M - m0, K - k0, tid);
    if constexpr (B_COL)
      load_tile<BN, BK, B_PITCH, THREADS, ALIGNED, SWIZZLE>(b_smem + slot * B_STAGE, b16 + (long long)n0 * K + k0, K,
                                                   N - n0, K - k0, tid);
    else
      load_tile<BK, BN, B_PITCH, THREADS, ALIGNED, SWIZZLE>(b_smem + slot * B_STAGE, b16 + (long long)k0 * N + n0, N,
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

    const unsigned short *as = a_smem + (kt % STAGES) * A_STAGE;
    const unsigned short *bs = b_smem + (kt % STAGES) * B_STAGE;
#pragma unroll
    for (int ks = 0; ks < BK / 16; ks++) {
      unsigned a_frag[MI][4], b_frag[NI][2];
#pragma unroll
      for (int i = 0; i < MI; i++) {
        const int row = wm * WM + i * 16 + (lane % 16), col = ks * 16 + (lane / 16) * 8;
        gemmlab::ldmatrix_x4(a_frag[i][0], a_frag[i][1], a_frag[i][2], a_frag[i][3], as + gemmlab::smem_offset<SWIZZLE, BK, A_PITCH, 8>(row, col));
      }
#pragma unroll
      for (int j = 0; j < NI / 2; j++) {
        if constexpr (B_COL) {  // shared [n][k]: plain ldmatrix gives (k 2t.., n g)
          const int n = wn * WN + j * 16 + (lane % 8) + (lane / 16) * 8, k = ks * 16 + ((lane / 8) % 2) * 8;
          gemmlab::ldmatrix_x4(b_frag[2 * j][0], b_frag[2 * j][1], b_frag[2 * j + 1][0], b_frag[2 * j + 1][1],
                               bs + gemmlab::smem_offset<SWIZZLE, BK, B_PITCH, 8>(n, k));
        } else {  // shared [k][n]: .trans gives (k 2t.., n g)
          const int k = ks * 16 + (lane % 8) + ((lane / 8) % 2) * 8, n = wn * WN + j * 16 + (lane / 16) * 8;
          gemmlab::ldmatrix_x4_trans(b_frag[2 * j][0], b_frag[2 * j][1], b_frag[2 * j + 1][0],
                                     b_frag[2 * j + 1][1], bs + gemmlab::smem_offset<SWIZZLE, BN, B_PITCH, 8>(k, n));
        }
      }
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++) Mma16<T>::run(acc[i][j], a_frag[i], b_frag[j]);
    }
  }
  gemmlab::cp_async_wait<0>();
  const int g = lane / 4, t = lane % 4;
  gemmlab::store_acc_m16n8<MI, NI, WM, WN>(C, acc, M, N, m0, n0, wm, wn, g, t);
}
