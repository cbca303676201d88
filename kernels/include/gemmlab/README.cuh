// gemmlab's shared kernel headers (header-only, NVRTC-safe; no host code, no <cuda.h>).
//
// A kernel source includes them as "gemmlab/<file>.cuh"; gemmlab puts kernels/include on NVRTC's
// include path, beside the source's own folder and CUDA's headers from the pip wheels
// (nvidia-cuda-cccl, nvidia-cuda-runtime, located with cuda.pathfinder). Every included file's
// SHA-256 is part of the compile-cache key and the record (compile.includes), so editing a
// header recompiles every kernel that uses it. A header outside these folders, or a missing one,
// is a one-line error (field "include", exit 2).
//
// Files (see each file's own comment header for its functions, their PTX and requirements):
//   ptx.cuh  cp.async (16-byte, 4-byte zero-fill), commit/wait_group, ldmatrix x1/x2/x4 (+.trans),
//            mma.sync m16n8k8 tf32 and m16n8k16 bf16/fp16, cvt.rna.tf32; includes tma.cuh
//   tma.cuh  the CUtensorMap type a `const __grid_constant__ CUtensorMap` parameter uses, mbarrier
//            init/arrive_expect_tx/try_wait_parity, fence.proxy.async, TMA 2-D loads (ptx.cuh includes it)
//   wgmma.cuh  sm_90a wgmma (fence/commit/wait, m64n64k16/m64n128k16 bf16) and the 128B-swizzle
//            K-major shared-memory matrix descriptor
//   cluster.cuh  cluster rank, barrier.cluster, mapa + ld.shared::cluster (DSMEM)
//   mma_sync.cuh  what mma_tf32 and mma_bf16 share: 16-byte cp.async tile staging with zero-fill
//            and the store of m16n8 float32 accumulator fragments to C (includes ptx.cuh)
//   mma16.cuh  Mma16<T>::run: mma.sync m16n8k16 by storage type (bf16 / fp16), for the kernels
//            templated on it (mma_bf16, decode_bf16)
//   tiled.cuh  the "tiled" kernel's scheme in pieces (A/B staging, the chunk's inner product, the
//            masked stores), shared by splitk and cluster_tiled
//   fused.cuh  the fused epilogue of issue 43 (alpha, beta·C0, bias, activation, bf16/fp16/float32 C
//            rounded once, C's pitch and batch stride) for kernels storing float32 results from
//            registers: Fused<ACT, BIAS, BETA, BIAS_T, OUT_T>::store1 / store4 (sgemm_pipelined, decode)
//   relayout.cuh  operand copies into the workspace before a TMA kernel: pad copy (16-byte row
//            stride, zero pad) and transpose (row-major B -> K-major), as Extra steps of a plan
// Pieces moved out of a kernel must compile to the same SASS as before (force-inline; compare
// the kernel.sass of mode=compile, addresses stripped, before and after).
// Rules for new headers: document every function (operands, shapes, the PTX it emits, the arch
// it needs: guard sm_90a-only code with __CUDA_ARCH_FEAT_SM90_ALL), keep them header-only and
// free of host-side includes, and add a CPU test that a kernel including them compiles.
#pragma once
