// gemmlab's launch-floor instrument (not a GEMM): an empty kernel timed by the same protocol and
// on the same stream as the kernel under test, one block of 32 threads.
template <int Unused>
__global__ void gemmlab_empty() {}
