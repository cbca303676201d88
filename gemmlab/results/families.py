"""Per-family view of shape-suite results: a kernel (usually ``kernel=auto``) against its baseline
(cuBLAS) grouped by the suite's families (:mod:`gemmlab.dispatch.shapes`), with issue 10's targets.

``python -m gemmlab.results.families PATH... [--out DIR] [--suite FILE]`` reads every ``result.json`` under
the paths (run or sweep folders or record archives, copied from anywhere; no GPU needed), prints the per-family table
and the target checks, and with ``--out`` writes ``families.md``, ``families.csv`` and
``families.png`` (% of the baseline's speed per shape, coloured by family).

Speed is the same-run ratio: ``% of baseline = 100 * baseline median / kernel median`` (the
record's ``ratio_to_baseline.median_time`` inverted); a family's figure is the geometric mean over
its valid points. Records without a baseline ratio or of a shape outside the suite are listed as
such. Records are found and read through :mod:`gemmlab.stages.record_model` (the one record model; a
sanitizer child's record is not a point). ``gemmlab-report`` adds this view as a section of its
report (:func:`report_section`: the records of ``kernel=auto`` whose shapes are in the suite).
"""

from __future__ import annotations

import math
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from gemmlab.console import OneLineParser, guard_streams, output_path, run_command, settled_exit, undo_partial_output
from gemmlab.errors import ConfigError
from gemmlab.paths import missing_parents
from gemmlab.results import table as table_model
from gemmlab.results.table import Column, Table
from gemmlab.stages.record_model import Record, find_records, is_child_record, read_record
from gemmlab.dispatch.shapes import TINY_FLOPS_LIMIT, Suite, load_suite

PROG = "python -m gemmlab.results.families"
TARGETS = {"geomean": 90.0, "min": 50.0, "tiny_time_ratio": 1.5, "decode_m16": 80.0}


@dataclass
class Point:
    """One record, reduced to what the family view needs."""

    path: str
    family: str
    shape: tuple[int, int, int] | None
    kernel: str = ""
    params: str = ""
    dispatch: str = ""           # "table" / "rule: <name>" for kernel=auto, else ""
    status: str = ""
    valid: bool = False
    median_ms: float | None = None
    baseline: str = ""
    baseline_ms: float | None = None
    error: str = ""
    precision: str = ""

    @property
    def pct(self) -> float | None:
        """Kernel speed as % of the baseline's (same run), or None."""
        if self.valid and self.median_ms and self.baseline_ms:
            return 100.0 * self.baseline_ms / self.median_ms
        return None

    @property
    def time_ratio(self) -> float | None:
        """Kernel time / baseline time (same run), or None."""
        if self.valid and self.median_ms and self.baseline_ms:
            return self.median_ms / self.baseline_ms
        return None

    @property
    def tiny(self) -> bool:
        return self.shape is not None and math.prod(self.shape) <= TINY_FLOPS_LIMIT

    def shape_text(self) -> str:
        return "x".join(map(str, self.shape)) if self.shape else "?"


def _dispatch_text(rec: Any) -> str:
    d = rec.get("dispatch") if isinstance(rec, dict) else None
    if not isinstance(d, dict):
        return ""
    if d.get("source") == "table":
        return "table" if d.get("match", "exact") == "exact" else f"table ({d.get('match')})"
    rule = str(d.get("rule", ""))
    return "rule: " + rule.split(":", 1)[0] if rule else "rule"


def point_of(rec: Record, suite: Suite) -> Point:
    """Reduce one :class:`gemmlab.stages.record_model.Record` to a :class:`Point` (the baseline's median and
    the ``dispatch`` field are read from the record's JSON, which the record model does not type)."""
    if rec.category == "unreadable":
        return Point(rec.path, "unreadable", None, status="unreadable", error=(rec.error or "")[:120])
    raw = rec.raw if isinstance(rec.raw, dict) else {}
    base = raw.get("baseline") if isinstance(raw.get("baseline"), dict) else {}
    btiming = base.get("timing") if isinstance(base.get("timing"), dict) else {}
    bms = btiming.get("median_ms")
    bms = float(bms) if isinstance(bms, (int, float)) and not isinstance(bms, bool) and math.isfinite(bms) else None
    mnk = rec.shape
    return Point(path=rec.path, family=(suite.family_of(mnk) if mnk else None) or "other", shape=mnk,
                 kernel=rec.kernel or "?", params=rec.params_text, dispatch=_dispatch_text(raw),
                 status=rec.status, valid=rec.is_valid, median_ms=rec.median_ms,
                 baseline=str(base.get("name") or ""), baseline_ms=bms, error=(rec.error or "")[:160],
                 precision=rec.precision or "fp32")


def mixture_notes(points: Sequence[Point]) -> list[str]:
    """What makes the family figures of ``points`` mean less than they say: records of several
    precisions pooled in one family's geomean (the view is meant for one precision's records), and
    records that are not ``kernel=auto``'s (no ``dispatch`` field: the targets are auto's). Empty
    when neither holds."""
    read = [p for p in points if p.status != "unreadable"]
    notes = []
    precisions = sorted({p.precision for p in read if p.precision})
    if len(precisions) > 1:
        notes.append(f"records of {len(precisions)} precisions ({', '.join(precisions)}) are pooled in each "
                     "family's figures; give one precision's records for its verdicts")
    fixed = Counter(p.kernel for p in read if not p.dispatch)
    if fixed:
        notes.append(f"{sum(fixed.values())} of {len(read)} points are not kernel=auto's (no dispatch field: "
                     + ", ".join(f"{k} x{n}" for k, n in fixed.most_common()) + "); the targets are kernel=auto's")
    return notes


def read_point(path: Path, suite: Suite) -> Point:
    """Read one result.json (any schema :func:`gemmlab.stages.record_model.read_record` reads) as a :class:`Point`."""
    return point_of(read_record(path), suite)


def _in_suite_order(points: list[Point], suite: Suite) -> list[Point]:
    order = {s: i for i, s in enumerate(suite.shapes)}
    return sorted(points, key=lambda pt: (order.get(pt.shape, len(order)), pt.shape or (), pt.path))


def collect(paths: Iterable[str | os.PathLike], suite: Suite | None = None) -> list[Point]:
    """Every result.json under ``paths`` (files or folders; a sanitizer child's record left out)
    as points, in suite order. A JSON object that is no gemmlab record (``{}``, another tool's
    ``result.json``) is no point: one notice line on stderr names it.

    Raises:
        ConfigError: field ``paths``: a path that does not exist.
    """
    suite = suite or load_suite()
    try:
        files = find_records(list(paths), children=False)
    except FileNotFoundError as exc:
        raise ConfigError("paths", str(exc)) from None
    records = [read_record(f) for f in files]
    for rec in records:
        if rec.foreign is not None:
            print(f"{PROG}: notice: skipped {rec.path}: not a gemmlab record ({rec.foreign})", file=sys.stderr)
    return _in_suite_order([point_of(rec, suite) for rec in records if rec.foreign is None], suite)


def report_section(records: Sequence[Record], suite: Suite | None = None) -> list[Point]:
    """The points of ``gemmlab-report``'s family section: the records of ``kernel=auto`` (a
    ``dispatch`` field) whose shape is in the suite, a run's own records only (not a sanitizer
    child's), in suite order; empty when there is none (the report then has no such section)."""
    suite = suite or load_suite()
    keep = [r for r in records if isinstance(r.raw, dict) and isinstance(r.raw.get("dispatch"), dict)
            and r.shape is not None and suite.family_of(r.shape) and not is_child_record(Path(r.path))]
    return _in_suite_order([point_of(r, suite) for r in keep], suite)


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


@dataclass
class FamilyRow:
    """Per-family summary (percentages of the baseline's speed)."""

    family: str
    points: int
    valid: int
    geomean_pct: float | None
    min_pct: float | None
    min_shape: str
    max_time_ratio: float | None
    kernels: dict[str, int] = field(default_factory=dict)
    total: bool = False  # the whole suite's row (its min % has no shape, no ratio, no kernels)


def summarize(points: Sequence[Point], suite: Suite | None = None) -> tuple[list[FamilyRow], dict[str, Any]]:
    """Per-family rows (suite order, then ``other``) and the target checks of issue 10.

    Targets: geometric mean over all valid points >= 90% of the baseline; no point below 50%;
    tiny points (M*N*K <= 256^3) take <= 1.5x the baseline's time; decode points with M <= 16 at
    >= 80% each; every point valid.
    """
    suite = suite or load_suite()
    names = list(suite.families) + sorted({p.family for p in points} - set(suite.families))
    rows = []
    for name in names:
        fam = [p for p in points if p.family == name]
        if not fam:
            continue
        pcts = [(p.pct, p.shape_text()) for p in fam if p.pct is not None]
        ratios = [p.time_ratio for p in fam if p.time_ratio is not None]
        kernels: dict[str, int] = {}
        for p in fam:
            kernels[p.kernel] = kernels.get(p.kernel, 0) + 1
        low = min(pcts) if pcts else (None, "")
        rows.append(FamilyRow(name, len(fam), sum(p.valid for p in fam), _geomean([v for v, _ in pcts]),
                              low[0], low[1], max(ratios) if ratios else None, kernels))
    all_pct = [p.pct for p in points if p.pct is not None]
    tiny = [p.time_ratio for p in points if p.tiny and p.time_ratio is not None]
    decode = [p.pct for p in points if p.family == "decode" and p.shape and p.shape[0] <= 16 and p.pct is not None]
    invalid = [p for p in points if not p.valid]
    checks = {
        "points": len(points), "valid": len(points) - len(invalid),
        "geomean_pct": _geomean(all_pct), "min_pct": min(all_pct) if all_pct else None,
        "tiny_max_time_ratio": max(tiny) if tiny else None, "tiny_points": len(tiny),
        "decode_m16_min_pct": min(decode) if decode else None, "decode_m16_geomean_pct": _geomean(decode),
        "no_baseline": sum(1 for p in points if p.valid and p.pct is None),
    }
    # True (met), False (missed) or None (no point to judge it by: no records, or none timed against a
    # baseline, e.g. mode=compile records — reported as "NO DATA", never as a failure)
    checks["verdicts"] = {
        f"every point valid ({checks['valid']}/{len(points)})": (not invalid) if points else None,
        f"geomean >= {TARGETS['geomean']:g}% of baseline": _ge(checks["geomean_pct"], TARGETS["geomean"]),
        f"no point below {TARGETS['min']:g}%": _ge(checks["min_pct"], TARGETS["min"]),
        f"tiny (M*N*K <= 256^3) time <= {TARGETS['tiny_time_ratio']:g}x baseline":
            None if checks["tiny_max_time_ratio"] is None else checks["tiny_max_time_ratio"] <= TARGETS["tiny_time_ratio"],
        f"decode M <= 16 every point >= {TARGETS['decode_m16']:g}%": _ge(checks["decode_m16_min_pct"],
                                                                          TARGETS["decode_m16"]),
    }
    return rows, checks


def _ge(value: float | None, bound: float) -> bool | None:
    return None if value is None else value >= bound


def verdict_word(ok: bool | None) -> str:
    """``PASS``, ``FAIL`` or ``NO DATA`` (no point to judge a target by) for a target verdict."""
    return "NO DATA" if ok is None else "PASS" if ok else "FAIL"


def _f(value: float | None, spec: str = ".1f", unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


@dataclass
class Tables:
    """The family view as tables of the one table model (:mod:`gemmlab.results.table`; shared by
    :func:`markdown` and the report's HTML page): the per-family table (its last row, in bold in
    Markdown, is the whole suite), the target verdicts and notes, and the per-shape table (chosen
    kernel, parameters, table or rule, times, % of the baseline)."""

    families: Table
    verdicts: list[tuple[bool | None, str]]
    notes: list[str]
    points: Table


def _min_text(r: FamilyRow) -> str:
    if r.total:
        return _f(r.min_pct)
    return f"{_f(r.min_pct)} ({r.min_shape})" if r.min_pct is not None else "-"


def _kernels_text(r: FamilyRow) -> str:
    return ", ".join(f"{k} x{n}" for k, n in sorted(r.kernels.items(), key=lambda kv: -kv[1]))


def family_table(rows: Sequence[FamilyRow], checks: dict, base: str) -> Table:
    """The per-family table of :func:`summarize`'s rows and checks, the whole suite's row last
    (% of the baseline ``base``'s speed, geometric mean per family)."""
    total = FamilyRow("all", checks["points"], checks["valid"], checks["geomean_pct"], checks["min_pct"], "", None,
                      total=True)
    pct = "% of the baseline's speed (same run)"
    columns = (Column("family", lambda r: r.family, strong=True),
               Column("points", lambda r: r.points, align="right"), Column("valid", lambda r: r.valid, align="right"),
               Column(f"geomean % of {base}", lambda r: r.geomean_pct, ".1f", pct, missing="-", align="right",
                      strong=True),
               Column("min % (shape)", lambda r: r.min_pct, unit=pct, text=_min_text),
               Column("max time ratio", lambda r: r.max_time_ratio, ".2f", "kernel time / baseline time",
                      missing="-", align="right", text=lambda r: "" if r.total else _f(r.max_time_ratio, ".2f")),
               Column("kernels", text=lambda r: "" if r.total else _kernels_text(r)))
    return Table(columns, [*rows, total], strong=lambda r: r.total, aligned_rules=True)


def point_table(points: Sequence[Point], base: str) -> Table:
    """The per-shape table: family, shape, the chosen kernel and parameters, what chose it (table
    or rule), status, the kernel's and the baseline ``base``'s median times, % of the baseline."""
    columns = (Column("family", lambda p: p.family), Column("shape", text=lambda p: p.shape_text()),
               Column("kernel", lambda p: p.kernel), Column("params", lambda p: p.params),
               Column("chosen by", text=lambda p: p.dispatch or "-"),
               Column("status", text=lambda p: p.status if p.valid else f"{p.status}: {p.error}"),
               Column("ms", lambda p: p.median_ms, ".5f", "ms per launch", missing="-", align="right",
                      sort=lambda p: p.median_ms),
               Column(f"{base} ms", lambda p: p.baseline_ms, ".5f", "ms per launch", missing="-", align="right",
                      sort=lambda p: p.baseline_ms),
               Column(f"% of {base}", lambda p: p.pct, ".1f", "% of the baseline's speed (same run)", missing="-",
                      align="right", sort=lambda p: p.pct))
    return Table(columns, points, aligned_rules=True)


def tables(points: Sequence[Point], rows: Sequence[FamilyRow], checks: dict) -> Tables:
    """The family view (see :class:`Tables`) from :func:`summarize`'s output."""
    base = next((p.baseline for p in points if p.baseline), "baseline")
    notes = [f"tiny: max time ratio {_f(checks['tiny_max_time_ratio'], '.2f')} over {checks['tiny_points']} points; "
             f"decode M <= 16: min {_f(checks['decode_m16_min_pct'])}%, geomean "
             f"{_f(checks['decode_m16_geomean_pct'])}%", *mixture_notes(points)]
    return Tables(families=family_table(rows, checks, base),
                  verdicts=[(ok, text) for text, ok in checks["verdicts"].items()], notes=notes,
                  points=point_table(points, base))


def markdown(points: Sequence[Point], rows: Sequence[FamilyRow], checks: dict) -> str:
    """The per-family table, the target checks and the per-shape table (chosen kernel, why)."""
    t = tables(points, rows, checks)
    out = [table_model.markdown(t.families), "Targets (issue 10):", ""]
    out += [f"- {verdict_word(ok)}: {text}" for ok, text in t.verdicts]
    out += [f"- {n}" for n in t.notes]
    out += ["", table_model.markdown(t.points)]
    return "\n".join(out)


#: families.csv: one row per point
CSV_COLUMNS = (Column("family", lambda p: p.family), Column("shape", lambda p: p.shape_text()),
               Column("kernel", lambda p: p.kernel), Column("params", lambda p: p.params),
               Column("dispatch", lambda p: p.dispatch), Column("status", lambda p: p.status),
               Column("valid", lambda p: p.valid), Column("median_ms", lambda p: p.median_ms, unit="ms"),
               Column("baseline", lambda p: p.baseline), Column("baseline_ms", lambda p: p.baseline_ms, unit="ms"),
               Column("pct_of_baseline", lambda p: p.pct, unit="%"), Column("path", lambda p: p.path),
               Column("error", lambda p: p.error))


def write_csv(points: Sequence[Point], path: Path) -> None:
    """``families.csv``: one row per point (:data:`CSV_COLUMNS`)."""
    table_model.write_csv(Table(CSV_COLUMNS, points), path)


def plot(points: Sequence[Point], path: Path) -> bool:
    """Bar chart: % of the baseline's speed per shape, coloured by family; lines at 100/90/50%.
    Drawn on an Agg canvas of its own, as :mod:`gemmlab.results.report_plots` draws (never pyplot:
    matplotlib's backend and figure list are the caller's). Returns False when there is nothing to plot."""
    pts = [p for p in points if p.pct is not None]
    if not pts:
        return False
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
    families = list(dict.fromkeys(p.family for p in pts))
    colors = {f: colormaps["tab10"](i % 10) for i, f in enumerate(families)}
    fig = Figure(figsize=(max(8.0, 0.28 * len(pts) + 2), 5.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.bar(range(len(pts)), [p.pct for p in pts], color=[colors[p.family] for p in pts])
    for y, style in ((100, "-"), (90, "--"), (50, ":")):
        ax.axhline(y, color="black", linestyle=style, linewidth=0.8)
    ax.set_xticks(range(len(pts)))
    ax.set_xticklabels([p.shape_text() for p in pts], rotation=90, fontsize=7)
    base = next((p.baseline for p in pts if p.baseline), "baseline")
    ax.set_ylabel(f"% of {base} speed (same run)")
    ax.set_title(f"{', '.join(sorted({p.kernel for p in pts})) if len({p.kernel for p in pts}) < 4 else 'kernel'} "
                 f"vs {base} per shape")
    handles = [Rectangle((0, 0), 1, 1, color=colors[f]) for f in families]
    ax.legend(handles, families, fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print the family table and targets; with --out write md/csv/png. Exit 0; 2 on bad input."""
    guard_streams(PROG)
    ap = OneLineParser(prog=PROG, description="Per-family view of shape-suite results: a kernel (usually "
                       "kernel=auto) against its baseline (cuBLAS), grouped by the shape suite's families, with the "
                       "targets. Prints the table and the target checks; with --out also writes families.md, "
                       "families.csv and families.png.")
    ap.add_argument("paths", nargs="+", help="run or sweep folders, record archives (*.jsonl.xz, or a folder inside one), or result.json files")
    ap.add_argument("--out", type=output_path, help="folder for families.md, families.csv, families.png")
    ap.add_argument("--suite", help="shape suite YAML (default: the shipped one)")
    args = ap.parse_args(argv)
    try:
        suite = load_suite(args.suite)
        points = collect(args.paths, suite)
        if not points:
            raise ConfigError("paths", "no result.json under the given paths")
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    names = ("families.md", "families.csv", "families.png")
    out = Path(args.out) if args.out else None
    taken = [out / n for n in names if (out / n).exists()] if out is not None else []
    if taken:  # like gemmlab-report and gemmlab-compare: never overwrite written results (said before the table)
        print(f"{PROG}: error: out: {taken[0]} already exists; choose a new folder", file=sys.stderr)
        return 2
    rows, checks = summarize(points, suite)
    text = markdown(points, rows, checks)
    print("\n".join(text.split("\n\n| family | shape")[0].splitlines()))
    if out is None:
        return 0
    made = 0 if out.exists() else missing_parents(out) + 1  # the folders this command makes
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "families.md").write_text(text)
        write_csv(points, out / "families.csv")
        plotted = plot(points, out / "families.png")
    except BaseException as exc:  # a partial set of files goes (none was there: taken above), so the command works again
        undo_partial_output(exc, out, made, names, f"the partial files in {out} were removed")
        if not isinstance(exc, OSError):
            raise
        # a file in the way, a read-only or full file system: one line, as gemmlab-report
        where = exc.filename if isinstance(exc.filename, str) else out
        reason = f"[Errno {exc.errno}] {exc.strerror}" if exc.errno else str(exc)
        print(f"{PROG}: error: out: cannot create or write {where}: {reason}; give --out a folder that can be "
              "created and written", file=sys.stderr)
        return 2
    print(f"wrote {out / 'families.md'}, {out / 'families.csv'}" + (f", {out / 'families.png'}" if plotted else ""))
    return 0


if __name__ == "__main__":
    with settled_exit():
        sys.exit(run_command(PROG, main))
