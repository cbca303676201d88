"""The one table model (gemmlab.results.table) and its printers: the cell rule, Markdown, CSV,
HTML and the terminal, and that the summary, report, compare and family renderers print through it
(issue 45 item 3). Every test is milliseconds: small hand-made rows, no records read."""

from __future__ import annotations

import ast
import csv
import io
import math
from html.parser import HTMLParser

import pytest

from gemmlab.results import table
from gemmlab.results.table import Column, Table, cell_text

from clirun import REPO_ROOT

ROWS = ({"name": "tiled", "ms": 0.123456, "regs": 79, "ok": True, "err": "a|b\nc"},
        {"name": "naive", "ms": None, "regs": 128, "ok": False, "err": ""},
        {"name": "x<y>", "ms": float("nan"), "regs": None, "ok": None, "err": "[red]not markup[/red]"})


def _table(**kw) -> Table:
    cols = (Column("kernel", lambda r: r["name"], code=True),
            Column("median ms", lambda r: r["ms"], ".3f", "ms", missing="-", align="right", sort=lambda r: r["ms"]),
            Column("regs", lambda r: r["regs"], unit="registers per thread", align="right", strong=True),
            Column("ok", lambda r: r["ok"]), Column("error", lambda r: r["err"], key="error_text"))
    return Table(cols, ROWS, title="t [x]", style=lambda r: "failed" if r["ok"] is False else None,
                 styles={"failed": "red"}, **kw)


def test_cell_text_rule():
    assert cell_text(0.123456, ".3f") == "0.123" and cell_text(3, ".3f") == "3"  # ints as they are
    assert cell_text(None, ".3f", "-") == "-" and cell_text(math.inf, ".1f", "-") == "-"
    assert cell_text(True) == "yes" and cell_text(False) == "no" and cell_text("a") == "a"


def test_column_refuses_unknown_hints():
    with pytest.raises(ValueError, match="align must be 'left' or 'right', got 'centre'"):
        Column("x", align="centre")
    with pytest.raises(ValueError, match="overflow must be"):
        Column("x", overflow="crop")


def test_markdown_escapes_aligns_and_emphasises():
    text = table.markdown(_table(aligned_rules=True, strong=lambda r: r["name"] == "tiled"))
    lines = text.splitlines()
    assert lines[0] == "| kernel | median ms | regs | ok | error |"
    assert lines[1] == "|---|---:|---:|---|---|"
    assert lines[2] == "| `tiled` | 0.123 | **79** | yes | a\\|b c |"  # | escaped, line break a space
    assert lines[3] == "| `naive` | - | 128 | no |  |"  # empty cells stay empty, not emphasised
    assert lines[4] == "| `x<y>` | - |  |  | [red]not markup[/red] |"
    assert text.endswith("\n") and len(lines) == 5
    assert table.markdown(_table()).splitlines()[1] == "|---|---|---|---|---|"  # rules unaligned unless asked


def test_csv_writes_values_at_full_precision(tmp_path):
    table.write_csv(_table(), tmp_path / "t.csv")
    rows = list(csv.reader(open(tmp_path / "t.csv", newline="", encoding="utf-8")))
    assert rows[0] == ["kernel", "median ms", "regs", "ok", "error_text"]
    assert rows[1] == ["tiled", "0.123456", "79", "True", "a|b\nc"]
    assert rows[2] == ["naive", "", "128", "False", ""]


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells, self.trs, self.ths = [], [], []

    def handle_starttag(self, tag, attrs):
        if tag == "td":
            self.cells.append(dict(attrs))
        elif tag == "tr":
            self.trs.append(dict(attrs))
        elif tag == "th":
            self.ths.append(dict(attrs))


def test_html_escapes_sorts_by_value_and_marks_rows():
    text = table.html(_table(), "t", sortable=True)
    assert text.startswith('<div class="scroll"><table id="t" class="sortable"><thead>') and text.endswith("</div>")
    assert "x&lt;y&gt;" in text and "<x<y>" not in text and "<code>tiled</code>" in text
    parser = _Cells()
    parser.feed(text)
    assert parser.ths[1] == {"scope": "col", "title": "ms"} and parser.ths[0] == {"scope": "col"}
    assert parser.cells[1] == {"class": "num", "data-sort": "0.123456"}
    assert parser.cells[6] == {"class": "num", "data-sort": ""} and parser.cells[11]["data-sort"] == ""  # none, NaN
    assert parser.trs[1:] == [{}, {"class": "failed"}, {}]
    plain = table.html(_table(), "t", sortable=False, scroll=False)
    assert plain.startswith('<table id="t"><thead>') and plain.count("\n<tr") == len(ROWS)  # a line per row


def test_rich_table_is_plain_text_with_hints():
    from rich.console import Console
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(table.rich_table(_table()))
    text = out.getvalue()
    assert "t [x]" in text and "[red]not markup[/red]" in text and "0.123" in text
    rich = table.rich_table(_table())
    assert [c.justify for c in rich.columns] == ["left", "right", "right", "left", "left"]
    assert rich.rows[1].style == "red" and rich.rows[0].style is None
    odd = table.rich_table(Table(_table().columns, ROWS, style=lambda r: "no such style"))
    assert [r.style for r in odd.rows] == [None, None, None]  # a kind without a style is unstyled


def test_select_and_column_lookup():
    t = _table()
    assert t.select(["error", "kernel"]).names() == ["kernel", "error"]
    with pytest.raises(KeyError, match="no column 'gflops'; the columns are kernel, median ms"):
        t.column("gflops")


RENDERERS = ("summary", "report_tables", "report_html", "compare_render", "families")


@pytest.mark.parametrize("name", RENDERERS)
def test_renderers_print_through_the_table_model(name):
    """No renderer writes a Markdown rule, a CSV writer or a rich table of its own: each builds a
    :class:`Table` and prints it with gemmlab.results.table's printers."""
    path = REPO_ROOT / "gemmlab" / "results" / f"{name}.py"
    source = path.read_text()
    tree = ast.parse(source)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert {"Table", "Column"} <= imported
    assert "csv" not in {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "rich.table" not in {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert '"---' not in source and "'---" not in source and "<td" not in source and "<th" not in source
