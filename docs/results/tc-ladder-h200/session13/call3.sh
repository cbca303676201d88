#!/usr/bin/env bash
# session 13 call 3: every gpu test on the EPI=7 default, ncu default/EPI=2/cuBLAS at 4096^3, set 32
set -u
P="kernel=wgmma_bf16 precision=bf16 layout.b=col shape=[4096,4096,4096]"
PYTEST=all PYTEST_LIMIT=150 ISOLATION_LIMIT=50 SET=32 EVID_BUDGET=265 EVID_LIMIT=285 NCU_LIMIT=100 \
  NCU="def=$P;epi2=$P kernel.EPI=2;cub=kernel=cublas precision=bf16 layout.b=col shape=[4096,4096,4096]" bash .ci/gpu-call
grep -E "FAILED|Error" "$OUT"/pytest-*.log | head; tail -8 "$OUT/ncu.log"; tail -45 "$OUT/evidence.log"
