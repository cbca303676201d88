"""Trace v3: clock64 phase stamps + summed barrier waits per item, stored to a global buffer in launch
TRACE_AT and printed after the timing by a separate kernel, ``wgmma_trace_print`` (diagnostic copy
only). v2 printed from the GEMM kernel itself (block 0, launch TRACE_AT + 1): the ``printf`` call in
the kernel made ptxas serialize every wgmma (C7510 "wgmma pipeline crossing function boundary at a
function call": each HGMMA waited for the one before, `WARPGROUP.DEPBAR.LE gsb0, 0x0`), so the traced
kernel was ~10% slower than the shipped one and its main loop measured 1.15x the ideal (sessions 9-11).
The copy's ``gemmlab/run/pipeline.py`` is patched too: after the timing it launches the print kernel
of every backend whose module has one."""
from pathlib import Path

from source_edit import SourceEdit

src = SourceEdit()
rep = src.rep
rep('constexpr int WGMMA_MAX_FLAGS = 16384;',
    '''constexpr int WGMMA_MAX_FLAGS = 16384;
__device__ unsigned wgmma_trace_seq[2048];
#define TRACE_AT 12
#define TR_ITEMS 8
#define TR_F 6
// per CTA: [0] gtime start, [1] clock start, then consumer [2][TR_ITEMS][TR_F], producer [TR_ITEMS][2], meta [2][TR_ITEMS][4]
#define TR_PER_CTA (2 + 2 * TR_ITEMS * TR_F + TR_ITEMS * 2 + 2 * TR_ITEMS * 4)
__device__ long long wgmma_trace_buf[256 * TR_PER_CTA];
__device__ __forceinline__ long long tr_clock() { long long c; asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)); return c; }
__device__ __forceinline__ unsigned long long tr_gtime() { unsigned long long c; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(c)); return c; }''')
rep('''  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];''',
    '''  __shared__ alignas(8) unsigned long long full[STAGES], empty[STAGES];
  __shared__ long long tr_c[2][TR_ITEMS][TR_F], tr_p[TR_ITEMS][2], tr_t0, tr_g0;
  __shared__ int tr_m[2][TR_ITEMS][4];
  __shared__ unsigned tr_seq;''')
rep('''    gemmlab::fence_barrier_init();
  }''', '''    gemmlab::fence_barrier_init();
    tr_seq = atomicAdd(&wgmma_trace_seq[blockIdx.x], 1u);
    tr_g0 = tr_gtime();
    tr_t0 = tr_clock();
  }''')
# producer: summed empty waits per item
rep('''      for (int item = 0; sched.item(item, w); item++) {
        int m_blk, n_blk;''', '''      for (int item = 0; sched.item(item, w); item++) {
        long long pw = 0;
        const long long pstart = tr_clock();
        int m_blk, n_blk;''')
rep('''          gemmlab::mbarrier_try_wait_parity(&empty[s], ((it / STAGES) & 1) ^ 1);''',
    '''          const long long w0 = tr_clock();
          gemmlab::mbarrier_try_wait_parity(&empty[s], ((it / STAGES) & 1) ^ 1);
          pw += tr_clock() - w0;''')
rep('''            else gemmlab::tma_load_2d(dst, tensor_b, c0, c1, &full[s]);
          }
        }
      }
    }''', '''            else gemmlab::tma_load_2d(dst, tensor_b, c0, c1, &full[s]);
          }
        }
        if (item < TR_ITEMS) { tr_p[item][0] = pstart - tr_t0; tr_p[item][1] = pw; }
      }
    }''')
# consumer
rep('''    for (int local = 0; sched.item(local, w); local++) {''', '''    const bool tr_lead = tid % 128 == 0;
    for (int i = 0; i < TR_ITEMS; i++) if (tr_lead) tr_m[wg][i][3] = 0;
    int local = 0;
    long long cw = 0, ca = 0, cb = 0, cc = 0;
    for (; sched.item(local, w); local++) {
      if (tr_lead && local > 0 && local <= TR_ITEMS) {
        long long *r = tr_c[wg][local - 1];
        r[0] = ca - tr_t0, r[1] = cb - tr_t0, r[2] = cc - tr_t0, r[3] = tr_clock() - tr_t0, r[4] = cw;
      }
      ca = tr_clock(), cw = 0;
      if (tr_lead && local < TR_ITEMS) { tr_m[wg][local][0] = w.kb, tr_m[wg][local][1] = w.ke, tr_m[wg][local][2] = w.rank, tr_m[wg][local][3] = 1; }''')
rep('''        gemmlab::mbarrier_try_wait_parity(&full[s], (it / STAGES) & 1);''',
    '''        const long long w0 = tr_clock();
        gemmlab::mbarrier_try_wait_parity(&full[s], (it / STAGES) & 1);
        const long long w1 = tr_clock();
        cw += w1 - w0;
        if (kt == w.kb) cb = w1;''')
rep('''      gemmlab::wgmma_wait<0>();
      gemmlab::wgmma_fence_operands(d);
      if (!HOLD''', '''      gemmlab::wgmma_wait<0>();
      gemmlab::wgmma_fence_operands(d);
      cc = tr_clock();
      if (!HOLD''')
rep('''      if (tid % 32 == 0) gemmlab::bulk_wait_group<0>();  // each warp's last stores done before the CTA leaves
    }''', '''      if (tid % 32 == 0) gemmlab::bulk_wait_group<0>();  // each warp's last stores done before the CTA leaves
    }
    if (tr_lead && local > 0 && local <= TR_ITEMS) {
      long long *r = tr_c[wg][local - 1];
      r[0] = ca - tr_t0, r[1] = cb - tr_t0, r[2] = cc - tr_t0, r[3] = tr_clock() - tr_t0, r[4] = cw;
    }''')
rep('''  if constexpr (CLUSTER > 1) gemmlab::cluster_sync();  // no CTA leaves while its peer may still signal it
}''', '''  if constexpr (CLUSTER > 1) gemmlab::cluster_sync();  // no CTA leaves while its peer may still signal it
  __syncthreads();
  if (tr_seq == TRACE_AT) {
    long long *q = wgmma_trace_buf + (long long)blockIdx.x * TR_PER_CTA;
    const long long *src = &tr_c[0][0][0];
    for (int i = tid; i < 2 * TR_ITEMS * TR_F; i += blockDim.x) q[2 + i] = src[i];
    for (int i = tid; i < TR_ITEMS * 2; i += blockDim.x) q[2 + 2 * TR_ITEMS * TR_F + i] = (&tr_p[0][0])[i];
    for (int i = tid; i < 2 * TR_ITEMS * 4; i += blockDim.x) q[2 + 2 * TR_ITEMS * TR_F + TR_ITEMS * 2 + i] = (&tr_m[0][0][0])[i];
    if (tid == 0) q[0] = (long long)tr_g0, q[1] = tr_t0;
  }
}''')
# the print kernel (its own function: no call inside the GEMM kernel), after everything it reads
src.text += '''
/// DIAGNOSTIC (.ci/trace): print the trace of launch TRACE_AT; one thread, launched by the patched
/// pipeline after the timing.
extern "C" __global__ void wgmma_trace_print() {
''' + '''      for (int b = 0; b < 256; b++) {
        const long long *q = wgmma_trace_buf + (long long)b * TR_PER_CTA;
        if (q[0] == 0) continue;  // a CTA that did not run in launch TRACE_AT
        printf("TR S %d %lld %lld\\n", b, q[0], q[1]);
        for (int wg = 0; wg < 2; wg++)
          for (int i = 0; i < TR_ITEMS; i++) {
            const long long *c = q + 2 + (wg * TR_ITEMS + i) * TR_F;
            const long long *m = q + 2 + 2 * TR_ITEMS * TR_F + TR_ITEMS * 2 + (wg * TR_ITEMS + i) * 4;
            if (m[3]) printf("TR C %d %d %d %lld %lld %lld %lld %lld %lld %lld %lld\\n", b, wg, i, m[0], m[1], m[2], c[0], c[1], c[2], c[3], c[4]);
          }
        for (int i = 0; i < TR_ITEMS; i++) {
          const long long *pp = q + 2 + 2 * TR_ITEMS * TR_F + i * 2;
          printf("TR P %d %d %lld %lld\\n", b, i, pp[0], pp[1]);
        }
      }
''' + '''}
'''
src.save()

# the copy's pipeline: after the timing, launch every backend's print kernel (if its module has one)
pipe = SourceEdit(str(Path(src.path).resolve().parents[1] / "gemmlab" / "run" / "pipeline.py"))
pipe.rep('''        _record_timing(self.record, self.backends, measured, rc, self.record["flops"], gpu)
''', '''        _record_timing(self.record, self.backends, measured, rc, self.record["flops"], gpu)
        for backend in self.backends:  # DIAGNOSTIC (.ci/trace/patch_trace.py): print the trace
            code = getattr(getattr(backend, "compiled", None), "object_code", None)
            if code is None:
                continue
            try:
                loaded = gpu.load(code, "wgmma_trace_print", 0)
            except Exception:
                continue
            from gemmlab.contract.hookspecs import Launch
            gpu.launcher(loaded, Launch(grid=(1, 1, 1), block=(1, 1, 1)), ())()
            gpu.sync()
''')
pipe.save()
