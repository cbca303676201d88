// gemmlab built-in kernel "cluster_tiled": float32 CUDA-core GEMM launched in thread-block
// clusters of 2 CTAs along x (sm_90), where the two CTAs of a cluster share their A tile through
// distributed shared memory (DSMEM).
//
// Both CTAs of a cluster (blockIdx.x = 2c and 2c+1, same blockIdx.y) need the same BM x BK slice
// of A for every reduction chunk. CTA rank r stages only rows [r*BM/2, (r+1)*BM/2) of it from
// global memory into its own a_tile, the cluster meets (barrier.cluster, release/acquire), each
// CTA copies the other half from its peer's a_tile (mapa + ld.shared::cluster) into its own, and
// the cluster meets again before anyone overwrites a half its peer may still be reading. B is
// staged per CTA as in the built-in "tiled" kernel. So each CTA reads half of A from global
// memory. Thread tile, ownership and guards are those of "tiled": thread block
// (BN/TN, BM/TM); each thread owns TM x TN outputs at row ty + i*TY, column tx + j*TX.
// The grid's x extent is even (padded CTAs past N still stage their half of A; their stores
// are masked). Every CTA runs the same number of chunks, so the cluster barriers always match.
// Staging, the inner product over a chunk and the masked stores are gemmlab/tiled.cuh's.
#include "gemmlab/cluster.cuh"
#include "gemmlab/tiled.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void gemm_cluster_tiled(const float *a, const float *b, float *c, int m, int n, int k) {
  constexpr int TX = BN / TN, TY = BM / TM, THREADS = TX * TY, HALF = BM / 2;
  static_assert(BM % TM == 0 && BN % TN == 0 && BM % 2 == 0, "ownership: BM % TM, BN % TN, BM % 2 must be 0");
  static_assert((HALF * BK) % THREADS == 0 && (BK * BN) % THREADS == 0,
                "load coverage: (BM/2)*BK and BK*BN must be multiples of the thread count");
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int lane = ty * TX + tx;
  const int row_base = blockIdx.y * BM, col_base = blockIdx.x * BN;
  const unsigned rank = gemmlab::cluster_ctarank(), peer = rank ^ 1u;
  __shared__ float a_tile[BM][BK];
  __shared__ float b_tile[BK][BN];
  const unsigned peer_a = gemmlab::map_shared_rank(&a_tile[0][0], peer);  // shared::cluster address
  float accumulator[TM][TN] = {}, a_fragment[TM], b_fragment[TN];
  for (int reduction_base = 0; reduction_base < k; reduction_base += BK) {
    // own half of A from global memory
    gemmlab::tiled_stage_a<HALF, BM, BK, THREADS>(a_tile, a, m, k, k, row_base, rank * HALF, reduction_base, lane);
    gemmlab::tiled_stage_b<BK, BN, THREADS>(b_tile, b, n, k, col_base, reduction_base, lane);
    gemmlab::cluster_sync();  // both halves staged and visible cluster-wide
#pragma unroll
    for (int l = 0; l < HALF * BK / THREADS; l++) {  // the peer's half, through DSMEM
      const int linear = lane + l * THREADS;
      const int row = peer * HALF + linear / BK, inner = linear % BK;
      a_tile[row][inner] = gemmlab::ld_shared_cluster_f32(peer_a + 4u * (row * BK + inner));
    }
    gemmlab::cluster_sync();  // copies done (peer may overwrite its half next chunk); local tile complete
    gemmlab::tiled_multiply<BM, BN, BK, TM, TN>(accumulator, a_fragment, b_fragment, a_tile, b_tile, tx, ty);
    __syncthreads();  // no thread overwrites a_tile/b_tile while another warp still reads them
  }
  gemmlab::tiled_store<TM, TN, TX, TY>(c, accumulator, m, n, row_base, col_base, tx, ty);
}
