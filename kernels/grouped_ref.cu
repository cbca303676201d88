// gemmlab built-in kernel "grouped_ref" (issue 44): a CORRECTNESS REFERENCE for grouped GEMM, not a
// fast kernel. One thread per output element of one group, float32 fmaf over k in order, no shared
// memory, no tiling: it exercises the grouped problem kinds through the pipeline (inputs, NaN fill,
// per-group verification, untouched padding / masked rows) and is the slow floor the grouped
// kernels of issue 44 item 3 are measured above.
//
// Layouts (gemmlab/contract/grouped.py): T is float, __nv_bfloat16 or __half; C is float32.
// - contiguous: A (R x K) row-major, expert g's M_g = group_m[g] rows from row group_offsets[g];
//   B is G x K x N (B_COL false) or G x N x K (B_COL true); C (R x N) row-major, same rows as A.
// - masked: A is G x M_max x K; expert g's first group_m[g] rows of its slot are valid; C G x M_max x N.
// - general: group_dims[g] = (M_g, N_g, K_g); group_offsets[g] = element offsets of A_g, B_g, C_g.
// Grid: (ceil(max N_g / BX), ceil(rows per slot / BY), G); a thread outside its group's M_g x N_g
// returns before any load or store, so padding rows, masked rows and gaps are never written.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

/// C[row, col] of one group: A_g row-major (lda = K), B_g K x N row-major or N x K (B_COL).
template <typename T, bool B_COL>
__device__ __forceinline__ float dot(const T *__restrict__ a, const T *__restrict__ b, int col, int N, int K) {
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    const float bv = B_COL ? to_float(b[(long long)col * K + k]) : to_float(b[(long long)k * N + col]);
    acc = fmaf(to_float(a[k]), bv, acc);
  }
  return acc;
}

}  // namespace

template <typename T, bool B_COL, int BX, int BY>
__global__ void __launch_bounds__(BX *BY)
    grouped_ref_contiguous(const T *__restrict__ A, const T *__restrict__ B, float *__restrict__ C,
                           const int *__restrict__ group_offsets, const int *__restrict__ group_m, int N, int K) {
  const int g = blockIdx.z;
  const int row = blockIdx.y * BY + threadIdx.y;
  const int col = blockIdx.x * BX + threadIdx.x;
  if (row >= group_m[g] || col >= N) return;
  const long long r = (long long)group_offsets[g] + row;
  C[r * N + col] = dot<T, B_COL>(A + r * K, B + (long long)g * K * N, col, N, K);
}

template <typename T, bool B_COL, int BX, int BY>
__global__ void __launch_bounds__(BX *BY)
    grouped_ref_masked(const T *__restrict__ A, const T *__restrict__ B, float *__restrict__ C,
                       const int *__restrict__ group_m, int M_max, int N, int K) {
  const int g = blockIdx.z;
  const int row = blockIdx.y * BY + threadIdx.y;
  const int col = blockIdx.x * BX + threadIdx.x;
  if (row >= group_m[g] || col >= N) return;
  const long long r = (long long)g * M_max + row;
  C[r * N + col] = dot<T, B_COL>(A + r * K, B + (long long)g * K * N, col, N, K);
}

template <typename T, bool B_COL, int BX, int BY>
__global__ void __launch_bounds__(BX *BY)
    grouped_ref_general(const T *__restrict__ A, const T *__restrict__ B, float *__restrict__ C,
                        const int *__restrict__ group_dims, const long long *__restrict__ group_offsets) {
  const int g = blockIdx.z;
  const int M = group_dims[3 * g], N = group_dims[3 * g + 1], K = group_dims[3 * g + 2];
  const int row = blockIdx.y * BY + threadIdx.y;
  const int col = blockIdx.x * BX + threadIdx.x;
  if (row >= M || col >= N) return;
  const long long *off = group_offsets + 3 * g;
  C[off[2] + (long long)row * N + col] = dot<T, B_COL>(A + off[0] + (long long)row * K, B + off[1], col, N, K);
}
