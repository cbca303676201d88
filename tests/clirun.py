"""The one helper that runs gemmlab's commands for the tests (the ``cli`` fixture of conftest.py
wraps it). Not a test module.

In this process by default (no interpreter start-up, no re-import): ``python -m MODULE ARGS`` is
replaced by the module's ``main`` with ``sys.argv``, the working directory and the environment a
subprocess would get, both streams captured and the exit status taken from ``SystemExit``. A
subprocess proves more only for a real process's exit code, pipes, console entry points and
several commands at once: those tests pass ``in_process=False`` (same :class:`Result`).

Each in-process call is a fresh command: :func:`gemmlab.clear_caches` first (nothing a previous
command memoised carries over), Hydra's global state cleared after, and the command's point
worker (``gemmlab.run.isolation``) told that the command ended (:func:`~gemmlab.run.isolation.end_command`):
a healthy worker is renewed before the next command's first point (its memos cleared, drop-in
plugins forgotten, this command's environment and ``cwd``), as a newly started one would be,
without the start of a new interpreter. So a point still runs in a worker process, not in the
test process, unless the test passes ``isolation.process=false`` (gemmlab's own switch, not part
of the folder name) because what it checks does not depend on the worker (the folders of
concurrent commands, a dispatch choice, a compile's report); a worker a point broke (crash,
timeout, CUDA error) is replaced as in any sweep.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

#: ``python -m`` module -> (module, function) run in-process: what the module's ``__main__`` block
#: calls; it reads ``sys.argv`` and exits (``SystemExit``) or returns the exit status.
ENTRY = {"gemmlab": ("gemmlab.cli.app", "main"), "gemmlab.cli.app": ("gemmlab.cli.app", "main"),
         "gemmlab.results.report": ("gemmlab.results.report", "main"),
         "gemmlab.results.compare": ("gemmlab.results.compare", "_script"),
         "gemmlab.cli.tune": ("gemmlab.cli.tune", "_entry"), "gemmlab.results.families": ("gemmlab.results.families", "main")}


@dataclass
class Result:
    """What a command left: exit status and both streams (text), like ``CompletedProcess``."""

    returncode: int
    stdout: str
    stderr: str
    args: tuple = ()


def command_env(extra: dict | None = None) -> dict:
    """The environment of a command under test: this one, with this checkout first on
    ``PYTHONPATH``, matplotlib on Agg, rich at its default width (no ``COLUMNS``) and Hydra's short
    error form (no ``HYDRA_FULL_ERROR``); ``extra`` on top (a value None removes the key)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["MPLBACKEND"] = "Agg"
    env.pop("HYDRA_FULL_ERROR", None)
    env.pop("COLUMNS", None)
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


@contextlib.contextmanager
def _environ(env: dict):
    """``os.environ`` set to ``env`` inside the block, restored after."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"): Python prints it and exits 1
    return 1


def run(module: str, *args, cwd: Path | str, in_process: bool = True, env: dict | None = None,
        timeout: float = 300) -> Result:
    """``python -m <module> ARGS`` in ``cwd``; returns its :class:`Result`.

    Args:
        module: ``gemmlab`` or one of :data:`ENTRY`'s modules (others always run as a subprocess).
        args: command-line arguments (``str()`` of each).
        cwd: working directory of the command.
        in_process: run the module's ``main`` in this process (default) or as a real subprocess.
        env: extra environment variables for the command (None removes one), see :func:`command_env`.
        timeout: seconds, for a subprocess.
    """
    argv = [str(a) for a in args]
    full_env = command_env(env)
    if not in_process or module not in ENTRY:
        proc = subprocess.run([sys.executable, "-m", module, *argv], cwd=cwd, env=full_env, capture_output=True,
                              text=True, timeout=timeout)
        return Result(proc.returncode, proc.stdout, proc.stderr, (module, *argv))

    from hydra.core.global_hydra import GlobalHydra

    import gemmlab
    from gemmlab.run import isolation
    name, func = ENTRY[module]
    main = getattr(importlib.import_module(name), func)
    gemmlab.clear_caches()
    out, err = io.StringIO(), io.StringIO()
    old_cwd, old_argv = os.getcwd(), sys.argv
    code = 0
    try:
        with _environ(full_env):
            os.chdir(cwd)
            sys.argv = [module, *argv]
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = _exit_code(main())
                except SystemExit as exc:
                    code = _exit_code(exc.code)
                except Exception:  # what the interpreter does with an uncaught exception
                    traceback.print_exc()
                    code = 1
    finally:
        isolation.end_command()  # the next command renews the worker (see the module docstring)
        os.chdir(old_cwd)
        sys.argv = old_argv
        GlobalHydra.instance().clear()
    return Result(code, out.getvalue(), err.getvalue(), (module, *argv))


def run_cli(args: list[str], cwd: Path, in_process: bool = True, **kwargs) -> Result:
    """``gemmlab *args`` in ``cwd`` (see :func:`run`)."""
    return run("gemmlab", *args, cwd=cwd, in_process=in_process, **kwargs)
