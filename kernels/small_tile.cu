// gemmlab built-in kernel "small_tile" (issue 10): tiny and skinny GEMMs, where a launch of a
// few blocks is bound by latency, not by FLOPs. Row-major float32, no tensor cores.
//
// The naive kernel's mapping (one output of C per thread, BX x BY outputs per block; A and B read
// straight from global memory through L1: lanes of a warp read one A element (broadcast) and
// consecutive B elements (coalesced)) plus sliced K: threadIdx.z picks one of KS contiguous slices
// of the reduction, so each thread's serial chain of dependent loads and FMAs is K/KS long instead
// of K. The KS partial sums of an output are added in shared memory in a fixed order (z = 0, 1,
// ...) by the z = 0 thread, the only one that stores. Rows >= M and columns >= N are masked;
// slices past K are empty.
template <int BX, int BY, int KS>
__global__ void __launch_bounds__(BX * BY * KS) gemm_small_tile(const float *a, const float *b, float *c, int m,
                                                                 int n, int k) {
  __shared__ float partial[KS][BY][BX];
  const int row = blockIdx.y * BY + threadIdx.y;
  const int col = blockIdx.x * BX + threadIdx.x;
  const int slice = (k + KS - 1) / KS;
  const int k_begin = threadIdx.z * slice;
  const int k_end = min(k, k_begin + slice);
  float acc = 0.0f;
  if (row < m && col < n) {
    const float *arow = a + (long long)row * k;
    const float *bcol = b + col;
#pragma unroll 8
    for (int i = k_begin; i < k_end; i++) acc += __ldg(arow + i) * __ldg(bcol + (long long)i * n);
  }
  if (KS == 1) {
    if (row < m && col < n) c[(long long)row * n + col] = acc;
    return;
  }
  partial[threadIdx.z][threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.z == 0 && row < m && col < n) {
    float sum = partial[0][threadIdx.y][threadIdx.x];
#pragma unroll
    for (int z = 1; z < KS; z++) sum += partial[z][threadIdx.y][threadIdx.x];
    c[(long long)row * n + col] = sum;
  }
}
