"""Exploit x_sampled_rows (tests/adversarial, issue 40 item 8).

computes only the rows and columns a sampled verification compares, drawn here exactly as
gemmlab.stages.verify draws them (``numpy.random.default_rng(seed + 1)``, ``verify.sample`` rows, then
columns), and writes 0 everywhere else (no NaN left to count). SEED1 = inputs.seed + 1, SAMPLE =
verify.sample (parameters are 1..4096).

Expected: wrong_result (net 'verification': every sampled row and column matches, Freivalds' check
of the whole product fails), at a shape verified by sampling (verify.method=sampled)."""

import numpy as np

from gemmlab.contract.hookspecs import KernelOptions, KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


def sampled(M: int, N: int, seed1: int, sample: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows and columns ``gemmlab.stages.verify.check`` compares in its sampled method."""
    rng = np.random.default_rng(seed1)
    rows = np.sort(rng.choice(M, size=min(M, sample), replace=False))
    cols = np.sort(rng.choice(N, size=min(N, sample), replace=False))
    return rows, cols


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_sampled_rows<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))

    def options(self, problem, params, device):
        rows, cols = sampled(problem.M, problem.N, params["SEED1"], params["SAMPLE"])
        return KernelOptions(defines={"X_ROWS": ",".join(map(str, rows)), "X_COLS": ",".join(map(str, cols))})


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_sampled_rows", source="x_sampled_rows.cu", defaults={"SEED1": 1, "SAMPLE": 16},
                    description="exploit: computes only the rows and columns a sampled verifier reads")]
