// gemmlab built-in kernel "sgemm_pipelined" (ladder rung 4): the warp-tiled kernel of rung 3 fed
// by a STAGES-deep cp.async shared-memory pipeline, an epilogue through shared memory with
// 16-byte stores, a thread-block swizzle for L2 reuse and __launch_bounds__(THREADS, MINB).
//
// Geometry (as sgemm_warptile). Block tile BM x BN, chunk BK; warp w = wy*(BN/WN) + wx owns the
// WM x WN warp tile; lane = lm*LN + ln (LM = WM/TM, LN = WN/TN, LM*LN = 32); a thread owns
//   row(i) = wy*WM + (i/4)*(4*LM) + 4*lm + i%4,   col(j) = wx*WN + (j/4)*(4*LN) + 4*ln + j%4.
//
// Block order (swizzle). A 1-D grid of gm*gn blocks (gm = ceil(M/BM), gn = ceil(N/BN)); block
// pid runs tile (bm, bn) with, for groups of GS block rows:
//   group = pid / (GS*gn), first = group*GS, size = min(gm - first, GS),
//   bm = first + (pid % (GS*gn)) % size, bn = (pid % (GS*gn)) / size.
// Consecutive blocks walk down a column of GS tiles before moving right, so the A rows and B
// columns a wave touches stay in L2 (GS = 1: plain row-major order). A bijection for any GS >= 1.
//
// Pipeline. Shared memory holds STAGES chunks; chunk t lives in stage t % STAGES. A is copied
// element by element (4-byte cp.async) into the transposed As[k][m] (pitch BM+4); B with 16-byte
// cp.async when N % 4 == 0 and B is 16-byte aligned, else with 4-byte copies. Out-of-range
// elements are zero-filled by the copy itself (src-size 0, address clamped to the matrix start).
// Each chunk is one commit group (empty groups keep the count uniform); before chunk t+1 is read,
// cp.async.wait_group(STAGES-2) + one barrier; the copy for chunk t+STAGES-1 is issued at the
// start of chunk t into the stage chunk t-1 used (its last readers passed that barrier).
// Fragments are register double-buffered as in rung 3.
//
// Epilogue. After the main loop (all copies waited, one barrier) each warp reuses its own slice of
// shared memory: per pass it writes 4*LM full rows of its warp tile (pitch WN+4), then reads them
// back row-contiguously and writes 16-byte vectors to C (vector only where N % 4 == 0, C aligned
// and the four columns in range; else masked scalar stores).
// The body, instantiated twice: VEC = 16-byte B copies (N % 4 == 0, B 16-byte aligned), else
// 4-byte copies. (A template function, not a generic lambda: NVRTC 13.0 treats generic lambdas
// as host functions.)
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int GS, bool VEC>
__device__ __forceinline__ void sgemm_pipelined_v1_body(const float *__restrict__ A, const float *__restrict__ B,
                                                     float *__restrict__ C, int M, int N, int K) {
  constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * (BN / WN) * 32;
  constexpr int LM = WM / TM, LN = WN / TN, AP = BM + 4, BP = BN;
  constexpr int A_STAGE = BK * AP, B_STAGE = BK * BP, STAGE = A_STAGE + B_STAGE;
  constexpr int AE = BM * BK / THREADS, BV = BK * BN / 4 / THREADS, CP = WN + 4;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % TM == 0 && WN % TN == 0 && LM * LN == 32, "ownership");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BN % 4 == 0, "float4 fragments and copies");
  static_assert((BM * BK) % THREADS == 0 && (BK * BN / 4) % THREADS == 0 && BK * BN % 4 == 0, "load coverage");
  static_assert(STAGES >= 2 && GS >= 1, "pipeline depth and swizzle group");
  static_assert(THREADS % BK == 0 && THREADS % (BN / 4) == 0, "fixed copy columns per thread");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wy = warp / WARPS_N, wx = warp % WARPS_N, lm = lane / LN, ln = lane % LN;

  const int gm = (M + BM - 1) / BM, gn = (N + BN - 1) / BN;
  const int pid = blockIdx.x, width = GS * gn, group = pid / width, first = group * GS;
  const int size = min(gm - first, GS);
  const int rowBase = (first + (pid % width) % size) * BM, colBase = ((pid % width) / size) * BN;

  const bool vecC = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(C) & 15) == 0);
  const int aRow0 = wy * WM + 4 * lm, bCol0 = wx * WN + 4 * ln;
  const unsigned smemBase = static_cast<unsigned>(__cvta_generic_to_shared(smem));

  // Copy assignment (fixed per thread, THREADS % BK == 0 and THREADS % (BN/4) == 0): A element
  // l is row aR + l*(THREADS/BK), k offset aK; B vector l is k row bK + l*(THREADS/(BN/4)),
  // columns bC .. bC+3. Row/column validity is known once; only the k bound changes per chunk.
  constexpr int A_RSTEP = THREADS / BK, B_KSTEP = THREADS / (BN / 4);
  const int aK = tid % BK, aR = tid / BK, bK = tid / (BN / 4), bC = 4 * (tid % (BN / 4));
  const float *aSrc = A + (long long)min(rowBase + aR, M - 1) * K + aK;
  const long long aStep = (long long)A_RSTEP * K;
  unsigned aRowOk = 0;
#pragma unroll
  for (int l = 0; l < AE; ++l) aRowOk |= (rowBase + aR + l * A_RSTEP < M ? 1u : 0u) << l;
  const float *bSrc = B + (long long)bK * N + colBase + bC;
  const long long bStep = (long long)B_KSTEP * N;
  const unsigned aDst = smemBase + 4u * (unsigned)(aK * AP + aR);
  const unsigned bDst = smemBase + 4u * (unsigned)(A_STAGE + bK * BP + bC);

  auto issue = [&](int chunk) {
    const int k0 = chunk * BK;
    const unsigned stage = 4u * (unsigned)((chunk % STAGES) * STAGE);
    const bool aKOk = k0 + aK < K;
#pragma unroll
    for (int l = 0; l < AE; ++l) {
      const bool ok = aKOk && ((aRowOk >> l) & 1u);
      const float *src = ok ? aSrc + l * aStep + k0 : A;
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                   :: "r"(aDst + stage + 4u * (unsigned)(l * A_RSTEP)), "l"(src), "r"(ok ? 4 : 0));
    }
#pragma unroll
    for (int l = 0; l < BV; ++l) {
      const bool kOk = k0 + bK + l * B_KSTEP < K;
      const float *row = bSrc + l * bStep + (long long)k0 * N;
      const unsigned dst = bDst + stage + 4u * (unsigned)(l * B_KSTEP * BP);
      if (VEC) {
        const bool ok = kOk && colBase + bC < N;  // N % 4 == 0: the four columns are all in or all out
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                     :: "r"(dst), "l"(ok ? row : B), "r"(ok ? 16 : 0));
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const bool ok = kOk && colBase + bC + q < N;
          asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                       :: "r"(dst + 4u * q), "l"(ok ? row + q : B), "r"(ok ? 4 : 0));
        }
      }
    }
  };

  float fa[2][TM], fb[2][TN];
  auto loadFragments = [&](int chunk, int k, int slot) {
    const float *as = smem + (chunk % STAGES) * STAGE + k * AP;
    const float *bs = smem + (chunk % STAGES) * STAGE + A_STAGE + k * BP;
#pragma unroll
    for (int i = 0; i < TM / 4; ++i) {
      const float4 a = *reinterpret_cast<const float4 *>(&as[aRow0 + i * 4 * LM]);
      fa[slot][4 * i] = a.x; fa[slot][4 * i + 1] = a.y; fa[slot][4 * i + 2] = a.z; fa[slot][4 * i + 3] = a.w;
    }
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) {
      const float4 b = *reinterpret_cast<const float4 *>(&bs[bCol0 + j * 4 * LN]);
      fb[slot][4 * j] = b.x; fb[slot][4 * j + 1] = b.y; fb[slot][4 * j + 2] = b.z; fb[slot][4 * j + 3] = b.w;
    }
  };

  float acc[TM][TN] = {};
  const int chunks = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < chunks) issue(s);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
  __syncthreads();
  loadFragments(0, 0, 0);

  for (int kt = 0; kt < chunks; ++kt) {
    if (kt + STAGES - 1 < chunks) issue(kt + STAGES - 1);
    asm volatile("cp.async.commit_group;\n" ::);
    const bool more = kt + 1 < chunks;  // uniform across the block
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k < BK - 1) {
        loadFragments(kt, k + 1, (k + 1) & 1);
      } else if (more) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
        __syncthreads();  // chunk kt+1 landed for every thread; chunk kt is no longer read
        loadFragments(kt + 1, 0, (k + 1) & 1);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += fa[k & 1][i] * fb[k & 1][j];
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
  __syncthreads();  // shared memory is reused by the epilogue

  float *cs = smem + warp * (4 * LM * CP);
#pragma unroll
  for (int p = 0; p < TM / 4; ++p) {
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int j = 0; j < TN / 4; ++j)
        *reinterpret_cast<float4 *>(&cs[(4 * lm + r) * CP + j * 4 * LN + 4 * ln]) =
            make_float4(acc[4 * p + r][4 * j], acc[4 * p + r][4 * j + 1], acc[4 * p + r][4 * j + 2],
                        acc[4 * p + r][4 * j + 3]);
    __syncwarp();
#pragma unroll
    for (int q = 0; q < TN; ++q) {
      const int idx = lane + 32 * q, r = idx / (WN / 4), c = 4 * (idx % (WN / 4));
      const int gr = rowBase + wy * WM + p * 4 * LM + r, gc = colBase + wx * WN + c;
      const float4 v = *reinterpret_cast<const float4 *>(&cs[r * CP + c]);
      if (vecC && gr < M && gc + 4 <= N) {
        *reinterpret_cast<float4 *>(&C[(long long)gr * N + gc]) = v;
      } else if (gr < M) {
        if (gc + 0 < N) C[(long long)gr * N + gc + 0] = v.x;
        if (gc + 1 < N) C[(long long)gr * N + gc + 1] = v.y;
        if (gc + 2 < N) C[(long long)gr * N + gc + 2] = v.z;
        if (gc + 3 < N) C[(long long)gr * N + gc + 3] = v.w;
      }
    }
    __syncwarp();  // the slice is read before the next pass overwrites it
  }
}

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int GS, int MINB>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MINB)
gemm_sgemm_pipelined_v1(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                     int M, int N, int K) {
  if ((N % 4 == 0) && ((reinterpret_cast<unsigned long long>(B) & 15) == 0))
    sgemm_pipelined_v1_body<BM, BN, BK, WM, WN, TM, TN, STAGES, GS, true>(A, B, C, M, N, K);
  else
    sgemm_pipelined_v1_body<BM, BN, BK, WM, WN, TM, TN, STAGES, GS, false>(A, B, C, M, N, K);
}
