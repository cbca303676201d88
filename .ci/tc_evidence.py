"""GPU evidence for the tensor-core / contract-v2 proof kernels, in one device call.

    python .ci/tc_evidence.py OUT_DIR [--budget SECONDS]

For every case (kernel, precision, layout, shape) it runs a gemmlab point through the one point
runner (``gemmlab.run.session.Session.run_point`` around ``gemmlab.run.pipeline.run_point``:
NaN-filled C, verification against float64 of the rounded inputs, timing=graph, baseline=cublas in
the same precision and layout at the large shapes) and keeps the result.json under
OUT_DIR/records/<case>/ (packed into OUT_DIR/records.jsonl.xz at the end, gemmlab's record archive). When a point fails, a direct harness
(gemmlab.gpu.device's Gpu, own float64 reference of the rounded inputs) re-runs the kernel alone to
tell a kernel bug from a pipeline bug and prints where the result differs. Each kernel family runs
in its own child process (a kernel fault poisons only its own CUDA context); a time budget skips
what would not fit. Optional compute-sanitizer racecheck/memcheck on small shapes at the end.
The last thing printed is a short table; OUT_DIR/summary.json holds every row.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SMALL = [(31, 33, 17), (63, 65, 33), (100, 100, 100), (4097, 1, 3)]
BIG = [(1024, 1024, 1024), (4096, 4096, 4096)]
TMA_SMALL = [(31, 33, 24), (100, 100, 104), (65, 129, 200), (4097, 1, 8)]

# tile/pipeline variants timed at 4096^3 (and verified at a partial-tile shape) to pick the defaults
BF16_VARIANTS = [{"BN": 256, "WN": 64, "STAGES": 3}, {"STAGES": 8}, {"BN": 256, "WN": 64, "STAGES": 6},
                 {"BN": 256, "WN": 64, "BK": 64, "STAGES": 4}, {"BK": 64, "STAGES": 4},
                 {"BM": 256, "WN": 64, "STAGES": 6}, {"WN": 64, "MIN_BLOCKS": 2}]
TF32_VARIANTS = [{"STAGES": 5}, {"BN": 256, "WN": 64, "STAGES": 4}, {"BK": 16, "STAGES": 8},
                 {"BM": 256, "WN": 64, "STAGES": 4}]
# group -> list of (kernel, precision, layout_b, shape, param overrides, with cuBLAS baseline)
GROUPS = {
    "mma_bf16": [("mma_bf16", "bf16", "row", s, {}, False) for s in SMALL]
    + [("mma_bf16", "bf16", "row", s, {}, True) for s in BIG]
    + [("mma_bf16", "bf16", "col", s, {}, b) for s, b in ((SMALL[1], False), (SMALL[2], False), (BIG[1], True))]
    + [("mma_bf16", "fp16", "row", s, {}, b) for s, b in ((SMALL[0], False), (BIG[1], True))]
    + [("mma_bf16", "bf16", "row", shape, v, shape == BIG[1]) for v in BF16_VARIANTS for shape in ((63, 65, 33), BIG[1])],
    "mma_tf32": [("mma_tf32", "tf32", "row", s, {}, False) for s in SMALL]
    + [("mma_tf32", "tf32", "row", s, {}, True) for s in BIG]
    + [("mma_tf32", "tf32", "col", s, {}, b) for s, b in ((SMALL[0], False), (SMALL[2], False), (BIG[1], True))]
    + [("mma_tf32", "tf32", "row", shape, v, shape == BIG[1]) for v in TF32_VARIANTS for shape in ((63, 65, 33), BIG[1])],
    "tma_bf16": [("tma_bf16", "bf16", "col", s, {}, False) for s in TMA_SMALL]
    + [("tma_bf16", "bf16", "col", s, {}, True) for s in BIG]
    + [("tma_bf16", "bf16", "col", BIG[1], {"BN": 64}, True)]
    + [("tma_bf16", "bf16", "col", (100, 100, 100), {}, False)],  # refused: K % 8
    "splitk": [("splitk", "fp32", "row", s, {}, False) for s in SMALL]
    + [("splitk", "fp32", "row", s, {}, True) for s in BIG]
    + [("splitk", "fp32", "row", (1, 1792, 5120), {"SPLITS": 16}, True),
       ("splitk", "fp32", "row", (64, 64, 16384), {"SPLITS": 32}, True)],
    "cluster_tiled": [("cluster_tiled", "fp32", "row", s, {}, False) for s in SMALL]
    + [("cluster_tiled", "fp32", "row", s, {}, True) for s in BIG],
}
TIMING = {"mode": "both", "l2": "warm", "warmup": 5, "repeat": 7, "max_repeat": None, "target_rel_spread": None,
          "budget_s": None, "batch": 10, "floor": True}


def label(case) -> str:
    kernel, precision, layout_b, shape, over, _ = case
    extra = "".join(f"-{k}{v}" for k, v in over.items())
    return f"{kernel}-{precision}-r{layout_b[0]}-{'x'.join(map(str, shape))}{extra}"


def summarize(case, rec: dict) -> dict:
    kernel, precision, layout_b, shape, over, _ = case
    ver = rec.get("verification") or {}
    t = rec.get("timing") or {}
    base = rec.get("baseline") or {}
    ratio = rec.get("ratio_to_baseline") or {}
    comp = rec.get("compile") or {}
    attrs = comp.get("driver_attributes") or {}
    hist = ((comp.get("sass") or {}).get("histogram")) or {}
    flops = 2.0 * shape[0] * shape[1] * shape[2]
    return {"case": label(case), "kernel": kernel, "precision": precision, "layout": f"row/{layout_b}",
            "shape": list(shape), "params": over, "status": rec.get("status"), "error": rec.get("error"),
            "max_err_over_tol": ver.get("max_error_over_tolerance"), "max_abs_err": ver.get("max_abs_error"),
            "rule": ver.get("rule"), "median_ms": t.get("median_ms"),
            "tflops": (flops / (t["median_ms"] * 1e-3) / 1e12) if t.get("median_ms") else None,
            "cublas_ms": (base.get("timing") or {}).get("median_ms"),
            "cublas_tflops": (flops / (base["timing"]["median_ms"] * 1e-3) / 1e12) if (base.get("timing") or {}).get("median_ms") else None,
            "cublas_status": base.get("status") or ((base.get("verification") or {}).get("passed")),
            "pct_of_cublas": 100.0 * ratio["gflops"] if ratio.get("gflops") else None,
            "registers": attrs.get("registers") or ((comp.get("resources") or {}).get("registers")),
            "local_bytes": attrs.get("local_bytes"),
            "sass": {k: v for k, v in hist.items() if v and k in ("HMMA", "HGMMA", "LDGSTS", "UTMALDG", "FFMA", "LDL", "STL")},
            "arch": (comp.get("options") or [None])[0] if isinstance(comp.get("options"), list) else comp.get("target")}


# --- direct harness (fallback diagnosis) ---------------------------------------------------------

def round_inputs(x, precision):
    import numpy as np
    if precision == "tf32":  # cvt.rna.tf32.f32: round half away from zero to 10 mantissa bits
        bits = x.astype(np.float32).view(np.uint32)
        return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    if precision == "bf16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    if precision == "fp16":
        return x.astype(np.float16)
    return x.astype(np.float32)


def direct(case, gpu) -> dict:
    """Run the kernel alone through gemmlab.gpu.device (no pipeline) and compare with float64."""
    import numpy as np
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.contract.hookspecs import Dim, Extra, Main, Matrix, Memset, Problem, Shape, TensorMap, Value, Workspace
    from gemmlab.paths import KERNELS_DIR
    from gemmlab.contract.registry import load_registry
    kernel, precision, layout_b, shape, over, _ = case
    spec = load_registry(entry_points=False).get(kernel)
    p = {**spec.defaults, **over}
    problem = Problem(Shape(*shape), precision, "row", layout_b)
    spec.check_problem(problem, p, gpu.facts)
    plan = spec.plan(problem, p, gpu.facts)
    extras = tuple(s.entry for s in plan if isinstance(s, Extra))
    opts = CompileOptions.for_kernel(gpu.facts.arch, spec.options(problem, p, gpu.facts))
    ck = compile_kernel(KERNELS_DIR / spec.source, spec.instance(problem, p), opts, extra_names=extras)
    M, N, K = shape
    rng = np.random.default_rng(1)
    a = round_inputs(rng.standard_normal((M, K), dtype=np.float32), precision)
    b = round_inputs(rng.standard_normal((K, N), dtype=np.float32), precision)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    store = np.float32 if precision == "tf32" else a.dtype  # tf32: the kernel gets the rounded float32
    a_st = a.astype(store)
    b_st = (b.T if layout_b == "col" else b).astype(store).copy()
    bufs = {"A": gpu.allocate(a_st.nbytes), "B": gpu.allocate(b_st.nbytes), "C": gpu.allocate(4 * M * N)}
    gpu.upload(int(bufs["A"].handle), a_st)
    gpu.upload(int(bufs["B"].handle), b_st)
    ws = spec.workspace_bytes(problem, p, gpu.facts)
    if ws:
        bufs["W"] = gpu.allocate(ws)
    gpu.fill32(int(bufs["C"].handle), 0xFFFFFFFF, M * N)

    def args_of(arguments):
        out = []
        for arg in arguments:
            if isinstance(arg, Matrix):
                out.append(bufs[arg.name])
            elif isinstance(arg, Dim):
                out.append(np.int32({"M": M, "N": N, "K": K, "lda": problem.lda, "ldb": problem.ldb, "ldc": N}[arg.name]))
            elif isinstance(arg, Workspace):
                out.append(bufs["W"])
            elif isinstance(arg, Value):
                out.append({"int32": np.int32, "uint32": np.uint32, "float32": np.float32, "int64": np.int64}[arg.ctype](arg.value))
            elif isinstance(arg, TensorMap):
                try:
                    out.append(gpu.tensor_map(arg, problem, int(bufs[arg.matrix].handle)))
                except Exception:  # fall back to a plain uint16 map (same bytes, same zero fill)
                    from cuda.core import utils
                    from cuda.core._tensor_map import TensorMapSwizzle
                    from gemmlab.gpu.tma import _DeviceArray
                    view = utils.StridedMemoryView(_DeviceArray(int(bufs[arg.matrix].handle),
                                                                problem.stored_shape(arg.matrix), "<u2"), stream_ptr=-1)
                    out.append(view.as_tensor_map(box_dim=tuple(arg.box), swizzle=TensorMapSwizzle.SWIZZLE_128B))
        return tuple(out)

    geo = spec.geometry(problem, p, gpu.facts)
    steps = []
    for step in plan:
        if isinstance(step, Main):
            loaded = gpu.load(ck.object_code, spec.instance(problem, p), geo.shared_bytes)
            steps.append(gpu.launcher(loaded, geo, args_of(spec.arguments(problem, p, gpu.facts))))
        elif isinstance(step, Extra):
            loaded_x = gpu.load(ck.object_code, step.entry, step.launch.shared_bytes)
            steps.append(gpu.launcher(loaded_x, step.launch, args_of(step.arguments)))
        elif isinstance(step, Memset):
            target = bufs["C"] if step.target == "C" else bufs["W"]
            words = (M * N) if step.target == "C" else ws // 4
            steps.append(lambda t=target, w=words, v=step.value: gpu.fill32(int(t.handle), v, w))
    for s in steps:
        s()
    gpu.sync()
    c = gpu.download(int(bufs["C"].handle), 4 * M * N).view(np.float32).reshape(M, N)
    nan = int(np.isnan(c).sum())
    err = np.abs(c.astype(np.float64) - ref) / np.maximum(bound, 1e-30)
    tol = 4 * K * 2.0**-24 + 1e-7
    bad = np.argwhere(~(err <= tol))
    out = {"direct_status": "ok" if not len(bad) else "wrong", "direct_nan": nan,
           "direct_max_rel_to_bound": float(np.nanmax(err)) if np.isfinite(err).any() else None,
           "direct_bad": int(len(bad)), "direct_first_bad": bad[:4].tolist(),
           "direct_registers": loaded.registers}
    if len(bad):
        rows, cols = np.unique(bad[:, 0]), np.unique(bad[:, 1])
        out["direct_bad_rows_mod"] = sorted({int(r % 64) for r in rows})[:20]
        out["direct_bad_cols_mod"] = sorted({int(x % 64) for x in cols})[:20]
        i, j = bad[0]
        out["direct_sample"] = [float(c[i, j]), float(ref[i, j])]
    for buf in bufs.values():
        buf.close()
    return out


#: the points of a group run in the group's own process (``isolation.process: false``): the group's
#: process is the isolation (a child with a deadline, a fault costs its group), and after a failed
#: point :func:`direct` opens the GPU here, so a point in a worker process would then share the GPU
#: with this one and the shared-GPU check (timing.shared=refuse) would refuse every later timed point
ISOLATION = {"process": False}


def worker(group: str, out: Path, deadline: float) -> None:
    from gemmlab.run.session import Session
    session = Session()
    gpu = None
    for case in GROUPS[group]:
        if time.time() > deadline:
            print(f"SKIP {label(case)}: budget", flush=True)
            continue
        kernel, precision, layout_b, shape, over, with_base = case
        cfg = {"kernel": {"name": kernel, **over}, "shape": list(shape), "precision": precision,
               "layout": {"a": "row", "b": layout_b}, "timing": TIMING, "baseline": "cublas" if with_base else None,
               "cache": {"enabled": False, "dir": None}, "isolation": dict(ISOLATION)}
        if os.environ.get("TC_CACHE_DIR"):  # compiled once by a parallel mode=compile pass (wgmma_evidence --precompile)
            cfg["cache"] = {"enabled": True, "dir": os.environ["TC_CACHE_DIR"]}
        if os.environ.get("TC_SAMPLED_VERIFY") and shape[0] * shape[1] * shape[2] > 2 ** 34:
            cfg["verify"] = {"max_full": 2 ** 34, "sample": 64}  # as experiment=tc_ladder: rows/cols + Freivalds
        if os.environ.get("TC_COMPILE_ONLY"):
            cfg["mode"] = "compile"
        started = time.time()
        try:
            rec = session.run_point(cfg, out / "records" / label(case))
        except Exception as exc:
            rec = {"status": "harness_error", "error": f"{type(exc).__name__}: {exc}"}
        row = summarize(case, rec)
        row["wall_s"] = round(time.time() - started, 2)
        refused = row["status"] == "invalid" and kernel == "tma_bf16" and shape[2] % 8
        if row["status"] not in ("ok", "compiled") and not refused:
            try:
                if gpu is None:
                    from gemmlab.gpu.device import open_gpu
                    gpu = open_gpu(0)
                row.update(direct(case, gpu))
            except Exception as exc:
                row["direct_status"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        with open(out / f"rows-{group}.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def sanitize(out: Path, deadline: float) -> list[dict]:
    """compute-sanitizer racecheck/memcheck through gemmlab's sanitizer field on small shapes."""
    rows = []
    checks = [("mma_bf16", "bf16", "row", (63, 65, 33), "racecheck"), ("mma_tf32", "tf32", "row", (31, 33, 17), "racecheck"),
              ("tma_bf16", "bf16", "col", (65, 129, 200), "racecheck"), ("cluster_tiled", "fp32", "row", (63, 65, 33), "racecheck"),
              ("splitk", "fp32", "row", (31, 33, 17), "memcheck"), ("mma_bf16", "bf16", "row", (31, 33, 17), "memcheck"),
              ("mma_tf32", "tf32", "row", (100, 100, 100), "memcheck"), ("tma_bf16", "bf16", "col", (31, 33, 24), "memcheck")]
    for kernel, precision, layout_b, shape, tool in checks:
        if time.time() > deadline:
            rows.append({"case": f"{kernel}-{tool}", "status": "skipped (budget)"})
            continue
        case = (kernel, precision, layout_b, shape, {}, False)
        cmd = [sys.executable, "-m", "gemmlab", f"kernel={kernel}", f"precision={precision}", f"layout.b={layout_b}",
               f"shape=[{','.join(map(str, shape))}]", f"sanitizer={tool}", "cache.enabled=false",
               f"hydra.run.dir={out / 'sanitizer' / (label(case) + '-' + tool)}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(10, deadline - time.time()),
                                  cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"})
            line = next((l for l in proc.stdout.splitlines() if "sanitizer" in l), proc.stdout.strip().splitlines()[-1:] or [""])
            rows.append({"case": f"{label(case)}-{tool}", "rc": proc.returncode,
                         "line": (line if isinstance(line, str) else " ".join(line)).strip()[:200],
                         "stderr": proc.stderr.strip().splitlines()[-1:] if proc.returncode else []})
        except subprocess.TimeoutExpired:
            rows.append({"case": f"{label(case)}-{tool}", "status": "timeout"})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def pack(out: Path) -> None:
    """Pack every record under ``out`` (the points' ``records/``, the sanitizer and precompile runs')
    into ``out/records.jsonl.xz``, gemmlab's record archive (:func:`gemmlab.stages.record_model.write_archive`,
    what ``gemmlab-report --archive`` writes: gemmlab-report, gemmlab-compare and gemmlab-tune build
    read it as a folder); the point folders stay. Says why when there is none to write."""
    from gemmlab.stages.record_model import write_archive
    try:
        print(f"{write_archive(out, out / 'records.jsonl.xz')} records in {out / 'records.jsonl.xz'}", flush=True)
    except (FileNotFoundError, FileExistsError) as exc:
        print(f"no archive: {exc}", flush=True)


def fmt(v, spec="{:.1f}"):
    return "-" if v is None else (spec.format(v) if isinstance(v, (int, float)) else str(v))


def main() -> None:
    args = sys.argv[1:]
    out = Path(args[0]).resolve()
    budget = float(args[args.index("--budget") + 1]) if "--budget" in args else 200.0
    if "--group" in args:
        worker(args[args.index("--group") + 1], out, float(args[args.index("--deadline") + 1]))
        return
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    groups = [g for g in GROUPS if "--only" not in args or g in args[args.index("--only") + 1].split(",")]
    share = {"mma_bf16": 0.3, "mma_tf32": 0.24, "tma_bf16": 0.14, "splitk": 0.18, "cluster_tiled": 0.14}
    measure_budget = budget * (0.55 if "--sanitizer" in args else 1.0)
    total = sum(share[g] for g in groups)
    cumulative = 0.0
    for group in groups:  # cumulative deadlines: time one group leaves unused goes to the next
        cumulative += share[group] / total
        deadline = start + measure_budget * cumulative
        try:
            subprocess.run([sys.executable, __file__, str(out), "--group", group, "--deadline", str(deadline)],
                           timeout=max(5, deadline - time.time() + 30), cwd=ROOT)
        except subprocess.TimeoutExpired:
            print(f"TIMEOUT group {group}", flush=True)
    san = sanitize(out, start + budget) if "--sanitizer" in args else []
    rows = []
    for group in groups:
        f = out / f"rows-{group}.jsonl"
        if f.exists():
            rows += [json.loads(l) for l in f.read_text().splitlines() if l.strip()]
    (out / "summary.json").write_text(json.dumps({"rows": rows, "sanitizer": san}, indent=1))
    pack(out)
    for s in san:
        print("sanitizer", json.dumps(s))
    print("\ncase | status | err/tol | ms | TFLOP/s | cuBLAS TFLOP/s | % cuBLAS | regs | SASS | direct")
    for r in rows:
        print(" | ".join([r["case"], str(r["status"]), fmt(r.get("max_err_over_tol"), "{:.3g}"), fmt(r.get("median_ms"), "{:.4f}"),
                          fmt(r.get("tflops")), fmt(r.get("cublas_tflops")), fmt(r.get("pct_of_cublas")),
                          fmt(r.get("registers"), "{}"), json.dumps(r.get("sass")),
                          str(r.get("direct_status", "")) + (f" bad={r.get('direct_bad')} nan={r.get('direct_nan')}" if "direct_bad" in r else "")
                          + ("" if r["status"] == "ok" else f" err={str(r.get('error'))[:120]}")]))


if __name__ == "__main__":
    main()
