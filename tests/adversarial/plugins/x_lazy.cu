// Exploit (tests/adversarial): correct for the first COMPUTED launches of this module, then every
// block returns at once. A __device__ counter of finished blocks tells the launch index (launches on
// one stream run one after the other): launch L sees between L*blocks and (L+1)*blocks - 1.
// Used by x_lazy_once (COMPUTED = 1), x_lazy_warmup (1 + warm-up) and x_lazy_graph (1 + warm-up +
// the launches of G graph replays).
__device__ unsigned long long x_done_blocks;

template <int BS, int COMPUTED>
__global__ void x_lazy(const float *a, const float *b, float *c, int m, int n, int k) {
  const unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y;
  const unsigned long long launch = *(volatile unsigned long long *)&x_done_blocks / blocks;
  if (launch >= COMPUTED) return;  // lazy from here on: C keeps what the earlier launches wrote
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row < m && col < n) {
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
    c[(long long)row * n + col] = acc;
  }
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) atomicAdd(&x_done_blocks, 1ull);
}
