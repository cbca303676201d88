"""Stage 2: the experiment's inputs, drawn on the host from a recorded seed.

float32 A (M x K) and B (K x N), row-major, from ``numpy.random.default_rng(seed)``. The same
seed gives the same matrices on every machine (numpy's PCG64 stream). Never zeros (the rule of
seed 000, the real-device naive vs register-tiled GEMM lab gemmlab grew from). For a
:class:`~gemmlab.contract.hookspecs.Problem` they are then rounded once to the precision's storage type
(bf16 through ml_dtypes, fp16 through numpy) and stored in the problem's layout
(:func:`make_problem_inputs`); the reference multiplies exactly the rounded values.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from gemmlab.contract.hookspecs import AB_DTYPES, Problem, Shape

INT_RANGE = 4
MAX_EXACT_K = 2**19  # 16 * K < 2^24 keeps every partial sum exact in float32
FAST_CHUNKS = 16  # row blocks of a ``fast`` draw, each its own child seed (the values never depend on the cores)
FAST_THREADED_MIN = 1 << 20  # elements from which a ``fast`` draw fills its blocks in threads


@dataclass(frozen=True)
class InputOptions:
    """Inputs A, B drawn as float32 from ``distribution`` (normal | uniform | integers) with a
    numpy ``default_rng(seed)``."""

    seed: int = 0
    distribution: str = "normal"


def make_inputs(shape: Shape, options: InputOptions, fast: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(A, B)``: float32 arrays of shapes (M, K) and (K, N), C-contiguous.

    ``normal``: N(0, 1) samples drawn in float64 and rounded to float32 (seed 000's recipe).
    ``uniform``: U[-1, 1). ``integers``: uniform integers in [-4, -1] ∪ [1, 4] (never zero); with K <= 2^19 every product
    and partial sum is an integer below 2^24, so float32 GEMM is exact and verification can
    demand equality.

    ``fast``: draw normal and uniform values in float32 directly (numpy's float32 ziggurat and
    ``random(dtype=float32)``: the same distributions, about 4x faster, other values for the same
    seed; in threads, :func:`_draw_fast`), for the fresh inputs of the after-timing verification.

    Raises:
        ValueError: an unknown distribution (config validation rejects it earlier).
    """
    sizes = ((shape.M, shape.K), (shape.K, shape.N))
    if fast and options.distribution in ("normal", "uniform"):
        return tuple(_draw_fast(s, options.seed, i, options.distribution) for i, s in enumerate(sizes))
    rng = np.random.default_rng(options.seed)
    if options.distribution == "normal":
        a, b = (rng.standard_normal(s).astype(np.float32) for s in sizes)
    elif options.distribution == "uniform":
        a, b = (rng.uniform(-1.0, 1.0, s).astype(np.float32) for s in sizes)
    elif options.distribution == "integers":
        # nonzero magnitudes 1..4 with random signs: never an all-zero matrix, even at 1x1x1
        a, b = ((rng.integers(1, INT_RANGE + 1, s) * rng.choice([-1, 1], s)).astype(np.float32) for s in sizes)
    else:
        raise ValueError(f"inputs.distribution: unknown {options.distribution!r}")
    return a, b


def _draw_fast(size: tuple[int, int], seed: int, which: int, distribution: str) -> np.ndarray:
    """float32 N(0, 1) or U[-1, 1) draws of ``size``, in :data:`FAST_CHUNKS` row blocks, each from
    its own child of ``SeedSequence((seed, which))`` and filled in place by a thread (numpy's
    "Multithreaded generation" recipe: the fill releases the GIL); the values depend on the seed
    alone, not on the machine's cores."""
    out = np.empty(size, dtype=np.float32)
    flat = out.reshape(-1)
    bounds = np.linspace(0, flat.size, FAST_CHUNKS + 1).astype(np.int64)
    children = np.random.SeedSequence((seed, which)).spawn(FAST_CHUNKS)

    def fill(i: int) -> None:
        rng, part = np.random.default_rng(children[i]), flat[bounds[i]:bounds[i + 1]]
        if distribution == "normal":
            rng.standard_normal(dtype=np.float32, out=part)
        else:
            rng.random(dtype=np.float32, out=part)
            part *= 2
            part -= 1

    if flat.size < FAST_THREADED_MIN:
        for i in range(FAST_CHUNKS):
            fill(i)
    else:
        with ThreadPoolExecutor(max_workers=min(FAST_CHUNKS, os.cpu_count() or 1)) as pool:
            list(pool.map(fill, range(FAST_CHUNKS)))
    return out


def storage_dtype(precision: str) -> np.dtype:
    """numpy dtype of A and B for ``precision``: float32 (fp32, tf32), ml_dtypes.bfloat16 (bf16),
    float16 (fp16).

    Raises:
        UnavailableError: bf16 without the ml_dtypes package.
    """
    name = AB_DTYPES[precision]
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            from gemmlab.errors import UnavailableError
            raise UnavailableError(
                "precision=bf16 needs ml_dtypes for host-side bfloat16: pip install ml_dtypes") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass(frozen=True)
class ProblemInputs:
    """The inputs of one problem.

    Attributes:
        a, b: logical A (M x K) and B (K x N) as float32 arrays holding exactly the values the
            device gets (already rounded to the storage type): what the float64 reference multiplies.
        a_stored, b_stored: the device images: storage dtype, C-contiguous, in the problem's
            layout (a column-major A is stored as its transpose, K x M).
    """

    a: np.ndarray
    b: np.ndarray
    a_stored: np.ndarray
    b_stored: np.ndarray


def make_problem_inputs(problem: Problem, options: InputOptions, fast: bool = False) -> ProblemInputs:
    """Draw A and B as :func:`make_inputs` does, round them once to the precision's storage type
    (round-to-nearest-even, ml_dtypes/numpy casts) and lay them out as the problem says
    (``fast``: :func:`make_inputs`' float32 draws).

    fp32/tf32 store float32 unchanged (the TF32 tensor core rounds its inputs itself; verification
    allows for it), so ``precision=fp32`` row/row gives exactly :func:`make_inputs`' arrays.
    """
    a32, b32 = make_inputs(problem.shape, options, fast=fast)
    dtype = storage_dtype(problem.precision)
    a_st, b_st = a32.astype(dtype), b32.astype(dtype)
    a, b = a_st.astype(np.float32), b_st.astype(np.float32)
    a_stored = np.ascontiguousarray(a_st if problem.layout_a == "row" else a_st.T)
    b_stored = np.ascontiguousarray(b_st if problem.layout_b == "row" else b_st.T)
    return ProblemInputs(a=a, b=b, a_stored=a_stored, b_stored=b_stored)


def logical(stored: np.ndarray, layout: str) -> np.ndarray:
    """The logical matrix of a stored image (its transpose for ``col``), as float32."""
    arr = stored.astype(np.float32)
    return arr if layout == "row" else arr.T
