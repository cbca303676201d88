// gemmlab/ptx.cuh: thin inline-PTX wrappers for Ampere-style tensor-core GEMMs (sm_80+).
//
// Header-only and NVRTC-safe: no host code, no CUDA headers needed (plain integer and float
// types only; the bf16/fp16 MMAs take operands already packed into 32-bit registers).
// Every helper names its PTX instruction; the reference for each is the "PTX ISA" document
// (docs.nvidia.com/cuda/parallel-thread-execution), sections cited per helper:
//   cp.async / cp.async.commit_group / cp.async.wait_group   9.7.9.25 (data movement, async copy)
//   ldmatrix                                                 9.7.14.5.15 (warp-level matrix load)
//   mma.sync m16n8k8 / m16n8k16 and fragment layouts         9.7.14.5.x (mma.m16n8k8, m16n8k16)
//   cvt.rna.tf32.f32                                         9.7.9.21 (cvt)
// Shared-memory addresses passed to these helpers are generic pointers into __shared__ memory;
// they are converted with __cvta_generic_to_shared (a CUDA built-in, no header needed).
// TMA and mbarrier helpers live in gemmlab/tma.cuh (included at the end of this file).
#pragma once

namespace gemmlab {

/// 32-bit shared-state-space address of a generic pointer into shared memory.
__device__ __forceinline__ unsigned smem_u32(const void *pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// ---- cp.async (sm_80+) -----------------------------------------------------------------------

/// `cp.async.cg.shared.global [dst], [src], 16, src_size;` copy 16 bytes global -> shared,
/// bypassing L1; only the first `src_size` bytes (0..16) are read, the rest of the 16 are
/// zero-filled (the src-size operand). `src` must be 16-byte aligned and valid even when
/// src_size == 0 (pass any in-bounds address). PTX ISA: cp.async.
__device__ __forceinline__ void cp_async_16(void *dst_smem, const void *src, int src_size = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst_smem)), "l"(src),
               "r"(src_size) : "memory");
}

/// `cp.async.ca.shared.global [dst], [src], 4, src_size;` copy one 4-byte word (src_size 4) or
/// write a zero word (src_size 0). Any 4-byte-aligned address: the edge/unaligned-stride path.
/// PTX ISA: cp.async (cp-size 4 requires .ca).
__device__ __forceinline__ void cp_async_4_zfill(void *dst_smem, const void *src, int src_size) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst_smem)), "l"(src),
               "r"(src_size) : "memory");
}

/// `cp.async.commit_group;` close the current group of cp.async operations. PTX ISA: cp.async.commit_group.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/// `cp.async.wait_group N;` wait until at most N committed groups are still pending (N is an
/// immediate). Visibility to other threads still needs a barrier (__syncthreads). PTX ISA: cp.async.wait_group.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// ---- ldmatrix (sm_75+) -----------------------------------------------------------------------
// Each 8x8 matrix of 16-bit elements is 8 rows of 16 bytes; lane i (i < 8*count) gives the
// address of row i%8 of matrix i/8. Lane l receives, per matrix, the 32-bit word holding row
// l/4, elements 2*(l%4) and 2*(l%4)+1 (".trans": column l/4, rows 2*(l%4), 2*(l%4)+1).

/// `ldmatrix.sync.aligned.m8n8.x1.shared.b16 {r0}, [addr];` PTX ISA: ldmatrix.
__device__ __forceinline__ void ldmatrix_x1(unsigned &r0, const void *smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(smem_u32(smem_row)));
}
/// `ldmatrix.sync.aligned.m8n8.x2.shared.b16 {r0, r1}, [addr];` PTX ISA: ldmatrix.
__device__ __forceinline__ void ldmatrix_x2(unsigned &r0, unsigned &r1, const void *smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1) : "r"(smem_u32(smem_row)));
}
/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16 {r0..r3}, [addr];` PTX ISA: ldmatrix.
__device__ __forceinline__ void ldmatrix_x4(unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3,
                                            const void *smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(smem_row)));
}
/// `ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {r0}, [addr];` PTX ISA: ldmatrix (.trans).
__device__ __forceinline__ void ldmatrix_x1_trans(unsigned &r0, const void *smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(smem_u32(smem_row)));
}
/// `ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {r0, r1}, [addr];` PTX ISA: ldmatrix (.trans).
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned &r0, unsigned &r1, const void *smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1) : "r"(smem_u32(smem_row)));
}
/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {r0..r3}, [addr];` PTX ISA: ldmatrix (.trans).
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3,
                                                  const void *smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(smem_row)));
}

// ---- conversions -----------------------------------------------------------------------------

/// `cvt.rna.tf32.f32 r, x;` round a float to TF32 (10-bit mantissa, round to nearest, ties away
/// from zero); the result is a 32-bit pattern with the low 13 bits zero. PTX ISA: cvt (sm_80+).
__device__ __forceinline__ unsigned cvt_rna_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// ---- mma.sync (warp-level tensor-core MMA) ---------------------------------------------------
// Fragment layouts (g = lane/4, t = lane%4), PTX ISA "Matrix Fragments for mma.m16n8k8/k16":
//   C/D 16x8 f32: d0,d1 = (row g, cols 2t, 2t+1); d2,d3 = (row g+8, cols 2t, 2t+1).
//   m16n8k8 tf32:  A 16x8: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
//                  B 8x8:  b0 (k t, n g), b1 (k t+4, n g).
//   m16n8k16 bf16/fp16 (pairs of 16-bit values per register, lower k in the low half):
//                  A 16x16: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..);
//                  B 16x8:  b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g).

/// `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` D = A*B + D (in place). a: 4 tf32
/// words (cvt_rna_tf32), b: 2 words, d: 4 floats. PTX ISA: mma (sm_80+).
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` D = A*B + D (in place), float32
/// accumulate. a: 4 words of bf16 pairs, b: 2 words. PTX ISA: mma (sm_80+).
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` D = A*B + D (in place), float32
/// accumulate. a: 4 words of fp16 pairs, b: 2 words. PTX ISA: mma (sm_80+).
__device__ __forceinline__ void mma_m16n8k16_fp16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace gemmlab

#include "gemmlab/tma.cuh"
