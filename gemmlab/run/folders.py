"""The output folders of gemmlab's commands: claimed by one command at a time, never overwritten, and a
folder that cannot be used said in one line.

A command claims its folder before anything is written there (:func:`claim`: the folder created and
its ``.gemmlab.lock`` locked with ``fcntl.lockf``, non-blocking: the operating system grants it to one
process and drops it when that process ends, however it ends, so a killed command never leaves a
folder blocked). A second command into a folder in use is refused before it writes a file there
(:class:`FolderError`: one line naming the field, exit 2); a folder of another kind of command (a
sweep's for a run, a run's for a sweep, a tuning sweep's) is refused by :func:`other_kind_of_folder`;
a folder that cannot be created or written (a file in the way, a read-only file system, no
permission, a full disk) is one line naming the field and the operating system's reason
(:func:`folder_error`). A sweep's point folders must each be their own, inside the sweep's
(:func:`point_folder_problem`; a ``hydra.sweep.subdir`` that cannot give that, told from its text:
:func:`subdir_problem`). An earlier command's Hydra files in the same folders are kept aside
(:func:`keep_earlier_hydra_files`), and put back when a sweep is refused before any point ran
(:func:`undo_refused_sweep`). The ``gemmlab`` command's Hydra callback that claims is
:class:`gemmlab.cli.folders.ClaimFolder`; ``gemmlab-tune sweep`` claims its ``--out`` itself.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
from pathlib import Path
from typing import IO

from gemmlab.paths import missing_parents, remove_empty_parents

#: the lock file in a claimed folder (it stays: an unlocked one means "not in use")
LOCK_NAME = ".gemmlab.lock"
#: ``errno`` values that say the chosen folder is unusable (bad input, exit 2); any other (a full
#: disk, an I/O error) is a failure of the machine (exit 1)
CHOICE_ERRNOS = (errno.EEXIST, errno.ENOTDIR, errno.EROFS, errno.EACCES, errno.EPERM, errno.EISDIR,
                 errno.ENAMETOOLONG, errno.ELOOP, errno.ENOENT)


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


def other_kind_of_folder(folder: Path, mode: str, resume: object = False) -> str | None:
    """Why ``folder`` cannot take a command of ``mode`` (``"sweep"``, ``"run"``, or ``"tune"``: a
    ``gemmlab-tune sweep --out``), or None; said before anything is written there (Hydra rewrites
    ``.hydra``, ``multirun.yaml`` and the summary at the start of a command, before gemmlab sees a
    point):

    - a sweep into one run's folder (a ``result.json`` at its top and no ``multirun.yaml``) would
      put its points inside that run, where a sweep's summary does not look (records inside
      another run's folder are that run's, e.g. its sanitizer's);
    - a run into a sweep's folder (its ``multirun.yaml``, or records below and none at the top)
      or into a folder inside another command's (a sweep's point folder, a run's, a tuning
      sweep's) would make the sweep's points its own or take a point's place;
    - without ``resume=true`` (``resume`` False), a run into a folder that holds a result, or a
      sweep into one whose points hold results: gemmlab never overwrites a result;
    - a sweep into a tuning sweep's folder (also with ``resume=true``: its points would become
      the sweep's, and the tuning sweep could not resume);
    - a sweep or a tuning sweep (it resumes when run again) inside another command's folder (a
      run's, a sweep's, a tuning sweep's: their report and summary would count its points as their
      own), and a tuning sweep into a run's or a ``gemmlab -m`` sweep's folder.

    A ``resume`` that is neither True nor False is left to the config's own check."""
    try:
        has_record = os.path.lexists(folder / "result.json")
        is_sweep = (folder / "multirun.yaml").is_file()
        if mode == "tune":
            if has_record and not is_sweep:
                return f"{folder} is one run's folder (it holds result.json); give the sweep a folder of its own"
            if is_sweep:
                return (f"{folder} is a gemmlab -m sweep's folder (it holds multirun.yaml); give the tuning sweep a "
                        "folder of its own")
            owner = _enclosing_folder(folder, runs=True)
            if owner is not None:
                return f"{folder} lies inside {owner[0]}, the folder of another command's {owner[1]}; give a folder outside it"
            return None
        if mode == "sweep":
            if has_record and not is_sweep:
                return f"{folder} is one run's folder (it holds result.json); give the sweep a folder of its own"
            if not is_sweep and _is_tuning_folder(folder):  # resume=true would make its points a -m sweep's
                return (f"{folder} is a tuning sweep's folder (gemmlab-tune sweep --out); give the sweep a folder of "
                        "its own")
            owner = _enclosing_folder(folder, runs=True)
            if owner is not None:
                return (f"{folder} lies inside {owner[0]}, the folder of another command's {owner[1]} (its summary and "
                        "report would count these points as its own); give the sweep a folder outside it")
            if resume is False and folder.is_dir() and next(folder.rglob("result.json"), None) is not None:
                return (f"{folder} already holds a result.json of an earlier sweep; gemmlab never overwrites a result: "
                        f"add resume=true to keep the valid ones and run the rest, or give a new folder")
            return None
        if is_sweep or (folder.is_dir() and not has_record and any(
                not r.relative_to(folder).parts[0].startswith("sanitizer-")  # not a run's own child record
                for r in records_below(folder, TUNING_DEPTH))):  # a tuning sweep's points lie 3 levels down
            return f"{folder} is a sweep's folder (its points hold result.json files); give the run a folder of its own"
        inside = _enclosing_folder(folder, runs=True)
        if inside is not None and inside[1] == "sweep":
            return f"{folder} is inside the sweep folder {inside[0]} (a point's place); give the run a folder of its own"
        if inside is not None:  # e.g. a tuning sweep's point folder: resume=true set its record aside
            return (f"{folder} lies inside {inside[0]}, the folder of another command's {inside[1]}; give the run a "
                    "folder of its own")
        if resume is False and has_record:
            return (f"{folder} already holds a result.json; gemmlab never overwrites a result: add resume=true to keep a "
                    f"valid one of the same config and run otherwise, or give a new folder")
    except OSError:
        return None
    return None


#: how deep below a tuning sweep's folder its records lie (``<family>/<shape>/<kernel>/result.json``:
#: :func:`gemmlab.run.tune_sweep.point_dir`)
TUNING_DEPTH = 3


def records_below(folder: Path, depth: int):
    """The ``result.json`` files in the folders 1 to ``depth`` levels below ``folder`` (not its own),
    found without looking deeper (a walk pruned at ``depth``; links to folders are not followed):
    a huge unrelated folder given as a run's costs only its top levels. A folder that cannot be
    read is skipped."""
    top = os.path.abspath(folder)
    base = top.count(os.sep) - (1 if top.endswith(os.sep) else 0)  # the root "/" ends with one
    for root, dirs, files in os.walk(top):
        level = root.count(os.sep) - base
        if level >= depth:
            dirs[:] = []  # its records are listed below; nothing deeper is walked
        if level >= 1 and "result.json" in files:
            yield Path(folder) / os.path.relpath(os.path.join(root, "result.json"), top)


def _enclosing_folder(folder: Path, runs: bool) -> tuple[Path, str] | None:
    """``(folder, kind)`` of the nearest folder above ``folder`` that is a ``gemmlab -m`` sweep's
    (its ``multirun.yaml``: kind ``"sweep"``), or with ``runs`` also a run's (its ``result.json``:
    ``"run"``) or another command's claimed folder (its :data:`LOCK_NAME` alone: a tuning sweep's,
    ``"tuning sweep"``); None when there is none. (A point's compute-sanitizer child runs inside the
    point's folder through ``gemmlab.run.sanitizer_child``, which claims no folder.)"""
    for p in Path(os.path.abspath(folder)).parents:
        if (p / "multirun.yaml").is_file():
            return p, "sweep"
        if runs and os.path.lexists(p / "result.json"):
            return p, "run"
        if runs and (p / LOCK_NAME).is_file():
            return p, "sweep" if _hydra_sweep_signs(p) else "tuning sweep"
    return None


def _hydra_sweep_signs(folder: Path) -> bool:
    """``folder`` shows it is a ``gemmlab -m`` sweep's though it has no ``multirun.yaml`` (Optuna's
    sweeper writes none): one of the sweep's own files (:data:`SWEEP_FILES` other than the lock:
    the summary, Optuna's results), or a point folder with Hydra's ``.hydra`` one or two levels
    down (a tuning sweep's points, written by ``gemmlab-tune``, have none)."""
    if any(os.path.lexists(folder / name) for name in SWEEP_FILES - {LOCK_NAME}):
        return True
    return next(folder.glob("*/.hydra"), None) is not None or next(folder.glob("*/*/.hydra"), None) is not None


def _is_tuning_folder(folder: Path) -> bool:
    """``folder`` is a tuning sweep's (``gemmlab-tune sweep --out``): claimed (:data:`LOCK_NAME`), no
    ``result.json`` or ``multirun.yaml`` of its own, records below, and none of a ``gemmlab -m``
    sweep's signs (:func:`_hydra_sweep_signs`: an Optuna search's folder, which has no
    ``multirun.yaml``, was taken for a tuning sweep's and its resume refused)."""
    return ((folder / LOCK_NAME).is_file() and not os.path.lexists(folder / "result.json")
            and not (folder / "multirun.yaml").is_file() and not _hydra_sweep_signs(folder)
            and next(records_below(folder, TUNING_DEPTH), None) is not None)


def claim(folder: Path, field: str) -> IO:
    """Create ``folder`` and lock its :data:`LOCK_NAME` for this process; returns the open lock file
    (closing it, or the end of the process, releases the folder). The file holds this process's id.

    Raises:
        FolderError: the folder is in use by another process (exit 2), or cannot be created or
            written (:func:`folder_error`).
    """
    folder = Path(folder)
    try:
        made = not folder.exists()
        levels = missing_parents(folder) + 1 if made else 0  # the folder and those made above it
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / LOCK_NAME, "a+")
    except OSError as exc:
        raise folder_error(field, folder, exc) from None
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.seek(0)
        holder = (handle.read().split() or [""])[0]
        handle.close()
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            who = f"process {holder}" if holder.isdigit() else "another process"
            raise FolderError(f"{field}: {folder} is in use by another gemmlab command ({who}); give another "
                              "folder, or run it again when that command has ended") from None
        raise folder_error(field, folder, exc) from None
    try:
        handle.seek(0)
        handle.truncate()
        # made: this command made the folder, and how many levels of it (outputs/multirun/<day>/<time>: 4)
        handle.write(f"{os.getpid()}\n" + (f"made\nlevels={levels}\n" if made else ""))
        handle.flush()
    except OSError as exc:
        handle.close()
        raise folder_error(field, folder, exc) from None
    return handle


def discard_refused_sweep(folder: Path | str) -> bool:
    """Remove the sweep folder this process made (:func:`claim` wrote ``made`` into its lock) when
    the sweep was refused before any point ran: it holds nothing but the lock, Hydra's
    ``multirun.yaml`` and an empty ``.submitit`` (submitit's launchers); also the folders above it that it made (``outputs/multirun/<day>/``), those
    left empty. Anything else in it, a folder another process locked, or one that existed
    before: left as it is. Returns True when removed.

    For a sweep Hydra or gemmlab refuses after Hydra made its folder (an override value Hydra's
    grammar refuses, two points given one folder): a new-user trial found folders holding only
    ``.gemmlab.lock`` after such refusals."""
    folder = Path(folder)
    try:
        lines = (folder / LOCK_NAME).read_text().split()
        if lines[:1] != [str(os.getpid())] or "made" not in lines[1:]:
            return False
        if not set(os.listdir(folder)) <= {LOCK_NAME, "multirun.yaml", ".submitit"}:
            return False
        if (folder / ".submitit").exists() and any((folder / ".submitit").iterdir()):  # a job was submitted
            return False
        levels = next((int(w.split("=", 1)[1]) for w in lines[1:] if w.startswith("levels=")), 1)
        if (folder / ".submitit").exists():  # the empty folder submitit's launcher makes as it starts
            (folder / ".submitit").rmdir()
        (folder / "multirun.yaml").unlink(missing_ok=True)
        (folder / LOCK_NAME).unlink()
        folder.rmdir()
        remove_empty_parents(folder, levels - 1)  # what it made above, if left empty
        return True
    except (OSError, IndexError):
        return False


def undo_refused_sweep(folder: Path | str) -> None:
    """A sweep refused before any point ran leaves ``folder`` as it found it: what gemmlab moved
    aside at its start is put back (:func:`put_back_kept`: an earlier sweep's
    ``multirun.yaml``, its points' ``.hydra``), and a folder this process made is removed
    (:func:`discard_refused_sweep`). Never raises."""
    put_back_kept(Path(folder))
    discard_refused_sweep(folder)


#: the files a sweep keeps at its top (a point folder there collides with them)
SWEEP_FILES = frozenset({"multirun.yaml", "summary.csv", "summary.md", "best.txt", "optimization_results.yaml",
                         LOCK_NAME, ".submitit"})


def point_folder_problem(raw: object, root: str, folder: str, num: int, taken: dict[str, int]) -> str | None:
    """What is wrong with point ``num``'s folder in a sweep, or None (and the folder is then noted
    in ``taken``, folder -> job number). ``raw``: ``hydra.sweep.subdir`` as written; ``root`` and
    ``folder``: the sweep's folder and the point's, both absolute. A point folder must lie inside
    the sweep's folder (its summary looks nowhere else), not under one of the sweep's own files
    (:data:`SWEEP_FILES`: ``summary.md/3`` broke the summary), and be no other point's (the second
    point would find the first's result, and Hydra would rewrite that folder's ``.hydra/``): a
    subdir such as ``${hydra.job.name}`` or ``${now:%H}`` gives every point one folder, an absolute
    one or one with ``..`` puts points outside. Used by gemmlab's launcher for each batch before
    any point of it runs (``hydra_plugins/gemmlab_launcher``, under any sweeper) and by gemmlab's
    sweeper under another launcher (``hydra_plugins/gemmlab_sweeper``)."""
    if folder == root or not folder.startswith(root + os.sep):
        return (f"{raw!r} puts point #{num} at {folder}, "
                + ("the sweep folder itself" if folder == root else f"outside the sweep folder {root}")
                + "; each point needs its own folder inside it: ${hydra.job.num} (the default) or "
                  "${hydra.job.override_dirname}")
    first = folder[len(root) + 1:].split(os.sep)[0]
    if first in SWEEP_FILES:
        return (f"{raw!r} puts point #{num} at {folder}, under {first}, a file of the sweep's own; each point "
                "needs its own folder inside the sweep's: ${hydra.job.num} (the default) or ${hydra.job.override_dirname}")
    if folder in taken and taken[folder] != num:
        return (f"{raw!r} gives point #{taken[folder]} and point #{num} the same folder {folder} (the second would "
                "find the first's result); name each point's own: ${hydra.job.num} (the default) or "
                "${hydra.job.override_dirname} with every swept key")
    taken[folder] = num
    return None


#: interpolations that are the same for every point of a sweep (Hydra's job name, the clock)
_SAME_FOR_EVERY_POINT = re.compile(r"\$\{(?:hydra:)?(?:hydra\.job\.name|hydra\.runtime\.[\w.]+|now:[^}]*)\}")


def subdir_problem(subdir: object, one_point: bool = False) -> str | None:
    """What makes ``hydra.sweep.subdir`` wrong for every sweeper, told from its text alone, or
    None: a constant, or interpolations that are the same for every point (``${hydra.job.name}``,
    ``${now:%H}``), give all points one folder (unless the sweep has ``one_point``); a path that
    leaves the sweep's folder (absolute, or ``..`` past it: ``../x${hydra.job.num}``) or is that
    folder (``${hydra.job.num}/..``) puts points where its summary does not look. gemmlab's
    sweeper also resolves each job's folder (``hydra_plugins/gemmlab_sweeper``); this catches
    these cases for Hydra's basic and Optuna sweepers before any point runs."""
    same = "names the same folder for every point of the sweep (the second would find the first's result)"
    if subdir is None:
        return same
    if not isinstance(subdir, (str, int, float)):
        return None
    text = str(subdir)
    if "${" not in _SAME_FOR_EVERY_POINT.sub("", text) and not one_point:  # a constant, or what every point shares
        return same
    shape = os.path.normpath(re.sub(r"\$\{[^}]*\}", "x", text))
    first = shape.split(os.sep)[0]
    if first in SWEEP_FILES:
        return f"puts points under {first}, a file of the sweep's own"
    if os.path.isabs(shape) or shape == ".." or shape.startswith(".." + os.sep):
        return "puts points outside the sweep's folder, where its summary does not look"
    if shape == ".":
        return "puts points in the sweep's folder itself"
    return None


def keep_earlier_hydra_files(root: Path, subdir: str | None, points_below: bool = False) -> list[Path]:
    """Move the ``subdir`` folder (Hydra's ``hydra.output_subdir``, ``.hydra``: the config.yaml,
    hydra.yaml and overrides.yaml of the command that ran there) of ``root`` — with
    ``points_below``, instead those of the gemmlab points at any depth below ``root`` (folders
    holding a ``result.json``: a sweep's jobs) — aside as ``<subdir>.previous-<time>-<pid>``, so a
    command run again into those folders (a re-run, ``resume=true``, a refused point) does not
    overwrite the earlier command's. Returns the new paths; errors only cost the copy (never raises)."""
    if not subdir or not root.is_dir():
        return []
    from gemmlab.run.store import previous_tag
    moved = []
    try:
        if points_below:
            found = [r.parent / subdir for r in root.rglob("result.json") if (r.parent / subdir).is_dir()]
        else:
            found = [root / subdir] if (root / subdir).is_dir() else []
    except OSError:
        return []
    for folder in found:
        target = folder.with_name(f"{folder.name}.{previous_tag(folder.parent)}")
        try:
            os.replace(folder, target)
            moved.append(target)
        except OSError:
            pass
    return moved


def keep_earlier_multirun_yaml(root: Path) -> Path | None:
    """Move the ``multirun.yaml`` an earlier sweep left in ``root`` (Hydra writes the sweep's own at
    its start) aside as ``multirun.previous-<time>-<pid>.yaml``, so a re-run (``resume=true``) keeps
    the definition of the sweep its records came from. Returns the new path; errors only cost the
    copy (never raises)."""
    old = root / "multirun.yaml"
    if not old.is_file():
        return None
    from gemmlab.run.store import previous_tag
    try:
        target = root / f"multirun.{previous_tag(root)}.yaml"
        os.replace(old, target)
    except OSError:
        return None
    return target


def put_back_kept(root: Path) -> list[Path]:
    """Undo in the sweep folder ``root`` what this process's :class:`KeepEarlierHydraFiles` moved
    aside at the start of a sweep that was then refused before any point ran (a bad sweeper
    argument, two points given one folder): the earlier sweep's ``multirun.yaml`` goes back over
    the one Hydra wrote for the refused command, each point's ``.hydra`` folder back to its name.
    Returns the paths put back; errors leave the kept copies where they are (never raises)."""
    import re

    from gemmlab.run.store import previous_tag_pattern
    tag = previous_tag_pattern(os.getpid())
    back: list[Path] = []
    try:
        kept = sorted(p for p in root.glob("multirun.previous-*.yaml") if re.fullmatch(rf"multirun\.{tag}\.yaml", p.name))
        if kept:
            os.replace(kept[-1], root / "multirun.yaml")
            back.append(root / "multirun.yaml")
        for moved in sorted(root.rglob("*.previous-*")):
            name = re.fullmatch(rf"(.+)\.{tag}", moved.name)
            if name and moved.is_dir() and not os.path.lexists(moved.parent / name.group(1)):
                os.replace(moved, moved.parent / name.group(1))
                back.append(moved.parent / name.group(1))
    except OSError:
        pass
    return back


def nothing_to_resume(root: Path, mode: str) -> str | None:
    """The line that says ``resume=true`` has no earlier record to resume in ``root`` (the
    ``hydra.sweep.dir`` of a sweep, ``mode="sweep"``, or ``hydra.run.dir`` of one run), e.g. a new
    timestamped folder because the command did not name the earlier one; None when ``root``
    holds a ``result.json`` at any depth."""
    try:
        if root.is_dir() and next(root.rglob("result.json"), None) is not None:
            return None
    except OSError:
        return None
    return (f"resume=true: {root} holds no earlier result.json, so every point runs; to resume, name the "
            f"earlier folder: hydra.{mode}.dir=DIR resume=true")
