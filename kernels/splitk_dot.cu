// gemmlab built-in kernel "splitk_dot" (issue 41, item 3): a split-K GEMV-style reduction for tiny
// outputs with a huge K (2x2x100000), one launch.
//
// C (M x N, row-major float32) = A (M x K, row-major) @ B (K x N, row-major, or column-major with
// BCOL = 1: B[k][n] at k + n*K). A and B are stored as T (float for fp32/tf32, __nv_bfloat16,
// __half); every product is formed and accumulated in float32 (FFMA; TF32 is not used).
//
// Grid (SPLITS, tiles): block (z, t) owns output tile t (OM x ON, tiles numbered row-major over the
// ceil(M/OM) x ceil(N/ON) tiles) and the K range [z*KC, min(K, (z+1)*KC)), KC = ceil(ceil(K/SPLITS)/V)*V,
// V = 16 bytes / sizeof(T) (whole 16-byte vectors; trailing splits may get an empty range).
// Each range is cut into V-long steps; thread i takes steps i, i + THREADS, ... (U steps per loop
// round, all their loads issued before the FMAs). A step reads, per row of A and per column of a
// column-major B, one 16-byte vector (LDG.128) when K % V == 0 (16-byte aligned rows); a row-major
// B step reads the V x ON block B[k..k+V)[n0..n0+ON) as ON 16-byte vectors when N == ON (the block
// is then contiguous: V*N elements from k*N, a multiple of 16 bytes); anything else (odd K, the last
// partial step, tiles past M or N) takes masked element loads. Consecutive threads read
// consecutive steps, so every load instruction of a warp is coalesced.
//
// Reduction: each thread's OM*ON sums -> warp butterfly (shfl_xor) -> shared memory -> warps added
// in order: the block's partial tile goes to partials[t][z][OM*ON] (every slot written each launch,
// so the workspace's earlier contents are never read). Then, after a barrier, thread 0 fences
// (__threadfence(), the release), draws the tile's atomic ticket (tickets[t]) and fences again (the
// acquire: the pattern of cooperative groups' grid sync); the block that draws ticket SPLITS-1 is
// the last of its tile: it reads the SPLITS partials through L2 (__ldcg), sums them in a fixed order
// (thread i adds splits i, i + THREADS, ... in increasing order, then the same butterfly and warp
// order), stores C and resets tickets[t] to 0. The order depends only on SPLITS and THREADS, so C is bitwise the same on every
// launch. The launch plan zeroes the workspace (Memset) before every launch, so a ticket never
// depends on an earlier launch (gemmlab refills workspaces with a canary between phases); the reset
// keeps the tickets ready for a replay all the same.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace splitk_dot_detail {

/// 16 bytes of T: V elements, E per 32-bit word.
template <typename T>
struct Vec {
  static constexpr int V = 16 / sizeof(T);
  static constexpr int E = 4 / sizeof(T);
};

__device__ __forceinline__ unsigned word_of(const uint4 &p, int w) {
  return w == 0 ? p.x : w == 1 ? p.y : w == 2 ? p.z : p.w;
}

/// Element e (0..V-1) of a 16-byte vector of T, as float32 (exact for all three types).
template <typename T>
__device__ __forceinline__ float element(const uint4 &p, int e);
template <>
__device__ __forceinline__ float element<float>(const uint4 &p, int e) {
  return __uint_as_float(word_of(p, e));
}
template <>
__device__ __forceinline__ float element<__nv_bfloat16>(const uint4 &p, int e) {
  const unsigned w = word_of(p, e >> 1);
  return __uint_as_float((e & 1) ? (w & 0xffff0000u) : (w << 16));  // bf16 = the top half of a float32
}
template <>
__device__ __forceinline__ float element<__half>(const uint4 &p, int e) {
  const unsigned w = word_of(p, e >> 1);
  return __half2float(__ushort_as_half((unsigned short)((e & 1) ? (w >> 16) : (w & 0xffffu))));
}

__device__ __forceinline__ unsigned bits_of(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned bits_of(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ unsigned bits_of(__half v) { return __half_as_ushort(v); }

/// Put element e's bits into a vector being assembled from element loads (words start at 0).
template <typename T>
__device__ __forceinline__ void put(unsigned (&w)[4], int e, T v) {
  constexpr int E = Vec<T>::E;
  w[e / E] |= bits_of(v) << (32 / E * (e % E));
}

template <typename T>
__device__ __forceinline__ uint4 load16(const T *p) {
  return __ldg(reinterpret_cast<const uint4 *>(p));
}

/// Elements p[0..count) (count <= V; the rest zero) as one vector, by element loads.
template <typename T>
__device__ __forceinline__ uint4 gather(const T *p, int count) {
  constexpr int V = Vec<T>::V;
  unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int e = 0; e < V; e++)
    if (e < count) put<T>(w, e, p[e]);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/// Sum of v[e] over the block for each e < OUT, in a fixed order (warp butterfly, then warps in
/// order); returns element threadIdx.x of the sums to threads 0..OUT-1 (0 elsewhere). ``red`` is
/// THREADS/32 x OUT floats of shared memory; the caller separates two uses by a __syncthreads().
template <int OUT, int THREADS>
__device__ __forceinline__ float block_sum(float (&v)[OUT], float (*red)[OUT]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int e = 0; e < OUT; e++) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v[e] += __shfl_xor_sync(0xffffffffu, v[e], offset);
  }
  if (lane == 0) {
#pragma unroll
    for (int e = 0; e < OUT; e++) red[warp][e] = v[e];
  }
  __syncthreads();
  float total = 0.0f;
  if (threadIdx.x < OUT) {
#pragma unroll
    for (int w = 0; w < THREADS / 32; w++) total += red[w][threadIdx.x];
  }
  return total;
}

}  // namespace splitk_dot_detail

template <typename T, int OM, int ON, int THREADS, int U, int BCOL>
__global__ void __launch_bounds__(THREADS)
    splitk_dot(const T *__restrict__ a, const T *__restrict__ b, float *__restrict__ c, unsigned *tickets,
               float *partials, int m, int n, int k) {
  using namespace splitk_dot_detail;
  constexpr int V = Vec<T>::V, OUT = OM * ON;
  static_assert(THREADS % 32 == 0 && OUT <= THREADS, "whole warps, one thread per output of the tile");
  const int splits = gridDim.x, split = blockIdx.x, tile = blockIdx.y;
  const int tiles_n = (n + ON - 1) / ON;
  const int m0 = tile / tiles_n * OM, n0 = tile % tiles_n * ON;
  const long long per = (((long long)k + splits - 1) / splits + V - 1) / V * V;
  const int k_begin = (int)min((long long)k, split * per);
  const int k_end = (int)min((long long)k, k_begin + per);
  const int len = k_end - k_begin, full = len / V, steps = (len + V - 1) / V;
  const bool a_vec = k % V == 0;                 // rows of A (and of a column-major B) 16-byte aligned
  const bool b_vec = BCOL ? a_vec : n == ON;     // row-major B: the tile spans N, so a step is contiguous

  float acc[OUT];
#pragma unroll
  for (int e = 0; e < OUT; e++) acc[e] = 0.0f;

  for (int s0 = threadIdx.x; s0 < steps; s0 += THREADS * U) {
    uint4 ap[U][OM], bp[U][ON];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int s = s0 + u * THREADS;
      const int kk = k_begin + s * V;
      const int valid = s < full ? V : s < steps ? len - s * V : 0;  // k of this step inside the range
#pragma unroll
      for (int i = 0; i < OM; i++) {
        const T *row = a + (long long)(m0 + i) * k + kk;
        const int count = m0 + i < m ? valid : 0;
        ap[u][i] = (a_vec && count == V) ? load16(row) : gather(row, count);
      }
      if (BCOL) {
#pragma unroll
        for (int j = 0; j < ON; j++) {
          const T *col = b + (long long)(n0 + j) * k + kk;
          const int count = n0 + j < n ? valid : 0;
          bp[u][j] = (b_vec && count == V) ? load16(col) : gather(col, count);
        }
      } else if (b_vec && valid == V) {
        const T *block = b + (long long)kk * n;  // n == ON, n0 == 0: V*ON contiguous elements
#pragma unroll
        for (int q = 0; q < ON; q++) bp[u][q] = load16(block + q * V);
      } else {  // element f = v*ON + j of the V x ON block is B[kk + v][n0 + j]
#pragma unroll
        for (int q = 0; q < ON; q++) {
          unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
          for (int e = 0; e < V; e++) {
            const int f = q * V + e, v = f / ON, j = f % ON;
            if (v < valid && n0 + j < n) put<T>(w, e, b[(long long)(kk + v) * n + n0 + j]);
          }
          bp[u][q] = make_uint4(w[0], w[1], w[2], w[3]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
#pragma unroll
      for (int v = 0; v < V; v++) {
#pragma unroll
        for (int i = 0; i < OM; i++) {
          const float x = element<T>(ap[u][i], v);
#pragma unroll
          for (int j = 0; j < ON; j++) {
            const float y = BCOL ? element<T>(bp[u][j], v) : element<T>(bp[u][(v * ON + j) / V], (v * ON + j) % V);
            acc[i * ON + j] = fmaf(x, y, acc[i * ON + j]);
          }
        }
      }
    }
  }

  __shared__ float red[THREADS / 32][OUT];
  __shared__ bool last;
  const float part = block_sum<OUT, THREADS>(acc, red);
  float *slab = partials + (long long)tile * splits * OUT;
  if (threadIdx.x < OUT) slab[(long long)split * OUT + threadIdx.x] = part;
  __syncthreads();  // the block's partial, stored by threads 0..OUT-1, ordered before thread 0's fence
  if (threadIdx.x == 0) {
    __threadfence();  // release: the partial visible device-wide before the ticket is drawn
    last = atomicAdd(tickets + tile, 1u) == (unsigned)(splits - 1);
    __threadfence();  // acquire: the other blocks' partials (fenced before their tickets) before this block reads them
  }
  __syncthreads();
  if (!last) return;
  float sum[OUT];
#pragma unroll
  for (int e = 0; e < OUT; e++) sum[e] = 0.0f;
  for (int z = threadIdx.x; z < splits; z += THREADS) {
#pragma unroll
    for (int e = 0; e < OUT; e++) sum[e] += __ldcg(slab + (long long)z * OUT + e);  // L2: written by other SMs
  }
  const float total = block_sum<OUT, THREADS>(sum, red);
  if (threadIdx.x < OUT) {
    const int row = m0 + threadIdx.x / ON, col = n0 + threadIdx.x % ON;
    if (row < m && col < n) c[(long long)row * n + col] = total;
  }
  if (threadIdx.x == 0) tickets[tile] = 0u;  // ready for the next launch (the plan's Memset zeroes it too)
}
