"""Exploit x_lazy_once (tests/adversarial, issue 40 item 8).

correct on its first launch (the correctness launch), then every launch returns at once (a __device__
counter of finished blocks).

Expected: wrong_after_timing (net 'verification after timing'): the timed launch path, run again on new inputs in the
same buffers, leaves the NaN fill."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_lazy<16, 1>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_lazy_once", source="x_lazy.cu", defaults={},
                    description="exploit: right once, then returns at once")]
