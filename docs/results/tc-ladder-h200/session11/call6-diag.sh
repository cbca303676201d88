#!/usr/bin/env bash
# session 11 call 6 (diagnostic copy, trace v3: no printf in the GEMM kernel, wgmmas not serialized):
# phase trace of the shipped kernel and of the NOLOAD variants, 4096^3 row/col; CLUSTER=2, STAGES=3, 8192^3
set -u
export DIAG_TIME_ANYWAY=1 PYTHONUNBUFFERED=1
K=phase6; mkdir -p "$OUT/$K"
for spec in "nl1:kernel.NOLOAD=1" "nl2:kernel.NOLOAD=2" "nl4:kernel.NOLOAD=4" "nl6:kernel.NOLOAD=6" "nl7:kernel.NOLOAD=7" \
            "nl8:kernel.NOLOAD=8" "cl2:kernel.CLUSTER=2" "st3:kernel.STAGES=3" "rr:layout.b=row" "d8192:shape=[8192,8192,8192]"; do
  label=${spec%%:*}; over=${spec#*:}
  timeout 100 python3 -m gemmlab kernel=wgmma_bf16 precision=bf16 layout.b=col 'shape=[4096,4096,4096]' $over \
    isolation.process=false timing.mode=graph timing.warmup=2 timing.repeat=5 timing.batch=10 cache.enabled=false \
    hydra.run.dir="$OUT/$K/run-$label" > "$OUT/$K/$label.txt" 2> "$OUT/$K/$label.err"
  echo "$label: exit $? $(grep -c '^TR' "$OUT/$K/$label.txt") TR lines; $(grep -E 'median|error' "$OUT/$K/$label.txt" | head -1 | cut -c1-100)"
done
python3 .ci/trace/analyze.py "$OUT/$K" > "$OUT/$K-summary.txt"; grep -E "^==|^1 \||share" "$OUT/$K-summary.txt"
tar czf "$OUT/$K.tgz" -C "$OUT" "$K" && rm -rf "$OUT/$K"
