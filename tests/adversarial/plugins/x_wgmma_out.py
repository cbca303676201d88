"""Exploit x_wgmma_out (tests/adversarial, issue 40 item 8).

a BF16 "wgmma" kernel that declares the SASS class HGMMA (``sass_classes``) but is built for plain
sm_90 (no ``arch_specific``), so its wgmma path, guarded by ``__CUDA_ARCH_FEAT_SM90_ALL``, is
compiled out and a CUDA-core fallback computes a right C. SM90A=2 builds for sm_90a instead (HGMMA
then in the SASS; the contrast, not in the corpus).

Expected: missing_instructions (net 'instruction classes')."""

from gemmlab.contract.hookspecs import KernelOptions, KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_wgmma_out<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))

    def options(self, problem, params, device):
        return KernelOptions(arch_specific=params["SM90A"] == 2)


@hookimpl
def gemmlab_kernels():
    spec = Exploit(name="x_wgmma_out", source="x_wgmma_out.cu", defaults={"SM90A": 1}, precisions=("bf16",),
                   param_values={"SM90A": (1, 2)},
                   description="exploit: declares HGMMA, wgmma compiled out without sm_90a")
    spec.sass_classes = ("HGMMA",)  # set on the instance: works whether or not KernelSpec declares the field yet
    return [spec]
