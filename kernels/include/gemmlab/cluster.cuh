// gemmlab/cluster.cuh: thread-block-cluster helpers (sm_90): CTA rank, cluster barrier and
// distributed shared memory (DSMEM) reads of a peer CTA's shared memory.
//
// Header-only, NVRTC-safe. Reference: PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution):
//   %cluster_ctarank / %cluster_nctarank     10 (special registers)
//   barrier.cluster.arrive / .wait             9.7.13.3 (barrier.cluster, sm_90)
//   mapa.shared::cluster                       9.7.9.22 (mapa, sm_90)
//   ld.shared::cluster                         9.7.9.8 (ld, state space .shared::cluster)
#pragma once

namespace gemmlab {

/// `mov.u32 r, %cluster_ctarank;` rank of this CTA in its cluster (0 .. cluster size - 1).
__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

/// `mov.u32 r, %cluster_nctarank;` number of CTAs in this cluster.
__device__ __forceinline__ unsigned cluster_nctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}

/// `barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;` all threads of
/// all CTAs of the cluster meet; shared-memory writes before it (release) are visible to reads
/// after it in any CTA of the cluster (acquire). Every thread must call it (.aligned).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/// `mapa.shared::cluster.u32 r, addr, rank;` the shared::cluster address of the variable at
/// `local` (a pointer into this CTA's shared memory) in the CTA of rank `rank`.
__device__ __forceinline__ unsigned map_shared_rank(const void *local, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(r) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(local))), "r"(rank));
  return r;
}

/// `ld.shared::cluster.f32 r, [addr];` read a float from a shared::cluster address (map_shared_rank).
__device__ __forceinline__ float ld_shared_cluster_f32(unsigned cluster_address) {
  float r;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(r) : "r"(cluster_address) : "memory");
  return r;
}

/// `ld.shared::cluster.v4.f32 {r0..r3}, [addr];` read 16 bytes (16-byte aligned address).
__device__ __forceinline__ float4 ld_shared_cluster_v4(unsigned cluster_address) {
  float4 r;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "r"(cluster_address) : "memory");
  return r;
}

}  // namespace gemmlab
