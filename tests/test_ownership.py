"""Index-arithmetic models of the built-in kernels (KernelSpec.ownership), replayed in numpy.

Every C element must be stored by exactly one thread of the grid, and every staged shared-memory
tile element must be written exactly once per reduction chunk. The tests also prove the check has
teeth (a wrong mapping is detected) and that the parameter rules reject what the kernels cannot run.
"""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.gpu.device import offline_facts
from gemmlab.contract.hookspecs import ParamError, Shape
from gemmlab.contract.plugin_utils import add_hits, cdiv, count_hits
from gemmlab.contract.registry import load_registry

FACTS = offline_facts("90")
REGISTRY = load_registry(entry_points=False)


def spec(name):
    return REGISTRY.get(name)


def params(name, **overrides):
    p = dict(spec(name).defaults)
    p.update(overrides)
    return p


def assert_all_ones(counts: np.ndarray, what: str) -> None:
    """Every element hit exactly once; the message names how many are missed / hit twice."""
    counts = np.asarray(counts)
    assert counts.dtype == np.int64, f"{what}: dtype {counts.dtype}"
    zero, multi = int((counts == 0).sum()), int((counts > 1).sum())
    if zero or multi or counts.size == 0:
        first = np.argwhere(counts != 1)[:3].tolist()
        raise AssertionError(f"{what}: {zero} elements never hit, {multi} hit more than once "
                             f"(first at {first}) of {counts.size}")


def check_model(name: str, shape: Shape, p: dict, expect_loads: dict | None = None) -> None:
    spec(name).check(shape, p, FACTS)  # the parameter set must be valid in the first place
    model = spec(name).ownership(shape, p)
    assert model is not None, f"{name} has no ownership model"
    stores, loads = model
    assert stores.shape == (shape.M, shape.N)
    assert_all_ones(stores, f"{name} stores {shape} {p}")
    assert stores.sum() == shape.M * shape.N
    if expect_loads is not None:
        assert {k: v.shape for k, v in loads.items()} == expect_loads
    for tile, hits in loads.items():
        assert_all_ones(hits, f"{name} staging of {tile} {p}")


ODD_SHAPES = [Shape(31, 33, 17), Shape(63, 65, 33), Shape(1, 1, 1), Shape(129, 255, 1000)]


# --- naive and tiled -----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
def test_naive_default_one_owner(shape):
    check_model("naive", shape, params("naive"), expect_loads={})


@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
@pytest.mark.parametrize("bx, by", [(32, 8), (1, 1), (7, 5)])
def test_naive_other_blocks_one_owner(shape, bx, by):
    check_model("naive", shape, params("naive", BX=bx, BY=by))


@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
def test_tiled_default_one_owner(shape):
    check_model("tiled", shape, params("tiled"), expect_loads={"A": (64, 16), "B": (16, 64)})


TILED_VARIANTS = [
    dict(BM=32, BN=64, BK=8, TM=4, TN=2),
    dict(BM=128, BN=128, BK=8, TM=8, TN=8),
    dict(BM=64, BN=32, BK=32, TM=4, TN=4),
    dict(BM=16, BN=16, BK=16, TM=1, TN=1),
]


@pytest.mark.parametrize("variant", TILED_VARIANTS, ids=lambda v: "-".join(f"{k}{x}" for k, x in v.items()))
@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
def test_tiled_variants_one_owner(shape, variant):
    check_model("tiled", shape, params("tiled", **variant),
                expect_loads={"A": (variant["BM"], variant["BK"]), "B": (variant["BK"], variant["BN"])})


def test_tiled_variant_launch_matches_model():
    p = params("tiled", BM=128, BN=128, BK=8, TM=8, TN=8)
    launch = spec("tiled").launch(Shape(129, 255, 1000), p, FACTS)
    assert launch.grid == (2, 2, 1)
    assert launch.block == (16, 16, 1)
    assert launch.shared_bytes == 0


# --- ladder kernels ------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [64, 128, 512])
def test_ladder_starter_one_owner(n):
    check_model("ladder_starter", Shape(n, n, n), params("ladder_starter"), expect_loads={"A": (64, 8), "B": (8, 64)})


@pytest.mark.parametrize("n", [64, 128, 512])
@pytest.mark.parametrize("tm", [16, 8, 32])
def test_ladder_strip_one_owner(n, tm):
    check_model("ladder_strip", Shape(n, n, n), params("ladder_strip", TM=tm),
                expect_loads={"A": (64, 8), "B": (8, 64)})


@pytest.mark.parametrize("tm, threads", [(16, 256), (8, 512), (32, 128), (4, 1024), (64, 64)])
def test_ladder_strip_launch(tm, threads):
    launch = spec("ladder_strip").launch(Shape(128, 128, 128), params("ladder_strip", TM=tm), FACTS)
    assert launch.grid == (4, 1, 1)
    assert launch.block == (threads, 1, 1)


def test_ladder_starter_launch():
    launch = spec("ladder_starter").launch(Shape(512, 512, 512), params("ladder_starter"), FACTS)
    assert launch.grid == (64, 1, 1) and launch.block == (256, 1, 1)


# --- the check has teeth -------------------------------------------------------------------------

def test_assert_all_ones_accepts_ones():
    assert_all_ones(np.ones((3, 4), dtype=np.int64), "ones")


@pytest.mark.parametrize("bad", [np.zeros((2, 2), np.int64), np.array([[1, 2], [1, 1]]), np.array([[1, 1], [0, 1]]),
                                 np.ones((2, 2), np.int32)])
def test_assert_all_ones_rejects(bad):
    with pytest.raises(AssertionError):
        assert_all_ones(bad, "bad")


def _wrong_tiled_stores(shape: Shape, p: dict, column) -> np.ndarray:
    """The tiled store model with the column mapping replaced by ``column(bx, tx, j, tx_n)``."""
    tx_n, ty_n = p["BN"] // p["TN"], p["BM"] // p["TM"]
    gx, gy = cdiv(shape.N, p["BN"]), cdiv(shape.M, p["BM"])
    by, bx, ty, tx, i, j = np.ix_(range(gy), range(gx), range(ty_n), range(tx_n), range(p["TM"]), range(p["TN"]))
    row = by * p["BM"] + ty + i * ty_n
    col = column(bx, tx, j, tx_n)
    return count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N))


def test_right_tiled_mapping_passes_in_replica():
    p, shape = params("tiled"), Shape(63, 65, 33)
    stores = _wrong_tiled_stores(shape, p, lambda bx, tx, j, tx_n: bx * p["BN"] + tx + j * tx_n)
    assert_all_ones(stores, "replica of the right mapping")
    np.testing.assert_array_equal(stores, spec("tiled").ownership(shape, p)[0])


def test_wrong_tiled_mapping_double_count_detected():
    # stride TX-1 instead of TX: thread tx=TX-1, j=0 and thread tx=0, j=1 store the same column
    p, shape = params("tiled"), Shape(63, 65, 33)
    stores = _wrong_tiled_stores(shape, p, lambda bx, tx, j, tx_n: bx * p["BN"] + tx + j * (tx_n - 1))
    with pytest.raises(AssertionError, match="hit more than once"):
        assert_all_ones(stores, "wrong stride")
    assert stores.max() == 2
    assert (stores == 0).any()  # and the last column of each block is never written


def test_wrong_tiled_mapping_dropped_column_detected():
    # a clamp that drops the last column of every block tile
    p, shape = params("tiled"), Shape(64, 128, 16)
    stores = _wrong_tiled_stores(shape, p,
                                 lambda bx, tx, j, tx_n: bx * p["BN"] + np.minimum(tx + j * tx_n, p["BN"] - 2))
    with pytest.raises(AssertionError, match="never hit"):
        assert_all_ones(stores, "dropped column")
    assert (stores[:, 63] == 0).all() and (stores[:, 127] == 0).all()


def test_wrong_model_subclass_detected(monkeypatch):
    """A TiledKernel whose model forgets the TM loop stride (row = ty*TM + i would be right; row = ty + i
    makes rows overlap) fails check_model."""
    cls = type(spec("tiled"))

    class Wrong(cls):
        def ownership(self, shape, p):
            tx_n, ty_n = p["BN"] // p["TN"], p["BM"] // p["TM"]
            gx, gy = cdiv(shape.N, p["BN"]), cdiv(shape.M, p["BM"])
            by, bx, ty, tx, i, j = np.ix_(range(gy), range(gx), range(ty_n), range(tx_n), range(p["TM"]), range(p["TN"]))
            row, col = by * p["BM"] + ty + i, bx * p["BN"] + tx + j * tx_n
            return count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N)), {}

    wrong = Wrong(name="tiled", source="tiled.cu", defaults=dict(spec("tiled").defaults))
    monkeypatch.setitem(REGISTRY.kernels, "tiled", wrong)
    with pytest.raises(AssertionError):
        check_model("tiled", Shape(63, 65, 33), params("tiled"))


def test_missing_store_mask_is_index_error():
    # naive without its row/col guard writes past C on a partial tile
    shape, bx, by = Shape(31, 33, 17), 16, 16
    block_y, block_x, ty, tx = np.ix_(range(cdiv(shape.M, by)), range(cdiv(shape.N, bx)), range(by), range(bx))
    with pytest.raises(IndexError, match="index outside"):
        count_hits((shape.M, shape.N), block_y * by + ty, block_x * bx + tx)


def test_count_hits_counts_and_masks():
    hits = count_hits((2, 3), np.array([0, 0, 1, 5]), np.array([0, 0, 2, 9]), mask=np.array([1, 1, 1, 0], bool))
    np.testing.assert_array_equal(hits, [[2, 0, 0], [0, 0, 1]])
    assert hits.dtype == np.int64


@pytest.mark.parametrize("rows, cols", [([0, 2], [0, 0]), ([0, 0], [0, 3]), ([-1], [0]), ([0], [-1])])
def test_count_hits_out_of_bounds_unmasked_raises(rows, cols):
    with pytest.raises(IndexError):
        count_hits((2, 3), np.array(rows), np.array(cols))


def test_count_hits_out_of_bounds_masked_is_fine():
    hits = count_hits((2, 3), np.array([0, 7]), np.array([1, 7]), mask=np.array([True, False]))
    assert hits.sum() == 1 and hits[0, 1] == 1


def test_add_hits_adds_into_the_given_counts():
    """add_hits (a model summing many parts, e.g. the wgmma tiles): the same counts as count_hits,
    added in place; an unmasked index outside the array raises and leaves it unchanged."""
    counts = count_hits((2, 3), np.array([0]), np.array([1]))
    same = add_hits(counts, np.array([0, 0, 1, 5]), np.array([0, 0, 2, 9]), mask=np.array([1, 1, 1, 0], bool))
    assert same is counts
    np.testing.assert_array_equal(counts, [[2, 1, 0], [0, 0, 1]])
    with pytest.raises(IndexError):
        add_hits(counts, np.array([2]), np.array([0]))
    np.testing.assert_array_equal(counts, [[2, 1, 0], [0, 0, 1]])


def test_count_hits_empty_after_mask():
    hits = count_hits((2, 2), np.array([9]), np.array([9]), mask=np.array([False]))
    assert hits.shape == (2, 2) and hits.sum() == 0


# --- parameter rules -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, overrides, shape, field, words", [
    ("tiled", dict(TM=3), Shape(64, 64, 64), "kernel.TM", "ownership"),
    ("tiled", dict(TN=3), Shape(64, 64, 64), "kernel.TN", "ownership"),
    ("tiled", dict(BK=7), Shape(64, 64, 64), "kernel.BK", "load coverage"),
    ("tiled", dict(TM=1, TN=1), Shape(64, 64, 64), "kernel.TM", "exceeds the device limit 1024"),
    ("tiled", dict(BM=2048), Shape(64, 64, 64), "kernel.TM",  # the values say which factor is out of line
     "(BN/TN)*(BM/TM)=(64/2)*(2048/8)=8192 threads exceeds the device limit 1024; raise TM or TN, or lower BM or BN"),
    ("tiled", dict(BK=128), Shape(64, 64, 64), "kernel.BK", "shared memory"),
    ("tiled", dict(BM=48), Shape(64, 64, 64), "kernel.BK",  # BM set, BK named: the factors show BM's part
     "the B tile has 16x64=1024 elements, not a multiple of the 192 threads that stage it "
     "((BN/TN)*(BM/TM)=(64/2)*(48/8)); change BK, or BM, BN, TM, TN"),
    ("naive", dict(BX=64, BY=64), Shape(64, 64, 64), "kernel.BX", "exceeds the device limit 1024"),
    ("ladder_strip", dict(TM=3), Shape(128, 128, 128), "kernel.TM", "ownership"),
    ("ladder_strip", dict(TM=2), Shape(128, 128, 128), "kernel.TM", "exceeds the device limit"),
    ("ladder_strip", dict(BK=3), Shape(128, 128, 128), "kernel.BK", "must divide 64"),
    ("ladder_starter", dict(BK=2), Shape(128, 128, 128), "kernel.BK", "load coverage"),
    ("ladder_starter", {}, Shape(128, 64, 128), "shape", "square"),
    ("ladder_starter", {}, Shape(128, 128, 64), "shape", "square"),
    ("ladder_starter", {}, Shape(100, 100, 100), "shape", "multiple of 64"),
    ("ladder_strip", {}, Shape(63, 65, 33), "shape", "square"),
    ("ladder_strip", {}, Shape(96, 96, 96), "shape", "multiple of 64"),
])
def test_check_rejects(name, overrides, shape, field, words):
    with pytest.raises(ParamError) as info:
        spec(name).check(shape, params(name, **overrides), FACTS)
    assert info.value.field == field
    assert words in info.value.message
    assert str(info.value).startswith(f"{field}: ")


@pytest.mark.parametrize("name, field, factors", [
    ("tiled", "kernel.TM", "(BN/TN)*(BM/TM)=(64/2)*(2048/8)=8192"),
    ("sgemm_block2d", "kernel.TM", "(BN/TN)*(BM/TM)=(128/4)*(2048/8)=8192"),
    ("sgemm_warptile", "kernel.WM", "(BN/WN)*(BM/WM)*32=(128/64)*(2048/32)*32=4096"),
    ("sgemm_pipelined", "kernel.WM", "(BN/WN)*(BM/WM)*32=(128/64)*(2048/32)*32=4096"),
    ("streamk", "kernel.WM", "(BN/WN)*(BM/WM)*32=(128/64)*(2048/32)*32=4096"),
    ("mma_bf16", "kernel.WM", "(BN/WN)*(BM/WM)*32=(256/64)*(2048/64)*32=4096"),
    ("mma_tf32", "kernel.WM", "(BN/WN)*(BM/WM)*32=(256/64)*(2048/64)*32=4096"),
])
def test_too_many_threads_shows_each_factor(name, field, factors):
    """BM=2048 (new-user trial): the thread-limit error of every tiled and warp-tiled kernel shows
    the factors with their values and names both ways out, not only the per-thread/warp tile."""
    with pytest.raises(ParamError) as info:
        spec(name).check(Shape(64, 64, 64), params(name, BM=2048), FACTS)
    assert info.value.field == field
    m, n = field[-2:], field[-2] + "N"
    assert info.value.message == (f"thread block {factors} threads exceeds the device limit 1024; "
                                  f"raise {m} or {n}, or lower BM or BN"), info.value.message


@pytest.mark.parametrize("name, overrides, shape", [
    ("tiled", {}, Shape(1, 1, 1)),
    ("tiled", dict(BM=128, BN=128, BK=8, TM=8, TN=8), Shape(63, 65, 33)),
    ("naive", dict(BX=1024, BY=1), Shape(5, 5, 5)),
    ("ladder_starter", {}, Shape(64, 64, 64)),
    ("ladder_strip", dict(TM=4, BK=16), Shape(64, 64, 64)),
    ("ladder_strip", dict(TM=64, BK=1), Shape(64, 64, 64)),
])
def test_check_accepts(name, overrides, shape):
    spec(name).check(shape, params(name, **overrides), FACTS)


def test_check_uses_device_limits():
    small = offline_facts("90").__class__(name="tiny", arch="90", sm_count=1, max_threads_per_block=128,
                                          max_shared_per_block=4096)
    with pytest.raises(ParamError) as info:
        spec("tiled").check(Shape(64, 64, 64), params("tiled"), small)  # 256 threads > 128
    assert info.value.field == "kernel.TM"
    with pytest.raises(ParamError) as info:
        spec("tiled").check(Shape(64, 64, 64), params("tiled", TM=16, TN=4), small)  # 8 KiB smem > 4 KiB
    assert info.value.field == "kernel.BK"


@pytest.mark.parametrize("name", ["tiled", "splitk", "cluster_tiled"])
@pytest.mark.parametrize("overrides, field, words", [
    (dict(TM=3), "kernel.TM", "ownership (each output row has exactly one owner): BM=64 must be a multiple of TM=3"),
    (dict(TN=3), "kernel.TN", "ownership (each output column"),
    (dict(TM=1, TN=1), "kernel.TM", "threads exceeds the device limit 1024; raise TM or TN"),
    (dict(BK=7), "kernel.BK", "load coverage: the A"),
    (dict(BK=128), "kernel.BK", "static shared memory 4*(BM*BK+BK*BN)="),
])
def test_tiled_scheme_rules_are_one_check(name, overrides, field, words):
    """tiled, splitk and cluster_tiled refuse a tile set by the same rules, in the same words
    (gemmlab.contract.plugin_utils.check_tiled_tiles; cluster_tiled's A tile is the half each CTA stages)."""
    facts = offline_facts("90")
    with pytest.raises(ParamError) as info:
        spec(name).check(Shape(64, 64, 64), params(name, **overrides), facts)
    assert info.value.field == field and words in info.value.message
    if name == "cluster_tiled" and "load coverage" in words:
        assert "the A half tile" in info.value.message
