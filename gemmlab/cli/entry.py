"""The console scripts (``[project.scripts]`` in pyproject.toml): each imports its command inside
a guard, so Ctrl-C while Python still loads gemmlab, Hydra, numpy and the rest (about half a
second on a cold start) ends with one line and exit status 130 instead of a traceback. Once a
command runs, it handles Ctrl-C itself (``gemmlab``: the resume line of a sweep)."""

from __future__ import annotations

import importlib
import sys


def _start(command: str, module: str, function: str):
    """Import ``module`` and call ``function()`` (the command's ``main``); returns its exit status.
    Ctrl-C during the import: one line on stderr, exit 130."""
    try:
        main = getattr(importlib.import_module(module), function)
    except KeyboardInterrupt:
        print(f"{command}: interrupted while starting; nothing was run", file=sys.stderr)
        sys.exit(130)
    return main()


def gemmlab():
    """``gemmlab``: :func:`gemmlab.cli.app.main`."""
    return _start("gemmlab", "gemmlab.cli.app", "main")


def gemmlab_report():
    """``gemmlab-report``: :func:`gemmlab.results.report.main`."""
    return _start("gemmlab-report", "gemmlab.results.report", "main")


def gemmlab_compare():
    """``gemmlab-compare``: :func:`gemmlab.results.compare.main`."""
    return _start("gemmlab-compare", "gemmlab.results.compare", "main")


def gemmlab_tune():
    """``gemmlab-tune``: :func:`gemmlab.cli.tune._entry`."""
    return _start("gemmlab-tune", "gemmlab.cli.tune", "_entry")
