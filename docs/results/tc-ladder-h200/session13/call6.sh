#!/usr/bin/env bash
# session 13 call 6: set 34 (EPI=7 vs TAIL=2 at K = 4096 and 6144)
set -u
PYTEST=none SET=34 EVID_BUDGET=170 EVID_LIMIT=190 bash .ci/gpu-call
sed -n '/^case | status/,$p' "$OUT/evidence.log"
