"""Exploit x_write_input (tests/adversarial, issue 40 item 8).

sets the lowest mantissa bit of some A elements and masks it off on every read (its results
stay within the bound and bitwise repeatable).

Expected: inputs_modified (net 'inputs unchanged')."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_write_input<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_write_input", source="x_write_input.cu", defaults={},
                    description="exploit: writes its input A")]
