"""``gemmlab-report`` on real H200 records copied into a mixed layout (CPU only, no GPU needed)."""

from __future__ import annotations

import base64
import csv
import json
import re
import shutil
import subprocess
import warnings
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gemmlab.results import report

from clirun import REPO_ROOT  # noqa: E402  (the checkout, defined once)
FIXTURES = REPO_ROOT / "tests" / "data" / "h200"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FAILED = "broken-tiled_drop_last_chunk"


def _layout(root: Path) -> tuple[Path, Path]:
    """A sweep-like directory (``0/``, ``1/``, ... plus summary files, one job nested a level
    deeper) holding 12 fixture records, and a single run directory holding the 13th."""
    names = sorted(p.name for p in FIXTURES.iterdir() if (p / "result.json").is_file())
    assert len(names) == 13 and FAILED in names
    sweep = root / "multirun" / "2026-11-29" / "15-20-00"
    single = root / "single" / "tiled-256"
    jobs = [n for n in names if n != "tiled-256"]
    for i, name in enumerate(jobs):
        job = sweep / str(i) if i != 5 else sweep / "nested" / str(i)
        job.mkdir(parents=True)
        shutil.copy(FIXTURES / name / "result.json", job / "result.json")
        (job / f"{name}.log").write_text("log\n")
    (sweep / "summary.csv").write_text("point,kernel\n")
    (sweep / "summary.md").write_text("| point |\n")
    single.mkdir(parents=True)
    shutil.copy(FIXTURES / "tiled-256" / "result.json", single / "result.json")
    return sweep, single


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The fixture layout and one report written from it (shared: plotting takes ~1 s)."""
    root = tmp_path_factory.mktemp("report")
    sweep, single = _layout(root)
    rows = report.collect([sweep, single])
    written = report.write_report(rows, root / "out", sources=[str(sweep), str(single)])
    return {"root": root, "sweep": sweep, "single": single, "rows": rows, "written": written}


@pytest.fixture
def report_cli(cli):
    """``report_cli(args, cwd)``: ``python -m gemmlab.results.report ARGS`` (conftest's ``cli``)."""
    return lambda args, cwd: cli(args, cwd, module="gemmlab.results.report")


def test_collects_every_record_with_the_failed_point(built):
    rows = built["rows"]
    assert len(rows) == 13
    assert [r.index for r in rows] == list(range(1, 14))
    failed = [r for r in rows if r.kernel == "tiled_drop_last_chunk"]
    assert len(failed) == 1
    bad = failed[0]
    assert bad.status == "wrong_result" and bad.category == "failed"
    assert bad.error.startswith("wrong result from tiled_drop_last_chunk: FAIL (bound)")
    assert bad.median_ms is None and bad.max_abs_error == pytest.approx(4.07205416897592)
    assert report.counts(rows) == {"timed": 12, "compiled": 0, "failed": 1, "other": 0, "unreadable": 0}
    assert not any(r.unread for r in rows), [r.unread_lines() for r in rows if r.unread]


def test_fields_read_from_a_record(built):
    rows = {(r.kernel, r.M): r for r in built["rows"]}
    tiled = rows[("tiled", 1024)]
    assert (tiled.M, tiled.N, tiled.K) == (1024, 1024, 1024)
    assert tiled.params == {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2}
    assert tiled.median_ms == pytest.approx(0.09032720029354097)
    assert tiled.gflops == pytest.approx(23774.495844233094)
    assert tiled.protocol == "graph" and len(tiled.samples_ms) == 10 and tiled.throttled_samples == 0
    assert tiled.baseline == "cublas" and tiled.ratio_to_baseline == pytest.approx(1.6242160269689674)
    assert tiled.ratio_to_baseline_gflops == pytest.approx(0.6156816478816252)
    assert tiled.arithmetic_intensity == pytest.approx(170.667)
    assert tiled.device == "NVIDIA H200" and tiled.verification_rule == "bound"
    assert rows[("cublas", 1024)].baseline is None and rows[("cublas", 1024)].ratio_to_baseline is None


def test_csv_columns_and_rows(built):
    with open(built["written"]["csv"], newline="") as f:
        reader = csv.DictReader(f)
        table = list(reader)
    for col in ("path", "kernel", "params", "M", "N", "K", "device", "status", "median_ms", "gflops", "protocol",
                "ratio_to_baseline", "baseline", "max_abs_error", "verification_rule", "throttled_samples", "error"):
        assert col in reader.fieldnames, col
    assert len(table) == 13
    bad = [r for r in table if r["status"] == "wrong_result"]
    assert len(bad) == 1 and bad[0]["error"].startswith("wrong result") and bad[0]["median_ms"] == ""
    tiled = next(r for r in table if r["kernel"] == "tiled" and r["M"] == "4096")
    assert float(tiled["gflops"]) == pytest.approx(25460.65827289421)
    assert tiled["params"] == "BM=64 BN=64 BK=16 TM=8 TN=2" and tiled["baseline"] == "cublas"
    assert any(r["path"].startswith(str(built["single"])) for r in table)


def test_four_pngs(built):
    written = built["written"]
    for name in ("gflops_vs_size", "ratio_to_baseline", "roofline", "timing_distribution"):
        path = written[name]
        assert path.name == f"{name}.png" and path.parent == built["root"] / "out"
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC, name
        assert len(data) > 10_000, (name, len(data))


def test_markdown_counts_and_failed_point(built):
    md = built["written"]["md"].read_text()
    assert "12 valid timed, 0 compiled only, 1 failed" in md
    assert "wrong_result: wrong result from tiled_drop_last_chunk" in md
    assert "![roofline](roofline.png)" in md
    assert md.count("\n| ") >= 13 + 2  # counts table row + 13 result rows
    with pytest.raises(FileExistsError):  # never overwrites a report
        report.write_report(built["rows"], built["root"] / "out")


def _record(name: str) -> dict:
    return json.loads((FIXTURES / name / "result.json").read_text())


def test_old_schema_corrupt_and_compiled(tmp_path):
    old = _record("tiled-1024")
    old["schema"] = "gemmlab.result/0"
    old["timings"] = old.pop("timing")  # the old name
    del old["roofline"]
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "result.json").write_text(json.dumps(old))
    legacy = {"status": "ok", "config": {"kernel": {"name": "naive", "BX": 8}, "shape": [32, 32, 32]}}
    (tmp_path / "legacy.json").write_text(json.dumps(legacy))  # no schema, a file given by name
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "result.json").write_text('{"schema": "gemmlab.result/1", "status": ')
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "result.json").write_text("[1, 2]")
    compiled = _record("tiled-256")
    for key in ("timing", "roofline", "baseline", "ratio_to_baseline", "verification", "launch_floor",
                "inputs", "guard_bands", "nets_fired", "inputs_unchanged", "repeat_stable", "occupancy"):
        compiled.pop(key, None)
    compiled.update(status="compiled", mode="compile", device={"name": "no GPU (compile only)", "arch": "sm_90"})
    (tmp_path / "compile" / "0").mkdir(parents=True)
    (tmp_path / "compile" / "0" / "result.json").write_text(json.dumps(compiled))

    rows = report.collect([tmp_path / "old", tmp_path / "legacy.json", tmp_path / "corrupt", tmp_path / "list",
                           tmp_path / "compile"])
    assert len(rows) == 5
    by = {Path(r.path).parent.name if r.path.endswith("result.json") else Path(r.path).name: r for r in rows}
    o = by["old"]
    assert o.status == "ok" and o.kernel == "tiled" and (o.M, o.N, o.K) == (1024, 1024, 1024)
    assert o.median_ms is None and o.category == "other"
    assert "timing.median_ms" in o.unread
    assert f"{o.path}: schema gemmlab.result/0: cannot read timing.median_ms" in o.unread_lines()
    lg = by["legacy.json"]
    assert lg.kernel == "naive" and lg.params == {"BX": 8} and (lg.M, lg.N, lg.K) == (32, 32, 32)
    assert any(line.endswith("schema missing: cannot read timing.median_ms") for line in lg.unread_lines())
    assert by["corrupt"].status == "unreadable" and "not valid JSON" in by["corrupt"].error
    assert by["list"].status == "unreadable" and "not a JSON object" in by["list"].error
    c = by["0"]
    assert c.status == "compiled" and c.category == "compiled" and not c.unread

    written = report.write_report(rows, tmp_path / "out")
    md = written["md"].read_text()
    assert f"{o.path}: schema gemmlab.result/0: cannot read timing.median_ms" in md
    assert "## Unreadable files" in md and f"`{by['corrupt'].path}`: not valid JSON" in md
    assert "0 valid timed, 1 compiled only, 0 failed, 2 other valid, 2 unreadable" in md
    # nothing timed: the plots are skipped and report.md says why
    assert set(written) == {"csv", "md", "html"}  # report.html is always written
    assert "`ratio_to_baseline.png`: skipped: no point has a baseline" in md
    assert "`gflops_vs_size.png`: skipped: no valid timed point" in md
    with open(written["csv"], newline="") as f:
        assert len(list(csv.DictReader(f))) == 5


def test_odd_values_do_not_crash(tmp_path):
    rec = _record("naive-256")
    rec["timing"]["median_ms"] = "fast"
    rec["timing"]["samples_ms"] = [0.01, None, 0.02]
    rec["shape"] = {"M": 256, "N": "x", "K": 256}
    rec["ratio_to_baseline"] = [1, 2]
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "result.json").write_text(json.dumps(rec))
    (row,) = report.collect([tmp_path])
    assert row.kernel == "naive" and row.median_ms is None and row.samples_ms == [0.01, 0.02]
    text = " ".join(row.unread)
    assert "timing.median_ms (not a finite number" in text and "ratio_to_baseline (not an object" in text
    assert (row.M, row.N, row.K) == (256, 256, 256)  # from config.shape, and said so
    assert "shape (taken from config.shape)" in row.unread


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm", "disk full"])
def test_an_unfinished_report_leaves_no_folder_in_the_way(tmp_path, monkeypatch, stop):
    """A report stopped while it writes (Ctrl-C, SIGTERM, a full disk) removes its new --out folder,
    so the same command works again (a new-user trial's retry was refused: "already exists");
    an interrupt says so in its text (the console script prints it, exit 130/143), a write error is
    one line and exit 1."""
    import errno

    from gemmlab.errors import Terminated
    sweep, _ = _layout(tmp_path / "data")
    out = tmp_path / "new" / "a" / "rep"  # the folders above it are the command's too

    def stopped(rows, folder, **kwargs):
        (folder / "report.csv").write_text("partial")
        if stop == "disk full":
            raise OSError(errno.ENOSPC, "No space left on device", str(folder / "report.md"))
        raise KeyboardInterrupt if stop == "ctrl-c" else Terminated

    monkeypatch.setattr(report, "write_report", stopped)
    if stop == "disk full":
        assert report.main([str(sweep), "--out", str(out)]) == 1
    else:
        with pytest.raises(KeyboardInterrupt) as interrupt:
            report.main([str(sweep), "--out", str(out)])
        assert isinstance(interrupt.value, Terminated) == (stop == "sigterm")
        assert interrupt.value.args == (f"nothing was written (the partial report {out} was removed)",)
    assert not out.exists() and not (tmp_path / "new").exists()

    def quick(rows, folder, **kwargs):  # the retry's own report (the real one: test_cli_exit_codes)
        (folder / "report.md").write_text("# report")
        return {"md": folder / "report.md"}
    monkeypatch.setattr(report, "write_report", quick)
    assert report.main([str(sweep), "--out", str(out)]) == 0 and (out / "report.md").is_file()


def test_cli_exit_codes(tmp_path, report_cli):
    sweep, single = _layout(tmp_path / "data")
    out = tmp_path / "rep"
    proc = report_cli([sweep, single, "--out", out], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gemmlab report: 13 records" in proc.stdout and str(out / "report.md") in proc.stdout
    assert "wrong_result" in proc.stdout
    for name in ("report.csv", "report.md", "gflops_vs_size.png", "ratio_to_baseline.png", "roofline.png",
                 "timing_distribution.png"):
        assert (out / name).is_file(), name

    # refusing an existing --out directory: one line, exit 2, nothing touched
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    proc = report_cli([sweep, "--out", out], tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"gemmlab-report: error: {out}: already exists")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before

    # a path that does not exist: one line, no traceback, no report directory
    missing = tmp_path / "nope"
    proc = report_cli([sweep, missing, "--out", tmp_path / "rep2"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"gemmlab-report: error: {missing}: no such file or directory\n"
    assert not (tmp_path / "rep2").exists()

    # no result.json anywhere: exit 2 (bad input, as gemmlab-compare), no report directory
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    proc = report_cli([tmp_path / "empty", "--out", tmp_path / "rep3"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("gemmlab-report: error: no result.json found") and "Traceback" not in proc.stderr
    assert not (tmp_path / "rep3").exists()


def test_cli_default_out_dir(tmp_path, report_cli):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(FIXTURES / FAILED / "result.json", run / "result.json")
    assert report.main([str(run / "result.json"), "--out", str(tmp_path / "a")]) == 0
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    first = report_cli([run], cwd)
    second = report_cli([run], cwd)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    made = sorted(p.name for p in cwd.iterdir())
    assert len(made) == 2 and all(m.startswith("gemmlab-report-") for m in made)  # never the same directory
    md = (cwd / made[0] / "report.md").read_text()
    assert "0 valid timed, 0 compiled only, 1 failed" in md


# --- report.html (issue 12 item 4) ---------------------------------------------------------------

class _Table(HTMLParser):
    """Rows of one ``<table id=...>`` (each cell as (text, data-sort)) and its header attributes."""

    def __init__(self, table_id):
        super().__init__()
        self.id, self.depth, self.rows, self.heads, self.cell = table_id, 0, [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and (self.depth or attrs.get("id") == self.id):
            self.depth += 1
        elif self.depth and tag == "tr":
            self.rows.append([])
        elif self.depth and tag in ("td", "th"):
            self.cell = ["", attrs.get("data-sort")]
            if tag == "th":
                self.heads.append(attrs)

    def handle_endtag(self, tag):
        if tag == "table" and self.depth:
            self.depth -= 1
        elif self.depth and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append((self.cell[0].strip(), self.cell[1]))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[0] += data


def _table(text, table_id):
    parser = _Table(table_id)
    parser.feed(text)
    head, *body = parser.rows
    return [c for c, _ in head], body, parser.heads


def test_html_is_self_contained_with_tables_plots_and_failed_points(built):
    page = built["written"]["html"]
    assert page.name == "report.html" and page.parent == built["root"] / "out"
    text = page.read_text()
    assert re.findall(r'(?:src|href)="(?!data:image/png;base64,)[^"]*"', text) == []  # nothing from elsewhere
    assert "http://" not in text and "https://" not in text
    for data in re.findall(r'src="data:image/png;base64,([^"]+)"', text):
        assert base64.b64decode(data)[:8] == PNG_MAGIC
    assert len(re.findall(r'<img alt=', text)) == 4
    head, body, _ = _table(text, "results")
    assert head[:3] == ["#", "path", "kernel"] and len(body) == 13
    head, body, _ = _table(text, "failed")
    (failed,) = body
    cells = dict(zip(head, (c for c, _ in failed)))
    assert cells["status"] == "wrong_result" and cells["kernel"] == "tiled_drop_last_chunk"
    assert cells["error"].startswith("wrong result from tiled_drop_last_chunk: FAIL (bound)")


def _chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                None)


CLICK = """<script>
var th = Array.prototype.filter.call(document.querySelectorAll('#results th'),
                                     function (h) { return h.textContent === '%s'; })[0];
for (var i = 0; i < %d; i++) th.click();
</script></body>"""


@pytest.mark.skipif(_chromium() is None, reason="no headless browser: install Debian's chromium package "
                    "(apt-get install chromium) to check report.html in a real browser")
@pytest.mark.parametrize("column, clicks", [("GFLOP/s", 2), ("kernel", 1)])
def test_html_table_sorts_in_a_headless_browser(built, tmp_path, column, clicks):
    """Chromium renders report.html, a script clicks a column header, the dumped DOM is sorted."""
    page = built["written"]["html"].read_text()
    assert page.count("</body>") == 1
    clicked = tmp_path / "clicked.html"
    clicked.write_text(page.replace("</body>", CLICK % (column, clicks)))
    proc = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--no-first-run", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", clicked.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    head, body, heads = _table(proc.stdout, "results")
    col = head.index(column)
    assert heads[col].get("aria-sort") == ("ascending" if clicks == 1 else "descending")
    assert len(body) == 13
    if column == "GFLOP/s":
        values = [float(r[col][1]) for r in body if r[col][1]]
        assert len(values) == 12 and values == sorted(values, reverse=clicks == 2)
        assert body[-1][col] == ("", "")  # the failed point has no GFLOP/s: last either way
        original = _table(page, "results")[1]
        assert [r[col][1] for r in original if r[col][1]] != [str(v) for v in sorted(values)]  # the click sorted
    else:
        names = [r[col][0] for r in body]
        assert names == sorted(names)


SHAPES_H200 = REPO_ROOT / "docs" / "results" / "shapes-h200.jsonl.xz"  # the run's records archive


def test_no_family_section_without_kernel_auto_records(built):
    """The fixture records are fixed kernels (no ``dispatch`` field): no family section, no families.png."""
    assert "families" not in built["written"] and not (built["root"] / "out" / "families.png").exists()
    assert "## Shape suite" not in built["written"]["md"].read_text()
    assert 'id="families"' not in built["written"]["html"].read_text()


def test_family_section_from_the_h200_shapes_records(tmp_path):
    """The committed H200 run (45 kernel=auto records of the suite beside 69 tune records of fixed
    kernels): the report adds the per-family section with issue 10's verdicts over the 45 auto
    points only, in report.md and report.html, and families.png. (The BF16 pass beside them,
    shapes-h200.jsonl.xz/bf16-pass1, is another precision: the report is given one precision's records.)"""
    rows = report.collect([SHAPES_H200 / "auto", SHAPES_H200 / "tune"])
    assert len(rows) == 114
    with warnings.catch_warnings():  # a layout matplotlib gives up on (its UserWarning) fails that plot
        warnings.simplefilter("error", UserWarning)
        written = report.write_report(rows, tmp_path / "out")
    assert written["families"].read_bytes()[:8] == PNG_MAGIC
    md = written["md"].read_text()
    section = md.split("## Shape suite: kernel=auto per family")[1].split("## Results")[0]
    assert "| **all** | 45 | 45 | **103.3** | 70.4 |  |  |" in section  # empty cells as every table's (table.markdown)
    assert "| k_heavy | 3 | 3 | 88.5 | 87.9 (128x1024x32768) | 1.14 | splitk_warptile x3 |" in section
    assert "- PASS: every point valid (45/45)" in section and "- PASS: geomean >= 90% of baseline" in section
    assert ("| decode | 1x4096x4096 | gemv_rows | MT=1 NT=16 KW=8 U=8 | table | ok | 0.01950 | 0.01784 | 91.5 |"
            in section)
    assert ("| square | 1024x1024x1024 | streamk | BM=128 BN=128 BK=8 WM=32 WN=64 TM=8 TN=8 MINB=2 WPS=2 | "
            "rule: medium |") in section
    assert "![kernel=auto vs the baseline per shape](families.png)" in section
    shape_rows = [line for line in section.splitlines() if line.count(" | ") == 8 and not line.startswith("| family")]
    assert len(shape_rows) == 45  # the 69 tune records (no dispatch field) are not points of the section
    page = written["html"].read_text()
    head, body, _ = _table(page, "families-table")
    assert head[:4] == ["family", "points", "valid", "geomean % of cublas"] and len(body) == 10
    assert [c for c, _ in body[-1]][:4] == ["all", "45", "45", "103.3"]
    head, body, _ = _table(page, "families-points")
    assert len(body) == 45 and head[4] == "chosen by"
    assert len(re.findall(r"<img alt=", page)) == 5


def test_foreign_json_in_the_tree_is_skipped_not_failed(tmp_path, report_cli, plots_not_drawn):
    """A ``result.json`` that is no gemmlab record (``{}``, another tool's JSON) is skipped with a
    one-line notice naming it and counted nowhere; a damaged record (not JSON, not an object)
    and an older gemmlab record without ``schema`` still count. (The notices and tables only:
    plots not drawn.)"""
    sweep, single = _layout(tmp_path / "data")
    foreign = {"empty": {}, "tool": {"name": "bench", "version": 3, "results": [1, 2]},
               "other": {"schema": "other-tool/2", "status": "ok", "config": {}}}
    for name, rec in foreign.items():
        (sweep / "extra" / name).mkdir(parents=True)
        (sweep / "extra" / name / "result.json").write_text(json.dumps(rec))
    skipped: list = []
    rows = report.collect([sweep, single], skipped)
    assert len(rows) == 13 and [r.index for r in rows] == list(range(1, 14))
    assert sorted(Path(r.path).parent.name for r in skipped) == sorted(foreign)
    assert all(r.foreign for r in skipped)
    assert report.counts(rows)["failed"] == 1  # the one real failed point only

    out = tmp_path / "rep"
    proc = report_cli([sweep, single, "--out", out], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gemmlab report: 13 records" in proc.stdout
    notices = proc.stderr.splitlines()
    assert len(notices) == 3 and "Traceback" not in proc.stderr
    for name in foreign:
        path = sweep / "extra" / name / "result.json"
        assert sum(line.startswith(f"gemmlab-report: notice: skipped {path}: not a gemmlab record (")
                   for line in notices) == 1, (name, notices)
    md = (out / "report.md").read_text()
    assert "extra" not in md and "1 failed" in md

    # only foreign JSON: no record, exit 2 as for an empty tree
    proc = report_cli([sweep / "extra", "--out", tmp_path / "rep2"], tmp_path)
    assert proc.returncode == 2 and "no result.json found" in proc.stderr
    assert not (tmp_path / "rep2").exists()


def test_a_folder_and_a_link_to_nowhere_named_result_json_are_named_and_counted_as_compare_does(
        tmp_path, report_cli, plots_not_drawn, odd_result_entries):
    """A new-user trial: a folder named result.json was passed over in silence and a link to
    nowhere was "No such file or directory"; each is now an unreadable row with one reason, named
    in a notice, counted as unreadable (gemmlab-compare names and counts them the same:
    tests/test_compare.py)."""
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "naive-256", data / "naive-256")
    odd = odd_result_entries(data)
    rows = report.collect([data])
    unreadable = {r.path: r.error for r in rows if r.category == "unreadable"}
    assert unreadable == {str(odd["folder"]): "cannot read the file: a folder",
                          str(odd["link"]): f"cannot read the file: a link to nowhere (-> {data / 'nowhere.json'})"}
    assert report.counts(rows)["unreadable"] == 2 and report.counts(rows)["timed"] == 1
    out = tmp_path / "rep"
    proc = report_cli([data, "--out", out], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [f"gemmlab-report: notice: unreadable {path}: {why} (listed and counted as "
                                        "unreadable)" for path, why in unreadable.items()], proc.stderr
    md = (out / "report.md").read_text()
    assert "1 valid timed" in md and "2 unreadable" in md
    assert f"- `{odd['folder']}`: cannot read the file: a folder" in md


def test_console_table_keeps_square_brackets(tmp_path):
    """Cells are plain text, not rich markup: ``gemmlab[cublas]`` in an error stays whole."""
    import io

    from rich.console import Console
    rec = {**_record("naive-256"), "status": "unavailable", "valid": False,
           "error": "needs gemmlab[cublas]"}
    (tmp_path / "result.json").write_text(json.dumps(rec))
    buf = io.StringIO()
    report.print_table(report.collect([tmp_path]), console=Console(file=buf, width=250))
    assert "gemmlab[cublas]" in buf.getvalue()


def test_precision_and_layout_columns_only_for_a_mixed_set(tmp_path, plots_not_drawn):
    """fp32 row/row records keep report.md/.csv/.html as they were; a set with another precision
    or layout names both per row. (The tables only: plots not drawn.)"""
    plain = _record("naive-256")
    (tmp_path / "in" / "a").mkdir(parents=True)
    (tmp_path / "in" / "a" / "result.json").write_text(json.dumps(plain))
    report.write_report(report.collect([tmp_path / "in"]), tmp_path / "r1")
    assert "layout" not in (tmp_path / "r1" / "report.csv").read_text().splitlines()[0]
    assert "layout a/b" not in (tmp_path / "r1" / "report.md").read_text()
    other = json.loads(json.dumps(plain))
    other["config"]["precision"] = "bf16"
    other["config"]["layout"] = {"a": "row", "b": "col"}
    (tmp_path / "in" / "b").mkdir()
    (tmp_path / "in" / "b" / "result.json").write_text(json.dumps(other))
    report.write_report(report.collect([tmp_path / "in"]), tmp_path / "r2")
    with open(tmp_path / "r2" / "report.csv") as f:
        got = [(r["precision"], r["layout"]) for r in csv.DictReader(f)]
    assert got == [("fp32", "row/row"), ("bf16", "row/col")]
    md = (tmp_path / "r2" / "report.md").read_text()
    assert "| precision | layout a/b |" in md and "| bf16 | row/col |" in md
    assert ">layout a/b</th>" in (tmp_path / "r2" / "report.html").read_text()


@pytest.mark.parametrize("argv", [[], ["--nope", "x"]])
def test_argparse_errors_are_one_line(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        report.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("gemmlab-report: error: "), err


def test_hundreds_of_series_name_the_best_in_the_legend(tmp_path, monkeypatch):
    """A tuning sweep is one series per parameter set. Beyond report_plots.LEGEND_MAX series the
    legend names those with the highest peak GFLOP/s and one grey entry stands for the rest, so the
    figure keeps the height of LEGEND_MAX + 1 entries (120 series made the GFLOP/s plot 3300 px tall).
    The three plots with a legend are drawn, with no layout warning; the timing distribution (no
    legend, a box per point: the costliest plot of 120 points, ~40% of the test's time) is not
    drawn here (it is, for the 114 records of docs/results/shapes-h200, with layout warnings as
    errors: test_family_section_from_the_h200_shapes_records)."""
    import copy
    import struct

    from gemmlab.results import report_plots
    from gemmlab.stages.record_model import view
    monkeypatch.setattr(report_plots, "PLOTS", ("gflops_vs_size", "ratio_to_baseline", "roofline"))
    base = _record("tiled-1024")
    rows = []
    for i in range(120):
        rec = copy.deepcopy(base)
        rec["kernel"]["params"]["TM"] = i + 1
        rec["timing"]["gflops"] = 1000.0 + 37.0 * ((i * 53) % 120)  # every series a different peak
        rows.append(view(rec, tmp_path / str(i) / "result.json"))
    styles = report_plots._series_styles(rows)["styles"]
    named = {label for label, s in styles.items() if s["named"]}
    best = sorted(rows, key=lambda r: -r.gflops)[:report_plots.LEGEND_MAX]
    assert len(styles) == 120 and len(named) == report_plots.LEGEND_MAX
    assert named == {report_plots._series_key(r, set()) for r in best}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a layout matplotlib gives up on fails the test
        written, notes, text = report_plots.draw(rows, tmp_path)
    assert sorted(written) == ["gflops_vs_size", "ratio_to_baseline", "roofline"], notes
    assert text["gflops_vs_size"] == "120 points, 120 series", notes
    height = struct.unpack(">I", written["gflops_vs_size"].read_bytes()[20:24])[0]
    assert height == round(report_plots._legend_height(report_plots.LEGEND_MAX + 1) * 110), height


def test_the_roofline_says_its_fp32_peak_is_no_ceiling_for_tensor_core_points(tmp_path, monkeypatch):
    """A new-user trial: bf16 points sat far above the roofline's FP32 peak with no word (the
    record's roofline.note says it, the plot did not); the plot's notes now say it. (The roofline
    only is drawn: the other three plots, about 0.2 CPU s each, say nothing of it.)"""
    from gemmlab.results import report_plots
    from gemmlab.stages.record_model import view
    monkeypatch.setattr(report_plots, "PLOTS", ("roofline",))
    fp32 = _record("tiled-1024")
    bf16 = json.loads(json.dumps(fp32))
    bf16["config"]["precision"] = "bf16"
    rows = [view(fp32, tmp_path / "a" / "result.json"), view(bf16, tmp_path / "b" / "result.json")]
    written, notes, text = report_plots.draw(rows, tmp_path)
    assert "bf16 points run on tensor cores: the FP32 peak line (CUDA cores) is not their ceiling" in text["roofline"]
    (tmp_path / "fp32").mkdir()
    written, notes, text = report_plots.draw(rows[:1], tmp_path / "fp32")
    assert "roofline" in written and "tensor cores" not in text["roofline"], text


def test_records_of_another_schema_are_said_once(tmp_path, capsys, plots_not_drawn):
    """A new-user trial: records whose schema was gemmlab.result/2, /0 or none were read silently
    (only report.csv's schema column showed it; gemmlab-compare refuses them): one notice now
    counts them by schema. (The notice is said before anything is written: plots not drawn.)"""
    for name, schema in (("naive-256", "gemmlab.result/2"), ("tiled-256", None), ("cublas-256", report.SCHEMA)):
        rec = _record(name)
        if schema is None:
            rec.pop("schema")
        else:
            rec["schema"] = schema
        (tmp_path / "in" / name).mkdir(parents=True)
        (tmp_path / "in" / name / "result.json").write_text(json.dumps(rec))
    assert report.main([str(tmp_path / "in"), "--out", str(tmp_path / "out")]) == 0
    notices = [line for line in capsys.readouterr().err.splitlines() if "schema" in line]
    assert notices == [f"gemmlab-report: notice: 2 records of another schema than this gemmlab's {report.SCHEMA} "
                       "(gemmlab.result/2 x1, none x1): read with the record model's fallbacks; report.md lists the "
                       "fields that could not be read"], notices


def _md_table(md: str, heading: str = "## Results") -> list[dict[str, str]]:
    """The first Markdown table after ``heading`` as one dict per row (header → cell text)."""
    lines = [line for line in md.split(heading, 1)[1].split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split(" | ")]
    return [dict(zip(head, (c.strip() for c in line.strip("|").split(" | ")))) for line in lines[2:]]


def test_compile_mode_report_shows_what_compile_mode_measures(seed_lab_sweep, tmp_path, report_cli, plots_not_drawn):
    """Issue 45 (tried as a new user would): ``gemmlab-report`` of a ``mode=compile`` sweep (the only
    kind without a GPU) showed empty timing columns and none of what compile mode measures. The
    terminal table, report.md, report.csv and report.html now show registers, spills, local memory,
    shared memory, occupancy, waves and the SASS classes of each point, read from its record, and
    leave out the timing columns; a set that mixes compiled and timed points keeps both.
    (conftest's session sweep ``experiment=seed_lab mode=compile``; the tables only.)"""
    proc, _, sweep = seed_lab_sweep
    assert sweep is not None, proc.stdout + proc.stderr
    out = report_cli([str(sweep), "--out", str(tmp_path / "rep")], tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    head = next(line for line in out.stdout.splitlines() if "kernel" in line and "status" in line)
    for title in ("regs", "spills", "smem B", "occupancy", "waves", "SASS classes"):
        assert title in head, out.stdout
    assert "median ms" not in head and "GFLOP/s" not in head
    assert "FFMA present" in out.stdout  # naive and tiled declare FFMA (gemmlab.gpu.sass_check)

    md = (tmp_path / "rep" / "report.md").read_text()
    table = _md_table(md)
    assert len(table) == 6 and not {"median ms", "GFLOP/s", "time / baseline", "verification"} & set(table[0])
    assert "Compiled only (`mode=compile`, no GPU)" in md and "`time / baseline` =" not in md
    with open(tmp_path / "rep" / "report.csv", newline="") as f:
        csv_rows = list(csv.DictReader(f))
    for cells, line in zip(table, csv_rows):
        raw = json.loads(Path(line["path"]).read_text())
        res, occ = raw["compile"]["resources"], raw["occupancy"]
        smem = res["static_shared_bytes"] + raw["launch"]["shared_bytes"]
        hist = {k: v for k, v in raw["compile"]["sass"]["histogram"].items() if v and k != "total"}
        check = raw["sass_check"]
        assert cells["registers"] == line["registers"] == str(res["registers"])
        assert cells["spills st/ld B"] == f"{res['spill_store_bytes']}/{res['spill_load_bytes']}"
        assert cells["local B"] == line["stack_frame_bytes"] == str(res["stack_frame_bytes"])
        assert cells["smem B"] == str(smem) and line["static_shared_bytes"] == str(res["static_shared_bytes"])
        assert cells["occupancy"] == f"{occ['theoretical_occupancy']:.2f}" and cells["waves"] == f"{occ['waves']:.2f}"
        assert cells["blocks/SM"] == line["blocks_per_sm"] == str(occ["max_active_blocks_per_sm"])
        assert cells["SASS classes"] == line["sass_classes"] == (
            f"{', '.join(check['declared'])} present ({', '.join(f'{c} {n}' for c, n in check['counts'].items())})")
        assert cells["SASS"] == line["sass_histogram"] == (
            ", ".join(f"{k} {v}" for k, v in hist.items()) + f" of {raw['compile']['sass']['histogram']['total']}")
    assert {c["kernel"]: c["smem B"] for c in table}["tiled"] != "0"  # the tiled kernel stages tiles in shared memory
    page = (tmp_path / "rep" / "report.html").read_text()
    assert ">registers</th>" in page and ">SASS classes</th>" in page and ">median ms</th>" not in page
    assert re.search(r'<td class="num" data-sort="\d+\.0">\d+</td>', page)  # registers sort as numbers

    (tmp_path / "timed" / "0").mkdir(parents=True)  # a timed record beside them: both sets of columns
    shutil.copy(FIXTURES / "tiled-256" / "result.json", tmp_path / "timed" / "0" / "result.json")
    report.write_report(report.collect([sweep, tmp_path / "timed"]), tmp_path / "mixed")
    md = (tmp_path / "mixed" / "report.md").read_text()
    mixed = _md_table(md)
    assert {"median ms", "GFLOP/s", "registers", "SASS classes"} <= set(mixed[0])
    assert mixed[-1]["median ms"] and mixed[-1]["registers"] and not mixed[0]["median ms"] and mixed[0]["registers"]
    assert "`time / baseline` =" in md and "Compiled only (`mode=compile`, no GPU)" in md


def test_compiled_and_failed_points_fold_no_shape_and_show_no_empty_timing(seed_lab_sweep, tmp_path):
    """Tried as a new user would (session 34): the README's main job without a GPU leaves a ``no_gpu``
    record beside the compile-mode sweep; the terminal table of both showed three timing columns empty
    in every row and folded ``31x33x17`` into ``31x33x1`` / ``7`` at 100 columns. Timing columns only where
    some row was timed; the shape and the status never folded."""
    import io
    import shutil

    from rich.console import Console
    proc, _, sweep = seed_lab_sweep
    assert sweep is not None, proc.stdout + proc.stderr
    shutil.copytree(sweep, tmp_path / "sweep")
    failed = {"schema": "gemmlab.result/1", "status": "no_gpu", "valid": False, "error": "no CUDA driver or GPU available",
              "config": {"kernel": {"name": "naive"}, "shape": [256, 256, 256], "mode": "run"}}
    (tmp_path / "failed").mkdir()
    (tmp_path / "failed" / "result.json").write_text(json.dumps(failed))
    rows = report.collect([tmp_path])
    shapes = {r.shape_text for r in rows}
    buf = io.StringIO()
    report.print_table(rows, console=Console(file=buf, width=100))
    text = buf.getvalue()
    assert "median ms" not in text and "GFLOP/s" not in text and "regs" in text
    assert all(s in text for s in shapes) and "no_gpu" in text and "compiled" in text, text
    # report.md and report.html alike: no timing columns, the compile columns and note
    written = report.write_report(rows, tmp_path / "rep", sources=[str(tmp_path)])
    md = (tmp_path / "rep" / "report.md").read_text()
    head = _md_table(md)[0]
    assert not {"median ms", "GFLOP/s", "time / baseline"} & set(head) and {"registers", "SASS classes"} <= set(head)
    assert "`time / baseline` =" not in md and "Compiled only" in md
    assert "<th" in (tmp_path / "rep" / "report.html").read_text() and written


def test_html_plot_notes_show_code_not_backticks(built):
    """A plot's skip note written in Markdown (`baseline=cublas`) is a <code> span in report.html, not
    literal backticks (session 34's newcomer trial)."""
    from gemmlab.results import report_html
    from gemmlab.results.report_plots import PLOTS
    note = "skipped: no point has a baseline ratio recorded (run with `baseline=cublas`)"
    html = report_html.page(built["rows"], None, {}, {p: note for p in PLOTS}, {})
    assert "(run with <code>baseline=cublas</code>)" in html and "`" not in html.split('<h2 id="plots">')[1]


def test_failed_points_only_show_no_empty_timing_columns(tmp_path):
    """The README's main job without a GPU, reported alone: one no_gpu record and no timed or compiled
    one; the terminal table and report.md carry no timing columns (review of session 34)."""
    import io

    from rich.console import Console
    failed = {"schema": "gemmlab.result/1", "status": "no_gpu", "valid": False, "error": "no CUDA driver or GPU available",
              "config": {"kernel": {"name": "naive"}, "shape": [256, 256, 256], "mode": "run"}}
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "result.json").write_text(json.dumps(failed))
    rows = report.collect([tmp_path])
    buf = io.StringIO()
    report.print_table(rows, console=Console(file=buf, width=140))
    assert "median ms" not in buf.getvalue() and "no_gpu" in buf.getvalue()
    report.write_report(rows, tmp_path / "rep", sources=[str(tmp_path)])
    head = _md_table((tmp_path / "rep" / "report.md").read_text())[0]
    assert not {"median ms", "GFLOP/s", "time / baseline", "registers"} & set(head) and "status" in head
