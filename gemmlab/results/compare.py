"""``gemmlab-compare BEFORE AFTER``: did a change make kernels faster or slower, and is it sure?

BEFORE and AFTER are run or sweep directories (every ``result.json`` below them, recursively),
record archives (``gemmlab-report --archive``; also a folder inside one, ``runs.jsonl.xz/run1``) or
single ``result.json`` files; a record inside another run's directory (the sanitizer child's
``sanitizer-<tool>/run/result.json``) belongs to that run and is not a point. Points are matched
by kernel name, kernel params, shape (M, N, K), device (name and arch), timing protocol (the
record's primary protocol, ``timing.protocol``) and the measurement settings (precision, A/B
layout, L2 mode, timing batch, input distribution, compile target; an older record without a
field stands for its old default: fp32, row/row, warm, normal inputs); the raw per-launch samples
``timing.samples_ms`` of each side are compared. A record without timing (a run that failed
before it was timed) matches its counterpart by the other fields. Records measured with a
different protocol or setting are not comparable and are listed unmatched; a setting that
differs among the points is shown after the parameters.

Statistic. For a matched pair the point estimate is ``ratio = median(AFTER) / median(BEFORE)``
(> 1: AFTER is slower). Its uncertainty is a nonparametric bootstrap percentile interval
(Efron & Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993, ch. 13): each
sample set is resampled with replacement to its own size, independently, ``--resamples`` times
(numpy ``Generator``, seeded from ``--seed`` and the point's kernel, params, shape, device and
protocol, so a point's interval does not depend on which other points are compared); the interval is the ``(1 - c)/2`` and ``(1 + c)/2``
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
missing from AFTER (unless ``--allow-missing``), or an unreadable ``result.json`` in a searched directory (named in a
notice; the other points are still compared), or no point of BEFORE matches one of AFTER (nothing
was compared; the fields that tell the two sides apart are named) — usable as a regression gate,
whose summary line names the rules that failed (``regression gate: FAIL (...)``); 2 for bad
arguments (a missing path, no ``result.json``, an unreadable record named directly, threshold
outside [0, 1), confidence outside (0, 1), fewer than 100 resamples, a negative seed), as one
line ``gemmlab-compare: error: ...`` on stderr. BEFORE and AFTER that are the same records (one
folder twice, by any path) get a one-line notice on stderr. A ``result.json`` found in a directory that is no
gemmlab record at all (``{}``, another tool's JSON) is skipped with a one-line notice naming it
(a file named directly must be a gemmlab record).

This module owns the command line (:func:`main`); the statistics are
:mod:`gemmlab.results.compare_stats`, matching :mod:`gemmlab.results.compare_match`, rendering
:mod:`gemmlab.results.compare_render`, records are read through :mod:`gemmlab.stages.record_model`.

Public API (re-exported here): :func:`bootstrap_ratio`, :func:`verdict`, :func:`beyond_threshold`,
:func:`load_points`, :func:`compare`, :func:`summary`, :func:`markdown`, :func:`main`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from gemmlab.console import OneLineParser, guard_streams, output_path, run_command, settled_exit
from gemmlab.results.compare_match import (FAILED, INVALID, MIN_RESAMPLES, MIN_SAMPLES, ONLY_AFTER, ONLY_BEFORE,
                                           SETTINGS, UNTIMED, VERDICTS, CompareError, Pair, Point, compare,
                                           compare_pair, load_points, point_from_record)
from gemmlab.results.compare_render import (COLUMNS, gate_failures, gate_rule, markdown, print_table, row, same_records, summary,
                                            varying_settings, what_differs)
from gemmlab.results.compare_stats import FAST, SAME, SLOW, UNSURE, beyond_threshold, bootstrap_ratio, verdict
from gemmlab.paths import file_in_the_way
from gemmlab.stages.record_model import SCHEMA

PROG = "gemmlab-compare"

__all__ = ["bootstrap_ratio", "verdict", "beyond_threshold", "load_points", "point_from_record", "compare",
           "compare_pair", "summary", "gate_failures", "same_records", "what_differs", "markdown", "print_table", "row",
           "varying_settings", "main", "build_parser",
           "CompareError", "Point", "Pair", "COLUMNS", "VERDICTS", "SETTINGS", "SCHEMA", "MIN_SAMPLES",
           "MIN_RESAMPLES", "FAST", "SAME", "SLOW", "UNSURE", "FAILED", "INVALID", "UNTIMED", "ONLY_BEFORE",
           "ONLY_AFTER"]


# --- command line --------------------------------------------------------------------------------

_Parser = OneLineParser  # one line, exit 2 (gemmlab.console)


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser of ``gemmlab-compare``."""
    p = _Parser(prog=PROG, description="Compare two gemmlab runs/sweeps point by point: ratio of "
                "medians AFTER/BEFORE with a bootstrap confidence interval and a verdict per point. "
                f"Exit 1 when the regression gate fails: {gate_rule()}.")
    p.add_argument("before", metavar="BEFORE", help="run/sweep directory, record archive or result.json (the reference)")
    p.add_argument("after", metavar="AFTER", help="run/sweep directory, record archive or result.json (the candidate)")
    p.add_argument("--threshold", type=float, default=0.05,
                   help="relative change that matters, in [0, 1) (default 0.05 = 5%%)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="coverage of the bootstrap interval, in (0, 1) (default 0.95)")
    p.add_argument("--resamples", type=int, default=2000,
                   help=f"bootstrap resamples, >= {MIN_RESAMPLES} (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="base seed of the bootstrap (default 0)")
    p.add_argument("--out", type=output_path, metavar="FILE.md", help="also write the comparison as Markdown here (a new file)")
    p.add_argument("--allow-missing", action="store_true",
                   help="do not fail the gate for points valid in BEFORE and missing from AFTER")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gemmlab-compare``; returns (and, as a script, exits with) the status:
    0, 1 (a rule of :func:`gate_failures` fails: a point SLOW beyond the threshold, FAILED, or
    valid before and missing after, a damaged record, no point matched), 2 (bad arguments)."""
    guard_streams(PROG)
    args = build_parser().parse_args(argv)
    skipped: list = []
    try:
        if args.out and os.path.lexists(args.out):  # also a link to nowhere: writing would create its target
            raise CompareError(f"--out: {args.out} already exists; give a new file name")
        try:
            pairs = compare(args.before, args.after, args.threshold, args.confidence, args.resamples, args.seed,
                            allow_missing=args.allow_missing, skipped=skipped)
        except CompareError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a record of the right schema, wrong types
            raise CompareError(f"a record has a field of an unexpected type ({type(exc).__name__}: {exc})") from None
        finally:
            damaged = sum(1 for rec in skipped if rec.category == "unreadable")  # each fails the gate
            for rec in skipped:  # a result.json in a tree that is no gemmlab record, or damaged: one line each
                if rec.category == "unreadable":
                    print(f"{PROG}: notice: unreadable {rec.path}: {rec.error} (its point is not compared, which fails the comparison)",
                          file=sys.stderr)
                else:
                    print(f"{PROG}: notice: skipped {rec.path}: not a gemmlab record ({rec.foreign})", file=sys.stderr)
        if args.out:
            out = Path(args.out)
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(markdown(pairs, args.before, args.after, args.threshold, args.confidence,
                                        args.resamples, args.seed, unreadable=damaged))
            except OSError as exc:
                blocking = file_in_the_way(out)
                why = f"{blocking} is a file, not a folder" if blocking is not None else exc.strerror or exc
                raise CompareError(f"{out}: cannot write ({why})") from None
    except CompareError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    same = same_records(pairs)
    if same:
        print(f"{PROG}: notice: BEFORE and AFTER are the same records ({same}): nothing changed between them",
              file=sys.stderr)
    print_table(pairs, args.threshold, title=f"gemmlab-compare: {args.before} -> {args.after}", unreadable=damaged)
    if args.out:
        print(f"markdown: {args.out}")
    return 1 if gate_failures(pairs, args.threshold, damaged) else 0


def _script() -> None:
    """``python -m gemmlab.results.compare``: :func:`main`, an interrupt in one line (:func:`gemmlab.console.run_command`)."""
    sys.exit(run_command(PROG, main))


if __name__ == "__main__":
    with settled_exit():
        _script()
