#!/usr/bin/env bash
# session 11 call 3 (diagnostic copy): phase trace + ncu of NOLOAD 1 (default) / 2 (no loads after the
# first ring pass) / 3 (every load reads k-tile it % STAGES: L2-resident), 4096^3 row/col
set -u
export DIAG_TIME_ANYWAY=1 PYTHONUNBUFFERED=1
K=phase; mkdir -p "$OUT/$K"
for n in 1 2 4 5; do
  timeout 150 python3 -m gemmlab kernel=wgmma_bf16 precision=bf16 layout.b=col 'shape=[4096,4096,4096]' kernel.NOLOAD=$n \
    isolation.process=false timing.mode=graph timing.warmup=2 timing.repeat=5 timing.batch=10 cache.enabled=false \
    hydra.run.dir="$OUT/$K/run-nl$n" > "$OUT/$K/nl$n.txt" 2> "$OUT/$K/nl$n.err"
  echo "nl$n: exit $? $(grep -c '^TR' "$OUT/$K/nl$n.txt") TR lines; $(grep -E 'median|error' "$OUT/$K/nl$n.txt" | head -1 | cut -c1-120)"
done
python3 .ci/trace/analyze.py "$OUT/$K" > "$OUT/$K-summary.txt"; grep -E "^==|^1 \||share" "$OUT/$K-summary.txt"
tar czf "$OUT/$K.tgz" -C "$OUT" "$K" && rm -rf "$OUT/$K"
P="kernel=wgmma_bf16 precision=bf16 layout.b=col shape=[4096,4096,4096]"
timeout 200 python3 .ci/ncu_points.py "$OUT/ncu" "nl1=$P kernel.NOLOAD=1" "nl2=$P kernel.NOLOAD=2" "nl4=$P kernel.NOLOAD=4" "nl5=$P kernel.NOLOAD=5" > "$OUT/ncu.log" 2>&1
echo "ncu exit $?"; tar czf "$OUT/ncu.tgz" -C "$OUT" ncu; rm -rf "$OUT/ncu"; sed -n '/^point | kernel/,$p' "$OUT/ncu.log"
