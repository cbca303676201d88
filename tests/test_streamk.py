"""CPU tests of ``splitk_warptile`` and ``streamk`` (plugins/streamk.py, kernels/streamk.cu):
ownership models (one owner per output, every BK chunk of every tile computed once, every written
workspace slot read once by the fixup), the stream-K schedule, launch plans, parameter rules and a
compile of each kernel (ptxas report: no spills; SASS: FFMA, LDS.128, LDG.128). GPU exactness is in
tests/test_gpu_shapes.py."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.gpu.compile import CompileOptions, compile_kernel
from gemmlab.gpu.device import offline_facts
from gemmlab.contract.hookspecs import Extra, Main, ParamError, Problem, Shape, Value, Workspace
from gemmlab.paths import KERNELS_DIR
from gemmlab.contract.registry import load_registry

FACTS = offline_facts("90")
REGISTRY = load_registry(entry_points=False)
MODULE = __import__("gemmlab_plugins.streamk", fromlist=["schedule"])
ODD = [Shape(31, 33, 17), Shape(63, 65, 33), Shape(1, 1, 1), Shape(4097, 1, 3), Shape(129, 255, 1000),
       Shape(1000, 3000, 777), Shape(256, 256, 4096), Shape(640, 100, 100)]  # the last: hybrid on 1 SM
SMALL_TILES = [{}, dict(BM=64, BN=128, WM=32, WN=64, MINB=4), dict(BM=16, BN=128, BK=16, WM=16, WN=64, TM=4, TN=8, MINB=4),
               dict(BK=16, WPS=1)]


def params(name, **overrides):
    return {**REGISTRY.get(name).defaults, **overrides}


def assert_all_ones(counts, what):
    counts = np.asarray(counts)
    zero, multi = int((counts == 0).sum()), int((counts > 1).sum())
    assert counts.size and not zero and not multi, f"{what}: {zero} never hit, {multi} hit more than once, of {counts.size}"


def check(stores_loads, shape, what):
    stores, loads = stores_loads
    assert stores.shape == (shape.M, shape.N)
    assert_all_ones(stores, f"{what} stores")
    for name, hits in loads.items():
        assert_all_ones(hits, f"{what} {name}")


@pytest.mark.parametrize("shape", ODD, ids=str)
@pytest.mark.parametrize("sms", [132, 3, 1])
def test_streamk_one_owner(shape, sms):
    """Pure stream-K (few tiles), the hybrid and pure data-parallel (whole waves) all write every
    output once; with 3 or 1 SMs the small shapes take the hybrid and data-parallel paths."""
    s = REGISTRY.get("streamk")
    for overrides in SMALL_TILES:
        p = params("streamk", **overrides)
        s.check(shape, p, FACTS)
        check(s.ownership(shape, p, sm_count=sms), shape, f"streamk {p} on {sms} SMs")


@pytest.mark.parametrize("shape", ODD, ids=str)
def test_splitk_warptile_one_owner(shape):
    s = REGISTRY.get("splitk_warptile")
    for overrides in ({}, dict(SPLITS=1), dict(SPLITS=7), dict(SPLITS=64, BK=16), SMALL_TILES[1]):
        p = params("splitk_warptile", **overrides)
        s.check(shape, p, FACTS)
        check(s.ownership(shape, p), shape, f"splitk_warptile {p}")


def test_schedule_paths_cover_all_modes():
    """The hybrid split of Osama et al.: all tiles stream-K below one wave of workers (fewer workers
    when K is short), data-parallel at whole or 90%-full waves, else the last full wave plus the
    remainder."""
    p = params("streamk")
    sched = MODULE.schedule
    s = sched(Shape(256, 256, 65536), p, 132)  # 4 tiles, 264 workers
    assert (s.tiles, s.workers, s.sk_tiles, s.dp_tiles, s.blocks) == (4, 264, 4, 0, 264)
    s = sched(Shape(512, 512, 512), p, 132)  # 16 tiles x 64 chunks: one worker per 8 chunks
    assert (s.workers, s.sk_tiles, s.blocks) == (128, 16, 128)
    s = sched(Shape(64, 64, 16), p, 132)  # one tile of 2 chunks: one worker, i.e. data-parallel
    assert (s.workers, s.sk_tiles, s.blocks) == (1, 0, 1)
    s = sched(Shape(2048, 2048, 2048), p, 132)  # 256 tiles >= 90% of 264: data-parallel
    assert (s.sk_tiles, s.blocks) == (0, 256)
    s = sched(Shape(128 * 33, 128 * 16, 64), p, 132)  # 528 tiles = 2 waves of 264
    assert (s.sk_tiles, s.blocks) == (0, 528)
    s = sched(Shape(128 * 40, 128 * 10, 64), p, 132)  # 400 tiles: 136 + 264 stream-K, no DP
    assert (s.sk_tiles, s.dp_tiles, s.blocks) == (400, 0, 264)
    s = sched(Shape(128 * 70, 128 * 10, 64), p, 132)  # 700 tiles: 172 + 264 stream-K, 264 DP
    assert (s.sk_tiles, s.dp_tiles, s.blocks) == (436, 264, 528)


def test_streamk_model_has_teeth(monkeypatch):
    """An owner formula off by one (the fixup reads the wrong workers) and a schedule that drops
    the last iteration both fail the model."""
    shape, p = Shape(256, 256, 4096), params("streamk")
    s = REGISTRY.get("streamk")
    check(s.ownership(shape, p), shape, "intact")
    good_owner = MODULE.Schedule.owner
    monkeypatch.setattr(MODULE.Schedule, "owner", lambda self, x: good_owner(self, x + 1) if x else 0)
    with pytest.raises(AssertionError):
        check(s.ownership(shape, p), shape, "owner off by one")
    monkeypatch.setattr(MODULE.Schedule, "owner", good_owner)
    good_start = MODULE.Schedule.start
    monkeypatch.setattr(MODULE.Schedule, "start",
                        lambda self, w: good_start(self, w) - (1 if w == self.workers else 0))
    with pytest.raises(AssertionError):
        check(s.ownership(shape, p), shape, "last iteration dropped")


def test_streamk_plan_arguments_and_workspace():
    s, p = REGISTRY.get("streamk"), params("streamk")
    problem = Problem(Shape(1000, 3000, 777))  # 192 tiles < 264 workers: all stream-K
    plan = s.plan(problem, p, FACTS)
    assert isinstance(plan[0], Main) and isinstance(plan[1], Extra) and len(plan) == 2
    assert plan[1].entry == "gemm_streamk_fixup<128, 128, 8, 2>" and plan[1].launch.grid == (192, 8, 1)
    assert s.workspace_bytes(problem, p, FACTS) == 4 * 2 * 264 * 128 * 128
    args = s.arguments(problem, p, FACTS)
    assert Workspace() in args and args[-2:] == (Value(264, "int32"), Value(192, "int32"))
    assert s.geometry(problem, p, FACTS).grid == (264, 1, 1)
    whole = Problem(Shape(128 * 33, 128 * 16, 64))  # whole waves: data-parallel only, no fixup
    assert s.plan(whole, p, FACTS) == (Main(),)
    assert s.arguments(whole, p, FACTS)[-2:] == (Value(0, "int32"), Value(0, "int32"))
    assert s.workspace_bytes(whole, p, FACTS) == 4 * 128 * 128


def test_splitk_warptile_plan_and_ranges():
    s, p = REGISTRY.get("splitk_warptile"), params("splitk_warptile", SPLITS=5)
    problem = Problem(Shape(33, 65, 1000))
    assert s.workspace_bytes(problem, p, FACTS) == 4 * 5 * 33 * 65
    plan = s.plan(problem, p, FACTS)
    assert plan[1].entry == "gemm_warptile_reduce" and plan[1].arguments[-1] == Value(5, "int32")
    assert s.geometry(problem, p, FACTS).grid == (1, 1, 5)
    for K, BK, splits in ((1, 8, 4), (1000, 8, 7), (65536, 8, 66), (3, 16, 2)):
        covered = np.zeros(K, dtype=np.int64)
        for begin, end in MODULE.k_ranges(K, BK, splits):
            assert begin <= end and (begin % BK == 0 or begin == K)
            covered[begin:end] += 1
        assert (covered == 1).all()


@pytest.mark.parametrize("name, overrides, field", [
    ("streamk", dict(WPS=0), "kernel.WPS"), ("streamk", dict(TM=4), "kernel.TM"),
    ("streamk", dict(MINB=9), "kernel.MINB"), ("splitk_warptile", dict(SPLITS=0), "kernel.SPLITS"),
    ("splitk_warptile", dict(BK=4), "kernel.BK"), ("splitk_warptile", dict(TN=6, WN=48), "kernel.WN"),
])
def test_rules_refuse(name, overrides, field):
    with pytest.raises(ParamError) as err:
        REGISTRY.get(name).check(Shape(64, 64, 64), params(name, **overrides), FACTS)
    assert err.value.field == field


@pytest.mark.parametrize("name", ["streamk", "splitk_warptile"])
def test_compiles_without_spills(name):
    """Default tile: at most 128 registers (2 blocks of 256 threads per SM, as sgemm_warptile), no
    local memory, FFMA fed by LDS.128 and LDG.128 (NVRTC's ptxas report, pip nvdisasm)."""
    s, p = REGISTRY.get(name), params(name)
    problem = Problem(Shape(1000, 3000, 777))
    extras = tuple(step.entry for step in s.plan(problem, p, FACTS) if isinstance(step, Extra))
    compiled = compile_kernel(KERNELS_DIR / s.source, s.instance(problem, p),
                              CompileOptions.for_kernel("90", s.options(problem, p, FACTS)), extra_names=extras,
                              persistent=True)  # the session's disk cache (tests/conftest.py)
    res = compiled.resources
    assert res is not None and res.registers <= 128 and res.spill_store_bytes == 0 and res.spill_load_bytes == 0
    hist = compiled.sass["histogram"]
    assert hist["FFMA"] > 0 and hist["LDS.128"] > 0 and hist["LDG.128"] > 0 and hist["LDL"] == 0


def test_hybrid_has_split_and_whole_tiles():
    """Shape(640, 100, 100) on one SM: 5 tiles, 2 workers share 3 stream-K tiles (one split
    between them), 2 data-parallel tiles."""
    s = MODULE.schedule(Shape(640, 100, 100), params("streamk"), 1)
    assert (s.workers, s.sk_tiles, s.dp_tiles) == (2, 3, 2)
    pieces = [seg for w in range(s.workers) for seg in s.segments(w)]
    assert sorted(slot for *_, slot in pieces) == [-1, -1, 0, 1]
