"""Host passes over large arrays, split over threads: float64 copies, absolute values and byte
equality of the inputs and outputs a point verifies (issue 41: the held-out benchmark's per-point
host time).

numpy runs ``astype``, ``abs`` and ``==`` on one core; on the GPU machine's 16 cores a decode
point's B (up to ~1 GB of float32 at 2x151936x1536 or 1x24000x11000) took seconds in such passes.
Here the same numpy calls run on contiguous slices in a thread pool (numpy releases the GIL in
these loops), each element computed exactly as the one-call form computes it: the results are
bitwise those of ``x.astype(np.float64)``, ``np.abs(x)`` and ``np.array_equal`` of the bytes, on
any number of cores. Arrays under :data:`THREADED_MIN` elements take the one call.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Callable

import numpy as np

#: elements from which a pass is split over threads (below: one numpy call, no pool)
THREADED_MIN = 1 << 21
#: at most this many threads (the GPU machine has 16 cores)
MAX_THREADS = 16
#: elements per slice of a threaded pass (cache-friendly; many slices balance uneven cores)
SLICE = 1 << 20


def threads() -> int:
    """Threads a pass uses: the cores this process may run on, at most :data:`MAX_THREADS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cores))


def _slices(n: int) -> list[slice]:
    return [slice(i, min(i + SLICE, n)) for i in range(0, n, SLICE)]


def _each(n: int, fn: Callable[[slice], object]) -> list:
    """``fn(s)`` for the slices of ``range(n)``, in a pool of :func:`threads` threads; results in order."""
    parts = _slices(n)
    workers = min(threads(), len(parts))
    if workers <= 1:
        return [fn(s) for s in parts]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gemmlab-hostpass") as pool:
        return list(pool.map(fn, parts))


def each_of(items, fn: Callable, one_blas: bool = False) -> list:
    """``[fn(item) for item in items]``, the calls spread over a pool of :func:`threads` threads
    (one call: no pool); results in ``items``' order. For work on disjoint parts of arrays whose
    numpy calls release the GIL (tiles of a product, blocks of a draw); an exception in any call
    is raised here. ``one_blas``: the calls' BLAS products run on one thread (threadpoolctl's
    ``threadpool_limits(1, user_api="blas")`` around the whole pool, the previous count put back
    after it; numpy's OpenBLAS counts its threads per process), for many small products made in
    threads of their own: OpenBLAS splits a 64 x 32 x 512 product over its threads and waits for
    them at every call (0.60 s against 0.057 s for 512 such products on a loaded 2-core host)."""
    items = list(items)
    workers = min(threads(), len(items))
    if one_blas:
        from threadpoolctl import threadpool_limits  # only where products are made (not at start-up)
    with threadpool_limits(limits=1, user_api="blas") if one_blas else nullcontext():
        if workers <= 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gemmlab-hostpass") as pool:
            return list(pool.map(fn, items))


def _flat(x: np.ndarray) -> np.ndarray | None:
    """A 1-D view of ``x``'s elements in C order, or None when ``x`` is not C-contiguous."""
    return x.reshape(-1) if x.flags.c_contiguous else None


def float64(x: np.ndarray) -> np.ndarray:
    """``x.astype(np.float64)`` (a new C-contiguous array of ``x``'s shape, every element converted
    exactly as numpy's cast does), in threads above :data:`THREADED_MIN` elements.

    Args:
        x: any real array (float32, bfloat16, float16, float64, ...); not C-contiguous: one call.
    """
    x = np.asarray(x)
    src = _flat(x)
    if x.size < THREADED_MIN or src is None:
        return x.astype(np.float64)
    out = np.empty(x.shape, dtype=np.float64)
    dst = out.reshape(-1)

    def part(s: slice) -> None:
        dst[s] = src[s]

    _each(src.size, part)
    return out


def as_float64(x: np.ndarray) -> np.ndarray:
    """``x`` itself when it is float64 already (no copy: an fp8 point's dequantised B is ~1 GB), else
    :func:`float64`; for readers only (the caller must not write the result)."""
    x = np.asarray(x)
    return x if x.dtype == np.float64 else float64(x)


def absolute(x: np.ndarray) -> np.ndarray:
    """``np.abs(x)`` (a new array of ``x``'s dtype and shape), in threads above :data:`THREADED_MIN`
    elements."""
    x = np.asarray(x)
    src = _flat(x)
    if x.size < THREADED_MIN or src is None:
        return np.abs(x)
    out = np.empty(x.shape, dtype=x.dtype)
    dst = out.reshape(-1)

    def part(s: slice) -> None:
        np.abs(src[s], out=dst[s])

    _each(src.size, part)
    return out


def same_bytes(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether ``x`` and ``y`` hold the same bytes (``np.array_equal`` of their uint8 views: equal
    sizes and every byte equal; a NaN equals itself bit for bit), in threads above
    :data:`THREADED_MIN` bytes, without a whole-array temporary."""
    a = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    b = np.ascontiguousarray(y).reshape(-1).view(np.uint8)
    if a.size != b.size:
        return False
    if a.size < THREADED_MIN:
        return bool(np.array_equal(a, b))
    return all(_each(a.size, lambda s: bool(np.array_equal(a[s], b[s]))))
