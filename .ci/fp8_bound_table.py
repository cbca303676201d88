"""What the fp8 verification rule guarantees at which K (issue 42, item 3): E4M3 inputs with
tensor scaling (amax / 448), 16x16 outputs, N(0,1) draws, K = 16 ... 65536. "correct" is the
modelled FP8 tensor cores (gemmlab.contract.plugin_utils.fp8_mma_step: each 32 of K, the
accumulator and the products aligned to the largest and truncated at 14 bits of it; the model that
reproduces the H100's output bit for bit) on the FP8 values, promoted to float32 every 128 of K, the
kernel's declaration (tests/plugins_fp8); "pessimistic" the same on the dequantised values, where
every product loses bits. The share columns are the output elements the bound flags for wrong
results; the last two are a kernel that declares 128 but never promotes (share flagged, and its
largest error / tolerance). Prints a Markdown table (docs/trust.md holds its output). CPU only:
``python .ci/fp8_bound_table.py``."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "plugins_fp8")]
from emulated_fp8 import emulate  # noqa: E402
from gemmlab.contract.hookspecs import Problem, Shape  # noqa: E402
from gemmlab.stages.inputs import InputOptions, make_problem_inputs  # noqa: E402
from gemmlab.stages.verify import Fp8Bound, VerifyOptions, check  # noqa: E402


def share(x: float) -> str:
    """A share as a percentage; "<1%" for a few elements of the 256 (one flagged fails the point)."""
    return "<1%" if 0 < x < 0.005 else f"{100 * x:.0f}%"


def main():
    print("| precision | K | correct: max err/tol | pessimistic: max err/tol | zeros | doubled | dropped K/4 "
          "| sign flip | one dropped k term | never promoted (declares 128) | never promoted: max err/tol |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for K in (16, 256, 1024, 4096, 16384, 65536):
        inp = make_problem_inputs(Problem(Shape(16, 16, K), "fp8", "row", "col", scaling="tensor"),
                                  InputOptions(seed=0))
        a, b = inp.a, inp.b
        a_q, b_q = inp.a_stored.astype(np.float64), inp.b_stored.astype(np.float64).T
        scale = float(inp.a_scale[0, 0]) * float(inp.b_scale[0, 0])

        def hardware(interval):  # the tensor cores on the FP8 values, the scales in the epilogue
            return (emulate(a_q, b_q, interval) * scale).astype(np.float32)

        good, ref, q, products = hardware(128), a @ b, K // 4, {}

        def verdict(c):
            return check(c, a, b, VerifyOptions(), precision="fp8", fp8=Fp8Bound(128), products=products)

        def ratio(c):
            v = verdict(c)
            return f"{v.max_error_over_tolerance:.2g}" + ("" if v.passed else " FAIL")

        mutant = hardware(K)
        wrong = [np.zeros_like(good), 2 * good, (a[:, q:] @ b[q:]).astype(np.float32), -good,
                 (a[:, 1:] @ b[1:]).astype(np.float32), mutant]
        cells = [ratio(good), ratio(emulate(a, b, 128))]
        cells += [share(verdict(c).mismatches / c.size) for c in wrong]
        cells.append(f"{verdict(mutant).max_error_over_tolerance:.2g}")
        print(f"| fp8 E4M3, tensor scaling, promoted every 128 | {K} | " + " | ".join(cells) + " |")
        del ref


if __name__ == "__main__":
    main()
