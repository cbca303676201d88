"""Strided batches in wgmma_bf16 / wgmma_tf32's fused entries (issue 43: "batch (count) with batch
strides ... stride 0 for a shared operand"; "batches through the persistent tile scheduler (tiles of all
batches in one queue), not a launch per batch"): ``gemm_wgmma_epi_batched`` and
``gemm_wgmma_epi_tma_store_batched`` (kernels/wgmma_bf16.cu), A and B (and the TMA-store C) through rank-3
TMA maps (``TensorMap(batched=True)``), one launch over batch x tiles.

CPU tests: the declaration, the entries a batched problem takes (single-batch fused and plain problems
keep theirs), the arguments in the entries' order and the rank-3 maps' dims and batch pitches (a shared
operand's map holds one batch), the contract's batch-stride rule and the batched map's own refusals (one
line each), the plugin's refusals (A/B needing a pad or transpose copy) before anything
compiles, the grid over batch x tiles and the queue's replay (every (batch, tile) once), candidates, and
NVRTC compiles of the batched instances (no spills, HGMMA not serialized, rank-3 TMA loads and stores
only), and batched points end to end on the fake GPU (tests/fakegpu.py ``wgmma_epi``: what the entries
compute, A and B read through their maps' own dims and pitches; it checks the plan, maps, arguments and
verification, not the kernel's index arithmetic), with a swapped stride argument caught. The kernel's
numerics are the GPU tests' (marker ``gpu``): batches 2 and 3 on partial tiles with ld above tight, gaps
between batches (NaN rows the kernel must neither read into a product nor write), shared A or B, every
epilogue in both epilogue paths, the deferred right half crossing a batch boundary, and memcheck runs.
"""

from __future__ import annotations

import re

import pytest

from gemmlab.contract import tma_rules
from gemmlab.contract.epilogue import Epilogue, refusal
from gemmlab.contract.hookspecs import Dim, ParamError, Problem, Region, Shape, TensorMap
from gemmlab.contract.registry import load_registry
from gemmlab.errors import ConfigError
from gemmlab.gpu.device import offline_facts
from gemmlab.run.pipeline import run_point
from wgmma_build import compile_clean
from gemmlab_plugins.wgmma_bf16 import batched_tiles

REGISTRY = load_registry([])
SPEC = REGISTRY.get("wgmma_bf16")
TF32 = REGISTRY.get("wgmma_tf32")
FACTS = offline_facts("90")
TIMING = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "graph"}


def _problem(shape=(200, 304, 64), precision="bf16", la="row", lb="col", out="bf16", **ep) -> Problem:
    return Problem(Shape(*shape), precision, la, lb, out=out, epilogue=Epilogue(**ep))


def _compile_cfg(shape, batch: dict, precision="bf16", layout=None, **kernel) -> dict:
    return {"kernel": {"name": "wgmma_tf32" if precision == "tf32" else "wgmma_bf16", **kernel}, "shape": list(shape),
            "precision": precision, "mode": "compile", "layout": layout or {"b": "col"},
            "epilogue": {"out": "bf16", "bias": "input"}, "batch": batch}


# --- declaration, entries, arguments --------------------------------------------------------------

def test_both_wgmma_kernels_declare_batches():
    assert SPEC.epilogue.batch and TF32.epilogue == SPEC.epilogue
    assert refusal(SPEC.epilogue, _problem(batch=3, stride_a=0), "wgmma_bf16") is None


@pytest.mark.parametrize("over, tma", [({}, True), ({"EPI": 1}, False), ({"EPI": 2}, True)])
def test_a_batched_problem_takes_the_batched_entries_and_one_batch_keeps_its_own(over, tma):
    params = {**SPEC.defaults, **over}
    batched = _problem(batch=2, bias="input")
    one = _problem(bias="input")
    base = "gemm_wgmma_epi_tma_store" if tma else "gemm_wgmma_epi"
    assert SPEC.instance(batched, params).startswith(base + "_batched<")
    assert SPEC.instance(one, params).startswith(base + "<")
    # the same template arguments: only the entry differs
    assert SPEC.instance(batched, params).split("<", 1)[1] == SPEC.instance(one, params).split("<", 1)[1]
    assert SPEC.instance(Problem(Shape(200, 304, 64), "bf16", "row", "col"), params).startswith("gemm_wgmma")
    assert "_epi" not in SPEC.instance(Problem(Shape(200, 304, 64), "bf16", "row", "col"), params)


@pytest.mark.parametrize("tma", [True, False])
def test_batched_arguments_take_rank3_maps_then_batch_and_the_strides(tma):
    problem = _problem(batch=3, stride_b=0, beta=1.0, bias="float32", ldc=312 if tma else 305)
    params = {**SPEC.defaults, "EPI": 7}
    assert SPEC.tma_store(problem, params) == tma
    args = SPEC.arguments(problem, params, FACTS)
    maps = args[:3 if tma else 2]
    assert all(isinstance(m, TensorMap) and m.batched for m in maps)
    assert [m.matrix for m in maps] == (["A", "B", "C"] if tma else ["A", "B"])
    assert args[-4:] == (Dim("batch"), Dim("stride_a"), Dim("stride_b"), Dim("stride_c"))
    # the single-batch entry's arguments are the prefix: the same order, 2-D maps
    one = SPEC.arguments(_problem(beta=1.0, bias="float32", ldc=312 if tma else 305), params, FACTS)
    assert len(one) == len(args) - 4 and not any(getattr(m, "batched", False) for m in one)
    assert [type(a) for a in one] == [type(a) for a in args[:-4]]


def test_rank3_maps_cover_batches_held_at_their_pitches():
    problem = _problem(shape=(200, 304, 64), lb="row", batch=3, lda=72, stride_a=0, stride_b=64 * 304 + 5 * 304,
                       ldc=312, stride_c=205 * 312)
    a = tma_rules.check(TensorMap("A", (128, 64), batched=True), problem)
    assert a["global"] == [1, 200, 64] and a["row_stride_bytes"] == 144 and a["box"] == [1, 128, 64]
    assert a["batch_stride_bytes"] == 200 * 72 * 2  # a shared A: one batch (rows x lda, never used)
    b = tma_rules.check(TensorMap("B", (64, 64), batched=True), problem)
    assert b["global"] == [3, 64, 304] and b["batch_stride_bytes"] == (64 * 304 + 5 * 304) * 2
    c = tma_rules.check(TensorMap("C", (16, 64), batched=True), problem)
    assert c["global"] == [3, 200, 304] and c["row_stride_bytes"] == 624 and c["batch_stride_bytes"] == 205 * 312 * 2
    with pytest.raises(ConfigError, match="a 2-D map covers one matrix; B holds 3 batches"):
        tma_rules.check(TensorMap("B", (64, 64)), problem)


def test_the_batch_stride_rule_and_the_batched_maps_own_refusals_are_one_line():
    # a stride the config never makes (not a multiple of lda) breaks only the batch-pitch rule here
    odd = _problem(shape=(200, 304, 64), batch=2, stride_a=200 * 64 + 4)
    with pytest.raises(ConfigError) as exc:
        tma_rules.check(TensorMap("A", (128, 64), batched=True), odd)
    assert exc.value.field == "batch.stride_a" and "\n" not in str(exc.value)
    assert "the batch stride 12804 x 2 B = 25608 B is not a multiple of 16 bytes (TMA rule)" in str(exc.value)
    region = Region(offset=0, rows=64, cols=64, dtype="bfloat16")
    with pytest.raises(ConfigError) as exc:
        tma_rules.check(TensorMap("workspace", (64, 64), region=region, batched=True), odd, workspace_bytes=1 << 20)
    assert exc.value.field == "kernel" and "batched maps need an epilogue problem's A, B or C" in str(exc.value)


@pytest.mark.parametrize("cfg, field, message", [
    (_compile_cfg((256, 256, 100), {"count": 2}), "shape",
     "K=100 x 2 B (A's rows, lda tight) is not a multiple of 16 bytes: TMA reads batched operands as stored"),
    (_compile_cfg((256, 300, 256), {"count": 3}, layout={"b": "row"}), "shape",
     "N=300 x 2 B (B's rows, ldb tight) is not a multiple of 16 bytes"),
    (_compile_cfg((256, 256, 256), {"count": 2}, layout={"lda": 260}), "layout.lda",
     "lda=260 x 2 B is not a multiple of 16 bytes: TMA reads batched operands as stored"),
    (_compile_cfg((256, 256, 256), {"count": 2}, precision="tf32", layout={"b": "row"}), "layout.b",
     "layout.b=row: wgmma_tf32 reads it through a transposed copy of one matrix"),
    (_compile_cfg((256, 256, 256), {"count": 2}, precision="tf32", layout={"a": "col", "b": "col"}), "layout.a",
     "layout.a=col: wgmma_tf32 reads it through a transposed copy"),
], ids=["pad-a", "pad-b", "pad-lda", "tf32-transpose-b", "tf32-transpose-a"])
def test_batched_refusals_come_before_anything_compiles(tmp_path, cfg, field, message):
    rec = run_point(cfg, tmp_path)
    assert rec["status"] == "invalid" and rec["error"].startswith(f"{field}: {message}"), rec["error"]
    assert "\n" not in rec["error"] and "compile" not in rec


def test_the_same_shapes_in_one_batch_are_accepted():
    """The refusals above are the batches': one batch pads or transposes as before."""
    for precision, la, lb, shape in (("bf16", "row", "col", (256, 256, 100)), ("tf32", "row", "row", (256, 256, 256))):
        spec = TF32 if precision == "tf32" else SPEC
        spec.check_problem(_problem(shape=shape, precision=precision, la=la, lb=lb, bias="input"), spec.defaults, FACTS)
        with pytest.raises(ParamError):
            spec.check_problem(_problem(shape=shape, precision=precision, la=la, lb=lb, bias="input", batch=2),
                               spec.defaults, FACTS)


# --- the queue over batch x tiles -----------------------------------------------------------------

@pytest.mark.parametrize("shape, batch, over", [((200, 304, 64), 3, {}), ((1000, 1500, 640), 3, {}),
                                                ((63, 72, 40), 2, {"SCHED": 2, "BM": 64}),
                                                ((4096, 512, 64), 5, {"GROUP_M": 8, "BN": 128}),
                                                ((640, 520, 64), 3, {"CLUSTER": 2}), ((2000, 600, 64), 4, {"CLUSTER": 2})],
                         ids=str)
def test_one_launch_visits_every_tile_of_every_batch_once(shape, batch, over):
    """Every (batch, tile) exactly once (with CLUSTER=2 the pair's second row where M has an odd number
    of tile rows lies past M: TMA zero-fills it and nothing is stored there), one CTA per SM at most."""
    params = {**SPEC.defaults, **over}
    problem = _problem(shape=shape, batch=batch)
    launch = SPEC.geometry(problem, params, FACTS)
    cl = params["CLUSTER"]
    num_m, num_n = -(-shape[0] // params["BM"]), -(-shape[1] // params["BN"])
    units = -(-num_m // cl) * num_n * batch
    assert launch.grid == (cl * min(FACTS.sm_count // cl, units), 1, 1)
    assert launch.cluster == ((cl, 1, 1) if cl > 1 else None)
    seen = [t for cta in batched_tiles(Shape(*shape), params, launch.grid[0], batch) for t in cta]
    inside = [t for t in seen if t[1] < num_m]
    want = {(z, m, n) for z in range(batch) for m in range(num_m) for n in range(num_n)}
    assert len(inside) == len(want) and set(inside) == want
    assert len(seen) - len(inside) == (num_m % cl) * num_n * batch  # the pairs' rows past M
    # batch-major: a CTA's items never go back to an earlier batch
    for cta in batched_tiles(Shape(*shape), params, launch.grid[0], batch):
        assert [z for z, _, _ in cta] == sorted(z for z, _, _ in cta)


def test_candidates_of_a_batched_problem_pass_its_rules():
    problem = _problem(shape=(2048, 2048, 128), batch=8, bias="input", activation="gelu_tanh")
    cands = SPEC.candidates(problem, FACTS)
    assert cands
    for c in cands:
        SPEC.check_problem(problem, c, FACTS)
    # the waves count every batch's tiles: 256 batches of 128 x 128 fill 132 SMs with 128x128 tiles (one
    # batch alone would rank the 64x64 tile first: one wave whatever the tile)
    many = SPEC.candidates(_problem(shape=(128, 128, 64), batch=256, stride_b=0), FACTS)
    assert (many[0]["BM"], many[0]["BN"]) == (128, 128)
    assert (SPEC.candidates(_problem(shape=(128, 128, 64)), FACTS)[0]["BM"],
            SPEC.candidates(_problem(shape=(128, 128, 64)), FACTS)[0]["BN"]) == (64, 64)


# --- end to end on the fake GPU (tests/fakegpu.py wgmma_epi: what the entries compute, read through the
# maps' own dims and pitches, batch ``stride ? z : 0``, zeros past a map's batch dimension) -----------

def _fake_run(tmp_path, monkeypatch, cfg):
    import gemmlab.gpu.device
    from fakegpu import HostGpu
    gpu = HostGpu()
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    return run_point(cfg, tmp_path / "point")


@pytest.mark.parametrize("form, strides, epi, which", [
    ("bf16-rowcol", "gaps", 7, 2), ("bf16-rowrow", "shared_b", 7, 1), ("bf16-pingpong", "shared_a", 1, 4),
    ("fp16-colrow", "gaps", 2, 3), ("tf32-rowcol", "tight", 7, 0), ("fp16-colrow", "shared_b", 1, 0),
    ("bf16-rowrow-cluster", "shared_a", 7, 4),
], ids=str)
def test_batched_points_verify_on_the_fake_gpu(tmp_path, monkeypatch, form, strides, epi, which):
    """The whole pipeline of a batched point (inputs with NaN padding and gaps, the rank-3 maps, the
    arguments, the fused reference of every batch, the padding check) on the fake GPU."""
    rec = _fake_run(tmp_path, monkeypatch, {**_batched_cfg(form, (63, 72, 40), EPILOGUES[which], 3, strides, epi=epi),
                                            "timing": {"warmup": 1, "repeat": 2, "batch": 1, "mode": "events"}})
    assert rec["status"] == "ok", rec.get("error")
    v = rec["verification"]
    assert v["passed"] and [b["batch"] for b in v["epilogue"]["batches"]] == [0, 1, 2]
    assert v["epilogue"]["padding"]["written"] == 0 and rec["inputs_unchanged"] and rec["guard_bands"] == "intact"
    entry = "gemm_wgmma_epi_batched<" if epi == 1 else "gemm_wgmma_epi_tma_store_batched<"
    assert rec["compile"]["name_expression"].startswith(entry)


def test_a_swapped_batch_stride_or_a_one_batch_map_fails_on_the_fake_gpu(tmp_path, monkeypatch):
    """The fake reads what the launch says: stride_a and stride_b swapped (B shared, so A's batches 1 and 2
    would be read at batch 0) and a shared B read at batch z through its one-batch map (zeros) both give
    wrong results."""
    cfg = {**_batched_cfg("bf16-rowcol", (63, 72, 40), EPILOGUES[2], 3, "shared_b"),
           "timing": {"warmup": 1, "repeat": 2, "batch": 1, "mode": "events"}}
    real = type(SPEC).arguments
    monkeypatch.setattr(type(SPEC), "arguments", lambda self, problem, params, device: (
        lambda a: (*a[:-3], a[-2], a[-3], a[-1]))(real(self, problem, params, device)))
    rec = _fake_run(tmp_path / "swap", monkeypatch, cfg)
    assert rec["status"] == "wrong_result" and rec["verification"]["mismatches"] > 0
    monkeypatch.setattr(type(SPEC), "arguments", lambda self, problem, params, device: (
        lambda a: (*a[:-3], a[-3], Dim("stride_c"), a[-1]))(real(self, problem, params, device)))
    rec = _fake_run(tmp_path / "one", monkeypatch, cfg)
    assert rec["status"] == "wrong_result" and rec["verification"]["mismatches"] > 0


# --- compiled code (NVRTC, no GPU) ----------------------------------------------------------------

@pytest.mark.parametrize("kernel, precision, la, lb, ep, over, tma", [
    ("wgmma_bf16", "bf16", "row", "col", {"out": "bf16", "bias": "input", "activation": "gelu_tanh"}, {}, True),
    ("wgmma_bf16", "bf16", "row", "col", {"out": "bf16", "bias": "input", "activation": "gelu_tanh", "stride_b": 0},
     {"EPI": 1}, False),
    ("wgmma_bf16", "fp16", "col", "row", {"out": "fp16", "beta": 1.0, "bias": "float32", "activation": "silu",
                                          "stride_a": 0}, {"SCHED": 2, "BM": 64}, True),
    ("wgmma_bf16", "bf16", "row", "col", {"out": "float32", "beta": 1.0, "bias": "float32", "activation": "silu"}, {},
     True),
    ("wgmma_tf32", "tf32", "row", "col", {"out": "bf16", "beta": 0.5, "bias": "input", "activation": "gelu_erf"},
     {"EPI": 2}, True),
    ("wgmma_bf16", "bf16", "row", "row", {"out": "bf16", "bias": "input", "activation": "relu", "stride_a": 0},
     {"CLUSTER": 2}, True),
], ids=["bf16-gelu_tanh-bf16-deferred", "bf16-gelu_tanh-bf16-registers-shared-b", "fp16-colrow-beta-silu-pingpong-tma",
        "bf16-beta-silu-float32-deferred", "tf32-beta-gelu_erf-bf16-tma", "bf16-rowrow-relu-cluster-shared-a"])
def test_batched_instance_compiles_without_spills_and_with_rank3_tma(kernel, precision, la, lb, ep, over, tma):
    """4096^3 x 3 batches: no spills, no local memory, HGMMA and none serialized; every TMA load and
    store of rank 3 (UTMALDG.3D, UTMASTG.3D; no .2D left), as many store sites as the single-batch entry
    (tests/test_epilogue_wgmma.py)."""
    ep = dict(ep)
    out = ep.pop("out")
    problem = Problem(Shape(4096, 4096, 4096), precision, la, lb, out=out, epilogue=Epilogue(batch=3, **ep))
    entry = "gemm_wgmma_epi_tma_store_batched" if tma else "gemm_wgmma_epi_batched"
    spec, params, compiled = compile_clean(kernel, problem, over, tma, entry)
    kinds = set(re.findall(r"\b(UTMA(?:LDG|STG)\.\dD)\b", compiled.sass_text))
    assert kinds == ({"UTMALDG.3D", "UTMASTG.3D"} if tma else {"UTMALDG.3D"}), kinds
    half = 128 * problem.c_bytes // 128
    sites = 4 * half if spec.defers(problem, params) else params["BN"] * problem.c_bytes // 128
    assert compiled.sass["histogram"]["UTMASTG"] == (sites if tma else 0)


# --- on a GPU -------------------------------------------------------------------------------------

#: (precision, layout a, layout b, parameters): the defaults' cooperative 128x256 tile, a row-major B (its
#: K-row edge inside a box: the rank-3 map must zero-fill it, not read the next batch), the 2-CTA cluster
#: (B multicast by rank-3 loads; a pair's second row past M), ping-pong 64x256,
#: fp16 with both transpose bits, tf32 K-major
FORMS = {
    "bf16-rowcol": ("bf16", "row", "col", {}),
    "bf16-rowrow": ("bf16", "row", "row", {}),
    "bf16-rowrow-cluster": ("bf16", "row", "row", {"CLUSTER": 2}),
    "bf16-pingpong": ("bf16", "row", "col", {"SCHED": 2, "BM": 64}),
    "fp16-colrow": ("fp16", "col", "row", {}),
    "tf32-rowcol": ("tf32", "row", "col", {}),
}
#: tests/test_epilogue_wgmma.py's: every activation, every output type, beta != 0, both bias kinds
EPILOGUES = [
    {"beta": 1.0, "out": "float32"},
    {"alpha": 0.5, "beta": -1.0, "bias": "float32", "activation": "relu", "out": "bf16"},
    {"beta": 0.25, "bias": "input", "activation": "gelu_tanh", "out": "bf16"},
    {"beta": 1.0, "bias": "input", "activation": "gelu_erf", "out": "fp16"},
    {"alpha": 2.0, "beta": 1.0, "bias": "float32", "activation": "silu", "out": "float32"},
]
#: partial tiles in M, N and K (N a multiple of 8: C's rows end on 16 bytes, so the TMA store runs)
SHAPES = [(63, 72, 40), (129, 264, 1000), (200, 304, 72)]


def _ld_above(tight: int) -> int:
    """A leading dimension above ``tight`` (by 1..8) and a multiple of 8 elements: rows of 16-byte
    multiples for 2- and 4-byte elements, so TMA reads the operands as stored."""
    return (tight // 8 + 1) * 8


def _batched_cfg(form: str, shape, epilogue: dict, batch: int, strides: str, epi: int = 7) -> dict:
    """A point of ``form`` with ``batch`` batches: lda, ldb, ldc above tight (:func:`_ld_above`; with
    ``EPI=1`` ldc = N + 9, odd: the register entry, every store masked) and the batch strides ``strides``:
    ``tight`` (null), ``gaps`` (each 3 rows of ld more than a batch needs: NaN rows between batches),
    ``shared_a`` / ``shared_b`` (stride 0: one A or B for every batch; the others with gaps)."""
    precision, la, lb, params = FORMS[form]
    M, N, K = shape
    rows = {"a": M if la == "row" else K, "b": K if lb == "row" else N, "c": M}
    ld = {"a": _ld_above(K if la == "row" else M), "b": _ld_above(N if lb == "row" else K),
          "c": N + 9 if epi == 1 else _ld_above(N)}
    batch_cfg = {"count": batch}
    if strides != "tight":
        for x in "abc":
            batch_cfg[f"stride_{x}"] = 0 if strides == f"shared_{x}" else (rows[x] + 3) * ld[x]
    return {"kernel": {"name": "wgmma_tf32" if precision == "tf32" else "wgmma_bf16", "EPI": epi, **params},
            "shape": list(shape), "mode": "run", "precision": precision, "timing": dict(TIMING),
            "epilogue": epilogue, "batch": batch_cfg,
            "layout": {"a": la, "b": lb, "lda": ld["a"], "ldb": ld["b"], "ldc": ld["c"]}}


def _check(rec: dict, entry: str) -> None:
    assert rec["status"] == "ok", rec.get("error")
    assert rec["compile"]["name_expression"].startswith(entry + "<"), rec["compile"]["name_expression"]
    assert rec["verification"]["epilogue"]["padding"]["written"] == 0 and rec["verification_after_timing"]["passed"]
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    assert rec["compile"]["driver_attributes"]["local_bytes"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", EPILOGUES, ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()))
@pytest.mark.parametrize("form, shape", [(f, s) for f in FORMS for s in SHAPES], ids=lambda x: str(x))
def test_gpu_wgmma_batched_each_epilogue_partial_tiles_gaps(tmp_path, form, shape, epilogue):
    """3 batches with NaN rows between them, ld above tight, the TMA-store entry (EPI=7: deferred on the
    cooperative 128x256 tile, else as 2): verified against the float64 reference of every batch, the
    padding and the gaps unwritten."""
    rec = run_point(_batched_cfg(form, shape, epilogue, 3, "gaps"), tmp_path / "point")
    _check(rec, "gemm_wgmma_epi_tma_store_batched")


@pytest.mark.gpu
@pytest.mark.parametrize("epi", [1, 7])
@pytest.mark.parametrize("strides", ["shared_a", "shared_b", "tight"])
@pytest.mark.parametrize("form", list(FORMS))
def test_gpu_wgmma_batched_shared_operands_both_paths(tmp_path, form, strides, epi):
    """2 batches, one A or one B for both (stride 0: its rank-3 map holds one batch, read at batch 0) or
    tight strides, in the register entry (EPI=1, odd ldc) and the TMA-store entry (EPI=7)."""
    rec = run_point(_batched_cfg(form, (129, 264, 1000), EPILOGUES[2], 2, strides, epi=epi), tmp_path / "point")
    _check(rec, "gemm_wgmma_epi_batched" if epi == 1 else "gemm_wgmma_epi_tma_store_batched")


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", EPILOGUES, ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()))
@pytest.mark.parametrize("form", ["bf16-rowcol", "fp16-colrow"])
def test_gpu_wgmma_batched_deferred_right_half_crosses_batches(tmp_path, form, epilogue):
    """1000 x 1504 x 640 (N x 2 B a multiple of 16: the TMA store), 3 batches: 8 x 6 = 48 tiles of 128x256
    a batch, 144 in the queue on <= 132 CTAs,
    so a CTA's second tile is of another batch than its first: the deferred right half (EPI=7, stored
    during the next tile's main loop) must keep its own batch (C's map coordinate and C0's offset)."""
    rec = run_point(_batched_cfg(form, (1000, 1504, 640), epilogue, 3, "gaps"), tmp_path / "point")
    _check(rec, "gemm_wgmma_epi_tma_store_batched")
    assert rec["compile"]["name_expression"].split(", ")[9] == "1"  # DEFER = 1


@pytest.mark.gpu
@pytest.mark.parametrize("epi", [1, 7])
@pytest.mark.parametrize("strides", ["gaps", "shared_b"])
@pytest.mark.parametrize("form", ["bf16-rowrow", "fp16-colrow", "tf32-rowcol"])
def test_gpu_wgmma_batched_memcheck_clean(tmp_path, form, strides, epi):
    """compute-sanitizer memcheck over a batched point (3 batches, partial tiles, the register and the
    TMA-store entries): no access outside the buffers (C + z x stride_c, C0, the bias)."""
    cfg = {**_batched_cfg(form, (129, 264, 1000), EPILOGUES[3], 3, strides, epi=epi), "sanitizer": "memcheck"}
    rec = run_point(cfg, tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
