"""``gemmlab-report``: one table and four plots from any number of gemmlab results.

``gemmlab-report PATH... [--out DIR]`` collects every ``result.json`` under the given run or
sweep directories (any mix, nested at any depth; a JSON file named directly is read too, whatever
its name) and writes, into a new directory (never an existing one):

- ``report.csv`` and ``report.md``: one row per record, failed points included with their status
  and error; ``report.md`` also counts the records (valid timed, compiled only, failed, other,
  unreadable), lists unreadable files with the reason and every field it could not read;
- ``gflops_vs_size.png``: GFLOP/s against (M·N·K)^(1/3), one series per kernel and parameters;
- ``ratio_to_baseline.png``: kernel GFLOP/s / baseline GFLOP/s against size (only if recorded);
- ``roofline.png``: arithmetic intensity against GFLOP/s with each device's roofline
  min(FP32 peak, AI × DRAM bandwidth);
- ``timing_distribution.png``: a box plot of each point's raw samples divided by its median.

Only files are read: it works without a GPU, on results copied from another machine. Records
of another schema than ``gemmlab.result/1`` (or none) are read best-effort; every field that
cannot be read is named in ``report.md`` rather than raising.

Exit status: 0 the report was written; 1 no ``result.json`` was found; 2 bad arguments (a path
that does not exist, an ``--out`` directory that exists).
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from gemmlab.record import VALID_STATUSES

SCHEMA = "gemmlab.result/1"  # the schema this module reads natively (gemmlab.record.SCHEMA)
RECORD_NAME = "result.json"
PROG = "gemmlab-report"

PLOTS = ("gflops_vs_size", "ratio_to_baseline", "roofline", "timing_distribution")
CSV_COLUMNS = ("index", "path", "kernel", "params", "M", "N", "K", "device", "precision", "status", "valid",
               "median_ms", "gflops", "protocol", "l2", "n_samples", "throttled_samples", "ratio_to_baseline",
               "ratio_to_baseline_gflops", "baseline", "max_abs_error", "verification_rule",
               "verification_passed", "arithmetic_intensity", "pct_fp32_peak", "schema", "error", "unread_fields")
CATEGORIES = ("timed", "compiled", "failed", "other", "unreadable")
_CATEGORY_TEXT = {"timed": "valid timed", "compiled": "compiled only", "failed": "failed",
                  "other": "other valid (sanitizer check, or no readable timing)", "unreadable": "unreadable files"}

_MISSING = object()


@dataclass
class Row:
    """One record (one ``result.json``) as a report row.

    Units: times in milliseconds (per launch), throughput in GFLOP/s (10⁹ useful FLOP/s,
    2·M·N·K per GEMM), arithmetic intensity in FLOP/byte, bandwidth in bytes/s. ``None`` means
    not recorded or not readable; ``unread`` names each field that could not be read.

    ``category`` is ``timed`` (status ``ok`` with a readable median), ``compiled``
    (``mode=compile``), ``failed`` (any status that is not valid), ``other`` (valid but not
    timed: a sanitizer ``checked`` record, or an ``ok`` record whose timing cannot be read) or
    ``unreadable`` (the file is not a JSON object; ``error`` says why).
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
    samples_ms: list[float] = field(default_factory=list)
    throttled_samples: int | None = None
    ratio_to_baseline: float | None = None  # kernel median time / baseline median time (>1: slower)
    ratio_to_baseline_gflops: float | None = None  # kernel GFLOP/s / baseline GFLOP/s (>1: faster)
    baseline: str | None = None
    max_abs_error: float | None = None
    verification_rule: str | None = None
    verification_passed: bool | None = None
    arithmetic_intensity: float | None = None  # FLOP per byte of minimum DRAM traffic
    pct_fp32_peak: float | None = None
    fp32_peak_gflops: float | None = None
    dram_peak_bytes_per_s: float | None = None
    error: str | None = None
    unread: list[str] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)

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
        return f"schema {self.schema}" if self.schema else "schema missing"

    def unread_lines(self) -> list[str]:
        """One line per field that could not be read: ``"<path>: schema X: cannot read F"``."""
        return [f"{self.path}: {self.schema_text}: cannot read {f}" for f in self.unread]

    def as_csv(self) -> dict[str, Any]:
        """The row as ``CSV_COLUMNS`` → value (full precision; ``""`` for unknown)."""
        out = {c: getattr(self, c, None) for c in CSV_COLUMNS}
        out.update(params=self.params_text, n_samples=len(self.samples_ms) or None,
                   unread_fields="; ".join(self.unread))
        return {k: ("" if v is None else v) for k, v in out.items()}


# --------------------------------------------------------------------------------------------
# reading records


def find_records(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Every record file under ``paths``, in argument order, each directory's files sorted
    naturally (job ``2`` before ``10``). A directory contributes every ``result.json`` at any
    depth (symlinked directories are not followed); a file is taken as a record whatever its
    name. A file reached twice is listed once.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: list[Path] = []
    seen: set[Path] = set()
    for p in map(Path, paths):
        if p.is_file():
            candidates = [p]
        elif p.is_dir():
            candidates = []
            for root, dirs, files in os.walk(p):
                dirs.sort(key=_natural)
                if RECORD_NAME in files:
                    candidates.append(Path(root) / RECORD_NAME)
            candidates.sort(key=lambda c: [_natural(part) for part in c.parts])
        else:
            raise FileNotFoundError(str(p))
        for c in candidates:
            key = c.resolve()
            if key not in seen:
                seen.add(key)
                found.append(c)
    return found


def collect(paths: Iterable[str | os.PathLike]) -> list[Row]:
    """One :class:`Row` per record file under ``paths`` (see :func:`find_records`), numbered
    1.. in that order. Never raises for a bad record: an unreadable file becomes a row with
    status ``unreadable`` and the reason in ``error``.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    rows = [read_record(p) for p in find_records(paths)]
    for i, row in enumerate(rows, 1):
        row.index = i
    return rows


def read_record(path: str | os.PathLike) -> Row:
    """Read one record file into a :class:`Row` (best-effort for other schemas; never raises)."""
    path = Path(path)
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return Row(path=str(path), status="unreadable", category="unreadable",
                   error=f"cannot read the file: {exc.strerror or exc}" if isinstance(exc, OSError)
                   else f"not UTF-8 text: {exc}")
    except ValueError as exc:
        return Row(path=str(path), status="unreadable", category="unreadable", error=f"not valid JSON: {exc}")
    if not isinstance(rec, dict):
        return Row(path=str(path), status="unreadable", category="unreadable",
                   error=f"not a JSON object (a {type(rec).__name__})")
    try:
        return _Reader(path, rec).row()
    except Exception as exc:  # a record shaped in a way nobody foresaw must not stop the report
        schema = rec.get("schema")
        return Row(path=str(path), status=str(rec.get("status", "?")), category="failed",
                   schema=schema if isinstance(schema, str) else None,
                   error=rec.get("error") if isinstance(rec.get("error"), str) else None,
                   unread=[f"record ({type(exc).__name__}: {exc})"])


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

    def int_(self, dotted: str, required: bool = False) -> int | None:
        v = self.get(dotted)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        self._bad(dotted, v, required, "not an integer")
        return None

    def str_(self, dotted: str, required: bool = False) -> str | None:
        v = self.get(dotted)
        if isinstance(v, str):
            return v
        self._bad(dotted, v, required, "not a string")
        return None

    def row(self) -> Row:
        rec = self.rec
        schema = rec.get("schema")
        schema = schema if isinstance(schema, str) else (None if schema is None else _short(schema))
        native = schema == SCHEMA
        status = self.str_("status", required=True)
        valid = rec.get("valid") if isinstance(rec.get("valid"), bool) else None
        ok = status == "ok"
        # /1 records lack kernel and shape only when the config never validated (a failure)
        expect_point = not native or status in VALID_STATUSES
        row = Row(path=str(self.path), status=status or "?", category="failed", schema=schema, valid=valid,
                  error=self.str_("error"))

        # kernel name and parameters (fallback: the config, where parameters sit beside the name)
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

        # shape: {"M","N","K"}; fallback a [M, N, K] list here or in the config
        shape = self.get("shape")
        mnk = _mnk(shape)
        if mnk is None:
            mnk = _mnk(self.get("config.shape"))
            if expect_point:
                self.unread.append("shape" + (" (taken from config.shape)" if mnk else
                                              f" (got {_short(shape)})" if shape is not _MISSING else ""))
        if mnk:
            row.M, row.N, row.K = mnk

        # device
        row.device = self.str_("device.name", required=native and status in VALID_STATUSES)
        row.arch = self.str_("device.arch")
        prec = self.get("config.precision")
        if not isinstance(prec, str):
            text = self.get("precision")
            prec = text.split(":", 1)[0] if isinstance(text, str) else None
        row.precision = prec

        # timing (the primary protocol's series); expected for every status ok
        timing = self.get("timing")
        want_timing = ok or status is None
        if timing is _MISSING or timing is None:
            if want_timing:
                self.unread += ["timing.median_ms", "timing.gflops", "timing.samples_ms"]
        else:
            row.median_ms = self.num("timing.median_ms", required=True)
            row.gflops = self.num("timing.gflops")
            if row.gflops is None:
                if row.median_ms and row.M is not None and row.median_ms > 0:
                    row.gflops = 2 * row.M * row.N * row.K / (row.median_ms * 1e-3) / 1e9
                    row.derived.append("gflops = 2·M·N·K / median (timing.gflops absent)")
                else:
                    self.num("timing.gflops", required=True)
            samples = self.get("timing.samples_ms")
            if isinstance(samples, list):
                row.samples_ms = [float(s) for s in samples
                                  if isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s)]
                if len(row.samples_ms) != len(samples):
                    self.unread.append(f"timing.samples_ms ({len(samples) - len(row.samples_ms)} of "
                                       f"{len(samples)} not finite numbers)")
            else:
                self._bad("timing.samples_ms", samples, True, "not a list")
            row.protocol = self.str_("timing.protocol", required=native)
            row.l2 = self.str_("timing.l2")
            throttled = self.get("timing.throttled_samples")
            if isinstance(throttled, int) and not isinstance(throttled, bool):
                row.throttled_samples = throttled
            else:
                self._bad("timing.throttled_samples", throttled, native, "not an integer")

        # baseline ratio: {"baseline", "protocol", "median_time", "gflops"}; a bare number is read
        # as the time ratio
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

        # verification
        # (a failed point may stop before verification: only an ok record must have it)
        row.max_abs_error = self.num("verification.max_abs_error", required=ok)
        row.verification_rule = self.str_("verification.rule", required=ok and native)
        passed = self.get("verification.passed")
        row.verification_passed = passed if isinstance(passed, bool) else None

        # roofline (fallback: intensity from the shape, float32 operands, A, B read and C written once)
        roof = self.get("roofline")
        if isinstance(roof, dict):
            row.arithmetic_intensity = self.num("roofline.arithmetic_intensity", required=True)
            row.fp32_peak_gflops = self.num("roofline.fp32_peak_gflops")
            row.pct_fp32_peak = self.num("roofline.pct_fp32_peak")
            row.dram_peak_bytes_per_s = self.num("roofline.dram_peak_bytes_per_s")
        elif roof is not _MISSING and roof is not None:
            self._bad("roofline", roof, True, "not an object")
        elif ok and row.median_ms is not None:
            self.unread.append("roofline.arithmetic_intensity")
        if row.arithmetic_intensity is None and row.M is not None and row.median_ms is not None:
            M, N, K = row.M, row.N, row.K
            row.arithmetic_intensity = 2 * M * N * K / (4 * (M * K + K * N + M * N))
            row.derived.append("arithmetic intensity from the shape (float32, A and B read once, C written once)")
        if row.dram_peak_bytes_per_s is None:
            row.dram_peak_bytes_per_s = self.num("device.dram_peak_bytes_per_s")
        if row.fp32_peak_gflops is None:
            row.fp32_peak_gflops = _peak_from_device(self.rec.get("device"))

        # category
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


def _mnk(shape: Any) -> tuple[int, int, int] | None:
    if isinstance(shape, dict):
        shape = [shape.get(d) for d in "MNK"]
    if isinstance(shape, (list, tuple)) and len(shape) == 3 and \
            all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in shape):
        return tuple(shape)  # type: ignore[return-value]
    return None


def _peak_from_device(device: Any) -> float | None:
    """FP32 peak in GFLOP/s from the device fields at the maximum SM clock (SMs × lanes × 2 × MHz)."""
    if not isinstance(device, dict):
        return None
    try:
        from gemmlab.roofline import FP32_LANES_PER_SM
    except Exception:  # pragma: no cover - the report must not depend on the rest of gemmlab
        return None
    arch = str(device.get("arch", "")).removeprefix("sm_")
    sms, mhz, lanes = device.get("sm_count"), device.get("max_sm_mhz"), FP32_LANES_PER_SM.get(arch)
    if isinstance(sms, int) and isinstance(mhz, (int, float)) and lanes:
        return sms * lanes * 2 * mhz / 1e3
    return None


def _short(value: Any, n: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= n else text[:n - 3] + "..."


def _natural(text: str) -> list:
    import re
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text) if t]


# --------------------------------------------------------------------------------------------
# writing the report


def counts(rows: Sequence[Row]) -> dict[str, int]:
    """Number of rows per category (``timed``, ``compiled``, ``failed``, ``other``, ``unreadable``)."""
    return {c: sum(r.category == c for r in rows) for c in CATEGORIES}


def write_report(rows: Sequence[Row], out_dir: str | os.PathLike,
                 sources: Sequence[str] | None = None) -> dict[str, Path]:
    """Write ``report.csv``, ``report.md`` and the plots for ``rows`` into ``out_dir`` (created
    if missing). A plot without data is skipped and ``report.md`` says why.

    Args:
        rows: from :func:`collect`.
        out_dir: the report directory.
        sources: the paths the rows came from (listed in ``report.md``).

    Returns:
        ``{"csv": ..., "md": ..., "<plot name>": ...}`` for each file written.

    Raises:
        FileExistsError: one of the report's files already exists in ``out_dir`` (never overwritten).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = {"csv": "report.csv", "md": "report.md", **{p: f"{p}.png" for p in PLOTS}}
    for name in names.values():
        if (out / name).exists():
            raise FileExistsError(f"{out / name} exists; gemmlab-report never overwrites a report")
    written: dict[str, Path] = {}

    with open(out / names["csv"], "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(r.as_csv() for r in rows)
    written["csv"] = out / names["csv"]

    plot_notes: dict[str, str] = {}
    plot_text: dict[str, str] = {}
    try:
        import matplotlib  # noqa: F401  (figures are drawn on Agg canvases directly, never pyplot)
    except ImportError as exc:
        for p in PLOTS:
            plot_notes[p] = f"skipped: matplotlib is not installed ({exc})"
    else:
        styles = _series_styles(rows)
        for p in PLOTS:
            try:
                result = _PLOTTERS[p](rows, styles, out / names[p])
            except Exception as exc:  # one bad plot must not lose the table
                plot_notes[p] = f"skipped: plotting failed ({type(exc).__name__}: {exc})"
                continue
            if isinstance(result, str):
                plot_notes[p] = result
            else:
                written[p] = out / names[p]
                plot_text[p] = "; ".join(result)

    (out / names["md"]).write_text(_markdown(rows, sources, written, plot_notes, plot_text), encoding="utf-8")
    written["md"] = out / names["md"]
    return {k: written[k] for k in ("csv", "md", *PLOTS) if k in written}


def _fmt(value: Any, spec: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


_MD_COLUMNS = (("#", lambda r: r.index), ("path", lambda r: f"`{r.path}`"), ("kernel", lambda r: r.kernel or ""),
               ("params", lambda r: r.params_text), ("M", lambda r: _fmt(r.M, "")), ("N", lambda r: _fmt(r.N, "")),
               ("K", lambda r: _fmt(r.K, "")),
               ("device", lambda r: " ".join(x for x in (r.device, f"({r.arch})" if r.arch else None) if x)),
               ("status", lambda r: r.status), ("median ms", lambda r: _fmt(r.median_ms, ".5g")),
               ("GFLOP/s", lambda r: _fmt(r.gflops, ".1f")), ("protocol", lambda r: r.protocol or ""),
               ("time / baseline", lambda r: _fmt(r.ratio_to_baseline, ".3f")),
               ("baseline", lambda r: r.baseline or ""),
               ("max abs error", lambda r: _fmt(r.max_abs_error, ".3g")),
               ("verification", lambda r: " ".join(x for x in (r.verification_rule, {True: "pass", False: "FAIL"}
                                                               .get(r.verification_passed)) if x)),
               ("throttled", lambda r: _fmt(r.throttled_samples, "")),
               ("error", lambda r: r.error or ""))


def _markdown(rows, sources, written, plot_notes, plot_text) -> str:
    n = counts(rows)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    lines = ["# gemmlab report", "", f"Generated {now} from {len(rows)} record file(s)"
             + (" under " + ", ".join(f"`{s}`" for s in sources) if sources else "") + ".", "",
             "| records | " + " | ".join(_CATEGORY_TEXT[c] for c in CATEGORIES) + " |",
             "|---|" + "---|" * len(CATEGORIES),
             f"| {len(rows)} | " + " | ".join(str(n[c]) for c in CATEGORIES) + " |", "",
             f"Counts: {n['timed']} valid timed, {n['compiled']} compiled only, {n['failed']} failed, "
             f"{n['other']} other valid, {n['unreadable']} unreadable.", "", "## Plots", ""]
    titles = {"gflops_vs_size": "GFLOP/s vs problem size", "ratio_to_baseline": "ratio to the baseline",
              "roofline": "roofline", "timing_distribution": "timing distribution"}
    for p in PLOTS:
        if p in written:
            lines.append(f"- `{p}.png`: {titles[p]}" + (f" ({plot_text[p]})" if plot_text.get(p) else ""))
        else:
            lines.append(f"- `{p}.png`: {plot_notes.get(p, 'skipped')}")
    lines.append("")
    for p in PLOTS:
        if p in written:
            lines += [f"![{titles[p]}]({p}.png)", ""]

    lines += ["## Results", "",
              "`time / baseline` = kernel median time / baseline median time (> 1: slower than the baseline); "
              "GFLOP/s = 2·M·N·K / median time; the timing is the record's primary protocol.", "",
              "| " + " | ".join(c for c, _ in _MD_COLUMNS) + " |", "|" + "---|" * len(_MD_COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(_md_cell(get(r)) for _, get in _MD_COLUMNS) + " |")
    lines.append("")

    failed = [r for r in rows if r.category == "failed"]
    lines += ["## Failed points", ""]
    lines += [f"- `{r.path}`: {r.status}: {r.error or '(no error recorded)'}" for r in failed] or ["None."]
    lines.append("")
    unreadable = [r for r in rows if r.category == "unreadable"]
    lines += ["## Unreadable files", ""]
    lines += [f"- `{r.path}`: {r.error}" for r in unreadable] or ["None."]
    lines.append("")
    unread = [line for r in rows for line in r.unread_lines()]
    lines += ["## Fields that could not be read", ""]
    lines += [f"- {line}" for line in unread] or ["None."]
    lines.append("")
    derived = [f"- `{r.path}`: {d}" for r in rows for d in r.derived]
    if derived:
        lines += ["## Values derived instead of read", "", *derived, ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# plots (matplotlib, Agg: no display needed)


def _series_key(row: Row, varying: set[str]) -> str:
    label = row.kernel or "?"
    if row.params:
        label += f" [{row.params_text}]"
    extra = [getattr(row, a) for a in ("precision", "protocol", "l2", "device") if a in varying and getattr(row, a)]
    if extra:
        label += " (" + ", ".join(str(e) for e in extra) + ")"
    return label


def _varying(rows: Sequence[Row]) -> set[str]:
    return {a for a in ("precision", "protocol", "l2", "device") if len({getattr(r, a) for r in rows}) > 1}


def _series_styles(rows: Sequence[Row]) -> dict[str, Any]:
    """A fixed colour and marker per series label, shared by all plots."""
    from matplotlib import colormaps
    timed = [r for r in rows if r.category == "timed"]
    varying = _varying(timed)
    labels = sorted({_series_key(r, varying) for r in timed})
    cmap = colormaps["tab10" if len(labels) <= 10 else "tab20"]
    markers = "osD^vP*Xh<>p"
    styles = {lab: {"color": cmap(i % cmap.N), "marker": markers[i % len(markers)]} for i, lab in enumerate(labels)}
    return {"varying": varying, "styles": styles}


def _new_figure(width: float = 8.0, height: float = 5.5):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _group(rows: Iterable[Row], varying: set[str]) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(_series_key(r, varying), []).append(r)
    for g in groups.values():
        g.sort(key=lambda r: r.size)
    return groups


def _legend(ax, n: int, outside: bool = False) -> None:
    """The legend inside the axes (best place), or below them when it would hide points."""
    size = "small" if n <= 8 else "x-small"
    if outside:
        ax.figure.legend(fontsize=size, loc="outside lower center", ncols=1 if n <= 6 else 2)
    else:
        ax.legend(fontsize=size, loc="best", ncols=1 if n <= 10 else 2)


def _plot_gflops(rows, st, path):
    pts = [r for r in rows if r.category == "timed" and r.gflops and r.gflops > 0 and r.size]
    if not pts:
        return "skipped: no valid timed point"
    fig, ax = _new_figure()
    groups = _group(pts, st["varying"])
    for label, g in sorted(groups.items()):
        s = st["styles"][label]
        ax.plot([r.size for r in g], [r.gflops for r in g], label=label, color=s["color"], marker=s["marker"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("problem size (M·N·K)^(1/3)  (= N for N³)")
    ax.set_ylabel("GFLOP/s  (2·M·N·K / median time)")
    ax.set_title(f"GFLOP/s vs size: {len(pts)} valid timed points")
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax, len(groups))
    fig.savefig(path)
    return [f"{len(pts)} points, {len(groups)} series"]


def _plot_ratio(rows, st, path):
    pts = [r for r in rows if r.category == "timed" and r.ratio_to_baseline_gflops and r.size]
    if not pts:
        return "skipped: no point has a baseline ratio recorded (run with `baseline=cublas`)"
    fig, ax = _new_figure()
    groups = _group(pts, st["varying"])
    for label, g in sorted(groups.items()):
        s = st["styles"][label]
        bases = sorted({r.baseline or "?" for r in g})
        ax.plot([r.size for r in g], [r.ratio_to_baseline_gflops for r in g], label=f"{label} vs {', '.join(bases)}",
                color=s["color"], marker=s["marker"])
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="parity with the baseline")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("problem size (M·N·K)^(1/3)")
    ax.set_ylabel("kernel GFLOP/s / baseline GFLOP/s  (> 1: faster)")
    ax.set_title("throughput relative to the baseline, same run and protocol")
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax, len(groups) + 1)
    fig.savefig(path)
    return [f"{len(pts)} points vs {', '.join(sorted({r.baseline or '?' for r in pts}))}"]


def _plot_roofline(rows, st, path):
    import numpy as np
    pts = [r for r in rows if r.category == "timed" and r.gflops and r.gflops > 0
           and r.arithmetic_intensity and r.arithmetic_intensity > 0]
    if not pts:
        return "skipped: no valid timed point with an arithmetic intensity"
    groups = _group(pts, st["varying"])
    fig, ax = _new_figure(height=6.0 + 0.2 * len(groups))
    notes = []
    devices: dict[str, list[Row]] = {}
    for r in pts:
        devices.setdefault(r.device or "unknown device", []).append(r)
    ai_lo = min(r.arithmetic_intensity for r in pts) / 4
    ai_hi = max(r.arithmetic_intensity for r in pts) * 4
    roofs = []
    for dev, g in devices.items():
        peaks = [r.fp32_peak_gflops for r in g if r.fp32_peak_gflops]
        bws = [r.dram_peak_bytes_per_s for r in g if r.dram_peak_bytes_per_s]
        peak, bw = (max(peaks) if peaks else None), (max(bws) if bws else None)
        if peaks and max(peaks) > 1.001 * min(peaks):
            notes.append(f"{dev}: FP32 peak varies {min(peaks):.0f}..{max(peaks):.0f} GFLOP/s with the SM clock "
                         f"read during each run; the line uses the highest")
        if peak is None and bw is None:
            notes.append(f"{dev}: no FP32 peak or DRAM bandwidth recorded; no roofline drawn")
            continue
        if peak and bw:
            ridge = peak * 1e9 / bw
            ai_lo, ai_hi = min(ai_lo, ridge / 4), max(ai_hi, ridge * 4)
        roofs.append((dev, peak, bw))
    ai = np.geomspace(ai_lo, ai_hi, 400)
    for i, (dev, peak, bw) in enumerate(roofs):
        y = np.minimum(peak if peak else np.inf, ai * bw / 1e9 if bw else np.inf)
        parts = ([f"FP32 peak {peak:,.0f} GFLOP/s"] if peak else []) + ([f"DRAM {bw / 1e12:.2f} TB/s"] if bw else [])
        ax.plot(ai, y, color="black" if i == 0 else f"C{i}", lw=1.5, ls="-" if i == 0 else "--",
                label=f"roofline {dev}: " + ", ".join(parts))
        if not peak:
            notes.append(f"{dev}: no FP32 peak recorded; bandwidth line only")
        if not bw:
            notes.append(f"{dev}: no DRAM bandwidth recorded; FP32 peak line only")
    for label, g in sorted(groups.items()):
        s = st["styles"][label]
        ax.scatter([r.arithmetic_intensity for r in g], [r.gflops for r in g], label=label, color=s["color"],
                   marker=s["marker"], zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of minimum DRAM traffic: A, B read once, C written once)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofline: min(FP32 peak, intensity × DRAM bandwidth)")
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax, len(groups) + len(roofs), outside=True)
    fig.savefig(path)
    return [f"{len(pts)} points"] + notes


def _plot_distribution(rows, st, path):
    import numpy as np
    pts = [r for r in rows if r.category == "timed" and r.samples_ms]
    if not pts:
        return "skipped: no valid timed point with raw samples"
    pts.sort(key=lambda r: (r.kernel or "", r.size or 0, r.index))
    data, labels, colors = [], [], []
    for r in pts:
        med = float(np.median(r.samples_ms))
        data.append([100 * (s / med - 1) for s in r.samples_ms] if med > 0 else [0.0] * len(r.samples_ms))
        labels.append(f"#{r.index} {r.kernel} {r.shape_text}")
        colors.append(st["styles"].get(_series_key(r, st["varying"]), {}).get("color", "grey"))
    fig, ax = _new_figure(width=min(40.0, max(8.0, 0.45 * len(pts) + 2)), height=6.5)
    box = ax.boxplot(data, patch_artist=True, widths=0.6, showfliers=False, whis=(0, 100))
    ax.set_xticks(range(1, len(labels) + 1), labels, rotation=60, ha="right", fontsize="small")
    throttled = 0
    for patch, color, r in zip(box["boxes"], colors, pts):
        patch.set_facecolor(color)
        patch.set_alpha(0.45)
        if r.throttled_samples:
            throttled += 1
            patch.set_edgecolor("red")
            patch.set_linewidth(2)
    for i, d in enumerate(data, 1):  # every sample, over its box; the first one ringed
        xs = np.full(len(d), float(i)) + np.linspace(-0.15, 0.15, len(d))
        ax.scatter(xs, d, s=7, color="black", alpha=0.6, zorder=3)
        ax.scatter(xs[:1], d[:1], s=30, facecolors="none", edgecolors="black", zorder=3)
    ax.axhline(0.0, color="black", lw=0.6, ls=":")
    lin = 0.1
    ax.set_yscale("symlog", linthresh=lin, linscale=1.0)
    lo, hi = min(min(d) for d in data), max(max(d) for d in data)
    ax.set_ylim(min(-lin, lo * 1.6), max(lin, hi * 1.6))  # room above the largest outlier
    ax.set_ylabel(f"sample vs the point's median sample (%)\nsymlog: linear within ±{lin}%")
    protocols = sorted({r.protocol or "?" for r in pts})
    ax.set_title("raw timing samples per point as % deviation from that point's median "
                 f"(protocol: {', '.join(protocols)})\nbox: quartiles, whiskers: min..max, dots: samples "
                 "(ringed: the first)" + ("; red box: throttled samples" if throttled else ""), fontsize="medium")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.savefig(path)
    return [f"{len(pts)} points; x labels are the table's #; y: % deviation from each point's median, symlog"]


_PLOTTERS = {"gflops_vs_size": _plot_gflops, "ratio_to_baseline": _plot_ratio, "roofline": _plot_roofline,
             "timing_distribution": _plot_distribution}


# --------------------------------------------------------------------------------------------
# command line


def print_table(rows: Sequence[Row], console=None) -> None:
    """Print a short rich table of ``rows`` (failed and unreadable rows in red)."""
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    table = Table(title=f"gemmlab report: {len(rows)} records")
    for c, kw in (("#", {"justify": "right"}), ("kernel", {}), ("params", {"max_width": 28}), ("shape", {}),
                  ("status", {}), ("median ms", {"justify": "right"}), ("GFLOP/s", {"justify": "right"}),
                  ("vs base", {"justify": "right"}), ("error", {"max_width": 40, "no_wrap": True, "overflow": "ellipsis"})):
        kw.setdefault("overflow", "fold")
        table.add_column(c, **kw)
    for r in rows:
        style = "red" if r.category in ("failed", "unreadable") else None
        table.add_row(str(r.index), r.kernel or "", r.params_text, r.shape_text, r.status,
                      _fmt(r.median_ms, ".5f"), _fmt(r.gflops, ".1f"),
                      f"{r.ratio_to_baseline:.3f}x" if r.ratio_to_baseline else "",
                      (r.error or "").splitlines()[0][:200] if r.error else "", style=style)
    console.print(table)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="One table (CSV + Markdown) and plots from gemmlab result.json records: "
        "run directories, sweep directories (any nesting), or result.json files.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="run/sweep directory or result.json file")
    p.add_argument("--out", metavar="DIR", help="new report directory (default: ./gemmlab-report-<UTC time>); "
                   "an existing directory is refused")
    return p


def _default_out() -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path(f"gemmlab-report-{stamp}")


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point (``gemmlab-report``). Returns the exit status: 0 report written,
    1 no ``result.json`` found, 2 bad arguments."""
    args = _parser().parse_args(argv)

    def fail(code: int, msg: str) -> int:
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return code

    for p in args.paths:
        if not os.path.exists(p):
            return fail(2, f"{p}: no such file or directory")
    if args.out is not None and os.path.lexists(args.out):
        return fail(2, f"{args.out}: already exists; give --out a new directory (a report is never overwritten)")

    try:
        rows = collect(args.paths)
    except FileNotFoundError as exc:  # removed between the check and the walk
        return fail(2, f"{exc}: no such file or directory")
    if not rows:
        return fail(1, f"no {RECORD_NAME} found under " + ", ".join(args.paths))

    if args.out is not None:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            return fail(2, f"{args.out}: already exists; give --out a new directory (a report is never overwritten)")
        except OSError as exc:
            return fail(2, f"{args.out}: cannot create: {exc.strerror or exc}")
    else:
        base = _default_out()
        for i in range(1, 1000):
            out = base if i == 1 else base.with_name(f"{base.name}-{i}")
            try:
                out.mkdir(parents=True, exist_ok=False)
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover
            return fail(2, f"{base}: already exists; use --out")

    written = write_report(rows, out, sources=args.paths)
    from rich.console import Console
    console = Console(width=None if sys.stdout.isatty() else 160)
    print_table(rows, console)
    n = counts(rows)
    console.print(f"{len(rows)} records: {n['timed']} valid timed, {n['compiled']} compiled only, "
                  f"{n['failed']} failed, {n['other']} other valid, {n['unreadable']} unreadable; "
                  f"{sum(len(r.unread) for r in rows)} field(s) could not be read (see report.md)",
                  highlight=False)
    for name, path in written.items():
        console.print(f"  {name:20s} {path}", highlight=False, soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
