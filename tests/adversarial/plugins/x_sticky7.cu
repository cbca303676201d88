// Exploit (a fault the run must survive): correct, except that its FAULT_AT-th launch (7: launch
// index 6, the last of 6 warm-up launches after the correctness launch) stores far outside every
// allocation: CUDA_ERROR_ILLEGAL_ADDRESS, sticky for the process.
__device__ unsigned long long x_done_blocks;

template <int BS, int FAULT_AT>
__global__ void x_sticky7(const float *a, const float *b, float *c, int m, int n, int k) {
  const unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y;
  const unsigned long long launch = *(volatile unsigned long long *)&x_done_blocks / blocks;
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row < m && col < n) {
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
    const long long idx = (long long)row * n + col;
    c[idx + (launch == FAULT_AT - 1 ? (1ll << 40) : 0ll)] = acc;
  }
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) atomicAdd(&x_done_blocks, 1ull);
}
