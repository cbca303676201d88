// Deliberately faulty GEMM kernels for the fault-isolation tests (tests/plugins_faulty).
// Same ABI as the built-ins: (A, B, C, M, N, K), row-major float32.

// float4 loads of B rows: correct only when N is a multiple of 4 (rows then start 16-byte
// aligned). At N = 65 row 1 starts at byte 260: CUDA_ERROR_MISALIGNED_ADDRESS.
template <int BX>
__global__ void gemm_misaligned(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y;
  const int col4 = (blockIdx.x * BX + threadIdx.x) * 4;
  if (row >= m || col4 >= n) return;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int i = 0; i < k; ++i) {
    const float av = a[(long long)row * k + i];
    const float4 bv = *reinterpret_cast<const float4 *>(b + (long long)i * n + col4);
    acc.x += av * bv.x; acc.y += av * bv.y; acc.z += av * bv.z; acc.w += av * bv.w;
  }
  const float out[4] = {acc.x, acc.y, acc.z, acc.w};
  for (int j = 0; j < 4 && col4 + j < n; ++j) c[(long long)row * n + col4 + j] = out[j];
}

// Stores far outside every allocation: CUDA_ERROR_ILLEGAL_ADDRESS.
template <int BX>
__global__ void gemm_illegal(const float *a, const float *b, float *c, int m, int n, int k) {
  const long long i = (long long)blockIdx.x * BX + threadIdx.x;
  c[i + (1ll << 40)] = 1.0f;
}

// Every thread traps: CUDA_ERROR_LAUNCH_FAILED (sticky, like the address faults).
template <int BX>
__global__ void gemm_trap(const float *a, const float *b, float *c, int m, int n, int k) {
  __trap();
}

// Spins until clock64() has advanced SPIN_GCYCLES * 2^30 cycles (about 0.5 s per unit at the
// H200's 1.98 GHz), so a hung sweep ends even without a watchdog.
template <int SPIN_GCYCLES>
__global__ void gemm_hang(const float *a, const float *b, float *c, int m, int n, int k) {
  const long long start = clock64();
  volatile int spin = 1;
  while (spin) {
    if (clock64() - start > ((long long)SPIN_GCYCLES << 30)) break;
  }
  const int row = blockIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < m && col < n) c[(long long)row * n + col] = 0.0f;
}
