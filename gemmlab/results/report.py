"""``gemmlab-report``: one table and four plots from any number of gemmlab results.

``gemmlab-report PATH... [--out DIR]`` collects every ``result.json`` under the given run or
sweep directories (any mix, nested at any depth; a JSON file named directly is read too, whatever
its name) and writes, into a new directory (never an existing one):

- ``report.csv`` and ``report.md``: one row per record, failed points included with their status
  and error; ``report.md`` also counts the records (valid timed, compiled only, failed, other,
  unreadable), lists unreadable files with the reason and every field it could not read; for
  ``mode=compile`` points the tables (the terminal's too) show what compile mode measures:
  registers, spills, local and shared memory, occupancy, waves, SASS classes and histogram
  (:data:`gemmlab.results.report_tables.COMPILE_COLUMNS`), without the timing columns when every
  point was compiled only;
- ``gflops_vs_size.png``: GFLOP/s against (M·N·K)^(1/3), one series per kernel and parameters;
- ``ratio_to_baseline.png``: kernel GFLOP/s / baseline GFLOP/s against size (only if recorded);
- ``roofline.png``: arithmetic intensity against GFLOP/s with each device's roofline
  min(FP32 peak, AI × DRAM bandwidth);
- ``timing_distribution.png``: a box plot of each point's raw samples divided by its median;
- for the records of ``kernel=auto`` whose shapes are in the shape suite (``experiment=shapes``),
  a family section in ``report.md`` and ``report.html`` (:mod:`gemmlab.results.families`: % of the
  baseline per family, issue 10's targets, the chosen kernel per shape) and ``families.png``;
- ``report.html``: one self-contained page (no network, no script or style from elsewhere): the
  counts, the results table (click a column header to sort), the plots embedded as PNG data, and
  the failed points with their status and error.

``gemmlab-report --archive OUT.jsonl.xz SWEEP`` writes no report: it packs every record file under
the folder ``SWEEP`` into one new xz-compressed JSON-lines archive
(:func:`gemmlab.stages.record_model.write_archive`, format :mod:`gemmlab.stages.archive`). An
archive, or a folder inside one (``OUT.jsonl.xz/auto``), is read wherever a folder is: by this
command, ``gemmlab-compare``, ``python -m gemmlab.results.families`` and ``gemmlab-tune build``.

Only files are read: it works without a GPU, on results copied from another machine. Records
of another schema than ``gemmlab.result/1`` (or none) are read best-effort; every field that
cannot be read is named in ``report.md`` rather than raising. A JSON object that is no gemmlab
record at all (``{}``, another tool's ``result.json`` in the tree) is skipped with a one-line
notice on stderr naming it, and counted nowhere. A file that cannot be read as JSON, and an entry
named ``result.json`` that is no file (a folder, a link to nowhere, a fifo), is a row of category
``unreadable`` with its reason (:func:`gemmlab.stages.record_model.read_record`), named in a notice
on stderr as ``gemmlab-compare`` names it.

This module owns the command line and :func:`write_report`; records are found and read by
:mod:`gemmlab.stages.record_model` (a report lists every record file, a sanitizer child's too), the tables are
:mod:`gemmlab.results.report_tables`, the plots :mod:`gemmlab.results.report_plots`, the page
:mod:`gemmlab.results.report_html`.

Exit status: 0 the report was written; 1 it could not be written (a full disk: the partial
report is removed); 2 bad arguments (a path that does not exist or holds no ``result.json``, an
``--out`` directory that exists). Interrupted (Ctrl-C 130, SIGTERM 143): the partial report is
removed, so the same ``--out`` works again.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from gemmlab.console import OneLineParser, count, guard_streams, output_path, run_command, settled_exit, undo_partial_output
from gemmlab.errors import in_chain
from gemmlab.paths import missing_parents
from gemmlab.results import families, report_html, report_plots, report_tables

from gemmlab.stages import archive
from gemmlab.stages import record_model as results
from gemmlab.results.report_plots import PLOTS
from gemmlab.results.report_tables import CSV_COLUMNS, counts, print_table
from gemmlab.stages.record_model import CATEGORIES, RECORD_NAME, SCHEMA, find_records, path_problem, read_record
from gemmlab.stages.record_model import Record as Row

PROG = "gemmlab-report"

__all__ = ["Row", "collect", "find_records", "read_record", "counts", "write_report", "print_table", "main",
           "PLOTS", "CSV_COLUMNS", "CATEGORIES", "SCHEMA", "RECORD_NAME"]


def collect(paths: Iterable[str | os.PathLike], skipped: list[Row] | None = None) -> list[Row]:
    """One :class:`Row` per record file under ``paths`` (see :func:`gemmlab.stages.record_model.find_records`;
    a sanitizer child's record is listed too), numbered 1.. in that order. Never raises for a bad
    record: an unreadable file becomes a row with status ``unreadable`` and the reason in ``error``.
    A JSON object that is not a gemmlab record (``{}``, another tool's ``result.json``) is no row:
    it goes to ``skipped`` (when given), its reason in ``foreign``.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    return results.collect(paths, children=True, skipped=skipped)


def write_report(rows: Sequence[Row], out_dir: str | os.PathLike,
                 sources: Sequence[str] | None = None) -> dict[str, Path]:
    """Write ``report.csv``, ``report.md``, the plots and ``report.html`` for ``rows`` into
    ``out_dir`` (created if missing). A plot without data is skipped and ``report.md`` says why.

    Args:
        rows: from :func:`collect`.
        out_dir: the report directory.
        sources: the paths the rows came from (listed in ``report.md`` and ``report.html``).

    Returns:
        ``{"csv": ..., "md": ..., "<plot name>": ..., "families": ..., "html": ...}`` for each file
        written (``families``: ``families.png``, only with a family section).

    Raises:
        FileExistsError: one of the report's files already exists in ``out_dir`` (never overwritten).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = {"csv": "report.csv", "md": "report.md", **{p: f"{p}.png" for p in PLOTS}, "families": "families.png",
             "html": "report.html"}
    for name in names.values():
        if (out / name).exists():
            raise FileExistsError(f"{out / name} exists; gemmlab-report never overwrites a report")
    written: dict[str, Path] = {}
    report_tables.write_csv(rows, out / names["csv"])
    written["csv"] = out / names["csv"]
    plots, plot_notes, plot_text = report_plots.draw(rows, out)
    written.update(plots)
    fam_md = fam_tables = None
    fam_points = families.report_section(rows)
    if fam_points:  # kernel=auto over suite shapes: the family section
        fam_rows, checks = families.summarize(fam_points)
        fam_md = families.markdown(fam_points, fam_rows, checks)
        fam_tables = families.tables(fam_points, fam_rows, checks)
        if families.plot(fam_points, out / names["families"]):
            written["families"] = plots["families"] = out / names["families"]
    (out / names["md"]).write_text(report_tables.markdown(rows, sources, written, plot_notes, plot_text, fam_md),
                                   encoding="utf-8")
    written["md"] = out / names["md"]
    (out / names["html"]).write_text(report_html.page(rows, sources, plots, plot_notes, plot_text, fam_tables),
                                     encoding="utf-8")
    written["html"] = out / names["html"]
    return {k: written[k] for k in ("csv", "md", *PLOTS, "families", "html") if k in written}


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog=PROG, description="One table (CSV + Markdown) and plots from gemmlab result.json records: "
        "run directories, sweep directories (any nesting), or result.json files.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="run/sweep directory, record archive (*.jsonl.xz, or a "
                   "folder inside one: ARCHIVE/auto) or result.json file")
    p.add_argument("--archive", type=output_path, metavar="OUT", help="write no report: pack the records of the one "
                   "sweep folder PATH into the new archive OUT (*.jsonl.xz: JSON lines, xz)")
    p.add_argument("--out", type=output_path, metavar="DIR", help="new report directory (default: ./gemmlab-report-<UTC time>); "
                   "an existing directory is refused")
    return p


def _default_out() -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path(f"gemmlab-report-{stamp}")


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point (``gemmlab-report``). Returns the exit status (see the module
    docstring): 0 report written, 1 it could not be written, 2 bad arguments or no ``result.json``.

    Raises:
        KeyboardInterrupt: interrupted while writing (:class:`~gemmlab.errors.Terminated` for
            SIGTERM); the partial report was removed, the interrupt's text says so.
    """
    guard_streams(PROG)
    args = _parser().parse_args(argv)

    def fail(code: int, msg: str) -> int:
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return code

    for p in args.paths:
        problem = path_problem(p)
        if problem:
            return fail(2, f"{p}: {problem}")
    if args.archive is not None:
        return _archive(args, fail)
    if args.out is not None and os.path.lexists(args.out):
        return fail(2, f"{args.out}: already exists; give --out a new directory (a report is never overwritten)")

    skipped: list[Row] = []
    try:
        rows = collect(args.paths, skipped)
    except FileNotFoundError as exc:  # removed between the check and the walk
        return fail(2, str(exc))
    for rec in skipped:
        print(f"{PROG}: notice: skipped {rec.path}: not a gemmlab record ({rec.foreign})", file=sys.stderr)
    for rec in rows:  # a damaged record, a folder or a link to nowhere named result.json: one line each, as compare
        if rec.category == "unreadable":
            print(f"{PROG}: notice: unreadable {rec.path}: {rec.error} (listed and counted as unreadable)",
                  file=sys.stderr)
    others = Counter(rec.schema or "none" for rec in rows if rec.category != "unreadable" and rec.schema != SCHEMA)
    if others:  # read with the record model's fallbacks, yet figures of another writer: said once
        print(f"{PROG}: notice: {count(sum(others.values()), 'record')} of another schema than this gemmlab's "
              f"{SCHEMA} (" + ", ".join(f"{s} x{n}" for s, n in sorted(others.items())) + "): read with the record "
              "model's fallbacks; report.md lists the fields that could not be read", file=sys.stderr)
    if not rows:
        return fail(2, f"no {RECORD_NAME} found under " + ", ".join(args.paths))  # bad input, like compare

    if args.out is not None:
        out = Path(args.out)
        made_above = missing_parents(out)  # what mkdir makes above it
        try:
            out.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            return fail(2, f"{args.out}: already exists; give --out a new directory (a report is never overwritten)")
        except OSError as exc:
            return fail(2, f"{args.out}: cannot create: {exc.strerror or exc}")
    else:
        made_above = 0
        base = _default_out()
        for i in range(1, 1000):
            out = base if i == 1 else base.with_name(f"{base.name}-{i}")
            try:
                out.mkdir(parents=True, exist_ok=False)
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover
            return fail(2, f"{base}: already exists; use --out")

    try:
        written = write_report(rows, out, sources=args.paths)
    except BaseException as exc:  # the folder is this command's own, made just above: a partial report goes
        # with it, so the same --out works again, and so do the folders it made above it (--out new/a/b)
        undo_partial_output(exc, out, made_above + 1, None, f"the partial report {out} was removed")
        os_error = in_chain(exc, OSError)
        if os_error is None:
            raise
        return fail(1, f"{out}: cannot write the report: {os_error.strerror or os_error}; the partial report was removed")
    from rich.console import Console
    console = Console(width=None if sys.stdout.isatty() else 160)
    print_table(rows, console)
    n = counts(rows)
    console.print(f"{len(rows)} records: {n['timed']} valid timed, {n['compiled']} compiled only, "
                  f"{n['failed']} failed, {n['other']} other valid, {n['unreadable']} unreadable; "
                  f"{sum(len(r.unread) for r in rows)} field(s) could not be read (see report.md)",
                  highlight=False)
    for name, path in written.items():
        console.print(f"  {name:20s} {path}", highlight=False, soft_wrap=True)
    return 0


def _archive(args: argparse.Namespace, fail) -> int:
    """``--archive OUT``: pack the one sweep folder into OUT (see the module docstring)."""
    if args.out is not None:
        return fail(2, "--archive writes an archive, not a report: give no --out")
    if len(args.paths) != 1:
        return fail(2, f"--archive packs one sweep folder; got {len(args.paths)} paths")
    if not args.archive.endswith(archive.SUFFIX):
        return fail(2, f"--archive {args.archive}: name the archive *{archive.SUFFIX}")
    if os.path.lexists(args.archive):
        return fail(2, f"--archive {args.archive}: already exists (an archive is never overwritten)")
    try:
        n = results.write_archive(args.paths[0], args.archive)
    except FileNotFoundError as exc:
        return fail(2, str(exc))
    except FileExistsError:
        return fail(2, f"--archive {args.archive}: already exists (an archive is never overwritten)")
    except OSError as exc:
        return fail(1, f"--archive {args.archive}: cannot write: {exc.strerror or exc}")
    print(f"{args.archive}: {count(n, 'record')} of {args.paths[0]}")
    return 0


if __name__ == "__main__":
    with settled_exit():
        sys.exit(run_command(PROG, main))
