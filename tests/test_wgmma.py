"""CPU tests of the persistent warp-specialised wgmma rungs (``wgmma_bf16``, ``wgmma_tf32``,
kernels/wgmma_bf16.cu, included by wgmma_tf32.cu): the tile schedule and ownership model (one
owner per output over the whole persistent grid, every staged element loaded once), the
parameter and TMA rules, the tensor-map boxes per layout, the experiment ``tc_ladder``, and a compile of each variant (NVRTC, sm_90a) whose
SASS has HGMMA and UTMALDG and no local-memory traffic, also through gemmlab's own pipeline in
``mode=compile``."""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.gpu.compile import CompileOptions, compile_kernel
from gemmlab.gpu.device import offline_facts
from gemmlab.contract.hookspecs import ParamError, Problem, Shape, TensorMap
from gemmlab.paths import CONF_DIR, KERNELS_DIR
from gemmlab.contract.registry import load_registry

FACTS = offline_facts("90")
REGISTRY = load_registry(entry_points=False)
SUITE = [Shape(1, 1, 1), Shape(31, 33, 17), Shape(63, 65, 33), Shape(4097, 1, 3), Shape(35, 79, 19),
         Shape(100, 100, 100), Shape(2100, 2050, 136), Shape(4096, 4096, 64)]
VARIANTS = [{}, {"CLUSTER": 2}, {"BM": 256, "BN": 128, "GROUP_M": 3}, {"BN": 64, "CLUSTER": 2, "GROUP_M": 1},
            {"SCHED": 2, "BN": 128, "STAGES": 6}, {"SCHED": 2, "BN": 128, "CLUSTER": 2},
            {"SCHED": 2, "BM": 64, "STAGES": 5}]


def spec(name):
    return REGISTRY.get(name)


def params(name, **overrides):
    return {**spec(name).defaults, **overrides}


def all_ones(counts, what):
    counts = np.asarray(counts)
    zero, multi = int((counts == 0).sum()), int((counts > 1).sum())
    assert counts.size and not zero and not multi, f"{what}: {zero} never hit, {multi} hit more than once"


@pytest.mark.parametrize("shape", SUITE, ids=str)
def test_one_owner_per_output_over_the_persistent_grid(shape):
    s = spec("wgmma_bf16")
    for overrides in VARIANTS:
        p = params("wgmma_bf16", **overrides)
        stores, loads = s.ownership(shape, p)
        assert stores.shape == (shape.M, shape.N)
        all_ones(stores, f"{p} stores")
        for tile, hits in loads.items():
            all_ones(hits, f"{p} staging {tile}")


@pytest.mark.parametrize("over", [{"EPI": 1}, {"EPI": 4}, {"EPI": 5, "CLUSTER": 2}, {"EPI": 4, "SCHED": 2, "BN": 128, "STAGES": 6},
                                  {"EPI": 2, "TAIL": 2}, {"EPI": 7}, {"EPI": 7, "CLUSTER": 2}], ids=str)
def test_one_owner_per_output_with_each_epilogue(over):
    """The default (EPI=2) runs in the test above; the register epilogue, the staged coalesced
    stores, the held-stage TMA store and the mix of TMA-stored and split tiles here."""
    s = spec("wgmma_bf16")
    for shape in (Shape(2100, 2052, 136), Shape(31, 36, 17), Shape(4097, 4, 3), Shape(63, 65, 33)):
        stores, _ = s.ownership(shape, params("wgmma_bf16", **over))
        all_ones(stores, f"{over} {shape} stores")


@pytest.mark.parametrize("BM, BN, ping", [(128, 256, False), (256, 128, False), (128, 128, True), (64, 256, True)])
def test_staged_store_boxes_cover_the_tile_once(BM, BN, ping):
    """The staged epilogue's index arithmetic (TMA boxes, EPI=4's per-lane float4s) writes each
    element of a BM x BN tile exactly once, each float4 16-byte aligned; a box one row short or
    a lane mapping off by one is caught (the model has teeth)."""
    module = __import__("gemmlab_plugins.wgmma_bf16", fromlist=["staged_store_coords"])
    from gemmlab.contract.plugin_utils import count_hits
    for tma in (True, False):
        rows, cols = module.staged_store_coords(BM, BN, ping, tma)
        all_ones(count_hits((BM, BN), rows, cols), f"{BM}x{BN} tma={tma}")
        if not tma:
            assert (np.broadcast_to(cols, np.broadcast_shapes(rows.shape, cols.shape))[..., 0] % 4 == 0).all()
    rows, cols = module.staged_store_coords(BM, BN, ping, True)
    with pytest.raises(AssertionError):
        all_ones(count_hits((BM, BN), np.minimum(rows, 14) + 0 * cols, cols), "short box")
    rows, cols = module.staged_store_coords(BM, BN, ping, False)
    with pytest.raises(AssertionError):
        all_ones(count_hits((BM, BN), rows, np.minimum(cols + 1, BN - 1)), "lane off by one")


def test_schedule_covers_every_tile_once_and_pairs_clusters():
    """The persistent schedule (the kernel's unit -> tile mapping replayed) visits each tile once,
    on a smaller grid than there are tiles; the two CTAs of a cluster take tile rows 2p, 2p+1 of
    the same tile column, so they can share the B tile."""
    module = __import__("gemmlab_plugins.wgmma_bf16", fromlist=["schedule"])
    shape = Shape(2100, 2050, 136)
    for cl, gm in ((1, 8), (2, 8), (2, 3), (1, 1)):
        p = params("wgmma_bf16", BN=128, CLUSTER=cl, GROUP_M=gm)
        per_cta = module.schedule(shape, p, 20)
        seen = [t for cta in per_cta for t in cta]
        num_m, num_n = -(-2100 // 128), -(-2050 // 128)
        padded_m = -(-num_m // cl) * cl
        assert sorted(seen) == sorted((m, n) for m in range(padded_m) for n in range(num_n))
        if cl == 2:
            for a, b in zip(per_cta[0::2], per_cta[1::2]):
                assert [(m // 2, n) for m, n in a] == [(m // 2, n) for m, n in b]
                assert all(m % 2 == 0 for m, _ in a) and all(m % 2 == 1 for m, _ in b)


SPLIT_SHAPES = [Shape(256, 256, 65536), Shape(300, 129, 200), Shape(100, 100, 1000), Shape(31, 33, 24),
                Shape(1024, 1024, 1024), Shape(130, 260, 4000)]
SPLIT_VARIANTS = [{"SPLIT_K": 3}, {"SPLIT_K": 64}, {"SPLIT_K": 7, "CLUSTER": 2}, {"SPLIT_K": 5, "SCHED": 2, "BN": 128, "STAGES": 6},
                  {"TAIL": 2}, {"TAIL": 2, "CLUSTER": 2}, {"TAIL": 2, "SCHED": 2, "BN": 128, "STAGES": 6},
                  {"TAIL": 3}, {"TAIL": 3, "CLUSTER": 2}, {"TAIL": 3, "SCHED": 2, "BN": 128, "STAGES": 6}]


@pytest.mark.parametrize("name", ["wgmma_bf16", "wgmma_tf32"])
@pytest.mark.parametrize("shape", SPLIT_SHAPES, ids=str)
def test_split_k_and_tail_one_owner_per_k_slice(name, shape):
    """SPLIT_K and the stream-K tail: one plain store per output (sole owner or the split tile's
    storer), every adder item covers its tile once, every k-tile of every tile computed once
    (K not a multiple of SPLIT_K x BK included), each split tile's item count equal to the count
    its flag is reset at; exact staging as without splits."""
    s = spec(name)
    for overrides in SPLIT_VARIANTS:
        p = params(name, **overrides)
        stores, loads = s.ownership(shape, p)
        all_ones(stores, f"{p} stores")
        for tile, hits in loads.items():
            all_ones(hits, f"{p} {tile}")


REDUCE_VARIANTS = [{"SPLIT_K": 3, "REDUCE": 2}, {"SPLIT_K": 64, "REDUCE": 2, "BN": 128},
                   {"SPLIT_K": 7, "CLUSTER": 2, "REDUCE": 2}, {"SPLIT_K": 5, "SCHED": 2, "BN": 128, "STAGES": 6, "REDUCE": 2}]


@pytest.mark.parametrize("name", ["wgmma_bf16", "wgmma_tf32"])
@pytest.mark.parametrize("shape", SPLIT_SHAPES + [Shape(1, 1, 4104), Shape(35, 79, 19)], ids=str)
def test_reduce2_slabs_written_once_and_c_once(name, shape):
    """REDUCE=2: every slab element written once per K slice (S = the effective slices, K not a
    multiple of SPLIT_K x BK included; nothing outside M x N), the reduce step writes every C
    element once (its float4 chunks and scalar tail replayed), the k-tiles computed once."""
    s = spec(name)
    for overrides in REDUCE_VARIANTS:
        p = params(name, **overrides)
        stores, extra = s.ownership(shape, p)
        all_ones(stores, f"{p} reduce writes")
        all_ones(extra["slabs"], f"{p} slab stores")
        all_ones(extra["iterations"], f"{p} k-tiles")


def test_reduce2_plan_workspace_and_arguments():
    """REDUCE=2: the plan is relayout copies, Main, the reduce; the slabs start after the copies'
    regions (256-byte aligned) and the workspace ends after S slabs of M*N rounded to 64 floats;
    the main kernel's destination is the workspace, the reduce reads it and writes C. REDUCE=1:
    plan, arguments, workspace and the instance name as before."""
    from gemmlab.contract.hookspecs import Extra, Main, Matrix, Workspace
    module = __import__("gemmlab_plugins.wgmma_bf16", fromlist=["slab_floats"])
    s = spec("wgmma_bf16")
    for shape, layout_b, copies in ((Shape(31, 33, 1001), "row", 2), (Shape(256, 256, 65536), "col", 0), (Shape(100, 100, 1000), "col", 0)):
        problem = Problem(shape, "bf16", "row", layout_b)
        p = params("wgmma_bf16", SPLIT_K=16, REDUCE=2)
        plan = s.plan(problem, p, FACTS)
        assert len(plan) == copies + 2 and isinstance(plan[copies], Main) and isinstance(plan[-1], Extra)
        assert plan[-1].entry == "wgmma_split_reduce<4>"
        regions_end = max(op.end for op in s.operands(problem, p, FACTS))
        assert all(c.arguments[1].offset < regions_end for c in plan[:copies])
        slab = plan[-1].arguments[0]
        assert isinstance(slab, Workspace) and slab.offset == regions_end and slab.offset % 256 == 0
        assert plan[-1].arguments[1] == Matrix("C") and s.arguments(problem, p, FACTS)[2] == slab
        S = plan[-1].arguments[4].value
        k_tiles = -(-shape.K // 64)
        assert S == -(-k_tiles // -(-k_tiles // 16)) and S <= 16
        assert s.workspace_bytes(problem, p, FACTS) == regions_end + 4 * S * module.slab_floats(shape.M, shape.N)
        assert module.slab_floats(shape.M, shape.N) % 64 == 0
        q = params("wgmma_bf16", SPLIT_K=16)
        assert s.plan(problem, q, FACTS)[-1] == Main(s.epilogue_note(problem, q)) and s.arguments(problem, q, FACTS)[-4] == Matrix("C")
        assert plan[copies].note.startswith("epilogue from registers: REDUCE=2")  # the slabs: no staged epilogue
        assert s.workspace_bytes(problem, q, FACTS) == regions_end
        assert s.instance(problem, q).endswith(", 16, 0>") and s.instance(problem, p).endswith(", 16, 0, 1>")


def test_reduce2_model_has_teeth():
    """A reduce grid replay that drops the scalar tail, or a slab index off by one, fails."""
    module = __import__("gemmlab_plugins.wgmma_bf16", fromlist=["reduce_writes"])
    w = module.reduce_writes(31, 33, 1)
    all_ones(w, "intact")
    real = module.unit_items
    s = spec("wgmma_bf16")
    p = params("wgmma_bf16", SPLIT_K=4, REDUCE=2)
    try:
        module.unit_items = lambda *a: [(u, kb, ke, r, n, min(k + 1, n - 1)) for u, kb, ke, r, n, k in real(*a)]
        with pytest.raises(AssertionError):
            all_ones(s.ownership(Shape(300, 129, 2000), p)[1]["slabs"], "slab index off by one")
    finally:
        module.unit_items = real
    writes = module.reduce_writes(31, 33, 1)
    writes[-1, -1] -= 1  # what a float4-only reduce would leave of 31 x 33 = 1023 elements
    with pytest.raises(AssertionError):
        all_ones(writes, "scalar tail dropped")


def chain_replay(lists: list[list[tuple[int, ...]]], epilogue: float = 0.0) -> tuple[float, dict]:
    """Run every CTA's item list in order, as the kernel does, on a clock of k-tiles (+ ``epilogue``
    per item): an adder (rank r >= 1) finishes no earlier than rank r - 1 of its tile. Returns the
    makespan and each item's (start, end) by (unit, rank); AssertionError when the lists deadlock
    (some CTA waits forever) or a (unit, rank) repeats."""
    done, start = {}, {}
    clock, pos = [0.0] * len(lists), [0] * len(lists)
    moved = True
    while moved:
        moved = False
        for c, items in enumerate(lists):
            while pos[c] < len(items):
                unit, kb, ke, role, n, rank = items[pos[c]]
                end = clock[c] + (ke - kb)
                if rank:
                    if (unit, rank - 1) not in done:
                        break
                    end = max(end, done[(unit, rank - 1)][1])
                assert (unit, rank) not in done, (unit, rank)
                done[(unit, rank)] = (clock[c], end + epilogue)
                clock[c], pos[c], moved = end + epilogue, pos[c] + 1, True
    assert all(p == len(items) for p, items in zip(pos, lists)), "deadlock: a CTA waits on an item never computed"
    return max(clock), done


def test_split_schedule_order_and_tail_balance():
    """No empty k range; every CTA's list runs to its end when each adder waits for rank r - 1 of
    its tile (no deadlock, :func:`chain_replay`), for SPLIT_K slices and both tail orders; the tail
    evens the 4096^3 and 8192^3 waves (128x256 tiles, 132 SMs): a CTA's k-tiles drop from 256 to 249
    (ideal 248.2) and 2048 to 1986; with the k-aligned order (TAIL=3) the tail's CTAs read k-tiles
    at most 8 apart at any time at 4096^3 (range order, TAIL=2: up to 63 apart)."""
    module = __import__("gemmlab_plugins.wgmma_bf16", fromlist=["unit_items"])
    cases = [(2, 1024, 64, 0), (64, 224, 3, 0), (7, 13, 5, 0)]
    cases += [(u, kt, 1, t) for u, kt in ((512, 64), (2048, 128), (32, 16), (153, 16), (600, 64)) for t in (1, 2)]
    for units, kt, sk, tail in cases:
        lists = [module.unit_items(units, 132, c, kt, sk, tail) for c in range(132)]
        assert all(ke > kb for items in lists for _, kb, ke, *_ in items)
        chain_replay(lists, epilogue=4.0)
    for units, kt, before, after in ((512, 64, 256, 249), (2048, 128, 2048, 1986)):
        for tail in (1, 2):
            load = max(sum(ke - kb for _, kb, ke, *_ in module.unit_items(units, 132, c, kt, 1, tail)) for c in range(132))
            assert load == after, (tail, load)
        assert max(sum(ke - kb for _, kb, ke, *_ in module.unit_items(units, 132, c, kt, 1, 0))
                   for c in range(132)) == before
    spread = {}
    for tail in (1, 2):  # k-tile each tail CTA reads at tail step x (3 whole tiles first at 4096^3)
        at = [[kb + i for _, kb, ke, *_ in module.unit_items(512, 132, c, 64, 1, tail)[3:] for i in range(ke - kb)]
              for c in range(132)]
        spread[tail] = max(max(ks[x] for ks in at if x < len(ks)) - min(ks[x] for ks in at if x < len(ks))
                           for x in range(max(map(len, at))))
    assert spread[2] <= 8 < 60 <= spread[1], spread


def test_chain_replay_has_teeth():
    """Two CTAs whose first items each wait for the other's second item deadlock the replay; the
    aligned order (TAIL=3) ranked as the range order (rank 0 = the item ending at K) does not
    deadlock but serialises the tail: each CTA's first item waits for the next CTA's last."""
    crossed = [[(0, 0, 1, 2, 2, 1), (1, 0, 1, 1, 2, 0)], [(1, 0, 1, 2, 2, 1), (0, 0, 1, 1, 2, 0)]]
    with pytest.raises(AssertionError, match="deadlock"):
        chain_replay(crossed)
    module = __import__("gemmlab_plugins.wgmma_bf16", fromlist=["unit_items"])
    lists = [module.unit_items(512, 132, c, 64, 1, 2) for c in range(132)]
    intact, _ = chain_replay(lists, epilogue=4.0)
    bad = [items[:3] + [(u, kb, ke, r, n, n - 1 - k) for u, kb, ke, r, n, k in items[3:]] for items in lists]
    serial, _ = chain_replay(bad, epilogue=4.0)
    assert intact <= 270 < 1000 < serial, (intact, serial)


def test_split_model_has_teeth():
    """A contributor count off by one (the flag would never reset), a repeated rank (a deadlock)
    or an adder that skips a k-tile fails."""
    s = spec("wgmma_bf16")
    module = __import__("gemmlab_plugins.wgmma_bf16", fromlist=["unit_items"])
    real = module.unit_items
    shape, p = Shape(300, 129, 2000), params("wgmma_bf16", SPLIT_K=4)
    try:
        module.unit_items = lambda *a: [(u, kb, ke, r, n + 1, k) for u, kb, ke, r, n, k in real(*a)]
        with pytest.raises(AssertionError):
            all_ones(s.ownership(shape, p)[1]["contributors"], "count off by one")
        module.unit_items = lambda *a: [(u, kb, ke, r, n, max(0, k - 1)) for u, kb, ke, r, n, k in real(*a)]
        with pytest.raises(AssertionError):
            all_ones(s.ownership(shape, p)[1]["contributors"], "rank repeated")
        module.unit_items = lambda *a: [(u, kb + (r == 2), ke, r, n, k) for u, kb, ke, r, n, k in real(*a)]
        with pytest.raises(AssertionError):
            all_ones(s.ownership(shape, p)[1]["iterations"], "k-tile skipped")
    finally:
        module.unit_items = real
    all_ones(s.ownership(shape, p)[1]["iterations"], "intact")


def test_model_has_teeth():
    """A schedule that drops a unit, or a ping-pong model where both warpgroups store, fails."""
    s = spec("wgmma_bf16")
    module = __import__("gemmlab_plugins.wgmma_bf16", fromlist=["work_items"])
    p = params("wgmma_bf16", BN=128)
    real = module.work_items
    try:
        module.work_items = lambda *a: [cta[:-1] if i == 0 else cta for i, cta in enumerate(real(*a))]
        with pytest.raises(AssertionError):
            all_ones(s.ownership(Shape(2100, 2050, 136), p)[0], "dropped unit")
    finally:
        module.work_items = real
    stores, _ = s.ownership(Shape(300, 300, 8), p)
    assert stores.max() == 1


@pytest.mark.parametrize("name, problem, boxes", [
    ("wgmma_bf16", Problem(Shape(100, 100, 104), "bf16", "row", "col"), [(128, 64), (256, 64)]),
    ("wgmma_bf16", Problem(Shape(100, 104, 104), "bf16", "row", "row"), [(128, 64), (64, 64)]),
    ("wgmma_tf32", Problem(Shape(100, 100, 100), "tf32", "row", "col"), [(128, 32), (256, 32)]),
    # column-major A (issue 43): bf16 reads it M-major, 64-column boxes of 64 k-rows (BM/64 per stage);
    # tf32 reads its K-major transposed copy in the workspace, the row-major A's box
    ("wgmma_bf16", Problem(Shape(100, 100, 104), "bf16", "col", "col"), [(64, 64), (256, 64)]),
    ("wgmma_bf16", Problem(Shape(104, 104, 104), "bf16", "col", "row"), [(64, 64), (64, 64)]),
    ("wgmma_tf32", Problem(Shape(100, 100, 100), "tf32", "col", "col"), [(128, 32), (256, 32)]),
])
def test_tensor_maps_per_layout(name, problem, boxes):
    s, p = spec(name), params(name)
    s.check_problem(problem, p, FACTS)
    args = s.arguments(problem, p, FACTS)
    assert [a.box for a in args[:2]] == boxes and all(isinstance(a, TensorMap) and a.swizzle == "128B" for a in args[:2])
    assert s.options(problem, p, FACTS).arch_specific
    launch = s.geometry(problem, p, FACTS)
    assert launch.block == (384, 1, 1) and launch.grid[0] <= FACTS.sm_count and launch.cluster is None
    big = s.geometry(Problem(Shape(4096, 4096, 4096), *problem_args(problem)), params(name, CLUSTER=2), FACTS)
    assert big.grid == (132, 1, 1) and big.cluster == (2, 1, 1)


def test_epilogue_entry_arguments_and_shared_memory():
    """EPI=2 runs the TMA-store entry with C's tensor map (16 x 32 float32 boxes, 128-byte swizzle)
    and two 2 KiB staging buffers per consumer warp where N % 4 == 0; elsewhere the register
    entry, arguments and shared memory of EPI=1; EPI=3 names the diagnostic instance."""
    s = spec("wgmma_bf16")
    good, odd = Problem(Shape(300, 132, 200), "bf16", "row", "col"), Problem(Shape(300, 130, 200), "bf16", "row", "col")
    p1, p2, p3 = params("wgmma_bf16", EPI=1), params("wgmma_bf16", EPI=2), params("wgmma_bf16", EPI=3)
    assert params("wgmma_bf16") == params("wgmma_bf16", EPI=7)  # the shipped default (EPI=2 before session 13)
    assert s.instance(good, p2) == "gemm_wgmma_tma_store<2, 128, 256, 4, 0, 1, 16, 0, 1, 0>"
    assert s.instance(good, {**p2, "TAIL": 2}).endswith(", 1, 1>")  # split tiles of the tail: staged in this entry too
    r2 = {**p2, "SPLIT_K": 2, "REDUCE": 2}  # the slabs are no TMA target: the register entry
    assert s.instance(good, r2) == s.instance(good, {**r2, "EPI": 1}) and len(s.arguments(good, r2, FACTS)) == 6
    args = s.arguments(good, p2, FACTS)
    assert isinstance(args[2], TensorMap) and args[2].matrix == "C" and args[2].box == (16, 32) and args[2].swizzle == "128B"
    assert len(args) == 7 and s.geometry(good, p2, FACTS).shared_bytes == s.geometry(good, p1, FACTS).shared_bytes + 32768
    assert s.instance(odd, p2) == s.instance(odd, p1) and s.arguments(odd, p2, FACTS) == s.arguments(odd, p1, FACTS)
    assert s.geometry(odd, p2, FACTS) == s.geometry(odd, p1, FACTS)
    assert s.instance(good, p3).endswith(", 1, 0, 0, 2>") and s.instance(good, p1).endswith(", 1, 0>")
    p4 = params("wgmma_bf16", EPI=4)  # staged coalesced stores: the register entry, staging memory, no C map
    assert s.instance(good, p4).endswith(", 1, 0, 0, 3>") and len(s.arguments(good, p4, FACTS)) == 6
    assert s.geometry(good, p4, FACTS).shared_bytes == s.geometry(good, p2, FACTS).shared_bytes
    assert s.instance(odd, p4) == s.instance(odd, p1)
    # the plan's main step says where a staged epilogue falls back to registers, and only there
    assert s.plan(odd, p2, FACTS)[-1].note == "epilogue from registers: N=130 is not a multiple of 4; EPI=2 stages where it can"
    assert s.plan(odd, p4, FACTS)[-1].note.endswith("EPI=4 stages where it can")
    assert s.plan(good, p2, FACTS)[-1].note == s.plan(odd, p1, FACTS)[-1].note == ""
    p5 = params("wgmma_bf16", EPI=5)  # the TMA-store entry with the held ring stage
    assert s.instance(good, p5) == "gemm_wgmma_tma_store<2, 128, 256, 4, 0, 1, 16, 0, 1, 0, 1>"
    assert s.arguments(good, p5, FACTS) == s.arguments(good, p2, FACTS)
    p7 = params("wgmma_bf16", EPI=7)  # the TMA-store entry, each tile's right half stored during the next main loop
    assert s.instance(good, p7) == "gemm_wgmma_tma_store<2, 128, 256, 4, 0, 1, 16, 0, 1, 0, 2>"
    assert s.arguments(good, p7, FACTS) == s.arguments(good, p2, FACTS)
    assert s.geometry(good, p7, FACTS).shared_bytes == s.geometry(good, p2, FACTS).shared_bytes
    assert s.plan(odd, p7, FACTS)[-1].note.endswith("EPI=7 stages where it can")
    assert s.plan(good, p7, FACTS)[-1].note == ""
    # elsewhere EPI=7 is EPI=2 (same instance), and the plan's note says which parameter kept the half
    for over, words in (({"BN": 128}, "BN=128"), ({"TAIL": 3}, "TAIL=3"), ({"SPLIT_K": 2}, "SPLIT_K=2"),
                        ({"SCHED": 2, "BN": 128}, "BN=128, SCHED=2"), ({"BM": 256, "BN": 128}, "BM=256, BN=128")):
        q7, q2 = params("wgmma_bf16", EPI=7, **over), params("wgmma_bf16", EPI=2, **over)
        s.check_problem(good, q7, FACTS)
        assert not s.defers(good, q7) and s.instance(good, q7) == s.instance(good, q2), over
        note = s.plan(good, q7, FACTS)[-1].note
        assert note.startswith(f"right half not deferred: {words} (needs") and "EPI=7 defers where it can" in note, note
    assert s.defers(good, p7) and not s.defers(odd, p7) and not s.defers(good, p2)


def problem_args(problem):
    return problem.precision, problem.layout_a, problem.layout_b


def test_declared_precisions_and_layouts():
    four = {("row", "col"), ("row", "row"), ("col", "col"), ("col", "row")}  # layout.a=col too (issue 43)
    assert spec("wgmma_bf16").precisions == ("bf16", "fp16") and set(spec("wgmma_bf16").layouts) == four  # fp16: issue 41 item 3
    assert spec("wgmma_tf32").precisions == ("tf32",) and set(spec("wgmma_tf32").layouts) == four


@pytest.mark.parametrize("layout_a, layout_b, bf16_major", [("row", "col", 0), ("row", "row", 1), ("col", "col", 2),
                                                            ("col", "row", 3)])
def test_major_bits_of_the_instance(layout_a, layout_b, bf16_major):
    """The kernel's MAJOR template argument: bit 0 B MN-major, bit 1 A MN-major (bf16's transpose bits);
    the row-major-A instances are the names of before (0, 1). TF32 has no transpose bits: always 0, the
    plan copying a row-major B / column-major A K-major first (the copies' order: A's region, then B's)."""
    s = spec("wgmma_bf16")
    for over in ({}, {"EPI": 1}, {"EPI": 4}, {"SPLIT_K": 2, "REDUCE": 2}):
        problem = Problem(Shape(300, 264, 200), "bf16", layout_a, layout_b)
        p = params("wgmma_bf16", **over)
        s.check_problem(problem, p, FACTS)
        assert s.instance(problem, p).split(", ")[4] == str(bf16_major) and s.major(problem) == bf16_major
    t = spec("wgmma_tf32")
    problem = Problem(Shape(300, 264, 200), "tf32", layout_a, layout_b)
    p = params("wgmma_tf32")
    assert t.instance(problem, p).split(", ")[4] == "0" and t.major(problem) == 0
    copies = [op for op in t.operands(problem, p, FACTS) if op.copy is not None]
    want = ([("A", "transpose")] if layout_a == "col" else []) + ([("B", "transpose")] if layout_b == "row" else [])
    assert [(op.matrix, op.kind) for op in copies] == want
    assert [step.entry for step in t.plan(problem, p, FACTS)[:-1]] == [op.copy.entry for op in copies]
    if layout_a == "col":  # the K-major M x Kp copy of the K x M stored A, at the workspace's start
        a = copies[0]
        assert a.region.offset == 0 and (a.region.rows, a.region.cols) == (300, 200) and a.tensor_map.box == (128, 32)


@pytest.mark.parametrize("name, problem, bad, field, words", [
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"BM": 64}, "kernel.BM", "128 or 256"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"BM": 256, "BN": 256}, "kernel.BN", "128"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"SCHED": 2}, "kernel.BN", "16384"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"BN": 96}, "kernel.BN", "64, 128 or 256"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"STAGES": 5}, "kernel.STAGES", "exceeds"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"STAGES": 1}, "kernel.STAGES", "2..8"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"CLUSTER": 4}, "kernel.CLUSTER", "1 or 2"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "row"), {"CLUSTER": 2, "BN": 64}, "kernel.CLUSTER", "BN"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"GROUP_M": 0}, "kernel.GROUP_M", ">= 1"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"SCHED": 3}, "kernel.SCHED", "1 (cooperative) or 2"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"SPLIT_K": 0}, "kernel.SPLIT_K", ">= 1"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"TAIL": 4}, "kernel.TAIL", "1 (data-parallel), 2 (stream-K"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"TAIL": 2, "SPLIT_K": 2}, "kernel.TAIL", "SPLIT_K=1"),
    ("wgmma_bf16", Problem(Shape(65536, 65536, 64), "bf16", "row", "col"), {"SPLIT_K": 2}, "kernel.SPLIT_K", "16384"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"REDUCE": 3, "SPLIT_K": 2}, "kernel.REDUCE", "1 (split tiles"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"REDUCE": 2}, "kernel.REDUCE", "needs SPLIT_K > 1"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"REDUCE": 2, "TAIL": 2}, "kernel.REDUCE", "TAIL=2 keeps"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"EPI": 6}, "kernel.EPI", "2 (TMA store"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"EPI": 5, "SCHED": 2, "BN": 128}, "kernel.EPI",
     "cooperative"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"EPI": 5, "TAIL": 2}, "kernel.EPI", "TAIL=1"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"EPI": 0}, "kernel.EPI", "4 (shared-memory staging"),
    ("wgmma_bf16", Problem(Shape(64, 64, 64), "bf16", "row", "col"), {"EPI": 2, "SCHED": 2, "BN": 128, "STAGES": 7},
     "kernel.STAGES", "EPI=2 staging"),
])
def test_rules_are_one_line(name, problem, bad, field, words):
    with pytest.raises(ParamError) as err:
        spec(name).check_problem(problem, params(name, **bad), FACTS)
    assert err.value.field == field and words in str(err.value) and "\n" not in str(err.value)


def test_refuses_other_gpus():
    with pytest.raises(ParamError) as err:
        spec("wgmma_bf16").check_problem(Problem(Shape(64, 64, 64), "bf16", "row", "col"), params("wgmma_bf16"),
                                         offline_facts("80"))
    assert err.value.field == "kernel" and "sm_90" in str(err.value)


def same_program(tag: str):
    """The pytest-xdist group of the tests here that compile the same program (instance and
    options): one worker compiles it once and the others read the session's disk cache
    (tests/conftest.py), rather than two workers compiling it at the same time."""
    return pytest.mark.xdist_group(f"test_wgmma::{tag}")


COMPILES = [
    # the default EPI=7 defers at 4096^3: two m64n128k16 per k-step (8 HGMMA), as with EPI=7 named below
    pytest.param("wgmma_bf16", "bf16", "col", {}, 8, marks=same_program("bf16_col_default")),
    pytest.param("wgmma_bf16", "bf16", "row", {}, 8, marks=same_program("bf16_row_default")),
    ("wgmma_tf32", "tf32", "col", {}, 8), ("wgmma_bf16", "bf16", "col", {"CLUSTER": 2}, 8),
    pytest.param("wgmma_bf16", "bf16", "row", {"CLUSTER": 2, "SCHED": 2, "BN": 128}, 8,
                 marks=same_program("bf16_row_cluster_pingpong")),
    ("wgmma_bf16", "bf16", "col", {"BM": 256, "BN": 128}, 8),
    ("wgmma_bf16", "bf16", "col", {"SPLIT_K": 4}, 4), ("wgmma_tf32", "tf32", "col", {"TAIL": 2}, 4),
    ("wgmma_bf16", "bf16", "col", {"SPLIT_K": 16, "REDUCE": 2, "BN": 128}, 4), ("wgmma_tf32", "tf32", "col", {"SPLIT_K": 4, "REDUCE": 2}, 4),
    ("wgmma_bf16", "bf16", "col", {"EPI": 2}, 4), ("wgmma_tf32", "tf32", "col", {"EPI": 2}, 4),
    pytest.param("wgmma_bf16", "bf16", "row", {"EPI": 2, "SCHED": 2, "BN": 128, "CLUSTER": 2}, 8,
                 marks=same_program("bf16_row_cluster_pingpong")),  # the same program as the case with EPI unset
    ("wgmma_bf16", "bf16", "col", {"EPI": 4}, 4), ("wgmma_bf16", "bf16", "col", {"EPI": 5, "CLUSTER": 2}, 4),
    ("wgmma_bf16", "bf16", "col", {"TAIL": 2, "EPI": 1}, 4), ("wgmma_bf16", "bf16", "col", {"TAIL": 2, "CLUSTER": 2}, 4),
    ("wgmma_bf16", "bf16", "col", {"TAIL": 3}, 4),
    pytest.param("wgmma_bf16", "bf16", "col", {"EPI": 7}, 8, marks=same_program("bf16_col_default")),  # two m64n128k16 per k-step; the deferred half's boxes between groups
]


@pytest.mark.parametrize("name, precision, layout_b, over, hgmma", COMPILES, ids=str)
def test_compiles_to_hgmma_without_spills(name, precision, layout_b, over, hgmma):
    s, p = spec(name), params(name, **over)
    problem = Problem(Shape(4096, 4096, 4096), precision, "row", layout_b)
    s.check_problem(problem, p, FACTS)
    options = CompileOptions.for_kernel("90", s.options(problem, p, FACTS))
    assert options.target == "sm_90a"
    compiled = compile_kernel(KERNELS_DIR / s.source, s.instance(problem, p), options,
                              persistent=True)  # the session's disk cache (tests/conftest.py)
    res = compiled.resources
    assert res is not None and res.spill_store_bytes == 0 and res.spill_load_bytes == 0 and res.stack_frame_bytes == 0
    hist = compiled.sass["histogram"]
    assert hist["HGMMA"] == hgmma and hist["UTMALDG"] >= 2 and hist["LDL"] == 0 and hist["STL"] == 0, hist
    assert "C7508" not in compiled.log  # ptxas did not ignore setmaxnreg
    # one wgmma group in flight: gsb0 only on a group's last HGMMA (gemmlab.gpu.sass.wgmma_check)
    assert compiled.sass["wgmma"]["serialized"] == 0 and compiled.sass["warning"] is None, compiled.sass["wgmma"]
    if s.tma_store(problem, p):  # TMA-store epilogue (EPI 2, 5, 7: the default's too): UTMASTG, and C leaves through no STG of its own
        assert hist["UTMASTG"] >= 1 and "STG.E.64" not in compiled.sass_text, hist
    if over.get("EPI") == 4:  # staged stores: 16-byte shared loads and global stores only
        assert hist["LDS.128"] >= 1 and "STG.E.128" in compiled.sass_text and "STG.E.64" not in compiled.sass_text, hist
    if over.get("REDUCE", 1) == 2:  # workspace slabs: plain stores, no flags, no atomics, no fence
        text = compiled.sass_text
        assert "REDG" not in text and "ATOMG" not in text and "MEMBAR" not in text
    elif over.get("SPLIT_K", 1) > 1 or over.get("TAIL", 1) >= 2:  # adders add into C; the flag fence only in the epilogue
        text = compiled.sass_text
        gpu_fences = [l for l in text.splitlines() if "MEMBAR" in l and "MEMBAR.ALL.CTA" not in l]  # .CTA: EPI=2's proxy fences
        assert len(gpu_fences) <= 4 and "ATOMG" not in text, gpu_fences
        if s.tma_store(problem, p):  # TMA-store entry: rank 0 TMA-stores, adders TMA reduce-add, no REDG
            assert hist["UTMAREDG"] >= 1 and hist["UTMASTG"] >= 1 and "REDG.E" not in text, hist
        else:  # register epilogue: red.global.add
            assert "REDG.E.ADD.F32" in text and hist["UTMAREDG"] == 0, hist
    if over.get("CLUSTER") == 2:  # remote stage releases (SYNCS.ARRIVE...RED) without a GPU-scope fence each
        lines = [l for l in compiled.sass_text.splitlines() if "/*" in l and ";" in l]
        remote = [i for i, l in enumerate(lines) if "SYNCS.ARRIVE.TRANS64.RED" in l]
        assert remote and not any("MEMBAR.ALL.GPU" in l for i in remote for l in lines[max(0, i - 4):i])


def test_a_printf_in_the_kernel_serializes_its_wgmmas_and_the_record_says_so(tmp_path):
    """ptxas serializes every wgmma of a function that calls printf (warning C7510): the SASS check
    (gemmlab.gpu.sass.wgmma_check) finds it without the ptxas log, and the summary warns. The trace
    tool of sessions 9-11 fell into this (docs/results/tc-ladder-h200.md, "Session 11")."""
    from gemmlab.gpu.sass import wgmma_check
    s, p = spec("wgmma_bf16"), params("wgmma_bf16")
    problem = Problem(Shape(4096, 4096, 4096), "bf16", "row", "col")
    text = (KERNELS_DIR / s.source).read_text()
    anchor = "  const int tid = threadIdx.x;\n"
    assert text.count(anchor) == 1
    source = tmp_path / "wgmma_printf.cu"
    source.write_text(text.replace(anchor, anchor + '  if (tid == 100000) printf("never\\n");\n'))
    options = CompileOptions.for_kernel("90", s.options(problem, p, FACTS))
    compiled = compile_kernel(source, s.instance(problem, p), options)
    if compiled.sass.get("error"):
        pytest.skip(f"no disassembler here: {compiled.sass['error']}")
    assert compiled.sass["wgmma"]["all_serialized"] and compiled.sass["wgmma"]["hgmma"] >= 2, compiled.sass["wgmma"]
    assert "wgmma serialized" in compiled.sass["warning"]
    assert wgmma_check(compiled.sass_text) == compiled.sass["wgmma"]
    if compiled.log:  # NVRTC versions that return the ptxas log print the warning too
        assert "C7510" in compiled.log


@pytest.mark.parametrize("kernel, precision, layout_b, shape", [
    ("wgmma_bf16", "bf16", "col", [35, 79, 24]),
    pytest.param("wgmma_bf16", "bf16", "row", [63, 72, 40], marks=same_program("bf16_row_default")),
    ("wgmma_tf32", "tf32", "col", [31, 33, 20])], ids=str)
def test_mode_compile_record(tmp_path, kernel, precision, layout_b, shape):
    """gemmlab's own pipeline in mode=compile: sm_90a, HGMMA + UTMALDG, no LDL/STL, the TMA maps
    and the persistent launch in the record."""
    from gemmlab.run.pipeline import run_point
    rec = run_point({"kernel": {"name": kernel}, "shape": shape, "mode": "compile", "precision": precision,
                     "layout": {"a": "row", "b": layout_b}}, tmp_path / "run")
    assert rec["status"] == "compiled", rec.get("error")
    hist = rec["compile"]["sass"]["histogram"]
    assert hist["HGMMA"] > 0 and hist["UTMALDG"] > 0 and hist["LDL"] == 0 and hist["STL"] == 0, hist
    assert rec["compile"]["arch"] == "sm_90a" and rec["launch"]["block"] == [384, 1, 1]
    # the default EPI=2 maps C too where N % 4 == 0 (TMA store); elsewhere the register epilogue
    assert [m["matrix"] for m in rec["tensor_maps"]] == (["A", "B", "C"] if shape[1] % 4 == 0 else ["A", "B"])


#: column-major A (issue 43): bf16 natively (wgmma's transpose bit for A, SASS ``HGMMA ... .tnspA``), tf32
#: through the transposed copy (no transpose bit: ``tnsp`` nowhere); (precision, layout_b, parameters, HGMMA)
COL_A_COMPILES = [
    pytest.param("bf16", "col", {}, 8, marks=same_program("bf16_colA_default")),
    ("bf16", "row", {}, 8),
    ("bf16", "col", {"SCHED": 2, "BM": 64, "CLUSTER": 2}, 4),
    ("bf16", "row", {"BM": 256, "BN": 128, "EPI": 1}, 8),
    ("bf16", "col", {"SPLIT_K": 4, "REDUCE": 2, "BM": 64, "BN": 128, "SCHED": 2, "STAGES": 6}, 4),
]


@pytest.mark.parametrize("precision, layout_b, over, hgmma", COL_A_COMPILES, ids=str)
def test_column_major_a_compiles_with_the_transpose_bit(precision, layout_b, over, hgmma):
    """layout.a=col in bf16: every HGMMA reads A transposed (``.tnspA``; B too where it is row-major:
    ``.tnspB``), BM/64 TMA boxes of A per stage, no spills or local memory, the wgmmas not serialized."""
    import re
    s, p = spec("wgmma_bf16"), params("wgmma_bf16", **over)
    problem = Problem(Shape(4096, 4096, 4096), precision, "col", layout_b)
    s.check_problem(problem, p, FACTS)
    compiled = compile_kernel(KERNELS_DIR / s.source, s.instance(problem, p),
                              CompileOptions.for_kernel("90", s.options(problem, p, FACTS)), persistent=True)
    res, hist = compiled.resources, compiled.sass["histogram"]
    assert res is not None and res.spill_store_bytes == 0 and res.spill_load_bytes == 0 and res.stack_frame_bytes == 0
    assert hist["HGMMA"] == hgmma and hist["LDL"] == 0 and hist["STL"] == 0, hist
    assert compiled.sass["wgmma"]["serialized"] == 0 and compiled.sass["warning"] is None, compiled.sass["wgmma"]
    lines = re.findall(r"HGMMA\.[^;]*", compiled.sass_text)
    assert len(lines) == hgmma and all(".tnspA" in x and (".tnspB" in x) == (layout_b == "row") for x in lines), lines
    a_boxes = p["BM"] // 64  # the producer's TMA loads per stage: A's boxes, then B's (CLUSTER: a share, multicast)
    b_boxes = (p["BN"] // 64 if layout_b == "row" else 1) // (p["CLUSTER"] if layout_b == "row" else 1)
    assert hist["UTMALDG"] >= a_boxes + b_boxes, hist


@pytest.mark.parametrize("kernel, precision, layout_b, shape, copies", [
    ("wgmma_bf16", "bf16", "col", [35, 79, 24], []),  # M % 8 != 0: A's stored rows (M long) padded first
    ("wgmma_bf16", "bf16", "row", [64, 72, 40], []),
    ("wgmma_tf32", "tf32", "col", [31, 33, 20], ["transpose"]),
], ids=str)
def test_column_major_a_in_the_pipeline(tmp_path, kernel, precision, layout_b, shape, copies):
    """layout.a=col through gemmlab's own pipeline in mode=compile (issue 43): compiled for sm_90a
    with HGMMA, A's map over the matrix as stored (K x M) or over its copy, the copies in the plan."""
    from gemmlab.run.pipeline import run_point
    rec = run_point({"kernel": {"name": kernel}, "shape": shape, "mode": "compile", "precision": precision,
                     "layout": {"a": "col", "b": layout_b}}, tmp_path / "run")
    assert rec["status"] == "compiled", rec.get("error")
    hist = rec["compile"]["sass"]["histogram"]
    assert hist["HGMMA"] > 0 and hist["LDL"] == 0 and hist["STL"] == 0, hist
    pad = ["pad"] if precision == "bf16" and shape[0] % 8 else []
    kinds = [line.split("(")[1].split(")")[0] for line in rec["plan"][:-1]]
    assert kinds == pad + copies, rec["plan"]
    first = rec["tensor_maps"][0]
    assert first["matrix"] == ("workspace" if kinds else "A"), first


def test_tc_ladder_experiment_lists_every_rung():
    """experiment=tc_ladder sweeps every tensor-core rung x layout it supports (group tc_rung) at
    the five shapes, against cuBLAS, graph timing; each rung file selects a registered kernel in a
    precision and layout it declares."""
    import yaml
    exp = yaml.safe_load((CONF_DIR / "experiment" / "tc_ladder.yaml").read_text())
    params_ = exp["hydra"]["sweeper"]["params"]
    rungs = params_["tc_rung"].split(",")
    assert exp["baseline"] == "cublas" and exp["timing"]["mode"] == "graph"
    assert params_["shape"].count("[") == 5 and "[8192,8192,8192]" in params_["shape"]
    swept = set()
    for rung in rungs:
        conf = yaml.safe_load((CONF_DIR / "tc_rung" / f"{rung}.yaml").read_text())
        kernel = conf["defaults"][0]["override /kernel"]
        s = spec(kernel)
        assert conf["precision"] in s.precisions and (conf["layout"]["a"], conf["layout"]["b"]) in s.layouts, rung
        swept.add((kernel, conf["precision"], conf["layout"]["a"], conf["layout"]["b"]))
    # every (kernel, first precision, layout) a rung declares with A row-major, fp16 aside (mma_bf16's second
    # precision); a column-major A (issue 43) is that layouts experiment's, not this ladder's
    declared = {(k, spec(k).precisions[0], a, b) for k in ("mma_tf32", "mma_bf16", "tma_bf16", "wgmma_bf16", "wgmma_tf32")
                for a, b in spec(k).layouts if a == "row"}
    assert swept == declared, declared ^ swept


def test_tc_ladder_runs_in_compile_mode(tmp_path, cli):
    """The experiment through the CLI (the kernels' YAML defaults pass gemmlab's parameter rules:
    integers >= 1), wgmma rungs at one small shape in mode=compile: one compiled record each.
    baseline=null: the experiment's cublas baseline needs the optional cublas extra (absent in CI)."""
    import json
    out = tmp_path / "sweep"
    proc = cli(["experiment=tc_ladder", "mode=compile", "baseline=null",
                "hydra.sweeper.params.tc_rung='wgmma_bf16_rc,wgmma_bf16_rr,wgmma_tf32_rc'",
                "hydra.sweeper.params.shape='[128,128,64]'", f"hydra.sweep.dir={out}"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(p.read_text()) for p in sorted(out.glob("*/result.json"))]
    assert [(r["kernel"]["name"], r["layout"]["b"], r["status"]) for r in records] == [
        ("wgmma_bf16", "col", "compiled"), ("wgmma_bf16", "row", "compiled"), ("wgmma_tf32", "col", "compiled")]
    assert all(r["compile"]["sass"]["histogram"]["HGMMA"] > 0 for r in records)


# --- the stage-ring protocol, modelled -----------------------------------------------------------

def _parity_passes(completed: int, parity: int) -> bool:
    """mbarrier.try_wait.parity on a barrier that has completed `completed` phases: true iff the
    current (incomplete) phase has the other parity (PTX ISA: mbarrier.test_wait/try_wait .parity)."""
    return (completed & 1) != parity


def ring_protocol(stages: int, k_tiles: int, tiles: int, sched: int, ordered: bool, rng) -> str | None:
    """One random interleaving of kernels/wgmma_bf16.cu's ring protocol in one CTA: the producer
    fills iteration i into slot i % STAGES after an "empty" parity wait; consumer warpgroups wait
    "full" with parity (i / STAGES) & 1, read, and release. sched 1: both consume every stage;
    sched 2 (ping-pong): warpgroup t % 2 takes tile t and skips the other's k_tiles iterations;
    ``ordered``: a warpgroup starts a tile only after the other finished its previous one (the
    named barriers). Returns None when every read saw its own iteration, else what went wrong."""
    n = tiles * k_tiles
    full, empty, arrivals, content = [0] * stages, [0] * stages, [0] * stages, [None] * stages
    need, produced = (2 if sched == 1 else 1), 0
    tile, kt, signal = [0, 1 if sched == 2 else 0], [0, 0], [0, 0]
    while True:
        moves = []
        if produced < n and _parity_passes(empty[produced % stages], ((produced // stages) & 1) ^ 1):
            moves.append("producer")
        for w in range(2):
            if tile[w] >= tiles or (sched == 2 and ordered and kt[w] == 0 and tile[w] > 0 and not signal[w]):
                continue
            i = tile[w] * k_tiles + kt[w]
            if _parity_passes(full[i % stages], (i // stages) & 1):
                moves.append(w)
        if not moves:
            return None if produced == n and all(t >= tiles for t in tile) else "deadlock"
        who = rng.choice(moves)
        if who == "producer":
            content[produced % stages] = produced
            full[produced % stages] += 1
            produced += 1
            continue
        i = tile[who] * k_tiles + kt[who]
        if content[i % stages] != i:
            return f"stale read: warpgroup {who} took iteration {content[i % stages]} for {i}"
        if sched == 2 and ordered and kt[who] == 0 and tile[who] > 0:
            signal[who] -= 1
        arrivals[i % stages] += 1
        if arrivals[i % stages] == need:
            arrivals[i % stages], empty[i % stages] = 0, empty[i % stages] + 1
        kt[who] += 1
        if kt[who] == k_tiles:
            kt[who] = 0
            if sched == 2 and ordered and tile[who] + 1 < tiles:
                signal[1 - who] += 1
            tile[who] += 2 if sched == 2 else 1


def test_ring_protocol_parity_waits():
    """The model reproduces the H200 observation and proves the fix within its random schedules:
    unordered ping-pong reads a stale stage as soon as a tile has more k-tiles than the ring has
    stages (it faulted at 4096^3, K/BK = 64 > 6, and passed at K = 136, 3 k-tiles); with the strict
    main-loop order (SCHED=2 as built) and in the cooperative schedule (SCHED=1) no interleaving
    reads a stale stage or deadlocks."""
    import random
    rng = random.Random(0)
    for k_tiles in (3, 6, 16, 64):
        for _ in range(60):
            assert ring_protocol(6, k_tiles, 7, 1, False, rng) is None
            assert ring_protocol(6, k_tiles, 7, 2, True, rng) is None
    assert all(ring_protocol(6, 3, 7, 2, False, rng) is None for _ in range(60))
    broken = [ring_protocol(6, 16, 7, 2, False, rng) for _ in range(60)]
    assert any(b and b.startswith("stale read") for b in broken)


def test_tiled_counts_equal_the_scatter_of_every_shifted_coordinate():
    """The ownership model adds one tile-relative count pattern per group of items
    (``add_tiled``): the same counts as a scatter (``add_hits``) of every item's shifted
    coordinates masked to M x N, for patterns inside the tile, reaching into the neighbours and
    starting above/left of it, partial tiles at the edges and items repeated on a tile; a hit at
    a negative index raises IndexError in both."""
    module = __import__("gemmlab_plugins.wgmma_bf16", fromlist=["add_tiled"])
    from gemmlab.contract.plugin_utils import add_hits
    rng = np.random.default_rng(7)
    BM, BN = 16, 8
    for M, N, origin, size in ((50, 30, (0, 0), (16, 8)), (33, 17, (0, 0), (20, 13)), (64, 40, (3, 2), (16, 8)),
                               (40, 40, (-2, 0), (10, 8)), (40, 40, (0, -1), (16, 8))):
        per_tile = rng.integers(0, 3, size=(-(-M // BM) + 1, -(-N // BN)))
        r, c = rng.integers(0, size[0], 200), rng.integers(0, size[1], 200)
        hits = np.zeros(size, dtype=np.int64)
        np.add.at(hits, (r, c), 1)
        scatter, tiled = np.zeros((M, N), dtype=np.int64), np.zeros((M, N), dtype=np.int64)
        raised = []
        try:
            for (a, b), times in np.ndenumerate(per_tile):
                for _ in range(times):
                    row, col = r + origin[0] + a * BM, c + origin[1] + b * BN
                    add_hits(scatter, row, col, (row < M) & (col < N))
        except IndexError:
            raised.append("scatter")
        try:
            module.add_tiled(tiled, per_tile, hits, origin[0], origin[1], BM, BN)
        except IndexError:
            raised.append("tiled")
        assert raised in ([], ["scatter", "tiled"]), (origin, raised)
        if not raised:
            assert (scatter == tiled).all() and scatter.sum() > 0, (M, N, origin, size)
