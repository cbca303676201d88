"""Summarise trace v2 (cycles of the CTA's SM clock): per item of the consumer warpgroups: the wait
for its first stage, the main loop against the ideal (1024 cycles per k-tile: 8 m64n256k16 at 128
cycles), the summed full-barrier waits inside it, the epilogue; the producer's summed empty waits."""
import statistics as st
import sys
from pathlib import Path

def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))] if xs else float("nan")

for f in sorted(Path(sys.argv[1]).glob("*.txt")):
    C, P, S = [], [], {}
    for line in f.read_text().splitlines():
        t = line.split()
        if len(t) < 3 or t[0] != "TR":
            continue
        if t[1] == "C":
            C.append(tuple(int(x) for x in t[2:]))
        elif t[1] == "P":
            P.append(tuple(int(x) for x in t[2:]))
        elif t[1] == "S":
            S[int(t[2])] = (int(t[3]), int(t[4]))
    if not C:
        print(f"== {f.stem}: no trace"); continue
    print(f"== {f.stem}: {len(S)} CTAs, {len(C)} consumer items")
    by_item = {}
    for cta, wg, i, kb, ke, rank, a, b, c, e, wsum in C:
        by_item.setdefault(i, []).append((ke - kb, b - a, c - b, e - c, a, e, wsum))
    print("item | n | k-tiles | first wait med | main med/p10/p90 | main/ideal med | full waits in main med | epilogue med/p90 | start med | end med")
    for i, rows in sorted(by_item.items()):
        m = [r[2] for r in rows]; ep = [r[3] for r in rows]
        ratio = [r[2] / (1024 * r[0]) for r in rows if r[0]]
        print(f"{i} | {len(rows)} | {st.median([r[0] for r in rows])} | {st.median([r[1] for r in rows]):.0f} | "
              f"{st.median(m):.0f}/{q(m, .1):.0f}/{q(m, .9):.0f} | {st.median(ratio):.3f} | {st.median([r[6] for r in rows]):.0f} | "
              f"{st.median(ep):.0f}/{q(ep, .9):.0f} | {st.median([r[4] for r in rows]):.0f} | {st.median([r[5] for r in rows]):.0f}")
    ends = {}
    for cta, wg, i, kb, ke, rank, a, b, c, e, wsum in C:
        ends[cta] = max(ends.get(cta, 0), e)
    g0 = min(v[0] for v in S.values()) if S else 0
    starts = [v[0] - g0 for v in S.values()]
    print(f"CTA end (cycles from its start): min {min(ends.values())} med {st.median(ends.values()):.0f} max {max(ends.values())}; "
          f"CTA start skew (globaltimer ns): med {st.median(starts):.0f} max {max(starts)}")
    tot = sum(ends[cta] for cta, wg, *_ in C if True) / max(1, len(C)) * 0 + sum(ends.values()) * 2
    share = lambda k: sum(k(r) for r in C) / tot
    print(f"share of consumer time: main loops {share(lambda r: r[8] - r[7]):.3f} (of which full waits {share(lambda r: r[10]):.3f}), "
          f"first waits {share(lambda r: r[7] - r[6]):.3f}, epilogues {share(lambda r: r[9] - r[8]):.3f}; "
          f"ideal k-tile time {sum((r[4] - r[3]) * 1024 for r in C) / tot:.3f}")
    pw = [w for _, i, ps, w in P if ps or w]
    print(f"producer summed empty waits per item: med {st.median(pw) if pw else 0:.0f} p90 {q(pw, .9):.0f}")
