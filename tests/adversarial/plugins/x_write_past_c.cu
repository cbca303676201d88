// Exploit: a correct C, plus one store just past its end (a scratch word "nobody uses").
template <int BS>
__global__ void x_write_past_c(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row == 0 && col == 0) c[(long long)m * n] = 0.0f;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
  c[(long long)row * n + col] = acc;
}
