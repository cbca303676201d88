#!/bin/sh
# Second device call for branch wgmma2: the wgmma GPU tests (SPLIT_K / TAIL suites, sanitizer),
# then experiment=tc_ladder for what is left of the call (each point writes its record as it ends).
OUT=${OUT:-/tmp/out}; TESTS_S=${TESTS_S:-85}; LADDER_S=${LADDER_S:-118}
timeout "$TESTS_S" python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_gpu_wgmma.py > "$OUT/pytest.log" 2>&1
timeout "$LADDER_S" python3 -m gemmlab experiment=tc_ladder hydra.sweep.dir=/tmp/ladder isolation.timeout_s=60 \
  > "$OUT/ladder.log" 2>&1
tar czf "$OUT/ladder.tgz" -C /tmp ladder
grep -a "done:\|error" "$OUT/ladder.log" | tail -42 | cut -c1-160
grep -a "passed\|failed\|FAILED\|ERROR" "$OUT/pytest.log" | tail -12
