"""Index models of the issue-10 kernels (gemv_rows, small_tile), replayed in numpy: every C element
stored by exactly one thread, every staged element (A stage, B rows, partial sums, K slices)
covered exactly once; the parameter rules reject what the kernels cannot run; and the models have
teeth (a wrong mapping is caught)."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.gpu.device import offline_facts
from gemmlab.contract.hookspecs import ParamError, Shape
from gemmlab.contract.registry import load_registry

FACTS = offline_facts("90")
REGISTRY = load_registry(entry_points=False)
SHAPES = [Shape(1, 1, 1), Shape(1, 4096, 64), Shape(5, 37, 33), Shape(16, 130, 1000), Shape(64, 257, 19),
          Shape(35, 79, 19)]


def check(name: str, shape: Shape, **overrides) -> dict:
    spec = REGISTRY.get(name)
    p = {**dict(spec.defaults), **overrides}
    spec.check(shape, p, FACTS)
    stores, loads = spec.ownership(shape, p)
    assert stores.shape == (shape.M, shape.N)
    assert (stores == 1).all(), f"{name} {shape} {p}: {(stores == 0).sum()} unwritten, {(stores > 1).sum()} twice"
    for tile, hits in loads.items():
        assert hits.size and (hits == 1).all(), f"{name} {p}: {tile} coverage {np.unique(hits)}"
    return loads


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("p", [dict(MT=1, NT=32, KW=8, U=8), dict(MT=16, NT=32, KW=8, U=8),
                               dict(MT=8, NT=16, KW=8, U=8), dict(MT=16, NT=128, KW=4, U=8),
                               dict(MT=3, NT=4, KW=1, U=1), dict(MT=4, NT=64, KW=2, U=16)], ids=str)
def test_gemv_rows_one_owner_exact_coverage(shape, p):
    loads = check("gemv_rows", shape, **p)
    kc = p["U"] * 32 * p["KW"] // (p["NT"] // 4)
    assert loads["A"].shape == (kc, p["MT"]) and loads["B"].shape == (kc, p["NT"])
    assert loads["partials"].shape == (p["KW"], p["MT"] * p["NT"])


@pytest.mark.parametrize("shape", SHAPES + [Shape(256, 256, 65536)], ids=str)
@pytest.mark.parametrize("p", [dict(BX=16, BY=16, KS=4), dict(BX=16, BY=16, KS=1), dict(BX=16, BY=8, KS=8),
                               dict(BX=7, BY=3, KS=5)], ids=str)
def test_small_tile_one_owner_every_k_once(shape, p):
    loads = check("small_tile", shape, **p)
    assert loads["K"].shape == (1, shape.K)


@pytest.mark.parametrize("name, p, field", [
    ("gemv_rows", dict(NT=12), "kernel.NT"),
    ("gemv_rows", dict(MT=32), "kernel.MT"),
    ("gemv_rows", dict(KW=33), "kernel.KW"),
    ("gemv_rows", dict(MT=16, NT=128, KW=8), "kernel.KW"),  # 64 KiB of partials > 48 KiB
    ("gemv_rows", dict(U=17), "kernel.U"),
    ("small_tile", dict(BX=32, BY=32, KS=2), "kernel.KS"),
    ("small_tile", dict(BX=1, BY=1, KS=65), "kernel.KS"),
])
def test_rules_reject(name, p, field):
    spec = REGISTRY.get(name)
    with pytest.raises(ParamError) as exc:
        spec.check(Shape(16, 4096, 4096), {**dict(spec.defaults), **p}, FACTS)
    assert exc.value.field == field


def test_models_have_teeth(monkeypatch):
    """A gemv_rows mapping that drops the last column group, or a small_tile slice rounding down,
    is caught by the same assertions."""
    import gemmlab_plugins.gemv_rows as gv
    real = gv._geometry
    monkeypatch.setattr(gv, "_geometry", lambda p: (lambda t, l, ks, kc: (t, l, ks, kc - 1))(*real(p)))
    with pytest.raises((AssertionError, IndexError)):  # a hole in the B rows, or a write outside the stage
        check("gemv_rows", Shape(16, 130, 1000), MT=16, NT=32, KW=8, U=8)
    monkeypatch.undo()
    spec = REGISTRY.get("small_tile")
    p = dict(BX=16, BY=16, KS=4)
    k = 1001
    slice_floor = k // 4  # the bug: slices of K // KS drop the tail
    covered = np.zeros(k, dtype=np.int64)
    for z in range(4):
        covered[z * slice_floor:(z + 1) * slice_floor] += 1
    assert not (covered == 1).all()
    assert (spec.ownership(Shape(3, 3, k), p)[1]["K"] == 1).all()


def test_entries_and_launch():
    gv, st = REGISTRY.get("gemv_rows"), REGISTRY.get("small_tile")
    assert gv.entry(dict(MT=16, NT=32, KW=8, U=8)) == "gemm_gemv_rows<16, 32, 8, 8>"
    launch = gv.launch(Shape(64, 11008, 4096), dict(MT=16, NT=32, KW=8, U=8), FACTS)
    assert launch.grid == (4, 344, 1) and launch.block == (256, 1, 1)
    assert st.entry(dict(BX=16, BY=16, KS=4)) == "gemm_small_tile<16, 16, 4>"
    assert st.launch(Shape(35, 79, 19), dict(BX=16, BY=16, KS=4), FACTS).grid == (5, 3, 1)


@pytest.mark.parametrize("shape", SHAPES + [Shape(256, 256, 4099)], ids=str)
@pytest.mark.parametrize("p", [dict(BM=32, BN=32, BK=16, TM=4, TN=4, KS=4), dict(BM=16, BN=32, BK=16, TM=4, TN=4, KS=8),
                               dict(BM=64, BN=64, BK=16, TM=4, TN=4, KS=2), dict(BM=32, BN=64, BK=8, TM=8, TN=8, KS=4),
                               dict(BM=16, BN=16, BK=7, TM=4, TN=4, KS=3)], ids=str)
def test_slicedk_one_owner_exact_coverage(shape, p):
    loads = check("slicedk", shape, **p)
    assert loads["K"].shape == (1, shape.K) and loads["partials"].shape == (p["KS"], p["BM"] * p["BN"])


@pytest.mark.parametrize("p, field", [(dict(TM=2), "kernel.TM"), (dict(TN=6), "kernel.TN"), (dict(BM=34), "kernel.TM"),
                                      (dict(KS=32), "kernel.KS"), (dict(BM=64, BN=64, KS=4, BK=32), "kernel.BK")])
def test_slicedk_rules_reject(p, field):
    spec = REGISTRY.get("slicedk")
    with pytest.raises(ParamError) as exc:
        spec.check(Shape(64, 64, 64), {**dict(spec.defaults), **p}, FACTS)
    assert exc.value.field == field
