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

from clirun import REPO_ROOT, command_env  # noqa: E402  (the checkout, defined once)


def run_into_closed_pipe(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run gemmlab with stdout a pipe whose read end is already closed (every write: EPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = command_env()
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


def _module_into_closed_pipe(module: str, args: list, cwd: Path) -> subprocess.CompletedProcess:
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = command_env()  # matplotlib on Agg
    try:
        return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)


H200 = REPO_ROOT / "tests" / "data" / "h200"


@pytest.mark.parametrize("module, args, code", [
    ("gemmlab.cli.tune", ["show"], 0),
    ("gemmlab.cli.tune", ["choose", "1", "4096", "4096"], 0),
    ("gemmlab.results.families", [H200], 0),
    ("gemmlab.results.report", [H200, "--out", "{tmp}/rep"], 0),
    ("gemmlab.results.compare", [H200 / "naive-256", H200 / "naive-256"], 0),
], ids=["tune-show", "tune-choose", "families", "report", "compare"])
def test_every_command_into_a_closed_pipe(tmp_path, module, args, code):
    """``gemmlab-tune show | head -1`` and friends: no traceback, the command's own exit status
    (for gemmlab-compare 1 would mean a regression)."""
    proc = _module_into_closed_pipe(module, [str(a).replace("{tmp}", str(tmp_path)) for a in args], tmp_path)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == code, proc.stderr
