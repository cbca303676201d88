#!/usr/bin/env bash
# per-k-tile load timing (patch_trace.py + patch_k.py applied to a copy in this folder's checkout):
# only shapes where every CTA computes >= 128 k-tiles (the observer warp waits for k-tiles 0..127)
set -u
mkdir -p "$OUT/ktrace"
run() {
  label=$1; shift
  timeout 100 python3 -m gemmlab kernel=wgmma_bf16 precision=bf16 "$@" isolation.process=false \
    timing.mode=graph timing.warmup=2 timing.repeat=5 timing.batch=10 cache.enabled=false hydra.run.dir="$OUT/ktrace/run-$label" \
    > "$OUT/ktrace/$label.txt" 2> "$OUT/ktrace/$label.err"
  echo "$label: exit $? $(grep -c '^TR K' "$OUT/ktrace/$label.txt") k lines; $(grep -E 'median|error' "$OUT/ktrace/$label.txt" | head -1 | cut -c1-100)"
}
S4='shape=[4096,4096,4096]'
run def layout.b=col $S4
run cl2 layout.b=col $S4 kernel.CLUSTER=2
run st3 layout.b=col $S4 kernel.STAGES=3
run rr layout.b=row $S4
run def8 layout.b=col 'shape=[8192,8192,8192]'
python3 .ci/trace/analyze_k.py "$OUT/ktrace" | tee "$OUT/ktrace-summary.txt"
python3 .ci/trace/analyze.py "$OUT/ktrace" > "$OUT/trace-summary.txt"
grep -E "^==|^1 \||share" "$OUT/trace-summary.txt"
tar czf "$OUT/ktrace.tgz" -C "$OUT" ktrace && rm -rf "$OUT/ktrace"
