"""Issue 8 (float32 CUDA-core ladder), the fp32b branch's device call: sgemm_pipelined's shipped
instance and its candidates, in one process, then the inputs of an Nsight Compute run.

    python3 .ci/fp32_final.py time OUT [--budget S] [--sizes 4096,8192] [--baseline cublas]
    python3 .ci/fp32_final.py ncu-target OUT TAG [TAG ...]   # run under ncu (check-only points)
    python3 .ci/fp32_final.py ncu-table RAW.csv [--out FILE]
    python3 .ci/fp32_final.py metrics [QUERY_METRICS_OUTPUT]   # the ncu metric list

``time``: every candidate is compiled up front (threads), verified on the partial-tile suite
(check-only points: verification against float64, guard bands, no timing), then timed at the
first size (4096^3) against cuBLAS in the same process (graph timing, sampled verification); at
the second size (8192^3) the shipped instance and the two best candidates of the first size.
Writes OUT/<phase>/<name>/result.json per point, OUT/table.json, OUT/best.json (the candidate
with the highest min(% of cuBLAS at 4096^3, at 8192^3) among those measured at both) and prints
a short table last. New points stop starting after --budget seconds; a failing point records its
failure and the run goes on.

``ncu-target``: the given candidates (and ``cublas``) at 4096^3 as check-only points: each
kernel launches once for verification, the launch ncu profiles (``-k`` filter in
.ci/fp32_final.sh).

``ncu-table``: the per-kernel table of ncu's raw CSV page (``ncu -i REP --csv --page raw``):
duration, issue activity, eligible warps, the stall reasons per issued instruction
(``smsp__average_warps_issue_stalled_*_per_issue_active.ratio``, counters, no PC sampling),
shared-memory bank conflicts and wavefronts.

Predictions (% of cuBLAS, written before the call; docs/results/ladder-h200/predictions-fp32b.md
says why) are part of CANDIDATES and printed beside the measurements.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

KERNEL = "sgemm_pipelined"
# tag: (parameters over sgemm_pipelined's defaults AT THE TIME OF THE CALL (MINB=3; "m4" has been the
# shipped default since: the "shipped" tag pins MINB=3 so a re-run measures the same instances),
# predicted % of cuBLAS at 4096^3, at 8192^3)
CANDIDATES = {
    "shipped": ({"MINB": 3}, "94.8+-0.7", "98.6+-1"),
    "st3": ({"STAGES": 3, "MINB": 3}, "95.0+-1", "98.5+-1"),
    "b128": ({"BM": 128, "MINB": 2}, "95.0+-1", "98+-1.5"),
    "m4": ({"MINB": 4}, "95.5+-1.5", "98.5+-1"),
    "m4st3": ({"MINB": 4, "STAGES": 3}, "95.5+-1.5", "98.5+-1"),
    "bk32": ({"BK": 32, "STAGES": 3, "MINB": 3}, "95.5+-1.5", "99+-1"),
    "m4bk32": ({"MINB": 4, "BK": 32, "STAGES": 2}, "95.5+-1.5", "99+-1"),
}
# the partial-tile suite of tests/test_ladder.py (+ interior blocks with K % BK != 0)
PARTIAL = [(1, 1, 1), (31, 33, 17), (63, 65, 33), (4097, 1, 3), (35, 79, 19), (100, 100, 100),
           (129, 260, 36), (512, 512, 100), (384, 512, 777)]
SHORT = [(31, 33, 17), (129, 260, 36), (384, 512, 777)]  # candidates whose copy code is the shipped one's
TIMED = {"mode": "graph", "warmup": 3, "repeat": 7, "batch": 5, "floor": False}


def lean(params: dict) -> bool:
    """Whether the instance takes the lean guarded copy (kernels/sgemm_pipelined.cu, LEAN)."""
    from gemmlab.contract.registry import load_registry
    p = {**load_registry(entry_points=False).get(KERNEL).defaults, **params}
    threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
    return 65536 // (threads * p["MINB"]) < 160


def cfg(kernel: str, shape, params: dict | None = None, **over) -> dict:
    c = {"kernel": {"name": kernel, **(params or {})}, "shape": list(shape), "mode": "run"}
    c.update(over)
    return c


def fmt_shape(shape) -> str:
    return "x".join(map(str, shape))


class Runner:
    """Runs points under a wall-clock budget and keeps one table row per point."""

    def __init__(self, out: Path, budget: float):
        self.out, self.deadline, self.rows, self.missing = out, time.monotonic() + budget, [], []

    def point(self, phase: str, tag: str, kernel: str, shape, params: dict | None, check_only=False,
              **over) -> dict | None:
        from gemmlab.run.pipeline import run_point
        name = f"{tag}-{fmt_shape(shape)}"
        if time.monotonic() > self.deadline:
            self.missing.append(f"{phase}/{name}")
            return None
        rec = run_point(cfg(kernel, shape, params, **over), self.out / phase / name, check_only=check_only)
        t = rec.get("timing") or {}
        ratio = (rec.get("ratio_to_baseline") or {}).get("gflops")
        drv = (rec.get("compile") or {}).get("driver_attributes") or {}
        occ = rec.get("occupancy") or {}
        row = {"phase": phase, "tag": tag, "shape": fmt_shape(shape), "status": rec.get("status"),
               "tflops": round(t["gflops"] / 1e3, 2) if t.get("gflops") else None,
               "pct_cublas": round(100 * ratio, 1) if ratio else None,
               "cublas_tflops": round(t["gflops"] / ratio / 1e3, 2) if t.get("gflops") and ratio else None,
               "regs": drv.get("registers"), "local_bytes": drv.get("local_bytes"),
               "blocks_per_sm": occ.get("max_active_blocks_per_sm"), "error": (rec.get("error") or "")[:120]}
        self.rows.append(row)
        print(" | ".join("" if v is None else str(v) for v in row.values()), flush=True)
        return rec


def precompile(tags) -> None:
    """Compile every candidate in threads (NVRTC), so the points find them in the process cache."""
    from concurrent.futures import ThreadPoolExecutor

    from gemmlab.contract.registry import load_registry
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    registry = load_registry(entry_points=False)
    spec = registry.get(KERNEL)
    entries = [spec.entry({**spec.defaults, **CANDIDATES[t][0]}) for t in tags]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(entries)) as pool:
        list(pool.map(lambda e: compile_kernel(registry.source_path(spec), e, CompileOptions(arch="90")), entries))
    print(f"precompiled {len(entries)} instances in {time.monotonic() - started:.1f} s", flush=True)


def ratio(rec: dict | None) -> float | None:
    if rec and rec.get("status") == "ok":
        return (rec.get("ratio_to_baseline") or {}).get("gflops")
    return None


def run_time(out: Path, budget: float, sizes: list[int], baseline: str) -> None:
    started = time.monotonic()
    r = Runner(out, budget)
    tags = list(CANDIDATES)
    try:
        precompile(tags)
    except Exception as exc:  # a compile error is recorded by the points themselves
        print(f"precompile failed: {str(exc).splitlines()[0][:200]}", flush=True)
    verified = []
    for tag in tags:
        params = CANDIDATES[tag][0]
        shapes = PARTIAL if tag == "shipped" or lean(params) else SHORT
        recs = [r.point("verify", tag, KERNEL, s, params, check_only=True) for s in shapes]
        if all(rec is not None and rec.get("status") == "checked" for rec in recs):
            verified.append(tag)
        else:
            print(f"{tag}: not verified on the partial-tile suite; not timed", flush=True)
    over = {"timing": TIMED, "baseline": baseline, "verify": {"method": "sampled"}}
    first = {}
    for tag in verified:
        first[tag] = ratio(r.point(f"time{sizes[0]}", tag, KERNEL, (sizes[0],) * 3, CANDIDATES[tag][0], **over))
    second = {}
    if len(sizes) > 1:
        ranked = sorted((t for t in first if t != "shipped" and first[t]), key=lambda t: -first[t])
        for tag in (["shipped"] if "shipped" in first else []) + ranked[:2]:
            second[tag] = ratio(r.point(f"time{sizes[1]}", tag, KERNEL, (sizes[1],) * 3, CANDIDATES[tag][0], **over))
    both = {t: min(first[t], second[t]) for t in second if first.get(t) and second.get(t)}
    if both:
        best = max(both, key=both.get)
    else:
        measured = [t for t in first if first[t]]
        best = max(measured, key=lambda t: first[t]) if measured else "shipped"
    summary = {"best": best, "best_params": CANDIDATES[best][0],
               "first": {t: first.get(t) for t in tags}, "second": second, "sizes": sizes,
               "predictions": {t: CANDIDATES[t][1:] for t in tags}}
    (out / "best.json").write_text(json.dumps(summary, indent=1))
    (out / "table.json").write_text(json.dumps({"rows": r.rows, "missing": r.missing}, indent=1))
    bad = [row for row in r.rows if row["status"] not in ("ok", "checked")]
    print(f"\n# time: {len(r.rows)} points in {time.monotonic() - started:.0f} s, {len(bad)} not ok, "
          f"{len(r.missing)} not started (budget)")
    for row in bad:
        print("NOT OK", row["phase"], row["tag"], row["shape"], row["status"], row["error"])
    print(f"BEST {best} {json.dumps(CANDIDATES[best][0])}")
    print(summary_table(r.rows))


def summary_table(rows: list[dict]) -> str:
    """candidate | params | predicted | measured at each size (TFLOP/s, % of cuBLAS) | regs | blocks/SM."""
    timed = [row for row in rows if row["phase"].startswith("time")]
    sizes = sorted({row["shape"] for row in timed}, key=lambda s: int(s.split("x")[0]))
    lines = ["tag | params | pred 4096/8192 % | " + " | ".join(f"{s.split('x')[0]}^3 TFLOP/s, %cuBLAS" for s in sizes)
             + " | regs | local B | blocks/SM"]
    for tag, (params, p1, p2) in CANDIDATES.items():
        got = {row["shape"]: row for row in timed if row["tag"] == tag}
        if not got:
            continue
        any_row = next(iter(got.values()))
        cells = []
        for s in sizes:
            row = got.get(s)
            cells.append("-" if row is None else (f"{row['tflops']}, {row['pct_cublas']}" if row["pct_cublas"]
                                                  else str(row["status"])))
        lines.append(f"{tag} | {json.dumps(params) if params else 'defaults'} | {p1} / {p2} | " + " | ".join(cells)
                     + f" | {any_row['regs']} | {any_row['local_bytes']} | {any_row['blocks_per_sm']}")
    return "\n".join(lines)


def run_ncu_target(out: Path, tags: list[str]) -> None:
    """Check-only points at 4096^3 (one launch each, for ncu): the candidates, then cuBLAS."""
    r = Runner(out, 1e9)
    try:
        precompile(tags)
    except Exception as exc:  # a compile error is recorded by the points themselves
        print(f"precompile failed: {str(exc).splitlines()[0][:200]}", flush=True)
    for tag in tags:
        r.point("ncu", tag, KERNEL, (4096,) * 3, CANDIDATES[tag][0], check_only=True, verify={"method": "sampled"})
    r.point("ncu", "cublas", "cublas", (4096,) * 3, None, check_only=True, verify={"method": "sampled"})


STALLS = ["barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
          "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
          "short_scoreboard", "sleeping", "tex_throttle", "wait"]
STALL_METRICS = [f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS]
OTHER_METRICS = [
    "gpu__time_duration.sum",
    "launch__registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.avg.per_cycle_active",
    "smsp__warps_active.avg.per_cycle_active",
    "smsp__warps_eligible.avg.per_cycle_active",
    "smsp__average_warp_latency_per_inst_issued.ratio",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    "lts__t_sector_hit_rate.pct",
]
METRICS = OTHER_METRICS + STALL_METRICS


def read_raw(path: Path) -> list[dict]:
    """Rows of ncu's raw CSV page: one dict per profiled kernel (the units row skipped)."""
    text = path.read_text(errors="replace").splitlines()
    start = next((i for i, line in enumerate(text) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.DictReader(text[start:]))
    return [row for row in rows if (row.get("ID") or "").strip().isdigit()]


def number(text: str | None) -> float | None:
    try:
        return float((text or "").replace(",", ""))
    except ValueError:
        return None


def short_name(name: str) -> str:
    if "sgemm_pipelined" in name:
        return "pipelined<" + name.split("<", 1)[1].split(">", 1)[0].replace(" ", "") + ">"
    return name[:40]


def ncu_table(raw: Path) -> str:
    """Metric rows x kernel columns (the metrics that are present), stalls sorted by the first kernel."""
    rows = read_raw(raw)
    if not rows:
        return f"ncu-table: no kernel rows in {raw}"
    names = [short_name(row.get("Kernel Name", "?")) for row in rows]
    present = [m for m in METRICS if any(number(row.get(m)) is not None for row in rows)]
    absent = [m for m in METRICS if m not in present]
    stalls = sorted((m for m in present if m in STALL_METRICS), key=lambda m: -(number(rows[0].get(m)) or 0))
    lines = ["metric | " + " | ".join(names)]
    for m in [m for m in present if m not in STALL_METRICS] + stalls:
        label = m.replace("smsp__average_warps_issue_stalled_", "stall ").replace("_per_issue_active.ratio", "")
        lines.append(label + " | " + " | ".join(row.get(m, "") or "" for row in rows))
    if absent:
        lines.append("absent: " + ", ".join(absent))
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    def opt(name, default):
        return argv[argv.index(name) + 1] if name in argv else default
    cmd = argv[0]
    if cmd == "time":
        out = Path(argv[1])
        sizes = [int(s) for s in opt("--sizes", "4096,8192").split(",")]
        run_time(out, float(opt("--budget", "1e9")), sizes, opt("--baseline", "cublas"))
    elif cmd == "ncu-target":
        unknown = [t for t in argv[2:] if t not in CANDIDATES]
        if unknown:
            raise SystemExit(f"unknown candidate(s) {unknown}; known: {list(CANDIDATES)}")
        run_ncu_target(Path(argv[1]), argv[2:])
    elif cmd == "ncu-table":
        text = ncu_table(Path(argv[1]))
        if "--out" in argv:
            Path(opt("--out", "")).write_text(text + "\n")
        print(text)
    elif cmd == "metrics":  # METRICS, less those whose base name `ncu --query-metrics` output lacks
        listed = Path(argv[1]).read_text(errors="replace").split() if len(argv) > 1 and Path(argv[1]).is_file() else []
        bases = {word.strip('",') for word in listed}
        keep = [m for m in METRICS if m.split(".")[0] in bases]  # none if the query failed: sections only
        print(",".join(keep))
    else:
        raise SystemExit(f"unknown command {cmd!r}: time | ncu-target | ncu-table | metrics")


if __name__ == "__main__":
    main(sys.argv[1:])
