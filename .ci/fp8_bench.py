"""wgmma_fp8 against cuBLASLt FP8 (issue 42, item 4), on the GPU machine: each kernel parameter set
given on the command line (``KEY=V,KEY=V``; ``-`` for the defaults) at each shape and scaling mode,
graph-timed through gemmlab's one point runner (``gemmlab.run.session.Session.run_point``: each
point in the session's worker process; this one opens no GPU) with ``baseline=cublas`` (measured
alternately in the same run), bf16 C. Prints one line per point (TFLOP/s, ratio to cuBLASLt,
verification) and writes the records under OUTDIR (default ./fp8-bench), packed at the end into
OUTDIR/records.jsonl.xz (gemmlab's record archive, :mod:`gemmlab.stages.archive`).

    python3 .ci/fp8_bench.py [--outdir DIR] [--shapes 4096,4096,4096;8192,8192,8192]
                             [--scalings tensor,block] - OVERLAP=0 BN=192,OVERLAP=0,STAGES=5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gemmlab.run.session import Session  # noqa: E402
from gemmlab.stages.record_model import write_archive  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", default="fp8-bench")
    ap.add_argument("--shapes", default="4096,4096,4096")
    ap.add_argument("--scalings", default="tensor,block")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("params", nargs="*", default=["-"])
    args = ap.parse_args()
    shapes = [[int(x) for x in s.split(",")] for s in args.shapes.split(";")]
    out = Path(args.outdir)
    session = Session()
    i = 0
    for shape in shapes:
        for scaling in args.scalings.split(","):
            for spec in args.params:
                params = {} if spec == "-" else {k: int(v) for k, v in (kv.split("=") for kv in spec.split(","))}
                cfg = {"kernel": {"name": "wgmma_fp8", **params}, "shape": shape, "precision": "fp8",
                       "fp8": {"scaling": scaling, "out": "bf16"}, "layout": {"a": "row", "b": "col"},
                       "baseline": "cublas", "timing": {"mode": "graph", "warmup": 5, "repeat": args.repeat, "batch": 10}}
                t0 = time.time()
                rec = session.run_point(cfg, out / f"p{i:02d}")
                i += 1
                flop = 2 * shape[0] * shape[1] * shape[2]
                label = f"{'x'.join(map(str, shape))} {scaling:6s} {spec:32s}"
                if rec.get("status") != "ok":
                    print(f"{label} {rec.get('status')}: {rec.get('error')}", flush=True)
                    continue
                ms = rec["timing"]["median_ms"]
                base = rec.get("baseline") or {}
                bms = (base.get("timing") or {}).get("median_ms")
                ratio = (rec.get("ratio_to_baseline") or {}).get("gflops")
                v = rec["verification"]
                print(f"{label} {flop / ms / 1e9:7.1f} TFLOP/s  cuBLASLt {flop / bms / 1e9 if bms else float('nan'):7.1f}"
                      f"  ratio {ratio if ratio else float('nan'):.3f}  err/tol {v['max_error_over_tolerance']:.3f}"
                      f"  regs {rec.get('compile', {}).get('registers')}  ({time.time() - t0:.0f} s)", flush=True)
    session.close()
    try:
        print(f"{write_archive(out, out / 'records.jsonl.xz')} records in {out / 'records.jsonl.xz'}")
    except (FileNotFoundError, FileExistsError) as exc:
        print(f"no archive: {exc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
