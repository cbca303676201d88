"""Summarise ``TR M`` lines (patch_micro.py): the tensor pipe's sustained rate for the main loop's
wgmma groups on one resident stage, against the ideal (MB_REPS = 64 groups x 1024 cycles)."""
import statistics as st
import sys
from pathlib import Path

IDEAL = 64 * 1024
for f in sorted(Path(sys.argv[1]).glob("*.txt")):
    rows = [tuple(int(x) for x in l.split()[2:]) for l in f.read_text().splitlines() if l.startswith("TR M ")]
    rows = [r for r in rows if r[2] > 0]
    if not rows:
        continue
    plain = [r[2] / IDEAL for r in rows]
    waited = [r[3] / IDEAL for r in rows]
    print(f"== {f.stem}: {len(rows)} warpgroups; x ideal: plain med {st.median(plain):.3f} "
          f"(min {min(plain):.3f}, max {max(plain):.3f}); with a full-barrier try_wait per group med {st.median(waited):.3f}")
