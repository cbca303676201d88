"""Exploit x_sticky7 (tests/adversarial, issue 40 item 8).

right, but its FAULT_AT-th launch (default 7: the last of 6 warm-up launches after the correctness
launch) stores 2^40 elements past C.

Expected: cuda_error (net 'cuda error'); with isolation the next point runs."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return f"x_sticky7<16, {params['FAULT_AT']}>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_sticky7", source="x_sticky7.cu", defaults={"FAULT_AT": 7},
                    description="exploit: illegal address on launch 7")]
