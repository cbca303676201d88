"""Fault isolation around :func:`gemmlab.run.pipeline.run_point`: a faulty or hung kernel costs only
its own point.

A CUDA fault (illegal or misaligned address, trap, launch failure) is *sticky*: it poisons the
CUDA context of the process for good, so every later point in that process would fail with the
same error. So the CLI runs each point in a **worker process** (``isolation.process: true``, the
default) that stays alive across a healthy sweep (its CUDA context, loaded modules and compile
cache are reused, the cost per point is one pipe round trip) and is replaced after:

- a point whose record says ``cuda_error`` or ``error`` (its context may be poisoned);
- a worker that died (signal, ``os._exit``, a crash in native code): status ``crashed``;
- a point still running after ``isolation.timeout_s`` seconds (a hung kernel): the **watchdog**
  kills the worker's whole process group (the driver then tears the kernel down with its
  context) and records status ``timeout``.

A worker is a fresh interpreter (``python -c ...``, its own session and process group, the
parent's ``sys.path``) talking to the parent over a socket pair with
``multiprocessing.connection``; it never inherits a CUDA context, whatever launcher (joblib's
loky, submitit) started the parent. A long-lived process that runs several commands (the tests)
ends each with :func:`end_command`: its healthy worker is then *renewed* before the next point
(what the worker memoised is cleared, drop-in plugin modules are forgotten, and it takes the
environment, working directory and ``sys.path`` of that moment, as a newly started worker
would) instead of being replaced; a worker that cannot be renewed is replaced. Each point runs inside
:func:`gemmlab.gpu.device.lease_scope`: a GPU taken by ``device=auto`` is unlocked when the point
ends, however it ends (a killed worker's locks die with it). With ``isolation.process: false``
points run in the calling process (no protection; for debugging with pdb).
"""

from __future__ import annotations

import atexit
import os
import signal
import time
from pathlib import Path
from typing import Any, Mapping

from gemmlab.stages import record as record_stage
from gemmlab.stages.config import IsolationOptions, _plain, parse_isolation
from gemmlab.contract.session_slot import SessionSlot
from gemmlab.errors import CudaError, GemmlabError, WatchdogTimeout, WorkerDied

#: statuses after which a worker is replaced: its CUDA context may hold a sticky error
REPLACE_AFTER = (CudaError.status, "error")
STARTUP_TIMEOUT_S = 300.0


def run_point(cfg: Mapping[str, Any], out_dir: str | Path) -> record_stage.Result:
    """Run one point with the isolation its config asks for (``isolation`` section) and return
    the record written to ``out_dir/result.json`` (see :func:`gemmlab.run.pipeline.run_point`), in
    the worker of the active session (:func:`runner`). Never raises for a failed point;
    ``KeyboardInterrupt`` kills the worker and propagates."""
    from gemmlab.run import pipeline
    try:
        plain = _plain(cfg)
        options = parse_isolation(plain.get("isolation"))
    except Exception:  # unresolvable or invalid config: no kernel runs, the pipeline records why
        return pipeline.run_point(cfg, out_dir)
    if not options.process:
        return run_in_scope(plain, Path(out_dir))
    return runner().run(plain, Path(out_dir), options)


def run_in_scope(cfg: Mapping[str, Any], out_dir: Path) -> dict:
    """``pipeline.run_point`` inside a GPU lease scope (``device=auto`` locks end with the point)."""
    from gemmlab.gpu import device
    from gemmlab.run import pipeline
    with device.lease_scope():
        return pipeline.run_point(cfg, out_dir)


def _serve(fd: int) -> None:
    """Worker loop (``python -c`` entry): receive ``(cfg, out_dir)``, run the point, send the
    record back; on a :class:`_Renew`, renew this worker (:func:`_renew`) and say ``ready``; end
    when the parent closes the connection or sends None."""
    import socket
    from multiprocessing.connection import Connection
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _watch_parent(os.getppid())
    conn = Connection(socket.socket(fileno=fd).detach())
    import gemmlab.run.pipeline  # noqa: F401  (imported before the first point, outside its watchdog time)
    try:
        conn.send("ready")
    except OSError:  # the parent stopped meanwhile (Ctrl-C while this worker started)
        return
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if job is None:
            return
        if isinstance(job, _Renew):
            try:
                conn.send(_renew(job))
            except OSError:
                return
            continue
        cfg, out_dir = job
        record = run_in_scope(cfg, Path(out_dir))  # written to out_dir by the pipeline before it returns
        try:
            conn.send(record)
        except OSError:  # the parent was killed meanwhile (Ctrl-C, a timeout): the record is on disk
            return


#: how often (s) a worker checks that its parent is alive; the exit status when it is not
ORPHAN_POLL_S = 0.5
ORPHAN_EXIT = 3


def _watch_parent(parent: int) -> None:
    """End this worker (exit status :data:`ORPHAN_EXIT`) once its parent is gone (``kill -9``: no
    Ctrl-C, no closed connection reaches a worker busy with a point, and a hung kernel would hold
    the GPU for nobody). A daemon thread compares ``os.getppid()`` with ``parent`` every
    :data:`ORPHAN_POLL_S` s (the worker is reparented when its parent dies)."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(ORPHAN_POLL_S)
            if os.getppid() != parent:
                os._exit(ORPHAN_EXIT)

    threading.Thread(target=watch, name="gemmlab-parent-watch", daemon=True).start()


class _Renew(tuple):
    """Parent -> worker: ``(environ, cwd)`` of the next command (see :func:`_renew`)."""


#: environment variables a running worker cannot take on (read at its start: the interpreter's
#: ``PYTHON*``, the loader's ``LD_*``, CUDA's once initialised): a change makes the parent start a
#: fresh worker instead of renewing this one
FIXED_AT_START = ("CUDA_", "NVIDIA_", "LD_", "PYTHON")


def _renew(job: _Renew) -> str:
    """Make this worker what a newly started one would be for the next command: the parent's
    environment and working directory (``sys.path`` follows: the same ``PYTHONPATH``, and its
    first entry is the working directory); the process's memos cleared
    (:func:`gemmlab.clear_caches`: compiled kernels, plugin registries, ...) and the drop-in
    plugin modules forgotten (re-imported from their files when next used). Returns ``ready``,
    or ``stale`` when a variable of :data:`FIXED_AT_START` differs (the parent then replaces
    this worker)."""
    import sys
    import tempfile

    import gemmlab
    environ, cwd = job
    fixed = lambda env: {k: v for k, v in env.items() if k.startswith(FIXED_AT_START)}  # noqa: E731
    if fixed(environ) != fixed(os.environ):
        return "stale"
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    tempfile.tempdir = None  # re-read TMPDIR
    for name in [n for n in sys.modules if n.startswith("gemmlab_dropin_")]:
        del sys.modules[name]
    gemmlab.clear_caches()
    return "ready"


def _worker_environ() -> dict:
    """The environment of a worker started now: this process's, with its ``sys.path`` as
    ``PYTHONPATH`` (plugins and the checkout import as they do here)."""
    import sys
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


class _Worker:
    """One worker process and the parent's end of its connection."""

    def __init__(self):
        import socket
        import subprocess
        import sys
        from multiprocessing.connection import Connection
        ours, theirs = socket.socketpair()
        env = _worker_environ()
        # ``-c`` puts the current folder first on sys.path: run in a gemmlab checkout, the worker
        # would import the checkout's gemmlab instead of the command's (an installed copy), and so
        # compile the checkout's kernels behind the command's back. The command's own sys.path
        # (PYTHONPATH above) decides, as for the command (issue 45, item 6).
        serve = (f"import sys; sys.path[:] = [p for p in sys.path if p]; "
                 f"from gemmlab.run.isolation import _serve; _serve({theirs.fileno()})")
        self.proc = subprocess.Popen([sys.executable, "-c", serve], pass_fds=(theirs.fileno(),), env=env,
                                     start_new_session=True)
        theirs.close()
        self.conn = Connection(ours.detach())
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None


class PointRunner:
    """A worker process running points one at a time, with a watchdog (see the module docstring)."""

    def __init__(self):
        self.worker: _Worker | None = None
        self.started = 0  # workers started so far (1 for a healthy sweep)
        self.renewed = 0  # times a worker was renewed for a next command (see end_command)
        self.renew_due = False  # a command ended: renew the worker before the next point

    @property
    def process(self) -> _Worker | None:
        """The current worker (``pid``), or None."""
        return self.worker

    def _start(self) -> None:
        self.worker = _Worker()
        self.started += 1
        # start-up (interpreter, imports) is not the point's time: wait for the worker to say ready
        if not self.worker.conn.poll(STARTUP_TIMEOUT_S) or self.worker.conn.recv() != "ready":
            raise OSError("worker did not start")

    def renew(self) -> bool:
        """Renew the current worker for a new command (see :func:`_renew`); False (and the worker
        killed) when it cannot be renewed."""
        worker = self.worker
        try:
            worker.conn.send(_Renew((_worker_environ(), os.getcwd())))
            if worker.conn.poll(STARTUP_TIMEOUT_S) and worker.conn.recv() == "ready":
                self.renewed += 1
                return True
        except (EOFError, OSError):
            pass
        self.kill()
        return False

    def end_command(self) -> None:
        """The command that used this runner ended: renew its worker before the next point."""
        self.renew_due = True

    def kill(self) -> None:
        """Kill the worker's process group (worker, sanitizer child, ...) and reap the worker."""
        worker, self.worker = self.worker, None
        if worker is None:
            return
        worker.conn.close()
        if worker.alive():
            try:
                os.killpg(worker.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                worker.proc.kill()
        try:
            worker.proc.wait(timeout=30)
        except Exception:
            pass
        else:  # what a worker killed mid-disassembly left in the temporary folder
            from gemmlab.gpu.sass import remove_temporary_files_of
            remove_temporary_files_of(worker.pid)

    def close(self) -> None:
        """Stop the worker (politely, then by force). A Ctrl-C meanwhile (this runs at exit, just
        after the command's last point) only cuts the polite part short: no traceback."""
        worker = self.worker
        if worker is not None and worker.alive():
            try:
                worker.conn.send(None)
                worker.proc.wait(timeout=5)
            except (Exception, KeyboardInterrupt):
                pass
        try:
            self.kill()
        except KeyboardInterrupt:  # a second Ctrl-C while reaping: the group was already sent SIGKILL
            pass

    def run(self, cfg: dict, out_dir: Path, options: IsolationOptions) -> dict:
        """Run one point in the worker; see :func:`run_point`."""
        result_path = out_dir / "result.json"
        existed = os.path.lexists(result_path)  # as run_point sees it: a link to nowhere is a record in the way
        try:
            renew, self.renew_due = self.renew_due, False
            if self.worker is not None and self.worker.alive() and renew:
                self.renew()
            if self.worker is None or not self.worker.alive():
                self.kill()
                self._start()
        except (EOFError, OSError) as exc:
            worker, self.worker = self.worker, None
            if worker is not None:
                worker.proc.kill()
            return _failure_record(cfg, out_dir, existed, WorkerDied(f"could not start a worker process: {exc}"),
                                   {"exit_code": None}, None)
        worker = self.worker
        started = time.monotonic()
        try:
            worker.conn.send((cfg, str(out_dir)))
            if worker.conn.poll(options.timeout_s):
                record = worker.conn.recv()
                if record.get("status") in REPLACE_AFTER:
                    self.kill()
                return record
            error = WatchdogTimeout(f"isolation.timeout_s: the point was still running after {options.timeout_s:g} s "
                                    "(a hung kernel?); the watchdog killed its worker process and the sweep goes on")
            how = {"killed_after_s": round(time.monotonic() - started, 3)}
        except (EOFError, OSError):  # the worker died mid-point
            try:
                code = worker.proc.wait(timeout=30)
            except Exception:
                code = None
            how = {"exit_code": code}
            cause = f"exited with status {code}"
            if code is not None and code < 0:
                name = signal.Signals(-code).name
                how, cause = {"signal": name}, f"was killed by {name}"
            error = WorkerDied(f"the point's worker process {cause} before it returned a record (a crash in the kernel's "
                               "process, e.g. native code or os._exit); the sweep goes on with a fresh worker")
        except BaseException:  # Ctrl-C: the point's worker goes with it
            self.kill()
            raise
        self.kill()
        return _failure_record(cfg, out_dir, existed, error, dict(how, worker_pid=worker.pid, timeout_s=options.timeout_s),
                               worker.pid)


def _failure_record(cfg: dict, out_dir: Path, existed: bool, error: GemmlabError, how: dict,
                    worker_pid: int | None) -> record_stage.Result:
    """The record of a point whose worker was lost: the worker's own record if it wrote one,
    else a new one saying what happened (written unless an older result is in the way). When
    the worker had set an earlier record aside (``resume=true``), the new one's ``previous``
    names it, as a record the worker wrote would
    (:func:`gemmlab.run.store.previous_kept_by`)."""
    path = out_dir / "result.json"
    if path.exists() and not existed:
        try:
            import json
            return record_stage.Result.of(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass
    record = record_stage.new_record(cfg)
    record.fail(error.status, str(error))["isolation"] = how
    if existed and worker_pid is not None and not os.path.lexists(path):
        from gemmlab.run.store import previous_kept_by
        kept = previous_kept_by(out_dir, worker_pid)
        if kept:
            record["previous"] = kept
    if not path.exists():
        try:
            record_stage.write_record(record, out_dir)
        except OSError:  # a full disk, a read-only folder: the record returned still says what happened
            pass
    return record


def _new_runner() -> PointRunner:
    """The default session's runner of this process (made once a process id: a forked child's
    first call makes its own), closed at the process's exit."""
    runner = PointRunner()
    atexit.register(runner.close)
    return runner


#: the default session's point runner (:func:`default_runner`) and the point runner of the session
#: whose points run now (:meth:`gemmlab.run.session.Session.active`)
_RUNNER: SessionSlot[PointRunner] = SessionSlot("gemmlab.run.isolation.runner", default_factory=_new_runner)


def default_runner() -> PointRunner:
    """The default session's point runner (:func:`gemmlab.run.session.default`): one a process,
    its worker renewed between the commands of a long-lived process (:func:`end_command`)."""
    return _RUNNER.default()


def runner() -> PointRunner:
    """The point runner (worker process) of the active session (the default session's when none is active)."""
    return _RUNNER.get()


def using(held: PointRunner):
    """Inside the block, :func:`run_point` runs points in ``held``'s worker (a session's;
    :meth:`gemmlab.run.session.Session.active`)."""
    return _RUNNER.using(held)


def stop_worker() -> None:
    """Stop the default session's point worker now; the next point starts a fresh one. The end of
    the process does the same (atexit). For tests and long-lived processes that run several
    commands (each command then gets its own worker, started in its working directory and
    environment)."""
    default_runner().close()


def end_command() -> None:
    """The command this process ran has ended; another follows in the same process (tests, a
    long-lived process). The default session's healthy point worker is kept and renewed before the
    next point (as a newly started worker would be: memos cleared, drop-in plugins forgotten, the
    environment, working directory and ``sys.path`` of that moment; see :func:`_renew`) instead of
    a new interpreter being started; :func:`stop_worker` ends it instead."""
    default_runner().end_command()
