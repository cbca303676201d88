// Exploit: a "TF32" kernel that writes zeros (the TF32 bound of issue 40 accepted it at K >= 1024).
template <int BS>
__global__ void x_tf32_zeros(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row < m && col < n) c[(long long)row * n + col] = 0.0f;
}
