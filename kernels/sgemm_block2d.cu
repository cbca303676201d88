// gemmlab built-in kernel "sgemm_block2d" (ladder rung 2): 2-D block tiling with a 2-D thread tile.
//
// Block tile BM x BN, reduction chunk BK, thread block (BN/TN) x (BM/TM) threads as a 1-D block;
// thread t = ty * (BN/TN) + tx owns the TM x TN outputs rows ty*TM .. +TM-1, columns tx*TN .. +TN-1
// (contiguous; one owner per output). Per chunk the block stages A (BM x BK) transposed into
// As[BK][BM] (so a thread's TM A values for one k are contiguous: LDS.128) and B (BK x BN) into
// Bs[BK][BN]. Global loads are float4 (four consecutive k of one A row, four consecutive columns
// of one B row): float4 index v = tid + l*THREADS covers each tile exactly once.
//
// Alignment guard: a float4 global access is used only when the matrix's row stride is a multiple
// of 4 floats (K % 4 == 0 for A, N % 4 == 0 for B and C), the base pointer is 16-byte aligned, and
// the four elements are in range; every other group of four (edges, odd strides) takes the scalar
// path with one bound check per element, zero-padding what lies outside. So every shape is correct
// (1x1x1, 4097x1x3, N % 4 != 0, K % 4 != 0); both barriers are kept; no thread exits early.
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_sgemm_block2d(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                   int M, int N, int K) {
  constexpr int TX = BN / TN, THREADS = (BM / TM) * (BN / TN);
  static_assert(BM % TM == 0 && BN % TN == 0, "ownership");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 fragments and loads");
  static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "load coverage");
  __shared__ __align__(16) float As[BK][BM];
  __shared__ __align__(16) float Bs[BK][BN];

  const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
  const int rowBase = blockIdx.y * BM, colBase = blockIdx.x * BN;
  const bool vecA = (K % 4 == 0) && ((reinterpret_cast<unsigned long long>(A) & 15) == 0);
  const bool vecB = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(B) & 15) == 0);
  const bool vecC = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(C) & 15) == 0);
  float acc[TM][TN] = {};

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int l = 0; l < BM * BK / 4 / THREADS; ++l) {
      const int v = tid + l * THREADS;
      const int r = v / (BK / 4), kk = 4 * (v % (BK / 4));
      const int gr = rowBase + r, gk = k0 + kk;
      float4 a;
      if (vecA && gr < M && gk + 4 <= K) {
        a = *reinterpret_cast<const float4 *>(&A[(long long)gr * K + gk]);
      } else {
        const float *p = &A[(long long)gr * K];
        a.x = (gr < M && gk + 0 < K) ? p[gk + 0] : 0.0f;
        a.y = (gr < M && gk + 1 < K) ? p[gk + 1] : 0.0f;
        a.z = (gr < M && gk + 2 < K) ? p[gk + 2] : 0.0f;
        a.w = (gr < M && gk + 3 < K) ? p[gk + 3] : 0.0f;
      }
      As[kk + 0][r] = a.x;
      As[kk + 1][r] = a.y;
      As[kk + 2][r] = a.z;
      As[kk + 3][r] = a.w;
    }
#pragma unroll
    for (int l = 0; l < BK * BN / 4 / THREADS; ++l) {
      const int v = tid + l * THREADS;
      const int kk = v / (BN / 4), c = 4 * (v % (BN / 4));
      const int gk = k0 + kk, gc = colBase + c;
      float4 b;
      if (vecB && gk < K && gc + 4 <= N) {
        b = *reinterpret_cast<const float4 *>(&B[(long long)gk * N + gc]);
      } else {
        const float *p = &B[(long long)gk * N];
        b.x = (gk < K && gc + 0 < N) ? p[gc + 0] : 0.0f;
        b.y = (gk < K && gc + 1 < N) ? p[gc + 1] : 0.0f;
        b.z = (gk < K && gc + 2 < N) ? p[gc + 2] : 0.0f;
        b.w = (gk < K && gc + 3 < N) ? p[gc + 3] : 0.0f;
      }
      *reinterpret_cast<float4 *>(&Bs[kk][c]) = b;
    }
    __syncthreads();  // the staged chunk is visible before any thread reads it
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float af[TM], bf[TN];
#pragma unroll
      for (int i = 0; i < TM; i += 4) {
        const float4 a = *reinterpret_cast<const float4 *>(&As[k][ty * TM + i]);
        af[i] = a.x; af[i + 1] = a.y; af[i + 2] = a.z; af[i + 3] = a.w;
      }
#pragma unroll
      for (int j = 0; j < TN; j += 4) {
        const float4 b = *reinterpret_cast<const float4 *>(&Bs[k][tx * TN + j]);
        bf[j] = b.x; bf[j + 1] = b.y; bf[j + 2] = b.z; bf[j + 3] = b.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += af[i] * bf[j];
    }
    __syncthreads();  // nobody overwrites the chunk while another warp still reads it
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int gr = rowBase + ty * TM + i;
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
      const int gc = colBase + tx * TN + j;
      if (vecC && gr < M && gc + 4 <= N) {
        *reinterpret_cast<float4 *>(&C[(long long)gr * N + gc]) =
            make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
      } else if (gr < M) {
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (gc + q < N) C[(long long)gr * N + gc + q] = acc[i][j + q];
      }
    }
  }
}
