"""Built-in kernel ``cublas``: cuBLAS GEMM through nvmath-python's cuBLAS bindings, for every
precision and layout gemmlab has, so ``baseline=cublas`` always compares like with like.

Row-major C = A·B is computed as the column-major product Cᵀ = Bᵀ·Aᵀ: cuBLAS is called with
the operands swapped and m, n exchanged (cuBLAS docs, cublas<t>gemm; the usual row-major
trick). A row-major operand seen column-major is already transposed (op N); a column-major one
needs op T, with its own leading dimension (``Problem.lda``/``ldb``).

- ``fp32``: ``cublasSgemm`` with CUBLAS_DEFAULT_MATH, which never uses TF32 unless asked
  (cuBLAS docs, cublasMath_t).
- ``tf32``: ``cublasSgemm`` with CUBLAS_TF32_TENSOR_OP_MATH.
- ``bf16`` / ``fp16``: ``cublasGemmEx`` with CUDA_R_16BF / CUDA_R_16F inputs, CUDA_R_32F output
  and CUBLAS_COMPUTE_32F (float32 accumulation), CUBLAS_GEMM_DEFAULT.

Optional: ``pip install 'gemmlab[cublas]'`` brings nvmath-python.
"""

from __future__ import annotations

import functools

import numpy as np

from gemmlab.contract.hookspecs import (LAYOUTS, PRECISIONS, DevicePointers, LibraryKernelSpec, ParamError, Problem,
                                        Shape, hookimpl)

INSTALL_HINT = "install the optional extra: pip install 'gemmlab[cublas]' (nvmath-python, nvidia-cublas)"


def _cublas():
    from nvmath.bindings import cublas
    return cublas


class CublasSgemm(LibraryKernelSpec):
    """cuBLAS GEMM: SGEMM for fp32/tf32 (TF32 tensor cores only with precision=tf32), GemmEx for
    bf16/fp16 inputs with float32 C and compute; any layout of A and B."""

    def available(self) -> str | None:
        try:
            _cublas()
        except Exception as exc:  # ImportError, or the cuBLAS library not found
            return f"kernel cublas needs nvmath-python's cuBLAS bindings ({type(exc).__name__}: {exc}); {INSTALL_HINT}"
        return None

    def library_version(self) -> str:
        return _version()

    def types(self, problem: Problem) -> dict:
        compute = {"fp32": "float32 (cublasSgemm, CUBLAS_DEFAULT_MATH: no TF32)",
                   "tf32": "TF32 tensor cores, float32 accumulate (cublasSgemm, CUBLAS_TF32_TENSOR_OP_MATH)",
                   "bf16": "float32 accumulate (cublasGemmEx, CUBLAS_COMPUTE_32F)",
                   "fp16": "float32 accumulate (cublasGemmEx, CUBLAS_COMPUTE_32F)"}[problem.precision]
        return {"a_dtype": problem.ab_dtype, "b_dtype": problem.ab_dtype, "c_dtype": "float32", "compute": compute}

    def enqueue_function(self, shape: Shape, params, pointers: DevicePointers, precision: str):
        """v1 entry (row-major operands): see :meth:`enqueue_problem`."""
        return self.enqueue_problem(Problem(shape, precision), params, pointers)

    def enqueue_problem(self, problem: Problem, params, pointers: DevicePointers):
        cublas = _cublas()
        precision = problem.precision
        if precision not in self.precisions:
            raise ParamError("precision", f"kernel cublas supports {', '.join(self.precisions)}, got {precision!r}")
        handle = cublas.create()
        cublas.set_stream(handle, pointers.stream)
        mode = cublas.Math.TF32_TENSOR_OP_MATH if precision == "tf32" else cublas.Math.DEFAULT_MATH
        cublas.set_math_mode(handle, int(mode))
        scalars = np.array([1.0, 0.0], dtype=np.float32)  # alpha, beta (host pointer mode, float32 compute)
        alpha, beta = scalars.ctypes.data, scalars.ctypes.data + 4
        op = {"row": int(cublas.Operation.N), "col": int(cublas.Operation.T)}
        op_b, op_a = op[problem.layout_b], op[problem.layout_a]
        m, n, k = problem.M, problem.N, problem.K
        lda, ldb, ldc = problem.lda, problem.ldb, problem.ldc

        if precision in ("fp32", "tf32"):
            def enqueue(_keep_alive=scalars):  # alpha/beta are host pointers into ``scalars``
                # column-major view: C^T (n x m, ld n) = op(B^T) (n x k) @ op(A^T) (k x m)
                cublas.sgemm(handle, op_b, op_a, n, m, k, alpha, pointers.b, ldb, pointers.a, lda, beta, pointers.c, ldc)
        else:
            in_type, out_type = _data_types(precision)
            compute, algo = int(cublas.ComputeType.COMPUTE_32F), int(cublas.GemmAlgo.DEFAULT)

            def enqueue(_keep_alive=scalars):
                cublas.gemm_ex(handle, op_b, op_a, n, m, k, alpha, pointers.b, in_type, ldb, pointers.a, in_type, lda,
                               beta, pointers.c, out_type, ldc, compute, algo)

        def close():
            cublas.destroy(handle)

        return enqueue, close


def _data_types(precision: str) -> tuple[int, int]:
    """cudaDataType values (library_types.h, through cuda.bindings) of the inputs and of C."""
    from cuda.bindings.runtime import cudaDataType
    inputs = cudaDataType.CUDA_R_16BF if precision == "bf16" else cudaDataType.CUDA_R_16F
    return int(inputs), int(cudaDataType.CUDA_R_32F)


def clear_cache() -> None:
    """Forget cuBLAS's version read so far (another nvmath-python, e.g. a test's stand-in, is
    asked again). For tests and long-lived processes."""
    _version.cache_clear()


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
    return [CublasSgemm(name="cublas", source="", defaults={}, precisions=PRECISIONS,
                        layouts=tuple((a, b) for a in LAYOUTS for b in LAYOUTS),
                        description="cuBLAS SGEMM/GemmEx via nvmath-python (baseline; every precision "
                                    "fp32/tf32/bf16/fp16 and layout, float32 C and accumulation)")]
