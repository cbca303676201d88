"""Summarise ``TR M`` lines (patch_micro.py): the tensor pipe's sustained rate for the main loop's
wgmma groups on one resident stage, against the ideal (MB_REPS = 64 groups x 1024 cycles; warpgroup 0
alone: 64 x 512). Older prints (two or four numbers per line) give their columns only."""
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
    line = (f"== {f.stem}: {len(rows)} warpgroups; x ideal: plain med {st.median(plain):.3f} "
            f"(min {min(plain):.3f}, max {max(plain):.3f}); with a full-barrier try_wait per group med {st.median(waited):.3f}")
    if len(rows[0]) >= 6:
        alone = [r[4] / (IDEAL / 2) for r in rows if r[1] == 0]
        serial = [r[5] / IDEAL for r in rows]
        line += f"; warpgroup 0 alone med {st.median(alone):.3f} (x 512/group); wait_group 0 per group med {st.median(serial):.3f}"
    if len(rows[0]) >= 8:
        cycled = [r[6] / IDEAL for r in rows]
        reloads = [r[7] / IDEAL for r in rows]
        line += (f"; stages cycled med {st.median(cycled):.3f}; with TMA reloads of the other stages med "
                 f"{st.median(reloads):.3f} (min {min(reloads):.3f}, max {max(reloads):.3f})")
    if len(rows[0]) >= 12:
        names = ("A only", "B only", "whole stage every 2nd group", "A and B on alternate groups")
        line += "; reloads " + ", ".join(f"{n} med {st.median([r[8 + i] / IDEAL for r in rows]):.3f}"
                                         for i, n in enumerate(names) if rows[0][8 + i] > 0)  # 0: not built
    print(line)
