#!/usr/bin/env bash
# session 12 call 2: EPI=7's gpu tests, ncu default vs EPI=7 at 4096^3, set 31 (timing, interleaved)
set -u
P="kernel=wgmma_bf16 precision=bf16 layout.b=col"
PYTEST='EPI.*7' PYTEST_LIMIT=150 SET=31 EVID_BUDGET=200 EVID_LIMIT=230 NCU_LIMIT=100 \
  NCU="def=$P shape=[4096,4096,4096];epi7=$P shape=[4096,4096,4096] kernel.EPI=7;cub=kernel=cublas precision=bf16 layout.b=col shape=[4096,4096,4096]" bash .ci/gpu-call
tail -4 "$OUT/pytest-gpu.log"; grep -E "FAILED|Error" "$OUT/pytest-gpu.log" | head; tail -8 "$OUT/ncu.log"; tail -40 "$OUT/evidence.log"
