"""Drop-in plugin exercising contract v2 (used by tests/test_contract_v2.py and its GPU tests):
layouts, a launch plan with workspace and extra kernel, clusters, a TMA tensor-map argument,
bf16/fp16 inputs and compile options."""

from pathlib import Path

from gemmlab.contract.hookspecs import (Dim, Extra, KernelOptions, KernelSpec, Launch, Main, Matrix, Memset,
                                        TensorMap, Value, Workspace, hookimpl)
from gemmlab.contract.plugin_utils import cdiv

SOURCE = str(Path(__file__).with_name("v2kernels.cu"))
ALL_LAYOUTS = (("row", "row"), ("row", "col"), ("col", "row"), ("col", "col"))


def _grid(problem, bx=16, by=16):
    return Launch(grid=(cdiv(problem.N, bx), cdiv(problem.M, by), 1), block=(bx, by, 1))


class LayoutKernel(KernelSpec):
    """Any layout of A and B, through lda/ldb."""

    def instance(self, problem, params):
        return f"gemm_layout<{int(problem.layout_a == 'col')}, {int(problem.layout_b == 'col')}>"

    def geometry(self, problem, params, device):
        return _grid(problem)

    def arguments(self, problem, params, device):
        return (Matrix("A"), Matrix("B"), Matrix("C"), Dim("M"), Dim("N"), Dim("K"), Dim("lda"), Dim("ldb"))


class PlanKernel(KernelSpec):
    """Memset C, main kernel (C += A@B/2, workspace = A@B/2), extra kernel (C += workspace)."""

    def instance(self, problem, params):
        return "gemm_part<1>"

    def geometry(self, problem, params, device):
        return _grid(problem)

    def options(self, problem, params, device):
        return KernelOptions(defines={"V2_PLAN": 1}, max_registers=64)

    def arguments(self, problem, params, device):
        return (Matrix("A"), Matrix("B"), Matrix("C"), Workspace(), Dim("M"), Dim("N"), Dim("K"),
                Value(0.5, "float32"))

    def workspace_bytes(self, problem, params, device):
        return 4 * problem.M * problem.N

    def plan(self, problem, params, device):
        return (Memset("C"), Main(),
                Extra("add_ws<1>", Launch(grid=(cdiv(problem.M * problem.N, 256), 1, 1), block=(256, 1, 1)),
                      (Matrix("C"), Workspace(), Dim("M"), Dim("N"))))


class ClusterKernel(KernelSpec):
    """The row/row layout kernel launched in clusters of CX blocks along x."""

    def instance(self, problem, params):
        return "gemm_layout<0, 0>"

    def geometry(self, problem, params, device):
        cx = params["CX"]
        return Launch(grid=(cdiv(cdiv(problem.N, 16), cx) * cx + params["PAD"], cdiv(problem.M, 16), 1),
                      block=(16, 16, 1), cluster=(cx, 1, 1))

    def arguments(self, problem, params, device):
        return (Matrix("A"), Matrix("B"), Matrix("C"), Dim("M"), Dim("N"), Dim("K"), Dim("lda"), Dim("ldb"))


class TmaKernel(KernelSpec):
    """A TMA tensor map over A (box BR x BC, swizzle SW: 0 none, 1 32B, 2 64B, 3 128B) first."""

    def instance(self, problem, params):
        return "gemm_after_map<0>"

    def geometry(self, problem, params, device):
        return _grid(problem)

    def options(self, problem, params, device):
        return KernelOptions(arch_specific=bool(params["ARCHA"]))

    def arguments(self, problem, params, device):
        swizzle = ("none", "32B", "64B", "128B")[params["SW"] % 4]
        return (TensorMap("A", (params["BR"], params["BC"]), swizzle=swizzle), Matrix("A"), Matrix("B"), Matrix("C"),
                Dim("M"), Dim("N"), Dim("K"))


class HalfKernel(KernelSpec):
    """bf16 or fp16 inputs (CUDA's cuda_bf16.h / cuda_fp16.h from the pip wheels)."""

    def instance(self, problem, params):
        return f"gemm_half<{'__nv_bfloat16' if problem.precision == 'bf16' else '__half'}>"

    def geometry(self, problem, params, device):
        return _grid(problem)


@hookimpl
def gemmlab_kernels():
    return [
        LayoutKernel(name="v2_layout", source=SOURCE, layouts=ALL_LAYOUTS, description="v2 test: layouts via lda/ldb"),
        PlanKernel(name="v2_plan", source=SOURCE, description="v2 test: memset + main + extra kernel, workspace"),
        ClusterKernel(name="v2_cluster", source=SOURCE, defaults={"CX": 2, "PAD": 0},
                      description="v2 test: thread-block clusters"),
        TmaKernel(name="v2_tma", source=SOURCE, defaults={"BR": 16, "BC": 32, "SW": 3, "ARCHA": 0},
                  description="v2 test: a TMA tensor map argument"),
        HalfKernel(name="v2_half", source=SOURCE, precisions=("bf16", "fp16"), description="v2 test: 2-byte inputs"),
    ]
