"""Nsight Compute counters of a few gemmlab points, one table (a device-call step).

    python3 .ci/ncu_points.py OUT LABEL='OVERRIDES' [LABEL='OVERRIDES' ...]

Each point is a plain gemmlab run (graph timing, 2 warm-up, 3 samples x 10 launches) under
``ncu --clock-control none --cache-control none`` (no clock lock, no cache flush: gemmlab's own
conditions) with the METRICS below (or the comma-separated $NCU_METRICS) that this ncu lists (``--query-metrics``). Per point the
kernel with the most profiled launches is kept (the GEMM itself, not fills or checks) and each
metric's median over its launches is printed; raw CSVs stay in OUT.
"""
from __future__ import annotations

import csv
import io
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sector_hit_rate.pct",
           "lts__t_bytes.sum", "sm__pipe_tensor_op_hgmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
           "sm__cycles_active.avg", "gpc__cycles_elapsed.max", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "sm__inst_executed_pipe_tensor.sum"]


def read_csv(path: Path) -> dict[str, dict[str, list[float]]]:
    """``{kernel name: {metric name: [value per profiled launch]}}`` of an ``ncu --csv`` log (its
    details page: one row per launch and metric; rows before the ``"ID"`` header are ncu's own
    output). Values in ncu's unit with thousands separators removed, except times (unit nsecond,
    usecond, msecond or second), which are converted to nanoseconds; non-numbers skipped."""
    text = path.read_text(errors="replace") if path.exists() else ""
    start = text.find('"ID"')
    values: dict[str, dict[str, list[float]]] = {}
    for row in csv.DictReader(io.StringIO(text[start:] if start >= 0 else "")):
        try:
            v = float(str(row.get("Metric Value", "")).replace(",", ""))
        except ValueError:
            continue
        v *= {"usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(row.get("Metric Unit", ""), 1.0)
        values.setdefault(row.get("Kernel Name", "?"), {}).setdefault(row.get("Metric Name", "?"), []).append(v)
    return values


def main(argv: list[str]) -> None:
    out = Path(argv[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    query = subprocess.run([ncu, "--query-metrics", "--chip", "gh100"], capture_output=True, text=True, timeout=60).stdout
    bases = {w.strip('",') for w in query.split()}
    wanted = [m for m in os.environ.get("NCU_METRICS", "").split(",") if m] or METRICS
    metrics = [m for m in wanted if m.split(".")[0] in bases] or ["gpu__time_duration.sum"]
    print("metrics:", ",".join(metrics), flush=True)
    table = []
    for spec in argv[1:]:
        label, overrides = spec.split("=", 1)
        log = out / f"{label}.csv"
        cmd = [ncu, "--clock-control", "none", "--cache-control", "none", "--metrics", ",".join(metrics), "--csv",
               "--log-file", str(log), sys.executable, "-m", "gemmlab", *overrides.split(), "timing.mode=graph",
               "timing.floor=false", "timing.warmup=2", "timing.repeat=3", "timing.batch=10", "cache.enabled=false",
               f"hydra.run.dir={out / ('run-' + label)}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        (out / f"{label}.stdout").write_text(proc.stdout[-20000:] + proc.stderr[-20000:])
        values = read_csv(log)
        if not values:
            table.append((label, "no ncu rows", {}))
            continue
        name, per = max(values.items(), key=lambda kv: len(kv[1].get("gpu__time_duration.sum", [])))
        table.append((label, name[:50], {m: (statistics.median(v), len(v)) for m, v in per.items()}))
        print(label, name[:80], {m: statistics.median(v) for m, v in per.items()}, flush=True)
    print("\npoint | kernel | " + " | ".join(metrics) + " | launches")
    for label, name, med in table:
        n = max((c for _, c in med.values()), default=0)
        print(" | ".join([label, name] + [f"{med[m][0]:.4g}" if m in med else "-" for m in metrics] + [str(n)]))


if __name__ == "__main__":
    main(sys.argv[1:])
