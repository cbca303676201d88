#!/usr/bin/env bash
# session 11 call 8 (branch hold2): set 30 + ncu (default vs EPI=6) + sanitizer on a multi-item shape
set -u
P="kernel=wgmma_bf16 precision=bf16 layout.b=col"
for tool in racecheck; do
  timeout 60 python3 -m gemmlab $P 'shape=[2432,1792,128]' kernel.EPI=6 sanitizer=$tool cache.enabled=false \
    hydra.run.dir="$OUT/san-$tool" > "$OUT/san-$tool.log" 2>&1
  echo "sanitizer $tool (2432x1792x128: 133 tiles, multi-item CTAs): exit $? $(grep -i 'sanitizer' "$OUT/san-$tool.log" | tail -1 | cut -c1-150)"
done
PYTEST=none SET=30 EVID_BUDGET=115 EVID_LIMIT=130 NCU_LIMIT=60 \
  NCU="def=$P shape=[4096,4096,4096];epi6=$P shape=[4096,4096,4096] kernel.EPI=6" bash .ci/gpu-call
