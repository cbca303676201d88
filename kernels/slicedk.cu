// gemmlab built-in kernel "slicedk" (issue 10): register-tiled GEMM with the reduction sliced inside
// the block, for shapes with few output tiles (K-heavy, short M or N, tiny): more threads per output
// tile instead of more tiles, with no workspace and no second launch. Row-major float32, no tensor
// cores.
//
// A block owns a BM x BN tile of C. Its threads form KS slices of TS = (BM/TM)*(BN/TN) threads;
// slice s accumulates the k-chunks s, s + KS, s + 2 KS, ... (BK rows of K each: in every step the
// KS slices read KS adjacent chunks, a contiguous KS*BK stretch of K). Each slice stages its chunk
// in its own shared memory (A transposed, As[k][m] with a padded pitch, B as Bs[k][n]) and each
// thread computes a TM x TN micro-tile (contiguous rows ty*TM.., columns tx*TN..) from float4
// shared-memory reads. The next chunk is loaded into registers while the current one is computed
// (float4 global loads when K and N are multiples of 4, else element by element).
// At the end the KS partial tiles meet in shared memory and are added in slice order (0, 1, ...)
// by one thread per output, the only store. Rows, columns and k beyond M, N, K are zero-filled in
// the stage and masked at the store.
template <int BM, int BN, int BK, int TM, int TN, int KS>
__global__ void __launch_bounds__((BM / TM) * (BN / TN) * KS)
    gemm_slicedk(const float *a, const float *b, float *c, int m, int n, int k) {
  constexpr int TX = BN / TN;                 // threads across N in a slice
  constexpr int TS = (BM / TM) * TX;          // threads per slice
  constexpr int THREADS = TS * KS;
  constexpr int PITCH = BM + 4;               // As row pitch (floats): float4-aligned, fewer conflicts
  constexpr int SLICE_FLOATS = BK * PITCH + BK * BN;
  constexpr int STAGE = KS * SLICE_FLOATS;
  constexpr int PARTIALS = KS * BM * BN;
  constexpr int SMEM = STAGE > PARTIALS ? STAGE : PARTIALS;
  constexpr int A_LOADS = (BM * BK + TS - 1) / TS;     // scalar path: elements per thread
  constexpr int B_LOADS = (BK * BN + TS - 1) / TS;
  constexpr int A_VECS = (BM * BK / 4 + TS - 1) / TS;  // float4 path: vectors per thread
  constexpr int B_VECS = (BK * BN / 4 + TS - 1) / TS;
  static_assert(TM % 4 == 0 && TN % 4 == 0, "float4 micro-tile reads");
  __shared__ __align__(16) float smem[SMEM];

  const int t = threadIdx.x;
  const int s = t / TS;
  const int u = t % TS;
  const int tx = u % TX, ty = u / TX;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float *as = smem + s * SLICE_FLOATS;
  float *bs = as + BK * PITCH;

  const int chunks = (k + BK - 1) / BK;
  const int steps = (chunks + KS - 1) / KS;

  // Global -> registers -> shared. With K % 4 == 0 and N % 4 == 0 (and BK % 4 == 0) every float4
  // of an A row (along k) or a B row (along n) is wholly inside or wholly outside the matrix, so
  // the tile moves as float4 loads (zero outside); otherwise element by element.
  const bool vec = (BK % 4 == 0) && ((k & 3) == 0) && ((n & 3) == 0);
  float4 va[A_VECS > 0 ? A_VECS : 1], vb[B_VECS > 0 ? B_VECS : 1];
  float ra[A_LOADS], rb[B_LOADS];
  auto load = [&](int step) {
    const int k0 = (step * KS + s) * BK;
    if (vec) {
#pragma unroll
      for (int j = 0; j < A_VECS; j++) {
        const int e = u + j * TS;
        const int mm = e / (BK / 4), kk = 4 * (e % (BK / 4));
        const int gm = row0 + mm, gk = k0 + kk;
        va[j] = (e < BM * BK / 4 && gm < m && gk < k)
                    ? __ldg(reinterpret_cast<const float4 *>(a + (long long)gm * k + gk))
                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int j = 0; j < B_VECS; j++) {
        const int e = u + j * TS;
        const int kk = e / (BN / 4), nn = 4 * (e % (BN / 4));
        const int gk = k0 + kk, gn = col0 + nn;
        vb[j] = (e < BK * BN / 4 && gk < k && gn < n)
                    ? __ldg(reinterpret_cast<const float4 *>(b + (long long)gk * n + gn))
                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      return;
    }
#pragma unroll
    for (int j = 0; j < A_LOADS; j++) {
      const int e = u + j * TS;
      const int mm = e / BK, kk = e % BK;
      const int gm = row0 + mm, gk = k0 + kk;
      ra[j] = (e < BM * BK && gm < m && gk < k) ? __ldg(a + (long long)gm * k + gk) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < B_LOADS; j++) {
      const int e = u + j * TS;
      const int kk = e / BN, nn = e % BN;
      const int gk = k0 + kk, gn = col0 + nn;
      rb[j] = (e < BK * BN && gk < k && gn < n) ? __ldg(b + (long long)gk * n + gn) : 0.0f;
    }
  };
  auto store = [&]() {
    if (vec) {
#pragma unroll
      for (int j = 0; j < A_VECS; j++) {
        const int e = u + j * TS;
        if (e < BM * BK / 4) {
          const int mm = e / (BK / 4), kk = 4 * (e % (BK / 4));
          as[kk * PITCH + mm] = va[j].x;
          as[(kk + 1) * PITCH + mm] = va[j].y;
          as[(kk + 2) * PITCH + mm] = va[j].z;
          as[(kk + 3) * PITCH + mm] = va[j].w;
        }
      }
#pragma unroll
      for (int j = 0; j < B_VECS; j++) {
        const int e = u + j * TS;
        if (e < BK * BN / 4) *reinterpret_cast<float4 *>(bs + 4 * e) = vb[j];
      }
      return;
    }
#pragma unroll
    for (int j = 0; j < A_LOADS; j++) {
      const int e = u + j * TS;
      if (e < BM * BK) as[(e % BK) * PITCH + e / BK] = ra[j];
    }
#pragma unroll
    for (int j = 0; j < B_LOADS; j++) {
      const int e = u + j * TS;
      if (e < BK * BN) bs[e] = rb[j];
    }
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

  load(0);
  store();
  __syncthreads();
  for (int step = 0; step < steps; step++) {
    if (step + 1 < steps) load(step + 1);
#pragma unroll 4
    for (int kk = 0; kk < BK; kk++) {
      float av[TM], bv[TN];
#pragma unroll
      for (int i = 0; i < TM; i += 4) {
        const float4 v = *reinterpret_cast<const float4 *>(as + kk * PITCH + ty * TM + i);
        av[i] = v.x; av[i + 1] = v.y; av[i + 2] = v.z; av[i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < TN; j += 4) {
        const float4 v = *reinterpret_cast<const float4 *>(bs + kk * BN + tx * TN + j);
        bv[j] = v.x; bv[j + 1] = v.y; bv[j + 2] = v.z; bv[j + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
    if (step + 1 < steps) {
      store();
      __syncthreads();
    }
  }

  // the KS partial tiles: red[s][r][cc], then one thread per output adds them in slice order
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j += 4)
      *reinterpret_cast<float4 *>(smem + (s * BM + ty * TM + i) * BN + tx * TN + j) =
          make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
  __syncthreads();
  for (int o = t; o < BM * BN; o += THREADS) {
    const int r = o / BN, cc = o % BN;
    float sum = 0.0f;
#pragma unroll
    for (int z = 0; z < KS; z++) sum += smem[(z * BM + r) * BN + cc];
    if (row0 + r < m && col0 + cc < n) c[(long long)(row0 + r) * n + col0 + cc] = sum;
  }
}
