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
- ``fp8`` (issue 42): ``cublasLtMatmul`` through nvmath-python's cuBLASLt bindings, CUDA_R_8F_E4M3 /
  CUDA_R_8F_E5M2 inputs, float32 or bf16 D, CUBLAS_COMPUTE_32F, fast accumulation off (cuBLASLt
  then "periodically promotes" its partial sums; the interval is undocumented, so the kernel
  declares no ``fp8_accumulation`` and the bound assumes none). FP8 cuBLASLt on Hopper takes only
  the "TN" form (its A transposed, its B not: both K-major), which for gemmlab's row-major C =
  A·B (computed as Cᵀ = Bᵀ·Aᵀ) is ``layout.a=row layout.b=col``; other layouts are refused in one
  line. Scaling (cuBLAS docs, "Scaling Mode Support Overview" and §3.1.4, cuBLAS 12.9+): ``tensor``
  is CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F (compute capability 8.9+); ``row`` is OUTER_VEC_32F
  and ``block`` is VEC128_32F for A with BLK128x128_32F for B (9.0 only; BLK128x128 on both is
  not supported, and the scale layouts are the ones gemmlab's contract fixes, so no copy is
  made). The descriptors, the heuristic query and a 32 MiB workspace are made once per point
  (``enqueue_problem``, outside every timed interval); each launch is one ``cublasLtMatmul``.
  No E5M2 x E5M2 (not in cuBLASLt's FP8 type table).

The whole GEMM contract (issue 43): a problem beyond C = A·B (alpha, beta·C0, a bias, an
activation, a bf16/fp16 C, leading dimensions, strided batches) is one ``cublasLtMatmul``
(:class:`LtPlan`) with CUBLAS_COMPUTE_32F (``_FAST_TF32`` for tf32), float32 alpha and beta (host
pointers), cuBLASLt's C = gemmlab's C0 and D = gemmlab's C (same type and layout), epilogue
DEFAULT, BIAS, RELU, RELU_BIAS, GELU or GELU_BIAS (CUBLASLT_MATMUL_DESC_EPILOGUE; the bias vector
has one element per row of cuBLASLt's column-major D, which is one per column N of gemmlab's
row-major C, broadcast to every row and, with BIAS_BATCH_STRIDE 0, every batch; its type set by
BIAS_DATA_TYPE), and strided batches (CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT and
STRIDED_BATCH_OFFSET on every layout; 0 for a shared A or B). cuBLASLt's GELU is the tanh form
(``gelu_tanh``); it has no SiLU and no erf GELU epilogue, so the baseline refuses
``epilogue.activation=silu`` and ``gelu_erf`` (one line, before anything runs) rather than time a
second pass. C's type follows cuBLASLt's type table: float32, or the inputs' own type for bf16 and
fp16 (no bf16 C from float32 inputs, no bf16 C from fp16 ones; refused in one line). The bias has
D's type (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: "Bias vector elements are the same
type as the elements of output matrix (Dtype)", the exceptions being IMMA and FP8 kernels; on the
H100 a float32 bias with a bf16 D made cublasLtMatmulAlgoGetHeuristic return
CUBLAS_STATUS_INVALID_VALUE, session 31): a float32 C takes ``epilogue.bias=float32``, a bf16/fp16
C ``epilogue.bias=input``; the other is refused in one line naming ``epilogue.bias`` before
anything runs. The descriptors, the heuristic's algorithm and a 32 MiB workspace are made once per
point, outside every timed interval.

Rounding (declared, ``rounds_before_epilogue``): cuBLASLt may round alpha·A·B + beta·C to D's type
before its bias and activation. Measured on the H100 (session 31): 63x65x33 bf16, beta = 0.25,
bf16 bias, GELU_BIAS, bf16 D, leading dimensions 41/41/73 (odd: rows 2-byte aligned) wrote
C[0, 2] = 0.09912109375 where round_bf16(gelu(z)) = 0.10009765625 (z = 0.17555); the CPU
reproduces that value and the verdict's statistics (max abs err 0.102, max err/tol 16.4, 799 of
its 802 mismatches, the rest near the bound) with gelu(bf16(A·B + 0.25·C0) + bias) rounded to
bf16, and no other order or precision of C0, bias or GELU does (tests/test_epilogue.py). The same
epilogue at 256x264x512 with 16-byte aligned rows rounded once, and so did BIAS alone at
63x65x33: which cuBLASLt algorithm (one fused epilogue, or a second pass over D) runs is its
heuristic's choice, and its documentation does not promise one rounding, so the bound covers a
second one for every 16-bit D with a bias or an activation (:mod:`gemmlab.stages.verify_fused`).

Grouped GEMM baselines (issue 44): ``cublas_grouped_loop`` (one call per non-empty group, one
CUDA graph when graph-timed; the ``baseline`` of ``experiment=moe`` and of every grouped
comparison) and ``cublas_grouped`` (``cublasGemmGroupedBatchedEx`` through
``nvmath.bindings.cublas.gemm_grouped_batched_ex``), which cannot be timed under gemmlab's
launch-path rule: cuBLAS takes the per-group m, n, k and leading dimensions as host arrays and
uploads them on every call (its captured enqueue on the H100, session 32: {'kernel': 1,
'mem alloc': 1, 'mem free': 1, 'memcpy host->device': 1}), and gemmlab refuses any host->device
copy inside a library's timed enqueue (a library could upload a host-computed C that way), so
its points end ``foreign_launch`` (:class:`CublasGroupedBatched`).

Optional: ``pip install 'gemmlab[cublas]'`` brings nvmath-python.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from gemmlab.contract.hookspecs import (LAYOUTS, PRECISIONS, DevicePointers, EpilogueSupport, LibraryKernelSpec,
                                        ParamError, Problem, Shape, hookimpl)

INSTALL_HINT = "install the optional extra: pip install 'gemmlab[cublas]' (nvmath-python, nvidia-cublas)"


def _cublas():
    from nvmath.bindings import cublas
    return cublas


def _cublaslt():
    from nvmath.bindings import cublasLt
    return cublasLt


#: workspace cuBLASLt may use for an FP8 GEMM (cuBLAS docs, cublasSetWorkspace: 32 MiB on Hopper)
LT_WORKSPACE_BYTES = 32 << 20
#: cuBLASLt's scale mode of gemmlab's A and of its B, per ``fp8.scaling`` (names of
#: ``cublasLtMatmulMatrixScale_t``)
LT_SCALE_MODES = {"tensor": ("SCALAR_32F", "SCALAR_32F"), "row": ("OUTER_VEC_32F", "OUTER_VEC_32F"),
                  "block": ("VEC128_32F", "BLK128x128_32F")}


#: what the cuBLASLt path runs of the whole GEMM contract (module docstring; no SiLU, no erf GELU)
LT_EPILOGUE = EpilogueSupport(alpha_beta=True, bias=("float32", "input"), activations=("relu", "gelu_tanh"),
                              outs=("float32", "bf16", "fp16"), ld=True, batch=True, rounds_before_epilogue=True)
#: cuBLASLt's epilogue for (activation, bias present)
LT_EPILOGUES = {("none", False): "DEFAULT", ("none", True): "BIAS", ("relu", False): "RELU", ("relu", True): "RELU_BIAS",
                ("gelu_tanh", False): "GELU", ("gelu_tanh", True): "GELU_BIAS"}


class CublasSgemm(LibraryKernelSpec):
    """cuBLAS GEMM: SGEMM for fp32/tf32 (TF32 tensor cores only with precision=tf32), GemmEx for
    bf16/fp16 inputs with float32 C and compute; any layout of A and B."""

    def available(self) -> str | None:
        try:
            _cublas()  # cuBLASLt (precision=fp8) comes in the same nvmath-python package
        except Exception as exc:  # ImportError, or the cuBLAS library not found
            return f"kernel cublas needs nvmath-python's cuBLAS bindings ({type(exc).__name__}: {exc}); {INSTALL_HINT}"
        return None

    def library_version(self) -> str:
        return _version()

    def check_problem(self, problem: Problem, params, device) -> None:
        """fp8: what cuBLASLt's FP8 GEMM takes (module docstring); other precisions: anything.

        Raises:
            ParamError: naming the field (``layout.a``/``layout.b``, ``fp8.b``, ``fp8.scaling``, ``shape``).
        """
        if problem.precision == "fp8":
            fp8_refusal(problem, device.arch)
        elif problem.extended:
            own = {"bf16": "bf16", "fp16": "fp16"}.get(problem.precision)
            if problem.out not in ("float32", own):
                raise ParamError("epilogue.out", f"cuBLASLt writes a float32 C{f' or a {own} one' if own else ''} for "
                                 f"precision={problem.precision} inputs (its type table); got epilogue.out={problem.out}")
            lt_bias_refusal(problem)

    def types(self, problem: Problem) -> dict:
        if problem.precision == "fp8":
            a_mode, b_mode = LT_SCALE_MODES[problem.scaling]
            return {"a_dtype": problem.a_dtype, "b_dtype": problem.b_dtype, "c_dtype": problem.c_dtype,
                    "compute": (f"cublasLtMatmul, FP8 tensor cores, CUBLAS_COMPUTE_32F, fast accumulation off; "
                                f"scale modes A {a_mode}, B {b_mode}"), "scaling": problem.scaling}
        if problem.extended:
            ep = problem.epilogue
            key = (ep.activation if ep else "none", problem.bias_dtype is not None)
            tf32 = "CUBLAS_COMPUTE_32F_FAST_TF32" if problem.precision == "tf32" else "CUBLAS_COMPUTE_32F"
            return {"a_dtype": problem.ab_dtype, "b_dtype": problem.ab_dtype, "c_dtype": problem.c_dtype,
                    "compute": (f"cublasLtMatmul, {tf32}, epilogue {LT_EPILOGUES.get(key, 'none (refused)')}"
                                + (f", bias {problem.bias_dtype}" if problem.bias_dtype else "")
                                + (f", {problem.batch} strided batches" if problem.batch > 1 else ""))}
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
        if precision == "fp8":
            return Fp8Plan.make(problem, pointers).functions()
        if problem.extended:  # issue 43: alpha, beta·C0, bias, activation, C type, ld, batches
            return LtPlan.make(problem, pointers).functions()
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


def lt_bias_refusal(problem: Problem) -> None:
    """Refuse, in one line naming ``epilogue.bias``, a bias whose type is not D's: cuBLASLt's bias
    vector has the output's type for every non-IMMA, non-FP8 kernel (cublasLt.h,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE; a float32 bias with a bf16 D is CUBLAS_STATUS_INVALID_VALUE
    from the heuristic, measured on the H100).

    Raises:
        ParamError: field ``epilogue.bias``.
    """
    if problem.bias_dtype is None or problem.bias_dtype == problem.c_dtype:
        return
    ep = problem.epilogue
    kind = "float32" if problem.c_dtype == "float32" else "input"
    raise ParamError("epilogue.bias", f"cuBLASLt's bias has D's type (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE): "
                     f"a {problem.c_dtype} C (epilogue.out={problem.out}) with precision={problem.precision} takes "
                     f"epilogue.bias={kind}; got epilogue.bias={ep.bias} ({problem.bias_dtype})")


def fp8_refusal(problem: Problem, arch: str) -> None:
    """Refuse, in one line naming the field, an fp8 problem cuBLASLt's FP8 GEMM does not take
    (cuBLAS docs, cublasLtMatmul: "TN" only on Hopper, 16-byte aligned leading dimensions, the
    FP8 type table, the scaling modes' compute capabilities and M, N multiples of 4 for block scales).

    Raises:
        ParamError: field ``layout.a``/``layout.b``, ``fp8.b``, ``fp8.scaling`` or ``shape``.
    """
    if (problem.layout_a, problem.layout_b) != ("row", "col"):
        field = "layout.a" if problem.layout_a != "row" else "layout.b"
        raise ParamError(field, "kernel cublas runs precision=fp8 through cuBLASLt, whose FP8 GEMM reads A and B "
                         "K-major only (its 'TN' form): layout.a=row layout.b=col; got "
                         f"{problem.layout_a}/{problem.layout_b}")
    if problem.fp8_a == "e5m2" and problem.fp8_b == "e5m2":
        raise ParamError("fp8.b", "cuBLASLt has no E5M2 x E5M2 FP8 GEMM (its FP8 type table); use e4m3 for A or B")
    if problem.scaling != "tensor" and str(arch).rstrip("af") != "90":
        raise ParamError("fp8.scaling", f"cuBLASLt has {problem.scaling} scaling (outer-vector / 128-element blocks) "
                         f"on sm_90 only; this target is sm_{arch}: use fp8.scaling=tensor")
    if problem.K % 16:
        raise ParamError("shape", f"cuBLASLt FP8 needs K a multiple of 16 (16-byte aligned K-major rows of A and B); "
                         f"got K = {problem.K}")
    per_16 = 16 // problem.c_bytes
    if problem.N % per_16:
        raise ParamError("shape", f"cuBLASLt FP8 needs N a multiple of {per_16} (16-byte aligned rows of a "
                         f"{problem.c_dtype} C); got N = {problem.N}")
    if problem.scaling == "block" and (problem.M % 4 or problem.N % 4):
        raise ParamError("shape", f"cuBLASLt's 128-element block scaling needs M and N multiples of 4; got "
                         f"M = {problem.M}, N = {problem.N}")


class _LtMatmul:
    """What a planned ``cublasLtMatmul`` (:class:`Fp8Plan`, :class:`LtPlan`) does per launch and at
    the end: ``plan.call`` holds the call's arguments; ``handle``, ``desc``, ``layouts``, ``pref``
    and ``workspace`` what :meth:`close` frees."""

    def functions(self):
        """``(enqueue, close)`` for the backend: one ``cublasLtMatmul`` on the run's stream, no sync."""
        lt = _cublaslt()

        def enqueue(plan=self):
            lt.matmul(*plan.call)

        return enqueue, self.close

    def close(self) -> None:
        """Destroy the descriptors and the handle and free the workspace (idempotent)."""
        if self.handle is None:
            return
        lt = _cublaslt()
        from cuda.bindings import driver
        lt.matmul_preference_destroy(self.pref)
        for layout in self.layouts:
            lt.matrix_layout_destroy(layout)
        lt.matmul_desc_destroy(self.desc)
        lt.destroy(self.handle)
        driver.cuMemFree(self.workspace)
        self.handle = None


@dataclass
class Fp8Plan(_LtMatmul):
    """One point's cuBLASLt FP8 GEMM, planned once (descriptors, heuristic, workspace) and enqueued
    as one ``cublasLtMatmul`` per launch. gemmlab's row-major C (M x N) = A (M x K, row-major) ·
    B (K x N, K-major) is cuBLAS's column-major D (N x M) = op(A')·op(B') with A' = gemmlab's B
    (transposed: K x N, ld K) and B' = gemmlab's A (K x M, ld K), so A' takes B's scales and B'
    A's."""

    handle: int
    desc: int
    layouts: tuple
    pref: int
    workspace: int
    keep: tuple
    algo: object
    call: tuple

    @classmethod
    def make(cls, problem: Problem, pointers: DevicePointers, fast_accum: bool = False) -> "Fp8Plan":
        """Create the handle and descriptors, set the scale pointers and modes, allocate the
        workspace and ask the heuristic for one algorithm. ``fast_accum``: CUBLASLT_MATMUL_DESC_FAST_ACCUM
        on ("intermediate results will not periodically be promoted": a probe of the fp8 bound, never
        the baseline).

        Raises:
            ParamError: field ``shape`` when cuBLASLt offers no algorithm for the problem.
        """
        lt, cublas = _cublaslt(), _cublas()
        from cuda.bindings import driver
        from cuda.bindings.runtime import cudaDataType
        fmt = {"e4m3": int(cudaDataType.CUDA_R_8F_E4M3), "e5m2": int(cudaDataType.CUDA_R_8F_E5M2)}
        out = int(cudaDataType.CUDA_R_16BF) if problem.c_dtype == "bfloat16" else int(cudaDataType.CUDA_R_32F)
        M, N, K = problem.M, problem.N, problem.K
        handle = lt.create()
        desc = lt.matmul_desc_create(int(cublas.ComputeType.COMPUTE_32F), int(cudaDataType.CUDA_R_32F))
        keep: list = []

        def attr(name: str, value) -> None:
            which = lt.MatmulDescAttribute[name]
            arr = np.array([value], dtype=lt.get_matmul_desc_attribute_dtype(which))
            keep.append(arr)
            lt.matmul_desc_set_attribute(desc, int(which), arr.ctypes.data, arr.itemsize)

        attr("TRANSA", int(cublas.Operation.T))
        attr("TRANSB", int(cublas.Operation.N))
        a_mode, b_mode = LT_SCALE_MODES[problem.scaling]  # gemmlab's A is cuBLAS's B', gemmlab's B its A'
        attr("A_SCALE_MODE", int(lt.MatmulMatrixScale[b_mode]))
        attr("B_SCALE_MODE", int(lt.MatmulMatrixScale[a_mode]))
        attr("A_SCALE_POINTER", pointers.b_scale)
        attr("B_SCALE_POINTER", pointers.a_scale)
        attr("FAST_ACCUM", 1 if fast_accum else 0)
        layouts = (lt.matrix_layout_create(fmt[problem.fp8_b], K, N, K),  # A' = B stored N x K: K x N col-major
                   lt.matrix_layout_create(fmt[problem.fp8_a], K, M, K),  # B' = A stored M x K: K x M col-major
                   lt.matrix_layout_create(out, N, M, N))                 # C = D: N x M col-major = row-major C
        pref = lt.matmul_preference_create()
        ws_bytes = np.array([LT_WORKSPACE_BYTES], dtype=lt.get_matmul_preference_attribute_dtype(
            lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES))
        keep.append(ws_bytes)
        lt.matmul_preference_set_attribute(pref, int(lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES),
                                           ws_bytes.ctypes.data, ws_bytes.itemsize)
        err, workspace = driver.cuMemAlloc(LT_WORKSPACE_BYTES)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemAlloc of cuBLASLt's {LT_WORKSPACE_BYTES} B workspace failed: {err}")
        plan = cls(handle, desc, layouts, pref, int(workspace), (), None, ())
        results = lt.MatmulHeuristicResult(1)
        count = np.zeros(1, dtype=np.int32)
        try:
            lt.matmul_algo_get_heuristic(handle, desc, layouts[0], layouts[1], layouts[2], layouts[2], pref, 1,
                                         results.ptr, count.ctypes.data)
        except Exception as exc:  # cuBLASLt's refusal (CUBLAS_STATUS_NOT_SUPPORTED ...)
            plan.close()
            raise ParamError("shape", f"cuBLASLt offers no FP8 algorithm for {M}x{N}x{K} {problem.fp8_a}/"
                             f"{problem.fp8_b} {problem.scaling} scaling, {problem.c_dtype} C "
                             f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
        if int(count[0]) < 1:
            plan.close()
            raise ParamError("shape", f"cuBLASLt offers no FP8 algorithm for {M}x{N}x{K} {problem.fp8_a}/"
                             f"{problem.fp8_b} {problem.scaling} scaling, {problem.c_dtype} C")
        scalars = np.array([1.0, 0.0], dtype=np.float32)  # alpha, beta: host pointers (the default pointer mode)
        plan.keep, plan.algo = (tuple(keep), scalars, count), results
        plan.call = (handle, desc, scalars.ctypes.data, pointers.b, layouts[0], pointers.a, layouts[1],
                     scalars.ctypes.data + 4, pointers.c, layouts[2], pointers.c, layouts[2], results.ptr,
                     plan.workspace, LT_WORKSPACE_BYTES, pointers.stream)
        return plan



@dataclass
class LtPlan(_LtMatmul):
    """One point's cuBLASLt GEMM of the whole contract (issue 43), planned once and enqueued as one
    ``cublasLtMatmul`` per launch. gemmlab's row-major C_b (M x N, ldc) = A_b (M x K) · B_b (K x N)
    is cuBLAS's column-major D_b (N x M, ld ldc) = op(A')·op(B') with A' = gemmlab's B (op N for a
    row-major B: N x K, ld ldb; op T for a column-major one: K x N) and B' = gemmlab's A (op N for a
    row-major A: K x M, ld lda; op T for a column-major one); the bias has N elements, one per row
    of D; batch strides on each layout (cuBLAS's C = gemmlab's C0, with C's layout)."""

    handle: int
    desc: int
    layouts: tuple
    pref: int
    workspace: int
    keep: tuple = ()
    call: tuple = ()

    @classmethod
    def make(cls, problem: Problem, pointers: DevicePointers) -> "LtPlan":
        """Create the handle, descriptors (epilogue, bias, transposes, batches), the workspace and
        the heuristic's algorithm.

        Raises:
            ParamError: field ``epilogue.activation`` (no cuBLASLt epilogue for it), or ``shape``
                where cuBLASLt offers no algorithm for the problem.
        """
        lt, cublas = _cublaslt(), _cublas()
        from cuda.bindings import driver
        from cuda.bindings.runtime import cudaDataType
        ep = problem.epilogue
        act = ep.activation if ep is not None else "none"
        key = (act, problem.bias_dtype is not None)
        if key not in LT_EPILOGUES:
            raise ParamError("epilogue.activation", f"cuBLASLt has no {act} epilogue (GELU is its tanh form); "
                             "kernel cublas runs none, relu, gelu_tanh")
        types = {"float32": int(cudaDataType.CUDA_R_32F), "bfloat16": int(cudaDataType.CUDA_R_16BF),
                 "float16": int(cudaDataType.CUDA_R_16F)}
        ab, out = types[problem.ab_dtype], types[problem.c_dtype]
        compute = (cublas.ComputeType.COMPUTE_32F_FAST_TF32 if problem.precision == "tf32"
                   else cublas.ComputeType.COMPUTE_32F)
        M, N, K = problem.M, problem.N, problem.K
        handle = lt.create()
        desc = lt.matmul_desc_create(int(compute), int(cudaDataType.CUDA_R_32F))
        keep: list = []

        def attr(name: str, value) -> None:
            which = lt.MatmulDescAttribute[name]
            arr = np.array([value], dtype=lt.get_matmul_desc_attribute_dtype(which))
            keep.append(arr)
            lt.matmul_desc_set_attribute(desc, int(which), arr.ctypes.data, arr.itemsize)

        op = {"row": int(cublas.Operation.N), "col": int(cublas.Operation.T)}
        attr("TRANSA", op[problem.layout_b])
        attr("TRANSB", op[problem.layout_a])
        attr("EPILOGUE", int(lt.Epilogue[LT_EPILOGUES[key]]))
        if problem.bias_dtype is not None:
            attr("BIAS_POINTER", pointers.bias)
            attr("BIAS_DATA_TYPE", types[problem.bias_dtype])
            attr("BIAS_BATCH_STRIDE", 0)

        def layout(dtype: int, rows: int, cols: int, ld: int, stride: int) -> int:
            made = lt.matrix_layout_create(dtype, rows, cols, ld)
            if problem.batch > 1:
                for name, value in (("BATCH_COUNT", problem.batch), ("STRIDED_BATCH_OFFSET", stride)):
                    which = lt.MatrixLayoutAttribute[name]
                    arr = np.array([value], dtype=lt.get_matrix_layout_attribute_dtype(which))
                    keep.append(arr)
                    lt.matrix_layout_set_attribute(made, int(which), arr.ctypes.data, arr.itemsize)
            return made

        a_rows, a_cols = (N, K) if problem.layout_b == "row" else (K, N)  # A' = gemmlab's B as stored, column-major
        b_rows, b_cols = (K, M) if problem.layout_a == "row" else (M, K)  # B' = gemmlab's A
        layouts = (layout(ab, a_rows, a_cols, problem.ldb, problem.batch_stride("B")),
                   layout(ab, b_rows, b_cols, problem.lda, problem.batch_stride("A")),
                   layout(out, N, M, problem.ldc, problem.batch_stride("C")))
        pref = lt.matmul_preference_create()
        ws_bytes = np.array([LT_WORKSPACE_BYTES], dtype=lt.get_matmul_preference_attribute_dtype(
            lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES))
        keep.append(ws_bytes)
        lt.matmul_preference_set_attribute(pref, int(lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES),
                                           ws_bytes.ctypes.data, ws_bytes.itemsize)
        err, workspace = driver.cuMemAlloc(LT_WORKSPACE_BYTES)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemAlloc of cuBLASLt's {LT_WORKSPACE_BYTES} B workspace failed: {err}")
        plan = cls(handle, desc, layouts, pref, int(workspace))
        results = lt.MatmulHeuristicResult(1)
        count = np.zeros(1, dtype=np.int32)
        what = (f"{M}x{N}x{K} {problem.precision}, {LT_EPILOGUES[key]}, {problem.c_dtype} C, lda/ldb/ldc "
                f"{problem.lda}/{problem.ldb}/{problem.ldc}, {problem.batch} batches")
        try:
            lt.matmul_algo_get_heuristic(handle, desc, layouts[0], layouts[1], layouts[2], layouts[2], pref, 1,
                                         results.ptr, count.ctypes.data)
        except Exception as exc:  # cuBLASLt's refusal (CUBLAS_STATUS_NOT_SUPPORTED ...)
            plan.close()
            raise ParamError("shape", f"cuBLASLt offers no algorithm for {what} "
                             f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
        if int(count[0]) < 1:
            plan.close()
            raise ParamError("shape", f"cuBLASLt offers no algorithm for {what}")
        scalars = np.array([ep.alpha if ep else 1.0, ep.beta if ep else 0.0], dtype=np.float32)  # host pointers
        c_in = pointers.c0 if ep is not None and ep.beta != 0.0 else pointers.c  # beta = 0: C is not read
        plan.keep = (tuple(keep), scalars, count, results)
        plan.call = (handle, desc, scalars.ctypes.data, pointers.b, layouts[0], pointers.a, layouts[1],
                     scalars.ctypes.data + 4, c_in, layouts[2], pointers.c, layouts[2], results.ptr,
                     plan.workspace, LT_WORKSPACE_BYTES, pointers.stream)
        return plan



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


# --- grouped GEMM baselines (issue 44) -------------------------------------------------------------

def group_calls(problem: Problem, pointers: DevicePointers) -> list[tuple]:
    """One row-major C_g = A_g · B_g per non-empty group of a grouped ``problem``
    (:mod:`gemmlab.contract.grouped`), as cuBLAS column-major arguments ``(op_b, op_a, n, m, k,
    B_g, ldb, A_g, lda, C_g, ldc)`` (C_gᵀ = B_gᵀ · A_gᵀ, the module docstring's trick) with device
    addresses from the base pointers and the group layout; empty groups get no call."""
    from nvmath.bindings import cublas
    gr = problem.grouped
    item, c_item = problem.element_bytes("A"), problem.element_bytes("C")
    op_b = int(cublas.Operation.N if gr.layout_b == "row" else cublas.Operation.T)
    calls = []
    for g, (m, n, k) in enumerate(gr.shapes):
        if m == 0:
            continue
        if gr.kind == "general":
            oa, ob, oc = gr.element_offsets[g]
        else:
            r = gr.row_offsets[g]
            oa, ob, oc = r * k, g * k * n, r * n
        ldb = n if gr.layout_b == "row" else k
        calls.append((op_b, int(cublas.Operation.N), n, m, k, pointers.b + ob * item, ldb, pointers.a + oa * item, k,
                      pointers.c + oc * c_item, n))
    return calls


class CublasGroupedLoop(CublasSgemm):
    """Grouped GEMM baseline (a): one cuBLAS call per non-empty group (cublasSgemm for fp32/tf32,
    cublasGemmEx for bf16/fp16, float32 C), all enqueued by one launch, so a graph-timed point
    (``timing.mode=graph``) replays them as one CUDA graph. Group sizes are read on the host from
    the problem (a loop over experts is what a framework without a grouped kernel does)."""

    def check_problem(self, problem: Problem, params, device) -> None:
        if problem.grouped is None:
            raise ParamError("grouped.kind", f"kernel {self.name} runs grouped GEMMs only")

    def enqueue_problem(self, problem: Problem, params, pointers: DevicePointers):
        cublas = _cublas()
        precision = problem.precision
        handle = cublas.create()
        cublas.set_stream(handle, pointers.stream)
        cublas.set_math_mode(handle, int(cublas.Math.TF32_TENSOR_OP_MATH if precision == "tf32"
                                         else cublas.Math.DEFAULT_MATH))
        scalars = np.array([1.0, 0.0], dtype=np.float32)
        alpha, beta = scalars.ctypes.data, scalars.ctypes.data + 4
        calls = group_calls(problem, pointers)
        if precision in ("fp32", "tf32"):
            def enqueue(_keep_alive=scalars):
                for op_b, op_a, n, m, k, b, ldb, a, lda, c, ldc in calls:
                    cublas.sgemm(handle, op_b, op_a, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc)
        else:
            in_type, out_type = _data_types(precision)
            compute, algo = int(cublas.ComputeType.COMPUTE_32F), int(cublas.GemmAlgo.DEFAULT)

            def enqueue(_keep_alive=scalars):
                for op_b, op_a, n, m, k, b, ldb, a, lda, c, ldc in calls:
                    cublas.gemm_ex(handle, op_b, op_a, n, m, k, alpha, b, in_type, ldb, a, in_type, lda, beta, c,
                                   out_type, ldc, compute, algo)

        def close():
            cublas.destroy(handle)

        return enqueue, close


class CublasGroupedBatched(CublasGroupedLoop):
    """Grouped GEMM (b): one ``cublasGemmGroupedBatchedEx`` (cuBLAS 12.5+) over the non-empty
    groups, each a group of one problem; the pointer arrays of A_g, B_g, C_g are device arrays made
    once per point (outside every timed interval), alpha/beta host arrays. Available where the
    installed nvmath-python exposes ``nvmath.bindings.cublas.gemm_grouped_batched_ex``
    (nvmath-python 1.0.0's documentation lists it); a type combination cuBLAS refuses is a
    one-line refusal of the precision at planning (bf16 / fp16 inputs with a float32 C, cuBLAS 12.x).

    Not a baseline gemmlab can time: the API's m, n, k and ld arrays are host arrays (cuBLAS docs,
    cublasGemmGroupedBatchedEx), and cuBLAS copies them to the device inside every call; captured
    on the H100 (session 32) one call is {'kernel': 1, 'mem alloc': 1, 'mem free': 1,
    'memcpy host->device': 1}. gemmlab's launch-path net (:meth:`gemmlab.run.pipeline.Run.launch_paths`)
    refuses a host->device copy inside a library's timed enqueue (a library could upload a
    host-computed C that way), so every point with a non-empty group ends ``foreign_launch`` in
    one line naming the copy; ``cublas_grouped_loop`` is the cuBLAS baseline. cuBLASLt 13.1+ has
    an experimental grouped matmul taking the sizes as device arrays
    (``cublasLtGroupedMatrixLayoutCreate``; NVIDIA's CUDALibrarySamples LtHSHgemmGroupedSimple),
    which is not used here: the GPU machine's cuBLAS is 12.x and no nvmath-python binding of it
    was checked. An all-empty problem (every M_g 0) makes no call and enqueues nothing."""

    def available(self) -> str | None:
        missing = super().available()
        if missing is not None:
            return missing
        if not hasattr(_cublas(), "gemm_grouped_batched_ex"):
            return ("kernel cublas_grouped needs cublasGemmGroupedBatchedEx, which this nvmath-python's "
                    "nvmath.bindings.cublas does not expose (gemm_grouped_batched_ex); use cublas_grouped_loop")
        return None

    def enqueue_problem(self, problem: Problem, params, pointers: DevicePointers):
        cublas = _cublas()
        from cuda.bindings import driver
        calls = group_calls(problem, pointers)
        count = len(calls)
        if not count:  # every group empty (issue 44): nothing to compute, no call, no pointer arrays
            return (lambda: None), (lambda: None)
        handle = cublas.create()
        cublas.set_stream(handle, pointers.stream)
        cublas.set_math_mode(handle, int(cublas.Math.TF32_TENSOR_OP_MATH if problem.precision == "tf32"
                                         else cublas.Math.DEFAULT_MATH))
        ptrs = np.array([[c[5] for c in calls], [c[7] for c in calls], [c[9] for c in calls]], dtype=np.uint64)
        err, device = driver.cuMemAlloc(ptrs.nbytes)
        if err != driver.CUresult.CUDA_SUCCESS:
            cublas.destroy(handle)
            raise RuntimeError(f"cuMemAlloc of the grouped pointer arrays ({ptrs.nbytes} B) failed: {err}")
        device = int(device)
        driver.cuMemcpyHtoD(device, ptrs.ctypes.data, ptrs.nbytes)
        alphas = np.ones(count, dtype=np.float32)
        betas = np.zeros(count, dtype=np.float32)
        from cuda.bindings.runtime import cudaDataType
        if problem.precision in ("fp32", "tf32"):
            in_type = int(cudaDataType.CUDA_R_32F)
            compute = int(cublas.ComputeType.COMPUTE_32F_FAST_TF32 if problem.precision == "tf32"
                          else cublas.ComputeType.COMPUTE_32F)
        else:
            in_type = _data_types(problem.precision)[0]
            compute = int(cublas.ComputeType.COMPUTE_32F)
        out_type = int(cudaDataType.CUDA_R_32F)
        cols = list(zip(*calls))
        # cuBLAS's A is gemmlab's B_g (pointer row 0, ld cols[6]), its B gemmlab's A_g (row 1, ld cols[8])
        args = (handle, list(cols[0]), list(cols[1]), list(cols[2]), list(cols[3]), list(cols[4]), alphas.ctypes.data,
                device, in_type, list(cols[6]), device + 8 * count, in_type, list(cols[8]), betas.ctypes.data,
                device + 16 * count, out_type, list(cols[10]), count, [1] * count, compute)

        def enqueue(_keep=(alphas, betas, ptrs)):
            cublas.gemm_grouped_batched_ex(*args)

        def close():
            cublas.destroy(handle)
            driver.cuMemFree(device)

        try:
            enqueue()  # cuBLAS refuses an unsupported type combination here, before anything is timed
            driver.cuStreamSynchronize(pointers.stream)
        except Exception as exc:
            close()
            raise ParamError("precision", f"cublasGemmGroupedBatchedEx refuses {problem.precision} inputs with a "
                             f"float32 C ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); use "
                             "kernel=cublas_grouped_loop") from None
        return enqueue, close


@hookimpl
def gemmlab_kernels():
    return [CublasSgemm(name="cublas", source="", defaults={}, precisions=PRECISIONS,
                        layouts=tuple((a, b) for a in LAYOUTS for b in LAYOUTS), epilogue=LT_EPILOGUE,
                        description="cuBLAS SGEMM/GemmEx via nvmath-python (baseline; every precision "
                                    "fp32/tf32/bf16/fp16 and layout, float32 C and accumulation; fp8 through "
                                    "cuBLASLt, layout.a=row layout.b=col, tensor/row/block scaling)"),
            CublasGroupedLoop(name="cublas_grouped_loop", source="", defaults={},
                              precisions=("fp32", "tf32", "bf16", "fp16"), layouts=(("row", "row"), ("row", "col")),
                              grouped_kinds=("contiguous", "masked", "general"),
                              description="grouped GEMM baseline (issue 44): one cuBLAS call per non-empty group, "
                                          "replayed as one CUDA graph with timing.mode=graph"),
            CublasGroupedBatched(name="cublas_grouped", source="", defaults={},
                                 precisions=("fp32", "tf32", "bf16", "fp16"), layouts=(("row", "row"), ("row", "col")),
                                 grouped_kinds=("contiguous", "masked", "general"),
                                 description="grouped GEMM (issue 44): one cublasGemmGroupedBatchedEx over the "
                                             "non-empty groups; not timeable: cuBLAS uploads its host arrays of "
                                             "per-group sizes each call, a host->device copy the launch-path net "
                                             "refuses (foreign_launch); the baseline is cublas_grouped_loop")]
