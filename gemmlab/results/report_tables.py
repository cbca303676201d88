"""The tables of ``gemmlab-report``: counts, ``report.csv``, ``report.md`` and the terminal table.

This module owns the report's tables, each a :class:`gemmlab.results.table.Table` (the one table
model, printed by its printers): ``report.csv``'s (:data:`CSV_COLUMNS`, :func:`csv_table`), the
results table of ``report.md`` and ``report.html`` (:data:`MD_COLUMNS`, :data:`COMPILE_COLUMNS`,
:func:`results_table`) and the terminal's (:func:`terminal_table`), the record categories and
``report.md`` around its table (:func:`markdown`); the HTML page is :mod:`gemmlab.results.report_html`.
Rows are :class:`gemmlab.stages.record_model.Record` views.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from types import MappingProxyType
from typing import Any, Sequence

from gemmlab.results import table as tables
from gemmlab.results.report_plots import PLOTS, TITLES
from gemmlab.results.table import Column, Table
from gemmlab.stages.record_model import CATEGORIES, Record as Row

CSV_COLUMNS = ("index", "path", "kernel", "params", "M", "N", "K", "device", "precision", "status", "valid",
               "median_ms", "gflops", "protocol", "l2", "n_samples", "throttled_samples", "ratio_to_baseline",
               "ratio_to_baseline_gflops", "baseline", "max_abs_error", "verification_rule",
               "verification_passed", "arithmetic_intensity", "pct_fp32_peak", "pct_peak", "peak_units",
               # what compiling reports (every record that compiled; all a mode=compile record has)
               "registers", "spill_store_bytes", "spill_load_bytes", "stack_frame_bytes", "static_shared_bytes",
               "dynamic_shared_bytes", "occupancy", "blocks_per_sm", "waves", "sass_classes", "sass_histogram",
               "schema", "error", "unread_fields")
_CATEGORY_TEXT = {"timed": "valid timed", "compiled": "compiled only", "failed": "failed",
                  "other": "other valid (sanitizer check, or no readable timing)", "unreadable": "unreadable files"}

def counts(rows: Sequence[Row]) -> dict[str, int]:
    """Number of rows per category (``timed``, ``compiled``, ``failed``, ``other``, ``unreadable``)."""
    return {c: sum(r.category == c for r in rows) for c in CATEGORIES}



def counts_table(rows: Sequence[Row], texts: dict[str, str]) -> Table:
    """One row: the number of records, then of each category (:func:`counts`), headed by ``texts``
    (category -> header)."""
    n = counts(rows)
    columns = [Column("records", lambda _: len(rows), sort=lambda _: len(rows))]
    columns += [Column(texts[c], lambda _, c=c: n[c], sort=lambda _, c=c: n[c]) for c in CATEGORIES]
    return Table(columns, [n])


#: the precision and A/B layout every record had before those fields existed
DEFAULT_SETTINGS = MappingProxyType({"precision": "fp32", "layout": "row/row"})


def layout_text(row: Row) -> str:
    """The row's A/B layout as ``"a/b"`` (``row/row`` for a record without the field)."""
    return str((row.settings or {}).get("layout") or DEFAULT_SETTINGS["layout"])


def problem_text(config: dict) -> str:
    """What a point's problem adds to C = A·B, from its config (issue 43): ``"batch 3, beta 0.5,
    bias input, gelu_tanh, C bf16, ldc 80"``; ``""`` for a plain problem. Only the fields away from
    their defaults (:class:`~gemmlab.stages.config.BatchOptions`,
    :class:`~gemmlab.stages.config.EpilogueOptions`; leading dimensions null: tight)."""
    from gemmlab.stages.config import BatchOptions, EpilogueOptions
    batch = config.get("batch") if isinstance(config.get("batch"), dict) else {}
    ep = config.get("epilogue") if isinstance(config.get("epilogue"), dict) else {}
    layout = config.get("layout") if isinstance(config.get("layout"), dict) else {}
    changed = {k: v for k, v in ep.items() if v is not None and v != getattr(EpilogueOptions, k, None)}
    parts = [f"batch {batch['count']}"] if batch.get("count") not in (None, BatchOptions.count) else []
    parts += [f"{k} {changed[k]:g}" if isinstance(changed[k], (int, float)) else f"{k} {changed[k]}"
              for k in ("alpha", "beta", "bias") if k in changed]
    parts += [str(changed["activation"])] if "activation" in changed else []
    parts += [f"C {changed['out']}"] if "out" in changed else []
    return ", ".join(parts + [f"{ld} {layout[ld]}" for ld in ("lda", "ldb", "ldc") if layout.get(ld) is not None])


def row_problem(row: Row) -> str:
    """:func:`problem_text` of the row's ``config`` (``""`` where the record has none)."""
    raw = row.raw if isinstance(row.raw, dict) else {}
    return problem_text(raw.get("config") if isinstance(raw.get("config"), dict) else {})


def mixed_settings(rows: Sequence[Row]) -> bool:
    """True when any row is not fp32 with row-major A and B: then the tables name each row's
    precision and layout (a set of fp32 row/row records keeps its tables as they were)."""
    return any((r.precision or DEFAULT_SETTINGS["precision"]) != DEFAULT_SETTINGS["precision"]
               or layout_text(r) != DEFAULT_SETTINGS["layout"] for r in rows if r.category != "unreadable")


def csv_columns(rows: Sequence[Row]) -> tuple[str, ...]:
    """:data:`CSV_COLUMNS`, plus ``layout`` after ``precision`` when :func:`mixed_settings`, and
    ``problem`` (:func:`problem_text`: batches, an epilogue, leading dimensions) when any row has one."""
    i = CSV_COLUMNS.index("precision") + 1
    extra = (("layout",) if mixed_settings(rows) else ()) + (("problem",) if any(map(row_problem, rows)) else ())
    return CSV_COLUMNS[:i] + extra + CSV_COLUMNS[i:]


_INT_FIELDS = ("registers", "spill_store_bytes", "spill_load_bytes", "stack_frame_bytes", "static_shared_bytes",
               "dynamic_shared_bytes", "blocks_per_sm")


def as_csv(row: Row) -> dict[str, Any]:
    """The row as ``CSV_COLUMNS`` (and ``layout``) → value (full precision; ``""`` for unknown)."""
    out = {c: getattr(row, c, None) for c in CSV_COLUMNS}
    out.update(params=row.params_text, n_samples=len(row.samples_ms) or None, unread_fields="; ".join(row.unread),
               layout=layout_text(row) if row.category != "unreadable" else None, problem=row_problem(row) or None,
               sass_classes=sass_classes_text(row) or None, sass_histogram=sass_text(row) or None)
    for k in _INT_FIELDS:  # counts of bytes, registers, blocks: read as numbers, written as integers
        if isinstance(out.get(k), float) and out[k].is_integer():
            out[k] = int(out[k])
    return {k: ("" if v is None else v) for k, v in out.items()}


def csv_table(rows: Sequence[Row]) -> Table:
    """``report.csv``'s table: one column per :func:`csv_columns` name over the rows' :func:`as_csv` dicts."""
    return Table([Column(c, lambda r, c=c: r[c]) for c in csv_columns(rows)], [as_csv(r) for r in rows])


def write_csv(rows: Sequence[Row], path: Path) -> None:
    """``report.csv``: one line per row, :func:`csv_columns` (:func:`gemmlab.results.table.write_csv`)."""
    tables.write_csv(csv_table(rows), path)


def _int(value: float | None) -> str:
    return "" if value is None else str(int(value))


def spills_text(row: Row) -> str:
    """``"<store>/<load>"``: ptxas's spill stores and loads in bytes per thread (``""`` without a report)."""
    if row.spill_store_bytes is None and row.spill_load_bytes is None:
        return ""
    return f"{_int(row.spill_store_bytes) or '?'}/{_int(row.spill_load_bytes) or '?'}"


def shared_bytes(row: Row) -> float | None:
    """Shared memory per block in bytes: ptxas's static plus the launch's dynamic (None without a report)."""
    if row.static_shared_bytes is None and row.dynamic_shared_bytes is None:
        return None
    return (row.static_shared_bytes or 0) + (row.dynamic_shared_bytes or 0)


def smem_text(row: Row) -> str:
    """:func:`shared_bytes`, and ``static+dynamic`` when the launch asks for dynamic shared memory."""
    total = shared_bytes(row)
    if total is None:
        return ""
    if row.dynamic_shared_bytes:
        return f"{int(total)} ({_int(row.static_shared_bytes) or 0}+{_int(row.dynamic_shared_bytes)})"
    return str(int(total))


def sass_classes_text(row: Row) -> str:
    """The declared SASS classes' check (:mod:`gemmlab.gpu.sass_check`) in a few words:
    ``"FFMA present (FFMA 256)"``, ``"HGMMA MISSING"``, ``"HGMMA not checked: <why>"``; ``""`` when
    the kernel declares none or the record has no check."""
    check = row.sass_check
    declared = check.get("declared") if isinstance(check.get("declared"), list) else []
    if not declared:
        return ""
    names, verdict = ", ".join(map(str, declared)), check.get("verdict")
    if verdict == "present":
        counts = check.get("counts") if isinstance(check.get("counts"), dict) else {}
        return f"{names} present" + (f" ({', '.join(f'{c} {n}' for c, n in counts.items())})" if counts else "")
    if verdict == "missing":
        missing = check.get("missing") if isinstance(check.get("missing"), list) else declared
        return f"{', '.join(map(str, missing))} MISSING (declared {names})"
    return f"{names} not checked" + (f": {check['reason']}" if check.get("reason") else "")


def sass_text(row: Row) -> str:
    """The cubin's SASS histogram: ``"FFMA 256, LDS 64, ... of 672"`` (classes counted
    more than 0 times, in the histogram's order, then the instruction total); ``""`` without one."""
    if not row.sass_histogram and row.sass_total is None:
        return ""
    text = ", ".join(f"{k} {v}" for k, v in row.sass_histogram.items()) or "none of the counted classes"
    return text + (f" of {row.sass_total}" if row.sass_total is not None else "")


def _verification_text(r: Row) -> str:
    return " ".join(x for x in (r.verification_rule, {True: "pass", False: "FAIL"}.get(r.verification_passed)) if x)


def _device_text(r: Row) -> str:
    return " ".join(x for x in (r.device, f"({r.arch})" if r.arch else None) if x)


#: the results table of ``report.md`` and ``report.html`` (:func:`results_table` adds the settings
#: and what compiling reports); a column with ``sort`` sorts by its number in the HTML page
MD_COLUMNS = (Column("#", lambda r: r.index, sort=lambda r: r.index),  # path and params wrap in HTML: the resource
              Column("path", lambda r: r.path, code=True, wrap=True),  # columns stay on screen at 1400 px
              Column("kernel", lambda r: r.kernel), Column("params", text=lambda r: r.params_text, wrap=True),
              Column("M", lambda r: r.M, sort=lambda r: r.M), Column("N", lambda r: r.N, sort=lambda r: r.N),
              Column("K", lambda r: r.K, sort=lambda r: r.K), Column("device", text=_device_text),
              Column("status", lambda r: r.status),
              Column("median ms", lambda r: r.median_ms, ".5g", "ms per launch", sort=lambda r: r.median_ms),
              Column("GFLOP/s", lambda r: r.gflops, ".1f", "GFLOP/s (2·M·N·K per launch)", sort=lambda r: r.gflops),
              Column("protocol", lambda r: r.protocol),
              Column("time / baseline", lambda r: r.ratio_to_baseline, ".3f", "kernel median / baseline median",
                     sort=lambda r: r.ratio_to_baseline),
              Column("baseline", lambda r: r.baseline),
              Column("max abs error", lambda r: r.max_abs_error, ".3g", sort=lambda r: r.max_abs_error),
              Column("verification", text=_verification_text),
              Column("throttled", lambda r: r.throttled_samples, unit="samples", sort=lambda r: r.throttled_samples),
              Column("error", lambda r: r.error))

#: what compiling reports (the only measurement of ``mode=compile``): :func:`results_table` adds
#: them before ``error`` when any row was compiled only; registers, spills (store/load) and the
#: stack frame (local memory) are ptxas's per thread, shared memory per block (static + the
#: launch's dynamic), occupancy the theoretical one of the launch, waves its blocks over a full device
COMPILE_COLUMNS = (Column("registers", lambda r: r.registers, unit="registers per thread", text=lambda r: _int(r.registers),
                          sort=lambda r: r.registers),
                   Column("spills st/ld B", text=spills_text, unit="bytes per thread (stores/loads)",
                          sort=lambda r: r.spill_store_bytes),
                   Column("local B", lambda r: r.stack_frame_bytes, unit="bytes per thread",
                          text=lambda r: _int(r.stack_frame_bytes), sort=lambda r: r.stack_frame_bytes),
                   Column("smem B", shared_bytes, unit="bytes per block (static+dynamic)", text=smem_text,
                          sort=shared_bytes),
                   Column("occupancy", lambda r: r.occupancy, ".2f", "fraction of the SM's warps",
                          sort=lambda r: r.occupancy),
                   Column("blocks/SM", lambda r: r.blocks_per_sm, unit="resident blocks per SM",
                          text=lambda r: _int(r.blocks_per_sm), sort=lambda r: r.blocks_per_sm),
                   Column("waves", lambda r: r.waves, ".2f", "blocks / (blocks per SM x SMs)", sort=lambda r: r.waves),
                   Column("SASS classes", text=sass_classes_text, wrap=True),
                   Column("SASS", text=sass_text, unit="instructions per class, of the total", wrap=True))
#: what only a timed run fills: left out of a table whose rows were all compiled only
TIMING_COLUMNS = ("median ms", "GFLOP/s", "protocol", "time / baseline", "baseline", "max abs error",
                  "verification", "throttled")


def compiled_only(row: Row) -> bool:
    """The row is a ``mode=compile`` point (compiled, or failed while compiling): no timing."""
    return row.category == "compiled" or (row.mode == "compile" and row.category != "unreadable")


def compile_mode(rows: Sequence[Row]) -> tuple[bool, bool]:
    """``(any_compiled, untimed)``: whether any readable row is :func:`compiled_only`, and whether no
    readable row was timed (every row compiled, failed before timing, or both: the README's main job
    without a GPU, alone or beside a compile-mode sweep); the timing columns are left out then."""
    readable = [r for r in rows if r.category != "unreadable"]
    return any(compiled_only(r) for r in readable), not any(r.median_ms is not None for r in readable)


#: the columns :func:`md_columns` adds after ``K`` for a set of mixed precisions or layouts
SETTING_COLUMNS = (Column("precision", lambda r: r.precision),
                   Column("layout a/b", text=lambda r: layout_text(r) if r.category != "unreadable" else ""))


def md_columns(rows: Sequence[Row]) -> tuple[Column, ...]:
    """:data:`MD_COLUMNS`, plus precision and layout after ``K`` when :func:`mixed_settings`
    (``report.md`` and ``report.html``); when any row was compiled only (:func:`compile_mode`),
    :data:`COMPILE_COLUMNS` before ``error``, and when no row was timed, without
    :data:`TIMING_COLUMNS` (empty in every row)."""
    columns = MD_COLUMNS
    any_compiled, untimed = compile_mode(rows)
    columns = tuple(c for c in columns if not (untimed and c.name in TIMING_COLUMNS))
    if any_compiled:
        i = [c.name for c in columns].index("error")
        columns = columns[:i] + COMPILE_COLUMNS + columns[i:]
    if not mixed_settings(rows):
        return columns
    i = [c.name for c in columns].index("K") + 1
    return columns[:i] + SETTING_COLUMNS + columns[i:]


def _kind(row: Row) -> str | None:
    """A failed or unreadable row's category (its HTML class; red on the terminal), else None."""
    return row.category if row.category in ("failed", "unreadable") else None


def results_table(rows: Sequence[Row]) -> Table:
    """The results table of ``report.md`` and ``report.html`` (:func:`md_columns`)."""
    return Table(md_columns(rows), rows, style=_kind)


#: what the results table's columns mean, said above it (``report.md`` and ``report.html``)
TIMING_NOTE = ("`time / baseline` = kernel median time / baseline median time (> 1: slower than the baseline); "
               "GFLOP/s = 2·M·N·K / median time; the timing is the record's primary protocol.")
COMPILE_NOTE = ("Compiled only (`mode=compile`, no GPU): `registers`, `spills st/ld B` (spill stores/loads) and "
                "`local B` (stack frame, local memory) are ptxas's report per thread; `smem B` is shared memory per "
                "block (static + the launch's dynamic); `occupancy` is the launch's theoretical occupancy "
                "(`blocks/SM` resident blocks per SM, `waves` its blocks over the whole device); `SASS classes` is "
                "the check of the SASS classes the kernel declares, counted in its main kernel; `SASS` is the cubin's "
                "histogram of instruction classes (every function of the module), of its instruction total.")


def results_notes(rows: Sequence[Row]) -> list[str]:
    """The notes on the results table's columns (Markdown): the timing note unless no row was timed
    (:func:`compile_mode`), the compile note when any row was compiled only."""
    any_compiled, untimed = compile_mode(rows)
    return ([] if untimed else [TIMING_NOTE]) + ([COMPILE_NOTE] if any_compiled else [])


def markdown(rows: Sequence[Row], sources: Sequence[str] | None, written: dict, plot_notes: dict[str, str],
             plot_text: dict[str, str], families_md: str | None = None) -> str:
    """``report.md``: counts, the plots (written or why skipped), the shape-suite family section
    when ``families_md`` is given (:func:`gemmlab.results.families.markdown`; its plot is ``written``'s
    ``families``), the results table, failed points, unreadable files, fields that could not be
    read and values derived instead."""
    n = counts(rows)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    lines = ["# gemmlab report", "", f"Generated {now} from {len(rows)} record file(s)"
             + (" under " + ", ".join(f"`{s}`" for s in sources) if sources else "") + ".", "",
             tables.markdown(counts_table(rows, _CATEGORY_TEXT)),
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
    lines += ["## Results", ""]
    for note in results_notes(rows):
        lines += [note, ""]
    lines += [tables.markdown(results_table(rows))]

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


def terminal_table(rows: Sequence[Row]) -> Table:
    """The report's short terminal table: index, kernel, parameters, shape, status (shape and status
    never folded); the timing where some row was timed; what compiling reports when any row was
    compiled (and the SASS classes' check when, besides, no row was timed); the error's first line. Failed and
    unreadable rows red."""
    def right(name, value=None, fmt="", **kw):
        return Column(name, value or (lambda r: None), fmt, align="right", **kw)

    columns = [right("#", lambda r: r.index), Column("kernel", lambda r: r.kernel),
               Column("params", text=lambda r: r.params_text, max_width=28),
               Column("shape", text=lambda r: r.shape_text, no_wrap=True), Column("status", lambda r: r.status, no_wrap=True)]
    any_compiled, untimed = compile_mode(rows)
    if not untimed:
        columns += [right("median ms", lambda r: r.median_ms, ".5f", unit="ms"),
                    right("GFLOP/s", lambda r: r.gflops, ".1f", unit="GFLOP/s"),
                    right("vs base", lambda r: r.ratio_to_baseline,
                          text=lambda r: f"{r.ratio_to_baseline:.3f}x" if r.ratio_to_baseline else "")]
    if any_compiled:  # what compiling reports: the whole measurement of mode=compile
        columns += [right("regs", lambda r: r.registers, text=lambda r: _int(r.registers)),
                    right("spills", text=spills_text), right("smem B", shared_bytes, text=smem_text),
                    right("occupancy", lambda r: r.occupancy, ".2f"), right("waves", lambda r: r.waves, ".2f")]
    if untimed and any_compiled:
        columns += [Column("SASS classes", text=sass_classes_text, max_width=36)]
    columns += [Column("error", lambda r: r.error, max_width=40, no_wrap=True, overflow="ellipsis",
                       text=lambda r: (r.error or "").splitlines()[0][:200] if r.error else "")]
    return Table(columns, rows, title=f"gemmlab report: {len(rows)} records", style=_kind,
                 styles=MappingProxyType({"failed": "red", "unreadable": "red"}))


def print_table(rows: Sequence[Row], console=None) -> None:
    """Print the short terminal table of ``rows`` (:func:`terminal_table`; failed and unreadable rows in
    red). The columns of short values (index, kernel, shape, status, the figures) keep their widest
    cell's width; on a terminal too narrow for every cell the long texts (parameters, SASS classes,
    the error) fold onto more lines instead (rich narrows wrappable columns first)."""
    from dataclasses import replace

    from rich.console import Console
    console = console or Console()
    table = terminal_table(rows)
    natural = {c.name: max([len(c.name)] + [len(c.cell(r)) for r in rows]) for c in table.columns}
    long_texts = [c for c in table.columns if c.max_width]
    need = sum(natural[c.name] if not c.max_width else min(natural[c.name], c.max_width) for c in table.columns)
    if need + 3 * len(table.columns) + 1 > console.width:
        table.columns = [replace(c, no_wrap=False, overflow="fold") if c in long_texts
                         else replace(c, no_wrap=True, min_width=natural[c.name]) for c in table.columns]
    console.print(tables.rich_table(table))
