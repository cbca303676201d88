// gemmlab built-in kernel "ladder_strip" (seed 002: the column strip of the "Matmul Ladder I"
// register-blocking lab gemmlab grew from).
// Same harness contract as ladder_starter: 1-D grid of (N/64)^2 blocks, tile from blockIdx.x,
// square N multiple of 64. 64*64/TM threads (TM=16: 256); thread tid owns the column
// col = tid % 64 and the TM-row strip rows (tid / 64)*TM .. +TM-1, held in registers. Each k-step
// reads one B value from shared memory and reuses it across the TM accumulators.
template <int TM, int BK>
__global__ void gemm_ladder_strip(const float *A, const float *B, float *C, int M, int N, int K) {
  constexpr int TILE = 64, THREADS = TILE * TILE / TM;
  static_assert(TILE % TM == 0, "ownership: TM must divide 64");
  static_assert((TILE * BK) % THREADS == 0, "load coverage: 64*BK must be a multiple of the thread count");
  __shared__ float As[TILE][BK];
  __shared__ float Bs[BK][TILE];

  const int tilesPerRow = N / TILE;
  const int baseCol = (blockIdx.x % tilesPerRow) * TILE;
  const int baseRow = (blockIdx.x / tilesPerRow) * TILE;
  const int tid = threadIdx.x;
  const int col = tid % TILE;
  const int row0 = (tid / TILE) * TM;
  float acc[TM] = {};

  for (int t = 0; t < N; t += BK) {
#pragma unroll
    for (int l = 0; l < TILE * BK / THREADS; ++l) {
      const int i = tid + l * THREADS;
      As[i / BK][i % BK] = A[(long long)(baseRow + i / BK) * N + (t + i % BK)];
      Bs[i / TILE][i % TILE] = B[(long long)(t + i / TILE) * N + (baseCol + i % TILE)];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float b = Bs[k][col];
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] += As[row0 + i][k] * b;
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) C[(long long)(baseRow + row0 + i) * N + (baseCol + col)] = acc[i];
}
