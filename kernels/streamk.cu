// gemmlab built-in kernels "splitk_warptile" and "streamk" (issue 10): float32 GEMM on CUDA cores
// for shapes whose output tiles do not fill the GPU (K-heavy, few tiles, partial last waves).
// Both use the warp-tiled mapping of the ladder's rung 3 (kernels/sgemm_warptile.cu, copied here so
// that tuning that rung never changes these kernels) for the inner tile: warp tiles WM x WN, each
// thread's TM x TN outputs in 4x4 pieces (conflict-free LDS.128), register double-buffered
// fragments, double-buffered shared memory fed through registers, float4 global loads behind an
// alignment guard with a scalar edge path. The only change: a block reduces a K range
// [k_begin, k_end) that starts on a BK chunk, and the tile can be stored to C or to a workspace.
//
// splitk_warptile (two launches):
//   gemm_splitk_warptile: grid (ceil(N/BN), ceil(M/BM), SPLITS); split z reduces the K range
//     [z*KC, min(K, (z+1)*KC)), KC = ceil(ceil(K/SPLITS)/BK)*BK (trailing splits may be empty and
//     then write zeros), and writes its BM x BN block to workspace slab z (SPLITS*M*N floats,
//     every element written once, so no clearing).
//   gemm_warptile_reduce: C[i] = sum over z of slab z [i], z = 0, 1, ... (fixed order:
//     deterministic), grid-stride, float4 when M*N % 4 == 0 and C is 16-byte aligned.
//
// streamk (data-parallel + stream-K hybrid, Osama, Merrill, Cecka, Garland, Hudson (2023),
// "Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on the
// GPU"; the two-launch "fixup" variant, no inter-block waiting, so it cannot deadlock whatever
// the residency):
//   gemm_streamk: a 1-D grid of WORKERS + DP blocks over T = ceil(M/BM)*ceil(N/BN) tiles in
//     row-major tile order. Tiles [0, SK) are stream-K tiles: their SK*ITERS BK-chunk iterations
//     (ITERS = ceil(K/BK) per tile) are cut into WORKERS even contiguous ranges, worker w getting
//     [w*TOTAL/WORKERS, (w+1)*TOTAL/WORKERS). A worker walks its range tile by tile; a tile it
//     covers completely goes straight to C; a partial tile goes to its workspace slot 0 (the
//     first tile of its range) or slot 1 (the last), each BM x BN floats (WORKERS*2 slots). Tiles
//     [SK, T) are data-parallel: block WORKERS + i computes tile SK + i whole and stores it.
//   gemm_streamk_fixup: grid (SK, parts): each stream-K tile is split over parts blocks of FQ
//     float4 per thread; a tile owned by a single worker is done; otherwise C = sum of the
//     contributing workers' slots, in worker order (deterministic).
// The host picks SK and WORKERS (plugins/streamk.py, schedule): none when the last wave is at least
// 90% full (data-parallel only: no fixup); all tiles when there are fewer tiles than WPS*SMs (over
// at most one worker per 8 BK chunks); else the last full wave plus the remainder (each worker
// then gets between one and two tiles of work: the paper's "two-tile stream-K + data-parallel").

// MINB: __launch_bounds__'s minimum resident blocks per SM (caps registers at 64K/(threads*MINB);
// 2 for the 256-thread 128x128 tile keeps sgemm_warptile's 2 blocks per SM).
#define WT_THREADS ((BM / WM) * (BN / WN) * 32)

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

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int MINB>
__global__ void __launch_bounds__(WT_THREADS, MINB)
gemm_splitk_warptile(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ workspace, int M,
                     int N, int K) {
  __shared__ __align__(16) float As[2][BK][BM + 4];
  __shared__ __align__(16) float Bs[2][BK][BN];
  const int splits = gridDim.z;
  const int per = ((K + splits - 1) / splits + BK - 1) / BK * BK;
  const int kBegin = (int)min((long long)K, (long long)blockIdx.z * per), kEnd = min(K, kBegin + per);
  const int rowBase = blockIdx.y * BM, colBase = blockIdx.x * BN;
  float acc[TM][TN];
  wt_accumulate<BM, BN, BK, WM, WN, TM, TN>(A, B, M, N, K, rowBase, colBase, kBegin, kEnd, As, Bs, acc);
  // slab z starts at z*M*N floats: 16-byte aligned whenever N % 4 == 0 (the workspace is 256-byte aligned)
  float *slab = workspace + (long long)blockIdx.z * M * N;
  wt_store<BM, BN, BK, WM, WN, TM, TN>(slab, N, M, N, rowBase, colBase, N % 4 == 0, acc);
}

/// C[i] = sum_{z < splits} workspace[z*M*N + i] in the order z = 0, 1, ...; grid-stride.
__global__ void gemm_warptile_reduce(const float *__restrict__ workspace, float *__restrict__ C, int M, int N,
                                     int splits) {
  const long long total = (long long)M * N;
  const long long stride = (long long)gridDim.x * blockDim.x;
  if ((total & 3) == 0 && ((reinterpret_cast<unsigned long long>(C) & 15) == 0)) {
    const long long quads = total / 4;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < quads; q += stride) {
      float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int z = 0; z < splits; ++z) {
        const float4 v = reinterpret_cast<const float4 *>(workspace + z * total)[q];
        sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w;
      }
      reinterpret_cast<float4 *>(C)[q] = sum;
    }
  } else {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += stride) {
      float sum = 0.0f;
      for (int z = 0; z < splits; ++z) sum += workspace[z * total + i];
      C[i] = sum;
    }
  }
}

/// First iteration of stream-K worker w (of `workers`) over `total` iterations.
__device__ __forceinline__ long long sk_start(long long w, long long total, int workers) {
  return w * total / workers;
}

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int MINB>
__global__ void __launch_bounds__(WT_THREADS, MINB)
gemm_streamk(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
             float *__restrict__ workspace, int M, int N, int K, int workers, int skTiles) {
  __shared__ __align__(16) float As[2][BK][BM + 4];
  __shared__ __align__(16) float Bs[2][BK][BN];
  const int tilesN = (N + BN - 1) / BN;
  const bool vecC = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(C) & 15) == 0);
  float acc[TM][TN];
  // a stream-K worker's range of iterations, or a data-parallel block's one whole tile (same loop:
  // one copy of the main loop keeps the register count of sgemm_warptile)
  const long long iters = (K + BK - 1) / BK, total = (long long)skTiles * iters;
  const bool dp = (int)blockIdx.x >= workers;
  long long it = dp ? (skTiles + (long long)blockIdx.x - workers) * iters : sk_start(blockIdx.x, total, workers);
  const long long end = dp ? it + iters : sk_start(blockIdx.x + 1, total, workers);
  const long long firstTile = it / iters;
  while (it < end) {
    const long long t = it / iters, tileBegin = t * iters;
    const long long kb = it - tileBegin, ke = min(end - tileBegin, iters);
    const int rowBase = (int)(t / tilesN) * BM, colBase = (int)(t % tilesN) * BN;
    wt_accumulate<BM, BN, BK, WM, WN, TM, TN>(A, B, M, N, K, rowBase, colBase, (int)(kb * BK),
                                              (int)min((long long)K, ke * BK), As, Bs, acc);
    if (kb == 0 && ke == iters) {
      wt_store<BM, BN, BK, WM, WN, TM, TN>(C, N, M, N, rowBase, colBase, vecC, acc);
    } else {
      float *slot = workspace + ((long long)blockIdx.x * 2 + (t == firstTile ? 0 : 1)) * (BM * BN);
      wt_store<BM, BN, BK, WM, WN, TM, TN>(slot, BN, BM, BN, 0, 0, true, acc);
    }
    it = tileBegin + ke;
  }
}

/// Blocks (tile, part): part y of stream-K tile x adds elements [y*FQ*4*blockDim, (y+1)*FQ*4*blockDim) of
/// the tile from its contributors' workspace slots (worker order), FQ float4 per thread. The
/// contributors and their slots are worked out once per worker (64-bit divisions), not per element.
template <int BM, int BN, int BK, int FQ>
__global__ void gemm_streamk_fixup(const float *__restrict__ workspace, float *__restrict__ C, int M, int N, int K,
                                   int workers, int skTiles) {
  const long long iters = (K + BK - 1) / BK, total = (long long)skTiles * iters;
  const long long t = blockIdx.x, tileBegin = t * iters, tileEnd = tileBegin + iters;
  // owner(x): the worker whose range holds iteration x = floor(((x + 1) * workers - 1) / total)
  const long long wFirst = ((tileBegin + 1) * workers - 1) / total;
  const long long wLast = (tileEnd * workers - 1) / total;
  if (wFirst == wLast) return;  // one worker covered the whole tile and stored it to C
  const int q0 = (blockIdx.y * FQ) * blockDim.x + threadIdx.x;  // this thread's float4: q0 + f*blockDim
  float4 sum[FQ];
#pragma unroll
  for (int f = 0; f < FQ; ++f) sum[f] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  long long start = sk_start(wFirst, total, workers);
  for (long long w = wFirst; w <= wLast; ++w) {
    const long long next = sk_start(w + 1, total, workers);
    if (start != next) {  // an empty range contributes nothing
      const float4 *slot = reinterpret_cast<const float4 *>(workspace + (w * 2 + (start / iters == t ? 0 : 1)) * (BM * BN));
#pragma unroll
      for (int f = 0; f < FQ; ++f) {
        const int q = q0 + f * blockDim.x;
        if (q < BM * BN / 4) {
          const float4 v = slot[q];
          sum[f].x += v.x; sum[f].y += v.y; sum[f].z += v.z; sum[f].w += v.w;
        }
      }
    }
    start = next;
  }
  const int tilesN = (N + BN - 1) / BN;
  const int rowBase = (int)(t / tilesN) * BM, colBase = (int)(t % tilesN) * BN;
  const bool vecC = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(C) & 15) == 0);
#pragma unroll
  for (int f = 0; f < FQ; ++f) {
    const int q = q0 + f * blockDim.x;
    const int r = rowBase + (4 * q) / BN, c = colBase + (4 * q) % BN;
    if (q >= BM * BN / 4 || r >= M) continue;
    if (vecC && c + 4 <= N) {
      *reinterpret_cast<float4 *>(&C[(long long)r * N + c]) = sum[f];
    } else {
      if (c + 0 < N) C[(long long)r * N + c + 0] = sum[f].x;
      if (c + 1 < N) C[(long long)r * N + c + 1] = sum[f].y;
      if (c + 2 < N) C[(long long)r * N + c + 2] = sum[f].z;
      if (c + 3 < N) C[(long long)r * N + c + 3] = sum[f].w;
    }
  }
}
