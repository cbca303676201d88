"""The progress of a sweep's points on the terminal: points done / total, the current point, the
time left. A rich bar on a terminal, one plain line per finished point otherwise (logs, pipes).

:class:`PointProgress` knows nothing of Hydra: the ``gemmlab`` command's multirun feeds it through
its Hydra callback (:class:`gemmlab.cli.sweep.SweepProgress`), which tells it the number of points
planned, each point's label and, when it ends, what it left (:func:`gemmlab.run.store.point_outcome`).
"""

from __future__ import annotations

import sys
import time
from typing import Callable


class PointProgress:
    """Progress and ETA of a sweep's points (times: ``time.perf_counter`` seconds).

    Attributes (set by :meth:`start`): ``total`` (points planned, None unknown; dropped when more
    end than planned), ``done`` (points ended), ``started``, ``bar`` (the rich bar on a terminal,
    else None) and its ``task``."""

    def start(self, total: int | None) -> None:
        """A sweep of ``total`` points (None: not known) starts."""
        from rich.console import Console
        self.console = Console(stderr=True)
        self.total = total
        self.done = 0
        self.started = time.perf_counter()
        self.bar = None
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn(), console=self.console, transient=True)
            self.task = self.bar.add_task("sweep", total=self.total)
            self.bar.start()

    def point_started(self, label: str, num: int | None) -> None:
        """Point ``num`` (its folder's and summary row's number; None: the count so far) starts; the
        bar shows it with its ``label`` (its overrides)."""
        if getattr(self, "bar", None) is not None:
            self.bar.update(self.task, description=f"point #{num if num is not None else self.done}: {label}")

    def point_ended(self, label: str, outcome: Callable[[], str]) -> None:
        """A point ended: the bar advances, or a plain line says ``[done/total] <outcome()>: <label>``
        with the time elapsed and left (``outcome`` is asked only for the line)."""
        if not hasattr(self, "started"):
            return
        self.done += 1
        if self.total is not None and self.done > self.total:  # a count that was wrong: say it is not known
            self.total = None
        if self.bar is not None:
            self.bar.advance(self.task)
            return
        elapsed = time.perf_counter() - self.started
        eta = ""
        if self.total:
            eta = f", ETA {elapsed / self.done * (self.total - self.done):.0f} s"
        print(f"[{self.done}/{self.total or '?'}] {outcome()}: {label} "
              f"({elapsed:.0f} s elapsed{eta})", file=sys.stderr, flush=True)  # one plain line per point in logs

    def stop(self) -> None:
        """The sweep ended: the bar goes."""
        if getattr(self, "bar", None) is not None:
            self.bar.stop()
