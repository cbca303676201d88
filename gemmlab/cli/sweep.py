"""The Hydra callbacks of a multirun: the sweep's summary and exit status, progress, earlier files kept.

:class:`SweepSummary` writes and prints the summary of the sweep's records
(:func:`gemmlab.results.summary.summarize`) and ends the multirun with the exit status they amount to
(:class:`SweepFinished`); :class:`SweepProgress` shows progress and ETA; :class:`KeepEarlierHydraFiles`
keeps an earlier command's ``.hydra`` and ``multirun.yaml`` in the same folders. Also the lines said
after an interrupt (:func:`sweep_interrupted`). Hooked into Hydra as callbacks (``hydra.callbacks`` in
conf/config.yaml).
"""

from __future__ import annotations

import logging
import math
import sys
import time
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from gemmlab.results.summary import SweepOutcome, save_summary, summarize
from gemmlab.run.folders import keep_earlier_hydra_files, keep_earlier_multirun_yaml, nothing_to_resume


def is_search(config) -> bool:
    """True when the sweep is a search (Hydra's Optuna sweeper) rather than a grid."""
    return "optuna" in str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).lower()


class SweepFinished(SystemExit):
    """Ends a multirun with its :class:`SweepOutcome` (``outcome``): raised by
    :class:`SweepSummary` after the summary, it passes Hydra (which catches ``Exception``, not
    ``SystemExit``) to the caller of the Hydra app (``gemmlab.cli.app.main`` combines it with the
    statuses of in-process points); uncaught, the process exits with ``code``, the records' status."""

    def __init__(self, outcome: SweepOutcome):
        super().__init__(outcome.exit_status)
        self.outcome = outcome


class KeepEarlierHydraFiles(Callback):
    """Hydra callback: before a run or a sweep starts, keep the ``.hydra`` folders an earlier
    command left in its directories (:func:`gemmlab.run.folders.keep_earlier_hydra_files`) and a sweep's
    ``multirun.yaml`` (:func:`keep_earlier_multirun_yaml`): Hydra rewrites them at the start of
    every job or sweep, before gemmlab sees the point (the records themselves are never
    rewritten: :func:`gemmlab.run.store.keep_previous`). With ``resume=true``, a folder that
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
        if any(o.is_sweep_override() and not o.is_discrete_sweep() for o in parsed):
            return None  # an interval: a search's
        values = {o.get_key_element(): len(list(o.sweep_string_iterator())) if o.is_sweep_override() else 1
                  for o in parsed}  # a later override of a key replaces an earlier one (Hydra's basic sweep)
        return math.prod(values.values())
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
