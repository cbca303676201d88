"""The core names no kernel (issue 41 item 1): a kernel's knowledge lives in its plugin, the core
enumerates and ranks. Token by token (Python's own tokenizer, so comments and prose in docstrings
are told apart from literals), no string literal of the gemmlab package (dispatch, cli, run and
every other layer) is the name of a registered built-in kernel, nor holds one quoted (a JSON or
dict example like ``"kernel": "tiled"`` in a docstring). Words such as a region's ``decode`` are
fine where no kernel is registered under that name; experiment files, .ci scripts, plugins and
tests name kernels freely."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from gemmlab.contract.registry import load_registry

PACKAGE = Path(__file__).resolve().parents[1] / "gemmlab"
NAMES = frozenset(load_registry(entry_points=False).kernels)
QUOTED = re.compile(r"""(?<!\w)["'](%s)["']""" % "|".join(sorted(NAMES, key=len, reverse=True)))


def kernel_literals(source: str) -> list[tuple[int, str]]:
    """``(line, literal)`` for each string literal of ``source`` that is a registered kernel's name
    or holds one in quotes; f-strings are read as written (their text between the quotes)."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.STRING:
            continue
        try:
            value = ast.literal_eval(tok.string)
        except (ValueError, SyntaxError):  # an f-string: its written text
            value = tok.string
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if value in NAMES or QUOTED.search(value):
            found.append((tok.start[0], tok.string if len(tok.string) < 80 else tok.string[:77] + "..."))
    return found


def test_the_scanner_finds_a_kernel_name():
    """The check can fail: a literal, a quoted name in a docstring and an f-string are each found;
    a region word, prose and a comment are not."""
    assert {"tiled", "cublas", "decode_bf16"} <= NAMES and "decode" not in NAMES
    src = ('"""Pick ``tiled`` in prose; {"kernel": "tiled"} in an example."""\n'
           'x = "cublas"  # tiled in a comment\n'
           'y = f"\'decode_bf16\'{x}"\n'
           'z = ("decode", "a tiled GEMM", b"naive")\n')
    assert [line for line, _ in kernel_literals(src)] == [1, 2, 3, 4]
    assert kernel_literals('w = "decode"  # "tiled"\n') == []


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_core_module_names_a_kernel(path):
    found = kernel_literals(path.read_text())
    assert found == [], (f"{path.relative_to(PACKAGE.parent)} names registered kernels in string literals "
                         f"(a kernel's knowledge lives in its plugin; defaults in conf/): {found}")
