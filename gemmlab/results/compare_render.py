"""Rendering of ``gemmlab-compare``: one table model (:func:`row`) and one printer per format.

This module owns the output: :data:`COLUMNS`, :func:`row` (a pair as strings), :func:`summary`
(the one-line verdict counts and the gate, with the rules that failed: :func:`gate_failures`),
:func:`same_records` (BEFORE and AFTER are one set of records), :func:`markdown` and :func:`print_table` (rich).
A measurement setting that differs between the compared points (e.g. precision fp32 and tf32 of
one kernel) is shown after the parameters, so that two rows never look alike.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from gemmlab.console import count
from gemmlab.results import table as table_model
from gemmlab.results.table import Column, Table
from gemmlab.results.compare_match import (FAILED, FAST, INVALID, MIN_SAMPLES, ONLY_AFTER, ONLY_BEFORE, SAME,
                                           SETTINGS, SLOW, UNSURE, UNTIMED, VERDICTS, Pair)

COLUMNS = ("kernel", "params", "shape", "device", "protocol", "before median ms", "after median ms",
           "ratio", "CI low", "CI high", "verdict", "note")


def varying_settings(pairs: Sequence[Pair]) -> dict[int, tuple[str, ...]]:
    """For each pair (by ``id``), the measurement settings (:data:`gemmlab.results.compare_match.SETTINGS`)
    that take more than one value among the points of one kernel, parameters and shape: the
    settings that tell its rows apart (none for most rows)."""
    groups: dict[tuple, list] = {}
    for pair in pairs:
        groups.setdefault(pair.point.key4[:3], []).append(pair)
    out: dict[int, tuple[str, ...]] = {}
    for members in groups.values():
        points = [p for pair in members for p in (pair.before, pair.after) if p is not None]
        shown = tuple(s for s in SETTINGS if len({str(p.settings.get(s)) for p in points}) > 1)
        out.update((id(pair), shown) for pair in members)
    return out


def _pct(threshold: float) -> str:
    return f"{threshold * 100:g}%"


def _verdict_text(pair: Pair, threshold: float) -> str:
    if pair.verdict in (SLOW, FAST) and pair.beyond_threshold:
        return f"{pair.verdict} >{_pct(threshold)}"
    return pair.verdict


def _kind(pair: Pair) -> str:
    """The pair's kind for the terminal's style: its verdict, ``SLOW beyond`` past the threshold."""
    return f"{SLOW} beyond" if pair.verdict == SLOW and pair.beyond_threshold else pair.verdict


_STYLES = {SLOW: "red", FAILED: "bold red", FAST: "green", SAME: None, UNSURE: "yellow",
           INVALID: "magenta", UNTIMED: "dim", ONLY_BEFORE: "cyan", ONLY_AFTER: "cyan", f"{SLOW} beyond": "bold red"}


def comparison_table(pairs: Sequence[Pair], threshold: float = 0.05, title: str = "",
                     varying: dict[int, tuple[str, ...]] | None = None) -> Table:
    """The comparison as a table (:data:`COLUMNS`): one row per pair, the settings that tell a
    kernel's rows apart after its parameters (``varying``, by the pair's ``id``; default
    :func:`varying_settings`), times and ratios right-aligned (``-`` where there is none), a
    regression's verdict in bold in Markdown, rows coloured by verdict on the terminal."""
    varying = varying_settings(pairs) if varying is None else varying

    def params(pair: Pair) -> str:
        p = pair.point
        return " ".join([f"{k}={v}" for k, v in sorted(p.params.items())]
                        + [f"{s}={p.settings.get(s)}" for s in varying.get(id(pair), ())]) or "-"

    def protocol(pair: Pair) -> str:
        return (pair.before and pair.before.protocol) or (pair.after and pair.after.protocol) or "-"

    def number(name: str, get, fmt: str, unit: str) -> Column:
        return Column(name, get, fmt, unit, missing="-", align="right")

    ratio = "median(AFTER) / median(BEFORE)"
    columns = (Column("kernel", lambda pair: pair.point.kernel), Column("params", text=params),
               Column("shape", text=lambda pair: "x".join(str(v) for v in pair.point.shape) if pair.point.shape else "?"),
               Column("device", text=lambda pair: f"{pair.point.device or '?'}"
                      + (f" ({pair.point.arch})" if pair.point.arch else "")),
               Column("protocol", text=protocol),
               number("before median ms", lambda pair: pair.before.median_ms if pair.before else None, ".5g", "ms"),
               number("after median ms", lambda pair: pair.after.median_ms if pair.after else None, ".5g", "ms"),
               number("ratio", lambda pair: pair.ratio, ".4f", ratio),
               number("CI low", lambda pair: pair.low, ".4f", ratio), number("CI high", lambda pair: pair.high, ".4f", ratio),
               Column("verdict", text=lambda pair: _verdict_text(pair, threshold), strong=True),
               Column("note", lambda pair: pair.note, max_width=60))
    return Table(columns, pairs, title=title, style=_kind, styles=_STYLES, strong=lambda pair: pair.regression,
                 aligned_rules=True)


def row(pair: Pair, threshold: float = 0.05, varying: Sequence[str] = ()) -> dict[str, str]:
    """The pair as strings, one per :data:`COLUMNS` entry (:func:`comparison_table`'s cells); the
    settings named in ``varying`` (see :func:`varying_settings`) follow the parameters."""
    return dict(zip(COLUMNS, comparison_table([pair], threshold, varying={id(pair): tuple(varying)}).cells()[0]))


def _values(values: set) -> str:
    return "/".join(sorted(values)) if len(values) <= 3 else f"{len(values)} values"


def what_differs(pairs: Sequence[Pair]) -> str:
    """What tells the BEFORE points from the AFTER points apart: each match field (kernel, shape,
    device, arch, protocol, the measurement settings) whose values on one side are none of the
    other side's, e.g. ``"precision fp32 vs bf16"``; ``""`` when no single field does (or a side
    has no point)."""
    fields = {"kernel": lambda p: p.kernel, "shape": lambda p: "x".join(map(str, p.shape)) if p.shape else None,
              "device": lambda p: p.device, "arch": lambda p: p.arch, "protocol": lambda p: p.protocol}
    fields.update({s: (lambda p, s=s: p.settings.get(s)) for s in SETTINGS})
    befores = [p.before for p in pairs if p.before is not None]
    afters = [p.after for p in pairs if p.after is not None]
    out = []
    for name, get in fields.items():
        b = {str(v) for v in map(get, befores) if v is not None}
        a = {str(v) for v in map(get, afters) if v is not None}
        if b and a and not b & a:
            out.append(f"{name} {_values(b)} vs {_values(a)}")
    return ", ".join(out)


def gate_rule(threshold: float | None = None) -> str:
    """The regression gate's rules in one phrase (those :func:`gate_failures` checks), for the
    Markdown document (with its ``threshold``) and ``--help`` (None: "the threshold")."""
    beyond = "beyond the threshold" if threshold is None else f"beyond {_pct(threshold)} (CI low > {1 + threshold:g})"
    return (f"a point SLOW {beyond} or FAILED, a point valid in BEFORE missing from AFTER (unless "
            "--allow-missing), an unreadable result.json, or no point of BEFORE matching one of AFTER")


def gate_failures(pairs: Sequence[Pair], threshold: float = 0.05, unreadable: int = 0) -> list[str]:
    """The rules of the regression gate that fail, one short phrase each (none: the gate passes):
    points SLOW beyond the threshold, FAILED points, valid points of BEFORE missing from AFTER
    (unless ``--allow-missing``), ``unreadable`` damaged ``result.json`` files, and no point of
    BEFORE matching one of AFTER (nothing was compared; :func:`what_differs` says why, where
    one field does)."""
    out = []
    if not any(p.before is not None and p.after is not None for p in pairs):
        apart = what_differs(pairs)
        out.append("no point of BEFORE matches one of AFTER" + (f", they differ in {apart}" if apart else ""))
    regressions = Counter(p.verdict for p in pairs if p.regression)  # the one rule: Pair.regression
    slow, failed, missing = regressions[SLOW], regressions[FAILED], regressions[ONLY_BEFORE]
    if slow:
        out.append(f"{slow} SLOW beyond {_pct(threshold)}")
    if failed:
        out.append(f"{failed} FAILED (valid in BEFORE, failed in AFTER)")
    if missing:
        out.append(f"{count(missing, 'valid point')} of BEFORE missing from AFTER (--allow-missing allows that)")
    if unreadable:
        out.append(count(unreadable, "unreadable result.json", "unreadable result.json files"))
    return out


def same_records(pairs: Sequence[Pair]) -> str | None:
    """Why BEFORE and AFTER are the same records, or None: every point matched and each pair is
    one file (a folder compared with itself, by any path). Such a comparison says nothing about a
    change."""
    if not pairs or any(p.before is None or p.after is None for p in pairs):
        return None
    if all(p.before.path.resolve() == p.after.path.resolve() for p in pairs):
        return "the same file" if len(pairs) == 1 else f"the same {len(pairs)} files"
    return None


def summary(pairs: Sequence[Pair], threshold: float = 0.05, unreadable: int = 0) -> str:
    """One line: counts per verdict, SLOW/FAST beyond the threshold, and the gate's outcome with
    the rules that failed (:func:`gate_failures`; ``unreadable``: damaged ``result.json`` files
    found, each failing the gate)."""
    counts = Counter(p.verdict for p in pairs)
    parts = []
    for v in VERDICTS:
        text = f"{counts.get(v, 0)} {v}"
        if v in (SLOW, FAST):
            n = sum(1 for p in pairs if p.verdict == v and p.beyond_threshold)
            text += f" ({n} beyond {_pct(threshold)})"
        parts.append(text)
    failures = gate_failures(pairs, threshold, unreadable)
    gate = f"FAIL ({'; '.join(failures)})" if failures else "pass"
    damaged = f", {count(unreadable, 'unreadable result.json', 'unreadable result.json files')}" if unreadable else ""
    return f"{count(len(pairs), 'point')}: " + ", ".join(parts) + damaged + f"; regression gate: {gate}"


def markdown(pairs: Sequence[Pair], before: str = "BEFORE", after: str = "AFTER",
             threshold: float = 0.05, confidence: float = 0.95, resamples: int = 2000,
             seed: int = 0, unreadable: int = 0) -> str:
    """The comparison as a Markdown document: settings, rule, table, summary line."""
    lines = [
        "# gemmlab-compare", "",
        f"- BEFORE: `{before}`", f"- AFTER: `{after}`",
        f"- ratio = median(AFTER) / median(BEFORE) of the primary protocol's per-launch samples; "
        f"{confidence:g} bootstrap percentile interval of the ratio of medians ({resamples} resamples, "
        f"seed {seed}; Efron & Tibshirani 1993)",
        f"- SLOW: CI low > 1; FAST: CI high < 1; SAME: CI within [{1 - threshold:g}, {1 + threshold:g}]; "
        f"UNSURE: otherwise or < {MIN_SAMPLES} samples; FAILED: valid before, failed after. "
        f"Regression gate (exit 1): {gate_rule(threshold)}.",
        "",
        table_model.markdown(comparison_table(pairs, threshold)).rstrip("\n"),
    ]
    lines += ["", summary(pairs, threshold, unreadable), ""]
    return "\n".join(lines)


def print_table(pairs: Sequence[Pair], threshold: float = 0.05, title: str = "gemmlab-compare",
                file=None, unreadable: int = 0) -> None:
    """Print the comparison as a rich table plus the summary line."""
    from rich.console import Console
    from rich.text import Text

    console = Console(file=file, highlight=False)
    if not console.is_terminal:
        console = Console(file=file, highlight=False, width=220)
    console.print(table_model.rich_table(comparison_table(pairs, threshold, title)))
    console.print(Text(summary(pairs, threshold, unreadable)), soft_wrap=True)  # one line, however long
