"""Per-point cost of fault isolation (issue 11.1): the same points run through the worker process
(gemmlab.run.isolation.PointRunner) and in this process (run_in_scope), alternated, warm caches.
  python .ci/isolation-overhead.py --mode compile   # CPU
  python .ci/isolation-overhead.py --mode run       # GPU (tiny tiled points, short timing)
Prints the worker's start-up (once per sweep, and after each fault) and the median ms per point."""

import argparse
import pathlib
import statistics
import tempfile
import time

from gemmlab.run import isolation
from gemmlab.stages.config import IsolationOptions

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=("compile", "run"), default="compile")
parser.add_argument("--points", type=int, default=20)
parser.add_argument("--reps", type=int, default=3)
args = parser.parse_args()


def cfg(i):
    return {"kernel": {"name": "tiled"}, "shape": [64 + i, 64, 64], "mode": args.mode,
            "timing": {"warmup": 2, "repeat": 5, "batch": 5}}


root = pathlib.Path(tempfile.mkdtemp(prefix="isolation-overhead-"))
runner = isolation.PointRunner()
t = time.perf_counter()
first = runner.run(cfg(0), root / "w0", IsolationOptions())
startup = time.perf_counter() - t
isolation.run_in_scope(cfg(0), root / "i0")  # warm this process too
per = {"worker": [], "in-process": []}
statuses = set()
for rep in range(args.reps):
    for mode in per:
        t = time.perf_counter()
        for i in range(1, args.points + 1):
            out = root / f"{mode}-{rep}-{i}"
            rec = runner.run(cfg(i), out, IsolationOptions()) if mode == "worker" else isolation.run_in_scope(cfg(i), out)
            statuses.add(rec["status"])
        per[mode].append((time.perf_counter() - t) / args.points * 1e3)
runner.close()
print(f"mode={args.mode}: worker start-up + first point {startup:.2f} s ({first['status']}); statuses {sorted(statuses)}")
for mode, values in per.items():
    print(f"{mode:10s} ms/point: {' '.join(f'{v:.1f}' for v in values)} (median {statistics.median(values):.1f})")
print(f"isolation overhead per point: {statistics.median(per['worker']) - statistics.median(per['in-process']):+.1f} ms")
