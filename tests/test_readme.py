"""The plugin guide's "add a kernel plugin" walkthrough works as written (CPU: mode=compile; GPU: a
verified run). The code is taken from docs/plugin-guide.md itself (the README's walkthrough moved
there, issue 45), so the docs cannot drift. Also the README itself: at most 300 lines, its two
commands as CI runs them, the venv activated in its first session, the editable set-up for
working on kernels, and links that resolve."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PLUGIN_GUIDE = ROOT / "docs" / "plugin-guide.md"  # the walkthrough's source of truth
MAIN_COMMAND = "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/gemmlab experiment=seed_lab"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/python -m pytest -q"


def _walkthrough(tmp_path: Path) -> Path:
    text = PLUGIN_GUIDE.read_text()
    section = text.split("## Add a kernel plugin", 1)[1]
    assert "```cuda" in section and "from pathlib import Path" in section, "the walkthrough left its section"
    cuda = re.search(r"```cuda\n(.*?)\n *```", section, re.S).group(1)
    py = re.search(r"```python\n( *from pathlib import Path\n.*?)\n *```", section, re.S).group(1)
    d = tmp_path / "mykernels"
    d.mkdir()
    (d / "rowstrip.cu").write_text(textwrap.dedent(cuda) + "\n")
    (d / "rowstrip.py").write_text(textwrap.dedent(py) + "\n")
    return d


def _run(args, tmp_path, gemmlab_cmd, cli_env):
    return subprocess.run(gemmlab_cmd + args, cwd=tmp_path, env=cli_env, capture_output=True, text=True, timeout=300)


def _records(tmp_path: Path):
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "outputs").rglob("result.json"))]


def test_walkthrough_compiles(tmp_path, cli):
    """In this process (the ``cli`` fixture: a fresh command each call, the point in a worker
    process); the drop-in plugin is loaded from the guide's files as a user's command would."""
    d = _walkthrough(tmp_path)
    proc = cli(["kernel=rowstrip", f"plugin_dirs=[{d}]", "mode=compile", "kernel.BX=64", "kernel.TN=8"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (rec,) = _records(tmp_path)
    assert rec["status"] == "compiled"
    assert rec["compile"]["name_expression"] == "gemm_rowstrip<64, 8>"
    assert rec["launch"]["grid"] == [1, 256, 1] and rec["launch"]["block"] == [64, 1, 1]
    help_text = cli(["--help", f"plugin_dirs=[{d}]"], tmp_path).stdout
    assert "rowstrip" in help_text and "one row, TN columns per thread" in help_text


@pytest.mark.gpu
def test_walkthrough_verifies_on_gpu(tmp_path, gemmlab_cmd, cli_env):
    d = _walkthrough(tmp_path)
    proc = _run(["kernel=rowstrip", f"plugin_dirs=[{d}]", "shape=[63,65,33]", "timing.repeat=3"],
                tmp_path, gemmlab_cmd, cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (rec,) = _records(tmp_path)
    assert rec["status"] == "ok" and rec["verification"]["nan_outputs"] == 0


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", text, re.S)


def test_readme_is_short_and_holds_the_two_commands_as_ci_runs_them():
    text = README.read_text()
    assert len(text.splitlines()) <= 300, f"README.md is {len(text.splitlines())} lines (issue 45: at most 300)"
    blocks = _code_blocks(text)
    assert MAIN_COMMAND in blocks and TEST_COMMAND in blocks, "the two commands are whole code blocks"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == TEST_COMMAND, ".ci/run's last line is the README's test command, verbatim"


def test_readme_first_session_finds_the_commands():
    """pip installs into .venv/, which is not on PATH: the README activates it or calls by path."""
    text = README.read_text()
    first = text.split("## A first session", 1)[1].split("\n## ", 1)[0]
    assert ". .venv/bin/activate" in first and ".venv/bin/gemmlab" in first
    work = text.split("## Working on kernels", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/pip install -e '.[test]'" in work and "stale_checkout_source" in work


@pytest.mark.parametrize("doc", ["README.md", "docs/user-guide.md", "docs/plugin-guide.md",
                                 "docs/results/headline-h200.md"])
def test_doc_links_resolve(doc):
    """Every relative Markdown link of the README and the guides names a file that exists, and a
    ``#anchor`` names a heading of that file (GitHub's rule: lower case, punctuation dropped, spaces
    to dashes)."""
    path = ROOT / doc
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(target)
        elif anchor and dest.suffix == ".md":
            heads = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                     for h in re.findall(r"^#+ (.*)$", dest.read_text(), re.M)}
            if anchor not in heads:
                bad.append(target)
    assert bad == []
