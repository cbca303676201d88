"""Stage 2: the experiment's inputs, drawn on the host from a recorded seed.

float32 A (M x K) and B (K x N), row-major, from ``numpy.random.default_rng(seed)``. The same
seed gives the same matrices on every machine (numpy's PCG64 stream). Never zeros (seed 000).
"""

from __future__ import annotations

import numpy as np

from dataclasses import dataclass

from gemmlab.hookspecs import Shape

INT_RANGE = 4
MAX_EXACT_K = 2**19  # 16 * K < 2^24 keeps every partial sum exact in float32


@dataclass(frozen=True)
class InputOptions:
    """Inputs A, B drawn as float32 from ``distribution`` (normal | uniform | integers) with a
    numpy ``default_rng(seed)``."""

    seed: int = 0
    distribution: str = "normal"


def make_inputs(shape: Shape, options: InputOptions) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(A, B)``: float32 arrays of shapes (M, K) and (K, N), C-contiguous.

    ``normal``: N(0, 1) samples drawn in float64 and rounded to float32 (seed 000's recipe).
    ``uniform``: U[-1, 1). ``integers``: uniform integers in [-4, -1] ∪ [1, 4] (never zero); with K <= 2^19 every product
    and partial sum is an integer below 2^24, so float32 GEMM is exact and verification can
    demand equality.

    Raises:
        ValueError: an unknown distribution (config validation rejects it earlier).
    """
    rng = np.random.default_rng(options.seed)
    sizes = ((shape.M, shape.K), (shape.K, shape.N))
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
