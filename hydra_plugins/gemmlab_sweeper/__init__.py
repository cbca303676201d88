"""gemmlab's sweeper for ``gemmlab -m``: Hydra's basic sweep, each job's config composed once.

Hydra's ``BasicSweeper`` composes the config of every job of a batch before the launcher runs any
(``Sweeper.validate_batch_is_legal``: a job whose overrides do not compose fails the sweep before
a point runs), and the launcher then composes each job's config again. With Hydra's in-process
``BasicLauncher`` (gemmlab's default) both composes happen in this process, about 0.1 CPU s each.
:class:`GemmlabSweeper` keeps the check and gives the launcher the config the check composed
(:class:`ComposedOnce`), so each job is composed once. The outcome is the same: the same config
(composed from the same files and overrides, the sweep's resolver cache copied into it as
Hydra's ``load_sweep_config`` does), the same refusal of a batch before any job runs. Launchers
that compose in other processes (joblib, submitit) get Hydra's plain behaviour; so does every job
after the first :data:`KEEP_AT_MOST` of a batch (they are composed again, as Hydra does: a batch of
thousands of jobs keeps no more than that many configs in memory).

It is written on Hydra's public plugin interface (``hydra.plugins.sweeper.Sweeper``) and override
API; the grid is Hydra's ``BasicSweeper``'s (:func:`gemmlab.cli.sweep.grid`: same order, same
batches). Hydra's in-process launcher is known by its class's name
(:func:`gemmlab.cli.folders.in_process`): that class lives in ``hydra._internal``, which gemmlab
does not import. The configs composed once are :class:`gemmlab.cli.folders.ComposedOnce`'s.

Selected in gemmlab's conf/config.yaml (``conf/hydra/sweeper/gemmlab.yaml``); an experiment that
picks another sweeper (``override /hydra/sweeper: optuna``) or ``hydra/sweeper=basic`` on the
command line replaces it. A Hydra plugin module (``hydra_plugins``: Hydra instantiates sweepers
from there only); it imports Hydra alone when Hydra's plugin scan imports it, gemmlab's
``gemmlab.cli.folders`` and ``gemmlab.cli.sweep`` when it runs (they never import it: no import
circle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext
from omegaconf import OmegaConf

class GemmlabSweeper(Sweeper):
    """Hydra's basic sweep (same parameters ``max_batch_size`` and ``params``, same jobs and
    batches) whose batch check hands its composed configs to an in-process launcher (see the
    module docstring)."""

    #: it checks its batches' folders itself (:func:`gemmlab.cli.folders.sweep_guard` leaves it be)
    checks_batches = True

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        self.params = params or {}

    def setup(self, *, hydra_context: HydraContext, task_function: Any, config: Any) -> None:
        self.hydra_context, self.config = hydra_context, config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)
        from gemmlab.cli.folders import ComposedOnce, in_process
        self.composed: ComposedOnce | None = None
        self.folders: dict[str, int] = {}  # each point folder of this sweep -> the job number that has it
        self.jobs_checked = 0  # jobs of earlier batches (the launcher numbers a sweep's jobs on)
        self.batches_launched = 0  # batches that passed the check (the launcher then ran them)
        if in_process(self.launcher):  # it composes each job in this process
            self.composed = ComposedOnce(hydra_context.config_loader, config)
            self.launcher.hydra_context = HydraContext(config_loader=self.composed, callbacks=hydra_context.callbacks)

    def _sweep(self, arguments: list[str]) -> list:
        """Hydra's ``BasicSweeper.sweep``: the sweep's ``multirun.yaml``, then each batch of
        :func:`grid` checked (:meth:`validate_batch_is_legal`) and launched; a failed job's
        exception is raised (its return value read)."""
        strings = [f"{k}={v}" for k, v in self.params.items()] + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        from gemmlab.cli.sweep import grid
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

    def sweep(self, arguments: list[str]) -> Any:
        """Hydra's sweep; Ctrl-C (or SIGTERM) between points, where no job's config names the
        folder, gets the line for this sweep's folder (:func:`gemmlab.cli.sweep.sweep_interrupted`: the
        resume line and the summary so far, or that no point had finished; an interrupt inside a point already
        carries it: gemmlab.cli.app._task). A sweep refused before any point ran leaves no folder
        it made, and a folder of an earlier sweep (``resume=true``) is left as it was
        (:func:`gemmlab.cli.folders.undo_refused_sweep`)."""
        try:
            return self._sweep(arguments)
        except KeyboardInterrupt as exc:
            if exc.args:
                raise
            from gemmlab.cli.sweep import sweep_interrupted
            raise type(exc)(sweep_interrupted(self.config.hydra.sweep.dir)) from None
        except Exception:  # refused before a point ran (a value Hydra's grammar refuses, two points in one
            if self.batches_launched == 0:  # folder): no folder of its own making is left, an earlier one as it was
                from gemmlab.cli.folders import undo_refused_sweep
                undo_refused_sweep(str(self.config.hydra.sweep.dir))
            raise

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """Compose every job of ``batch`` (Hydra's check: raises for the first that does not
        compose), keeping the configs for the launcher; then check the jobs' folders
        (:meth:`check_folders`)."""
        if self.composed is None:
            loader = self.hydra_context.config_loader
            configs = [loader.load_sweep_config(self.config, list(overrides)) for overrides in batch]
        else:
            self.composed.forget()
            try:
                configs = [self.composed.keep(overrides) for overrides in batch]
            except BaseException:
                self.composed.forget()
                raise
        self.check_folders(configs)
        self.batches_launched += 1  # what comes next is the launcher running it

    def check_folders(self, configs: Sequence[Any]) -> None:
        """Each job's folder (``hydra.sweep.dir``/``hydra.sweep.subdir``, resolved with the job
        number the launcher gives it) must lie inside the sweep folder and be no other job's
        (:func:`gemmlab.cli.folders.point_folder_problem`).

        Raises:
            gemmlab.errors.ConfigError: field ``hydra.sweep.subdir``, naming the two points or the
                folder outside.
        """
        from gemmlab.cli.folders import job_folder, point_folder_problem
        first = self.jobs_checked
        self.jobs_checked += len(configs)
        for i, config in enumerate(configs):
            num = first + i
            located = job_folder(config, num)  # with the job number the launcher gives it
            if located is None:  # a resolver that needs the running job: Hydra's own errors say it later
                continue
            problem = point_folder_problem(*located, num, self.folders)
            if problem:
                raise _subdir_error(problem)


def _subdir_error(message: str) -> Exception:
    """gemmlab's one-line error for ``hydra.sweep.subdir`` (imported here only when raised)."""
    from gemmlab.errors import ConfigError
    return ConfigError("hydra.sweep.subdir", message)
