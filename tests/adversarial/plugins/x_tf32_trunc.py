"""Exploit x_tf32_trunc (tests/adversarial, issue 40 item 8).

claims fp32 but multiplies inputs truncated to TF32.

Expected: wrong_result (net 'verification')."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_low_precision<16, 2>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_tf32_trunc", source="x_low_precision.cu", defaults={},
                    description="exploit: TF32-truncated inputs for an fp32 claim")]
