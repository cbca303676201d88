"""TMA tensor-map rules (owned here, in the contract layer, so plugins may state them): what a 2-D
tiled map (:class:`~gemmlab.contract.hookspecs.TensorMap`) must satisfy, checked on the CPU before
anything compiles. The map itself is built on the GPU by :mod:`gemmlab.gpu.tma`.

Rules (CUDA Driver API reference, ``cuTensorMapEncodeTiled``): the global
base address 16-byte aligned; the global row stride (bytes between rows of the matrix as stored)
a multiple of 16 bytes and below 2^40; each global dimension 1..2^32; each box dimension
1..256; the inner box dimension times the element size a multiple of 16 bytes; with a swizzle,
the inner box bytes at most the swizzle span (32, 64 or 128 bytes).
"""

from __future__ import annotations

from gemmlab.errors import ConfigError
from gemmlab.contract.hookspecs import L2_PROMOTIONS, OOB_FILLS, SWIZZLES, Problem, TensorMap

MAX_BOX = 256


def element_bytes(problem: Problem, matrix: str) -> int:
    """Bytes per element of ``matrix``: the precision's storage type for A and B, 4 for C."""
    return 4 if matrix == "C" else problem.ab_bytes


def element_dtype(problem: Problem, matrix: str) -> str:
    """Element type name of ``matrix`` (float32 | bfloat16 | float16)."""
    return "float32" if matrix == "C" else problem.ab_dtype


def check(tm: TensorMap, problem: Problem, address: int | None = None) -> dict:
    """Check ``tm`` against the TMA rules for ``problem``; return its description for the record.

    Raises:
        ConfigError: one line naming the rule: field ``shape`` when the problem's strides break
            it (another M, N or K would work), ``kernel`` when the plugin's box or swizzle does.
    """
    if not isinstance(tm, TensorMap) or tm.matrix not in ("A", "B", "C"):
        raise ConfigError("kernel", f"tensor map over {getattr(tm, 'matrix', tm)!r}: matrix must be A, B or C")
    what = f"TMA tensor map over {tm.matrix}"
    if tm.swizzle not in SWIZZLES:
        raise ConfigError("kernel", f"{what}: swizzle {tm.swizzle!r}; allowed: {', '.join(SWIZZLES)}")
    if tm.l2_promotion not in L2_PROMOTIONS:
        raise ConfigError("kernel", f"{what}: l2_promotion {tm.l2_promotion!r}; allowed: {', '.join(L2_PROMOTIONS)}")
    if tm.oob_fill not in OOB_FILLS:
        raise ConfigError("kernel", f"{what}: oob_fill {tm.oob_fill!r}; allowed: {', '.join(OOB_FILLS)}")
    box = tuple(tm.box)
    if len(box) != 2 or not all(isinstance(b, int) and not isinstance(b, bool) for b in box):
        raise ConfigError("kernel", f"{what}: box must be (rows, cols) of two ints, got {tm.box!r}")
    elem = element_bytes(problem, tm.matrix)
    rows, cols = problem.stored_shape(tm.matrix)
    inner = ("M" if (tm.matrix == "A" and problem.layout_a == "col")
             else "K" if tm.matrix == "A" or (tm.matrix == "B" and problem.layout_b == "col") else "N")
    stride = cols * elem
    if stride % 16:
        raise ConfigError("shape", f"{what}: the row stride {cols} x {elem} B = {stride} B is not a multiple of 16 "
                          f"bytes (TMA rule); {inner} must be a multiple of {16 // elem} for this kernel")
    if stride >= 2**40 or rows > 2**32 or cols > 2**32:
        raise ConfigError("shape", f"{what}: {rows} x {cols} exceeds TMA's global limits (dims <= 2^32, stride < 2^40 B)")
    for name, b in zip(("rows", "cols"), box):
        if not 1 <= b <= MAX_BOX:
            raise ConfigError("kernel", f"{what}: box {name} = {b}; each box dimension must be 1..{MAX_BOX} (TMA rule)")
    inner_bytes = box[1] * elem
    if inner_bytes % 16:
        raise ConfigError("kernel", f"{what}: inner box {box[1]} x {elem} B = {inner_bytes} B is not a multiple of "
                          "16 bytes (TMA rule)")
    span = SWIZZLES[tm.swizzle]
    if span is not None and inner_bytes > span:
        raise ConfigError("kernel", f"{what}: inner box {inner_bytes} B exceeds the {tm.swizzle} swizzle span "
                          f"({span} B; TMA rule): use a smaller inner box or a wider swizzle")
    if address is not None and address % 16:
        raise ConfigError("shape", f"{what}: base address {address:#x} is not 16-byte aligned (TMA rule)")
    return {"matrix": tm.matrix, "dtype": element_dtype(problem, tm.matrix), "global": [rows, cols],
            "row_stride_bytes": stride, "box": list(box), "swizzle": tm.swizzle, "l2_promotion": tm.l2_promotion,
            "oob_fill": tm.oob_fill}
