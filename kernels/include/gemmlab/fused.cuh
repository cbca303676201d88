// gemmlab/fused.cuh: the fused epilogue of the whole GEMM contract (issue 43) for kernels that hold
// their float32 results in registers when they store them (sgemm_pipelined, decode_bf16, gemv_rows,
// gemv_cols). One output (row, col) of batch z:
//   C[at] = OUT_T(act(alpha * acc + beta * C0[at] + bias[col])),   at = z * stride_c + row * ldc + col,
// C and C0 (OUT_T: float, __nv_bfloat16 or __half; C0 read only when BETA) from their batch-0
// base, bias (BIAS_T, N elements shared by all rows and batches) read only when BIAS. The batch
// index z is an argument of each store (a kernel passes its blockIdx.z or the like), so nothing of
// the epilogue is computed before the main loop: its fields stay kernel parameters (constant
// bank) and take no registers while the main loop runs. ACT: 0 none, 1 relu, 2 gelu (tanh form), 3 gelu (erf form),
// 4 silu (gemmlab.contract.plugin_utils.ACTIVATION_CODES); float32 libm (tanhf, erff, expf; silu's
// division __fdividef); the output rounded once to nearest even (__float2bfloat16_rn,
// __float2half_rn and their paired forms). The same arithmetic as kernels/tiled.cu's
// gemm_tiled_epi (the epilogue's reference kernel).
//
// Header-only, NVRTC-safe, any arch (sm_80+ for the bf16 conversions). Kernels include it only
// under their epilogue define (GEMMLAB_EPI), so their plain builds are unchanged.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace gemmlab {

/// The activation ACT of z (codes above).
template <int ACT>
__device__ __forceinline__ float activation(float z) {
  if (ACT == 1) return fmaxf(z, 0.0f);
  if (ACT == 2) return 0.5f * z * (1.0f + tanhf(0.7978845608028654f * (z + 0.044715f * z * z * z)));
  if (ACT == 3) return 0.5f * z * (1.0f + erff(z * 0.7071067811865476f));
  // silu: __fdividef (MUFU.RCP, 2 ulp; 0 once 1 + e^-z > 2^126, where silu is below 1e-36 in
  // magnitude): the IEEE division's slow-path subroutine call spilled registers of the main loop
  // (sgemm_pipelined_epi at MINB=4: 16 bytes of local memory, H100 session 32)
  if (ACT == 4) return __fdividef(z, 1.0f + expf(-z));
  return z;
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

/// v rounded once to nearest even into T (float: unchanged).
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

/// Four consecutive T as one access: float4 (16 bytes) or four 2-byte values (8 bytes, uint2);
/// p aligned to 4 * sizeof(T).
template <typename T> struct Vec4;
template <> struct Vec4<float> {
  static __device__ __forceinline__ float4 load(const float *p) { return *reinterpret_cast<const float4 *>(p); }
  static __device__ __forceinline__ void store(float *p, float4 v) { *reinterpret_cast<float4 *>(p) = v; }
};
template <> struct Vec4<__nv_bfloat16> {
  static __device__ __forceinline__ float4 load(const __nv_bfloat16 *p) {
    const uint2 u = *reinterpret_cast<const uint2 *>(p);
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  }
  static __device__ __forceinline__ void store(__nv_bfloat16 *p, float4 v) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    uint2 u;
    u.x = *reinterpret_cast<const unsigned *>(&lo);
    u.y = *reinterpret_cast<const unsigned *>(&hi);
    *reinterpret_cast<uint2 *>(p) = u;
  }
};
template <> struct Vec4<__half> {
  static __device__ __forceinline__ float4 load(const __half *p) {
    const uint2 u = *reinterpret_cast<const uint2 *>(p);
    const float2 lo = __half22float2(*reinterpret_cast<const __half2 *>(&u.x));
    const float2 hi = __half22float2(*reinterpret_cast<const __half2 *>(&u.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  }
  static __device__ __forceinline__ void store(__half *p, float4 v) {
    const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
    uint2 u;
    u.x = *reinterpret_cast<const unsigned *>(&lo);
    u.y = *reinterpret_cast<const unsigned *>(&hi);
    *reinterpret_cast<uint2 *>(p) = u;
  }
};

__device__ __forceinline__ bool aligned(const void *p, unsigned bytes) {
  return (reinterpret_cast<unsigned long long>(p) & (bytes - 1)) == 0;
}

/// The epilogue of one launch: the output and its inputs (C0 may be null without BETA, bias without
/// BIAS), C's row pitch and batch stride (elements), alpha and beta: a kernel builds it from its
/// arguments and stores one (store1) or four consecutive (store4) outputs of batch z per call.
template <int ACT, int BIAS, int BETA, typename BIAS_T, typename OUT_T>
struct Fused {
  static constexpr bool FUSED = true;
  OUT_T *c;
  const OUT_T *c0;
  const BIAS_T *bias;
  int ldc, stride_c;
  float alpha, beta;

  /// act(alpha * acc + beta * C0[at] + bias[col]) in float32 (at: C0's element, batch included).
  __device__ __forceinline__ float value(float acc, long long at, int col) const {
    float v = alpha * acc;
    if (BETA) v += beta * to_float(c0[at]);
    if (BIAS) v += to_float(bias[col]);
    return activation<ACT>(v);
  }

  /// Output (row, col) of batch z: the caller has checked that it lies inside M x N.
  __device__ __forceinline__ void store1(long long z, int row, int col, float acc) const {
    const long long at = z * stride_c + (long long)row * ldc + col;
    c[at] = from_float<OUT_T>(value(acc, at, col));
  }

  /// Whether store4 moves four outputs of batch z (and their C0 and bias values) as one access
  /// wherever col is a multiple of 4 and col + 4 <= n: n and ldc multiples of 4, batch z's C and
  /// C0 and the bias aligned to four of their elements.
  __device__ __forceinline__ bool vector4(long long z, int n) const {
    return (n & 3) == 0 && (ldc & 3) == 0 && aligned(c + z * stride_c, 4 * sizeof(OUT_T)) &&
           (!BETA || aligned(c0 + z * stride_c, 4 * sizeof(OUT_T))) && (!BIAS || aligned(bias, 4 * sizeof(BIAS_T)));
  }

  /// Outputs (row, col .. col + 3) of batch z that lie inside m x n, from acc.x .. acc.w; one
  /// access each for C, C0 and the bias where vector4(z, n) and col + 4 <= n (col is then a
  /// multiple of 4: the caller's columns come in aligned groups of four), else element by element.
  __device__ __forceinline__ void store4(long long z, int m, int n, int row, int col, float4 acc) const {
    if (row >= m) return;
    const long long at = z * stride_c + (long long)row * ldc + col;
    if (vector4(z, n) && col + 4 <= n) {
      float4 v = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
      if (BETA) {
        const float4 p = Vec4<OUT_T>::load(c0 + at);
        v.x += beta * p.x; v.y += beta * p.y; v.z += beta * p.z; v.w += beta * p.w;
      }
      if (BIAS) {
        const float4 b = Vec4<BIAS_T>::load(bias + col);
        v.x += b.x; v.y += b.y; v.z += b.z; v.w += b.w;
      }
      v = make_float4(activation<ACT>(v.x), activation<ACT>(v.y), activation<ACT>(v.z), activation<ACT>(v.w));
      Vec4<OUT_T>::store(c + at, v);
    } else {
      if (col < n) c[at] = from_float<OUT_T>(value(acc.x, at, col));
      if (col + 1 < n) c[at + 1] = from_float<OUT_T>(value(acc.y, at + 1, col + 1));
      if (col + 2 < n) c[at + 2] = from_float<OUT_T>(value(acc.z, at + 2, col + 2));
      if (col + 3 < n) c[at + 3] = from_float<OUT_T>(value(acc.w, at + 3, col + 3));
    }
  }
};

}  // namespace gemmlab
