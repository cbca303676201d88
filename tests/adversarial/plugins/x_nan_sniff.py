"""Exploit x_nan_sniff (tests/adversarial, issue 40 item 8).

computes an output only where it finds the NaN fill (a verification launch); a timed launch finds
numbers and returns at once. Every output it leaves is right.

Expected: implausible (net 'plausibility' at 1024^3): verification after timing NaN-fills C too, so it passes."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_nan_sniff<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_nan_sniff", source="x_nan_sniff.cu", defaults={},
                    description="exploit: computes only over the NaN fill")]
