"""Exploit x_write_past_c (tests/adversarial, issue 40 item 8).

a right C plus one store just past its end.

Expected: out_of_bounds (net 'guard bands')."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_write_past_c<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_write_past_c", source="x_write_past_c.cu", defaults={},
                    description="exploit: writes past C")]
