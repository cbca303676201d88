"""Exploit x_partial_k (tests/adversarial, issue 40 item 8).

drops the last product along K (inside the float32 bound for N(0,1) inputs at K = 65536).

Expected: wrong_result (net 'verification') with inputs.distribution=integers (exact rule) at 64x64x65536."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_partial_k<16, 1>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_partial_k", source="x_partial_k.cu", defaults={},
                    description="exploit: drops one product along K")]
