// gemmlab/mma_sync.cuh: the pieces the mma.sync multistage GEMMs (mma_tf32, mma_bf16) share:
// staging a tile into shared memory with 16-byte cp.async (zero-fill past the matrix edges) and
// storing a warp's m16n8 float32 accumulator fragments to row-major C.
//
// Header-only, NVRTC-safe; every function is force-inlined, so a kernel compiles to the same SASS
// as with the code written in place. PTX: cp.async (gemmlab/ptx.cuh); fragment layout of C/D:
// PTX ISA "Matrix Fragments for mma.m16n8k8/k16" (d0,d1 = row g, cols 2t, 2t+1; d2,d3 = row g+8).
#pragma once

#include "gemmlab/ptx.cuh"

namespace gemmlab {

/// Element offset of (r, c) in a shared-memory tile whose rows hold COLS elements of PER per
/// 16-byte chunk. SWZ = 0: padded rows of PITCH elements (r * PITCH + c). SWZ = 1: unpadded rows
/// (PITCH = COLS) with each row's 16-byte chunks XOR-swizzled by its place among the rows sharing
/// one 128-byte line of banks: chunk ^ (r & 7) when a row has >= 8 chunks (CPR, a multiple of 8),
/// else chunk ^ ((r / (8 / CPR)) & (CPR - 1)) (CPR a power of two), so the 8 rows an ldmatrix
/// phase reads at one logical chunk (rows 8-aligned) lie in 8 different 16-byte bank groups.
/// SWZ = 2: chunk ^ ((r & 3) << 1) (CPR a multiple of 8), for the scalar fragment reads of
/// mma_tf32's row-major B (rows k = t and t+4, columns g: 4 rows x 2 chunks hit 8 groups).
/// Swizzle: the XOR layout of CUTLASS's sm80 multistage GEMMs (cute::Swizzle), NVIDIA's
/// "CUDA C++ Programming Guide", shared memory banks.
template <int SWZ, int COLS, int PITCH, int PER>
__device__ __forceinline__ int smem_offset(int r, int c) {
  if constexpr (SWZ == 0) {
    return r * PITCH + c;
  } else {
    constexpr int CPR = COLS / PER;
    static_assert(PITCH == COLS && COLS % PER == 0, "swizzled tiles are unpadded whole chunks");
    static_assert(CPR % 8 == 0 || (SWZ == 1 && (CPR & (CPR - 1)) == 0), "chunks per row: a multiple of 8 or a power of two");
    int x;
    if constexpr (SWZ == 2) x = (r & 3) << 1;
    else if constexpr (CPR >= 8) x = r & 7;
    else x = (r / (8 / CPR)) & (CPR - 1);
    return r * COLS + (((c / PER) ^ x) * PER) + c % PER;
  }
}

/// Stage a ROWS x COLS tile of T (4-byte float or 2-byte bf16/fp16 bits; COLS contiguous in
/// memory and in shared memory, shared pitch PITCH elements, SWZ the layout of smem_offset) from a row-major source with
/// leading dimension `ld`, `rows_valid` rows and `cols_valid` columns left from `src`: one
/// 16-byte cp.async per chunk of 16/sizeof(T) elements, THREADS threads (thread `tid`) covering
/// the chunks exactly once. The src-size operand zero-fills what lies past `cols_valid`; a chunk
/// wholly outside copies 0 bytes from `src` (a valid address). Needs `src`, `ld` and PITCH
/// 16-byte aligned (in elements: multiples of 16/sizeof(T)); the caller commits the group.
template <int ROWS, int COLS, int PITCH, int THREADS, int SWZ = 0, typename T>
__device__ __forceinline__ void cp_async_tile_16(T *dst, const T *src, long long ld, int rows_valid, int cols_valid,
                                                 int tid) {
  constexpr int PER_CHUNK = 16 / static_cast<int>(sizeof(T));
  constexpr int CHUNKS_PER_ROW = COLS / PER_CHUNK, CHUNKS = ROWS * CHUNKS_PER_ROW;
  static_assert(CHUNKS % THREADS == 0, "load coverage: 16-byte chunks must be a multiple of the threads");
#pragma unroll
  for (int l = 0; l < CHUNKS / THREADS; l++) {
    const int chunk = tid + l * THREADS;
    const int r = chunk / CHUNKS_PER_ROW, c = (chunk % CHUNKS_PER_ROW) * PER_CHUNK;
    int valid = r < rows_valid ? cols_valid - c : 0;
    valid = valid < 0 ? 0 : (valid > PER_CHUNK ? PER_CHUNK : valid);
    cp_async_16(dst + smem_offset<SWZ, COLS, PITCH, PER_CHUNK>(r, c), valid > 0 ? src + r * ld + c : src,
                valid * static_cast<int>(sizeof(T)));
  }
}

/// Store one warp's MI x NI m16n8 accumulator fragments `acc[i][j][0..3]` (float32) to C
/// (M x N, row-major float32). The block tile's origin in C is (m0, n0); the warp's tile is
/// (wm, wn) of the block's WM x WN warp tiles, so fragment (i, j) covers rows
/// m0 + wm*WM + i*16 .. +15 and columns n0 + wn*WN + j*8 .. +7; g = lane / 4 and t = lane % 4
/// (lane = threadIdx.x % 32; the caller's, computed where its own code needs them: where they
/// are computed decides ptxas' register assignment). Rows past M and columns past N are not
/// written; a float2 store where N is even and both columns lie inside, else one float each.
template <int MI, int NI, int WM, int WN>
__device__ __forceinline__ void store_acc_m16n8(float *C, const float (&acc)[MI][NI][4], int M, int N, int m0,
                                                int n0, int wm, int wn, int g, int t) {
#pragma unroll
  for (int i = 0; i < MI; i++) {
#pragma unroll
    for (int j = 0; j < NI; j++) {
      const int col = n0 + wn * WN + j * 8 + 2 * t;
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const int row = m0 + wm * WM + i * 16 + g + half * 8;
        if (row >= M) continue;
        float *out = C + (long long)row * N + col;
        const float v0 = acc[i][j][2 * half], v1 = acc[i][j][2 * half + 1];
        if ((N % 2) == 0 && col + 1 < N) {
          *reinterpret_cast<float2 *>(out) = make_float2(v0, v1);
        } else {
          if (col < N) out[0] = v0;
          if (col + 1 < N) out[1] = v1;
        }
      }
    }
  }
}

}  // namespace gemmlab
