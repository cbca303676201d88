// gemmlab/tiled.cuh: the register-tiled float32 scheme of the built-in "tiled" kernel (seed 000,
// the naive vs register-tiled GEMM lab: gemm_tiled in kernels/tiled.cu), in pieces for the kernels
// built on it (splitk, cluster_tiled). kernels/tiled.cu itself keeps the scheme written in place:
// it is the seed lab's kernel, and tests/broken/ derives its deliberately broken variants from
// that file's text.
//
// Thread block (TX, TY) = (BN/TN, BM/TM); `lane` = ty*TX + tx is the thread's linear index (not
// the warp lane). Each thread owns TM x TN outputs at row ty + i*TY, column tx + j*TX of the
// BM x BN block tile, so adjacent threads own adjacent columns. Per reduction chunk of BK, the
// threads stage the A tile (BM x BK) and B tile (BK x BN) in shared memory cooperatively: linear
// positions lane + l*THREADS cover each tile exactly once, zero outside the matrix (any M, N,
// K); the caller puts the barriers around them. Header-only, NVRTC-safe; every function is
// force-inlined, so a kernel compiles to the same SASS as with the code written in place (checked
// instruction for instruction when splitk and cluster_tiled moved here, defaults and a second
// tile set). The fragment registers are the caller's, declared right after its accumulator
// (`float accumulator[TM][TN] = {}, a_fragment[TM], b_fragment[TN];`): a fragment array of the
// callee's own comes first in the inlined function's locals and changes ptxas' register
// assignment and instruction order (PTX the same up to register names, SASS not).
#pragma once

namespace gemmlab {

/// Stage ROWS rows of the A tile, rows row_off .. row_off+ROWS-1 of `a_tile` (BM x BK), from A
/// (m x lda, row-major; block row origin row_base, chunk origin reduction_base); elements at
/// row >= m or column >= k_limit are zero. THREADS threads; ROWS*BK must be a multiple of THREADS.
template <int ROWS, int BM, int BK, int THREADS>
__device__ __forceinline__ void tiled_stage_a(float (&a_tile)[BM][BK], const float *a, int m, int lda, int k_limit,
                                              int row_base, int row_off, int reduction_base, int lane) {
#pragma unroll
  for (int l = 0; l < ROWS * BK / THREADS; l++) {
    const int linear = lane + l * THREADS;
    const int row = row_off + linear / BK, inner = linear % BK;
    a_tile[row][inner] = row_base + row < m && reduction_base + inner < k_limit
                             ? a[(long long)(row_base + row) * lda + reduction_base + inner] : 0.0f;
  }
}

/// Stage the B tile `b_tile` (BK x BN) from B (k x n, row-major; block column origin col_base,
/// chunk origin reduction_base); elements at row >= k_limit or column >= n are zero.
template <int BK, int BN, int THREADS>
__device__ __forceinline__ void tiled_stage_b(float (&b_tile)[BK][BN], const float *b, int n, int k_limit,
                                              int col_base, int reduction_base, int lane) {
#pragma unroll
  for (int l = 0; l < BK * BN / THREADS; l++) {
    const int linear = lane + l * THREADS;
    const int inner = linear / BN, col = linear % BN;
    b_tile[inner][col] = reduction_base + inner < k_limit && col_base + col < n
                             ? b[(long long)(reduction_base + inner) * n + col_base + col] : 0.0f;
  }
}

/// accumulator[i][j] += sum over the BK chunk of A(ty + i*TY, inner) * B(inner, tx + j*TX) from
/// the staged tiles: per inner step TM + TN shared reads into the fragment registers a_fragment,
/// b_fragment (the caller's, declared after its accumulator) and TM*TN FMAs.
template <int BM, int BN, int BK, int TM, int TN>
__device__ __forceinline__ void tiled_multiply(float (&accumulator)[TM][TN], float (&a_fragment)[TM],
                                               float (&b_fragment)[TN], const float (&a_tile)[BM][BK],
                                               const float (&b_tile)[BK][BN], int tx, int ty) {
  constexpr int TX = BN / TN, TY = BM / TM;
#pragma unroll
  for (int inner = 0; inner < BK; inner++) {
#pragma unroll
    for (int i = 0; i < TM; i++) a_fragment[i] = a_tile[ty + i * TY][inner];
#pragma unroll
    for (int j = 0; j < TN; j++) b_fragment[j] = b_tile[inner][tx + j * TX];
#pragma unroll
    for (int i = 0; i < TM; i++) {
#pragma unroll
      for (int j = 0; j < TN; j++) accumulator[i][j] += a_fragment[i] * b_fragment[j];
    }
  }
}

/// Write the thread's TM x TN outputs to c (m x n, row-major) at row row_base + ty + i*TY,
/// column col_base + tx + j*TX; outputs past m or n are not written.
template <int TM, int TN, int TX, int TY>
__device__ __forceinline__ void tiled_store(float *c, const float (&accumulator)[TM][TN], int m, int n, int row_base,
                                            int col_base, int tx, int ty) {
#pragma unroll
  for (int i = 0; i < TM; i++) {
#pragma unroll
    for (int j = 0; j < TN; j++) {
      const int row = row_base + ty + i * TY, col = col_base + tx + j * TX;
      if (row < m && col < n) c[(long long)row * n + col] = accumulator[i][j];
    }
  }
}

}  // namespace gemmlab
