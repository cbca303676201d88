"""Sweep summary and progress: Hydra callbacks of a multirun.

:class:`SweepSummary` collects every point's ``result.json`` under the sweep directory, in any
``hydra.sweep.subdir`` layout (every depth; a sanitizer child's record inside a point is part of
that point), into one table, prints it (rich) and saves it as ``summary.csv`` and ``summary.md``
in the sweep directory. It reads files, not in-process state, so it works with any launcher, and
it ends the multirun with the exit status derived from those records (:class:`SweepOutcome`):
1 when a point failed (for a search: when no trial was valid), else 0. The records are read
through :mod:`gemmlab.stages.record_model`. :class:`SweepProgress` shows progress and ETA.

Hooked into Hydra as callbacks (``hydra.callbacks`` in conf/config.yaml).
"""

from __future__ import annotations

import csv
import itertools
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from gemmlab.console import count
from gemmlab.stages.record_model import VALID_STATUSES, Record, find_records, read_record

COLUMNS = ("point", "kernel", "shape", "params", "status", "median_ms", "gflops", "vs_baseline", "max_abs_error",
           "error")


#: what a compiled point reports (mode=compile has no timing): registers per thread, spill stores/loads
#: in bytes, shared memory per block in bytes (static + the launch's dynamic), theoretical occupancy
COMPILE_COLUMNS = ("registers", "spills", "smem_bytes", "occupancy")
#: what only a run (mode=run) fills: left out of a summary whose points were all compiled only
TIMING_COLUMNS = ("median_ms", "gflops", "vs_baseline", "max_abs_error")


def _int_text(value: float | None) -> str:
    return "" if value is None else str(int(value))


def _compile_cells(rec: Record) -> dict[str, str]:
    """The :data:`COMPILE_COLUMNS` cells of ``rec`` (empty where it has no ptxas report)."""
    spills = ("" if rec.spill_store_bytes is None and rec.spill_load_bytes is None
              else f"{_int_text(rec.spill_store_bytes) or '?'}/{_int_text(rec.spill_load_bytes) or '?'}")
    smem = ("" if rec.static_shared_bytes is None
            else _int_text(rec.static_shared_bytes + (rec.dynamic_shared_bytes or 0)))
    return {"registers": _int_text(rec.registers), "spills": spills, "smem_bytes": smem,
            "occupancy": f"{rec.occupancy:.2f}" if rec.occupancy is not None else ""}


def _row(rec: Record, root: Path) -> dict[str, Any]:
    """One summary row (strings) of the record view ``rec`` found under ``root``."""
    point = Path(rec.path).parent.relative_to(root).as_posix()
    if rec.category == "unreadable":
        return {"point": point, "status": "unreadable", "error": rec.error}
    raw = rec.raw
    ratio = raw.get("ratio_to_baseline") if isinstance(raw.get("ratio_to_baseline"), dict) else None
    config = raw.get("config") if isinstance(raw.get("config"), dict) else {}
    max_abs = ((raw.get("verification") or {}).get("max_abs_error", "")
               if isinstance(raw.get("verification"), dict) else "")
    return {"point": point, "kernel": rec.kernel or "?",
            "shape": rec.shape_text or str(config.get("shape")),  # MxNxK also for a refused point's config
            "precision": rec.precision or "fp32", "layout": (rec.settings or {}).get("layout") or "row/row",
            "params": rec.params_text, "status": raw.get("status"),
            "median_ms": f"{rec.median_ms:.5f}" if rec.median_ms is not None else "",
            "gflops": f"{rec.gflops:.1f}" if rec.gflops is not None else "",
            "vs_baseline": (f"{ratio['median_time']:.3f}x {ratio['baseline']}" if ratio else ""),
            "max_abs_error": f"{max_abs:.3g}" if isinstance(max_abs, float) else str(max_abs),
            "error": raw.get("error") or "", "mode": rec.mode or "", **_compile_cells(rec)}


def collect(sweep_dir: Path) -> list[dict[str, Any]]:
    """One row per point's ``result.json`` at any depth below ``sweep_dir`` (natural order: job
    ``2`` before ``10``); a record inside another point's directory (a sanitizer child) is not a
    point, nor is a JSON object that is no gemmlab record (``{}``, another tool's ``result.json``:
    :attr:`~gemmlab.stages.record_model.Record.foreign`)."""
    sweep_dir = Path(sweep_dir)
    records = (read_record(p) for p in find_records([sweep_dir], children=False))
    return [_row(rec, sweep_dir) for rec in records if rec.foreign is None]


#: the columns :func:`columns` adds after ``shape`` when a sweep mixes precisions or layouts
SETTING_COLUMNS = ("precision", "layout")


def columns(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """:data:`COLUMNS`, plus ``precision`` and ``layout`` (A/B) after ``shape`` when any point is
    not fp32 with row-major A and B (a sweep of fp32 row/row points keeps its summary as it was);
    when any point was compiled only (``mode=compile``), :data:`COMPILE_COLUMNS` before ``error``,
    and when every point was, without :data:`TIMING_COLUMNS` (always empty there)."""
    cols = COLUMNS
    compiled = [r.get("mode") == "compile" for r in rows]
    if any(compiled):
        keep = [c for c in cols if not (all(compiled) and c in TIMING_COLUMNS)]
        i = keep.index("error")
        cols = tuple(keep[:i]) + COMPILE_COLUMNS + tuple(keep[i:])
    if all(r.get("precision", "fp32") == "fp32" and r.get("layout", "row/row") == "row/row" for r in rows):
        return cols
    i = cols.index("shape") + 1
    return cols[:i] + SETTING_COLUMNS + cols[i:]


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a GitHub-flavoured Markdown table (:func:`columns`)."""
    cols = columns(rows)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")).replace("|", "\\|") for c in cols) + " |")
    return "\n".join(lines) + "\n"


#: columns shown on a terminal narrower than the full table, most important first
NARROW_COLUMNS = ("point", "kernel", "shape", "status", "gflops", "error", "median_ms", "params", "vs_baseline")
#: the same order with the settings (after shape) and what a compiled point reports (after gflops)
_NARROW_ORDER = (NARROW_COLUMNS[:3] + SETTING_COLUMNS + NARROW_COLUMNS[3:5] + ("registers", "occupancy")
                 + NARROW_COLUMNS[5:7] + ("spills", "smem_bytes") + NARROW_COLUMNS[7:])


def _fit_columns(rows: list[dict[str, Any]], width: int) -> tuple[tuple[str, ...], int]:
    """The columns that fit one line per point on a ``width``-character terminal (most important
    first, in table order) and the width left for ``error`` (cut with an ellipsis)."""
    def natural(c: str) -> int:
        return max([len(c)] + [len(str(r.get(c, ""))) for r in rows])

    chosen: list[str] = []
    all_columns = columns(rows)
    narrow = tuple(c for c in _NARROW_ORDER if c in all_columns)
    for c in narrow:
        trial = chosen + [c]
        used = sum(natural(x) for x in trial if x != "error") + 3 * len(trial) + 1
        room = width - used
        if c == "error" and room < 8 or c != "error" and room < (24 if "error" in trial else 0):
            continue
        chosen = trial
    used = sum(natural(x) for x in chosen if x != "error") + 3 * len(chosen) + 1
    return tuple(c for c in all_columns if c in chosen), max(width - used, 0)


def save_summary(sweep_dir: Path) -> list[dict[str, Any]]:
    """Collect the records of ``sweep_dir`` and save ``summary.csv`` and ``summary.md`` (every
    column); return the rows. Also after an interrupt (the points that finished so far)."""
    rows = collect(sweep_dir)
    with open(Path(sweep_dir) / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns(rows), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (Path(sweep_dir) / "summary.md").write_text(markdown(rows))
    return rows


def write_summary(sweep_dir: Path, console=None) -> list[dict[str, Any]]:
    """Collect, save (``summary.csv``, ``summary.md``: every column) and print the summary of
    ``sweep_dir``; return the rows. On a terminal the table fits its width, one line per point
    (fewer columns, long cells cut with an ellipsis); elsewhere (a log file) it is printed whole.

    Args:
        console: a ``rich.console.Console`` to print on (default: stdout).
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text  # cells are plain text: "[cublas]" in an error is no markup

    rows = save_summary(sweep_dir)
    console = console or Console()
    if not console.is_terminal:
        console = Console(file=console.file, width=200)
    wide = console.width >= 200
    shown, error_width = (columns(rows), 60) if wide else _fit_columns(rows, console.width)
    table = Table(title=Text(f"gemmlab sweep: {sweep_dir}"), show_lines=False)
    for c in shown:
        if wide:
            table.add_column(c, overflow="fold", max_width=60 if c == "error" else None)
        else:
            table.add_column(c, no_wrap=True, overflow="ellipsis",
                             max_width=error_width if c == "error" else None)
    for r in rows:
        style = None if r.get("status") in VALID_STATUSES else "red"
        table.add_row(*(Text(str(r.get(c, ""))) for c in shown), style=style)
    console.print(table)
    if not wide:
        console.print(Text(f"all columns: {Path(sweep_dir) / 'summary.md'}"), overflow="ellipsis", no_wrap=True)
    return rows


def is_search(config) -> bool:
    """True when the sweep is a search (Hydra's Optuna sweeper) rather than a grid."""
    return "optuna" in str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).lower()


def best_row(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The verified and timed row with the highest GFLOP/s (failed points never qualify)."""
    timed = [r for r in rows if r.get("status") == "ok" and r.get("gflops")]
    return max(timed, key=lambda r: float(r["gflops"])) if timed else None


@dataclass
class SweepOutcome:
    """What a finished sweep amounts to, from its records on disk.

    ``failed``: the points whose status is not valid; ``search``: the sweeper is a search, where
    failed trials are expected (pruned); ``exit_status``: 1 when a grid point failed, when every
    trial of a search failed, or when no record was found; else 0 (:meth:`exit_status_with` adds
    the statuses of points run in this process).
    """

    sweep_dir: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    search: bool = False

    @property
    def failed(self) -> list[str]:
        """The points (relative directories) whose status is not valid."""
        return [r["point"] for r in self.rows if r.get("status") not in VALID_STATUSES]

    @property
    def timed(self) -> int:
        """How many points were verified and timed."""
        return sum(r.get("status") == "ok" for r in self.rows)

    @property
    def exit_status(self) -> int:
        """The multirun's exit status from the records alone (see the class docstring)."""
        return self.exit_status_with(())

    def exit_status_with(self, statuses) -> int:
        """The multirun's exit status, given the exit statuses of the points this process ran
        itself (``statuses``: a point may fail without a record of its own, e.g. one that refused
        to overwrite a result). A search ignores them: failed trials are pruned. A grid exits 1
        when a record says a point failed, else with the highest of ``statuses`` (or 1 when no
        record was found)."""
        if self.search:
            return 1 if not self.rows or len(self.failed) == len(self.rows) else 0
        if not self.rows:
            return max([1, *statuses])
        return 1 if self.failed else max([0, *statuses])


class SweepFinished(SystemExit):
    """Ends a multirun with its :class:`SweepOutcome` (``outcome``): raised by
    :class:`SweepSummary` after the summary, it passes Hydra (which catches ``Exception``, not
    ``SystemExit``) to the caller of the Hydra app (``gemmlab.cli.app.main`` combines it with the
    statuses of in-process points); uncaught, the process exits with ``code``, the records' status."""

    def __init__(self, outcome: SweepOutcome):
        super().__init__(outcome.exit_status)
        self.outcome = outcome


def summarize(sweep_dir: Path, search: bool = False) -> SweepOutcome:
    """Write and print the summary of ``sweep_dir`` (and ``best.txt`` when a point was timed),
    print the counts line, and return the :class:`SweepOutcome`."""
    sweep_dir = Path(sweep_dir)
    outcome = SweepOutcome(sweep_dir, write_summary(sweep_dir), search)
    rows, failed, timed = outcome.rows, outcome.failed, outcome.timed
    best = best_row(rows)
    if best:
        text = (f"best verified point: #{best['point']} {best['kernel']} {best['params']} {best['shape']}: "
                f"{best['gflops']} GFLOP/s ({best['median_ms']} ms)")
        print(text)
        (sweep_dir / "best.txt").write_text(text + "\n")
    if not rows:
        print(f"gemmlab: error: no result.json found under {sweep_dir}", file=sys.stderr)
    elif search:
        if timed == 0 and len(failed) < len(rows):
            print("compile-only search: no trial was timed, so every valid trial scores 0.0 and the "
                  "optimizer's 'best' is only a valid tile set, not a fast one")
        print(f"{count(len(rows), 'trial')}: {timed} verified and timed, {len(rows) - len(failed) - timed} compiled only, "
              f"{len(failed)} pruned as failed trials (invalid parameters or failed checks); "
              f"summary: {sweep_dir / 'summary.md'}"
              + (f", optimizer: {optimizer}" if (optimizer := sweep_dir / "optimization_results.yaml").exists() else ""))
    else:
        print(f"{count(len(rows), 'point')}: {timed} verified and timed, {len(rows) - len(failed) - timed} compiled only, "
              f"{len(failed)} failed; summary: {sweep_dir / 'summary.md'}")
    return outcome


def keep_earlier_hydra_files(root: Path, subdir: str | None, points_below: bool = False) -> list[Path]:
    """Move the ``subdir`` folder (Hydra's ``hydra.output_subdir``, ``.hydra``: the config.yaml,
    hydra.yaml and overrides.yaml of the command that ran there) of ``root`` — with
    ``points_below``, instead those of the gemmlab points at any depth below ``root`` (folders
    holding a ``result.json``: a sweep's jobs) — aside as ``<subdir>.previous-<time>-<pid>``, so a
    command run again into those folders (a re-run, ``resume=true``, a refused point) does not
    overwrite the earlier command's. Returns the new paths; errors only cost the copy (never raises)."""
    if not subdir or not root.is_dir():
        return []
    from gemmlab.run.pipeline import previous_tag
    moved = []
    try:
        if points_below:
            found = [r.parent / subdir for r in root.rglob("result.json") if (r.parent / subdir).is_dir()]
        else:
            found = [root / subdir] if (root / subdir).is_dir() else []
    except OSError:
        return []
    for folder in found:
        target = folder.with_name(f"{folder.name}.{previous_tag(folder.parent)}")
        try:
            os.replace(folder, target)
            moved.append(target)
        except OSError:
            pass
    return moved


class KeepEarlierHydraFiles(Callback):
    """Hydra callback: before a run or a sweep starts, keep the ``.hydra`` folders an earlier
    command left in its directories (:func:`keep_earlier_hydra_files`) and a sweep's
    ``multirun.yaml`` (:func:`keep_earlier_multirun_yaml`): Hydra rewrites them at the start of
    every job or sweep, before gemmlab sees the point (the records themselves are never
    rewritten: :func:`gemmlab.run.pipeline.keep_previous`). With ``resume=true``, a folder that
    holds no record to resume is said in one line (:func:`nothing_to_resume`)."""

    def on_run_start(self, config, **kwargs) -> None:
        self._keep(config, "run", False)

    def on_multirun_start(self, config, **kwargs) -> None:
        self._keep(config, "sweep", True)

    @staticmethod
    def _keep(config, mode: str, points_below: bool) -> None:
        try:  # a directory that does not resolve is the run's own error to report, not this one's
            root, subdir = Path(str(config.hydra[mode].dir)), config.hydra.output_subdir
        except Exception:
            return
        line = nothing_to_resume(root, mode) if config.get("resume") is True else None
        if line:
            print(line, flush=True)
        keep_earlier_hydra_files(root, subdir, points_below)
        if mode == "sweep":
            keep_earlier_multirun_yaml(root)


def keep_earlier_multirun_yaml(root: Path) -> Path | None:
    """Move the ``multirun.yaml`` an earlier sweep left in ``root`` (Hydra writes the sweep's own at
    its start) aside as ``multirun.previous-<time>-<pid>.yaml``, so a re-run (``resume=true``) keeps
    the definition of the sweep its records came from. Returns the new path; errors only cost the
    copy (never raises)."""
    old = root / "multirun.yaml"
    if not old.is_file():
        return None
    from gemmlab.run.pipeline import previous_tag
    try:
        target = root / f"multirun.{previous_tag(root)}.yaml"
        os.replace(old, target)
    except OSError:
        return None
    return target


def put_back_kept(root: Path) -> list[Path]:
    """Undo in the sweep folder ``root`` what this process's :class:`KeepEarlierHydraFiles` moved
    aside at the start of a sweep that was then refused before any point ran (a bad sweeper
    argument, two points given one folder): the earlier sweep's ``multirun.yaml`` goes back over
    the one Hydra wrote for the refused command, each point's ``.hydra`` folder back to its name.
    Returns the paths put back; errors leave the kept copies where they are (never raises)."""
    import re

    from gemmlab.run.pipeline import previous_tag_pattern
    tag = previous_tag_pattern(os.getpid())
    back: list[Path] = []
    try:
        kept = sorted(p for p in root.glob("multirun.previous-*.yaml") if re.fullmatch(rf"multirun\.{tag}\.yaml", p.name))
        if kept:
            os.replace(kept[-1], root / "multirun.yaml")
            back.append(root / "multirun.yaml")
        for moved in sorted(root.rglob("*.previous-*")):
            name = re.fullmatch(rf"(.+)\.{tag}", moved.name)
            if name and moved.is_dir() and not os.path.lexists(moved.parent / name.group(1)):
                os.replace(moved, moved.parent / name.group(1))
                back.append(moved.parent / name.group(1))
    except OSError:
        pass
    return back


def nothing_to_resume(root: Path, mode: str) -> str | None:
    """The line that says ``resume=true`` has no earlier record to resume in ``root`` (the
    ``hydra.sweep.dir`` of a sweep, ``mode="sweep"``, or ``hydra.run.dir`` of one run), e.g. a new
    timestamped folder because the command did not name the earlier one; None when ``root``
    holds a ``result.json`` at any depth."""
    try:
        if root.is_dir() and next(root.rglob("result.json"), None) is not None:
            return None
    except OSError:
        return None
    return (f"resume=true: {root} holds no earlier result.json, so every point runs; to resume, name the "
            f"earlier folder: hydra.{mode}.dir=DIR resume=true")


class SweepSummary(Callback):
    """Hydra callback: at the end of a multirun, summarise the sweep directory and end the
    process with the exit status of its records (:class:`SweepFinished`)."""

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir, search = Path(config.hydra.sweep.dir), is_search(config)
        try:
            outcome = summarize(sweep_dir, search)
        except Exception as exc:  # Hydra would only warn: a sweep whose summary failed must not pass
            print(f"gemmlab: error: the summary of {sweep_dir} failed ({type(exc).__name__}: {exc})",
                  file=sys.stderr)
            outcome = SweepOutcome(sweep_dir, [], search)
        if sys.stdout is not None:  # None: the command was started with stdout closed (>&-)
            sys.stdout.flush()
        raise SweepFinished(outcome)


def count_jobs(config) -> int | None:
    """How many jobs this multirun will launch: the grid size for Hydra's basic sweeper, n_trials
    for Optuna; None when unknown."""
    if is_search(config):
        return OmegaConf.select(config, "hydra.sweeper.n_trials", default=None)
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.core.override_parser.types import Glob
        raw = OmegaConf.select(config, "hydra.sweeper.params", default=None)
        try:  # a value from a resolver, e.g. experiment=shapes' ${gemmlab_suite:}, is the sweep it gives
            params = OmegaConf.to_container(raw, resolve=True) if raw is not None else {}
        except Exception:
            params = OmegaConf.to_container(raw) if raw is not None else {}
        task = {o.split("=", 1)[0]: o for o in OmegaConf.select(config, "hydra.overrides.task", default=[])}
        strings = [task.pop(k, f"{k}={v}") for k, v in params.items()] + list(task.values())
        parsed = OverridesParser.create().parse_overrides(strings)
        if any(isinstance(o.value(), Glob) for o in parsed):  # Hydra matches a glob against the group's options
            strings = [_glob_as_list(o) if isinstance(o.value(), Glob) else o.input_line for o in parsed]
            parsed = OverridesParser.create().parse_overrides(strings)
        return sum(len(batch) for batch in grid(parsed, None))
    except Exception:
        return None


def kernel_options() -> list[str]:
    """The options of the ``kernel`` config group as Hydra sees them, sorted: gemmlab's
    ``conf/kernel`` files and the kernel nodes in Hydra's ConfigStore (a plugin kernel without a
    file gets one from :func:`gemmlab.cli.precheck._prepare`, which calls this after storing them)."""
    from hydra.core.config_store import ConfigStore

    from gemmlab.paths import CONF_DIR
    options = {p.stem for p in (CONF_DIR / "kernel").glob("*.yaml")}
    options |= {name.removesuffix(".yaml") for name in ConfigStore.instance().repo.get("kernel", {})}
    return sorted(options)


def _glob_as_list(o) -> str:
    """A ``kernel=glob(...)`` override as the comma list of the kernels it matches
    (:func:`kernel_options`, the group's options Hydra matches it against; a progress line's total,
    ``[1/3]``, came out ``[1/?]``).

    Raises:
        ValueError: a glob over another group (its options are not listed here) or one that
            matches nothing."""
    if o.key_or_group != "kernel":
        raise ValueError(f"options of {o.key_or_group} not listed")
    matched = o.value().filter(kernel_options())
    if not matched:
        raise ValueError("the glob matches nothing")
    return f"{o.input_line.split('=', 1)[0]}={','.join(matched)}"


#: the logger of Hydra's Optuna sweeper (hydra-optuna-sweeper 1.2), which says why a trial failed
OPTUNA_SWEEPER_LOGGER = "hydra_plugins.hydra_optuna_sweeper._impl"


class FailedTrialLine(logging.Filter):
    """The Optuna sweeper's line for a trial whose point returned no objective, in gemmlab's words.

    gemmlab's objective (:func:`gemmlab.cli.app.objective`) is None for a point that failed or was
    invalid, and the point's own line already said why; the sweeper then logs ``Failed
    experiment: Return value must be float-castable. Got 'None'.``, which reads like a bug in the
    objective. That one message becomes ``Failed experiment: the point gave no valid measurement
    (its error is above); Optuna marks the trial failed and never picks it``; every other record
    passes unchanged (a logging filter: Python's ``logging`` documentation, "Filter Objects")."""

    SWEEPER_TEXT = "Failed experiment: Return value must be float-castable. Got 'None'."
    TEXT = ("Failed experiment: the point gave no valid measurement (its error is above); Optuna marks the "
            "trial failed and never picks it")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() == self.SWEEPER_TEXT:
            record.msg, record.args = self.TEXT, ()
        return True

    @classmethod
    def install(cls) -> None:
        """Attach the filter to the sweeper's logger (once a process)."""
        logger = logging.getLogger(OPTUNA_SWEEPER_LOGGER)
        if not any(isinstance(f, cls) for f in logger.filters):
            logger.addFilter(cls())


class SweepProgress(Callback):
    """Hydra callback: sweep progress (points done / total, current point, ETA) with rich. A bar
    on a terminal, one line per finished point otherwise. Jobs that a launcher runs in other
    processes report nothing here (the summary still covers them)."""

    def __getstate__(self):  # launchers that pickle the callbacks (submitit) get a fresh one
        return {}

    def on_multirun_start(self, config, **kwargs) -> None:
        from rich.console import Console
        if is_search(config):
            FailedTrialLine.install()
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
        self.job_started_ns = time.time_ns()
        if getattr(self, "bar", None) is not None:  # the job number: the point's folder and summary row
            num = OmegaConf.select(config, "hydra.job.num", default=None)
            self.bar.update(self.task, description=f"point #{num if num is not None else self.done}: {self._label(config)}")

    def on_job_end(self, config, job_return, **kwargs) -> None:
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
        print(f"[{self.done}/{self.total or '?'}] {self._outcome(config)}: {self._label(config)} "
              f"({elapsed:.0f} s elapsed{eta})", file=sys.stderr, flush=True)  # one plain line per point in logs

    #: a record written this long (ns) before the job's start still counts as the job's (file
    #: times come from the kernel's coarse clock, a tick behind)
    CLOCK_SLACK_NS = 50_000_000

    def _outcome(self, config) -> str:
        """What the point left: ``done`` (a valid record), ``failed (<status>)``, ``skipped (kept
        its earlier record)`` where the folder's record was not written by this job (resume=true,
        or a refusal), ``no record``."""
        from gemmlab.stages.record_model import read_record
        out_dir = OmegaConf.select(config, "hydra.runtime.output_dir", default=None)
        path = Path(str(out_dir)) / "result.json" if out_dir else None
        try:
            fresh = path.stat().st_mtime_ns >= getattr(self, "job_started_ns", 0) - self.CLOCK_SLACK_NS
        except (OSError, AttributeError):
            return "no record"
        if not fresh:
            return "skipped (kept its earlier record)"
        record = read_record(path)
        if isinstance(record.raw, dict) and record.raw.get("resumed") is True:
            return "skipped (resume=true)"
        return "done" if record.is_valid else f"failed ({record.status})"

    def on_multirun_end(self, config, **kwargs) -> None:
        if getattr(self, "bar", None) is not None:
            self.bar.stop()


def grid(overrides: Sequence[Any], max_batch_size: int | None) -> list[list[list[str]]]:
    """The jobs of parsed ``overrides`` (Hydra ``Override`` objects) in batches of at most
    ``max_batch_size`` (None: one batch), each job a list of ``key=value`` strings: the cartesian
    product of the sweeps, in the order Hydra's ``BasicSweeper.split_arguments`` gives (a later
    override of a key replaces an earlier one in its place)."""
    values: dict[str, list[str]] = {}
    for o in overrides:
        key = o.get_key_element()
        if o.is_sweep_override():
            if not o.is_discrete_sweep():
                raise HydraException(f"GemmlabSweeper does not support sweep type : {o.value_type.name}")
            values[key] = [f"{key}={v}" for v in o.sweep_string_iterator()]
        else:
            values[key] = [f"{key}={o.get_value_element_as_str()}"]
    jobs = [list(x) for x in itertools.product(*values.values())]
    if max_batch_size is None or max_batch_size == -1:
        return [jobs]
    assert max_batch_size > 0
    return [jobs[i:i + max_batch_size] for i in range(0, len(jobs), max_batch_size)]


def sweep_resume_advice(sweep_dir: Path | str) -> str:
    """The line after Ctrl-C (or SIGTERM) in a sweep whose folder is ``sweep_dir`` (quoted for the
    shell and Hydra's override grammar where it holds a space or other special character)."""
    import shlex
    value = str(sweep_dir)
    if shlex.quote(value) != value:
        plain = not any(c in value for c in "'\"$`\\!")  # then "hydra.sweep.dir='<value>'" reads as typed
        value = f"\"hydra.sweep.dir='{value}'\"" if plain else shlex.quote(f"hydra.sweep.dir='{value}'")
        return (f"finished points keep their result.json; to finish the sweep, re-run the same command with "
                f"{value} resume=true")
    return (f"finished points keep their result.json; to finish the sweep, re-run the same command with "
            f"hydra.sweep.dir={value} resume=true")


def sweep_interrupted(folder: Path | str) -> str:
    """The line after an interrupt in the sweep whose folder is ``folder``, wherever it landed (in a
    point: :func:`gemmlab.cli.app._interrupted_advice`; between points or while the sweeper composed them:
    ``hydra_plugins.gemmlab_sweeper``): the resume line (:func:`sweep_resume_advice`) with the
    summary of the points so far, written now (:func:`_summary_of_interrupted`), or, when no point
    had finished, that nothing was measured (no resume to advise)."""
    folder = Path(folder)
    if not folder.is_dir() or next(folder.rglob("result.json"), None) is None:  # e.g. while the sweeper composed
        where = "holds no record" if folder.is_dir() else "was not made"   # its points (a long sweep takes seconds)
        return f"no point of the sweep had finished, so nothing was measured (its folder {folder} {where})"
    return sweep_resume_advice(folder) + _summary_of_interrupted(folder)


def _summary_of_interrupted(folder: Path) -> str:
    """Write the summary of an interrupted sweep's finished points (:func:`save_summary`:
    Hydra's end-of-sweep callback that writes it never runs after Ctrl-C) and say where, as the
    tail of the interrupt's line; '' when no point finished or it cannot be written."""
    try:
        rows = save_summary(folder) if next(folder.rglob("result.json"), None) is not None else []
    except (OSError, ValueError):
        return ""
    return f"; the summary of the {len(rows)} points so far: {folder / 'summary.md'}" if rows else ""
