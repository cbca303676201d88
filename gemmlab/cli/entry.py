"""The console scripts (``[project.scripts]`` in pyproject.toml) and the start of a command.

Each script imports its command with Ctrl-C (SIGINT) and SIGTERM held back
(:func:`signals_deferred`): a signal that comes while Python still loads gemmlab, Hydra, numpy
and the rest (about half a second on a cold start) stops the command right after, with one line
and exit status 130 (143 for SIGTERM), instead of a traceback from inside an import, or an error
from a library whose state the interrupt left half-built (OmegaConf's, seen in a new-user
trial). ``gemmlab`` holds them back the same way while it checks the command line and loads the
plugins (:func:`gemmlab.cli.app.main`). An interrupt while a command runs is one line and exit 130
(143 for SIGTERM) through :func:`gemmlab.console.run_command`, in every command and in their
``python -m`` blocks; ``gemmlab``'s line says how to resume the sweep it was running.
The window before this module runs (the interpreter and ``import gemmlab``, about a tenth of a
second) is Python's own.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path

from gemmlab.console import run_command, settled_exit, signals_deferred

def _start(command: str, module: str, function: str):
    """Import ``module`` with the signals held back (:func:`gemmlab.console.signals_deferred`), then
    run ``function()`` (the command's ``main``) through :func:`gemmlab.console.run_command`: an
    interrupt it does not handle itself is one line, exit 130 (SIGTERM: 143), saying what the
    module's ``INTERRUPTED`` says was kept (default: :data:`gemmlab.console.KEPT_RECORDS`)."""
    with signals_deferred(command):
        loaded = importlib.import_module(module)
    # the installed script (pip's wrapper, the process's __main__) ends the process after this: a late
    # Ctrl-C leaves its exit status as it is; called from other code (tests), signals are left alone
    script = Path(getattr(sys.modules.get("__main__"), "__file__", None) or "").name == command
    with settled_exit() if script else contextlib.nullcontext():
        return run_command(command, getattr(loaded, function), getattr(loaded, "INTERRUPTED", None))


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
    """``gemmlab-tune``: :func:`gemmlab.cli.tune.main` (a sweep interrupted keeps its finished
    points; running it again resumes)."""
    return _start("gemmlab-tune", "gemmlab.cli.tune", "main")
