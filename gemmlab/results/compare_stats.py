"""Statistics of ``gemmlab-compare``: the bootstrap ratio of medians and the verdict rule.

This module owns the numbers: :func:`bootstrap_ratio` (the ratio ``median(after) /
median(before)`` and its nonparametric bootstrap percentile interval, Efron & Tibshirani, *An
Introduction to the Bootstrap*, Chapman & Hall, 1993, ch. 13), :func:`verdict` (``SLOW``,
``FAST``, ``SAME``, ``UNSURE`` for an interval and a threshold) and :func:`beyond_threshold`.
Matching records into pairs is :mod:`gemmlab.results.compare_match`; rendering :mod:`gemmlab.results.compare_render`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

FAST, SAME, SLOW, UNSURE = "FAST", "SAME", "SLOW", "UNSURE"


def _bootstrap_medians(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` resamples of ``x`` with replacement (in chunks of bounded size)."""
    n = x.size
    out = np.empty(resamples)
    chunk = max(1, 2_000_000 // n)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = np.median(x[idx], axis=1)
    return out


def bootstrap_ratio(before: Sequence[float], after: Sequence[float], confidence: float = 0.95,
                    resamples: int = 2000, rng: np.random.Generator | int | None = None
                    ) -> tuple[float, float, float]:
    """Ratio of medians ``median(after) / median(before)`` and its bootstrap percentile interval.

    Each sample set is resampled with replacement to its own size, independently, ``resamples``
    times; the interval is the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of
    the resampled ratios (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13:
    the percentile interval).

    Args:
        before, after: positive samples (e.g. milliseconds per launch); at least one each.
        confidence: two-sided coverage, in (0, 1).
        resamples: bootstrap replications (>= 1; use thousands).
        rng: a ``numpy.random.Generator``, or a seed for ``numpy.random.default_rng``.

    Returns:
        ``(ratio, low, high)``.

    Raises:
        ValueError: empty or non-finite samples, a non-positive median, bad confidence/resamples.
    """
    b = np.asarray(before, dtype=np.float64).ravel()
    a = np.asarray(after, dtype=np.float64).ravel()
    if b.size == 0 or a.size == 0:
        raise ValueError("bootstrap_ratio needs at least one sample on each side")
    if not (np.isfinite(b).all() and np.isfinite(a).all()):
        raise ValueError("bootstrap_ratio: samples must be finite")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if int(resamples) < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    med_b = float(np.median(b))
    if med_b <= 0:
        raise ValueError(f"median of BEFORE samples is {med_b}, must be positive")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    boot_b = _bootstrap_medians(b, int(resamples), rng)
    boot_a = _bootstrap_medians(a, int(resamples), rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = boot_a / boot_b
    alpha = 1.0 - confidence
    low, high = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    return float(np.median(a)) / med_b, float(low), float(high)


def verdict(low: float, high: float, threshold: float) -> str:
    """Verdict for a ratio interval ``[low, high]`` (AFTER / BEFORE) and a relative threshold.

    ``SLOW`` if ``low > 1``; ``FAST`` if ``high < 1``; ``SAME`` if ``1 - threshold <= low`` and
    ``high <= 1 + threshold`` (the interval contains 1 and any change is within the threshold);
    ``UNSURE`` otherwise (contains 1, but too wide to rule out a change beyond the threshold).
    """
    if low > 1.0:
        return SLOW
    if high < 1.0:
        return FAST
    if 1.0 - threshold <= low and high <= 1.0 + threshold:
        return SAME
    return UNSURE


def beyond_threshold(low: float, high: float, threshold: float) -> bool:
    """True when the whole interval lies beyond the threshold: ``low > 1 + threshold`` (SLOW
    beyond threshold: the regression gate) or ``high < 1 - threshold`` (FAST beyond threshold)."""
    return low > 1.0 + threshold or high < 1.0 - threshold
