"""The whole GEMM contract in wgmma_bf16 (issue 43 item 3, "the epilogue in the fast kernels:
wgmma_bf16"): the fused entry ``gemm_wgmma_epi`` (kernels/wgmma_bf16.cu, under -DGEMMLAB_EPI) runs
alpha, beta·C0, a float32 or input-typed bias, every activation and a float32/bf16/fp16 C with
ldc >= N in the register epilogue (EPI=1) on whole tiles, for bf16 and fp16 operands.

CPU tests: the declaration (wgmma_tf32 keeps the plain contract), the plain problems' entries
unchanged (their SASS is pinned by tests/test_sass_unchanged.py), the fused instance's name, options
and arguments, the one-line refusals (lda/ldb above tight, batches, split tiles, the staged
experiments), candidates and preferences without split K or the tail, kernel=auto choosing
wgmma_bf16 for a bf16 4096^3 problem with an epilogue (not decode_bf16, the last resort before), and
NVRTC compiles of the fused instance with no spills and HGMMA present. No fake-GPU emulation of the
wgmma kernels exists, so the numerics are the GPU tests' (marker ``gpu``): each epilogue on the
partial-tile suite with ldc > N and beta != 0, bf16 and fp16, every layout, ping-pong and the
2-CTA cluster, and a memcheck run.
"""

from __future__ import annotations

import re

import pytest

from gemmlab.contract.epilogue import ACTIVATIONS, OUTPUTS, PLAIN, Epilogue, refusal
from gemmlab.contract.hookspecs import Dim, Matrix, ParamError, Problem, Shape, TensorMap, Value
from gemmlab.contract.registry import load_registry
from gemmlab.dispatch import auto as dispatch
from gemmlab.gpu.device import offline_facts
from gemmlab.run.pipeline import run_point

REGISTRY = load_registry([])
SPEC = REGISTRY.get("wgmma_bf16")
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

def test_wgmma_bf16_declares_the_epilogue_of_its_register_path():
    ep = SPEC.epilogue
    assert ep.alpha_beta and set(ep.bias) == {"float32", "input"} and ep.activations == ACTIVATIONS[1:]
    assert ep.outs == tuple(OUTPUTS) and ep.ld and not ep.batch and not ep.rounds_before_epilogue
    assert REGISTRY.get("wgmma_tf32").epilogue == PLAIN  # ELEM = 4 has no fused entry
    problem = _fused(bias="input", activation="gelu_tanh", ldc=4100)
    assert refusal(ep, problem, "wgmma_bf16") is None
    field, message = refusal(ep, _fused(batch=2), "wgmma_bf16")
    assert field == "batch.count" and message.endswith("got 2")


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
    # a C type alone is beyond the plain contract: the fused entry with ACT = BIAS = BETA = 0
    out_only = Problem(BIG, precision, la, lb, out="bf16")
    assert SPEC.instance(out_only, _params(SCHED=2, BM=64)).endswith(", 64, 256, 4, %d, 1, 16, 1, %d, 0, 0, 0, float, "
                                                                     "__nv_bfloat16>" % (major, precision == "fp16"))


def test_fused_arguments_in_the_entry_order():
    problem = _fused(alpha=2.0, beta=0.5, bias="float32", activation="relu", ldc=4099)
    args = SPEC.arguments(problem, _params(EPI=1), FACTS)
    assert [type(a) for a in args[:2]] == [TensorMap, TensorMap] and [a.matrix for a in args[:2]] == ["A", "B"]
    assert args[2:] == (Matrix("C"), Matrix("C0"), Matrix("bias"), Dim("M"), Dim("N"), Dim("K"), Dim("ldc"),
                        Value(2.0, "float32"), Value(0.5, "float32"))
    bare = SPEC.arguments(_fused(activation="gelu_erf"), _params(EPI=1), FACTS)
    assert bare[3] == bare[4] == Value(0, "int64") and bare[-2:] == (Value(1.0, "float32"), Value(0.0, "float32"))
    # no staging buffers: the launch's shared memory is the ring's alone
    launch = SPEC.geometry(problem, SPEC.defaults, FACTS)
    assert launch.shared_bytes == 4 * (128 + 256) * 128 + 1024 and launch.grid == (132, 1, 1)


def test_defaults_run_the_register_path_and_the_plan_says_so():
    problem = _fused(bias="input", activation="gelu_tanh")
    SPEC.check_problem(problem, SPEC.defaults, FACTS)  # EPI=7 (the default) runs as 1
    assert SPEC.plan(problem, SPEC.defaults, FACTS)[-1].note == (
        "epilogue from registers: the fused epilogue (issue 43) has that path only; EPI=7 runs as 1")
    assert SPEC.plan(problem, _params(EPI=1), FACTS)[-1].note == ""


# --- refusals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("over, field, message", [
    ({"SPLIT_K": 4}, "kernel.SPLIT_K", "SPLIT_K=4: the fused epilogue runs on whole tiles (SPLIT_K=1; split tiles' "
                                       "partial sums cannot each pass through it)"),
    ({"TAIL": 2}, "kernel.TAIL", "TAIL=2: the fused epilogue runs on whole tiles (TAIL=1; split tiles' partial sums "
                                 "cannot each pass through it)"),
    ({"EPI": 4}, "kernel.EPI", "EPI=4: the fused epilogue stores from registers (EPI=1; 2 and 7 run as 1)"),
    ({"EPI": 3}, "kernel.EPI", "EPI=3: the fused epilogue stores from registers (EPI=1; 2 and 7 run as 1)"),
])
def test_fused_problems_refuse_split_tiles_and_the_staged_experiments(over, field, message):
    with pytest.raises(ParamError) as exc:
        SPEC.check_problem(_fused(beta=1.0), _params(**over), FACTS)
    assert (exc.value.field, exc.value.message) == (field, message)
    SPEC.check_problem(Problem(BIG, "bf16", "row", "col"), _params(**over), FACTS)  # the plain problem takes them


@pytest.mark.parametrize("la, lb, name, value, message", [
    ("row", "col", "lda", 4104, "layout.lda: lda = 4104: wgmma_bf16 reads A through a TMA map of the tight matrix, "
                                "so lda must be 4096 (ldc may exceed N)"),
    ("col", "row", "ldb", 4160, "layout.ldb: ldb = 4160: wgmma_bf16 reads B through a TMA map of the tight matrix, "
                                "so ldb must be 4096 (ldc may exceed N)"),
])
def test_lda_ldb_above_tight_are_one_line(tmp_path, la, lb, name, value, message):
    cfg = {"kernel": {"name": "wgmma_bf16"}, "shape": [4096, 4096, 4096], "precision": "bf16", "mode": "compile",
           "epilogue": {"out": "bf16"}, "layout": {"a": la, "b": lb, name: value}}
    rec = run_point(cfg, tmp_path)
    assert rec["status"] == "invalid" and rec["error"] == message


def test_batches_are_refused_before_anything_compiles(tmp_path):
    rec = run_point({"kernel": {"name": "wgmma_bf16"}, "shape": [256, 256, 256], "precision": "bf16",
                     "mode": "compile", "epilogue": {"out": "bf16"}, "batch": {"count": 2}}, tmp_path)
    assert rec["status"] == "invalid" and rec["error"] == (
        "batch.count: kernel wgmma_bf16 runs one GEMM per launch (batch.count=1); got 2")


# --- candidates, preferences, kernel=auto ---------------------------------------------------------

@pytest.mark.parametrize("shape", [BIG, Shape(8192, 8192, 8192), Shape(256, 256, 65536), Shape(6144, 6144, 6144)],
                         ids=str)
def test_candidates_and_preferences_take_the_register_path_on_whole_tiles(shape):
    problem = _fused(shape, bias="input", activation="gelu_tanh")
    cands = SPEC.candidates(problem, FACTS)
    assert cands and all(c["EPI"] == 1 and c.get("SPLIT_K", 1) == 1 and c.get("TAIL", 1) == 1
                         and c.get("REDUCE", 1) == 1 for c in cands), cands
    for c in cands:
        SPEC.check_problem(problem, c, FACTS)
    plain = SPEC.candidates(Problem(shape, "bf16", "row", "col"), FACTS)
    assert any(c.get("SPLIT_K", 1) > 1 or c.get("TAIL", 1) > 1 for c in plain) or shape == BIG
    for regime in ("decode", "k_heavy", "tensor_core"):
        prefs = SPEC.preferences(problem, FACTS, regime)
        assert all(p.params["EPI"] == 1 and p.params["SPLIT_K"] == p.params["TAIL"] == p.params["REDUCE"] == 1
                   for p in prefs)
        assert all("tail" not in p.why for p in prefs)


def test_auto_chooses_wgmma_bf16_for_a_large_bf16_problem_with_an_epilogue():
    """Before, decode_bf16 (the last kernel declaring the epilogue) ran bf16 4096^3 with one."""
    base = {"kernel": {"name": "auto"}, "shape": [4096, 4096, 4096], "precision": "bf16",
            "layout": {"a": "row", "b": "col"}}
    cfg, rec = dispatch.resolve_config({**base, "epilogue": {"bias": "input", "activation": "gelu_tanh", "out": "bf16"}},
                                       REGISTRY)
    assert cfg["kernel"]["name"] == "wgmma_bf16", rec
    assert cfg["kernel"].get("EPI") == 1 and cfg["kernel"].get("TAIL", 1) == 1, cfg["kernel"]
    plain, _ = dispatch.resolve_config(base, REGISTRY)
    assert plain["kernel"]["name"] == "wgmma_bf16" and plain["kernel"].get("EPI", 7) != 1


# --- compiled code (NVRTC, no GPU) ----------------------------------------------------------------

@pytest.mark.parametrize("precision, la, lb, ep, over", [
    ("bf16", "row", "col", {"out": "bf16", "bias": "input", "activation": "gelu_tanh"}, {}),
    ("fp16", "col", "row", {"out": "fp16", "beta": 1.0, "bias": "float32", "activation": "silu"},
     {"SCHED": 2, "BM": 64}),
], ids=["bf16-bias-gelu_tanh-bf16", "fp16-colrow-beta-silu-pingpong"])
def test_fused_instance_compiles_without_spills_and_with_hgmma(precision, la, lb, ep, over):
    """The brief's compile check (gemmlab mode=compile kernel=wgmma_bf16 precision=bf16 layout.b=col
    epilogue.bias=input epilogue.activation=gelu_tanh epilogue.out=bf16 at 4096^3; NVRTC 13.5: 168
    registers, the 384-thread launch bound's limit before setmaxnreg) and an fp16 ping-pong build with
    both transpose bits: no spills, no local memory, HGMMA and the fused entry in the SASS."""
    from gemmlab.gpu import compile as compile_stage
    out = ep.pop("out")
    problem = Problem(BIG, precision, la, lb, out=out, epilogue=Epilogue(**ep))
    params = _params(EPI=1, **over)
    SPEC.check_problem(problem, params, FACTS)
    options = compile_stage.CompileOptions.for_kernel("90", SPEC.options(problem, params, FACTS))
    compiled = compile_stage.compile_kernel(REGISTRY.source_path(SPEC), SPEC.instance(problem, params), options,
                                            persistent=True)
    if compiled.resources is None:
        pytest.skip(f"NVRTC {compiled.nvrtc_version} returned no ptxas report")
    r = compiled.resources
    assert (r.spill_store_bytes, r.spill_load_bytes, r.stack_frame_bytes) == (0, 0, 0), r
    if not compiled.sass_text:
        pytest.skip("no SASS listing (nvdisasm)")
    assert "gemm_wgmma_epi" in compiled.sass_text and re.search(r"\bHGMMA\.", compiled.sass_text)
    assert not re.search(r"\b(LDL|STL)\b", compiled.sass_text)
    assert not re.search(r"\bUTMASTG\b", compiled.sass_text)  # the register path: no TMA store


# --- on a GPU -------------------------------------------------------------------------------------

#: (precision, layout a, layout b, parameters) per form: the defaults' tile (cooperative 128x256), the
#: ping-pong 64x256, the 2-CTA cluster with a row-major B, fp16 with both transpose bits
FORMS = {
    "bf16-rowcol": ("bf16", "row", "col", {}),
    "bf16-rowrow-cluster": ("bf16", "row", "row", {"CLUSTER": 2}),
    "bf16-pingpong": ("bf16", "row", "col", {"SCHED": 2, "BM": 64}),
    "fp16-colrow": ("fp16", "col", "row", {}),
}
#: partial tiles (M, N not multiples of the tile; odd N: the scalar stores; K not a multiple of 64),
#: and TMA's stride rule met by the core's pad copies where K or N is not a multiple of 8
GPU_SHAPES = [(1, 1, 8), (63, 65, 40), (129, 255, 1000), (200, 300, 64), (256, 512, 256)]


def _gpu_cfg(form: str, shape, epilogue: dict, **over) -> dict:
    precision, la, lb, params = FORMS[form]
    return {"kernel": {"name": "wgmma_bf16", "EPI": 1, **params}, "shape": list(shape), "mode": "run",
            "precision": precision, "timing": dict(TIMING), "epilogue": epilogue,
            "layout": {"a": la, "b": lb, "ldc": shape[1] + 9}, **over}


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
@pytest.mark.parametrize("form", list(FORMS))
def test_gpu_wgmma_fused_memcheck_clean(tmp_path, form):
    rec = run_point(_gpu_cfg(form, GPU_SHAPES[2], EPILOGUES[3], sanitizer="memcheck"), tmp_path / "point")
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok", rec.get("error")
