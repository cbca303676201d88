"""The record archive format: a sweep's ``result.json`` records in one xz-compressed JSON-lines file.

This module owns the file format (:data:`SCHEMA`), writing it (:func:`write_members`), reading
and checking it (:func:`read_archive`, :func:`load`) and telling an archive, or a place inside one,
from a plain path (:func:`is_archive_file`, :func:`locate`). Which records go in and how each is
read is :mod:`gemmlab.stages.record_model`'s (:func:`~gemmlab.stages.record_model.write_archive`,
``find_records`` and ``read_record`` read archives wherever they read folders).

The format (``*.jsonl.xz``): xz data (Python's :mod:`lzma`) of UTF-8 JSON lines. The first line
is the header, ``{"schema": "gemmlab.archive/1", "records": <n>, "source": <folder name>}``; each
of the ``n`` lines after it is one record file of the sweep, ``{"path": "3/result.json",
"record": {...}}`` (``path``: the file's POSIX path relative to the sweep folder; ``record``: the
file's JSON as written), or, for a file that was no readable JSON, ``{"path": ...,
"unreadable": "<why>"}`` (the reason :func:`gemmlab.stages.record_model.read_record` gave), so a
report of the archive lists it as a report of the folder did.

A place inside an archive is written as a path through it: ``runs.jsonl.xz/auto/3/result.json``
is that record, ``runs.jsonl.xz/auto`` the records under ``auto/`` (as a folder would be).
"""

from __future__ import annotations

import functools
import json
import lzma
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

from gemmlab.errors import GemmlabError

SCHEMA = "gemmlab.archive/1"
SCHEMA_FAMILY = SCHEMA.rsplit("/", 1)[0] + "/"
SUFFIX = ".jsonl.xz"
XZ_MAGIC = b"\xfd7zXZ\x00"


class ArchiveError(GemmlabError):
    """A file that should be a record archive is not one (not xz data, corrupt or truncated xz,
    not the archive's JSON lines); the message is one line, without the file's name (the caller
    names the argument)."""


class Member(NamedTuple):
    """One entry of an archive: ``path`` inside the sweep (``"3/result.json"``), and either
    ``record`` (the parsed JSON of that file, any JSON value) or ``unreadable`` (why the file was
    no readable JSON; ``record`` is then None)."""

    path: str
    record: Any = None
    unreadable: str | None = None


@dataclass(frozen=True)
class Archive:
    """A loaded, checked archive: its ``header`` (a dict) and each member's JSON line by path, in
    file order (parsed again by :meth:`member`, so a reader never shares another reader's dict)."""

    file: str
    header: Mapping[str, Any]
    lines: Mapping[str, str]

    def member(self, path: str) -> Member:
        """The member at ``path`` (a fresh parse of its line). Raises KeyError: no such member."""
        entry = json.loads(self.lines[path])
        return Member(path, entry.get("record"), entry.get("unreadable"))

    def under(self, prefix: str) -> list[str]:
        """The member paths equal to ``prefix`` or below it (``""``: all), in file order."""
        if not prefix:
            return list(self.lines)
        return [p for p in self.lines if p == prefix or p.startswith(prefix + "/")]


def is_archive_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file to be read as an archive: its name ends in ``.xz`` or its
    first bytes are xz's magic number. (Whether it really is one, :func:`load` says.)"""
    p = Path(path)
    if not p.is_file():
        return False
    if p.name.endswith(".xz"):
        return True
    try:
        with open(p, "rb") as fh:
            return fh.read(len(XZ_MAGIC)) == XZ_MAGIC
    except OSError:
        return False


def locate(path: str | os.PathLike) -> tuple[Path, str] | None:
    """``(archive file, inner path)`` when ``path`` is an archive file (inner ``""``) or a path
    through one (``runs.jsonl.xz/auto/3`` -> ``(runs.jsonl.xz, "auto/3")``), else None (a folder,
    a plain file, a path that does not exist). Only names are looked at, not the archive's
    content."""
    p = Path(path)
    if os.path.lexists(p):
        return (p, "") if is_archive_file(p) else None
    inner: list[str] = [p.name]
    for parent in p.parents:
        if os.path.lexists(parent):
            if not is_archive_file(parent):
                return None
            rest = PurePosixPath(*reversed(inner)).as_posix()
            return (parent, "" if rest == "." else rest)
        inner.append(parent.name)
    return None


def load(file: str | os.PathLike) -> Archive:
    """Read and check the archive ``file`` (cached while the file's size and time stay the same).

    Raises:
        ArchiveError: not xz data, corrupt or truncated xz data, not UTF-8, a line that is not
            JSON, a header without this schema, a member without a relative ``path`` or with
            both or neither of ``record`` and ``unreadable``, a path twice, or fewer or more
            members than the header's ``records``.
        OSError: the file cannot be read at all (removed, no permission).
    """
    st = os.stat(file)
    return _load(os.path.realpath(file), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _load(real: str, mtime_ns: int, size: int) -> Archive:
    del mtime_ns, size  # the cache key only
    header: dict | None = None
    lines: dict[str, str] = {}
    try:
        with lzma.open(real, "rt", encoding="utf-8", newline="\n") as fh:
            for number, line in enumerate(fh, 1):
                line = line.rstrip("\n")
                if header is None:
                    header = _header(line)
                    continue
                path = _member_path(line, number)
                if path in lines:
                    raise ArchiveError(f"line {number}: member {path!r} appears twice")
                lines[path] = line
    except lzma.LZMAError as exc:
        raise ArchiveError(f"not xz data, or corrupt xz data ({exc})") from None
    except EOFError:
        raise ArchiveError("truncated xz data (the file ends before the end of its stream)") from None
    except UnicodeDecodeError as exc:
        raise ArchiveError(f"not UTF-8 text inside the xz data ({exc.reason})") from None
    if header is None:
        raise ArchiveError("empty xz data: no header line")
    if header.get("records") != len(lines):
        raise ArchiveError(f"the header says {header.get('records')!r} records, the file holds {len(lines)}")
    return Archive(real, header, lines)


def _header(line: str) -> dict:
    try:
        head = json.loads(line)
    except ValueError:
        head = None
    schema = head.get("schema") if isinstance(head, dict) else None
    if not (isinstance(schema, str) and schema.startswith(SCHEMA_FAMILY)):
        raise ArchiveError(f"not a gemmlab record archive (its first line is no {SCHEMA} header)")
    if schema != SCHEMA:
        raise ArchiveError(f"archive schema {schema!r}; this gemmlab reads {SCHEMA!r}")
    return head


def _member_path(line: str, number: int) -> str:
    try:
        entry = json.loads(line)
    except ValueError as exc:
        raise ArchiveError(f"line {number}: not JSON ({exc})") from None
    path = entry.get("path") if isinstance(entry, dict) else None
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
        raise ArchiveError(f"line {number}: no relative 'path'")
    if ("record" in entry) == ("unreadable" in entry):
        raise ArchiveError(f"line {number}: needs one of 'record' and 'unreadable'")
    return path


def read_archive(file: str | os.PathLike) -> Iterator[Member]:
    """Each member of the archive ``file`` as a :class:`Member` ``(path, record, unreadable)``,
    in file order (the whole file is checked first: :func:`load`).

    Raises:
        ArchiveError: the file is not a readable archive (see :func:`load`).
    """
    archive = load(file)
    for path in archive.lines:
        yield archive.member(path)


def write_members(members: Iterable[Member], out_file: str | os.PathLike, source: str = "") -> int:
    """Write ``members`` to the new archive ``out_file`` (written to ``<out_file>.part`` first,
    then renamed, so no half archive is left); returns how many were written. Same members, same
    bytes (no time stamp in the file).

    Raises:
        FileExistsError: ``out_file`` exists (an archive is never overwritten).
        ValueError: a member path that is not relative, or appears twice.
        OSError: the file cannot be written.
    """
    out = Path(out_file)
    if os.path.lexists(out):
        raise FileExistsError(f"{out}: already exists; an archive is never overwritten")
    body, seen = [], set()
    for m in members:
        if not m.path or m.path.startswith("/") or ".." in m.path.split("/") or m.path in seen:
            raise ValueError(f"member path {m.path!r}: not relative, or twice")
        seen.add(m.path)
        entry = {"path": m.path, "record": m.record} if m.unreadable is None else {"path": m.path,
                                                                                   "unreadable": m.unreadable}
        body.append(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
    head = json.dumps({"schema": SCHEMA, "records": len(body), "source": source}, ensure_ascii=False)
    part = out.with_name(out.name + ".part")
    try:
        with lzma.open(part, "wt", encoding="utf-8", newline="\n", preset=9 | lzma.PRESET_EXTREME) as fh:
            fh.write(head + "\n")
            for line in body:
                fh.write(line + "\n")
        os.replace(part, out)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return len(body)
