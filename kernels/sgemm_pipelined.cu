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
// element by element (4-byte cp.async) into the transposed As[k][m] (pitch BM+4); a column-major A
// (entry gemm_sgemm_pipelined_acol, issue 43: A[m][k] at m + k*M, stored K x M) is already in that
// order and is copied like B, 16-byte cp.async of four consecutive m of one k row (A float4 l of a
// thread: k row aKc + l*(THREADS/(BM/4)), m columns aC..aC+3) where M % 4 == 0 and A and B are
// 16-byte aligned, else 4-byte copies; B with 16-byte
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
// Addressing (what keeps the hot loop lean under NVRTC 13.0 too). Shared memory is addressed
// with 32-bit byte offsets: each thread keeps one fragment base per matrix and one read-stage and
// one write-stage offset, so every LDS.128 and cp.async destination is [register + constant].
// Blocks whose tile lies inside M x N (and whose k offsets fit 32 bits) run the unguarded copy:
// one running pointer per matrix, the copy of element l at pointer + l * (32-bit step), no
// predicates. The K remainder goes into the FIRST chunk (chunk c covers k in
// [c*BK - pad, (c+1)*BK - pad), pad = (-K) mod BK), so only the prologue's copy of chunk 0 is
// guarded there. Edge blocks, and B with N % 4 != 0 or a misaligned base, take the guarded copy
// for every chunk. Under NVRTC 13.0 this cut the interior hot loop's non-FFMA instructions per
// 16-k chunk from 164 to 42 at 128x256 (docs/results/ladder-h200.md).
// The body is a template function, not a generic lambda (NVRTC 13.0 treats generic lambdas as
// host functions); instantiated as (VEC, GUARD) = (16-byte B, interior), (16-byte B, edge),
// (4-byte B, guarded); ACOL = true for the column-major A (VEC then covers A's copies too), false
// for the row-major A (the code of before: the same instructions).
__device__ __forceinline__ float4 sgemm_lds128(unsigned addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr) : "memory");
  return v;
}

/// The plain contract's store (C = A·B, float32, row pitch N): the body's own code below.
struct SgemmPlainStore {
  static constexpr bool FUSED = false;
};

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, bool VEC, bool GUARD, bool LEAN,
          bool ACOL = false, class EPI = SgemmPlainStore>
__device__ __forceinline__ void sgemm_pipelined_body(const float *__restrict__ A, const float *__restrict__ B,
                                                     float *__restrict__ C, int M, int N, int K, int lda, int ldb,
                                                     int rowBase, int colBase, const EPI &epi = EPI()) {
  constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * (BN / WN) * 32;
  constexpr int LM = WM / TM, LN = WN / TN, AP = BM + 4, BP = BN;
  constexpr int A_STAGE = BK * AP, B_STAGE = BK * BP, STAGE = A_STAGE + B_STAGE;
  constexpr int AE = BM * BK / THREADS, BV = BK * BN / 4 / THREADS, CP = WN + 4;
  constexpr unsigned STAGE_B = 4u * STAGE, PIPE_B = STAGES * STAGE_B;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % TM == 0 && WN % TN == 0 && LM * LN == 32, "ownership");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BN % 4 == 0, "float4 fragments and copies");
  static_assert((BM * BK) % THREADS == 0 && (BK * BN / 4) % THREADS == 0 && BK * BN % 4 == 0, "load coverage");
  static_assert(STAGES >= 2, "pipeline depth");
  static_assert(THREADS % BK == 0 && THREADS % (BN / 4) == 0, "fixed copy columns per thread");
  // column-major A: float4 copies of four consecutive m (as B's of four consecutive n)
  constexpr int AV = ACOL ? BK * BM / 4 / THREADS : 0, A_KSTEP = ACOL ? THREADS / (BM / 4) : 1;
  static_assert(!ACOL || (BM % 4 == 0 && (BK * BM / 4) % THREADS == 0 && THREADS % (BM / 4) == 0),
                "column-major A: the float4 copies cover the A tile, fixed m columns per thread");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wy = warp / WARPS_N, wx = warp % WARPS_N, lm = lane / LN, ln = lane % LN;
  const bool vecC = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(C) & 15) == 0);
  const unsigned smemBase = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const unsigned aFrag = smemBase + 4u * (unsigned)(wy * WM + 4 * lm);
  const unsigned bFrag = smemBase + 4u * (unsigned)(A_STAGE + wx * WN + 4 * ln);

  // Copy assignment (fixed per thread, THREADS % BK == 0 and THREADS % (BN/4) == 0): A element
  // l is row aR + l*(THREADS/BK), k offset aK; B vector l is k row bK + l*(THREADS/(BN/4)),
  // columns bC .. bC+3.
  constexpr int A_RSTEP = THREADS / BK, B_KSTEP = THREADS / (BN / 4);
  const int aK = tid % BK, aR = tid / BK, bK = tid / (BN / 4), bC = 4 * (tid % (BN / 4));
  const unsigned aDst = smemBase + 4u * (unsigned)(aK * AP + aR);
  const unsigned bDst = smemBase + 4u * (unsigned)(A_STAGE + bK * BP + bC);
  const int aStep = A_RSTEP * lda, bStep = B_KSTEP * ldb;  // int: GUARD is set where they could overflow
  // column-major A: float4 l of this thread is k row aKc + l*A_KSTEP, m columns aC .. aC+3
  const int aKc = ACOL ? tid / (BM / 4) : 0, aC = ACOL ? 4 * (tid % (BM / 4)) : 0;
  const unsigned aDstC = smemBase + 4u * (unsigned)(aKc * AP + aC);
  const int aStepC = A_KSTEP * lda;
  // the next chunk's copy sources (unguarded path): A row rowBase+aR at k = aK (column-major A: k row
  // aKc, m column rowBase+aC), B k row bK
  const int chunks = (K + BK - 1) / BK, pad = chunks * BK - K;
  const float *aNext = ACOL ? A + (long long)(aKc - pad) * lda + rowBase + aC : A + (long long)(rowBase + aR) * lda + aK - pad;
  const float *bNext = B + (long long)(bK - pad) * ldb + colBase + bC;

  // Guarded copy of chunk `chunk` (zero-fill outside M x K / K x N, sources clamped to the matrix start).
  auto issueGuarded = [&](int chunk, unsigned wr) {
    const int k0 = chunk * BK - pad;
    if constexpr (ACOL) {
#pragma unroll
      for (int l = 0; l < AV; ++l) {
        const int kr = k0 + aKc + l * A_KSTEP;
        const bool kOk = kr >= 0 && kr < K;
        const float *row = A + (long long)(kOk ? kr : 0) * lda + rowBase + aC;
        const unsigned dst = aDstC + wr + 4u * (unsigned)(l * A_KSTEP * AP);
        if (VEC) {
          const bool ok = kOk && rowBase + aC < M;  // M % 4 == 0: the four rows are all in or all out
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                       :: "r"(dst), "l"(ok ? row : A), "r"(ok ? 16 : 0));
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const bool ok = kOk && rowBase + aC + q < M;
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                         :: "r"(dst + 4u * q), "l"(ok ? row + q : A), "r"(ok ? 4 : 0));
          }
        }
      }
    }
    const bool aKOk = k0 + aK >= 0 && k0 + aK < K;
#pragma unroll
    for (int l = 0; l < AE * !ACOL; ++l) {
      const int row = rowBase + aR + l * A_RSTEP;
      const bool ok = aKOk && row < M;
      const float *src = ok ? A + (long long)row * lda + k0 + aK : A;
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                   :: "r"(aDst + wr + 4u * (unsigned)(l * A_RSTEP)), "l"(src), "r"(ok ? 4 : 0));
    }
#pragma unroll
    for (int l = 0; l < BV; ++l) {
      const int kr = k0 + bK + l * B_KSTEP;
      const bool kOk = kr >= 0 && kr < K;
      const float *row = B + (long long)(kOk ? kr : 0) * ldb + colBase + bC;
      const unsigned dst = bDst + wr + 4u * (unsigned)(l * B_KSTEP * BP);
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
  // The same copy in fewer registers (LEAN: instances with a tight register budget, where the form
  // above spills in the edge paths, e.g. 128 registers at 256 threads x 2 blocks/SM). It walks the
  // unguarded copy's running pointers: chunk c >= 1 lies inside [0, K), so only `first` (chunk 0,
  // k from -pad) tests k, from the matrix start; rows and columns are tested against per-thread
  // counts; 64-bit steps (edge blocks also take this path where 32-bit ones could overflow). Not
  // used at larger budgets: under NVRTC 13.0 it costs the interior main loop 5-7 instructions per
  // chunk, though that loop does not call it.
  const int aRows = M - rowBase - aR;  // A element l is inside M iff l * A_RSTEP < aRows
  const int bCols = N - colBase - bC;  // B column bC + q is inside N iff q < bCols
  const int aColsM = M - rowBase - aC;  // column-major A: m column aC + q is inside M iff q < aColsM
  auto issueGuardedLean = [&](unsigned wr, bool first) {
    if constexpr (ACOL) {
#pragma unroll
      for (int l = 0; l < AV; ++l) {
        const bool kOk = !first || aKc + l * A_KSTEP >= pad;
        const int kr = aKc + l * A_KSTEP - pad;  // k row in chunk 0
        const float *row = first ? A + (long long)(kOk ? kr : 0) * lda + rowBase + aC
                                 : aNext + (long long)(l * A_KSTEP) * lda;
        const unsigned dst = aDstC + wr + 4u * (unsigned)(l * A_KSTEP * AP);
        if (VEC) {
          const bool ok = kOk && aColsM > 0;  // M % 4 == 0: the four rows are all in or all out
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                       :: "r"(dst), "l"(ok ? row : A), "r"(ok ? 16 : 0));
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const bool ok = kOk && q < aColsM;
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                         :: "r"(dst + 4u * q), "l"(ok ? row + q : A), "r"(ok ? 4 : 0));
          }
        }
      }
    }
    const bool aKOk = !first || aK >= pad;
#pragma unroll
    for (int l = 0; l < AE * !ACOL; ++l) {
      const bool ok = aKOk && l * A_RSTEP < aRows;
      const float *at = first ? A + (long long)(rowBase + aR + l * A_RSTEP) * lda + aK - pad
                              : aNext + (long long)(l * A_RSTEP) * lda;
      const float *src = ok ? at : A;
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                   :: "r"(aDst + wr + 4u * (unsigned)(l * A_RSTEP)), "l"(src), "r"(ok ? 4 : 0));
    }
#pragma unroll
    for (int l = 0; l < BV; ++l) {
      const bool kOk = !first || bK + l * B_KSTEP >= pad;
      const int kr = bK + l * B_KSTEP - pad;  // k row in chunk 0
      const float *row = first ? B + (long long)(kOk ? kr : 0) * ldb + colBase + bC
                               : bNext + (long long)(l * B_KSTEP) * ldb;
      const unsigned dst = bDst + wr + 4u * (unsigned)(l * B_KSTEP * BP);
      if (VEC) {
        const bool ok = kOk && bCols > 0;  // N % 4 == 0: the four columns are all in or all out
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                     :: "r"(dst), "l"(ok ? row : B), "r"(ok ? 16 : 0));
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const bool ok = kOk && q < bCols;
          asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                       :: "r"(dst + 4u * q), "l"(ok ? row + q : B), "r"(ok ? 4 : 0));
        }
      }
    }
  };
  // Unguarded copy of the next chunk (the block tile is inside M x N and the chunk inside K).
  auto issueFull = [&](unsigned wr) {
#pragma unroll
    for (int l = 0; l < AV; ++l)  // column-major A
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                   :: "r"(aDstC + wr + 4u * (unsigned)(l * A_KSTEP * AP)), "l"(aNext + l * aStepC));
#pragma unroll
    for (int l = 0; l < AE * !ACOL; ++l)
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n"
                   :: "r"(aDst + wr + 4u * (unsigned)(l * A_RSTEP)), "l"(aNext + l * aStep));
#pragma unroll
    for (int l = 0; l < BV; ++l)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                   :: "r"(bDst + wr + 4u * (unsigned)(l * B_KSTEP * BP)), "l"(bNext + l * bStep));
  };
  // Chunk c covers k in [c*BK - pad, (c+1)*BK - pad), pad = (-K) mod BK: only chunk 0 reaches
  // outside [0, K) (its first pad k are zero-filled), so every later chunk of an interior block
  // takes the unguarded copy.
  auto issue = [&](int chunk, unsigned wr, bool first) {
    if (GUARD || !VEC || (first && pad != 0)) {
      if constexpr (LEAN) issueGuardedLean(wr, first);
      else issueGuarded(chunk, wr);
    }
    else issueFull(wr);
    if constexpr (ACOL) aNext += (long long)BK * lda;
    else aNext += BK;
    bNext += (long long)BK * ldb;
  };

  float fa[2][TM], fb[2][TN];
  auto loadFragments = [&](unsigned rd, int k, int slot) {
    const unsigned a = aFrag + rd + 4u * (unsigned)(k * AP), b = bFrag + rd + 4u * (unsigned)(k * BP);
#pragma unroll
    for (int i = 0; i < TM / 4; ++i) {
      const float4 v = sgemm_lds128(a + 16u * (unsigned)(i * LM));
      fa[slot][4 * i] = v.x; fa[slot][4 * i + 1] = v.y; fa[slot][4 * i + 2] = v.z; fa[slot][4 * i + 3] = v.w;
    }
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) {
      const float4 v = sgemm_lds128(b + 16u * (unsigned)(j * LN));
      fb[slot][4 * j] = v.x; fb[slot][4 * j + 1] = v.y; fb[slot][4 * j + 2] = v.z; fb[slot][4 * j + 3] = v.w;
    }
  };

  float acc[TM][TN] = {};
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < chunks) issue(s, s * STAGE_B, s == 0);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
  __syncthreads();
  unsigned rd = 0, wr = (STAGES - 1) * STAGE_B;  // byte offsets of the stage read and the stage written next
  loadFragments(rd, 0, 0);

  for (int kt = 0; kt < chunks; ++kt) {
    if (kt + STAGES - 1 < chunks) issue(kt + STAGES - 1, wr, false);
    asm volatile("cp.async.commit_group;\n" ::);
    wr = (wr + STAGE_B == PIPE_B) ? 0u : wr + STAGE_B;
    const unsigned nrd = (rd + STAGE_B == PIPE_B) ? 0u : rd + STAGE_B;
    const bool more = kt + 1 < chunks;  // uniform across the block
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k < BK - 1) {
        loadFragments(rd, k + 1, (k + 1) & 1);
      } else if (more) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
        __syncthreads();  // chunk kt+1 landed for every thread; chunk kt is no longer read
        loadFragments(nrd, 0, (k + 1) & 1);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += fa[k & 1][i] * fb[k & 1][j];
    }
    rd = nrd;
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
      if constexpr (EPI::FUSED) {
        epi.store4(blockIdx.z, M, N, gr, gc, v);
      } else if (vecC && gr < M && gc + 4 <= N) {
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
gemm_sgemm_pipelined(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                     int M, int N, int K) {
  static_assert(GS >= 1, "swizzle group");
  const int gm = (M + BM - 1) / BM, gn = (N + BN - 1) / BN;
  const int pid = blockIdx.x, width = GS * gn, group = pid / width, first = group * GS;
  const int size = min(gm - first, GS);
  const int rowBase = (first + (pid % width) % size) * BM, colBase = ((pid % width) / size) * BN;
  // the lean guarded copy where the register budget per thread (65536 / (threads * MINB)) is under 160
  constexpr bool LEAN = 65536 / ((BM / WM) * (BN / WN) * 32 * MINB) < 160;
  const bool vecB = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(B) & 15) == 0);
  const bool edge = rowBase + BM > M || colBase + BN > N || (long long)BM * K >= (1ll << 31) ||
                    (long long)BK * N >= (1ll << 31);
  if (vecB && !edge)
    sgemm_pipelined_body<BM, BN, BK, WM, WN, TM, TN, STAGES, true, false, LEAN>(A, B, C, M, N, K, K, N, rowBase, colBase);
  else if (vecB)
    sgemm_pipelined_body<BM, BN, BK, WM, WN, TM, TN, STAGES, true, true, LEAN>(A, B, C, M, N, K, K, N, rowBase, colBase);
  else
    sgemm_pipelined_body<BM, BN, BK, WM, WN, TM, TN, STAGES, false, true, LEAN>(A, B, C, M, N, K, K, N, rowBase, colBase);
}

/// The same kernel for a column-major A (issue 43: A[m][k] at A[m + k*M], stored K x M): A's chunks are
/// copied like B's (16-byte cp.async of four consecutive m where M % 4 == 0 and A is 16-byte aligned,
/// else 4-byte copies), into the same As[k][m]; everything after the copy is the row-major A's code.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int GS, int MINB>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MINB)
gemm_sgemm_pipelined_acol(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                          int M, int N, int K) {
  static_assert(GS >= 1, "swizzle group");
  const int gm = (M + BM - 1) / BM, gn = (N + BN - 1) / BN;
  const int pid = blockIdx.x, width = GS * gn, group = pid / width, first = group * GS;
  const int size = min(gm - first, GS);
  const int rowBase = (first + (pid % width) % size) * BM, colBase = ((pid % width) / size) * BN;
  constexpr bool LEAN = 65536 / ((BM / WM) * (BN / WN) * 32 * MINB) < 160;
  const bool vec = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(B) & 15) == 0) && (M % 4 == 0) &&
                   ((reinterpret_cast<unsigned long long>(A) & 15) == 0);
  const bool edge = rowBase + BM > M || colBase + BN > N || (long long)BK * M >= (1ll << 31) ||
                    (long long)BK * N >= (1ll << 31);
  if (vec && !edge)
    sgemm_pipelined_body<BM, BN, BK, WM, WN, TM, TN, STAGES, true, false, LEAN, true>(A, B, C, M, N, K, M, N, rowBase, colBase);
  else if (vec)
    sgemm_pipelined_body<BM, BN, BK, WM, WN, TM, TN, STAGES, true, true, LEAN, true>(A, B, C, M, N, K, M, N, rowBase, colBase);
  else
    sgemm_pipelined_body<BM, BN, BK, WM, WN, TM, TN, STAGES, false, true, LEAN, true>(A, B, C, M, N, K, M, N, rowBase, colBase);
}

#ifdef GEMMLAB_EPI
// The whole GEMM contract (issue 43), compiled only with -DGEMMLAB_EPI (plugins/sgemm.py asks for
// it for a problem beyond C = A·B, so the plain build above is the same program, SASS for SASS:
// tests/test_sass_unchanged.py). Batch blockIdx.z of C (M x N, row pitch ldc, OUT_T) =
// OUT_T(act(alpha * A·B + beta * C0 + bias)) (gemmlab/fused.cuh): A row-major (pitch lda >= K) or,
// ACOL, column-major (stored K x M, pitch lda >= M), B row-major (pitch ldb >= N), batch z's at
// z * stride_a / stride_b elements (0: one shared by all batches), C and C0 at z * stride_c. The
// main loop is the plain kernel's with the pitches in place of K / M / N; 16-byte copies also need
// the pitch a multiple of 4 (else the guarded 4-byte copies); the epilogue applies the fused
// operation to the four outputs a thread writes per pass, as one access where N and ldc are
// multiples of 4 and C, C0 and the bias are aligned to four elements, else element by element.
// Nothing outside each batch's M x N of C is written.
#include "gemmlab/fused.cuh"

// Launch bounds of the fused entry: MINB blocks per SM, but at most 3 with a column-major A (at 4,
// a 128-register cap, NVRTC 13.0's ptxas spilled 16 bytes of its main loop with beta != 0: H100,
// session 32; 13.5 did not).
template <int MINB, bool ACOL>
constexpr int sgemm_epi_min_blocks() { return ACOL && MINB > 3 ? 3 : MINB; }

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int GS, int MINB, bool ACOL, int ACT,
          int BIAS, int BETA, typename BIAS_T, typename OUT_T>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, (sgemm_epi_min_blocks<MINB, ACOL>()))
gemm_sgemm_pipelined_epi(const float *__restrict__ A, const float *__restrict__ B, OUT_T *__restrict__ C,
                         const OUT_T *__restrict__ C0, const BIAS_T *__restrict__ bias, int M, int N, int K, int lda,
                         int ldb, int ldc, int stride_a, int stride_b, int stride_c, float alpha, float beta) {
  static_assert(GS >= 1, "swizzle group");
  const int gm = (M + BM - 1) / BM, gn = (N + BN - 1) / BN;
  const int pid = blockIdx.x, width = GS * gn, group = pid / width, first = group * GS;
  const int size = min(gm - first, GS);
  const int rowBase = (first + (pid % width) % size) * BM, colBase = ((pid % width) / size) * BN;
  constexpr bool LEAN = 65536 / ((BM / WM) * (BN / WN) * 32 * sgemm_epi_min_blocks<MINB, ACOL>()) < 160;
  const long long z = blockIdx.z;
  A += z * stride_a;
  B += z * stride_b;
  const gemmlab::Fused<ACT, BIAS, BETA, BIAS_T, OUT_T> epi{C, C0, bias, ldc, stride_c, alpha, beta};
  bool vec = (N % 4 == 0) && (ldb % 4 == 0) && ((reinterpret_cast<unsigned long long>(B) & 15) == 0);
  if (ACOL) vec = vec && (M % 4 == 0) && (lda % 4 == 0) && ((reinterpret_cast<unsigned long long>(A) & 15) == 0);
  const bool edge = rowBase + BM > M || colBase + BN > N || (long long)(ACOL ? BK : BM) * lda >= (1ll << 31) ||
                    (long long)BK * ldb >= (1ll << 31);
  using E = gemmlab::Fused<ACT, BIAS, BETA, BIAS_T, OUT_T>;
  if (vec && !edge)
    sgemm_pipelined_body<BM, BN, BK, WM, WN, TM, TN, STAGES, true, false, LEAN, ACOL, E>(
        A, B, nullptr, M, N, K, lda, ldb, rowBase, colBase, epi);
  else if (vec)
    sgemm_pipelined_body<BM, BN, BK, WM, WN, TM, TN, STAGES, true, true, LEAN, ACOL, E>(
        A, B, nullptr, M, N, K, lda, ldb, rowBase, colBase, epi);
  else
    sgemm_pipelined_body<BM, BN, BK, WM, WN, TM, TN, STAGES, false, true, LEAN, ACOL, E>(
        A, B, nullptr, M, N, K, lda, ldb, rowBase, colBase, epi);
}
#endif  // GEMMLAB_EPI
