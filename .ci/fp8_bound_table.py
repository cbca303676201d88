"""What the fp8 verification rule guarantees at which K (issue 42, item 3): E4M3 inputs with
block scaling (1x128 / 128x128, amax / 448) at K = 256 ... 65536, 16x16 outputs, N(0,1) draws.
"correct" is an emulated FP8 tensor-core accumulator that keeps 14 bits (DeepSeek-V3's H800
figure) and is promoted to float32 every 128 of K, the kernel's declaration (tests/plugins_fp8);
the columns are the share of output elements the bound flags for wrong results, the last for a
kernel that declares 128 but never promotes. Prints a Markdown table (docs/trust.md holds its
output). CPU only: ``python .ci/fp8_bound_table.py``."""
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


def main():
    print("| precision | K | correct: max err/tol | zeros | doubled | dropped K/4 | sign flip | one dropped k term "
          "| never promoted (declares 128) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for K in (256, 1024, 4096, 16384, 65536):
        inp = make_problem_inputs(Problem(Shape(16, 16, K), "fp8", "row", "col", scaling="block"), InputOptions(seed=0))
        a, b = inp.a, inp.b
        good = emulate(a, b, 128)
        ref = a @ b
        q = K // 4
        wrong = [np.zeros_like(good), 2 * good, (a[:, q:] @ b[q:]).astype(np.float32), -good,
                 (a[:, 1:] @ b[1:]).astype(np.float32), emulate(a, b, K)]

        def verdict(c):
            return check(c, a, b, VerifyOptions(), precision="fp8", fp8=Fp8Bound(128))

        ok = verdict(good)
        cells = [f"{ok.max_error_over_tolerance:.2g}" + ("" if ok.passed else " FAIL")]
        cells += [f"{100 * verdict(c).mismatches / c.size:.0f}%" for c in wrong]
        print(f"| fp8 E4M3, block scaling, promoted every 128 | {K} | " + " | ".join(cells) + " |")
        del ref


if __name__ == "__main__":
    main()
