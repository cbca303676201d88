"""gemmlab's built-in kernel plugins (installed under the import name ``gemmlab_plugins``).

Each module listed in ``BUILTIN_MODULES`` implements the ``gemmlab_kernels`` hook
(``gemmlab.contract.hookspecs``). The core discovers them through ``gemmlab.contract.registry``; it never imports
one by name.
"""

BUILTIN_MODULES = ("naive", "tiled", "ladder", "sgemm", "cublas", "mma_tf32", "mma_bf16", "splitk",
                   "tma_bf16", "cluster_tiled", "gemv_rows", "gemv_cols", "small_tile", "slicedk", "streamk",
                   "wgmma_bf16", "wgmma_tf32", "decode_bf16", "triton_matmul", "splitk_dot",
                   "triton_tma_persistent", "wgmma_fp8", "grouped_ref", "wgmma_grouped")
