"""TMA tensor maps for kernel arguments (:class:`~gemmlab.contract.hookspecs.TensorMap`) on the GPU:
the map built through cuda.core's ``StridedMemoryView.as_tensor_map`` (``cuTensorMapEncodeTiled``)
after the CPU rules of :mod:`gemmlab.contract.tma_rules`.
"""

from __future__ import annotations

from gemmlab.errors import ConfigError
from gemmlab.contract.hookspecs import Problem, TensorMap
from gemmlab.contract.tma_rules import batch_stride_bytes, check, element_dtype, group_matrices, matrix_view
from gemmlab.gpu.guards import GUARD_BYTES

#: bytes of one ``CUtensorMap`` (CUDA driver API: an opaque 64-byte-aligned struct of 16 uint64)
TENSOR_MAP_BYTES = 128


class _DeviceArray:
    """A plain ``__cuda_array_interface__`` (v3) over a raw device address."""

    def __init__(self, address: int, shape: tuple[int, int], typestr: str, strides: tuple[int, int] | None = None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (int(address), False),
                                         "strides": strides, "version": 3}


def element_type(dtype_name: str):
    """``(typestr, numpy dtype)`` of the elements a tensor map over ``dtype_name`` moves: the
    ``__cuda_array_interface__`` typestr of the view and the ``data_type`` passed to cuda.core's
    ``as_tensor_map``, which names the ``CUtensorMapDataType`` (CUDA driver API, cuTensorMapEncodeTiled):
    ``bfloat16`` -> (``<u2``, ml_dtypes.bfloat16: BFLOAT16); ``float16`` -> (``<f2``, numpy float16:
    FLOAT16, the fp16 operands of ``wgmma_bf16``); ``float8_*`` -> (``|u1``, uint8: UINT8, TMA moves
    FP8 as 8-bit words); any other numpy name (``float32``: FLOAT32, ``int32``, ...) as numpy spells it.
    CPU only (no driver call)."""
    import numpy as np
    if dtype_name == "bfloat16":
        import ml_dtypes
        return "<u2", np.dtype(ml_dtypes.bfloat16)
    if dtype_name == "float16":
        return "<f2", np.dtype(np.float16)
    if dtype_name.startswith("float8"):
        return "|u1", np.dtype(np.uint8)
    return np.dtype(dtype_name).str, np.dtype(dtype_name)


def build(tm: TensorMap, problem: Problem, address: int):
    """The ``TensorMapDescriptor`` of ``tm`` over the matrix stored at ``address`` (needs the GPU;
    pass it straight to ``cuda.core.launch``). For ``matrix="workspace"``, ``address`` is the
    region's first element (workspace start + ``region.offset``); shape, element type and row
    stride (``__cuda_array_interface__`` byte strides when ``region.ld`` exceeds ``cols``) are the
    region's. With an epilogue (issue 43) a map over A, B or C views one matrix, rows ``ld``
    elements apart (:func:`gemmlab.contract.tma_rules.matrix_view`). A ``per_group`` map views the matrix as (G, rows / G, cols) with box (1, rows, cols); a ``batched``
    one (issue 43) as (batches held, rows, cols) with byte strides (batch pitch, ld x element bytes, element
    bytes) and box (1, rows, cols).
    A matrix of 0 rows (A and C of a ``contiguous`` grouped problem whose groups are all empty,
    issue 44) is mapped as one row at ``address``: the driver refuses a zero dimension
    (cuTensorMapEncodeTiled: globalDim non-zero); that row lies in the guard band after the empty
    matrix (:data:`gemmlab.gpu.guards.GUARD_BYTES`), the kernel has no tile to use it, and a store
    through it would change the band's canaries (``out_of_bounds``).

    Raises:
        ConfigError: a TMA rule is broken (see :func:`check`), or the driver refused the map.
    """
    check(tm, problem, address)
    from cuda.core import utils
    from cuda.core._tensor_map import (TensorMapL2Promotion, TensorMapOOBFill, TensorMapSwizzle)
    region = tm.region
    typestr, data_type = element_type(region.dtype if region is not None else element_dtype(problem, tm.matrix))
    swizzle = {"none": TensorMapSwizzle.NONE, "32B": TensorMapSwizzle.SWIZZLE_32B,
               "64B": TensorMapSwizzle.SWIZZLE_64B, "128B": TensorMapSwizzle.SWIZZLE_128B}[tm.swizzle]
    l2 = {"none": TensorMapL2Promotion.NONE, "64B": TensorMapL2Promotion.L2_64B,
          "128B": TensorMapL2Promotion.L2_128B, "256B": TensorMapL2Promotion.L2_256B}[tm.l2_promotion]
    oob = {"zero": TensorMapOOBFill.NONE, "nan": TensorMapOOBFill.NAN_REQUEST_ZERO_FMA}[tm.oob_fill]
    if region is not None:
        strides = None if region.row_stride == region.cols else (region.row_stride * data_type.itemsize,
                                                                  data_type.itemsize)
        array = _DeviceArray(address, (region.rows, region.cols), typestr, strides)
    elif getattr(tm, "per_group", False):  # G slabs of rows / G rows: a 3-D array (G, rows / G, cols)
        rows, cols = problem.stored_shape(tm.matrix)
        G = problem.grouped.G
        array = _DeviceArray(address, (G, rows // G, cols), typestr)
    elif getattr(tm, "batched", False):  # issue 43: (batches held, rows, cols), pitches (batch stride, ld)
        st = problem.storage(tm.matrix)
        size = data_type.itemsize
        array = _DeviceArray(address, (st.copies, st.rows, st.cols), typestr,
                             (batch_stride_bytes(problem, tm.matrix), st.ld * size, size))
    elif matrix_view(problem, tm.matrix):  # the matrix at its leading dimension, not its padded buffer
        st = problem.storage(tm.matrix)
        strides = None if st.ld == st.cols else (st.ld * data_type.itemsize, data_type.itemsize)
        array = _DeviceArray(address, (st.rows, st.cols), typestr, strides)
    else:
        rows, cols = problem.stored_shape(tm.matrix)
        if not rows:  # an all-empty contiguous grouped problem (issue 44): A and C stored with 0 rows
            if cols * data_type.itemsize > GUARD_BYTES:
                raise ConfigError("shape", f"TMA tensor map over {tm.matrix}: {tm.matrix} has 0 rows (every M_g is 0) "
                                  f"and its stand-in row of {cols} x {data_type.itemsize} B exceeds the "
                                  f"{GUARD_BYTES} B guard band after it")
            rows = 1  # the driver refuses a zero dimension: one row, inside the matrix's guard band
        array = _DeviceArray(address, (rows, cols), typestr)
    box = (1, *tm.box) if getattr(tm, "per_group", False) or getattr(tm, "batched", False) else tuple(tm.box)
    view = utils.StridedMemoryView.from_cuda_array_interface(array, stream_ptr=-1)  # cuda-core >= 1.2
    try:
        return view.as_tensor_map(box_dim=box, data_type=data_type, swizzle=swizzle, l2_promotion=l2,
                                  oob_fill=oob)
    except Exception as exc:  # the driver's own refusal (CUDA_ERROR_INVALID_VALUE ...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError("kernel", f"TMA tensor map over {tm.matrix}: the driver refused it: {first}") from None


def each_group_encodings(tm: TensorMap, problem: Problem, address: int) -> list[tuple[int, tuple]]:
    """The ``cuTensorMapEncodeTiled`` calls of an ``each_group`` map (a ``general`` grouped
    problem, issue 44) over the matrix buffer at ``address``: ``(g, args)`` per group that gets a
    map, ``args`` the call's 11 positional arguments in cuda.bindings' own types (CUDA driver API
    and cuda.bindings.driver's signature: the data type, rank 2 (int), the group's base address
    (int: ``address`` + its element offset x the element's bytes), globalDim (cols, rows) and
    globalStrides (the row pitch in bytes) as lists of ``cuuint64_t``, boxDim (box cols, box
    rows) and elementStrides (1, 1) as lists of ``cuuint32_t`` (cuda.bindings refuses plain ints
    there: ``TypeError: Cannot convert int to cuda.bindings.driver.cuuint32_t``, H100 session 32),
    then the interleave, swizzle, L2 promotion and out-of-bound fill enums of ``tm``). Groups
    with M_g = 0 get none (:func:`gemmlab.contract.tma_rules.group_matrices`). CPU only: building
    the arguments needs cuda.bindings, not the driver.

    Raises:
        ConfigError: a TMA rule is broken (see :func:`check`), or an element type TMA maps here
            do not move (bfloat16, float16, float32 only).
    """
    from cuda.bindings import driver
    check(tm, problem, address)
    enums = {"bfloat16": driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             "float16": driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             "float32": driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32}
    dtype_name = element_dtype(problem, tm.matrix)
    if dtype_name not in enums:
        raise ConfigError("kernel", f"TMA tensor map over {tm.matrix}: each_group maps move bfloat16, float16 or "
                          f"float32, got {dtype_name}")
    swizzle = getattr(driver.CUtensorMapSwizzle, {"none": "CU_TENSOR_MAP_SWIZZLE_NONE",
                                                  "32B": "CU_TENSOR_MAP_SWIZZLE_32B", "64B": "CU_TENSOR_MAP_SWIZZLE_64B",
                                                  "128B": "CU_TENSOR_MAP_SWIZZLE_128B"}[tm.swizzle])
    l2 = getattr(driver.CUtensorMapL2promotion, {"none": "CU_TENSOR_MAP_L2_PROMOTION_NONE",
                                                 "64B": "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
                                                 "128B": "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
                                                 "256B": "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"}[tm.l2_promotion])
    oob = getattr(driver.CUtensorMapFloatOOBfill, {"zero": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
                                                   "nan": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"}[tm.oob_fill])
    interleave = driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    elem = problem.element_bytes(tm.matrix)
    out = []
    for g, (rows, cols, offset) in enumerate(group_matrices(tm, problem)):
        if not rows:
            continue
        out.append((g, (enums[dtype_name], 2, int(address) + offset * elem, [u64(cols), u64(rows)], [u64(cols * elem)],
                        [u32(tm.box[1]), u32(tm.box[0])], [u32(1), u32(1)], interleave, swizzle, l2, oob)))
    return out


def build_each_group(tm: TensorMap, problem: Problem, address: int):
    """The G tensor maps of an ``each_group`` map (a ``general`` grouped problem, issue 44) over
    the matrix buffer at ``address``, as one host array of G x :data:`TENSOR_MAP_BYTES` uint8 to
    copy to device memory: group g's map (``cuTensorMapEncodeTiled`` of cuda.bindings with the
    arguments of :func:`each_group_encodings`, the raw ``CUtensorMap.opaque`` words; rank 2, dims
    (cols, rows) of its matrix at ``address`` + its element offset, the box, swizzle, promotion and
    fill of ``tm``) at row g, zeros for a group that needs none. Needs the driver (not the GPU's
    memory: encoding is host code).

    Raises:
        ConfigError: a TMA rule is broken (see :func:`check`), or the driver refused a group's map.
    """
    import numpy as np
    from cuda.bindings import driver
    groups = group_matrices(tm, problem)
    calls = each_group_encodings(tm, problem, address)
    out = np.zeros((len(groups), TENSOR_MAP_BYTES), dtype=np.uint8)
    for g, args in calls:
        err, tmap = driver.cuTensorMapEncodeTiled(*args)
        if err != driver.CUresult.CUDA_SUCCESS:
            rows, cols, _ = groups[g]
            raise ConfigError("kernel", f"TMA tensor map over {tm.matrix} of group {g} ({rows} x {cols}): the driver "
                              f"refused it: {err}")
        out[g] = np.array([int(w) for w in tmap.opaque], dtype=np.uint64).view(np.uint8)
    return out
