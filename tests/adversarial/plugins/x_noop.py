"""Exploit x_noop (tests/adversarial, issue 40 item 8).

writes nothing, counting on a stale correct C in the output buffer (KernelBench).

Expected: wrong_result (net 'verification': the NaN fill is still there)."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_noop<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_noop", source="x_noop.cu", defaults={},
                    description="exploit: writes nothing")]
