"""The output folder of a command: claimed by one ``gemmlab`` command at a time, and a folder that
cannot be used said in one line.

Before Hydra writes anything into ``hydra.run.dir`` (a run) or ``hydra.sweep.dir`` (a multirun),
:class:`ClaimFolder` (a Hydra callback, first in ``hydra.callbacks`` of conf/config.yaml) creates
the folder and takes an exclusive lock on its ``.gemmlab.lock`` file (``fcntl.lockf``, non-blocking:
the operating system grants it to one process and drops it when that process ends, however it
ends, so a killed command never leaves a folder blocked). A second command into a folder in use
is refused before it writes a file there (:class:`FolderError`: one line naming the field, exit
2); a command into a folder an earlier command finished proceeds as before (its records are
never overwritten: :func:`gemmlab.run.pipeline.run_point`). A folder that cannot be created or
written (a file in the way, a read-only file system, no permission, a full disk) is the same one
line naming the field and the operating system's reason.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import IO

from hydra.experimental.callback import Callback

#: the lock file in a claimed folder (it stays: an unlocked one means "not in use")
LOCK_NAME = ".gemmlab.lock"
#: ``errno`` values that say the chosen folder is unusable (bad input, exit 2); any other (a full
#: disk, an I/O error) is a failure of the machine (exit 1)
CHOICE_ERRNOS = (errno.EEXIST, errno.ENOTDIR, errno.EROFS, errno.EACCES, errno.EPERM, errno.EISDIR,
                 errno.ENAMETOOLONG, errno.ELOOP)


class FolderError(SystemExit):
    """An output folder that cannot be used: ``message`` is the one line after ``gemmlab: error: ``
    (``<field>: <reason>``), ``code`` the exit status. A ``SystemExit``, so it passes Hydra's
    callback runner (which only warns about an ``Exception``) to :func:`gemmlab.cli.app.main`."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(code)
        self.message = message


def os_reason(exc: OSError) -> str:
    """``[Errno N] text`` of ``exc`` without the file name (the message names the folder itself)."""
    if exc.errno is None:
        return str(exc)
    return f"[Errno {exc.errno}] {exc.strerror or os.strerror(exc.errno)}"


def folder_error(field: str, folder: Path | str, exc: OSError) -> FolderError:
    """The :class:`FolderError` for ``exc`` raised while creating or writing ``folder`` (the value
    of ``field``, e.g. ``hydra.run.dir``)."""
    where = Path(folder)
    culprit = Path(exc.filename) if isinstance(exc.filename, str) else where
    if exc.errno in (errno.EEXIST, errno.ENOTDIR) and culprit.exists() and not culprit.is_dir():
        reason = f"{culprit} is a file, not a folder"
    else:
        reason = f"cannot create or write {culprit}: {os_reason(exc)}"
    if culprit != where and where not in culprit.parents and Path(os.path.abspath(where)) not in culprit.parents:
        reason += f" (making {where})"
    code = 2 if exc.errno in CHOICE_ERRNOS else 1
    advice = "give a folder gemmlab can create and write" if code == 2 else "free some space, or give another folder"
    return FolderError(f"{field}: {reason}; {advice}", code)


def claim(folder: Path, field: str) -> IO:
    """Create ``folder`` and lock its :data:`LOCK_NAME` for this process; returns the open lock file
    (closing it, or the end of the process, releases the folder). The file holds this process's id.

    Raises:
        FolderError: the folder is in use by another process (exit 2), or cannot be created or
            written (:func:`folder_error`).
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / LOCK_NAME, "a+")
    except OSError as exc:
        raise folder_error(field, folder, exc) from None
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            who = f"process {holder}" if holder.isdigit() else "another process"
            raise FolderError(f"{field}: {folder} is in use by another gemmlab command ({who}); give another "
                              "folder, or run it again when that command has ended") from None
        raise folder_error(field, folder, exc) from None
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
    except OSError as exc:
        handle.close()
        raise folder_error(field, folder, exc) from None
    return handle


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
        self.handle = claim(folder, f"hydra.{mode}.dir")

    def release(self) -> None:
        """Release the claimed folder (idempotent)."""
        handle, self.handle = self.handle, None
        if handle is not None:
            handle.close()

