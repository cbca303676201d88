"""gemmlab.stages.hostpass: the threaded host passes give numpy's one-call results bit for bit (float64
copies, absolute values, byte equality), with the pool really used (small thresholds here, so the
arrays stay tiny and the test cheap)."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.stages import hostpass


@pytest.fixture
def pooled(monkeypatch):
    """Thresholds of a few elements and 3 threads, and a count of the pools made: every pass below
    runs split over threads."""
    made = []
    real = hostpass.ThreadPoolExecutor

    class Counting(real):
        def __init__(self, *a, **k):
            made.append(k.get("max_workers"))
            super().__init__(*a, **k)

    monkeypatch.setattr(hostpass, "THREADED_MIN", 16)
    monkeypatch.setattr(hostpass, "SLICE", 7)
    monkeypatch.setattr(hostpass, "threads", lambda: 3)
    monkeypatch.setattr(hostpass, "ThreadPoolExecutor", Counting)
    return made


def specials(dtype) -> np.ndarray:
    """Random values with NaN, infinities, signed zeros and subnormals among them, as ``dtype``."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((9, 11)).astype(np.float32)
    x.flat[[0, 5, 17, 40, 98]] = [np.nan, np.inf, -np.inf, -0.0, 1e-40]
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_float64_is_astype_bit_for_bit(pooled, dtype):
    if dtype == "bfloat16":
        import ml_dtypes
        dtype = ml_dtypes.bfloat16
    x = specials(dtype)
    got = hostpass.float64(x)
    assert pooled == [3] and got.dtype == np.float64 and got.shape == x.shape and got.flags.c_contiguous
    assert np.array_equal(got.view(np.uint64), x.astype(np.float64).view(np.uint64))
    t = hostpass.float64(x.T)  # not contiguous: numpy's own call, same values
    assert np.array_equal(t.view(np.uint64), x.T.astype(np.float64).view(np.uint64)) and len(pooled) == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_absolute_is_np_abs_bit_for_bit(pooled, dtype):
    x = specials(dtype)
    got = hostpass.absolute(x)
    word = np.uint32 if dtype == np.float32 else np.uint64
    assert pooled == [3] and got.dtype == x.dtype
    assert np.array_equal(got.view(word), np.abs(x).view(word))
    assert not np.signbit(got).any()  # -0.0 and the negative values lost their sign


def test_same_bytes_finds_one_byte_anywhere(pooled):
    x = specials(np.float32)
    assert hostpass.same_bytes(x, x.copy())  # NaN equals itself bit for bit
    for flat in (0, 50, x.size - 1):  # first slice, a middle one, the last byte of the last one
        y = x.copy()
        y.view(np.uint8).reshape(-1)[4 * flat + 3] ^= 1
        assert not hostpass.same_bytes(x, y), flat
    z = x.copy()
    z.flat[40] = 0.0  # -0.0 -> +0.0: equal as numbers, not as bytes
    assert not hostpass.same_bytes(x, z)
    assert not hostpass.same_bytes(x, x[:-1])  # sizes differ
    assert len(pooled) == 5


def test_small_arrays_take_one_call(monkeypatch):
    monkeypatch.setattr(hostpass, "ThreadPoolExecutor", None)  # a pool would fail
    x = specials(np.float32)
    assert np.array_equal(hostpass.float64(x), x.astype(np.float64), equal_nan=True)
    assert hostpass.same_bytes(x, x.copy()) and hostpass.absolute(x).dtype == np.float32


def test_each_of_runs_every_item_in_the_pool_in_order(pooled):
    seen = []
    assert hostpass.each_of(range(5), lambda i: seen.append(i) or i * i) == [0, 1, 4, 9, 16]
    assert sorted(seen) == [0, 1, 2, 3, 4] and pooled == [3]
    with pytest.raises(ZeroDivisionError):  # an exception in one call reaches the caller
        hostpass.each_of([1, 0], lambda i: 1 // i)
    assert hostpass.each_of([2], lambda i: i) == [2] and len(pooled) == 2  # one item: no pool


def test_the_fp8_accumulator_term_is_the_same_in_any_tiling(pooled, monkeypatch):
    """issue 42: fp8_accumulator_term computes tiles in threads; 3 x 2 tiles (odd edges, K not a
    multiple of the step) give one tile's values bit for bit, and the steps' maxima are reduceat's."""
    from gemmlab.stages import verify
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((7, 100)), rng.standard_normal((100, 70))
    one = verify.fp8_accumulator_term(a, b, 64, 8.0)
    monkeypatch.setattr(verify, "TERM_TILE_ROWS", 3)
    monkeypatch.setattr(verify, "TERM_TILE_ELEMENTS", 3 * 40)
    assert np.array_equal(verify.fp8_accumulator_term(a, b, 64, 8.0), one) and pooled
    for x, axis in ((a, 1), (b, 0), (a[:, :96], 1), (b[:96], 0)):
        starts = np.arange(0, x.shape[axis], 32)
        assert np.array_equal(verify.step_maxima(x, 32, axis), np.maximum.reduceat(np.abs(x), starts, axis=axis))


def test_as_float64_copies_only_what_is_not_float64(pooled):
    x = specials(np.float32)
    assert np.array_equal(hostpass.as_float64(x), x.astype(np.float64), equal_nan=True)
    y = x.astype(np.float64)
    assert hostpass.as_float64(y) is y


def test_one_blas_thread_is_set_around_the_pool_and_put_back_once(monkeypatch):
    """each_of(one_blas=True): BLAS runs one thread while the calls run (every call sees it, in the
    pool and without one) and the previous count is back after the pool, also when a call raises;
    without one_blas the count is left alone."""
    from threadpoolctl import threadpool_info

    def blas_threads(_=None):
        return sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})

    before = blas_threads()
    one = [1] if before else []  # numpy's wheels carry OpenBLAS: before is its count, e.g. [2]
    monkeypatch.setattr(hostpass, "threads", lambda: 3)
    seen = hostpass.each_of([1, 2, 3, 4], blas_threads, one_blas=True)
    assert seen == [one] * 4 and blas_threads() == before
    with pytest.raises(ZeroDivisionError):
        hostpass.each_of([1, 0], lambda i: 1 // i, one_blas=True)
    assert blas_threads() == before
    assert hostpass.each_of([7], blas_threads, one_blas=True) == [one]  # one call: no pool
    assert hostpass.each_of([7, 8], blas_threads) == [before, before]


def test_abs_times_in_row_blocks_is_the_whole_product(pooled, monkeypatch):
    """verify._abs_times (|A| v for Freivalds' row bound) in threaded blocks of a power of two rows
    within the element budget: the whole product's row sums (to BLAS's rounding)."""
    from gemmlab.stages import verify
    rng = np.random.default_rng(4)
    x, v = rng.standard_normal((50, 7)), np.abs(rng.standard_normal(7))
    monkeypatch.setattr(verify, "ABS_BLOCK_ELEMENTS", 64)  # 8 rows a block: 7 blocks, 3 threads
    got = verify._abs_times(x, v)
    assert got.shape == (50,) and np.allclose(got, np.abs(x) @ v, rtol=1e-14, atol=0) and pooled
    assert verify._abs_times(x[:0], v).shape == (0,)


def test_freivalds_blocks_in_threads_give_the_one_thread_verdict(pooled, monkeypatch):
    """verify._freivalds reads C in blocks, now in threads: the verdict (and its worst error over
    tolerance) is the one computed block after block; a NaN in any block still fails it."""
    from gemmlab.stages import verify
    rng = np.random.default_rng(8)
    c = rng.standard_normal((40, 9)).astype(np.float32)
    xs = [rng.choice([-1.0, 1.0], size=9) for _ in range(2)]
    sides = {"xs": xs, "rhs": [c.astype(np.float64) @ x * (1 + 1e-9) for x in xs], "N": 9,
             "bound_rows": np.full(40, 1e-6), "ref_coefficient": 2.0**-24}
    monkeypatch.setattr(verify, "FREIVALDS_BLOCK_BYTES", 8 * 9 * 3)  # 3 rows a block: 14 blocks
    threaded = verify._freivalds(c, sides, "bound", verify.VerifyOptions())
    monkeypatch.setattr(hostpass, "threads", lambda: 1)
    assert verify._freivalds(c, sides, "bound", verify.VerifyOptions()) == threaded and pooled
    c[37, 4] = np.nan
    assert not verify._freivalds(c, sides, "bound", verify.VerifyOptions())["passed"]
