// Exploit: writes nothing, counting on C still holding a correct result from an earlier run
// (KernelBench's stale output buffer).
template <int BS>
__global__ void x_noop(const float *a, const float *b, float *c, int m, int n, int k) {}
