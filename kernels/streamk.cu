// gemmlab built-in kernel "streamk" (issue 10): float32 GEMM on CUDA cores for shapes whose output
// tiles leave a partial last wave, with the warp-tiled inner tile of the ladder's rung 3
// (gemmlab/warptile_k.cuh: wt_accumulate over a K range, wt_store).
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

#include "gemmlab/warptile_k.cuh"

// MINB: __launch_bounds__'s minimum resident blocks per SM (caps registers at 64K/(threads*MINB);
// 2 for the 256-thread 128x128 tile keeps sgemm_warptile's 2 blocks per SM).
#define WT_THREADS ((BM / WM) * (BN / WN) * 32)

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
