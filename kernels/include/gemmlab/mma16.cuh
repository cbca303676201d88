// gemmlab/mma16.cuh: mma.sync m16n8k16 chosen by the storage type, for the kernels templated on
// it (mma_bf16, decode_bf16): Mma16<__nv_bfloat16>::run and Mma16<__half>::run are
// gemmlab::mma_m16n8k16_bf16 / _fp16 (ptx.cuh; PTX ISA: mma, sm_80+), float32 accumulate in place.
// Header-only, NVRTC-safe, force-inlined (the kernels' SASS is the same as with their own copies).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "gemmlab/ptx.cuh"

namespace gemmlab {

/// D (4 floats, m16n8 fragment) += A (4 words of T pairs) * B (2 words), T = __nv_bfloat16 or __half.
template <typename T> struct Mma16;
template <> struct Mma16<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    mma_m16n8k16_bf16(d, a, b);
  }
};
template <> struct Mma16<__half> {
  static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    mma_m16n8k16_fp16(d, a, b);
  }
};

}  // namespace gemmlab
