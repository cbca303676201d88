// Exploit (a bug class): each thread reads a shared-memory word that no thread of its block has
// written yet (uninitialised shared memory, whatever an earlier block left there) and later writes
// its own word, with no barrier between: thread t reads the word thread t + 32 (another warp)
// writes. The value read only matters when it holds one particular NaN pattern, so the output is
// right; racecheck reports the hazard.
template <int BS>
__global__ void x_uninit_smem(const float *a, const float *b, float *c, int m, int n, int k) {
  __shared__ volatile float scratch[BS * BS];
  const int t = threadIdx.y * BS + threadIdx.x;
  const float junk = scratch[(t + 32) % (BS * BS)];
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  float acc = 0.0f;
  if (row < m && col < n) {
    for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
    c[(long long)row * n + col] = __float_as_uint(junk) == 0x7fbadbadu ? junk : acc;
  }
  scratch[t] = acc;
}
