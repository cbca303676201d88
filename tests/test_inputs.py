"""gemmlab.stages.inputs.make_inputs: the three distributions, their ranges, dtype/layout, seeding."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.contract.hookspecs import Shape
from gemmlab.stages.inputs import INT_RANGE, MAX_EXACT_K, InputOptions, make_inputs

DISTRIBUTIONS = ("normal", "uniform", "integers")
SHAPE = Shape(M=37, N=29, K=53)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_shapes_dtype_layout(distribution):
    a, b = make_inputs(SHAPE, InputOptions(seed=1, distribution=distribution))
    assert a.shape == (SHAPE.M, SHAPE.K) and b.shape == (SHAPE.K, SHAPE.N)
    for x in (a, b):
        assert x.dtype == np.float32
        assert x.flags.c_contiguous
        assert np.isfinite(x).all()


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_same_seed_same_arrays(distribution):
    a1, b1 = make_inputs(SHAPE, InputOptions(seed=42, distribution=distribution))
    a2, b2 = make_inputs(SHAPE, InputOptions(seed=42, distribution=distribution))
    assert np.array_equal(a1.view(np.uint32), a2.view(np.uint32))
    assert np.array_equal(b1.view(np.uint32), b2.view(np.uint32))


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_other_seed_other_arrays(distribution):
    a1, b1 = make_inputs(SHAPE, InputOptions(seed=1, distribution=distribution))
    a2, b2 = make_inputs(SHAPE, InputOptions(seed=2, distribution=distribution))
    assert not np.array_equal(a1, a2) and not np.array_equal(b1, b2)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("shape", [Shape(1, 1, 1), Shape(1, 2, 1), SHAPE], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 16])
def test_never_all_zeros(distribution, shape, seed):
    a, b = make_inputs(shape, InputOptions(seed=seed, distribution=distribution))
    assert np.any(a != 0) and np.any(b != 0)  # would hide a kernel that writes nothing useful


@pytest.mark.parametrize("seed", range(64))
def test_integers_never_all_zeros_on_tiny_shapes(seed):
    # regression: integers in [-4, 4] drew A = B = [[0]] for shape [1,1,1] with seed 1 (and A = [[0]] with
    # seed 16), so C was all zeros and a kernel writing zeros passed the exact comparison
    a, b = make_inputs(Shape(1, 1, 1), InputOptions(seed=seed, distribution="integers"))
    assert np.any(a != 0) and np.any(b != 0)


def test_normal_is_seed_000_recipe():
    # the recipe of seed 000 (the real-device naive vs register-tiled GEMM lab gemmlab grew from):
    # N(0, 1) drawn in float64 from default_rng(seed), rounded to float32: A first, then B
    rng = np.random.default_rng(5)
    expected_a = rng.standard_normal((SHAPE.M, SHAPE.K)).astype(np.float32)
    expected_b = rng.standard_normal((SHAPE.K, SHAPE.N)).astype(np.float32)
    a, b = make_inputs(SHAPE, InputOptions(seed=5))
    np.testing.assert_array_equal(a, expected_a)
    np.testing.assert_array_equal(b, expected_b)
    assert InputOptions().distribution == "normal" and InputOptions().seed == 0


def test_uniform_within_minus_one_one():
    a, b = make_inputs(Shape(64, 64, 64), InputOptions(seed=3, distribution="uniform"))
    for x in (a, b):
        assert x.min() >= -1.0 and x.max() < 1.0
        assert x.min() < -0.9 and x.max() > 0.9  # spread over the range, not a constant
        assert abs(float(x.mean())) < 0.05
        assert np.any(x != np.round(x))  # not integers


def test_integers_within_range_and_exact():
    a, b = make_inputs(Shape(64, 64, 64), InputOptions(seed=3, distribution="integers"))
    assert INT_RANGE == 4
    for x in (a, b):
        assert x.min() >= -4 and x.max() <= 4
        assert np.array_equal(x, np.round(x))
        assert not np.any(x == 0)  # never zero: magnitudes 1..4 with random signs
        assert set(np.unique(x).astype(int)) == {-4, -3, -2, -1, 1, 2, 3, 4}  # the whole range shows up
    # float32 GEMM of these is exact: every partial sum is an integer below 2^24
    assert np.array_equal((a @ b).astype(np.float64), a.astype(np.float64) @ b.astype(np.float64))


def test_max_exact_k_keeps_partial_sums_exact():
    assert MAX_EXACT_K * INT_RANGE * INT_RANGE <= 2**24  # |sum| <= K * 16 must stay exact in float32


def test_unknown_distribution_raises():
    with pytest.raises(ValueError, match="distribution"):
        make_inputs(SHAPE, InputOptions(distribution="zeros"))


@pytest.fixture
def pipelined(monkeypatch):
    """Draws of a few elements go through the pipelined form (blocks of 50 elements, 3 threads), and
    the last draw kept by seeded_draw is forgotten before and after."""
    from gemmlab.stages import hostpass, inputs
    monkeypatch.setattr(inputs, "DRAW_PIPELINED_MIN", 16)
    monkeypatch.setattr(inputs, "DRAW_BLOCK", 50)
    monkeypatch.setattr(hostpass, "threads", lambda: 3)
    inputs.clear_cache()
    yield inputs
    inputs.clear_cache()


@pytest.mark.parametrize("distribution", ["normal", "uniform"])
def test_the_pipelined_draw_is_the_whole_array_draw(pipelined, distribution):
    """issue 41: blocks of rows drawn in turn (converted in threads) give numpy's one-call draws bit
    for bit: A then B from default_rng(seed), float64 rounded to float32; a row wider than a block too."""
    for shape in (SHAPE, Shape(3, 120, 7)):
        rng = np.random.default_rng(9)
        one = [(rng.standard_normal(s) if distribution == "normal" else rng.uniform(-1.0, 1.0, s)).astype(np.float32)
               for s in ((shape.M, shape.K), (shape.K, shape.N))]
        for got in (make_inputs(shape, InputOptions(seed=9, distribution=distribution)),
                    pipelined.seeded_draw(shape.M, shape.N, shape.K, 9, distribution)):
            assert all(np.array_equal(x.view(np.uint32), y.view(np.uint32)) for x, y in zip(got, one))


def test_seeded_draw_is_kept_read_only_and_forgotten(pipelined):
    a, b = pipelined.seeded_draw(37, 29, 53, 4, "normal")
    assert pipelined.seeded_draw(37, 29, 53, 4, "normal")[0] is a  # the next point of the shape: no draw
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0] = 1.0
    assert pipelined.seeded_draw(37, 29, 53, 5, "normal")[0] is not a  # another seed: drawn
    import gemmlab
    gemmlab.clear_caches()
    assert pipelined.seeded_draw(37, 29, 53, 5, "normal")[0] is not a


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
def test_problem_inputs_from_the_kept_draw_are_the_whole_array_recipe(pipelined, precision):
    """make_problem_inputs from seeded_draw in threaded row blocks: the arrays of the whole-array
    recipe (round once to the storage type, logical = the rounded values as float32, a column-major
    operand stored transposed and C-contiguous), for every layout."""
    from gemmlab.contract.hookspecs import Problem
    for la, lb in (("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")):
        problem = Problem(SHAPE, precision, la, lb)
        got = pipelined.make_problem_inputs(problem, InputOptions(seed=6))
        dtype = pipelined.storage_dtype(precision)
        for x32, logical, stored, lay in ((*make_inputs(SHAPE, InputOptions(seed=6)), got.a, got.b, got.a_stored,
                                           got.b_stored, la, lb)[i::2] for i in (0, 1)):
            st = x32.astype(dtype)
            assert logical.dtype == np.float32 and np.array_equal(logical.view(np.uint32),
                                                                  st.astype(np.float32).view(np.uint32))
            want = np.ascontiguousarray(st if lay == "row" else st.T)
            assert stored.dtype == dtype and stored.flags.c_contiguous and stored.shape == want.shape
            assert np.array_equal(stored.view(np.uint8), want.view(np.uint8))


def test_a_shapes_two_layouts_share_logical_inputs_and_their_products(pipelined, monkeypatch):
    """issue 41: bf16 row- then column-major B of one shape and seed get the same read-only logical
    arrays (rounded_draw), so verify.products_for hands the second point the first one's float64
    products: its check draws no sample and multiplies nothing again; other inputs get a new dict."""
    from gemmlab.contract.hookspecs import Problem
    from gemmlab.stages import verify
    verify.clear_cache()
    row = pipelined.make_problem_inputs(Problem(SHAPE, "bf16", "row", "row"), InputOptions(seed=2))
    col = pipelined.make_problem_inputs(Problem(SHAPE, "bf16", "row", "col"), InputOptions(seed=2))
    assert row.a is col.a and row.b is col.b and not row.b.flags.writeable
    assert row.b_stored.shape == (SHAPE.K, SHAPE.N) and col.b_stored.shape == (SHAPE.N, SHAPE.K)
    c = (row.a.astype(np.float64) @ row.b.astype(np.float64)).astype(np.float32)
    options = verify.VerifyOptions(method="sampled", sample=8)
    drawn = []
    real = verify.draw_sample
    monkeypatch.setattr(verify, "draw_sample", lambda *a: drawn.append(a) or real(*a))
    products = verify.products_for(row.a, row.b)
    assert verify.check(c, row.a, row.b, options, precision="bf16", products=products).passed and len(drawn) == 1
    assert verify.products_for(col.a, col.b) is products
    assert verify.check(c, col.a, col.b, options, precision="bf16", products=products).passed and len(drawn) == 1
    fp16 = pipelined.make_problem_inputs(Problem(SHAPE, "fp16", "row", "col"), InputOptions(seed=2))
    assert fp16.a is not row.a and verify.products_for(fp16.a, fp16.b) is not products
    verify.clear_cache()


def test_a_draw_above_the_keep_limit_is_not_kept(pipelined, monkeypatch):
    monkeypatch.setattr(pipelined, "KEEP_MAX_ELEMENTS", 37 * 53 + 53 * 29 - 1)
    a, b = pipelined.seeded_draw(37, 29, 53, 4, "normal")
    again = pipelined.seeded_draw(37, 29, 53, 4, "normal")
    assert again[0] is not a and np.array_equal(again[0], a) and not a.flags.writeable
    assert pipelined.rounded_draw(37, 29, 53, 4, "normal", "bf16")[0] is not pipelined.rounded_draw(
        37, 29, 53, 4, "normal", "bf16")[0]
    assert pipelined.seeded_draw(3, 4, 5, 4, "normal")[0] is pipelined.seeded_draw(3, 4, 5, 4, "normal")[0]
