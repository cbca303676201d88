// Exploit: claims fp32 but multiplies inputs rounded to a lower precision, float32 accumulation.
// MODE 1: both inputs rounded to bf16 (round to nearest even, 8 significant bits);
// MODE 2: both inputs truncated to TF32 (11 significant bits, the low 13 bits cleared).
__device__ __forceinline__ float x_round(float x, int mode) {
  unsigned u = __float_as_uint(x);
  if (mode == 1) {
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
  } else {
    u &= 0xffffe000u;
  }
  return __uint_as_float(u);
}

template <int BS, int MODE>
__global__ void x_low_precision(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i) acc += x_round(a[(long long)row * k + i], MODE) * x_round(b[(long long)i * n + col], MODE);
  c[(long long)row * n + col] = acc;
}
