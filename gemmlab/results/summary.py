"""The summary of a sweep's records: one row per point, saved as ``summary.csv`` and ``summary.md`` and
printed (rich), the best verified point, and the outcome (exit status) the records amount to.

:func:`collect` reads every point's ``result.json`` under the sweep's folder, in any
``hydra.sweep.subdir`` layout (every depth; a sanitizer child's record inside a point is part of that
point), through :mod:`gemmlab.stages.record_model`; :func:`summarize` writes, prints and returns the
:class:`SweepOutcome`: 1 when a point failed (for a search: when no trial was valid), else 0. It reads
files, not in-process state, so it works with any launcher (``gemmlab -m``'s callbacks:
:mod:`gemmlab.cli.sweep`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gemmlab.console import count
from gemmlab.results import table as table_model
from gemmlab.results.report_tables import problem_text, shared_bytes, spills_text
from gemmlab.results.table import Column, Table
from gemmlab.stages.record_model import VALID_STATUSES, Record, find_records, read_record

COLUMNS = ("point", "kernel", "shape", "params", "status", "median_ms", "gflops", "vs_baseline", "max_abs_error",
           "error")


#: what a compiled point reports (mode=compile has no timing): registers per thread, spill stores/loads
#: in bytes, shared memory per block in bytes (static + the launch's dynamic), theoretical occupancy
COMPILE_COLUMNS = ("registers", "spills", "smem_bytes", "occupancy")
#: what only a run (mode=run) fills: left out of a summary whose points were all compiled only
TIMING_COLUMNS = ("median_ms", "gflops", "vs_baseline", "max_abs_error")


def _compile_cells(rec: Record) -> dict[str, str]:
    """The :data:`COMPILE_COLUMNS` cells of ``rec`` (empty where it has no ptxas report), written
    as the report writes them (:func:`gemmlab.results.report_tables.spills_text`,
    :func:`~gemmlab.results.report_tables.shared_bytes`)."""
    smem = shared_bytes(rec)
    return {"registers": "" if rec.registers is None else str(int(rec.registers)), "spills": spills_text(rec),
            "smem_bytes": "" if smem is None else str(int(smem)),
            "occupancy": f"{rec.occupancy:.2f}" if rec.occupancy is not None else ""}


def _row(rec: Record, root: Path) -> dict[str, Any]:
    """One summary row (strings) of the record view ``rec`` found under ``root``."""
    point = Path(rec.path).parent.relative_to(root).as_posix()
    if rec.category == "unreadable":
        return {"point": point, "status": "unreadable", "error": rec.error}
    raw = rec.raw
    ratio = raw.get("ratio_to_baseline") if isinstance(raw.get("ratio_to_baseline"), dict) else None
    config = raw.get("config") if isinstance(raw.get("config"), dict) else {}
    max_abs = ((raw.get("verification") or {}).get("max_abs_error", "")
               if isinstance(raw.get("verification"), dict) else "")
    return {"point": point, "kernel": rec.kernel or "?",
            "shape": rec.shape_text or str(config.get("shape")),  # MxNxK also for a refused point's config
            "precision": rec.precision or "fp32", "layout": (rec.settings or {}).get("layout") or "row/row",
            "problem": problem_text(config), "params": rec.params_text, "status": raw.get("status"),
            "median_ms": f"{rec.median_ms:.5f}" if rec.median_ms is not None else "",
            "gflops": f"{rec.gflops:.1f}" if rec.gflops is not None else "",
            "vs_baseline": (f"{ratio['median_time']:.3f}x {ratio['baseline']}" if ratio else ""),
            "max_abs_error": f"{max_abs:.3g}" if isinstance(max_abs, float) else str(max_abs),
            "error": raw.get("error") or "", "mode": rec.mode or "", **_compile_cells(rec)}


def collect(sweep_dir: Path) -> list[dict[str, Any]]:
    """One row per point's ``result.json`` at any depth below ``sweep_dir`` (natural order: job
    ``2`` before ``10``); a record inside another point's directory (a sanitizer child) is not a
    point, nor is a JSON object that is no gemmlab record (``{}``, another tool's ``result.json``:
    :attr:`~gemmlab.stages.record_model.Record.foreign`)."""
    sweep_dir = Path(sweep_dir)
    records = (read_record(p) for p in find_records([sweep_dir], children=False))
    return [_row(rec, sweep_dir) for rec in records if rec.foreign is None]


#: the columns :func:`columns` adds after ``shape`` when a sweep mixes precisions or layouts
SETTING_COLUMNS = ("precision", "layout")


def columns(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """:data:`COLUMNS`, plus ``precision`` and ``layout`` (A/B) after ``shape`` when any point is
    not fp32 with row-major A and B (a sweep of fp32 row/row points keeps its summary as it was),
    and ``problem`` (:func:`problem_text`) when any point has batches, an epilogue or leading dimensions;
    when any point was compiled only (``mode=compile``), :data:`COMPILE_COLUMNS` before ``error``,
    and when every point was, without :data:`TIMING_COLUMNS` (always empty there)."""
    cols = COLUMNS
    compiled = [r.get("mode") == "compile" for r in rows]
    if any(compiled):
        keep = [c for c in cols if not (all(compiled) and c in TIMING_COLUMNS)]
        i = keep.index("error")
        cols = tuple(keep[:i]) + COMPILE_COLUMNS + tuple(keep[i:])
    i = cols.index("shape") + 1
    if any(r.get("problem") for r in rows):  # batches, an epilogue or leading dimensions (issue 43)
        cols = cols[:i] + ("problem",) + cols[i:]
    if all(r.get("precision", "fp32") == "fp32" and r.get("layout", "row/row") == "row/row" for r in rows):
        return cols
    return cols[:i] + SETTING_COLUMNS + cols[i:]


#: the unit of each summary column that has one (the HTML tooltip; the names say the rest)
UNITS = MappingProxyType({"median_ms": "ms per launch", "gflops": "GFLOP/s", "vs_baseline": "kernel median / baseline median",
                          "registers": "registers per thread", "spills": "bytes per thread (stores/loads)",
                          "smem_bytes": "bytes per block (static + dynamic)", "occupancy": "fraction of the SM's warps"})


def _not_valid(row: dict[str, Any]) -> str | None:
    return None if row.get("status") in VALID_STATUSES else "failed"


def table(rows: list[dict[str, Any]], names: tuple[str, ...] | None = None, title: str = "") -> Table:
    """The summary as a table of the one table model (:mod:`gemmlab.results.table`): the columns
    ``names`` (default :func:`columns`) over the rows' cells (strings; ``""`` where a row has
    none); a point whose status is not valid is red on the terminal."""
    names = columns(rows) if names is None else names
    return Table([Column(c, lambda r, c=c: r.get(c, ""), unit=UNITS.get(c, "")) for c in names], rows, title=title,
                 style=_not_valid, styles=MappingProxyType({"failed": "red"}))


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a GitHub-flavoured Markdown table (:func:`columns`)."""
    return table_model.markdown(table(rows))


#: columns shown on a terminal narrower than the full table, most important first
NARROW_COLUMNS = ("point", "kernel", "shape", "status", "gflops", "error", "median_ms", "params", "vs_baseline")
#: the same order with the settings (after shape) and what a compiled point reports (after gflops)
_NARROW_ORDER = (NARROW_COLUMNS[:3] + SETTING_COLUMNS + NARROW_COLUMNS[3:5] + ("registers", "occupancy")
                 + NARROW_COLUMNS[5:7] + ("spills", "smem_bytes") + NARROW_COLUMNS[7:])


def _fit_columns(rows: list[dict[str, Any]], width: int) -> tuple[tuple[str, ...], int]:
    """The columns that fit one line per point on a ``width``-character terminal (most important
    first, in table order) and the width left for ``error`` (cut with an ellipsis)."""
    def natural(c: str) -> int:
        return max([len(c)] + [len(str(r.get(c, ""))) for r in rows])

    chosen: list[str] = []
    all_columns = columns(rows)
    narrow = tuple(c for c in _NARROW_ORDER if c in all_columns)
    for c in narrow:
        trial = chosen + [c]
        used = sum(natural(x) for x in trial if x != "error") + 3 * len(trial) + 1
        room = width - used
        if c == "error" and room < 8 or c != "error" and room < (24 if "error" in trial else 0):
            continue
        chosen = trial
    used = sum(natural(x) for x in chosen if x != "error") + 3 * len(chosen) + 1
    return tuple(c for c in all_columns if c in chosen), max(width - used, 0)


def save_summary(sweep_dir: Path) -> list[dict[str, Any]]:
    """Collect the records of ``sweep_dir`` and save ``summary.csv`` and ``summary.md`` (every
    column); return the rows. Also after an interrupt (the points that finished so far)."""
    rows = collect(sweep_dir)
    table_model.write_csv(table(rows), Path(sweep_dir) / "summary.csv")
    (Path(sweep_dir) / "summary.md").write_text(markdown(rows))
    return rows


def write_summary(sweep_dir: Path, console=None) -> list[dict[str, Any]]:
    """Collect, save (``summary.csv``, ``summary.md``: every column) and print the summary of
    ``sweep_dir``; return the rows. On a terminal the table fits its width, one line per point
    (fewer columns, long cells cut with an ellipsis); elsewhere (a log file) it is printed whole.

    Args:
        console: a ``rich.console.Console`` to print on (default: stdout).
    """
    from rich.console import Console
    from rich.text import Text

    rows = save_summary(sweep_dir)
    console = console or Console()
    if not console.is_terminal:
        console = Console(file=console.file, width=200)
    wide = console.width >= 200
    shown, error_width = (columns(rows), 60) if wide else _fit_columns(rows, console.width)
    fitted = table(rows, shown, title=f"gemmlab sweep: {sweep_dir}")
    if wide:  # every column, long cells folded (the error at most 60 wide)
        fitted.columns = [replace(c, max_width=60) if c.name == "error" else c for c in fitted.columns]
    else:  # one line per point: cells cut with an ellipsis, the error to the width left
        fitted.columns = [replace(c, no_wrap=True, overflow="ellipsis", max_width=error_width if c.name == "error" else None)
                          for c in fitted.columns]
    console.print(table_model.rich_table(fitted))
    if not wide:
        console.print(Text(f"all columns: {Path(sweep_dir) / 'summary.md'}"), overflow="ellipsis", no_wrap=True)
    return rows


def best_row(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The verified and timed row with the highest GFLOP/s (failed points never qualify)."""
    timed = [r for r in rows if r.get("status") == "ok" and r.get("gflops")]
    return max(timed, key=lambda r: float(r["gflops"])) if timed else None


@dataclass
class SweepOutcome:
    """What a finished sweep amounts to, from its records on disk.

    ``failed``: the points whose status is not valid; ``search``: the sweeper is a search, where
    failed trials are expected (pruned); ``exit_status``: 1 when a grid point failed, when every
    trial of a search failed, or when no record was found; else 0 (:meth:`exit_status_with` adds
    the statuses of points run in this process).
    """

    sweep_dir: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    search: bool = False

    @property
    def failed(self) -> list[str]:
        """The points (relative directories) whose status is not valid."""
        return [r["point"] for r in self.rows if r.get("status") not in VALID_STATUSES]

    @property
    def timed(self) -> int:
        """How many points were verified and timed."""
        return sum(r.get("status") == "ok" for r in self.rows)

    @property
    def exit_status(self) -> int:
        """The multirun's exit status from the records alone (see the class docstring)."""
        return self.exit_status_with(())

    def exit_status_with(self, statuses) -> int:
        """The multirun's exit status, given the exit statuses of the points this process ran
        itself (``statuses``: a point may fail without a record of its own, e.g. one that refused
        to overwrite a result). A search ignores them: failed trials are pruned. A grid exits 1
        when a record says a point failed, else with the highest of ``statuses`` (or 1 when no
        record was found)."""
        if self.search:
            return 1 if not self.rows or len(self.failed) == len(self.rows) else 0
        if not self.rows:
            return max([1, *statuses])
        return 1 if self.failed else max([0, *statuses])


def summarize(sweep_dir: Path, search: bool = False) -> SweepOutcome:
    """Write and print the summary of ``sweep_dir`` (and ``best.txt`` when a point was timed),
    print the counts line, and return the :class:`SweepOutcome`."""
    sweep_dir = Path(sweep_dir)
    outcome = SweepOutcome(sweep_dir, write_summary(sweep_dir), search)
    rows, failed, timed = outcome.rows, outcome.failed, outcome.timed
    best = best_row(rows)
    if best:
        text = (f"best verified point: #{best['point']} {best['kernel']} {best['params']} {best['shape']}: "
                f"{best['gflops']} GFLOP/s ({best['median_ms']} ms)")
        print(text)
        (sweep_dir / "best.txt").write_text(text + "\n")
    if not rows:
        print(f"gemmlab: error: no result.json found under {sweep_dir}", file=sys.stderr)
    elif search:
        if timed == 0 and len(failed) < len(rows):
            print("compile-only search: no trial was timed, so every valid trial scores 0.0 and the "
                  "optimizer's 'best' is only a valid tile set, not a fast one")
        print(f"{count(len(rows), 'trial')}: {timed} verified and timed, {len(rows) - len(failed) - timed} compiled only, "
              f"{len(failed)} pruned as failed trials (invalid parameters or failed checks); "
              f"summary: {sweep_dir / 'summary.md'}"
              + (f", optimizer: {optimizer}" if (optimizer := sweep_dir / "optimization_results.yaml").exists() else ""))
    else:
        print(f"{count(len(rows), 'point')}: {timed} verified and timed, {len(rows) - len(failed) - timed} compiled only, "
              f"{len(failed)} failed; summary: {sweep_dir / 'summary.md'}")
    return outcome
