"""Issue 41, item 3: the decode kernels' parameter space measured on train-split decode shapes, to set
their sized() rules from data (the test split stays held out; plugins/decode_bf16.py's DECODE_FILL came
from its H100 run of session 35, docs/results/auto/README.md). On the GPU machine:

    python .ci/decode_sweep.py OUTDIR [--budget-s S] [--shapes MxNxK,...] [--kernels decode_tf32] [--auto]

For each (shape, precision, B layout) of SHAPES x COMBOS: the plugin's own sized() parameters first
(``--auto``: kernel=auto's choice before them), then each other variant of the kernel's grid
(:func:`variants`), one point each through gemmlab's one point runner
(gemmlab.run.session.Session.run_point: NaN fill, float64 verification, graph timing as
.ci/heldout_bench.py, cuBLAS in the same point). Writes OUTDIR/records.jsonl.xz (one member per
point) and OUTDIR/summary.json; prints per problem cuBLAS's median, the sized() choice's, and the best
variant's (% of cuBLAS), last.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: train-split decode shapes (gemmlab/data/shapeset.yaml, split train): none of the test split's
SHAPES = [(1, 4096, 2304), (8, 1024, 1024), (16, 3072, 3072), (1, 7168, 2048), (4, 2304, 9216), (8, 4096, 4096),
          (32, 4096, 2304)]
COMBOS = [("decode_bf16", "bf16", "col"), ("decode_bf16", "bf16", "row"), ("decode_tf32", "tf32", "col"),
          ("decode_tf32", "tf32", "row")]
TIMING = {"mode": "graph", "l2": "warm", "warmup": 5, "repeat": 10, "batch": 10, "floor": True}


def variants(kernel: str, M: int) -> list[dict]:
    """The grid measured per problem: the m16 tiles covering M, KW 4/8/16, U 1/2/4 (decode_tf32: 1/2),
    SPLITS 1/2/4/8, without the points that spill (the kernels' declared ``registers`` restriction)."""
    mts = [1 if M <= 16 else 2 if M <= 32 else 4 if kernel == "decode_bf16" else 2]
    us = (1, 2, 4) if kernel == "decode_bf16" else (1, 2)
    from gemmlab_plugins.decode_bf16 import spill_free
    return [v for v in ({"MT": mt, "KW": kw, "U": u, "SPLITS": s} for mt in mts for kw in (4, 8, 16) for u in us
                        for s in (1, 2, 4, 8)) if spill_free(v, kernel == "decode_tf32")]


def main(argv=None) -> int:
    """Run the sweep; exit 0 (a point that fails is recorded with its status)."""
    from gemmlab.console import OneLineParser
    ap = OneLineParser(prog=".ci/decode_sweep.py", description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--budget-s", type=float, default=400)
    ap.add_argument("--shapes", default="", help="comma list of MxNxK (default: SHAPES)")
    ap.add_argument("--kernels", default=None, help="comma list of decode_bf16, decode_tf32 (default both: COMBOS)")
    ap.add_argument("--auto", action="store_true",
                    help="also time kernel=auto (the rules' choice today) once per problem, as the reference row")
    args = ap.parse_args(argv)
    from gemmlab.contract.hookspecs import Problem, Shape
    from gemmlab.contract.registry import load_registry
    from gemmlab.gpu.device import offline_facts
    from gemmlab.run.session import Session
    from gemmlab.stages.archive import Member, write_members
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s] or SHAPES
    wanted = [k for k in (args.kernels or "").split(",") if k]
    if (args.kernels is not None and not wanted) or set(wanted) - {k for k, _, _ in COMBOS}:
        ap.error(f"--kernels: {args.kernels!r}: allowed decode_bf16, decode_tf32")
    combos = [c for c in COMBOS if not wanted or c[0] in wanted]
    reg, facts = load_registry(), offline_facts("90")
    run = Session().run_point
    out = args.outdir
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    members, rows = [], []
    stopped = None
    for shape in shapes:
        for kernel, precision, lb in combos:
            spec = reg.get(kernel)
            problem = Problem(Shape(*shape), precision, "row", lb)
            sized = spec.sized(problem, facts)
            plan = [("sized", sized)] + [("grid", v) for v in variants(kernel, shape[0]) if v != sized]
            if args.auto:  # what kernel=auto's rules run today for this problem, as the reference
                plan.insert(0, ("auto", {}))
            for tag, p in plan:
                if time.monotonic() - t0 > args.budget_s:
                    stopped = "budget"
                    break
                try:
                    if tag != "auto":
                        spec.check_problem(problem, p, facts)
                except Exception:
                    continue
                name = "auto" if tag == "auto" else kernel
                cfg = {"kernel": {"name": name, **p}, "shape": list(shape), "precision": precision,
                       "layout": {"a": "row", "b": lb}, "baseline": "cublas", "timing": dict(TIMING),
                       "isolation": {"process": True, "timeout_s": 60.0}}
                folder = out / "points" / f"{len(members):05d}"
                try:
                    rec = run(cfg, folder)
                except BaseException as exc:  # noqa: BLE001 - one point never stops the sweep
                    rec = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300]}
                shutil.rmtree(folder, ignore_errors=True)
                members.append(Member(f"{kernel}-{precision}-{lb}/{'x'.join(map(str, shape))}/{len(members):05d}/result.json",
                                      {**rec, "sweep": {"tag": tag, "params": p}}))
                t = (rec.get("timing") or {}).get("median_ms")
                b = ((rec.get("baseline") or {}).get("timing") or {}).get("median_ms")
                if tag == "auto":  # the rules' choice, named
                    p = {"chosen": (rec.get("kernel") or {}).get("name"), **((rec.get("kernel") or {}).get("params") or {})}
                rows.append({"shape": "x".join(map(str, shape)), "kernel": kernel, "precision": precision, "layout_b": lb,
                             "tag": tag, "params": p, "status": rec.get("status"), "ms": t, "cublas_ms": b,
                             "b_bytes": shape[1] * shape[2] * (4 if precision == "tf32" else 2),
                             "dram": (rec.get("device") or {}).get("dram_peak_bytes_per_s")})
            if stopped:
                break
        if stopped:
            break
    write_members(members, out / "records.jsonl.xz", source=out.name)
    shutil.rmtree(out / "points", ignore_errors=True)
    (out / "summary.json").write_text(json.dumps({"rows": rows, "stopped": stopped,
                                                  "wall_s": round(time.monotonic() - t0, 1)}, indent=0))
    print(f"# {len(rows)} points in {time.monotonic() - t0:.0f} s; stopped: {stopped}")
    print("shape | kernel | B | cuBLAS us | sized us (% cuBLAS) params | best us (% cuBLAS) params | best: % of B's DRAM floor"
          + (" | kernel=auto's choice today us (% cuBLAS)" if args.auto else ""))
    keys = []
    for r in rows:
        k = (r["shape"], r["kernel"], r["layout_b"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        mine = [r for r in rows if (r["shape"], r["kernel"], r["layout_b"]) == k and r["status"] == "ok" and r["ms"]
                and r["tag"] != "auto"]
        ref = next((r for r in rows if (r["shape"], r["kernel"], r["layout_b"]) == k and r["tag"] == "auto"), None)
        if not mine:
            print(f"{k[0]} | {k[1]} | {k[2]} | no ok point")
            continue
        cub = sorted(r["cublas_ms"] for r in mine if r["cublas_ms"])
        cub = cub[len(cub) // 2] if cub else None
        sized = next((r for r in mine if r["tag"] == "sized"), None)
        best = min(mine, key=lambda r: r["ms"])
        def f(r):
            if r is None:
                return "-"
            p = " ".join(f"{a}={v}" for a, v in r["params"].items())
            return f"{1000 * r['ms']:.2f} ({100 * cub / r['ms']:.0f}%) {p}" if cub else f"{1000 * r['ms']:.2f} {p}"
        floor = (f"{100 * best['b_bytes'] / best['dram'] / (best['ms'] / 1000):.0f}% of {best['dram'] / 1e12:.2f} TB/s"
                 if best.get("dram") else "-")
        auto = f" | auto: {f(ref)}" if ref and ref.get("ms") else (" | auto: -" if args.auto else "")
        print((f"{k[0]} | {k[1]} | {k[2]} | {1000 * cub:.2f} | {f(sized)} | {f(best)} | {floor}" if cub
               else f"{k[0]} | {k[1]} | {k[2]} | - | {f(sized)} | {f(best)} | {floor}") + auto)
    bad = [r for r in rows if r["status"] != "ok"]
    print(f"# not ok: {len(bad)}" + "".join(f"\n  {r['shape']} {r['kernel']} {r['layout_b']} {r['params']} {r['status']}"
                                          for r in bad[:15]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
