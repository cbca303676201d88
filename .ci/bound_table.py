"""What each precision's verification rule guarantees at which K (issue 40): for fp32, tf32, bf16
and fp16 at K = 256 ... 65536 (16x16 outputs, N(0,1) inputs rounded to the storage type), the share
of output elements the default ``bound`` rule flags for a correct float32 accumulation (sequential,
the least accurate order a kernel uses) and for five wrong results. Prints a Markdown table
(docs/trust.md holds its output). CPU only: ``python .ci/bound_table.py``."""
from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gemmlab.stages.verify import VerifyOptions, check, round_tf32  # noqa: E402


def keep_bits(x, bits):
    return (x.view(np.uint32) & np.uint32((0xFFFFFFFF << (23 - bits)) & 0xFFFFFFFF)).view(np.float32)


def serial32(a, b):
    return np.cumsum(a[:, :, None] * b[None, :, :], axis=1, dtype=np.float32)[:, -1, :]


def main():
    rng = np.random.default_rng(0)
    print("| precision | K | correct: max err/tol | zeros | doubled | dropped K/4 | sign flip | 3-bit inputs | one dropped k term |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for precision in ("fp32", "tf32", "bf16", "fp16"):
        for K in (256, 1024, 4096, 16384, 65536):
            a = rng.standard_normal((16, K)).astype(np.float32)
            b = rng.standard_normal((K, 16)).astype(np.float32)
            if precision in ("bf16", "fp16"):
                dt = ml_dtypes.bfloat16 if precision == "bf16" else np.float16
                a, b = a.astype(dt).astype(np.float32), b.astype(dt).astype(np.float32)
            ar, br = (round_tf32(a, "rz"), round_tf32(b, "rz")) if precision == "tf32" else (a, b)
            good = serial32(ar, br)
            q = K // 4
            f64 = lambda x, y: (x.astype(np.float64) @ y.astype(np.float64)).astype(np.float32)  # noqa: E731
            wrong = [np.zeros_like(good), 2 * good, f64(ar[:, q:], br[q:]), -good,
                     f64(keep_bits(a, 3), keep_bits(b, 3)), f64(ar[:, 1:], br[1:])]
            ok = check(good, a, b, VerifyOptions(), precision=precision)
            cells = [f"{ok.max_error_over_tolerance:.2g}" + ("" if ok.passed else " FAIL")]
            for c in wrong:
                v = check(c, a, b, VerifyOptions(), precision=precision)
                cells.append(f"{100 * v.mismatches / c.size:.0f}%")
            print(f"| {precision} | {K} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
