#!/usr/bin/env bash
# session 13 call 7: every gpu test at the session's last code, then the README's main job
set -u
PYTEST=all PYTEST_LIMIT=160 ISOLATION_LIMIT=60 bash .ci/gpu-call
w=$(mktemp -d); root=$PWD; cd "$w" && PYTHONPATH="$root:${PYTHONPATH:-}" timeout 90 python3 -m gemmlab experiment=seed_lab > "$OUT/seed_lab.log" 2>&1
echo "seed_lab: exit $?"; tail -12 "$OUT/seed_lab.log"
