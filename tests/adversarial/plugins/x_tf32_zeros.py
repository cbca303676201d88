"""Exploit x_tf32_zeros (tests/adversarial, issue 40 item 8).

a precision=tf32 kernel that writes zeros.

Expected: wrong_result (net 'verification': the TF32 rule of issue 40 item 1) at 64x64x4096."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_tf32_zeros<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_tf32_zeros", source="x_tf32_zeros.cu", defaults={},
                    precisions=("tf32",),
                    description="exploit: all zeros for tf32")]
