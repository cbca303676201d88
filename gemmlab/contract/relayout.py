"""Operand relayout for TMA kernels: when an operand as stored cannot be read by TMA (row stride not
a multiple of 16 bytes) or not in the order the kernel needs (TF32 wgmma reads only K-major A and B), a
plan copies it into the kernel's workspace first. Plain data only (no CUDA): plugins call
:func:`tma_operand` from ``arguments()``/``workspace_bytes()``/``plan()``.

The copy is an :class:`~gemmlab.contract.hookspecs.Extra` step before ``Main()`` running a kernel
of the shared header ``kernels/include/gemmlab/relayout.cuh`` (the source must include it):

- ``pad``: ``gemmlab::relayout_pad<E>`` copies the stored ``rows x cols`` matrix to
  ``rows x ld`` with ``ld`` the next multiple of 16 bytes, the pad columns zero (a zero K column
  adds nothing to the product; a zero N column is never stored). The tensor map then covers the
  whole padded row (``region.cols == ld``).
- ``transpose``: ``gemmlab::relayout_transpose<E, 64, 32>`` turns a row-major K x N B into the
  K-major N x Kp copy, or a column-major A (stored K x M) into the K-major (row-major) M x Kp copy
  (Kp: K rounded up to 16 bytes, pad zero).

Each copy reads the operand once and writes it once, inside every timed launch (the core enqueues
the whole plan), so its cost is in the measured time. :func:`replay` models a copy step's index
arithmetic in numpy (the copied values and how often each destination element is written) for
the CPU tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gemmlab.contract.hookspecs import (Extra, Launch, Matrix, Problem, Region, TensorMap, Value,
                                        Workspace)
from gemmlab.contract.tma_rules import matrix_view

THREADS = 256  #: threads per block of both copy kernels
PAD_BLOCKS_PER_SM = 8  #: grid of the pad copy: at most this many blocks per SM (grid-stride loop)
TRANSPOSE_TILE = (64, 32)  #: (TK, TN): source rows x source cols per transpose block
ALIGN = 256  #: each workspace region starts on a multiple of this many bytes


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Operand:
    """How a TMA kernel reads operand ``matrix`` ("A" | "B").

    Attributes:
        matrix: "A" | "B".
        kind: ``direct`` (the map is over the matrix as stored), ``pad`` or ``transpose`` (the map
            is over the workspace copy ``region`` that ``copy`` writes).
        tensor_map: the map to pass in the kernel's arguments.
        copy: the :class:`Extra` step to put before ``Main()`` (None when direct).
        region: the workspace copy (None when direct).
    """

    matrix: str
    kind: str
    tensor_map: TensorMap
    copy: Extra | None = None
    region: Region | None = None

    @property
    def end(self) -> int:
        """Workspace bytes up to the end of this operand's region, rounded up to :data:`ALIGN`
        (the offset for the next region; 0 when direct)."""
        return 0 if self.region is None else _cdiv(self.region.offset + self.region.nbytes, ALIGN) * ALIGN


def tma_operand(problem: Problem, matrix: str, box: tuple[int, int], *, k_major: bool = False, offset: int = 0,
                sm_count: int = 132, swizzle: str = "128B", l2_promotion: str = "256B") -> Operand:
    """The way a TMA kernel reads A or B of ``problem``.

    Args:
        problem: the GEMM problem (A and B packed in ``problem.ab_dtype``, as :class:`Problem` says).
        matrix: "A" | "B".
        box: the TMA box (rows, cols) in elements of what the kernel reads: the matrix as stored,
            or, with a transpose, the K-major copy (N rows x K cols for B, M rows x K cols for A).
        k_major: the kernel needs this operand K-major (cols = K). Row-major A and column-major B
            already are; a row-major B or a column-major A then takes the transpose copy.
        offset: byte offset of this operand's region in the workspace (a multiple of 256; put B
            after A with ``offset=a.end``).
        sm_count: the GPU's SM count (sizes the pad copy's grid-stride grid).
        swizzle, l2_promotion: of the tensor map.

    Returns:
        :class:`Operand`: direct when the stored row stride (with an epilogue the leading dimension
        lda/ldb: the map covers the matrix at that pitch, :func:`gemmlab.contract.tma_rules.matrix_view`)
        is a multiple of 16 bytes and the order fits, else a ``pad`` or ``transpose`` copy into
        ``[offset, operand.end)`` that reads the source at that pitch (``ld_src``).

    Raises:
        ValueError: ``matrix`` not A or B, or ``offset`` not a multiple of 256.
    """
    if matrix not in ("A", "B"):
        raise ValueError(f"matrix must be A or B, got {matrix!r}")
    if offset % ALIGN:
        raise ValueError(f"offset {offset} must be a multiple of {ALIGN}")
    elem = problem.ab_bytes
    vec = 16 // elem
    if matrix_view(problem, matrix):  # with an epilogue: one matrix of its buffer, rows ld_src apart
        st = problem.storage(matrix)
        rows, cols, ld_src = st.rows, st.cols, st.ld
    else:
        rows, cols = problem.stored_shape(matrix)
        ld_src = cols
    layout = problem.layout_a if matrix == "A" else problem.layout_b
    is_k_major = (layout == "row") if matrix == "A" else (layout == "col")
    dtype = problem.ab_dtype
    if k_major and not is_k_major:  # row-major B (K x N) -> K-major N x Kp; column-major A (K x M) -> M x Kp
        ld = _cdiv(rows, vec) * vec
        region = Region(offset=offset, rows=cols, cols=ld, dtype=dtype)
        tk, tn = TRANSPOSE_TILE
        step = Extra(f"gemmlab::relayout_transpose<{elem}, {tk}, {tn}>",
                     Launch(grid=(_cdiv(cols, tn), _cdiv(ld, tk), 1), block=(THREADS, 1, 1)),
                     (Matrix(matrix), Workspace(offset), Value(rows), Value(cols), Value(ld_src), Value(ld)))
        kind = "transpose"
    elif (ld_src * elem) % 16:  # stride TMA cannot take: pad each row to 16 bytes
        ld = _cdiv(cols, vec) * vec
        region = Region(offset=offset, rows=rows, cols=ld, dtype=dtype)
        chunks = rows * ld // vec
        step = Extra(f"gemmlab::relayout_pad<{elem}>",
                     Launch(grid=(max(1, min(_cdiv(chunks, THREADS), PAD_BLOCKS_PER_SM * sm_count)), 1, 1),
                            block=(THREADS, 1, 1)),
                     (Matrix(matrix), Workspace(offset), Value(rows), Value(cols), Value(ld_src), Value(ld)))
        kind = "pad"
    else:
        return Operand(matrix, "direct", TensorMap(matrix, tuple(box), swizzle=swizzle, l2_promotion=l2_promotion))
    tm = TensorMap("workspace", tuple(box), swizzle=swizzle, l2_promotion=l2_promotion, region=region)
    return Operand(matrix, kind, tm, step, region)


def replay(step: Extra, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Replay a relayout step's index arithmetic (``relayout.cuh``) on the host.

    Args:
        step: an :class:`Extra` made by :func:`tma_operand` (pad or transpose).
        src: the source matrix as stored (rows x cols), or its buffer rows x ld_src (the copy reads
            columns < cols of each row), any dtype.

    Returns:
        ``(dst, writes)``: the destination region as the kernel leaves it (pad zero) and an int64
        array of the same shape counting the 16-byte chunk stores that hit each element (all
        ones: every element written exactly once, nothing outside the region).
    """
    rows, cols, ld_src, ld = (int(v.value) for v in step.arguments[2:6])
    assert src.shape in ((rows, cols), (rows, ld_src)) and ld_src >= cols
    vec = 16 // src.dtype.itemsize
    if step.entry.startswith("gemmlab::relayout_pad"):
        dst = np.zeros((rows, ld), dtype=src.dtype)
        writes = np.zeros((rows, ld), dtype=np.int64)
        threads = step.launch.grid[0] * step.launch.block[0]
        per_row, total = ld // vec, rows * (ld // vec)
        for start in range(0, total, threads):  # grid-stride passes
            i = np.arange(start, min(start + threads, total))
            r, c0 = i // per_row, (i % per_row) * vec
            for j in range(vec):
                c = c0 + j
                inside = c < cols
                dst[r[inside], c[inside]] = src[r[inside], c[inside]]
                np.add.at(writes, (r, c), 1)
        return dst, writes
    tk, tn = (int(x) for x in step.entry.split("<")[1].rstrip(">").split(",")[1:])
    dst = np.zeros((cols, ld), dtype=src.dtype)
    writes = np.zeros((cols, ld), dtype=np.int64)
    gx, gy = step.launch.grid[0], step.launch.grid[1]
    ch = tk // vec
    bx, by, t = np.meshgrid(np.arange(gx), np.arange(gy), np.arange(tn * ch), indexing="ij")
    cc, chunk = t // ch, t % ch
    c, r = bx * tn + cc, by * tk + chunk * vec
    keep = (c < cols) & (r < ld)
    c, r = c[keep], r[keep]
    for j in range(vec):
        rj = r + j
        inside = rj < rows
        dst[c[inside], rj[inside]] = src[rj[inside], c[inside]]
        np.add.at(writes, (c, rj), 1)
    return dst, writes
