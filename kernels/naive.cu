// gemmlab built-in kernel "naive" (seed 000: gemm_naive of the real-device naive vs
// register-tiled GEMM lab gemmlab grew from).
// One output per thread, BX x BY thread block (seed 000: 16 x 16), every thread masked.
// Row-major float32: A is M x K, B is K x N, C is M x N. No tensor cores.
template <int BX, int BY>
__global__ void gemm_naive(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BY + threadIdx.y;
  const int col = blockIdx.x * BX + threadIdx.x;
  if (row >= m || col >= n) return;
  float accumulator = 0.0f;
  for (int inner = 0; inner < k; inner++)
    accumulator += a[(long long)row * k + inner] * b[(long long)inner * n + col];
  c[(long long)row * n + col] = accumulator;
}
