// gemmlab built-in kernels "decode_bf16" (issue 10) and "decode_tf32" (issue 41): decode-like BF16/FP16
// (and TF32) GEMMs, C (M x N, float32) = A (M x K) . B (K x N) with M small (1..64) and N, K
// weight-sized, on tensor cores (mma.sync.m16n8k16; T = float: m16n8k8 TF32, see DecodeElem; float32
// accumulate) with B streamed straight from global memory into registers: no shared-memory staging,
// 16-byte loads, K split over the warps of a block and over gridDim.z blocks. The text below is the
// 16-bit form; with T = float every "16-byte load" of 8 k (or of 8 columns of a row-major B row) is two,
// a chunk is 4 mma steps of k8 and B row-major needs no __byte_perm (word j of rows 2s and 2s+1).
//
// The k permutation. A GEMM sums over k, so the k order inside one 32-long chunk may be permuted
// freely as long as A and B use the same permutation. Lane (g = lane / 4, q = lane % 4) of a warp
// owns the physical k range [k0 + 8q, k0 + 8q + 8) of chunk k0: one 16-byte load of an A row gives
// it the A fragment words of two m16n8k16 steps s = 0, 1 (logical k 2q, 2q+1 <- physical 8q+4s,
// 8q+4s+1; logical 2q+8, 2q+9 <- physical 8q+4s+2, 8q+4s+3; word w of the load = physical
// 8q+2w, 8q+2w+1, so step s uses words 2s and 2s+1).
//   B column-major (B[k,n] at k + n*K, "K-major"): the same 16-byte load of row n of B^T gives the
//   b0b1 / b2b3 words of both steps for column n; n-tile j's column g is n0 + 8j + g (the
//   standard mapping), so the accumulators land at the usual m16n8 positions.
//   B row-major (B[k,n] at k*N + n, N contiguous): lane (g, q) loads the 8 rows k0+8q .. +7, each
//   16 bytes = columns n0 + 8g .. +7; n-tile j's logical column g is the physical column
//   n0 + 8g + j, so b0b1 of step s = (B[4s][8g+j], B[4s+1][8g+j]) packed by __byte_perm from two
//   loaded rows, and the accumulator of logical column 2q + v of tile j belongs to physical
//   column n0 + 16q + 8v + j.
// Per 32-long chunk a warp reads 64 columns x 32 k of B (4 KiB: eight 16-byte loads per lane) and
// MT x 16 rows of A (two 16-byte loads per lane and m16 tile), and issues 2 x MT x 8 mma.
//
// Work split: block (x, y, z) owns columns [64x, 64x + 64), rows [16 MT y, 16 MT (y+1)) and the
// z-th of gridDim.z equal runs of 32-long K chunks; its KW warps take the run's chunks U at a time
// round-robin (all U chunks' loads are issued before their mma: U x 4 KiB in flight per warp).
// The KW partial tiles are reduced through shared memory (KW x 16 MT x 64 float32, dynamic). With
// one split each output is then stored by one thread; with gridDim.z = SPLITS > 1 (at most 8) the
// SPLITS blocks of a tile are one thread-block cluster: each keeps its sum in shared memory, and
// after a cluster barrier block r adds the r-th slice of the tile over all ranks in rank order,
// reading its peers' shared memory (DSMEM), and stores it. No atomics, no memset, no second
// launch, and the sum order is fixed (the result is bitwise the same launch after launch).
//
// Requirements (checked by the plugin): K % 8 == 0 (16-byte A and B^T rows), N % 8 == 0 for a
// row-major B. Edges: rows >= M and chunks past K load zeros; columns >= N are not loaded
// (zeros) and not stored.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "gemmlab/cluster.cuh"
#include "gemmlab/mma16.cuh"
#include "gemmlab/ptx.cuh"

namespace {

/// What the storage type changes (the loop is otherwise one): 8 consecutive k of a row (or 8 columns
/// of a row-major B row) are PIECES 16-byte loads, and a 32-long chunk is STEPS mma steps.
///   16-bit (bf16, fp16): one 16-byte piece; m16n8k16, 2 steps per chunk.
///   float (tf32): two pieces; m16n8k8 on TF32 (each element rounded by cvt.rna.tf32.f32, as
///   mma_tf32 does), 4 steps per chunk. Lane (g, q)'s physical k 8q .. 8q+7 of the chunk are its 8
///   words w = 0..7; step s uses words 2s and 2s+1 as logical k q and q + 4 (the A fragment a0..a3 =
///   (g, q), (g+8, q), (g, q+4), (g+8, q+4); B b0, b1 = (q, g), (q+4, g): PTX ISA m16n8k8), which is
///   the 16-bit loop's word choice with words of one element instead of two.
template <typename T> struct DecodeElem {
  static constexpr int PIECES = 1, STEPS = 2;
  static __device__ __forceinline__ unsigned in(unsigned w) { return w; }
  static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    gemmlab::Mma16<T>::run(d, a, b);
  }
};
template <> struct DecodeElem<float> {
  static constexpr int PIECES = 2, STEPS = 4;
  static __device__ __forceinline__ unsigned in(unsigned w) { return gemmlab::cvt_rna_tf32(__uint_as_float(w)); }
  static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    gemmlab::mma_m16n8k8_tf32(d, a, b);
  }
};

/// 16 bytes of the streamed operand B: read-only path, not kept in L1 (each byte is used once per
/// block; L1 stays for A, which every block re-reads). PTX ISA: ld (.nc, .L1::no_allocate).
__device__ __forceinline__ uint4 ld_stream_16(const void *p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

/// 16 bytes of A through the read-only (L1-cached) path.
__device__ __forceinline__ uint4 ld_a_16(const void *p) { return __ldg(reinterpret_cast<const uint4 *>(p)); }

__device__ __forceinline__ unsigned word(const uint4 &v, int w) {
  return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}

/// Word w (0 .. 4·P-1) of P consecutive 16-byte pieces.
template <int P> __device__ __forceinline__ unsigned word(const uint4 (&v)[P], int w) { return word(v[w >> 2], w & 3); }

/// Store the 4 outputs (row, col .. col+3) of C (M x N float32, row-major) that lie inside: a
/// float4 when N % 4 == 0 (col is a multiple of 4, so the float4 is aligned and wholly inside).
__device__ __forceinline__ void store4(float *C, int M, int N, int row, int col, float4 s) {
  if (row >= M || col >= N) return;
  float *out = C + (long long)row * N + col;
  if ((N & 3) == 0) {
    *reinterpret_cast<float4 *>(out) = s;
  } else {
    if (col < N) out[0] = s.x;
    if (col + 1 < N) out[1] = s.y;
    if (col + 2 < N) out[2] = s.z;
    if (col + 3 < N) out[3] = s.w;
  }
}

}  // namespace

// Body of the kernel (the plain entry gemm_decode16 below and, under GEMMLAB_EPI, the fused one): A's
// row pitch lda, B's ldb (row-major: K x N rows; column-major: B^T's N rows of K), the block's row
// block my (blockIdx.y of the plain entry); EPI: Decode16Plain (C row-major float32, pitch N) or
// gemmlab::Fused (the fused epilogue of batch z, issue 43).
struct Decode16Plain {
  static constexpr bool FUSED = false;
};

template <typename T, int MT, int KW, int U, bool B_COL, class EPI = Decode16Plain>
__device__ __forceinline__ void decode16_body(const T *__restrict__ A, const T *__restrict__ B, float *__restrict__ C,
                                              int M, int N, int K, int lda, int ldb, int my, int z,
                                              const EPI &epi = EPI()) {
  constexpr int ROWS = 16 * MT;  // rows of C per block
  constexpr int NT = 64;         // columns of C per block (8 m16n8 tiles)
  extern __shared__ __align__(16) float red[];  // [KW][ROWS][NT] partial tiles

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int n0 = blockIdx.x * NT, m0 = my * ROWS;
  const int chunks = (K + 31) >> 5;
  const int per = (chunks + gridDim.z - 1) / gridDim.z;
  const int c_begin = blockIdx.z * per;
  const int c_end = min(chunks, c_begin + per);

  float acc[MT][8][4];
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

  using E = DecodeElem<T>;
  constexpr int P = E::PIECES;
  constexpr int PIECE = 16 / sizeof(T);  // elements per 16-byte piece
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  for (int c0 = c_begin + warp * U; c0 < c_end; c0 += KW * U) {
    uint4 bv[U][8][P], av[U][MT][2][P];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int kc = (c0 + u) * 32 + 8 * q;  // this lane's 8 physical k of the chunk
      const bool kin = (c0 + u) < c_end && kc < K;  // K % 8 == 0: all 8 in or all out
#pragma unroll
      for (int j = 0; j < 8; j++)
#pragma unroll
        for (int p = 0; p < P; p++) {
          if (B_COL) {
            const int n = n0 + 8 * j + g;
            bv[u][j][p] = (kin && n < N) ? ld_stream_16(B + (long long)n * ldb + kc + p * PIECE) : zero;
          } else {
            const int n = n0 + 8 * g;  // N % 8 == 0: the 8 columns are all in or all out
            bv[u][j][p] = (kin && n < N) ? ld_stream_16(B + (long long)(kc + j) * ldb + n + p * PIECE) : zero;
          }
        }
#pragma unroll
      for (int i = 0; i < MT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int row = m0 + 16 * i + g + 8 * h;
#pragma unroll
          for (int p = 0; p < P; p++)
            av[u][i][h][p] = (kin && row < M) ? ld_a_16(A + (long long)row * lda + kc + p * PIECE) : zero;
        }
    }
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int s = 0; s < E::STEPS; s++) {
        unsigned b[8][2];
#pragma unroll
        for (int j = 0; j < 8; j++) {
          if (B_COL) {
            b[j][0] = E::in(word(bv[u][j], 2 * s));
            b[j][1] = E::in(word(bv[u][j], 2 * s + 1));
          } else if constexpr (P == 2) {  // float: row 2s (k q) and 2s+1 (k q+4), column word j
            b[j][0] = E::in(word(bv[u][2 * s], j));
            b[j][1] = E::in(word(bv[u][2 * s + 1], j));
          } else {
            const unsigned sel = (j & 1) ? 0x7632u : 0x5410u;  // high or low halves of the word
            b[j][0] = __byte_perm(word(bv[u][4 * s], j >> 1), word(bv[u][4 * s + 1], j >> 1), sel);
            b[j][1] = __byte_perm(word(bv[u][4 * s + 2], j >> 1), word(bv[u][4 * s + 3], j >> 1), sel);
          }
        }
#pragma unroll
        for (int i = 0; i < MT; i++) {
          const unsigned a[4] = {E::in(word(av[u][i][0], 2 * s)), E::in(word(av[u][i][1], 2 * s)),
                                 E::in(word(av[u][i][0], 2 * s + 1)), E::in(word(av[u][i][1], 2 * s + 1))};
#pragma unroll
          for (int j = 0; j < 8; j++) E::mma(acc[i][j], a, b[j]);
        }
      }
  }

  // this warp's partial tile -> shared memory at its physical (row, column) in the block tile
  float *mine = red + warp * ROWS * NT;
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int row = 16 * i + g + 8 * (e >> 1), v = e & 1;
        const int col = B_COL ? 8 * j + 2 * q + v : 16 * q + 8 * v + j;
        mine[row * NT + col] = acc[i][j][e];
      }
  __syncthreads();

  // sum over the KW warps (fixed order), one thread per 4 adjacent outputs: one split stores to C,
  // several keep the block's sum in place of warp 0's tile for the cluster reduction below
  constexpr int VEC = ROWS * NT / 4;
  const int splits = gridDim.z;
  for (int e = threadIdx.x; e < VEC; e += 32 * KW) {
    float4 s = *reinterpret_cast<const float4 *>(red + 4 * e);
#pragma unroll
    for (int w = 1; w < KW; w++) {
      const float4 o = *reinterpret_cast<const float4 *>(red + w * ROWS * NT + 4 * e);
      s.x += o.x; s.y += o.y; s.z += o.z; s.w += o.w;
    }
    if (splits == 1) {
      if constexpr (EPI::FUSED) epi.store4(z, M, N, m0 + e / (NT / 4), n0 + 4 * (e % (NT / 4)), s);
      else store4(C, M, N, m0 + e / (NT / 4), n0 + 4 * (e % (NT / 4)), s);
    } else {
      *reinterpret_cast<float4 *>(red + 4 * e) = s;
    }
  }
  if (splits == 1) return;
  // the SPLITS blocks of this tile form one thread-block cluster (1, 1, SPLITS): after the cluster
  // barrier, the block of rank r adds the r-th slice of the tile over ranks 0, 1, ..., SPLITS-1
  // (fixed order: bitwise reproducible) reading each peer's shared memory (DSMEM) and stores it
  gemmlab::cluster_sync();
  const int rank = static_cast<int>(gemmlab::cluster_ctarank());
  const int slice = (VEC + splits - 1) / splits;
  const int end = min(VEC, (rank + 1) * slice);
  for (int e = rank * slice + threadIdx.x; e < end; e += 32 * KW) {
    float4 s = gemmlab::ld_shared_cluster_v4(gemmlab::map_shared_rank(red + 4 * e, 0));
    for (int r = 1; r < splits; r++) {
      const float4 o = gemmlab::ld_shared_cluster_v4(gemmlab::map_shared_rank(red + 4 * e, r));
      s.x += o.x; s.y += o.y; s.z += o.z; s.w += o.w;
    }
    if constexpr (EPI::FUSED) epi.store4(z, M, N, m0 + e / (NT / 4), n0 + 4 * (e % (NT / 4)), s);
    else store4(C, M, N, m0 + e / (NT / 4), n0 + 4 * (e % (NT / 4)), s);
  }
  gemmlab::cluster_sync();  // no block leaves (freeing its shared memory) before every peer has read it
}

template <typename T, int MT, int KW, int U, bool B_COL>
__global__ void __launch_bounds__(32 * KW) gemm_decode16(const T *__restrict__ A, const T *__restrict__ B,
                                                         float *__restrict__ C, int M, int N, int K) {
  decode16_body<T, MT, KW, U, B_COL>(A, B, C, M, N, K, K, B_COL ? K : N, blockIdx.y, 0);
}

#ifdef GEMMLAB_EPI
// The whole GEMM contract (issue 43), compiled only with -DGEMMLAB_EPI (plugins/decode_bf16.py asks
// for it beyond C = A·B; the plain build above is unchanged, SASS for SASS: tests/test_sass_unchanged.py):
// batch z of C (M x N, pitch ldc, OUT_T) = OUT_T(act(alpha * A·B + beta * C0 + bias))
// (gemmlab/fused.cuh), A (pitch lda) and B (pitch ldb; lda and ldb multiples of 8, so every 16-byte
// load stays aligned) at z * stride_a / stride_b elements (0: shared by all batches). gridDim.z stays
// the K splits (one cluster per tile), so the batches go along y: blockIdx.y = z * ceil(M / 16·MT) +
// the row block. The epilogue is applied to the four outputs a thread stores (after the split
// reduction), as one access where N and ldc are multiples of 4 and C, C0 and the bias aligned.
#include "gemmlab/fused.cuh"

template <typename T, int MT, int KW, int U, bool B_COL, int ACT, int BIAS, int BETA, typename BIAS_T, typename OUT_T>
__global__ void __launch_bounds__(32 * KW)
gemm_decode16_epi(const T *__restrict__ A, const T *__restrict__ B, OUT_T *__restrict__ C, const OUT_T *__restrict__ C0,
                  const BIAS_T *__restrict__ bias, int M, int N, int K, int lda, int ldb, int ldc, int stride_a,
                  int stride_b, int stride_c, float alpha, float beta) {
  const int gy = (M + 16 * MT - 1) / (16 * MT);
  const int z = blockIdx.y / gy, my = blockIdx.y % gy;
  const gemmlab::Fused<ACT, BIAS, BETA, BIAS_T, OUT_T> epi{C, C0, bias, ldc, stride_c, alpha, beta};
  decode16_body<T, MT, KW, U, B_COL>(A + (long long)z * stride_a, B + (long long)z * stride_b, nullptr, M, N, K, lda,
                                     ldb, my, z, epi);
}
#endif  // GEMMLAB_EPI
