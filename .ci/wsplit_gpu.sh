#!/bin/sh
# One device call for branch wsplit (run from the repository root; OUT = folder to keep): the
# REDUCE=2 gpu tests (pytest, -k reduce) while every instance of .ci/wgmma_evidence.py --set 6 is
# compiled in parallel into the disk cache; then, alone on the GPU, set 6: REDUCE=1 (in-C chain)
# vs REDUCE=2 (workspace slabs + reduce step) on the K-heavy / wide shapes against cuBLAS BF16 in
# the same process (graph timing); the table last (.ci/wsplit_table.py).
OUT=${OUT:-/tmp/out}; EV_S=${EV_S:-105}; PRE_S=${PRE_S:-70}
export TC_CACHE_DIR=/tmp/gemmlab-cache TC_SAMPLED_VERIFY=1
timeout "$PRE_S" python3 -m pytest -q -p no:cacheprovider -n 6 tests/test_gpu_wgmma.py -k "reduce" > "$OUT/pytest.log" 2>&1 &
TP=$!
timeout "$PRE_S" python3 .ci/wgmma_evidence.py /tmp/ev6 --set 6 --precompile 10 --precompile-only > "$OUT/pre.log" 2>&1
wait $TP
python3 .ci/wgmma_evidence.py /tmp/ev6 --set 6 --budget "$EV_S" > "$OUT/ev6.log" 2>&1
tar czf "$OUT/ev6.tgz" -C /tmp ev6
grep -a "passed\|failed\|FAILED\|Error\|error" "$OUT/pytest.log" | tail -14 | cut -c1-220
grep -a "precompiled\|rc=[1-9]" "$OUT/pre.log" | tail -4 | cut -c1-200
python3 .ci/wsplit_table.py /tmp/ev6/summary.json
