"""Built-in kernel ``wgmma_tf32``: the persistent warp-specialised wgmma GEMM of ``wgmma_bf16``
(kernels/wgmma_tf32.cu includes kernels/wgmma_bf16.cu; plugin class
:class:`gemmlab_plugins.wgmma_bf16.WgmmaKernel`) with float32 storage read as TF32 by wgmma
m64nBNk8 (the tensor core uses the top 19 bits of each float32 operand; no cvt.rna rounding,
unlike ``mma_tf32``; within the verification's TF32 bound).

Layouts: all four (layout.a, layout.b) pairs. A row-major (K-major: read as stored) or column-major
(``layout.a=col``, issue 43); B column-major (``layout.b=col``, K-major: read as stored) or row-major
(``layout.b=row``). TF32 wgmma has no transposed-operand mode: both shared-memory operands must be
K-major, so a row-major B (K x N, N contiguous) is first transposed into the workspace by an Extra
step of the plan (``gemmlab::relayout_transpose`` of ``gemmlab/relayout.cuh``: the K-major N x Kp
copy, K padded to 4 with zeros), and the K-major kernel instance reads the copy through a TMA map
over the workspace; a column-major A (stored K x M) likewise (the K-major M x Kp copy, at the
workspace's start, B's copy after it). Each transpose reads and writes its operand once inside every
timed launch (its cost is part of the time; the record's ``plan`` lists it). Chosen over an in-shared-memory
transpose (a second kernel body) and over the transposed problem C^T = B^T A^T (needs a
column-major C store): it keeps one kernel and costs one pass over B.
TMA rules: the stored row stride K*4 bytes must be a multiple of 16; where it is not (K % 4 != 0),
a row-major A (and a column-major B) is pad-copied into the workspace first, like ``wgmma_bf16``.
Parameters as ``wgmma_bf16`` (a stage holds 32 float32 of K per row: 128 bytes).

The whole GEMM contract (issue 43): the fused entries of ``wgmma_bf16`` with ELEM = 4
(:data:`gemmlab_plugins.wgmma_bf16.EPILOGUE`: alpha, beta·C0, bias, every activation, a float32/bf16/fp16
C, ldc above N; the TMA-store epilogue with ``EPI`` 2 and 7). The transpose pre-pass of a row-major B
(or column-major A) stays in the plan and in the time.
"""

from __future__ import annotations

from gemmlab.contract.hookspecs import hookimpl
from gemmlab_plugins.wgmma_bf16 import DEFAULTS, EPILOGUE, LAYOUTS, PARAM_VALUES, SPACE, WgmmaKernel


@hookimpl
def gemmlab_kernels():
    return [WgmmaKernel(name="wgmma_tf32", source="wgmma_tf32.cu", defaults=dict(DEFAULTS),
                        description="TF32 sm_90a: persistent, producer + 2 consumer warpgroups (setmaxnreg), "
                                    "TMA ring with full/empty mbarriers, wgmma m64n256k8 (layout.b=row / layout.a=col: B / A transposed first)",
                        precisions=("tf32",), layouts=LAYOUTS,
                        param_values=PARAM_VALUES, space=SPACE,
                        sass_classes=("HGMMA", "UTMALDG"),
                        tf32_rounding="rz", epilogue=EPILOGUE)]  # float32 bits read as TF32 by wgmma: truncated (measured: H100, docs/trust.md)
