// gemmlab built-in kernel "tma_bf16": BF16 GEMM on Hopper (sm_90a) with the A and B tiles loaded
// by TMA (cp.async.bulk.tensor.2d, 128-byte swizzle) into a STAGES-deep shared-memory ring
// completed on mbarriers, and computed by one warpgroup (128 threads) with
// wgmma.mma_async m64nBNk16 (bf16 inputs, float32 accumulators in registers).
//
// C (M x N, row-major float32) = A (M x K, row-major bf16) @ B (K x N, column-major bf16, i.e.
// stored N x K with K contiguous: B[k,n] at k + n*K). Both operands are therefore K-major, the
// layout wgmma reads without transposition.
// Tensor maps (built by the host): A over the M x K array with box (64 rows, 64 columns), B over
// the N x K array with box (BN rows, 64 columns), both bfloat16, 128-byte swizzle, zero OOB fill.
// TMA rule: the row stride K*2 bytes must be a multiple of 16 (K % 8 == 0); M and N are free.
// Out-of-bounds box elements (past M, N or K) arrive as zeros, and the mbarrier still counts the
// full box bytes, so partial tiles need no other handling; only the final stores are masked.
//
// Block tile 64 x BN x 64 (BK). Pipeline: thread 0 initialises one mbarrier per stage, then
// issues the TMA pair of the first STAGES chunks; per chunk every thread waits on the stage's
// barrier (phase parity = (chunk / STAGES) & 1), the warpgroup issues 4 wgmma (k = 0, 16, 32, 48:
// the descriptor start address advances 32 bytes inside the swizzled 128-byte rows), commits and
// waits for them, __syncthreads() so nobody still reads the slot, and thread 0 refills the slot
// with chunk + STAGES. Compiled for sm_90 (not 90a) the wgmma helpers are empty: the plugin
// always asks for the arch-specific target.
#include "gemmlab/ptx.cuh"
#include "gemmlab/wgmma.cuh"

template <int BN, int STAGES>
__global__ void __launch_bounds__(128, 1)
gemm_tma_wgmma(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
               float *C, int M, int N, int K) {
  constexpr int BM = 64, BK = 64;
  constexpr unsigned A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
  static_assert(BN == 64 || BN == 128, "BN is 64 or 128 (wgmma m64n64k16 / m64n128k16)");
  static_assert(A_BYTES % 1024 == 0 && B_BYTES % 1024 == 0, "128-byte swizzle atoms need 1024-byte alignment");
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES];
  // the 128-byte swizzle pattern repeats every 1024 bytes: align the ring to 1024 (the launch asks
  // for 1024 bytes of slack)
  const unsigned raw = gemmlab::smem_u32(smem_raw);
  unsigned char *ring = smem_raw + ((1024u - (raw & 1023u)) & 1023u);

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;
  const int tid = threadIdx.x;

  if (tid == 0) {
    gemmlab::prefetch_tensormap(&tensor_a);
    gemmlab::prefetch_tensormap(&tensor_b);
#pragma unroll
    for (int s = 0; s < STAGES; s++) gemmlab::mbarrier_init(&full[s], 1);
    gemmlab::fence_barrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    for (int s = 0; s < STAGES && s < k_tiles; s++) {
      unsigned char *slot = ring + s * STAGE_BYTES;
      gemmlab::mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);
      gemmlab::tma_load_2d(slot, &tensor_a, s * BK, m0, &full[s]);
      gemmlab::tma_load_2d(slot + A_BYTES, &tensor_b, s * BK, n0, &full[s]);
    }
  }

  float d[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;

  for (int kt = 0; kt < k_tiles; kt++) {
    const int s = kt % STAGES;
    gemmlab::mbarrier_try_wait_parity(&full[s], (kt / STAGES) & 1);
    unsigned char *slot = ring + s * STAGE_BYTES;
    gemmlab::wgmma_fence_operands(d);
    gemmlab::wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; k++) {
      const unsigned long long da = gemmlab::wgmma_desc_k128b(slot + k * 32);
      const unsigned long long db = gemmlab::wgmma_desc_k128b(slot + A_BYTES + k * 32);
      if constexpr (BN == 128) gemmlab::wgmma_m64n128k16_bf16(d, da, db);
      else gemmlab::wgmma_m64n64k16_bf16(d, da, db);
    }
    gemmlab::wgmma_commit();
    gemmlab::wgmma_wait<0>();
    gemmlab::wgmma_fence_operands(d);
    __syncthreads();  // every warp finished reading slot s
    const int next = kt + STAGES;
    if (tid == 0 && next < k_tiles) {
      gemmlab::mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);
      gemmlab::tma_load_2d(slot, &tensor_a, next * BK, m0, &full[s]);
      gemmlab::tma_load_2d(slot + A_BYTES, &tensor_b, next * BK, n0, &full[s]);
    }
  }

  // accumulator layout of m64nBNk16: warp w owns rows 16w..16w+15; d[4j..4j+3] is the m16n8 C
  // fragment of columns 8j..8j+7 (rows g and g+8, columns 2t and 2t+1)
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    const int col = n0 + j * 8 + 2 * t;
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int row = m0 + warp * 16 + g + half * 8;
      if (row >= M) continue;
      float *out = C + (long long)row * N + col;
      const float v0 = d[4 * j + 2 * half], v1 = d[4 * j + 2 * half + 1];
      if ((N % 2) == 0 && col + 1 < N) {
        *reinterpret_cast<float2 *>(out) = make_float2(v0, v1);
      } else {
        if (col < N) out[0] = v0;
        if (col + 1 < N) out[1] = v1;
      }
    }
  }
}
