"""Tensor-pipe microbenchmark inside the traced launch (apply after patch_trace.py, to the same
diagnostic copy): in launch TRACE_AT only, before its first tile each consumer warpgroup waits for
the first stage, then issues MB_REPS groups of the main loop's wgmmas on that stage (the same
descriptors, commit, wait_group 1; no loads, no releases) — both warpgroups at once, as in the
main loop — timed with clock64; then the same with a try_wait on the (complete) full barrier in
every group; then warpgroup 0 alone (the other waits at a named barrier); then both warpgroups with
``wait_group 0`` after every group (no group in flight while the next is issued). The accumulators
are zeroed again before the real tile, so the result stays right. Printed as
``TR M cta wg plain with_wait alone serial`` (cycles) in launch TRACE_AT + 1. Ideal at 128x256
(2 warpgroups x 4 m64n256k16 of 128 cycles per group): MB_REPS x 1024 cycles; warpgroup 0 alone:
MB_REPS x 512 (one warpgroup's m64n256k16 runs on all four sub-partitions' tensor cores)."""
from source_edit import SourceEdit

src = SourceEdit()
rep = src.rep
rep('__device__ long long wgmma_trace_buf[256 * TR_PER_CTA];',
    '__device__ long long wgmma_trace_buf[256 * TR_PER_CTA];\n__device__ long long wgmma_trace_mb[256 * 8];\n#define MB_REPS 64')
rep('  __shared__ unsigned tr_seq;', '  __shared__ unsigned tr_seq;\n  __shared__ long long tr_mb[2][4];')
zero = '''#pragma unroll
      for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int i = 0; i < BN / 2; i++) d[mi][i] = 0.0f;
      for (int kt = w.kb; kt < w.ke; kt++, it++) {'''
# the main loop's issue sequence for one stage, as the kernel has it (so it cannot drift from it),
# two columns deeper: it runs inside the benchmark's own loop
issue = "\n".join(line if line.startswith("#") else "  " + line for line in src.block(
    "        gemmlab::wgmma_fence_operands(d);\n        gemmlab::wgmma_fence();",
    "gemmlab::wgmma_wait<1>();\n        gemmlab::wgmma_fence_operands(d);").split("\n"))


def indent(s):
    return "\n".join(l if l.startswith("#") else "  " + l for l in s.split("\n"))


rep(zero, '''      if (!PINGPONG && local == 0 && tr_seq == TRACE_AT) {  // tensor-pipe microbenchmark (patch_micro.py)
        const int s0 = it % STAGES;
        gemmlab::mbarrier_try_wait_parity(&full[s0], (it / STAGES) & 1);
        unsigned char *slot = ring + s0 * STAGE_BYTES;
        named_barrier_sync(5, 256);  // both consumer warpgroups start together
        const long long m0c = tr_clock();
        for (int r = 0; r < MB_REPS; r++) {
''' + issue + '''
        }
        gemmlab::wgmma_wait<0>();
        gemmlab::wgmma_fence_operands(d);
        const long long m1c = tr_clock();
        named_barrier_sync(5, 256);
        const long long m2c = tr_clock();
        for (int r = 0; r < MB_REPS; r++) {
          gemmlab::mbarrier_try_wait_parity(&full[s0], (it / STAGES) & 1);
''' + issue + '''
        }
        gemmlab::wgmma_wait<0>();
        gemmlab::wgmma_fence_operands(d);
        const long long m3c = tr_clock();
        named_barrier_sync(5, 256);
        const long long m4c = tr_clock();
        if (wg == 0) {
          for (int r = 0; r < MB_REPS; r++) {
''' + indent(issue) + '''
          }
          gemmlab::wgmma_wait<0>();
          gemmlab::wgmma_fence_operands(d);
        }
        const long long m5c = tr_clock();
        named_barrier_sync(5, 256);
        const long long m6c = tr_clock();
        for (int r = 0; r < MB_REPS; r++) {
''' + issue.replace('gemmlab::wgmma_wait<1>();', 'gemmlab::wgmma_wait<0>();') + '''
        }
        const long long m7c = tr_clock();
        if (tr_lead) tr_mb[wg][0] = m1c - m0c, tr_mb[wg][1] = m3c - m2c, tr_mb[wg][2] = m5c - m4c, tr_mb[wg][3] = m7c - m6c;
      }
''' + zero)
rep('''    if (tid == 0) q[0] = (long long)tr_g0, q[1] = tr_t0;
  }''', '''    if (tid == 0) q[0] = (long long)tr_g0, q[1] = tr_t0;
    if (tid < 8) wgmma_trace_mb[blockIdx.x * 8 + tid] = (&tr_mb[0][0])[tid];
  }''')
rep('''        printf("TR S %d %lld %lld\\n", b, q[0], q[1]);''', '''        printf("TR S %d %lld %lld\\n", b, q[0], q[1]);
        for (int wg = 0; wg < 2; wg++)
          printf("TR M %d %d %lld %lld %lld %lld\\n", b, wg, wgmma_trace_mb[b * 8 + wg * 4], wgmma_trace_mb[b * 8 + wg * 4 + 1],\n                 wgmma_trace_mb[b * 8 + wg * 4 + 2], wgmma_trace_mb[b * 8 + wg * 4 + 3]);''')
src.save()
