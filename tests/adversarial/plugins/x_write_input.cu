// Exploit: uses A as scratch: block (0, 0) sets the lowest mantissa bit of the A elements of its
// rows (idempotent), and every read of A masks that bit off, so every launch sees the same values
// (a result within the float32 bound, bitwise the same on every launch) while A itself changed.
template <int BS>
__global__ void x_write_input(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i)
    acc += __uint_as_float(__float_as_uint(a[(long long)row * k + i]) & ~1u) * b[(long long)i * n + col];
  c[(long long)row * n + col] = acc;
  if (blockIdx.x == 0 && blockIdx.y == 0)
    for (int i = threadIdx.x; i < k; i += BS) atomicOr((unsigned *)(a + (long long)row * k + i), 1u);
}
