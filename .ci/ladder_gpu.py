"""Issue 8 (the float32 CUDA-core ladder) on the GPU machine, in one process:

    python3 .ci/ladder_gpu.py OUT_DIR PLAN [--budget SECONDS]

PLAN is one of:
  grid    (first call, run at commit 5cea1cf, when the defaults were sgemm_block2d 128x128x8 8x8,
          ladder_tile2d BK 8, sgemm_pipelined 128x256x8 3 stages) partial-tile verification of
          every rung (and of every grid point at two odd shapes), then a parameter grid of rungs
          1-4 at 4096^3 and the best points at 8192^3 (baseline=cublas, graph timing, sampled
          verification)
  final   (second call, commit eadaa15) all sgemm_pipelined instances compiled up front in threads; partial-tile
          verification of every rung and of every grid point at two odd shapes; the grid of
          ladder_tile2d and sgemm_pipelined at 4096^3, the best three pipelined at 8192^3; then the
          sgemm_ladder points (every rung, tuned, plus naive, tiled and the Matmul Ladder I
          kernels x the six ladder shapes, baseline=cublas, graph timing) and last the sanitizer checks
          (racecheck + memcheck at a small shape) of the four new rungs, in parallel processes
  search  (third call, issue 8's second pass) sgemm_pipelined with lean addressing: partial-tile
          verification of its candidates, then the candidates (and the old code, plugin folder
          .ci/ladder_v1) at 4096^3 and some at 1000x3000x777 against cuBLAS, then short Optuna
          searches per rung at 4096^3 (`gemmlab experiment=optuna_<rung>`, few trials), each a
          subprocess under the budget; writes OUT/search.json (best parameters per rung)
Each point writes its own OUT_DIR/<phase>/<name>/result.json (run_point); a point that fails
records its failure and the run goes on. New points stop starting after --budget seconds (the
table says what is missing). The last thing printed is a short table.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from gemmlab.run.pipeline import run_point

PARTIAL = [(1, 1, 1), (31, 33, 17), (63, 65, 33), (4097, 1, 3), (35, 79, 19), (100, 100, 100),
           (129, 260, 36), (256, 256, 256)]
SQUARE = [(64, 64, 64), (128, 128, 128), (512, 512, 512)]  # the Matmul Ladder I harness: N % 64 == 0
RUNGS = ["ladder_tile2d", "sgemm_block2d", "sgemm_warptile", "sgemm_pipelined"]
LADDER_KERNELS = ["naive", "tiled", "ladder_starter", "ladder_strip"] + RUNGS
LADDER_SHAPES = [(1024,) * 3, (2048,) * 3, (4096,) * 3, (8192,) * 3, (4095, 4097, 1023), (1000, 3000, 777)]
FAST = {"mode": "graph", "warmup": 1, "repeat": 3, "batch": 2, "floor": False}
TIMED = {"mode": "graph", "warmup": 3, "repeat": 7, "batch": 5, "floor": False}

P = dict  # parameter sets of the grid (rung -> list of overrides)
GRID = {
    "sgemm_block2d": [P(), P(BK=16), P(BM=64, BN=64, BK=16, TM=4, TN=4), P(BM=128, BN=64, BK=16, TM=8, TN=4)],
    "sgemm_warptile": [P(), P(BK=16), P(WM=64, WN=32), P(BM=64, BN=128, WM=32, WN=64, TM=8, TN=8)],
    "sgemm_pipelined": [
        P(), P(BK=16), P(STAGES=4), P(BK=16, STAGES=4), P(BK=16, STAGES=2), P(GS=1), P(BK=16, GS=16),
        P(BM=256, BN=128), P(BM=256, BN=128, BK=16), P(TM=8, TN=16, WM=32, WN=128),
        P(TM=8, TN=16, WM=32, WN=128, BK=16), P(BK=32, STAGES=2),
    ],
}
SANITIZE_SHAPE = (63, 65, 33)


def label(kernel: str, params: dict) -> str:
    return kernel + ("" if not params else "[" + ",".join(f"{k}{v}" for k, v in params.items()) + "]")


def cfg(kernel, shape, params=None, timing=FAST, **over):
    c = {"kernel": {"name": kernel, **(params or {})}, "shape": list(shape), "mode": "run", "timing": timing}
    c.update(over)
    return c


class Runner:
    def __init__(self, out: Path, budget: float):
        self.out, self.deadline, self.rows, self.missing = out, time.monotonic() + budget, [], []

    def point(self, phase, kernel, shape, params=None, **kw) -> dict | None:
        name = f"{label(kernel, params or {})}-{'x'.join(map(str, shape))}".replace(",", "_")
        if time.monotonic() > self.deadline:
            self.missing.append(f"{phase}/{name}")
            return None
        rec = run_point(cfg(kernel, shape, params, **kw), self.out / phase / name)
        t = rec.get("timing") or {}
        ratio = (rec.get("ratio_to_baseline") or {}).get("gflops")
        drv = ((rec.get("compile") or {}).get("driver_attributes") or {})
        occ = rec.get("occupancy") or {}
        row = [phase, label(kernel, params or {}), "x".join(map(str, shape)), rec["status"],
               f"{t['gflops'] / 1e3:.2f}" if t.get("gflops") else "",
               f"{100 * ratio:.1f}" if ratio else "", drv.get("registers", ""), drv.get("local_bytes", ""),
               occ.get("max_active_blocks_per_sm", ""), (rec.get("error") or "")[:90]]
        self.rows.append(row)
        print(" | ".join(map(str, row)), flush=True)
        return rec


def verify_all(r: Runner) -> None:
    for kernel in RUNGS:
        for shape in (SQUARE if kernel == "ladder_tile2d" else PARTIAL):
            r.point("verify", kernel, shape)


def grid(r: Runner) -> None:
    for kernel, sets in GRID.items():
        for params in sets[1:]:
            for shape in ((63, 65, 33), (129, 260, 36)):
                r.point("verify", kernel, shape, params)
    timed = []
    for kernel in ["ladder_tile2d"] + list(GRID):
        for params in (GRID.get(kernel) or [P()]):
            rec = r.point("grid4096", kernel, (4096,) * 3, params, timing=TIMED, baseline="cublas",
                          verify={"method": "sampled"})
            if rec and rec.get("status") == "ok":
                timed.append((rec["ratio_to_baseline"]["gflops"], kernel, params))
    timed.sort(key=lambda x: -x[0])
    best_per_rung = {}
    for ratio, kernel, params in timed:
        best_per_rung.setdefault(kernel, []).append(params)
    picks = [(k, p) for k, ps in best_per_rung.items() for p in ps[: (3 if k == "sgemm_pipelined" else 1)]]
    for kernel, params in picks:
        r.point("grid8192", kernel, (8192,) * 3, params, timing=TIMED, baseline="cublas")
    for kernel, params in picks[:0] + [(k, p) for k, p in picks if k == "sgemm_pipelined"][:2]:
        for shape in ((4095, 4097, 1023), (1000, 3000, 777)):
            r.point("gridodd", kernel, shape, params, timing=TIMED, baseline="cublas")


FINAL_GRID = {
    "ladder_tile2d": [P(), P(BK=16), P(BK=4)],
    "sgemm_pipelined": [
        P(), P(BK=16), P(STAGES=4), P(BK=16, STAGES=4), P(BK=16, GS=1), P(BK=16, GS=16),
        P(BM=256, BN=128, BK=16), P(TM=8, TN=16, WM=32, WN=128, BK=16), P(BM=128, BN=128, WM=32, TM=8, BK=16),
    ],
}


def precompile(driver_version: str) -> None:
    """Compile every sgemm_pipelined instance of the grid in threads (NVRTC 13.0 returns no ptxas
    report, so nothing goes to the disk cache; the in-process cache is keyed like the pipeline's)."""
    from concurrent.futures import ThreadPoolExecutor

    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.contract.registry import load_registry
    registry = load_registry(entry_points=False)
    spec = registry.get("sgemm_pipelined")
    jobs = [spec.entry({**spec.defaults, **p}) for p in FINAL_GRID["sgemm_pipelined"]]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        list(pool.map(lambda e: compile_kernel(registry.source_path(spec), e, CompileOptions(arch="90"),
                                               persistent=True, cache_folder=None,
                                               driver_version=driver_version), jobs))
    print(f"precompiled {len(jobs)} sgemm_pipelined instances in {time.monotonic() - started:.1f} s", flush=True)


def sanitize_all(out: Path) -> None:
    """racecheck and memcheck of the four rungs (tuned defaults), as parallel child processes."""
    import subprocess
    procs = []
    for kernel in RUNGS:
        shape = SQUARE[0] if kernel == "ladder_tile2d" else SANITIZE_SHAPE
        for tool in ("racecheck", "memcheck"):
            code = (f"import json; from gemmlab.run.pipeline import run_point; "
                    f"r = run_point({cfg(kernel, shape, sanitizer=tool)!r}, {str(out / 'sanitizer' / f'{kernel}-{tool}')!r}); "
                    f"print(json.dumps([r['status'], (r.get('sanitizer') or {{}}).get('verdict'), "
                    f"(r.get('sanitizer') or {{}}).get('errors'), r.get('error')]))")
            procs.append((kernel, tool, subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                                         stderr=subprocess.STDOUT, text=True)))
    for kernel, tool, proc in procs:
        try:
            text, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            text = "timeout"
        print(f"sanitizer | {kernel} | {tool} | {text.strip().splitlines()[-1] if text.strip() else 'no output'}",
              flush=True)


def final(r: Runner) -> None:
    first = r.point("verify", "sgemm_block2d", (1, 1, 1))
    precompile(str(((first or {}).get("device") or {}).get("driver_version", "none")))
    for kernel in RUNGS[1:]:
        for shape in PARTIAL[1:] if kernel == "sgemm_block2d" else PARTIAL:
            r.point("verify", kernel, shape)
    for params in FINAL_GRID["sgemm_pipelined"][1:]:
        for shape in ((63, 65, 33), (129, 260, 36)):
            r.point("verify", "sgemm_pipelined", shape, params)
    for n in (64, 512):
        for params in FINAL_GRID["ladder_tile2d"]:
            r.point("verify", "ladder_tile2d", (n, n, n), params)
    best = {}
    for kernel, sets in FINAL_GRID.items():
        scored = []
        for params in sets:
            rec = r.point("grid4096", kernel, (4096,) * 3, params, timing=TIMED, baseline="cublas",
                          verify={"method": "sampled"})
            if rec and rec.get("status") == "ok":
                scored.append((rec["ratio_to_baseline"]["gflops"], params))
        scored.sort(key=lambda x: -x[0])
        best[kernel] = scored[0][1] if scored else P()
        if kernel == "sgemm_pipelined":
            both = []
            for ratio, params in scored[:3]:
                rec = r.point("grid8192", kernel, (8192,) * 3, params, timing=TIMED, baseline="cublas")
                if rec and rec.get("status") == "ok":
                    both.append((min(ratio, rec["ratio_to_baseline"]["gflops"]), params))
            if both:
                best[kernel] = max(both, key=lambda x: x[0])[1]
    print("BEST", json.dumps(best), flush=True)
    (r.out / "best.json").write_text(json.dumps(best))
    order = [(4096,) * 3, (8192,) * 3, (4095, 4097, 1023), (1000, 3000, 777), (2048,) * 3, (1024,) * 3]
    for shape in order:
        for kernel in reversed(LADDER_KERNELS):  # fastest rungs first: a budget cut loses the slow seeds
            if kernel.startswith("ladder_") and not (shape[0] == shape[1] == shape[2]):
                continue  # the Matmul Ladder I harness takes square N % 64 == 0 only (invalid by design)
            slow = kernel in ("naive", "ladder_starter") and shape[0] >= 4096
            timing = {**TIMED, "repeat": 3, "batch": 1, "warmup": 1} if slow else TIMED
            r.point("sgemm_ladder", kernel, shape, best.get(kernel), timing=timing, baseline="cublas")


V1_DIR = str(Path(__file__).resolve().parent / "ladder_v1")
SEARCH_CANDIDATES = [  # (kernel, params, plugin_dirs): the old code first, then the new code's variants
    ("sgemm_pipelined_v1", P(), [V1_DIR]),
    ("sgemm_pipelined", P(), None),                                            # 128x256x16, 16x8, 1 block/SM
    ("sgemm_pipelined", P(BN=128, MINB=2), None),                              # 128 threads 16x8, 2 blocks/SM
    ("sgemm_pipelined", P(BN=128, WM=32, TM=8, MINB=2), None),                 # 256 threads 8x8, 2 blocks/SM
    ("sgemm_pipelined", P(BN=128, WM=32, TM=8, MINB=2, BK=8), None),
    ("sgemm_pipelined", P(BM=256, BN=128), None),
    ("sgemm_pipelined", P(BK=32, STAGES=3), None),
    ("sgemm_pipelined", P(STAGES=3), None),
    ("sgemm_pipelined", P(BN=128, MINB=2, STAGES=3), None),
    ("sgemm_pipelined", P(BM=64, BN=128, WM=32, TM=8, MINB=3), None),         # 128 threads 8x8, 3 blocks/SM
    ("sgemm_warptile", P(), None),
]
ODD_PICKS = [1, 2, 3, 9, 10]  # indices into SEARCH_CANDIDATES timed at 1000x3000x777 (under one wave)
SEARCH_VERIFY_FULL = [1, 2, 3]  # every partial-tile shape; the other candidates at three of them
SEARCH_SHAPES = PARTIAL + [(512, 512, 100), (384, 512, 777)]  # + interior blocks with K % BK != 0
OPTUNA = [("sgemm_pipelined", 6), ("sgemm_warptile", 3), ("sgemm_block2d", 3), ("ladder_tile2d", 3)]


def precompile_candidates(driver_version: str) -> None:
    """Compile every sgemm_pipelined(_v1) candidate in threads before the points need them."""
    from concurrent.futures import ThreadPoolExecutor

    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.contract.registry import load_registry
    registry = load_registry([V1_DIR], entry_points=False)
    jobs = []
    for kernel, params, _ in SEARCH_CANDIDATES:
        spec = registry.get(kernel)
        if kernel.startswith("sgemm_pipelined"):
            jobs.append((registry.source_path(spec), spec.entry({**spec.defaults, **params})))
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        list(pool.map(lambda j: compile_kernel(j[0], j[1], CompileOptions(arch="90"), persistent=True,
                                               cache_folder=None, driver_version=driver_version), jobs))
    print(f"precompiled {len(jobs)} instances in {time.monotonic() - started:.1f} s", flush=True)


def optuna_search(out: Path, rung: str, trials: int, seconds: float) -> dict:
    """``gemmlab experiment=optuna_<rung>`` with ``trials`` trials, a subprocess killed after
    ``seconds``; returns {"best": params or None, "log": tail}."""
    import subprocess
    folder = out / "optuna" / rung
    cmd = [sys.executable, "-m", "gemmlab", f"experiment=optuna_{rung}", f"hydra.sweeper.n_trials={trials}",
           f"hydra.sweep.dir={folder}"]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(seconds, 1))
        text, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        text, rc = f"{exc.stdout or ''}{exc.stderr or ''}\nTIMEOUT after {seconds:.0f} s", "timeout"
    (out / "optuna").mkdir(parents=True, exist_ok=True)
    (out / "optuna" / f"{rung}.log").write_text(str(text))
    best = None
    results = folder / "optimization_results.yaml"
    if results.is_file():
        from omegaconf import OmegaConf
        best = {k.split(".", 1)[1]: v for k, v in OmegaConf.to_container(OmegaConf.load(results))["best_params"].items()}
    print(f"optuna | {rung} | {trials} trials | exit {rc} | {time.monotonic() - started:.0f} s | best {best}", flush=True)
    return {"best": best, "exit": rc}


def search(r: Runner, started: float, budget: float) -> None:
    first = r.point("verify", "sgemm_pipelined", (1, 1, 1))
    precompile_candidates(str(((first or {}).get("device") or {}).get("driver_version", "none")))
    for i, (kernel, params, dirs) in enumerate(SEARCH_CANDIDATES):
        if kernel != "sgemm_pipelined":
            continue
        shapes = SEARCH_SHAPES if i in SEARCH_VERIFY_FULL else [(63, 65, 33), (129, 260, 36), (384, 512, 777)]
        for shape in shapes:
            if (i, shape) != (1, (1, 1, 1)):
                r.point("verify", kernel, shape, params)
    scored = []
    for kernel, params, dirs in SEARCH_CANDIDATES:
        extra = {"plugin_dirs": dirs} if dirs else {}
        rec = r.point("cand4096", kernel, (4096,) * 3, params, timing=TIMED, baseline="cublas",
                      verify={"method": "sampled"}, **extra)
        if rec and rec.get("status") == "ok":
            scored.append((rec["ratio_to_baseline"]["gflops"], rec["timing"]["gflops"], kernel, params))
    for i in ODD_PICKS:
        kernel, params, _ = SEARCH_CANDIDATES[i]
        r.point("cand_odd", kernel, (1000, 3000, 777), params, timing=TIMED, baseline="cublas")
    found = {"candidates": [[k, p, ratio, g] for ratio, g, k, p in sorted(scored, key=lambda x: -x[0])], "optuna": {}}
    for rung, trials in OPTUNA:
        left = budget - (time.monotonic() - started)
        if left < 20:
            print(f"optuna | {rung} | not started: {left:.0f} s of the budget left", flush=True)
            r.missing.append(f"optuna/{rung}")
            continue
        found["optuna"][rung] = optuna_search(r.out, rung, trials, left - 5)
    (r.out / "search.json").write_text(json.dumps(found, indent=1))
    print("SEARCH", json.dumps(found["candidates"][:4]), flush=True)


def main() -> None:
    out, plan = Path(sys.argv[1]), sys.argv[2]
    budget = float(sys.argv[sys.argv.index("--budget") + 1]) if "--budget" in sys.argv else 1e9
    r = Runner(out, budget)
    started = time.monotonic()
    if plan == "grid":
        verify_all(r)
        grid(r)
    elif plan == "final":
        final(r)
    elif plan == "search":
        search(r, started, budget)
    else:
        raise SystemExit(f"unknown plan {plan}")
    (out / "table.json").write_text(json.dumps({"rows": r.rows, "missing": r.missing}, indent=1))
    if plan == "final":
        sanitize_all(out)
    bad = [row for row in r.rows if row[3] not in ("ok", "checked")]
    print(f"\n# {plan}: {len(r.rows)} points in {time.monotonic() - started:.0f} s, {len(bad)} not ok, "
          f"{len(r.missing)} not started (budget)")
    for row in bad:
        print("NOT OK", " | ".join(map(str, row)))
    print("phase | kernel | shape | status | TFLOP/s | % cuBLAS | regs | local B | blocks/SM")
    for row in r.rows:
        if row[0] != "verify" and not row[0].startswith("sanitizer"):
            print(" | ".join(map(str, row[:9])))


if __name__ == "__main__":
    main()
