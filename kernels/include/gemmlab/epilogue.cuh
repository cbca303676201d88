// gemmlab/epilogue.cuh: staging float32 wgmma accumulators in shared memory for a TMA store.
//
// Header-only, NVRTC-safe. The staging layout is the one a 2-D TMA map of float32 C with a
// 16 x 32 box and CU_TENSOR_MAP_SWIZZLE_128B reads: row r of the box at r x 128 bytes, its 16-byte
// unit u at (u ^ (r % 8)) x 16 (the 128-byte swizzle), so a warp's float2 writes of 8 rows x 32
// bytes cover all 32 banks twice. Used by kernels/wgmma_grouped.cu; kernels/wgmma_bf16.cu keeps its
// own copy of the same arithmetic (stage_box) so its compiled SASS stays as recorded.
// Accumulator layout of m64nNk16 (gemmlab/wgmma.cuh): lane (g = lane / 4, t = lane % 4) of warp w
// holds D(16w + g + 8h, 8j + 2t + v) in d[4j + 2h + v].
#pragma once

#include "gemmlab/tma.cuh"

namespace gemmlab {

/// Write this warp's 16 x 32 float32 box `box` of its m64nN accumulators `d` (columns 32 box ..
/// 32 box + 31; rows g and g + 8 of the warp's 16) into the staging buffer at shared byte address
/// `base` (1024-byte aligned, 2 KiB) in the 128-byte-swizzled layout above. `box` must be a
/// constant after unrolling (register arrays are indexed by it). The caller fences
/// (fence_proxy_async) and syncs the warp before a TMA store reads the buffer.
template <int COUNT>
__device__ __forceinline__ void stage_box_128b(unsigned base, const float (&d)[COUNT], int box, int g, int t) {
#pragma unroll
  for (int jj = 0; jj < 4; jj++) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const unsigned off = (g + 8 * h) * 128 + (((2 * jj + (t >> 1)) ^ g) << 4) + ((t & 1) << 3);
      st_shared_v2(base + off, d[4 * (4 * box + jj) + 2 * h], d[4 * (4 * box + jj) + 2 * h + 1]);
    }
  }
}

}  // namespace gemmlab
