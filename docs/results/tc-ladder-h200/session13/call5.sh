#!/usr/bin/env bash
# session 13 call 5: set 33 (the default EPI=7 vs auto's TAIL=2 at >= 8 waves of 128x256 tiles)
set -u
PYTEST=none SET=33 EVID_BUDGET=190 EVID_LIMIT=210 bash .ci/gpu-call
sed -n '/^case | status/,$p' "$OUT/evidence.log"
