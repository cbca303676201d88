"""Test-only mutant of the ``wgmma_fp8`` kernel (issue 42): ``wgmma_fp8_no_promotion`` compiles
kernels/wgmma_fp8.cu with ``-D WGMMA_FP8_NO_PROMOTION=1`` (all of K accumulates in the FP8 tensor
core's accumulator, never promoted) while declaring promotion every 128 of K like the shipped kernel.
The fp8 bound must catch it at large K on the GPU (tests/test_gpu_wgmma_fp8.py); OVERLAP=0 and
tensor or row scaling only. Loaded with ``plugin_dirs=[tests/plugins_fp8_mutant]``."""

from __future__ import annotations

import dataclasses
import importlib

from gemmlab.contract.hookspecs import ParamError, hookimpl

base = importlib.import_module("gemmlab_plugins.wgmma_fp8")


class NoPromotion(base.WgmmaFp8Kernel):
    """The shipped kernel's plugin with the mutant's define (module docstring)."""

    def check_problem(self, problem, params, device):
        super().check_problem(problem, params, device)
        if params["OVERLAP"] != 0 or problem.scaling == "block":
            raise ParamError("kernel.OVERLAP", "the no-promotion mutant runs with OVERLAP=0 and tensor or row scaling")

    def options(self, problem, params, device):
        return dataclasses.replace(super().options(problem, params, device), defines={"WGMMA_FP8_NO_PROMOTION": 1})


@hookimpl
def gemmlab_kernels():
    return [NoPromotion(name="wgmma_fp8_no_promotion", source="wgmma_fp8.cu", defaults={**base.DEFAULTS, "OVERLAP": 0},
                        description="test mutant: wgmma_fp8 that never promotes, declaring promotion every 128",
                        precisions=("fp8",), layouts=(("row", "col"),), param_values=base.PARAM_VALUES,
                        sass_classes=("QGMMA", "UTMALDG"), fp8_accumulation=base.PROMOTE)]
