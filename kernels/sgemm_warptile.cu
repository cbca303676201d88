// gemmlab built-in kernel "sgemm_warptile" (ladder rung 3): warp tiling, register double-buffered
// fragments, double-buffered shared memory fed through registers.
//
// Geometry. Block tile BM x BN, chunk BK; (BM/WM) x (BN/WN) warps, warp w = wy*(BN/WN) + wx owns
// the WM x WN warp tile at (wy*WM, wx*WN). Inside a warp, lane = lm*LN + ln with LM = WM/TM lane
// rows and LN = WN/TN lane columns (LM*LN = 32). A thread owns TM x TN outputs in 4x4 pieces:
//   row(i) = wy*WM + (i/4)*(4*LM) + 4*lm + i%4,   col(j) = wx*WN + (j/4)*(4*LN) + 4*ln + j%4,
// so for one k a warp's fragment reads are LM (or LN) consecutive 16-byte vectors (LDS.128, no
// bank conflicts, broadcast across the other lane index) and every output has one owner.
//
// Pipeline. Two shared buffers; while a chunk is computed from one, the next chunk's float4 global
// loads are in flight into registers and are stored into the other buffer after the math (one
// barrier per chunk). Fragments are double-buffered in registers: the fragments of step k+1 (and
// of step 0 of the next chunk, right after the barrier) are read while step k's FMAs run.
// A is staged transposed (As[k][m], pitch BM+4 so the transposing stores spread over the banks).
//
// Alignment guard and edges exactly as sgemm_block2d: float4 global accesses only where the row
// stride is a multiple of 4 floats, the pointer is 16-byte aligned and all four are in range;
// otherwise a scalar path with one bound check per element (zero-padded loads, masked stores).
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
gemm_sgemm_warptile(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                    int M, int N, int K) {
  constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * (BN / WN) * 32;
  constexpr int LM = WM / TM, LN = WN / TN, AP = BM + 4;
  constexpr int AV = BM * BK / 4 / THREADS, BV = BK * BN / 4 / THREADS;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % TM == 0 && WN % TN == 0 && LM * LN == 32, "ownership");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 fragments and loads");
  static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "load coverage");
  __shared__ __align__(16) float As[2][BK][AP];
  __shared__ __align__(16) float Bs[2][BK][BN];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wy = warp / WARPS_N, wx = warp % WARPS_N, lm = lane / LN, ln = lane % LN;
  const int rowBase = blockIdx.y * BM, colBase = blockIdx.x * BN;
  const bool vecA = (K % 4 == 0) && ((reinterpret_cast<unsigned long long>(A) & 15) == 0);
  const bool vecB = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(B) & 15) == 0);
  const bool vecC = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(C) & 15) == 0);
  const int aRow0 = wy * WM + 4 * lm, bCol0 = wx * WN + 4 * ln;

  float4 ra[AV], rb[BV];
  auto loadGlobal = [&](int k0) {
#pragma unroll
    for (int l = 0; l < AV; ++l) {
      const int v = tid + l * THREADS, r = v / (BK / 4), kk = 4 * (v % (BK / 4));
      const int gr = rowBase + r, gk = k0 + kk;
      if (vecA && gr < M && gk + 4 <= K) {
        ra[l] = *reinterpret_cast<const float4 *>(&A[(long long)gr * K + gk]);
      } else {
        const bool rowOk = gr < M;
        const long long base = (long long)(rowOk ? gr : 0) * K;
        ra[l].x = (rowOk && gk + 0 < K) ? A[base + gk + 0] : 0.0f;
        ra[l].y = (rowOk && gk + 1 < K) ? A[base + gk + 1] : 0.0f;
        ra[l].z = (rowOk && gk + 2 < K) ? A[base + gk + 2] : 0.0f;
        ra[l].w = (rowOk && gk + 3 < K) ? A[base + gk + 3] : 0.0f;
      }
    }
#pragma unroll
    for (int l = 0; l < BV; ++l) {
      const int v = tid + l * THREADS, kk = v / (BN / 4), c = 4 * (v % (BN / 4));
      const int gk = k0 + kk, gc = colBase + c;
      if (vecB && gk < K && gc + 4 <= N) {
        rb[l] = *reinterpret_cast<const float4 *>(&B[(long long)gk * N + gc]);
      } else {
        const bool rowOk = gk < K;
        const long long base = (long long)(rowOk ? gk : 0) * N;
        rb[l].x = (rowOk && gc + 0 < N) ? B[base + gc + 0] : 0.0f;
        rb[l].y = (rowOk && gc + 1 < N) ? B[base + gc + 1] : 0.0f;
        rb[l].z = (rowOk && gc + 2 < N) ? B[base + gc + 2] : 0.0f;
        rb[l].w = (rowOk && gc + 3 < N) ? B[base + gc + 3] : 0.0f;
      }
    }
  };
  auto storeShared = [&](int buf) {
#pragma unroll
    for (int l = 0; l < AV; ++l) {
      const int v = tid + l * THREADS, r = v / (BK / 4), kk = 4 * (v % (BK / 4));
      As[buf][kk + 0][r] = ra[l].x;
      As[buf][kk + 1][r] = ra[l].y;
      As[buf][kk + 2][r] = ra[l].z;
      As[buf][kk + 3][r] = ra[l].w;
    }
#pragma unroll
    for (int l = 0; l < BV; ++l) {
      const int v = tid + l * THREADS, kk = v / (BN / 4), c = 4 * (v % (BN / 4));
      *reinterpret_cast<float4 *>(&Bs[buf][kk][c]) = rb[l];
    }
  };
  float fa[2][TM], fb[2][TN];
  auto loadFragments = [&](int buf, int k, int slot) {
#pragma unroll
    for (int i = 0; i < TM / 4; ++i) {
      const float4 a = *reinterpret_cast<const float4 *>(&As[buf][k][aRow0 + i * 4 * LM]);
      fa[slot][4 * i] = a.x; fa[slot][4 * i + 1] = a.y; fa[slot][4 * i + 2] = a.z; fa[slot][4 * i + 3] = a.w;
    }
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) {
      const float4 b = *reinterpret_cast<const float4 *>(&Bs[buf][k][bCol0 + j * 4 * LN]);
      fb[slot][4 * j] = b.x; fb[slot][4 * j + 1] = b.y; fb[slot][4 * j + 2] = b.z; fb[slot][4 * j + 3] = b.w;
    }
  };

  float acc[TM][TN] = {};
  const int chunks = (K + BK - 1) / BK;
  loadGlobal(0);
  storeShared(0);
  __syncthreads();
  loadFragments(0, 0, 0);
  for (int kt = 0; kt < chunks; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < chunks;  // uniform across the block
    if (more) loadGlobal((kt + 1) * BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k < BK - 1) {
        loadFragments(cur, k + 1, (k + 1) & 1);
      } else if (more) {
        storeShared(cur ^ 1);  // that buffer's last readers passed the previous barrier
        __syncthreads();       // the next chunk is visible; this chunk is no longer read
        loadFragments(cur ^ 1, 0, (k + 1) & 1);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += fa[k & 1][i] * fb[k & 1][j];
    }
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int gr = rowBase + aRow0 + (i / 4) * 4 * LM + i % 4;
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) {
      const int gc = colBase + bCol0 + j * 4 * LN;
      if (vecC && gr < M && gc + 4 <= N) {
        *reinterpret_cast<float4 *>(&C[(long long)gr * N + gc]) =
            make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]);
      } else if (gr < M) {
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (gc + q < N) C[(long long)gr * N + gc + q] = acc[i][4 * j + q];
      }
    }
  }
}
