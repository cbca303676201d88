"""gemmlab's sweeper for ``gemmlab -m``: Hydra's basic sweep, each job's folder checked before any runs.

:class:`GemmlabSweeper` is Hydra's ``BasicSweeper`` (same parameters ``max_batch_size`` and
``params``, same jobs and batches: :func:`grid`) written on Hydra's public plugin
interface (``hydra.plugins.sweeper.Sweeper``) and override API. Before a batch is launched its jobs
are composed (Hydra's batch check: a job that does not compose refuses the sweep before a point
runs) and their folders checked (:meth:`GemmlabSweeper.check_folders`). gemmlab's launcher
(``hydra_plugins/gemmlab_launcher``, the default) does both itself as it gets the batch, so under it
the sweeper leaves them to it and each job is composed once; under another launcher (joblib,
submitit) the sweeper does them, as Hydra's own sweeper composes, twice a job.

Selected in gemmlab's conf/gemmlab_sweeper.yaml; an experiment that picks another sweeper
(``override /hydra/sweeper: optuna``) or ``hydra/sweeper=basic`` on the command line replaces it.
A Hydra plugin module: it imports Hydra alone when Hydra's plugin scan imports it, gemmlab's
``gemmlab.cli.folders``, ``gemmlab.cli.sweep`` and ``gemmlab.run.folders`` when it runs (they never
import it: no import circle).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext
from omegaconf import OmegaConf


class GemmlabSweeper(Sweeper):
    """Hydra's basic sweep whose batches' point folders are checked before any point of the batch
    runs (see the module docstring)."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        self.params = params or {}

    def setup(self, *, hydra_context: HydraContext, task_function: Any, config: Any) -> None:
        from hydra_plugins.gemmlab_launcher import note_sweep_dir
        self.hydra_context, self.config = hydra_context, config
        note_sweep_dir(task_function, config)  # first: a launcher that cannot be made leaves the folder as it was
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)
        self.folders: dict[str, int] = {}  # each point folder of this sweep -> the job number that has it
        self.jobs_checked = 0  # jobs of earlier batches (the launcher numbers a sweep's jobs on)
        self.batches_launched = 0  # batches that passed the check (the launcher then ran them)

    def _sweep(self, arguments: list[str]) -> list:
        """Hydra's ``BasicSweeper.sweep``: the sweep's ``multirun.yaml``, then each batch of
        :func:`grid` checked (:meth:`validate_batch_is_legal`) and launched; a failed job's
        exception is raised (its return value read)."""
        strings = [f"{k}={v}" for k, v in self.params.items()] + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        batches = grid(parser.parse_overrides(strings), self.max_batch_size)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        returns, first = [], 0
        for batch in batches:
            self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=first)
            for r in results:
                _ = r.return_value  # raises the job's exception
            first += len(batch)
            returns.append(results)
        return returns

    def points_started(self) -> bool:
        """Whether a point of this sweep has started (its folder is no longer as it was): gemmlab's
        launcher counts the jobs it began; under another, a batch that passed the check."""
        started = getattr(self.launcher, "jobs_started", None)
        return bool(started) if isinstance(started, int) else self.batches_launched > 0

    def sweep(self, arguments: list[str]) -> Any:
        """Hydra's sweep; Ctrl-C (or SIGTERM) between points, where no job's config names the
        folder, gets the line for this sweep's folder (:func:`gemmlab.cli.sweep.sweep_interrupted`: the
        resume line and the summary so far, or that no point had finished; an interrupt inside a point already
        carries it: gemmlab.cli.app._task). A sweep refused before any point ran leaves no folder
        it made, and a folder of an earlier sweep (``resume=true``) is left as it was
        (:func:`gemmlab.run.folders.undo_refused_sweep`)."""
        try:
            return self._sweep(arguments)
        except KeyboardInterrupt as exc:
            if exc.args:
                raise
            from gemmlab.cli.sweep import sweep_interrupted
            raise type(exc)(sweep_interrupted(self.config.hydra.sweep.dir)) from None
        except Exception:  # refused before a point ran (a value Hydra's grammar refuses, two points in one
            if not self.points_started():  # folder): no folder of its own making is left, an earlier one as it was
                from gemmlab.run.folders import undo_refused_sweep
                undo_refused_sweep(str(self.config.hydra.sweep.dir))
            raise

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """Compose every job of ``batch`` (Hydra's check: raises for the first that does not
        compose), then check the jobs' folders (:meth:`check_folders`); left to gemmlab's launcher,
        which does both as it gets the batch."""
        if not getattr(self.launcher, "checks_batches", False):
            loader = self.hydra_context.config_loader
            self.check_folders([loader.load_sweep_config(self.config, list(overrides)) for overrides in batch])
        self.batches_launched += 1  # what comes next is the launcher running it

    def check_folders(self, configs: Sequence[Any]) -> None:
        """Each job's folder (``hydra.sweep.dir``/``hydra.sweep.subdir``, resolved with the job
        number the launcher gives it) must lie inside the sweep folder and be no other job's
        (:func:`gemmlab.run.folders.point_folder_problem`).

        Raises:
            gemmlab.errors.ConfigError: field ``hydra.sweep.subdir``, naming the two points or the
                folder outside.
        """
        from gemmlab.cli.folders import job_folder
        from gemmlab.run.folders import point_folder_problem
        from gemmlab.errors import ConfigError
        first = self.jobs_checked
        self.jobs_checked += len(configs)
        for i, config in enumerate(configs):
            located = job_folder(config, first + i)  # with the job number the launcher gives it
            problem = point_folder_problem(*located, first + i, self.folders) if located is not None else None
            if problem:
                raise ConfigError("hydra.sweep.subdir", problem)


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
