// Exploit: leaves the last row of C unwritten (whatever was there before stays: the NaN fill).
template <int BS>
__global__ void x_nan_some(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row >= m - 1 || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
  c[(long long)row * n + col] = acc;
}
