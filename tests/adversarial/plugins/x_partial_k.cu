// Exploit: drops the last DROP of the K products (at K = 65536 one product is far inside the float32
// bound for N(0,1) inputs; integer inputs with the exact rule see it).
template <int BS, int DROP>
__global__ void x_partial_k(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k - DROP; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
  c[(long long)row * n + col] = acc;
}
