"""gemmlab's launcher for ``gemmlab -m``: each job run in this process, its folder checked first.

:class:`GemmlabLauncher` is Hydra's in-process launch (what ``hydra/launcher=basic`` does: one
process, the jobs in turn, so the CUDA context and compiled modules are reused) written on Hydra's
public plugin interface (``hydra.plugins.launcher.Launcher``) and public helpers
(``hydra.core.utils.run_job``, ``setup_globals``, ``configure_log``, ``filter_overrides``,
``JobReturn``), with what gemmlab needs of a sweep done here rather than by replacing Hydra's
functions:

- every job of a batch is composed, and its folder checked
  (:func:`gemmlab.run.folders.point_folder_problem`: two points in one folder, one outside the
  sweep's or under one of its files), before any job of the batch runs; a refusal is one line
  for ``hydra.sweep.subdir`` (exit 2), under any sweeper (gemmlab's, Hydra's basic, Optuna's);
- a job whose own folder cannot be created or written (a file in the way, a read-only folder, a
  full disk) costs that point only: one line ``gemmlab: error: hydra.sweep.dir: point #N: ...``,
  the text noted for the end of the sweep, and the next job runs;
- the sweep's folder is noted for the ``gemmlab`` command (:func:`note_sweep_dir`), so that a sweep
  refused before any point ran leaves its folder as it found it.

The command's :class:`gemmlab.cli.precheck.Invocation` reaches the plugin as an attribute of the
task function Hydra hands to ``setup`` (``gemmlab_invocation``; :func:`gemmlab.cli.app._hydra_app`).
A foreign launcher (``hydra/launcher=joblib``, submitit's, Hydra's ``basic``) gets none of this
itself: gemmlab's sweeper still checks its batches' folders, but a point whose folder cannot be
made ends the sweep there (one line, :func:`gemmlab.cli.folders.output_folder_error`).

Selected in gemmlab's conf/gemmlab_sweeper.yaml (``override /hydra/launcher: gemmlab``); a Hydra
plugin module, importing Hydra alone when Hydra's plugin scan imports it and gemmlab's
``gemmlab.cli.folders`` and ``gemmlab.run.folders`` when it runs (gemmlab never imports it: no
import circle).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, Sequence

from hydra.core import utils as hydra_utils
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext
from omegaconf import OmegaConf, open_dict

log = logging.getLogger(__name__)

#: composed configs a batch keeps from its check for the run (about 0.2 MB each); later jobs are composed again
KEEP_AT_MOST = 128


def note_sweep_dir(task_function: Any, config: Any) -> None:
    """Note on the ``gemmlab`` command's Invocation (the task function's ``gemmlab_invocation``), if
    it has one, that it is a sweep, and its ``hydra.sweep.dir`` where the folder resolves."""
    invocation = getattr(task_function, "gemmlab_invocation", None)
    if invocation is not None:
        invocation.multirun = True
        try:
            invocation.sweep_dir = str(config.hydra.sweep.dir)
        except Exception:  # a folder that does not resolve: Hydra says so itself
            pass


class GemmlabLauncher(Launcher):
    """Hydra's in-process launch with gemmlab's folder checks (see the module docstring)."""

    #: it composes and checks every job of a batch before the first runs (gemmlab's sweeper then
    #: leaves Hydra's batch check to it: each job is composed once)
    checks_batches = True

    def __init__(self) -> None:
        super().__init__()
        self.config: Any = None
        self.task_function: Any = None
        self.hydra_context: HydraContext | None = None
        self.folders: dict[str, int] = {}  # each point folder of this sweep -> the job number that has it
        self.jobs_started = 0  # jobs whose run began (the sweep's folder is no longer as it was)

    def setup(self, *, hydra_context: HydraContext, task_function: Any, config: Any) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function
        note_sweep_dir(task_function, config)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Compose and check every job of the batch (:meth:`compose_batch`), then run each in turn
        (:meth:`run`); returns their ``JobReturn``\\ s in order.

        Raises:
            gemmlab.errors.ConfigError: ``hydra.sweep.subdir``: a job's folder is another job's, the
                sweep's own, outside it or under one of its files; no job of the batch has run.
        """
        hydra_utils.setup_globals()
        hydra_utils.configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        configs = self.compose_batch(job_overrides, initial_job_idx)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info(f"Launching {len(job_overrides)} jobs locally")
        runs = []
        for i, overrides in enumerate(job_overrides):
            idx = initial_job_idx + i
            log.info(f"\t#{idx} : {' '.join(hydra_utils.filter_overrides(overrides))}")
            config = configs[i] if i < len(configs) else self.compose(overrides, idx)
            if i < len(configs):
                configs[i] = None  # not kept after its run
            runs.append(self.run(config))
            hydra_utils.configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return runs

    def compose(self, overrides: Sequence[str], idx: int) -> Any:
        """Job ``idx``'s config, composed by Hydra's config loader (``load_sweep_config``: raises
        what it raises) with ``hydra.job.id`` and ``hydra.job.num`` set, as Hydra's launchers do."""
        config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(config):
            config.hydra.job.id = idx
            config.hydra.job.num = idx
        return config

    def compose_batch(self, job_overrides: Sequence[Sequence[str]], first: int) -> list:
        """Compose every job of the batch (a job that does not compose raises Hydra's error: no job
        has run) and check its folder (:func:`gemmlab.run.folders.point_folder_problem`, against
        this sweep's folders so far); returns the first :data:`KEEP_AT_MOST` configs."""
        from gemmlab.cli.folders import job_folder
        from gemmlab.run.folders import point_folder_problem
        from gemmlab.errors import ConfigError
        kept = []
        for i, overrides in enumerate(job_overrides):
            config = self.compose(overrides, first + i)
            located = job_folder(config, first + i)
            problem = point_folder_problem(*located, first + i, self.folders) if located is not None else None
            if problem:
                ran = (f"; the sweep stopped before point #{first + i} (the points before it keep their records)"
                       if self.jobs_started else "")
                raise ConfigError("hydra.sweep.subdir", problem + ran)
            if len(kept) < KEEP_AT_MOST:
                kept.append(config)
        return kept

    def run(self, config: Any) -> JobReturn:
        """Run one job through Hydra's ``run_job``; an ``OSError`` while Hydra makes or writes the
        job's folder (before or after the point: the point's own errors are its record's) is
        :meth:`folder_failed`."""
        from gemmlab.cli.folders import os_error_in
        self.jobs_started += 1
        try:
            return hydra_utils.run_job(hydra_context=self.hydra_context, task_function=self.task_function,
                                       config=config, job_dir_key="hydra.sweep.dir",
                                       job_subdir_key="hydra.sweep.subdir")
        except Exception as exc:
            os_error = os_error_in(exc)
            if os_error is None:
                raise
            return self.folder_failed(config, os_error)

    def folder_failed(self, config: Any, os_error: OSError) -> JobReturn:
        """The point whose folder could not be made or written: one line (``gemmlab: error:
        hydra.sweep.dir: point #N: <reason>; it has no record, the sweep goes on``), the text noted
        on the command's Invocation (``folder_errors``: the end of the sweep names it), the progress
        callbacks told (``on_job_end``), and a COMPLETED ``JobReturn`` whose value is None (a failed
        trial for a search; a FAILED job would end the sweep)."""
        from gemmlab.run.folders import folder_error
        num = OmegaConf.select(config, "hydra.job.num", default="?")
        try:
            folder = Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)
        except Exception:
            folder = Path(str(os_error.filename or "?"))
        reason = folder_error("hydra.sweep.dir", folder, os_error).message.split(": ", 1)[1]
        text = f"point #{num}: {reason.split('; give a folder')[0]}"
        invocation = getattr(self.task_function, "gemmlab_invocation", None)
        if invocation is not None:
            invocation.folder_errors.append(text)
        print(f"gemmlab: error: hydra.sweep.dir: {text}; it has no record, the sweep goes on", file=sys.stderr, flush=True)
        ret = JobReturn()
        ret.status, ret.return_value = JobStatus.COMPLETED, None
        try:  # the progress line counts it (Hydra's run_job raised before its own call)
            self.hydra_context.callbacks.on_job_end(config=config, job_return=ret)
        except Exception:
            pass
        return ret
