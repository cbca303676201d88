"""Built-in kernel ``triton_matmul`` (issue 46): Triton's tutorial-style matmul
(``kernels/triton_matmul.py``, function ``matmul_kernel``) as a gemmlab Triton plugin.

A and B as gemmlab stores them (float32 for fp32/tf32, bfloat16, float16), C float32, float32
accumulation; ``layout.b=row|col`` through strides; masked loads and stores for partial tiles.
``precision=fp32`` multiplies with ``tl.dot(..., input_precision="ieee")`` (float32 FMAs),
``tf32`` with ``input_precision="tf32"`` (tensor cores), bf16/fp16 on the tensor cores.

``tf32_rounding`` is left undeclared: on sm_90 Triton 3.9 feeds the float32 tiles to wgmma with no
conversion instruction in the PTX (no ``cvt.*.tf32.f32``: the tensor core reads the float32 bits,
i.e. truncation), while its mma.sync path (other targets, small tiles) rounds with
``cvt.rna.tf32.f32``; which one a compile takes depends on the target and the tile, so gemmlab's
verification accepts any of the four roundings (hookspecs.TF32_ROUNDINGS).

Optional: ``pip install 'gemmlab[triton]'``; without Triton the kernel is listed and a run of it
is refused in one line.
"""

from __future__ import annotations

from gemmlab.contract.hookspecs import Dim, Matrix, ParamError, TritonKernelSpec, Value, hookimpl
from gemmlab.contract.plugin_utils import cdiv
from gemmlab.contract.space import Choice, PowerOfTwo, Restriction, Space

DEFAULTS = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}

SPACE = Space({"BLOCK_M": PowerOfTwo(32, 256), "BLOCK_N": PowerOfTwo(32, 256), "BLOCK_K": PowerOfTwo(16, 128),
               "GROUP_M": Choice((1, 4, 8, 16)), "num_warps": Choice((2, 4, 8)), "num_stages": Choice((2, 3, 4, 5))},
              (Restriction("tile", lambda p: p["BLOCK_M"] * p["BLOCK_N"] <= 256 * 128,
                           "a BLOCK_M x BLOCK_N tile of at most 32768 float32 accumulators", over=("BLOCK_M", "BLOCK_N")),))


def strides(problem) -> tuple:
    """(stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn) in elements, from the layouts."""
    sa = (problem.lda, 1) if problem.layout_a == "row" else (1, problem.lda)
    sb = (problem.ldb, 1) if problem.layout_b == "row" else (1, problem.ldb)
    return (*sa, *sb, problem.ldc, 1)


class TritonMatmul(TritonKernelSpec):
    """Triton's tutorial matmul: one program per BLOCK_M x BLOCK_N tile of C, grouped by GROUP_M rows."""

    def check_problem(self, problem, params, device):
        """BLOCK_M, BLOCK_N, BLOCK_K powers of two: each is a ``tl.arange`` range, which Triton takes
        only as a power of two (BLOCK_M=100 failed in Triton's compiler, exit 1, not as bad input).

        Raises:
            ParamError: naming ``kernel.BLOCK_*``."""
        for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
            value = params[name]
            if value & (value - 1):
                raise ParamError(f"kernel.{name}", f"must be a power of two (a tl.arange range), got {value}")

    def grid(self, problem, params):
        return (cdiv(problem.M, params["BLOCK_M"]) * cdiv(problem.N, params["BLOCK_N"]),)

    def arguments(self, problem, params, device):
        return (Matrix("A"), Matrix("B"), Matrix("C"), Dim("M"), Dim("N"), Dim("K"),
                *(Value(s, "int32") for s in strides(problem)))

    def constants(self, problem, params):
        return dict(super().constants(problem, params),
                    INPUT_PRECISION="ieee" if problem.precision == "fp32" else "tf32")

    def sass_classes_for(self, problem, params):
        # fp32 is float32 FMA arithmetic ("ieee"); the tensor-core precisions take wgmma (HGMMA) or
        # mma.sync (HMMA) by target and tile, so no one class is declared for them
        return ("FFMA",) if problem.precision == "fp32" else ()


@hookimpl
def gemmlab_kernels():
    return [TritonMatmul(name="triton_matmul", source="triton_matmul.py", function="matmul_kernel",
                         defaults=dict(DEFAULTS), space=SPACE, precisions=("fp32", "tf32", "bf16", "fp16"),
                         layouts=(("row", "row"), ("row", "col")),
                         description="Triton tutorial matmul (optional extra gemmlab[triton]): masked tiles, "
                                     "GROUP_M program order, tl.dot; fp32/tf32/bf16/fp16, layout.b row|col")]
