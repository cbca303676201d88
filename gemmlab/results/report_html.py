"""``report.html`` of ``gemmlab-report``: one self-contained page.

This module owns the page around the report's tables (:mod:`gemmlab.results.report_tables`, printed
by :func:`gemmlab.results.table.html`): the counts, the results table (sortable: a click on a column
header sorts by it, a second click reverses; numbers sort by value, empty cells last), the plots embedded as ``data:image/png;base64``
images, and the failed points with their status and error, then unreadable files and fields that
could not be read. Nothing is loaded from elsewhere: no CDN, no network, style and script inline.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
from pathlib import Path
from typing import Any, Sequence

from gemmlab.results import table as tables
from gemmlab.results.families import verdict_word
from gemmlab.results.report_plots import PLOTS, TITLES
from gemmlab.results.report_tables import counts_table, results_notes, results_table
from gemmlab.results.table import Column, Table
from gemmlab.stages.record_model import Record as Row

CATEGORY_TEXT = {"timed": "valid timed", "compiled": "compiled only", "failed": "failed",
                 "other": "other valid", "unreadable": "unreadable files"}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; vertical-align: top; }
th { background: #f0f0f0; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[aria-sort="ascending"]::after { content: " \\25B2"; }
table.sortable th[aria-sort="descending"]::after { content: " \\25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
#results td { white-space: nowrap; } #results td:last-child { white-space: normal; min-width: 30em; }
#results td.wrap { white-space: normal; min-width: 16em; } #results td.wrap code { word-break: break-all; }
div.scroll { overflow-x: auto; }
tr.failed td, tr.unreadable td { background: #fde8e8; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
code { font-size: 0.95em; }
"""

# Sorting: cells carry data-sort (a number) where the column is numeric; empty cells sort last.
SCRIPT = """
(function () {
  function key(cell) {
    if (!cell) return null;
    var v = cell.getAttribute('data-sort');
    if (v !== null) return v === '' ? null : parseFloat(v);
    var t = cell.textContent.trim();
    return t === '' ? null : t;
  }
  function sortBy(table, col, th) {
    var asc = th.getAttribute('aria-sort') !== 'ascending';
    var heads = table.tHead.rows[0].cells;
    for (var i = 0; i < heads.length; i++) heads[i].removeAttribute('aria-sort');
    th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x === null || y === null) return x === y ? 0 : (x === null ? 1 : -1);
      var c = (typeof x === 'number' && typeof y === 'number') ? x - y
            : String(x).localeCompare(String(y), undefined, {numeric: true});
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  var tables = document.querySelectorAll('table.sortable');
  Array.prototype.forEach.call(tables, function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.tabIndex = 0;
      th.addEventListener('click', function () { sortBy(table, col, th); });
      th.addEventListener('keydown', function (e) { if (e.key === 'Enter') sortBy(table, col, th); });
    });
  });
})();
"""


def _e(text: Any) -> str:
    return html.escape("" if text is None else str(text))


def _md_code(text: str) -> str:
    """A note written in Markdown (``report_tables.results_notes``) as HTML: escaped, `x` as <code>."""
    parts = _e(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _png(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _families(t, png: Path | None) -> list[str]:
    """The shape-suite family section (``t``: :class:`gemmlab.results.families.Tables`)."""
    out = ['<h2 id="families">Shape suite: kernel=auto per family</h2>',
           "<p>The records of <code>kernel=auto</code> whose shapes are in the shape suite: % of the "
           "baseline's speed in the same run, geometric mean per family, issue 10's targets.</p>",
           tables.html(t.families, "families-table", sortable=False),
           '<ul id="families-targets">' + "".join(f"<li>{verdict_word(ok)}: {_e(text)}</li>"
                                                  for ok, text in t.verdicts)
           + "".join(f"<li>{_e(n)}</li>" for n in t.notes) + "</ul>",
           tables.html(t.points, "families-points")]
    if png is not None:
        out.append(f'<figure id="plot-families"><img alt="kernel=auto vs the baseline per shape" '
                   f'src="{_png(png)}"><figcaption>% of the baseline&#39;s speed per shape, coloured by family'
                   "</figcaption></figure>")
    return out


#: the failed points' table of the page
FAILED_COLUMNS = (Column("#", lambda r: r.index, sort=lambda r: r.index), Column("path", lambda r: r.path),
                  Column("kernel", lambda r: r.kernel), Column("params", text=lambda r: r.params_text),
                  Column("shape", text=lambda r: r.shape_text), Column("status", lambda r: r.status),
                  Column("error", lambda r: r.error or "(no error recorded)"))


def page(rows: Sequence[Row], sources: Sequence[str] | None, plots: dict[str, Path], plot_notes: dict[str, str],
         plot_text: dict[str, str], families=None) -> str:
    """The report as one HTML document (a string); ``plots`` maps a plot name to its PNG file,
    which is embedded; ``plot_notes`` says why a plot was skipped, ``plot_text`` what one shows;
    ``families`` (:class:`gemmlab.results.families.Tables`, optional) adds the shape-suite family section
    (its plot: ``plots["families"]`` when drawn)."""
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           "<title>gemmlab report</title>", f"<style>{STYLE}</style>", "</head>", "<body>",
           "<h1>gemmlab report</h1>",
           f"<p>Generated {_e(now)} from {len(rows)} record file(s)"
           + (" under " + ", ".join(f"<code>{_e(s)}</code>" for s in sources) if sources else "") + ".</p>",
           tables.html(counts_table(rows, CATEGORY_TEXT), "counts", sortable=False, scroll=False)]

    if families is not None:
        out += _families(families, plots.get("families"))
    out += ['<h2 id="results-title">Results</h2>',
            *(f"<p>{_md_code(note)}</p>" for note in results_notes(rows)), "<p>Click a column header to sort.</p>",
            tables.html(results_table(rows), "results")]

    out.append('<h2 id="plots">Plots</h2>')
    for p in PLOTS:
        if p in plots:
            caption = TITLES[p] + (f" ({plot_text[p]})" if plot_text.get(p) else "")
            out.append(f'<figure id="plot-{p}"><img alt="{_e(TITLES[p])}" src="{_png(plots[p])}">'
                       f"<figcaption>{_e(caption)}</figcaption></figure>")
        else:
            out.append(f'<p id="plot-{p}">{_e(TITLES[p])}: {_md_code(plot_notes.get(p, "skipped"))}</p>')

    failed = [r for r in rows if r.category == "failed"]
    out.append('<h2 id="failed-title">Failed points</h2>')
    out.append(tables.html(Table(FAILED_COLUMNS, failed), "failed", scroll=False) if failed else "<p>None.</p>")
    unreadable = [r for r in rows if r.category == "unreadable"]
    out.append('<h2 id="unreadable">Unreadable files</h2>')
    out.append("<ul>" + "".join(f"<li><code>{_e(r.path)}</code>: {_e(r.error)}</li>" for r in unreadable) + "</ul>"
               if unreadable else "<p>None.</p>")
    unread = [line for r in rows for line in r.unread_lines()]
    out.append('<h2 id="unread">Fields that could not be read</h2>')
    out.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in unread) + "</ul>" if unread else "<p>None.</p>")
    out += [f"<script>{SCRIPT}</script>", "</body>", "</html>", ""]
    return "\n".join(out)
