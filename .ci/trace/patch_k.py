"""Per-k-tile load timing on top of patch_trace.py (apply that first, to the same diagnostic copy):
for the k-tiles 64..127 of each CTA (its second 4096-deep item at K = 4096), the time the producer
got the slot and issued the loads, the time the stage's full barrier completed (seen by an
observer warp, warp 1 of the producer warpgroup, spinning on each barrier in turn) and the time
consumer warpgroup 0 began to wait for it. Printed as ``TR K cta i issue arrive need`` lines
(cycles from the CTA's start) in launch TRACE_AT + 1. Assumes every CTA has >= 2 items of 64
k-tiles (4096^3 with the default tile)."""
from source_edit import SourceEdit

src = SourceEdit()
rep = src.rep
rep('#define TR_ITEMS 8', '#define TR_ITEMS 6')
rep('__device__ long long wgmma_trace_buf[256 * TR_PER_CTA];',
    '__device__ long long wgmma_trace_buf[256 * TR_PER_CTA];\n__device__ int wgmma_trace_k[256 * 192];')
rep('  __shared__ unsigned tr_seq;', '  __shared__ unsigned tr_seq;\n  __shared__ int tr_k[3][64];')
rep('''          pw += tr_clock() - w0;''', '''          pw += tr_clock() - w0;
          if (it >= 64 && it < 128) tr_k[0][it - 64] = (int)(tr_clock() - tr_t0);''')
rep('''        if (item < TR_ITEMS) { tr_p[item][0] = pstart - tr_t0; tr_p[item][1] = pw; }
      }
    }
  } else {''', '''        if (item < TR_ITEMS) { tr_p[item][0] = pstart - tr_t0; tr_p[item][1] = pw; }
      }
    } else if (tid == 32) {  // observer: when each stage of k-tiles 0..127 completes
      for (int i = 0; i < 128; i++) {
        gemmlab::mbarrier_try_wait_parity(&full[i % STAGES], (i / STAGES) & 1);
        if (i >= 64) tr_k[1][i - 64] = (int)(tr_clock() - tr_t0);
      }
    }
  } else {''')
rep('''        const long long w1 = tr_clock();''', '''        const long long w1 = tr_clock();
        if (wg == 0 && tr_lead && it >= 64 && it < 128) tr_k[2][it - 64] = (int)(w0 - tr_t0);''')
rep('''    if (tid == 0) q[0] = (long long)tr_g0, q[1] = tr_t0;
  }''', '''    if (tid == 0) q[0] = (long long)tr_g0, q[1] = tr_t0;
    for (int i = tid; i < 192; i += blockDim.x) wgmma_trace_k[blockIdx.x * 192 + i] = (&tr_k[0][0])[i];
  }''')
rep('''        printf("TR S %d %lld %lld\\n", b, q[0], q[1]);''', '''        printf("TR S %d %lld %lld\\n", b, q[0], q[1]);
        for (int i = 0; i < 64; i++) {
          const int *kk = wgmma_trace_k + b * 192;
          printf("TR K %d %d %d %d %d\\n", b, i, kk[i], kk[64 + i], kk[128 + i]);
        }''')
src.save()
