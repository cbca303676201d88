"""The tables of ``gemmlab-report``: counts, ``report.csv``, ``report.md`` and the terminal table.

This module owns the table model of the report (:data:`CSV_COLUMNS`, :data:`MD_COLUMNS`, the
record categories) and one printer per format: :func:`write_csv`, :func:`markdown`,
:func:`print_table` (rich); the HTML page is :mod:`gemmlab.results.report_html`. Rows are
:class:`gemmlab.stages.record_model.Record` views.
"""

from __future__ import annotations

import csv
import datetime as _dt
from pathlib import Path
from types import MappingProxyType
from typing import Any, Sequence

from gemmlab.results.report_plots import PLOTS, TITLES
from gemmlab.stages.record_model import CATEGORIES, Record as Row

CSV_COLUMNS = ("index", "path", "kernel", "params", "M", "N", "K", "device", "precision", "status", "valid",
               "median_ms", "gflops", "protocol", "l2", "n_samples", "throttled_samples", "ratio_to_baseline",
               "ratio_to_baseline_gflops", "baseline", "max_abs_error", "verification_rule",
               "verification_passed", "arithmetic_intensity", "pct_fp32_peak", "pct_peak", "peak_units", "schema", "error",
               "unread_fields")
_CATEGORY_TEXT = {"timed": "valid timed", "compiled": "compiled only", "failed": "failed",
                  "other": "other valid (sanitizer check, or no readable timing)", "unreadable": "unreadable files"}

def counts(rows: Sequence[Row]) -> dict[str, int]:
    """Number of rows per category (``timed``, ``compiled``, ``failed``, ``other``, ``unreadable``)."""
    return {c: sum(r.category == c for r in rows) for c in CATEGORIES}



#: the precision and A/B layout every record had before those fields existed
DEFAULT_SETTINGS = MappingProxyType({"precision": "fp32", "layout": "row/row"})


def layout_text(row: Row) -> str:
    """The row's A/B layout as ``"a/b"`` (``row/row`` for a record without the field)."""
    return str((row.settings or {}).get("layout") or DEFAULT_SETTINGS["layout"])


def mixed_settings(rows: Sequence[Row]) -> bool:
    """True when any row is not fp32 with row-major A and B: then the tables name each row's
    precision and layout (a set of fp32 row/row records keeps its tables as they were)."""
    return any((r.precision or DEFAULT_SETTINGS["precision"]) != DEFAULT_SETTINGS["precision"]
               or layout_text(r) != DEFAULT_SETTINGS["layout"] for r in rows if r.category != "unreadable")


def csv_columns(rows: Sequence[Row]) -> tuple[str, ...]:
    """:data:`CSV_COLUMNS`, plus ``layout`` after ``precision`` when :func:`mixed_settings`."""
    if not mixed_settings(rows):
        return CSV_COLUMNS
    i = CSV_COLUMNS.index("precision") + 1
    return CSV_COLUMNS[:i] + ("layout",) + CSV_COLUMNS[i:]


def as_csv(row: Row) -> dict[str, Any]:
    """The row as ``CSV_COLUMNS`` (and ``layout``) → value (full precision; ``""`` for unknown)."""
    out = {c: getattr(row, c, None) for c in CSV_COLUMNS}
    out.update(params=row.params_text, n_samples=len(row.samples_ms) or None, unread_fields="; ".join(row.unread),
               layout=layout_text(row) if row.category != "unreadable" else None)
    return {k: ("" if v is None else v) for k, v in out.items()}


def write_csv(rows: Sequence[Row], path: Path) -> None:
    """``report.csv``: one line per row, :func:`csv_columns`."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=csv_columns(rows), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(as_csv(r) for r in rows)


def _fmt(value: Any, spec: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


MD_COLUMNS = (("#", lambda r: r.index), ("path", lambda r: f"`{r.path}`"), ("kernel", lambda r: r.kernel or ""),
               ("params", lambda r: r.params_text), ("M", lambda r: _fmt(r.M, "")), ("N", lambda r: _fmt(r.N, "")),
               ("K", lambda r: _fmt(r.K, "")),
               ("device", lambda r: " ".join(x for x in (r.device, f"({r.arch})" if r.arch else None) if x)),
               ("status", lambda r: r.status), ("median ms", lambda r: _fmt(r.median_ms, ".5g")),
               ("GFLOP/s", lambda r: _fmt(r.gflops, ".1f")), ("protocol", lambda r: r.protocol or ""),
               ("time / baseline", lambda r: _fmt(r.ratio_to_baseline, ".3f")),
               ("baseline", lambda r: r.baseline or ""),
               ("max abs error", lambda r: _fmt(r.max_abs_error, ".3g")),
               ("verification", lambda r: " ".join(x for x in (r.verification_rule, {True: "pass", False: "FAIL"}
                                                               .get(r.verification_passed)) if x)),
               ("throttled", lambda r: _fmt(r.throttled_samples, "")),
               ("error", lambda r: r.error or ""))

#: the columns :func:`md_columns` adds after ``K`` for a set of mixed precisions or layouts
SETTING_COLUMNS = (("precision", lambda r: r.precision or ""),
                   ("layout a/b", lambda r: layout_text(r) if r.category != "unreadable" else ""))


def md_columns(rows: Sequence[Row]) -> tuple:
    """:data:`MD_COLUMNS`, plus precision and layout after ``K`` when :func:`mixed_settings`
    (``report.md`` and ``report.html``)."""
    if not mixed_settings(rows):
        return MD_COLUMNS
    i = [c for c, _ in MD_COLUMNS].index("K") + 1
    return MD_COLUMNS[:i] + SETTING_COLUMNS + MD_COLUMNS[i:]


def markdown(rows: Sequence[Row], sources: Sequence[str] | None, written: dict, plot_notes: dict[str, str],
             plot_text: dict[str, str], families_md: str | None = None) -> str:
    """``report.md``: counts, the plots (written or why skipped), the shape-suite family section
    when ``families_md`` is given (:func:`gemmlab.results.families.markdown`; its plot is ``written``'s
    ``families``), the results table, failed points, unreadable files, fields that could not be
    read and values derived instead."""
    n = counts(rows)
    columns = md_columns(rows)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    lines = ["# gemmlab report", "", f"Generated {now} from {len(rows)} record file(s)"
             + (" under " + ", ".join(f"`{s}`" for s in sources) if sources else "") + ".", "",
             "| records | " + " | ".join(_CATEGORY_TEXT[c] for c in CATEGORIES) + " |",
             "|---|" + "---|" * len(CATEGORIES),
             f"| {len(rows)} | " + " | ".join(str(n[c]) for c in CATEGORIES) + " |", "",
             f"Counts: {n['timed']} valid timed, {n['compiled']} compiled only, {n['failed']} failed, "
             f"{n['other']} other valid, {n['unreadable']} unreadable.", "", "## Plots", ""]
    titles = TITLES
    for p in PLOTS:
        if p in written:
            lines.append(f"- `{p}.png`: {titles[p]}" + (f" ({plot_text[p]})" if plot_text.get(p) else ""))
        else:
            lines.append(f"- `{p}.png`: {plot_notes.get(p, 'skipped')}")
    lines.append("")
    for p in PLOTS:
        if p in written:
            lines += [f"![{titles[p]}]({p}.png)", ""]

    if families_md:
        lines += ["## Shape suite: kernel=auto per family", "",
                  "The records of `kernel=auto` whose shapes are in the shape suite (`gemmlab.results.families`): "
                  "% of the baseline's speed in the same run, geometric mean per family, issue 10's targets.", "",
                  families_md.rstrip("\n"), ""]
        if "families" in written:
            lines += ["![kernel=auto vs the baseline per shape](families.png)", ""]
    lines += ["## Results", "",
              "`time / baseline` = kernel median time / baseline median time (> 1: slower than the baseline); "
              "GFLOP/s = 2·M·N·K / median time; the timing is the record's primary protocol.", "",
              "| " + " | ".join(c for c, _ in columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(_md_cell(get(r)) for _, get in columns) + " |")
    lines.append("")

    failed = [r for r in rows if r.category == "failed"]
    lines += ["## Failed points", ""]
    lines += [f"- `{r.path}`: {r.status}: {r.error or '(no error recorded)'}" for r in failed] or ["None."]
    lines.append("")
    unreadable = [r for r in rows if r.category == "unreadable"]
    lines += ["## Unreadable files", ""]
    lines += [f"- `{r.path}`: {r.error}" for r in unreadable] or ["None."]
    lines.append("")
    unread = [line for r in rows for line in r.unread_lines()]
    lines += ["## Fields that could not be read", ""]
    lines += [f"- {line}" for line in unread] or ["None."]
    lines.append("")
    derived = [f"- `{r.path}`: {d}" for r in rows for d in r.derived]
    if derived:
        lines += ["## Values derived instead of read", "", *derived, ""]
    return "\n".join(lines)


def print_table(rows: Sequence[Row], console=None) -> None:
    """Print a short rich table of ``rows`` (failed and unreadable rows in red)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
    console = console or Console()
    table = Table(title=f"gemmlab report: {len(rows)} records")
    for c, kw in (("#", {"justify": "right"}), ("kernel", {}), ("params", {"max_width": 28}), ("shape", {}),
                  ("status", {}), ("median ms", {"justify": "right"}), ("GFLOP/s", {"justify": "right"}),
                  ("vs base", {"justify": "right"}), ("error", {"max_width": 40, "no_wrap": True, "overflow": "ellipsis"})):
        kw.setdefault("overflow", "fold")
        table.add_column(c, **kw)
    for r in rows:
        style = "red" if r.category in ("failed", "unreadable") else None
        cells = (str(r.index), r.kernel or "", r.params_text, r.shape_text, r.status,
                 _fmt(r.median_ms, ".5f"), _fmt(r.gflops, ".1f"),
                 f"{r.ratio_to_baseline:.3f}x" if r.ratio_to_baseline else "",
                 (r.error or "").splitlines()[0][:200] if r.error else "")
        table.add_row(*(Text(c) for c in cells), style=style)  # plain text: "[cublas]" is no markup
    console.print(table)
