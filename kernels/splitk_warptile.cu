// gemmlab built-in kernel "splitk_warptile" (issue 10): split-K float32 GEMM on CUDA cores for
// K-heavy shapes and shapes with few output tiles, two launches, with the warp-tiled inner tile of
// the ladder's rung 3 (gemmlab/warptile_k.cuh: wt_accumulate over a K range, wt_store).
//
//   gemm_splitk_warptile: grid (ceil(N/BN), ceil(M/BM), SPLITS); split z reduces the K range
//     [z*KC, min(K, (z+1)*KC)), KC = ceil(ceil(K/SPLITS)/BK)*BK (trailing splits may be empty and
//     then write zeros), and writes its BM x BN block to workspace slab z (SPLITS*M*N floats,
//     every element written once, so no clearing).
//   gemm_warptile_reduce: C[i] = sum over z of slab z [i], z = 0, 1, ... (fixed order:
//     deterministic), grid-stride, float4 when M*N % 4 == 0 and C is 16-byte aligned.

#include "gemmlab/warptile_k.cuh"

// MINB: __launch_bounds__'s minimum resident blocks per SM (caps registers at 64K/(threads*MINB);
// 2 for the 256-thread 128x128 tile keeps sgemm_warptile's 2 blocks per SM).
#define WT_THREADS ((BM / WM) * (BN / WN) * 32)

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int MINB>
__global__ void __launch_bounds__(WT_THREADS, MINB)
gemm_splitk_warptile(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ workspace, int M,
                     int N, int K) {
  __shared__ __align__(16) float As[2][BK][BM + 4];
  __shared__ __align__(16) float Bs[2][BK][BN];
  const int splits = gridDim.z;
  const int per = ((K + splits - 1) / splits + BK - 1) / BK * BK;
  const int kBegin = (int)min((long long)K, (long long)blockIdx.z * per), kEnd = min(K, kBegin + per);
  const int rowBase = blockIdx.y * BM, colBase = blockIdx.x * BN;
  float acc[TM][TN];
  wt_accumulate<BM, BN, BK, WM, WN, TM, TN>(A, B, M, N, K, rowBase, colBase, kBegin, kEnd, As, Bs, acc);
  // slab z starts at z*M*N floats: 16-byte aligned whenever N % 4 == 0 (the workspace is 256-byte aligned)
  float *slab = workspace + (long long)blockIdx.z * M * N;
  wt_store<BM, BN, BK, WM, WN, TM, TN>(slab, N, M, N, rowBase, colBase, N % 4 == 0, acc);
}

/// C[i] = sum_{z < splits} workspace[z*M*N + i] in the order z = 0, 1, ...; grid-stride.
__global__ void gemm_warptile_reduce(const float *__restrict__ workspace, float *__restrict__ C, int M, int N,
                                     int splits) {
  const long long total = (long long)M * N;
  const long long stride = (long long)gridDim.x * blockDim.x;
  if ((total & 3) == 0 && ((reinterpret_cast<unsigned long long>(C) & 15) == 0)) {
    const long long quads = total / 4;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < quads; q += stride) {
      float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int z = 0; z < splits; ++z) {
        const float4 v = reinterpret_cast<const float4 *>(workspace + z * total)[q];
        sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w;
      }
      reinterpret_cast<float4 *>(C)[q] = sum;
    }
  } else {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += stride) {
      float sum = 0.0f;
      for (int z = 0; z < splits; ++z) sum += workspace[z * total + i];
      C[i] = sum;
    }
  }
}
