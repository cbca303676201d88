// The plain GEMM the library-plugin exploits (x_graph_detect, x_side_stream, x_timer_patch, ...)
// launch themselves through cuda.core, outside gemmlab's launch plan.
template <int BS>
__global__ void x_lib_gemm(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
  c[(long long)row * n + col] = acc;
}
