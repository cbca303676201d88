"""The README's "add a kernel plugin" walkthrough works as written (CPU: mode=compile; GPU: a
verified run). The code is taken from the README itself, so the docs cannot drift."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _walkthrough(tmp_path: Path) -> Path:
    text = README.read_text()
    cuda = re.search(r"```cuda\n(.*?)\n *```", text, re.S).group(1)
    py = re.search(r"```python\n( *from pathlib import Path\n.*?)\n *```", text, re.S).group(1)
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
    process); the drop-in plugin is loaded from the README's files as a user's command would."""
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
