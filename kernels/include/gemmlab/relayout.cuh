// gemmlab shared header: operand relayout kernels (header-only, NVRTC-safe, no includes).
//
// A TMA tensor map needs a 16-byte-aligned base and a row stride that is a multiple of 16 bytes,
// and TF32 wgmma reads only K-major operands. When a GEMM operand as stored breaks either, a
// plan runs one of these kernels as an Extra step BEFORE the main kernel (inside every timed
// launch: its cost is counted), writing a copy into the kernel's workspace that a
// TensorMap("workspace", box, region=Region(...)) then describes (gemmlab/contract/relayout.py
// builds the step, the region and the map; gemmlab/contract/hookspecs.py documents the contract).
//
//   relayout_pad<E>:           dst[r][c] = src[r][c] for c < cols, 0 for cols <= c < ld_dst
//                              (rows x cols -> rows x ld_dst, ld_dst * E a multiple of 16).
//   relayout_transpose<E,TK,TN>: dst[c][r] = src[r][c] for r < rows, 0 for rows <= r < ld_dst
//                              (rows x cols -> cols x ld_dst: a row-major K x N B becomes the
//                              K-major N x Kp copy TF32 wgmma can read, a column-major A, stored
//                              K x M, the K-major M x Kp copy).
//
// The zero fill of the pad makes the padded K columns add nothing to the product (the kernel's
// TMA also zero-fills everything past the region). E is the element size in bytes (2: bf16/fp16,
// 4: float32); elements are copied as raw bits. Both kernels write whole 16-byte chunks
// (st.global.v4) with consecutive threads on consecutive chunks of a destination row (coalesced),
// and read the source with consecutive threads on consecutive elements of a source row (its row
// stride need not be aligned: element loads through the read-only path). 256 threads per block.
// Arguments (what the plugin passes): (const src*, dst* = workspace + offset, int rows, int cols,
// int ld_src, int ld_dst), row strides in elements. dst must be 16-byte aligned.
#pragma once

namespace gemmlab {

template <int E> struct relayout_bits;
template <> struct relayout_bits<2> { using type = unsigned short; };
template <> struct relayout_bits<4> { using type = unsigned int; };

/// Pad copy: one thread per 16-byte chunk of dst (grid-stride loop over rows * ld_dst / (16/E)
/// chunks); chunk elements at c >= cols are zero. Source rows are read element by element (their
/// stride cols * E is the one TMA could not take), dst rows are 16-byte aligned.
template <int E>
__global__ void __launch_bounds__(256)
relayout_pad(const void *__restrict__ src_, void *__restrict__ dst_, int rows, int cols, int ld_src, int ld_dst) {
  using T = typename relayout_bits<E>::type;
  constexpr int V = 16 / E;  // elements per 16-byte chunk
  const T *__restrict__ src = static_cast<const T *>(src_);
  uint4 *__restrict__ dst = static_cast<uint4 *>(dst_);
  const long long per_row = ld_dst / V;
  const long long total = static_cast<long long>(rows) * per_row;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const long long r = i / per_row;
    const int c0 = static_cast<int>(i - r * per_row) * V;
    const T *s = src + r * ld_src;
    union { uint4 v; T e[V]; } u;
#pragma unroll
    for (int j = 0; j < V; ++j) u.e[j] = (c0 + j < cols) ? __ldg(s + c0 + j) : T(0);
    dst[i] = u.v;  // row r, chunk c0 / V: r * per_row + c0 / V == i
  }
}

/// Transpose with pad: block (x, y) moves the TK x TN tile (source rows y*TK.., cols x*TN..)
/// through shared memory (rows padded by one element against bank conflicts): loads with
/// consecutive threads on consecutive source columns, stores whole 16-byte chunks of destination
/// rows (TK / (16/E) chunks per row, consecutive threads on consecutive chunks). Grid
/// (ceil(cols / TN), ceil(ld_dst / TK)); source rows >= rows read as zero, so the pad of each
/// destination row (rows..ld_dst-1) is zero.
template <int E, int TK, int TN>
__global__ void __launch_bounds__(256)
relayout_transpose(const void *__restrict__ src_, void *__restrict__ dst_, int rows, int cols, int ld_src,
                   int ld_dst) {
  using T = typename relayout_bits<E>::type;
  constexpr int V = 16 / E;
  constexpr int CH = TK / V;  // 16-byte chunks per destination row of the tile
  static_assert(TK % V == 0 && (TK * TN) % 256 == 0 && (TN * CH) % 256 == 0, "tile must split over 256 threads");
  __shared__ T tile[TK][TN + 1];
  const T *__restrict__ src = static_cast<const T *>(src_);
  T *__restrict__ dst = static_cast<T *>(dst_);
  const int r0 = blockIdx.y * TK, c0 = blockIdx.x * TN;
#pragma unroll
  for (int i = threadIdx.x; i < TK * TN; i += 256) {
    const int rr = i / TN, cc = i % TN, r = r0 + rr, c = c0 + cc;
    tile[rr][cc] = (r < rows && c < cols) ? __ldg(src + static_cast<long long>(r) * ld_src + c) : T(0);
  }
  __syncthreads();
#pragma unroll
  for (int i = threadIdx.x; i < TN * CH; i += 256) {
    const int cc = i / CH, ch = i % CH, c = c0 + cc, r = r0 + ch * V;
    if (c < cols && r < ld_dst) {  // ld_dst is a multiple of V, so the whole chunk is inside the row
      union { uint4 v; T e[V]; } u;
#pragma unroll
      for (int j = 0; j < V; ++j) u.e[j] = tile[ch * V + j][cc];
      *reinterpret_cast<uint4 *>(dst + static_cast<long long>(c) * ld_dst + r) = u.v;
    }
  }
}

}  // namespace gemmlab
