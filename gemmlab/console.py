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
    interpreter's final flush stays quiet too (Python docs, "Note on SIGPIPE")."""

    def __init__(self, stream):
        self._stream = stream
        self.broken = False

    def _gone(self) -> None:
        self.broken = True
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
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Wrap ``sys.stdout`` in :class:`PipeSafeStream` (once; idempotent): call first in every
    command's entry point, so output into a closed pipe ends quietly with the command's own exit
    status instead of a ``BrokenPipeError`` traceback."""
    if sys.stdout is not None and not isinstance(sys.stdout, PipeSafeStream):
        sys.stdout = PipeSafeStream(sys.stdout)


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
