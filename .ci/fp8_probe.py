"""The fp8 bound against real FP8 tensor cores (issue 42; GPU machine): cuBLASLt FP8 E4M3 with
per-tensor scales, float32 C, through gemmlab's pipeline (check only), at K = 1024 ... 65536:
the baseline (undeclared accumulation: the no-promotion bound), the same kernel declaring a
promotion every 128 (is the P = 128 bound wide enough for what cuBLASLt does?) and cuBLASLt's
fast accumulation declaring 128 (the hardware's non-promoting mutant: caught?). Prints one line
per point: kernel, K, passed, max error / tolerance."""

import sys
import tempfile
from pathlib import Path

from gemmlab.run.pipeline import run_point

HERE = Path(__file__).parent / "fp8_probe"
M = N = int(sys.argv[1]) if len(sys.argv) > 1 else 256
for K in (1024, 4096, 16384, 65536):
    for kernel in ("cublas", "lt_claims128", "lt_fast_claims128"):
        with tempfile.TemporaryDirectory() as d:
            rec = run_point({"kernel": {"name": kernel}, "shape": [M, N, K], "precision": "fp8",
                             "layout": {"a": "row", "b": "col"}, "plugin_dirs": [str(HERE)],
                             "verify": {"method": "full"}}, Path(d) / "p", check_only=True)
        v = rec.get("verification") or {}
        print(f"{kernel:20s} {M}x{N}x{K:<6d} status {rec['status']:12s} passed {v.get('passed')} "
              f"err/tol {v.get('max_error_over_tolerance')} {rec.get('error', '')[:120]}", flush=True)
