// gemmlab built-in kernel "ladder_starter" (seed 002: the starter code of the "Matmul Ladder I"
// register-blocking lab gemmlab grew from).
// Register-blocking harness contract: 1-D grid of (N/64)^2 blocks, each owning one 64x64 tile
// of C recovered from blockIdx.x; 256 threads; square N x N x N with N a multiple of 64, so no
// partial tiles and no masks. One output per thread, 16 sub-passes, each re-staging the tiles.
template <int BK>
__global__ void gemm_ladder_starter(const float *A, const float *B, float *C, int M, int N, int K) {
  const int TILE = 64;
  __shared__ float As[TILE][BK];
  __shared__ float Bs[BK][TILE];

  int tilesPerRow = N / TILE;
  int baseCol = (blockIdx.x % tilesPerRow) * TILE;
  int baseRow = (blockIdx.x / tilesPerRow) * TILE;
  int tid = threadIdx.x;

  for (int sub = 0; sub < 16; ++sub) {
    int idx = sub * 256 + tid;
    int row = idx / TILE;
    int col = idx % TILE;
    float sum = 0.0f;
    for (int t = 0; t < N; t += BK) {
      for (int i = tid; i < TILE * BK; i += 256) {
        As[i / BK][i % BK] = A[(baseRow + i / BK) * N + (t + i % BK)];
        Bs[i / TILE][i % TILE] = B[(t + i / TILE) * N + (baseCol + i % TILE)];
      }
      __syncthreads();
      for (int k = 0; k < BK; ++k) {
        sum += As[row][k] * Bs[k][col];
      }
      __syncthreads();
    }
    C[(baseRow + row) * N + (baseCol + col)] = sum;
  }
}
