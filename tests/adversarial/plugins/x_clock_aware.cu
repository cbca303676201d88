// Exploit (timing-aware): reads %globaltimer. The first launch computes; a later launch computes only
// when it starts more than GAP_US microseconds after the previous launch of this kernel ended (a
// lone verification launch after host work), and returns at once when launched back to back (a
// timed batch or graph replay). Every output it leaves is right for the inputs it last computed.
__device__ unsigned long long x_done_blocks;  // blocks finished, every launch: the launch index
__device__ unsigned long long x_last_end;     // %globaltimer (ns) when the previous launch ended

__device__ __forceinline__ unsigned long long x_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <int BS, int GAP_US>
__global__ void x_clock_aware(const float *a, const float *b, float *c, int m, int n, int k) {
  const unsigned long long start = x_now();
  const unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y;
  const unsigned long long launch = *(volatile unsigned long long *)&x_done_blocks / blocks;
  const unsigned long long last_end = *(volatile unsigned long long *)&x_last_end;
  const bool work = launch == 0 || start - last_end > (unsigned long long)GAP_US * 1000ull;
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (work && row < m && col < n) {
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
    c[(long long)row * n + col] = acc;
  }
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    __threadfence();
    if (atomicAdd(&x_done_blocks, 1ull) % blocks == blocks - 1) {  // the last block of this launch
      x_last_end = x_now();
      __threadfence();
    }
  }
}
