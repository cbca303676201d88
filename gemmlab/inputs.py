"""Stage 2: the experiment's inputs, drawn on the host from a recorded seed.

float32 A (M x K) and B (K x N), row-major, from ``numpy.random.default_rng(seed)``. The same
seed gives the same matrices on every machine (numpy's PCG64 stream). Never zeros (seed 000).
"""

from __future__ import annotations

import numpy as np

from gemmlab.config import InputOptions
from gemmlab.hookspecs import Shape


def make_inputs(shape: Shape, options: InputOptions) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(A, B)``: float32 arrays of shapes (M, K) and (K, N), C-contiguous.

    ``normal``: N(0, 1) samples drawn in float64 and rounded to float32 (seed 000's recipe).

    Raises:
        ValueError: an unknown distribution (config validation rejects it earlier).
    """
    rng = np.random.default_rng(options.seed)
    if options.distribution == "normal":
        a = rng.standard_normal((shape.M, shape.K)).astype(np.float32)
        b = rng.standard_normal((shape.K, shape.N)).astype(np.float32)
    else:
        raise ValueError(f"inputs.distribution: unknown {options.distribution!r}")
    return a, b
