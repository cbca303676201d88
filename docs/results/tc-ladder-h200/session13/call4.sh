#!/usr/bin/env bash
# session 13 call 4: set 32's 4096^3 group again, then experiment=tc_ladder (the shipped defaults, EPI=7) + report
set -u
export PYTHONUNBUFFERED=1 TC_CACHE_DIR=$(mktemp -d)
timeout 150 python3 .ci/wgmma_evidence.py "$OUT/evidence" --set 32 --only b4096 --precompile 8 --budget 130 > "$OUT/evidence.log" 2>&1
echo "set 32 b4096: exit $?"
tar czf "$OUT/evidence-records.tgz" -C "$OUT" evidence && rm -rf "$OUT/evidence"
PYTEST=none LADDER=1 LADDER_S=330 bash .ci/gpu-call
tail -4 "$OUT/tc_ladder.log"; tail -3 "$OUT/tc-report.log"; sed -n '/^case | status/,$p' "$OUT/evidence.log"
