"""Exploit x_nan_some (tests/adversarial, issue 40 item 8).

leaves the last row of C unwritten.

Expected: wrong_result (net 'verification': NaN outputs)."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_nan_some<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_nan_some", source="x_nan_some.cu", defaults={},
                    description="exploit: last row unwritten")]
