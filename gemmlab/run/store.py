"""The store of a point's records: what a point folder holds decides whether the point runs, and a
record is written once and never overwritten.

:func:`open_point` (called by :func:`gemmlab.run.pipeline.run_point` before any phase) refuses a
folder that cannot hold a record or already holds one, and with ``resume=true`` keeps a valid record
of the same config (``resumed``), sets any other aside under a ``previous-<time>-<pid>`` tag
(:func:`keep_previous`; the new record's ``previous`` lists it) or adopts the same config's valid
record from another folder of the sweep (a reordered sweep: :func:`_adopt_matching`). Records are
matched by :func:`resume_key` / :func:`valid_record_key` (``gemmlab-tune sweep`` finds records
copied into its folder by them); each record file of a sweep is read once a process
(:func:`_valid_config_key`, emptied by :func:`clear_cache`). :func:`write_record` and
:func:`write_artifact` never raise: a record that cannot be written says why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import secrets
import shutil
import time
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from gemmlab.errors import ConfigError
from gemmlab.paths import file_in_the_way, not_a_regular_file
from gemmlab.stages import record as record_stage
from gemmlab.stages.config import BatchOptions, EpilogueOptions, Fp8Options, GroupedOptions, LayoutOptions, _plain

#: the fp8 section as records from before it had it are compared (``_comparable``): its defaults
FP8_DEFAULTS = MappingProxyType(dataclasses.asdict(Fp8Options()))
#: the grouped section (issue 44) as records from before it had it are compared: its defaults
GROUPED_DEFAULTS = MappingProxyType(dataclasses.asdict(GroupedOptions()))
#: the sections issue 43 added (epilogue, batch, layout.lda/ldb/ldc), as records from before them are compared
EPILOGUE_DEFAULTS = MappingProxyType(dataclasses.asdict(EpilogueOptions()))
BATCH_DEFAULTS = MappingProxyType(dataclasses.asdict(BatchOptions()))
LAYOUT_DEFAULTS = MappingProxyType(dataclasses.asdict(LayoutOptions()))


def open_point(plain: Mapping[str, Any] | None, out_dir: Path,
               record: record_stage.Result) -> record_stage.Result | None:
    """Decide what the point's folder ``out_dir`` allows before the point runs, for
    :func:`gemmlab.run.pipeline.run_point`: the record to return at once, or None (the point runs;
    ``record["previous"]`` then lists the records set aside). A file where the folder goes is
    refused; a folder holding a record is resumed (``resume=true`` and a valid record of the same
    config: it is returned marked ``resumed``), set aside (:func:`keep_previous`) or refused (no
    resume: gemmlab never overwrites a result); a new folder of a resumed sweep adopts the same
    config's valid record from another of the sweep's folders (:func:`_resume_elsewhere`).
    ``plain``: the resolved config (None where it did not resolve: ``record`` then says why and is
    written here)."""
    blocking = _file_in_place(out_dir)
    if blocking is not None:  # nothing can be written there: said before anything runs
        record.fail(ConfigError.status, _file_in_place_error(out_dir, blocking))
        return record
    try:  # lexists: a result.json that is a link to nowhere is still a file gemmlab must not replace
        if os.path.lexists(out_dir / "result.json"):  # never touch an earlier measurement
            resumed, kept = _resume(plain, out_dir)
            if resumed is not None:
                return resumed
            if kept is not None:
                record["previous"] = kept
            if os.path.lexists(out_dir / "result.json"):
                record.fail(ConfigError.status, f"out_dir: {out_dir} already holds a result.json; gemmlab never "
                            "overwrites a result (resume=true keeps the valid results of the same config and re-runs the rest)")
                return record
        elif plain is not None:  # a new folder of a reordered sweep: the same point may be measured in another
            adopted = _resume_elsewhere(plain, out_dir)
            if adopted is not None:
                return adopted
            if _resuming(plain) is not None:  # a resume interrupted after it set this folder's record aside
                kept = previous_kept_by(out_dir)
                if kept:
                    record["previous"] = kept
    except OSError as exc:  # the folder changed under resume (a record written or removed meanwhile)
        record.fail("error", f"out_dir: resume=true could not set {out_dir} aside "
                    f"({type(exc).__name__}: {exc}); nothing was run or overwritten")
        return record
    if record["status"] != "running":
        write_record(record, out_dir)
        return record
    return None


def write_artifact(out_dir: Path, name: str, text: str) -> None:
    """Write ``out_dir/name`` (a log beside the record); a folder that cannot be written costs only
    this file (the record then says why it could not be written either)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / name).write_text(text)
    except OSError:
        pass


def write_record(record: record_stage.Result, out_dir: Path) -> None:
    """Write ``record`` to ``out_dir/result.json``; never raises, so a point whose record cannot be
    written (a full disk, a read-only folder, a record another process wrote meanwhile) still returns
    its record, which then says so (status ``error``, or ``invalid`` for the folder taken meanwhile),
    and a sweep goes on."""
    try:
        record_stage.write_record(record, out_dir)
    except (FileExistsError, NotADirectoryError):
        blocking = _file_in_place(out_dir)
        if blocking is not None:  # the point's folder (or one above it) became a file as it ran
            record.fail(ConfigError.status, _file_in_place_error(out_dir, blocking))
            return
        record.fail(ConfigError.status, f"out_dir: {out_dir} received a result.json from another process while this "
                    "point ran; gemmlab never overwrites a result (give each command its own folder)")
    except OSError as exc:
        reason = f"[Errno {exc.errno}] {exc.strerror}" if exc.errno else str(exc)
        record.fail("error", f"out_dir: cannot write {out_dir / 'result.json'}: {reason}; this point's record is not "
                    f"kept (was: {record.get('status')}{': ' + record['error'] if record.get('error') else ''})")


def _file_in_place(out_dir: Path) -> Path | None:
    """``out_dir`` itself when it is a file (or a link to nowhere) rather than a folder, else the
    nearest folder above it that is a file (:func:`gemmlab.paths.file_in_the_way`); None when the
    point's folder can be made."""
    if os.path.lexists(out_dir) and not out_dir.is_dir():
        return out_dir
    return file_in_the_way(out_dir)


def _file_in_place_error(out_dir: Path, blocking: Path) -> str:
    """The point's one-line error for a file where its folder goes (:func:`_file_in_place`)."""
    where = "" if blocking == out_dir else f" (making {out_dir})"
    return (f"out_dir: {blocking} is a file, not a folder{where}, so this point cannot keep a record; move the "
            "file away or give the point another folder")


def _resume(cfg: Mapping[str, Any], out_dir: Path) -> tuple[record_stage.Result | None, list | None]:
    """With ``resume=true``: return ``(existing record marked resumed, None)`` when it is valid
    and was made with the same config; otherwise keep it aside (:func:`keep_previous`) and
    return ``(None, previous)``, ``previous`` being the new record's ``previous`` field (the point
    re-runs), whose last entry says why in ``why`` (:data:`SET_ASIDE`: ``not valid``, or ``other
    config`` for a valid record of another config; ``gemmlab-tune sweep`` counts by it). Without
    ``resume=true``: ``(None, None)``, nothing touched."""
    current = _resuming(cfg)
    if current is None:
        return None, None
    path = out_dir / "result.json"
    try:
        old = None if not_a_regular_file(path) else json.loads(path.read_text())  # a fifo would block
    except (OSError, ValueError):
        old = None
    if not isinstance(old, dict):
        old = {}
    same_config = isinstance(old.get("config"), dict) and _comparable(old["config"]) == _comparable(current)
    valid = bool(old.get("valid")) and old.get("status") in record_stage.VALID_STATUSES
    if valid and same_config:  # adopted by an earlier resume or not, it is this folder's record now
        return record_stage.Result.of(old).resumed(), None
    earlier = old.get("previous") if isinstance(old.get("previous"), list) else []
    kept = [*earlier, {**keep_previous(out_dir), "why": SET_ASIDE[valid]}]
    adopted = _adopt_matching(out_dir, _comparable(current), kept)  # the sweep's points were reordered:
    return (adopted, None) if adopted is not None else (None, kept)  # the same config measured elsewhere


#: why :func:`_resume` set a point's record aside (the ``why`` of its ``previous`` entry), by its validity
SET_ASIDE = MappingProxyType({False: "not valid", True: "other config"})


def _resuming(cfg: Mapping[str, Any]) -> dict | None:
    """The plain config when it asks for ``resume=true``; None otherwise (or when it does not resolve)."""
    try:
        current = _plain(cfg)
    except Exception:
        return None
    return current if isinstance(current, dict) and current.get("resume") is True else None


def _resume_elsewhere(cfg: Mapping[str, Any], out_dir: Path) -> record_stage.Result | None:
    """With ``resume=true``, for a point folder without a record: the same config's valid record
    from another folder of the sweep (:func:`_matching_sibling`), copied in (:func:`_adopt`); else None."""
    current = _resuming(cfg)
    if current is None:
        return None
    return _adopt_matching(out_dir, _comparable(current), [])


def _comparable(config: dict) -> dict:
    """A record's config as :func:`_resume` compares it: without the settings that cannot change a
    measurement (resume, cache, isolation), with the layout records from before layouts lacked."""
    out = {"fp8": FP8_DEFAULTS, "grouped": GROUPED_DEFAULTS, "epilogue": EPILOGUE_DEFAULTS, "batch": BATCH_DEFAULTS,
           **{k: v for k, v in config.items() if k not in ("resume", "cache", "isolation")}}
    out["layout"] = {**LAYOUT_DEFAULTS, **(out.get("layout") or {})}
    if isinstance(out.get("timing"), dict):  # timing.shared came later: records before it refused nothing
        out["timing"] = {"shared": "refuse", **out["timing"]}
    if isinstance(out.get("verify"), dict):  # where the after-timing check runs changes no figure
        out["verify"] = {k: v for k, v in out["verify"].items() if k != "after_timing"}
    return out


def _matching_sibling(out_dir: Path, wanted: dict) -> Path | None:
    """In a sweep folder (Hydra's ``multirun.yaml`` beside the point folders), a valid record of
    another point folder — current (``result.json``) or moved aside (``result.previous-*.json``) —
    or one set aside in ``out_dir`` itself (a resume interrupted after it moved the record),
    made with the config ``wanted`` (compared as :func:`_resume` does, in the JSON form a record
    keeps); None elsewhere.

    Each point of a resumed sweep that has no valid record of its own looks through every other
    folder: a sweep of N points read N records N times (quadratic: 250,000 JSON reads for 500
    points left of 1,000). Each record file is read once a process (:func:`_valid_config_key`,
    keyed by its path, inode, mtime and size: a record is written once and never rewritten in
    place), so a later look costs a ``stat`` per file."""
    sweep = sweep_root(out_dir)
    if sweep is None:
        return None
    key = _config_key(wanted)
    own = str(out_dir.relative_to(sweep))
    # its own folder first (records an interrupted resume set aside there), then every point folder
    # of the sweep, also those a hydra.sweep.subdir of several levels puts deeper (a/b/${hydra.job.num})
    folders = [own] + sorted(f for f in _point_folders(sweep) if f != own)
    for folder in folders:
        try:
            names = sorted(n for n in os.listdir(sweep / folder) if n.startswith("result") and n.endswith(".json"))
        except OSError:
            continue
        for name in names:  # result.json, result.previous-<tag>.json
            if folder == own and name == "result.json":
                continue
            path = os.path.join(sweep, folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if _valid_config_key(path, st.st_ino, st.st_mtime_ns, st.st_size) == key:
                return Path(path)
    return None


#: levels above a point folder searched for its sweep's multirun.yaml (hydra.sweep.subdir a/b/c/N)
SWEEP_DEPTH = 8


def sweep_root(out_dir: Path) -> Path | None:
    """The sweep folder ``out_dir`` is a point of: the nearest folder above it, at most
    :data:`SWEEP_DEPTH` levels up, that holds Hydra's ``multirun.yaml``; None for a single run."""
    for level, folder in enumerate(out_dir.parents):
        if level >= SWEEP_DEPTH:
            break
        if (folder / "multirun.yaml").exists():
            return folder
    return None


def _point_folders(sweep: Path) -> list[str]:
    """Every folder below ``sweep`` (relative paths) holding a ``result*.json``; the sanitizer's
    child folders and hidden ones (``.hydra``) are not walked into."""
    found = []
    for folder, dirs, files in os.walk(sweep):
        dirs[:] = [d for d in dirs if not d.startswith((".", "sanitizer-"))]
        if folder != str(sweep) and any(n.startswith("result") and n.endswith(".json") for n in files):
            found.append(os.path.relpath(folder, sweep))
    return found


def _config_key(comparable: dict) -> str:
    """A config as :func:`_comparable` leaves it, in the canonical JSON a record holds, hashed."""
    return hashlib.sha256(json.dumps(comparable, sort_keys=True, default=str).encode()).hexdigest()


def resume_key(cfg: Mapping[str, Any]) -> str | None:
    """The key ``resume=true`` matches a point's records by: ``cfg`` resolved as :func:`run_point`
    records it, without the settings that cannot change a measurement (:func:`_comparable`),
    hashed; None when it does not resolve. Equal to :func:`valid_record_key` of a valid record
    this config made (``gemmlab-tune sweep`` finds records copied into its folder by it)."""
    try:
        plain = _plain(cfg)
    except Exception:
        return None
    return _config_key(_comparable(plain)) if isinstance(plain, dict) else None


def valid_record_key(rec: Any) -> str | None:
    """:func:`resume_key` of the config a parsed record was made with, when the record is valid
    (``resume=true`` keeps it); None otherwise."""
    conf = rec.get("config") if isinstance(rec, dict) else None
    if isinstance(conf, dict) and rec.get("valid") and rec.get("status") in record_stage.VALID_STATUSES:
        return _config_key(_comparable(conf))
    return None


@lru_cache(maxsize=None)
def _valid_config_key(path: str, inode: int, mtime_ns: int, size: int) -> str | None:
    """:func:`valid_record_key` of the record at ``path``: read once per file version (the other
    arguments tell a new file at the same path; :func:`_matching_sibling`)."""
    try:
        rec = None if not_a_regular_file(path) else json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return valid_record_key(rec)


#: searches :func:`_adopt_matching` makes for a record that changed as it was copied
ADOPT_TRIES = 4


class _SourceChanged(Exception):
    """The record :func:`_adopt` was to copy is gone or holds another config now (a point of the
    same sweep running alongside set it aside or adopted another record in its place)."""


def _adopt_matching(out_dir: Path, wanted: dict, kept: list) -> record_stage.Result | None:
    """With ``resume=true``: copy the sweep's valid record of the config ``wanted`` (as
    :func:`_comparable` leaves it) from another folder into ``out_dir`` (:func:`_matching_sibling`,
    :func:`_adopt`) and return it; None when there is none (the point runs).

    Points of a sweep run at once (``hydra/launcher=joblib``) move and adopt records in each
    other's folders: the record found may be set aside, or replaced by another config's, before it
    is copied (a swapped sweep then listed one point twice and dropped the other, or the point
    failed without a record). So what is copied is checked to be the config found, and the search
    is made again (up to :data:`ADOPT_TRIES` times; the record set aside is found under its new
    name); after that the point runs."""
    key = _config_key(wanted)
    for _ in range(ADOPT_TRIES):
        found = _matching_sibling(out_dir, wanted)
        if found is None:
            return None
        try:
            return _adopt(found, out_dir, kept, key)
        except _SourceChanged:
            _valid_config_key.cache_clear()  # what was read of that folder is stale
    return None


def _adopt(path: Path, out_dir: Path, kept: list, key: str | None = None) -> record_stage.Result:
    """Copy the record at ``path`` (and its artifacts: the same ``previous-<tag>`` or none) into
    ``out_dir`` as its ``result.json``, marked ``resumed`` with ``resumed_from`` (the source, relative
    to the sweep folder) and this folder's moved-aside records under ``previous``; nothing is moved
    or deleted at the source.

    Raises:
        _SourceChanged: the record is gone, is no longer valid or of the config ``key``
            (:func:`_config_key`), or changed while its artifacts were copied; the artifacts copied
            are removed again and nothing is written.
    """
    try:
        before = os.stat(path)
        rec = json.loads(path.read_text())
    except FileNotFoundError:
        raise _SourceChanged(path) from None
    except ValueError:  # a record being written: read again
        raise _SourceChanged(path) from None
    if key is not None and valid_record_key(rec) != key:  # gone invalid, or another config's now
        raise _SourceChanged(path)
    tag = path.name[len("result"):-len(".json")]  # "" or ".previous-<...>" (keep_previous's names)
    copied: list[Path] = []
    try:
        for item in sorted(path.parent.iterdir()):
            if tag and tag not in item.name or not tag and ".previous-" in item.name:
                continue  # another record's files
            name = item.name.replace(tag, "", 1) if tag else item.name  # its name beside a current record
            if record_stage.is_artifact(name) and not (out_dir / name).exists():
                (shutil.copytree if item.is_dir() else shutil.copy2)(item, out_dir / name)
                copied.append(out_dir / name)
        after = os.stat(path)
        if (after.st_ino, after.st_mtime_ns, after.st_size) != (before.st_ino, before.st_mtime_ns, before.st_size):
            raise _SourceChanged(path)  # the artifacts may be another record's
    except (FileNotFoundError, _SourceChanged):
        for item in copied:
            shutil.rmtree(item, ignore_errors=True) if item.is_dir() else item.unlink(missing_ok=True)
        raise _SourceChanged(path) from None
    # as everywhere: no "previous" key when nothing was set aside here
    rec = record_stage.Result.of(rec).resumed(str(path.relative_to(sweep_root(out_dir) or out_dir.parent)), kept)
    record_stage.write_record(rec, out_dir)
    return rec


def previous_tag(folder: Path) -> str:
    """The tag of files an earlier run left in ``folder`` when they are moved aside (``previous-<time>-<pid>``,
    plus a random suffix when this process already used it there in the same second)."""
    tag = f"previous-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    if any(folder.glob(f"*.{tag}*")):  # a second move in the same second by this process
        tag += f"-{secrets.token_hex(3)}"
    return tag


def previous_tag_pattern(pid: int | None = None) -> str:
    """A regular expression of the tags :func:`previous_tag` makes (in process ``pid``; None: any)."""
    who = r"\d+" if pid is None else str(pid)
    return rf"previous-\d{{8}}T\d{{6}}-{who}(?:-[0-9a-f]{{6}})?"


def keep_previous(out_dir: Path) -> dict:
    """Move the point's ``result.json`` and every artifact of it (:data:`gemmlab.stages.record.ARTIFACTS`:
    ``compile*.log``, ``kernel*.sass``, ``traceback.txt``, ``sanitizer-*``) aside under one tag
    ``previous-<time>-<pid>``: ``result.json`` -> ``result.previous-<...>.json``, ``kernel.sass``
    -> ``kernel.previous-<...>.sass``, ``sanitizer-racecheck/`` -> ``sanitizer-racecheck.previous-<...>/``.
    Nothing is deleted or overwritten; Hydra's own files stay (the earlier command's ``.hydra/`` was
    moved aside before Hydra wrote the new one: :class:`gemmlab.cli.sweep.KeepEarlierHydraFiles`).

    Returns:
        ``{"record": name, "artifacts": {old name: new name}}`` (names relative to ``out_dir``),
        one entry of the re-run record's ``previous`` field.
    """
    tag = previous_tag(out_dir)
    moved: dict[str, str] = {}
    for item in sorted(out_dir.iterdir()):
        name = item.name
        if name == "result.json" or ".previous-" in name or not record_stage.is_artifact(name):
            continue
        stem, dot, ext = name.partition(".") if not item.is_dir() else (name, "", "")
        new = f"{stem}.{tag}{dot}{ext}"
        os.replace(item, out_dir / new)
        moved[name] = new
    record_name = f"result.{tag}.json"
    os.replace(out_dir / "result.json", out_dir / record_name)
    return {"record": record_name, "artifacts": moved}


def previous_kept_by(out_dir: Path, pid: int | None = None) -> list | None:
    """The ``previous`` field for a point whose worker (process ``pid``; None: any process) set
    the earlier record aside (``resume=true``, :func:`keep_previous`) and was then lost (a crash,
    the watchdog, Ctrl-C) before writing the new record: the entry of the newest
    ``result.previous-<time>-<pid>[-<hex>].json`` that process made in ``out_dir`` (the files of
    its tag as artifacts), after the earlier entries that record lists. None when nothing was
    set aside there."""
    pattern = re.compile(rf"result\.({previous_tag_pattern(pid)})\.json")
    try:
        tags = sorted(m.group(1) for m in map(pattern.fullmatch, os.listdir(out_dir)) if m)
        if not tags:
            return None
        tag = tags[-1]
        moved = {name.replace(f".{tag}", "", 1): name for name in sorted(os.listdir(out_dir))
                 if f".{tag}" in name and name != f"result.{tag}.json"}
        old = json.loads((out_dir / f"result.{tag}.json").read_text())
    except (OSError, ValueError):
        return None
    earlier = old.get("previous") if isinstance(old, dict) and isinstance(old.get("previous"), list) else []
    return [*earlier, {"record": f"result.{tag}.json", "artifacts": moved}]


def clear_cache() -> None:
    """Forget the configs of sweep records read for ``resume`` (:func:`_matching_sibling`). For tests
    and long-lived processes (:func:`gemmlab.clear_caches`, through :func:`gemmlab.run.pipeline.clear_cache`)."""
    _valid_config_key.cache_clear()


#: a record written this long (ns) before the job's start still counts as the job's (file
#: times come from the kernel's coarse clock, a tick behind)
CLOCK_SLACK_NS = 50_000_000


def point_outcome(out_dir: Path | None, started_ns: int) -> str:
    """What a point left in its folder ``out_dir`` by a job started at ``started_ns`` (``time.time_ns``):
    ``done`` (a valid record), ``failed (<status>)``, ``skipped (kept its earlier record)`` where the
    folder's record was not written by this job (resume=true, or a refusal), ``no record``."""
    from gemmlab.stages.record_model import read_record
    path = out_dir / "result.json" if out_dir is not None else None
    try:
        fresh = path.stat().st_mtime_ns >= started_ns - CLOCK_SLACK_NS
    except (OSError, AttributeError):
        return "no record"
    if not fresh:
        return "skipped (kept its earlier record)"
    record = read_record(path)
    if isinstance(record.raw, dict) and record.raw.get("resumed") is True:
        return "skipped (resume=true)"
    return "done" if record.is_valid else f"failed ({record.status})"


def sweep_resume_advice(sweep_dir: Path | str) -> str:
    """The line after Ctrl-C (or SIGTERM) in a sweep whose folder is ``sweep_dir`` (quoted for the
    shell and Hydra's override grammar where it holds a space or other special character)."""
    import shlex
    value = str(sweep_dir)
    if shlex.quote(value) != value:
        plain = not any(c in value for c in "'\"$`\\!")  # then "hydra.sweep.dir='<value>'" reads as typed
        value = f"\"hydra.sweep.dir='{value}'\"" if plain else shlex.quote(f"hydra.sweep.dir='{value}'")
        return (f"finished points keep their result.json; to finish the sweep, re-run the same command with "
                f"{value} resume=true")
    return (f"finished points keep their result.json; to finish the sweep, re-run the same command with "
            f"hydra.sweep.dir={value} resume=true")


def interrupted_sweep_line(folder: Path | str, write_summary: Callable[[Path], list]) -> str:
    """The line after an interrupt in the sweep whose folder is ``folder``: the resume line
    (:func:`sweep_resume_advice`) with the summary of the points so far, written now by
    ``write_summary(folder) -> rows`` (:func:`_summary_of_interrupted`), or, when no point had
    finished, that nothing was measured (no resume to advise)."""
    folder = Path(folder)
    if not folder.is_dir() or next(folder.rglob("result.json"), None) is None:  # e.g. while the sweeper composed
        where = "holds no record" if folder.is_dir() else "was not made"   # its points (a long sweep takes seconds)
        return f"no point of the sweep had finished, so nothing was measured (its folder {folder} {where})"
    return sweep_resume_advice(folder) + _summary_of_interrupted(folder, write_summary)


def _summary_of_interrupted(folder: Path, write_summary: Callable[[Path], list]) -> str:
    """Write the summary of an interrupted sweep's finished points (``write_summary``: Hydra's
    end-of-sweep callback that writes it never runs after Ctrl-C) and say where, as the
    tail of the interrupt's line; '' when no point finished or it cannot be written."""
    try:
        rows = write_summary(folder) if next(folder.rglob("result.json"), None) is not None else []
    except (OSError, ValueError):
        return ""
    return f"; the summary of the {len(rows)} points so far: {folder / 'summary.md'}" if rows else ""


def refuse_point(config: Mapping[str, Any], out_dir: Path, error: ConfigError) -> None:
    """Leave an invalid record of ``config`` saying ``error`` in ``out_dir``, as for any refused input
    (a folder that already holds a record keeps it)."""
    if not (out_dir / "result.json").exists():
        record = record_stage.new_record(dict(config))
        record.fail(ConfigError.status, str(error))
        record_stage.write_record(record, out_dir)


def resumed_line(record: Mapping[str, Any], out_dir: Path) -> str:
    """The line for a point ``resume=true`` kept (its own valid record, or the same point's adopted
    from another folder of the sweep)."""
    source = (f"took the same point's valid result from {record['resumed_from']}" if record.get("resumed_from")
              else "it already holds a valid result")
    return f"{out_dir}: skipped, {source} (resume=true)"


def append_log(path: Path, text: str) -> None:
    """Append ``text`` (one or more lines) to the point's log ``path`` (the folder's console lines);
    a folder that does not exist is never made for it, and a log that cannot be written costs nothing."""
    try:
        if not path.parent.is_dir():
            return
        with open(path, "a", encoding="utf-8") as log:
            log.write(text.rstrip("\n") + "\n")
    except OSError:
        pass


def interrupted_run_line(out: Path | None) -> str:
    """The line after an interrupt in a single run whose folder is ``out`` (None: its point had not
    started): its record, written before the interrupt, or that none was kept."""
    if out is not None and (out / "result.json").is_file():  # a run's folder never holds an earlier one (folders.py)
        return f"the run's record was written before the interrupt: {out / 'result.json'}"
    if out is not None:
        return f"the run's folder {out} holds no result for it"
    return "the run stopped before its point started; nothing was measured"


#: the line after an interrupt in a sweep whose folder is not known
RESUME_UNKNOWN_FOLDER = ("finished points keep their result.json; to finish a sweep, re-run the same command with "
                         "hydra.sweep.dir=DIR resume=true, DIR being the sweep's folder (under outputs/multirun/ by default)")
