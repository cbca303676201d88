"""gemmlab.stages.verify on synthetic arrays: the ``fixed`` rule |C - ref| <= atol + rtol*|ref|, NaN/inf
handling, mismatch reporting and the JSON record; then the ``bound`` rule (K-scaled), the ``exact``
rule for integer inputs, the ``sampled`` method with Freivalds' check and TF32 precision.

``check`` computes the float64 reference itself from A and B. To put chosen reference values
under test, B is the identity (K = N) and A holds the intended reference (exact float32 values):
every reference element is then a single product a_ij * 1 plus exact zeros, so ref == A exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gemmlab.stages.config import VerifyOptions
from gemmlab.stages.verify import FIRST_MISMATCHES, Verdict, check, reference

# Powers of two: exactly representable in float32 and float64, and their sums below are exact.
ATOL = 2.0**-12
RTOL = 2.0**-12
OPTS = VerifyOptions(tolerance="fixed", atol=ATOL, rtol=RTOL)


def ref_and_c(m=4, n=5, seed=1):
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((m, n)).astype(np.float32)
    return c, c.astype(np.float64)


def check_against(c, ref, options=OPTS, **kwargs):
    """``check`` with reference values ``ref`` (exact in float32): A = ref, B = identity."""
    ref = np.asarray(ref, dtype=np.float64)
    a = ref.astype(np.float32)
    assert np.array_equal(a.astype(np.float64), ref), "reference values must be exact float32"
    b = np.eye(ref.shape[1], dtype=np.float32)
    np.testing.assert_array_equal(reference(a, b), ref)  # the premise of every synthetic test below
    return check(np.asarray(c, dtype=np.float32), a, b, options, **kwargs)


# --- passing cases -------------------------------------------------------------------------------

def test_exact_match_passes():
    c, ref = ref_and_c()
    v = check_against(c, ref)
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
    v = check(c, a, b, VerifyOptions())
    assert v.passed, v.summary()
    assert v.rule == "bound"  # the default for float inputs
    assert 0 < v.max_abs_error < 3e-4
    assert 0 < v.max_error_over_tolerance < 1
    fixed = check(c, a, b, VerifyOptions(tolerance="fixed"))  # 3e-4 / 3e-4 (the fixed rule)
    assert fixed.passed, fixed.summary()
    assert fixed.rule == "fixed" and fixed.max_abs_error == v.max_abs_error


# --- failures and their coordinates --------------------------------------------------------------

def test_nan_left_behind_fails_with_coordinates():
    c, ref = ref_and_c()
    c[2, 3] = np.nan
    v = check_against(c, ref)
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
    v = check_against(c, ref)
    assert not v.passed
    assert v.nan_outputs == 9 and v.mismatches == 9
    assert v.max_abs_error == float("inf")
    assert [m[:2] for m in v.first_mismatches] == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [2, 0], [2, 1]]


def test_one_wrong_element_fails_with_coordinates():
    c, ref = ref_and_c(6, 7)
    c[4, 1] += np.float32(0.5)
    v = check_against(c, ref)
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
    v = check_against(c, ref)
    assert v.mismatches == 10
    assert len(v.first_mismatches) == FIRST_MISMATCHES == 8
    assert [m[:2] for m in v.first_mismatches] == [list(p) for p in sorted(bad)][:8]


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_inf_fails(value):
    c, ref = ref_and_c()
    c[1, 2] = value
    v = check_against(c, ref)
    assert not v.passed
    assert v.mismatches == 1
    assert v.nan_outputs == 0
    assert v.first_mismatches[0][:3] == [1, 2, str(np.float32(value))]
    assert np.isfinite(v.max_abs_error)  # the finite outputs are exact


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape"):
        check(np.zeros((2, 3), np.float32), np.zeros((3, 4), np.float32), np.zeros((4, 3), np.float32), OPTS)
    with pytest.raises(ValueError, match="shape"):  # inner dimensions differ
        check(np.zeros((3, 3), np.float32), np.zeros((3, 4), np.float32), np.zeros((5, 3), np.float32), OPTS)


# --- tolerance edges -----------------------------------------------------------------------------

@pytest.mark.parametrize("expected", [1.0, -1.0, 2.0, 0.5, 1024.0])
def test_error_exactly_at_tolerance_passes(expected):
    tol = ATOL + RTOL * abs(expected)          # exact in float64 (sum of powers of two)
    got = np.float32(expected + np.sign(expected) * tol)
    assert float(got) - expected == np.sign(expected) * tol  # exactly representable in float32
    c = np.array([[got]], dtype=np.float32)
    ref = np.array([[expected]])
    v = check_against(c, ref)
    assert v.passed, v.summary()
    assert v.max_abs_error == tol


@pytest.mark.parametrize("expected", [1.0, -1.0, 2.0, 0.5, 1024.0])
def test_error_one_ulp_over_tolerance_fails(expected):
    tol = ATOL + RTOL * abs(expected)
    at_edge = np.float32(expected + np.sign(expected) * tol)
    over = np.nextafter(at_edge, np.float32(np.sign(expected) * np.inf))  # one float32 ulp further
    assert abs(float(over) - expected) > tol
    v = check_against(np.array([[over]], dtype=np.float32), np.array([[expected]]))
    assert not v.passed
    assert v.mismatches == 1
    assert v.first_mismatches[0][:2] == [0, 0]


def test_error_below_atol_passes_when_reference_is_zero():
    c = np.array([[np.float32(ATOL), np.float32(-ATOL)]], dtype=np.float32)
    v = check_against(c, np.zeros((1, 2)))
    assert v.passed
    assert v.max_rel_error == 0.0  # ref == 0 is left out of the relative error
    c2 = np.array([[np.nextafter(np.float32(ATOL), np.float32(1))]], dtype=np.float32)
    assert not check_against(c2, np.zeros((1, 1))).passed


def test_rtol_only():
    opts = VerifyOptions(tolerance="fixed", atol=0.0, rtol=2.0**-10)
    ref = np.array([[4.0]])
    assert check_against(np.array([[4.0 + 4 * 2.0**-10]], np.float32), ref, opts).passed
    assert not check_against(np.array([[np.nextafter(np.float32(4.0 + 4 * 2.0**-10), np.float32(8))]], np.float32),
                             ref, opts).passed


def test_relative_error_value():
    c = np.array([[1.5, 4.0]], np.float32)
    ref = np.array([[1.0, 4.0]])
    v = check_against(c, ref, VerifyOptions(tolerance="fixed", atol=1.0, rtol=0.0))
    assert v.passed  # 0.5 <= atol
    assert v.max_abs_error == 0.5
    assert v.max_rel_error == 0.5


def test_zero_tolerance_demands_exact():
    c, ref = ref_and_c()
    zero = VerifyOptions(tolerance="fixed", atol=0.0, rtol=0.0)
    assert check_against(c, ref, zero).passed
    c[0, 0] = np.nextafter(c[0, 0], np.float32(np.inf))
    v = check_against(c, ref, zero)
    assert not v.passed and v.mismatches == 1


# --- record --------------------------------------------------------------------------------------

def test_record_is_json_serialisable_strict():
    c, ref = ref_and_c()
    c[0, 1] = np.nan
    c[3, 4] = np.inf
    c[2, 2] += 1
    record = check_against(c, ref).record()
    text = json.dumps(record, allow_nan=False)
    back = json.loads(text)
    assert back["passed"] is False
    assert back["mismatches"] == 3
    assert back["nan_outputs"] == 1
    assert [m[:2] for m in back["first_mismatches"]] == [[0, 1], [2, 2], [3, 4]]
    assert back["first_mismatches"][0][2] == "nan" and back["first_mismatches"][2][2] == "inf"
    assert back["atol"] == ATOL and back["rtol"] == RTOL
    assert back["method"] == "full float64 reference, every element"
    assert back["rule"] == "fixed"
    assert back["max_error_over_tolerance"] == "inf"  # NaN/inf outputs: infinitely over, as a string
    assert back["safety"] is None and back["freivalds"] is None  # bound-rule / sampled-method fields
    assert set(back) == {"passed", "max_abs_error", "max_rel_error", "mismatches", "nan_outputs", "atol", "rtol",
                         "first_mismatches", "method", "rule", "max_error_over_tolerance", "safety", "freivalds"}


def test_record_with_no_finite_output_is_json_serialisable():
    c = np.full((2, 2), np.nan, np.float32)
    record = check_against(c, np.ones((2, 2))).record()
    back = json.loads(json.dumps(record, allow_nan=False))
    assert back["max_abs_error"] == "inf"
    assert back["nan_outputs"] == 4


def test_record_types_are_plain_python():
    c, ref = ref_and_c()
    c[1, 1] += 1
    record = check_against(c, ref).record()
    assert type(record["passed"]) is bool
    assert type(record["mismatches"]) is int and type(record["nan_outputs"]) is int
    assert type(record["max_abs_error"]) is float
    row, col, got, expected = record["first_mismatches"][0]
    assert (type(row), type(col), type(got), type(expected)) == (int, int, float, float)


def test_verdict_summary_words():
    v = Verdict(passed=True, max_abs_error=1e-5, max_rel_error=2e-5, mismatches=0, nan_outputs=0, atol=ATOL, rtol=RTOL)
    assert v.summary().startswith("PASS (fixed): max abs err 1e-05")
    bad = Verdict(passed=False, max_abs_error=0.5, max_rel_error=0.1, mismatches=1, nan_outputs=0, atol=ATOL,
                  rtol=RTOL, first_mismatches=[[4, 1, 5.5, 5.0]], rule="bound", max_error_over_tolerance=12.0)
    text = bad.summary()
    assert text.startswith("FAIL (bound): ")
    assert "max err/tol 12" in text and "1 mismatches" in text and "row 4, col 1" in text


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


# --- the bound rule (default for float inputs) -----------------------------------------------------

BIG_K = 4096


def normal_inputs(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def sequential_float32(a, b):
    """C = A @ B accumulated in float32 one k term after another (np.cumsum is sequential)."""
    return np.cumsum(a[:, :, None] * b[None, :, :], axis=1, dtype=np.float32)[:, -1, :]


def pairwise_float32(a, b):
    """C = A @ B with numpy's pairwise float32 summation of the k products."""
    return np.add.reduce(a[:, :, None] * b[None, :, :], axis=1, dtype=np.float32)


@pytest.fixture(scope="module")
def big_k():
    a, b = normal_inputs(16, 16, BIG_K)
    return a, b


@pytest.mark.parametrize("order", ["blas", "sequential", "pairwise"])
def test_bound_passes_correct_float32_products_at_large_k(big_k, order):
    a, b = big_k
    c = {"blas": lambda: a @ b, "sequential": lambda: sequential_float32(a, b),
         "pairwise": lambda: pairwise_float32(a, b)}[order]()
    assert c.dtype == np.float32
    v = check(c, a, b, VerifyOptions())
    assert v.rule == "bound" and v.safety == 8.0
    assert v.passed, v.summary()
    assert v.mismatches == 0
    assert 0 < v.max_abs_error  # float32 accumulation did round ...
    assert v.max_error_over_tolerance < 0.1  # ... far inside the bound


def test_bound_fails_one_dropped_k_term(big_k):
    a, b = big_k
    c = a[:, :-1] @ b[:-1]  # the last k term never added
    v = check(c, a, b, VerifyOptions())
    assert not v.passed
    assert v.rule == "bound"
    assert v.mismatches > 16 * 16 // 2  # most elements: |a_ik b_kj| exceeds the bound
    assert v.max_error_over_tolerance > 1
    row, col, got, expected = v.first_mismatches[0]
    assert got == float(c[row, col])
    assert expected == pytest.approx(float(a[row].astype(np.float64) @ b[:, col].astype(np.float64)), abs=1e-9)


@pytest.mark.xfail(reason="KNOWN LIMIT (documented in gemmlab/stages/verify.py): the bound grows like K^1.5, so at "
                          "K = 65536 one dropped k term (~0.6) hides inside it; integers + exact catch it", strict=True)
def test_bound_fails_one_dropped_k_term_at_k_65536():
    a, b = normal_inputs(8, 8, 65536)
    v = check(a[:, :-1] @ b[:-1], a, b, VerifyOptions())
    assert not v.passed


def test_fixed_rule_at_large_k(big_k):
    # the fixed rule (3e-4 + 3e-4|ref|) at K = 4096: the correct products still pass and the
    # dropped term still fails; the errors measured are the same as under the bound rule.
    a, b = big_k
    fixed = VerifyOptions(tolerance="fixed", atol=3e-4, rtol=3e-4)
    for c in (a @ b, sequential_float32(a, b)):
        vf, vb = check(c, a, b, fixed), check(c, a, b, VerifyOptions())
        assert vf.rule == "fixed" and vf.passed, vf.summary()
        assert vf.max_abs_error == vb.max_abs_error
        assert vf.safety is None
    dropped = check(a[:, :-1] @ b[:-1], a, b, fixed)
    assert not dropped.passed and dropped.mismatches > 16 * 16 // 2


def test_bound_tolerance_formula():
    from gemmlab.stages.verify import TINY, U_FP32, tolerance
    ref = np.array([[2.0, -4.0]])
    abs_ab = np.array([[100.0, 300.0]])
    opts = VerifyOptions(safety=8.0)
    # 8 * sqrt(4096) * 2^-24 = 2^-15
    np.testing.assert_array_equal(tolerance("bound", opts, ref, abs_ab, 4096),
                                  2.0**-15 * abs_ab + U_FP32 * np.abs(ref) + TINY)
    tf32 = tolerance("bound", opts, ref, abs_ab, 4096, "tf32")
    # tensor cores: twice the accumulation unit; no input-rounding term (the reference holds the TF32 inputs)
    np.testing.assert_allclose(tf32, 8 * 64 * 2 * 2.0**-24 * abs_ab + U_FP32 * np.abs(ref), rtol=1e-15)
    # larger K, larger allowance (sqrt(K) times |A||B|)
    assert (tolerance("bound", opts, ref, abs_ab, 16384) > tolerance("bound", opts, ref, abs_ab, 4096)).all()
    assert tolerance("exact", opts, ref, abs_ab, 4096) == 0.0
    np.testing.assert_array_equal(tolerance("fixed", VerifyOptions(atol=1.0, rtol=0.5), ref, None, 4096), [[2.0, 3.0]])


def test_bound_uses_abs_a_abs_b_per_element():
    # an element whose |A||B| is tiny gets a tiny allowance even where |ref| is the same
    a = np.array([[1.0, 0.0], [1.0, 0.0]], np.float32)
    b = np.array([[1.0, 1.0], [1.0, 1.0]], np.float32)
    c = (a @ b).astype(np.float32)
    assert check(c, a, b, VerifyOptions()).passed
    c[0, 0] = np.nextafter(c[0, 0], np.float32(2))  # one ulp (2^-23) above the exact 1.0
    v = check(c, a, b, VerifyOptions())
    # bound: 8*sqrt(2)*2^-24*1 + 2^-24*1 ~ 7e-7 > 1.2e-7: one ulp passes at K = 2
    assert v.passed, v.summary()
    c[0, 0] = np.float32(1.0 + 2.0**-18)
    assert not check(c, a, b, VerifyOptions()).passed


# --- the exact rule (integer inputs) ----------------------------------------------------------------

def integer_inputs(m=16, n=16, k=64, seed=3):
    from gemmlab.contract.hookspecs import Shape
    from gemmlab.stages.inputs import InputOptions, make_inputs
    return make_inputs(Shape(m, n, k), InputOptions(seed=seed, distribution="integers"))


@pytest.mark.parametrize("tolerance", ["auto", "exact"])
def test_exact_rule_integer_product_passes(tolerance):
    a, b = integer_inputs()
    c = a @ b
    v = check(c, a, b, VerifyOptions(tolerance=tolerance), distribution="integers")
    assert v.rule == "exact"
    assert v.passed, v.summary()
    assert v.max_abs_error == 0.0 and v.max_error_over_tolerance == 0.0


def test_exact_rule_plus_one_fails():
    a, b = integer_inputs()
    c = a @ b
    c[5, 9] += 1
    v = check(c, a, b, VerifyOptions(), distribution="integers")
    assert v.rule == "exact"
    assert not v.passed
    assert v.mismatches == 1
    assert v.first_mismatches[0][:2] == [5, 9]
    assert v.max_abs_error == 1.0
    assert v.max_error_over_tolerance == float("inf")
    back = json.loads(json.dumps(v.record(), allow_nan=False))
    assert back["max_error_over_tolerance"] == "inf" and back["rule"] == "exact"


def test_exact_rule_one_ulp_fails_where_bound_passes():
    a, b = integer_inputs(seed=4)
    c = a @ b
    i, j = np.argwhere(c != 0)[0]
    c[i, j] = np.nextafter(c[i, j], np.float32(np.inf))
    assert check(c, a, b, VerifyOptions(tolerance="bound"), distribution="integers").passed
    assert not check(c, a, b, VerifyOptions(), distribution="integers").passed


def test_auto_rule_is_bound_for_float_inputs():
    a, b = normal_inputs(4, 4, 8)
    for distribution in ("normal", "uniform"):
        assert check(a @ b, a, b, VerifyOptions(), distribution=distribution).rule == "bound"


# --- the sampled method and Freivalds' check --------------------------------------------------------

SM, SN, SK, SAMPLE, SEED = 16, 16, 64, 4, 7


def sampled_rows_cols(seed=SEED, m=SM, n=SN, sample=SAMPLE):
    """The rows and columns ``check`` compares in full (its documented seed + 1 stream)."""
    rng = np.random.default_rng(seed + 1)
    rows = np.sort(rng.choice(m, size=min(m, sample), replace=False))
    cols = np.sort(rng.choice(n, size=min(n, sample), replace=False))
    return [int(r) for r in rows], [int(c) for c in cols]


SAMPLED = VerifyOptions(method="sampled", sample=SAMPLE)


@pytest.fixture
def sampled_case():
    a, b = normal_inputs(SM, SN, SK, seed=11)
    rows, cols = sampled_rows_cols()
    assert len(rows) == len(cols) == SAMPLE
    outside = [(r, c) for r in range(SM) for c in range(SN) if r not in rows and c not in cols]
    in_row = [(r, c) for r in rows for c in range(SN) if c not in cols]
    in_col = [(r, c) for r in range(SM) for c in cols if r not in rows]
    return a, b, a @ b, outside, in_row, in_col


def test_sampled_correct_result_passes(sampled_case):
    a, b, c, *_ = sampled_case
    v = check(c, a, b, SAMPLED, seed=SEED)
    assert v.passed, v.summary()
    assert v.method.startswith("sampled: 4 whole rows and 4 whole columns")
    assert v.freivalds == {"passed": True, "trials": 2, "max_error_over_tolerance": v.freivalds["max_error_over_tolerance"]}
    assert 0 <= v.freivalds["max_error_over_tolerance"] < 1


@pytest.mark.parametrize("where", ["in_row", "in_col"])
def test_sampled_catches_wrong_element_in_sampled_row_or_column(sampled_case, where):
    a, b, c, outside, in_row, in_col = sampled_case
    r, col = (in_row if where == "in_row" else in_col)[3]
    c = c.copy()
    c[r, col] += np.float32(0.5)
    v = check(c, a, b, SAMPLED, seed=SEED)
    assert not v.passed
    assert v.mismatches == 1
    assert v.first_mismatches[0][:2] == [r, col]  # reported in whole-matrix coordinates
    assert v.freivalds["passed"] is False  # the whole-product check sees it too


def test_sampled_freivalds_catches_wrong_element_outside_the_sample(sampled_case):
    a, b, c, outside, *_ = sampled_case
    r, col = outside[len(outside) // 2]
    c = c.copy()
    c[r, col] += np.float32(1e3)  # |C x - A(B x)| >= 1e3 in row r for every ±1 vector x
    v = check(c, a, b, SAMPLED, seed=SEED)
    assert v.mismatches == 0  # not in a compared row or column ...
    assert v.freivalds["passed"] is False  # ... but Freivalds' check fails
    assert v.freivalds["max_error_over_tolerance"] > 1
    assert not v.passed
    assert "Freivalds check failed" in v.summary()


def test_sampled_counts_nan_anywhere(sampled_case):
    a, b, c, outside, *_ = sampled_case
    c = c.copy()
    c[outside[0]] = np.nan
    v = check(c, a, b, SAMPLED, seed=SEED)
    assert not v.passed
    assert v.nan_outputs == 1 and v.mismatches == 0
    assert v.freivalds["passed"] is False


def test_sampled_sample_depends_on_seed():
    assert sampled_rows_cols(seed=1) != sampled_rows_cols(seed=2)


def test_sampled_wrong_element_in_row_and_column_counted_once(sampled_case):
    # regression: an element in both a sampled row and a sampled column was counted (and listed) twice
    a, b, c, *_ = sampled_case
    rows, cols = sampled_rows_cols()
    c = c.copy()
    c[rows[1], cols[2]] += np.float32(0.5)
    v = check(c, a, b, SAMPLED, seed=SEED)
    assert not v.passed
    assert [m[:2] for m in v.first_mismatches] == [[rows[1], cols[2]]]
    assert v.mismatches == 1


def test_auto_method_switches_to_sampled_above_max_full():
    a, b = normal_inputs(SM, SN, SK)
    assert check(a @ b, a, b, VerifyOptions(max_full=SM * SN * SK)).method == "full float64 reference, every element"
    v = check(a @ b, a, b, VerifyOptions(max_full=SM * SN * SK - 1, sample=2))
    assert v.method.startswith("sampled: 2 whole rows and 2 whole columns") and v.passed
    assert v.freivalds is not None and v.freivalds["passed"] is True


def test_sampled_record_is_json_serialisable_strict(sampled_case):
    a, b, c, outside, in_row, _ = sampled_case
    c = c.copy()
    c[outside[0]] += np.float32(1e3)
    c[in_row[0]] = np.inf
    record = check(c, a, b, SAMPLED, seed=SEED).record()
    back = json.loads(json.dumps(record, allow_nan=False))
    assert back["rule"] == "bound"
    assert back["method"].startswith("sampled: ")
    assert back["freivalds"]["passed"] is False and back["freivalds"]["trials"] == 2
    assert back["passed"] is False


def test_sampled_exact_record_is_json_serialisable_strict():
    # regression: freivalds.max_error_over_tolerance = inf stayed a float, so result.json held 'Infinity'
    a, b = integer_inputs(SM, SN, SK)
    rows, cols = sampled_rows_cols()
    r = next(i for i in range(SM) if i not in rows)
    col = next(j for j in range(SN) if j not in cols)
    c = a @ b
    c[r, col] += 1
    v = check(c, a, b, SAMPLED, distribution="integers", seed=SEED)
    assert not v.passed and v.rule == "exact" and v.freivalds["passed"] is False
    assert v.mismatches == 0  # outside the sample: only Freivalds sees it
    back = json.loads(json.dumps(v.record(), allow_nan=False))
    assert back["freivalds"]["max_error_over_tolerance"] == "inf"
    assert v.freivalds["max_error_over_tolerance"] == float("inf")  # the Verdict itself keeps the number


# --- TF32 precision ----------------------------------------------------------------------------------

def serial_float32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` accumulated in float32 one k at a time: the least accurate order a kernel uses."""
    products = a[:, :, None].astype(np.float32) * b[None, :, :].astype(np.float32)
    return np.cumsum(products, axis=1, dtype=np.float32)[:, -1, :]


def keep_mantissa_bits(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 ``x`` with only ``bits`` explicit mantissa bits (toward zero)."""
    mask = np.uint32((0xFFFFFFFF << (23 - bits)) & 0xFFFFFFFF)
    return (x.astype(np.float32).view(np.uint32) & mask).view(np.float32)


def test_round_tf32_ties_away_and_truncation():
    from gemmlab.stages.verify import round_tf32
    ulp = 2.0**-10  # TF32 keeps 10 explicit mantissa bits
    x = np.array([1 + ulp / 2, 1 + 1.5 * ulp, -(1 + ulp / 2), 1 + ulp / 2 - 2.0**-23, 3.0], np.float32)
    np.testing.assert_array_equal(round_tf32(x, "rna"), np.array([1 + ulp, 1 + 2 * ulp, -(1 + ulp), 1, 3], np.float32))
    # ties to even: 1 + ulp/2 goes down to 1 (even), 1 + 1.5 ulp up to 1 + 2 ulp (even)
    np.testing.assert_array_equal(round_tf32(x, "rn"), np.array([1, 1 + 2 * ulp, -1, 1, 3], np.float32))
    np.testing.assert_array_equal(round_tf32(x, "rz"), np.array([1, 1 + ulp, -1, 1, 3], np.float32))
    assert round_tf32(x, "none") is x
    with pytest.raises(ValueError, match="tf32 rounding"):
        round_tf32(x, "nearest")


MUTANT_K = (256, 1024, 4096, 16384, 65536)


@pytest.mark.parametrize("K", MUTANT_K)
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
def test_every_precision_rejects_wrong_results_at_every_k(precision, K):
    """A correct float32 accumulation passes; an all-zeros C, a doubled C, a dropped quarter of K,
    a sign flip and inputs truncated to 3 mantissa bits all fail, for every precision from K = 256
    to 65536 (issue 40: the TF32 rule accepted zeros and a doubled C at K >= 1024)."""
    import ml_dtypes
    from gemmlab.stages.verify import round_tf32
    rng = np.random.default_rng(K)
    a = rng.standard_normal((16, K)).astype(np.float32)
    b = rng.standard_normal((K, 16)).astype(np.float32)
    if precision in ("bf16", "fp16"):
        dtype = ml_dtypes.bfloat16 if precision == "bf16" else np.float16
        a, b = a.astype(dtype).astype(np.float32), b.astype(dtype).astype(np.float32)
    ar, br = (round_tf32(a, "rz"), round_tf32(b, "rz")) if precision == "tf32" else (a, b)
    good = serial_float32(ar, br)
    q = K // 4
    wrong = {"zeros": np.zeros_like(good), "doubled": 2 * good, "sign flip": -good,
             "dropped quarter of K": (ar[:, q:].astype(np.float64) @ br[q:].astype(np.float64)).astype(np.float32),
             "3-bit truncation": (keep_mantissa_bits(a, 3).astype(np.float64)
                                  @ keep_mantissa_bits(b, 3).astype(np.float64)).astype(np.float32)}
    verdict = check(good, a, b, VerifyOptions(), precision=precision)
    assert verdict.passed, verdict.summary()
    for name, c in wrong.items():
        verdict = check(c, a, b, VerifyOptions(), precision=precision)
        assert not verdict.passed, f"{precision} K={K}: {name} passed ({verdict.summary()})"
        assert verdict.mismatches >= 0.6 * c.size, f"{precision} K={K}: {name}: only {verdict.mismatches} caught"


def test_tf32_bound_no_longer_absorbs_input_rounding():
    """A 1e-3 relative error (an input-rounding-sized term) fails as TF32 now: the reference holds
    the TF32-rounded inputs, so the bound covers float32 accumulation only."""
    a, b = normal_inputs(16, 16, 64, seed=5)
    c = ((a.astype(np.float64) @ b.astype(np.float64)) * (1 + 1e-3)).astype(np.float32)
    tf32 = check(c, a, b, VerifyOptions(), precision="tf32")
    assert not tf32.passed
    assert set(tf32.tf32["tried"]) == {"rn", "rna", "rz", "none"}  # undeclared: every rounding was tried


@pytest.mark.parametrize("rounding", ["rn", "rna", "rz", "none"])
def test_tf32_undeclared_rounding_passes_and_is_named(rounding):
    from gemmlab.stages.verify import round_tf32
    a, b = normal_inputs(16, 16, 256, seed=6)
    c = serial_float32(round_tf32(a, rounding), round_tf32(b, rounding))
    verdict = check(c, a, b, VerifyOptions(), precision="tf32")
    assert verdict.passed, verdict.summary()
    assert verdict.tf32["rounding"] == rounding and verdict.tf32["declared"] is None
    record = json.loads(json.dumps(verdict.record(), allow_nan=False))
    assert record["tf32"]["rounding"] == rounding
    assert check(c, a, b, VerifyOptions(), precision="fp32").passed is (rounding == "none")


def test_tf32_declared_rounding_is_the_only_model():
    from gemmlab.stages.verify import round_tf32
    a, b = normal_inputs(16, 16, 256, seed=7)
    rz = serial_float32(round_tf32(a, "rz"), round_tf32(b, "rz"))
    assert check(rz, a, b, VerifyOptions(), precision="tf32", tf32_rounding="rz").passed
    verdict = check(rz, a, b, VerifyOptions(), precision="tf32", tf32_rounding="rna")
    assert not verdict.passed and verdict.tf32 == {"rounding": "rna", "declared": "rna",
                                                   "tried": {"rna": verdict.max_error_over_tolerance}}
    with pytest.raises(ValueError, match="tf32 rounding"):
        check(rz, a, b, VerifyOptions(), precision="tf32", tf32_rounding="nearest")


def test_integers_exact_catch_a_dropped_term_at_large_k():
    from gemmlab.contract.hookspecs import Shape
    from gemmlab.stages.inputs import InputOptions, make_inputs
    a, b = make_inputs(Shape(4, 4, 65536), InputOptions(seed=3, distribution="integers"))
    good = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    dropped = (a[:, :-1].astype(np.float64) @ b[:-1].astype(np.float64)).astype(np.float32)
    assert check(good, a, b, VerifyOptions(), distribution="integers").passed
    verdict = check(dropped, a, b, VerifyOptions(), distribution="integers")
    assert not verdict.passed and verdict.rule == "exact" and verdict.mismatches == 16


# --- sampled checks and shared products (moved from test_followups.py) ------------------------

def test_sampled_with_every_row_sampled_reports_finite_errors():
    import numpy as np
    from gemmlab.stages.verify import VerifyOptions, check
    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 64)).astype(np.float32)
    b = rng.standard_normal((64, 50)).astype(np.float32)
    c = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    v = check(c, a, b, VerifyOptions(method="sampled", sample=256))
    assert v.passed and np.isfinite(v.max_abs_error) and v.max_abs_error < 1e-4

def test_products_are_computed_once_for_kernel_and_baseline(monkeypatch):
    import numpy as np
    from gemmlab.stages import verify
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal((32, 8)).astype(np.float32)
    c = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    products = {}
    first = verify.check(c, a, b, verify.VerifyOptions(), products=products)
    assert set(products) == {"ref", "abs_ab"}
    ref_id = id(products["ref"])
    second = verify.check(c, a, b, verify.VerifyOptions(), products=products)
    assert id(products["ref"]) == ref_id and first.passed and second.passed
    assert first.max_abs_error == second.max_abs_error


@pytest.mark.parametrize("K", [1, 7, 4096])
def test_abs_product_bounds_the_exact_product(K):
    """The float32 |A||B| of the sampled method, scaled by 1/(1 - gamma_{K+1}), is never under the
    float64 one, and within a few gamma of it (a bound that is neither loose nor short)."""
    from gemmlab.stages.verify import U_FP32, abs_product
    rng = np.random.default_rng(K)
    a = np.abs(rng.standard_normal((5, K), dtype=np.float32))
    b = np.abs(rng.standard_normal((K, 3), dtype=np.float32))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    got = abs_product(a, b)
    assert got.dtype == np.float64 and (got >= exact).all()
    assert (got <= exact * (1 + 4 * (K + 1) * U_FP32)).all()
