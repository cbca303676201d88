#!/bin/sh
# Second device call for branch wgmma2: evidence set 5 (split tiles reduced by load + add + store
# in rank order: correctness, 4096^3 / 8192^3 / 1024^3 with and without TAIL, split-K shapes, all
# against cuBLAS in the same process), then the wgmma GPU tests (SPLIT_K / TAIL suites,
# sanitizer), then the 3 tc_ladder points the last session's call did not reach (mma_tf32 row/col).
OUT=${OUT:-/tmp/out}; EV_S=${EV_S:-80}; TESTS_S=${TESTS_S:-80}; LADDER_S=${LADDER_S:-40}
export TC_CACHE_DIR=/tmp/gemmlab-cache TC_SAMPLED_VERIFY=1
python3 .ci/wgmma_evidence.py /tmp/ev5 --set 5 --budget "$EV_S" --precompile 14 > "$OUT/ev5.log" 2>&1
timeout "$TESTS_S" python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_gpu_wgmma.py > "$OUT/pytest.log" 2>&1
timeout "$LADDER_S" python3 -m gemmlab experiment=tc_ladder hydra.sweeper.params.tc_rung=mma_tf32_rc \
  "hydra.sweeper.params.shape='[4096,4096,1024],[2048,2048,2048],[1024,1024,1024]'" \
  hydra.sweep.dir=/tmp/ladder isolation.timeout_s=30 > "$OUT/ladder.log" 2>&1
tar czf "$OUT/ev5.tgz" -C /tmp ev5 ladder
tail -7 "$OUT/ladder.log" | cut -c1-230
grep -a "passed\|failed\|FAILED\|ERROR" "$OUT/pytest.log" | tail -12 | cut -c1-200
tail -22 "$OUT/ev5.log" | cut -c1-150
