"""Issue 11.4: output into a pipe whose reader is gone (``gemmlab ... | head -3``, ``gemmlab --help
| true``) must not print a BrokenPipe traceback, and the results must be complete. Subprocesses:
the broken pipe has to be the real standard output of the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import REPO_ROOT  # noqa: E402  (the checkout, defined once)


def run_into_closed_pipe(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run gemmlab with stdout a pipe whose read end is already closed (every write: EPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    try:
        proc = subprocess.run([sys.executable, "-m", "gemmlab", *args], cwd=cwd, env=env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    return proc


def test_sweep_into_a_closed_pipe_completes(tmp_path):
    sweep = tmp_path / "sw"
    proc = run_into_closed_pipe(["-m", "mode=compile", "kernel=naive,tiled", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert [json.loads((sweep / i / "result.json").read_text())["status"] for i in "01"] == ["compiled"] * 2
    assert "| 1 | tiled |" in (sweep / "summary.md").read_text()
    assert (sweep / "summary.csv").is_file()


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_help_into_a_closed_pipe(tmp_path, args):
    proc = run_into_closed_pipe(args, tmp_path)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
