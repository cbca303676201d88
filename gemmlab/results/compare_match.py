"""Matching of ``gemmlab-compare``: records reduced to points, points paired, pairs judged.

This module owns the match key and the pair verdicts. A point is one record read through
:mod:`gemmlab.stages.record_model` (the one record model); its key holds every field that changes a
measurement: kernel name and parameters, shape (M, N, K), device (name and arch), the primary
timing protocol, and :func:`gemmlab.stages.record_model.measurement_settings` (precision, A/B layout, L2
mode, timing batch, input distribution, compile target; an older record without a field stands
for that field's old default). Records inside another run's directory (a sanitizer child) are
not points. The statistics are :mod:`gemmlab.results.compare_stats`.
"""

from __future__ import annotations

import json
import math
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from gemmlab.results.compare_stats import FAST, SAME, SLOW, UNSURE, beyond_threshold, bootstrap_ratio, verdict
from gemmlab.errors import GemmlabError
from gemmlab.stages.record_model import SCHEMA, Record, find_records, is_collection, path_problem, read_record

MIN_SAMPLES = 3
MIN_RESAMPLES = 100
FAILED, INVALID, UNTIMED = "FAILED", "INVALID", "UNTIMED"
ONLY_BEFORE, ONLY_AFTER = "only in BEFORE", "only in AFTER"
VERDICTS = (SLOW, FAILED, FAST, SAME, UNSURE, INVALID, UNTIMED, ONLY_BEFORE, ONLY_AFTER)
SETTINGS = ("precision", "layout", "l2", "batch", "inputs", "target")


class CompareError(GemmlabError):
    """Bad input to the comparison (missing path, unreadable record, bad option): one line."""


@dataclass
class Point:
    """One record reduced to what the comparison needs (``samples`` in ms per launch; a
    non-finite recorded sample is NaN)."""

    path: Path
    kernel: str
    params: dict
    shape: tuple | None
    device: str | None
    arch: str | None
    protocol: str | None
    status: str
    valid: bool
    error: str | None
    samples: np.ndarray | None
    created: str = ""
    duplicates: int = 1
    settings: dict = field(default_factory=dict)

    @property
    def key4(self) -> tuple:
        """(kernel, params, shape, device, arch): the point without its protocol."""
        return (self.kernel, json.dumps(self.params, sort_keys=True, default=str), self.shape,
                self.device, self.arch)

    @property
    def settings_key(self) -> tuple:
        """The measurement settings as ``(name, value)`` pairs, in :data:`SETTINGS` order."""
        return tuple((k, self.settings.get(k)) for k in SETTINGS)

    @property
    def key(self) -> tuple:
        """The match key: :attr:`key4`, the timing protocol and :attr:`settings_key`."""
        return self.key4 + (self.protocol,) + self.settings_key

    @property
    def timed(self) -> bool:
        """Valid and carries timing samples."""
        return self.valid and self.samples is not None

    @property
    def median_ms(self) -> float | None:
        """Median of the samples (None when untimed or empty)."""
        if self.samples is None or self.samples.size == 0:
            return None
        return float(np.median(self.samples))


def point_from_record(rec: Record, path: Path | None = None) -> Point:
    """Reduce one record view (:func:`gemmlab.stages.record_model.read_record`) to a :class:`Point`.

    Raises:
        CompareError: the recorded samples are not numbers.
    """
    if rec.samples_not_numbers:
        raise CompareError(f"{rec.path}: a record has a field of an unexpected type ({rec.samples_not_numbers})")
    samples = None
    if rec.samples_recorded is not None:
        samples = np.asarray(rec.samples_ms + [float("nan")] * rec.nonfinite_samples, dtype=np.float64)
    return Point(path=Path(path or rec.path), kernel=rec.kernel or "?", params=dict(rec.params), shape=rec.shape,
                 device=rec.device, arch=rec.arch, protocol=rec.protocol, status=rec.status, valid=rec.is_valid,
                 error=rec.error, samples=samples, created=rec.created, settings=dict(rec.settings))


def _record_files(path: Path) -> list[Path]:
    problem = path_problem(path)
    if problem:
        raise CompareError(f"{path}: {problem}")
    files = find_records([path], children=False)
    if not files:
        raise CompareError(f"{path}: no result.json under it")
    return files


def load_points(paths: Path | str | Iterable[Path | str], skipped: list[Record] | None = None) -> list[Point]:
    """Every record under ``paths`` (directories searched recursively for ``result.json``,
    sanitizer children left out), one :class:`Point` per distinct key: of several records with
    one key, the newest (``created_utc``, then path order) is kept and its ``duplicates`` counts
    them all. A ``result.json`` found in a directory that is no gemmlab record at all (``{}``,
    another tool's JSON; :func:`gemmlab.stages.record_model.not_a_record`) is no point: it is appended to
    ``skipped`` (when given) for the caller's notice; so is, with ``skipped`` given, one that is not
    readable JSON (category ``unreadable``: a damaged file; the caller's gate fails for it, as
    ``gemmlab-report`` lists it) — its siblings are still compared.

    Raises:
        CompareError: a path is missing, holds no ``result.json`` (none that is a gemmlab
            record), or a record is not readable JSON of schema ``gemmlab.result/1`` (a file
            named directly must be one).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    newest: dict[tuple, Point] = {}
    counts: Counter = Counter()
    for root in paths:
        found = 0
        many = is_collection(root)  # a folder, an archive or a folder inside one
        for f in _record_files(Path(root)):
            rec = read_record(f)
            if rec.foreign is not None and many:
                if skipped is not None:
                    skipped.append(rec)
                continue
            if rec.category == "unreadable" and skipped is not None and many:
                skipped.append(rec)
                continue
            found += 1
            if rec.category == "unreadable":
                raise CompareError(f"{f}: not a readable JSON record ({rec.error})")
            if rec.schema != SCHEMA:
                got = rec.raw.get("schema") if isinstance(rec.raw, dict) else None
                raise CompareError(f"{f}: schema {got!r}, expected {SCHEMA!r}")
            p = point_from_record(rec, f)
            counts[p.key] += 1
            old = newest.get(p.key)
            if old is None or p.created >= old.created:
                newest[p.key] = p
        if not found:
            passed = sum(1 for r in (skipped or []) if Path(root) in Path(r.path).parents)
            raise CompareError(f"{root}: no result.json under it that is a gemmlab record"
                               + (f" ({passed} skipped: not a record, or not readable)" if passed else ""))
    for k, p in newest.items():
        p.duplicates = counts[k]
    return list(newest.values())


@dataclass
class Pair:
    """One row of the comparison: a matched pair, or a point found on one side only.
    ``allow_missing``: a point valid in BEFORE and missing from AFTER is not a regression."""

    before: Point | None
    after: Point | None
    verdict: str
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    beyond_threshold: bool = False
    notes: list[str] = field(default_factory=list)
    allow_missing: bool = False

    @property
    def point(self) -> Point:
        """The BEFORE point when there is one, else the AFTER point (for the key columns)."""
        return self.before if self.before is not None else self.after

    @property
    def regression(self) -> bool:
        """Counts against the exit status: SLOW beyond the threshold, FAILED, or a point that was
        valid in BEFORE and is missing from AFTER (unless :attr:`allow_missing`)."""
        return (self.verdict == FAILED or (self.verdict == SLOW and self.beyond_threshold)
                or (self.verdict == ONLY_BEFORE and self.before is not None and self.before.valid
                    and not self.allow_missing))

    @property
    def note(self) -> str:
        """The notes joined into one string."""
        return "; ".join(self.notes)


def _status(p: Point, width: int = 80) -> str:
    """Status and the error's first ``width`` characters."""
    if not p.error:
        return p.status
    err = " ".join(str(p.error).split())
    return f"{p.status} ({err if len(err) <= width else err[:width - 1] + '…'})"


def _same_point(untimed: Point, other: Point) -> bool:
    """Kernel, params, shape and measurement settings equal, and the device too unless the
    untimed record has none (a run that failed before a GPU was opened)."""
    if untimed.key4[:3] != other.key4[:3] or untimed.settings_key != other.settings_key:
        return False
    return untimed.device is None or untimed.key4[3:] == other.key4[3:]


def _samples_problem(p: Point, side: str) -> str | None:
    s = p.samples
    if s.size and not np.isfinite(s).all():
        return f"{side} has non-finite samples"
    if s.size < MIN_SAMPLES:
        return f"{side} has {s.size} sample{'s' if s.size != 1 else ''} (< {MIN_SAMPLES}): no interval"
    if float(np.median(s)) <= 0:
        return f"{side} median is not positive"
    return None


def _rng_for(p: Point, seed: int) -> np.random.Generator:
    """A generator seeded from ``seed`` and the point's kernel, params, shape, device and
    protocol: reproducible and independent of the other points in the comparison."""
    return np.random.default_rng([seed, zlib.crc32(repr(p.key4 + (p.protocol,)).encode())])


def compare_pair(before: Point, after: Point, threshold: float = 0.05, confidence: float = 0.95,
                 resamples: int = 2000, seed: int = 0) -> Pair:
    """Compare one matched pair (see :mod:`gemmlab.results.compare` for the rule)."""
    notes = []
    for side, p in (("BEFORE", before), ("AFTER", after)):
        if p.duplicates > 1:
            notes.append(f"{p.duplicates} records in {side}, newest used")
    if not before.valid:
        notes.insert(0, f"BEFORE {_status(before)}; AFTER {_status(after)}")
        return Pair(before, after, INVALID, notes=notes)
    if not after.valid:
        notes.insert(0, f"AFTER {_status(after)}")
        return Pair(before, after, FAILED, notes=notes)
    if not (before.timed and after.timed):
        untimed = [s for s, p in (("BEFORE", before), ("AFTER", after)) if not p.timed]
        notes.insert(0, f"no timing samples in {' and '.join(untimed)} (status {after.status})")
        return Pair(before, after, UNTIMED, notes=notes)
    problems = [m for m in (_samples_problem(before, "BEFORE"), _samples_problem(after, "AFTER")) if m]
    if problems:
        ratio = None
        if (before.median_ms and after.median_ms is not None and math.isfinite(before.median_ms)
                and before.median_ms > 0):
            ratio = after.median_ms / before.median_ms
        return Pair(before, after, UNSURE, ratio=ratio, notes=problems + notes)
    ratio, low, high = bootstrap_ratio(before.samples, after.samples, confidence, resamples,
                                       _rng_for(before, seed))
    return Pair(before, after, verdict(low, high, threshold), ratio, low, high,
                beyond_threshold(low, high, threshold), notes)


def _sort_key(pair: Pair) -> tuple:
    p = pair.point
    return (p.kernel, json.dumps(p.params, sort_keys=True, default=str), p.shape or (), p.device or "",
            p.arch or "", p.protocol or "", tuple(str(v) for _, v in p.settings_key), VERDICTS.index(pair.verdict))


def check_options(threshold: float, confidence: float, resamples: int, seed: int) -> None:
    """Raise :class:`CompareError` for a threshold outside [0, 1), a confidence outside (0, 1),
    fewer than :data:`MIN_RESAMPLES` resamples or a negative seed."""
    if not (isinstance(threshold, (int, float)) and math.isfinite(threshold) and 0 <= threshold < 1):
        raise CompareError(f"--threshold: {threshold} is not in [0, 1) (a relative change, 0.05 = 5%)")
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise CompareError(f"--confidence: {confidence} is not in (0, 1) (e.g. 0.95)")
    if not (isinstance(resamples, int) and resamples >= MIN_RESAMPLES):
        raise CompareError(f"--resamples: {resamples} is below {MIN_RESAMPLES} (use thousands)")
    if not (isinstance(seed, int) and seed >= 0):
        raise CompareError(f"--seed: {seed} is not a non-negative integer")


def compare(before_paths, after_paths, threshold: float = 0.05, confidence: float = 0.95,
            resamples: int = 2000, seed: int = 0, allow_missing: bool = False,
            skipped: list[Record] | None = None) -> list[Pair]:
    """Match the points under ``before_paths`` and ``after_paths`` and compare each pair.

    Matching: exact key (:attr:`Point.key`) first; then a leftover record without timing (a
    failed run has no protocol) is paired with a leftover record of the same kernel, params,
    shape, measurement settings and device (any device when the untimed record has none: it
    failed before a GPU was opened) on the other side. What remains is ``only in BEFORE`` /
    ``only in AFTER``.

    Args:
        before_paths, after_paths: a path or several (directories or ``result.json`` files).
        threshold: relative change that matters (0.05: 5 %).
        confidence: coverage of the bootstrap interval.
        resamples: bootstrap replications.
        seed: base seed of the per-point random generators.
        allow_missing: a point valid in BEFORE and missing from AFTER is not a regression.
        skipped: receives the ``result.json`` files that are no gemmlab record (see
            :func:`load_points`).

    Returns:
        One :class:`Pair` per point, sorted by kernel, params, shape, device, protocol, settings.

    Raises:
        CompareError: bad arguments or unreadable inputs (see :func:`load_points`).
    """
    check_options(threshold, confidence, resamples, seed)
    before = {p.key: p for p in load_points(before_paths, skipped)}
    after = {p.key: p for p in load_points(after_paths, skipped)}
    matched: list[tuple[Point, Point]] = []
    for k in list(before):
        if k in after:
            matched.append((before.pop(k), after.pop(k)))
    # a record without a protocol (failed before timing, or untimed) matches by the other fields
    for side, other, before_first in ((before, after, True), (after, before, False)):
        for k in [k for k, p in side.items() if p.protocol is None]:
            if k not in side:
                continue
            cands = sorted((p for p in other.values() if _same_point(side[k], p)),
                           key=lambda p: (p.created, str(p.path)))
            if cands:
                mine, theirs = side.pop(k), other.pop(cands[-1].key)
                matched.append((mine, theirs) if before_first else (theirs, mine))
    pairs = [compare_pair(b, a, threshold, confidence, resamples, seed) for b, a in matched]
    for p in before.values():
        pairs.append(Pair(p, None, ONLY_BEFORE, notes=[] if p.valid else [f"BEFORE {_status(p)}"]))
    for p in after.values():
        pairs.append(Pair(None, p, ONLY_AFTER, notes=[] if p.valid else [f"AFTER {_status(p)}"]))
    for pair in pairs:
        pair.allow_missing = allow_missing
    return sorted(pairs, key=_sort_key)


__all__ = ["CompareError", "Point", "Pair", "point_from_record", "load_points", "compare_pair", "compare",
           "check_options", "MIN_SAMPLES", "MIN_RESAMPLES", "FAST", "SAME", "SLOW", "UNSURE", "FAILED", "INVALID",
           "UNTIMED", "ONLY_BEFORE", "ONLY_AFTER", "VERDICTS", "SETTINGS"]
