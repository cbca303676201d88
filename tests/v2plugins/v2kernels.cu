// Test kernels for gemmlab's plugin contract v2 (tests/test_contract_v2.py): layouts through
// leading dimensions, a launch plan (memset C, main kernel, extra kernel) with a workspace and a
// constant argument, a TMA tensor map passed by value, and 2-byte inputs from CUDA's headers.
#include "v2local.cuh"
#include "gemmlab/README.cuh"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// C = A @ B, one output per thread; A and B row- or column-major (LA, LB: 1 = column-major).
template <int LA, int LB>
__global__ void gemm_layout(const float *A, const float *B, float *C, int M, int N, int K, int lda, int ldb) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += A[at_a(LA, row, k, lda)] * B[at_b(LB, k, col, ldb)];
  C[(long long)row * N + col] = acc;
}

// Launch-plan test: C += scale * A @ B (C must be zeroed first) and ws = (1 - scale) * A @ B;
// then add_ws adds ws to C.
template <int X>
__global__ void gemm_part(const float *A, const float *B, float *C, float *ws, int M, int N, int K, float scale) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += A[(long long)row * K + k] * B[(long long)k * N + col];
  C[(long long)row * N + col] += scale * acc;
  ws[(long long)row * N + col] = acc - scale * acc;
}

template <int X>
__global__ void add_ws(float *C, const float *ws, int M, int N) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long long)M * N) C[i] += ws[i];
}

// A tensor map passed by value before the pointers (unused here: it proves the 128-byte
// argument does not misplace the ones after it).
struct alignas(64) TensorMapBytes { unsigned long long opaque[16]; };

template <int X>
__global__ void gemm_after_map(const __grid_constant__ TensorMapBytes map, const float *A, const float *B, float *C,
                               int M, int N, int K) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += A[(long long)row * K + k] * B[(long long)k * N + col];
  C[(long long)row * N + col] = acc;
}

// 2-byte inputs (bf16 or fp16 storage), float32 accumulation and output.
template <typename T>
__global__ void gemm_half(const T *A, const T *B, float *C, int M, int N, int K) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += float(A[(long long)row * K + k]) * float(B[(long long)k * N + col]);
  C[(long long)row * N + col] = acc;
}
