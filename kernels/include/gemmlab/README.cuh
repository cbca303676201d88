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
//   ptx.cuh  cp.async, ldmatrix, mma.sync (TF32/BF16/FP16), mbarrier, TMA loads, fences
//   tma.cuh  the CUtensorMap type a `const __grid_constant__ CUtensorMap` parameter uses
// Rules for new headers: document every function (operands, shapes, the PTX it emits, the arch
// it needs: guard sm_90a-only code with __CUDA_ARCH_FEAT_SM90_ALL), keep them header-only and
// free of host-side includes, and add a CPU test that a kernel including them compiles.
#pragma once
