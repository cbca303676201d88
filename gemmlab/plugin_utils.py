"""Plain helpers for kernel plugins: ceil division, parameter checks and the numpy index model
used by :meth:`gemmlab.hookspecs.KernelSpec.ownership`. No CUDA here."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from gemmlab.hookspecs import ParamError


def cdiv(a: int, b: int) -> int:
    """Ceiling of ``a / b`` for positive ints (number of tiles of size ``b`` covering ``a``)."""
    return -(-a // b)


def count_hits(shape: tuple[int, int], rows, cols, mask=None) -> np.ndarray:
    """Count how often each element of an array of ``shape`` is hit by the index arrays
    ``rows``/``cols`` (broadcast together), keeping only entries where ``mask`` is true.

    Returns an int64 array of ``shape``. Raises IndexError if an unmasked index falls outside
    ``shape`` (an out-of-bounds store or staging write in the modelled kernel).
    """
    rows, cols = np.broadcast_arrays(np.asarray(rows), np.asarray(cols))
    if mask is not None:
        mask = np.broadcast_to(mask, rows.shape)
        rows, cols = rows[mask], cols[mask]
    rows, cols = rows.ravel(), cols.ravel()
    if rows.size and (rows.min() < 0 or cols.min() < 0 or rows.max() >= shape[0] or cols.max() >= shape[1]):
        raise IndexError(f"index outside {shape}: rows {rows.min()}..{rows.max()}, cols {cols.min()}..{cols.max()}")
    hits = np.zeros(shape, dtype=np.int64)
    np.add.at(hits, (rows, cols), 1)
    return hits


def require(condition: bool, field: str, message: str) -> None:
    """Raise :class:`ParamError` ``(field, message)`` unless ``condition`` holds."""
    if not condition:
        raise ParamError(field, message)


def require_divides(params: Mapping[str, int], small: str, large: str, rule: str) -> None:
    """Require ``params[large] % params[small] == 0``, naming ``rule`` in the error."""
    require(params[large] % params[small] == 0, f"kernel.{small}",
            f"{rule}: {large}={params[large]} must be a multiple of {small}={params[small]}")
