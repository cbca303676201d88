"""Issue 41's held-out benchmark: kernel=auto (or ``--kernel NAME``) against same-run cuBLAS over a split of the public shape set.

    python .ci/heldout_bench.py OUTDIR [--precision fp32,tf32:col,bf16:col] [--layout-b row|col]
                                [--split test] [--regions decode,odd] [--limit N] [--budget-s S]
                                [--kernel NAME] [--table FILE] [--mode run|compile] [--after-timing host|auto|device]
                                [--no-isolation] [--keep-points] [--precompile N]
    python .ci/heldout_bench.py OUTDIR --merge PART1/records.jsonl.xz,PART2/records.jsonl.xz

For each shape of the split (gemmlab/data/shapeset.yaml through :mod:`gemmlab.dispatch.shapeset`)
and each precision, one point through gemmlab's one point runner (``gemmlab.run.session.Session.run_point``
around ``gemmlab.run.pipeline.run_point``: NaN-filled C, float64 verification, ``kernel=auto``
timed against ``baseline=cublas`` in the same process, graph timing as ``experiment=shapes``:
graph replay only, 10 samples of 10 launches, full float64 check up to M·N·K = 2^32, the after-timing
check on the device at every size: ``--after-timing``), each point in
its own folder. Each point runs in gemmlab's worker process (a CUDA fault or a hang costs only that
point: the watchdog kills it and a fresh worker takes the next); a point that fails in any way is
recorded with its status and the run goes on.

``--l2 cold`` (:data:`TIMING_COLD`) with ``--max-m 16 --regions decode``: issue 41's decode target, B
from DRAM, the table's "% of B's DRAM floor" (B's bytes / the record's DRAM peak over the median).

``--merge``: no point runs; the table and ``OUTDIR/summary.json`` of earlier runs' archives (the
parts of a split that ``--start`` continued), a point run again in a later part replacing the earlier.

``--draw device`` (or ``auto``): each point's inputs drawn and first verified on the GPU
(``inputs.draw``, docs/trust.md): no matrix crosses PCIe (issue 41's host cost; the default ``host``).

``--kernel``: ``auto`` (default), another kernel at its defaults, or a comma list of kernels timed in
turn at every shape and precision (a shape's later points reuse its inputs' draw and float64
products; the table then has a row per kernel).

``--precision``: a comma list; an item ``P:row`` or ``P:col`` fixes B's layout for that item, others
take ``--layout-b`` (default row). Issue 41's six targets in one call:
``--precision fp32,tf32:row,tf32:col,bf16:row,bf16:col,fp16:col``.

Order: the shapes interleave the regions (decode, medium, large, odd; within a region in the order
of sha256 of the shape), and every precision runs a shape before the next shape starts, so a run cut
by ``--limit`` or by the budget still covers every region and precision alike; ``--start N`` skips the
first N shapes of that order (a second call continues from summary.json's ``shapes_done``). ``--budget-s``: no
point starts once the time left is under twice the longest of the last points plus 15 s for the
archive; the shapes not reached are listed in summary.json.

``--precompile N`` (default: the machine's cores, at most 16; 0: off): once the first point has run
(its record gives the GPU's driver version, part of the compile cache's key), every other point's
kernels (kernel=auto's choice, first-use tuning's top candidates, the after-timing device check) are
compiled in N processes into the on-disk compile cache (:mod:`gemmlab.run.precompile`), before any
other point is timed, so each point's compile is a cache hit instead of an NVRTC compile and a
disassembly in its worker (~200 distinct instances for the test split's 1,092 points); no process
holds a CUDA context meanwhile. summary.json's ``precompile`` says how many and how long.

Output: ``OUTDIR/records.jsonl.xz``, gemmlab's record archive (:mod:`gemmlab.stages.archive`, what
``gemmlab-report --archive`` writes: every reader, ``gemmlab-report``, ``gemmlab-compare``,
``python -m gemmlab.results.families``, ``gemmlab-tune build``, reads it as a sweep folder): one member
``<precision>-<layout>/<order>-<M>x<N>x<K>/result.json`` per point, the point's whole record plus a
``heldout`` key (the shape's split, region, family, model, layer, the precision and layout, the
point's wall time and order). It is written as plain JSON lines (``records.jsonl``) while running and
packed at the end, so a run killed before the end still leaves its records. ``OUTDIR/summary.json``
holds the table's numbers; the point folders are removed once archived (``--keep-points`` keeps
them). The last thing printed is the table: per precision and layout, points, geomean % of cuBLAS
(kernel GFLOP/s / cuBLAS GFLOP/s over the verified and timed points), min %, points under 70%,
per-region geomeans, then the worst 10 shapes with the kernel auto chose and why (table entry or
rule). ``--mode compile`` runs the same loop without a GPU (dispatch + compile only; no ratios).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
LAYOUTS = ("row", "col")
REGION_ORDER = ("decode", "medium", "large", "odd")
TIMING = {"mode": "graph", "l2": "warm", "warmup": 5, "repeat": 10, "batch": 10, "floor": True}
#: ``--l2 cold``: a 2x-L2 read flush before every sample (outside the interval), one launch a sample, so
#: B comes from DRAM: issue 41's decode target is a share of B's DRAM floor (summary's ``dram_floor``)
TIMING_COLD = {"mode": "graph", "l2": "cold", "warmup": 5, "repeat": 30, "batch": 1, "floor": True, "flush": "read"}
MAX_FULL = 2 ** 32  # full float64 check up to M*N*K = 2^32 (sampled rows/columns + Freivalds above)
#: where the after-timing verification runs (verify.after_timing): device = on the GPU at every size the
#: device check handles (fp32/tf32/bf16/fp16 plain problems; the rest on the host). The decode shapes are
#: under auto's 2^30 multiply-adds but carry B of up to ~1 GB (2x151936x1536, 1x24000x11000): on the host
#: their check drew, uploaded, read back and multiplied B in float64 a second time (issue 41 throughput).
#: The device path is the one verify.after_timing=auto takes above 2^30 (H100 session 31: 1.5% of a 4096^3
#: point against 13-15% on the host) and refused the exploit corpus 29 of 29 with the check on the device
#: at every size (docs/trust.md). --after-timing auto or host restores the others.
AFTER_TIMING = "device"
FINAL_RESERVE_S = 20.0  # packing the archive (xz -9e: ~1.3 s for 419 records of 13 KB here), the table
POINT_TIMEOUT_S = 300.0  # the watchdog's limit for one point
UNDER = 0.70  # issue 41: no shape under 70% of cuBLAS
#: the throughput target's class (issue 41): shapes under 2^30 FLOP should take <= 0.8 s a point
SMALL_FLOP = 2 ** 30
#: the phases a point's wall splits into (phase_s of its record, in order; "outside": the worker round
#: trip and the record's writing) for summary.json's phase_means_s and the printed line
PHASES = ("validate", "open_device", "compile", "allocate", "correctness", "launch_paths", "timing", "safety_nets",
          "after_timing", "outside")
ARCHIVE = "records.jsonl.xz"
PLAIN = "records.jsonl"


def parse_precisions(text: str, layout_b: str) -> list[tuple[str, str]]:
    """``"fp32,tf32:col"`` -> ``[("fp32", layout_b), ("tf32", "col")]`` (duplicates dropped).

    Raises:
        ValueError: an unknown precision or layout.
    """
    out: list[tuple[str, str]] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        p, _, lb = item.partition(":")
        lb = lb or layout_b
        if p not in PRECISIONS:
            raise ValueError(f"--precision: unknown precision {p!r} (one of {', '.join(PRECISIONS)})")
        if lb not in LAYOUTS:
            raise ValueError(f"--precision: unknown layout {lb!r} in {item!r} (row or col)")
        if (p, lb) not in out:
            out.append((p, lb))
    if not out:
        raise ValueError("--precision: no precision given")
    return out


def parse_auto(text: str) -> dict:
    """``"rank=model,tune=first_use,tune_k=6"`` -> ``{"rank": "model", "tune": "first_use", "tune_k": 6}``:
    kernel=auto's keys as the command line gives them to Hydra (an integer or a decimal number is a
    number, anything else a string), so the config check reads ``tune_k=6`` as 6, not ``'6'``.

    Raises:
        ValueError: an item without ``=``, or a key kernel=auto does not take.
    """
    from gemmlab.dispatch.auto import AUTO_KEYS
    out: dict = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or key.strip() not in AUTO_KEYS[1:]:
            raise ValueError(f"--auto: {item!r} is not key=value with a key of {', '.join(AUTO_KEYS[1:])}")
        value = value.strip()
        for kind in (int, float):
            try:
                value = kind(value)
                break
            except ValueError:
                continue
        out[key.strip()] = value
    return out


def interleave(entries) -> list:
    """The entries in benchmark order: within each region ordered by sha256 of ``MxNxK``, then one
    of each region in turn (decode, medium, large, odd), so any prefix covers every region."""
    def key(e):
        s = e.shape
        return hashlib.sha256(f"{s.M}x{s.N}x{s.K}".encode()).hexdigest()
    groups = [sorted((e for e in entries if e.region == r), key=key) for r in REGION_ORDER]
    groups.append(sorted((e for e in entries if e.region not in REGION_ORDER), key=key))
    out = []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out


def point_config(shape, precision: str, layout_b: str, mode: str, table: str | None, isolation: bool,
                 timeout_s: float, auto: dict | None = None, after_timing: str = AFTER_TIMING,
                 kernel: str = "auto", timing: dict | None = None, draw: str = "host") -> dict:
    """The config of one point (what ``gemmlab experiment=heldout precision=P layout.b=L`` composes,
    with the benchmark's timing and ``verify.after_timing``); ``auto``: more of kernel=auto's keys
    (``rank``, ``tune``, ...; first-use tuning's candidates run with the same verify and timing);
    ``kernel``: another kernel than ``auto`` at its defaults (``table`` and ``auto`` then unused);
    ``timing``: the timing (default :data:`TIMING`; ``--l2 cold``: :data:`TIMING_COLD`); ``draw``:
    ``inputs.draw`` (where the point's inputs are drawn and first verified)."""
    spec = {"name": "auto", "table": table, **(auto or {})} if kernel == "auto" else {"name": kernel}
    return {"kernel": spec, "shape": [shape.M, shape.N, shape.K], "mode": mode,
            "precision": precision, "layout": {"a": "row", "b": layout_b}, "baseline": "cublas",
            "timing": dict(timing or TIMING), "verify": {"max_full": MAX_FULL, "after_timing": after_timing},
            "inputs": {"draw": draw}, "isolation": {"process": isolation, "timeout_s": float(timeout_s)}}


def default_runner(isolation: bool) -> Callable[[dict, Path], dict]:
    """``run(cfg, out_dir) -> record``: gemmlab's one point runner
    (:meth:`gemmlab.run.session.Session.run_point`, as the ``gemmlab`` command's points and
    ``gemmlab-tune sweep`` run): the worker process with its watchdog, or this process when the
    config's ``isolation.process`` is false (``--no-isolation``: :func:`point_config` sets it; each
    point still in a GPU lease scope)."""
    from gemmlab.run.session import Session
    return Session().run_point


def ratio_of(rec: dict) -> float | None:
    """kernel GFLOP/s / cuBLAS GFLOP/s of a verified and timed point, else None."""
    if rec.get("status") != "ok":
        return None
    r = (rec.get("ratio_to_baseline") or {})
    g = r.get("gflops") if isinstance(r, dict) else None
    if g is None and isinstance(r, dict) and r.get("median_time"):
        g = 1.0 / r["median_time"]
    return float(g) if g and g > 0 and math.isfinite(g) else None


def chosen_of(rec: dict) -> str:
    """``kernel P=V ... [table exact|rule]``: what kernel=auto chose and from where; for another kernel
    (``--kernel``) its name and parameters; ``-`` where the record has neither."""
    d = rec.get("dispatch") or {}
    if not d:
        name = ((rec.get("config") or {}).get("kernel") or {}).get("name")
        params = " ".join(f"{k}={v}" for k, v in (rec.get("params") or {}).items())
        return f"{name} {params}".strip() if name else "-"
    params = " ".join(f"{k}={v}" for k, v in (d.get("params") or {}).items())
    src = d.get("source") or "?"
    if src == "table" and d.get("match"):
        src += f" {d['match']}"
    return f"{d.get('chosen') or '-'} {params} [{src}]".replace("  ", " ")


def row_of(rec: dict, meta: dict) -> dict:
    """The summary row of one point: ``rec`` its record, ``meta`` its ``heldout`` key (shape, region,
    model, layer, kernel, precision, layout_b, wall_s); ``floor``: B's bytes / the record's DRAM peak
    over the kernel's median (the decode floor's share), ``ratio``: :func:`ratio_of`."""
    M, N, K = meta["shape"]
    ratio = ratio_of(rec)
    ms = (rec.get("timing") or {}).get("median_ms") if ratio else None
    dram = (rec.get("device") or {}).get("dram_peak_bytes_per_s")
    b_bytes = N * K * (2 if meta["precision"] in ("bf16", "fp16") else 4)  # B's bytes, the decode floor's
    return {"floor": b_bytes / dram / (ms / 1000) if ms and dram else None, "kernel": meta["kernel"],
            "precision": meta["precision"], "layout_b": meta["layout_b"], "shape": f"{M}x{N}x{K}",
            "region": meta["region"], "model": meta["model"], "layer": meta["layer"], "status": rec.get("status"),
            "ratio": ratio, "chosen": chosen_of(rec), "error": (rec.get("error") or "")[:160],
            "wall_s": round(float(meta.get("wall_s") or 0.0), 2)}


def merged_rows(archives: list[Path]) -> list[dict]:
    """The summary rows of the points in ``archives`` (records.jsonl.xz of earlier runs, e.g. the parts
    of a split that ``--start`` continued), in order; a later point of the same kernel, precision, B
    layout and shape replaces an earlier one (a point that a budget cut and the next part ran again).

    Raises:
        gemmlab.stages.archive.ArchiveError: a file is not a readable record archive.
        ValueError: a member has no ``heldout`` key (not a heldout_bench record).
    """
    from gemmlab.stages.archive import read_archive
    rows: dict[tuple, dict] = {}
    for path in archives:
        for member in read_archive(path):
            rec = member.record if isinstance(member.record, dict) else {}
            meta = rec.get("heldout")
            if not isinstance(meta, dict):
                raise ValueError(f"{path}: member {member.path} has no heldout key: not a heldout_bench record")
            row = row_of(rec, meta)
            key = (row["kernel"], row["precision"], row["layout_b"], row["shape"])
            rows.pop(key, None)
            rows[key] = row
    return list(rows.values())


class Bench:
    """Runs the points, appends each record to the plain archive, keeps the summary rows."""

    def __init__(self, out: Path, budget_s: float | None, run: Callable[[dict, Path], dict], keep_points: bool,
                 clock: Callable[[], float] = time.monotonic):
        self.out, self.run, self.keep, self.clock = out, run, keep_points, clock
        self.started = clock()
        self.deadline = self.started + budget_s if budget_s else None
        self.rows: list[dict] = []
        self.not_run: list[str] = []
        self.walls: list[float] = []
        self.phases: list[dict] = []  # per point: where its wall went (phase_means)
        self.plain = out / PLAIN
        self.fh = open(self.plain, "a", encoding="utf-8")

    def time_left(self) -> float:
        return math.inf if self.deadline is None else self.deadline - self.clock()

    def next_fits(self) -> bool:
        """Whether a point may start: the time left covers twice the longest of the last 5 points
        (30 s before any) plus the archive's reserve."""
        if self.deadline is None:
            return True
        guess = 2.0 * max(self.walls[-5:]) if self.walls else 30.0
        return self.time_left() > guess + FINAL_RESERVE_S

    def point(self, order: int, entry, precision: str, layout_b: str, cfg: dict, several: bool = False) -> dict:
        """Run one point (``cfg``), append its record, print its line; ``several``: the run times more
        than one kernel, so the point's folder and archive member start with the kernel's name."""
        s = entry.shape
        kernel = cfg["kernel"]["name"]
        tag = f"{kernel}-{precision}-{layout_b}" if several else f"{precision}-{layout_b}"
        folder = self.out / "points" / tag / f"{order:04d}-{s.M}x{s.N}x{s.K}"
        t0 = self.clock()
        try:
            rec = self.run(cfg, folder)
            if not isinstance(rec, dict):
                raise TypeError(f"run_point returned {type(rec).__name__}, not a record")
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - one point never stops the run (SystemExit included)
            if isinstance(exc, SystemExit) and getattr(exc, "code", None) == 143:
                raise
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
            rec = {"schema": "gemmlab.result/1", "status": "error", "valid": False, "shape": [s.M, s.N, s.K],
                   "precision": precision, "error": f"heldout_bench: the point raised {why}"}
        wall = self.clock() - t0
        self.walls.append(wall)
        rel = folder.relative_to(self.out / "points").as_posix() + "/result.json"
        meta = {"split": entry.split, "region": entry.region, "family": entry.family, "model": entry.model,
                "layer": entry.layer, "also": list(entry.also), "shape": [s.M, s.N, s.K], "kernel": kernel, "precision": precision,
                "layout_b": layout_b, "order": order, "wall_s": round(wall, 3)}
        phases = {k: v for k, v in ((rec.get("phase_s") or {}) if isinstance(rec, dict) else {}).items()
                  if isinstance(v, (int, float))}
        if "run_point" in phases:  # beyond the point's own process time: the worker round trip, the record's
            meta["outside_s"] = round(wall - phases["run_point"], 4)  # writing, this loop's bookkeeping
        self.phases.append({"small": 2 * s.M * s.N * s.K < SMALL_FLOP, "wall": wall, **phases,
                            **({"outside": meta["outside_s"]} if "outside_s" in meta else {})})
        line = {"path": rel, "record": {**rec, "heldout": meta}}
        self.fh.write(json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str) + "\n")
        self.fh.flush()
        if not self.keep:
            shutil.rmtree(folder, ignore_errors=True)
        row = row_of(rec, meta)
        self.rows.append(row)
        ratio = row["ratio"]
        pct = f"{100 * ratio:6.1f}%" if ratio else "     - "
        print(f"[{len(self.rows):4d}] {tag:{30 if several else 9}s} {row['shape']:>20s} {entry.region:6s} {row['status'] or '?':13s} {pct} "
              f"{wall:6.1f}s  {row['chosen']}" + (f"  ({row['error'][:100]})" if row["error"] and not ratio else ""),
              flush=True)
        return rec

    def finish(self) -> Path | None:
        """Pack the plain records into ``records.jsonl.xz``, gemmlab's record archive
        (:mod:`gemmlab.stages.archive`), and remove the plain file."""
        from gemmlab.stages.archive import Member, write_members
        self.fh.close()
        if not self.plain.exists():
            return None
        members = []
        with open(self.plain, encoding="utf-8") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                except ValueError:  # a line cut by a kill: dropped
                    continue
                members.append(Member(entry["path"], entry["record"]))
        if not members:
            return None
        target = self.out / ARCHIVE
        write_members(members, target, source=self.out.name)
        self.plain.unlink()
        if not self.keep:
            shutil.rmtree(self.out / "points", ignore_errors=True)
        return target


def precompile_rest(first: dict, cfgs: list[dict], workers: int | None) -> dict | None:
    """Compile the kernels of ``cfgs`` (the points after the first) into the on-disk compile cache
    (:func:`gemmlab.run.precompile.precompile`, ``workers`` processes), keyed by the driver version
    of ``first``'s record (the first point, run on this machine); None when that record names no
    driver (no GPU opened) or no point is left. A failure of the whole step is reported and the run
    goes on (each point compiles for itself, as without it)."""
    driver = ((first or {}).get("device") or {}).get("driver_version")
    if not driver or not cfgs:
        return None
    from gemmlab.run.precompile import precompile
    started = time.monotonic()
    try:
        done = precompile(cfgs, str(driver), workers)
    except Exception as exc:  # noqa: BLE001 - a broken pool costs the head start, never the run
        done = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300],
                "seconds": round(time.monotonic() - started, 2)}
    print(f"heldout_bench: precompiled {done.get('instances', 0)} kernel builds of {done.get('points', 0)} points in "
          f"{done.get('seconds')} s ({done.get('workers', 0)} processes, driver {driver})"
          + (f"; {done['errors']} failed, first: {done['first_errors'][0]}" if done.get("errors") else "")
          + (f"; not done: {done['error']}" if done.get("error") else ""), flush=True)
    return done


def phase_means(phases: list[dict]) -> dict:
    """Mean seconds a point per phase (:data:`PHASES`, from each record's ``phase_s``), for the points
    under :data:`SMALL_FLOP` (``small``) and the others (``rest``): where a run's wall went."""
    out = {}
    for group, small in (("small", True), ("rest", False)):
        mine = [p for p in phases if p["small"] is small]
        if mine:
            out[group] = {"points": len(mine), "wall": round(sum(p["wall"] for p in mine) / len(mine), 4),
                          **{k: round(sum(p.get(k, 0.0) for p in mine) / len(mine), 4) for k in PHASES}}
    return out


def geomean(values) -> float | None:
    vals = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def summarize(rows: list[dict], combos, kernels=("auto",)) -> list[dict]:
    """Per kernel, precision and layout (``kernels``: those of ``--kernel``; a row without a ``kernel``
    key is ``auto``'s): points, ok, failed, geomean, min, under 70%, per-region geomeans, worst 10."""
    out = []
    for k, p, lb in ((k, p, lb) for k in kernels for p, lb in combos):
        mine = [r for r in rows if r["precision"] == p and r["layout_b"] == lb and r.get("kernel", "auto") == k]
        rated = [r for r in mine if r["ratio"]]
        worst = sorted(rated, key=lambda r: r["ratio"])[:10]
        failed = [r for r in mine if not r["ratio"] and r["status"] not in ("compiled",)]
        out.append({
            **({"kernel": k} if len(kernels) > 1 else {}), "precision": p, "layout": f"row/{lb}", "points": len(mine), "timed": len(rated), "failed": len(failed),
            "geomean_pct": _pct(geomean(r["ratio"] for r in rated)),
            "min_pct": _pct(min((r["ratio"] for r in rated), default=None)),
            "under_70": sum(r["ratio"] < UNDER for r in rated),
            # B's bytes / the DRAM peak over the time: the decode floor's share (meaningful with --l2 cold)
            "dram_floor": {"geomean_pct": _pct(geomean(r.get("floor") for r in rated)),
                           "min_pct": _pct(min((r["floor"] for r in rated if r.get("floor")), default=None))},
            "regions": {g: {"n": sum(r["region"] == g for r in rated),
                            "geomean_pct": _pct(geomean(r["ratio"] for r in rated if r["region"] == g))}
                        for g in REGION_ORDER},
            "worst": [{k: r[k] for k in ("shape", "model", "layer", "region", "chosen")} | {"pct": _pct(r["ratio"])}
                      for r in worst],
            "failures": [{k: r[k] for k in ("shape", "status", "error", "chosen")} for r in failed[:20]],
        })
    return out


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100.0 * x, 1)


def table(summary: list[dict], kernel: str = "auto", floor: bool = False) -> str:
    """The short text table printed last (``kernel``: the kernel timed, named in the worst shapes' header;
    ``floor``: also each row's share of B's DRAM floor, for a ``--l2 cold`` run)."""
    def f(x):
        return "-" if x is None else f"{x:.1f}"
    several = any("kernel" in s for s in summary)
    lines = [("kernel | " if several else "") + "precision | layout | points | timed | failed | geomean % cuBLAS | min % | <70% | "
             + " | ".join(f"{g} (n, geomean %)" for g in REGION_ORDER)]
    for s in summary:
        reg = " | ".join(f"{s['regions'][g]['n']}, {f(s['regions'][g]['geomean_pct'])}" for g in REGION_ORDER)
        lines.append((f"{s['kernel']} | " if several else "") + f"{s['precision']} | {s['layout']} | {s['points']} | {s['timed']} | {s['failed']} | "
                     f"{f(s['geomean_pct'])} | {f(s['min_pct'])} | {s['under_70']} | {reg}")
    if floor:
        lines.append("\n% of B's DRAM floor (B's bytes / the DRAM peak, over the kernel's median; L2 cold): geomean, min")
        lines += [f"  {(s['kernel'] + ' ') if several else ''}{s['precision']} {s['layout']}: "
                  f"{f(s['dram_floor']['geomean_pct'])}, {f(s['dram_floor']['min_pct'])}" for s in summary]
    for s in summary:
        name = s.get("kernel", kernel)
        if s["worst"]:
            lines.append(f"\nworst {len(s['worst'])}, {(name + ' ') if several else ''}{s['precision']} {s['layout']}: "
                         "% of cuBLAS | shape | model layer | "
                         + ("region | kernel=auto's choice [source]" if name == "auto" else f"region | {name} and its parameters"))
            lines += [f"  {w['pct']:6.1f} | {w['shape']} | {w['model']} {w['layer']} | {w['region']} | {w['chosen']}"
                      for w in s["worst"]]
        if s["failures"]:
            lines.append(f"\nnot timed, {(name + ' ') if several else ''}{s['precision']} {s['layout']}: {s['failed']}")
            lines += [f"  {x['shape']} {x['status']}: {x['error'][:140]}" for x in s["failures"][:10]]
    return "\n".join(lines)


def merge(out: Path, archives: list[Path], refuse: Callable[[str], int]) -> int:
    """``--merge``: the summary (:func:`summarize`) and table of the points of ``archives``
    (:func:`merged_rows`), written to ``out/summary.json`` (refused if it exists: nothing measured is
    overwritten); kernels, precisions and layouts in the order they first appear."""
    from gemmlab.stages.archive import ArchiveError
    missing = [str(a) for a in archives if not a.is_file()]
    if not archives or missing:
        return refuse(f"--merge: no such archive: {', '.join(missing) or '(empty list)'}")
    if (out / "summary.json").exists():
        return refuse(f"--merge: {out / 'summary.json'} exists; give a new OUTDIR")
    try:
        rows = merged_rows(archives)
    except (ArchiveError, ValueError) as exc:
        return refuse(f"--merge: {str(exc).splitlines()[0]}")
    kernels = list(dict.fromkeys(r["kernel"] for r in rows)) or ["auto"]
    combos = list(dict.fromkeys((r["precision"], r["layout_b"]) for r in rows))
    summary = summarize(rows, combos, kernels)
    out.mkdir(parents=True, exist_ok=True)
    info = {"merged_from": [a.as_posix() for a in archives], "kernel": ",".join(kernels),
            "combos": [f"{p}:{lb}" for p, lb in combos], "points": len(rows),
            "shapes": len({r["shape"] for r in rows}), "summary": summary}
    (out / "summary.json").write_text(json.dumps(info, indent=1))
    print(f"# {len(rows)} points ({info['shapes']} shapes) from {len(archives)} archive(s); summary: {out / 'summary.json'}")
    print(table(summary, kernels[0]))
    return 0


def main(argv: list[str] | None = None, run: Callable[[dict, Path], dict] | None = None,
         clock: Callable[[], float] = time.monotonic) -> int:
    from gemmlab.console import OneLineParser  # argparse's own errors in one line too (exit 2)
    ap = OneLineParser(prog=".ci/heldout_bench.py", description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--precision", default="fp32", help="comma list, items P or P:row|P:col (default fp32)")
    ap.add_argument("--layout-b", default="row", choices=LAYOUTS, help="B's layout for items without :row/:col")
    ap.add_argument("--split", default="test", help="test (default) | train | all")
    ap.add_argument("--regions", default="", help="comma list of decode, medium, large, odd (default all)")
    ap.add_argument("--limit", type=int, default=None, help="the first N shapes of the benchmark order")
    ap.add_argument("--max-m", type=int, default=None, metavar="M", help="only the shapes with M <= this (e.g. 16: "
                                                                             "issue 41's decode target)")
    ap.add_argument("--l2", default="warm", choices=("warm", "cold"),
                    help="warm (default: TIMING) or cold (TIMING_COLD: B from DRAM; the table adds its DRAM floor share)")
    ap.add_argument("--start", type=int, default=0, metavar="N",
                    help="skip the first N shapes of the benchmark order (continue a run its budget stopped: "
                         "summary.json's shapes_done)")
    ap.add_argument("--budget-s", type=float, default=None, help="start no point after this many seconds (less a margin)")
    ap.add_argument("--kernel", default="auto", help="the kernel timed against cuBLAS (default auto; another at its "
                                                      "defaults, e.g. triton_matmul: issue 46's split figures); a comma "
                                                      "list times each in turn at every shape and precision")
    ap.add_argument("--table", default=None, help="kernel.table for kernel=auto (default: the shipped table)")
    ap.add_argument("--mode", default="run", choices=("run", "compile"))
    ap.add_argument("--auto", default="", help="more kernel=auto keys, comma list k=v (e.g. rank=model,tune=off)")
    ap.add_argument("--after-timing", default=AFTER_TIMING, choices=("host", "auto", "device"),
                    help="verify.after_timing: where the check of what was timed runs (default device: on the GPU at "
                         "every size the device check handles)")
    ap.add_argument("--draw", default="host", choices=("host", "auto", "device"),
                    help="inputs.draw: where each point's inputs are drawn and first verified (default host; device: "
                         "the device check's generator and check, no matrix crosses PCIe: issue 41's host cost)")
    ap.add_argument("--no-isolation", action="store_true", help="run points in this process (no worker, no watchdog)")
    ap.add_argument("--keep-points", action="store_true", help="keep each point's folder under OUTDIR/points")
    ap.add_argument("--precompile", type=int, default=None, metavar="N",
                    help="after the first point, compile the others' kernels in N processes (default: the cores, "
                         "at most 16; 0: off)")
    ap.add_argument("--merge", default=None, metavar="ARCHIVES",
                    help="run nothing: the table and OUTDIR/summary.json of earlier runs' records.jsonl.xz (comma list, "
                         "in order; a later point of the same kernel, precision, layout and shape replaces an earlier one)")
    args = ap.parse_args(argv)

    def refuse(text: str) -> int:  # bad input: one line naming the option, exit 2, nothing run
        print(f"heldout_bench: error: {text}", file=sys.stderr)
        return 2
    if args.merge is not None:  # an empty list is refused there, not taken as "no --merge"
        return merge(args.outdir, [Path(x) for x in args.merge.split(",") if x.strip()], refuse)
    try:
        combos = parse_precisions(args.precision, args.layout_b)
    except ValueError as exc:
        return refuse(str(exc))
    if args.limit is not None and args.limit < 1:
        return refuse("--limit must be >= 1")
    if args.start < 0:
        return refuse("--start must be >= 0")
    if args.max_m is not None and args.max_m < 1:
        return refuse("--max-m must be >= 1")
    timing = TIMING_COLD if args.l2 == "cold" else TIMING
    if args.precompile is not None and args.precompile < 0:
        return refuse("--precompile must be >= 0 (0: off)")
    try:
        auto = parse_auto(args.auto)
    except ValueError as exc:
        return refuse(str(exc))
    kernels = list(dict.fromkeys(k.strip() for k in args.kernel.split(",") if k.strip())) or ["auto"]
    if kernels != ["auto"] and (auto or args.table):
        return refuse(f"--auto and --table are kernel=auto's; --kernel is {args.kernel!r}")
    if any(k != "auto" for k in kernels):  # a misspelt name would make every point invalid: refused before any runs
        from gemmlab.contract.registry import load_registry
        from gemmlab.errors import ConfigError as _ConfigError
        registry = load_registry()
        for k in kernels:
            try:
                if k != "auto":
                    registry.get(k)
            except _ConfigError as exc:
                print(f"heldout_bench: error: --kernel: {exc}", file=sys.stderr)
                return 2
    from gemmlab.dispatch.shapeset import load_shapeset
    from gemmlab.errors import ConfigError
    try:
        shapeset = load_shapeset()
        entries = interleave([e for e in shapeset.select(args.split, [r for r in args.regions.split(",") if r])
                              if args.max_m is None or e.shape.M <= args.max_m])
    except ConfigError as exc:
        print(f"heldout_bench: error: {exc}", file=sys.stderr)
        return 2
    if args.start and args.start >= len(entries):
        return refuse(f"--start {args.start}: the benchmark order has {len(entries)} shapes (0 .. {len(entries) - 1})")
    entries = entries[args.start:]
    if args.limit:
        entries = entries[:args.limit]
    out = args.outdir
    if (out / ARCHIVE).exists() or (out / PLAIN).exists():
        print(f"heldout_bench: error: {out} already holds {ARCHIVE} or {PLAIN}; give a new OUTDIR", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    table_path = str(Path(args.table).resolve()) if args.table else None
    isolation = not args.no_isolation
    bench = Bench(out, args.budget_s, run or default_runner(isolation), args.keep_points, clock)
    print(f"heldout_bench: {len(entries)} shapes of split {args.split!r} x {len(combos)} precision/layout "
          f"({', '.join(f'{p}:{lb}' for p, lb in combos)}) x kernel {', '.join(kernels)}, mode={args.mode}, budget "
          f"{str(args.budget_s) + ' s' if args.budget_s else 'none'}, shape set sha256[{args.split}] {shapeset.split_digest(args.split)[:16]}"
          if args.split in ("train", "test") else f"heldout_bench: {len(entries)} shapes", flush=True)

    def on_term(signum, frame):  # a batch time limit: finish the archive and the table
        raise SystemExit(143)
    previous = signal.signal(signal.SIGTERM, on_term)
    stopped = None
    several = len(kernels) > 1
    # every precision and kernel per shape, in turn (a shape's later points reuse its draw and products)
    plan = [(entry, k, p, lb) for entry in entries for p, lb in combos for k in kernels]
    order = 0
    compiled_ahead = None
    try:
        for entry, k, p, lb in plan:  # order (heldout.order): the point's position in this run, from 0
            if not bench.next_fits():
                stopped = f"budget: {bench.clock() - bench.started:.0f} s spent"
                break
            timeout = min(POINT_TIMEOUT_S, max(30.0, bench.time_left() - FINAL_RESERVE_S))
            cfg = point_config(entry.shape, p, lb, args.mode, table_path, isolation, timeout, auto, args.after_timing, k,
                               timing, args.draw)
            rec = bench.point(order, entry, p, lb, cfg, several)
            order += 1
            # once a point has opened the GPU (its record names the driver, the compile cache's key; a first
            # point refused before that, e.g. a kernel that does not take the precision, hands over to the next)
            if (compiled_ahead is None and args.mode == "run" and args.precompile != 0
                    and ((rec.get("device") or {}).get("driver_version"))):
                compiled_ahead = precompile_rest(rec, [point_config(e.shape, q, b, args.mode, table_path, isolation,
                                                                    POINT_TIMEOUT_S, auto, args.after_timing, kk,
                                                                    timing, args.draw)
                                                       for e, kk, q, b in plan[order:]], args.precompile) or {}
    except (KeyboardInterrupt, SystemExit) as exc:
        stopped = f"interrupted ({type(exc).__name__})"
    finally:
        bench.not_run = [f"{(k + ' ') if several else ''}{p}:{lb} {e.shape.M}x{e.shape.N}x{e.shape.K}"
                         for e, k, p, lb in plan[len(bench.rows):]]
        signal.signal(signal.SIGTERM, previous)
        archive = bench.finish()
    summary = summarize(bench.rows, combos, kernels)
    wall = bench.clock() - bench.started
    info = {"split": args.split, "regions": args.regions or "all", "limit": args.limit, "budget_s": args.budget_s,
            "mode": args.mode, "kernel": ",".join(kernels),
            "table": (table_path or "shipped") if "auto" in kernels else None, "timing": timing, "max_m": args.max_m, "verify_max_full": MAX_FULL,
            "verify_after_timing": args.after_timing, "inputs_draw": args.draw, "precompile": compiled_ahead,
            "combos": [f"{p}:{lb}" for p, lb in combos], "start": args.start, "shapes": len(entries),
            "shapes_done": args.start + len(bench.rows) // (len(combos) * len(kernels)),  # every point run
            "points_planned": len(plan),
            "points_run": len(bench.rows),
            "not_run": bench.not_run, "stopped": stopped, "wall_s": round(wall, 1),
            "mean_point_s": round(sum(bench.walls) / len(bench.walls), 2) if bench.walls else None,
            "phase_means_s": phase_means(bench.phases),
            "archive": archive.name if archive else None, "summary": summary}
    (out / "summary.json").write_text(json.dumps(info, indent=1))
    print(f"\n# {len(bench.rows)} points in {wall:.0f} s (mean {info['mean_point_s']} s a point)"
          + (f"; stopped: {stopped}; {len(bench.not_run)} points not run" if stopped else "")
          + f"; records: {out / ARCHIVE}")
    for group, m in info["phase_means_s"].items():
        print(f"# mean s a point, {group} ({'under' if group == 'small' else 'from'} 2^30 FLOP, {m['points']} points): "
              f"wall {m['wall']:.3f} = " + ", ".join(f"{k} {m[k]:.3f}" for k in PHASES))
    print(table(summary, kernels[0], floor=args.l2 == "cold"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
