#!/usr/bin/env bash
set -u
mkdir -p "$OUT/trace"
run() {
  label=$1; shift
  timeout 100 python3 -m gemmlab kernel=wgmma_bf16 precision=bf16 "$@" isolation.process=false \
    timing.mode=graph timing.warmup=2 timing.repeat=5 timing.batch=10 cache.enabled=false hydra.run.dir="$OUT/trace/run-$label" \
    > "$OUT/trace/$label.txt" 2> "$OUT/trace/$label.err"
  echo "$label: exit $? $(grep -c '^TR' "$OUT/trace/$label.txt") lines; $(grep -E 'median|error' "$OUT/trace/$label.txt" | head -1 | cut -c1-110)"
}
S4='shape=[4096,4096,4096]'
run def layout.b=col $S4
run k64 layout.b=col $S4 kernel.KB=64 kernel.STAGES=8
run k64s7 layout.b=col $S4 kernel.KB=64 kernel.STAGES=7
python3 trace_analyze.py "$OUT/trace" > "$OUT/trace-summary.txt"
grep -E "^==|^1 \||^2 \||share" "$OUT/trace-summary.txt"
tar czf "$OUT/trace.tgz" -C "$OUT" trace && rm -rf "$OUT/trace"
