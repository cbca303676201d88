// gemmlab's L2 flush instrument (not a GEMM): reads a scratch buffer of 2x the L2 size through L2
// (ld.global.cg: cached in L2, not in L1), 16 bytes a load, grid-stride. Afterwards L2 holds clean
// lines of the scratch buffer only: nothing of the inputs, and nothing dirty that the timed kernel
// would have to write back (a memset flush leaves 2x L2 of dirty lines behind). The buffer holds
// one repeated word, so each thread's XOR of its words is 0 or that word, never 0x12345678: the
// store that keeps the loads alive is never taken.
template <int Unused>
__global__ void gemmlab_l2_read(const int4* __restrict__ buf, long long n, int* __restrict__ sink) {
  int acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    int4 v = __ldcg(buf + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678) sink[0] = acc;
}
