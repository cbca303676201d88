"""GPU evidence for the relayout path (branch relayout), in one device call, after the gpu tests:

    python .ci/relayout_evidence.py OUT_DIR [--budget SECONDS]

1. the copy kernels of kernels/include/gemmlab/relayout.cuh alone (events, median of 20 launches
   after 3 warm-ups): the TF32 transpose of a row-major B at 4096^2 and 8192^2 and the BF16 pads of
   the odd shapes' operands, in GB/s of bytes read + written;
2. gemmlab's one point runner per case (``gemmlab.run.session.Session.run_point``: NaN-filled C,
   float64 verification, timing=graph, cuBLAS in the same precision and layout, same process): wgmma_tf32 row/row (transpose in the plan) and
   row/col (no copy) at 4096^3 and 8192^3; wgmma_bf16 row/row at 4095x4097x1023, 1000x3000x777,
   2047x1025x513 (pad copies in the plan) next to mma_bf16 at the same shapes and wgmma_bf16 at
   the aligned neighbour shapes (no copy).
Records under OUT_DIR/records/<case>/ and in OUT_DIR/records.jsonl.xz (gemmlab's record archive),
rows in OUT_DIR/summary.json; a short table last.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the points run in this process (``isolation.process: false``): step 1 opened the GPU here (the
#: copy kernels' own launches and events), so a point in a worker process would share the GPU with
#: this one and the shared-GPU check (timing.shared=refuse) would refuse its timing
ISOLATION = {"process": False}
TIMING = {"mode": "graph", "l2": "warm", "warmup": 5, "repeat": 7, "batch": 10, "floor": False}
CASES = [  # kernel, precision, layout_b, shape, cuBLAS baseline
    ("wgmma_tf32", "tf32", "row", (4096, 4096, 4096), True),
    ("wgmma_tf32", "tf32", "col", (4096, 4096, 4096), True),
    ("wgmma_tf32", "tf32", "row", (8192, 8192, 8192), True),
    ("wgmma_tf32", "tf32", "col", (8192, 8192, 8192), True),
    ("wgmma_bf16", "bf16", "row", (4095, 4097, 1023), True),
    ("mma_bf16", "bf16", "row", (4095, 4097, 1023), False),
    ("wgmma_bf16", "bf16", "row", (4096, 4104, 1024), False),
    ("wgmma_bf16", "bf16", "row", (1000, 3000, 777), True),
    ("mma_bf16", "bf16", "row", (1000, 3000, 777), False),
    ("wgmma_bf16", "bf16", "row", (1000, 3000, 784), False),
    ("wgmma_bf16", "bf16", "row", (2047, 1025, 513), True),
    ("mma_bf16", "bf16", "row", (2047, 1025, 513), False),
    ("wgmma_bf16", "bf16", "row", (2048, 1032, 520), False),
    ("wgmma_bf16", "bf16", "col", (4095, 4097, 1023), True),
]


def label(case) -> str:
    kernel, precision, layout_b, shape, _ = case
    return f"{kernel}-{precision}-r{layout_b[0]}-{'x'.join(map(str, shape))}"


def copy_kernels(out: Path) -> list[dict]:
    """Time each relayout step alone (events), as the plugins would build it."""
    import numpy as np
    from gemmlab.contract.hookspecs import Problem, Shape
    from gemmlab.contract.relayout import tma_operand
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.gpu.device import open_gpu
    from gemmlab.contract.hookspecs import KernelOptions
    src = Path("/tmp/relayout_only.cu")
    src.write_text('#include "gemmlab/relayout.cuh"\n')
    gpu = open_gpu()
    items = [("tf32 B transpose 4096x4096", Problem(Shape(4096, 4096, 4096), "tf32", "row", "row"), "B", True),
             ("tf32 B transpose 8192x8192", Problem(Shape(8192, 8192, 8192), "tf32", "row", "row"), "B", True),
             ("bf16 A pad 4095x1023", Problem(Shape(4095, 4097, 1023), "bf16", "row", "row"), "A", False),
             ("bf16 B pad 1023x4097", Problem(Shape(4095, 4097, 1023), "bf16", "row", "row"), "B", False),
             ("bf16 A pad 1000x777", Problem(Shape(1000, 3000, 777), "bf16", "row", "row"), "A", False),
             ("bf16 A pad 2047x513", Problem(Shape(2047, 1025, 513), "bf16", "row", "row"), "A", False),
             ("bf16 B pad 513x1025", Problem(Shape(2047, 1025, 513), "bf16", "row", "row"), "B", False)]
    rows = []
    for what, problem, matrix, k_major in items:
        op = tma_operand(problem, matrix, (64, 64) if problem.precision == "bf16" else (128, 32), k_major=k_major,
                         sm_count=gpu.facts.sm_count)
        step = op.copy
        compiled = compile_kernel(src, step.entry, CompileOptions.for_kernel("90", KernelOptions()))
        r, c = problem.stored_shape(matrix)
        nbytes_src, nbytes_dst = r * c * problem.ab_bytes, op.region.nbytes
        sbuf, dbuf = gpu.allocate(nbytes_src), gpu.allocate(nbytes_dst + 256)
        gpu.fill32(int(sbuf.handle), 0x3F800000, nbytes_src // 4)
        loaded = gpu.load(compiled.object_code, step.entry, 0)
        args = (np.uint64(int(sbuf.handle)), np.uint64(int(dbuf.handle)),
                *(np.int32(v.value) for v in step.arguments[2:6]))
        launch = gpu.launcher(loaded, step.launch, args)
        for _ in range(3):
            launch()
        from cuda.core import EventOptions
        timed = EventOptions(timing_enabled=True)  # the first device call lacked this (no copy-only times)
        ms = []
        for _ in range(20):
            e0 = gpu.stream.record(options=timed)
            launch()
            e1 = gpu.stream.record(options=timed)
            e1.sync()
            ms.append(e1 - e0)
        gpu.sync()
        med = float(np.median(ms))
        rows.append({"copy": what, "entry": step.entry, "grid": list(step.launch.grid), "bytes_read": nbytes_src,
                     "bytes_written": nbytes_dst, "median_ms": med, "min_ms": float(min(ms)),
                     "gb_per_s": (nbytes_src + nbytes_dst) / (med * 1e-3) / 1e9})
        print(f"COPY {what:28s} {step.entry:36s} {med * 1e3:8.1f} us  {rows[-1]['gb_per_s']:7.0f} GB/s", flush=True)
        sbuf.close()
        dbuf.close()
    return rows


def summarize(case, rec: dict) -> dict:
    kernel, precision, layout_b, shape, _ = case
    flops = 2.0 * shape[0] * shape[1] * shape[2]
    t = (rec.get("timing") or {}).get("median_ms")
    base = ((rec.get("baseline") or {}).get("timing") or {}).get("median_ms")
    ver = rec.get("verification") or {}
    return {"case": label(case), "kernel": kernel, "precision": precision, "layout": f"row/{layout_b}",
            "shape": list(shape), "status": rec.get("status"), "error": rec.get("error"),
            "verified": ver.get("passed"), "plan": rec.get("plan"), "workspace_bytes": rec.get("workspace_bytes"),
            "median_ms": t, "tflops": flops / (t * 1e-3) / 1e12 if t else None, "cublas_ms": base,
            "cublas_tflops": flops / (base * 1e-3) / 1e12 if base else None,
            "pct_of_cublas": 100.0 * base / t if t and base else None}


def main() -> int:
    out = Path(sys.argv[1])
    budget = float(sys.argv[sys.argv.index("--budget") + 1]) if "--budget" in sys.argv else 120.0
    deadline = time.time() + budget
    out.mkdir(parents=True, exist_ok=True)
    summary = {"copies": [], "cases": []}
    try:
        summary["copies"] = copy_kernels(out)
    except Exception as exc:  # the pipeline cases still run
        print(f"COPY timing failed: {type(exc).__name__}: {exc}", flush=True)
    from gemmlab.run.session import Session
    session = Session()
    for case in CASES:
        if time.time() > deadline:
            print(f"SKIP {label(case)}: budget", flush=True)
            continue
        kernel, precision, layout_b, shape, with_base = case
        cfg = {"kernel": {"name": kernel}, "shape": list(shape), "precision": precision,
               "layout": {"a": "row", "b": layout_b}, "timing": TIMING, "baseline": "cublas" if with_base else None,
               "isolation": dict(ISOLATION)}
        if os.environ.get("RELAYOUT_COMPILE_ONLY"):  # a dry run without a GPU
            cfg.update(mode="compile", baseline=None)
        started = time.time()
        try:
            rec = session.run_point(cfg, out / "records" / label(case))
        except Exception as exc:
            rec = {"status": "harness_error", "error": f"{type(exc).__name__}: {exc}"}
        row = summarize(case, rec)
        row["wall_s"] = round(time.time() - started, 1)
        summary["cases"].append(row)
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        print(f"CASE {row['case']:42s} {row['status']:8s} {row['wall_s']:5.1f}s", flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    from gemmlab.stages.record_model import write_archive
    try:
        print(f"{write_archive(out / 'records', out / 'records.jsonl.xz')} records in {out / 'records.jsonl.xz'}")
    except (FileNotFoundError, FileExistsError) as exc:
        print(f"no archive: {exc}")
    print()
    print(f"{'case':42s} {'status':8s} {'ms':>8s} {'TFLOP/s':>8s} {'cuBLAS':>8s} {'%':>6s}  plan")
    for r in summary["cases"]:
        f = lambda v, d=1: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
        plan = ", ".join(p.split("(")[1].split(")")[0] if p.startswith("relayout") else "main" for p in (r["plan"] or []))
        print(f"{r['case']:42s} {r['status']:8s} {f(r['median_ms'], 3):>8s} {f(r['tflops']):>8s} "
              f"{f(r['cublas_tflops']):>8s} {f(r['pct_of_cublas']):>6s}  {plan}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
