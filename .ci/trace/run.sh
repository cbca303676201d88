#!/usr/bin/env bash
# Run gemmlab points on a diagnostic copy of the checkout (kernels patched by patch_trace.py, plus
# patch_k.py for KIND=k or patch_micro.py for KIND=micro) and summarise the stamps the traced launch
# printed. From the copy's root:  OUT=DIR bash .ci/trace/run.sh phase|k|micro
# Every point runs in-process (isolation.process=false: device printf reaches stdout, kept per point).
# KIND=k needs every CTA to compute >= 128 k-tiles (its observer warp waits for k-tiles 0..127).
set -u
KIND=${1:?usage: run.sh phase|k|micro}
mkdir -p "$OUT/$KIND"
run() {  # label, gemmlab overrides...
  label=$1; shift
  timeout 240 python3 -m gemmlab kernel=wgmma_bf16 precision=bf16 "$@" isolation.process=false \
    timing.mode=graph timing.warmup=2 timing.repeat=5 timing.batch=10 cache.enabled=false hydra.run.dir="$OUT/$KIND/run-$label" \
    > "$OUT/$KIND/$label.txt" 2> "$OUT/$KIND/$label.err"
  echo "$label: exit $? $(grep -c '^TR' "$OUT/$KIND/$label.txt") TR lines; $(grep -E 'median|error' "$OUT/$KIND/$label.txt" | head -1 | cut -c1-100)"
}
S4='shape=[4096,4096,4096]'
S8='shape=[8192,8192,8192]'
case "$KIND" in
  phase) run def layout.b=col $S4; run cl2 layout.b=col $S4 kernel.CLUSTER=2; run st3 layout.b=col $S4 kernel.STAGES=3
         run k1024 layout.b=col 'shape=[4096,4096,1024]'; run def8 layout.b=col $S8 ;;
  k)     run def layout.b=col $S4; run cl2 layout.b=col $S4 kernel.CLUSTER=2; run st3 layout.b=col $S4 kernel.STAGES=3
         run rr layout.b=row $S4; run def8 layout.b=col $S8
         python3 .ci/trace/analyze_k.py "$OUT/$KIND" | tee "$OUT/$KIND-k-summary.txt" ;;
  micro) run rc layout.b=col $S4; run rr layout.b=row $S4  # 8192³ gave the same figures to 0.001 (session 10)
         python3 .ci/trace/analyze_micro.py "$OUT/$KIND" | tee "$OUT/$KIND-micro-summary.txt" ;;
  *) echo "run.sh: KIND must be phase, k or micro, got $KIND" >&2; exit 2 ;;
esac
python3 .ci/trace/analyze.py "$OUT/$KIND" > "$OUT/$KIND-summary.txt"
grep -E "^==|^1 \||share" "$OUT/$KIND-summary.txt"
tar czf "$OUT/$KIND.tgz" -C "$OUT" "$KIND" && rm -rf "$OUT/${KIND:?}"
