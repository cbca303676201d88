"""Issue 41's decode target ("decode (M <= 16) bf16: >= 85% of the DRAM floor for B"): kernel=auto on
the TEST split's decode shapes with M <= 16 (held out: judged, never tuned on), cold L2 (a 2x-L2 read
flush before every sample, one launch a sample), so B comes from DRAM: % of B's DRAM floor (bytes of B /
the device's DRAM peak, the record's ``dram_peak_bytes_per_s``) and % of cuBLAS in the same point.

    python .ci/decode_floor.py OUTDIR [--budget-s S] [--precision bf16,tf32] [--layouts col,row]

Writes OUTDIR/records.jsonl.xz and OUTDIR/summary.json; prints a line a point, then per precision and
layout the geomean and minimum % of the floor and the geomean % of cuBLAS."""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

TIMING = {"mode": "graph", "l2": "cold", "warmup": 5, "repeat": 30, "batch": 1, "floor": True, "flush": "read"}


def main(argv=None) -> int:
    """Run the points in the test split's order of (M, N, K); exit 0 (a failed point is recorded)."""
    from gemmlab.console import OneLineParser
    ap = OneLineParser(prog=".ci/decode_floor.py", description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--budget-s", type=float, default=60)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--layouts", default="col,row")
    args = ap.parse_args(argv)
    from gemmlab.dispatch.shapeset import load_shapeset
    from gemmlab.run.session import Session
    from gemmlab.stages.archive import Member, write_members
    entries = [e for e in load_shapeset().select("test", ["decode"]) if e.shape.M <= 16]
    run = Session().run_point
    out = args.outdir
    out.mkdir(parents=True, exist_ok=True)
    t0, members, rows, stopped = time.monotonic(), [], [], None
    plan = [(e, precision, lb) for e in sorted(entries, key=lambda e: (e.shape.M, e.shape.N, e.shape.K))
            for precision in args.precision.split(",") for lb in args.layouts.split(",")]
    for e, precision, lb in plan:
        if time.monotonic() - t0 > args.budget_s:
            stopped = f"budget: {len(rows)} of {len(plan)} points run"
            break
        s = e.shape
        cfg = {"kernel": {"name": "auto"}, "shape": [s.M, s.N, s.K], "precision": precision,
               "layout": {"a": "row", "b": lb}, "baseline": "cublas", "timing": dict(TIMING),
               "isolation": {"process": True, "timeout_s": 60.0}}
        folder = out / "points" / f"{len(members):04d}"
        try:
            rec = run(cfg, folder)
        except BaseException as exc:  # noqa: BLE001
            rec = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300]}
        shutil.rmtree(folder, ignore_errors=True)
        members.append(Member(f"{precision}-{lb}/{s.M}x{s.N}x{s.K}/result.json", rec))
        t = (rec.get("timing") or {}).get("median_ms")
        b = ((rec.get("baseline") or {}).get("timing") or {}).get("median_ms")
        dram = (rec.get("device") or {}).get("dram_peak_bytes_per_s")
        nbytes = s.N * s.K * (2 if precision in ("bf16", "fp16") else 4)
        rows.append({"shape": f"{s.M}x{s.N}x{s.K}", "precision": precision, "layout_b": lb,
                     "status": rec.get("status"), "chosen": (rec.get("kernel") or {}).get("name"),
                     "params": (rec.get("kernel") or {}).get("params"), "ms": t, "cublas_ms": b,
                     "b_bytes": nbytes, "dram": dram,
                     "floor_pct": 100 * nbytes / dram / (t / 1000) if t and dram else None,
                     "cublas_floor_pct": 100 * nbytes / dram / (b / 1000) if b and dram else None,
                     "pct_cublas": 100 * b / t if t and b else None})
        r = rows[-1]
        print(f"{r['shape']:>16s} {precision} {lb} {r['status']:8s} {r['chosen']} "
              f"{1000 * (t or 0):8.2f} us  cuBLAS {1000 * (b or 0):8.2f} us  "
              f"floor {r['floor_pct'] or 0:5.1f}% (cuBLAS {r['cublas_floor_pct'] or 0:5.1f}%)  "
              f"{r['pct_cublas'] or 0:5.1f}% of cuBLAS", flush=True)
    write_members(members, out / "records.jsonl.xz", source=out.name)
    shutil.rmtree(out / "points", ignore_errors=True)
    (out / "summary.json").write_text(json.dumps({"rows": rows, "stopped": stopped,
                                                  "wall_s": round(time.monotonic() - t0, 1)}, indent=0))
    if stopped:
        print(f"# stopped: {stopped}")
    import math
    for precision in args.precision.split(","):
        for lb in args.layouts.split(","):
            mine = [r for r in rows if r["precision"] == precision and r["layout_b"] == lb and r["status"] == "ok"
                    and r["floor_pct"]]
            rated = [r["pct_cublas"] for r in mine if r["pct_cublas"]]
            if mine:
                g = math.exp(sum(math.log(r["floor_pct"]) for r in mine) / len(mine))
                gc = math.exp(sum(math.log(x) for x in rated) / len(rated)) if rated else float("nan")
                print(f"# {precision} B {lb}: {len(mine)} shapes, geomean {g:.1f}% of the DRAM floor "
                      f"(min {min(r['floor_pct'] for r in mine):.1f}%), {gc:.1f}% of cuBLAS (cold L2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
