"""Exploit x_drift (tests/adversarial, issue 40 item 8).

from its second launch on, C[0][0] is one float32 step off (within the tolerance): a stand-in for a race.

Expected: unstable (net 'repeat stability')."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_drift<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_drift", source="x_drift.cu", defaults={},
                    description="exploit: one element one ulp off after the first launch")]
