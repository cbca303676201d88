"""``gemmlab-compare BEFORE AFTER``: did a change make kernels faster or slower, and is it sure?

BEFORE and AFTER are run or sweep directories (every ``result.json`` below them, recursively) or
single ``result.json`` files. Points are matched by kernel name, kernel params, shape (M, N, K),
device (name and arch) and timing protocol (the record's primary protocol, ``timing.protocol``);
the raw per-launch samples ``timing.samples_ms`` of each side are compared. A record without
timing (a run that failed before it was timed) matches its counterpart by the other fields.
Records measured with different primary protocols are not comparable and are listed unmatched.

Statistic. For a matched pair the point estimate is ``ratio = median(AFTER) / median(BEFORE)``
(> 1: AFTER is slower). Its uncertainty is a nonparametric bootstrap percentile interval
(Efron & Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993, ch. 13): each
sample set is resampled with replacement to its own size, independently, ``--resamples`` times
(numpy ``Generator``, seeded from ``--seed`` and the point's key, so a point's interval does not
depend on which other points are compared); the interval is the ``(1 - c)/2`` and ``(1 + c)/2``
quantiles of the resampled ratios of medians, ``c = --confidence``.

Verdict rule, ``[low, high]`` the interval and ``t = --threshold``:

* ``SLOW``   ``low > 1``: AFTER is significantly slower. *SLOW beyond threshold* when also
  ``low > 1 + t`` (slower by more than ``t`` with the stated confidence) -- the regression gate.
* ``FAST``   ``high < 1``: AFTER is significantly faster (*beyond threshold* when ``high < 1 - t``).
* ``SAME``   the interval contains 1 and lies within ``[1 - t, 1 + t]``: any change is smaller
  than the threshold.
* ``UNSURE`` the interval contains 1 but reaches outside ``[1 - t, 1 + t]`` (too noisy to
  decide), or a side has fewer than 3 samples (no interval is computed; the note says so).

Points that are not a timed pair get: ``FAILED`` (valid in BEFORE, failed/invalid in AFTER: a
regression), ``INVALID`` (failed/invalid in BEFORE; both statuses are shown), ``UNTIMED`` (valid
on both sides but without timing samples, e.g. ``mode=compile``), ``only in BEFORE`` / ``only in
AFTER`` (no counterpart with the same key). When a side holds several records with one key (a
rerun), the newest (``created_utc``) is used and the note says so.

Exit status: 0; 1 when any point is SLOW beyond the threshold, FAILED, or valid in BEFORE and
missing from AFTER (unless ``--allow-missing``) — usable as a regression gate; 2 for bad arguments (a missing path, no ``result.json``, an unreadable record, threshold
outside [0, 1), confidence outside (0, 1), fewer than 100 resamples, a negative seed), as one
line ``gemmlab-compare: error: ...`` on stderr.

Public API: :func:`bootstrap_ratio`, :func:`verdict`, :func:`beyond_threshold`,
:func:`load_points`, :func:`compare`, :func:`summary`, :func:`markdown`, :func:`main`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from gemmlab.errors import GemmlabError
from gemmlab.record import VALID_STATUSES

SCHEMA = "gemmlab.result/1"
PROG = "gemmlab-compare"
MIN_SAMPLES = 3
MIN_RESAMPLES = 100

FAST, SAME, SLOW, UNSURE = "FAST", "SAME", "SLOW", "UNSURE"
FAILED, INVALID, UNTIMED = "FAILED", "INVALID", "UNTIMED"
ONLY_BEFORE, ONLY_AFTER = "only in BEFORE", "only in AFTER"
ALLOW_MISSING = [False]  # set by --allow-missing
VERDICTS = (SLOW, FAILED, FAST, SAME, UNSURE, INVALID, UNTIMED, ONLY_BEFORE, ONLY_AFTER)

COLUMNS = ("kernel", "params", "shape", "device", "protocol", "before median ms", "after median ms",
           "ratio", "CI low", "CI high", "verdict", "note")


class CompareError(GemmlabError):
    """Bad input to the comparison (missing path, unreadable record, bad option): one line."""


# --- statistics ----------------------------------------------------------------------------------

def _bootstrap_medians(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` resamples of ``x`` with replacement (in chunks of bounded size)."""
    n = x.size
    out = np.empty(resamples)
    chunk = max(1, 2_000_000 // n)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = np.median(x[idx], axis=1)
    return out


def bootstrap_ratio(before: Sequence[float], after: Sequence[float], confidence: float = 0.95,
                    resamples: int = 2000, rng: np.random.Generator | int | None = None
                    ) -> tuple[float, float, float]:
    """Ratio of medians ``median(after) / median(before)`` and its bootstrap percentile interval.

    Each sample set is resampled with replacement to its own size, independently, ``resamples``
    times; the interval is the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of
    the resampled ratios (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13:
    the percentile interval).

    Args:
        before, after: positive samples (e.g. milliseconds per launch); at least one each.
        confidence: two-sided coverage, in (0, 1).
        resamples: bootstrap replications (>= 1; use thousands).
        rng: a ``numpy.random.Generator``, or a seed for ``numpy.random.default_rng``.

    Returns:
        ``(ratio, low, high)``.

    Raises:
        ValueError: empty or non-finite samples, a non-positive median, bad confidence/resamples.
    """
    b = np.asarray(before, dtype=np.float64).ravel()
    a = np.asarray(after, dtype=np.float64).ravel()
    if b.size == 0 or a.size == 0:
        raise ValueError("bootstrap_ratio needs at least one sample on each side")
    if not (np.isfinite(b).all() and np.isfinite(a).all()):
        raise ValueError("bootstrap_ratio: samples must be finite")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if int(resamples) < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    med_b = float(np.median(b))
    if med_b <= 0:
        raise ValueError(f"median of BEFORE samples is {med_b}, must be positive")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    boot_b = _bootstrap_medians(b, int(resamples), rng)
    boot_a = _bootstrap_medians(a, int(resamples), rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = boot_a / boot_b
    alpha = 1.0 - confidence
    low, high = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    return float(np.median(a)) / med_b, float(low), float(high)


def verdict(low: float, high: float, threshold: float) -> str:
    """Verdict for a ratio interval ``[low, high]`` (AFTER / BEFORE) and a relative threshold.

    ``SLOW`` if ``low > 1``; ``FAST`` if ``high < 1``; ``SAME`` if ``1 - threshold <= low`` and
    ``high <= 1 + threshold`` (the interval contains 1 and any change is within the threshold);
    ``UNSURE`` otherwise (contains 1, but too wide to rule out a change beyond the threshold).
    """
    if low > 1.0:
        return SLOW
    if high < 1.0:
        return FAST
    if 1.0 - threshold <= low and high <= 1.0 + threshold:
        return SAME
    return UNSURE


def beyond_threshold(low: float, high: float, threshold: float) -> bool:
    """True when the whole interval lies beyond the threshold: ``low > 1 + threshold`` (SLOW
    beyond threshold: the regression gate) or ``high < 1 - threshold`` (FAST beyond threshold)."""
    return low > 1.0 + threshold or high < 1.0 - threshold


# --- records -------------------------------------------------------------------------------------

@dataclass
class Point:
    """One record reduced to what the comparison needs."""

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

    @property
    def key4(self) -> tuple:
        """(kernel, params, shape, device, arch): the point without its protocol."""
        return (self.kernel, json.dumps(self.params, sort_keys=True, default=str), self.shape,
                self.device, self.arch)

    @property
    def key(self) -> tuple:
        """The match key: :attr:`key4` plus the timing protocol."""
        return self.key4 + (self.protocol,)

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


def _shape(record: dict) -> tuple | None:
    s = record.get("shape")
    if isinstance(s, dict) and all(k in s for k in "MNK"):
        return (int(s["M"]), int(s["N"]), int(s["K"]))
    s = (record.get("config") or {}).get("shape")
    if isinstance(s, (list, tuple)) and len(s) == 3:
        try:
            return tuple(int(v) for v in s)
        except (TypeError, ValueError):
            return tuple(s)
    return None


def point_from_record(record: dict, path: Path) -> Point:
    """Reduce one ``gemmlab.result/1`` record to a :class:`Point`.

    Records whose config never validated lack ``kernel``; the configured kernel name and
    overrides stand in so that the failure can still be matched and listed.
    """
    kernel = record.get("kernel")
    if isinstance(kernel, dict) and kernel.get("name"):
        name, params = str(kernel["name"]), dict(kernel.get("params") or {})
    else:
        ck = (record.get("config") or {}).get("kernel") or {}
        ck = ck if isinstance(ck, dict) else {"name": ck}
        name = str(ck.get("name", "?"))
        params = {k: v for k, v in ck.items() if k != "name"}
    device = record.get("device") if isinstance(record.get("device"), dict) else {}
    status = str(record.get("status", "?"))
    valid = bool(record.get("valid")) and status in VALID_STATUSES
    timing = record.get("timing") if isinstance(record.get("timing"), dict) else None
    protocol, samples = None, None
    if timing is not None:
        protocol = timing.get("protocol")
        raw = timing.get("samples_ms")
        if raw is None and protocol and isinstance(timing.get("protocols"), dict):
            raw = (timing["protocols"].get(protocol) or {}).get("samples_ms")
        if raw is not None:
            samples = np.asarray([float("nan") if v is None else v for v in raw], dtype=np.float64)
    return Point(path=path, kernel=name, params=params, shape=_shape(record),
                 device=device.get("name"), arch=device.get("arch"), protocol=protocol,
                 status=status, valid=valid, error=record.get("error"), samples=samples,
                 created=str(record.get("created_utc") or ""))


def _record_files(path: Path) -> list[Path]:
    if not path.exists():
        raise CompareError(f"{path}: no such file or directory")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("result.json") if p.is_file())
    if not files:
        raise CompareError(f"{path}: no result.json under it")
    return files


def load_points(paths: Path | str | Iterable[Path | str]) -> list[Point]:
    """Every record under ``paths`` (directories searched recursively for ``result.json``), one
    :class:`Point` per distinct key: of several records with one key, the newest
    (``created_utc``, then path order) is kept and its ``duplicates`` counts them all.

    Raises:
        CompareError: a path is missing, holds no ``result.json``, or a record is not readable
            JSON of schema ``gemmlab.result/1``.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    newest: dict[tuple, Point] = {}
    counts: Counter = Counter()
    for root in paths:
        for f in _record_files(Path(root)):
            try:
                record = json.loads(f.read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise CompareError(f"{f}: not a readable JSON record ({type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
            if not isinstance(record, dict) or record.get("schema") != SCHEMA:
                got = record.get("schema") if isinstance(record, dict) else type(record).__name__
                raise CompareError(f"{f}: schema {got!r}, expected {SCHEMA!r}")
            p = point_from_record(record, f)
            counts[p.key] += 1
            old = newest.get(p.key)
            if old is None or p.created >= old.created:
                newest[p.key] = p
    for k, p in newest.items():
        p.duplicates = counts[k]
    return list(newest.values())


# --- comparison ----------------------------------------------------------------------------------

@dataclass
class Pair:
    """One row of the comparison: a matched pair, or a point found on one side only."""

    before: Point | None
    after: Point | None
    verdict: str
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    beyond_threshold: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def point(self) -> Point:
        """The BEFORE point when there is one, else the AFTER point (for the key columns)."""
        return self.before if self.before is not None else self.after

    @property
    def regression(self) -> bool:
        """Counts against the exit status: SLOW beyond the threshold, FAILED, or a point that was
        valid in BEFORE and is missing from AFTER (unless ``--allow-missing``)."""
        return self.verdict == FAILED or (self.verdict == SLOW and self.beyond_threshold) or \
            (self.verdict == ONLY_BEFORE and self.before is not None and self.before.valid and not ALLOW_MISSING[0])

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
    """Kernel, params and shape equal, and the device too unless the untimed record has none
    (a run that failed before a GPU was opened)."""
    if untimed.key4[:3] != other.key4[:3]:
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
    """A generator seeded from ``seed`` and the point's key: reproducible and independent of the
    other points in the comparison."""
    return np.random.default_rng([seed, zlib.crc32(repr(p.key).encode())])


def compare_pair(before: Point, after: Point, threshold: float = 0.05, confidence: float = 0.95,
                 resamples: int = 2000, seed: int = 0) -> Pair:
    """Compare one matched pair (see the module docstring for the rule)."""
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
        if before.median_ms and after.median_ms is not None and math.isfinite(before.median_ms) \
                and before.median_ms > 0:
            ratio = after.median_ms / before.median_ms
        return Pair(before, after, UNSURE, ratio=ratio, notes=problems + notes)
    ratio, low, high = bootstrap_ratio(before.samples, after.samples, confidence, resamples,
                                       _rng_for(before, seed))
    return Pair(before, after, verdict(low, high, threshold), ratio, low, high,
                beyond_threshold(low, high, threshold), notes)


def _sort_key(pair: Pair) -> tuple:
    p = pair.point
    return (p.kernel, json.dumps(p.params, sort_keys=True, default=str), p.shape or (), p.device or "",
            p.arch or "", p.protocol or "", VERDICTS.index(pair.verdict))


def compare(before_paths, after_paths, threshold: float = 0.05, confidence: float = 0.95,
            resamples: int = 2000, seed: int = 0) -> list[Pair]:
    """Match the points under ``before_paths`` and ``after_paths`` and compare each pair.

    Matching: exact key (kernel, params, shape, device name and arch, protocol) first; then a
    leftover record without timing (a failed run has no protocol) is paired with a leftover
    record of the same kernel, params, shape and device (any device when the untimed record has
    none: it failed before a GPU was opened) on the other side. What remains is
    ``only in BEFORE`` / ``only in AFTER``.

    Args:
        before_paths, after_paths: a path or several (directories or ``result.json`` files).
        threshold: relative change that matters (0.05: 5 %).
        confidence: coverage of the bootstrap interval.
        resamples: bootstrap replications.
        seed: base seed of the per-point random generators.

    Returns:
        One :class:`Pair` per point, sorted by kernel, params, shape, device, protocol.

    Raises:
        CompareError: bad arguments or unreadable inputs (see :func:`load_points`).
    """
    _check_options(threshold, confidence, resamples, seed)
    before = {p.key: p for p in load_points(before_paths)}
    after = {p.key: p for p in load_points(after_paths)}
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
    return sorted(pairs, key=_sort_key)


def _check_options(threshold: float, confidence: float, resamples: int, seed: int) -> None:
    if not (isinstance(threshold, (int, float)) and math.isfinite(threshold) and 0 <= threshold < 1):
        raise CompareError(f"--threshold: {threshold} is not in [0, 1) (a relative change, 0.05 = 5%)")
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise CompareError(f"--confidence: {confidence} is not in (0, 1) (e.g. 0.95)")
    if not (isinstance(resamples, int) and resamples >= MIN_RESAMPLES):
        raise CompareError(f"--resamples: {resamples} is below {MIN_RESAMPLES} (use thousands)")
    if not (isinstance(seed, int) and seed >= 0):
        raise CompareError(f"--seed: {seed} is not a non-negative integer")


# --- output --------------------------------------------------------------------------------------

def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, spec)


def _pct(threshold: float) -> str:
    return f"{threshold * 100:g}%"


def _verdict_text(pair: Pair, threshold: float) -> str:
    if pair.verdict in (SLOW, FAST) and pair.beyond_threshold:
        return f"{pair.verdict} >{_pct(threshold)}"
    return pair.verdict


def row(pair: Pair, threshold: float = 0.05) -> dict[str, str]:
    """The pair as strings, one per :data:`COLUMNS` entry."""
    p = pair.point
    protocol = (pair.before and pair.before.protocol) or (pair.after and pair.after.protocol)
    return {
        "kernel": p.kernel,
        "params": " ".join(f"{k}={v}" for k, v in sorted(p.params.items())) or "-",
        "shape": "x".join(str(v) for v in p.shape) if p.shape else "?",
        "device": f"{p.device or '?'}" + (f" ({p.arch})" if p.arch else ""),
        "protocol": protocol or "-",
        "before median ms": _fmt(pair.before.median_ms if pair.before else None, ".5g"),
        "after median ms": _fmt(pair.after.median_ms if pair.after else None, ".5g"),
        "ratio": _fmt(pair.ratio, ".4f"),
        "CI low": _fmt(pair.low, ".4f"),
        "CI high": _fmt(pair.high, ".4f"),
        "verdict": _verdict_text(pair, threshold),
        "note": pair.note,
    }


def summary(pairs: Sequence[Pair], threshold: float = 0.05) -> str:
    """One line: counts per verdict, SLOW/FAST beyond the threshold, and the gate's outcome."""
    counts = Counter(p.verdict for p in pairs)
    parts = []
    for v in VERDICTS:
        text = f"{counts.get(v, 0)} {v}"
        if v in (SLOW, FAST):
            n = sum(1 for p in pairs if p.verdict == v and p.beyond_threshold)
            text += f" ({n} beyond {_pct(threshold)})"
        parts.append(text)
    bad = [p for p in pairs if p.regression]
    gate = "FAIL" if bad else "pass"
    return f"{len(pairs)} points: " + ", ".join(parts) + f"; regression gate: {gate}"


def markdown(pairs: Sequence[Pair], before: str = "BEFORE", after: str = "AFTER",
             threshold: float = 0.05, confidence: float = 0.95, resamples: int = 2000,
             seed: int = 0) -> str:
    """The comparison as a Markdown document: settings, rule, table, summary line."""
    lines = [
        "# gemmlab-compare", "",
        f"- BEFORE: `{before}`", f"- AFTER: `{after}`",
        f"- ratio = median(AFTER) / median(BEFORE) of the primary protocol's per-launch samples; "
        f"{confidence:g} bootstrap percentile interval of the ratio of medians ({resamples} resamples, "
        f"seed {seed}; Efron & Tibshirani 1993)",
        f"- SLOW: CI low > 1; FAST: CI high < 1; SAME: CI within [{1 - threshold:g}, {1 + threshold:g}]; "
        f"UNSURE: otherwise or < {MIN_SAMPLES} samples; FAILED: valid before, failed after. "
        f"Exit 1 when any point is SLOW beyond {_pct(threshold)} (CI low > {1 + threshold:g}) or FAILED.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---:" if c in ("before median ms", "after median ms", "ratio", "CI low", "CI high")
                       else "---" for c in COLUMNS) + "|",
    ]
    for pair in pairs:
        r = row(pair, threshold)
        if pair.regression:
            r["verdict"] = f"**{r['verdict']}**"
        lines.append("| " + " | ".join(r[c].replace("|", "\\|").replace("\n", " ") for c in COLUMNS) + " |")
    lines += ["", summary(pairs, threshold), ""]
    return "\n".join(lines)


_STYLES = {SLOW: "red", FAILED: "bold red", FAST: "green", SAME: None, UNSURE: "yellow",
           INVALID: "magenta", UNTIMED: "dim", ONLY_BEFORE: "cyan", ONLY_AFTER: "cyan"}


def print_table(pairs: Sequence[Pair], threshold: float = 0.05, title: str = "gemmlab-compare",
                file=None) -> None:
    """Print the comparison as a rich table plus the summary line."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=file, highlight=False)
    if not console.is_terminal:
        console = Console(file=file, highlight=False, width=220)
    table = Table(title=Text(title))
    for c in COLUMNS:
        numeric = c in ("before median ms", "after median ms", "ratio", "CI low", "CI high")
        table.add_column(c, justify="right" if numeric else "left", overflow="fold",
                         max_width=60 if c == "note" else None)
    for pair in pairs:
        r = row(pair, threshold)
        style = _STYLES.get(pair.verdict)
        if pair.verdict == SLOW and pair.beyond_threshold:
            style = "bold red"
        table.add_row(*(Text(r[c]) for c in COLUMNS), style=style)
    console.print(table)
    console.print(Text(summary(pairs, threshold)))


# --- command line --------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would add the usage)
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``gemmlab-compare``."""
    p = _Parser(prog=PROG, description="Compare two gemmlab runs/sweeps point by point: ratio of "
                "medians AFTER/BEFORE with a bootstrap confidence interval and a verdict per point. "
                "Exit 1 when a point is SLOW beyond the threshold or FAILED.")
    p.add_argument("before", metavar="BEFORE", help="run/sweep directory or result.json (the reference)")
    p.add_argument("after", metavar="AFTER", help="run/sweep directory or result.json (the candidate)")
    p.add_argument("--threshold", type=float, default=0.05,
                   help="relative change that matters, in [0, 1) (default 0.05 = 5%%)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="coverage of the bootstrap interval, in (0, 1) (default 0.95)")
    p.add_argument("--resamples", type=int, default=2000,
                   help=f"bootstrap resamples, >= {MIN_RESAMPLES} (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="base seed of the bootstrap (default 0)")
    p.add_argument("--out", metavar="FILE.md", help="also write the comparison as Markdown here (a new file)")
    p.add_argument("--allow-missing", action="store_true",
                   help="do not fail the gate for points valid in BEFORE and missing from AFTER")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gemmlab-compare``; returns (and, as a script, exits with) the status:
    0, 1 (a point SLOW beyond the threshold, FAILED, or valid before and missing after), 2 (bad
    arguments)."""
    args = build_parser().parse_args(argv)
    ALLOW_MISSING[0] = bool(args.allow_missing)
    try:
        if args.out and Path(args.out).exists():
            raise CompareError(f"--out: {args.out} already exists; give a new file name")
        try:
            pairs = compare(args.before, args.after, args.threshold, args.confidence, args.resamples, args.seed)
        except CompareError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a record of the right schema, wrong types
            raise CompareError(f"a record has a field of an unexpected type ({type(exc).__name__}: {exc})") from None
        if args.out:
            out = Path(args.out)
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(markdown(pairs, args.before, args.after, args.threshold, args.confidence,
                                        args.resamples, args.seed))
            except OSError as exc:
                raise CompareError(f"{out}: cannot write ({exc.strerror or exc})") from None
    except CompareError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    print_table(pairs, args.threshold, title=f"gemmlab-compare: {args.before} -> {args.after}")
    if args.out:
        print(f"markdown: {args.out}")
    return 1 if any(p.regression for p in pairs) else 0


def _script() -> None:
    sys.exit(main())


if __name__ == "__main__":
    _script()
