"""A session of points: the one point runner of every command that runs points, and what a command
holds while it runs them.

:meth:`Session.run_point` runs one point with the isolation its config asks for
(:func:`gemmlab.run.isolation.run_point`: a reused worker process with a watchdog, each point in a
GPU lease scope; ``isolation.process: false`` runs it here) and notes its folder and exit status; the
``gemmlab`` command (:mod:`gemmlab.cli.app`, through its Hydra task), ``gemmlab-tune sweep``
(:func:`gemmlab.run.tune_sweep.run_sweep`) and the evidence runs (``.ci/heldout_bench.py``) run their
points through it. ``kernel=auto``'s first-use tuning runs its candidates inside the point itself, as
backends of the point's own pipeline run (:mod:`gemmlab.run.first_use`), on the GPU that point holds.

A session also owns the command's view of what a process memoises: the kernel registry of its plugin
folders (:meth:`Session.registry`, loaded once a process per folder list), and the end of the command
(:meth:`Session.end`: the process's worker is renewed before a later command's first point, and
:meth:`Session.forget` empties the process's memos, compiled kernels and registries included, as
:func:`gemmlab.clear_caches` does). The worker process, the compile memos and the GPU leases stay
process resources of their own layers (a worker outlives a command in a process that runs several,
``tests/clirun.py``; a compiled module is valid for the whole process; a GPU lock belongs to the
process that took it); the session is the one place a command reaches them through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from gemmlab.errors import ConfigError
from gemmlab.run import isolation, pipeline


@dataclass
class Session:
    """The points one command runs, and what it learns of them.

    Attributes:
        plugin_dirs: the command's plugin folders (``plugin_dirs``; the registry and the help text's
            kernel list load plugins from them).
        statuses: exit status of each point run in this session (0 valid, 1 failed, 2 invalid
            input; :func:`gemmlab.run.pipeline.exit_status`), in run order.
        point_dirs: the output folder of each point started in this session, in run order.
        refused_existing: points refused because their folder already holds a result.json (a
            command says it once: a re-run sweep would repeat it for every point).
    """

    plugin_dirs: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    point_dirs: list[Path] = field(default_factory=list)
    refused_existing: int = 0

    def run_point(self, cfg: Mapping[str, Any], out_dir: str | Path) -> dict:
        """Run one point (the config's ``isolation`` section says where: :func:`gemmlab.run.isolation.run_point`)
        into ``out_dir`` and return its record (``out_dir/result.json``); its folder and exit status
        are noted. Never raises for a failed point; ``KeyboardInterrupt`` propagates (the worker is
        killed first)."""
        out_dir = Path(out_dir)
        self.point_dirs.append(out_dir)
        record = isolation.run_point(cfg, out_dir)
        self.statuses.append(pipeline.exit_status(record))
        if holds_result(record):
            self.refused_existing += 1
        return record

    def exit_status(self) -> int:
        """The command's exit status when the points ran to the end: the worst point's, 0 for none."""
        return max(self.statuses, default=0)

    def registry(self, plugin_dirs: list[str] | None = None):
        """The kernel registry of ``plugin_dirs`` (default: the session's), loaded once a process
        (:func:`gemmlab.run.pipeline.registry_for`).

        Raises:
            ConfigError: ``plugin_dirs`` is not a list of folders, or a plugin fails to load.
        """
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

    @staticmethod
    def end() -> None:
        """The command has ended and another may follow in this process: the process's healthy
        worker is renewed before the next point (:func:`gemmlab.run.isolation.end_command`)."""
        isolation.end_command()

    @staticmethod
    def forget() -> None:
        """Empty what this process memoised (compiled kernels, plugin registries, suites, records
        read for resume: :func:`gemmlab.clear_caches`), so the next command starts as a new process would."""
        import gemmlab
        gemmlab.clear_caches()


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
