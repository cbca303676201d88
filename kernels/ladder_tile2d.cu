// gemmlab built-in kernel "ladder_tile2d" (the next rung, "Where to go next", of seed 002:
// the "Matmul Ladder I" register-blocking lab gemmlab grew from; 2-D register blocking). Same
// harness contract as ladder_starter/ladder_strip: 1-D grid of (N/64)^2 blocks, the 64x64 tile
// recovered from blockIdx.x, square N with N % 64 == 0 (no partial tiles), so the float4
// (16-byte) global loads are always aligned and in range.
//
// 256 threads; thread (ty, tx) = (tid / 16, tid % 16) owns the 4x4 micro-tile rows ty*4..+3,
// columns tx*4..+3 (one owner per output). Per BK chunk the block stages A (64 x BK) transposed
// into As[BK][64] and B (BK x 64) into Bs[BK][64], both with float4 global loads: 64*BK/4 float4
// per tile, float4 index i = tid + l*256 (i < 16*BK), so each staged element is written once.
// Each k-step reads a 4-value A fragment and a 4-value B fragment (two LDS.128) and does 16 FMAs:
// each fragment value is reused 4 times (the 1-D strip reuses only B).
template <int BK>
__global__ void __launch_bounds__(256) gemm_ladder_tile2d(const float *A, const float *B, float *C,
                                                          int M, int N, int K) {
  constexpr int TILE = 64, THREADS = 256, VEC = TILE * BK / 4;
  static_assert(BK % 4 == 0 && TILE % BK == 0, "BK must be a multiple of 4 dividing 64");
  __shared__ __align__(16) float As[BK][TILE];
  __shared__ __align__(16) float Bs[BK][TILE];

  const int tilesPerRow = N / TILE;
  const int baseCol = (blockIdx.x % tilesPerRow) * TILE;
  const int baseRow = (blockIdx.x / tilesPerRow) * TILE;
  const int tid = threadIdx.x;
  const int ty = tid / 16, tx = tid % 16;
  float acc[4][4] = {};

  for (int t = 0; t < K; t += BK) {
#pragma unroll
    for (int l = 0; l < (VEC + THREADS - 1) / THREADS; ++l) {
      const int i = tid + l * THREADS;
      if (VEC % THREADS == 0 || i < VEC) {
        // A: row i / (BK/4), k columns 4*(i % (BK/4)) .. +3, stored transposed.
        const int ar = i / (BK / 4), ak = 4 * (i % (BK / 4));
        const float4 a = *reinterpret_cast<const float4 *>(&A[(long long)(baseRow + ar) * K + t + ak]);
        As[ak + 0][ar] = a.x;
        As[ak + 1][ar] = a.y;
        As[ak + 2][ar] = a.z;
        As[ak + 3][ar] = a.w;
        // B: row i / 16, columns 4*(i % 16) .. +3.
        const int bk = i / (TILE / 4), bc = 4 * (i % (TILE / 4));
        *reinterpret_cast<float4 *>(&Bs[bk][bc]) =
            *reinterpret_cast<const float4 *>(&B[(long long)(t + bk) * N + baseCol + bc]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float4 a = *reinterpret_cast<const float4 *>(&As[k][ty * 4]);
      const float4 b = *reinterpret_cast<const float4 *>(&Bs[k][tx * 4]);
      const float af[4] = {a.x, a.y, a.z, a.w}, bf[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += af[i] * bf[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
    *reinterpret_cast<float4 *>(&C[(long long)(baseRow + ty * 4 + i) * N + baseCol + tx * 4]) =
        make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}
