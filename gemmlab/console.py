"""What every gemmlab command line shares (``gemmlab``, ``gemmlab-tune``, ``gemmlab-report``,
``gemmlab-compare``, ``python -m gemmlab.results.families``): a standard output that survives a
reader that went away (``... | head -1``), argparse errors in one line, and Ctrl-C (SIGINT) and
SIGTERM said in one line with exit status 130 or 143 (:func:`signals_deferred` while a command
starts, :func:`run_command` while it runs).

Also the one way a command that writes an output folder gives up on it (:func:`undo_partial_output`:
the partial files go, and an interrupt says so).

Base layer (imports only ``gemmlab.errors`` and ``gemmlab.paths``): the command modules of ``results``
and ``cli`` use it alike (``gemmlab.cli.entry``'s console scripts, each command module's ``python -m`` block).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import shutil
import signal
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Sequence

from gemmlab.errors import Terminated, in_chain, raise_terminated, was_interrupted
from gemmlab.paths import remove_empty_parents

#: exit status and word of each signal a command says in one line
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


#: what an interrupted command that only reads records says it kept (:func:`run_command`)
KEPT_RECORDS = "no record was changed"


def run_command(command: str, main: Callable[[], int | None], advice: str | Callable[[], str] | None = None):
    """Call ``main()`` (a command's ``main``) with SIGTERM turned into
    :class:`~gemmlab.errors.Terminated` (an interrupt) and return its exit status. An interrupt
    the command does not handle itself: one line, ``<command>: interrupted; <advice>`` (default
    :data:`KEPT_RECORDS`; a callable is asked at that moment, e.g. gemmlab's resume line for the
    sweep it was running; the interrupt's own text instead when it carries one, e.g.
    gemmlab-report's removed partial report), exit 130; SIGTERM says ``terminated (SIGTERM)`` and exits 143 (Python's default
    handler ended the command with nothing said). Outside the main thread ``main()`` runs as it is.
    """
    try:
        before = signal.signal(signal.SIGTERM, raise_terminated)
    except ValueError:  # not the main thread
        return main()
    try:
        return main()
    except BaseException as exc:
        if isinstance(exc, SystemExit) or not was_interrupted(exc):
            raise
        interrupt = in_chain(exc, KeyboardInterrupt)
        if interrupt is not None and interrupt.args:
            said = str(interrupt.args[0])
        else:
            said = (advice() if callable(advice) else advice) or KEPT_RECORDS
        terminated = isinstance(interrupt, Terminated)
        print(f"{command}: {'terminated (SIGTERM)' if terminated else 'interrupted'}; {said}", file=sys.stderr)
        sys.exit(143 if terminated else 130)
    finally:
        signal.signal(signal.SIGTERM, before)


@contextlib.contextmanager
def settled_exit():
    """Around a process's last call (a ``python -m`` block or a console script, never a command
    run inside another program): once the block ends (its ``sys.exit`` included), SIGINT and SIGTERM
    are ignored for the interpreter's clean-up (atexit handlers such as the point worker's close,
    which kills the worker after 5 s at most, then Python's own shutdown). The command's outcome is
    settled and its files written by then; a Ctrl-C pressed as it ends printed "Exception ignored
    in: <module 'threading'> ... KeyboardInterrupt" from inside Python's shutdown, or ended the
    process by SIGINT, instead of the command's own exit status. Main thread only."""
    try:
        yield
    finally:
        try:
            for stop in STOPPED:
                signal.signal(stop, signal.SIG_IGN)
        except ValueError:  # not the main thread
            pass


def undo_partial_output(exc: BaseException, folder: Path | str, made: int, files: Sequence[str] | None,
                        removed: str) -> None:
    """Give up on a command's output ``folder`` after ``exc`` stopped the writing (Ctrl-C, SIGTERM,
    a full disk), so the same command works again: remove what was written, then the folders the
    command made, while empty (:func:`gemmlab.paths.remove_empty_parents`). An interrupt in
    ``exc``'s chain is raised again, as its own type (:class:`~gemmlab.errors.Terminated` stays
    one), with the text ``nothing was written (<removed>)``, which :func:`run_command` prints;
    otherwise this returns and the caller says the error its own way.

    Args:
        exc: what stopped the writing.
        folder: the output folder.
        made: how many folders the command made: ``folder`` and those above it (0: ``folder``
            existed before).
        files: the names in ``folder`` the command writes, removed one by one; None: ``folder`` is
            the command's own, removed with everything in it.
        removed: what went, for the interrupt's text (``the partial report out/ was removed``).
    """
    folder = Path(folder)
    if files is None:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        for name in files:
            with contextlib.suppress(OSError):
                (folder / name).unlink()
    if made:
        with contextlib.suppress(OSError):
            folder.rmdir()  # gone already after rmtree; left when not empty (someone else's files)
        remove_empty_parents(folder, made - 1)
    interrupt = in_chain(exc, KeyboardInterrupt)
    if interrupt is not None:
        raise type(interrupt)(f"nothing was written ({removed})") from None


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in the number ``n`` takes: ``count(1, "point")`` is ``1 point``,
    ``count(2, "point")`` ``2 points`` (``plural``: the plural when it is not ``noun + "s"``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


class PipeSafeStream:
    """A text stream wrapper for stdout: once the reader has gone (``gemmlab ... | head -3``),
    writes are dropped instead of raising ``BrokenPipeError``, so a sweep still runs to the end
    and writes every record and its summary. The file descriptor is pointed at /dev/null so the
    interpreter's final flush stays quiet too (Python docs, "Note on SIGPIPE"). Any other write
    error (``> /dev/full``, a full disk under a redirected file: ``ENOSPC``, ``EIO``) is said once
    on stderr, ``<command>: warning: standard output: <reason>; ...``, and the rest of the output is
    dropped the same way; the command's exit status stays its own (its records are files)."""

    def __init__(self, stream, command: str = "gemmlab", warn: bool = True):
        self._stream = stream
        self._command = command
        self._warn = warn  # False for stderr itself: there is nowhere to say it
        self.broken = False

    def _gone(self, exc: OSError) -> None:
        self.broken = True
        if self._warn and not isinstance(exc, BrokenPipeError):
            try:
                print(f"{self._command}: warning: standard output: {exc.strerror or exc}; the rest of it is "
                      "dropped (records and report files are written as usual)", file=sys.stderr, flush=True)
            except (OSError, ValueError, AttributeError):
                pass
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except OSError as exc:
                self._gone(exc)
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except OSError as exc:
                self._gone(exc)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def guard_streams(command: str = "gemmlab") -> None:
    """Call first in every command's entry point (``command``: its name, for the one warning
    line). Wraps ``sys.stdout`` in :class:`PipeSafeStream` (once; idempotent), so output into a
    closed pipe or a full device ends quietly with the command's own exit status instead of a
    traceback; ``sys.stderr`` likewise, without a warning (``2>/dev/full``: a bad input's one line
    cannot be written, but its exit status stays 2, where Python's failed traceback made it 1).
    A standard stream the command was started without (``>&-``, ``2>&-``: Python's
    ``sys.stdout``/``sys.stderr`` are then None) becomes one that writes to /dev/null, so the
    command still runs and its exit status says how it went (it had been exit 1 with nothing said)."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            try:
                setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))
            except OSError:
                pass
    if sys.stdout is not None and not isinstance(sys.stdout, PipeSafeStream):
        sys.stdout = PipeSafeStream(sys.stdout, command)
    if sys.stderr is not None and not isinstance(sys.stderr, PipeSafeStream):
        sys.stderr = PipeSafeStream(sys.stderr, command, warn=False)


def output_path(text: str) -> str:
    """argparse ``type`` of an output path option (``--out``): refuses an empty or blank one (``--out
    ''`` wrote a tuning sweep into the working directory and gave gemmlab-report ``error: : already
    exists``); the parser's error line then names the option."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a path")
    return text


def folder_path(text: str) -> str:
    """argparse ``type`` of an input folder option (``gemmlab-tune --plugin-dir``): refuses an empty or
    blank one (``--plugin-dir ''`` loaded the working directory as a plugin folder); the parser's
    error line then names the option."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a folder of drop-in plugins (*.py)")
    return text


class OneLineParser(argparse.ArgumentParser):
    """An ``argparse.ArgumentParser`` whose errors are one line, ``PROG: error: MESSAGE (see
    --help)``, exit status 2 (argparse itself prints the usage first). A subcommand's parser
    (``add_subparsers``) says ``PROG: error: SUBCOMMAND: MESSAGE (see --help)``."""

    def __init__(self, *args, top: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._top = top

    def add_subparsers(self, **kwargs):
        kwargs.setdefault("parser_class", functools.partial(OneLineParser, top=self.prog))
        return super().add_subparsers(**kwargs)

    def error(self, message):  # one line, exit 2 (argparse would add the usage)
        prog = self.prog
        if self._top and prog.startswith(self._top + " "):
            prog, message = self._top, f"{prog[len(self._top) + 1:]}: {message}"
        print(f"{prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


@contextlib.contextmanager
def environ(name: str, value: str | None):
    """Within: the environment variable ``name`` is ``value`` (None: unset); restored afterwards."""
    before = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def start_command(command: str, module: str, function: str):
    """Start a console script (:mod:`gemmlab.cli.entry`): import ``module`` with the signals held back
    (:func:`signals_deferred`), then run ``function()`` (the command's ``main``) through :func:`run_command`: an
    interrupt it does not handle itself is one line, exit 130 (SIGTERM: 143), saying what the
    module's ``INTERRUPTED`` says was kept (default: :data:`gemmlab.console.KEPT_RECORDS`)."""
    with signals_deferred(command):
        loaded = importlib.import_module(module)  # named, not imported here: the base imports no command
    # the installed script (pip's wrapper, the process's __main__) ends the process after this: a late
    # Ctrl-C leaves its exit status as it is; called from other code (tests), signals are left alone
    script = Path(getattr(sys.modules.get("__main__"), "__file__", None) or "").name == command
    with settled_exit() if script else contextlib.nullcontext():
        return run_command(command, getattr(loaded, function), getattr(loaded, "INTERRUPTED", None))
