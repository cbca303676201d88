"""Exploit x_clock_aware (tests/adversarial, issue 40 item 8).

reads %globaltimer: computes on its first launch and after a gap of more than GAP_US microseconds
(a verification after host work), returns at once when launched back to back (a timed graph replay).

Expected: implausible (net 'plausibility' at 1024^3, timing=graph, batch 400): the verification after timing
follows host work, so it computes there and passes."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return f"x_clock_aware<16, {params['GAP_US']}>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_clock_aware", source="x_clock_aware.cu", defaults={"GAP_US": 20},
                    description="exploit: works only when launched after a pause (%globaltimer)")]
