#!/usr/bin/env bash
# Issue 8 (float32 CUDA-core ladder), the fp32b branch's one device call; not part of CI. From the
# repository root, through the device tool (carry=[".whl"]):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && \
#     export PYTHONPATH=/tmp/site:$PWD && bash .ci/fp32_final.sh
# 1. `.ci/fp32_final.py time`: sgemm_pipelined's shipped instance and its candidates compiled,
#    verified on the partial-tile suite, timed at 4096^3 (all) and 8192^3 (shipped + the best two)
#    against cuBLAS in the same process, graph timing; new points stop after TIME_BUDGET s.
# 2. Nsight Compute (counters, no PC sampling; --clock-control none) on the verification launch
#    of the shipped instance, of the two best candidates and of cuBLAS at 4096^3: sections
#    SpeedOfLight, SchedulerStats, WarpStateStats plus the stall reasons per issued instruction
#    (smsp__average_warps_issue_stalled_*_per_issue_active.ratio) and shared-memory bank
#    conflicts / wavefronts (l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum,
#    l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum) as explicit metrics, of which
#    those whose base name this ncu's `--query-metrics` does not list are left out rather than
#    failing the run; the WarpStateStats and MemoryWorkloadAnalysis_Tables sections collect the
#    stall ratios and the shared-memory conflicts too, and the raw page (`--page raw`) keeps
#    every collected metric, which the details page of pass 2 did not show.
# Everything lands in $OUT/fp32_final.tgz; best.json, the ncu table and the logs beside it; the
# short tables are printed last. TOTAL (default 140) bounds the whole script.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/fp32-final-out}; mkdir -p "$OUT"
TOTAL=${TOTAL:-140}
TIME_BUDGET=${TIME_BUDGET:-70}
SIZES=${SIZES:-4096,8192}
BASELINE=${BASELINE:-cublas}
NCU=${NCU:-ncu}
start=$SECONDS
w=$(mktemp -d)
left() { echo $((TOTAL - (SECONDS - start))); }
here=$(cd "$(dirname "$0")" && pwd)
py() { python3 "$here/fp32_final.py" "$@"; }

timeout $((TIME_BUDGET + 40)) python3 "$here/fp32_final.py" time "$w/time" --budget "$TIME_BUDGET" \
  --sizes "$SIZES" --baseline "$BASELINE" > "$w/time.log" 2>&1
echo "time: exit $? after $((SECONDS - start)) s"
cp "$w/time/best.json" "$OUT/best.json" 2>/dev/null

# ncu targets: the shipped instance, the best other candidate (by min over both sizes, else by
# 4096^3) and the next best at 4096^3
cand=$(python3 - "$w/time/best.json" <<'EOF'
import json, sys
try:
    b = json.load(open(sys.argv[1]))
except Exception:
    print("m4 b128"); raise SystemExit
first = {t: r for t, r in b["first"].items() if r and t != "shipped"}
order = sorted(first, key=lambda t: -first[t])
if b["best"] != "shipped":
    order = [b["best"]] + [t for t in order if t != b["best"]]
print(" ".join(order[:2]) if order else "m4 b128")
EOF
)
echo "ncu targets: shipped $cand cublas"

if [ "$(left)" -gt 30 ] && command -v "$NCU" > /dev/null; then
  timeout 20 "$NCU" --query-metrics --chip gh100 > "$w/ncu-query.txt" 2>&1
  metrics=$(py metrics "$w/ncu-query.txt")
  echo "ncu metrics: $(echo "$metrics" | tr ',' '\n' | grep -c .) requested beside the sections"
  extra=(); [ -n "$metrics" ] && extra=(--metrics "$metrics")
  timeout $(( $(left) - 10 )) "$NCU" --clock-control none --target-processes all \
    -k "regex:sgemm_pipelined|xmma|sm90_|sm80_|cutlass" -c 6 \
    --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section LaunchStats ${extra[@]+"${extra[@]}"} \
    -f -o "$w/ncu" python3 "$here/fp32_final.py" ncu-target "$w/ncu-points" shipped $cand \
    > "$w/ncu.log" 2>&1
  echo "ncu: exit $? after $((SECONDS - start)) s"
  if [ -f "$w/ncu.ncu-rep" ]; then
    "$NCU" -i "$w/ncu.ncu-rep" --csv --page raw > "$w/ncu_raw.csv" 2> "$w/ncu_import.err"
    "$NCU" -i "$w/ncu.ncu-rep" --csv --page details > "$w/ncu_details.csv" 2>> "$w/ncu_import.err"
    py ncu-table "$w/ncu_raw.csv" --out "$w/ncu_table.txt" > /dev/null 2>> "$w/ncu_import.err"
  fi
else
  echo "ncu: not started ($(left) s left, or no $NCU)"
fi

# the verification points' disassemblies are the timed points' (same instances): left out of the tar
(cd "$w" && tar czf "$OUT/fp32_final.tgz" --exclude='./time/verify/*/kernel.sass' .)
cp "$w/time.log" "$w/ncu.log" "$w/ncu_table.txt" "$w/ncu_raw.csv" "$OUT/" 2>/dev/null
echo "done after $((SECONDS - start)) s; outputs in $OUT"
grep -E "^(NOT OK|BEST|precompiled|# time)" "$w/time.log" | cut -c1-220
tail -n 4 "$w/ncu.log" 2>/dev/null | cut -c1-200
cat "$w/ncu_table.txt" 2>/dev/null | cut -c1-200
sed -n '/^tag | params/,$p' "$w/time.log"
