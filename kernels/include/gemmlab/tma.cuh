// gemmlab/tma.cuh: Hopper (sm_90) TMA, mbarrier and async-proxy fence wrappers, and an opaque
// CUtensorMap type for `const __grid_constant__ CUtensorMap` kernel parameters.
//
// Header-only, NVRTC-safe (no <cuda.h>: the tensor map is declared here with the driver's layout,
// 128 bytes, 64-byte aligned; the host side builds it with cuTensorMapEncodeTiled /
// cuda.core's StridedMemoryView.as_tensor_map and passes it by value).
// Reference for every helper: PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution):
//   mbarrier.init / mbarrier.arrive.expect_tx / mbarrier.try_wait.parity   9.7.13.15 (mbarrier)
//   fence.proxy.async, fence.mbarrier_init                                9.7.13.4 (membar/fence)
//   cp.async.bulk.tensor (.multicast::cluster)                            9.7.9.25.5 (bulk tensor copy)
//   mapa + mbarrier.arrive.shared::cluster (remote arrival)               9.7.9.22, 9.7.13.15
// CUDA driver API "Tensor Map Object Management" for the CUtensorMap layout (CU_TENSOR_MAP_NUM_QWORDS 16).
#pragma once

#if !defined(__cuda_cuda_h__)
/// Opaque tensor-map object, layout-compatible with the driver's CUtensorMap (cuda.h): 128 bytes,
/// 64-byte aligned. Declared only when <cuda.h> is not included.
typedef struct alignas(64) CUtensorMap_st {
  unsigned long long opaque[16];
} CUtensorMap;
#endif
static_assert(sizeof(CUtensorMap) == 128 && alignof(CUtensorMap) == 64, "CUtensorMap is 128 bytes, 64-aligned");

namespace gemmlab {

/// 32-bit shared-state-space address of a generic pointer into shared memory (same as ptx.cuh).
__device__ __forceinline__ unsigned smem_addr(const void *pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

/// `mbarrier.init.shared::cta.b64 [bar], count;` initialise an mbarrier (8-byte aligned
/// __shared__ unsigned long long) expecting `count` arrivals per phase. PTX ISA: mbarrier.init (sm_80+).
__device__ __forceinline__ void mbarrier_init(unsigned long long *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

/// `fence.mbarrier_init.release.cluster;` make mbarrier.init visible to the async proxy and the
/// cluster before first use by TMA. PTX ISA: fence (sm_90).
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], tx_bytes;` arrive once and add
/// `tx_bytes` to the transaction count the current phase waits for (the bytes the following
/// TMA copies will complete). PTX ISA: mbarrier.arrive (.expect_tx, sm_90).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned long long *bar, unsigned tx_bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(tx_bytes)
               : "memory");
}

/// `mbarrier.arrive.shared::cta.b64 _, [bar];` plain arrival. PTX ISA: mbarrier.arrive (sm_80+).
__device__ __forceinline__ void mbarrier_arrive(unsigned long long *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

/// Spin on `mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity;` until the phase with
/// parity `parity` (0 or 1) has completed (all arrivals and all expected transaction bytes).
/// PTX ISA: mbarrier.test_wait/try_wait (.parity, sm_90).
__device__ __forceinline__ void mbarrier_try_wait_parity(unsigned long long *bar, unsigned parity) {
  unsigned ready = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ready) : "r"(smem_addr(bar)), "r"(parity) : "memory");
  } while (!ready);
}

/// `fence.proxy.async.shared::cta;` order this thread's generic-proxy shared-memory accesses
/// before later async-proxy ones (TMA, wgmma operands) and vice versa. PTX ISA: fence.proxy.async (sm_90).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// `cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [tmap, {c0, c1}], [bar];`
/// TMA: copy the 2-D box at element coordinates (c0 = inner/contiguous, c1 = outer) of the
/// tensor map into shared memory `dst` (aligned as the swizzle requires: 128 bytes, 1024 for
/// the 128-byte swizzle) and complete the box's byte count on `bar`. Out-of-bounds elements are
/// zero-filled and still counted. Issue from one thread. PTX ISA: cp.async.bulk.tensor (sm_90).
__device__ __forceinline__ void tma_load_2d(void *dst_smem, const CUtensorMap *tmap, int c0, int c1,
                                            unsigned long long *bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n"
               ::"r"(smem_addr(dst_smem)), "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(c0), "r"(c1),
               "r"(smem_addr(bar))
               : "memory");
}

/// `cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [tmap, {c0, c1}], [src];` TMA store:
/// copy the 2-D box in shared memory `src` (laid out as the tensor map's swizzle says; 1024-byte
/// aligned for the 128-byte swizzle) to the box at element coordinates (c0 = inner, c1 = outer)
/// of the tensor map's global array; box elements outside the array are not written. Asynchronous:
/// the writes of every thread to `src` must be fenced (fence_proxy_async) and ordered before by a
/// barrier; `src` may be reused after bulk_wait_group_read. Issue from one thread, then
/// bulk_commit_group. PTX ISA: cp.async.bulk.tensor (sm_90), bulk async-group.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *tmap, const void *src_smem, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
               ::"l"(reinterpret_cast<unsigned long long>(tmap)), "r"(smem_addr(src_smem)), "r"(c0), "r"(c1)
               : "memory");
}

/// `cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [tmap, {c0, c1}], [src];`
/// TMA reduction: add the box staged at shared `src_smem` element-wise into global memory at
/// (c0 inner, c1 outer) of the tensor map (float32 maps: float adds, each element's add atomic;
/// clipped at the tensor's bounds). Same rules as tma_store_2d (fenced, barrier-ordered source,
/// bulk async-group). PTX ISA: cp.reduce.async.bulk.tensor (sm_90).
__device__ __forceinline__ void tma_reduce_add_2d(const CUtensorMap *tmap, const void *src_smem, int c0, int c1) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];\n"
               ::"l"(reinterpret_cast<unsigned long long>(tmap)), "r"(smem_addr(src_smem)), "r"(c0), "r"(c1)
               : "memory");
}

/// `fence.proxy.async.global;` order this thread's generic-proxy and async-proxy (TMA) accesses
/// of global memory: after a completed TMA store (bulk wait_group 0) and before a flag release,
/// and after a flag acquire before a TMA reduction into the same data. PTX ISA: membar/fence.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

/// `cp.async.bulk.commit_group;` close this thread's bulk async-group (the TMA stores issued since
/// the last commit). PTX ISA: cp.async.bulk.commit_group (sm_90).
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

/// `cp.async.bulk.wait_group.read N;` wait until at most N of this thread's committed bulk
/// groups still READ their shared-memory source (the source may then be overwritten; the global
/// writes may still be in flight). PTX ISA: cp.async.bulk.wait_group (sm_90).
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

/// `cp.async.bulk.wait_group N;` wait until at most N of this thread's committed bulk groups are
/// incomplete (their global writes performed). PTX ISA: cp.async.bulk.wait_group (sm_90).
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

/// `st.shared.v2.f32 [addr], {a, b};` two floats to a shared-memory byte address (8-byte aligned).
__device__ __forceinline__ void st_shared_v2(unsigned addr, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(a), "f"(b) : "memory");
}

/// `prefetch.tensormap [tmap];` bring the tensor map (a __grid_constant__ parameter) into the
/// cache ahead of first use. PTX ISA: prefetch.tensormap (sm_90).
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap *tmap) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(tmap)) : "memory");
}


/// `cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster
/// [dst], [tmap, {c0, c1}], [bar], mask;` TMA with multicast: the box lands at the same
/// shared-memory offset `dst` in every CTA of the cluster whose bit is set in `cta_mask`, and
/// completes its byte count on the mbarrier at the offset of `bar` in each of them. Issue from one
/// thread. PTX ISA: cp.async.bulk.tensor (.multicast::cluster, sm_90).
__device__ __forceinline__ void tma_load_2d_multicast(void *dst_smem, const CUtensorMap *tmap, int c0, int c1,
                                                      unsigned long long *bar, unsigned short cta_mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3}], [%4], %5;\n"
               ::"r"(smem_addr(dst_smem)), "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(c0), "r"(c1),
               "r"(smem_addr(bar)), "h"(cta_mask)
               : "memory");
}

/// `mapa.shared::cluster.u32 r, bar, rank; mbarrier.arrive.shared::cluster.b64 _, [r];` arrive
/// once on the mbarrier at the offset of `bar` in the CTA of cluster rank `rank` (this CTA's own
/// rank included), with the default (.release.cta) semantics: enough to hand a stage that wgmma
/// (async proxy, completed by wgmma.wait_group) has finished reading back to a TMA producer. An
/// explicit `.release.cluster` compiles to MEMBAR.ALL.GPU before every arrival (measured: the
/// 2-CTA wgmma GEMM ran at 54% of its 1-CTA speed with it). PTX ISA: mapa, mbarrier.arrive (sm_90).
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned long long *bar, unsigned rank) {
  asm volatile("{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
               " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
               ::"r"(smem_addr(bar)), "r"(rank)
               : "memory");
}

}  // namespace gemmlab
