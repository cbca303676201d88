"""The one record model of ``result.json`` (its reading side): finding records and one typed view of each.

This module owns the record schema's name (:data:`SCHEMA`), the valid statuses, where records
are found (:func:`find_records`), and the one fallback policy for reading a record of this or an
older schema into a :class:`Record` (:func:`read_record`). The writer is :mod:`gemmlab.stages.record`;
the readers are the sweep summary (:mod:`gemmlab.cli.sweep`), ``gemmlab-report``,
``gemmlab-compare`` and the family view (:mod:`gemmlab.results`), the tuning table's builder
(:func:`gemmlab.dispatch.auto.build_table`) and :func:`gemmlab.stages.record.summary`. It lives
in the stages layer, beside its writer, so that every layer above can read records.

Fallback policy (one for every reader): a field is read where this schema puts it; where it is
missing or of the wrong type, the config copy stands in (``config.kernel`` for the kernel name and
parameters, ``config.shape`` for the shape) and the field is named in :attr:`Record.unread`, a
value computed instead of read is named in :attr:`Record.derived`. Reading never raises: a file
that is not a JSON object becomes a record of category ``unreadable``. Whether a reader accepts
such a record is its own decision (``gemmlab-compare`` refuses other schemas, the report lists
them).

Where records are found: every ``result.json`` below a directory at any depth (natural order,
job ``2`` before ``10``, symlinked directories not followed), or a file named directly; likewise
every member of a record archive (:mod:`gemmlab.stages.archive`) or of a folder inside one
(``runs.jsonl.xz/auto``), or one member named through it (``runs.jsonl.xz/auto/3/result.json``;
the record's ``path`` is written so too). :func:`write_archive` packs a folder's records into an
archive, :func:`records_of` yields them from a folder or an archive alike. An entry
named ``result.json`` that is no readable file (a folder, a link to nowhere, a fifo) is found too
and reads as ``unreadable`` with one reason (:func:`read_record`), so every reader names and counts
it the same way. A record
inside another run's directory (the sanitizer child's ``sanitizer-<tool>/run/result.json``) is
part of that run, not a point of its own: :func:`find_records` leaves it out unless asked.

Measurement identity: :func:`measurement_settings` names every config field that changes a
measurement (precision, A/B layout, L2 mode, timing batch, input distribution, compile target),
with the value a record older than the field stands for.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Iterator

from gemmlab.paths import not_a_regular_file
from gemmlab.stages import archive

SCHEMA = "gemmlab.result/1"
SCHEMA_FAMILY = SCHEMA.rsplit("/", 1)[0] + "/"  # every version of the record schema starts so
VALID_STATUSES = ("ok", "compiled", "checked")
RECORD_NAME = "result.json"
CATEGORIES = ("timed", "compiled", "failed", "other", "unreadable")

_MISSING = object()


@dataclass
class Record:
    """One ``result.json`` read through the fallback policy (see the module docstring).

    Units: times in milliseconds (per launch), throughput in GFLOP/s (10⁹ useful FLOP/s,
    2·M·N·K per GEMM), arithmetic intensity in FLOP/byte, bandwidth in bytes/s. ``None`` means
    not recorded or not readable; ``unread`` names each field that could not be read.

    ``category`` is ``timed`` (status ``ok`` with a readable median), ``compiled``
    (``mode=compile``), ``failed`` (any status that is not valid), ``other`` (valid but not
    timed: a sanitizer ``checked`` record, or an ``ok`` record whose timing cannot be read) or
    ``unreadable`` (the file is not a JSON object; ``error`` says why). ``foreign`` says why a
    JSON object is not a gemmlab record at all (:func:`not_a_record`; None for a gemmlab record).
    """

    path: str
    status: str
    category: str
    index: int = 0
    schema: str | None = None
    valid: bool | None = None
    kernel: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    M: int | None = None
    N: int | None = None
    K: int | None = None
    device: str | None = None
    arch: str | None = None
    precision: str | None = None
    median_ms: float | None = None
    gflops: float | None = None
    protocol: str | None = None
    l2: str | None = None
    samples_ms: list[float] = field(default_factory=list)  # the finite samples of the primary protocol
    samples_recorded: int | None = None  # length of the recorded sample list (None: no list)
    nonfinite_samples: int = 0  # samples recorded as null, NaN or infinity
    samples_not_numbers: str | None = None  # why the sample list is not numbers, when it is not
    throttled_samples: int | None = None
    ratio_to_baseline: float | None = None  # kernel median time / baseline median time (>1: slower)
    ratio_to_baseline_gflops: float | None = None  # kernel GFLOP/s / baseline GFLOP/s (>1: faster)
    baseline: str | None = None
    max_abs_error: float | None = None
    verification_rule: str | None = None
    verification_passed: bool | None = None
    arithmetic_intensity: float | None = None  # FLOP per byte of minimum DRAM traffic
    pct_fp32_peak: float | None = None
    pct_peak: float | None = None  # of the units the precision runs on (``peak_units``); None in older records
    peak_units: str | None = None
    fp32_peak_gflops: float | None = None
    dram_peak_bytes_per_s: float | None = None
    error: str | None = None
    mode: str | None = None  # "run" or "compile" (the record's, else its config's)
    registers: float | None = None  # ptxas's report of the main kernel: registers per thread
    spill_store_bytes: float | None = None
    spill_load_bytes: float | None = None
    static_shared_bytes: float | None = None  # per block
    dynamic_shared_bytes: float | None = None  # per block, the launch's
    occupancy: float | None = None  # theoretical occupancy (0..1) of the launch
    stack_frame_bytes: float | None = None  # ptxas's stack frame (local memory) per thread
    # (registers, static shared memory and local memory: the driver's attributes where ptxas reported none)
    blocks_per_sm: float | None = None  # resident blocks per SM the occupancy allows
    waves: float | None = None  # the launch's blocks / (blocks per SM × SMs)
    sass_histogram: dict[str, int] = field(default_factory=dict)  # the cubin's SASS classes counted (> 0)
    sass_total: int | None = None  # instructions in the disassembly
    sass_check: dict[str, Any] = field(default_factory=dict)  # the declared classes' check (gemmlab.gpu.sass_check)
    created: str = ""
    shape_from: str | None = None  # "shape" or "config.shape": where M, N, K were read
    settings: dict[str, Any] = field(default_factory=dict)  # measurement_settings() of the record
    unread: list[str] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)
    raw: Any = field(default=None, repr=False, compare=False)  # the parsed JSON (None if unreadable)
    foreign: str | None = None  # why the JSON object is not a gemmlab record (None: it is one)

    @property
    def is_valid(self) -> bool:
        """``valid`` is true and the status is one of :data:`VALID_STATUSES`."""
        return self.valid is True and self.status in VALID_STATUSES

    @property
    def shape(self) -> tuple[int, int, int] | None:
        """``(M, N, K)`` or None when unknown."""
        return (self.M, self.N, self.K) if self.M is not None else None

    @property
    def params_text(self) -> str:
        """``"BM=64 BN=64 ..."`` (empty for a kernel without parameters)."""
        return " ".join(f"{k}={v}" for k, v in self.params.items())

    @property
    def shape_text(self) -> str:
        """``"MxNxK"``, or ``""`` when the shape is unknown."""
        return f"{self.M}x{self.N}x{self.K}" if self.M is not None else ""

    @property
    def size(self) -> float | None:
        """(M·N·K)^(1/3): the side of the cube with the same work (= N for an N³ GEMM)."""
        return (self.M * self.N * self.K) ** (1 / 3) if self.M is not None else None

    @property
    def schema_text(self) -> str:
        """``"schema <name>"`` or ``"schema missing"``."""
        return f"schema {self.schema}" if self.schema else "schema missing"

    def unread_lines(self) -> list[str]:
        """One line per field that could not be read: ``"<path>: schema X: cannot read F"``."""
        return [f"{self.path}: {self.schema_text}: cannot read {f}" for f in self.unread]


# --------------------------------------------------------------------------------------------
# finding records


def natural_key(text: str) -> list:
    """Sort key that orders digit runs by value (``"2"`` before ``"10"``)."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text) if t]


def is_child_record(path: Path, root: Path | None = None) -> bool:
    """True when ``path`` lies inside another run's directory: a ``sanitizer-<tool>/run/``
    record, or any record with a ``result.json`` in a directory above it (up to ``root``)."""
    path = Path(path)
    if path.parent.name == "run" and path.parent.parent.name.startswith("sanitizer-"):
        return True
    inside = archive.locate(path) if not os.path.lexists(path) else None
    if inside is not None:
        return _is_child_member(inside, root)
    here = path.resolve().parent
    stop = Path(root).resolve() if root is not None else None
    if here == stop:
        return False
    for parent in here.parents:
        if (parent / RECORD_NAME).is_file():
            return True
        if stop is None or parent == stop:
            break
    return False


def _is_child_member(inside: tuple[Path, str], root: Path | None) -> bool:
    """:func:`is_child_record` for a member of an archive: a ``result.json`` member in a folder
    above it (up to ``root``'s place in the archive; without ``root`` the one folder above)."""
    file, inner = inside
    try:
        members = archive.load(file).lines
    except (archive.ArchiveError, OSError):
        return False
    stop = None
    if root is not None:
        there = archive.locate(root)
        stop = there[1] if there is not None and Path(there[0]) == Path(file) else None
    here = PurePosixPath(inner).parent
    if stop is not None and here == PurePosixPath(stop or "."):
        return False
    for parent in here.parents:
        if (parent / RECORD_NAME).as_posix() in members:
            return True
        if stop is None or parent == PurePosixPath(stop or "."):
            break
    return False


def path_problem(path: Path | str) -> str | None:
    """Why ``path`` cannot hold records (``no such file or directory``, or ``not a file or folder``
    for a device, a pipe, a socket: ``/dev/null`` as a results path; for an archive or a path
    through one, why it is no readable archive or names nothing in it), or None."""
    path = Path(path)
    inside = archive.locate(path)
    if inside is not None:
        file, inner = inside
        try:
            found = archive.load(file).under(inner)
        except archive.ArchiveError as exc:
            return f"not a readable record archive: {exc}"
        except OSError as exc:
            return f"cannot read the archive {file}: {exc.strerror or exc}"
        return None if found else f"no record under {inner!r} in the archive {file}"
    if not os.path.lexists(path) or (path.is_symlink() and not path.exists()):
        return "no such file or directory"
    if not (path.is_file() or path.is_dir()):
        return "not a file or folder of results (a device, a pipe or a socket)"
    return None


def find_records(paths: Iterable[str | os.PathLike] | str | os.PathLike, children: bool = True) -> list[Path]:
    """Every record file under ``paths``, in argument order, each directory's files sorted
    naturally (job ``2`` before ``10``). A directory contributes every ``result.json`` at any
    depth (symlinked directories are not followed); a file is taken as a record whatever its
    name. An entry named ``result.json`` that is not a file (a folder, also a linked one, or a
    link to nowhere) is listed as well: :func:`read_record` reads it as ``unreadable`` with the
    reason. A file reached twice is listed once (two links to nowhere are two entries, even to
    one missing target).

    Args:
        paths: run or sweep directories and record files.
        children: also list records inside another run's directory (see :func:`is_child_record`);
            a file named directly is always listed.

    Raises:
        FileNotFoundError: a path does not exist or is neither a file nor a folder; its text is
            ``<path>: <why>`` (:func:`path_problem`).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for p in map(Path, paths):
        problem = path_problem(p)
        if problem:
            raise FileNotFoundError(f"{p}: {problem}")
    found: list[Path] = []
    seen: set[Path] = set()
    for p in map(Path, paths):
        inside = archive.locate(p)
        if inside is not None:
            members = archive.load(inside[0]).under(inside[1])
            candidates = sorted((inside[0] / m for m in members), key=lambda c: [natural_key(part) for part in c.parts])
            if not children and not (len(members) == 1 and members[0] == inside[1]):
                candidates = [c for c in candidates if not is_child_record(c, p)]
        elif p.is_file():
            candidates = [p]
        elif p.is_dir():
            candidates = []
            for root, dirs, files in os.walk(p):
                dirs.sort(key=natural_key)
                if RECORD_NAME in files or RECORD_NAME in dirs:  # dirs: a folder named so (never a record)
                    candidates.append(Path(root) / RECORD_NAME)
            candidates.sort(key=lambda c: [natural_key(part) for part in c.parts])
            if not children:
                candidates = [c for c in candidates if not is_child_record(c, p)]
        else:  # removed since the check above
            raise FileNotFoundError(f"{p}: no such file or directory")
        for c in candidates:
            key = c.resolve() if c.exists() else Path(os.path.abspath(c))  # links to nowhere: each its own entry
            if key not in seen:
                seen.add(key)
                found.append(c)
    return found


def collect(paths, children: bool = True, skipped: list[Record] | None = None) -> list[Record]:
    """One :class:`Record` per record file under ``paths`` (see :func:`find_records`), numbered
    1.. in that order (``index``). Never raises for a bad record. A JSON object that is not a
    gemmlab record (:attr:`Record.foreign`, e.g. ``{}`` or another tool's ``result.json`` in the
    tree) is left out and appended to ``skipped`` when a list is given (for the caller's notice).

    Raises:
        FileNotFoundError: a path does not exist.
    """
    records = []
    for path in find_records(paths, children):
        rec = read_record(path)
        if rec.foreign is not None:
            if skipped is not None:
                skipped.append(rec)
            continue
        records.append(rec)
    for i, rec in enumerate(records, 1):
        rec.index = i
    return records


# --------------------------------------------------------------------------------------------
# reading one record


def read_record(path: str | os.PathLike) -> Record:
    """Read one record file into a :class:`Record` (best-effort for other schemas; never raises).
    What is no readable file is category ``unreadable`` with one reason in ``error``:
    ``cannot read the file: a folder``, ``... a link to nowhere (-> <target>)``, ``... not a
    regular file (...)`` (a fifo, never opened: it would block the reader)."""
    path = Path(path)
    inside = archive.locate(path) if not os.path.lexists(path) else None
    if inside is not None and inside[1]:
        return _read_member(path, *inside)
    odd = not_a_regular_file(path)
    if path.is_symlink() and not path.exists():
        odd = f"a link to nowhere (-> {os.readlink(path)})"
    if odd:  # a fifo would block the reader
        return Record(path=str(path), status="unreadable", category="unreadable", error=f"cannot read the file: {odd}")
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return Record(path=str(path), status="unreadable", category="unreadable",
                      error=f"cannot read the file: {exc.strerror or exc}" if isinstance(exc, OSError)
                      else f"not UTF-8 text: {exc}")
    except ValueError as exc:
        return Record(path=str(path), status="unreadable", category="unreadable", error=f"not valid JSON: {exc}")
    return view(rec, path)


def _read_member(path: Path, file: Path, inner: str) -> Record:
    """:func:`read_record` of the archive member ``inner`` of ``file`` (``path``: both joined)."""
    try:
        member = archive.load(file).member(inner)
    except KeyError:
        member = archive.Member(inner, unreadable=f"no such record in the archive {file}")
    except (archive.ArchiveError, OSError) as exc:
        member = archive.Member(inner, unreadable=f"cannot read the archive {file}: {exc}")
    if member.unreadable is not None:
        return Record(path=str(path), status="unreadable", category="unreadable", error=member.unreadable)
    return view(member.record, path)


def is_collection(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds records the way a folder does: a folder, an archive, or a folder
    inside an archive (not one member named through it)."""
    inside = archive.locate(path)
    if inside is None:
        return Path(path).is_dir()
    try:
        return archive.load(inside[0]).under(inside[1]) != [inside[1]]
    except (archive.ArchiveError, OSError):
        return False


def records_of(source: str | os.PathLike, children: bool = True) -> Iterator[tuple[str, Record]]:
    """``(relative path, record)`` for each record file under ``source``, a sweep folder, an
    archive or a folder inside one, in :func:`find_records`' order; the path is POSIX and relative
    to ``source`` (``"3/result.json"``; for one file or member named directly, its name).

    Raises:
        FileNotFoundError: ``source`` does not exist or is no readable archive
            (:func:`path_problem`'s text).
    """
    problem = path_problem(source)
    if problem:
        raise FileNotFoundError(f"{source}: {problem}")
    base = Path(source)
    for path in find_records([base], children):
        rel = path.relative_to(base).as_posix() if path != base else path.name
        yield rel, read_record(path)


def write_archive(source: str | os.PathLike, out_file: str | os.PathLike) -> int:
    """Pack every record file under ``source`` (a sweep folder, an archive, or a folder inside one;
    a sanitizer child's record too) into the new archive ``out_file`` (:mod:`gemmlab.stages.archive`),
    each member's path relative to ``source``; returns how many records were written. A file that
    is no readable JSON is kept as an ``unreadable`` member with its reason.

    Raises:
        FileNotFoundError: ``source`` does not exist, holds no record file, or is no readable
            archive (``<source>: <why>``).
        FileExistsError: ``out_file`` exists.
        OSError: the archive cannot be written.
    """
    members = [archive.Member(rel, unreadable=rec.error) if rec.category == "unreadable" and rec.raw is None
               else archive.Member(rel, rec.raw) for rel, rec in records_of(source)]
    if not members:
        raise FileNotFoundError(f"{source}: no {RECORD_NAME} under it")
    return archive.write_members(members, out_file, source=Path(source).name.removesuffix(archive.SUFFIX))


def view(rec: Any, path: str | os.PathLike = "") -> Record:
    """The typed view of a parsed record ``rec`` (a dict as written by :mod:`gemmlab.stages.record`);
    never raises."""
    if not isinstance(rec, dict):
        return Record(path=str(path), status="unreadable", category="unreadable",
                      error=f"not a JSON object (a {type(rec).__name__})", raw=rec)
    try:
        out = _Reader(Path(path), rec).record()
    except Exception as exc:  # a record shaped in a way nobody foresaw must not stop a reader
        schema = rec.get("schema")
        out = Record(path=str(path), status=str(rec.get("status", "?")), category="failed",
                     schema=schema if isinstance(schema, str) else None,
                     error=rec.get("error") if isinstance(rec.get("error"), str) else None,
                     unread=[f"record ({type(exc).__name__}: {exc})"])
    out.raw = rec
    out.foreign = not_a_record(rec)
    if not out.settings:
        out.settings = measurement_settings(rec)
    return out


def not_a_record(rec: Any) -> str | None:
    """Why a parsed JSON object is not a gemmlab record (another tool's JSON, ``{}``), or None
    when it is one: a ``schema`` of the form ``gemmlab.result/<n>`` (any version), or, for the
    records written before the field existed, no ``schema`` but a ``status`` text and a
    ``config`` or ``kernel`` object. None as well for what is not a JSON object (category
    ``unreadable``: possibly a damaged record, so it stays listed)."""
    if not isinstance(rec, dict):
        return None
    schema = rec.get("schema")
    if isinstance(schema, str) and schema.startswith(SCHEMA_FAMILY):
        return None
    if "schema" in rec:
        return f"schema {_short(schema)} is not {SCHEMA_FAMILY}<n>"
    if isinstance(rec.get("status"), str) and any(isinstance(rec.get(k), dict) for k in ("config", "kernel")):
        return None
    return ("no schema, and not an older gemmlab record (a status text and a config or kernel object)" if rec
            else "an empty JSON object")


def measurement_settings(rec: dict) -> dict[str, Any]:
    """The config fields, besides kernel, parameters, shape, device and timing protocol, that
    change a measurement, each with the value an older record without the field stands for:

    ``precision`` (``config.precision``; else the record's ``precision`` text; else ``fp32``, the
    only precision before the field existed), ``layout`` (``config.layout`` ``{a, b}`` as
    ``"a/b"``; else ``row/row``), ``l2`` (``config.timing.l2``; else ``timing.l2``; else
    ``warm``), ``batch`` (``config.timing.batch``; else ``timing.batch``), ``inputs``
    (``config.inputs.distribution``; else ``inputs.distribution``; else ``normal``) and ``target``
    (the compile target ``config.arch`` as digits; None for the default, the device's own arch).
    """
    cfg = rec.get("config") if isinstance(rec.get("config"), dict) else {}

    def at(obj, *keys):
        for k in keys:
            if not isinstance(obj, dict) or obj.get(k) is None:
                return None
            obj = obj[k]
        return obj

    precision = at(cfg, "precision")
    if not isinstance(precision, str):
        text = rec.get("precision")
        precision = text.split(":", 1)[0] if isinstance(text, str) and text else "fp32"
    layout = at(cfg, "layout")
    if not isinstance(layout, dict):
        layout = rec.get("layout") if isinstance(rec.get("layout"), dict) else {}
    layout_text = f"{layout.get('a') or 'row'}/{layout.get('b') or 'row'}"
    target = at(cfg, "arch")
    target = str(target).removeprefix("sm_") if target is not None else None
    if target is not None and target == str(at(rec, "device", "arch") or "").removeprefix("sm_"):
        target = None  # the device's own arch, the default target
    return {"precision": precision, "layout": layout_text,
            "l2": at(cfg, "timing", "l2") or at(rec, "timing", "l2") or "warm",
            "batch": at(cfg, "timing", "batch") or at(rec, "timing", "batch"),
            "inputs": at(cfg, "inputs", "distribution") or at(rec, "inputs", "distribution") or "normal",
            "target": target}


class _Reader:
    """Reads one record dict; each field that should be there but cannot be read is noted."""

    def __init__(self, path: Path, rec: dict):
        self.path, self.rec = path, rec
        self.unread: list[str] = []

    def get(self, dotted: str, obj: Any = None) -> Any:
        cur = self.rec if obj is None else obj
        for part in dotted.split("."):
            if not isinstance(cur, dict) or part not in cur:
                return _MISSING
            cur = cur[part]
        return cur

    def _bad(self, dotted: str, value: Any, required: bool, what: str) -> None:
        if value is _MISSING or value is None:
            if required:
                self.unread.append(dotted)
        else:
            self.unread.append(f"{dotted} ({what}, got {_short(value)})")

    def num(self, dotted: str, required: bool = False, obj: Any = None) -> float | None:
        v = self.get(dotted, obj)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
        self._bad(dotted, v, required, "not a finite number")
        return None

    def str_(self, dotted: str, required: bool = False) -> str | None:
        v = self.get(dotted)
        if isinstance(v, str):
            return v
        self._bad(dotted, v, required, "not a string")
        return None

    def record(self) -> Record:
        rec = self.rec
        schema = rec.get("schema")
        schema = schema if isinstance(schema, str) else (None if schema is None else _short(schema))
        native = schema == SCHEMA
        status = self.str_("status", required=True)
        valid = rec.get("valid") if isinstance(rec.get("valid"), bool) else None
        ok = status == "ok"
        # /1 records lack kernel and shape only when the config never validated (a failure)
        expect_point = not native or status in VALID_STATUSES
        row = Record(path=str(self.path), status=status or "?", category="failed", schema=schema, valid=valid,
                     error=self.str_("error"), created=str(rec.get("created_utc") or ""))
        self._kernel(row, expect_point)
        self._shape(row, expect_point)

        row.device = self.str_("device.name", required=native and status in VALID_STATUSES)
        row.arch = self.str_("device.arch")
        prec = self.get("config.precision")
        if not isinstance(prec, str):
            text = self.get("precision")
            prec = text.split(":", 1)[0] if isinstance(text, str) else None
        row.precision = prec

        self._timing(row, want=ok or status is None, native=native)
        self._baseline(row, ok)
        # verification (a failed point may stop before verification: only an ok record must have it)
        row.max_abs_error = self.num("verification.max_abs_error", required=ok)
        row.verification_rule = self.str_("verification.rule", required=ok and native)
        passed = self.get("verification.passed")
        row.verification_passed = passed if isinstance(passed, bool) else None
        self._roofline(row, ok)
        # what compiling reports (mode=compile records have nothing else); never required
        mode = self.get("mode")
        mode = mode if isinstance(mode, str) else self.get("config.mode")
        row.mode = mode if isinstance(mode, str) else None
        row.registers = self.num("compile.resources.registers")
        row.spill_store_bytes = self.num("compile.resources.spill_store_bytes")
        row.spill_load_bytes = self.num("compile.resources.spill_load_bytes")
        row.static_shared_bytes = self.num("compile.resources.static_shared_bytes")
        row.dynamic_shared_bytes = self.num("launch.shared_bytes")
        row.occupancy = self.num("occupancy.theoretical_occupancy")
        row.stack_frame_bytes = self.num("compile.resources.stack_frame_bytes")
        if self.get("compile.resources") in (None, _MISSING) and isinstance(self.get("compile.driver_attributes"), dict):
            # a run without ptxas's report (no -Xptxas=-v): the driver's attributes of the loaded kernel
            row.registers = self.num("compile.driver_attributes.registers")
            row.static_shared_bytes = self.num("compile.driver_attributes.static_shared_bytes")
            row.stack_frame_bytes = self.num("compile.driver_attributes.local_bytes")
        row.blocks_per_sm = self.num("occupancy.max_active_blocks_per_sm")
        row.waves = self.num("occupancy.waves")
        self._sass(row)

        if status == "ok" or (status is None and valid):
            row.category = "timed" if row.median_ms is not None else "other"
        elif status == "compiled":
            row.category = "compiled"
        elif status in VALID_STATUSES:
            row.category = "other"
        else:
            row.category = "failed"
        row.unread = self.unread
        return row

    def _sass(self, row: Record) -> None:
        """The SASS histogram (``compile.sass.histogram``: classes counted more than 0 times, and the
        total) and the declared classes' check (``sass_check``); never required, a malformed one is
        left out."""
        hist = self.get("compile.sass.histogram")
        if isinstance(hist, dict):
            counts = {str(k): v for k, v in hist.items() if isinstance(v, int) and not isinstance(v, bool)}
            row.sass_total = counts.pop("total", None)
            row.sass_histogram = {k: v for k, v in counts.items() if v > 0}
        check = self.get("sass_check")
        if isinstance(check, dict) and isinstance(check.get("verdict"), str):
            row.sass_check = dict(check)

    def _kernel(self, row: Record, expect_point: bool) -> None:
        """Kernel name and parameters; fallback: the config, where parameters sit beside the name."""
        row.kernel = self.str_("kernel.name")
        params = self.get("kernel.params")
        if row.kernel is None:
            cfg_kernel = self.get("config.kernel")
            if isinstance(cfg_kernel, str):
                row.kernel = cfg_kernel
            elif isinstance(cfg_kernel, dict) and isinstance(cfg_kernel.get("name"), str):
                row.kernel = cfg_kernel["name"]
                if not isinstance(params, dict):
                    params = {k: v for k, v in cfg_kernel.items() if k != "name"}
            if expect_point:
                self.unread.append("kernel.name" + (" (taken from config.kernel)" if row.kernel else ""))
        elif not isinstance(params, dict) and expect_point:
            self._bad("kernel.params", params, True, "not an object")
        row.params = dict(params) if isinstance(params, dict) else {}

    def _shape(self, row: Record, expect_point: bool) -> None:
        """Shape ``{"M","N","K"}``; fallback: a ``[M, N, K]`` list here or in the config."""
        shape = self.get("shape")
        mnk, row.shape_from = _mnk(shape), "shape"
        if mnk is None:
            mnk, row.shape_from = _mnk(self.get("config.shape")), "config.shape"
            if expect_point:
                self.unread.append("shape" + (" (taken from config.shape)" if mnk else
                                              f" (got {_short(shape)})" if shape is not _MISSING else ""))
        if mnk:
            row.M, row.N, row.K = mnk
        else:
            row.shape_from = None

    def _timing(self, row: Record, want: bool, native: bool) -> None:
        """The primary protocol's series; expected for every status ok."""
        timing = self.get("timing")
        if timing is _MISSING or timing is None:
            if want:
                self.unread += ["timing.median_ms", "timing.gflops", "timing.samples_ms"]
            return
        row.median_ms = self.num("timing.median_ms", required=True)
        row.gflops = self.num("timing.gflops")
        if row.gflops is None:
            if row.median_ms and row.M is not None and row.median_ms > 0:
                row.gflops = 2 * row.M * row.N * row.K / (row.median_ms * 1e-3) / 1e9
                row.derived.append("gflops = 2·M·N·K / median (timing.gflops absent)")
            else:
                self.num("timing.gflops", required=True)
        row.protocol = self.str_("timing.protocol", required=native)
        samples = self.get("timing.samples_ms")
        if samples is _MISSING and row.protocol:
            alt = self.get(f"timing.protocols.{row.protocol}.samples_ms")
            if isinstance(alt, list):
                samples = alt
                row.derived.append(f"samples from timing.protocols.{row.protocol} (timing.samples_ms absent)")
        if isinstance(samples, list):
            row.samples_recorded = len(samples)
            row.samples_ms = [float(s) for s in samples
                              if isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s)]
            odd = [s for s in samples if not (s is None or (isinstance(s, (int, float)) and not isinstance(s, bool)))]
            row.nonfinite_samples = len(samples) - len(row.samples_ms) - len(odd)
            if odd:
                row.samples_not_numbers = f"timing.samples_ms holds {len(odd)} non-number(s), e.g. {_short(odd[0])}"
            if len(row.samples_ms) != len(samples):
                self.unread.append(f"timing.samples_ms ({len(samples) - len(row.samples_ms)} of "
                                   f"{len(samples)} not finite numbers)")
        else:
            self._bad("timing.samples_ms", samples, True, "not a list")
        row.l2 = self.str_("timing.l2")
        throttled = self.get("timing.throttled_samples")
        if isinstance(throttled, int) and not isinstance(throttled, bool):
            row.throttled_samples = throttled
        else:
            self._bad("timing.throttled_samples", throttled, native, "not an integer")

    def _baseline(self, row: Record, ok: bool) -> None:
        """Baseline ratio ``{"baseline", "protocol", "median_time", "gflops"}``; a bare number is
        read as the time ratio."""
        ratio = self.get("ratio_to_baseline")
        base_cfg = self.get("config.baseline")
        base_name = self.get("baseline.name")
        row.baseline = base_name if isinstance(base_name, str) else base_cfg if isinstance(base_cfg, str) else None
        if isinstance(ratio, dict):
            row.ratio_to_baseline = self.num("ratio_to_baseline.median_time", required=True)
            row.ratio_to_baseline_gflops = self.num("ratio_to_baseline.gflops")
            if row.ratio_to_baseline_gflops is None and row.ratio_to_baseline:
                row.ratio_to_baseline_gflops = 1 / row.ratio_to_baseline
            if isinstance(ratio.get("baseline"), str):
                row.baseline = ratio["baseline"]
        elif isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and math.isfinite(ratio) and ratio > 0:
            row.ratio_to_baseline, row.ratio_to_baseline_gflops = float(ratio), 1 / float(ratio)
            row.derived.append("ratio_to_baseline is a bare number: read as the median-time ratio")
        elif ratio is not _MISSING and ratio is not None:
            self._bad("ratio_to_baseline", ratio, True, "not an object")
        elif ok and row.baseline is not None and row.median_ms is not None:
            self.unread.append(f"ratio_to_baseline (config.baseline is {row.baseline})")

    def _roofline(self, row: Record, ok: bool) -> None:
        """Roofline; fallback: intensity from the shape (A and B read once in the precision's element
        size, the contract's ``Problem.ab_bytes``; C, float32, written once). A bf16/fp16 record whose ``min_bytes``
        counted 4-byte A and B (written before gemmlab counted a 2-byte input's size,
        :mod:`gemmlab.stages.roofline`) gets its intensity from the shape, said in ``derived``."""
        roof = self.get("roofline")
        if isinstance(roof, dict):
            row.arithmetic_intensity = self.num("roofline.arithmetic_intensity", required=True)
            row.fp32_peak_gflops = self.num("roofline.fp32_peak_gflops")
            row.pct_fp32_peak = self.num("roofline.pct_fp32_peak")
            row.pct_peak = self.num("roofline.pct_peak")
            row.peak_units = roof.get("units") if isinstance(roof.get("units"), str) else None
            row.dram_peak_bytes_per_s = self.num("roofline.dram_peak_bytes_per_s")
        elif roof is not _MISSING and roof is not None:
            self._bad("roofline", roof, True, "not an object")
        elif ok and row.median_ms is not None:
            self.unread.append("roofline.arithmetic_intensity")
        if row.M is None or row.median_ms is None:
            return
        M, N, K = row.M, row.N, row.K
        from gemmlab.contract.hookspecs import AB_DTYPES, Problem, Shape
        ab = Problem(Shape(M, N, K), row.precision).ab_bytes if row.precision in AB_DTYPES else 4
        min_bytes = ab * (M * K + K * N) + 4 * M * N
        if row.arithmetic_intensity is None:
            row.arithmetic_intensity = 2 * M * N * K / min_bytes
            row.derived.append(f"arithmetic intensity from the shape ({ab}-byte A and B read once, float32 C "
                               "written once)")
        elif ab != 4 and self.num("roofline.min_bytes") == 4 * (M * K + K * N + M * N):
            row.arithmetic_intensity = 2 * M * N * K / min_bytes
            row.derived.append(f"arithmetic intensity from the shape: the record's roofline.min_bytes counted 4-byte "
                               f"A and B for {row.precision} ({ab} bytes; written before gemmlab counted them so)")
        if row.dram_peak_bytes_per_s is None:
            row.dram_peak_bytes_per_s = self.num("device.dram_peak_bytes_per_s")
        if row.fp32_peak_gflops is None:
            row.fp32_peak_gflops = _peak_from_device(self.rec.get("device"))


def _mnk(shape: Any) -> tuple[int, int, int] | None:
    if isinstance(shape, dict):
        shape = [shape.get(d) for d in "MNK"]
    if (isinstance(shape, (list, tuple)) and len(shape) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in shape)):
        return tuple(shape)  # type: ignore[return-value]
    return None


def _peak_from_device(device: Any) -> float | None:
    """FP32 peak in GFLOP/s from the device fields at the maximum SM clock (SMs × lanes × 2 × MHz)."""
    if not isinstance(device, dict):
        return None
    from gemmlab.stages.roofline import FP32_LANES_PER_SM
    arch = str(device.get("arch", "")).removeprefix("sm_")
    sms, mhz, lanes = device.get("sm_count"), device.get("max_sm_mhz"), FP32_LANES_PER_SM.get(arch)
    if isinstance(sms, int) and isinstance(mhz, (int, float)) and lanes:
        return sms * lanes * 2 * mhz / 1e3
    return None


def _short(value: Any, n: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= n else text[:n - 3] + "..."
