"""Where gemmlab's shipped files live: ``conf/``, ``kernels/``, the built-in ``plugins/`` and ``gemmlab/data``.

In a source checkout they are top-level folders beside ``gemmlab/``; in an installed wheel they
are ``gemmlab/conf``, ``gemmlab/kernels`` and the package ``gemmlab_plugins`` (see
pyproject.toml's package-dir mapping). Also the two helpers every command that makes its output
folder uses to leave no empty folders behind when it gives up (:func:`missing_parents`,
:func:`remove_empty_parents`), and the check every reader of a user's file makes first, so a fifo
or a device never blocks a command (:func:`not_a_regular_file`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _first(*candidates: Path) -> Path:
    for c in candidates:
        if c.is_dir():
            return c
    return candidates[-1]


CONF_DIR = _first(_PKG / "conf", _PKG.parent / "conf")
KERNELS_DIR = _first(_PKG / "kernels", _PKG.parent / "kernels")
PLUGINS_DIR = _first(_PKG.parent / "gemmlab_plugins", _PKG.parent / "plugins")
DATA_DIR = _PKG / "data"  # package data: the shape suite and the tuning tables
SOURCE_ROOT = _PKG.parent if (_PKG.parent / "pyproject.toml").is_file() else None


def missing_parents(folder: Path | str) -> int:
    """How many folders above ``folder`` do not exist yet: what ``mkdir(parents=True)`` of it makes
    above it (``outputs/multirun/<day>/<time>`` in a new working directory: 3)."""
    return sum(1 for p in Path(os.path.abspath(folder)).parents if not p.exists())


def remove_empty_parents(folder: Path | str, count: int) -> None:
    """Remove up to ``count`` folders above ``folder``, nearest first, while they are empty (the
    ones a command made with it, :func:`missing_parents`, once ``folder`` itself is gone); stops at
    the first that is not empty or cannot be removed. Never raises."""
    for parent in list(Path(os.path.abspath(folder)).parents)[:max(0, count)]:
        try:
            parent.rmdir()
        except OSError:
            break


def not_a_regular_file(path: Path | str) -> str | None:
    """Why ``path``, which exists, must not be read as a file (``"not a regular file (a pipe, a
    device or a socket)"``; ``"a folder"``), or None for a regular file or one that does not exist
    (its reader says that itself). A fifo named ``result.json`` or given as a table blocked the
    readers forever (a new-user trial)."""
    p = Path(path)
    if not os.path.exists(p) or p.is_file():
        return None
    return "a folder" if p.is_dir() else "not a regular file (a pipe, a device or a socket)"


def file_in_the_way(path: Path | str) -> Path | None:
    """The nearest existing folder above ``path`` that is a file (``plain/x.json``: ``plain``), which
    makes writing ``path`` fail; None when there is none."""
    return next((p for p in Path(path).parents if p.exists() and not p.is_dir()), None)


def config_file(group: str, name: str, conf_dirs: "tuple[Path, ...] | list[Path]" = (CONF_DIR,)) -> Path:
    """The file of config group option ``group/name`` (``experiment/seed_lab``): the first
    ``<dir>/<group>/<name>.yaml`` of ``conf_dirs``, in Hydra's search order (gemmlab's ``conf/``,
    then ``--config-dir`` folders), else gemmlab's own path for it (which may not exist)."""
    return next((p for d in conf_dirs if (p := Path(d) / group / f"{name}.yaml").is_file()),
                CONF_DIR / group / f"{name}.yaml")


def gemmlab_checkout(folder: Path | str) -> Path | None:
    """``folder`` when it is a gemmlab source checkout (a ``pyproject.toml`` whose ``[project]``
    names ``gemmlab``, and a ``kernels/`` folder), else None. Never raises."""
    root = Path(folder)
    try:
        if not (root / "kernels").is_dir() or not (root / "pyproject.toml").is_file():
            return None
        text = (root / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    project = re.search(r"^\[project\][ \t]*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    name = project and re.search(r"""^name\s*=\s*["']([^"']+)["']""", project.group(1), re.M)
    return root if name and name.group(1).strip().lower() == "gemmlab" else None


def checkout_around(folder: Path | str) -> Path | None:
    """The nearest gemmlab source checkout (:func:`gemmlab_checkout`) at ``folder`` or above it:
    a command run from a checkout's subfolder (``kernels/``, ``outputs/...``) is run from that
    checkout. None where there is none. Never raises."""
    try:
        here = Path(os.path.abspath(folder))
    except (OSError, ValueError):
        return None
    return next((root for root in (here, *here.parents) if gemmlab_checkout(root) is not None), None)


def stale_checkout_source(files, cwd: Path | str | None = None) -> dict | None:
    """The edit->run check (issue 45, item 6): when a point used gemmlab's own installed files --
    a kernel source or header from :data:`KERNELS_DIR`, a built-in plugin module from
    :data:`PLUGINS_DIR` -- while the current directory is inside a *different* gemmlab checkout
    (its top folder or any subfolder: :func:`checkout_around`; a plain ``pip install .`` run from
    the checkout: the installed copy runs, not the file the user just edited), the files among
    ``files`` whose copy under the checkout's ``kernels/`` or ``plugins/`` differs, and the one line
    that says so; None when nothing differs (or no checkout, or the installed folder is the
    checkout's own, e.g. ``pip install -e .``). Files outside those two folders (a drop-in's own
    source or plugin) and files the checkout lacks are not compared. Never raises: this is a
    warning, never an error.

    Returns:
        ``{"installed": KERNELS_DIR, "checkout": its top folder, "files": ["kernels/naive.cu",
        "plugins/naive.py", ...], "message": the line}`` or None.
    """
    try:
        checkout = checkout_around(Path.cwd() if cwd is None else cwd)
        if checkout is None:
            return None
        pairs = [(Path(KERNELS_DIR).resolve(), (checkout / "kernels").resolve(), "kernels"),
                 (Path(PLUGINS_DIR).resolve(), (checkout / "plugins").resolve(), "plugins")]
        pairs = [(installed, mine, shown) for installed, mine, shown in pairs if installed != mine]
        differ = []
        for f in dict.fromkeys(Path(f).resolve() for f in files):
            for installed, mine, shown in pairs:
                try:
                    rel = f.relative_to(installed)
                except ValueError:
                    continue
                copy = mine / rel
                if f.is_file() and copy.is_file() and f.read_bytes() != copy.read_bytes():
                    differ.append(f"{shown}/{rel.as_posix()}")
                break
    except OSError:
        return None
    if not differ:
        return None
    installed = Path(KERNELS_DIR).resolve()
    where = ", ".join(dict.fromkeys(str((Path(KERNELS_DIR) if f.startswith("kernels/") else Path(PLUGINS_DIR)).resolve())
                                    for f in differ))
    message = (f"used the installed copy of {', '.join(differ)} ({where}), which {'differ' if len(differ) > 1 else 'differs'} from this checkout's "
               f"({checkout.resolve()}): edits in the checkout are not used; install it editable "
               "(pip install -e .) to run them")
    return {"installed": str(installed), "checkout": str(checkout.resolve()), "files": differ, "message": message}
