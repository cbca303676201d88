"""Stage 4: verify a kernel's output against a float64 product of the same float32 inputs.

Method (seed 000): the reference multiplies the already-rounded float32 inputs in float64 on the
CPU, separating input rounding from device accumulation error; every element must satisfy
``|C - ref| <= atol + rtol * |ref|`` (the rule of ``numpy.testing.assert_allclose``). NaN never
passes, so an output the kernel never wrote (NaN-filled beforehand) is caught and counted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from gemmlab.config import VerifyOptions

FIRST_MISMATCHES = 8


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float64 product ``A @ B`` of float32 arrays (M, K) and (K, N); returns (M, N) float64."""
    return a.astype(np.float64) @ b.astype(np.float64)


@dataclass
class Verdict:
    """Outcome of :func:`check`.

    Attributes:
        passed: every element within tolerance (and none NaN/inf).
        max_abs_error: max |C - ref| over finite outputs (inf if none is finite).
        max_rel_error: max |C - ref| / |ref| over finite elements with ref != 0.
        mismatches: number of elements failing the tolerance (NaN and inf included).
        nan_outputs: number of NaN outputs (most likely never written by the kernel).
        first_mismatches: up to 8 ``[row, col, got, expected]`` in row-major order.
        atol, rtol, method: the rule applied.
    """

    passed: bool
    max_abs_error: float
    max_rel_error: float
    mismatches: int
    nan_outputs: int
    atol: float
    rtol: float
    first_mismatches: list = field(default_factory=list)
    method: str = "full float64 reference, every element"

    def record(self) -> dict:
        """JSON-ready fields for ``result.json`` (non-finite floats as strings)."""
        out = asdict(self)
        for key in ("max_abs_error", "max_rel_error"):
            if not np.isfinite(out[key]):
                out[key] = str(out[key])
        return out

    def summary(self) -> str:
        """One line: pass/fail, max errors, mismatches and NaN count."""
        word = "PASS" if self.passed else "FAIL"
        text = (f"{word}: max abs err {self.max_abs_error:.3g}, max rel err {self.max_rel_error:.3g}, "
                f"{self.mismatches} mismatches, {self.nan_outputs} NaN outputs (atol={self.atol:g}, rtol={self.rtol:g})")
        if self.first_mismatches:
            r, c, got, exp = self.first_mismatches[0]
            text += f"; first at (row {r}, col {c}): got {got}, expected {exp}"
        return text


def check(c: np.ndarray, ref: np.ndarray, options: VerifyOptions) -> Verdict:
    """Compare the kernel output ``c`` (M, N) float32 with ``ref`` (M, N) float64.

    Raises:
        ValueError: the shapes differ.
    """
    if c.shape != ref.shape:
        raise ValueError(f"output shape {c.shape} != reference shape {ref.shape}")
    c64 = c.astype(np.float64)
    finite = np.isfinite(c64)
    err = np.abs(c64 - ref)
    bad = ~finite | (err > options.atol + options.rtol * np.abs(ref))
    nonzero = finite & (ref != 0)
    max_abs = float(err[finite].max()) if finite.any() else float("inf")
    max_rel = float((err[nonzero] / np.abs(ref[nonzero])).max()) if nonzero.any() else 0.0
    rows, cols = np.nonzero(bad)
    first = [[int(r), int(k), float(c[r, k]) if np.isfinite(c[r, k]) else str(c[r, k]), float(ref[r, k])]
             for r, k in zip(rows[:FIRST_MISMATCHES], cols[:FIRST_MISMATCHES])]
    return Verdict(passed=not bad.any(), max_abs_error=max_abs, max_rel_error=max_rel,
                   mismatches=int(bad.sum()), nan_outputs=int(np.isnan(c).sum()),
                   atol=options.atol, rtol=options.rtol, first_mismatches=first)
