"""The fp8 bound against real FP8 tensor cores (issue 42; GPU machine): cuBLASLt FP8 E4M3 with
per-tensor scales, float32 C, through gemmlab's one point runner (``gemmlab.run.session.Session.run_point``:
each point in the session's worker process; this one opens no GPU), at K = 1024 ... 65536:
the baseline (undeclared accumulation: the no-promotion bound), the same kernel declaring a
promotion every 128 (is the P = 128 bound wide enough for what cuBLASLt does?) and cuBLASLt's
fast accumulation declaring 128 (the hardware's non-promoting mutant: caught?). The verdict read is
the point's verification before timing; the timing is the shortest the config allows (one event-timed
launch: the probe measures no speed). Prints one line per point: kernel, K, passed, max error /
tolerance.

    python3 .ci/fp8_probe.py [M=N, default 256]
"""

import sys
import tempfile
from pathlib import Path

from gemmlab.run.session import Session

HERE = Path(__file__).parent / "fp8_probe"
#: no speed is measured: one launch, timed with events, no launch floor
TIMING = {"mode": "events", "warmup": 0, "repeat": 1, "batch": 1, "floor": False}
M = N = int(sys.argv[1]) if len(sys.argv) > 1 else 256
session = Session()
for K in (1024, 4096, 16384, 65536):
    for kernel in ("cublas", "lt_claims128", "lt_fast_claims128"):
        with tempfile.TemporaryDirectory() as d:
            rec = session.run_point({"kernel": {"name": kernel}, "shape": [M, N, K], "precision": "fp8",
                                     "layout": {"a": "row", "b": "col"}, "plugin_dirs": [str(HERE)],
                                     "verify": {"method": "full"}, "timing": dict(TIMING)}, Path(d) / "p")
        v = rec.get("verification") or {}
        print(f"{kernel:20s} {M}x{N}x{K:<6d} status {rec['status']:12s} passed {v.get('passed')} "
              f"err/tol {v.get('max_error_over_tolerance')} {(rec.get('error') or '')[:120]}", flush=True)
session.close()
