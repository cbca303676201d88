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
API; the grid is Hydra's ``BasicSweeper``'s (:func:`grid`: same order, same batches). Hydra's
in-process launcher is known by its class's name (:func:`in_process`): that class lives in
``hydra._internal``, which gemmlab does not import.

Selected in gemmlab's conf/config.yaml (``conf/hydra/sweeper/gemmlab.yaml``); an experiment that
picks another sweeper (``override /hydra/sweeper: optuna``) or ``hydra/sweeper=basic`` on the
command line replaces it. A Hydra plugin module (``hydra_plugins``: Hydra instantiates sweepers
from there only); it imports Hydra alone.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext
from omegaconf import OmegaConf

#: Hydra's in-process launcher (``hydra/launcher=basic``, the ``_target_`` of its config)
IN_PROCESS_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


def in_process(launcher: Any) -> bool:
    """``launcher`` is Hydra's in-process ``BasicLauncher`` itself (not a subclass): it composes
    and runs each job in this process."""
    return f"{type(launcher).__module__}.{type(launcher).__qualname__}" == IN_PROCESS_LAUNCHER


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


#: configs a batch's check keeps for the launcher at most (about 0.2 MB each); further jobs are composed again
KEEP_AT_MOST = 128


class ComposedOnce:
    """Hydra's config loader (every attribute delegated) whose ``load_sweep_config`` for the sweep's
    own config gives back, once each, the configs :meth:`keep` composed for a job's overrides."""

    def __init__(self, loader: Any, master_config: Any) -> None:
        self._loader = loader
        self._master = master_config
        self._kept: dict[tuple[str, ...], list] = defaultdict(list)
        self._count = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def keep(self, overrides: Sequence[str]) -> Any:
        """Compose the job ``overrides`` (Hydra's ``load_sweep_config``: raises what it raises) and
        keep the config for the launcher while fewer than :data:`KEEP_AT_MOST` are kept; returns it."""
        config = self._loader.load_sweep_config(self._master, list(overrides))
        if self._count < KEEP_AT_MOST:
            self._kept[tuple(overrides)].append(config)
            self._count += 1
        return config

    def forget(self) -> None:
        """Drop every kept config."""
        self._kept.clear()
        self._count = 0

    def load_sweep_config(self, master_config: Any, sweep_overrides: list[str]) -> Any:
        """The kept config of these overrides (each given once), else Hydra's compose."""
        kept = self._kept.get(tuple(sweep_overrides)) if master_config is self._master else None
        if kept:
            self._count -= 1
            return kept.pop(0)
        return self._loader.load_sweep_config(master_config, sweep_overrides)


class GemmlabSweeper(Sweeper):
    """Hydra's basic sweep (same parameters ``max_batch_size`` and ``params``, same jobs and
    batches) whose batch check hands its composed configs to an in-process launcher (see the
    module docstring)."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        self.params = params or {}

    def setup(self, *, hydra_context: HydraContext, task_function: Any, config: Any) -> None:
        self.hydra_context, self.config = hydra_context, config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)
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
        folder, gets the line for this sweep's folder (:func:`gemmlab.cli.app.sweep_interrupted`: the
        resume line and the summary so far, or that no point had finished; an interrupt inside a point already
        carries it: gemmlab.cli.app._task). A sweep refused before any point ran leaves no folder
        it made, and a folder of an earlier sweep (``resume=true``) is left as it was
        (:func:`gemmlab.cli.folders.undo_refused_sweep`)."""
        try:
            return self._sweep(arguments)
        except KeyboardInterrupt as exc:
            if exc.args:
                raise
            from gemmlab.cli.app import sweep_interrupted
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
