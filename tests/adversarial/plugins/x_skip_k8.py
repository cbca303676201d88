"""Exploit x_skip_k8 (tests/adversarial, issue 40 item 8).

forms every 8th product along K and multiplies the sum by 8 ("8x the peak").

Expected: wrong_result (net 'verification'), with normal and with integer inputs."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_skip_k<16, 8>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_skip_k8", source="x_skip_k.cu", defaults={},
                    description="exploit: K/8 of the products, x8")]
