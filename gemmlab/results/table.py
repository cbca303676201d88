"""The one table model of gemmlab's outputs and one printer per format.

A :class:`Table` is columns (:class:`Column`: a header, the value a row holds, its unit, how the
value is written as text, how it sorts) over rows of any type (record views, comparison pairs,
family points, summary rows). The renderers build tables and never pick or format cells
themselves: the sweep summary (:mod:`gemmlab.results.summary`), ``gemmlab-report``
(:mod:`gemmlab.results.report_tables`, :mod:`gemmlab.results.report_html`), ``gemmlab-compare``
(:mod:`gemmlab.results.compare_render`) and the family view (:mod:`gemmlab.results.families`).
The printers write any table in any format:

- :func:`markdown`: a GitHub-flavoured Markdown table (``|`` in a cell escaped, a line break as a
  space; a right-aligned column's rule is ``---:`` where the table asks for aligned rules);
- :func:`write_csv`: CSV of each column's value at full precision (``""`` for none);
- :func:`html`: an HTML ``<table>`` (escaped; a column with a sort value gives its cells
  ``class="num" data-sort=...`` for the page's sort script);
- :func:`rich_table`: a ``rich`` table for the terminal (cells are plain text, never markup).

The design follows nvbench's (NVIDIA/nvbench: one summary model of named columns with hints, a
printer per format, here written anew). A cell's text is the column's :attr:`Column.text` of the
row when given, else its value written with :attr:`Column.fmt`: ``None`` (and a non-finite float)
is :attr:`Column.missing`, a bool ``yes``/``no``, a float ``format(value, fmt)``, anything else
``str(value)``.
"""

from __future__ import annotations

import csv
import html as _html
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

__all__ = ["Column", "Table", "markdown", "write_csv", "html", "rich_table", "cell_text"]


def _none(_row: Any) -> Any:
    return None


@dataclass(frozen=True)
class Column:
    """One column: its header, the row's value, unit and text, and the hints of each printer.

    Attributes:
        name: the header (Markdown, HTML, terminal).
        value: row -> the value (a number, str, bool or None); CSV writes it as it is.
        fmt: format spec of a float value (``".5f"``); ints and strings are written with ``str``.
        unit: the value's unit (``"ms"``, ``"GFLOP/s"``, ``"B"``, ``"regs/thread"``; ``""`` for a
            count or a text); the HTML header's tooltip says it.
        text: row -> the cell's text, where it is not the formatted value (a composite like
            ``"8192 (0+8192)"``); None: :func:`cell_text` of the value.
        missing: the text of a missing value (None or a non-finite float).
        key: the CSV header (default: ``name``).
        align: ``"left"`` or ``"right"`` (terminal; Markdown where the table aligns its rules).
        sort: row -> the number the HTML cell sorts by (``data-sort``; None: by its text).
        code: the text is code or a path (Markdown: in backticks).
        strong: the cell is emphasised in the rows :attr:`Table.strong` names (Markdown ``**``).
        max_width: the terminal's widest cell (longer ones fold or are cut, ``overflow``).
        min_width: the terminal's narrowest column (None: rich's choice; a narrow terminal shrinks
            the other columns first).
        overflow: ``"fold"`` (wrap onto more lines) or ``"ellipsis"`` (cut) on the terminal.
        no_wrap: one line per cell on the terminal.
        wrap: the HTML cell wraps (a long list, e.g. a SASS histogram) instead of one line.
    """

    name: str
    value: Callable[[Any], Any] = _none
    fmt: str = ""
    unit: str = ""
    text: Callable[[Any], str] | None = None
    missing: str = ""
    key: str | None = None
    align: str = "left"
    sort: Callable[[Any], float | None] | None = None
    code: bool = False
    strong: bool = False
    max_width: int | None = None
    min_width: int | None = None
    overflow: str = "fold"
    no_wrap: bool = False
    wrap: bool = False

    def __post_init__(self):
        if self.align not in ("left", "right"):
            raise ValueError(f"Column {self.name!r}: align must be 'left' or 'right', got {self.align!r}")
        if self.overflow not in ("fold", "ellipsis"):
            raise ValueError(f"Column {self.name!r}: overflow must be 'fold' or 'ellipsis', got {self.overflow!r}")

    @property
    def csv_key(self) -> str:
        """The CSV header: :attr:`key`, else :attr:`name`."""
        return self.key or self.name

    def cell(self, row: Any) -> str:
        """The cell's text for ``row`` (see the module docstring)."""
        if self.text is not None:
            return self.text(row)
        return cell_text(self.value(row), self.fmt, self.missing)


def cell_text(value: Any, fmt: str = "", missing: str = "") -> str:
    """``value`` as a cell's text: ``missing`` for None or a non-finite float, ``yes``/``no`` for a
    bool, ``format(value, fmt)`` for a float, ``str(value)`` otherwise."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format(value, fmt)
    return str(value)


@dataclass
class Table:
    """Columns over rows, with what every printer needs to know about the whole table.

    Attributes:
        columns: the columns, in order.
        rows: the rows (any objects the columns' functions read).
        title: the terminal table's title (other printers leave it to the document around them).
        style: row -> the row's kind (``"failed"``, a verdict...) or None: the HTML row's class,
            and on the terminal the row's style through :attr:`styles`.
        styles: kind -> rich style (a kind not named here, or named with None: unstyled).
        strong: row -> whether the row's :attr:`Column.strong` cells are emphasised (a total row).
        aligned_rules: Markdown writes ``---:`` under right-aligned columns.
    """

    columns: Sequence[Column]
    rows: Sequence[Any]
    title: str = ""
    style: Callable[[Any], str | None] | None = None
    styles: Mapping[str, str | None] = field(default_factory=dict)
    strong: Callable[[Any], bool] | None = None
    aligned_rules: bool = False

    def names(self) -> list[str]:
        """The headers, in order."""
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        """The column headed ``name``.

        Raises:
            KeyError: no column has that header (the message names the headers there are).
        """
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"no column {name!r}; the columns are {', '.join(self.names())}")

    def select(self, names: Iterable[str]) -> "Table":
        """The same table with only the columns headed ``names``, in the table's order."""
        keep = set(names)
        return replace(self, columns=[c for c in self.columns if c.name in keep])

    def cells(self) -> list[list[str]]:
        """Every row's cells as text (:meth:`Column.cell`)."""
        return [[c.cell(r) for c in self.columns] for r in self.rows]

    def kind(self, row: Any) -> str | None:
        """The row's kind (:attr:`style`), or None."""
        return self.style(row) if self.style is not None else None


# --------------------------------------------------------------------------------------------
# printers


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(table: Table) -> str:
    """``table`` as a GitHub-flavoured Markdown table: the header line, the rule (``---``, or
    ``---:`` under a right-aligned column when :attr:`Table.aligned_rules`), one line per row;
    ends with a newline. A cell's ``|`` is escaped, a line break becomes a space; a
    :attr:`Column.code` cell is in backticks, a :attr:`Column.strong` cell of a strong row in
    ``**`` (empty cells stay empty)."""
    cols = table.columns
    lines = ["| " + " | ".join(_md_cell(c.name) for c in cols) + " |",
             "|" + "".join(("---:" if table.aligned_rules and c.align == "right" else "---") + "|" for c in cols)]
    for row in table.rows:
        strong = table.strong(row) if table.strong is not None else False
        cells = []
        for c in cols:
            text = _md_cell(c.cell(row))
            if c.code and text:
                text = f"`{text}`"
            if strong and c.strong and text:
                text = f"**{text}**"
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_csv(table: Table, path: Path | str) -> None:
    """``table`` as CSV in ``path`` (UTF-8): the :attr:`Column.csv_key` headers, then each row's
    :attr:`Column.value` as it is (full precision; ``""`` for None)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([c.csv_key for c in table.columns])
        for row in table.rows:
            writer.writerow(["" if (v := c.value(row)) is None else v for c in table.columns])


def _e(text: Any) -> str:
    return _html.escape("" if text is None else str(text))


def html(table: Table, table_id: str, sortable: bool = True, scroll: bool = True) -> str:
    """``table`` as an HTML ``<table id=table_id>`` (one line per row): escaped headers
    (a unit as the header's tooltip) and cells; a cell of a column with :attr:`Column.sort` is
    ``<td class="num" data-sort="<float>">`` (empty for no value: sorts last), a
    :attr:`Column.wrap` column's cell ``class="wrap"``, a :attr:`Column.code` cell in ``<code>``,
    a row of a kind (:attr:`Table.style`) has it as its class. ``sortable``: the page's script sorts
    it by a click on a header; ``scroll``: wrapped in ``<div class="scroll">``."""
    cls = ' class="sortable"' if sortable else ""
    head = "".join(f'<th scope="col"{_th_title(c)}>{_e(c.name)}</th>' for c in table.columns)
    body = []
    for row in table.rows:
        kind = table.kind(row)
        body.append((f'<tr class="{_e(kind)}">' if kind else "<tr>")
                    + "".join(_td(c, row) for c in table.columns) + "</tr>")
    start, end = ('<div class="scroll">', "</div>") if scroll else ("", "")
    return "\n".join([f'{start}<table id="{_e(table_id)}"{cls}><thead><tr>{head}</tr></thead><tbody>', *body,
                      f"</tbody></table>{end}"])


def _th_title(c: Column) -> str:
    return f' title="{_e(c.unit)}"' if c.unit else ""


def _td(c: Column, row: Any) -> str:
    text = _e(c.cell(row))
    if c.code and text:
        text = f"<code>{text}</code>"
    if c.sort is not None:
        value = c.sort(row)
        sort = "" if value is None or not math.isfinite(float(value)) else _e(repr(float(value)))
        return f'<td class="num" data-sort="{sort}">{text}</td>'
    return f'<td class="wrap">{text}</td>' if c.wrap else f"<td>{text}</td>"


def rich_table(table: Table):
    """``table`` as a ``rich.table.Table`` (print it on a console): the title, each column's
    alignment, width and overflow hints, one row per row in its kind's style (:attr:`Table.styles`);
    every cell and the title plain text (``"[cublas]"`` is no markup)."""
    from rich.table import Table as RichTable
    from rich.text import Text

    out = RichTable(title=Text(table.title, style="table.title") if table.title else None)
    for c in table.columns:
        out.add_column(c.name, justify=c.align, overflow=c.overflow, max_width=c.max_width, min_width=c.min_width,
                       no_wrap=c.no_wrap)
    for row in table.rows:
        kind = table.kind(row)
        style = table.styles.get(kind) if kind is not None else None
        out.add_row(*(Text(c.cell(row)) for c in table.columns), style=style)
    return out
