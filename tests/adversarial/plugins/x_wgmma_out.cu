// Exploit: a "wgmma" BF16 kernel whose tensor-core path exists only under __CUDA_ARCH_FEAT_SM90_ALL
// (sm_90a). Built for plain sm_90 (the plugin does not ask for arch_specific) the wgmma code is
// compiled out and a CUDA-core fallback computes C: a right result, no HGMMA in its SASS, though the
// kernel declares it is built around HGMMA. With SM90A=2 (arch_specific) the wgmma instructions are
// in the SASS (never executed: they sit behind a condition no launch meets).
#include <cuda_bf16.h>

template <int BS>
__global__ void x_wgmma_out(const __nv_bfloat16 *a, const __nv_bfloat16 *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * BS + threadIdx.y, col = blockIdx.x * BS + threadIdx.x;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (k < 0) {  // never true: the tensor-core path is only here to be in (or out of) the SASS
    __shared__ __align__(128) __nv_bfloat16 tile[64 * 16];
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    const unsigned long long desc = (unsigned long long)((__cvta_generic_to_shared(tile) & 0x3FFFF) >> 4);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "l"(desc), "l"(desc), "r"(0));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    if (row < m && col < n) c[(long long)row * n + col] = d0 + d1 + d2 + d3;
    return;
  }
#endif
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i)
    acc += __bfloat162float(a[(long long)row * k + i]) * __bfloat162float(b[(long long)i * n + col]);
  c[(long long)row * n + col] = acc;
}
