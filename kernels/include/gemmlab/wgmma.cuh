// gemmlab/wgmma.cuh: Hopper warpgroup MMA (wgmma, sm_90a only) wrappers for BF16, FP16 and TF32 with
// float32 accumulators, setmaxnreg, and operands A and B in shared memory described by 64-bit matrix descriptors.
//
// Header-only, NVRTC-safe. Compile with arch sm_90a (KernelOptions(arch_specific=True)); every
// helper is empty unless __CUDA_ARCH_FEAT_SM90_ALL is defined, so a plain sm_90 build compiles
// (and the kernel must refuse to run there). Reference: PTX ISA (docs.nvidia.com/cuda/
// parallel-thread-execution) 9.7.15 "Asynchronous Warpgroup Level Matrix Multiply-Accumulate":
//   wgmma.fence / wgmma.commit_group / wgmma.wait_group, wgmma.mma_async, 9.7.15.5.1 "Matrix
//   Descriptor Format" (start address >> 4 in bits 0-13, leading byte offset >> 4 in bits 16-29,
//   stride byte offset >> 4 in bits 32-45, swizzle mode in bits 62-63: 1 = 128-byte swizzle).
// Accumulator layout of m64nNk16 (per warp w of the warpgroup, g = lane/4, t = lane%4):
//   d[4j+0], d[4j+1] = D(16w+g,   8j+2t, +1);  d[4j+2], d[4j+3] = D(16w+g+8, 8j+2t, +1), j < N/8.
#pragma once

namespace gemmlab {

/// Matrix descriptor of a K-major operand tile stored as rows of 64 bf16 (128 bytes) with the
/// 128-byte swizzle, as TMA writes it with CU_TENSOR_MAP_SWIZZLE_128B and a 64-element inner box:
/// 8-row groups are 1024 bytes apart (stride byte offset), leading byte offset unused (1).
/// `smem_tile` must be 1024-byte aligned for k-offset 0; advancing along K by 16 elements adds
/// 32 bytes to the start address. PTX ISA: wgmma matrix descriptor.
__device__ __forceinline__ unsigned long long wgmma_desc_k128b(const void *smem_tile) {
  const unsigned long long address = static_cast<unsigned>(__cvta_generic_to_shared(smem_tile));
  unsigned long long desc = (address & 0x3FFFF) >> 4;
  desc |= 1ull << 16;                    // leading byte offset (ignored for swizzled K-major)
  desc |= (1024ull >> 4) << 32;          // stride byte offset: 8 rows x 128 bytes
  desc |= 1ull << 62;                    // 128-byte swizzle
  return desc;
}

/// `wgmma.fence.sync.aligned;` order register accesses to the accumulators before wgmma. PTX ISA: wgmma.fence.
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

/// `wgmma.commit_group.sync.aligned;` close the group of issued wgmma.mma_async. PTX ISA: wgmma.commit_group.
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

/// `wgmma.wait_group.sync.aligned N;` wait until at most N wgmma groups are pending. PTX ISA: wgmma.wait_group.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

/// Keep the compiler from moving accumulator reads/writes across wgmma (register fence).
template <int COUNT>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[COUNT]) {
#pragma unroll
  for (int i = 0; i < COUNT; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/// `wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {d}, desc_a, desc_b, p, 1, 1, 0, 0;`
/// D(64x64, f32, 32 registers per thread) += A(64x16, K-major smem) * B(16x64, K-major smem,
/// i.e. stored N x K); scale_d = 0 ignores the old D (p = scale_d != 0). Asynchronous: wgmma_fence before, wgmma_commit + wgmma_wait after.
/// PTX ISA: wgmma.mma_async (sm_90a).
__device__ __forceinline__ void wgmma_m64n64k16_bf16(float (&d)[32], unsigned long long desc_a,
                                                      unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "%32, %33, p, 1, 1, 0, 0;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#endif
}

/// `wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {d}, desc_a, desc_b, p, 1, 1, 0, 0;`
/// D(64x128, f32, 64 registers per thread) += A(64x16, K-major smem) * B(16x128, K-major smem,
/// i.e. stored N x K); scale_d = 0 ignores the old D (p = scale_d != 0). Asynchronous: wgmma_fence before, wgmma_commit + wgmma_wait after.
/// PTX ISA: wgmma.mma_async (sm_90a).
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[64], unsigned long long desc_a,
                                                      unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "%64, %65, p, 1, 1, 0, 0;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#endif
}


// ---- general descriptors, register reallocation and the overloaded wgmma wrappers -------------
// (used by kernels/wgmma_bf16.cu; the wrappers are chosen by the accumulator array length:
// float[32] -> n64, float[64] -> n128, float[128] -> n256)

/// Matrix descriptor (PTX ISA 9.7.15.5.1) for a tile written by TMA with the 128-byte swizzle:
/// start address `smem_tile` (1024-byte aligned, plus in-atom offsets along the leading
/// dimension), leading byte offset `lbo` and stride byte offset `sbo` (bytes, multiples of 16),
/// swizzle mode 1 (128 B). K-major: sbo = 1024 (8 rows of 128 B), lbo unused. MN-major (canonical
/// layout ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)), T = 16 bytes): lbo = bytes between successive
/// 64-element (128-byte) column chunks along M/N, sbo = 1024 (8 rows of K, 128 B each).
__device__ __forceinline__ unsigned long long wgmma_desc_128b(const void *smem_tile, unsigned lbo, unsigned sbo) {
  const unsigned long long address = static_cast<unsigned>(__cvta_generic_to_shared(smem_tile));
  unsigned long long desc = (address & 0x3FFFF) >> 4;
  desc |= static_cast<unsigned long long>((lbo >> 4) & 0x3FFF) << 16;
  desc |= static_cast<unsigned long long>((sbo >> 4) & 0x3FFF) << 32;
  desc |= 1ull << 62;
  return desc;
}

/// `setmaxnreg.inc.sync.aligned.u32 N;` raise this warpgroup's per-thread register limit to N
/// (24..256, a multiple of 8). Takes effect only with a register cap at kernel entry
/// (__launch_bounds__(threads, 1)); warpgroup-wide. PTX ISA: setmaxnreg (sm_90a).
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

/// `setmaxnreg.dec.sync.aligned.u32 N;` release registers: lower this warpgroup's limit to N.
/// PTX ISA: setmaxnreg (sm_90a).
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

/// Register fence over a 2-D accumulator array (see wgmma_fence_operands).
template <int ROWS, int COUNT>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[ROWS][COUNT]) {
#pragma unroll
  for (int r = 0; r < ROWS; r++) wgmma_fence_operands(d[r]);
}

/// `wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16`: D(64x64, f32, 32 registers per thread) +=
/// A(64x16) * B(16x64); TRANS_B = 0: B K-major (stored N x K), 1: B MN-major (stored K x N;
/// imm-trans-b = 1); TRANS_A = 0: A K-major (stored M x K), 1: A MN-major (stored K x M, a
/// column-major A; imm-trans-a = 1); both from shared memory (the transpose bits exist for 16-bit
/// types with descriptor operands only, not for tf32). scale_d = 0 ignores the old D. PTX ISA:
/// wgmma.mma_async (sm_90a).
template <int TRANS_B, int TRANS_A = 0>
__device__ __forceinline__ void wgmma_bf16(float (&d)[32], unsigned long long desc_a,
    unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "%32, %33, p, 1, 1, %36, %35;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B), "n"(TRANS_A));
#endif
}

/// `wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16`: D(64x128, f32, 64 registers per thread) +=
/// A(64x16) * B(16x128); TRANS_B = 0: B K-major (stored N x K), 1: B MN-major (stored K x N;
/// imm-trans-b = 1); TRANS_A = 0: A K-major (stored M x K), 1: A MN-major (stored K x M, a
/// column-major A; imm-trans-a = 1); both from shared memory (the transpose bits exist for 16-bit
/// types with descriptor operands only, not for tf32). scale_d = 0 ignores the old D. PTX ISA:
/// wgmma.mma_async (sm_90a).
template <int TRANS_B, int TRANS_A = 0>
__device__ __forceinline__ void wgmma_bf16(float (&d)[64], unsigned long long desc_a,
    unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "%64, %65, p, 1, 1, %68, %67;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B), "n"(TRANS_A));
#endif
}

/// `wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16`: D(64x256, f32, 128 registers per thread) +=
/// A(64x16) * B(16x256); TRANS_B = 0: B K-major (stored N x K), 1: B MN-major (stored K x N;
/// imm-trans-b = 1); TRANS_A = 0: A K-major (stored M x K), 1: A MN-major (stored K x M, a
/// column-major A; imm-trans-a = 1); both from shared memory (the transpose bits exist for 16-bit
/// types with descriptor operands only, not for tf32). scale_d = 0 ignores the old D. PTX ISA:
/// wgmma.mma_async (sm_90a).
template <int TRANS_B, int TRANS_A = 0>
__device__ __forceinline__ void wgmma_bf16(float (&d)[128], unsigned long long desc_a,
    unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
               "%128, %129, p, 1, 1, %132, %131;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B), "n"(TRANS_A));
#endif
}

// ---- FP16 (.f16.f16): the same instruction form as BF16 -------------------------------------
// PTX ISA 9.7.15.5 wgmma.mma_async: `.f16` and `.bf16` multiplicands share one syntax (a-desc, b-desc,
// scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b), the m64nNk16 fragment layout of D and
// the shared-memory matrix layouts the descriptors name; the transpose bits exist for both (descriptor
// operands only). Only the element type of A and B differs (IEEE binary16: 5 exponent bits, 10 mantissa
// bits), so a kernel built for one serves the other by this wrapper alone (kernels/wgmma_bf16.cu, F16 = 1).

/// `wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16`: D(64x64, f32, 32 registers per thread) +=
/// A(64x16, fp16) * B(16x64, fp16); TRANS_B / TRANS_A as in wgmma_bf16 (1: the operand MN-major,
/// imm-trans-b / imm-trans-a = 1). scale_d = 0 ignores the old D. PTX ISA: wgmma.mma_async (sm_90a).
template <int TRANS_B, int TRANS_A = 0>
__device__ __forceinline__ void wgmma_f16(float (&d)[32], unsigned long long desc_a,
    unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "%32, %33, p, 1, 1, %36, %35;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B), "n"(TRANS_A));
#endif
}

/// `wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16`: D(64x128, f32, 64 registers per thread) +=
/// A(64x16, fp16) * B(16x128, fp16); TRANS_B / TRANS_A as in wgmma_bf16 (1: the operand MN-major,
/// imm-trans-b / imm-trans-a = 1). scale_d = 0 ignores the old D. PTX ISA: wgmma.mma_async (sm_90a).
template <int TRANS_B, int TRANS_A = 0>
__device__ __forceinline__ void wgmma_f16(float (&d)[64], unsigned long long desc_a,
    unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "%64, %65, p, 1, 1, %68, %67;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B), "n"(TRANS_A));
#endif
}

/// `wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16`: D(64x256, f32, 128 registers per thread) +=
/// A(64x16, fp16) * B(16x256, fp16); TRANS_B / TRANS_A as in wgmma_bf16 (1: the operand MN-major,
/// imm-trans-b / imm-trans-a = 1). scale_d = 0 ignores the old D. PTX ISA: wgmma.mma_async (sm_90a).
template <int TRANS_B, int TRANS_A = 0>
__device__ __forceinline__ void wgmma_f16(float (&d)[128], unsigned long long desc_a,
    unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
               "%128, %129, p, 1, 1, %132, %131;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B), "n"(TRANS_A));
#endif
}


/// `wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32`: D(64x64, f32, 32 registers per thread) +=
/// A(64x8, K-major smem, float32 read as TF32) * B(8x64, K-major smem, stored N x K); TF32
/// has no transpose: both operands must be K-major. PTX ISA: wgmma.mma_async (sm_90a).
__device__ __forceinline__ void wgmma_tf32(float (&d)[32], unsigned long long desc_a,
    unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "%32, %33, p, 1, 1;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#endif
}

/// `wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32`: D(64x128, f32, 64 registers per thread) +=
/// A(64x8, K-major smem, float32 read as TF32) * B(8x128, K-major smem, stored N x K); TF32
/// has no transpose: both operands must be K-major. PTX ISA: wgmma.mma_async (sm_90a).
__device__ __forceinline__ void wgmma_tf32(float (&d)[64], unsigned long long desc_a,
    unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "%64, %65, p, 1, 1;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#endif
}

/// `wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32`: D(64x256, f32, 128 registers per thread) +=
/// A(64x8, K-major smem, float32 read as TF32) * B(8x256, K-major smem, stored N x K); TF32
/// has no transpose: both operands must be K-major. PTX ISA: wgmma.mma_async (sm_90a).
__device__ __forceinline__ void wgmma_tf32(float (&d)[128], unsigned long long desc_a,
    unsigned long long desc_b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
               "%128, %129, p, 1, 1;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#endif
}


}  // namespace gemmlab
