"""The whole GEMM contract in wgmma_bf16 and wgmma_tf32 (issue 43 item 3, "the epilogue in the fast
kernels: wgmma_bf16 / wgmma_tf32 (in the TMA-store epilogue, EPI=7 included)"): the fused entries
(kernels/wgmma_bf16.cu, under -DGEMMLAB_EPI) run alpha, beta·C0, a float32 or input-typed bias, every
activation and a float32/bf16/fp16 C with ldc >= N on whole tiles: ``gemm_wgmma_epi_tma_store`` (EPI=2,
and EPI=7 with the deferred right half on the cooperative 128x256 tile) where C's TMA map can be made
(ldc x C's element bytes a multiple of 16), else and with EPI=1 the register path ``gemm_wgmma_epi``.

CPU tests: the declarations, the plain problems' entries unchanged (their SASS is pinned by
tests/test_sass_unchanged.py), the fused instances' names, options and arguments (C's map: 16 rows x
128 bytes, row pitch ldc), the plan's notes naming the EPI that ran, the one-line refusals (lda/ldb
above tight, split tiles, the staged experiments; batches: tests/test_epilogue_wgmma_batched.py), candidates and preferences without split K
or the tail, kernel=auto choosing wgmma_bf16 for a bf16 4096^3 problem with an epilogue (not
decode_bf16, the last resort before), and NVRTC compiles of the fused instances with no spills, HGMMA
(not serialized) and, in the TMA-store path, UTMASTG. No fake-GPU emulation of the wgmma kernels
exists, so the numerics are the GPU tests' (marker ``gpu``): each epilogue on the partial-tile suite
with ldc > N and beta != 0, bf16, fp16 and tf32, every layout, ping-pong and the 2-CTA cluster, both
epilogue paths, tiles enough for the deferred right half, and memcheck runs.
"""

from __future__ import annotations

import re

import pytest

from gemmlab.contract import tma_rules
from gemmlab.contract.epilogue import ACTIVATIONS, OUTPUTS, PLAIN, Epilogue, refusal
from gemmlab.contract.hookspecs import Dim, Matrix, ParamError, Problem, Shape, TensorMap, Value
from gemmlab.contract.registry import load_registry
from gemmlab.dispatch import auto as dispatch
from gemmlab.errors import ConfigError
from gemmlab.gpu.device import offline_facts
from gemmlab.run.pipeline import run_point
from wgmma_build import compile_clean

REGISTRY = load_registry([])
SPEC = REGISTRY.get("wgmma_bf16")
TF32 = REGISTRY.get("wgmma_tf32")
FACTS = offline_facts("90")
BIG = Shape(4096, 4096, 4096)
TIMING = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "graph"}

#: the epilogues of tests/test_epilogue_fast.py (every activation, every output type, beta != 0), each
#: here with the bias kind it names: float32, or the input type for the bf16/fp16 bias
EPILOGUES = [
    {"beta": 1.0, "out": "float32"},
    {"alpha": 0.5, "beta": -1.0, "bias": "float32", "activation": "relu", "out": "bf16"},
    {"beta": 0.25, "bias": "input", "activation": "gelu_tanh", "out": "bf16"},
    {"beta": 1.0, "bias": "input", "activation": "gelu_erf", "out": "fp16"},
    {"alpha": 2.0, "beta": 1.0, "bias": "float32", "activation": "silu", "out": "float32"},
]


def _params(**over) -> dict:
    return {**SPEC.defaults, **over}


def _fused(shape=BIG, precision="bf16", la="row", lb="col", out="bf16", **ep) -> Problem:
    return Problem(shape, precision, la, lb, out=out, epilogue=Epilogue(**ep) if ep else None)


# --- declaration and entries ----------------------------------------------------------------------

def test_wgmma_kernels_declare_the_fused_epilogue():
    ep = SPEC.epilogue
    assert ep.alpha_beta and set(ep.bias) == {"float32", "input"} and ep.activations == ACTIVATIONS[1:]
    assert ep.outs == tuple(OUTPUTS) and ep.ld and ep.batch and not ep.rounds_before_epilogue
    assert TF32.epilogue == ep != PLAIN  # one template: ELEM = 4 takes the fused entries too
    problem = _fused(bias="input", activation="gelu_tanh", ldc=4100)
    assert refusal(ep, problem, "wgmma_bf16") is None
    assert refusal(ep, _fused(batch=2, stride_b=0), "wgmma_bf16") is None  # tests/test_epilogue_wgmma_batched.py


@pytest.mark.parametrize("precision, la, lb", [("bf16", "row", "col"), ("fp16", "col", "row")])
def test_plain_problems_keep_their_entries_and_fused_ones_take_gemm_wgmma_epi(precision, la, lb):
    plain = Problem(BIG, precision, la, lb)
    name = SPEC.instance(plain, SPEC.defaults)
    assert name.startswith("gemm_wgmma_tma_store") and "_epi" not in name
    assert not SPEC.options(plain, SPEC.defaults, FACTS).defines
    major = int(lb == "row") | int(la == "col") << 1
    fused = Problem(BIG, precision, la, lb, out="fp16", epilogue=Epilogue(beta=1.0, bias="input", activation="silu"))
    bias_t = "__nv_bfloat16" if precision == "bf16" else "__half"
    assert SPEC.instance(fused, _params(EPI=1)) == (
        f"gemm_wgmma_epi<2, 128, 256, 4, {major}, 1, 16, 0, {int(precision == 'fp16')}, 4, 1, 1, {bias_t}, __half>")
    assert SPEC.options(fused, SPEC.defaults, FACTS).defines == {"GEMMLAB_EPI": 1}
    # a C type alone is beyond the plain contract: the fused entry with ACT = BIAS = BETA = 0; EPI=7 (the
    # default) off the 128x256 cooperative tile is the TMA store without deferral (DEFER = 0)
    out_only = Problem(BIG, precision, la, lb, out="bf16")
    assert SPEC.instance(out_only, _params(SCHED=2, BM=64)) == (
        "gemm_wgmma_epi_tma_store<2, 64, 256, 4, %d, 1, 16, 1, %d, 0, 0, 0, 0, float, __nv_bfloat16>" % (major, precision == "fp16"))
    assert SPEC.instance(fused, SPEC.defaults) == (
        f"gemm_wgmma_epi_tma_store<2, 128, 256, 4, {major}, 1, 16, 0, {int(precision == 'fp16')}, 1, 4, 1, 1, {bias_t}, __half>")


def test_fused_arguments_in_the_entry_order():
    problem = _fused(alpha=2.0, beta=0.5, bias="float32", activation="relu", ldc=4099)
    args = SPEC.arguments(problem, _params(EPI=1), FACTS)
    assert [type(a) for a in args[:2]] == [TensorMap, TensorMap] and [a.matrix for a in args[:2]] == ["A", "B"]
    assert args[2:] == (Matrix("C"), Matrix("C0"), Matrix("bias"), Dim("M"), Dim("N"), Dim("K"), Dim("ldc"),
                        Value(2.0, "float32"), Value(0.5, "float32"))
    bare = SPEC.arguments(_fused(activation="gelu_erf"), _params(EPI=1), FACTS)
    assert bare[3] == bare[4] == Value(0, "int64") and bare[-2:] == (Value(1.0, "float32"), Value(0.0, "float32"))
    # ldc = 4099 bf16: 8198-byte rows, no TMA map of C, so even EPI=7 (the default) stores from registers
    # with no staging buffers: the launch's shared memory is the ring's alone
    assert SPEC.arguments(problem, SPEC.defaults, FACTS) == args
    launch = SPEC.geometry(problem, SPEC.defaults, FACTS)
    assert launch.shared_bytes == 4 * (128 + 256) * 128 + 1024 and launch.grid == (132, 1, 1)


@pytest.mark.parametrize("out, box", [("bf16", (16, 64)), ("fp16", (16, 64)), ("float32", (16, 32))])
def test_fused_tma_store_arguments_put_cs_map_first(out, box):
    """The TMA-store entry: C's map (16 rows x 128 bytes of C's type, 128-byte swizzle) before the
    register entry's arguments; with ldc > N the map covers M x N at row pitch ldc (tma_rules)."""
    from gemmlab.contract import tma_rules
    problem = _fused(out=out, beta=1.0, bias="float32", activation="silu", ldc=4104)
    args = SPEC.arguments(problem, SPEC.defaults, FACTS)
    assert args[2] == TensorMap("C", box) and args[3:6] == (Matrix("C"), Matrix("C0"), Matrix("bias"))
    assert args[3:] == SPEC.arguments(problem, _params(EPI=1), FACTS)[2:]
    desc = tma_rules.check(args[2], problem)
    size = {"bf16": 2, "fp16": 2, "float32": 4}[out]
    assert desc["global"] == [4096, 4096] and desc["row_stride_bytes"] == 4104 * size
    assert desc["dtype"] == {"bf16": "bfloat16", "fp16": "float16", "float32": "float32"}[out]
    # the staging buffers: 2 KiB x 2 per consumer warp, as the plain TMA store
    assert SPEC.geometry(problem, SPEC.defaults, FACTS).shared_bytes == 4 * (128 + 256) * 128 + 1024 + 32768
    SPEC.check_problem(problem, SPEC.defaults, FACTS)


@pytest.mark.parametrize("ep, over, entry, note", [
    ({}, {}, "gemm_wgmma_epi_tma_store<2, 128, 256, 4, 0, 1, 16, 0, 0, 1,", ""),
    ({}, {"EPI": 2}, "gemm_wgmma_epi_tma_store<2, 128, 256, 4, 0, 1, 16, 0, 0, 0,", ""),
    ({}, {"EPI": 1}, "gemm_wgmma_epi<", ""),
    ({}, {"SCHED": 2, "BM": 64}, "gemm_wgmma_epi_tma_store<2, 64, 256, 4, 0, 1, 16, 1, 0, 0,",
     "fused epilogue, right half not deferred: BM=64, SCHED=2 (needs BM=128, BN=256, SCHED=1); EPI=7 runs as 2"),
    ({}, {"BN": 128}, "gemm_wgmma_epi_tma_store<2, 128, 128, 4, 0, 1, 16, 0, 0, 0,",
     "fused epilogue, right half not deferred: BN=128 (needs BM=128, BN=256, SCHED=1); EPI=7 runs as 2"),
    ({"ldc": 4100}, {}, "gemm_wgmma_epi<",
     "fused epilogue from registers: ldc 4100 x 2 B is not a multiple of 16 bytes (C's TMA map; a TMA store "
     "writes whole 16-byte chunks); EPI=7 runs as 1"),
    ({"ldc": 4101}, {"EPI": 2}, "gemm_wgmma_epi<",
     "fused epilogue from registers: ldc 4101 x 2 B is not a multiple of 16 bytes (C's TMA map; a TMA store "
     "writes whole 16-byte chunks); EPI=2 runs as 1"),
    ({"ldc": 4104}, {}, "gemm_wgmma_epi_tma_store<2, 128, 256, 4, 0, 1, 16, 0, 0, 1,", ""),
], ids=["default-deferred", "epi2", "epi1", "pingpong", "bn128", "ldc4100", "ldc4101-epi2", "ldc4104"])
def test_the_fused_entry_and_the_plans_note_name_the_epilogue_that_runs(ep, over, entry, note):
    problem = _fused(bias="input", activation="gelu_tanh", **ep)
    params = _params(**over)
    SPEC.check_problem(problem, params, FACTS)
    assert SPEC.instance(problem, params).startswith(entry)
    assert SPEC.plan(problem, params, FACTS)[-1].note == note


@pytest.mark.parametrize("n, out, tma", [(4097, "bf16", False), (4100, "bf16", False), (4104, "bf16", True),
                                         (4098, "float32", False), (4100, "float32", True)])
def test_a_row_of_c_ending_inside_16_bytes_is_stored_from_registers(n, out, tma):
    """ldc above N and 16-byte rows, but N x C's bytes not a multiple of 16: a TMA store writes whole
    16-byte chunks (H100, session 33: the padding after N up to the chunk's end was written), so the
    register entry runs and the plan says why; C's map over such a row is refused by the TMA rules."""
    ldc = (n // 8 + 2) * 8
    problem = _fused(Shape(1024, n, 512), out=out, bias="input", activation="gelu_tanh", ldc=ldc)
    params = _params()
    SPEC.check_problem(problem, params, FACTS)
    assert SPEC.instance(problem, params).startswith("gemm_wgmma_epi_tma_store<" if tma else "gemm_wgmma_epi<")
    note = SPEC.plan(problem, params, FACTS)[-1].note
    c_bytes = 4 if out == "float32" else 2
    assert note == ("" if tma else f"fused epilogue from registers: N {n} x {c_bytes} B is not a multiple of 16 bytes "
                    "(C's TMA map; a TMA store writes whole 16-byte chunks); EPI=7 runs as 1")
    box = SPEC.fused_box(problem)
    if tma:
        assert tma_rules.check(TensorMap("C", box, swizzle="128B"), problem)["global"] == [1024, n]
    else:
        with pytest.raises(ConfigError, match=r"^shape: TMA tensor map over C: N = \d+ x \d B = \d+ B is not a multiple of 16 bytes "
                           r"with ldc = \d+ > N: TMA stores write whole 16-byte chunks"):
            tma_rules.check(TensorMap("C", box, swizzle="128B"), problem)


def test_maps_over_an_epilogue_problems_matrices_take_their_leading_dimension():
    """gemmlab.contract.tma_rules.matrix_view: with an epilogue a map over A, B or C covers one matrix
    (rows x cols as stored) at row pitch lda/ldb/ldc, never the padding past cols; the ld then meets
    the 16-byte rule (one line, field shape); a batched operand refuses a 2-D map (field kernel)."""
    from gemmlab.contract import tma_rules
    from gemmlab.errors import ConfigError
    shape = Shape(100, 200, 64)
    problem = _fused(shape, out="bf16", lda=72, ldc=216, bias="input")
    a, c = (tma_rules.check(TensorMap(m, box), problem) for m, box in (("A", (64, 64)), ("C", (16, 64))))
    assert (a["global"], a["row_stride_bytes"]) == ([100, 64], 144)
    assert (c["global"], c["row_stride_bytes"], c["dtype"]) == ([100, 200], 432, "bfloat16")
    assert problem.stored_shape("C") == (100, 216)  # the buffer, padding included: not the map's extent
    with pytest.raises(ConfigError) as exc:
        tma_rules.check(TensorMap("C", (16, 64)), _fused(shape, out="bf16", ldc=210, bias="input"))
    assert (exc.value.field, str(exc.value).split(": ", 1)[1]) == (
        "shape", "TMA tensor map over C: the row stride ldc = 210 x 2 B = 420 B is not a multiple of 16 bytes (TMA rule)")
    batched = _fused(shape, out="bf16", batch=3, stride_a=0, bias="input")
    assert tma_rules.check(TensorMap("A", (64, 64)), batched)["global"] == [100, 64]  # one A shared by the batches
    with pytest.raises(ConfigError) as exc:
        tma_rules.check(TensorMap("C", (16, 64)), batched)
    assert exc.value.field == "kernel" and str(exc.value).endswith(
        "a 2-D map covers one matrix; C holds 3 batches (batch.count=3, batch stride 20000)")
    plain = tma_rules.check(TensorMap("C", (16, 32)), Problem(shape, "bf16", "row", "col"))
    assert (plain["global"], plain["row_stride_bytes"]) == ([100, 200], 800)


def test_a_float32_c_needs_ldc_a_multiple_of_4_for_the_tma_store():
    assert SPEC.tma_store(_fused(out="float32", beta=1.0, ldc=4100), SPEC.defaults)
    assert not SPEC.tma_store(_fused(out="float32", beta=1.0, ldc=4098), SPEC.defaults)
    assert SPEC.tma_store(_fused(out="bf16", beta=1.0, ldc=4104), SPEC.defaults)
    assert not SPEC.tma_store(_fused(out="bf16", beta=1.0, ldc=4100), SPEC.defaults)


def test_wgmma_tf32_takes_the_fused_entries_with_elem_4():
    problem = _fused(precision="tf32", la="row", lb="row", out="bf16", bias="input", activation="relu")
    TF32.check_problem(problem, TF32.defaults, FACTS)
    assert TF32.instance(problem, TF32.defaults) == (
        "gemm_wgmma_epi_tma_store<4, 128, 256, 4, 0, 1, 16, 0, 0, 1, 1, 1, 0, float, __nv_bfloat16>")
    # the row-major B's transpose pre-pass stays in the plan (and in the time), before the kernel
    plan = TF32.plan(problem, TF32.defaults, FACTS)
    assert len(plan) == 2 and plan[0].entry.startswith("gemmlab::relayout_transpose<4") and plan[-1].note == ""
    assert TF32.options(problem, TF32.defaults, FACTS).defines == {"GEMMLAB_EPI": 1}


# --- refusals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("over, field, message", [
    ({"SPLIT_K": 4}, "kernel.SPLIT_K", "SPLIT_K=4: the fused epilogue runs on whole tiles (SPLIT_K=1; split tiles' "
                                       "partial sums cannot each pass through it)"),
    ({"TAIL": 2}, "kernel.TAIL", "TAIL=2: the fused epilogue runs on whole tiles (TAIL=1; split tiles' partial sums "
                                 "cannot each pass through it)"),
    ({"EPI": 4}, "kernel.EPI", "EPI=4: the fused epilogue stores from registers (EPI=1) or through the TMA store "
                               "(EPI=2, 7); 3, 4 and 5 are plain-C experiments"),
    ({"EPI": 5}, "kernel.EPI", "EPI=5: the fused epilogue stores from registers (EPI=1) or through the TMA store "
                               "(EPI=2, 7); 3, 4 and 5 are plain-C experiments"),
])
def test_fused_problems_refuse_split_tiles_and_the_staged_experiments(over, field, message):
    with pytest.raises(ParamError) as exc:
        SPEC.check_problem(_fused(beta=1.0), _params(**over), FACTS)
    assert (exc.value.field, exc.value.message) == (field, message)
    SPEC.check_problem(Problem(BIG, "bf16", "row", "col"), _params(**over), FACTS)  # the plain problem takes them


@pytest.mark.parametrize("la, lb, lda, ldb, copies", [
    ("row", "col", 4104, 0, ()),                   # A's map at pitch lda (8208 B rows)
    ("col", "row", 0, 4160, ()),                   # B row-major (N-major) at pitch ldb
    ("row", "col", 4100, 4097, ("pad", "pad")),    # 8200 B and 8194 B rows: both padded into the workspace
])
def test_lda_ldb_above_tight_read_through_maps_at_that_pitch_or_padded_copies(la, lb, lda, ldb, copies):
    """Issue 43: lda/ldb above tight (no refusal any more): TMA maps over A and B at their leading
    dimension (the padding never read), or where ld x 2 B is not a multiple of 16 a pad copy that reads
    the source at that pitch (relayout_pad's ld_src)."""
    from gemmlab.contract import tma_rules
    from gemmlab.contract.relayout import replay
    import numpy as np
    ep = {k: v for k, v in (("lda", lda), ("ldb", ldb)) if v}
    problem = _fused(la=la, lb=lb, bias="input", activation="gelu_tanh", ldc=4104, **ep)
    SPEC.check_problem(problem, SPEC.defaults, FACTS)
    a, b = SPEC.operands(problem, SPEC.defaults, FACTS)
    assert tuple(op.kind for op in (a, b) if op.kind != "direct") == copies
    for op, ld in ((a, problem.lda), (b, problem.ldb)):
        if op.kind == "direct":
            desc = tma_rules.check(op.tensor_map, problem)
            assert desc["global"] == [4096, 4096] and desc["row_stride_bytes"] == 2 * ld
        else:
            assert [v.value for v in op.copy.arguments[2:5]] == [4096, 4096, ld]  # rows, cols, ld_src
    plan = SPEC.plan(problem, SPEC.defaults, FACTS)
    assert len(plan) == 1 + len(copies) and plan[-1].note == ""
    if copies:  # the copy's index arithmetic on a small twin: every element once, the source's padding never read
        small = _fused(Shape(20, 24, 36), bias="input", lda=37)
        step = SPEC.operands(small, SPEC.defaults, FACTS)[0].copy
        src = np.full((20, 37), np.nan, dtype=np.float32)
        src[:, :36] = np.arange(20 * 36, dtype=np.float32).reshape(20, 36) + 1
        dst, writes = replay(step, src)
        assert (writes == 1).all() and np.array_equal(dst[:, :36], src[:, :36]) and not dst[:, 36:].any()


# --- candidates, preferences, kernel=auto ---------------------------------------------------------

@pytest.mark.parametrize("shape", [BIG, Shape(8192, 8192, 8192), Shape(256, 256, 65536), Shape(6144, 6144, 6144)],
                         ids=str)
def test_candidates_and_preferences_take_the_register_path_on_whole_tiles(shape):
    problem = _fused(shape, bias="input", activation="gelu_tanh")
    cands = SPEC.candidates(problem, FACTS)
    assert cands and all(c["EPI"] == 7 and c.get("SPLIT_K", 1) == 1 and c.get("TAIL", 1) == 1
                         and c.get("REDUCE", 1) == 1 for c in cands), cands
    for c in cands:
        SPEC.check_problem(problem, c, FACTS)
    plain = SPEC.candidates(Problem(shape, "bf16", "row", "col"), FACTS)
    assert any(c.get("SPLIT_K", 1) > 1 or c.get("TAIL", 1) > 1 for c in plain) or shape == BIG
    for regime in ("decode", "k_heavy", "tensor_core"):
        prefs = SPEC.preferences(problem, FACTS, regime)
        assert all(p.params["EPI"] in (2, 7) and p.params["SPLIT_K"] == p.params["TAIL"] == p.params["REDUCE"] == 1
                   for p in prefs)
        assert all("tail" not in p.why for p in prefs)


def test_auto_chooses_wgmma_bf16_for_a_large_bf16_problem_with_an_epilogue():
    """Before, decode_bf16 (the last kernel declaring the epilogue) ran bf16 4096^3 with one."""
    base = {"kernel": {"name": "auto"}, "shape": [4096, 4096, 4096], "precision": "bf16",
            "layout": {"a": "row", "b": "col"}}
    cfg, rec = dispatch.resolve_config({**base, "epilogue": {"bias": "input", "activation": "gelu_tanh", "out": "bf16"}},
                                       REGISTRY)
    assert cfg["kernel"]["name"] == "wgmma_bf16", rec
    assert cfg["kernel"].get("EPI", 7) == 7 and cfg["kernel"].get("TAIL", 1) == 1, cfg["kernel"]
    plain, _ = dispatch.resolve_config(base, REGISTRY)
    assert plain["kernel"]["name"] == "wgmma_bf16" and plain["kernel"].get("EPI", 7) != 1


# --- compiled code (NVRTC, no GPU) ----------------------------------------------------------------

@pytest.mark.parametrize("kernel, precision, la, lb, ep, over, tma", [
    ("wgmma_bf16", "bf16", "row", "col", {"out": "bf16", "bias": "input", "activation": "gelu_tanh"}, {"EPI": 1}, False),
    ("wgmma_bf16", "bf16", "row", "col", {"out": "bf16", "bias": "input", "activation": "gelu_tanh"}, {}, True),
    ("wgmma_bf16", "bf16", "row", "col", {"out": "bf16", "bias": "input", "activation": "gelu_tanh"}, {"EPI": 2}, True),
    ("wgmma_bf16", "fp16", "col", "row", {"out": "fp16", "beta": 1.0, "bias": "float32", "activation": "silu"},
     {"SCHED": 2, "BM": 64}, True),
    ("wgmma_bf16", "bf16", "row", "col", {"out": "float32", "beta": 1.0, "bias": "float32", "activation": "silu"}, {}, True),
    ("wgmma_tf32", "tf32", "row", "col", {"out": "bf16", "beta": 0.5, "bias": "input", "activation": "gelu_erf"},
     {"EPI": 2}, True),
], ids=["bf16-bias-gelu_tanh-bf16-registers", "bf16-bias-gelu_tanh-bf16-deferred", "bf16-bias-gelu_tanh-bf16-tma",
        "fp16-colrow-beta-silu-pingpong-tma", "bf16-beta-silu-float32-deferred", "tf32-beta-gelu_erf-bf16-tma"])
def test_fused_instance_compiles_without_spills_and_with_hgmma(kernel, precision, la, lb, ep, over, tma):
    """The brief's compile check (gemmlab mode=compile kernel=wgmma_bf16 precision=bf16 layout.b=col
    epilogue.bias=input epilogue.activation=gelu_tanh epilogue.out=bf16 at 4096^3; NVRTC 13.5: 168
    registers, the 384-thread launch bound's limit before setmaxnreg) in both epilogue paths, the
    deferred TMA store (EPI=7: two m64n128 per k-step, HGMMA twice) with a 2-byte and a float32 C, an
    fp16 ping-pong build with both transpose bits and a tf32 build: no spills, no local memory, HGMMA
    and none serialized, and in the TMA-store path UTMASTG once per box of each unrolled epilogue (the
    register path has none)."""
    ep = dict(ep)
    out = ep.pop("out")
    problem = Problem(BIG, precision, la, lb, out=out, epilogue=Epilogue(**ep))
    entry = "gemm_wgmma_epi_tma_store" if tma else "gemm_wgmma_epi"
    spec, params, compiled = compile_clean(kernel, problem, over, tma, entry)
    # store sites: a warp's boxes of 128 bytes a row over BN columns (one m64 block), or with the deferred
    # right half the boxes of a 128-column half at four sites (in the main loop, after it, the left half,
    # the last tile's right half)
    half = 128 * problem.c_bytes // 128
    sites = 4 * half if spec.defers(problem, params) else params["BN"] * problem.c_bytes // 128
    assert compiled.sass["histogram"]["UTMASTG"] == (sites if tma else 0)


# --- on a GPU -------------------------------------------------------------------------------------

#: (precision, layout a, layout b, parameters) per form: the defaults' tile (cooperative 128x256), the
#: ping-pong 64x256, the 2-CTA cluster with a row-major B, fp16 with both transpose bits
FORMS = {
    "bf16-rowcol": ("bf16", "row", "col", {}),
    "bf16-rowrow-cluster": ("bf16", "row", "row", {"CLUSTER": 2}),
    "bf16-pingpong": ("bf16", "row", "col", {"SCHED": 2, "BM": 64}),
    "fp16-colrow": ("fp16", "col", "row", {}),
}
#: the TMA-store path's forms: those above, wgmma_tf32 with its row-major B transposed first, and tf32
#: ping-pong with a column-major A (its transposed copy) and a 128x128 tile
TMA_FORMS = {
    **FORMS,
    "tf32-rowrow": ("tf32", "row", "row", {}),
    "tf32-colcol-pingpong": ("tf32", "col", "col", {"SCHED": 2, "BM": 128, "BN": 128}),
}
#: partial tiles (M, N not multiples of the tile; odd N: the scalar stores; K not a multiple of 64),
#: and TMA's stride rule met by the core's pad copies where K or N is not a multiple of 8
GPU_SHAPES = [(1, 1, 8), (63, 65, 40), (129, 255, 1000), (200, 300, 64), (256, 512, 256)]


def _gpu_cfg(form: str, shape, epilogue: dict, epi: int = 1, **over) -> dict:
    """The point of ``form`` (:data:`TMA_FORMS`) with ``kernel.EPI=epi``: EPI=1 (the register path) with
    ldc = N + 9 (odd: C's rows cannot be a TMA map's, every store masked), else (the TMA store) with
    :func:`tma_ldc`."""
    precision, la, lb, params = TMA_FORMS[form]
    return {"kernel": {"name": "wgmma_tf32" if precision == "tf32" else "wgmma_bf16", "EPI": epi, **params},
            "shape": list(shape), "mode": "run", "precision": precision, "timing": dict(TIMING), "epilogue": epilogue,
            "layout": {"a": la, "b": lb, "ldc": shape[1] + 9 if epi == 1 else tma_ldc(shape[1])}, **over}


def tma_ldc(n: int) -> int:
    """C's row pitch for the TMA-store path: above N (8 to 15 elements of padding) and a multiple of 8
    elements, so its rows are 16-byte multiples for a 2-byte and a float32 C alike."""
    return (n // 8 + 2) * 8


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", EPILOGUES, ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()))
@pytest.mark.parametrize("form, shape", [(f, s) for f in FORMS for s in GPU_SHAPES], ids=lambda x: str(x))
def test_gpu_wgmma_each_epilogue_partial_tiles_ldc_above_n(tmp_path, form, shape, epilogue):
    rec = run_point(_gpu_cfg(form, shape, epilogue), tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["compile"]["name_expression"].startswith("gemm_wgmma_epi<")
    assert rec["verification"]["epilogue"]["padding"]["written"] == 0 and rec["verification_after_timing"]["passed"]
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    assert rec["compile"]["driver_attributes"]["local_bytes"] == 0


#: partial tiles for the TMA store (N a multiple of 8: C's rows end on 16 bytes for every C type), and
#: one N that does not (63 x 65: the register entry stores it, the padding keeps its NaN)
TMA_SHAPES = [(1, 8, 8), (63, 72, 40), (129, 264, 1000), (200, 304, 64), (63, 65, 40)]


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", EPILOGUES, ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()))
@pytest.mark.parametrize("form, shape", [(f, s) for f in TMA_FORMS for s in TMA_SHAPES], ids=lambda x: str(x))
def test_gpu_wgmma_tma_store_each_epilogue_partial_tiles_ldc_above_n(tmp_path, form, shape, epilogue):
    """The fused TMA-store path (EPI=7: deferred on the cooperative 128x256 tile, else EPI=2) on
    partial tiles with ldc > N (C's map clips rows at M and columns at N; the padding keeps its NaN)
    and beta != 0. Where N x C's bytes is not a multiple of 16 the register entry runs: a TMA store
    writes whole 16-byte chunks (H100, session 33: every such point wrote the padding up to the chunk's end)."""
    rec = run_point(_gpu_cfg(form, shape, epilogue, epi=7), tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    c_bytes = {"float32": 4, "bf16": 2, "fp16": 2}[epilogue["out"]]
    entry = "gemm_wgmma_epi_tma_store<" if shape[1] * c_bytes % 16 == 0 else "gemm_wgmma_epi<"
    assert rec["compile"]["name_expression"].startswith(entry)
    assert rec["verification"]["epilogue"]["padding"]["written"] == 0 and rec["verification_after_timing"]["passed"]
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    assert rec["compile"]["driver_attributes"]["local_bytes"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("pad", [8, 3], ids=["maps-at-pitch", "padded-copies"])
@pytest.mark.parametrize("epilogue", [EPILOGUES[1], EPILOGUES[4]], ids=["relu-bf16", "silu-float32"])
@pytest.mark.parametrize("form, shape", [(f, s) for f in TMA_FORMS for s in TMA_SHAPES[1:]], ids=lambda x: str(x))
def test_gpu_wgmma_fused_lda_ldb_above_tight(tmp_path, form, shape, epilogue, pad):
    """lda and ldb above tight (their padding holds NaN: a read of it fails verification) on the
    partial-tile suite, beta != 0, ldc > N, both epilogue paths' default (EPI=7): pad 8 keeps 16-byte
    rows for 2-byte operands (TMA maps at that pitch), pad 3 does not (the pad / transpose copies read
    the source at it)."""
    precision, la, lb, _ = TMA_FORMS[form]
    M, N, K = shape
    cfg = _gpu_cfg(form, shape, epilogue, epi=7)
    cfg["layout"].update(lda=(K if la == "row" else M) + pad, ldb=(N if lb == "row" else K) + pad)
    rec = run_point(cfg, tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["epilogue"]["padding"]["written"] == 0 and rec["verification_after_timing"]["passed"]
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(63, 72, 41), (129, 264, 1001)], ids=str)
@pytest.mark.parametrize("form", ["bf16-rowcol", "fp16-colrow"])
def test_gpu_wgmma_tma_loads_of_rows_ending_inside_16_bytes(tmp_path, form, shape):
    """A and B mapped at a 16-byte pitch (lda, ldb = the next multiple of 8 above K, plus 8) while
    their rows end inside 16 bytes (K odd): the padding holds NaN, so a TMA load that fetched whole
    16-byte chunks past K (as its stores write them, session 33) would put NaN into the products."""
    precision, la, lb, _ = TMA_FORMS[form]
    M, N, K = shape
    ld = (K // 8 + 2) * 8
    cfg = _gpu_cfg(form, shape, EPILOGUES[2], epi=7)
    cfg["layout"].update(lda=ld if la == "row" else (M // 8 + 2) * 8, ldb=ld if lb == "col" else (N // 8 + 2) * 8)
    rec = run_point(cfg, tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["nan_outputs"] == 0 and rec["verification_after_timing"]["passed"]


#: epilogues without C0 and a 2-byte C: EPI=7's right half is computed inside the next tile's main loop
#: (kernels/wgmma_bf16.cu LATE_MATH), not when its tile ends (every epilogue of EPILOGUES reads C0)
LATE_EPILOGUES = [
    {"bias": "input", "activation": "gelu_tanh", "out": "bf16"},
    {"alpha": 0.5, "bias": "float32", "activation": "silu", "out": "fp16"},
    {"bias": "input", "activation": "gelu_erf", "out": "bf16"},
    {"out": "bf16"},
]


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", EPILOGUES + LATE_EPILOGUES, ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()))
@pytest.mark.parametrize("form", ["bf16-rowcol", "fp16-colrow", "bf16-rowrow-cluster"])
@pytest.mark.parametrize("k", [72, 640])
def test_gpu_wgmma_deferred_right_half_over_two_tiles_per_cta(tmp_path, form, k, epilogue):
    """EPI=7's deferred right half where CTAs take two tiles (1500 x 3000: 12 x 12 = 144 partial-edged
    128x256 tiles on <= 132 CTAs): K = 72 (2 k-tiles: the pending boxes go out after the loop) and K =
    640 (10 k-tiles: inside the next tile's main loop, after k-tiles 2, 4 (, 6, 8 for a float32 C)); with
    :data:`LATE_EPILOGUES` the pending boxes' math runs there too (computed from the float32 copy)."""
    rec = run_point(_gpu_cfg(form, (1500, 3000, k), epilogue, epi=7), tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    name = rec["compile"]["name_expression"]
    assert name.startswith("gemm_wgmma_epi_tma_store<") and name.split(", ")[9] == "1", name  # DEFER = 1
    assert rec["verification"]["epilogue"]["padding"]["written"] == 0 and rec["verification_after_timing"]["passed"]
    assert rec["guard_bands"] == "intact"


@pytest.mark.gpu
@pytest.mark.parametrize("ldc_pad", [0, 8])
def test_gpu_wgmma_fused_interior_tiles_paired_stores(tmp_path, ldc_pad):
    """Whole 128x256 tiles, even ldc (paired stores) tight and above N: 1024 x 2048 x 512, bias+gelu_tanh, bf16 C."""
    cfg = _gpu_cfg("bf16-rowcol", (1024, 2048, 512), EPILOGUES[2])
    cfg["layout"]["ldc"] = 2048 + ldc_pad
    rec = run_point(cfg, tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["epilogue"]["padding"]["written"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["bf16-rowcol", "fp16-colrow"])
def test_gpu_wgmma_late_math_memcheck_clean(tmp_path, form):
    """The deferred right half computed in the next main loop (bias + gelu_tanh, bf16 C, no C0) under
    memcheck, CTAs taking two partial-edged tiles."""
    rec = run_point(_gpu_cfg(form, (1500, 3000, 200), LATE_EPILOGUES[0], epi=7, sanitizer="memcheck"),
                    tmp_path / "point")
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok", rec.get("error")


@pytest.mark.gpu
@pytest.mark.parametrize("epi", [1, 7])
@pytest.mark.parametrize("form", list(TMA_FORMS))
def test_gpu_wgmma_fused_memcheck_clean(tmp_path, form, epi):
    rec = run_point(_gpu_cfg(form, TMA_SHAPES[2], EPILOGUES[3], epi=epi, sanitizer="memcheck"), tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]


@pytest.mark.gpu
@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu_erf"])
@pytest.mark.parametrize("epi", [1, 7])
def test_gpu_wgmma_approx_activation_passes_its_declared_bound_and_fails_libms(tmp_path, monkeypatch, epi, activation):
    """The GELUs run through tanh.approx.f32 (kernels/wgmma_bf16.cu wgmma_activation; declared error:
    plugins/wgmma_bf16.py ACTIVATION_ERROR). A float32 C and K = 16 make the product's error far smaller
    than tanh.approx's (2^-11.987·|z|), so the declared bound passes and libm's (8u·(|z| + |f|): the
    pipeline handing the check no declaration) fails for gelu_erf (its erf fit's 3.70e-5): the
    declaration is needed, not decorative. gelu_tanh through tanh.approx.f32 passed libm's bound on
    the H100 (session 33, both paths: tanh.approx's measured error there is far inside its documented
    2^-10.987), so for it only the declared bound is asserted. Both epilogue paths (registers EPI=1,
    the deferred TMA store EPI=7)."""
    ep = {"bias": "input", "activation": activation, "out": "float32"}
    rec = run_point(_gpu_cfg("bf16-rowcol", (512, 1024, 16), ep, epi=epi), tmp_path / "declared")
    assert rec["status"] == "ok", rec.get("error")
    applied = rec["verification"]["epilogue"]["activation_error"]
    assert applied["declared"] and applied["c"] == dict(SPEC.epilogue.activation_error)[activation]
    if activation == "gelu_tanh":
        return
    import gemmlab.run.pipeline as pipeline
    monkeypatch.setattr(pipeline, "_activation_error", lambda problem, backend: None)
    rec = run_point(_gpu_cfg("bf16-rowcol", (512, 1024, 16), ep, epi=epi), tmp_path / "libm")
    assert rec["status"] == "wrong_result", rec.get("error")
    assert not rec["verification"]["epilogue"]["activation_error"]["declared"]
    assert rec["verification"]["mismatches"] > 0
