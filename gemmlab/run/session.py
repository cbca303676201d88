"""A session of points: the one point runner of every command that runs points, and the owner of
what a command's points share.

:meth:`Session.run_point` runs one point with the isolation its config asks for
(:func:`gemmlab.run.isolation.run_point`: the session's worker process with a watchdog, each point
in a GPU lease scope of the session's devices; ``isolation.process: false`` runs it here) and notes
its folder and exit status. The ``gemmlab`` command (:mod:`gemmlab.cli.app`, through its Hydra task),
``gemmlab-tune sweep`` (:func:`gemmlab.run.tune_sweep.sweep_command`) and the evidence runs
(``.ci/``, ``tests/test_ci_scripts.py`` checks) run their points through it; an evidence run that
holds the GPU in its own process (PyTorch, a direct launch) asks for ``isolation.process: false``,
since a point in the worker would share the GPU with it and be refused ``shared_gpu``. ``kernel=auto``'s first-use tuning runs inside the point it
chooses for (its candidates are backends of the point's own pipeline run, :mod:`gemmlab.run.first_use`):
it loads its candidates from the session's registry, compiles them into the session's compile memo
and times them on the GPU of the point's lease, so it goes through the same runner and the same
session as the point.

What was global, a session owns (:class:`Session`'s resources):

- ``registries``: the kernel registries of its plugin folders (:class:`gemmlab.contract.registry.Registries`),
  loaded once a session;
- ``compiles``: the compiled modules of its points (:class:`gemmlab.gpu.compile.CompileMemo`, NVRTC
  and Triton);
- ``devices``: the GPUs opened and the GPU locks held (:class:`gemmlab.gpu.device.Devices`: the
  lease scopes of its points);
- ``worker``: the worker process its points run in (:class:`gemmlab.run.isolation.PointRunner`).

While a session runs a point (:meth:`Session.active`) the lower layers reach these through their
accessors (:func:`gemmlab.contract.registry.registries`, :func:`gemmlab.gpu.compile.memo`,
:func:`gemmlab.gpu.device.devices`); outside any, they reach the **default session**'s
(:func:`default`, one a process): module-level state remains only as the default session's. A
CUDA context, an ``flock`` and NVRTC's own memo belong to the process, and a worker is renewed
rather than restarted between the commands of a long-lived process (``tests/clirun.py``), so a new
session shares the default session's ``compiles``, ``devices`` and ``worker`` unless it is given
its own; its ``registries`` are its own (a command loads its plugins afresh, as a new process
would). A point run in the worker process runs under that process's default session.
"""

from __future__ import annotations

import os
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from gemmlab.contract import registry as registry_mod
from gemmlab.errors import ConfigError
from gemmlab.gpu import compile as compile_mod
from gemmlab.gpu import device as device_mod
from gemmlab.run import isolation, pipeline
from gemmlab.stages import record as record_stage


@dataclass
class Session:
    """The points one command runs, what it learns of them, and what its points share.

    Attributes:
        plugin_dirs: the command's plugin folders (``plugin_dirs``; the registry and the help text's
            kernel list load plugins from them).
        statuses: exit status of each point run in this session (0 valid, 1 failed, 2 invalid
            input; :func:`gemmlab.run.pipeline.exit_status`), in run order.
        point_dirs: the output folder of each point started in this session, in run order.
        refused_existing: points refused because their folder already holds a result.json (a
            command says it once: a re-run sweep would repeat it for every point).
        registries: the kernel registries this session loaded (its own).
        compiles: the compile memo of its points (default: the default session's, the process's).
        devices: the GPUs opened and locks held (default: the default session's, the process's).
        worker: the worker process runner of its points (default: the default session's).
    """

    plugin_dirs: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    point_dirs: list[Path] = field(default_factory=list)
    refused_existing: int = 0
    registries: registry_mod.Registries = field(default_factory=registry_mod.Registries, repr=False)
    compiles: compile_mod.CompileMemo = field(default_factory=compile_mod.default_memo, repr=False)
    devices: device_mod.Devices = field(default_factory=device_mod.default_devices, repr=False)
    worker: isolation.PointRunner = field(default_factory=isolation.default_runner, repr=False)

    #: what a session holds of its process: not sent to another process (a launcher pickles the task
    #: function, and the Hydra task carries the command's session); there it takes that process's own
    RESOURCES = ("registries", "compiles", "devices", "worker")

    def __getstate__(self) -> dict:
        """The session without its process's resources (:data:`RESOURCES`): a locked GPU, a CUDA
        context, a worker process and loaded plugin modules stay where they are."""
        return {k: v for k, v in self.__dict__.items() if k not in self.RESOURCES}

    def __setstate__(self, state: dict) -> None:
        """A session received from another process: this process's default resources, its own registries."""
        self.__dict__.update(state)
        self.registries = registry_mod.Registries()
        self.compiles, self.devices = compile_mod.default_memo(), device_mod.default_devices()
        self.worker = isolation.default_runner()

    @contextmanager
    def active(self):
        """Inside the block this session's registries, compile memo, devices and worker are the ones
        the pipeline, the compilers, the device layer and :func:`gemmlab.run.isolation.run_point` use (nestable; the previous ones come back
        after, also on an exception)."""
        with ExitStack() as stack:
            stack.enter_context(registry_mod.using(self.registries))
            stack.enter_context(compile_mod.using(self.compiles))
            stack.enter_context(device_mod.using(self.devices))
            stack.enter_context(isolation.using(self.worker))
            yield self

    def run_point(self, cfg: Mapping[str, Any], out_dir: str | Path) -> record_stage.Result:
        """Run one point (the config's ``isolation`` section says where: :func:`gemmlab.run.isolation.run_point`,
        in this session's worker, or here under :meth:`active`) into ``out_dir`` and return its
        record (``out_dir/result.json``, a :class:`gemmlab.stages.record.Result` whatever its
        status); its folder and exit status are noted. Never raises for a failed point;
        ``KeyboardInterrupt`` propagates (the worker is killed first)."""
        out_dir = Path(out_dir)
        self.point_dirs.append(out_dir)
        with self.active():
            record = record_stage.Result.of(isolation.run_point(cfg, out_dir))
        self.statuses.append(pipeline.exit_status(record))
        if holds_result(record):
            self.refused_existing += 1
        return record

    def exit_status(self) -> int:
        """The command's exit status when the points ran to the end: the worst point's, 0 for none."""
        return max(self.statuses, default=0)

    def registry(self, plugin_dirs: list[str] | None = None):
        """The kernel registry of ``plugin_dirs`` (default: the session's), loaded once a session
        (:meth:`gemmlab.contract.registry.Registries.get`, checked as :func:`gemmlab.run.pipeline.registry_for`).

        Raises:
            ConfigError: ``plugin_dirs`` is not a list of folders, or a plugin fails to load.
        """
        with registry_mod.using(self.registries):
            return pipeline.registry_for({"plugin_dirs": list(self.plugin_dirs if plugin_dirs is None else plugin_dirs)})

    def kernels_help(self) -> str:
        """The registered kernels as the ``gemmlab --help`` text lists them: each kernel's description,
        defaults, origin, precisions, layouts and listed parameter values; a plugin folder that fails
        to load is said in the first line, and the built-in kernels are listed."""
        failed = ""
        try:
            registry = self.registry()
        except ConfigError as exc:  # say why, and still list the built-in kernels
            failed = f"(plugins failed to load: {exc}; the built-in kernels:)\n"
            registry = self.registry([])
        lines = [failed.rstrip("\n")] if failed else []
        for name, spec in registry.kernels.items():
            params = " ".join(f"{k}={v}" for k, v in spec.defaults.items())
            lines.append(f"{name:16s} {spec.description}\n{'':16s} defaults: {params or '-'}   [{registry.origins[name]}]")
            layouts = ", ".join(f"{a}/{b}" for a, b in spec.layouts)
            values = ", ".join(f"{k} {'|'.join(map(str, v))}" for k, v in spec.param_values.items())
            lines.append(f"{'':16s} precision: {', '.join(spec.precisions) or '-'}; layout.a/b: {layouts or '-'}"
                         + (f"; values: {values}" if values else ""))
        return "\n".join(lines)

    def end(self) -> None:
        """The command has ended and another may follow in this process: the session's healthy
        worker is renewed before the next point (:meth:`gemmlab.run.isolation.PointRunner.end_command`)."""
        self.worker.end_command()

    def forget(self) -> None:
        """Empty what this session and the process memoised (its registries and compiled kernels,
        the default session's, suites, records read for resume: :func:`gemmlab.clear_caches`), so
        the next command starts as a new process would."""
        import gemmlab
        self.registries.clear()
        self.compiles.clear()
        gemmlab.clear_caches()

    def close(self) -> None:
        """Stop the session's worker (the default session's is also stopped at the process's exit)
        and release the GPUs it locked outside a point."""
        self.worker.close()
        self.devices.release_held_locks()


@lru_cache(maxsize=1)
def _default_of(pid: int) -> Session:
    """The default session of process ``pid`` (made once a process: a forked child gets its own
    registries and worker runner)."""
    return Session(registries=registry_mod.default_registries(), compiles=compile_mod.default_memo(),
                   devices=device_mod.default_devices(), worker=isolation.default_runner())


def default() -> Session:
    """This process's default session: the one whose registries, compile memo, devices and worker
    every point run outside a session uses (the worker process's points, a plugin test,
    ``pipeline.run_point`` called from a script)."""
    return _default_of(os.getpid())


def objective(record: Mapping[str, Any]) -> float | None:
    """The value a sweeper optimises: GFLOP/s of a verified, timed point; 0.0 for a valid
    compile-only point (no speed known); None for a failed point, which Hydra's Optuna sweeper
    records as a FAILED trial, so it can never be reported as best."""
    if not record.get("valid"):
        return None
    timing = record.get("timing")
    return float(timing["gflops"]) if timing else 0.0


def holds_result(record: Mapping[str, Any]) -> bool:
    """The point was refused because its folder already holds a result.json (no resume)."""
    error = record.get("error") or ""
    return (record.get("status") == ConfigError.status and error.startswith("out_dir: ")
            and "already holds a result.json" in error)
