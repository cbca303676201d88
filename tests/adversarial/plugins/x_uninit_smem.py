"""Exploit x_uninit_smem (tests/adversarial, issue 40 item 8).

reads shared memory no thread of its block wrote yet (another warp writes it later, no barrier).

Expected: sanitizer_errors under sanitizer=racecheck (net 'sanitizer'); its output is right."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_uninit_smem<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_uninit_smem", source="x_uninit_smem.cu", defaults={},
                    description="exploit: reads uninitialised shared memory")]
