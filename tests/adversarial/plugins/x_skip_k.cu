// Exploit: "8x faster than the peak": forms only every STRIDE-th of the K products and scales the
// sum by STRIDE.
template <int BS, int STRIDE>
__global__ void x_skip_k(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; i += STRIDE) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
  c[(long long)row * n + col] = acc * (float)STRIDE;
}
