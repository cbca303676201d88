#!/bin/sh
# One device call for branch wgmma2 (run from the repository root; OUT = folder to keep):
# every distinct kernel instance of .ci/wgmma_evidence.py --set 4 compiled in parallel first, then
# SPLIT_K / TAIL correctness, the 4096^3 variants (tail, ping-pong, clusters), 8192^3, the other
# ladder shapes and the split-K shapes, each against cuBLAS in the same process (graph timing).
OUT=${OUT:-/tmp/out}; BUDGET=${BUDGET:-190}
export TC_CACHE_DIR=/tmp/gemmlab-cache
python3 .ci/wgmma_evidence.py /tmp/ev4 --set 4 --budget "$BUDGET" --precompile 14 > "$OUT/ev4.log" 2>&1
tar czf "$OUT/ev4.tgz" -C /tmp ev4
grep -a "precompiled\|TIMEOUT\|SKIP" "$OUT/ev4.log" | tail -5
tail -42 "$OUT/ev4.log" | cut -c1-150
