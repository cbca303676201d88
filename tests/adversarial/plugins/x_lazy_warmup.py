"""Exploit x_lazy_warmup (tests/adversarial, issue 40 item 8).

correct for the correctness launch and the W warm-up launches (W = timing.warmup), then returns at once.

Expected: wrong_after_timing (net 'verification after timing')."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return f"x_lazy<16, {1 + params['W']}>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_lazy_warmup", source="x_lazy.cu", defaults={"W": 5},
                    description="exploit: right for 1 + W launches, then returns at once")]
