#!/usr/bin/env bash
# tensor-pipe microbenchmark + phase trace (patch_trace.py then patch_micro.py applied to a copy of the
# checkout under .gpu/<name>, run from there): python3 -m gemmlab in-process, stamps printed in launch 13
set -u
mkdir -p "$OUT/micro"
run() {
  label=$1; shift
  timeout 100 python3 -m gemmlab kernel=wgmma_bf16 precision=bf16 "$@" isolation.process=false \
    timing.mode=graph timing.warmup=2 timing.repeat=5 timing.batch=10 cache.enabled=false hydra.run.dir="$OUT/micro/run-$label" \
    > "$OUT/micro/$label.txt" 2> "$OUT/micro/$label.err"
  echo "$label: exit $? $(grep -c '^TR M' "$OUT/micro/$label.txt") M lines; $(grep -E 'median|error' "$OUT/micro/$label.txt" | head -1 | cut -c1-100)"
}
run rc layout.b=col 'shape=[4096,4096,4096]'
run rr layout.b=row 'shape=[4096,4096,4096]'
run rc8 layout.b=col 'shape=[8192,8192,8192]'
python3 .ci/trace/analyze_micro.py "$OUT/micro" | tee "$OUT/micro-summary.txt"
python3 .ci/trace/analyze.py "$OUT/micro" > "$OUT/trace-summary.txt"; grep -E "^==|^1 \||share" "$OUT/trace-summary.txt"
tar czf "$OUT/micro.tgz" -C "$OUT" micro && rm -rf "$OUT/micro"
