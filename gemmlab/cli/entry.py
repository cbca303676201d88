"""The console scripts (``[project.scripts]`` in pyproject.toml) and the start of a command.

Each script imports its command with Ctrl-C (SIGINT) and SIGTERM held back
(:func:`signals_deferred`): a signal that comes while Python still loads gemmlab, Hydra, numpy
and the rest (about half a second on a cold start) stops the command right after, with one line
and exit status 130 (143 for SIGTERM), instead of a traceback from inside an import, or an error
from a library whose state the interrupt left half-built (OmegaConf's, seen in a new-user
trial). ``gemmlab`` holds them back the same way while it checks the command line and loads the
plugins (:func:`gemmlab.cli.app.main`) and handles them itself once it runs (the resume line of a
sweep); in the other commands an interrupt while they run is one line and exit 130 too.
The window before this module runs (the interpreter and ``import gemmlab``, about a tenth of a
second) is Python's own.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
from types import MappingProxyType

from gemmlab.errors import Terminated, in_chain, raise_terminated, was_interrupted

#: exit status and word of each signal held back
STOPPED = MappingProxyType({signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated (SIGTERM)")})


@contextlib.contextmanager
def signals_deferred(command: str):
    """Hold SIGINT and SIGTERM back inside the block; if one came, print ``<command>: interrupted
    while starting; nothing was run`` after the block and exit 130 (SIGTERM: 143). Outside the main
    thread (signal handlers cannot be set there) the block runs as it is."""
    pending: list[int] = []
    try:
        before = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in STOPPED}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    if pending:
        code, word = STOPPED[pending[0]]
        print(f"{command}: {word} while starting; nothing was run", file=sys.stderr)
        sys.exit(code)


def _start(command: str, module: str, function: str):
    """Import ``module`` with the signals held back, then call ``function()`` (the command's
    ``main``) with SIGTERM turned into :class:`~gemmlab.errors.Terminated` (an interrupt), and
    return its exit status. An interrupt the command does not handle itself: one line,
    ``<command>: interrupted; <what happened to its output>`` (the interrupt's own text when it
    carries one, e.g. gemmlab-report's removed partial report), exit 130; SIGTERM says
    ``terminated (SIGTERM)`` and exits 143 (before, SIGTERM ended these commands with nothing said)."""
    with signals_deferred(command):
        main = getattr(importlib.import_module(module), function)
    before = signal.signal(signal.SIGTERM, raise_terminated)  # after the block, which puts the earlier ones back
    try:
        return main()
    except BaseException as exc:
        if isinstance(exc, SystemExit) or not was_interrupted(exc):
            raise
        interrupt = in_chain(exc, KeyboardInterrupt)
        advice = str(interrupt.args[0]) if interrupt is not None and interrupt.args else "what it had finished is kept"
        terminated = isinstance(interrupt, Terminated)
        print(f"{command}: {'terminated (SIGTERM)' if terminated else 'interrupted'}; {advice}", file=sys.stderr)
        sys.exit(143 if terminated else 130)
    finally:
        signal.signal(signal.SIGTERM, before)


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
