// gemmlab built-in kernel "tiled" (seed 000: gemm_tiled of the real-device naive vs
// register-tiled GEMM lab gemmlab grew from), with the seed's constants made template
// parameters. Seed values: BM=64, BN=64, BK=16, TM=8, TN=2.
//
// Output block BM x BN; thread block (TX, TY) = (BN/TN, BM/TM), seed (32, 8) = 256 threads.
// Each thread owns TM x TN accumulators: row = ty + i*TY, col = tx + j*TX (i < TM, j < TN),
// so adjacent lanes own adjacent columns. Reduction chunk BK. Each thread stages exactly
// BM*BK/THREADS elements of A and BK*BN/THREADS of B per chunk (cooperative, zero-padded);
// both barriers are kept; partial blocks never exit early; only the final stores are masked.
template <int BM, int BN, int BK, int TM, int TN>
__global__ void gemm_tiled(const float *a, const float *b, float *c, int m, int n, int k) {
  constexpr int TX = BN / TN, TY = BM / TM, THREADS = TX * TY;
  static_assert(BM % TM == 0 && BN % TN == 0, "ownership: BM % TM == 0 and BN % TN == 0");
  static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0,
                "load coverage: BM*BK and BK*BN must be multiples of the thread count");
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int lane = ty * TX + tx;
  const int row_base = blockIdx.y * BM, col_base = blockIdx.x * BN;
  __shared__ float a_tile[BM][BK];
  __shared__ float b_tile[BK][BN];
  float accumulator[TM][TN] = {};
  for (int reduction_base = 0; reduction_base < k; reduction_base += BK) {
    // Cooperative loads: linear positions lane + l*THREADS cover each tile exactly once.
    // Invalid elements become zero. No thread exits before either block-wide barrier.
#pragma unroll
    for (int l = 0; l < BM * BK / THREADS; l++) {
      const int linear = lane + l * THREADS;
      const int row = linear / BK, inner = linear % BK;
      a_tile[row][inner] = row_base + row < m && reduction_base + inner < k
                               ? a[(long long)(row_base + row) * k + reduction_base + inner] : 0.0f;
    }
#pragma unroll
    for (int l = 0; l < BK * BN / THREADS; l++) {
      const int linear = lane + l * THREADS;
      const int inner = linear / BN, col = linear % BN;
      b_tile[inner][col] = reduction_base + inner < k && col_base + col < n
                               ? b[(long long)(reduction_base + inner) * n + col_base + col] : 0.0f;
    }
    __syncthreads();  // Every staged element is visible before any consumer.
#pragma unroll
    for (int inner = 0; inner < BK; inner++) {
      float a_fragment[TM], b_fragment[TN];
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
    __syncthreads();  // No producer overwrites a tile while another warp reads it.
  }
#pragma unroll
  for (int i = 0; i < TM; i++) {
#pragma unroll
    for (int j = 0; j < TN; j++) {
      const int row = row_base + ty + i * TY, col = col_base + tx + j * TX;
      if (row < m && col < n) c[(long long)row * n + col] = accumulator[i][j];
    }
  }
}
