"""The ``gemmlab`` command: Hydra app around :func:`gemmlab.run.pipeline.run_point`.

``gemmlab kernel=tiled shape=[63,65,33]`` runs one point into ``outputs/<date>/<time>_<id>/``;
``gemmlab -m ...`` sweeps in one process (CUDA context and compiled modules reused) into
``outputs/multirun/<date>/<time>_<id>/<job>/`` and writes ``summary.{csv,md}`` there.

Exit status: 0 all points valid; 2 invalid input in a single run, or a command line rejected
before any point runs (one line naming the field); 1 any other failure, and any failed point of
a sweep (wrong result, safety net, compile error, CUDA error, no GPU, an invalid point); 130 on
Ctrl-C, 143 on SIGTERM (a batch system's time limit), each with the line that resumes a sweep. A search (Optuna) exits 0 unless no trial was valid.

The command line is checked first (:mod:`gemmlab.cli.precheck`: one line for a mistake, before Hydra
runs). One :class:`~gemmlab.cli.precheck.Invocation` per command carries what the pre-check learns (plugin folders) and what
each point reports (exit statuses) to :func:`main`; no module-level state is written. What Hydra
raises becomes one line in :mod:`gemmlab.cli.hydra_errors`. A sweep runs through gemmlab's sweeper
and launcher (``hydra_plugins/``: Hydra's public plugin interfaces; :func:`register_plugins`); no
Hydra or OmegaConf function is replaced at run time.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from gemmlab.stages import record as record_stage
from gemmlab.cli import sweep
from gemmlab.cli.sweep import sweep_interrupted, sweep_resume_advice  # noqa: F401  (re-exported)

from gemmlab.cli.folders import output_folder_error
from gemmlab.cli.hydra_errors import hydra_error
from gemmlab.cli.precheck import Invocation, _prepare
from gemmlab.console import PipeSafeStream, environ, guard_streams, run_command, settled_exit, signals_deferred  # noqa: F401  (PipeSafeStream: re-exported)
from gemmlab.errors import CompileError, ConfigError, NoGPUError, UnavailableError, in_chain, was_interrupted
from gemmlab.paths import CONF_DIR
from gemmlab.run.folders import FolderError
from gemmlab.run.config_check import kernel_choice_error
from gemmlab.run.session import holds_result, objective  # noqa: F401  (objective: re-exported)
from gemmlab.run.store import RESUME_UNKNOWN_FOLDER, append_log, interrupted_run_line, refuse_point, resumed_line


def _gpu_count() -> int:
    from gemmlab.gpu.device import gpu_count
    return gpu_count()


def register_resolvers(invocation: Invocation | None = None) -> None:
    """Register gemmlab's OmegaConf resolvers (idempotent): ``gemmlab_unique`` (pid + random
    suffix, cached per config so a sweep keeps one directory), ``gemmlab_kernels`` (help: the
    kernels of the built-in plugins and of ``invocation.plugin_dirs``, read when the help is
    shown), ``gemmlab_suite`` (the shape suite's sweep string, :mod:`gemmlab.dispatch.shapes`) and
    ``gemmlab_shapeset`` (a split of the public shape set, :mod:`gemmlab.dispatch.shapeset`); also
    stores the config schema ``base_config`` (:func:`gemmlab.stages.config.store_schema`) that
    conf/config.yaml needs.
    (:func:`main` registers gemmlab's sweeper and launcher with Hydra, :func:`register_plugins`, after its
    pre-check: Hydra's plugin scan imports every installed plugin, Optuna's too, which a command
    line refused before Hydra runs does not need.)"""
    from gemmlab.stages.config import store_schema
    store_schema()
    OmegaConf.register_new_resolver("gemmlab_unique", lambda: f"{os.getpid()}-{secrets.token_hex(3)}",
                                    use_cache=True, replace=True)
    OmegaConf.register_new_resolver("gemmlab_kernels",
                                    lambda: (invocation or Invocation()).kernels_help(), replace=True)
    OmegaConf.register_new_resolver("gemmlab_gpu_count", lambda: max(1, _gpu_count()), replace=True)
    from gemmlab.dispatch.shapes import suite_resolver
    OmegaConf.register_new_resolver("gemmlab_suite", suite_resolver, replace=True)
    from gemmlab.dispatch.shapeset import shapeset_resolver
    OmegaConf.register_new_resolver("gemmlab_shapeset", shapeset_resolver, replace=True)


def _hydra_app(invocation: Invocation):
    """The Hydra app of one command: :func:`_task` with ``invocation`` bound (a closure, so the
    statuses of the points reach :func:`main` without module-level state). The task function Hydra
    hands to its sweeper and launcher carries it too (``gemmlab_invocation``): gemmlab's plugins note
    the sweep's folder and the points whose folder could not be written there."""

    def task(cfg) -> float | None:
        return _task(cfg, invocation)

    task.gemmlab_invocation = invocation
    return hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(task)


def register_plugins() -> None:
    """Register gemmlab's sweeper and launcher (``hydra_plugins.gemmlab_sweeper.GemmlabSweeper``,
    ``hydra_plugins.gemmlab_launcher.GemmlabLauncher``, the defaults of ``-m``) with Hydra by class,
    through Hydra's public ``Plugins.instance().register`` (idempotent).

    Hydra finds plugins by walking the folders of the ``hydra_plugins`` namespace package
    (``pkgutil.walk_packages``). A setuptools editable install (``pip install -e .``) maps them with
    an import hook that the walk does not see, so outside the checkout ``gemmlab -m ...`` stopped with
    "Unknown plugin class"; a plain ``pip install .`` was not affected. :meth:`Plugins.instance`
    makes the scan (once a process) before the modules are read here, so the classes registered are
    the ones the modules hold after it."""
    import importlib

    from hydra.core.plugins import Plugins
    plugins = Plugins.instance()
    plugins.register(importlib.import_module("hydra_plugins.gemmlab_sweeper").GemmlabSweeper)
    plugins.register(importlib.import_module("hydra_plugins.gemmlab_launcher").GemmlabLauncher)


def _task(cfg, invocation: Invocation) -> float | None:
    """Run one point (a Hydra job) and print its summary; its exit status goes to
    ``invocation.statuses``. Returns the sweeper's :func:`objective`."""
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    mismatch = kernel_choice_error(cfg, HydraConfig.get().runtime.choices.get("kernel"))
    if mismatch is not None:  # every point of the command would say the same: stop here
        invocation.point_dirs.append(out_dir)
        refuse_point(OmegaConf.to_container(cfg, resolve=False), out_dir, mismatch)  # an invalid record
        print(f"gemmlab: error: {mismatch}", file=sys.stderr, flush=True)
        sys.exit(2)
    ignored = _ignored_sweep(HydraConfig.get())
    if ignored:
        print(f"gemmlab: warning: {ignored}", file=sys.stderr, flush=True)
    try:
        with environ("HYDRA_FULL_ERROR", invocation.hydra_full_error):  # the user's, not _hydra_raises's
            record = invocation.run_point(cfg, out_dir)  # a worker process with a watchdog
    except KeyboardInterrupt as exc:  # Hydra's job config is still set here: name the real folder
        raise type(exc)(_interrupted_advice(invocation)) from None
    status = invocation.statuses[-1]
    if record.get("resumed"):
        line = resumed_line(record, out_dir)
        print(line, flush=True)
        _log_point(out_dir, line)  # the folder's log says which command kept or brought its record
        return objective(record)
    if record["status"] not in (ConfigError.status, NoGPUError.status, UnavailableError.status):  # one line only
        text = record_stage.summary(record) + f"\n  result  {out_dir / 'result.json'}"
        print(text, flush=True)
        _log_point(out_dir, text)
    if record["status"] == NoGPUError.status:  # every further point would say the same: stop here
        print(f"gemmlab: error: {record['error']}", file=sys.stderr, flush=True)
        sys.exit(1)
    if status and holds_result(record):
        if invocation.refused_existing > 1:
            return objective(record)  # said once; the summary lists every refused point
        multirun = str(HydraConfig.get().mode).upper().endswith("MULTIRUN")
        print(f"gemmlab: error: {record['error']}" + ("; further points whose folder holds one are refused "
              "without this line" if multirun else ""), file=sys.stderr, flush=True)
    elif status:
        where = ""  # a compile error's whole log (NVRTC's or Triton's: warnings, every error) stays in compile.log
        if record["status"] == CompileError.status and (out_dir / "compile.log").is_file():
            where = f" (full compile log: {out_dir / 'compile.log'})"
        print(f"gemmlab: error: {record['error']}{where}", file=sys.stderr, flush=True)
        if record["status"] in (ConfigError.status, NoGPUError.status, UnavailableError.status):
            _log_point(out_dir, f"gemmlab: error: {record['error']}")
    return objective(record)


def _ignored_sweep(hc) -> str | None:
    """What a single run (no ``-m``, no ``hydra.mode: MULTIRUN``) leaves out: the sweep of
    ``hydra.sweeper.params`` (an experiment file's, or the command line's), which only a multirun
    expands; None for a multirun or no params. Said as a warning, not refused: the composed
    config (Hydra's, ``hc``) is the only reading of the mode that holds for every config (the
    pre-check cannot tell it for another primary config or a ``--config-dir``), and a single run of
    an experiment's own values is a command one may mean."""
    if str(hc.mode).upper().endswith("MULTIRUN"):
        return None
    params = OmegaConf.select(hc, "sweeper.params", default=None)
    keys = list(params.keys()) if hasattr(params, "keys") else []
    if not keys:
        return None
    return (f"hydra.sweeper.params sweeps {', '.join(map(str, keys))}, but this command is a single run, which "
            "ignores the sweep (one point of the config's own values): run it with -m (gemmlab -m ...) or set "
            "hydra.mode: MULTIRUN in the experiment file to sweep")


def _log_point(out_dir: Path, text: str) -> None:
    """Append what the command printed for a point to the point folder's Hydra job log
    (``<job name>.log``, ``app.log``: Hydra creates it, gemmlab prints rather than logs), so the
    folder keeps its console lines; a log that cannot be written costs nothing."""
    try:
        append_log(out_dir / f"{HydraConfig.get().job.name}.log", text)
    except Exception:  # no Hydra job config: no log to add to
        pass


def _interrupted_advice(invocation: Invocation | None = None) -> str:
    """What to do after Ctrl-C, naming the real sweep directory (Hydra's job config of the
    interrupted point: its output folder minus ``hydra.sweep.subdir``). Before Hydra started a
    point, ``invocation.multirun`` tells a single run (nothing to resume) from a sweep. A single
    run whose record was written before the interrupt (its point ended; the interrupt came while
    gemmlab or Hydra finished up) names the record."""
    try:
        hc = HydraConfig.get()
        out = hc.runtime.output_dir
        multirun = str(hc.mode).upper().endswith("MULTIRUN")
    except Exception:  # not in Hydra's job (before it, or after: Hydra resets its config as the job ends)
        out = invocation.point_dirs[-1] if invocation is not None and invocation.point_dirs else None
        multirun = invocation is None or invocation.multirun is not False
    if not multirun:
        return interrupted_run_line(Path(out) if out else None)
    folder = None
    if out:
        try:
            depth = len(Path(str(HydraConfig.get().sweep.subdir)).parts)
            folder = Path(out).parents[depth - 1] if depth else Path(out)
        except Exception:
            pass
    if folder is None and invocation is not None and invocation.sweep_dir is not None:
        folder = Path(invocation.sweep_dir)
    return sweep_interrupted(folder) if folder is not None else RESUME_UNKNOWN_FOLDER


#: what the console script (:mod:`gemmlab.cli.entry`) says of an interrupt that reaches it: :func:`main`
#: handles every interrupt while the command runs, so one that gets past it came as the command ended
INTERRUPTED = "it came as the command ended: what the command wrote is complete"


def main() -> None:
    """Console entry point (``gemmlab``): the command line in ``sys.argv``; exits with the
    command's status (:meth:`Invocation.exit_status`; 2 for a refused command line). An interrupt
    (Ctrl-C, or SIGTERM) is one line through :func:`gemmlab.console.run_command`, saying what was
    kept and how to resume a sweep (:func:`_interrupted_advice`), exit 130 (143)."""
    guard_streams("gemmlab")
    if not sys.stderr.isatty() and "FORCE_COLOR" not in os.environ:
        # libraries that colour their log lines whatever the stream (Optuna's colorlog handler) write
        # escape codes into logs and pipes; NO_COLOR (no-color.org) turns them off
        os.environ.setdefault("NO_COLOR", "1")
    if "--version" in sys.argv[1:]:
        from gemmlab import __version__
        print(f"gemmlab {__version__} (Hydra {hydra.__version__})")
        sys.exit(0)
    invocation = Invocation()
    register_resolvers(invocation)
    sys.exit(run_command("gemmlab", lambda: _run(invocation), advice=lambda: _interrupted_advice(invocation)))


def _run(invocation: Invocation) -> int:
    """The command of :func:`main`: check the command line, then Hydra's run or multirun; returns
    (or exits with) the exit status. An interrupt propagates to :func:`main`'s handler."""
    with signals_deferred("gemmlab"):  # Ctrl-C or SIGTERM here: one line once this is done (nothing ran)
        try:
            _prepare(sys.argv[1:], invocation)
        except ConfigError as exc:
            print(f"gemmlab: error: {exc}", file=sys.stderr)
            sys.exit(2)
        except Exception as exc:  # a prescan surprise must not hide Hydra's own, better message
            print(f"gemmlab: warning: could not pre-check the command line ({type(exc).__name__}: {exc})",
                  file=sys.stderr)
        register_plugins()  # after the pre-check: a refused command line never pays Hydra's plugin scan
    invocation.hydra_full_error = os.environ.get("HYDRA_FULL_ERROR")
    full_error = bool(invocation.hydra_full_error)  # the user asked for Hydra's tracebacks
    try:
        with _hydra_raises():
            _hydra_app(invocation)()
    except FolderError as refused:  # the output folder is in use or cannot be written (gemmlab.cli.folders)
        print(f"gemmlab: error: {refused.message}", file=sys.stderr)
        sys.exit(refused.code)
    except ConfigError as exc:  # refused inside Hydra's run (the sweepers' folder checks)
        if invocation.sweep_dir is not None and not invocation.statuses:  # before any point: the folder as it was
            from gemmlab.run.folders import undo_refused_sweep
            undo_refused_sweep(invocation.sweep_dir)
        if full_error:
            traceback.print_exc()
        print(f"gemmlab: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except sweep.SweepFinished as done:  # a multirun: the summary's outcome, from the records on disk
        for text in invocation.folder_errors:  # points without a record: not in the summary's table
            print(f"gemmlab: error: hydra.sweep.dir: {text}; not in the summary (no record)", file=sys.stderr)
        failed = [1] if invocation.folder_errors else []
        sys.exit(done.outcome.exit_status_with([*invocation.statuses, *failed]))
    except Exception as exc:
        if was_interrupted(exc):  # Ctrl-C inside Hydra or OmegaConf, whose clean-up then failed on the state it
            raise  # left: main's handler says it (run_command finds the interrupt in the chain)
        unusable = output_folder_error(exc, invocation.sweep_dir)  # e.g. a full disk while Hydra writes .hydra/
        if unusable is not None:
            if full_error:
                traceback.print_exc()
            print(f"gemmlab: error: {unusable.message}", file=sys.stderr)
            sys.exit(unusable.code)
        sweep_dir = invocation.sweep_dir or _unmade_sweepers_folder(exc)
        if sweep_dir is not None and _search_found_no_best(exc):  # every trial failed: Optuna has no best one
            if full_error:
                traceback.print_exc()
            outcome = sweep.summarize(Path(sweep_dir), search=True)
            print("gemmlab: error: hydra.sweeper: no trial of the search gave a valid measurement (each failed or "
                  "was invalid; the summary above says why), so there is no best one", file=sys.stderr)
            sys.exit(outcome.exit_status_with(invocation.statuses))
        error = hydra_error(exc, sys.argv[1:]) or _launcher_argument_error(exc)
        if error is None:
            raise
        if sweep_dir is not None and not invocation.statuses:  # refused after Hydra made the sweep's folder, before
            from gemmlab.run.folders import undo_refused_sweep  # a point ran (the sweeper's own arguments)
            undo_refused_sweep(sweep_dir)
        if full_error:  # the traceback the user asked for, and the same exit status as without it
            traceback.print_exc()
        print(f"gemmlab: error: {error}", file=sys.stderr)
        sys.exit(2)
    return invocation.exit_status()


def _launcher_argument_error(exc: BaseException) -> ConfigError | None:
    """submitit's ``NameError: Unknown argument 'foo' for executor 'local' ... Valid arguments: ...``
    (``+hydra.launcher.foo=1`` with hydra/launcher=gemmlab_local or gemmlab_slurm, raised when the
    launcher sets up its executor) as one line naming the key; None for anything else."""
    found = in_chain(exc, NameError)
    m = re.search(r"Unknown argument '(\w+)' for executor '(\w+)'[^\n]*?Valid arguments: ([^\n]*)", str(found or ""))
    if m is None:
        return None
    return ConfigError(f"hydra.launcher.{m.group(1)}", f"submitit's {m.group(2)} executor takes no argument "
                       f"{m.group(1)!r}; its arguments: {m.group(3)}")


def _unmade_sweepers_folder(exc: BaseException) -> str | None:
    """``hydra.sweep.dir`` of a multirun whose sweeper Hydra could not make (an argument it does not
    take: ``+hydra.sweeper.foo=1``), read from the ``config`` argument of Hydra's public
    ``Plugins.instantiate_sweeper(*, hydra_context, task_function, config)`` in ``exc``'s traceback;
    None elsewhere. (A sweeper that was made notes the folder itself: ``hydra_plugins``.)"""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "instantiate_sweeper" and frame.f_globals.get("__name__") == "hydra.core.plugins":
            try:
                return str(frame.f_locals["config"].hydra.sweep.dir)
            except Exception:
                return None
        tb = tb.tb_next
    return None


def _search_found_no_best(exc: BaseException) -> bool:
    """``exc`` is Optuna's ``ValueError: No trials are completed yet.``, raised when Hydra's Optuna
    sweeper asks the study for its best trial after every trial failed (gemmlab's objective is None
    for a failed or invalid point: :func:`objective`)."""
    found = in_chain(exc, ValueError)
    if found is None or str(found) != "No trials are completed yet.":
        return False
    tb = found.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and str(tb.tb_frame.f_globals.get("__name__", "")).startswith("optuna")


def _hydra_raises():
    """Within: Hydra raises its errors instead of printing them over several lines and exiting 1
    (its documented ``HYDRA_FULL_ERROR=1``), so :func:`main` can say them in one line
    (:func:`hydra_error`). The variable is restored afterwards (and inside each point: :func:`_task`)."""
    return environ("HYDRA_FULL_ERROR", "1")


if __name__ == "__main__":
    with settled_exit():
        main()
