"""Exploit x_lazy_graph (tests/adversarial, issue 40 item 8).

with timing=graph (W warm-up launches, B launches a graph), correct for the correctness launch, the
warm-up and the first G graph replays (the upload replay and the first timed one), then returns at once.

Expected: wrong_after_timing (net 'verification after timing': the graph replayed on new inputs)."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return f"x_lazy<16, {1 + params['W'] + params['B'] * params['G']}>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_lazy_graph", source="x_lazy.cu", defaults={"W": 2, "B": 4, "G": 2},
                    description="exploit: right for 1 + W + B*G launches, then returns at once")]
