// gemmlab built-in kernel "gemv_cols" (issue 41): decode-like GEMMs with B column-major (the
// nn.Linear layout: B stored N x K, K contiguous), C (M x N) = A (M x K, row-major) . B, M small
// (1..32) and N, K weight-sized. Float32 on CUDA cores (FFMA), no tensor cores; it serves
// precision=fp32 and precision=tf32 (TF32 allowed, not required: inputs multiplied unrounded).
//
// The cost is streaming B once from DRAM. Both operands are contiguous along K, so every product
// C[m][n] is a dot product of two contiguous rows and the lanes of a warp stride along K: lane l
// of a warp reads the float4 k = 128 j + 4 l .. +3 of a row ("step" j: 32 lanes x 16 bytes = one
// 512-byte segment of the row per load instruction).
//
// Block = WN x KW warps. Warp w is column group g = w % WN and K slice s = w / WN: it owns the CW
// columns n0 + g CW .. +CW-1 (n0 = blockIdx.y WN CW) and the MT rows m0 .. m0+MT-1 (m0 =
// blockIdx.x MT: the row blocks of one column range are consecutive in launch order, so they
// share its B segments in L2), and walks the steps j = s, s + KW, s + 2 KW, ... (the KW warps of a
// column group interleave along K: the block reads adjacent segments at once). Per round it
// issues U x CW float4 loads of B (U steps in flight per column) and then, per step, MT float4
// loads of A (rows of A are read by every column group: from L1/L2, MT/CW times the B bytes) and
// MT x CW x 4 FMAs into acc[MT][CW].
//
// Reduction: the V = MT x CW partial sums of a lane are reduced over the 32 lanes by a butterfly
// reduce-scatter (at xor offset 16, 8, ...: while a lane holds more than one value it sends half
// of them and keeps the other half, else it adds its partner's value), 62 shuffles for V = 64
// instead of 5 V; afterwards lane l holds the slots (V/32) l .. +V/32-1 when V >= 32, else, when
// l is a multiple of 32/V, the slot l / (32/V). With KW = 1 the holders store C directly; else
// they write their slots to shared memory (partials[s][g][slot]) and the block adds the KW
// slices in s order and stores. slot = i CW + c is row m0 + i, column n0 + g CW + c.
//
// Edges: a float4 is read only when K % 4 == 0 (so every row starts 16-byte aligned) and it lies
// inside the row; otherwise four guarded scalar loads (k >= K reads 0). Rows >= M read 0 for A,
// columns >= N read 0 for B; stores are masked. Every output is stored by exactly one thread.
//
// Registers: __launch_bounds__ asks for 512 / threads blocks per SM (at least 1), i.e. at most 128
// registers per thread, so at least 16 warps fit an SM (ptxas otherwise hoists every A load of a
// round: 254 registers at MT = 16, 8 warps per SM).
// Body of the kernel (the plain entry gemm_gemv_cols below and, under GEMMLAB_EPI, the fused one):
// A's row pitch lda, B's (stored N x K) ldb; EPI: GemvColsPlain (C row-major float32, pitch n) or
// gemmlab::Fused (the fused epilogue of batch z, issue 43; the float4 path then also needs lda and
// ldb multiples of 4 and A, B 16-byte aligned).
struct GemvColsPlain {
  static constexpr bool FUSED = false;
};

template <int MT, int CW, int WN, int KW, int U, class EPI = GemvColsPlain>
__device__ __forceinline__ void gemv_cols_body(const float *a, const float *b, float *c, int m, int n, int k, int lda,
                                               int ldb, int z, const EPI &epi = EPI()) {
  constexpr int V = MT * CW;            // partial sums per lane
  constexpr int HELD = V >= 32 ? V / 32 : 1;  // slots a holder lane keeps after the reduce-scatter
  constexpr int SPREAD = V >= 32 ? 1 : 32 / V;  // lanes per slot when V < 32 (the holder is the first)
  static_assert((V & (V - 1)) == 0, "MT * CW must be a power of two");
  __shared__ float partials[KW > 1 ? KW * WN * V : 1];

  const int t = threadIdx.x;
  const int lane = t & 31;
  const int warp = t >> 5;
  const int g = warp % WN;
  const int s = warp / WN;
  const int m0 = blockIdx.x * MT;
  const int nc = blockIdx.y * (WN * CW) + g * CW;  // this warp's first column
  const int steps = (k + 127) >> 7;
  const bool vec = (k & 3) == 0 &&
                   (!EPI::FUSED || ((lda & 3) == 0 && (ldb & 3) == 0 &&
                                    ((reinterpret_cast<unsigned long long>(a) | reinterpret_cast<unsigned long long>(b)) & 15) == 0));

  const float *brow[CW];
#pragma unroll
  for (int c2 = 0; c2 < CW; c2++) brow[c2] = b + (long long)min(nc + c2, n - 1) * ldb;

  float acc[MT][CW];
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int c2 = 0; c2 < CW; c2++) acc[i][c2] = 0.0f;

  // one float4 of a row at k0 (zero past the row's end; vec: whole float4s, 16-byte aligned)
  auto load4 = [&](const float *row, int k0, bool ok) -> float4 {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (!ok) return v;
    if (vec) {
      if (k0 < k) v = __ldg(reinterpret_cast<const float4 *>(row + k0));
    } else {
      if (k0 < k) v.x = __ldg(row + k0);
      if (k0 + 1 < k) v.y = __ldg(row + k0 + 1);
      if (k0 + 2 < k) v.z = __ldg(row + k0 + 2);
      if (k0 + 3 < k) v.w = __ldg(row + k0 + 3);
    }
    return v;
  };

  for (int j0 = s; j0 < steps; j0 += KW * U) {
    float4 bv[U][CW];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int k0 = (j0 + u * KW) * 128 + 4 * lane;
#pragma unroll
      for (int c2 = 0; c2 < CW; c2++) bv[u][c2] = load4(brow[c2], k0, nc + c2 < n);
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int k0 = (j0 + u * KW) * 128 + 4 * lane;
#pragma unroll
      for (int i = 0; i < MT; i++) {
        const float4 av = load4(a + (long long)min(m0 + i, m - 1) * lda, k0, m0 + i < m);
#pragma unroll
        for (int c2 = 0; c2 < CW; c2++) {
          acc[i][c2] = fmaf(av.x, bv[u][c2].x, acc[i][c2]);
          acc[i][c2] = fmaf(av.y, bv[u][c2].y, acc[i][c2]);
          acc[i][c2] = fmaf(av.z, bv[u][c2].z, acc[i][c2]);
          acc[i][c2] = fmaf(av.w, bv[u][c2].w, acc[i][c2]);
        }
      }
    }
  }

  // butterfly reduce-scatter over the 32 lanes (flat index slot = i * CW + c)
  float v[V];
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int c2 = 0; c2 < CW; c2++) v[i * CW + c2] = acc[i][c2];
#pragma unroll
  for (int st = 0; st < 5; st++) {
    const int off = 16 >> st;
    const int width = V >> st;  // values still held (while > 1)
    if (width > 1) {
      const int h = width / 2;
      const bool upper = (lane & off) != 0;
#pragma unroll
      for (int q = 0; q < (V >> 1); q++) {
        if (q < h) {
          const float send = upper ? v[q] : v[q + h];
          const float keep = upper ? v[q + h] : v[q];
          v[q] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
      }
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], off);
    }
  }
  const bool holder = (lane % SPREAD) == 0;
  const int slot0 = V >= 32 ? lane * HELD : lane / SPREAD;

  if constexpr (KW == 1) {
    if (holder) {
#pragma unroll
      for (int q = 0; q < HELD; q++) {
        const int slot = slot0 + q, i = slot / CW, c2 = slot % CW;
        if constexpr (EPI::FUSED) {
          if (m0 + i < m && nc + c2 < n) epi.store1(z, m0 + i, nc + c2, v[q]);
        } else {
          if (m0 + i < m && nc + c2 < n) c[(long long)(m0 + i) * n + nc + c2] = v[q];
        }
      }
    }
  } else {
    if (holder) {
#pragma unroll
      for (int q = 0; q < HELD; q++) partials[(s * WN + g) * V + slot0 + q] = v[q];
    }
    __syncthreads();
    const int n0 = blockIdx.y * (WN * CW);
    for (int o = t; o < WN * V; o += 32 * WN * KW) {
      const int gg = o / V, slot = o % V, i = slot / CW, c2 = slot % CW;
      float sum = 0.0f;
#pragma unroll
      for (int ss = 0; ss < KW; ss++) sum += partials[(ss * WN + gg) * V + slot];
      const int col = n0 + gg * CW + c2;
      if constexpr (EPI::FUSED) {
        if (m0 + i < m && col < n) epi.store1(z, m0 + i, col, sum);
      } else {
        if (m0 + i < m && col < n) c[(long long)(m0 + i) * n + col] = sum;
      }
    }
  }
}

template <int MT, int CW, int WN, int KW, int U>
__global__ void __launch_bounds__(32 * WN * KW, (512 / (32 * WN * KW)) > 0 ? 512 / (32 * WN * KW) : 1) gemm_gemv_cols(const float *a, const float *b, float *c, int m,
                                                               int n, int k) {
  gemv_cols_body<MT, CW, WN, KW, U>(a, b, c, m, n, k, k, k, 0);
}

#ifdef GEMMLAB_EPI
// The whole GEMM contract (issue 43), compiled only with -DGEMMLAB_EPI (plugins/gemv_cols.py asks for
// it beyond C = A·B; the plain build above is unchanged, SASS for SASS: tests/test_sass_unchanged.py):
// batch blockIdx.z of C (M x N, pitch ldc, OUT_T) = OUT_T(act(alpha * A·B + beta * C0 + bias))
// (gemmlab/fused.cuh), A row-major (pitch lda) and B column-major (stored N x K, pitch ldb) at
// z * stride_a / stride_b elements (0: shared by all batches); each output's epilogue is applied by
// the one thread that stores it.
#include "gemmlab/fused.cuh"

template <int MT, int CW, int WN, int KW, int U, int ACT, int BIAS, int BETA, typename BIAS_T, typename OUT_T>
__global__ void __launch_bounds__(32 * WN * KW, (512 / (32 * WN * KW)) > 0 ? 512 / (32 * WN * KW) : 1)
gemm_gemv_cols_epi(const float *a, const float *b, OUT_T *c, const OUT_T *c0, const BIAS_T *bias, int m, int n, int k,
                   int lda, int ldb, int ldc, int stride_a, int stride_b, int stride_c, float alpha, float beta) {
  const int z = blockIdx.z;
  const gemmlab::Fused<ACT, BIAS, BETA, BIAS_T, OUT_T> epi{c, c0, bias, ldc, stride_c, alpha, beta};
  gemv_cols_body<MT, CW, WN, KW, U>(a + (long long)z * stride_a, b + (long long)z * stride_b, nullptr, m, n, k, lda,
                                    ldb, z, epi);
}
#endif  // GEMMLAB_EPI
