"""Tensor-pipe microbenchmark inside the traced launch (apply after patch_trace.py, to the same
diagnostic copy): in launch TRACE_AT only, before its first tile each consumer warpgroup waits for
the first stage, then issues MB_REPS groups of the main loop's wgmmas on that stage (the same
descriptors, commit, wait_group 1; no loads, no releases) — both warpgroups at once, as in the
main loop — timed with clock64; then the same with a try_wait on the (complete) full barrier in
every group; then warpgroup 0 alone (the other waits at a named barrier); then both warpgroups with
``wait_group 0`` after every group (no group in flight while the next is issued); then the groups
on the STAGES resident stages in turn (``cycled``: different shared-memory addresses, no loads);
then the groups on the first stage while thread 32 (an idle warp of the producer warpgroup) reloads the
other stages with TMA (the same k-tiles, so the same bytes) in five patterns, paced by the consumers'
count of issued groups (:data:`RELOADS`; CLUSTER=1 only; session 10's call 6 had a consumer thread
issue them, which delays its warpgroup's wgmmas).
The accumulators are zeroed again before the real tile, so the result stays right. Printed as
``TR M cta wg plain with_wait alone serial cycled reloads reloads_a reloads_b reloads_every2 reloads_alternate``
(cycles) in launch TRACE_AT + 1 (the reload variants: :data:`RELOADS`). Ideal at 128x256
(2 warpgroups x 4 m64n256k16 of 128 cycles per group): MB_REPS x 1024 cycles; warpgroup 0 alone:
MB_REPS x 512 (one warpgroup's m64n256k16 runs on all four sub-partitions' tensor cores)."""
import os

from source_edit import SourceEdit

src = SourceEdit()
rep = src.rep
rep('__device__ long long wgmma_trace_buf[256 * TR_PER_CTA];',
    '__device__ long long wgmma_trace_buf[256 * TR_PER_CTA];\n__device__ long long wgmma_trace_mb[256 * 20];\n#define MB_REPS 64')
rep('  __shared__ unsigned tr_seq;', '  __shared__ unsigned tr_seq;\n  __shared__ long long tr_mb[2][10];\n  __shared__ unsigned long long tr_mbar[2];\n  __shared__ int tr_cnt;')
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


#: the reload variants: while both consumer warpgroups run stage 0's groups, thread 32 (warp 1 of the
#: producer warpgroup, idle in the kernel) rewrites the other stages by TMA with the same k-tiles (the
#: same bytes), one load per group at most, after the consumers' signal that the group is issued (the
#: place of the kernel's release), at most two loads in flight on the spare barriers tr_mbar[0..1]:
#: (A box this group?, B boxes this group?) as C expressions of the group r
RELOADS = [("true", "true"),          # the whole stage (48 KiB at 128x256) every group: the main loop's rate
           ("true", "false"),         # A only (a third of the bytes)
           ("false", "true"),         # B only (two thirds)
           ("r % 2 == 0", "r % 2 == 0"),  # the whole stage every second group (half the rate, bursts)
           ("r % 2 == 0", "r % 2 == 1")]  # A and B on alternate groups (half the rate, spread)


#: the variants compiled into this copy ($MB_RELOADS, default "0,3,4": the whole stage every group,
#: every second group, A and B alternating — what separates a per-load from a per-byte cost). With
#: all five ptxas duplicates the benchmark's code (1340 HGMMA, 5.5 min here, > 4 min on the device's
#: CPU: session 10's call 7 timed out); "0,3,4" compiles in ~5 s, one variant in ~3 s.
BUILT = [int(v) for v in os.environ.get("MB_RELOADS", "0,3,4").split(",") if v.strip()]


def reload_loop(v: int) -> str:
    """Consumer side of reload variant ``v``: stage 0's groups, thread 128 counting each issued
    group into tr_cnt (the loader's pace); duration into tr_rl[v]."""
    return '''        {  // reload variant ''' + str(v) + ''' (loads by thread 32, paced by tr_cnt)
          named_barrier_sync(5, 256);
          const long long r0c = tr_clock();
#pragma unroll 1
          for (int r = 0; r < MB_REPS; r++) {
''' + issue + '''
            if (tid == 128) *(volatile int *)&tr_cnt = ''' + str(v) + ''' * MB_REPS + r + 1;
          }
          gemmlab::wgmma_wait<0>();
          gemmlab::wgmma_fence_operands(d);
          tr_rl[''' + str(v) + '''] = tr_clock() - r0c;
        }
'''


def loader(v: int, do_a: str, do_b: str) -> str:
    """Thread 32's side of reload variant ``v`` (see :data:`RELOADS`)."""
    return f'''      {{  // reload variant {v}: A {do_a}, B {do_b}
        int nl = 0;
#pragma unroll 1
        for (int r = 0; r < MB_REPS; r++) {{
          while (*(volatile int *)&tr_cnt < {v} * MB_REPS + r + 1) __nanosleep(20);  // few issue slots taken
          const bool la = {do_a}, lb = {do_b};
          if (la || lb) {{
            const int q = 1 + r % (STAGES - 1), kt = w0.kb + q;
            unsigned char *dst_slot = ring + (q % STAGES) * STAGE_BYTES;
            if (nl >= 2) gemmlab::mbarrier_try_wait_parity(&tr_mbar[nl & 1], ((nl >> 1) - 1) & 1);
            gemmlab::mbarrier_arrive_expect_tx(&tr_mbar[nl & 1], (la ? A_BYTES : 0u) + (lb ? MY_BOXES * B_BOX_BYTES : 0u));
            if (la) gemmlab::tma_load_2d(dst_slot, tensor_a, kt * BK, m0, &tr_mbar[nl & 1]);
            if (lb) {{
#pragma unroll
              for (int i = 0; i < MY_BOXES; i++) {{
                const int c0 = B_MN_MAJOR ? n0 + i * 64 : kt * BK;
                const int c1 = B_MN_MAJOR ? kt * BK : n0 + i * (BN / B_BOXES);
                gemmlab::tma_load_2d(dst_slot + A_BYTES + i * B_BOX_BYTES, tensor_b, c0, c1, &tr_mbar[nl & 1]);
              }}
            }}
            nl++;
          }}
        }}
        for (int b = 0; b < 2; b++) {{  // every load of this variant is in shared memory
          const int uses = (nl + 1 - b) / 2;
          if (uses > 0) gemmlab::mbarrier_try_wait_parity(&tr_mbar[b], (uses - 1) & 1);
        }}
        gemmlab::mbarrier_init(&tr_mbar[0], 1);  // the spare barriers start over (no load in flight)
        gemmlab::mbarrier_init(&tr_mbar[1], 1);
        gemmlab::fence_barrier_init();
      }}
'''


rep(zero, '''      if (!PINGPONG && CLUSTER == 1 && local == 0 && tr_seq == TRACE_AT && w.ke - w.kb >= STAGES) {  // tensor-pipe microbenchmark (patch_micro.py)
        const int s0 = it % STAGES;
        long long tr_rl[5] = {0, 0, 0, 0, 0};
        gemmlab::mbarrier_try_wait_parity(&full[s0], (it / STAGES) & 1);
        unsigned char *slot = ring + s0 * STAGE_BYTES;
        named_barrier_sync(5, 256);  // both consumer warpgroups start together
        const long long m0c = tr_clock();
#pragma unroll 1
        for (int r = 0; r < MB_REPS; r++) {
''' + issue + '''
        }
        gemmlab::wgmma_wait<0>();
        gemmlab::wgmma_fence_operands(d);
        const long long m1c = tr_clock();
        named_barrier_sync(5, 256);
        const long long m2c = tr_clock();
#pragma unroll 1
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
#pragma unroll 1
          for (int r = 0; r < MB_REPS; r++) {
''' + indent(issue) + '''
          }
          gemmlab::wgmma_wait<0>();
          gemmlab::wgmma_fence_operands(d);
        }
        const long long m5c = tr_clock();
        named_barrier_sync(5, 256);
        const long long m6c = tr_clock();
#pragma unroll 1
        for (int r = 0; r < MB_REPS; r++) {
''' + issue.replace('gemmlab::wgmma_wait<1>();', 'gemmlab::wgmma_wait<0>();') + '''
        }
        const long long m7c = tr_clock();
        // cycled: every resident stage in turn (the item's first STAGES k-tiles are all loaded)
        for (int q = 1; q < STAGES; q++)
          gemmlab::mbarrier_try_wait_parity(&full[(it + q) % STAGES], ((it + q) / STAGES) & 1);
        named_barrier_sync(5, 256);
        const long long m8c = tr_clock();
#pragma unroll 1
        for (int r = 0; r < MB_REPS; r++) {
          unsigned char *slot = ring + ((s0 + r) % STAGES) * STAGE_BYTES;
''' + indent(issue) + '''
        }
        gemmlab::wgmma_wait<0>();
        gemmlab::wgmma_fence_operands(d);
        const long long m9c = tr_clock();
''' + ''.join(reload_loop(v) for v in BUILT) + '''
        // consume the accumulators (the chain of all four loops): ptxas turns wgmmas whose results
        // are dead into HGMMA.64x8x16 with RZ operands (session 10, call 1 measured those: ~50
        // cycles per group)
        float tr_sink = 0.0f;
#pragma unroll
        for (int i = 0; i < BN / 2; i++) tr_sink += d[0][i];
        if (tr_sink == 1.0e-30f) wgmma_trace_mb[255 * 20 + 19] = 1;
        if (tr_lead) tr_mb[wg][0] = m1c - m0c, tr_mb[wg][1] = m3c - m2c, tr_mb[wg][2] = m5c - m4c, tr_mb[wg][3] = m7c - m6c,
                      tr_mb[wg][4] = m9c - m8c;
        if (tr_lead) for (int v = 0; v < 5; v++) tr_mb[wg][5 + v] = tr_rl[v];
      }
''' + zero)
rep('''    if (tid == 0) q[0] = (long long)tr_g0, q[1] = tr_t0;
  }''', '''    if (tid == 0) q[0] = (long long)tr_g0, q[1] = tr_t0;
    if (tid < 20) wgmma_trace_mb[blockIdx.x * 20 + tid] = (&tr_mb[0][0])[tid];
  }''')
rep('''        printf("TR S %d %lld %lld\\n", b, q[0], q[1]);''', '''        printf("TR S %d %lld %lld\\n", b, q[0], q[1]);
        for (int wg = 0; wg < 2; wg++) {
          const long long *mb = wgmma_trace_mb + b * 20 + wg * 10;
          printf("TR M %d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld\\n", b, wg, mb[0], mb[1], mb[2], mb[3],
                 mb[4], mb[5], mb[6], mb[7], mb[8], mb[9]);
        }''')
rep('''    gemmlab::fence_barrier_init();
    tr_seq = atomicAdd''', '''    gemmlab::mbarrier_init(&tr_mbar[0], 1);
    gemmlab::mbarrier_init(&tr_mbar[1], 1);
    tr_cnt = 0;
    gemmlab::fence_barrier_init();
    tr_seq = atomicAdd''')
rep('''  if (warpgroup == 0) {
    gemmlab::setmaxnreg_dec<40>();
''', '''  if (warpgroup == 0) {
    gemmlab::setmaxnreg_dec<40>();
    WorkItem w0;  // the reload microbenchmark's loader (patch_micro.py): warp 1 of the producer warpgroup
    if (!PINGPONG && CLUSTER == 1 && tid == 32 && tr_seq == TRACE_AT && sched.item(0, w0) && w0.ke - w0.kb >= STAGES) {
      int mb0, nb0;
      tile_of(w0.unit, mb0, nb0);
      const int m0 = mb0 * BM, n0 = nb0 * BN;
''' + ''.join(loader(v, *RELOADS[v]) for v in BUILT) + '''    }
''')
src.save()
