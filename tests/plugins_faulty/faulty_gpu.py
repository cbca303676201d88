"""Drop-in test plugin: real faulty CUDA kernels (faulty_gpu.cu) for the fault-isolation GPU test
and issue 11's fault sweep (.ci/fault-evidence, removed in 1511331). ``misaligned`` (float4 loads,
misaligned at N = 65), ``illegal`` (stores 2^40 elements past C), ``trap`` (``__trap()``), ``hang`` (spins ~SPIN_GCYCLES x 0.5 s on the H200; the watchdog should end
it first)."""

from pathlib import Path

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv

SOURCE = Path(__file__).resolve().with_suffix(".cu")


class Misaligned(KernelSpec):
    def entry(self, params):
        return f"gemm_misaligned<{params['BX']}>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(cdiv(shape.N, 4), params["BX"]), shape.M, 1), block=(params["BX"], 1, 1))


class Illegal(KernelSpec):
    def entry(self, params):
        return f"gemm_illegal<{params['BX']}>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, params["BX"]), 1, 1), block=(params["BX"], 1, 1))


class Trap(Illegal):
    def entry(self, params):
        return f"gemm_trap<{params['BX']}>"


class Hang(KernelSpec):
    def entry(self, params):
        return f"gemm_hang<{params['SPIN_GCYCLES']}>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 32), shape.M, 1), block=(32, 1, 1))


@hookimpl
def gemmlab_kernels():
    return [Misaligned(name="misaligned", source=str(SOURCE), defaults={"BX": 32},
                       description="test: float4 loads of B rows, misaligned when N % 4 != 0"),
            Illegal(name="illegal", source=str(SOURCE), defaults={"BX": 32},
                    description="test: stores 2^40 elements past C (illegal address)"),
            Trap(name="trap", source=str(SOURCE), defaults={"BX": 32},
                 description="test: every thread executes __trap()"),
            Hang(name="hang", source=str(SOURCE), defaults={"SPIN_GCYCLES": 120},
                 description="test: spins about a minute on clock64 (a hung kernel)")]
