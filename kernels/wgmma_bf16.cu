// gemmlab built-in kernels "wgmma_bf16" and (through wgmma_tf32.cu) "wgmma_tf32":
// warp-specialised, persistent Hopper GEMM (sm_90a). One template, ELEM = 2 (bf16 inputs; fp16 inputs
// through the entries gemm_wgmma_f16 / gemm_wgmma_tma_store_f16, whose only difference is wgmma's
// .f16.f16 form: F16 = 1) or 4 (float32 storage read as TF32).
//
// C (M x N, row-major float32) = A (M x K) @ B (K x N). Template MAJOR (bit 0: B, bit 1: A) says
// which operands are MN-major: bit 0 clear for B stored column-major (N x K, K contiguous: K-major),
// set for B row-major (K x N, N contiguous; bf16 and fp16: wgmma reads it transposed, imm-trans-b = 1);
// bit 1 clear for A row-major (M x K, K-major), set for A column-major (stored K x M, M contiguous;
// bf16 and fp16: imm-trans-a = 1). TF32 wgmma has no transpose bits: its plugin copies a row-major B or a
// column-major A into a K-major workspace copy first. MAJOR 0 and 1 are the row-major-A instances of
// before (same template arguments, same code); 2 and 3 the column-major A.
// Column-major A: the stage's A tile is BM/64 TMA boxes of (BK rows of K) x (64 columns of M) with
// the 128-byte swizzle (8 KiB each, box i holding tile rows 64 i .. 64 i + 63), the layout of a
// row-major B's boxes; an m64 block of the tile is one box, described MN-major: start at the box plus
// 16 rows of K (2 KiB) per k-step, stride byte offset 1024 (8 rows of K), leading byte offset one box
// (between 64-element chunks along M; a single chunk per m64 block).
//
// Block: 3 warpgroups (384 threads). Warpgroup 0 is the producer (setmaxnreg.dec to 40; one
// thread issues every TMA load), warpgroups 1 and 2 are consumers (setmaxnreg.inc to 232): each
// owns BM/2 rows of the BM x BN tile and runs wgmma m64nBNk(32/ELEM) on them, BM/128 m64 blocks
// each, float32 accumulators in registers. PINGPONG = 1: the two consumer warpgroups take
// alternate tiles of the CTA's list instead (each computes a whole BM x BN tile, BM/64 m64 blocks;
// named barriers 1 and 2 order their main loops strictly: 0, 1, 0, 1, ...), so one warpgroup's
// epilogue overlaps the other's main loop; a stage is then read by 4 warps instead of 8. The
// strict order is what keeps the parity waits valid: a warpgroup skips the other's stages, and
// without it a stage barrier could be two phases ahead (the first H200 run, without the order,
// faulted at 4096^3 where K / BK > STAGES, and passed only where every tile had fewer k-tiles).
// Pipeline: a STAGES-deep ring of (A BM x BK, B BN x BK) tiles, BK = 128 bytes of K (64 bf16 or 32
// float32: one 128-byte swizzle row), each stage with a "full" mbarrier (producer arrive_expect_tx
// + TMA complete_tx) and an "empty" mbarrier (one arrival per consumer warp, per CTA of the
// cluster). The producer waits for "empty" with the opposite parity (a fresh barrier's previous
// phase counts as complete, so the first pass through the ring does not wait). A consumer keeps one
// wgmma group in flight (wgmma.wait_group 1) and releases the previous stage.
// Persistent: the grid is at most one CTA per SM (the plugin sizes it from the SM count); CTA b
// takes the work units b, b + #CTAs, ... Units are ordered in groups of GROUP_M tile rows (the
// row index runs fastest inside a group) so concurrently running CTAs share A and B panels in L2.
// CLUSTER = 2: two CTAs (consecutive tile rows, the same tile column) form a cluster; each loads
// its own A tile and half of the shared B tile, multicast to both (TMA .multicast::cluster), so B
// crosses L2 once per pair. Each consumer warp then releases a stage in both CTAs (remote
// mbarrier arrive), and both CTAs meet at a cluster barrier before exiting.
// Edges: TMA zero-fills box elements outside M, N, K (and still counts their bytes), so partial
// tiles need no other handling; the epilogue masks its stores (a full-tile fast path skips the
// masks). Epilogue (template EPI; the plugin's EPI is one more): 0 accumulator registers straight to
// global memory (float2 stores where N is even); 1 per-warp shared-memory staging of 16 x 32 boxes
// and TMA stores (gemm_wgmma_tma_store; a split tile's adders TMA reduce-add instead, in the chain); 2 the register stores twice (a
// diagnostic of their cost); 3 the same staging, then coalesced st.global.v4 by each warp; 4 as 1
// with the tile's last ring stage held as more staging (released per warp once its boxes are read).
// Split K (SPLIT_K > 1) and the stream-K tail (template TAIL = 1 / 2, the plugin's TAIL=2 / 3): work items become (tile unit, k range)
// (WorkSchedule below). SPLIT_K: every tile's K is cut into S = cdiv(k_tiles, cdiv(k_tiles,
// SPLIT_K)) slices; units are slice-major with the last slice (the one ending at K) first. TAIL:
// the tile units of the whole waves are data-parallel (one item each, whole K); the k-tiles of the
// last partial wave's `rem` units (rem x k_tiles iterations) are cut into one contiguous range per
// CTA/cluster (stream-K, Osama et al. 2023), so that wave ends after ~rem/#CTAs of a tile instead
// of a whole one (applied when it saves >= 2% of the CTA's k-tiles and every range has >= 2 k-tiles,
// so no range is empty and a tile's contributors are the workers from its first to its last k-tile).
// Template TAIL = 2 (k-aligned) takes each range's last tile first, from k-tile 0, then its first tile's
// end, so at any moment the tail's CTAs read k-tiles at most ~kt - range apart (L2 panels shared), and
// ranks the items from the one starting at k-tile 0 (computed first by its CTA) upwards instead.
// A tile computed by n > 1 items is reduced in C itself, without zero-fill or workspace, in a fixed
// order (bitwise repeatable: float addition is not associative): items are ranked from the k range
// ending at K (rank 0, the "storer": plain stores) downwards; rank r waits until the tile's flag
// reads r (ld.acquire.gpu), adds with red.global.add.f32 (the TMA-store entry: rank 0 TMA-stores,
// ranks >= 1 cp.reduce.async.bulk.tensor .add, each waiting for its bulk ops to complete before it
// passes the tile on), fences and counts the flag up (the last,
// rank n - 1, resets it to 0 for the next launch). The flags are this module's __device__ array
// (zero at module load, left zero by every launch), indexed tile unit x CLUSTER + cluster rank.
// Rank r - 1 is an item of lower index (SPLIT_K: slice-major units, rank-major) or of the next
// tail worker, whose items before it wait only on higher workers; the persistent grid is
// co-resident (one CTA per SM), so the waits cannot deadlock.
// Accumulator layout of m64nNk: warp w of the warpgroup owns rows 16w..16w+15;
//   d[4j + 2h + v] = D(16w + g + 8h, 8j + 2t + v), g = lane / 4, t = lane % 4.
#include "gemmlab/ptx.cuh"
#include "gemmlab/wgmma.cuh"
#include "gemmlab/cluster.cuh"
#include "gemmlab/relayout.cuh"  // pad / transpose copies of A or B, Extra steps of the plan

/// `bar.sync id, count;` named barrier among `count` threads (a multiple of 32). PTX ISA: bar.sync.
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/// `bar.arrive id, count;` arrive at a named barrier without waiting. PTX ISA: bar.arrive.
__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}


/// Per-tile counters of split tiles (see the header comment): zero at module load, reset by the
/// last contributor of every split tile, so each launch finds them zero.
constexpr int WGMMA_MAX_FLAGS = 16384;
__device__ unsigned wgmma_split_flags[WGMMA_MAX_FLAGS];

/// Spin until the 32-bit global counter reads `rank` (`ld.acquire.gpu`: the C writes of the ranks
/// before are visible after).
__device__ __forceinline__ void flag_wait(const unsigned *flag, int rank) {
  unsigned v;
  do {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
  } while (v != (unsigned)rank);
}

/// Pass the tile on after rank `rank`'s contribution: a GPU-scope fence (the group's C writes and
/// reductions, ordered before by a barrier, are performed), then `st.release.gpu` of rank + 1, or
/// of 0 by the last rank (the flag is zero again for the next launch).
__device__ __forceinline__ void flag_signal(unsigned *flag, int rank, int contributors) {
  __threadfence();
  const unsigned next = rank + 1 == contributors ? 0u : (unsigned)(rank + 1);
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(flag), "r"(next) : "memory");
}

/// `red.global.add.f32` (one float) and the sm_90 vector form `red.global.add.v2.f32` (8-byte
/// aligned). PTX ISA: red. Measured on the H200 against a load (ld.global.cg) + add + store form
/// of the same ordered reduction: the atomics are faster (4096^3 TAIL=2: 0.208 vs 0.227 ms;
/// 256x256x65536 SPLIT_K=16: 0.122 vs 0.279 ms): no load round trip on the chain from rank to rank.
__device__ __forceinline__ void red_add(float *p, float v) {
  asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ void red_add2(float *p, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
}

/// `st.global.v2.f32` in an asm volatile: a float2 store the compiler may neither merge nor drop (the EPI = 2
/// diagnostic issues each full-tile store twice to measure what the stores cost).
__device__ __forceinline__ void st_global_v2_kept(float *p, float a, float b) {
  asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
}

/// `st.global.cs.v2.f32`: the EPI = 2 diagnostic's second store (another cache operator, so
/// ptxas does not fold it into the first: it removed a repeated plain store).
__device__ __forceinline__ void st_global_v2_cs(float *p, float a, float b) {
  asm volatile("st.global.cs.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
}

/// `ld.shared.v4.f32`: four floats from a 16-byte aligned shared-memory byte address.
__device__ __forceinline__ float4 ld_shared_v4(unsigned addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr) : "memory");
  return v;
}

/// `cp.async.bulk.wait_group.read n` for a run-time n in 0..8 (the immediate is a template argument).
__device__ __forceinline__ void bulk_wait_group_read_n(int n) {
  switch (n) {
    case 0: gemmlab::bulk_wait_group_read<0>(); break;
    case 1: gemmlab::bulk_wait_group_read<1>(); break;
    case 2: gemmlab::bulk_wait_group_read<2>(); break;
    case 3: gemmlab::bulk_wait_group_read<3>(); break;
    case 4: gemmlab::bulk_wait_group_read<4>(); break;
    case 5: gemmlab::bulk_wait_group_read<5>(); break;
    case 6: gemmlab::bulk_wait_group_read<6>(); break;
    case 7: gemmlab::bulk_wait_group_read<7>(); break;
    default: gemmlab::bulk_wait_group_read<8>(); break;
  }
}

/// A warp's 16 x 32 float32 box of its m64nN accumulators (columns 32 box .. 32 box + 31 of fragment
/// row block `d`; lane (g, t) holds rows g and g + 8, column pairs 2t + 8j) written into the staging
/// buffer at shared address `base`: row r at r * 128 bytes, 16-byte unit u at u ^ (r % 8) (the
/// 128-byte swizzle a TMA box map with SWIZZLE_128B reads; a warp's float2 writes of 8 rows x 32
/// bytes cover all 32 banks twice). `box` must be a constant after unrolling (register indexing).
template <int COUNT>
__device__ __forceinline__ void stage_box(unsigned base, const float (&d)[COUNT], int box, int g, int t) {
#pragma unroll
  for (int jj = 0; jj < 4; jj++) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const unsigned off = (g + 8 * h) * 128 + (((2 * jj + (t >> 1)) ^ g) << 4) + ((t & 1) << 3);
      gemmlab::st_shared_v2(base + off, d[4 * (4 * box + jj) + 2 * h], d[4 * (4 * box + jj) + 2 * h + 1]);
    }
  }
}

/// One work item: tile unit `unit` (CLUSTER tile rows x one tile column), k-tiles [kb, ke);
/// role 0: sole owner (plain store), 1: storer of a split tile (rank 0), 2: adder (rank >= 1);
/// `contributors`: items of the tile, `rank`: this item's place in the tile's reduction order.
struct WorkItem {
  int unit, kb, ke, role, contributors, rank;
};

/// The persistent schedule of one cluster (index `c` of `G`), replayed by plugins/wgmma_bf16.py
/// (work_items): SPLIT_K slices or the stream-K tail, see the header comment.
struct WorkSchedule {
  int units, G, c, kt, split, kps, full, dp, mode;
  long long I, s, e;
  bool tail;

  __device__ WorkSchedule(int units_, int G_, int c_, int kt_, int split_k, int tail_mode)
      : units(units_), G(G_), c(c_), kt(kt_), mode(tail_mode) {
    kps = (kt + split_k - 1) / split_k;
    split = (kt + kps - 1) / kps;
    full = units / G;
    const int rem = units - full * G;
    const long long seg = ((long long)rem * kt + G - 1) / G;  // longest tail range (k-tiles)
    tail = split == 1 && tail_mode && (long long)rem * kt >= 2LL * G && (kt - seg) * 50 >= (long long)(full + 1) * kt;
    dp = tail ? full * G : units;
    I = tail ? (long long)rem * kt : 0;
    s = tail ? (long long)c * I / G : 0;
    e = tail ? (long long)(c + 1) * I / G : 0;
  }
  /// The tail worker whose range holds tail iteration x: the largest w with floor(w I / G) <= x.
  __device__ int worker(long long x) const { return (int)(((x + 1) * G - 1) / I); }

  /// Item i of this cluster's list; false past the end.
  __device__ bool item(int i, WorkItem &w) const {
    if (!tail) {
      const long long u = c + (long long)i * G;
      if (u >= (long long)units * split) return false;
      const int r = (int)(u / units), slice = split - 1 - r;
      w.unit = (int)(u - (long long)r * units);
      w.kb = slice * kps;
      w.ke = min(kt, w.kb + kps);
      w.contributors = split;
      w.rank = r;
      w.role = split == 1 ? 0 : (r == 0 ? 1 : 2);
      return true;
    }
    if (i < full) {
      w.unit = c + i * G, w.kb = 0, w.ke = kt, w.role = 0, w.contributors = 1, w.rank = 0;
      return true;
    }
    if (s >= e) return false;
    const long long t0 = s / kt, t1 = (e - 1) / kt;  // the first and last tile of the range
    if (i - full > t1 - t0) return false;
    // mode 1: the range in order (its first tile's end first; rank 0 = the item ending at K);
    // mode 2 (k-aligned): its last tile first, from k-tile 0, so all tail workers read nearly the
    // same k offsets at once; rank 0 = the item starting at k-tile 0 (done first by its worker)
    const long long t = mode == 2 ? t1 - (i - full) : t0 + (i - full);
    w.unit = dp + (int)t;
    w.kb = (int)(max(s, t * kt) - t * kt);
    w.ke = (int)(min(e, (t + 1) * kt) - t * kt);
    const int first = worker(t * kt), last = worker(t * kt + kt - 1);
    w.contributors = last - first + 1;
    w.rank = mode == 2 ? c - first : last - c;
    w.role = w.contributors == 1 ? 0 : (w.rank == 0 ? 1 : 2);
    return true;
  }
};

/// One wgmma of a k-step: ELEM = 2 bf16 (F16 = 0) or fp16 (F16 = 1: the .f16.f16 form, same descriptors,
/// transpose bits and accumulator layout), ELEM = 4 tf32.
template <int ELEM, int BN, int MAJOR, int F16 = 0>
__device__ __forceinline__ void wgmma_step(float (&d)[BN / 2], unsigned long long da, unsigned long long db) {
  if constexpr (ELEM == 2 && F16) gemmlab::wgmma_f16<(MAJOR & 1), (MAJOR >> 1)>(d, da, db);
  else if constexpr (ELEM == 2) gemmlab::wgmma_bf16<(MAJOR & 1), (MAJOR >> 1)>(d, da, db);
  else gemmlab::wgmma_tf32(d, da, db);
}

/// Elements (floats) between consecutive split-K slabs of the workspace reduction (REDUCE = 1):
/// M * N rounded up to 64 floats (256 bytes), so every slab starts 256-byte aligned.
__device__ __forceinline__ long long wgmma_slab_stride(int M, int N) { return ((long long)M * N + 63) / 64 * 64; }

/// Parallel split-K reduction (REDUCE = 1, an Extra step after the main kernel):
/// C[i] = W[i] + W[slab + i] + ... + W[(S-1) * slab + i] for i < M * N, summed in this fixed order
/// (bitwise repeatable). C is read as a flat packed row-major M x N array: one thread per 4
/// consecutive elements (float4 loads and store; C and every slab are 16-byte aligned), a
/// grid-stride loop, the last M * N % 4 elements scalar. Each C element is written once.
template <int VEC>
__global__ void __launch_bounds__(256)
wgmma_split_reduce(const float *__restrict__ W, float *__restrict__ C, int M, int N, int S) {
  static_assert(VEC == 4, "float4 chunks");
  const long long n = (long long)M * N, slab = wgmma_slab_stride(M, N), chunks = n / VEC;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += step) {
    float4 acc = __ldcg(reinterpret_cast<const float4 *>(W) + i);
    for (int s = 1; s < S; s++) {
      const float4 v = __ldcg(reinterpret_cast<const float4 *>(W + s * slab) + i);
      acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
    }
    reinterpret_cast<float4 *>(C)[i] = acc;
  }
  for (long long i = chunks * VEC + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    float acc = __ldcg(W + i);
    for (int s = 1; s < S; s++) acc += __ldcg(W + s * slab + i);
    C[i] = acc;
  }
}

/// `cp.async.bulk.tensor.3d` load of one box at (c0 inner, c1, c2 = the batch) of a rank-3 map
/// (gemmlab.contract.hookspecs.TensorMap(batched=True): dims (cols, rows, batches)) into shared
/// memory, completing on `bar`; the batched fused entries' A and B (issue 43). PTX ISA: cp.async.bulk.tensor.
__device__ __forceinline__ void wgmma_tma_load_3d(void *dst_smem, const CUtensorMap *tmap, int c0, int c1, int c2,
                                                  unsigned long long *bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];\n"
               ::"r"(gemmlab::smem_addr(dst_smem)), "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(c0), "r"(c1),
               "r"(c2), "r"(gemmlab::smem_addr(bar))
               : "memory");
}

/// wgmma_tma_load_3d multicast to the CTAs of `cta_mask` in the cluster (the same shared offset and
/// mbarrier in each), as gemmlab::tma_load_2d_multicast.
__device__ __forceinline__ void wgmma_tma_load_3d_multicast(void *dst_smem, const CUtensorMap *tmap, int c0, int c1,
                                                            int c2, unsigned long long *bar, unsigned short cta_mask) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
               ::"r"(gemmlab::smem_addr(dst_smem)), "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(c0), "r"(c1),
               "r"(c2), "r"(gemmlab::smem_addr(bar)), "h"(cta_mask)
               : "memory");
}

/// `cp.async.bulk.tensor.3d` TMA store of the box staged at `src_smem` to (c0 inner, c1, c2 = the
/// batch) of a rank-3 map of C (clipped at each batch's N x M: nothing of another batch is written).
__device__ __forceinline__ void wgmma_tma_store_3d(const CUtensorMap *tmap, const void *src_smem, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
               ::"l"(reinterpret_cast<unsigned long long>(tmap)), "r"(gemmlab::smem_addr(src_smem)), "r"(c0), "r"(c1),
               "r"(c2)
               : "memory");
}

/// The plain contract's register store (C = A·B, float32, row pitch N): the body's own code below.
/// BATCHED (false here and in WgmmaFused; WgmmaFusedBatched: true) compiles the batch index of the
/// strided-batched fused entries (issue 43): one launch, the tile queue over batch x tiles.
struct WgmmaPlainStore {
  static constexpr bool FUSED = false;
  static constexpr bool BATCHED = false;
  __device__ __forceinline__ int batch_count() const { return 1; }
  static constexpr int BOX_COLS = 32;  // columns of a staged TMA box: 32 float32 (128 bytes)
  static constexpr int BOX_WORDS = 16;  // a lane's words of a box (WgmmaFused's; unused by the plain stores)
  static constexpr int OUT_BYTES = 4;  // C's element bytes
  static constexpr bool READS_C0 = false;  // beta != 0: C0 read in the epilogue
};

/// The kernel body (see the header comment); `tensor_c` is the TMA map of C for EPI = 1, else unused.
/// F16 = 1: A and B are fp16 (wgmma .f16.f16), else bf16 (ELEM = 2) or float32 read as tf32 (ELEM = 4).
/// FUSE: WgmmaPlainStore (every plain entry), or the fused epilogue of gemm_wgmma_epi / gemm_wgmma_epi_tma_store
/// (WgmmaFused over gemmlab/fused.cuh's Fused, issue 43): act(alpha * acc + beta * C0 + bias) rounded once into
/// C's type instead of the float32 accumulators, from registers (EPI = 0) or through the TMA-store staging (EPI 1,
/// and EPI 5's deferred right half: WgmmaFused::box_words / stage_words, FUSE::BOX_COLS columns a box), whole
/// tiles only (SPLIT_K = 1, TAIL = 0).
template <int ELEM, int BM, int BN, int STAGES, int MAJOR, int CLUSTER, int GROUP_M, int PINGPONG,
          int SPLIT_K, int TAIL, int REDUCE, int EPI, int F16 = 0, class FUSE = WgmmaPlainStore>
__device__ __forceinline__ void wgmma_gemm(const CUtensorMap *tensor_a, const CUtensorMap *tensor_b,
                                           const CUtensorMap *tensor_c, float *C, int M, int N, int K,
                                           const FUSE &fuse = FUSE()) {
  constexpr int BK = 128 / ELEM;      // elements of K per stage: one 128-byte swizzle row
  constexpr int KSTEP = 32 / ELEM;    // K per wgmma (16 bf16, 8 tf32): 32 bytes of the row
  constexpr int WM = PINGPONG ? BM : BM / 2;  // rows per consumer warpgroup (ping-pong: the whole tile)
  constexpr int MI = WM / 64;         // m64 blocks per consumer warpgroup
  constexpr unsigned A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
  constexpr int B_MN_MAJOR = MAJOR & 1, A_MN_MAJOR = MAJOR >> 1;  // B row-major; A column-major
  constexpr unsigned A_BOX_BYTES = BK * 128;  // column-major A: one box of BK rows of K x 64 of M
  constexpr int B_BOXES = B_MN_MAJOR ? BN / 64 : CLUSTER;  // TMA boxes per B tile
  constexpr int MY_BOXES = B_BOXES / CLUSTER;               // of which this CTA loads
  constexpr unsigned B_BOX_BYTES = B_BYTES / B_BOXES;
  static_assert(ELEM == 2 || ELEM == 4, "ELEM is 2 (bf16) or 4 (tf32)");
  static_assert(F16 == 0 || ELEM == 2, "F16 = 1 (fp16 operands) needs ELEM = 2");
  static_assert(WM % 64 == 0 && BM <= 256, "BM: whole m64 blocks per consumer warpgroup, at most 256");
  static_assert(BN == 64 || BN == 128 || BN == 256, "BN is 64, 128 or 256 (wgmma n)");
  static_assert(MAJOR >= 0 && MAJOR <= 3, "MAJOR: bit 0 B MN-major, bit 1 A MN-major");
  static_assert(ELEM == 2 || !B_MN_MAJOR, "TF32 wgmma reads K-major operands only");
  static_assert(ELEM == 2 || !A_MN_MAJOR, "TF32 wgmma reads K-major operands only (A: copy it K-major first)");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "CLUSTER is 1 or 2");
  static_assert(B_BOXES % CLUSTER == 0 && B_BOX_BYTES % 1024 == 0, "B boxes split evenly over the cluster");
  static_assert(MI * (BN / 2) <= 128, "at most 128 accumulators per consumer thread");
  static_assert(SPLIT_K >= 1 && TAIL >= 0 && TAIL <= 2 && (TAIL == 0 || SPLIT_K == 1), "SPLIT_K >= 1; TAIL 0..2, 1/2 only without SPLIT_K");
  static_assert(REDUCE == 0 || (REDUCE == 1 && SPLIT_K > 1 && TAIL == 0), "REDUCE = 1 (workspace slabs) needs SPLIT_K > 1 and no TAIL");
  static_assert((EPI != 1 && EPI != 4) || REDUCE == 0, "EPI 1/4 (TMA store into C) does not write REDUCE = 1's workspace slabs");
  static_assert(EPI != 4 || (SPLIT_K == 1 && TAIL == 0 && !PINGPONG), "EPI 4 (held stage) is for whole tiles, cooperative");
  constexpr bool DEFER = EPI == 5;  // EPI 5: TMA store, each tile's right half stored during the next tile's main loop
  static_assert(!FUSE::FUSED || ((EPI == 0 || EPI == 1 || EPI == 5) && SPLIT_K == 1 && TAIL == 0 && REDUCE == 0),
                "the fused epilogue runs in the register path (EPI 0) or the TMA store (EPI 1, 5) on whole tiles");
  static_assert(!FUSE::BATCHED || FUSE::FUSED, "batches (issue 43) run in the fused entries");
  static_assert(!DEFER || (SPLIT_K == 1 && TAIL == 0 && !PINGPONG && MI == 1 && BN == 256),
                "EPI 5 (deferred right half) is for whole tiles, cooperative, BM = 128, BN = 256");
  constexpr bool TMA_EPI = EPI == 1 || EPI == 4 || EPI == 5;
  constexpr bool HOLD = EPI == 4;  // the tile's last ring stage stays as extra staging until its boxes are read
  constexpr unsigned EPI_BUF = 16 * 128;  // EPI = 1: one staging buffer, 16 rows x 32 floats (128-byte swizzle); 2 per warp
  // SPLITS: whether this instance can have split tiles at all (else every item's role is 0: the
  // flag code and the adders' reductions are not compiled)
  constexpr bool SPLITS = SPLIT_K > 1 || TAIL != 0;

  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  const unsigned raw = gemmlab::smem_u32(smem_raw);
  unsigned char *ring = smem_raw + ((1024u - (raw & 1023u)) & 1023u);  // 128-byte swizzle atoms: 1024-aligned

  const int tid = threadIdx.x;
  const unsigned rank = CLUSTER > 1 ? gemmlab::cluster_ctarank() : 0u;
  const int num_m = (M + BM - 1) / BM, num_n = (N + BN - 1) / BN;
  const int pairs_m = (num_m + CLUSTER - 1) / CLUSTER;  // units along M (a cluster takes CLUSTER tile rows)
  const int units = pairs_m * num_n;
  const int k_tiles = (K + BK - 1) / BK;
  // FUSE::BATCHED (the strided-batched fused entries): one queue of batch-major units, batch z's
  // units z * units .. (z + 1) * units - 1 (batch_of splits a unit into its batch and its unit in it)
  const WorkSchedule sched(units * fuse.batch_count(), gridDim.x / CLUSTER, blockIdx.x / CLUSTER, k_tiles, SPLIT_K, TAIL);

  if (tid == 0) {
    gemmlab::prefetch_tensormap(tensor_a);
    gemmlab::prefetch_tensormap(tensor_b);
    if constexpr (TMA_EPI) gemmlab::prefetch_tensormap(tensor_c);
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
      gemmlab::mbarrier_init(&full[s], 1);
      gemmlab::mbarrier_init(&empty[s], (PINGPONG ? 4 : 8) * CLUSTER);  // consumer warps reading a stage
    }
    gemmlab::fence_barrier_init();
  }
  if constexpr (CLUSTER > 1) gemmlab::cluster_sync();  // peers' barriers exist before any remote use
  else __syncthreads();

  // unit -> (tile row block, tile column block), GROUP_M unit rows per group, row fastest
  auto tile_of = [&](int unit, int &m_blk, int &n_blk) {
    const int per_group = GROUP_M * num_n;
    const int group = unit / per_group, first = group * GROUP_M;
    const int rows = min(pairs_m - first, GROUP_M);
    const int in_group = unit - group * per_group;
    m_blk = (first + in_group % rows) * CLUSTER + (int)rank;
    n_blk = in_group / rows;
  };
  // the batch of a unit of the batched queue (unit becomes its unit inside the batch); 0 otherwise
  auto batch_of = [&](int &unit) {
    int z = 0;
    if constexpr (FUSE::BATCHED) {
      z = unit / units;
      unit -= z * units;
    }
    return z;
  };

  const int warpgroup = tid / 128;
  if (warpgroup == 0) {
    gemmlab::setmaxnreg_dec<40>();
    if (tid == 0) {
      int it = 0;
      WorkItem w;
      for (int item = 0; sched.item(item, w); item++) {
        int m_blk, n_blk, unit = w.unit;
        const int z = batch_of(unit);
        tile_of(unit, m_blk, n_blk);
        const int m0 = m_blk * BM, n0 = n_blk * BN;
        for (int kt = w.kb; kt < w.ke; kt++, it++) {
          const int s = it % STAGES;
          gemmlab::mbarrier_try_wait_parity(&empty[s], ((it / STAGES) & 1) ^ 1);
          unsigned char *slot = ring + s * STAGE_BYTES;
          gemmlab::mbarrier_arrive_expect_tx(&full[s], STAGE_BYTES);
          if constexpr (FUSE::BATCHED) {  // rank-3 maps; a shared operand (batch stride 0) is batch 0's
            const int za = fuse.stride_a ? z : 0, zb = fuse.stride_b ? z : 0;
            if constexpr (A_MN_MAJOR) {
#pragma unroll
              for (int i = 0; i < BM / 64; i++) wgmma_tma_load_3d(slot + i * A_BOX_BYTES, tensor_a, m0 + 64 * i, kt * BK, za, &full[s]);
            } else {
              wgmma_tma_load_3d(slot, tensor_a, kt * BK, m0, za, &full[s]);
            }
#pragma unroll
            for (int i = 0; i < MY_BOXES; i++) {  // CLUSTER = 2: both CTAs' unit, so one batch: B multicast
              const int box = (int)rank * MY_BOXES + i;
              const int c0 = B_MN_MAJOR ? n0 + box * 64 : kt * BK;
              const int c1 = B_MN_MAJOR ? kt * BK : n0 + box * (BN / B_BOXES);
              unsigned char *dst = slot + A_BYTES + box * B_BOX_BYTES;
              if constexpr (CLUSTER > 1) wgmma_tma_load_3d_multicast(dst, tensor_b, c0, c1, zb, &full[s], (1u << CLUSTER) - 1);
              else wgmma_tma_load_3d(dst, tensor_b, c0, c1, zb, &full[s]);
            }
            continue;
          }
          if constexpr (A_MN_MAJOR) {  // column-major A: BM/64 boxes of BK k-rows x 64 m-columns
#pragma unroll
            for (int i = 0; i < BM / 64; i++) gemmlab::tma_load_2d(slot + i * A_BOX_BYTES, tensor_a, m0 + 64 * i, kt * BK, &full[s]);
          } else {
            gemmlab::tma_load_2d(slot, tensor_a, kt * BK, m0, &full[s]);
          }
#pragma unroll
          for (int i = 0; i < MY_BOXES; i++) {
            const int box = (int)rank * MY_BOXES + i;
            unsigned char *dst = slot + A_BYTES + box * B_BOX_BYTES;
            const int c0 = B_MN_MAJOR ? n0 + box * 64 : kt * BK;
            const int c1 = B_MN_MAJOR ? kt * BK : n0 + box * (BN / B_BOXES);
            if constexpr (CLUSTER > 1) gemmlab::tma_load_2d_multicast(dst, tensor_b, c0, c1, &full[s], (1u << CLUSTER) - 1);
            else gemmlab::tma_load_2d(dst, tensor_b, c0, c1, &full[s]);
          }
        }
      }
    }
  } else if constexpr (DEFER) {
    // EPI 5: the accumulators are three banks of m64n128 (64 floats): a tile's left half is always
    // bank 0, its right half bank 1 or 2 by the item's parity, so the previous tile's right half
    // can stay in the other bank while this tile computes. Each k-step issues two m64n128k16 (B's
    // right half 128 rows / two 64-column boxes further); the epilogue stores the left half at once
    // (4 TMA boxes per warp, as EPI 1) and leaves the right half pending when the CTA has a next
    // item: its 4 boxes per warp go out during that item's main loop, one after the wgmma group of
    // k-tiles 2, 4, 6, 8 (while the tensor cores run), the rest after the loop when it is shorter.
    gemmlab::setmaxnreg_inc<232>();
    const int wg = warpgroup - 1, warp = (tid / 32) % 4, lane = tid % 32, g = lane / 4, t = lane % 4;
    auto release = [&](int s) {
      if (lane == 0) {
        if constexpr (CLUSTER > 1) {
#pragma unroll
          for (int r = 0; r < CLUSTER; r++) gemmlab::mbarrier_arrive_cluster(&empty[s], r);
        } else {
          gemmlab::mbarrier_arrive(&empty[s]);
        }
      }
    };
    float b0[64], b1[64], b2[64];
    int it = 0, epi_chunk = 0;
    bool pending = false;
    int prow = 0, pcol = 0, pz = 0;  // the pending half's first row (this warp's), first column and batch
    unsigned char *const my_stage = ring + STAGES * STAGE_BYTES + (wg * 4 + warp) * 2 * EPI_BUF;
    // one 16 x 32 box of a bank (columns 32 cc .. 32 cc + 31 of the half) through the warp's two buffers
    auto store_box = [&](const float (&bank)[64], int cc, int col, int row) {
      unsigned char *buf = my_stage + (epi_chunk & 1) * EPI_BUF;
      if (lane == 0) gemmlab::bulk_wait_group_read<1>();
      __syncwarp();
      stage_box(gemmlab::smem_u32(buf), bank, cc, g, t);
      gemmlab::fence_proxy_async();
      __syncwarp();
      if (lane == 0) {
        gemmlab::tma_store_2d(tensor_c, buf, col, row);
        gemmlab::bulk_commit_group();
      }
      epi_chunk++;
    };
    // the fused epilogue (issue 43): boxes of FUSE::BOX_COLS columns (NB = 4 a half for a float32 C, 2 for
    // a 2-byte one), each made into words of C's type (WgmmaFused::box_words) and then staged and
    // TMA-stored by put_words; the pending right half waits in Q as float32 accumulators (the plain
    // path's register copy), and each of its boxes is computed (C0, bias, activation, rounding) and
    // stored during the next tile's main loop, after the wgmma group of k-tiles 2, 4 (, 6, 8), while
    // the tensor cores run: only the left half's epilogue math stays between two main loops (before,
    // the right half's words were computed when its tile ended: the whole tile's activations on the
    // critical path, H100 session 32: +13% time at 4096^3 with bias + gelu_tanh)
    // A float32 C, or a C0 to read (beta != 0), keeps the right half's words computed when its tile ends
    // (qw, as before): computed in the main loop next to both live banks, a float32 C's 64 words or the
    // C0 loads spilled 220-236 bytes (beta + silu, NVRTC 13); its boxes still go out during the next main loop
    constexpr int BOXC = FUSE::BOX_COLS, NB = 128 / BOXC;
    constexpr bool LATE_MATH = FUSE::FUSED && FUSE::OUT_BYTES == 2 && !FUSE::READS_C0;  // the math in the next main loop
    unsigned qw[FUSE::FUSED && !LATE_MATH ? NB : 1][FUSE::BOX_WORDS];
    auto put_words = [&](const unsigned (&u)[FUSE::BOX_WORDS], int col, int row, int z) {
      if constexpr (FUSE::FUSED) {
        unsigned char *buf = my_stage + (epi_chunk & 1) * EPI_BUF;
        if (lane == 0) gemmlab::bulk_wait_group_read<1>();
        __syncwarp();
        fuse.stage_words(gemmlab::smem_u32(buf), u, g, t);
        gemmlab::fence_proxy_async();
        __syncwarp();
        if (lane == 0) {
          if constexpr (FUSE::BATCHED) wgmma_tma_store_3d(tensor_c, buf, col, row, z);
          else gemmlab::tma_store_2d(tensor_c, buf, col, row);
          gemmlab::bulk_commit_group();
        }
        epi_chunk++;
      }
    };
    auto fused_box = [&](const float (&bank)[64], int cc, int col, int row, int z) {  // box cc of a half: compute, store
      if constexpr (FUSE::FUSED) {
        unsigned u[FUSE::BOX_WORDS];
        fuse.at(z).box_words(u, bank, cc, g, t, row, col + BOXC * cc, M, N);
        put_words(u, col + BOXC * cc, row, z);
      }
    };
    // the pending half's box cc inside the main loop (both banks in flight): the buffer's wait first, then
    // each pair computed straight into it (WgmmaFused::box_stage: no box of words held in registers)
    auto pending_box = [&](const float (&Q)[64], int cc) {
      if constexpr (FUSE::FUSED) {
        unsigned char *buf = my_stage + (epi_chunk & 1) * EPI_BUF;
        if (lane == 0) gemmlab::bulk_wait_group_read<1>();
        __syncwarp();
        fuse.at(pz).box_stage(gemmlab::smem_u32(buf), Q, cc, g, t, prow, pcol + BOXC * cc, M, N);
        gemmlab::fence_proxy_async();
        __syncwarp();
        if (lane == 0) {
          if constexpr (FUSE::BATCHED) wgmma_tma_store_3d(tensor_c, buf, pcol + BOXC * cc, prow, pz);
          else gemmlab::tma_store_2d(tensor_c, buf, pcol + BOXC * cc, prow);
          gemmlab::bulk_commit_group();
        }
        epi_chunk++;
      }
    };
    auto store_half = [&](const float (&bank)[64], int col, int row, int z) {  // the fused epilogue's half, box by box
#pragma unroll
      for (int cc = 0; cc < NB; cc++) fused_box(bank, cc, col, row, z);
    };
    auto item_body = [&](float (&R)[64], float (&Q)[64], const WorkItem &w, int local) {
      int m_blk, n_blk, unit = w.unit;
      const int z = batch_of(unit);
      tile_of(unit, m_blk, n_blk);
      const int m0 = m_blk * BM, n0 = n_blk * BN;
#pragma unroll
      for (int i = 0; i < 64; i++) b0[i] = 0.0f, R[i] = 0.0f;
      const int nkt = w.ke - w.kb;
      for (int kt = w.kb; kt < w.ke; kt++, it++) {
        const int s = it % STAGES;
        gemmlab::mbarrier_try_wait_parity(&full[s], (it / STAGES) & 1);
        unsigned char *slot = ring + s * STAGE_BYTES;
        gemmlab::wgmma_fence_operands(b0);
        gemmlab::wgmma_fence_operands(R);
        gemmlab::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; kk++) {
          const unsigned long long db =
              B_MN_MAJOR ? gemmlab::wgmma_desc_128b(slot + A_BYTES + kk * KSTEP * 128, BK * 128, 1024)
                         : gemmlab::wgmma_desc_128b(slot + A_BYTES + kk * 32, 16, 1024);
          const unsigned long long dbr =
              B_MN_MAJOR ? gemmlab::wgmma_desc_128b(slot + A_BYTES + 2 * B_BOX_BYTES + kk * KSTEP * 128, BK * 128, 1024)
                         : gemmlab::wgmma_desc_128b(slot + A_BYTES + 128 * 128 + kk * 32, 16, 1024);
          const unsigned long long da =
              A_MN_MAJOR ? gemmlab::wgmma_desc_128b(slot + wg * (WM / 64) * A_BOX_BYTES + kk * KSTEP * 128, A_BOX_BYTES, 1024)
                         : gemmlab::wgmma_desc_128b(slot + wg * WM * 128 + kk * 32, 16, 1024);
          wgmma_step<ELEM, 128, MAJOR, F16>(b0, da, db);
          wgmma_step<ELEM, 128, MAJOR, F16>(R, da, dbr);
        }
        gemmlab::wgmma_commit();
        if (pending) {  // the previous tile's right half, one box per warp after k-tiles 2, 4, 6, 8
          const int j = kt - w.kb;
          if constexpr (FUSE::FUSED) {
#pragma unroll
            for (int cc = 0; cc < NB; cc++)
              if (j == 2 * (cc + 1)) {
                if constexpr (LATE_MATH) pending_box(Q, cc);
                else put_words(qw[cc], pcol + BOXC * cc, prow, pz);
              }
          } else {
            if (j == 2) store_box(Q, 0, pcol, prow);
            else if (j == 4) store_box(Q, 1, pcol + 32, prow);
            else if (j == 6) store_box(Q, 2, pcol + 64, prow);
            else if (j == 8) store_box(Q, 3, pcol + 96, prow);
          }
        }
        gemmlab::wgmma_wait<1>();
        gemmlab::wgmma_fence_operands(b0);
        gemmlab::wgmma_fence_operands(R);
        if (kt > w.kb) release((it - 1) % STAGES);
      }
      gemmlab::wgmma_wait<0>();
      gemmlab::wgmma_fence_operands(b0);
      gemmlab::wgmma_fence_operands(R);
      if (nkt > 0) release((it - 1) % STAGES);
      if (pending) {  // boxes the loop had no k-tile for
        if constexpr (FUSE::FUSED) {
#pragma unroll
          for (int cc = 0; cc < NB; cc++)
            if (nkt <= 2 * (cc + 1)) {
              if constexpr (LATE_MATH) pending_box(Q, cc);
              else put_words(qw[cc], pcol + BOXC * cc, prow, pz);
            }
        } else {
          if (nkt <= 2) store_box(Q, 0, pcol, prow);
          if (nkt <= 4) store_box(Q, 1, pcol + 32, prow);
          if (nkt <= 6) store_box(Q, 2, pcol + 64, prow);
          if (nkt <= 8) store_box(Q, 3, pcol + 96, prow);
        }
        pending = false;
      }
      const int row0 = m0 + wg * WM + warp * 16;
      if constexpr (FUSE::FUSED) {
        store_half(b0, n0, row0, z);
      } else {
#pragma unroll
        for (int cc = 0; cc < 4; cc++) store_box(b0, cc, n0 + 32 * cc, row0);
      }
      WorkItem next;
      if (sched.item(local + 1, next)) {  // the right half waits in Q (a register copy: fixed roles keep
        // ptxas's wgmma hazard tracking exact; banks alternating by parity made it wait for every group);
        // a 2-byte C's fused epilogue computes its boxes from Q in the next main loop (pending_box), a
        // float32 C's as words of C's type now (qw)
        if constexpr (FUSE::FUSED && !LATE_MATH) {
#pragma unroll
          for (int cc = 0; cc < NB; cc++) fuse.at(z).box_words(qw[cc], R, cc, g, t, row0, n0 + 128 + BOXC * cc, M, N);
        } else {
#pragma unroll
          for (int i = 0; i < 64; i++) Q[i] = R[i];
        }
        pending = true, prow = row0, pcol = n0 + 128, pz = z;
      } else {
        if constexpr (FUSE::FUSED) {
          store_half(R, n0 + 128, row0, z);
        } else {
#pragma unroll
          for (int cc = 0; cc < 4; cc++) store_box(R, cc, n0 + 128 + 32 * cc, row0);
        }
      }
    };
    WorkItem w;
    for (int local = 0; sched.item(local, w); local++) item_body(b1, b2, w, local);
    if (tid % 32 == 0) gemmlab::bulk_wait_group<0>();  // each warp's last stores done before the CTA leaves
  } else {
    gemmlab::setmaxnreg_inc<232>();
    const int wg = warpgroup - 1, warp = (tid / 32) % 4, lane = tid % 32, g = lane / 4, t = lane % 4;
    auto release = [&](int s) {
      if (lane == 0) {
        if constexpr (CLUSTER > 1) {
#pragma unroll
          for (int r = 0; r < CLUSTER; r++) gemmlab::mbarrier_arrive_cluster(&empty[s], r);
        } else {
          gemmlab::mbarrier_arrive(&empty[s]);
        }
      }
    };
    float d[MI][BN / 2];
    int it = 0;
    int epi_chunk = 0;  // EPI = 1, 3: chunks this warp has staged (staging buffer epi_chunk % 2)
    unsigned char *const epi_stage = ring + STAGES * STAGE_BYTES + wg * 8 * EPI_BUF;  // 4 warps x 2 buffers
    WorkItem w;
    for (int local = 0; sched.item(local, w); local++) {
      if (PINGPONG && (local & 1) != wg) {  // the other warpgroup's tile: skip its stages in the ring
        it += w.ke - w.kb;
        continue;
      }
      int m_blk, n_blk, unit = w.unit;
      const int z = batch_of(unit);
      tile_of(unit, m_blk, n_blk);
      const int m0 = m_blk * BM, n0 = n_blk * BN;
      // ping-pong order: wait until the other warpgroup has issued its previous tile's main loop
      // (it has then passed every "full" wait of that tile, so no stage barrier is more than one
      // phase away from the parity this warpgroup waits for, and the tensor cores are not shared)
      if (PINGPONG && local > 0) named_barrier_sync(1 + wg, 256);
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int i = 0; i < BN / 2; i++) d[mi][i] = 0.0f;
      for (int kt = w.kb; kt < w.ke; kt++, it++) {
        const int s = it % STAGES;
        gemmlab::mbarrier_try_wait_parity(&full[s], (it / STAGES) & 1);
        unsigned char *slot = ring + s * STAGE_BYTES;
        gemmlab::wgmma_fence_operands(d);
        gemmlab::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; kk++) {
          const unsigned long long db =
              B_MN_MAJOR ? gemmlab::wgmma_desc_128b(slot + A_BYTES + kk * KSTEP * 128, BK * 128, 1024)
                         : gemmlab::wgmma_desc_128b(slot + A_BYTES + kk * 32, 16, 1024);
#pragma unroll
          for (int mi = 0; mi < MI; mi++) {
            const unsigned long long da =
                A_MN_MAJOR ? gemmlab::wgmma_desc_128b(slot + ((PINGPONG ? 0 : wg * WM) / 64 + mi) * A_BOX_BYTES + kk * KSTEP * 128,
                                                      A_BOX_BYTES, 1024)
                           : gemmlab::wgmma_desc_128b(slot + ((PINGPONG ? 0 : wg * WM) + mi * 64) * 128 + kk * 32, 16, 1024);
            wgmma_step<ELEM, BN, MAJOR, F16>(d[mi], da, db);
          }
        }
        gemmlab::wgmma_commit();
        gemmlab::wgmma_wait<1>();
        gemmlab::wgmma_fence_operands(d);
        if (kt > w.kb) release((it - 1) % STAGES);
      }
      // hand the tensor cores to the other warpgroup (only when it has a next tile to wait for)
      if (PINGPONG) {
        WorkItem next;
        if (sched.item(local + 1, next)) named_barrier_arrive(2 - wg, 256);
      }
      gemmlab::wgmma_wait<0>();
      gemmlab::wgmma_fence_operands(d);
      if (!HOLD && w.ke > w.kb) release((it - 1) % STAGES);

      // split tile: rank r waits until ranks 0..r-1 are in C; the group's leader polls, a named barrier
      // (id 3, or 3 + wg for the ping-pong warpgroup alone) passes it on
      constexpr int GROUP_THREADS = PINGPONG ? 128 : 256;
      const int epi_bar = PINGPONG ? 3 + wg : 3;
      const bool leader = PINGPONG ? tid == 128 * (wg + 1) : tid == 128;
      unsigned *flag = wgmma_split_flags + (w.unit * CLUSTER + (int)rank);
      if (SPLITS && !REDUCE && w.role == 2) {
        if (leader) flag_wait(flag, w.rank);
        named_barrier_sync(epi_bar, GROUP_THREADS);
      }
      const bool add = SPLITS && !REDUCE && w.role == 2;
      // REDUCE = 1: C is the workspace's slabs; the item stores plainly into slab `rank` (no flags)
      float *const dst = REDUCE ? C + (long long)w.rank * wgmma_slab_stride(M, N) : C;

      if (HOLD) {
        // EPI 4: the last stage of this tile is not released after the main loop: each warp stages
        // its first boxes in its own eighth of it (both warpgroups have finished reading it: barrier 7)
        named_barrier_sync(7, 256);
        gemmlab::fence_proxy_async();  // generic writes after the stage's async-proxy (wgmma) reads
      }
      if (TMA_EPI) {  // every item of this entry (no register path compiled)
        // TMA store of the tile (a split tile's adders: TMA reduce-add, in the chain's order),
        // per warp: its 16 rows in 16 x 32 chunks, each written into one of the warp's two 2 KiB
        // staging buffers (128-byte swizzle: 16-byte unit u of row r at u ^ (r % 8), so the warp's
        // float2 writes of 8 rows x 32 bytes fill all 32 banks twice), fenced for the async proxy,
        // and stored by lane 0 with TMA (clipped at M x N) while the warp goes on; a buffer is
        // rewritten only after the store before the last one has read it (bulk wait_group.read 1).
        // Warp-level only: no barrier across the warpgroup. A split tile's adder (rank r >= 1) runs
        // after the flag read r (ranks 0..r-1 complete in C): its lanes 0 order that acquire before
        // their async-proxy reductions (fence.proxy.async.global); each element's add is atomic.
        const int row0 = m0 + (PINGPONG ? 0 : wg * WM) + warp * 16;
        unsigned char *const my_stage = epi_stage + warp * 2 * EPI_BUF;
        if constexpr (FUSE::FUSED) {
          // the fused epilogue (issue 43; whole tiles, EPI 1): per box of 16 rows x FUSE::BOX_COLS (32
          // float32 or 64 bf16/fp16 columns: 128 bytes a row, the same 2 KiB buffers and swizzle), the
          // warp's values act(alpha * acc + beta * C0 + bias) computed in registers (C0 and the bias read
          // before the buffer wait), rounded once into C's type, staged and TMA-stored (clipped at M x N;
          // C's map has row pitch ldc)
          constexpr int BOXES = BN / FUSE::BOX_COLS;
#pragma unroll
          for (int mi = 0; mi < MI; mi++) {
#pragma unroll
            for (int cc = 0; cc < BOXES; cc++, epi_chunk++) {
              unsigned u[FUSE::BOX_WORDS];
              fuse.at(z).box_words(u, d[mi], cc, g, t, row0 + 64 * mi, n0 + FUSE::BOX_COLS * cc, M, N);
              unsigned char *buf = my_stage + (epi_chunk & 1) * EPI_BUF;
              if (lane == 0) gemmlab::bulk_wait_group_read<1>();
              __syncwarp();
              fuse.stage_words(gemmlab::smem_u32(buf), u, g, t);
              gemmlab::fence_proxy_async();
              __syncwarp();
              if (lane == 0) {
                if constexpr (FUSE::BATCHED) wgmma_tma_store_3d(tensor_c, buf, n0 + FUSE::BOX_COLS * cc, row0 + 64 * mi, z);
                else gemmlab::tma_store_2d(tensor_c, buf, n0 + FUSE::BOX_COLS * cc, row0 + 64 * mi);
                gemmlab::bulk_commit_group();
              }
            }
          }
          continue;
        }
        if (add && lane == 0) gemmlab::fence_proxy_async_global();
        // EPI 4: boxes 0..H-1 of the tile go to this warp's eighth of the held stage (no wait), the
        // rest alternate the warp's two buffers; the held stage is released once its boxes are read
        constexpr int CHUNKS = MI * (BN / 32);
        constexpr int HELD = HOLD ? (int)(STAGE_BYTES / 8 / EPI_BUF) : 0;
        constexpr int H = HELD < CHUNKS ? HELD : CHUNKS;
        const int held_s = (it - 1) % STAGES;
        unsigned char *const held = ring + held_s * STAGE_BYTES + (wg * 4 + warp) * (STAGE_BYTES / 8);
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
#pragma unroll
          for (int cc = 0; cc < BN / 32; cc++, epi_chunk++) {
            const int c = mi * (BN / 32) + cc;  // box of this tile (a constant once unrolled)
            const int q = HOLD ? c - H : epi_chunk;
            unsigned char *buf = HOLD && c < H ? held + c * EPI_BUF : my_stage + (q & 1) * EPI_BUF;
            if (lane == 0) {
              if (!HOLD) gemmlab::bulk_wait_group_read<1>();
              else if (c >= H && q < 2) bulk_wait_group_read_n(c);  // the buffer's last use: the previous tile
              else if (c >= H) gemmlab::bulk_wait_group_read<1>();
            }
            if (HOLD && c == H + 2) release(held_s);  // lane 0, after its wait: boxes 0..H read
            __syncwarp();
            const unsigned base = gemmlab::smem_u32(buf);
            stage_box(base, d[mi], cc, g, t);
            gemmlab::fence_proxy_async();
            __syncwarp();
            if (lane == 0) {
              if (add) gemmlab::tma_reduce_add_2d(tensor_c, buf, n0 + 32 * cc, row0 + 64 * mi);
              else gemmlab::tma_store_2d(tensor_c, buf, n0 + 32 * cc, row0 + 64 * mi);
              gemmlab::bulk_commit_group();
            }
          }
        }
        if (SPLITS && w.role != 0) {
          // pass a split tile on: every warp's stores/reductions of this item performed in C (bulk
          // wait_group 0; the last rank needs no wait: nothing reads C after it in this launch) and
          // ordered before the generic-proxy release (fence.proxy.async.global), then the flag
          if (lane == 0 && w.rank + 1 < w.contributors) {
            gemmlab::bulk_wait_group<0>();
            gemmlab::fence_proxy_async_global();
          }
          named_barrier_sync(epi_bar, GROUP_THREADS);
          if (leader) flag_signal(flag, w.rank, w.contributors);
        }
        if constexpr (HOLD && CHUNKS < H + 3) {  // no third own-buffer box: wait for the held boxes here
          if (lane == 0) bulk_wait_group_read_n(CHUNKS - H);
          release(held_s);
        }
        continue;
      }
      if (EPI == 3 && ((SPLIT_K == 1 && TAIL == 0) || w.role == 0)) {
        // Staged coalesced stores (no TMA): per warp and 16 x 32 chunk, the accumulators go into
        // one of the warp's two 2 KiB buffers (the same 128-byte swizzle), then each lane reads
        // back 4 rows' 16-byte units (row i * 4 + lane / 8, unit lane % 8) and stores them with
        // st.global.v4: a warp instruction writes 4 whole 128-byte lines. Warp-level sync only;
        // the buffer of chunk c is rewritten at chunk c + 2, after the __syncwarp of chunk c + 1,
        // by when every lane has read chunk c back. Needs N % 4 == 0 (the plugin's rule).
        const int row0 = m0 + (PINGPONG ? 0 : wg * WM) + warp * 16;
        unsigned char *const my_stage = epi_stage + warp * 2 * EPI_BUF;
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
#pragma unroll
          for (int c = 0; c < BN / 32; c++, epi_chunk++) {
            const unsigned base = gemmlab::smem_u32(my_stage + (epi_chunk & 1) * EPI_BUF);
            stage_box(base, d[mi], c, g, t);
            __syncwarp();
            const int u = lane % 8, col = n0 + 32 * c + 4 * u;
#pragma unroll
            for (int i = 0; i < 4; i++) {
              const int r = 4 * i + lane / 8, row = row0 + 64 * mi + r;
              const float4 v = ld_shared_v4(base + r * 128 + ((u ^ (r % 8)) << 4));
              if (row < M && col < N) *reinterpret_cast<float4 *>(C + (long long)row * N + col) = v;
            }
          }
        }
        continue;
      }
      if constexpr (FUSE::FUSED) {
        // the fused epilogue (issue 43): each thread's column pairs (2t, 2t + 1) of every m16n8
        // fragment, act(alpha * acc + beta * C0 + bias) rounded once into OUT_T; one paired store
        // (8 bytes float32, 4 bytes bf16/fp16) where both columns lie inside N and the pair is
        // aligned (ldc even, C aligned to two elements: WgmmaFused::pairs), else element by element
        auto &&fz = fuse.at(z);  // batch z's C and C0 (the batched entries), else fuse itself
        const bool pairs = fz.pairs();
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
          const int row0 = m0 + (PINGPONG ? 0 : wg * WM) + mi * 64 + warp * 16 + g;
#pragma unroll
          for (int j = 0; j < BN / 8; j++) {
            const int col = n0 + j * 8 + 2 * t;
#pragma unroll
            for (int h = 0; h < 2; h++) {
              const int row = row0 + 8 * h;
              if (row < M) fz.store2(row, col, N, pairs, d[mi][4 * j + 2 * h], d[mi][4 * j + 2 * h + 1]);
            }
          }
        }
        continue;
      }
      const bool full_tile = m0 + BM <= M && n0 + BN <= N && (N % 2) == 0;
#pragma unroll
      for (int mi = 0; mi < MI; mi++) {
        const int row0 = m0 + (PINGPONG ? 0 : wg * WM) + mi * 64 + warp * 16 + g;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
          const int col = n0 + j * 8 + 2 * t;
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const int row = row0 + 8 * h;
            float *out = dst + (long long)row * N + col;
            const float v0 = d[mi][4 * j + 2 * h], v1 = d[mi][4 * j + 2 * h + 1];
            if (full_tile) {
              if (add) red_add2(out, v0, v1);
              else if (EPI == 2) {  // diagnostic: every full-tile store issued twice (asm volatile: both kept)
                st_global_v2_kept(out, v0, v1);
                st_global_v2_cs(out, v0, v1);
              } else *reinterpret_cast<float2 *>(out) = make_float2(v0, v1);
            } else if (row < M) {
              if ((N % 2) == 0 && col + 1 < N) {
                if (add) red_add2(out, v0, v1);
                else *reinterpret_cast<float2 *>(out) = make_float2(v0, v1);
              } else {
                if (add) {
                  if (col < N) red_add(out, v0);
                  if (col + 1 < N) red_add(out + 1, v1);
                } else {
                  if (col < N) out[0] = v0;
                  if (col + 1 < N) out[1] = v1;
                }
              }
            }
          }
        }
      }
      if (SPLITS && !REDUCE && w.role != 0) {  // every thread of the group has written its part: count the contribution
        named_barrier_sync(epi_bar, GROUP_THREADS);
        if (leader) flag_signal(flag, w.rank, w.contributors);
      }
    }
    if constexpr (TMA_EPI) {
      if (tid % 32 == 0) gemmlab::bulk_wait_group<0>();  // each warp's last stores done before the CTA leaves
    }
  }
  if constexpr (CLUSTER > 1) gemmlab::cluster_sync();  // no CTA leaves while its peer may still signal it
}

/// Entry with the register epilogue (EPI 0), its diagnostic double (EPI 2: the stores twice, to
/// measure their cost) or the staged coalesced stores (EPI 3); arguments: tensor maps of A and B,
/// C, M, N, K.
template <int ELEM, int BM, int BN, int STAGES, int MAJOR, int CLUSTER, int GROUP_M, int PINGPONG,
          int SPLIT_K = 1, int TAIL = 0, int REDUCE = 0, int EPI = 0>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
           float *C, int M, int N, int K) {
  static_assert(EPI == 0 || EPI == 2 || EPI == 3, "EPI 1 (TMA store) is the entry gemm_wgmma_tma_store");
  static_assert(EPI != 3 || REDUCE == 0, "EPI 3 (staged stores into C) does not write REDUCE = 1's workspace slabs");
  wgmma_gemm<ELEM, BM, BN, STAGES, MAJOR, CLUSTER, GROUP_M, PINGPONG, SPLIT_K, TAIL, REDUCE, EPI>(
      &tensor_a, &tensor_b, nullptr, C, M, N, K);
}

/// Entry with the TMA-store epilogue (EPI 1) for every item (a split tile's rank 0 TMA-stores, its
/// ranks >= 1 TMA reduce-add in the chain's order, each after the rank before has completed): tensor maps of A, B and C (float32, 16 x 32 boxes, 128-byte swizzle), then C, M, N, K.
template <int ELEM, int BM, int BN, int STAGES, int MAJOR, int CLUSTER, int GROUP_M, int PINGPONG,
          int SPLIT_K, int TAIL, int HOLD = 0>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_tma_store(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
                     const __grid_constant__ CUtensorMap tensor_c, float *C, int M, int N, int K) {
  wgmma_gemm<ELEM, BM, BN, STAGES, MAJOR, CLUSTER, GROUP_M, PINGPONG, SPLIT_K, TAIL, 0, HOLD == 2 ? 5 : HOLD ? 4 : 1>(
      &tensor_a, &tensor_b, &tensor_c, C, M, N, K);
}

/// The FP16 entries (precision=fp16): gemm_wgmma and gemm_wgmma_tma_store with the same template
/// arguments (ELEM = 2) and arguments, their wgmma in the .f16.f16 form (F16 = 1); everything else, TMA
/// boxes, descriptors, transpose bits, epilogues, split K and the tail, is the 2-byte path of bf16. The
/// bf16 and tf32 entries above keep their names and code.
template <int ELEM, int BM, int BN, int STAGES, int MAJOR, int CLUSTER, int GROUP_M, int PINGPONG,
          int SPLIT_K = 1, int TAIL = 0, int REDUCE = 0, int EPI = 0>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_f16(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
               float *C, int M, int N, int K) {
  static_assert(EPI == 0 || EPI == 2 || EPI == 3, "EPI 1 (TMA store) is the entry gemm_wgmma_tma_store_f16");
  static_assert(EPI != 3 || REDUCE == 0, "EPI 3 (staged stores into C) does not write REDUCE = 1's workspace slabs");
  wgmma_gemm<ELEM, BM, BN, STAGES, MAJOR, CLUSTER, GROUP_M, PINGPONG, SPLIT_K, TAIL, REDUCE, EPI, 1>(
      &tensor_a, &tensor_b, nullptr, C, M, N, K);
}

/// gemm_wgmma_tma_store for fp16 operands (see gemm_wgmma_f16).
template <int ELEM, int BM, int BN, int STAGES, int MAJOR, int CLUSTER, int GROUP_M, int PINGPONG,
          int SPLIT_K, int TAIL, int HOLD = 0>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_tma_store_f16(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
                         const __grid_constant__ CUtensorMap tensor_c, float *C, int M, int N, int K) {
  wgmma_gemm<ELEM, BM, BN, STAGES, MAJOR, CLUSTER, GROUP_M, PINGPONG, SPLIT_K, TAIL, 0, HOLD == 2 ? 5 : HOLD ? 4 : 1, 1>(
      &tensor_a, &tensor_b, &tensor_c, C, M, N, K);
}

#ifdef GEMMLAB_EPI
// The whole GEMM contract (issue 43), compiled only with -DGEMMLAB_EPI (plugins/wgmma_bf16.py asks
// for it for a problem beyond C = A·B, so the plain builds above are the same programs, SASS for
// SASS: tests/test_sass_unchanged.py). C (M x N, row pitch ldc >= N, OUT_T: float, __nv_bfloat16 or
// __half) = OUT_T(act(alpha * A·B + beta * C0 + bias)) (gemmlab/fused.cuh: float32 arithmetic, one
// round to nearest even; activations by wgmma_activation: tanh.approx.f32 for the GELUs, ex2.approx.ftz and
// rcp.approx.ftz for SiLU,
// within the evaluation errors plugins/wgmma_bf16.py declares), C0 (OUT_T, pitch ldc) read only with BETA, the bias
// (BIAS_T, N elements) only with BIAS. A and B through their tensor maps as in gemm_wgmma (tight
// pitches: the maps describe the stored matrices), one GEMM per launch (the _batched entries at the end:
// strided batches in one launch, the tile queue over batch x tiles, rank-3 maps). The main loop is the plain
// kernel's, on whole tiles (SPLIT_K = 1, TAIL = 0: the fused operation is not additive, so split
// tiles are not allowed). Two epilogues: gemm_wgmma_epi, the register path (EPI 0: row < M, col < N
// masks on every store), and gemm_wgmma_epi_tma_store, the TMA-store path (EPI 1, or EPI 5 with the
// right half of each 128x256 tile deferred into the next tile's main loop): each warp computes a
// box's values in registers, rounds them into OUT_T (a 2-byte C: 16 x 64 boxes, twice the columns
// of the float32 16 x 32 ones, the same 128-byte rows), stages them in its 2 KiB buffers and
// TMA-stores them through C's map (row pitch ldc, clipped at M x N: nothing outside is written).
// tf32 (ELEM = 4, wgmma_tf32) takes both entries too.
#include "gemmlab/fused.cuh"

/// `st.shared.b32`: one 32-bit word at a shared-memory byte address (two packed 2-byte outputs).
__device__ __forceinline__ void st_shared_b32(unsigned addr, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

/// Two floats rounded once to nearest even and packed (the lower column in the low half): the
/// 32-bit word of two consecutive 2-byte outputs.
__device__ __forceinline__ unsigned pack2(__nv_bfloat16 *, float v0, float v1) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(v0, v1);
  return *reinterpret_cast<const unsigned *>(&p);
}
__device__ __forceinline__ unsigned pack2(__half *, float v0, float v1) {
  const __half2 p = __floats2half2_rn(v0, v1);
  return *reinterpret_cast<const unsigned *>(&p);
}

/// `tanh.approx.f32` (sm_75+): one MUFU.TANH; PTX ISA: maximum relative error 2^-10.987 (subnormal
/// results flushed to sign-preserving zero).
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// The activations of the wgmma fused epilogue (issue 43: the cost of libm's on the critical path; ACT
/// codes of gemmlab/fused.cuh), cheaper than libm's where the output's rounding allows, each within
/// the c of plugins/wgmma_bf16.py's ACTIVATION_ERROR (|f^ - f| <= c (|z| + |f(z)|), the verification
/// bound's declared evaluation error):
///   2 gelu_tanh: w = z (k + k c z^2) (k = sqrt(2/pi), c = 0.044715), 0.5 z + 0.5 z tanh.approx(w): one
///     MUFU.TANH and four float32 operations instead of tanhf's two MUFU and ~18;
///   3 gelu_erf: erf(x) ~ tanh(p(x)), x = z / sqrt 2 clamped to [-3.5, 3.5], p(x) = x (E0 + x^2 (E1 + x^2 E2))
///     (a minimax fit, |tanh(p(x)) - erf(x)| <= 3.70e-5 for every real x with float32 coefficients:
///     tests/test_epilogue_approx.py), tanh through tanh.approx: one MUFU instead of erff's ~20 operations;
///   4 silu: z rcp(1 + ex2(-z log2 e)) through ex2.approx.ftz.f32 and rcp.approx.ftz.f32 (PTX ISA: ex2.approx
///     2 ulp after the argument's rounding, rcp.approx 1 ulp): what __expf and __fdividef compile to, less their subnormal
///     scaling (a compare, two multiplies per call; a subnormal e^-z only ever meets 1 + e, where it is lost;
///     a reciprocal flushed to 0, for z < -87.3, gives -0 where silu is about z e^z < 1e-36 in magnitude: inside
///     the declared error, as __fdividef's 0 past 2^126 was), which with a float32 C and C0 made ptxas spill
///     8 bytes (NVRTC 13.5, H100 session 34: local_bytes 8);
///   none and relu as gemmlab::activation.
template <int ACT>
__device__ __forceinline__ float wgmma_activation(float z) {
  if constexpr (ACT == 2) {
    const float hz = 0.5f * z;
    const float w = z * fmaf(0.7978845608028654f * 0.044715f, z * z, 0.7978845608028654f);
    return fmaf(hz, tanh_approx(w), hz);
  } else if constexpr (ACT == 3) {
    const float x = fminf(fmaxf(z * 0.7071067811865476f, -3.5f), 3.5f), x2 = x * x;
    const float p = x * fmaf(x2, fmaf(x2, -0.0017864744877442718f, 0.1040811836719513f), 1.1281434297561646f);
    const float hz = 0.5f * z;
    return fmaf(hz, tanh_approx(p), hz);
  } else if constexpr (ACT == 4) {
    float e, r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(e) : "f"(-1.4426950408889634f * z));
    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(1.0f + e));
    return z * r;
  } else {
    return gemmlab::activation<ACT>(z);
  }
}

/// A if C, else B (std::conditional, which NVRTC's headers here do not give).
template <bool C, class A, class B> struct WgmmaPick { using type = A; };
template <class A, class B> struct WgmmaPick<false, A, B> { using type = B; };

/// The fused register store of one thread: gemmlab::Fused (ldc, alpha, beta, C, C0, bias) and its
/// column pairs (col, col + 1) of one row; activations by wgmma_activation.
template <int ACT, int BIAS, int BETA, typename BIAS_T, typename OUT_T>
struct WgmmaFused : gemmlab::Fused<ACT, BIAS, BETA, BIAS_T, OUT_T> {
  static constexpr bool BATCHED = false;  // one GEMM per launch (WgmmaFusedBatched: strided batches)
  __device__ __forceinline__ int batch_count() const { return 1; }
  /// The epilogue of batch z: this one (a single batch).
  __device__ __forceinline__ const WgmmaFused &at(int) const { return *this; }

  /// act(alpha * acc + beta * C0[at] + bias[col]) in float32 (Fused::value's arithmetic, wgmma_activation).
  __device__ __forceinline__ float value(float acc, long long at, int col) const {
    float v = this->alpha * acc;
    if (BETA) v += this->beta * gemmlab::to_float(this->c0[at]);
    if (BIAS) v += gemmlab::to_float(this->bias[col]);
    return wgmma_activation<ACT>(v);
  }

  /// Two consecutive outputs as one access, each rounded once to nearest even (p aligned to two).
  static __device__ __forceinline__ void store_pair(float *p, float v0, float v1) {
    *reinterpret_cast<float2 *>(p) = make_float2(v0, v1);
  }
  static __device__ __forceinline__ void store_pair(__nv_bfloat16 *p, float v0, float v1) {
    *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(v0, v1);
  }
  static __device__ __forceinline__ void store_pair(__half *p, float v0, float v1) {
    *reinterpret_cast<__half2 *>(p) = __floats2half2_rn(v0, v1);
  }

  /// Whether a pair (col even) goes out as one access: ldc even and C aligned to two elements.
  __device__ __forceinline__ bool pairs() const {
    return (this->ldc & 1) == 0 && gemmlab::aligned(this->c, 2 * sizeof(OUT_T));
  }

  /// The TMA-store path's box: 16 rows x BOX_COLS columns, 128 bytes of OUT_T a row (32 float32 or 64
  /// bf16/fp16); a lane holds BOX_WORDS 32-bit words of it, already in C's type (rows g, g + 8; column
  /// pairs 8 jj + 2 t, jj < BOX_COLS / 8: one float32 a word, or two packed 2-byte outputs).
  static constexpr int BOX_COLS = 128 / (int)sizeof(OUT_T);
  static constexpr int BOX_WORDS = 16;
  static constexpr int OUT_BYTES = (int)sizeof(OUT_T);  // C's element bytes
  static constexpr bool READS_C0 = BETA != 0;  // beta != 0: C0 read in the epilogue

  /// Box `box` of a warp's accumulator block `d` (its m16nN fragments, m64nN layout: d[4 j + 2 h + e] =
  /// D(g + 8 h, 8 j + 2 t + e)) in C's type: outputs (row0 + g + 8 h, col0 + 8 jj + 2 t + e) =
  /// act(alpha * d[4 (box * BOX_COLS / 8 + jj) + 2 h + e] + beta * C0 + bias) rounded once (Fused::value's
  /// arithmetic), as words u[4 jj + 2 h + e] (float32) or u[2 jj + h] (the pair packed, lower column in
  /// the low half). C0 is read only for rows < m and columns < n (a pair as one access where ldc is
  /// even and C0 aligned), the bias only for columns < n; outputs outside m x n are computed from what
  /// the accumulators hold there and never stored (TMA clips the box).
  template <int COUNT>
  __device__ __forceinline__ void box_words(unsigned (&u)[BOX_WORDS], const float (&d)[COUNT], int box, int g, int t,
                                            int row0, int col0, int m, int n) const {
    box_apply(d, box, g, t, row0, col0, m, n, [&](int jj, int h, float x0, float x1) {
      if constexpr (sizeof(OUT_T) == 4) {
        u[4 * jj + 2 * h] = __float_as_uint(x0), u[4 * jj + 2 * h + 1] = __float_as_uint(x1);
      } else {
        u[2 * jj + h] = pack2((OUT_T *)nullptr, x0, x1);
      }
    });
  }

  /// box_words and stage_words in one pass: each pair of outputs written into the staging buffer at
  /// `base` as soon as it is computed (the buffer must be free: the caller waits first). For the deferred
  /// right half inside the next tile's main loop, where both accumulator banks are live: no box of
  /// words held in registers.
  template <int COUNT>
  __device__ __forceinline__ void box_stage(unsigned base, const float (&d)[COUNT], int box, int g, int t, int row0,
                                            int col0, int m, int n) const {
    box_apply(d, box, g, t, row0, col0, m, n, [&](int jj, int h, float x0, float x1) {
      if constexpr (sizeof(OUT_T) == 4) {
        gemmlab::st_shared_v2(base + (g + 8 * h) * 128 + (((2 * jj + (t >> 1)) ^ g) << 4) + ((t & 1) << 3), x0, x1);
      } else {
        st_shared_b32(base + (g + 8 * h) * 128 + ((jj ^ g) << 4) + (t << 2), pack2((OUT_T *)nullptr, x0, x1));
      }
    });
  }

  /// Two adjacent bias values as loaded: one 32-bit word of a 2-byte type's pair (lower column in the low
  /// half), a float2 of float32's; BiasPair{} is two zeros.
  struct BiasWord { unsigned w; };
  using BiasPair = typename WgmmaPick<sizeof(BIAS_T) == 2, BiasWord, float2>::type;
  static __device__ __forceinline__ BiasPair bias_pair_of(BIAS_T lo, BIAS_T hi, bool keep_lo, bool keep_hi) {
    if constexpr (sizeof(BIAS_T) == 2) {
      const unsigned l = *reinterpret_cast<const unsigned short *>(&lo), h = *reinterpret_cast<const unsigned short *>(&hi);
      return BiasWord{(keep_lo ? l : 0u) | (keep_hi ? h << 16 : 0u)};
    } else {
      return make_float2(keep_lo ? lo : 0.0f, keep_hi ? hi : 0.0f);
    }
  }
  static __device__ __forceinline__ float2 bias_float2(float2 b) { return b; }
  static __device__ __forceinline__ float2 bias_float2(BiasWord b) {
    if constexpr (sizeof(BIAS_T) == 2) {
      alignas(4) BIAS_T pair[2];  // the word's two halves
      *reinterpret_cast<unsigned *>(pair) = b.w;
      return make_float2(gemmlab::to_float(pair[0]), gemmlab::to_float(pair[1]));
    }
    return make_float2(0.0f, 0.0f);
  }

  /// The values of box_words, pair by pair: sink(jj, h, x0, x1) with x0, x1 the outputs (row0 + g + 8 h,
  /// col0 + 8 jj + 2 t + e) before their rounding. The box's bias values are loaded before any is used
  /// (one latency a box, not one a pair); a pair is one access where the bias is aligned to two of its
  /// elements and n is even.
  template <int COUNT, class SINK>
  __device__ __forceinline__ void box_apply(const float (&d)[COUNT], int box, int g, int t, int row0, int col0, int m,
                                            int n, SINK &&sink) const {
    constexpr int JJ = BOX_COLS / 8;
    const bool c0_pairs = BETA && (this->ldc & 1) == 0 && gemmlab::aligned(this->c0, 2 * sizeof(OUT_T));
    // the box's bias values first, every load in flight at once: each index clamped into [0, n) and the
    // value of a column past n selected to 0 (no branch around a load, so ptxas issues the JJ loads
    // back to back; a branch per pair serialised one L2 round trip per pair, inside the next tile's
    // main loop for the pending half). Kept as loaded (a 2-byte pair in one word) until used. A pair is
    // one access where the bias is aligned to two elements and n is even (col < n then implies
    // col + 1 < n: col is even).
    BiasPair bias_raw[JJ];
    if (BIAS) {
      if (gemmlab::aligned(this->bias, 2 * sizeof(BIAS_T)) && (n & 1) == 0) {
#pragma unroll
        for (int jj = 0; jj < JJ; jj++) {
          const int col = col0 + 8 * jj + 2 * t;
          const BiasPair b = *reinterpret_cast<const BiasPair *>(this->bias + min(col, n - 2));
          bias_raw[jj] = col < n ? b : BiasPair{};
        }
      } else {
#pragma unroll
        for (int jj = 0; jj < JJ; jj++) {
          const int col = col0 + 8 * jj + 2 * t;
          bias_raw[jj] = bias_pair_of(this->bias[min(col, n - 1)], this->bias[min(col + 1, n - 1)], col < n, col + 1 < n);
        }
      }
    }
#pragma unroll
    for (int jj = 0; jj < JJ; jj++) {
      const int col = col0 + 8 * jj + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int row = row0 + g + 8 * h;
        float x0 = this->alpha * d[4 * (box * JJ + jj) + 2 * h], x1 = this->alpha * d[4 * (box * JJ + jj) + 2 * h + 1];
        if (BETA && row < m) {
          const long long at = (long long)row * this->ldc + col;
          if (c0_pairs && col + 1 < n) {
            const float2 p = load_pair(this->c0 + at);
            x0 += this->beta * p.x, x1 += this->beta * p.y;
          } else {
            if (col < n) x0 += this->beta * gemmlab::to_float(this->c0[at]);
            if (col + 1 < n) x1 += this->beta * gemmlab::to_float(this->c0[at + 1]);
          }
        }
        if (BIAS) {
          const float2 b = bias_float2(bias_raw[jj]);
          x0 += b.x, x1 += b.y;
        }
        sink(jj, h, wgmma_activation<ACT>(x0), wgmma_activation<ACT>(x1));
      }
    }
  }

  /// The words of box_words written into the staging buffer at shared address `base` as the
  /// 128-byte-swizzled box a SWIZZLE_128B map of C reads: row r at r * 128 bytes, 16-byte unit q at
  /// q ^ (r % 8). float32: the pair of columns 2t, 2t + 1 of fragment jj in unit 2 jj + t / 2 at byte
  /// 8 (t % 2) (stage_box's layout); 2-byte: their packed word in unit jj at byte 4 t (a warp's 8 rows x
  /// 4 words cover all 32 banks once).
  __device__ __forceinline__ void stage_words(unsigned base, const unsigned (&u)[BOX_WORDS], int g, int t) const {
    constexpr int JJ = BOX_COLS / 8;
#pragma unroll
    for (int jj = 0; jj < JJ; jj++) {
#pragma unroll
      for (int h = 0; h < 2; h++) {
        if constexpr (sizeof(OUT_T) == 4) {
          const unsigned off = (g + 8 * h) * 128 + (((2 * jj + (t >> 1)) ^ g) << 4) + ((t & 1) << 3);
          gemmlab::st_shared_v2(base + off, __uint_as_float(u[4 * jj + 2 * h]), __uint_as_float(u[4 * jj + 2 * h + 1]));
        } else {
          st_shared_b32(base + (g + 8 * h) * 128 + ((jj ^ g) << 4) + (t << 2), u[2 * jj + h]);
        }
      }
    }
  }

  /// Two consecutive C0 values (p aligned to two elements) as floats.
  static __device__ __forceinline__ float2 load_pair(const float *p) { return *reinterpret_cast<const float2 *>(p); }
  static __device__ __forceinline__ float2 load_pair(const __nv_bfloat16 *p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p));
  }
  static __device__ __forceinline__ float2 load_pair(const __half *p) {
    return __half22float2(*reinterpret_cast<const __half2 *>(p));
  }

  /// Outputs (row, col) and (row, col + 1) from acc0, acc1 where they lie inside N (row < M checked
  /// by the caller; col even): one paired store where `pairs` and col + 1 < N, else one by one.
  __device__ __forceinline__ void store2(int row, int col, int n, bool pairs, float acc0, float acc1) const {
    const long long at = (long long)row * this->ldc + col;
    if (pairs && col + 1 < n) {
      const float v0 = this->value(acc0, at, col), v1 = this->value(acc1, at + 1, col + 1);
      store_pair(this->c + at, v0, v1);
    } else {
      if (col < n) this->c[at] = gemmlab::from_float<OUT_T>(this->value(acc0, at, col));
      if (col + 1 < n) this->c[at + 1] = gemmlab::from_float<OUT_T>(this->value(acc1, at + 1, col + 1));
    }
  }
};

/// The strided-batched fused epilogue (issue 43): WgmmaFused plus the batch count and the batch strides
/// in elements (stride_a, stride_b: 0 for an operand shared by every batch, which is then read at
/// batch 0 of its rank-3 map; stride_c: C's and C0's, never 0). The body's queue runs over batches x
/// tile units (batch-major), and the epilogue of a tile of batch z is at(z): C and C0 advanced by
/// z * stride_c elements (the bias is shared by every batch).
template <int ACT, int BIAS, int BETA, typename BIAS_T, typename OUT_T>
struct WgmmaFusedBatched : WgmmaFused<ACT, BIAS, BETA, BIAS_T, OUT_T> {
  static constexpr bool BATCHED = true;
  int batches, stride_a, stride_b;
  __device__ __forceinline__ int batch_count() const { return batches; }
  /// The epilogue of batch z: a copy whose C (and C0 with BETA) start z * stride_c elements on.
  __device__ __forceinline__ WgmmaFused<ACT, BIAS, BETA, BIAS_T, OUT_T> at(int z) const {
    WgmmaFused<ACT, BIAS, BETA, BIAS_T, OUT_T> f = *this;
    const long long off = (long long)z * this->stride_c;
    f.c = this->c + off;
    if (BETA) f.c0 = this->c0 + off;
    return f;
  }
};

/// Entry of the fused epilogue (register path): the template arguments of gemm_wgmma up to PINGPONG,
/// then F16 (1: fp16 operands, wgmma .f16.f16) and Fused's ACT, BIAS, BETA, BIAS_T, OUT_T; arguments:
/// tensor maps of A and B, C, C0 (or null), bias (or null), M, N, K, ldc, alpha, beta.
template <int ELEM, int BM, int BN, int STAGES, int MAJOR, int CLUSTER, int GROUP_M, int PINGPONG, int F16, int ACT,
          int BIAS, int BETA, typename BIAS_T, typename OUT_T>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_epi(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
               OUT_T *C, const OUT_T *C0, const BIAS_T *bias, int M, int N, int K, int ldc, float alpha, float beta) {
  static_assert(ELEM == 2 || F16 == 0, "F16 = 1 (fp16 operands) needs ELEM = 2");
  WgmmaFused<ACT, BIAS, BETA, BIAS_T, OUT_T> fuse;
  fuse.c = C, fuse.c0 = C0, fuse.bias = bias, fuse.ldc = ldc, fuse.stride_c = 0, fuse.alpha = alpha, fuse.beta = beta;
  wgmma_gemm<ELEM, BM, BN, STAGES, MAJOR, CLUSTER, GROUP_M, PINGPONG, 1, 0, 0, 0, F16>(
      &tensor_a, &tensor_b, nullptr, nullptr, M, N, K, fuse);
}

/// Entry of the fused epilogue through the TMA store (EPI 1; DEFER = 1: EPI 5, each 128x256 tile's
/// right half stored during the next tile's main loop, cooperative BM = 128, BN = 256 only): the
/// template arguments of gemm_wgmma_epi with DEFER after F16; arguments: tensor maps of A, B and C
/// (OUT_T, boxes of 16 rows x WgmmaFused::BOX_COLS, 128-byte swizzle, row pitch ldc), then C, C0 (or
/// null), bias (or null), M, N, K, ldc, alpha, beta.
template <int ELEM, int BM, int BN, int STAGES, int MAJOR, int CLUSTER, int GROUP_M, int PINGPONG, int F16, int DEFER,
          int ACT, int BIAS, int BETA, typename BIAS_T, typename OUT_T>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_epi_tma_store(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
                         const __grid_constant__ CUtensorMap tensor_c, OUT_T *C, const OUT_T *C0, const BIAS_T *bias,
                         int M, int N, int K, int ldc, float alpha, float beta) {
  static_assert(ELEM == 2 || F16 == 0, "F16 = 1 (fp16 operands) needs ELEM = 2");
  WgmmaFused<ACT, BIAS, BETA, BIAS_T, OUT_T> fuse;
  fuse.c = C, fuse.c0 = C0, fuse.bias = bias, fuse.ldc = ldc, fuse.stride_c = 0, fuse.alpha = alpha, fuse.beta = beta;
  wgmma_gemm<ELEM, BM, BN, STAGES, MAJOR, CLUSTER, GROUP_M, PINGPONG, 1, 0, 0, DEFER ? 5 : 1, F16>(
      &tensor_a, &tensor_b, &tensor_c, nullptr, M, N, K, fuse);
}

/// The strided-batched fused entries (issue 43; plugins/wgmma_bf16.py picks them for batch.count > 1):
/// gemm_wgmma_epi's and gemm_wgmma_epi_tma_store's template arguments and arguments, A's and
/// B's maps (and C's) of rank 3 (cols, rows, batches: TensorMap(batched=True)), then batch (>= 1) and the
/// batch strides in elements stride_a, stride_b (0: shared, read at batch 0), stride_c. One launch: the
/// persistent tile queue runs over batch x tile units, batch-major.
template <int ELEM, int BM, int BN, int STAGES, int MAJOR, int CLUSTER, int GROUP_M, int PINGPONG, int F16, int ACT,
          int BIAS, int BETA, typename BIAS_T, typename OUT_T>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_epi_batched(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
                       OUT_T *C, const OUT_T *C0, const BIAS_T *bias, int M, int N, int K, int ldc, float alpha,
                       float beta, int batch, int stride_a, int stride_b, int stride_c) {
  static_assert(ELEM == 2 || F16 == 0, "F16 = 1 (fp16 operands) needs ELEM = 2");
  WgmmaFusedBatched<ACT, BIAS, BETA, BIAS_T, OUT_T> fuse;
  fuse.c = C, fuse.c0 = C0, fuse.bias = bias, fuse.ldc = ldc, fuse.stride_c = stride_c, fuse.alpha = alpha, fuse.beta = beta;
  fuse.batches = batch, fuse.stride_a = stride_a, fuse.stride_b = stride_b;
  wgmma_gemm<ELEM, BM, BN, STAGES, MAJOR, CLUSTER, GROUP_M, PINGPONG, 1, 0, 0, 0, F16>(
      &tensor_a, &tensor_b, nullptr, nullptr, M, N, K, fuse);
}

/// gemm_wgmma_epi_tma_store over strided batches (see gemm_wgmma_epi_batched); C's map of rank 3 (N, M,
/// batches; row pitch ldc, batch pitch stride_c), each box stored at (col, row, batch).
template <int ELEM, int BM, int BN, int STAGES, int MAJOR, int CLUSTER, int GROUP_M, int PINGPONG, int F16, int DEFER,
          int ACT, int BIAS, int BETA, typename BIAS_T, typename OUT_T>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_epi_tma_store_batched(const __grid_constant__ CUtensorMap tensor_a, const __grid_constant__ CUtensorMap tensor_b,
                                 const __grid_constant__ CUtensorMap tensor_c, OUT_T *C, const OUT_T *C0,
                                 const BIAS_T *bias, int M, int N, int K, int ldc, float alpha, float beta, int batch,
                                 int stride_a, int stride_b, int stride_c) {
  static_assert(ELEM == 2 || F16 == 0, "F16 = 1 (fp16 operands) needs ELEM = 2");
  WgmmaFusedBatched<ACT, BIAS, BETA, BIAS_T, OUT_T> fuse;
  fuse.c = C, fuse.c0 = C0, fuse.bias = bias, fuse.ldc = ldc, fuse.stride_c = stride_c, fuse.alpha = alpha, fuse.beta = beta;
  fuse.batches = batch, fuse.stride_a = stride_a, fuse.stride_b = stride_b;
  wgmma_gemm<ELEM, BM, BN, STAGES, MAJOR, CLUSTER, GROUP_M, PINGPONG, 1, 0, 0, DEFER ? 5 : 1, F16>(
      &tensor_a, &tensor_b, &tensor_c, nullptr, M, N, K, fuse);
}
#endif  // GEMMLAB_EPI
