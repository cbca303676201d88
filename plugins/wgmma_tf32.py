"""Built-in kernel ``wgmma_tf32``: the persistent warp-specialised wgmma GEMM of ``wgmma_bf16``
(kernels/wgmma_tf32.cu includes kernels/wgmma_bf16.cu; plugin class
:class:`gemmlab_plugins.wgmma_bf16.WgmmaKernel`) with float32 storage read as TF32 by wgmma
m64nBNk8 (the tensor core uses the top 19 bits of each float32 operand; no cvt.rna rounding,
unlike ``mma_tf32``; within the verification's TF32 bound).

Layouts: A row-major, B column-major only (``layout.b=col``). TF32 wgmma has no transposed-operand
mode: both shared-memory operands must be K-major, and row-major B (K x N, N contiguous) is
N-major. The kernel refuses ``layout.b=row`` in one line (the core's layout check) rather than
adding a transpose pass: a transposed copy of B would need a TMA map over a workspace, which
contract v2's TensorMap (A, B or C) cannot name, and its cost (reading and writing all of B once,
about 4.6% of the 4096^3 time) would be timed as part of the kernel. Use ``layout.b=col``;
cuBLAS is compared in the same layout.
TMA rules: the stored row strides K*4 bytes must be multiples of 16, so K % 4 == 0.
Parameters as ``wgmma_bf16`` (a stage holds 32 float32 of K per row: 128 bytes).
"""

from __future__ import annotations

from gemmlab.contract.hookspecs import hookimpl
from gemmlab_plugins.wgmma_bf16 import WgmmaKernel


@hookimpl
def gemmlab_kernels():
    return [WgmmaKernel(name="wgmma_tf32", source="wgmma_tf32.cu",
                        defaults={"BM": 128, "BN": 256, "STAGES": 4, "CLUSTER": 1, "GROUP_M": 8, "SCHED": 1,
                                  "SPLIT_K": 1, "TAIL": 1},
                        description="TF32 sm_90a: persistent, producer + 2 consumer warpgroups (setmaxnreg), "
                                    "TMA ring with full/empty mbarriers, wgmma m64n256k8 (layout.b=col only)",
                        precisions=("tf32",), layouts=(("row", "col"),))]
