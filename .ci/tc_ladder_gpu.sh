#!/bin/sh
# One device call for issue 9's ladder (run from the repository root; OUT = folder to keep):
# experiment=tc_ladder (as much as fits in LADDER_S seconds; each point writes its record as it
# ends), then the wgmma GPU tests (sanitizer and multi-tile variants), then the ping-pong check.
OUT=${OUT:-/tmp/out}; LADDER_S=${LADDER_S:-112}
timeout "$LADDER_S" python3 -m gemmlab experiment=tc_ladder hydra.sweep.dir=/tmp/ladder isolation.timeout_s=60 \
  > "$OUT/ladder.log" 2>&1
tar czf "$OUT/ladder.tgz" -C /tmp ladder
grep -a "done:\|error" "$OUT/ladder.log" | tail -45
timeout 30 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_wgmma.py -k "sanitizer or variants" > "$OUT/pytest.log" 2>&1
tail -15 "$OUT/pytest.log"
python3 .ci/wgmma_evidence.py /tmp/ev3 --budget 14 --set 3 > "$OUT/ev3.log" 2>&1; tail -4 "$OUT/ev3.log"
