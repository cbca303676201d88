"""Summarise ``TR K`` lines (patch_k.py): per k-tile load latency (stage complete - loads issued),
the consumers' need (wait start) against completion, and the lead (need - issue)."""
import statistics as st
import sys
from pathlib import Path

def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))] if xs else float("nan")

for f in sorted(Path(sys.argv[1]).glob("*.txt")):
    rows = [tuple(int(x) for x in l.split()[2:]) for l in f.read_text().splitlines() if l.startswith("TR K ")]
    rows = [r for r in rows if r[2] and r[3] and r[4]]
    if not rows:
        continue
    lat = [arr - iss for _, _, iss, arr, need in rows]
    lead = [need - iss for _, _, iss, arr, need in rows]
    wait = [max(0, arr - need) for _, _, iss, arr, need in rows]
    print(f"== {f.stem}: {len(rows)} k-tiles (64 per CTA)")
    print(f"load latency (issue -> stage complete), cycles: p10 {q(lat, .1)} med {q(lat, .5)} p90 {q(lat, .9)} max {max(lat)}")
    print(f"lead (issue -> consumer needs it): p10 {q(lead, .1)} med {q(lead, .5)} p90 {q(lead, .9)}")
    print(f"consumer waited on {sum(w > 0 for w in wait) / len(wait):.1%} of k-tiles; wait med (when > 0) "
          f"{st.median([w for w in wait if w > 0]) if any(wait) else 0:.0f}, mean per k-tile {sum(wait) / len(wait):.0f}")
    gaps = [rows[i + 1][2] - rows[i][2] for i in range(len(rows) - 1) if rows[i + 1][0] == rows[i][0]]
    print(f"issue period (consecutive k-tiles): med {q(gaps, .5)} p90 {q(gaps, .9)}")
