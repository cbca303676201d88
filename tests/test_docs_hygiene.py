"""Docs hygiene (issue 12, item 6), checked on the source text so it stays fixed: no backslash
line continuations in Python (parentheses instead), no docstring or comment citing a file outside
the repository, and the labels of the two teaching labs gemmlab grew from explained in words the
first time a file names them: seed 000 (the real-device naive vs register-tiled GEMM lab) and
seed 002 (the Matmul Ladder I register-blocking lab)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from clirun import REPO_ROOT  # noqa: E402  (the checkout, defined once)
PYTHON_DIRS = ("gemmlab", "plugins", "tests", ".ci")
TEXT_DIRS = ("gemmlab", "plugins", "kernels", "conf", "tests", ".ci")
TEXT_SUFFIXES = {".py", ".cu", ".cuh", ".h", ".yaml", ".yml", ".toml", ".md", ""}
RAW_DATA = ("tests/data/",)  # recorded result.json files keep the paths they were written with
# paths of the development machine, never part of a checkout (split so this file does not match itself)
OUTSIDE = ("../" + "shared", "shared/" + "notes", "shared/" + "anchors", "shared/" + "seeds", "/" + "work/",
           "labs/" + "kernels/")
#: the pages for people: the README, the guides under docs/ (docs/results pages are records of runs)
DOCS = ("README.md", "docs/user-guide.md", "docs/plugin-guide.md", "docs/results/README.md",
        "docs/results/headline-h200.md")
SEEDS = {"000": "naive vs register-tiled", "002": "Matmul Ladder"}  # what each seed lab is, in words


def _files(dirs, suffixes) -> list[Path]:
    out = []
    for d in dirs:
        for p in sorted((REPO_ROOT / d).rglob("*")):
            rel = p.relative_to(REPO_ROOT).as_posix()
            if p.is_file() and p.suffix in suffixes and "__pycache__" not in rel and not rel.startswith(RAW_DATA):
                out.append(p)
    return out


def continuation_lines(text: str) -> list[int]:
    """Lines of Python source ending in a backslash line continuation (a backslash inside a
    string literal, e.g. ``\"\"\"\\`` that drops the leading newline, is not one)."""
    in_string: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            in_string.update(range(tok.start[0], tok.end[0]))
    return [n for n, line in enumerate(text.splitlines(), 1)
            if line.endswith("\\") and n not in in_string and not line.lstrip().startswith("#")]


def test_continuation_finder_tells_code_from_strings():
    assert continuation_lines("x = 1 + \\\n    2\n") == [1]
    assert continuation_lines('x = """\\\nabc\n"""\n') == []
    assert continuation_lines("# a comment \\\nx = 1\n") == []


@pytest.mark.parametrize("path", _files(PYTHON_DIRS, {".py"}), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_no_backslash_continuations(path):
    assert continuation_lines(path.read_text(encoding="utf-8")) == [], "use parentheses, not a trailing backslash"


def test_no_reference_outside_the_repository():
    hits = [f"{p.relative_to(REPO_ROOT)}:{n}: {line.strip()[:100]}"
            for p in _files(TEXT_DIRS, TEXT_SUFFIXES) + [REPO_ROOT / d for d in DOCS]
            for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if any(o in line for o in OUTSIDE)]
    assert hits == []


def test_seed_labels_are_explained_where_first_used():
    bad = []
    for p in _files(TEXT_DIRS, TEXT_SUFFIXES) + [REPO_ROOT / d for d in DOCS]:
        text = p.read_text(encoding="utf-8", errors="replace")
        for number, words in SEEDS.items():
            first = re.search(rf"seed[ -]?{number}\b", text, re.IGNORECASE)
            near = re.sub(r"\s+(?:(?://|#)\s*)?", " ", text[first.start():first.start() + 250]) if first else ""
            if first and words.lower() not in near.lower():  # words wrapped over comment lines count
                line = text.count("\n", 0, first.start()) + 1
                bad.append(f"{p.relative_to(REPO_ROOT)}:{line}: seed {number} without '{words}' next to it")
    assert bad == []
