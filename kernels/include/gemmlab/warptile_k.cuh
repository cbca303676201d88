// gemmlab/warptile_k.cuh: the warp-tiled inner tile of the built-in kernels splitk_warptile and
// streamk (kernels/splitk_warptile.cu, kernels/streamk.cu), a copy of the ladder's rung 3
// (kernels/sgemm_warptile.cu) so that tuning that rung never changes them: warp tiles WM x WN, each
// thread's TM x TN outputs in 4x4 pieces (conflict-free LDS.128), register double-buffered
// fragments, double-buffered shared memory fed through registers, float4 global loads behind an
// alignment guard with a scalar edge path. The only change: a block reduces a K range
// [kBegin, kEnd) that starts on a BK chunk (wt_accumulate), and the tile can be stored to C or to
// a workspace (wt_store). Header-only, NVRTC-safe.
#pragma once

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN>
struct WarpTileShape {
  static constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * (BN / WN) * 32;
  static constexpr int LM = WM / TM, LN = WN / TN, AP = BM + 4;
  static constexpr int AV = BM * BK / 4 / THREADS, BV = BK * BN / 4 / THREADS;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % TM == 0 && WN % TN == 0 && LM * LN == 32, "ownership");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 fragments and loads");
  static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "load coverage");
};

/// acc = A[rowBase:+BM, kBegin:kEnd] . B[kBegin:kEnd, colBase:+BN] for this thread's TM x TN
/// outputs (kBegin a multiple of BK; elements past M, N or kEnd read as zero). Starts with a
/// barrier, so the shared buffers may be reused from one call to the next. Uniform per block.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN>
__device__ __forceinline__ void wt_accumulate(const float *__restrict__ A, const float *__restrict__ B, int M, int N,
                                              int K, int rowBase, int colBase, int kBegin, int kEnd,
                                              float (&As)[2][BK][BM + 4], float (&Bs)[2][BK][BN],
                                              float (&acc)[TM][TN]) {
  using S = WarpTileShape<BM, BN, BK, WM, WN, TM, TN>;
  constexpr int THREADS = S::THREADS, LM = S::LM, LN = S::LN, AV = S::AV, BV = S::BV;
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  if (kBegin >= kEnd) return;  // empty range (uniform across the block)
  __syncthreads();             // the previous call's readers of As/Bs are done

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wy = warp / S::WARPS_N, wx = warp % S::WARPS_N, lm = lane / LN, ln = lane % LN;
  const bool vecA = (K % 4 == 0) && ((reinterpret_cast<unsigned long long>(A) & 15) == 0);
  const bool vecB = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(B) & 15) == 0);
  const int aRow0 = wy * WM + 4 * lm, bCol0 = wx * WN + 4 * ln;

  float4 ra[AV], rb[BV];
  auto loadGlobal = [&](int k0) {
#pragma unroll
    for (int l = 0; l < AV; ++l) {
      const int v = tid + l * THREADS, r = v / (BK / 4), kk = 4 * (v % (BK / 4));
      const int gr = rowBase + r, gk = k0 + kk;
      if (vecA && gr < M && gk + 4 <= kEnd) {
        ra[l] = *reinterpret_cast<const float4 *>(&A[(long long)gr * K + gk]);
      } else {
        const bool rowOk = gr < M;
        const long long base = (long long)(rowOk ? gr : 0) * K;
        ra[l].x = (rowOk && gk + 0 < kEnd) ? A[base + gk + 0] : 0.0f;
        ra[l].y = (rowOk && gk + 1 < kEnd) ? A[base + gk + 1] : 0.0f;
        ra[l].z = (rowOk && gk + 2 < kEnd) ? A[base + gk + 2] : 0.0f;
        ra[l].w = (rowOk && gk + 3 < kEnd) ? A[base + gk + 3] : 0.0f;
      }
    }
#pragma unroll
    for (int l = 0; l < BV; ++l) {
      const int v = tid + l * THREADS, kk = v / (BN / 4), c = 4 * (v % (BN / 4));
      const int gk = k0 + kk, gc = colBase + c;
      if (vecB && gk < kEnd && gc + 4 <= N) {
        rb[l] = *reinterpret_cast<const float4 *>(&B[(long long)gk * N + gc]);
      } else {
        const bool rowOk = gk < kEnd;
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

  const int chunks = (kEnd - kBegin + BK - 1) / BK;
  loadGlobal(kBegin);
  storeShared(0);
  __syncthreads();
  loadFragments(0, 0, 0);
  for (int kt = 0; kt < chunks; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < chunks;  // uniform across the block
    if (more) loadGlobal(kBegin + (kt + 1) * BK);
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
}

/// Store this thread's TM x TN outputs of a tile at (rowBase, colBase) of a rows x cols matrix with
/// row stride ld (elements past rows/cols masked); float4 where ``vec`` and all four are in range.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN>
__device__ __forceinline__ void wt_store(float *__restrict__ D, long long ld, int rows, int cols, int rowBase,
                                         int colBase, bool vec, const float (&acc)[TM][TN]) {
  using S = WarpTileShape<BM, BN, BK, WM, WN, TM, TN>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wy = warp / S::WARPS_N, wx = warp % S::WARPS_N, lm = lane / S::LN, ln = lane % S::LN;
  const int aRow0 = wy * WM + 4 * lm, bCol0 = wx * WN + 4 * ln;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int gr = rowBase + aRow0 + (i / 4) * 4 * S::LM + i % 4;
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) {
      const int gc = colBase + bCol0 + j * 4 * S::LN;
      if (vec && gr < rows && gc + 4 <= cols) {
        *reinterpret_cast<float4 *>(&D[gr * ld + gc]) =
            make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]);
      } else if (gr < rows) {
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (gc + q < cols) D[gr * ld + gc + q] = acc[i][4 * j + q];
      }
    }
  }
}
