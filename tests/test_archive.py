"""Record archives (gemmlab/stages/archive.py, read by gemmlab/stages/record_model.py): a sweep
packed by ``gemmlab-report --archive`` reads as the folder did in every reader (report, compare,
families, ``gemmlab-tune build``), a bad archive is one error line naming the argument, and every
archive path the results pages cite names records in the committed archives. CPU only."""

from __future__ import annotations

import json
import lzma
import re
import shutil
from pathlib import Path

import pytest

from gemmlab.stages import archive
from gemmlab.stages import record_model as rm

from clirun import REPO_ROOT  # noqa: E402  (the checkout, defined once)
FIXTURES = REPO_ROOT / "tests" / "data" / "h200"
RESULTS = REPO_ROOT / "docs" / "results"
SHAPES = RESULTS / "shapes-h200.jsonl.xz"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A sweep folder: the 13 H200 fixture records (one nested a level deeper, one with a
    sanitizer child), a damaged ``result.json``, a JSON list, another tool's ``{}``, and files
    that are no records (a log, the summary)."""
    root = tmp_path_factory.mktemp("archive") / "sweep"
    names = sorted(p.name for p in FIXTURES.iterdir() if (p / "result.json").is_file())
    for i, name in enumerate(names):
        job = root / ("nested" if i == 4 else "") / str(i)
        job.mkdir(parents=True)
        shutil.copy(FIXTURES / name / "result.json", job / "result.json")
        (job / "run.log").write_text("log\n")
    child = root / "0" / "sanitizer-memcheck" / "run"
    child.mkdir(parents=True)
    shutil.copy(FIXTURES / names[0] / "result.json", child / "result.json")
    for name, text in (("13", '{"schema": "gemmlab.result/1", "status": "ok"'), ("14", "[1, 2]"), ("15", "{}")):
        (root / name).mkdir()
        (root / name / "result.json").write_text(text)
    (root / "summary.md").write_text("| point |\n")
    return root


@pytest.fixture(scope="module")
def packed(sweep) -> Path:
    out = sweep.parent / "sweep.jsonl.xz"
    assert rm.write_archive(sweep, out) == 17
    return out


def _same(folder_rows, archive_rows, folder: Path, arch: Path) -> None:
    """The records read from the folder and from the archive are the same, path prefix aside."""
    def as_dict(r, prefix):
        d = {k: v for k, v in vars(r).items()}
        d["path"] = d["path"].replace(str(prefix), "ROOT")
        return d
    assert [as_dict(r, folder) for r in folder_rows] == [as_dict(r, arch) for r in archive_rows]


def test_round_trip(sweep, packed):
    """Every record file, in the folder's order, with its relative path and its JSON; a damaged
    file is an ``unreadable`` member with read_record's reason; the header counts them."""
    members = list(archive.read_archive(packed))
    files = rm.find_records([sweep])
    assert [m.path for m in members] == [f.relative_to(sweep).as_posix() for f in files]
    assert "0/sanitizer-memcheck/run/result.json" in [m.path for m in members]
    for m, f in zip(members, files):
        if m.unreadable is None:
            assert m.record == json.loads(f.read_text())
        else:
            assert m.path == "13/result.json" and m.unreadable.startswith("not valid JSON")
    assert archive.load(packed).header == {"schema": archive.SCHEMA, "records": 17, "source": "sweep"}
    lines = lzma.decompress(packed.read_bytes()).decode().splitlines()
    assert json.loads(lines[1]) == {"path": members[0].path, "record": members[0].record}
    again = packed.with_name("again.jsonl.xz")
    rm.write_archive(packed, again)  # an archive packs again to the same bytes (no time stamp)
    assert again.read_bytes() == packed.read_bytes()
    with pytest.raises(FileExistsError):
        rm.write_archive(sweep, packed)


def test_readers_see_the_same_records(sweep, packed):
    """collect (report), children left out (compare, tune build), a folder inside the archive,
    one member named directly, and records_of: as from the folder."""
    _same(rm.collect([sweep]), rm.collect([packed]), sweep, packed)
    _same(rm.collect([sweep], children=False), rm.collect([packed], children=False), sweep, packed)
    _same(rm.collect([sweep / "nested"]), rm.collect([packed / "nested"]), sweep, packed)
    assert len(rm.collect([packed / "nested"])) == 1
    one = rm.read_record(packed / "3" / "result.json")
    assert one.category == "timed" and one.path == str(packed / "3" / "result.json")
    assert [p for p, _ in rm.records_of(packed)] == [p for p, _ in rm.records_of(sweep)]
    assert rm.is_child_record(packed / "0" / "sanitizer-memcheck" / "run" / "result.json")
    assert rm.is_collection(packed) and rm.is_collection(packed / "nested")
    assert not rm.is_collection(packed / "3" / "result.json")
    assert rm.read_record(packed / "nope" / "result.json").category == "unreadable"


def _bad_archives(root: Path) -> dict[str, Path]:
    good = lzma.decompress((RESULTS / "contract-h200.jsonl.xz").read_bytes())
    bad = {"plain text": b"hello\n", "truncated": lzma.compress(good)[:2000], "not JSON lines": lzma.compress(b"hello\n"),
           "another schema": lzma.compress(b'{"schema": "gemmlab.archive/9", "records": 0}\n'),
           "fewer records": lzma.compress(good.split(b"\n", 3)[0] + b"\n" + good.split(b"\n", 3)[1] + b"\n"),
           "empty": lzma.compress(b"")}
    out = {}
    for name, data in bad.items():
        out[name] = root / (name.replace(" ", "-") + ".jsonl.xz")
        out[name].write_bytes(data)
    return out


def test_bad_archives_are_refused(tmp_path):
    expected = {"plain text": "not xz data", "truncated": "truncated xz data", "not JSON lines": "no gemmlab.archive/1 header",
                "another schema": "archive schema 'gemmlab.archive/9'", "fewer records": "the header says 113 records",
                "empty": "no header line"}
    for name, path in _bad_archives(tmp_path).items():
        with pytest.raises(archive.ArchiveError, match=re.escape(expected[name])):
            archive.load(path)
        assert expected[name] in rm.path_problem(path)
        with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
            rm.find_records([path])


@pytest.mark.parametrize("module, args", [
    ("gemmlab.results.report", ["{a}", "--out", "{tmp}/rep"]),
    ("gemmlab.results.compare", ["{a}", "{a}"]),
    ("gemmlab.results.families", ["{a}"]),
    ("gemmlab.cli.tune", ["build", "{a}", "-o", "{tmp}/t.json"]),
])
def test_commands_give_one_line_for_a_bad_archive(cli, tmp_path, module, args):
    """Each reader: exit 2, one error line naming the argument, no traceback, nothing written."""
    for name, path in _bad_archives(tmp_path).items():
        proc = cli([a.format(a=path, tmp=tmp_path) for a in args], tmp_path, module=module)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (name, proc.stderr)
        assert str(path) in lines[0] and "error:" in lines[0] and "Traceback" not in proc.stderr, lines[0]
        assert not (tmp_path / "rep").exists() and not (tmp_path / "t.json").exists()
    proc = cli([a.format(a=SHAPES / "no-such-folder", tmp=tmp_path) for a in args], tmp_path, module=module)
    assert proc.returncode == 2 and "no record under 'no-such-folder' in the archive" in proc.stderr


def test_report_archive_flag(cli, sweep, tmp_path):
    """``gemmlab-report --archive OUT SWEEP`` packs the sweep; its refusals are one line, exit 2."""
    out = tmp_path / "s.jsonl.xz"
    proc = cli(["--archive", str(out), str(sweep)], tmp_path, module="gemmlab.results.report")
    assert proc.returncode == 0 and proc.stdout.strip() == f"{out}: 17 records of {sweep}", proc.stderr
    assert [m.path for m in archive.read_archive(out)] == [f.relative_to(sweep).as_posix() for f in rm.find_records([sweep])]
    for args, text in ((["--archive", str(out), str(sweep)], "already exists"),
                       (["--archive", str(tmp_path / "t.jsonl.xz"), str(sweep), str(sweep)], "packs one sweep folder"),
                       (["--archive", str(tmp_path / "t.zip"), str(sweep)], "name the archive *.jsonl.xz"),
                       (["--archive", str(tmp_path / "t.jsonl.xz"), "--out", str(tmp_path / "r"), str(sweep)], "give no --out"),
                       (["--archive", str(tmp_path / "t.jsonl.xz"), str(tmp_path / "missing")], "no such file or directory")):
        proc = cli(args, tmp_path, module="gemmlab.results.report")
        assert proc.returncode == 2 and text in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "t.jsonl.xz").exists() and not (tmp_path / "r").exists()


def test_report_of_the_archive_is_the_report_of_the_folder(cli, sweep, packed, tmp_path, plots_not_drawn):
    """gemmlab-report of the packed sweep writes the folder's report.csv, report.md and notices.
    (The tables and notices: plots not drawn; they are drawn from the same rows, report.csv's.)"""
    outs = []
    for source in (sweep, packed):
        out = tmp_path / source.name
        proc = cli([str(source), "--out", str(out)], tmp_path, module="gemmlab.results.report")
        assert proc.returncode == 0, proc.stderr
        outs.append((proc, out, source))
    (p1, o1, s1), (p2, o2, s2) = outs
    def text(out, name, source):  # the paths and the time of writing aside
        return re.sub(r"\d{4}-\d\d-\d\dT[\d:]+\+00:00", "TIME", (out / name).read_text().replace(str(source), "ROOT"))
    assert text(o1, "report.csv", s1) == text(o2, "report.csv", s2)
    assert text(o1, "report.md", s1) == text(o2, "report.md", s2)
    assert p1.stderr.replace(str(s1), "ROOT") == p2.stderr.replace(str(s2), "ROOT")
    assert "unreadable ROOT/13/result.json: not valid JSON" in p1.stderr.replace(str(s1), "ROOT")


def test_compare_families_and_tune_build_read_an_archive(cli, tmp_path):
    """Part of the committed shapes-h200 run unpacked to a folder: compare, the family view and the
    table build print the same from the folder and from the archive."""
    folder = tmp_path / "shapes"
    for rel, rec in rm.records_of(SHAPES / "auto" / "fp32"):
        (folder / "auto" / "fp32" / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / "auto" / "fp32" / rel).write_text(json.dumps(rec.raw))
    for rel, rec in rm.records_of(SHAPES / "tune" / "fp32" / "k_heavy"):
        (folder / "tune" / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / "tune" / rel).write_text(json.dumps(rec.raw))
    packed = tmp_path / "shapes.jsonl.xz"
    rm.write_archive(folder, packed)

    def both(module, make):
        got = []
        for root in (folder, packed):
            proc = cli(make(root), tmp_path, module=module)
            assert proc.returncode in (0, 1), proc.stderr
            got.append((proc.returncode, proc.stdout.replace(str(root), "ROOT").split(), proc.stderr.replace(str(root), "ROOT")))
        assert got[0] == got[1]
        return got[0]

    code, out, _ = both("gemmlab.results.compare", lambda r: [str(r / "auto"), str(r / "auto")])
    assert code == 0 and "45 points" in " ".join(out)
    code, out, _ = both("gemmlab.results.families", lambda r: [str(r / "auto")])
    assert "k_heavy" in out
    tables = []
    for root in (folder, packed):
        table = tmp_path / f"{root.name}.table.json"
        proc = cli(["build", str(root / "tune"), "-o", str(table), "--records-dir", str(root)], tmp_path, module="gemmlab.cli.tune")
        assert proc.returncode == 0, proc.stderr
        made = json.loads(table.read_text().replace(str(root), "ROOT"))
        made.pop("created_utc")  # the builds may straddle a second
        tables.append(made)
    assert tables[0] == tables[1] and tables[0]["entries"]
    assert all(e["record"].startswith("tune/") for e in tables[0]["entries"])


ARCHIVE_PATH = re.compile(r"([A-Za-z0-9_-]+\.jsonl\.xz)/((?:\{[^}\s]*\}|[^\s)`'\",;|\]{])*)")


def _cited() -> list[tuple[str, str, str]]:
    """``(file, archive, inner path)`` for every path through an archive the docs and configs cite."""
    out = []
    pages = sorted(RESULTS.glob("*.md"))
    guides = [REPO_ROOT / "README.md", REPO_ROOT / "docs" / "user-guide.md", REPO_ROOT / "docs" / "plugin-guide.md"]
    for f in pages + guides + sorted((REPO_ROOT / "conf").rglob("*.yaml")):
        text = f.read_text()
        for m in ARCHIVE_PATH.finditer(text):
            # outside docs/results only a path written docs/results/<run>.jsonl.xz/... cites the
            # committed archives (the README's and the guides' examples name archives of the reader's own)
            if f in pages or text[:m.start()].endswith("docs/results/"):
                out.append((f.relative_to(REPO_ROOT).as_posix(), m.group(1), m.group(2)))
    return out


def _expand(inner: str) -> list[str]:
    """A cited path with its shorthand spelled out: ``call{1,2}/x`` and ``call1..call3/`` name
    several folders, ``<job>``, ``<case>``, ``*`` any one part."""
    inner = inner.rstrip("/.:")
    brace = re.search(r"\{([^}]*)\}", inner)
    if brace:
        return [x for alt in brace.group(1).split(",") for x in _expand(inner[:brace.start()] + alt + inner[brace.end():])]
    dots = re.search(r"([a-z]+)(\d+)\.\.\1(\d+)", inner)
    if dots:
        return [x for i in range(int(dots.group(2)), int(dots.group(3)) + 1)
                for x in _expand(inner[:dots.start()] + f"{dots.group(1)}{i}" + inner[dots.end():])]
    return [inner]


def test_every_cited_archive_path_names_records():
    """Each ``<run>.jsonl.xz/<path>`` cited in docs/results/*.md, the README, the guides and conf/ is a
    record or a folder of records in the committed archive (the links replaced the old folders;
    a typo or a member missing from the archive fails here)."""
    cited = _cited()
    assert len(cited) > 300  # the pages' record links (session4, shapes, tc-ladder, ...)
    missing = []
    for f, name, inner in cited:
        members = archive.load(RESULTS / name).lines
        for path in _expand(inner):
            parts = ["[^/]+" if re.fullmatch(r"<[^>]+>", part) else re.escape(part).replace(r"\*", "[^/]*")
                     for part in path.split("/")]
            pattern = re.compile("^" + "/".join(parts) + "(/|$)")
            if not any(pattern.match(m) for m in members):
                missing.append(f"{f}: {name}/{path}")
    assert missing == []


def test_docs_hold_archives_not_folders():
    """docs/ holds pages, archives and the one plot a page shows, no raw record files again, in at
    most 8 MiB (issue 45: the GPU tool copies at most 64 MiB of the checkout)."""
    assert list((REPO_ROOT / "docs").rglob("result.json")) == []
    size = sum(p.stat().st_size for p in (REPO_ROOT / "docs").rglob("*") if p.is_file())
    assert size <= 8 * 2 ** 20, f"docs/ is {size / 2 ** 20:.1f} MiB"


def test_the_summary_names_what_a_problem_adds_to_c_equals_ab():
    """A sweep over batch counts and epilogues is told apart in its summary: a ``problem`` column
    (batches, alpha/beta, bias, activation, C type, leading dimensions) appears where any point has one."""
    from gemmlab.results.summary import columns, problem_text
    cfg = {"batch": {"count": 3}, "epilogue": {"beta": 0.5, "bias": "input", "activation": "gelu_tanh", "out": "bf16"},
           "layout": {"a": "row", "b": "col", "ldc": 80}}
    assert problem_text(cfg) == "batch 3, beta 0.5, bias input, gelu_tanh, C bf16, ldc 80"
    assert problem_text({"batch": {"count": 1}, "epilogue": {"alpha": 1.0, "beta": 0.0, "out": "float32"}}) == ""
    plain = [{"precision": "fp32", "layout": "row/row", "problem": ""}]
    assert "problem" not in columns(plain)
    assert "problem" in columns(plain + [{"precision": "fp32", "layout": "row/row", "problem": "batch 2"}])


def test_the_report_csv_names_the_problem_where_any_point_has_one():
    """report.csv gets the ``problem`` column of the sweep summary where any record has batches, an
    epilogue or leading dimensions (issue 43), and keeps its columns where none has."""
    from gemmlab.results.report_tables import csv_columns
    from gemmlab.stages.record_model import Record
    plain = Record(path="a/result.json", status="ok", category="ok", raw={"config": {}})
    batched = Record(path="b/result.json", status="ok", category="ok", raw={"config": {"batch": {"count": 2}}})
    assert "problem" not in csv_columns([plain]) and "problem" in csv_columns([plain, batched])
