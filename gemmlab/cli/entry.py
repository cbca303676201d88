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

from gemmlab.console import start_command


def gemmlab():
    """``gemmlab``: :func:`gemmlab.cli.app.main`."""
    return start_command("gemmlab", "gemmlab.cli.app", "main")


def gemmlab_report():
    """``gemmlab-report``: :func:`gemmlab.results.report.main`."""
    return start_command("gemmlab-report", "gemmlab.results.report", "main")


def gemmlab_compare():
    """``gemmlab-compare``: :func:`gemmlab.results.compare.main`."""
    return start_command("gemmlab-compare", "gemmlab.results.compare", "main")


def gemmlab_tune():
    """``gemmlab-tune``: :func:`gemmlab.cli.tune.main` (a sweep interrupted keeps its finished
    points; running it again resumes)."""
    return start_command("gemmlab-tune", "gemmlab.cli.tune", "main")
