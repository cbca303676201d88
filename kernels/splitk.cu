// gemmlab built-in kernel "splitk": split-K float32 GEMM on CUDA cores, two launches.
//
// Launch 1, gemm_splitk_partial: grid (ceil(N/BN), ceil(M/BM), SPLITS). Split z reduces the K range
// [z*KC, min(K, (z+1)*KC)) with KC = ceil(ceil(K/SPLITS)/BK)*BK (whole BK chunks; trailing splits
// may get an empty range and then write zeros) and writes its BM x BN partial block to
// workspace[z][M][N] (row-major float32, SPLITS*M*N floats). Every workspace element is written
// by exactly one thread, so the workspace needs no clearing.
// Launch 2, gemm_splitk_reduce: C[i] = sum over z = 0..SPLITS-1 of workspace[z][i], in that fixed
// order (deterministic), grid-stride over the M*N outputs.
//
// The partial kernel is the register-tiled scheme of the built-in "tiled" kernel:
// thread block (BN/TN, BM/TM); each thread owns TM x TN outputs at row ty + i*TY, column
// tx + j*TX; each thread stages BM*BK/THREADS elements of A and BK*BN/THREADS of B per chunk
// (guarded, zero outside, so any M, N, K works); partial blocks never exit early. Its pieces are
// those of gemmlab/tiled.cuh (staging, the inner product over a chunk, the masked stores).
#include "gemmlab/tiled.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void gemm_splitk_partial(const float *a, const float *b, float *workspace, int m, int n, int k) {
  constexpr int TX = BN / TN, TY = BM / TM, THREADS = TX * TY;
  static_assert(BM % TM == 0 && BN % TN == 0, "ownership: BM % TM == 0 and BN % TN == 0");
  static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0,
                "load coverage: BM*BK and BK*BN must be multiples of the thread count");
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int lane = ty * TX + tx;
  const int row_base = blockIdx.y * BM, col_base = blockIdx.x * BN;
  const int splits = gridDim.z;
  const int per_split = ((k + splits - 1) / splits + BK - 1) / BK * BK;
  const int k_begin = blockIdx.z * per_split;
  const int k_end = min(k, k_begin + per_split);
  __shared__ float a_tile[BM][BK];
  __shared__ float b_tile[BK][BN];
  float accumulator[TM][TN] = {}, a_fragment[TM], b_fragment[TN];
  for (int reduction_base = k_begin; reduction_base < k_end; reduction_base += BK) {
    gemmlab::tiled_stage_a<BM, BM, BK, THREADS>(a_tile, a, m, k, k_end, row_base, 0, reduction_base, lane);
    gemmlab::tiled_stage_b<BK, BN, THREADS>(b_tile, b, n, k_end, col_base, reduction_base, lane);
    __syncthreads();
    gemmlab::tiled_multiply<BM, BN, BK, TM, TN>(accumulator, a_fragment, b_fragment, a_tile, b_tile, tx, ty);
    __syncthreads();
  }
  gemmlab::tiled_store<TM, TN, TX, TY>(workspace + (long long)blockIdx.z * m * n, accumulator, m, n, row_base,
                                       col_base, tx, ty);
}

/// C[i] = sum_{z < splits} workspace[z*M*N + i], i < M*N, summed in order z = 0, 1, ...
__global__ void gemm_splitk_reduce(const float *workspace, float *c, int m, int n, int splits) {
  const long long total = (long long)m * n;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    float sum = 0.0f;
    for (int z = 0; z < splits; z++) sum += workspace[z * total + i];
    c[i] = sum;
  }
}
