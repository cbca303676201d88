"""Print the tc_ladder table of docs/results/tc-ladder-h200.md from a sweep directory's result.json files.

    python3 table.py call4/tc_ladder [link prefix]

% of peak = TFLOP/s over 132 SMs x 4096 (BF16) / 2048 (TF32) dense FLOP per clock at the median SM
clock NVML read during the samples (``timing.median_sm_mhz``); % of cuBLAS = the record's
``ratio_to_baseline.gflops`` (same run, alternating samples)."""
import json
import sys
from pathlib import Path

FLOP_PER_CLOCK_SM = {"bf16": 4096, "tf32": 2048}
CLASSES = ("HGMMA", "HMMA", "LDSM", "LDGSTS", "UTMALDG", "UTMASTG", "UTMAREDG", "LDL", "STL")

root, prefix = Path(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else sys.argv[1])
print("| kernel | precision | A/B | M×N×K | TFLOP/s | cuBLAS TFLOP/s | % of cuBLAS | % of peak (SM MHz) | SASS classes | regs / spill B | err / bound | record |")
print("|---|---|---|---|---:|---:|---:|---|---|---|---:|---|")
for d in sorted(root.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 1 << 30):
    f = d / "result.json"
    if not f.exists():
        continue
    r = json.loads(f.read_text())
    t, c = r["timing"], r["compile"]
    tf = t["gflops"] / 1e3
    mhz = t.get("median_sm_mhz") or 1980.0
    peak = r["device"]["sm_count"] * FLOP_PER_CLOCK_SM[r["precision_detail"]["name"]] * mhz * 1e6 / 1e12
    hist = c["sass"]["histogram"]
    sass = ", ".join(f"{k} {hist[k]}" for k in CLASSES if hist.get(k))
    res = c["resources"]
    v = r["verification"]
    bound = v.get("max_error_over_tolerance")
    print(f"| `{r['kernel']['name']}` | {r['precision_detail']['name']} | {r['layout']['a']}/{r['layout']['b']} | "
          f"{r['shape']['M']}x{r['shape']['N']}x{r['shape']['K']} | {tf:.1f} | {r['baseline']['timing']['gflops'] / 1e3:.1f} | "
          f"{100 * r['ratio_to_baseline']['gflops']:.1f} | {100 * tf / peak:.1f} ({mhz:g}) | {sass} | "
          f"{res['registers']} / {res['spill_store_bytes'] + res['spill_load_bytes']} | "
          f"{'-' if bound is None else format(bound, '.3g')} | [{d.name}]({prefix}/{d.name}/result.json) |")
