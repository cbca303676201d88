"""TMA tensor-map rules (owned here, in the contract layer, so plugins may state them): what a 2-D
tiled map (:class:`~gemmlab.contract.hookspecs.TensorMap`) must satisfy, checked on the CPU before
anything compiles. The map itself is built on the GPU by :mod:`gemmlab.gpu.tma`.

Rules (CUDA Driver API reference, ``cuTensorMapEncodeTiled``): the global
base address 16-byte aligned; the global row stride (bytes between rows of the matrix as stored)
a multiple of 16 bytes and below 2^40; each global dimension 1..2^32; each box dimension
1..256; the inner box dimension times the element size a multiple of 16 bytes; with a swizzle,
the inner box bytes at most the swizzle span (32, 64 or 128 bytes).

A map over a workspace copy (``TensorMap("workspace", box, region=Region(...))``) takes its shape,
row stride and element type from the region; :func:`check_region` adds the region's own rules
(offset 16-byte aligned, inside the workspace), each a one-line ``kernel`` error naming the field.

With an epilogue (issue 43) a map over A, B or C covers the matrix, rows ``lda``/``ldb``/``ldc``
elements apart (:func:`matrix_view`), so the padding past each row is not read (a row ending inside 16 bytes there
is not yet measured on a GPU for loads); that leading
dimension must then meet the row-stride rule. A map over C there also needs N x C's element bytes a
multiple of 16: a TMA store writes whole 16-byte chunks, so with a row that ends inside one it
overwrites the padding after N up to the chunk's end (measured on an H100, session 33: every fused
TMA-store point with ldc > N and N x bytes not a multiple of 16 wrote exactly those elements; Triton
issue #11583 reports the same of descriptor stores).

A ``batched`` map (:class:`TensorMap`, issue 43's strided batches) is the rank-3 form of such a map:
dims (cols, rows, batches held), the batch pitch (:func:`batch_stride_bytes`) a multiple of 16 bytes
and below 2^40 (one-line error naming ``batch.stride_a`` / ``stride_b`` / ``stride_c``); a shared
operand (stride 0) has one batch. Each batch's rows and columns clip as one matrix's do.
"""

from __future__ import annotations

from gemmlab.errors import ConfigError
from gemmlab.contract.hookspecs import (L2_PROMOTIONS, OOB_FILLS, REGION_DTYPES, SCALE_MATRICES, SWIZZLES, Problem,
                                        Region, TensorMap, Workspace)

MAX_BOX = 256


def element_bytes(problem: Problem, matrix: str) -> int:
    """Bytes per element of ``matrix``: the precision's storage type for A and B (1 for fp8), C's
    type (4, or 2 for an fp8 problem's bf16 output), 4 for the fp8 scale buffers."""
    return problem.element_bytes(matrix)


def element_dtype(problem: Problem, matrix: str) -> str:
    """Element type name of ``matrix`` (float32 | bfloat16 | float16 | float8_e4m3fn | float8_e5m2)."""
    return problem.element_dtype(matrix)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_workspace_offset(ws: Workspace, workspace_bytes: int, what: str) -> None:
    """A ``Workspace(offset)`` argument: offset an int, a multiple of 16, below ``workspace_bytes``.

    Raises:
        ConfigError: field ``kernel``, one line naming ``Workspace.offset``.
    """
    off = ws.offset
    if not _is_int(off) or off < 0 or off % 16 or (workspace_bytes > 0 and off >= workspace_bytes):
        raise ConfigError("kernel", f"{what}: Workspace.offset = {off!r} must be an int, a multiple of 16 bytes and "
                          f"below workspace_bytes = {workspace_bytes}")


def check_region(region, workspace_bytes: int | None, what: str) -> tuple[int, int, int, int]:
    """The rules of a workspace :class:`Region`; returns (rows, cols, row stride in elements,
    element bytes). ``workspace_bytes`` None skips the bounds rule (checked where it is known).

    Raises:
        ConfigError: field ``kernel``, one line naming the region field (``region.offset`` ...).
    """
    if not isinstance(region, Region):
        raise ConfigError("kernel", f"{what}: region must be a Region(offset, rows, cols, dtype, ld), got {region!r}")
    if region.dtype not in REGION_DTYPES:
        raise ConfigError("kernel", f"{what}: region.dtype = {region.dtype!r}; allowed: {', '.join(REGION_DTYPES)}")
    elem = REGION_DTYPES[region.dtype]
    for name in ("rows", "cols"):
        v = getattr(region, name)
        if not _is_int(v) or v < 1:
            raise ConfigError("kernel", f"{what}: region.{name} = {v!r} must be an int >= 1")
    if not _is_int(region.ld) or (region.ld != 0 and region.ld < region.cols):
        raise ConfigError("kernel", f"{what}: region.ld = {region.ld!r} must be 0 (packed) or >= region.cols = {region.cols}")
    if not _is_int(region.offset) or region.offset < 0 or region.offset % 16:
        raise ConfigError("kernel", f"{what}: region.offset = {region.offset!r} must be an int >= 0 and a multiple of 16 "
                          "bytes (TMA base alignment)")
    ld = region.row_stride
    if workspace_bytes is not None and region.offset + region.nbytes > workspace_bytes:
        raise ConfigError("kernel", f"{what}: region.offset {region.offset} + {region.rows} x {ld} x {elem} B ends at "
                          f"{region.offset + region.nbytes} B, past workspace_bytes = {workspace_bytes}")
    return region.rows, region.cols, ld, elem


def _check_box(what: str, box: tuple[int, int], elem: int, swizzle: str) -> None:
    """The box rules: each dimension 1..256, the inner box bytes a multiple of 16 and within the
    swizzle span.

    Raises:
        ConfigError: field ``kernel``, one line naming the rule.
    """
    for name, b in zip(("rows", "cols"), box):
        if not 1 <= b <= MAX_BOX:
            raise ConfigError("kernel", f"{what}: box {name} = {b}; each box dimension must be 1..{MAX_BOX} (TMA rule)")
    inner_bytes = box[1] * elem
    if inner_bytes % 16:
        raise ConfigError("kernel", f"{what}: inner box {box[1]} x {elem} B = {inner_bytes} B is not a multiple of "
                          "16 bytes (TMA rule)")
    span = SWIZZLES[swizzle]
    if span is not None and inner_bytes > span:
        raise ConfigError("kernel", f"{what}: inner box {inner_bytes} B exceeds the {swizzle} swizzle span "
                          f"({span} B; TMA rule): use a smaller inner box or a wider swizzle")


def _per_group_dims(tm: TensorMap, problem: Problem, rows: int, what: str) -> list[int]:
    """[G, rows / G] of a ``per_group`` map: a grouped problem of kind contiguous or masked, a matrix
    whose stored rows are G slabs (B of both kinds; A and C of masked), not the workspace.

    Raises:
        ConfigError: field ``kernel``, one line saying which of these the map breaks.
    """
    grouped = getattr(problem, "grouped", None)
    if grouped is None or grouped.kind not in ("contiguous", "masked") or tm.region is not None:
        raise ConfigError("kernel", f"{what}: per_group maps need a grouped problem of kind contiguous or masked "
                          "and a matrix A, B or C (not the workspace)")
    G = grouped.G
    if tm.matrix != "B" and grouped.kind != "masked":
        raise ConfigError("kernel", f"{what}: per_group maps over {tm.matrix} need grouped.kind=masked (contiguous "
                          f"{tm.matrix} has no equal slabs per group; use row offsets in a 2-D map)")
    if rows % G:
        raise ConfigError("kernel", f"{what}: {rows} stored rows are not G = {G} equal slabs")
    return [G, rows // G]


def batch_stride_bytes(problem: Problem, matrix: str) -> int:
    """The batch pitch in bytes of a ``batched`` map over ``matrix`` ("A" | "B" | "C"): the batch stride
    (:meth:`Problem.storage`) times the element bytes; for an operand held once (batch stride 0, or one
    batch) one matrix's rows x ld (a stride TMA accepts; the map's batch dimension is then 1)."""
    st = problem.storage(matrix)
    return (st.stride if st.copies > 1 else st.rows * st.ld) * element_bytes(problem, matrix)


def _batched_dims(tm: TensorMap, problem: Problem, rows: int, cols: int, what: str) -> list[int]:
    """[batches held, rows, cols] of a ``batched`` map (issue 43, strided batches: a rank-3 map over A, B
    or C of an epilogue problem, :func:`matrix_view`), after the 2-D rules of one matrix.

    Raises:
        ConfigError: field ``kernel`` (not an epilogue problem's A, B or C; a workspace region,
            ``per_group`` or ``each_group`` with it) or ``batch.stride_a`` / ``stride_b`` / ``stride_c``
            (the batch stride in bytes not a multiple of 16 or not below 2^40: TMA rules), one line.
    """
    if tm.region is not None or tm.per_group or tm.each_group or not matrix_view(problem, tm.matrix):
        raise ConfigError("kernel", f"{what}: batched maps need an epilogue problem's A, B or C (not the workspace, "
                          "not per_group or each_group)")
    st = problem.storage(tm.matrix)
    stride = batch_stride_bytes(problem, tm.matrix)
    field = f"batch.stride_{tm.matrix.lower()}"
    if stride % 16:
        raise ConfigError(field, f"{what}: the batch stride {st.stride} x {element_bytes(problem, tm.matrix)} B = "
                          f"{stride} B is not a multiple of 16 bytes (TMA rule)")
    if stride >= 2**40:
        raise ConfigError(field, f"{what}: the batch stride {stride} B is not below 2^40 (TMA rule)")
    return [st.copies, rows, cols]


def matrix_view(problem: Problem, matrix: str) -> bool:
    """Whether a map over ``matrix`` ("A" | "B" | "C") of ``problem`` covers the matrix itself with its
    leading dimension as the row pitch (:meth:`Problem.storage`: rows x cols of one batch, rows ``ld``
    elements apart) rather than its stored buffer: for every problem with an epilogue (issue 43), whose
    buffers hold padding past ``cols`` in each row (NaN, never read and never written: TMA clips
    boxes at ``cols`` and ``rows``, zero-filling loads and dropping stores there; a store's clip is
    whole 16-byte chunks, so C's map there also needs N x its bytes a multiple of 16: module docstring). Without an
    epilogue the two are the same (tight, one batch)."""
    return problem.epilogue is not None and problem.grouped is None and matrix in ("A", "B", "C")


def group_matrices(tm: TensorMap, problem: Problem) -> list[tuple[int, int, int]]:
    """The matrices of an ``each_group`` map (a ``general`` grouped problem, issue 44): per group g,
    (rows, cols, element offset) of its matrix as stored (cols contiguous): A_g (M_g, K_g), B_g
    (K_g, N_g) or (N_g, K_g) with ``layout.b=col``, C_g (M_g, N_g); rows 0 for a group that needs
    no map (M_g = 0: no tile reads or writes it; its map is all zeros).

    Raises:
        ConfigError: field ``kernel``, one line: not a ``general`` problem, a matrix other than A,
            B, C, or a workspace region or ``per_group`` with it.
    """
    what = f"TMA tensor map over {tm.matrix}"
    grouped = getattr(problem, "grouped", None)
    if (grouped is None or grouped.kind != "general" or tm.matrix not in ("A", "B", "C") or tm.region is not None
            or tm.per_group):
        raise ConfigError("kernel", f"{what}: each_group maps need a grouped problem of kind general and a matrix A, B "
                          "or C (not the workspace, not per_group)")
    which = "ABC".index(tm.matrix)
    out = []
    for (m, n, k), offsets in zip(grouped.shapes, grouped.element_offsets):
        rows, cols = {"A": (m, k), "B": (k, n) if grouped.layout_b == "row" else (n, k), "C": (m, n)}[tm.matrix]
        out.append((rows if m else 0, cols, offsets[which]))
    return out


def _check_each_group(tm: TensorMap, problem: Problem, box: tuple[int, int], address: int | None) -> dict:
    """The rules of an ``each_group`` map for every group that gets one (:func:`group_matrices`):
    each group's base (the buffer's address + its element offset) 16-byte aligned, row stride a
    multiple of 16 bytes, dims within TMA's limits; the box rules as for one map. Returns the
    record's description (``global`` per group: [rows, cols], [0, cols] where no map is encoded).

    Raises:
        ConfigError: field ``shape`` naming the first group whose N_g or K_g breaks a stride rule,
            ``kernel`` for the box, swizzle or base alignment.
    """
    what = f"TMA tensor map over {tm.matrix}"
    elem = element_bytes(problem, tm.matrix)
    inner = {"A": "K_g", "B": "N_g" if problem.layout_b == "row" else "K_g", "C": "N_g"}[tm.matrix]
    groups = group_matrices(tm, problem)
    for g, (rows, cols, offset) in enumerate(groups):
        if not rows:
            continue
        stride = cols * elem
        if stride % 16:
            raise ConfigError("shape", f"{what} of group {g}: the row stride {cols} x {elem} B = {stride} B is not a "
                              f"multiple of 16 bytes (TMA rule); {inner} must be a multiple of {16 // elem} for this "
                              "kernel")
        if stride >= 2**40 or rows > 2**32 or cols > 2**32:
            raise ConfigError("shape", f"{what} of group {g}: {rows} x {cols} exceeds TMA's global limits")
        base = (address or 0) + offset * elem
        if base % 16:
            raise ConfigError("kernel", f"{what} of group {g}: base {base:#x} (element offset {offset}) is not "
                              "16-byte aligned (TMA rule)")
    return {"matrix": tm.matrix, "dtype": element_dtype(problem, tm.matrix), "each_group": len(groups),
            "encoded": sum(1 for r, _, _ in groups if r), "global": [[r, c] for r, c, _ in groups],
            "box": list(box), "swizzle": tm.swizzle, "l2_promotion": tm.l2_promotion, "oob_fill": tm.oob_fill}


def check(tm: TensorMap, problem: Problem, address: int | None = None, workspace_bytes: int | None = None) -> dict:
    """Check ``tm`` against the TMA rules for ``problem``; return its description for the record.

    A map over ``"workspace"`` takes rows, cols, row stride and element type from ``tm.region``
    (:func:`check_region`; ``workspace_bytes`` given: also inside the workspace). With an
    epilogue a map over A, B or C covers one matrix at its leading dimension (:func:`matrix_view`).

    Raises:
        ConfigError: one line naming the rule: field ``shape`` when the problem's strides break
            it (another M, N or K would work), ``kernel`` when the plugin's box, swizzle or region does.
    """
    scales = SCALE_MATRICES if getattr(problem, "precision", None) == "fp8" else ()
    if not isinstance(tm, TensorMap) or tm.matrix not in ("A", "B", "C", "workspace", *scales):
        allowed = "A, B, C, A_scale, B_scale or workspace" if scales else "A, B, C or workspace"
        raise ConfigError("kernel", f"tensor map over {getattr(tm, 'matrix', tm)!r}: matrix must be {allowed}")
    what = f"TMA tensor map over {tm.matrix}"
    if (tm.matrix == "workspace") != (tm.region is not None):
        raise ConfigError("kernel", f"{what}: TensorMap.region is required with matrix='workspace' and not allowed "
                          "with A, B or C (nor with the fp8 scales)")
    if tm.swizzle not in SWIZZLES:
        raise ConfigError("kernel", f"{what}: swizzle {tm.swizzle!r}; allowed: {', '.join(SWIZZLES)}")
    if tm.l2_promotion not in L2_PROMOTIONS:
        raise ConfigError("kernel", f"{what}: l2_promotion {tm.l2_promotion!r}; allowed: {', '.join(L2_PROMOTIONS)}")
    if tm.oob_fill not in OOB_FILLS:
        raise ConfigError("kernel", f"{what}: oob_fill {tm.oob_fill!r}; allowed: {', '.join(OOB_FILLS)}")
    box = tuple(tm.box)
    if len(box) != 2 or not all(isinstance(b, int) and not isinstance(b, bool) for b in box):
        raise ConfigError("kernel", f"{what}: box must be (rows, cols) of two ints, got {tm.box!r}")
    if getattr(tm, "each_group", False):  # issue 44, general kind: one map per group
        elem = element_bytes(problem, tm.matrix) if tm.matrix in ("A", "B", "C") else 4
        _check_box(what, box, elem, tm.swizzle)
        return _check_each_group(tm, problem, box, address)
    if tm.region is not None:
        rows, cols, ld, elem = check_region(tm.region, workspace_bytes, what)
        stride = ld * elem
        if stride % 16:
            raise ConfigError("kernel", f"{what}: region.ld = {ld} x {elem} B = {stride} B is not a multiple of 16 "
                              "bytes (TMA rule)")
        dtype = tm.region.dtype
    elif matrix_view(problem, tm.matrix):
        elem = element_bytes(problem, tm.matrix)
        st = problem.storage(tm.matrix)
        if st.copies > 1 and not getattr(tm, "batched", False):
            raise ConfigError("kernel", f"{what}: a 2-D map covers one matrix; {tm.matrix} holds {st.copies} batches "
                              f"(batch.count={problem.batch}, batch stride {st.stride})")
        rows, cols, stride = st.rows, st.cols, st.ld * elem
        dtype = element_dtype(problem, tm.matrix)
        if stride % 16:
            raise ConfigError("shape", f"{what}: the row stride ld{tm.matrix[0].lower()} = {st.ld} x {elem} B = {stride} B "
                              "is not a multiple of 16 bytes (TMA rule)")
        if tm.matrix == "C" and (cols * elem) % 16:
            raise ConfigError("shape", f"{what}: N = {cols} x {elem} B = {cols * elem} B is not a multiple of 16 bytes "
                              f"with ldc = {st.ld} > N: TMA stores write whole 16-byte chunks, so the padding "
                              "past N up to the next 16 bytes would be written (store through registers instead)")
    else:
        elem = element_bytes(problem, tm.matrix)
        rows, cols = problem.stored_shape(tm.matrix)
        stride = cols * elem
        dtype = element_dtype(problem, tm.matrix)
    inner = ("M" if (tm.matrix == "A" and problem.layout_a == "col") or tm.matrix == "A_scale"
             else "K" if tm.matrix == "A" or (tm.matrix == "B" and problem.layout_b == "col") or tm.matrix == "B_scale"
             else "N")
    if stride % 16:
        raise ConfigError("shape", f"{what}: the row stride {cols} x {elem} B = {stride} B is not a multiple of 16 "
                          f"bytes (TMA rule); {inner} must be a multiple of {16 // elem} for this kernel")
    if stride >= 2**40 or rows > 2**32 or cols > 2**32:
        raise ConfigError("shape", f"{what}: {rows} x {cols} exceeds TMA's global limits (dims <= 2^32, stride < 2^40 B)")
    _check_box(what, box, elem, tm.swizzle)
    if address is not None and address % 16:
        raise ConfigError("shape", f"{what}: base address {address:#x} is not 16-byte aligned (TMA rule)")
    global_dims, box_dims = [rows, cols], list(box)
    batch_stride = None
    if getattr(tm, "batched", False):
        global_dims, box_dims, batch_stride = _batched_dims(tm, problem, rows, cols, what), [1, *box], batch_stride_bytes(
            problem, tm.matrix)
    if getattr(tm, "per_group", False):
        global_dims, box_dims = _per_group_dims(tm, problem, rows, what), [1, *box]
        global_dims.append(cols)
    out = {"matrix": tm.matrix, "dtype": dtype, "global": global_dims,
           "row_stride_bytes": stride, "box": box_dims, "swizzle": tm.swizzle, "l2_promotion": tm.l2_promotion,
           "oob_fill": tm.oob_fill}
    if tm.region is not None:
        out["workspace_offset"] = tm.region.offset
    if batch_stride is not None:
        out["batch_stride_bytes"] = batch_stride
    return out
