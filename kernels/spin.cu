// gemmlab's timing instrument (not a GEMM): one thread that spins on the global nanosecond timer
// for `ns` nanoseconds. Enqueued before the start event of a single-launch timing
// (gemmlab.stages.timing.time_once), it keeps the GPU busy while the host enqueues the launch under
// test, so the two events bracket the device's work and not the host's enqueue (Python, a library's
// API call): nvbench's "blocking kernel" serves the same purpose.
template <int Unused>
__global__ void gemmlab_spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
