"""Sweep summary: collect every point's ``result.json`` under a sweep directory into one table,
print it (rich) and save it as ``summary.csv`` and ``summary.md`` in the sweep directory.

Hooked into Hydra as a callback (``hydra.callbacks.gemmlab_summary`` in conf/config.yaml), so
it works with any launcher: it reads files, not in-process state.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from gemmlab.record import VALID_STATUSES

COLUMNS = ("point", "kernel", "shape", "params", "status", "median_ms", "gflops", "vs_baseline", "max_abs_error",
           "error")
FAILED_POINTS: list[str] = []  # set by the callback; the CLI turns it into the exit status


def _row(path: Path, root: Path) -> dict[str, Any]:
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"point": str(path.parent.relative_to(root)), "status": "unreadable", "error": str(exc)}
    kernel = rec.get("kernel") or {"name": (rec.get("config") or {}).get("kernel", {}).get("name", "?")}
    shape = rec.get("shape")
    timing = rec.get("timing") or {}
    ver = rec.get("verification") or {}
    return {"point": str(path.parent.relative_to(root)), "kernel": kernel.get("name"),
            "shape": "x".join(str(shape[d]) for d in "MNK") if shape else str((rec.get("config") or {}).get("shape")),
            "params": " ".join(f"{k}={v}" for k, v in (kernel.get("params") or {}).items()),
            "status": rec.get("status"),
            "median_ms": f"{timing['median_ms']:.5f}" if "median_ms" in timing else "",
            "gflops": f"{timing['gflops']:.1f}" if "gflops" in timing else "",
            "vs_baseline": (f"{rec['ratio_to_baseline']['median_time']:.3f}x {rec['ratio_to_baseline']['baseline']}"
                            if rec.get("ratio_to_baseline") else ""),
            "max_abs_error": f"{ver['max_abs_error']:.3g}" if isinstance(ver.get("max_abs_error"), float) else str(ver.get("max_abs_error", "")),
            "error": rec.get("error") or ""}


def collect(sweep_dir: Path) -> list[dict[str, Any]]:
    """One row per ``result.json`` found directly below ``sweep_dir`` (sorted by job number)."""
    sweep_dir = Path(sweep_dir)
    paths = sorted(sweep_dir.glob("*/result.json"),
                   key=lambda p: (int(p.parent.name) if p.parent.name.isdigit() else 1 << 30, p.parent.name))
    return [_row(p, sweep_dir) for p in paths]


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")).replace("|", "\\|") for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


#: columns shown on a terminal narrower than the full table, most important first
NARROW_COLUMNS = ("point", "kernel", "shape", "status", "gflops", "error", "median_ms", "params", "vs_baseline")


def _fit_columns(rows: list[dict[str, Any]], width: int) -> tuple[tuple[str, ...], int]:
    """The columns that fit one line per point on a ``width``-character terminal (most important
    first, in table order) and the width left for ``error`` (cut with an ellipsis)."""
    def natural(c: str) -> int:
        return max([len(c)] + [len(str(r.get(c, ""))) for r in rows])

    chosen: list[str] = []
    for c in NARROW_COLUMNS:
        trial = chosen + [c]
        used = sum(natural(x) for x in trial if x != "error") + 3 * len(trial) + 1
        room = width - used
        if c == "error" and room < 8 or c != "error" and room < (24 if "error" in trial else 0):
            continue
        chosen = trial
    used = sum(natural(x) for x in chosen if x != "error") + 3 * len(chosen) + 1
    return tuple(c for c in COLUMNS if c in chosen), max(width - used, 0)


def write_summary(sweep_dir: Path, console=None) -> list[dict[str, Any]]:
    """Collect, save (``summary.csv``, ``summary.md``: every column) and print the summary of
    ``sweep_dir``; return the rows. On a terminal the table fits its width, one line per point
    (fewer columns, long cells cut with an ellipsis); elsewhere (a log file) it is printed whole.

    Args:
        console: a ``rich.console.Console`` to print on (default: stdout).
    """
    from rich.console import Console
    from rich.table import Table

    rows = collect(sweep_dir)
    with open(Path(sweep_dir) / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (Path(sweep_dir) / "summary.md").write_text(markdown(rows))
    console = console or Console()
    if not console.is_terminal:
        console = Console(file=console.file, width=200)
    wide = console.width >= 200
    columns, error_width = (COLUMNS, 60) if wide else _fit_columns(rows, console.width)
    table = Table(title=f"gemmlab sweep: {sweep_dir}", show_lines=False)
    for c in columns:
        if wide:
            table.add_column(c, overflow="fold", max_width=60 if c == "error" else None)
        else:
            table.add_column(c, no_wrap=True, overflow="ellipsis",
                             max_width=error_width if c == "error" else None)
    for r in rows:
        style = None if r.get("status") in VALID_STATUSES else "red"
        table.add_row(*(str(r.get(c, "")) for c in columns), style=style)
    console.print(table)
    if not wide:
        console.print(f"all columns: {Path(sweep_dir) / 'summary.md'}", overflow="ellipsis", no_wrap=True)
    return rows


SEARCH: list[str] = []  # set when the sweeper is a search (Optuna): failed trials are expected


def is_search(config) -> bool:
    """True when the sweep is a search (Hydra's Optuna sweeper) rather than a grid."""
    return "optuna" in str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).lower()


def best_row(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The verified and timed row with the highest GFLOP/s (failed points never qualify)."""
    timed = [r for r in rows if r.get("status") == "ok" and r.get("gflops")]
    return max(timed, key=lambda r: float(r["gflops"])) if timed else None


class SweepSummary(Callback):
    """Hydra callback: at the end of a multirun, summarise the sweep directory."""

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        rows = write_summary(sweep_dir)
        failed = [r["point"] for r in rows if r.get("status") not in VALID_STATUSES]
        timed = sum(r.get("status") == "ok" for r in rows)
        best = best_row(rows)
        if best:
            text = (f"best verified point: #{best['point']} {best['kernel']} {best['params']} {best['shape']}: "
                    f"{best['gflops']} GFLOP/s ({best['median_ms']} ms)")
            print(text)
            (sweep_dir / "best.txt").write_text(text + "\n")
        if is_search(config):
            SEARCH.append(str(sweep_dir))
            if timed == 0 and len(failed) < len(rows):
                print("compile-only search: no trial was timed, so every valid trial scores 0.0 and the "
                      "optimizer's 'best' is only a valid tile set, not a fast one")
            print(f"{len(rows)} trials: {timed} verified and timed, {len(rows) - len(failed) - timed} compiled only, "
                  f"{len(failed)} pruned as failed trials (invalid parameters or failed checks); "
                  f"summary: {sweep_dir / 'summary.md'}, optimizer: {sweep_dir / 'optimization_results.yaml'}")
            if len(failed) == len(rows):
                FAILED_POINTS.extend(failed)
            return
        FAILED_POINTS.extend(failed)
        print(f"{len(rows)} points: {timed} verified and timed, {len(rows) - len(failed) - timed} compiled only, "
              f"{len(failed)} failed; summary: {sweep_dir / 'summary.md'}")


def count_jobs(config) -> int | None:
    """How many jobs this multirun will launch: the grid size for Hydra's basic sweeper, n_trials
    for Optuna; None when unknown."""
    if is_search(config):
        return OmegaConf.select(config, "hydra.sweeper.n_trials", default=None)
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser
        raw = OmegaConf.select(config, "hydra.sweeper.params", default=None)
        params = OmegaConf.to_container(raw) if raw is not None else {}
        task = {o.split("=", 1)[0]: o for o in OmegaConf.select(config, "hydra.overrides.task", default=[])}
        strings = [task.pop(k, f"{k}={v}") for k, v in params.items()] + list(task.values())
        parsed = OverridesParser.create().parse_overrides(strings)
        return sum(len(batch) for batch in BasicSweeper.split_arguments(parsed, None))
    except Exception:
        return None


class SweepProgress(Callback):
    """Hydra callback: sweep progress (points done / total, current point, ETA) with rich. A bar
    on a terminal, one line per finished point otherwise. Jobs that a launcher runs in other
    processes report nothing here (the summary still covers them)."""

    def __getstate__(self):  # launchers that pickle the callbacks (submitit) get a fresh one
        return {}

    def on_multirun_start(self, config, **kwargs) -> None:
        from rich.console import Console
        self.console = Console(stderr=True)
        self.total = count_jobs(config)
        self.done = 0
        self.started = time.perf_counter()
        self.bar = None
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn(), console=self.console, transient=True)
            self.task = self.bar.add_task("sweep", total=self.total)
            self.bar.start()

    def _label(self, config) -> str:
        return " ".join(OmegaConf.select(config, "hydra.overrides.task", default=[]))

    def on_job_start(self, config, **kwargs) -> None:
        if getattr(self, "bar", None) is not None:  # the job number: the point's folder and summary row
            num = OmegaConf.select(config, "hydra.job.num", default=None)
            self.bar.update(self.task, description=f"point #{num if num is not None else self.done}: {self._label(config)}")

    def on_job_end(self, config, job_return, **kwargs) -> None:
        if not hasattr(self, "started"):
            return
        self.done += 1
        if self.bar is not None:
            self.bar.advance(self.task)
            return
        elapsed = time.perf_counter() - self.started
        eta = ""
        if self.total:
            eta = f", ETA {elapsed / self.done * (self.total - self.done):.0f} s"
        print(f"[{self.done}/{self.total or '?'}] done: {self._label(config)} ({elapsed:.0f} s elapsed{eta})",
              file=sys.stderr, flush=True)  # one plain line per point in logs (no wrapping)

    def on_multirun_end(self, config, **kwargs) -> None:
        if getattr(self, "bar", None) is not None:
            self.bar.stop()
