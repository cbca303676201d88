"""Group sizes of a grouped GEMM (issue 44): the named generators of ``grouped.generator``, for
``rows`` = sum_g M_g routed rows over G experts:

- ``uniform``: balanced routing, every expert gets rows // G rows and the first rows % G one more.
- ``zipf``: skewed routing: each row goes to expert e with probability proportional to
  rank(e)^-s (``grouped.exponent`` s > 0, Zipf's law), the ranks a random permutation of the experts,
  drawn with ``numpy.random.default_rng(grouped.seed)`` (the counts are one multinomial draw), so the
  heaviest expert is not always group 0. Small s is close to uniform random routing; s around 1-1.5
  concentrates a large share of the rows on a few experts (a router without load balancing).
- ``all_but_one_empty``: every row to one expert (``grouped.seed`` % G), the others empty.

The inputs of every group: :func:`gemmlab.stages.inputs.make_grouped_inputs`; the verification of every
group: :func:`gemmlab.stages.verify.check_grouped`.
"""

from __future__ import annotations

import numpy as np

#: ``grouped.generator`` values
GENERATORS = ("uniform", "zipf", "all_but_one_empty")


def group_sizes(generator: str, rows: int, G: int, seed: int = 0, exponent: float = 1.2) -> tuple[int, ...]:
    """M_g for G experts receiving ``rows`` routed rows in all (module docstring).

    Args:
        generator: one of :data:`GENERATORS`.
        rows: sum of M_g (>= 0). G: experts (>= 1). seed: the routing seed (zipf, all_but_one_empty).
        exponent: zipf's s (> 0 in the config; 0 here gives uniform random routing).

    Returns:
        G ints >= 0 summing to ``rows``.

    Raises:
        ValueError: an unknown generator or G < 1.
    """
    if G < 1:
        raise ValueError(f"G must be >= 1, got {G}")
    if generator == "uniform":
        base, extra = divmod(rows, G)
        return tuple(base + (1 if g < extra else 0) for g in range(G))
    if generator == "zipf":
        rng = np.random.default_rng(seed)
        ranks = rng.permutation(G) + 1
        p = ranks.astype(np.float64) ** -float(exponent)
        return tuple(int(x) for x in rng.multinomial(rows, p / p.sum()))
    if generator == "all_but_one_empty":
        return tuple(rows if g == seed % G else 0 for g in range(G))
    raise ValueError(f"generator must be one of {', '.join(GENERATORS)}, got {generator!r}")
