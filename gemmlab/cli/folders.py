"""The ``gemmlab`` command's output folder in Hydra's terms: claimed before Hydra writes there, and an
error Hydra met writing it said in one line.

Before Hydra writes anything into ``hydra.run.dir`` (a run) or ``hydra.sweep.dir`` (a multirun),
:class:`ClaimFolder` (a Hydra callback, first in ``hydra.callbacks`` of conf/config.yaml) claims it
(:func:`gemmlab.run.folders.claim`, which holds the rules of gemmlab's output folders); a second
command into a folder in use, or a folder of another kind of command, is refused before Hydra writes
a file there. :func:`job_folder` resolves a sweep job's folder for gemmlab's sweeper and launcher, and
:func:`output_folder_error` turns an ``OSError`` Hydra met writing a job's folder into one line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from gemmlab.errors import in_chain
from gemmlab.run.folders import FolderError, claim, folder_error, other_kind_of_folder


class ClaimFolder(Callback):
    """Hydra callback: claim ``hydra.run.dir`` (a run) or ``hydra.sweep.dir`` (a multirun) before
    any other callback or Hydra itself writes there (:func:`claim`); released when the command
    ends."""

    handle: IO | None = None  # the lock file while the folder is claimed

    def __getstate__(self):  # launchers that pickle the callbacks (submitit) get one without the lock
        return {}

    def on_run_start(self, config, **kwargs) -> None:
        self._claim(config, "run")

    def on_multirun_start(self, config, **kwargs) -> None:
        self._claim(config, "sweep")

    def on_run_end(self, config, **kwargs) -> None:
        self.release()

    def on_multirun_end(self, config, **kwargs) -> None:
        self.release()

    def _claim(self, config, mode: str) -> None:
        try:  # a directory that does not resolve is reported by Hydra itself
            folder = Path(str(config.hydra[mode].dir))
        except Exception:
            return
        self.release()
        refusal = other_kind_of_folder(folder, mode, config.get("resume"))
        if refusal:
            raise FolderError(f"hydra.{mode}.dir: {refusal}")
        self.handle = claim(folder, f"hydra.{mode}.dir")

    def release(self) -> None:
        """Release the claimed folder (idempotent)."""
        handle, self.handle = self.handle, None
        if handle is not None:
            handle.close()


def os_error_in(exc: BaseException) -> OSError | None:
    """The ``OSError`` that ``exc`` is or was caused by (logging's ``ValueError: Unable to configure
    handler 'file'`` wraps the one of the log file), if any."""
    return in_chain(exc, OSError, limit=8)


def job_folder(config, num: int) -> tuple[object, str, str] | None:
    """``(raw, root, folder)`` of job ``num`` of a sweep, for :func:`point_folder_problem`: the job's
    ``hydra.sweep.subdir`` as written, the sweep's folder and the job's, both absolute, resolved in
    ``config`` (the job's composed config) with ``hydra.job.id`` and ``hydra.job.num`` set to
    ``num`` as Hydra's launchers set them (restored afterwards); None when the folder does not
    resolve yet (a resolver that needs the running job: Hydra's own errors say it later)."""
    from omegaconf import open_dict
    try:
        job = config.hydra.job
        with open_dict(job):
            kept = OmegaConf.to_container(job, resolve=False)  # "???" (missing) until the launcher sets them
            before = (kept.get("id"), kept.get("num"))
            job.id, job.num = num, num
            try:
                raw = OmegaConf.to_container(config.hydra.sweep, resolve=False).get("subdir")
                root = os.path.abspath(str(config.hydra.sweep.dir))  # absolute: hydra.sweep.dir=. too
                folder = os.path.abspath(os.path.join(root, str(config.hydra.sweep.subdir)))
            finally:
                job.id, job.num = before
    except Exception:
        return None
    return raw, root, folder


def output_folder_error(exc: BaseException, sweep_dir: str | None = None) -> FolderError | None:
    """The :class:`FolderError` for ``exc`` when it is (or was caused by) an ``OSError`` about a file
    in the output folder of the Hydra job it ended (Hydra's ``run_job`` in its traceback: the job's
    ``output_dir``), e.g. a full disk while Hydra writes ``.hydra/``; None for anything else.

    With ``sweep_dir`` (a multirun's ``hydra.sweep.dir``), an ``OSError`` about a path inside it
    without Hydra's ``run_job`` in this process's traceback (a launcher that runs points in other
    processes, e.g. ``hydra/launcher=joblib``, raises the worker's error here, where gemmlab's launcher
    could not make it cost one point) is one too: it ended the sweep, whose finished points keep
    their records."""
    os_error = os_error_in(exc)
    if os_error is None or not isinstance(os_error.filename, str):
        return None
    folder, key, tb = None, None, exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "run_job" and frame.f_globals.get("__name__") == "hydra.core.utils":
            folder, key = frame.f_locals.get("output_dir"), frame.f_locals.get("job_dir_key")
        tb = tb.tb_next
    if not isinstance(folder, str) and sweep_dir is not None:
        target, root = Path(os.path.abspath(os_error.filename)), Path(os.path.abspath(sweep_dir))
        if root in target.parents:
            refused = folder_error("hydra.sweep.dir", os_error.filename, os_error)
            return FolderError(f"{refused.message}; the sweep stopped there (its points run in other processes: "
                               "the points that finished keep their records)", refused.code)
    if not isinstance(folder, str):
        return None
    target, root = Path(os.path.abspath(os_error.filename)), Path(os.path.abspath(folder))
    if target != root and root not in target.parents:
        return None
    return folder_error("hydra.sweep.dir" if key == "hydra.sweep.dir" else "hydra.run.dir", folder, os_error)
