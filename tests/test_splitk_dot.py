"""CPU tests of ``splitk_dot`` (plugins/splitk_dot.py, kernels/splitk_dot.cu; issue 41, item 3): the
split-K GEMV reduction for tiny outputs with a huge K. Declarations (precisions, layouts, SASS classes,
``tf32_rounding="none"``), the parameter rules (one line naming the field), the declared space, the
candidates sized to the problem, the ownership model (each output stored once, every k read once per
tile) and that it has teeth, the launch plan and workspace layout; the pipeline on the fake GPU
(tests/fakegpu.py, real NVRTC compiles, the kernel's blocks emulated in numpy with the workspace
slots and the atomic ticket in the fake device memory) at odd shapes in every precision and B layout,
graph replay included, and that a plan without its Memset fails; NVRTC compiles (ptxas: no spills;
SASS: FFMA and LDG.128). GPU correctness: tests/test_gpu_splitk_dot.py."""

from __future__ import annotations

import json
import re

import ml_dtypes
import numpy as np
import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.contract.hookspecs import Main, Memset, ParamError, Problem, Shape, Workspace
from gemmlab.contract.registry import load_registry
from gemmlab.gpu.compile import CompileOptions, compile_kernel
from gemmlab.gpu.device import offline_facts
from gemmlab.paths import KERNELS_DIR
from gemmlab.run.pipeline import exit_status, run_point

REGISTRY = load_registry(entry_points=False)
SPEC = REGISTRY.get("splitk_dot")
MODULE = __import__("gemmlab_plugins.splitk_dot", fromlist=["k_ranges"])
FACTS = offline_facts("90")
FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events", "floor": False}
STORAGE = {"float": np.float32, "__nv_bfloat16": ml_dtypes.bfloat16, "__half": np.float16}


def params(**overrides) -> dict:
    return {**SPEC.defaults, **overrides}


# --- declarations, rules, space ---------------------------------------------------------------------

def test_declares_every_precision_both_b_layouts_and_no_tf32_rounding():
    assert SPEC.precisions == ("fp32", "tf32", "bf16", "fp16")
    assert SPEC.layouts == (("row", "row"), ("row", "col"))
    assert SPEC.tf32_rounding == "none" and SPEC.sass_classes == ("FFMA", "LDG.128")
    assert 'tf32_rounding="none"' in MODULE.__doc__ and "Memset" in MODULE.__doc__  # documented in the plugin


@pytest.mark.parametrize("overrides, shape, field", [
    (dict(OM=9), Shape(2, 2, 100), "kernel.OM"),
    (dict(ON=9), Shape(2, 2, 100), "kernel.ON"),
    (dict(OM=8, ON=5), Shape(2, 2, 100), "kernel.ON"),         # 40 accumulators
    (dict(THREADS=96), Shape(2, 2, 100), "kernel.THREADS"),    # not a power of two
    (dict(THREADS=32), Shape(2, 2, 100), "kernel.THREADS"),
    (dict(THREADS=512), Shape(2, 2, 100), "kernel.THREADS"),
    (dict(U=5), Shape(2, 2, 100), "kernel.U"),
    (dict(OM=8, ON=4, U=2), Shape(2, 2, 100), "kernel.U"),     # 24 vectors in flight
    (dict(OM=1, ON=1), Shape(300, 300, 10), "shape"),          # 90000 tiles > grid.y
])
def test_rules_refuse_in_one_line_naming_the_field(overrides, shape, field):
    with pytest.raises(ParamError) as err:
        SPEC.check_problem(Problem(shape), params(**overrides), FACTS)
    assert err.value.field == field and "\n" not in str(err.value)
    assert str(err.value).startswith(f"{field}: ")


def test_defaults_lie_in_the_space_and_restrictions_prune():
    space = SPEC.param_space()
    assert space.contains(SPEC.defaults)
    assert space.violations(params(OM=8, ON=8, U=1)) == [f"restriction accumulators: OM*ON accumulators per thread: at most "
                                                    f"{MODULE.MAX_OUT}"]
    assert not space.contains(params(OM=4, ON=8, U=2))  # 24 vectors
    for p in space.points(SPEC.defaults):
        SPEC.check_problem(Problem(Shape(2, 2, 100000)), p, FACTS)  # every point runs a tiny output


def test_candidates_are_sized_to_the_problem():
    """2x2x100000: one 2x2 tile, 132 K ranges (a block per SM), then 264 (2 per SM), ...; 16x16:
    4x8 tiles (8 of them), SPLITS = ceil(132/8) = 17 at one block per SM; a row-major B with N <= 8
    gets ON = N (its steps are contiguous: 16-byte loads); nothing for a large output."""
    two = SPEC.candidates(Problem(Shape(2, 2, 100000)), FACTS)
    assert two[0] == {"OM": 2, "ON": 2, "THREADS": 256, "U": 2, "SPLITS": 132}
    assert two[1]["SPLITS"] == 264 and two[2] == {"OM": 2, "ON": 2, "THREADS": 128, "U": 2, "SPLITS": 264}
    assert len(two) == len({tuple(p.items()) for p in two}) >= 5
    wide = SPEC.candidates(Problem(Shape(16, 16, 50000), "bf16", "row", "col"), FACTS)
    assert wide[0] == {"OM": 4, "ON": 8, "THREADS": 256, "U": 1, "SPLITS": 17}
    odd = SPEC.candidates(Problem(Shape(3, 5, 100001)), FACTS)
    assert (odd[0]["OM"], odd[0]["ON"]) == (3, 5)
    short = SPEC.candidates(Problem(Shape(1, 1, 100), "fp16"), FACTS)
    assert short[0]["SPLITS"] == 1  # ceil(100 / (32 lanes x 8 halves)): one range
    assert SPEC.candidates(Problem(Shape(64, 64, 100000)), FACTS) == []
    for problem in (Problem(Shape(2, 2, 100000)), Problem(Shape(16, 16, 50000), "bf16", "row", "col"),
                    Problem(Shape(1, 1, 1), "tf32")):
        for p in SPEC.candidates(problem, FACTS):
            SPEC.check_problem(problem, p, FACTS)


def test_plan_arguments_and_workspace_layout():
    problem = Problem(Shape(5, 7, 1000))
    p = params(OM=2, ON=3, SPLITS=7)  # 3 x 3 tiles
    assert SPEC.plan(problem, p, FACTS) == (Memset("workspace"), Main())
    args = SPEC.arguments(problem, p, FACTS)
    assert args[3] == Workspace(0) and args[4] == Workspace(256)  # 9 tickets, partials from 256 B
    assert SPEC.workspace_bytes(problem, p, FACTS) == 256 + 4 * 9 * 7 * 6
    launch = SPEC.geometry(problem, p, FACTS)
    assert launch.grid == (7, 9, 1) and launch.block == (256, 1, 1)
    assert SPEC.instance(Problem(Shape(1, 1, 1), "bf16", "row", "col"), p) == "splitk_dot<__nv_bfloat16, 2, 3, 256, 2, 1>"
    assert SPEC.entry(p) == "splitk_dot<float, 2, 3, 256, 2, 0>"


# --- the ownership model ----------------------------------------------------------------------------

def assert_all_ones(counts, what):
    counts = np.asarray(counts)
    zero, multi = int((counts == 0).sum()), int((counts > 1).sum())
    assert counts.size and not zero and not multi, f"{what}: {zero} never hit, {multi} hit more than once, of {counts.size}"


MODEL_CASES = [(Shape(2, 3, 4099), {}), (Shape(1, 1, 1), {}), (Shape(5, 7, 1000), dict(OM=2, ON=3, SPLITS=7)),
               (Shape(2, 2, 100000), {}), (Shape(9, 17, 333), dict(OM=4, ON=8, U=1, THREADS=64, SPLITS=3)),
               (Shape(3, 5, 100001), dict(OM=3, ON=5, U=1, THREADS=128, SPLITS=264)),
               (Shape(1, 1, 37), dict(SPLITS=4096, U=4, OM=1, ON=1))]  # most ranges empty


@pytest.mark.parametrize("shape, overrides", MODEL_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("v", [4, 8], ids=["float32 storage", "2-byte storage"])
def test_one_owner_per_output_and_every_k_read_once(shape, overrides, v):
    p = params(**overrides)
    SPEC.check(shape, p, FACTS)
    stores, loads = SPEC.ownership(shape, p, v=v)
    assert stores.shape == (shape.M, shape.N)
    assert_all_ones(stores, f"stores {shape} {p}")
    assert loads["K"].shape == (1, shape.K)
    assert_all_ones(loads["K"], f"k coverage {shape} {p}")


def test_k_ranges_are_whole_vectors_and_cover_k():
    ranges = MODULE.k_ranges(4099, 7, 4)
    assert ranges[0] == (0, 588) and ranges[-1] == (3528, 4099) and all(lo % 4 == 0 for lo, _ in ranges)
    assert MODULE.k_ranges(37, 20, 8)[4:6] == [(32, 37), (37, 37)]  # a partial last vector, then empty ranges


def test_model_has_teeth(monkeypatch):
    shape, p = Shape(5, 7, 1000), params(OM=2, ON=3, SPLITS=7)
    real = MODULE.k_ranges
    monkeypatch.setattr(MODULE, "k_ranges", lambda K, s, v=4: [(lo, max(lo, hi - 1)) for lo, hi in real(K, s, v)])
    with pytest.raises(AssertionError, match="never hit"):
        assert_all_ones(SPEC.ownership(shape, p)[1]["K"], "a range shortened by one")
    monkeypatch.setattr(MODULE, "k_ranges", lambda K, s, v=4: [(max(0, lo - 4), hi) for lo, hi in real(K, s, v)])
    with pytest.raises(AssertionError, match="more than once"):
        assert_all_ones(SPEC.ownership(shape, p)[1]["K"], "ranges overlapping")
    monkeypatch.setattr(MODULE, "tiles", lambda s, q: (1, 1))
    with pytest.raises(AssertionError, match="never hit"):
        assert_all_ones(SPEC.ownership(shape, p)[0], "one tile only")


# --- the pipeline on the fake GPU ---------------------------------------------------------------------

INSTANCE = re.compile(r"splitk_dot<(\w+), (\d+), (\d+), (\d+), (\d+), (\d)>")


def emulate(gpu, args):
    """``splitk_dot`` on the fake GPU's memory, block by block as the kernel splits the work: block
    (z, t) adds A[tile rows, K range z] @ B[K range z, tile columns] (products in float64, the block
    sum rounded to float32, rows or columns past M or N contribute 0) into its partial slot
    partials[t][z][OM*ON] of the workspace, then draws tile t's ticket (a uint32 in the workspace,
    incremented); the block that draws SPLITS-1 sums the tile's partials in split order in float32,
    stores C (masked to M x N) and resets the ticket. Blocks finish in a random order (a fixed seed).
    A ticket the plan did not zero (the canary the core refills workspaces with) never reaches
    SPLITS-1, so C keeps its NaN fill."""
    a, b, c, tickets, partials, m, n, k = (int(x) for x in args)
    name, launch = next((nm, ln) for nm, ln in reversed(gpu.launch_configs) if nm.startswith("splitk_dot<"))
    ctype, om, on, threads, _u, bcol = INSTANCE.fullmatch(name).groups()
    om, on, bcol = int(om), int(on), int(bcol)
    dtype = np.dtype(STORAGE[ctype])
    A = gpu.view(a, m * k * dtype.itemsize).view(dtype).reshape(m, k).astype(np.float64)
    stored_b = gpu.view(b, k * n * dtype.itemsize).view(dtype)
    B = (stored_b.reshape(n, k).T if bcol else stored_b.reshape(k, n)).astype(np.float64)
    splits, count = launch.grid[0], launch.grid[1]
    tiles_n = -(-n // on)
    ranges = MODULE.k_ranges(k, splits, 16 // dtype.itemsize)
    out = om * on
    slots = gpu.floats(partials, count * splits * out).reshape(count, splits, om, on)
    ticket = gpu.words(tickets, count)
    C = gpu.floats(c, m * n).reshape(m, n)
    rng = np.random.default_rng(7)
    for t in range(count):
        m0, n0 = t // tiles_n * om, t % tiles_n * on
        rows, cols = min(om, m - m0), min(on, n - n0)
        for z in rng.permutation(splits):
            lo, hi = ranges[z]
            block = np.zeros((om, on))
            block[:rows, :cols] = A[m0:m0 + rows, lo:hi] @ B[lo:hi, n0:n0 + cols]
            slots[t, z] = block.astype(np.float32)
            drawn = int(ticket[t])
            ticket[t] = np.uint32((drawn + 1) & 0xFFFFFFFF)
            if drawn == splits - 1:
                total = np.zeros((om, on), np.float32)
                for s in range(splits):
                    total += slots[t, s]
                C[m0:m0 + rows, n0:n0 + cols] = total[:rows, :cols]
                ticket[t] = 0


def run(tmp_path, monkeypatch, shape, precision="fp32", layout_b="row", gpu=None, timing=None, **overrides):
    gpu = gpu or HostGpu(behaviour={"splitk_dot<": emulate})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    cfg = {"kernel": {"name": "splitk_dot", **overrides}, "shape": list(shape), "precision": precision,
           "layout": {"a": "row", "b": layout_b}, "mode": "run", "timing": dict(timing or FAST)}
    out = tmp_path / "point"
    rec = run_point(cfg, out)
    assert json.loads((out / "result.json").read_text())["status"] == rec["status"]
    assert not (out / "traceback.txt").exists(), (out / "traceback.txt").read_text()
    return rec, gpu


FAKE_POINTS = [  # (shape, precision, layout.b, parameters): partial tiles, odd K, uneven and empty ranges
    ((2, 3, 4099), "fp32", "row", dict(ON=3, SPLITS=5)),
    ((2, 3, 4099), "tf32", "col", dict(ON=3, SPLITS=5)),
    ((1, 1, 1), "fp32", "row", {}),
    ((5, 7, 1000), "bf16", "row", dict(OM=2, ON=3, SPLITS=7)),
    ((5, 7, 1000), "fp16", "col", dict(OM=2, ON=3, SPLITS=7)),
]


@pytest.mark.parametrize("shape, precision, layout_b, overrides", FAKE_POINTS,
                         ids=["x".join(map(str, p[0])) + f"-{p[1]}-{p[2]}" for p in FAKE_POINTS])
def test_runs_and_verifies_on_the_fake_gpu(tmp_path, monkeypatch, shape, precision, layout_b, overrides, sass_not_read):
    rec, gpu = run(tmp_path, monkeypatch, shape, precision, layout_b, **overrides)
    assert rec["status"] == "ok" and rec["valid"] is True and exit_status(rec) == 0, rec.get("error")
    v = rec["verification"]
    assert v["passed"] and v["mismatches"] == 0 and rec["guard_bands"] == "intact"
    assert rec["verification_after_timing"]["passed"]
    assert rec["plan"] == ["memset workspace to 0x00000000", "main kernel"]
    p = {**SPEC.defaults, **overrides}
    count = -(-shape[0] // p["OM"]) * -(-shape[1] // p["ON"])
    assert rec["launch"]["grid"] == [p["SPLITS"], count, 1]
    if precision == "tf32":
        assert v["tf32"]["declared"] == "none" and "unrounded on FP32 CUDA cores" in rec["precision"]


def test_graph_replays_stay_right_and_the_ticket_is_reset(tmp_path, monkeypatch, sass_not_read):
    """Events and graph timing, many launches: every launch's last block finds its ticket, the
    verification after timing (the graph replayed on fresh inputs) passes, and each ticket is 0
    after the last launch."""
    rec, gpu = run(tmp_path, monkeypatch, (3, 5, 2001), "bf16", "col", timing={**FAST, "mode": "both", "repeat": 5},
                   OM=3, ON=5, U=1, SPLITS=9)
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification_after_timing"]["passed"] and rec["verification_after_timing"]["path"].startswith("the graph")
    assert gpu.launches.count("splitk_dot<__nv_bfloat16, 3, 5, 256, 1, 1>") >= 20
    memsets = [f for f in gpu.fills if f[1] == 0]
    assert len(memsets) >= 20  # the plan's Memset, inside every launch


def test_a_plan_without_its_memset_fails_verification(tmp_path, monkeypatch, sass_not_read):
    """The tickets start from the canary gemmlab fills workspaces with: without the Memset no block
    is ever last, C keeps its NaN fill and the point fails (so the plan's Memset is what the kernel
    relies on, not an earlier launch's workspace)."""
    gpu = HostGpu(behaviour={"splitk_dot<": emulate})
    real_fill = gpu.fill32
    gpu.fill32 = lambda address, pattern, count: None if pattern == 0 else real_fill(address, pattern, count)
    rec, _ = run(tmp_path, monkeypatch, (2, 3, 4099), gpu=gpu)
    assert rec["status"] == "wrong_result" and rec["verification"]["nan_outputs"] == 6


# --- NVRTC --------------------------------------------------------------------------------------------

COMPILES = [("fp32", "row", {}), ("fp32", "col", {}), ("tf32", "row", dict(OM=3, ON=5, U=1)),
            ("bf16", "row", {}), ("bf16", "col", dict(OM=4, ON=8, U=1)),
            ("fp16", "col", {}), ("fp16", "row", dict(OM=1, ON=1, U=4, THREADS=64))]


@pytest.mark.parametrize("precision, layout_b, overrides", COMPILES, ids=lambda v: str(v))
def test_compiles_without_spills_to_ffma_and_128_bit_loads(precision, layout_b, overrides):
    """NVRTC's ptxas report: no spills, no local memory; at most 128 registers (2 blocks of 256
    threads per SM) but for the largest tile of 2-byte storage (4x8: 184 with NVRTC 13.5, one block
    per SM); SASS: FFMA and LDG.128 (the aligned path), no LDL/STL."""
    problem, p = Problem(Shape(2, 2, 100000), precision, "row", layout_b), params(**overrides)
    compiled = compile_kernel(KERNELS_DIR / SPEC.source, SPEC.instance(problem, p),
                              CompileOptions.for_kernel("90", SPEC.options(problem, p, FACTS)), persistent=True)
    res = compiled.resources
    assert res is not None and res.spill_store_bytes == 0 and res.spill_load_bytes == 0 and res.stack_frame_bytes == 0
    assert res.registers <= (255 if overrides.get("ON") == 8 else 128)
    hist = compiled.sass["histogram"]
    assert hist["FFMA"] > 0 and hist["LDG.128"] > 0 and hist["LDL"] == 0 and hist["STL"] == 0


# --- kernel=auto: the tiny_output rule ----------------------------------------------------------------

LAYOUTS = [("row", "row"), ("row", "col")]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda v: "/".join(v))
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
@pytest.mark.parametrize("shape", [Shape(2, 2, 100000), Shape(1, 1, 4096), Shape(16, 16, 50000), Shape(1, 256, 8192)],
                         ids=str)
def test_auto_picks_it_for_tiny_outputs_with_huge_k(shape, precision, layout):
    """Every precision and B layout: the tiny_output rule comes first and takes splitk_dot with its
    plugin's first candidate (sized there, not in dispatch)."""
    from gemmlab.dispatch import auto
    assert auto.rules(shape, precision, layout, 132)[0].name == "tiny_output"
    choice = auto.choose(shape, REGISTRY, precision=precision, layout=layout, facts=FACTS)
    assert (choice.kernel, choice.source) == ("splitk_dot", "rule") and "tiny output, huge K" in choice.reason
    assert dict(choice.params) == SPEC.candidates(Problem(shape, precision, *layout), FACTS)[0]


@pytest.mark.parametrize("shape", [Shape(2, 2, 4095), Shape(1, 257, 100000), Shape(17, 16, 100000),
                                   Shape(4096, 4096, 4096)], ids=str)
def test_the_rule_stops_at_its_thresholds(shape):
    """M*N above 256 or K below 4096: the earlier rules, unchanged (never splitk_dot)."""
    from gemmlab.dispatch import auto
    for precision in ("fp32", "bf16"):
        assert all(r.name != "tiny_output" for r in auto.rules(shape, precision, ("row", "row"), 132))
        assert auto.choose(shape, REGISTRY, precision=precision, facts=FACTS).kernel != "splitk_dot"


def test_without_the_kernel_auto_falls_back_to_the_other_rules():
    """A registry without splitk_dot (a build without the plugin): the rule is skipped with the
    reason and the next rule decides."""
    from types import SimpleNamespace
    from gemmlab.dispatch import auto
    others = SimpleNamespace(kernels={k: v for k, v in REGISTRY.kernels.items() if k != "splitk_dot"})
    choice = auto.choose(Shape(2, 2, 100000), others, facts=FACTS)
    assert choice.kernel != "splitk_dot" and not any("splitk_dot" in s for s in choice.skipped)
