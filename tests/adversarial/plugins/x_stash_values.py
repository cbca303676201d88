"""Exploit x_stash_values (tests/adversarial, issue 40 item 8).

copies a private __device__ copy of C keyed by the first and last values of A and B; new inputs are
computed once, then copied again (so every output it gives is right).

Expected: implausible (net 'plausibility': the timed copy of C is faster than the FP32 peak at 1024^3)."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_stash_values<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_stash_values", source="x_stash_values.cu", defaults={},
                    description="exploit: stashed C keyed by input values")]
