"""The measurement-protocol evidence run (issue 3), on the GPU machine:

    python3 .ci/evidence.py OUT_DIR [tables|ncu|broken|all]

tables: naive, tiled, ladder_strip and cublas at 256^3, 1024^3, 4096^3, each kernel measured
        with baseline=cublas in one process, timing mode "both" (events and graph), launch floor,
        telemetry -> OUT_DIR/protocol-h200.md
ncu:    tiled and cublas at 1024^3 and 4096^3: gemmlab's graph-mode median per launch (plain run)
        vs the median of ncu's gpu__time_duration.sum (ncu --clock-control none) over the same
        kind of launches -> OUT_DIR/ncu-h200.md
broken: the four broken tiled variants and which net caught each -> OUT_DIR/broken-h200.md

Every point runs through gemmlab's one point runner (:meth:`gemmlab.run.session.Session.run_point`,
as the ``gemmlab`` command's points: each in the session's worker process, never in this one, which
opens no GPU); before each ncu run the worker is stopped, so the profiled ``gemmlab`` process is the
only one with a context on the GPU (its point would otherwise be refused ``shared_gpu``). The
records are packed into OUT_DIR/records.jsonl.xz (:func:`gemmlab.stages.record_model.write_archive`,
what ``gemmlab-report --archive`` writes; the point folders stay under OUT_DIR/runs/).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from gemmlab.run.session import Session
from gemmlab.stages.record_model import write_archive

import ncu_points  # .ci/ncu_points.py: the ncu CSV reader (this script runs as python3 .ci/evidence.py)

SIZES = (256, 1024, 4096)
KERNELS = ("naive", "tiled", "ladder_strip", "cublas")
REPO = Path(__file__).resolve().parents[1]
SESSION = Session()  # the one point runner: each point in the session's worker process


def _cfg(kernel, n, **over):
    cfg = {"kernel": {"name": kernel}, "shape": [n, n, n], "mode": "run",
           "timing": {"mode": "both", "warmup": 5, "repeat": 10, "batch": 20, "floor": True}}
    cfg.update(over)
    return cfg


def tables(out: Path) -> None:
    rows = []
    for n in SIZES:
        for kernel in KERNELS:
            over = {} if kernel == "cublas" else {"baseline": "cublas"}
            rec = SESSION.run_point(_cfg(kernel, n, **over), out / "runs" / f"{kernel}-{n}")
            t = rec.get("timing") or {}
            p = t.get("protocols") or {}
            ratio = rec.get("ratio_to_baseline", {}).get("median_time", 1.0 if kernel == "cublas" else None)
            regs = ((rec.get("compile") or {}).get("driver_attributes") or {}).get("registers", "lib")
            occ = (rec.get("occupancy") or {}).get("theoretical_occupancy", "lib")
            throttled = t.get("protocols", {}).get("graph", {}).get("throttled_samples")
            rows.append([kernel, f"{n}³", rec["status"],
                         f"{p['events']['median_ms']:.5f}" if "events" in p else "",
                         f"{p['graph']['median_ms']:.5f}" if "graph" in p else "",
                         f"{t.get('launch_floor_ms', {}).get('graph', float('nan')):.5f}" if t else "",
                         f"{t.get('host_overhead_per_launch_ms', float('nan')) * 1e3:.2f}" if t else "",
                         f"{t['gflops']:.0f}" if t else "", f"{ratio:.3f}" if ratio else "",
                         regs, occ, f"{(rec.get('roofline') or {}).get('pct_fp32_peak')}",
                         throttled, t.get("median_sm_mhz"), rec.get("error") or ""])
            print(rows[-1], flush=True)
    head = ["kernel", "shape", "status", "events ms", "graph ms", "floor ms (graph)", "host overhead us/launch",
            "GFLOP/s (graph)", "time / cuBLAS time", "registers", "occupancy", "% FP32 peak", "throttled samples",
            "median SM MHz", "error"]
    _write_md(out / "protocol-h200.md", "Measurement protocol on the H200", head, rows,
              "Each kernel ran with baseline=cublas (alternate samples, same inputs) in timing mode both "
              "(events and graph replay), seed counts (5 warm-up, 10 samples x 20 launches), L2 warm, N(0,1) "
              "inputs. 'time / cuBLAS time' = kernel median / cuBLAS median, graph protocol, same process. "
              "Registers/occupancy from the driver; 'lib' = library kernel.")


def _ncu_median(kernel: str, n: int, work: Path) -> tuple[float, int, str]:
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    log = work / f"ncu-{kernel}-{n}.csv"
    cmd = [ncu, "--clock-control", "none", "--cache-control", "none", "--metrics", "gpu__time_duration.sum",
           "--csv", "--log-file", str(log),
           sys.executable, "-m", "gemmlab", f"kernel={kernel}", f"shape=[{n},{n},{n}]", "timing.mode=graph",
           "timing.floor=false", "timing.warmup=2", "timing.repeat=3", "timing.batch=10",
           f"hydra.run.dir={work / f'ncu-run-{kernel}-{n}'}"]
    subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=work)
    # gpu__time_duration.sum: nanoseconds (read_csv converts ncu's time units) -> ms
    durations = {name: [v * 1e-6 for v in per.get("gpu__time_duration.sum", [])]
                 for name, per in ncu_points.read_csv(log).items() if per.get("gpu__time_duration.sum")}
    if not durations:
        return float("nan"), 0, "no ncu rows"
    name, values = max(durations.items(), key=lambda kv: len(kv[1]))
    return statistics.median(values), len(values), name[:60]


def ncu(out: Path, points=(("tiled", 1024), ("tiled", 4096), ("cublas", 1024), ("cublas", 4096))) -> None:
    rows = []
    for kernel, n in points:
        if True:
            rec = SESSION.run_point({"kernel": {"name": kernel}, "shape": [n, n, n], "mode": "run",
                                     "timing": {"mode": "graph", "warmup": 5, "repeat": 10, "batch": 20, "floor": False}},
                                    out / "runs" / f"ncu-ref-{kernel}-{n}")
            ours = rec["timing"]["median_ms"] if rec["status"] == "ok" else float("nan")
            SESSION.close()  # no worker holds a context while ncu profiles its own gemmlab process
            theirs, count, name = _ncu_median(kernel, n, out)
            diff = 100 * (ours - theirs) / theirs if theirs == theirs and theirs > 0 else float("nan")
            rows.append([kernel, f"{n}³", f"{ours:.5f}", f"{theirs:.5f}", count, f"{diff:+.2f}%",
                         "yes" if abs(diff) <= 2 else "NO", name])
            print(rows[-1], flush=True)
    _write_md(out / "ncu-h200.md", "gemmlab graph-mode timing vs Nsight Compute", [
        "kernel", "shape", "gemmlab graph median ms/launch", "ncu gpu__time_duration median ms", "ncu launches",
        "difference", "within 2%", "profiled kernel"], rows,
        "gemmlab: graph protocol, 10 samples x 20 launches, L2 warm, in a plain process. ncu: "
        "`ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum` (no cache flush "
        "between launches, matching gemmlab's warm L2) over a separate gemmlab run "
        "(graph protocol, 2 warm-up, 3 samples x 10 launches; every launch profiled), median over "
        "the launches of the most frequent kernel. ncu serialises and replays each launch.")


def broken(out: Path) -> None:
    cases = [("tiled_no_second_barrier", 64, 64, 512, "racecheck"), ("tiled_no_store_mask", 63, 65, 33, None),
             ("tiled_no_zero_pad_a", 31, 33, 17, None), ("tiled_drop_last_chunk", 63, 65, 33, None),
             ("tiled", 64, 64, 512, "racecheck")]
    rows = []
    for name, m, n, k, san in cases:
        rec = SESSION.run_point({"kernel": {"name": name}, "shape": [m, n, k], "mode": "run", "sanitizer": san,
                                 "plugin_dirs": [str(REPO / "tests" / "broken")],
                                 "timing": {"warmup": 1, "repeat": 3, "batch": 2}}, out / "runs" / f"broken-{name}")
        v = rec.get("verification") or {}
        fired = list(rec.get("nets_fired") or [])
        if rec["status"] == "sanitizer_errors":
            fired.append(f"compute-sanitizer {san} ({rec['sanitizer'].get('errors')} errors)")
        if rec["status"] == "unstable":
            fired.append("repeat stability")
        net = ", ".join(fired) or "none (passes)"
        rows.append([name, f"({m},{n},{k})", san or "-", rec["status"], net, v.get("mismatches", ""),
                     v.get("nan_outputs", ""), (rec.get("error") or "")[:150]])
        print(rows[-1], flush=True)
    _write_md(out / "broken-h200.md", "Broken tiled variants and the net that caught each", [
        "kernel", "shape (M,N,K)", "sanitizer", "status", "caught by", "mismatches", "NaN outputs", "error"], rows,
        "Each variant is kernels/tiled.cu with one textual edit (tests/broken/broken_tiled.py). The last row "
        "is the unbroken kernel under the same racecheck, for contrast.")


def _write_md(path: Path, title: str, head, rows, note: str) -> None:
    lines = [f"# {title}", "", note, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    what = sys.argv[2] if len(sys.argv) > 2 else "all"
    try:
        if what == "ncu-repeat":  # the same comparison again, to see its run-to-run spread
            ncu(out, points=(("cublas", 1024), ("tiled", 1024), ("cublas", 1024)))
        else:
            for step in (("tables", tables), ("broken", broken), ("ncu", ncu)):
                if what in (step[0], "all"):
                    step[1](out)
    finally:
        SESSION.close()
        try:  # one archive of every record this output folder holds (a re-run's folder: not overwritten)
            print(f"{write_archive(out / 'runs', out / 'records.jsonl.xz')} records in {out / 'records.jsonl.xz'}")
        except (FileNotFoundError, FileExistsError) as exc:
            print(f"no archive: {exc}")
    (out / "done.json").write_text(json.dumps({"steps": what}))
