// Exploit: computes only the rows and columns a sampled verifier compares (X_ROWS, X_COLS: the
// plugin draws them as gemmlab.stages.verify does, default_rng(seed + 1)) and writes 0 elsewhere
// (no NaN left for the NaN count to see). Freivalds' check of the whole product must catch it.
__device__ const int x_rows[] = {X_ROWS};
__device__ const int x_cols[] = {X_COLS};

template <int BS>
__global__ void x_sampled_rows(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
  if (row >= m || col >= n) return;
  bool sampled = false;
  for (int i = 0; i < (int)(sizeof(x_rows) / sizeof(int)); ++i) sampled |= x_rows[i] == row;
  for (int i = 0; i < (int)(sizeof(x_cols) / sizeof(int)); ++i) sampled |= x_cols[i] == col;
  float acc = 0.0f;
  if (sampled)
    for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
  c[(long long)row * n + col] = acc;
}
