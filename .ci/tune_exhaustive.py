"""Issue 41's first-use tuning target: kernel=auto's first-use tuning against an exhaustive search of
the candidates the plugins offer, on held-out shapes. On the GPU machine:

    python .ci/tune_exhaustive.py OUTDIR [--precision bf16:col] [--shapes MxNxK,...] [--count 10]
                                  [--budget-s S] [--draw host|auto|device]

For each shape (default: the first ``--count`` shapes of the test split's benchmark order, decode
and medium regions, whose C is at most 64 MiB: the exhaustive point holds one C per candidate), three
points through gemmlab's one point runner (:class:`gemmlab.run.session.Session`, each in its worker):

1. ``default``: ``kernel=auto kernel.rank=model kernel.tune=first_use`` at the shipped ``tune_k`` and
   ``tune_budget_s``, with an empty tuning cache (its own folder): the candidate it chooses, its
   median, the tuning's seconds against its budget;
2. ``again``: the same config and cache: the point must take the cache's entry (``path: cache``);
3. ``exhaustive``: the same with ``tune_k`` = every candidate (:data:`EXHAUSTIVE_K`: the ranking's whole
   list, every candidate :func:`gemmlab.dispatch.candidates.enumerate` gives for the problem, at most
   ``CANDIDATE_LIMIT`` = 48 per kernel as for kernel=auto; 240-480 per problem) and a budget of :data:`EXHAUSTIVE_BUDGET_S`, another
   empty cache: every candidate compiled, verified, timed and verified again after timing in one
   point, on the same inputs (the kernels' NVRTC instances compiled first in parallel processes,
   :func:`gemmlab.run.precompile.precompile`).

The figure (target: within 3%): the exhaustive point's fastest verified median / its median of the
candidate the default point chose (both from the same point: the same inputs, clocks, L2 state).
Also printed: the default point's own median of its choice, how many candidates the exhaustive point
timed, and whether the tuning kept its budget. Writes OUTDIR/records.jsonl.xz (every record) and
OUTDIR/summary.json; the table last.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: kernel.tune_k of the exhaustive point: more than any problem's candidate count (FIELD_RULES' limit)
EXHAUSTIVE_K = 1024
EXHAUSTIVE_BUDGET_S = 1800.0
#: the heldout benchmark's timing (.ci/heldout_bench.py TIMING)
TIMING = {"mode": "graph", "l2": "warm", "warmup": 5, "repeat": 10, "batch": 10, "floor": True}
WITHIN = 0.03  # issue 41: within 3% of the exhaustive search's best


def point_config(shape, precision: str, layout_b: str, cache: Path, draw: str, k: int | None = None,
                 budget_s: float | None = None) -> dict:
    """One kernel=auto point with first-use tuning into ``cache`` (``k``/``budget_s``: None keeps the
    shipped ``tune_k``/``tune_budget_s``)."""
    kernel: dict[str, Any] = {"name": "auto", "rank": "model", "tune": "first_use", "tune_cache": str(cache)}
    if k is not None:
        kernel["tune_k"] = k
    if budget_s is not None:
        kernel["tune_budget_s"] = budget_s
    return {"kernel": kernel, "shape": list(shape), "mode": "run", "precision": precision,
            "layout": {"a": "row", "b": layout_b}, "timing": dict(TIMING), "inputs": {"draw": draw},
            "isolation": {"process": True, "timeout_s": 2400.0}}


def tried_of(rec: Mapping[str, Any]) -> list[dict]:
    """The first-use candidates a record timed (``dispatch.tuning.tried``), or []."""
    return list(((rec.get("dispatch") or {}).get("tuning") or {}).get("tried") or [])


def compare(default: Mapping[str, Any], again: Mapping[str, Any], exhaustive: Mapping[str, Any]) -> dict:
    """The shape's row: what the default point chose and measured, whether the second run took the
    cache, and the exhaustive point's fastest verified candidate against its own median of the
    default's choice (``ratio`` = best / that: 1 when the default chose the best; ``within`` the
    target). Keys with None where a point failed or the choice was not timed there."""
    d = default.get("dispatch") or {}
    t = d.get("tuning") or {}
    chosen = d.get("chosen"), dict(d.get("params") or {})
    good = [x for x in tried_of(exhaustive) if x.get("status") == "ok" and x.get("verified")
            and isinstance(x.get("median_ms"), (int, float)) and x["median_ms"] > 0]
    best = min(good, key=lambda x: x["median_ms"]) if good else None
    mine = next((x for x in good if (x.get("kernel"), dict(x.get("params") or {})) == chosen), None)
    ratio = best["median_ms"] / mine["median_ms"] if best and mine else None
    again_d = again.get("dispatch") or {}
    return {
        "default_status": default.get("status"), "default_path": d.get("path"),
        "default_choice": f"{chosen[0]} " + " ".join(f"{a}={v}" for a, v in chosen[1].items()) if chosen[0] else None,
        "default_ms": d.get("measured_ms"), "default_tried": len(tried_of(default)),
        "tuning_s": t.get("elapsed_s"), "budget_s": t.get("budget_s"), "stopped_by": t.get("stopped_by"),
        "kept_budget": (t.get("elapsed_s") is not None and t.get("budget_s") is not None
                        and t["elapsed_s"] <= t["budget_s"]),
        "again_status": again.get("status"), "again_cache_hit": again_d.get("path") == "cache",
        "again_same_choice": (again_d.get("chosen"), dict(again_d.get("params") or {})) == chosen,
        "exhaustive_status": exhaustive.get("status"), "exhaustive_candidates": len(tried_of(exhaustive)),
        "exhaustive_timed": len(good),
        "exhaustive_not_reached": sum(x.get("status") == "not_reached" for x in tried_of(exhaustive)),
        "best": best and {"name": best.get("name"), "median_ms": best["median_ms"]},
        "choice_in_exhaustive_ms": mine["median_ms"] if mine else None,
        "ratio": ratio, "within": ratio is not None and ratio >= 1 - WITHIN}


def precompile_candidates(shape, precision: str, layout_b: str, driver: str) -> dict:
    """Every candidate's NVRTC instance for the problem compiled into the on-disk cache in parallel
    processes (the exhaustive point then finds each there)."""
    from gemmlab.contract.hookspecs import Problem, Shape
    from gemmlab.contract.registry import load_registry
    from gemmlab.dispatch import candidates as cands
    from gemmlab.gpu.device import offline_facts
    from gemmlab.run.precompile import precompile
    problem = Problem(Shape(*shape), precision, "row", layout_b)
    found = cands.enumerate(load_registry(), problem, offline_facts("90"))  # kernel=auto's candidates
    cfgs = [{"kernel": {"name": c.kernel, **c.params}, "shape": list(shape), "mode": "run", "precision": precision,
             "layout": {"a": "row", "b": layout_b}, "verify": {"after_timing": "host"}} for c in found]
    return precompile(cfgs, driver)


#: the default shapes' largest C (float32 bytes): the exhaustive point holds one C per candidate (up to
#: ~480), so 64 MiB a C is at most ~30 GB
MAX_C_BYTES = 64 << 20


def default_shapes(precision: str, layout_b: str, count: int) -> list[tuple[int, int, int]]:
    """The first ``count`` decode and medium shapes of the test split in the heldout benchmark's order
    whose float32 C is at most :data:`MAX_C_BYTES` (e.g. 1024x128256's 501 MB C, once per candidate,
    would not fit the GPU)."""
    import importlib.util
    from gemmlab.dispatch.shapeset import load_shapeset
    spec = importlib.util.spec_from_file_location("gemmlab_heldout_bench", ROOT / ".ci" / "heldout_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    order = bench.interleave(load_shapeset().select("test", ["decode", "medium"]))
    return [(e.shape.M, e.shape.N, e.shape.K) for e in order
            if 4 * e.shape.M * e.shape.N <= MAX_C_BYTES][:count]


def main(argv: list[str] | None = None, run: Callable[[dict, Path], dict] | None = None,
         compile_ahead: Callable[..., dict] | None = None) -> int:
    """Run the comparison (module docstring); exit 0 (a point that fails is recorded with its status)."""
    from gemmlab.console import OneLineParser
    ap = OneLineParser(prog=".ci/tune_exhaustive.py", description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--precision", default="bf16:col", help="P:row or P:col, B's layout (a bare P: B row, as "
                                                              ".ci/heldout_bench.py; default bf16:col)")
    ap.add_argument("--shapes", default="", help="comma list of MxNxK (default: the test split's first --count "
                                                 "decode and medium shapes)")
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=None, help="start no shape after this many seconds")
    ap.add_argument("--draw", default="host", choices=("host", "auto", "device"), help="inputs.draw of every point")
    args = ap.parse_args(argv)
    precision, _, layout_b = args.precision.partition(":")
    layout_b = layout_b or "row"
    if precision not in ("fp32", "tf32", "bf16", "fp16") or layout_b not in ("row", "col"):
        ap.error(f"--precision: {args.precision!r}: one of fp32, tf32, bf16, fp16 with :row or :col")
    if args.count < 1:
        ap.error("--count: must be >= 1")
    try:
        shapes = ([tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s]
                  or default_shapes(precision, layout_b, args.count))
    except ValueError:
        ap.error(f"--shapes: {args.shapes!r}: a comma list of MxNxK")
    if any(len(s) != 3 or min(s) < 1 for s in shapes):
        ap.error(f"--shapes: {args.shapes!r}: a comma list of MxNxK, each a positive integer")
    out = args.outdir
    if (out / "records.jsonl.xz").exists():
        ap.error(f"{out} already holds records.jsonl.xz; give a new OUTDIR")
    out.mkdir(parents=True, exist_ok=True)
    if run is None:
        from gemmlab.run.session import Session
        run = Session().run_point
    compile_ahead = compile_ahead or precompile_candidates
    from gemmlab.stages.archive import Member, write_members
    started = time.monotonic()
    members, rows, stopped = [], [], None
    for i, shape in enumerate(shapes):
        if args.budget_s is not None and time.monotonic() - started > args.budget_s:
            stopped = f"budget: {len(shapes) - i} shape(s) not run"
            break
        tag = "x".join(map(str, shape))
        recs = {}
        for kind, cfg in (("default", point_config(shape, precision, layout_b, out / "cache" / tag / "default", args.draw)),
                          ("again", point_config(shape, precision, layout_b, out / "cache" / tag / "default", args.draw)),
                          ("exhaustive", point_config(shape, precision, layout_b, out / "cache" / tag / "exhaustive",
                                                      args.draw, EXHAUSTIVE_K, EXHAUSTIVE_BUDGET_S))):
            if kind == "exhaustive":
                driver = ((recs["default"].get("device") or {}).get("driver_version"))
                ahead = compile_ahead(shape, precision, layout_b, driver) if driver else None
            folder = out / "points" / tag / kind
            t0 = time.monotonic()
            try:
                rec = run(cfg, folder)
            except BaseException as exc:  # noqa: BLE001 - one point never stops the run
                if isinstance(exc, KeyboardInterrupt):
                    raise
                rec = {"status": "error", "error": f"tune_exhaustive: the point raised {type(exc).__name__}: {exc}"[:400]}
            rec = {**rec, "tune_exhaustive": {"shape": list(shape), "kind": kind, "wall_s": round(time.monotonic() - t0, 2),
                                              **({"precompile": ahead} if kind == "exhaustive" else {})}}
            recs[kind] = rec
            members.append(Member(f"{tag}/{kind}/result.json", rec))
            shutil.rmtree(folder, ignore_errors=True)
            if rec.get("status") == "no_gpu":  # nothing else can run either
                stopped = f"no GPU: {str(rec.get('error') or '').splitlines()[0][:160]}"
                break
        if stopped:
            print(f"tune_exhaustive: {stopped}", file=sys.stderr)
            break
        row = {"shape": tag, **compare(recs["default"], recs["again"], recs["exhaustive"])}
        rows.append(row)
        r = "-" if row["ratio"] is None else f"{row['ratio']:.4f}"
        print(f"{tag}: default {row['default_choice']} ({row['default_path']}, {row['tuning_s']} s of {row['budget_s']}); "
              f"exhaustive {row['exhaustive_timed']}/{row['exhaustive_candidates']} timed, best "
              f"{(row['best'] or {}).get('name')}; best/choice {r}; "
              f"second run cache hit {row['again_cache_hit']}", flush=True)
    if members:
        write_members(members, out / "records.jsonl.xz", source=out.name)
    shutil.rmtree(out / "points", ignore_errors=True)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    summary = {"precision": precision, "layout_b": layout_b, "draw": args.draw, "shapes": [r["shape"] for r in rows],
               "stopped": stopped, "within_target": WITHIN, "rows": rows,
               "within": sum(bool(r["within"]) for r in rows), "compared": len(ratios),
               "geomean_ratio": statistics.geometric_mean(ratios) if ratios else None,
               "min_ratio": min(ratios) if ratios else None,
               "cache_hits": sum(bool(r["again_cache_hit"]) for r in rows),
               "kept_budget": sum(bool(r["kept_budget"]) for r in rows),
               "wall_s": round(time.monotonic() - started, 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print(f"\n# {len(rows)} shapes, {precision} B {layout_b}, inputs.draw={args.draw}"
          + (f"; stopped: {stopped}" if stopped else ""))
    print("shape | default choice | tuning s / budget | exhaustive timed | exhaustive best (ms) | choice there (ms) | "
          "best/choice | within 3% | 2nd run: cache")
    for r in rows:
        b = r["best"] or {}
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.4f}"
        print(f"{r['shape']} | {r['default_choice']} | {r['tuning_s']} / {r['budget_s']} | {r['exhaustive_timed']}/"
              f"{r['exhaustive_candidates']} | {b.get('name')} ({b.get('median_ms')}) | {r['choice_in_exhaustive_ms']} | "
              f"{ratio} | {r['within']} | {r['again_cache_hit']}")
    g = "-" if summary["geomean_ratio"] is None else f"{summary['geomean_ratio']:.4f}"
    print(f"within 3%: {summary['within']} of {len(rows)}; geomean best/choice {g}; "
          f"second run took the cache: {summary['cache_hits']} of {len(rows)}; kept the budget: "
          f"{summary['kept_budget']} of {len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
