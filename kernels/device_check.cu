// gemmlab's after-timing verification on the device (issue 40; not a GEMM under test). Driven by
// gemmlab/stages/device_check.py, which holds the numpy twin of every kernel here (the generator
// bit for bit up to the last ulp of log/cos; the rest as the same arithmetic) and says what each
// argument is. Kernels:
//   gemmlab_dc_fill<TYPE, DIST>     fresh inputs from a counter-based generator (SplitMix64's output
//                                   function of (key, element index): Steele, Lea & Flood, OOPSLA 2014)
//   gemmlab_dc_scale<TYPE>          x *= factor in place (the fresh-input timing net's -A, 2A, -B)
//   gemmlab_dc_copy<0>              words copied (a snapshot of the fresh inputs)
//   gemmlab_dc_diff<BYTES>          elements that differ between two buffers (counted)
//   gemmlab_dc_nan<0>               NaN elements of a float32 C (counted)
//   gemmlab_dc_matvec<TYPE, ROUND, LAYOUT>  float64 partial sums of g_t(X) v_t over chunks of columns
//   gemmlab_dc_sum<0>               those partial sums added over the chunks, in order
//   gemmlab_dc_sampled<TYPE, ROUND, LA, LB> float64 reference and |A||B| of gathered rows x columns of
//                                   A @ B, compared with C by the verification rule; per-(row, 64-column
//                                   tile) counts and maxima
// TYPE: 0 float32, 1 bfloat16, 2 float16 (the storage type of A and B). ROUND: TF32 rounding of
// float32 inputs as gemmlab.stages.verify.round_tf32: 0 none, 1 rn, 2 rna, 3 rz. LAYOUT/LA/LB: 0 the
// logical matrix is stored row-major, 1 it is stored as its transpose (column-major).
#include <cuda_fp16.h>

typedef unsigned long long dc_u64;
typedef long long dc_i64;

#define DC_GAMMA 0x9E3779B97F4A7C15ull
#define DC_FULL 0xffffffffu
#define DC_INF __longlong_as_double(0x7ff0000000000000LL)

__device__ __forceinline__ dc_u64 dc_mix64(dc_u64 z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// --- storage types ---------------------------------------------------------------------------------
template <int TYPE> __device__ __forceinline__ float dc_load(const void* base, dc_i64 i);
template <> __device__ __forceinline__ float dc_load<0>(const void* base, dc_i64 i) {
  return ((const float*)base)[i];
}
template <> __device__ __forceinline__ float dc_load<1>(const void* base, dc_i64 i) {
  return __uint_as_float(((unsigned)((const unsigned short*)base)[i]) << 16);
}
template <> __device__ __forceinline__ float dc_load<2>(const void* base, dc_i64 i) {
  return __half2float(((const __half*)base)[i]);
}

// x rounded to the storage type, to nearest with ties to even (finite x only); the bits
template <int TYPE> __device__ __forceinline__ unsigned dc_bits(float x);
template <> __device__ __forceinline__ unsigned dc_bits<0>(float x) { return __float_as_uint(x); }
template <> __device__ __forceinline__ unsigned dc_bits<1>(float x) {
  unsigned u = __float_as_uint(x);
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
template <> __device__ __forceinline__ unsigned dc_bits<2>(float x) {
  return (unsigned)__half_as_ushort(__float2half_rn(x));
}

template <int TYPE> __device__ __forceinline__ void dc_put(void* base, dc_i64 i, unsigned bits) {
  if (TYPE == 0) ((unsigned*)base)[i] = bits;
  else ((unsigned short*)base)[i] = (unsigned short)bits;
}

// TF32 rounding of float32 bits (gemmlab.stages.verify.round_tf32)
template <int ROUND> __device__ __forceinline__ float dc_tf32(float x) {
  if (ROUND == 0) return x;
  unsigned u = __float_as_uint(x);
  if (ROUND == 1) u = u + 0xFFFu + ((u >> 13) & 1u);
  else if (ROUND == 2) u = u + 0x1000u;
  return __uint_as_float(u & 0xFFFFE000u);
}

// --- fresh inputs ------------------------------------------------------------------------------------
// DIST 0 normal: Box-Muller on two 32-bit halves, u1 = (hi + 1/2) 2^-32 in (0, 1), u2 = lo 2^-32, in
// float64, rounded to float32; 1 uniform: odd multiples of 2^-24 in (-1, 1); 2 integers: +-{1, 2, 3, 4}
template <int DIST> __device__ __forceinline__ float dc_draw(dc_u64 h) {
  if (DIST == 0) {
    double u1 = ((double)(h >> 32) + 0.5) * 0x1p-32;
    double u2 = (double)(h & 0xFFFFFFFFull) * 0x1p-32;
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    return __double2float_rn(z);
  } else if (DIST == 1) {
    int s = 2 * (int)(h >> 40) + 1 - 16777216;
    return (float)s * 0x1p-24f;
  } else {
    float m = (float)(1 + (int)(h >> 62));
    return ((h >> 61) & 1ull) ? -m : m;
  }
}

// the logical matrix (rows x cols) element at logical index r * cols + c gets the key's stream
// output number r * cols + c; stored row-major (transposed 0) or as its transpose (cols x rows). An
// element that rounds to zero in the storage type becomes the smallest subnormal of its sign.
template <int TYPE, int DIST>
__global__ void __launch_bounds__(256) gemmlab_dc_fill(void* __restrict__ out, long long rows, long long cols,
                                                       int transposed, unsigned long long key) {
  const dc_i64 n = rows * cols;
  for (dc_i64 s = blockIdx.x * (dc_i64)blockDim.x + threadIdx.x; s < n; s += (dc_i64)gridDim.x * blockDim.x) {
    dc_i64 logical = s;
    if (transposed) {
      dc_i64 c = s / rows, r = s - c * rows;
      logical = r * cols + c;
    }
    float x = dc_draw<DIST>(dc_mix64(key + (dc_u64)(logical + 1) * DC_GAMMA));
    unsigned bits = dc_bits<TYPE>(x);
    const unsigned sign = TYPE == 0 ? 0x80000000u : 0x8000u;
    if ((bits & ~sign) == 0u) bits = (bits & sign) | 1u;
    dc_put<TYPE>(out, s, bits);
  }
}

template <int TYPE>
__global__ void __launch_bounds__(256) gemmlab_dc_scale(void* __restrict__ data, long long n, float factor) {
  for (dc_i64 i = blockIdx.x * (dc_i64)blockDim.x + threadIdx.x; i < n; i += (dc_i64)gridDim.x * blockDim.x)
    dc_put<TYPE>(data, i, dc_bits<TYPE>(dc_load<TYPE>(data, i) * factor));
}

template <int Unused>
__global__ void __launch_bounds__(256) gemmlab_dc_copy(const unsigned* __restrict__ src, unsigned* __restrict__ dst,
                                                       long long words) {
  for (dc_i64 i = blockIdx.x * (dc_i64)blockDim.x + threadIdx.x; i < words; i += (dc_i64)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

// one warp's sum added to *count (every lane of the block reaches it: blockDim is a multiple of 32)
__device__ __forceinline__ void dc_count(unsigned long long local, unsigned long long* count) {
  for (int o = 16; o > 0; o >>= 1) local += __shfl_down_sync(DC_FULL, local, o);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(count, local);
}

template <int BYTES>
__global__ void __launch_bounds__(256) gemmlab_dc_diff(const void* __restrict__ a, const void* __restrict__ b,
                                                       long long n, unsigned long long* __restrict__ count) {
  unsigned long long local = 0;
  for (dc_i64 i = blockIdx.x * (dc_i64)blockDim.x + threadIdx.x; i < n; i += (dc_i64)gridDim.x * blockDim.x) {
    if (BYTES == 4) local += ((const unsigned*)a)[i] != ((const unsigned*)b)[i];
    else local += ((const unsigned short*)a)[i] != ((const unsigned short*)b)[i];
  }
  dc_count(local, count);
}

template <int Unused>
__global__ void __launch_bounds__(256) gemmlab_dc_nan(const float* __restrict__ c, long long n,
                                                      unsigned long long* __restrict__ count) {
  unsigned long long local = 0;
  for (dc_i64 i = blockIdx.x * (dc_i64)blockDim.x + threadIdx.x; i < n; i += (dc_i64)gridDim.x * blockDim.x)
    local += isnan(c[i]) ? 1ull : 0ull;
  dc_count(local, count);
}

// --- matrix-vector products (Freivalds' check) -------------------------------------------------------
#define DC_MV_CHUNK 256  // columns per partial sum
#define DC_MV_ROWS 8     // rows per block where a row is contiguous (a warp each)

// partial[(chunk * nv + t) * rows + r] = sum over the chunk's columns c of g_t(X[r, c]) * v[t * cols + c],
// g_t = |.| where bit t of abs_mask is set, else the value (TF32-rounded by ROUND); nv <= 3.
// Grid: (ceil(rows / DC_MV_ROWS) for LAYOUT 0, ceil(rows / 256) for LAYOUT 1, ceil(cols / DC_MV_CHUNK)).
template <int TYPE, int ROUND, int LAYOUT>
__global__ void __launch_bounds__(256) gemmlab_dc_matvec(const void* __restrict__ x, long long rows, long long cols,
                                                         const double* __restrict__ v, int nv, int abs_mask,
                                                         double* __restrict__ partial) {
  const dc_i64 c0 = (dc_i64)blockIdx.y * DC_MV_CHUNK;
  const dc_i64 c1 = c0 + DC_MV_CHUNK < cols ? c0 + DC_MV_CHUNK : cols;
  double acc[3] = {0.0, 0.0, 0.0};
  dc_i64 r;
  if (LAYOUT == 0) {  // row r contiguous: a warp per row, lanes across its columns
    r = (dc_i64)blockIdx.x * DC_MV_ROWS + (threadIdx.x >> 5);
    if (r >= rows) return;  // the whole warp leaves together
    for (dc_i64 c = c0 + (threadIdx.x & 31); c < c1; c += 32) {
      double e = (double)dc_tf32<ROUND>(dc_load<TYPE>(x, r * cols + c));
#pragma unroll
      for (int t = 0; t < 3; ++t)
        if (t < nv) acc[t] += ((abs_mask >> t) & 1 ? fabs(e) : e) * v[t * cols + c];
    }
#pragma unroll
    for (int t = 0; t < 3; ++t)
      for (int o = 16; o > 0; o >>= 1) acc[t] += __shfl_down_sync(DC_FULL, acc[t], o);
    if ((threadIdx.x & 31) != 0) return;
  } else {  // column c contiguous: a thread per row
    r = (dc_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    for (dc_i64 c = c0; c < c1; ++c) {
      double e = (double)dc_tf32<ROUND>(dc_load<TYPE>(x, c * rows + r));
#pragma unroll
      for (int t = 0; t < 3; ++t)
        if (t < nv) acc[t] += ((abs_mask >> t) & 1 ? fabs(e) : e) * v[t * cols + c];
    }
  }
#pragma unroll
  for (int t = 0; t < 3; ++t)
    if (t < nv) partial[((dc_i64)blockIdx.y * nv + t) * rows + r] = acc[t];
}

// out[i] = sum over chunk = 0 .. chunks - 1 of partial[chunk * n + i], in that order
template <int Unused>
__global__ void __launch_bounds__(256) gemmlab_dc_sum(const double* __restrict__ partial, int chunks, long long n,
                                                      double* __restrict__ out) {
  for (dc_i64 i = blockIdx.x * (dc_i64)blockDim.x + threadIdx.x; i < n; i += (dc_i64)gridDim.x * blockDim.x) {
    double s = 0.0;
    for (int ch = 0; ch < chunks; ++ch) s += partial[(dc_i64)ch * n + i];
    out[i] = s;
  }
}

// --- the sampled (or full) float64 check ---------------------------------------------------------------
#define DC_TILE 64  // rows and columns of a block's tile
#define DC_TK 16    // K per shared-memory stage

// For i < R (a row of the sample: A's row rows[i], or i where rows is null) and j < Cn (C's column
// cols[j], or j): ref = sum_k A[row, k] B[k, col] and mag = sum_k |A[row, k]| |B[k, col]| in float64
// (A and B as stored, TF32-rounded by ROUND), compared with c = C[row, col] (float32, row-major M x N)
// by the rule (0 bound: |c - ref| <= coef_abs mag + coef_ref |ref| + 1e-30; 1 fixed: <= atol + rtol |ref|;
// 2 exact: c == ref); a non-finite c always fails. Per (i, tile t = j / 64), at s = i * gridDim.x + t:
// count[s] failing elements, first[s] the smallest failing j (-1: none) with got[s] = c and
// expected[s] = ref there, ratio[s] the max |c - ref| / tol (0 where equal, inf for a non-finite c or a
// zero tolerance), abserr[s] the max |c - ref| over finite c (-1: none), relerr[s] the max |c - ref| / |ref|
// over finite c with ref != 0. Grid: (ceil(Cn / 64), ceil(R / 64)), 256 threads.
template <int TYPE, int ROUND, int LA, int LB>
__global__ void __launch_bounds__(256) gemmlab_dc_sampled(
    const void* __restrict__ A, const void* __restrict__ B, const float* __restrict__ C,
    const int* __restrict__ rows, const int* __restrict__ cols, int R, int Cn, long long M, long long N, long long K,
    int rule, double coef_abs, double coef_ref, double atol, double rtol,
    int* __restrict__ count, int* __restrict__ first, float* __restrict__ got, double* __restrict__ expected,
    double* __restrict__ ratio, double* __restrict__ abserr, double* __restrict__ relerr) {
  __shared__ double As[DC_TK][DC_TILE + 1];  // + 1: the loads' stores fall in different banks
  __shared__ double Bs[DC_TK][DC_TILE + 1];
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int i0 = blockIdx.y * DC_TILE, j0 = blockIdx.x * DC_TILE;
  double ref[4][4], mag[4][4];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b) ref[a][b] = mag[a][b] = 0.0;

  for (dc_i64 k0 = 0; k0 < K; k0 += DC_TK) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // A's tile: 64 rows x 16 of K, consecutive threads along A's storage
      const int e = tid + 256 * q;
      const int ii = LA == 0 ? e >> 4 : e & 63, kk = LA == 0 ? e & 15 : e >> 6;
      const int i = i0 + ii;
      const dc_i64 k = k0 + kk;
      double val = 0.0;
      if (i < R && k < K) {
        const dc_i64 row = rows ? (dc_i64)rows[i] : (dc_i64)i;
        val = (double)dc_tf32<ROUND>(dc_load<TYPE>(A, LA == 0 ? row * K + k : k * M + row));
      }
      As[kk][ii] = val;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // B's tile: 16 of K x 64 columns
      const int e = tid + 256 * q;
      const int jj = LB == 0 ? e & 63 : e >> 4, kk = LB == 0 ? e >> 6 : e & 15;
      const int j = j0 + jj;
      const dc_i64 k = k0 + kk;
      double val = 0.0;
      if (j < Cn && k < K) {
        const dc_i64 col = cols ? (dc_i64)cols[j] : (dc_i64)j;
        val = (double)dc_tf32<ROUND>(dc_load<TYPE>(B, LB == 0 ? k * N + col : col * K + k));
      }
      Bs[kk][jj] = val;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < DC_TK; ++kk) {
      double a[4], b[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = As[kk][ty * 4 + r];
#pragma unroll
      for (int c = 0; c < 4; ++c) b[c] = Bs[kk][tx + 16 * c];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          ref[r][c] = fma(a[r], b[c], ref[r][c]);
          mag[r][c] = fma(fabs(a[r]), fabs(b[c]), mag[r][c]);
        }
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = i0 + ty * 4 + r;
    int n_bad = 0, first_j = 0x7fffffff;
    float got_c = 0.0f;
    double exp_c = 0.0, max_ratio = 0.0, max_abs = -1.0, max_rel = 0.0;
    if (i < R) {
      const dc_i64 row = rows ? (dc_i64)rows[i] : (dc_i64)i;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int j = j0 + tx + 16 * c;
        if (j >= Cn) continue;
        const dc_i64 col = cols ? (dc_i64)cols[j] : (dc_i64)j;
        const float cv = C[row * N + col];
        const double c64 = (double)cv, rf = ref[r][c];
        const double err = fabs(c64 - rf);
        const double tol = rule == 2 ? 0.0 : rule == 1 ? atol + rtol * fabs(rf) : coef_abs * mag[r][c] + coef_ref * fabs(rf) + 1e-30;
        const bool finite = isfinite(cv);
        const bool bad = !finite || err > tol;
        max_ratio = fmax(max_ratio, !finite ? DC_INF : err == 0.0 ? 0.0 : err / tol);
        if (finite) {
          max_abs = fmax(max_abs, err);
          if (rf != 0.0) max_rel = fmax(max_rel, err / fabs(rf));
        }
        if (bad) {
          ++n_bad;
          if (j < first_j) { first_j = j; got_c = cv; exp_c = rf; }
        }
      }
    }
    // the 16 threads of this row (lanes tx = 0..15 of one half-warp): every lane takes part
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) {
      n_bad += __shfl_xor_sync(DC_FULL, n_bad, o);
      max_ratio = fmax(max_ratio, __shfl_xor_sync(DC_FULL, max_ratio, o));
      max_abs = fmax(max_abs, __shfl_xor_sync(DC_FULL, max_abs, o));
      max_rel = fmax(max_rel, __shfl_xor_sync(DC_FULL, max_rel, o));
      const int other_j = __shfl_xor_sync(DC_FULL, first_j, o);
      const float other_got = __shfl_xor_sync(DC_FULL, got_c, o);
      const double other_exp = __shfl_xor_sync(DC_FULL, exp_c, o);
      if (other_j < first_j) { first_j = other_j; got_c = other_got; exp_c = other_exp; }
    }
    if (tx == 0 && i < R) {
      const dc_i64 s = (dc_i64)i * gridDim.x + blockIdx.x;
      count[s] = n_bad;
      first[s] = n_bad ? first_j : -1;
      got[s] = got_c;
      expected[s] = exp_c;
      ratio[s] = max_ratio;
      abserr[s] = max_abs;
      relerr[s] = max_rel;
    }
  }
}
