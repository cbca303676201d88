"""Run the ``gemmlab`` command in-process (no interpreter start-up) for CLI tests where a
subprocess proves nothing extra. Not a test module."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_cli(args: list[str], cwd: Path) -> Result:
    """``gemmlab *args`` run in ``cwd`` in this process; returns exit status and both streams.
    Each call is a fresh command: :func:`gemmlab.cli.app.main` keeps its state in its own
    :class:`gemmlab.cli.app.Invocation`, so nothing carries over between calls."""
    from hydra.core.global_hydra import GlobalHydra

    from gemmlab.cli import app as cli
    out, err = io.StringIO(), io.StringIO()
    old_cwd, old_argv = os.getcwd(), sys.argv
    os.chdir(cwd)
    sys.argv = ["gemmlab", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(old_cwd)
        sys.argv = old_argv
        GlobalHydra.instance().clear()
    return Result(code, out.getvalue(), err.getvalue())
