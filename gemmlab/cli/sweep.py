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
from gemmlab.run.progress import PointProgress
from gemmlab.run.folders import keep_earlier_hydra_files, keep_earlier_multirun_yaml, nothing_to_resume
from gemmlab.run.store import interrupted_sweep_line, point_outcome, sweep_resume_advice  # noqa: F401  (re-exported)


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


class SweepProgress(Callback, PointProgress):
    """Hydra callback: sweep progress (points done / total, current point, ETA;
    :class:`gemmlab.run.progress.PointProgress`). Jobs that a launcher runs in other processes
    report nothing here (the summary still covers them)."""

    def __getstate__(self):  # launchers that pickle the callbacks (submitit) get a fresh one
        return {}

    def on_multirun_start(self, config, **kwargs) -> None:
        if is_search(config):
            FailedTrialLine.install()
        self.start(count_jobs(config))

    def _label(self, config) -> str:
        return " ".join(OmegaConf.select(config, "hydra.overrides.task", default=[]))

    def on_job_start(self, config, **kwargs) -> None:
        self.job_started_ns = time.time_ns()
        self.point_started(self._label(config), OmegaConf.select(config, "hydra.job.num", default=None))

    def on_job_end(self, config, job_return, **kwargs) -> None:
        self.point_ended(self._label(config), lambda: self._outcome(config))

    def _outcome(self, config) -> str:
        """What the point left (:func:`gemmlab.run.store.point_outcome` of its folder since the job started)."""
        out_dir = OmegaConf.select(config, "hydra.runtime.output_dir", default=None)
        return point_outcome(Path(str(out_dir)) if out_dir else None, getattr(self, "job_started_ns", 0))

    def on_multirun_end(self, config, **kwargs) -> None:
        self.stop()


def sweep_interrupted(folder: Path | str) -> str:
    """The line after an interrupt in the sweep whose folder is ``folder``, wherever it landed (in a
    point: :func:`gemmlab.cli.app._interrupted_advice`; between points or while the sweeper composed them:
    ``hydra_plugins.gemmlab_sweeper``): :func:`gemmlab.run.store.interrupted_sweep_line`, the summary
    of the points so far written by :func:`gemmlab.results.summary.save_summary`."""
    return interrupted_sweep_line(folder, save_summary)
