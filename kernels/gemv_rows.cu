// gemmlab built-in kernel "gemv_rows" (issue 10): decode-like GEMMs, C (M x N) = A (M x K) . B (K x N)
// with M small (1..64) and N, K weight-sized. Row-major float32, no tensor cores.
//
// The cost is streaming B (K x N) once, so each block owns MT rows x NT columns of C and walks all
// of K: thread t handles the column group c = t % L (4 adjacent columns, one float4 of a B row,
// L = NT/4 lanes cover NT columns: 128-byte or wider coalesced segments) and the k rows
// r, r + KSTEP, r + 2 KSTEP, ... (r = t / L, KSTEP = threads / L): K is split across all warps of
// the block. Per chunk of KC = U * KSTEP rows of K, the MT x KC slice of A is staged in shared
// memory k-major (As[kk][m], so a thread reads its MT values of A with float4 loads when MT % 4 == 0;
// lanes of one k row read the same address: broadcast), and each thread first issues its U float4
// loads of B (kept in registers while A is staged: the loads overlap the staging), then does
// U * MT * 4 FMAs. At the end the partial sums over k rows are reduced within each warp with
// shuffles (lanes c, c + L, ... share a column group) and across the KW warps through shared
// memory; each output is stored by exactly one thread.
//
// The A stage moves float4s along k when K % 4 == 0 (element by element otherwise).
// Edges: rows m0 + m >= M and k >= K are zero-filled in the A stage (and k >= K skips the B load);
// columns >= N are masked; a row of B is read with float4 only when N % 4 == 0 and the whole
// float4 is inside the row (else four guarded scalar loads).
// Body of the kernel (the plain entry gemm_gemv_rows below and, under GEMMLAB_EPI, the fused one):
// A's row pitch lda, B's ldb; EPI: GemvRowsPlain (C row-major float32, pitch n) or gemmlab::Fused
// (the fused epilogue of batch z, issue 43; then the vector paths also need lda / ldb multiples of 4
// and A / B 16-byte aligned).
struct GemvRowsPlain {
  static constexpr bool FUSED = false;
};

template <int MT, int NT, int KW, int U, class EPI = GemvRowsPlain>
__device__ __forceinline__ void gemv_rows_body(const float *a, const float *b, float *c, int m, int n, int k, int lda,
                                               int ldb, int z, const EPI &epi = EPI()) {
  constexpr int THREADS = 32 * KW;
  constexpr int L = NT / 4;            // lanes across the NT columns (one float4 each)
  constexpr int KSTEP = THREADS / L;   // k rows per step for the whole block
  constexpr int R = 32 / L;            // k rows per step within one warp
  constexpr int KC = U * KSTEP;        // k rows per staged chunk
  constexpr int STAGE = MT * KC;       // floats of A per chunk
  constexpr int PARTIALS = KW * MT * NT;  // floats of the cross-warp reduction
  constexpr int SMEM = STAGE > PARTIALS ? STAGE : PARTIALS;
  static_assert(NT % 4 == 0 && 32 % L == 0, "NT/4 must divide 32");
  __shared__ __align__(16) float smem[SMEM];

  const int t = threadIdx.x;
  const int col_group = t % L;
  const int krow = t / L;
  const int m0 = blockIdx.x * MT;
  const int n0 = blockIdx.y * NT;
  const int col = n0 + 4 * col_group;
  const bool vec = ((n & 3) == 0) && (col + 3 < n) &&
                   (!EPI::FUSED || ((ldb & 3) == 0 && (reinterpret_cast<unsigned long long>(b) & 15) == 0));

  float acc[MT][4];
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < k; k0 += KC) {
    // 1. this thread's U rows of B for the chunk, in registers (issued before the A stage)
    float4 bv[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int kr = k0 + krow + u * KSTEP;
      bv[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (kr < k) {
        const float *row = b + (long long)kr * ldb;
        if (vec) {
          bv[u] = __ldg(reinterpret_cast<const float4 *>(row + col));
        } else {
          if (col < n) bv[u].x = __ldg(row + col);
          if (col + 1 < n) bv[u].y = __ldg(row + col + 1);
          if (col + 2 < n) bv[u].z = __ldg(row + col + 2);
          if (col + 3 < n) bv[u].w = __ldg(row + col + 3);
        }
      }
    }
    // 2. stage A[m0 .. m0+MT) x [k0 .. k0+KC) k-major: As[kk * MT + mm], zero outside
    __syncthreads();  // every thread is done reading the previous chunk
    if (KC % 4 == 0 && (k & 3) == 0 &&
        (!EPI::FUSED || ((lda & 3) == 0 && (reinterpret_cast<unsigned long long>(a) & 15) == 0))) {
      // float4 along k (K % 4 == 0: a vector is wholly inside or outside a row); mm fastest, so a
      // warp reads whole 32-byte sectors of MT rows and the 4 scalar stores hit consecutive banks
      for (int e = t; e < STAGE / 4; e += THREADS) {
        const int mm = e % MT, kq = 4 * (e / MT);
        const int gm = m0 + mm, gk = k0 + kq;
        const float4 v = (gm < m && gk < k) ? __ldg(reinterpret_cast<const float4 *>(a + (long long)gm * lda + gk))
                                            : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        smem[kq * MT + mm] = v.x;
        smem[(kq + 1) * MT + mm] = v.y;
        smem[(kq + 2) * MT + mm] = v.z;
        smem[(kq + 3) * MT + mm] = v.w;
      }
    } else {
      for (int idx = t; idx < STAGE; idx += THREADS) {
        const int mm = idx % MT, kk = idx / MT;
        const int gm = m0 + mm, gk = k0 + kk;
        smem[idx] = (gm < m && gk < k) ? __ldg(a + (long long)gm * lda + gk) : 0.0f;
      }
    }
    __syncthreads();
    // 3. MT x 4 outer product per k row
#pragma unroll
    for (int u = 0; u < U; u++) {
      const float *as = smem + (krow + u * KSTEP) * MT;
      float av[MT];
      if constexpr (MT % 4 == 0) {
#pragma unroll
        for (int i = 0; i < MT; i += 4) {
          const float4 v = *reinterpret_cast<const float4 *>(as + i);
          av[i] = v.x; av[i + 1] = v.y; av[i + 2] = v.z; av[i + 3] = v.w;
        }
      } else {
#pragma unroll
        for (int i = 0; i < MT; i++) av[i] = as[i];
      }
#pragma unroll
      for (int i = 0; i < MT; i++) {
        acc[i][0] += av[i] * bv[u].x;
        acc[i][1] += av[i] * bv[u].y;
        acc[i][2] += av[i] * bv[u].z;
        acc[i][3] += av[i] * bv[u].w;
      }
    }
  }

  // 4. reduce over the R k rows of each warp (lanes col_group + L * j), then over the KW warps
#pragma unroll
  for (int off = L; off < 32; off *= 2)
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) acc[i][j] += __shfl_xor_sync(0xffffffffu, acc[i][j], off);
  __syncthreads();  // the A stage is no longer read: reuse shared memory for the partials
  const int warp = t / 32, lane = t % 32;
  if (lane < L) {
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) smem[(warp * MT + i) * NT + 4 * lane + j] = acc[i][j];
  }
  __syncthreads();
  for (int o = t; o < MT * NT; o += THREADS) {
    const int mm = o / NT, nn = o % NT;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < KW; w++) sum += smem[(w * MT + mm) * NT + nn];
    if constexpr (EPI::FUSED) {
      if (m0 + mm < m && n0 + nn < n) epi.store1(z, m0 + mm, n0 + nn, sum);
    } else {
      if (m0 + mm < m && n0 + nn < n) c[(long long)(m0 + mm) * n + n0 + nn] = sum;
    }
  }
  (void)R;
}

template <int MT, int NT, int KW, int U>
__global__ void __launch_bounds__(32 * KW) gemm_gemv_rows(const float *a, const float *b, float *c, int m, int n,
                                                          int k) {
  gemv_rows_body<MT, NT, KW, U>(a, b, c, m, n, k, k, n, 0);
}

#ifdef GEMMLAB_EPI
// The whole GEMM contract (issue 43), compiled only with -DGEMMLAB_EPI (plugins/gemv_rows.py asks for
// it beyond C = A·B; the plain build above is unchanged, SASS for SASS: tests/test_sass_unchanged.py):
// batch blockIdx.z of C (M x N, pitch ldc, OUT_T) = OUT_T(act(alpha * A·B + beta * C0 + bias))
// (gemmlab/fused.cuh), A (pitch lda) and B (pitch ldb) row-major at z * stride_a / stride_b
// elements (0: shared by all batches), each output's epilogue applied by the one thread that stores it.
#include "gemmlab/fused.cuh"

template <int MT, int NT, int KW, int U, int ACT, int BIAS, int BETA, typename BIAS_T, typename OUT_T>
__global__ void __launch_bounds__(32 * KW)
gemm_gemv_rows_epi(const float *a, const float *b, OUT_T *c, const OUT_T *c0, const BIAS_T *bias, int m, int n, int k,
                   int lda, int ldb, int ldc, int stride_a, int stride_b, int stride_c, float alpha, float beta) {
  const int z = blockIdx.z;
  const gemmlab::Fused<ACT, BIAS, BETA, BIAS_T, OUT_T> epi{c, c0, bias, ldc, stride_c, alpha, beta};
  gemv_rows_body<MT, NT, KW, U>(a + (long long)z * stride_a, b + (long long)z * stride_b, nullptr, m, n, k, lda, ldb,
                                z, epi);
}
#endif  // GEMMLAB_EPI
