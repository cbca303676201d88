"""The whole gemmlab plugin contract, in one place (contract v2, issue 7).

A kernel plugin is a Python module (or any object) with a ``gemmlab_kernels`` hook implementation
that returns kernel specs (:class:`KernelSpec` for NVRTC-compiled sources,
:class:`LibraryKernelSpec` for vendor libraries). It is found in one of three ways
(``gemmlab.contract.registry``):

1. built in: a module in gemmlab's ``plugins/`` folder (installed as ``gemmlab_plugins``);
2. a third-party package exposing a module under the entry-point group ``gemmlab``
   (``[project.entry-points.gemmlab] mykernels = "mypkg.gemm_plugin"``);
3. a drop-in ``*.py`` file in a folder named by the ``plugin_dirs`` config field.

Plugins see plain gemmlab data only: :class:`Problem` (shape, precision, layouts), parameter
dicts of ints, :class:`DeviceFacts`, and return plain values (:class:`Launch`,
:class:`KernelOptions`, argument and plan descriptions). They never import or receive cuda.core
objects; the core compiles, allocates, builds tensor maps, launches, verifies and times
(pattern: pytest's ``hookspec.py``; hook machinery: pluggy, https://pluggy.readthedocs.io).

The v1 kernel ABI, still the default (every v2 addition is optional)::

    a C++ template instantiated through a name expression, with parameters
    (const float* A, const float* B, float* C, int M, int N, int K)
    A is M x K, B is K x N, C is M x N, all row-major float32; C = A @ B (no alpha/beta).

v2 additions (defaults reproduce v1):

- ``precisions`` / ``layouts`` a kernel supports; the core refuses others before compiling.
  A and B are stored in the precision's storage type (:attr:`Problem.ab_dtype`), C is float32,
  accumulation float32.
- problem-level methods :meth:`KernelSpec.check_problem`, :meth:`~KernelSpec.geometry`,
  :meth:`~KernelSpec.instance`, :meth:`~KernelSpec.options`, :meth:`~KernelSpec.arguments`,
  :meth:`~KernelSpec.workspace_bytes`, :meth:`~KernelSpec.plan` (defaults call the v1 methods).
- :class:`Launch` with a thread-block ``cluster``; :class:`KernelOptions` (defines, register cap,
  ``sm_90a``); kernel arguments :class:`Matrix`, :class:`Dim`, :class:`Workspace`,
  :class:`Value`, :class:`TensorMap`; launch plans of :class:`Main`, :class:`Memset`,
  :class:`Extra` steps, enqueued by the core inside every timed launch.
- relayout (operands TMA cannot read as stored): an :class:`Extra` step before :class:`Main`
  copies A or B into the workspace (``Workspace(offset)``), and ``TensorMap("workspace", box,
  region=Region(offset, rows, cols, dtype))`` maps the copy; :mod:`gemmlab.contract.relayout`
  builds both for the shared copy kernels of ``kernels/include/gemmlab/relayout.cuh``.
- sources may ``#include`` files beside them, gemmlab's shared headers (``"gemmlab/ptx.cuh"``,
  folder ``kernels/include/gemmlab``) and CUDA's headers from the pip wheels.
- ``sass_classes``: the SASS instruction classes the kernel is built around (:data:`SASS_CLASSES`,
  e.g. ``("HGMMA", "UTMALDG")``; per problem: :meth:`KernelBase.sass_classes_for`); the core counts
  them in the main kernel's SASS after every compile and a class with none there (wgmma compiled
  out of a plain sm_90 build: 0 HGMMA) is flagged in ``mode=compile`` and refused in ``mode=run``
  (status ``missing_instructions``; :mod:`gemmlab.gpu.sass_check`).

- ``space`` (issue 41): the parameters a kernel may be tuned over, as typed domains and named
  restrictions (:mod:`gemmlab.contract.space`: :class:`Choice`, :class:`PowerOfTwo`, :class:`Range`,
  :class:`Restriction`, :class:`Space`; default: derived from ``defaults`` and ``param_values``),
  checked when the plugin is loaded, and :meth:`KernelBase.candidates` (default: the space's points
  that pass the restrictions and :meth:`~KernelSpec.check_problem`; a plugin may override it with a
  shortlist per problem), which :func:`gemmlab.dispatch.candidates.enumerate` checks and names.

Tile parameters are C++ template arguments, so they are compile-time constants in the generated
code; :meth:`KernelSpec.entry` turns a parameter dict into the name expression, e.g.
``gemm_tiled<64, 64, 16, 8, 2>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, NamedTuple, Union

import pluggy

from gemmlab.contract.epilogue import (ACTIVATIONS, BIAS_KINDS, EPILOGUE_MATRICES, FULL, OUTPUTS, PLAIN,  # noqa: F401
                                       Epilogue, EpilogueSupport)
from gemmlab.contract.grouped import GROUP_ARRAY_NAMES, GROUPED_KINDS, Grouped  # noqa: F401 (contract)
from gemmlab.contract.space import (Choice, ParamDecl, PowerOfTwo, Range, Restriction, Space, configs_space,  # noqa: F401 (contract)
                                    derived_space, ordered_points)

PROJECT = "gemmlab"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: ``precision`` values: storage of A and B, and how the products are formed (C is float32, or
#: bf16 for fp8 with ``fp8.out=bf16``).
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
#: storage dtype (numpy / ml_dtypes name) of A and B per precision (tf32 stores float32; fp8: the
#: default E4M3 format, per operand :attr:`Problem.a_dtype` / :attr:`Problem.b_dtype`).
AB_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}
#: compute description per precision (accumulation is float32 for all but fp8, whose kernels
#: declare theirs: :attr:`KernelBase.fp8_accumulation`).
COMPUTE = {"fp32": "float32", "tf32": "tf32 tensor core, float32 accumulate",
           "bf16": "float32 accumulate of bf16 products", "fp16": "float32 accumulate of fp16 products",
           "fp8": "FP8 tensor-core products, accumulation as the kernel declares, scales applied in the epilogue"}

# --- FP8 (issue 42) ------------------------------------------------------------------------------
#: FP8 operand formats (config ``fp8.a`` / ``fp8.b``) and their ml_dtypes storage types (OCP FP8:
#: E4M3 without infinities, max 448; E5M2 with, max 57344)
FP8_FORMATS = MappingProxyType({"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"})
#: the largest finite value of each format: a group's scale is its amax / this (production recipes')
FP8_MAX = MappingProxyType({"e4m3": 448.0, "e5m2": 57344.0})
#: how FP8 operands are scaled (config ``fp8.scaling``): ``tensor`` one float32 scale per operand;
#: ``row`` one per row of A and one per column of B (over all of K); ``block`` one per 1 x 128
#: group along K of A and one per 128 x 128 block of B (DeepSeek-V3's recipe)
SCALINGS = ("tensor", "row", "block")
#: the group length along K of ``block`` scaling (and the side of B's square blocks)
SCALE_BLOCK = 128
#: output (C) types of ``precision=fp8`` (config ``fp8.out``) and their storage names
FP8_OUTPUTS = MappingProxyType({"float32": "float32", "bf16": "bfloat16"})
#: names of the scale buffers of A and B (:class:`Matrix` / :class:`TensorMap` names; fp8 only)
SCALE_MATRICES = ("A_scale", "B_scale")
#: K elements one FP8 wgmma instruction reduces (``wgmma.mma_async.m64nNk32``): the step at
#: which the tensor core adds to its accumulator, and the unit of a declared promotion interval
FP8_MMA_K = 32
#: significant bits an FP8 wgmma step keeps of its largest addend: the step aligns its addends (the
#: accumulator and its FP8_MMA_K exact products) to the largest magnitude among them and truncates
#: each toward zero at 2^(floor(log2 max) - 13) before adding them (Hopper; the H100's output of
#: issue 42's failing element reproduced bit for bit: :func:`gemmlab.contract.plugin_utils.fp8_mma_step`)
FP8_MMA_BITS = 14
#: storage orders of A and B: ``row`` (row-major) or ``col`` (column-major).
LAYOUTS = ("row", "col")
#: how a TF32 kernel rounds float32 inputs (:attr:`KernelBase.tf32_rounding`), in the order an
#: undeclared kernel's output is tried against them: to nearest with ties to even, with ties away,
#: truncation, none
TF32_ROUNDINGS = ("rn", "rna", "rz", "none")
#: SASS instruction classes a kernel may declare in ``sass_classes`` (the opcode classes of
#: :mod:`gemmlab.gpu.sass`'s histogram, without the local-memory LDL/STL): FFMA (float32 FMA), HMMA
#: (mma.sync tensor cores), HGMMA (Hopper wgmma of 16-bit and TF32 operands), QGMMA (Hopper wgmma of
#: FP8 operands: ptxas's opcode for wgmma.mma_async .e4m3/.e5m2), LDS/LDS.128 and LDG/LDG.128 (shared and global
#: loads, 128-bit ones), LDGSTS (cp.async), LDSM (ldmatrix), UTMALDG/UTMASTG/UTMAREDG (TMA loads,
#: stores, reductions), BAR (barriers).
SASS_CLASSES = ("FFMA", "HMMA", "HGMMA", "QGMMA", "LDS", "LDS.128", "LDG", "LDG.128", "LDGSTS", "LDSM", "UTMALDG", "UTMASTG",
                "UTMAREDG", "BAR")


class Shape(NamedTuple):
    """GEMM problem size: A is M x K, B is K x N, C is M x N (elements)."""

    M: int
    N: int
    K: int


class Storage(NamedTuple):
    """How one matrix of a problem lies in its buffer (elements): each batch's matrix is ``rows`` x
    ``cols`` as stored (cols contiguous), row r at ``r * ld``; batch b's starts ``b * stride`` after
    batch 0's; the buffer holds ``copies`` of them (1 for a shared operand, stride 0)."""

    rows: int
    cols: int
    ld: int
    stride: int
    copies: int

    @property
    def buffer_rows(self) -> int:
        """Rows of ``ld`` elements the buffer holds (its stored shape is (buffer_rows, ld))."""
        return (self.copies - 1) * (self.stride // self.ld) + self.rows


@dataclass(frozen=True)
class Problem:
    """One GEMM problem as the core runs it: C (M x N, row-major float32) = A (M x K) @ B (K x N).

    Attributes:
        shape: M, N, K.
        precision: one of :data:`PRECISIONS`. ``fp32``: float32 A, B and FMA arithmetic;
            ``tf32``: float32 storage, the tensor core rounds inputs to TF32; ``bf16``/``fp16``:
            2-byte A and B. Accumulation and C are float32 for all.
        layout_a: ``row``: A[m, k] at ``m*lda + k``; ``col``: at ``m + k*lda``.
        layout_b: ``row``: B[k, n] at ``k*ldb + n``; ``col`` (K-major, "B^T row-major"): at
            ``k + n*ldb``.
        fp8_a, fp8_b: ``precision=fp8`` only: the format of A and of B, ``e4m3`` | ``e5m2``
            (:data:`FP8_FORMATS`).
        scaling: ``precision=fp8`` only: ``tensor`` | ``row`` | ``block`` (:data:`SCALINGS`); the
            scale buffers' shapes and layouts: :meth:`stored_shape` of ``A_scale`` / ``B_scale``.
        out: the type of C: ``float32``, ``bf16`` or ``fp16`` (:data:`OUTPUTS`, issue 43: the
            float32 result rounded once to nearest even; fp8: ``float32`` or ``bf16``, the kernel's
            epilogue applies the scales, then rounds).
        grouped: a grouped GEMM (issue 44: mixture-of-experts experts, :mod:`gemmlab.contract.grouped`),
            or None (a plain GEMM). For a grouped problem ``shape`` is (sum_g M_g, N, K), A, B and C
            are stored as :class:`~gemmlab.contract.grouped.Grouped` says (:meth:`stored_shape`), and
            its group arrays (``group_offsets``, ``group_m``, ``group_dims``) are inputs like A and B.

        epilogue: the fields beyond C = A·B (issue 43, :mod:`gemmlab.contract.epilogue`: alpha,
            beta·C0, bias, activation, leading dimensions, strided batches), or None: alpha = 1,
            beta = 0, no bias or activation, tight ``lda``/``ldb``/``ldc``, one batch. A kernel
            declares what it runs (``KernelBase.epilogue``); the core refuses the rest.

    Without an epilogue ``lda``/``ldb``/``ldc`` are the packed extents; with one, its values
    (:meth:`storage` gives each matrix's rows, pitch and batch stride).

    FP8 scale buffers (float32, device pointers ``Matrix("A_scale")`` / ``Matrix("B_scale")``, TMA maps
    ``TensorMap("A_scale", box)``; :class:`DevicePointers` ``a_scale`` / ``b_scale`` for libraries):
    logical value A[m, k] = a_q[m, k] * a_scale(m, k) and B[k, n] = b_q[k, n] * b_scale(k, n), with
    L = ceil(K / 128) groups along K:

    - ``tensor``: A_scale stored (1, 1), B_scale (1, 1): one value each.
    - ``row``: A_scale stored (1, M), element m; B_scale stored (1, N), element n (cuBLASLt's
      ``OUTER_VEC_32F``).
    - ``block``: A_scale stored (L, M), element [k // 128, m] at ``(k // 128) * M + m`` (M-major:
      cuBLASLt's ``VEC128_32F`` for a row-major A, a TMA box of M rows); B_scale stored
      (ceil(N / 128), L4), element [n // 128, k // 128] at ``(n // 128) * L4 + k // 128`` with L4 = L
      rounded up to a multiple of 4 (K-major, cuBLASLt's ``BLK128x128_32F``; the pad columns hold 1.0
      and are never read). The last group along K (K not a multiple of 128) is partial: as if
      zero-padded.
    """

    shape: Shape
    precision: str = "fp32"
    layout_a: str = "row"
    layout_b: str = "row"
    fp8_a: str = "e4m3"
    fp8_b: str = "e4m3"
    scaling: str = "tensor"
    out: str = "float32"
    grouped: Grouped | None = None
    epilogue: Epilogue | None = None

    @property
    def M(self) -> int:
        return self.shape.M

    @property
    def N(self) -> int:
        return self.shape.N

    @property
    def K(self) -> int:
        return self.shape.K

    def tight_ld(self, matrix: str) -> int:
        """The packed leading dimension of ``matrix`` ("A" | "B" | "C" | "C0"): A K (row-major) or M
        (column-major), B N (row-major) or K (column-major), C and C0 N."""
        if matrix == "A":
            return self.K if self.layout_a == "row" else self.M
        if matrix == "B":
            return self.N if self.layout_b == "row" else self.K
        return self.N

    def _ld(self, matrix: str, name: str) -> int:
        given = getattr(self.epilogue, name) if self.epilogue is not None else 0
        return given or self.tight_ld(matrix)

    @property
    def lda(self) -> int:
        """Leading dimension of A in elements: K (row-major) or M (column-major), or the epilogue's."""
        return self._ld("A", "lda")

    @property
    def ldb(self) -> int:
        """Leading dimension of B in elements: N (row-major) or K (column-major), or the epilogue's."""
        return self._ld("B", "ldb")

    @property
    def ldc(self) -> int:
        """Leading dimension of C (and C0) in elements: N (C is row-major), or the epilogue's."""
        return self._ld("C", "ldc")

    @property
    def extended(self) -> bool:
        """Beyond today's plain contract (issue 43): an epilogue, or a C type other than float32 for a
        precision other than fp8 (fp8's bf16 C is its own path). Such a problem's inputs, reference
        and bound are :mod:`gemmlab.stages.verify`'s fused ones."""
        return self.epilogue is not None or (self.precision != "fp8" and self.out != "float32")

    @property
    def batch(self) -> int:
        """The number of GEMMs of one launch (1 without an epilogue)."""
        return self.epilogue.batch if self.epilogue is not None else 1

    def storage(self, matrix: str) -> Storage:
        """Where ``matrix`` ("A" | "B" | "C" | "C0") lies in its buffer (:class:`Storage`): rows and
        cols of one batch as stored, the leading dimension, the batch stride (tight: rows * ld) and
        the copies held (1 for a shared operand, batch stride 0)."""
        key = "C" if matrix == "C0" else matrix
        rows, cols = {"A": (self.M, self.K) if self.layout_a == "row" else (self.K, self.M),
                      "B": (self.K, self.N) if self.layout_b == "row" else (self.N, self.K),
                      "C": (self.M, self.N)}[key]
        ld = {"A": self.lda, "B": self.ldb, "C": self.ldc}[key]
        given = getattr(self.epilogue, f"stride_{key.lower()}") if self.epilogue is not None else None
        stride = rows * ld if given is None else given
        copies = 1 if stride == 0 or self.batch == 1 else self.batch
        return Storage(rows, cols, ld, stride, copies)

    def batch_stride(self, matrix: str) -> int:
        """Elements between two batches' ``matrix`` ("A" | "B" | "C" | "C0"; 0: shared)."""
        return self.storage(matrix).stride

    @property
    def ab_dtype(self) -> str:
        """Storage type of A and B: ``float32`` | ``bfloat16`` | ``float16``; for fp8 A's
        (``float8_e4m3fn`` | ``float8_e5m2``: B's may differ, :attr:`b_dtype`)."""
        return self.a_dtype

    @property
    def a_dtype(self) -> str:
        """Storage type of A (numpy / ml_dtypes name)."""
        return FP8_FORMATS[self.fp8_a] if self.precision == "fp8" else AB_DTYPES[self.precision]

    @property
    def b_dtype(self) -> str:
        """Storage type of B (numpy / ml_dtypes name)."""
        return FP8_FORMATS[self.fp8_b] if self.precision == "fp8" else AB_DTYPES[self.precision]

    @property
    def ab_bytes(self) -> int:
        """Bytes per element of A and B (4, 2, or 1 for fp8)."""
        return {"float32": 4, "bfloat16": 2, "float16": 2}.get(self.ab_dtype, 1)

    @property
    def c_dtype(self) -> str:
        """Storage type of C: ``float32``, ``bfloat16`` or ``float16`` (:data:`OUTPUTS`)."""
        return OUTPUTS.get(self.out, "float32")

    @property
    def c_bytes(self) -> int:
        """Bytes per element of C (4 or 2)."""
        return 4 if self.c_dtype == "float32" else 2

    @property
    def bias_dtype(self) -> str | None:
        """Storage type of the bias vector: ``float32``, the inputs' (``epilogue.bias=input``), or None."""
        kind = self.epilogue.bias if self.epilogue is not None else "none"
        return None if kind == "none" else "float32" if kind == "float32" else self.ab_dtype

    @property
    def scale_groups(self) -> int:
        """L = ceil(K / 128): the groups along K of ``block`` scaling."""
        return -(-self.K // SCALE_BLOCK)

    @property
    def flops(self) -> int:
        """Floating-point operations of one launch: 2 M N K per batch, or a grouped problem's sum_g
        2 M_g N_g K_g (the epilogue's few operations per output are not counted)."""
        return self.grouped.flops if self.grouped is not None else 2 * self.M * self.N * self.K * self.batch

    @property
    def traffic(self) -> tuple[int, int, int] | None:
        """A grouped or epilogue problem's (flops, elements of A and B read, 4-byte words of C
        written and of C0 and the bias read) for the roofline and the plausibility gate
        (:attr:`Grouped.traffic`; a shared operand counted once, a 2-byte C as half a word each: a
        lower bound of the bytes moved); None for a plain GEMM (they follow from M, N, K)."""
        if self.grouped is not None:
            return self.grouped.traffic
        if self.epilogue is None:
            return None
        ab = sum(self.storage(m).copies * self.storage(m).rows * self.storage(m).cols for m in ("A", "B"))
        out_bytes = self.batch * self.M * self.N * self.c_bytes * (2 if self.epilogue.beta != 0.0 else 1)
        if self.bias_dtype is not None:
            out_bytes += self.N * self.element_bytes("bias")
        return self.flops, ab, -(-out_bytes // 4)

    def element_dtype(self, matrix: str) -> str:
        """Element type name of ``matrix`` ("A" | "B" | "C" | "A_scale" | "B_scale"; a grouped
        problem's group arrays: int32 or int64)."""
        if matrix in SCALE_MATRICES:
            return "float32"
        if matrix in GROUP_ARRAY_NAMES and self.grouped is not None:
            return self.grouped.array_dtype(matrix)
        if matrix == "bias":
            return self.bias_dtype or "float32"
        return {"A": self.a_dtype, "B": self.b_dtype, "C": self.c_dtype, "C0": self.c_dtype}[matrix]

    def element_bytes(self, matrix: str) -> int:
        """Bytes per element of ``matrix`` (scales: 4)."""
        return {"float32": 4, "bfloat16": 2, "float16": 2, "int32": 4, "int64": 8}.get(self.element_dtype(matrix), 1)

    @property
    def compute(self) -> str:
        """How products are formed and accumulated (text for the record)."""
        return COMPUTE[self.precision]

    def stored_shape(self, matrix: str) -> tuple[int, int]:
        """(rows, cols) of ``matrix`` ("A" | "B" | "C"; "A_scale" | "B_scale" for fp8, laid out as
        the class docstring says) AS STORED (cols contiguous): a column-major A is stored as K x M.
        With an epilogue (issue 43) the whole buffer: (rows of every batch and the gaps between
        them, ld) (:meth:`storage`); "C0" like C, "bias" (1, N).

        Raises:
            ValueError: another name, or a scale name for a precision other than fp8.
        """
        if self.grouped is not None:
            return self.grouped.stored_shape(matrix)
        if self.epilogue is not None and matrix in ("A", "B", "C", "C0"):
            st = self.storage(matrix)
            return (st.buffer_rows, st.ld)
        if matrix == "bias" and self.bias_dtype is not None:
            return (1, self.N)
        if matrix == "A":
            return (self.M, self.K) if self.layout_a == "row" else (self.K, self.M)
        if matrix == "B":
            return (self.K, self.N) if self.layout_b == "row" else (self.N, self.K)
        if matrix == "C":
            return (self.M, self.N)
        if matrix in SCALE_MATRICES and self.precision == "fp8":
            if self.scaling == "tensor":
                return (1, 1)
            if self.scaling == "row":
                return (1, self.M) if matrix == "A_scale" else (1, self.N)
            L = self.scale_groups
            return (L, self.M) if matrix == "A_scale" else (-(-self.N // SCALE_BLOCK), -(-L // 4) * 4)
        raise ValueError(f"matrix must be A, B or C (A_scale, B_scale for precision=fp8), got {matrix!r}")


@dataclass(frozen=True)
class DeviceFacts:
    """What a plugin may know about the target GPU (plain data, no CUDA handles).

    ``arch`` is the compile target without prefix ("90" for sm_90). Shared-memory limits are in
    bytes; ``max_shared_per_block`` is the 48 KiB default, ``max_shared_per_block_optin`` the
    limit after the opt-in attribute. ``max_cluster_size`` is the portable thread-block cluster
    limit (8 on sm_90; 1: no clusters before sm_90). In ``mode=compile`` without a GPU,
    ``sm_count`` and the limits are those of the H200 class (sm_90) and ``name`` says so.
    Persistent kernels size their grid from ``sm_count``.
    """

    name: str
    arch: str
    sm_count: int
    max_threads_per_block: int = 1024
    max_shared_per_block: int = 48 * 1024
    max_shared_per_block_optin: int = 227 * 1024
    l2_bytes: int = 0
    max_cluster_size: int = 8


@dataclass(frozen=True)
class Launch:
    """Launch geometry: ``grid`` in blocks and ``block`` in threads (x, y, z), the dynamic
    shared memory per block in bytes, and an optional thread-block ``cluster`` (x, y, z).

    ``grid`` always counts blocks; with a cluster each grid dimension must be a multiple of the
    cluster's (the core converts to cuda.core's ``LaunchConfig``, whose grid counts clusters) and
    the device must accept it (at most ``DeviceFacts.max_cluster_size`` blocks, and
    ``cuOccupancyMaxActiveClusters`` > 0 on the GPU).
    """

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0
    cluster: tuple[int, int, int] | None = None

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def cluster_size(self) -> int:
        """Blocks per cluster (1 without a cluster)."""
        return 1 if self.cluster is None else self.cluster[0] * self.cluster[1] * self.cluster[2]


class ParamError(ValueError):
    """Raised by :meth:`KernelSpec.check` for a parameter set or shape the kernel cannot run.

    ``field`` names the offending config field (``"kernel.BK"``, ``"shape"``, ``"layout.b"``);
    the message says which rule is broken and what is allowed.
    """

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# --- compile options -----------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelOptions:
    """NVRTC options a kernel asks for (recorded, and part of the compile-cache key).

    The core always adds ``-default-device`` (plain ``constexpr`` helpers compile), the include
    paths (the source's folder, gemmlab's ``kernels/include``, CUDA's pip-wheel headers) and
    ``-arch``.

    Attributes:
        defines: ``-D NAME=VALUE`` macros (ints or strings; names ``[A-Za-z_][A-Za-z0-9_]*``).
        max_registers: ``-maxrregcount`` (per-thread register cap), or None.
        arch_specific: compile for ``sm_<arch>a`` (e.g. sm_90a: wgmma, setmaxnreg) instead of
            ``sm_<arch>``; also in ``mode=run``.
        std: C++ dialect (None: NVRTC's default).
        extra: further NVRTC flags, verbatim (e.g. ``("-lineinfo",)``).
    """

    defines: Mapping[str, Union[int, str]] = field(default_factory=dict)
    max_registers: int | None = None
    arch_specific: bool = False
    std: str | None = "c++17"
    extra: tuple[str, ...] = ()

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.defines.items())), self.max_registers, self.arch_specific, self.std,
                     tuple(self.extra)))


# --- kernel arguments ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Matrix:
    """A device pointer to matrix ``name`` ("A" | "B" | "C"): ``const T*`` for A and B (T the
    precision's storage type: ``__nv_fp8_e4m3`` / ``__nv_fp8_e5m2`` for fp8), ``float*`` for C
    (``__nv_bfloat16*`` for fp8 with ``out=bf16``). ``precision=fp8`` adds "A_scale" and "B_scale":
    ``const float*`` to the scale buffers, laid out as :class:`Problem` says
    (:meth:`Problem.stored_shape`); like A and B they are inputs the kernel must not write. An
    epilogue problem (issue 43) adds "C0" (beta != 0: an input of C's type, ldc and batch stride)
    and "bias" (a bias: N elements of ``Problem.bias_dtype``); C's type is ``Problem.c_dtype``."""

    name: str


@dataclass(frozen=True)
class Dim:
    """An ``int`` (int32) problem dimension: "M" | "N" | "K" | "lda" | "ldb" | "ldc"; "batch",
    "stride_a", "stride_b", "stride_c" (batch strides in elements, 0 for a shared operand: an
    int32, so a buffer stays below 2^31 elements)."""

    name: str


@dataclass(frozen=True)
class Workspace:
    """A device pointer into the kernel's workspace (:meth:`KernelSpec.workspace_bytes` bytes,
    256-byte aligned; contents undefined unless the plan zeroes it or an earlier step writes it).

    ``offset``: bytes from the workspace start (default 0: the start), a multiple of 16 and below
    ``workspace_bytes``; e.g. the destination of a relayout copy (:class:`Region`)."""

    offset: int = 0


@dataclass(frozen=True)
class Value:
    """A constant scalar argument; ``ctype`` in ``int32``, ``uint32``, ``float32``, ``int64``."""

    value: Union[int, float]
    ctype: str = "int32"


#: ctype names accepted by :class:`Value`.
VALUE_CTYPES = ("int32", "uint32", "float32", "int64")
#: TMA swizzle modes and their span in bytes (the inner box may not exceed the span).
SWIZZLES = {"none": None, "32B": 32, "64B": 64, "128B": 128}
#: TMA L2 promotion and out-of-bounds fill options.
L2_PROMOTIONS = ("none", "64B", "128B", "256B")
OOB_FILLS = ("zero", "nan")


#: element types a :class:`Region` may hold, and their bytes.
REGION_DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class Region:
    """A row-major 2-D array inside the kernel's workspace: ``rows`` x ``cols`` elements of
    ``dtype``, row ``r`` starting ``offset + r * ld * bytes(dtype)`` bytes after the workspace
    start. It names the workspace copy of an operand that a plan's :class:`Extra` step writes
    before :class:`Main` (a pad copy whose row stride TMA can take, a transposed copy), so a
    :class:`TensorMap` (``TensorMap("workspace", box, region=Region(...))``) can read it.

    Rules (checked by the core before compiling; a broken one is a one-line ``kernel`` error naming
    the field, e.g. ``region.offset``): ``dtype`` in :data:`REGION_DTYPES`; ``rows``, ``cols`` >= 1;
    ``ld`` >= ``cols`` (0: ``cols``, packed rows); ``offset`` a multiple of 16 (TMA's base
    alignment); ``ld * bytes`` a multiple of 16 (TMA's row stride); the last element inside
    ``workspace_bytes``.

    Attributes:
        offset: bytes from the workspace start to element (0, 0).
        rows: rows of the array (the outer, strided dimension).
        cols: elements per row (the contiguous, inner dimension).
        dtype: ``float32`` | ``bfloat16`` | ``float16``.
        ld: row stride in elements (0: ``cols``).
    """

    offset: int
    rows: int
    cols: int
    dtype: str
    ld: int = 0

    @property
    def row_stride(self) -> int:
        """Row stride in elements (``ld``, or ``cols`` when ``ld`` is 0)."""
        return self.ld or self.cols

    @property
    def nbytes(self) -> int:
        """Bytes from element (0, 0) to one past the last element (``(rows - 1) * ld + cols`` elements)."""
        return ((self.rows - 1) * self.row_stride + self.cols) * REGION_DTYPES.get(self.dtype, 4)


@dataclass(frozen=True)
class TensorMap:
    """A TMA tensor map (``CUtensorMap``, 128 bytes, passed by value) over matrix ``matrix``.

    ``box`` = (box_rows, box_cols) in elements of the matrix AS STORED (:meth:`Problem.stored_shape`:
    cols are the contiguous, inner dimension). The element type follows the precision (C:
    float32). Kernel side: ``const __grid_constant__ CUtensorMap tmap`` (type from the shared
    header ``gemmlab/tma.cuh``). Rules (checked by the core; breaking one is a one-line error for
    that point): base 16-byte aligned, global row stride a multiple of 16 bytes, each box
    dimension 1..256, inner box bytes a multiple of 16, inner box bytes <= the swizzle span
    (32/64/128 B) when swizzled.

    ``matrix="workspace"`` with a :class:`Region` maps an array in the kernel's workspace
    instead (e.g. the padded or transposed copy of A or B that an :class:`Extra` step of the plan
    wrote); its element type, shape and row stride are the region's, and the same rules hold for
    the region (its offset and row stride 16-byte multiples, inside ``workspace_bytes``).

    ``per_group=True`` (grouped problems of kind ``contiguous`` / ``masked`` only, issue 44): a 3-D
    map over the stored (rows x cols) matrix viewed as G slabs of rows / G rows, one per group (B:
    expert g's K x N or N x K; masked A and C: expert g's M_max-row slot); global dims (G, rows / G,
    cols), box (1, box rows, box cols). Kernel side ``cp.async.bulk.tensor.3d`` with coordinates
    (col, row inside the slab, g); TMA zero-fills outside the slab, so a box at a slab's end never
    reads the next group's rows, and one map serves every group (no per-group descriptor).

    ``each_group=True`` (grouped problems of kind ``general`` only, issue 44): one 2-D map per group
    over that group's own matrix (A_g M_g x K_g; B_g K_g x N_g, or N_g x K_g with ``layout.b=col``;
    C_g M_g x N_g) at its element offset (:attr:`Grouped.element_offsets`), with the box, swizzle,
    promotion and fill given here. The kernel gets a ``const CUtensorMap *`` to G maps in device
    memory, 128 bytes each (group g at index g, 64-byte aligned), encoded on the host once when the
    point is prepared and copied before any launch (outside every timed interval); an empty group's
    map is 128 zero bytes and must never be used. Each group's matrix must satisfy the TMA rules
    (the core checks every group). Kernel side (CUDA Programming Guide, "Using TMA to transfer
    multi-dimensional arrays": a map copied to global memory by the host): every thread that
    issues a TMA through map g first runs ``fence.proxy.tensormap::generic.acquire.sys`` on it,
    once (``gemmlab/grouped.cuh`` ``acquire_tensormap``).

    Attributes:
        matrix: "A" | "B" | "C" | "workspace" (needs ``region``).
        box: (rows, cols) of one box, elements.
        swizzle: "none" | "32B" | "64B" | "128B".
        l2_promotion: "none" | "64B" | "128B" | "256B".
        oob_fill: "zero" | "nan" (what out-of-bounds box elements read as).
        region: the workspace array (only, and required, with ``matrix="workspace"``).
        per_group: a 3-D map of G slabs (above); False: the plain 2-D map.
        each_group: G 2-D maps, one per group of a ``general`` problem (above), passed as a
            pointer to them; False: one map passed by value.
        batched: a rank-3 map over A, B or C of an epilogue problem (issue 43, strided batches):
            dims (cols, rows of one batch, batches held), strides (ld, batch stride) in bytes, box
            (1, box rows, box cols); kernel side ``cp.async.bulk.tensor.3d`` at (col, row, batch), so a
            box never reads or writes another batch's rows. A shared operand (batch stride 0) holds one
            batch: its map's batch dimension is 1 (the kernel reads it at batch 0). The batch stride
            in bytes must be a multiple of 16 (TMA rule; :mod:`gemmlab.contract.tma_rules`).
    """

    matrix: str
    box: tuple[int, int]
    swizzle: str = "128B"
    l2_promotion: str = "256B"
    oob_fill: str = "zero"
    region: Region | None = None
    per_group: bool = False
    each_group: bool = False
    batched: bool = False


Arg = Union[Matrix, Dim, Workspace, Value, TensorMap]

#: The v1 argument list ``(A, B, C, M, N, K)``.
DEFAULT_ARGUMENTS: tuple = (Matrix("A"), Matrix("B"), Matrix("C"), Dim("M"), Dim("N"), Dim("K"))


# --- launch plans --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Main:
    """The kernel itself, with :meth:`KernelSpec.geometry` and :meth:`KernelSpec.arguments`.

    Attributes:
        note: a short text the record's ``plan`` shows after "main kernel" (e.g. that a requested
            variant could not run on this shape and what ran instead); empty: none.
    """

    note: str = ""


@dataclass(frozen=True)
class Memset:
    """Fill ``target`` ("C" | "workspace") with the 32-bit word ``value`` (0: zero) before a step
    that accumulates into it (atomics, split-K partial sums)."""

    target: str
    value: int = 0


@dataclass(frozen=True)
class Extra:
    """Another ``__global__`` of the same source (compiled with the same options), e.g. a split-K
    reduction after :class:`Main`, or a relayout before it: a copy of A or B into the workspace
    (``Workspace(offset)`` as its destination pointer) that the main kernel reads through
    ``TensorMap("workspace", box, region=Region(...))``. ``entry`` is its name expression
    (namespaces allowed, e.g. the shared header's ``gemmlab::relayout_pad<2>``), ``launch`` its
    geometry, ``arguments`` its argument list (same argument kinds as :meth:`KernelSpec.arguments`).
    Like every step it runs inside every timed launch, so a copy's cost is part of the time."""

    entry: str
    launch: Launch
    arguments: tuple = DEFAULT_ARGUMENTS


Step = Union[Main, Memset, Extra]


# --- kernel specs --------------------------------------------------------------------------------

@dataclass
class KernelBase:
    """What every kernel spec has, NVRTC or library (subclass :class:`KernelSpec` or
    :class:`LibraryKernelSpec`, not this).

    Attributes:
        name: the kernel's config name (``kernel=<name>``); lowercase, ``[a-z][a-z0-9_]*``.
        source: the ``.cu`` file (NVRTC kernels). A relative name of a drop-in or entry-point
            plugin is looked up beside the plugin's file first (a plugin copied with its source
            compiles its copy), then in gemmlab's ``kernels/`` folder (where built-ins find theirs,
            and a drop-in may reuse one on purpose); an absolute path is taken as given. The
            record's ``compile.source_file`` names the file compiled. Library kernels leave it empty.
        (``precisions``, ``layouts`` and the parameter names of ``defaults`` are checked when the
        plugin is loaded: a mistake there is one line naming the plugin's file.)
        defaults: tile parameters and their default values (ints), e.g. ``{"BM": 64, ...}``.
            These are the only keys accepted under ``kernel.`` in the config.
        description: one line for ``gemmlab --help``.
        precisions: the ``precision`` values the kernel supports (:data:`PRECISIONS`).
        layouts: the ``(layout.a, layout.b)`` pairs it supports (:data:`LAYOUTS`).
        param_values: for parameters whose values are a few codes or sizes rather than any
            integer 1..4096 (the core's rule for every parameter), the values allowed, e.g.
            ``{"EPI": (1, 2, 3, 4, 5)}``: a value the core's rule refuses (0, -1, 5000, 2.5, "x")
            is then refused with ``kernel.EPI: must be one of 1, 2, 3, 4, 5, got 0`` instead of
            the generic range; values inside 1..4096 go to :meth:`check_problem` first, whose
            message says what the values mean, and a value it lets pass that is not listed is
            refused by the core after it (the list is the rule ``gemmlab --help`` shows).
        sass_classes: the SASS instruction classes the kernel is built around, each one of
            :data:`SASS_CLASSES` (e.g. ``("HGMMA", "UTMALDG")`` for a wgmma kernel fed by TMA,
            ``("HMMA",)`` for mma.sync, ``("FFMA",)`` for float32 CUDA-core arithmetic; default
            ``()``: nothing checked). After each compile the core counts every declared class in
            the SASS of the main kernel (its own function, not a plan's :class:`Extra` kernels)
            and records ``sass_check``; a class counted 0 times (e.g. wgmma helpers compiled out
            under ``__CUDA_ARCH_FEAT_SM90_ALL`` of a plain sm_90 build) is flagged in
            ``mode=compile`` and refuses the point in ``mode=run`` (status ``missing_instructions``,
            before any launch). Checked when the plugin is loaded; library kernels declare none.
            Classes that depend on the problem or parameters: override :meth:`sass_classes_for`.
        tf32_rounding: how a ``precision=tf32`` kernel rounds float32 inputs to TF32 before its
            tensor cores multiply them: ``"rn"`` (to nearest, ties to even: ``cvt.rn.tf32.f32``),
            ``"rna"`` (to nearest, ties away: ``cvt.rna.tf32.f32``),
            ``"rz"`` (truncation: float32 bits fed to a TF32 MMA as they are), ``"none"`` (no
            rounding: float32 CUDA-core products); ``None`` (default: undeclared, e.g. a library
            that picks its own kernel) accepts an output that matches any one of the four. The
            float64 reference multiplies the inputs rounded this way, so the TF32 bound covers
            float32 accumulation only (:mod:`gemmlab.stages.verify`). Checked when the plugin is loaded.
        space: the parameters the kernel may be tuned over (issue 41): a
            :class:`~gemmlab.contract.space.Space` of typed domains (:class:`Choice`,
            :class:`PowerOfTwo`, :class:`Range`) and named :class:`Restriction` predicates over the
            parameter dict; parameters it does not name stay at their defaults. ``None`` (default):
            derived by :meth:`param_space` (each ``param_values`` list a choice, the rest fixed), so a
            plugin that declares nothing keeps working. Checked when the plugin is loaded (an unknown
            parameter, a value outside the core's rule or ``param_values``, a default outside its
            domain, a restriction that is not callable or refuses the defaults: one line naming the
            plugin). The core enumerates it through :meth:`candidates`
            (:func:`gemmlab.dispatch.candidates.enumerate`); it does not limit what ``kernel.P=``
            accepts on the command line.
        fp8_accumulation: how a ``precision=fp8`` kernel accumulates (issue 42): ``"float32"``
            (every product added to a float32 accumulator), or an int P, a multiple of
            :data:`FP8_MMA_K` (32): the tensor core accumulates P elements of K in its own
            accumulator (about 14 significant bits on Hopper: DeepSeek-V3 report, §3.3.2) before
            the kernel adds that partial sum to a float32 accumulator (DeepSeek-V3 promotes every
            128); a kernel that never promotes declares nothing and gets P = K. ``None`` (default:
            undeclared, e.g. a library that picks its own kernel): the bound assumes no promotion
            (P = K), the loosest an FP8 tensor-core accumulator can be. With ``block`` scaling P must
            divide 128 (the scales change every 128). The fp8 bound covers exactly this accumulation
            (:mod:`gemmlab.stages.verify`). Checked when the plugin is loaded.
        grouped_kinds: the grouped GEMM kinds the kernel runs (issue 44, :data:`GROUPED_KINDS`:
            ``contiguous``, ``masked``, ``general``; the layouts in :mod:`gemmlab.contract.grouped`).
            Default ``()``: a plain GEMM kernel, refused for a grouped problem; a kernel that declares
            kinds is a grouped kernel, refused for a plain GEMM (``grouped.kind=null``). A grouped
            kernel writes the valid rows of each group only: padding rows, masked rows and the gaps
            between groups must stay as the core filled them (verification checks it).
        epilogue: what the kernel runs beyond C = A·B (issue 43): an
            :class:`~gemmlab.contract.epilogue.EpilogueSupport` (alpha/beta with C0, bias kinds,
            activations, output types, leading dimensions, strided batches). Default
            :data:`~gemmlab.contract.epilogue.PLAIN`: today's contract only (alpha = 1, beta = 0, no
            bias or activation, float32 C, tight, one batch); every other problem is refused in one
            line before compiling, naming the field and what the kernel allows. A kernel that
            declares more reads the problem's ``epilogue`` (:class:`Problem`) and the arguments
            ``Matrix("C0")``, ``Matrix("bias")``, ``Dim("lda"|"ldb"|"ldc"|"batch"|"stride_a"|...)``,
            ``Value(alpha, "float32")``. Checked when the plugin is loaded.
    """

    name: str
    source: Union[str, Path] = ""
    defaults: Mapping[str, int] = field(default_factory=dict)
    description: str = ""
    precisions: tuple[str, ...] = ("fp32",)
    layouts: tuple[tuple[str, str], ...] = (("row", "row"),)
    param_values: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    sass_classes: tuple[str, ...] = ()
    tf32_rounding: str | None = None
    space: Space | None = None
    fp8_accumulation: Union[int, str, None] = None
    grouped_kinds: tuple[str, ...] = ()
    epilogue: EpilogueSupport = PLAIN

    def param_space(self) -> Space:
        """The declared :attr:`space`, else the one derived from ``defaults`` and ``param_values``
        (:func:`~gemmlab.contract.space.derived_space`)."""
        return self.space if self.space is not None else derived_space(self.defaults, self.param_values)

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """Full parameter dicts worth trying for ``problem`` on ``device``, best guesses first.

        Default (:func:`space_candidates`): the points of :meth:`param_space` that pass its
        restrictions and :meth:`check_problem`, the defaults first, then by how many parameters
        differ from them, at most :data:`CANDIDATE_LIMIT`. Override it to offer a shortlist for the
        problem (e.g. split counts sized to the shape and the SM count); the core still checks
        every offered dict (known parameters, the core's value rule, :meth:`check_problem`) and
        drops the ones that fail, naming why. An offered dict may leave the declared domains (a
        split count sized to the problem); missing parameters take their defaults.
        """
        return space_candidates(self, problem, device)

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        """What this kernel would run in ``regime`` of ``problem`` under ``kernel=auto rank=rules``:
        :class:`gemmlab.contract.regimes.Preference` objects (rank, parameters sized for the problem
        and ``device.sm_count``, why), in the plugin's order (issue 41).

        ``regime`` is one of :data:`gemmlab.contract.regimes.REGIME_NAMES` that applies to the problem
        (:func:`gemmlab.contract.regimes.regimes`); the core asks only kernels that declare the
        problem's precision and layouts, sorts every kernel's preferences by rank and takes the first
        its checks accept. Default: none (the kernel takes part through the rules' last resort, its
        defaults, and through ``kernel.rank=model``, its :meth:`candidates`).
        """
        return []

    def sweep_variants(self, problem: Problem, device: DeviceFacts, family: str) -> list[dict]:
        """Parameter dicts worth measuring for ``problem``, a shape of family ``family`` of the shape
        suite (:mod:`gemmlab.dispatch.shapes`: decode, tiny, k_heavy, prefill, ...), when ``gemmlab-tune
        sweep`` builds kernel=auto's tuning table (:func:`gemmlab.dispatch.suite_candidates.candidates`;
        the core checks each and drops duplicates). Default: none (a drop-in plugin's kernel is
        measured with its :meth:`candidates` instead).
        """
        return []

    def sass_classes_for(self, problem: Problem, params: Mapping[str, int]) -> tuple[str, ...]:
        """The SASS classes the main kernel must contain for ``problem`` and ``params`` (default:
        :attr:`sass_classes`); each one of :data:`SASS_CLASSES`, checked by the core."""
        return self.sass_classes

    def check(self, shape: Shape, params: Mapping[str, int], device: DeviceFacts) -> None:
        """Reject parameters or shapes this kernel cannot run, before anything is compiled.

        Raises:
            ParamError: naming the field (``kernel.<P>`` or ``shape``) and the rule.
        """

    def check_problem(self, problem: Problem, params: Mapping[str, int], device: DeviceFacts) -> None:
        """v2 form of :meth:`check` that sees precision and layouts (default: ``check(problem.shape, ...)``).

        The core has already refused precisions and layouts outside ``precisions``/``layouts``.

        Raises:
            ParamError: naming the field and the rule.
        """
        self.check(problem.shape, params, device)

    def ownership(self, shape: Shape, params: Mapping[str, int]):
        """Replay the kernel's index arithmetic in numpy (optional, used by the CPU tests).

        Returns:
            ``(stores, loads)``: ``stores`` is an int64 array (M, N) counting the guarded stores
            that hit each C element over the whole grid (must be all ones); ``loads`` maps a tile
            name (``"A"``, ``"B"``) to an int64 array counting, for one block and one reduction
            chunk, how often each staged shared-memory element is written (must be all ones).
            Return ``None`` when the kernel has no model.
        """
        return None


#: at most this many candidates per kernel from the default :meth:`KernelBase.candidates`
CANDIDATE_LIMIT = 48


def space_candidates(spec: KernelBase, problem: Problem, device: DeviceFacts,
                     limit: int = CANDIDATE_LIMIT) -> list[dict]:
    """The default :meth:`KernelBase.candidates`: the points of ``spec.param_space()`` (restrictions
    applied) ordered by distance from the defaults (:func:`~gemmlab.contract.space.ordered_points`),
    kept where ``spec.check_problem`` raises no :class:`ParamError`, the first ``limit``."""
    out = []
    for params in ordered_points(spec.param_space(), spec.defaults):
        try:
            spec.check_problem(problem, params, device)
        except ParamError:
            continue
        out.append(params)
        if len(out) >= limit:
            break
    return out


@dataclass
class KernelSpec(KernelBase):
    """One NVRTC-compiled GEMM kernel: a CUDA C++ source plus the rules to instantiate and launch it.

    v1 (still enough for a float32 row-major kernel): override :meth:`check`, :meth:`entry`,
    :meth:`launch` (required) and :meth:`ownership` (recommended: it lets the CPU tests prove
    that every output has exactly one owner and every staged tile element is loaded once).

    v2 (optional): declare ``precisions``/``layouts``; override the problem-level methods
    (:meth:`check_problem`, :meth:`geometry`, :meth:`instance`, :meth:`options`,
    :meth:`arguments`, :meth:`workspace_bytes`, :meth:`plan`), whose defaults call the v1
    methods. The core calls only the problem-level methods.

    Example (TF32 tensor-core kernel with TMA, K-major B, a cluster and split-K)::

        class Tc(KernelSpec):
            def instance(self, problem, params):
                return f"gemm_tc<{params['BM']}, {params['BN']}, {params['SPLIT']}>"
            def geometry(self, problem, params, device):
                return Launch(grid=(2 * cdiv(problem.N, 128), cdiv(problem.M, 128), params["SPLIT"]),
                              block=(384, 1, 1), shared_bytes=160 * 1024, cluster=(2, 1, 1))
            def options(self, problem, params, device):
                return KernelOptions(arch_specific=True, max_registers=168, defines={"STAGES": 4})
            def arguments(self, problem, params, device):
                return (TensorMap("A", (128, 32)), TensorMap("B", (128, 32)), Workspace(),
                        Matrix("C"), Dim("M"), Dim("N"), Dim("K"))
            def workspace_bytes(self, problem, params, device):
                return 4 * problem.M * problem.N * params["SPLIT"]
            def plan(self, problem, params, device):
                return (Main(), Extra(f"splitk_reduce<{params['SPLIT']}>",
                                      Launch(grid=(cdiv(problem.M * problem.N, 256), 1, 1), block=(256, 1, 1)),
                                      (Workspace(), Matrix("C"), Dim("M"), Dim("N"))))

        KernelSpec subclasses are built like ``Tc(name="tc", source="tc.cu", defaults={...},
        precisions=("tf32",), layouts=(("row", "col"),))``.
    """

    def entry(self, params: Mapping[str, int]) -> str:
        """Return the C++ name expression of the kernel instance, e.g. ``"gemm_naive<16, 16>"``."""
        raise NotImplementedError

    def launch(self, shape: Shape, params: Mapping[str, int], device: DeviceFacts) -> Launch:
        """Return grid, block and dynamic shared bytes for ``shape`` and ``params``."""
        raise NotImplementedError

    # --- v2: problem-level methods the core calls ----------------------------------------------
    def geometry(self, problem: Problem, params: Mapping[str, int], device: DeviceFacts) -> Launch:
        """Launch geometry of :class:`Main` (default: ``launch(problem.shape, ...)``)."""
        return self.launch(problem.shape, params, device)

    def instance(self, problem: Problem, params: Mapping[str, int]) -> str:
        """Name expression of the main kernel (default: ``entry(params)``)."""
        return self.entry(params)

    def options(self, problem: Problem, params: Mapping[str, int], device: DeviceFacts) -> KernelOptions:
        """NVRTC options (default: ``KernelOptions()``: no defines, no cap, plain ``sm_<arch>``)."""
        return KernelOptions()

    def arguments(self, problem: Problem, params: Mapping[str, int], device: DeviceFacts) -> tuple:
        """The main kernel's arguments, in order (default: ``(A, B, C, M, N, K)``)."""
        return DEFAULT_ARGUMENTS

    def workspace_bytes(self, problem: Problem, params: Mapping[str, int], device: DeviceFacts) -> int:
        """Bytes of device workspace the kernel needs (default 0: none)."""
        return 0

    def plan(self, problem: Problem, params: Mapping[str, int], device: DeviceFacts) -> tuple:
        """What one launch is: the steps the core enqueues, in order, for the correctness launch,
        every warm-up and every timed launch (inside event intervals and captured graphs).
        Default: ``(Main(),)``. Exactly one :class:`Main` is required."""
        return (Main(),)


@dataclass(frozen=True)
class DevicePointers:
    """Device addresses (plain ints) of the matrices of one launch, stored as
    :class:`Problem` says (dtype and layout), and the CUDA stream handle (an int) to enqueue on.
    ``a_scale`` / ``b_scale``: the float32 scale buffers of ``precision=fp8`` (layouts:
    :class:`Problem`), 0 for other precisions. ``groups``: a grouped problem's group arrays
    (``group_offsets``, ``group_m``, ``group_dims``: :mod:`gemmlab.contract.grouped`) by name.
    ``c0`` / ``bias``: an epilogue problem's C0 (beta != 0) and bias vector (issue 43), 0 when it
    has none. Given to library-backed kernels only."""

    a: int
    b: int
    c: int
    stream: int
    a_scale: int = 0
    b_scale: int = 0
    groups: Mapping[str, int] = field(default_factory=dict)
    c0: int = 0
    bias: int = 0
    c0: int = 0
    bias: int = 0


@dataclass
class LibraryKernelSpec(KernelBase):
    """A kernel provided by a vendor library (e.g. cuBLAS) instead of an NVRTC-compiled source.

    The core still owns the buffers, NaN fill, verification, timing and records; the plugin only
    turns plain data (problem, params, :class:`DevicePointers`) into a zero-argument enqueue
    function through a maintained binding. Override :meth:`available`, :meth:`library_version`
    and :meth:`enqueue_function` (float32 row-major only) or :meth:`enqueue_problem` (every
    precision and layout it declares).
    """

    def available(self) -> str | None:
        """``None`` when the library can be used here, else a one-line reason with the install hint."""
        return None

    def library_version(self) -> str:
        """The library's version string for the record."""
        return "unknown"

    def types(self, problem: Problem) -> dict:
        """The library's A/B/C storage types and compute type for the record (default: the
        problem's own)."""
        return {"a_dtype": problem.ab_dtype, "b_dtype": problem.ab_dtype, "c_dtype": problem.c_dtype,
                "compute": problem.compute}

    def enqueue_function(self, shape: Shape, params: Mapping[str, int], pointers: DevicePointers,
                         precision: str):
        """v1: return ``(enqueue, close)`` for row-major operands: ``enqueue()`` issues one
        C = A @ B on ``pointers.stream`` without synchronising (it must be capturable in a CUDA
        graph); ``close()`` frees the library's resources.

        Raises:
            ParamError: the precision or parameters are not supported.
        """
        raise NotImplementedError

    def enqueue_problem(self, problem: Problem, params: Mapping[str, int], pointers: DevicePointers):
        """v2: like :meth:`enqueue_function` for any declared precision and layout (the core calls
        this; default: ``enqueue_function(problem.shape, params, pointers, problem.precision)``
        for row/row, else ParamError)."""
        if (problem.layout_a, problem.layout_b) != ("row", "row"):
            raise ParamError("layout", f"kernel {self.name} supports row/row only")
        return self.enqueue_function(problem.shape, params, pointers, problem.precision)


class KernelHooks:
    """Hook specifications (project name ``gemmlab``). Implement them with ``@hookimpl``."""

    @hookspec
    def gemmlab_kernels(self) -> list[KernelBase]:
        """Return the kernels this plugin provides (:class:`KernelSpec` or :class:`LibraryKernelSpec`).

        Called once when the registry is built. Names must be unique across all plugins; a
        duplicate is an error naming both plugins.
        """


# --- Triton kernels (issue 46) -------------------------------------------------------------------

#: parameters of a :class:`TritonKernelSpec` that are Triton compile options, not ``tl.constexpr``
#: arguments of the kernel (``triton.compile(..., options={...})``; ``maxnreg``: ptxas's register cap,
#: as ``triton.Config(maxnreg=...)`` sets it)
TRITON_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@dataclass
class TritonKernelSpec(KernelBase):
    """A kernel written in Triton (a ``@triton.jit`` function); the core compiles it with Triton
    for the point's target, launches the compiled kernel on the run's stream with the core's own
    buffers, and verifies and times it like every other kernel (never Triton's timer or autotuner).

    The plugin stays plain data: it names the function as ``source`` (a ``.py`` file: beside the
    plugin file first, then gemmlab's ``kernels/`` folder, like a ``.cu`` source) and ``function``
    (its name there), so neither the plugin nor the registry imports Triton; a drop-in that imports
    Triton itself may pass the ``@triton.jit`` object as ``kernel`` instead. Triton is an optional
    extra (``pip install 'gemmlab[triton]'``); without it the kernel is registered and a run of it
    is refused in one line.

    Parameters (``defaults``, ``space``): those named in :data:`TRITON_OPTIONS` (``num_warps``,
    ``num_stages``, ``num_ctas``) are Triton compile options; every other one is passed as the
    ``tl.constexpr`` argument of the same name (``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K``, ``GROUP_M``...).

    Triton's autotune configs as the declared space (issue 46, item 3): ``configs`` takes the list
    ``@triton.autotune(configs=...)`` would take (``triton.Config`` objects, or dicts of the same
    parameters with the options among them); ``kernel`` may also be the ``@triton.autotune``-decorated
    function itself, whose configs are read. The configs become the kernel's :attr:`space` (each
    parameter a :class:`Choice` of the values the configs use, and the restriction
    ``autotune_configs``: exactly the listed combinations, :func:`~gemmlab.contract.space.configs_space`)
    and, where ``defaults`` is empty, its defaults (the first config); gemmlab's candidate enumeration
    and first-use tuning then choose among them with verification. Give ``configs`` or ``space``, not
    both. A config's ``pre_hook`` or ``ir_override``, and an autotuner's ``reset_to_zero`` /
    ``restore_value`` / ``pre_hook``, are refused when the plugin is loaded: gemmlab owns the buffers and
    runs no hook around a launch.

    Override :meth:`grid` (blocks per axis for the problem and parameters) or, where the grid
    depends on the device (a persistent kernel: at most one program per SM), :meth:`launch_grid`;
    and where needed :meth:`arguments` (the runtime arguments, in the order of the function's
    non-constexpr parameters: :class:`Matrix`, :class:`Dim`, :class:`Value`; default
    ``(A, B, C, M, N, K)``) and :meth:`constants` (constexpr values beyond the parameters, e.g. the
    ``tl.dot`` input precision). The core specialises like Triton's JIT: pointers (256-byte aligned
    buffers) and int arguments divisible by 16 are marked so, an int argument equal to 1 becomes a
    constant. A kernel that needs Triton's global scratch (device-side TMA descriptors,
    ``tl.make_tensor_descriptor``) gets it from the core: one guard-banded buffer of the size the
    compiled kernel asks for (per program x programs), allocated before timing and handed to
    Triton's launcher at each launch (``triton.set_allocator``'s hook), never allocated inside the
    timed interval.
    """

    function: str = ""
    kernel: object = None
    configs: tuple = ()

    def __post_init__(self):
        source = self.configs
        if not source and self.kernel is not None and self.space is None:
            source = tuple(getattr(self.kernel, "configs", None) or ())  # an @triton.autotune function
        if source and self.space is None:
            try:
                defaults, space, values = configs_space(source, TRITON_OPTIONS)
            except ValueError:  # refused in one line when the plugin is loaded (registry.triton_problem)
                return
            self.configs = tuple(source)
            self.space = space
            if not self.defaults:
                self.defaults = defaults
            if values:
                self.param_values = {**values, **dict(self.param_values or {})}

    def grid(self, problem: Problem, params: Mapping[str, int]) -> tuple[int, ...]:
        """Blocks (Triton programs) along x, y, z (1 to 3 ints >= 1) for ``problem`` and ``params``."""
        raise NotImplementedError

    def launch_grid(self, problem: Problem, params: Mapping[str, int], device: DeviceFacts) -> tuple[int, ...]:
        """The grid the core launches on ``device`` (default: :meth:`grid`); override it instead of
        :meth:`grid` where the grid depends on the device, e.g. a persistent kernel's
        ``(min(device.sm_count, tiles),)``."""
        return self.grid(problem, params)

    def geometry(self, problem: Problem, params: Mapping[str, int], device: DeviceFacts) -> Launch:
        """The launch without Triton's compile (for the ranking model): :meth:`launch_grid` blocks of
        ``32 * num_warps`` threads (shared memory is known after the compile)."""
        grid = tuple(int(n) for n in self.launch_grid(problem, params, device))
        warps = int(self.compile_options(problem, params).get("num_warps", 4))
        return Launch(grid=(*grid, 1, 1)[:3], block=(32 * warps, 1, 1))

    def arguments(self, problem: Problem, params: Mapping[str, int], device: DeviceFacts) -> tuple:
        """The runtime (non-constexpr) arguments in order (default: ``(A, B, C, M, N, K)``)."""
        return DEFAULT_ARGUMENTS

    def constants(self, problem: Problem, params: Mapping[str, int]) -> dict:
        """``tl.constexpr`` values by name (default: the parameters that are not
        :data:`TRITON_OPTIONS`); an override usually adds to ``super().constants(...)``."""
        return {k: v for k, v in params.items() if k not in TRITON_OPTIONS}

    def compile_options(self, problem: Problem, params: Mapping[str, int]) -> dict:
        """Triton compile options (default: the parameters named in :data:`TRITON_OPTIONS`)."""
        return {k: int(v) for k, v in params.items() if k in TRITON_OPTIONS}
