"""Sweep summary: collect every point's ``result.json`` under a sweep directory into one table,
print it (rich) and save it as ``summary.csv`` and ``summary.md`` in the sweep directory.

Hooked into Hydra as a callback (``hydra.callbacks.gemmlab_summary`` in conf/config.yaml), so
it works with any launcher: it reads files, not in-process state.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

COLUMNS = ("point", "kernel", "shape", "params", "status", "median_ms", "gflops", "vs_baseline", "max_abs_error",
           "error")
FAILED_POINTS: list[str] = []  # set by the callback; the CLI turns it into the exit status


def _row(path: Path, root: Path) -> dict[str, Any]:
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"point": str(path.parent.relative_to(root)), "status": "unreadable", "error": str(exc)}
    kernel = rec.get("kernel") or {"name": (rec.get("config") or {}).get("kernel", {}).get("name", "?")}
    shape = rec.get("shape")
    timing = rec.get("timing") or {}
    ver = rec.get("verification") or {}
    return {"point": str(path.parent.relative_to(root)), "kernel": kernel.get("name"),
            "shape": "x".join(str(shape[d]) for d in "MNK") if shape else str((rec.get("config") or {}).get("shape")),
            "params": " ".join(f"{k}={v}" for k, v in (kernel.get("params") or {}).items()),
            "status": rec.get("status"),
            "median_ms": f"{timing['median_ms']:.5f}" if "median_ms" in timing else "",
            "gflops": f"{timing['gflops']:.1f}" if "gflops" in timing else "",
            "vs_baseline": (f"{rec['ratio_to_baseline']['median_time']:.3f}x {rec['ratio_to_baseline']['baseline']}"
                            if rec.get("ratio_to_baseline") else ""),
            "max_abs_error": f"{ver['max_abs_error']:.3g}" if isinstance(ver.get("max_abs_error"), float) else str(ver.get("max_abs_error", "")),
            "error": rec.get("error") or ""}


def collect(sweep_dir: Path) -> list[dict[str, Any]]:
    """One row per ``result.json`` found directly below ``sweep_dir`` (sorted by job number)."""
    sweep_dir = Path(sweep_dir)
    paths = sorted(sweep_dir.glob("*/result.json"),
                   key=lambda p: (int(p.parent.name) if p.parent.name.isdigit() else 1 << 30, p.parent.name))
    return [_row(p, sweep_dir) for p in paths]


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")).replace("|", "\\|") for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def write_summary(sweep_dir: Path) -> list[dict[str, Any]]:
    """Collect, print and save the summary of ``sweep_dir``; return the rows."""
    from rich.console import Console
    from rich.table import Table

    rows = collect(sweep_dir)
    with open(Path(sweep_dir) / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (Path(sweep_dir) / "summary.md").write_text(markdown(rows))
    table = Table(title=f"gemmlab sweep: {sweep_dir}", show_lines=False)
    for c in COLUMNS:
        table.add_column(c, overflow="fold", max_width=60 if c == "error" else None)
    for r in rows:
        style = None if r.get("status") in ("ok", "compiled") else "red"
        table.add_row(*(str(r.get(c, "")) for c in COLUMNS), style=style)
    Console(width=200).print(table)
    return rows


class SweepSummary(Callback):
    """Hydra callback: at the end of a multirun, summarise the sweep directory."""

    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        rows = write_summary(sweep_dir)
        failed = [r["point"] for r in rows if r.get("status") not in ("ok", "compiled")]
        timed = sum(r.get("status") == "ok" for r in rows)
        FAILED_POINTS.extend(failed)
        print(f"{len(rows)} points: {timed} verified and timed, {len(rows) - len(failed) - timed} compiled only, "
              f"{len(failed)} failed; summary: {sweep_dir / 'summary.md'}")
