"""gemmlab.verify on synthetic arrays: the acceptance rule |C - ref| <= atol + rtol*|ref|, NaN/inf
handling, mismatch reporting and the JSON record."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gemmlab.config import VerifyOptions
from gemmlab.verify import FIRST_MISMATCHES, Verdict, check, reference

# Powers of two: exactly representable in float32 and float64, and their sums below are exact.
ATOL = 2.0**-12
RTOL = 2.0**-12
OPTS = VerifyOptions(atol=ATOL, rtol=RTOL)


def ref_and_c(m=4, n=5, seed=1):
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((m, n)).astype(np.float32)
    return c, c.astype(np.float64)


# --- passing cases -------------------------------------------------------------------------------

def test_exact_match_passes():
    c, ref = ref_and_c()
    v = check(c, ref, OPTS)
    assert v.passed is True
    assert v.mismatches == 0
    assert v.nan_outputs == 0
    assert v.max_abs_error == 0.0
    assert v.max_rel_error == 0.0
    assert v.first_mismatches == []
    assert (v.atol, v.rtol) == (ATOL, RTOL)


def test_real_product_passes_default_tolerance():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((33, 17)).astype(np.float32)
    b = rng.standard_normal((17, 65)).astype(np.float32)
    c = (a @ b).astype(np.float32)  # float32 accumulation, as a kernel would
    v = check(c, reference(a, b), VerifyOptions())
    assert v.passed, v.summary()
    assert 0 < v.max_abs_error < 3e-4


# --- failures and their coordinates --------------------------------------------------------------

def test_nan_left_behind_fails_with_coordinates():
    c, ref = ref_and_c()
    c[2, 3] = np.nan
    v = check(c, ref, OPTS)
    assert v.passed is False
    assert v.nan_outputs == 1
    assert v.mismatches == 1
    assert len(v.first_mismatches) == 1
    row, col, got, expected = v.first_mismatches[0]
    assert (row, col) == (2, 3)
    assert got == "nan"
    assert expected == ref[2, 3]
    assert v.max_abs_error == 0.0  # over finite outputs only
    assert "1 NaN" in v.summary() and "row 2, col 3" in v.summary()


def test_all_nan_output():
    c, ref = ref_and_c(3, 3)
    c[:] = np.nan
    v = check(c, ref, OPTS)
    assert not v.passed
    assert v.nan_outputs == 9 and v.mismatches == 9
    assert v.max_abs_error == float("inf")
    assert [m[:2] for m in v.first_mismatches] == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [2, 0], [2, 1]]


def test_one_wrong_element_fails_with_coordinates():
    c, ref = ref_and_c(6, 7)
    c[4, 1] += np.float32(0.5)
    v = check(c, ref, OPTS)
    assert not v.passed
    assert v.mismatches == 1
    assert v.nan_outputs == 0
    row, col, got, expected = v.first_mismatches[0]
    assert (row, col) == (4, 1)
    assert got == float(c[4, 1])
    assert expected == ref[4, 1]
    assert v.max_abs_error == pytest.approx(0.5, abs=1e-6)


def test_mismatches_row_major_and_capped():
    c, ref = ref_and_c(5, 5)
    bad = [(4, 4), (0, 3), (2, 0), (0, 1), (3, 3), (1, 1), (1, 4), (2, 2), (3, 0), (4, 0)]
    for r, k in bad:
        c[r, k] += 1
    v = check(c, ref, OPTS)
    assert v.mismatches == 10
    assert len(v.first_mismatches) == FIRST_MISMATCHES == 8
    assert [m[:2] for m in v.first_mismatches] == [list(p) for p in sorted(bad)][:8]


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_inf_fails(value):
    c, ref = ref_and_c()
    c[1, 2] = value
    v = check(c, ref, OPTS)
    assert not v.passed
    assert v.mismatches == 1
    assert v.nan_outputs == 0
    assert v.first_mismatches[0][:3] == [1, 2, str(np.float32(value))]
    assert np.isfinite(v.max_abs_error)  # the finite outputs are exact


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape"):
        check(np.zeros((2, 3), np.float32), np.zeros((3, 2)), OPTS)


# --- tolerance edges -----------------------------------------------------------------------------

@pytest.mark.parametrize("expected", [1.0, -1.0, 2.0, 0.5, 1024.0])
def test_error_exactly_at_tolerance_passes(expected):
    tol = ATOL + RTOL * abs(expected)          # exact in float64 (sum of powers of two)
    got = np.float32(expected + np.sign(expected) * tol)
    assert float(got) - expected == np.sign(expected) * tol  # exactly representable in float32
    c = np.array([[got]], dtype=np.float32)
    ref = np.array([[expected]])
    v = check(c, ref, OPTS)
    assert v.passed, v.summary()
    assert v.max_abs_error == tol


@pytest.mark.parametrize("expected", [1.0, -1.0, 2.0, 0.5, 1024.0])
def test_error_one_ulp_over_tolerance_fails(expected):
    tol = ATOL + RTOL * abs(expected)
    at_edge = np.float32(expected + np.sign(expected) * tol)
    over = np.nextafter(at_edge, np.float32(np.sign(expected) * np.inf))  # one float32 ulp further
    assert abs(float(over) - expected) > tol
    v = check(np.array([[over]], dtype=np.float32), np.array([[expected]]), OPTS)
    assert not v.passed
    assert v.mismatches == 1
    assert v.first_mismatches[0][:2] == [0, 0]


def test_error_below_atol_passes_when_reference_is_zero():
    c = np.array([[np.float32(ATOL), np.float32(-ATOL)]], dtype=np.float32)
    v = check(c, np.zeros((1, 2)), OPTS)
    assert v.passed
    assert v.max_rel_error == 0.0  # ref == 0 is left out of the relative error
    c2 = np.array([[np.nextafter(np.float32(ATOL), np.float32(1))]], dtype=np.float32)
    assert not check(c2, np.zeros((1, 1)), OPTS).passed


def test_rtol_only():
    opts = VerifyOptions(atol=0.0, rtol=2.0**-10)
    ref = np.array([[4.0]])
    assert check(np.array([[4.0 + 4 * 2.0**-10]], np.float32), ref, opts).passed
    assert not check(np.array([[np.nextafter(np.float32(4.0 + 4 * 2.0**-10), np.float32(8))]], np.float32),
                     ref, opts).passed


def test_relative_error_value():
    c = np.array([[1.5, 4.0]], np.float32)
    ref = np.array([[1.0, 4.0]])
    v = check(c, ref, VerifyOptions(atol=1.0, rtol=0.0))
    assert v.passed  # 0.5 <= atol
    assert v.max_abs_error == 0.5
    assert v.max_rel_error == 0.5


def test_zero_tolerance_demands_exact():
    c, ref = ref_and_c()
    assert check(c, ref, VerifyOptions(0.0, 0.0)).passed
    c[0, 0] = np.nextafter(c[0, 0], np.float32(np.inf))
    v = check(c, ref, VerifyOptions(0.0, 0.0))
    assert not v.passed and v.mismatches == 1


# --- record --------------------------------------------------------------------------------------

def test_record_is_json_serialisable_strict():
    c, ref = ref_and_c()
    c[0, 1] = np.nan
    c[3, 4] = np.inf
    c[2, 2] += 1
    record = check(c, ref, OPTS).record()
    text = json.dumps(record, allow_nan=False)
    back = json.loads(text)
    assert back["passed"] is False
    assert back["mismatches"] == 3
    assert back["nan_outputs"] == 1
    assert [m[:2] for m in back["first_mismatches"]] == [[0, 1], [2, 2], [3, 4]]
    assert back["first_mismatches"][0][2] == "nan" and back["first_mismatches"][2][2] == "inf"
    assert back["atol"] == ATOL and back["rtol"] == RTOL
    assert back["method"] == "full float64 reference, every element"
    assert set(back) == {"passed", "max_abs_error", "max_rel_error", "mismatches", "nan_outputs", "atol", "rtol",
                         "first_mismatches", "method"}


def test_record_with_no_finite_output_is_json_serialisable():
    c = np.full((2, 2), np.nan, np.float32)
    record = check(c, np.ones((2, 2)), OPTS).record()
    back = json.loads(json.dumps(record, allow_nan=False))
    assert back["max_abs_error"] == "inf"
    assert back["nan_outputs"] == 4


def test_record_types_are_plain_python():
    c, ref = ref_and_c()
    c[1, 1] += 1
    record = check(c, ref, OPTS).record()
    assert type(record["passed"]) is bool
    assert type(record["mismatches"]) is int and type(record["nan_outputs"]) is int
    assert type(record["max_abs_error"]) is float
    row, col, got, expected = record["first_mismatches"][0]
    assert (type(row), type(col), type(got), type(expected)) == (int, int, float, float)


def test_verdict_summary_words():
    v = Verdict(passed=True, max_abs_error=1e-5, max_rel_error=2e-5, mismatches=0, nan_outputs=0, atol=ATOL, rtol=RTOL)
    assert v.summary().startswith("PASS: max abs err 1e-05")


# --- reference -----------------------------------------------------------------------------------

def test_reference_is_float64_product():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((7, 5)).astype(np.float32)
    b = rng.standard_normal((5, 9)).astype(np.float32)
    ref = reference(a, b)
    assert ref.dtype == np.float64
    assert ref.shape == (7, 9)
    np.testing.assert_array_equal(ref, a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(ref, a @ b, rtol=1e-5, atol=1e-5)


def test_reference_accumulates_in_float64():
    # in float32, 1e8 + 1 rounds back to 1e8 (ulp 8) and the sum is 0; in float64 it is exactly 1
    a = np.array([[1e8, 1.0, -1e8]], dtype=np.float32)
    b = np.ones((3, 1), dtype=np.float32)
    assert reference(a, b)[0, 0] == 1.0


def test_reference_exact_on_small_integers():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(reference(a, b), [[20, 23, 26, 29], [56, 68, 80, 92]])
