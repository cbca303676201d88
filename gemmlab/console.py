"""What every gemmlab command line shares (``gemmlab``, ``gemmlab-tune``, ``gemmlab-report``,
``gemmlab-compare``, ``python -m gemmlab.results.families``): a standard output that survives a
reader that went away (``... | head -1``), and argparse errors in one line.

Base layer (no gemmlab imports): the command modules of ``results`` and ``cli`` use it alike.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys


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
