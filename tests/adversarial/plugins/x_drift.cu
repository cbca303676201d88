// Exploit (stand-in for a race or a kernel that depends on its own history): from its second launch
// on, C[0][0] is one float32 step above the right value. Every launch is within the tolerance; the
// last timed output differs bitwise from the correctness launch's.
__device__ unsigned long long x_done_blocks;

template <int BS>
__global__ void x_drift(const float *a, const float *b, float *c, int m, int n, int k) {
  const unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y;
  const bool later = *(volatile unsigned long long *)&x_done_blocks >= blocks;
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row < m && col < n) {
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
    c[(long long)row * n + col] = (later && row == 0 && col == 0) ? nextafterf(acc, 3.0e38f) : acc;
  }
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) atomicAdd(&x_done_blocks, 1ull);
}
