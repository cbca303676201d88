"""Built-in kernel ``cublas``: cuBLAS SGEMM through nvmath-python's cuBLAS bindings.

Row-major C = A·B is computed as the column-major product Cᵀ = Bᵀ·Aᵀ: cuBLAS is called with
the operands swapped and m, n exchanged (cuBLAS docs, cublas<t>gemm; the usual row-major
trick). Math mode: ``precision=fp32`` sets CUBLAS_DEFAULT_MATH, which never uses TF32 unless
asked (cuBLAS docs, cublasMath_t); ``precision=tf32`` sets CUBLAS_TF32_TENSOR_OP_MATH. Optional: ``pip install 'gemmlab[cublas]'`` brings nvmath-python.
"""

from __future__ import annotations

import functools

import numpy as np

from gemmlab.hookspecs import DevicePointers, LibraryKernelSpec, ParamError, Shape, hookimpl

INSTALL_HINT = "install the optional extra: pip install 'gemmlab[cublas]' (nvmath-python, nvidia-cublas)"


def _cublas():
    from nvmath.bindings import cublas
    return cublas


class CublasSgemm(LibraryKernelSpec):
    """cuBLAS SGEMM (float32 in/out; TF32 tensor cores only with precision=tf32)."""

    def available(self) -> str | None:
        try:
            _cublas()
        except Exception as exc:  # ImportError, or the cuBLAS library not found
            return f"kernel cublas needs nvmath-python's cuBLAS bindings ({type(exc).__name__}: {exc}); {INSTALL_HINT}"
        return None

    def library_version(self) -> str:
        return _version()

    def enqueue_function(self, shape: Shape, params, pointers: DevicePointers, precision: str):
        cublas = _cublas()
        if precision not in self.precisions:
            raise ParamError("precision", f"kernel cublas supports {', '.join(self.precisions)}, got {precision!r}")
        handle = cublas.create()
        cublas.set_stream(handle, pointers.stream)
        mode = cublas.Math.TF32_TENSOR_OP_MATH if precision == "tf32" else cublas.Math.DEFAULT_MATH
        cublas.set_math_mode(handle, int(mode))
        scalars = np.array([1.0, 0.0], dtype=np.float32)  # alpha, beta (host pointer mode)
        alpha, beta = scalars.ctypes.data, scalars.ctypes.data + 4
        n_op = int(cublas.Operation.N)
        m, n, k = shape.M, shape.N, shape.K

        def enqueue(_keep_alive=scalars):  # alpha/beta are host pointers into ``scalars``
            # column-major view: C^T (n x m, ld n) = B^T (n x k, ld n) @ A^T (k x m, ld k)
            cublas.sgemm(handle, n_op, n_op, n, m, k, alpha, pointers.b, n, pointers.a, k, beta, pointers.c, n)

        def close():
            cublas.destroy(handle)

        return enqueue, close


@functools.lru_cache(maxsize=1)
def _version() -> str:
    """cuBLAS's version (one handle per process, not one per point)."""
    cublas = _cublas()
    handle = cublas.create()
    try:
        v = cublas.get_version(handle)
    finally:
        cublas.destroy(handle)
    return f"cuBLAS {v // 10000}.{(v // 100) % 100}.{v % 100} via nvmath-python"


@hookimpl
def gemmlab_kernels():
    return [CublasSgemm(name="cublas", source="", defaults={}, precisions=("fp32", "tf32"),
                        description="cuBLAS SGEMM via nvmath-python (baseline; precision=tf32 for TF32 tensor cores)")]
