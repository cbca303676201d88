"""The whole GEMM contract in the fast kernels (issue 43 item 3, part 1): sgemm_pipelined (the FP32
SIMT top rung) and the decode kernels decode_bf16, gemv_rows and gemv_cols run the fused epilogue
(alpha, beta·C0, bias, activation, a float32/bf16/fp16 C, ld > tight, strided batches) through
their ``gemm_*_epi`` entries (kernels/include/gemmlab/fused.cuh), and kernel=auto never chooses a
kernel that does not declare the problem's epilogue.

CPU tests: the declarations and the one-line refusals; each kernel end to end on the fake GPU
(tests/fakegpu.py emulates the fused entries from their name expressions: a plugin passing the
wrong arguments, grid or template codes fails verification) with ld > tight, beta != 0 and three
batches sharing B, every epilogue covered; the fused sgemm_pipelined instance compiles with no
spills and a main loop as lean as the plain one's; kernel=auto's choices. The plain builds' SASS
is pinned by tests/test_sass_unchanged.py. GPU tests (marker ``gpu``): each kernel with each
epilogue on the partial-tile suite with ld > tight, beta != 0 and batches, and memcheck runs.
"""

from __future__ import annotations

import re
import types

import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.contract.epilogue import FULL, PLAIN, Epilogue, refusal
from gemmlab.contract.hookspecs import Problem, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.dispatch import auto as dispatch
from gemmlab.errors import ConfigError
from gemmlab.run.pipeline import run_point

REGISTRY = load_registry([])
FAST = ("sgemm_pipelined", "decode_bf16", "decode_tf32", "gemv_rows", "gemv_cols")
TIMING = {"warmup": 1, "repeat": 2, "batch": 1, "mode": "events"}

#: the epilogues of tests/test_epilogue.py's gpu tests: every activation, every output type, beta != 0
EPILOGUES = [
    {"beta": 1.0, "out": "float32"},
    {"alpha": 0.5, "beta": -1.0, "bias": "float32", "activation": "relu", "out": "bf16"},
    {"beta": 0.25, "bias": "float32", "activation": "gelu_tanh", "out": "bf16"},
    {"beta": 1.0, "bias": "float32", "activation": "gelu_erf", "out": "fp16"},
    {"alpha": 2.0, "beta": 1.0, "bias": "float32", "activation": "silu", "out": "float32"},
]

#: (kernel, precision, layout a, layout b, shape, padding of each ld) per kernel form: partial tiles,
#: decode_bf16's K, N and lds multiples of 8 (its 16-byte loads)
FORMS = {
    "sgemm_pipelined": ("sgemm_pipelined", "fp32", "row", "row", (63, 65, 33), 7),
    "sgemm_pipelined-acol": ("sgemm_pipelined", "fp32", "col", "row", (68, 65, 33), 8),
    "decode_bf16": ("decode_bf16", "bf16", "row", "row", (17, 72, 48), 8),
    "decode_bf16-fp16-bcol": ("decode_bf16", "fp16", "row", "col", (33, 70, 40), 8),
    "decode_tf32": ("decode_tf32", "tf32", "row", "row", (17, 72, 48), 8),
    "decode_tf32-bcol": ("decode_tf32", "tf32", "row", "col", (33, 70, 40), 8),
    "gemv_rows": ("gemv_rows", "fp32", "row", "row", (5, 70, 33), 3),
    "gemv_cols-tf32": ("gemv_cols", "tf32", "row", "col", (5, 70, 33), 5),
}


def _lds(layout_a: str, layout_b: str, shape, pad: int) -> dict:
    M, N, K = shape
    return {"lda": (K if layout_a == "row" else M) + pad, "ldb": (N if layout_b == "row" else K) + pad,
            "ldc": N + pad + 1}


def _cfg(form: str, epilogue: dict, batch=None, mode="run", timing=None, **over) -> dict:
    kernel, precision, la, lb, shape, pad = FORMS[form]
    if precision != "fp32" and epilogue.get("bias") == "float32" and form.startswith("decode"):
        epilogue = {**epilogue, "bias": "input"}  # the input-typed bias (bf16 / fp16) on the tensor-core decode
    return {"kernel": {"name": kernel}, "shape": list(shape), "mode": mode, "precision": precision,
            "timing": timing or dict(TIMING), "epilogue": epilogue,
            "layout": {"a": la, "b": lb, **_lds(la, lb, shape, pad)},
            "batch": batch or {"count": 3, "stride_b": 0}, **over}


def _fake_run(tmp_path, monkeypatch, cfg):
    gpu = HostGpu()
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    return run_point(cfg, tmp_path / "point"), gpu


# --- declarations and refusals --------------------------------------------------------------------

def test_the_fast_kernels_declare_the_full_epilogue():
    for name in FAST:
        assert REGISTRY.get(name).epilogue == FULL, name
    assert REGISTRY.get("sgemm_warptile").epilogue == PLAIN  # the other rungs keep the plain contract


def test_decode_bf16_refuses_pitches_its_16_byte_loads_cannot_follow(tmp_path):
    cfg = _cfg("decode_bf16", {"beta": 1.0}, mode="compile")
    cfg["layout"]["lda"] = 60  # K = 48: tight 48, 60 is not a multiple of 8
    rec = run_point(cfg, tmp_path / "a")
    assert rec["status"] == "invalid" and rec["error"] == (
        "layout.lda: lda = 60: decode_bf16 reads rows in 16-byte pieces, so lda must be a multiple of 8")
    cfg = _cfg("decode_bf16-fp16-bcol", {"out": "bf16"}, mode="compile")
    cfg["layout"]["ldb"] = 44
    rec = run_point(cfg, tmp_path / "b")
    assert rec["status"] == "invalid" and rec["error"].startswith("layout.ldb: ldb = 44: decode_bf16 reads rows")


def test_decode_bf16_refuses_more_batches_than_grid_y_holds(tmp_path):
    rec = run_point({"kernel": {"name": "decode_bf16"}, "shape": [64, 8, 8], "precision": "bf16", "mode": "compile",
                     "epilogue": {"out": "bf16"}, "batch": {"count": 20000, "stride_b": 0}}, tmp_path)
    assert rec["status"] == "invalid" and rec["error"] == (
        "batch.count: 20000 batches x 4 row blocks = 80000 blocks along y (limit 65535); fewer batches or a larger MT")


@pytest.mark.parametrize("form", ["sgemm_pipelined", "decode_bf16", "gemv_rows", "gemv_cols-tf32"])
def test_plain_problems_compile_the_plain_entries(form):
    kernel, precision, la, lb, shape, _ = FORMS[form]
    spec = REGISTRY.get(kernel)
    plain = Problem(Shape(*shape), precision, la, lb)
    fused = Problem(Shape(*shape), precision, la, lb, out="bf16")
    assert "_epi<" not in spec.instance(plain, spec.defaults) and not spec.options(plain, spec.defaults, None).defines
    assert "_epi<" in spec.instance(fused, spec.defaults)
    assert spec.options(fused, spec.defaults, None).defines == {"GEMMLAB_EPI": 1}
    assert spec.instance(fused, spec.defaults).endswith(", 0, 0, 0, float, __nv_bfloat16>")


# --- end to end on the fake GPU -------------------------------------------------------------------

#: each kernel form with two of the epilogues, every epilogue with at least two forms
CASES = [(form, i % len(EPILOGUES)) for j, form in enumerate(FORMS) for i in (j, j + 3)]


@pytest.mark.parametrize("form, which", CASES, ids=[f"{f}-{i}" for f, i in CASES])
def test_fast_kernel_runs_the_fused_epilogue_on_the_fake_gpu(tmp_path, monkeypatch, form, which):
    epilogue = EPILOGUES[which]
    rec, gpu = _fake_run(tmp_path, monkeypatch, _cfg(form, epilogue))
    assert rec["status"] == "ok", rec.get("error")
    v = rec["verification"]
    assert v["passed"] and [b["batch"] for b in v["epilogue"]["batches"]] == [0, 1, 2]
    assert v["epilogue"]["padding"]["written"] == 0 and rec["verification_after_timing"]["passed"]
    assert rec["inputs_unchanged"] and rec["guard_bands"] == "intact"
    name = rec["compile"]["name_expression"]
    assert re.match(r"gemm_\w+_epi<", name) and rec["compile"]["options"].count("-DGEMMLAB_EPI=1") == 1
    act = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4}[epilogue.get("activation", "none")]
    assert f", {act}, {int('bias' in epilogue)}, 1, " in name  # ACT, BIAS, BETA (every case has beta != 0)
    assert rec["epilogue"]["batch_strides"]["b"] == 0


def test_a_wrong_batch_count_or_argument_order_fails_on_the_fake_gpu(tmp_path, monkeypatch):
    """The fake computes what the plugin's launch says: one grid layer too few leaves batch 2 of C
    unwritten (NaN), and lda passed as K reads A's padding (NaN): both are caught."""
    spec = REGISTRY.get("sgemm_pipelined")
    real_geometry, real_arguments = spec.geometry, spec.arguments
    cfg = _cfg("sgemm_pipelined", EPILOGUES[2])
    monkeypatch.setattr(type(spec), "geometry", lambda self, problem, params, device: (
        lambda g: type(g)(grid=(g.grid[0], 1, 2), block=g.block, shared_bytes=g.shared_bytes))(
        real_geometry(problem, params, device)))
    rec, _ = _fake_run(tmp_path / "z", monkeypatch, cfg)
    assert rec["status"] == "wrong_result"
    monkeypatch.setattr(type(spec), "geometry", lambda self, problem, params, device: real_geometry(problem, params, device))
    monkeypatch.setattr(type(spec), "arguments", lambda self, problem, params, device: (
        lambda a: (*a[:8], a[7], *a[9:]))(real_arguments(problem, params, device)))
    rec, _ = _fake_run(tmp_path / "a", monkeypatch, cfg)
    assert rec["status"] == "wrong_result" and rec["verification"]["mismatches"] > 0


# --- compiled code (NVRTC, no GPU) ----------------------------------------------------------------

def _compiled(problem: Problem, params=None):
    from gemmlab.gpu import compile as compile_stage
    from gemmlab.gpu.device import offline_facts
    spec = REGISTRY.get("sgemm_pipelined")
    params = {**spec.defaults, **(params or {})}
    options = compile_stage.CompileOptions.for_kernel("90", spec.options(problem, params, offline_facts("90")))
    return compile_stage.compile_kernel(REGISTRY.source_path(spec), spec.instance(problem, params), options,
                                        persistent=True)


@pytest.mark.parametrize("layout_a, epilogue", [
    ("row", {"beta": 1.0, "bias": "float32", "activation": "silu"}),
    ("row", {"bias": "float32", "activation": "gelu_erf"}),
    ("col", {"beta": 1.0}),
    ("col", {"alpha": 2.0, "beta": 1.0, "bias": "float32", "activation": "silu"}),
], ids=str)
def test_sgemm_pipelined_fused_forms_compile_without_local_memory(layout_a, epilogue):
    """Every fused form at the default MINB=4 (a 128-register cap) keeps the main loop in registers:
    no spill, no stack frame. On the H100 (NVRTC 13.0, session 32) silu's IEEE division (a
    slow-path subroutine call) left 16-24 bytes of local memory in the fused kernel; it divides
    with __fdividef now (gemmlab/fused.cuh); with a column-major A and beta != 0 alone 13.0 spilled
    16 bytes at 128 registers, so the fused entry's launch bounds ask for at most 3 blocks per SM with
    a column-major A (checked here with NVRTC 13.0.88's library preloaded: 167 registers, no spill)."""
    fused = _compiled(Problem(Shape(512, 512, 512), "fp32", layout_a=layout_a, epilogue=Epilogue(**epilogue)))
    if fused.resources is None:
        pytest.skip(f"NVRTC {fused.nvrtc_version} returned no ptxas report")
    r = fused.resources
    assert (r.spill_store_bytes, r.spill_load_bytes, r.stack_frame_bytes) == (0, 0, 0), r


def _interior_other(sass: str) -> tuple[int, int]:
    """(non-FFMA/LDS.128/LDGSTS/BAR instructions, predicated LDGSTS) of the leanest main loop."""
    from test_ladder import _main_loops
    best = None
    for body in _main_loops(sass):
        ops = [x for x in body if "@!PT" not in x]
        other = [x for x in ops if not re.search(r"\b(FFMA|LDS\.128|LDGSTS\S*|BAR\.SYNC\S*)\b", x)]
        guarded = [x for x in ops if "LDGSTS" in x and re.search(r",\s*!?P\d\s*;", x)]
        best = (len(other), len(guarded)) if best is None or (len(other), len(guarded)) < best else best
    return best


def test_sgemm_pipelined_bias_gelu_bf16_compiles_lean_and_without_spills():
    """The brief's compile check (gemmlab mode=compile kernel=sgemm_pipelined epilogue.activation=gelu_tanh
    epilogue.bias=float32 epilogue.out=bf16 at 4096^3): no spills (NVRTC 13.5: 127 registers), and the
    interior main loop keeps the plain instance's lean form: unpredicated cp.async, at most two more
    other instructions than the plain loop (13.5: 43 vs 42 of ~1146)."""
    shape = Shape(4096, 4096, 4096)
    fused = _compiled(Problem(shape, "fp32", out="bf16", epilogue=Epilogue(bias="float32", activation="gelu_tanh")))
    if fused.resources is None:
        pytest.skip(f"NVRTC {fused.nvrtc_version} returned no ptxas report")
    r = fused.resources
    assert r.registers <= 128 and (r.spill_store_bytes, r.spill_load_bytes, r.stack_frame_bytes) == (0, 0, 0), r
    if not fused.sass_text:
        pytest.skip("no SASS listing (nvdisasm)")
    assert not re.search(r"\b(LDL|STL)\b", fused.sass_text) and "gemm_sgemm_pipelined_epi" in fused.sass_text
    other, guarded = _interior_other(fused.sass_text)
    plain_other, _ = _interior_other(_compiled(Problem(shape, "fp32")).sass_text)
    assert guarded == 0 and other <= plain_other + 2, (other, plain_other)


# --- kernel=auto ----------------------------------------------------------------------------------

AUTO_CASES = [((4096, 4096, 4096), "fp32", "row"), ((1, 4096, 4096), "fp32", "row"), ((1, 4096, 4096), "fp32", "col"),
              ((16, 4096, 4096), "bf16", "row"), ((16, 4096, 4096), "tf32", "col"), ((64, 64, 64), "fp32", "row"),
              ((128, 128, 16384), "fp32", "row"), ((2048, 2048, 2048), "bf16", "row")]


@pytest.mark.parametrize("shape, precision, layout_b", AUTO_CASES, ids=lambda x: str(x))
def test_auto_chooses_only_kernels_that_declare_the_epilogue(shape, precision, layout_b):
    epilogue = {"beta": 1.0, "bias": "float32", "activation": "gelu_tanh", "out": "bf16"}
    base = {"kernel": {"name": "auto"}, "shape": list(shape), "precision": precision,
            "layout": {"a": "row", "b": layout_b}}
    cfg, rec = dispatch.resolve_config({**base, "epilogue": epilogue, "batch": {"count": 2}}, REGISTRY)
    problem = Problem(Shape(*shape), precision, "row", layout_b, out="bf16",
                      epilogue=Epilogue(beta=1.0, bias="float32", activation="gelu_tanh", batch=2))
    chosen = cfg["kernel"]["name"]
    assert refusal(REGISTRY.get(chosen).epilogue, problem, chosen) is None, rec
    plain_cfg, _ = dispatch.resolve_config(base, REGISTRY)
    if REGISTRY.get(plain_cfg["kernel"]["name"]).epilogue == FULL:  # the plain choice declares it: the same kernel,
        # its parameters sized for one batch's share of the SMs (2 batches: 66 of 132)
        assert plain_cfg["kernel"]["name"] == cfg["kernel"]["name"]


@pytest.mark.parametrize("shape, precision, want", [((4096, 4096, 4096), "bf16", "tiled"),
                                                     ((2048, 2048, 2048), "bf16", "tiled"),
                                                     ((4096, 4096, 4096), "tf32", "gemv_rows")], ids=str)
def test_auto_with_an_epilogue_ranks_the_kernels_left_by_the_model(shape, precision, want):
    """Issue 41: with an epilogue that no regime's candidate declares, the last rule ranks the kernels
    left by the model's predicted time, not registry order (which gave decode_bf16, a decode kernel,
    for a large bf16 square, and gemv_rows' M=1 default for tf32). The registry without the wgmma
    kernels: the rules' choice once a wgmma kernel declares the epilogue is not this test's."""
    registry = types.SimpleNamespace(kernels={n: s for n, s in REGISTRY.kernels.items() if not n.startswith("wgmma")})
    base = {"kernel": {"name": "auto"}, "shape": list(shape), "precision": precision}
    cfg, rec = dispatch.resolve_config({**base, "epilogue": {"bias": "float32", "activation": "relu"}}, registry)
    chosen = cfg["kernel"].pop("name")
    assert rec["rule"].startswith("any: the remaining kernels' candidates ranked by the model's predicted time"), rec
    assert chosen == want and " predicted " in rec["rule"], rec["rule"]
    narrowed = dispatch.declaring(registry, {"epilogue": {"bias": "float32", "activation": "relu"}}, Shape(*shape),
                                  precision, ("row", "row"))
    assert "decode_bf16" in narrowed.kernels or precision == "tf32"  # the decode kernel was there to be passed over
    problem = Problem(Shape(*shape), precision)
    ranked, _ = dispatch.ranked_last_resort(narrowed, problem, gemmlab.gpu.device.offline_facts("90"), "NVIDIA H200")
    assert (chosen, cfg["kernel"]) == (ranked[0][0], ranked[0][1])  # the model's first, parameters and all
    if want == "gemv_rows":  # rows of 16, not gemv_rows' default M=1 that registry order ran on 4096 rows
        assert cfg["kernel"]["MT"] > REGISTRY.get(want).defaults["MT"] == 1, cfg
    # a problem without an epilogue keeps the rules as recorded (tests/test_auto_golden.py): registry order
    _, plain = dispatch.resolve_config(base, registry)
    assert "ranked by the model" not in plain["rule"]


def test_auto_with_no_kernel_declaring_the_epilogue_is_one_line():
    plain_only = types.SimpleNamespace(kernels={"naive": REGISTRY.get("naive"), "sgemm_warptile": REGISTRY.get(
        "sgemm_warptile")})
    with pytest.raises(ConfigError) as exc:
        dispatch.resolve_config({"kernel": {"name": "auto"}, "shape": [64, 64, 64], "layout": {"ldc": 80}}, plain_only)
    assert str(exc.value) == (
        "kernel: auto: no registered kernel declares this problem's epilogue, output type, leading dimensions and "
        "batch (kernel naive reads and writes tight matrices only (ldc = 64 here); got layout.ldc=80; kernel "
        "sgemm_warptile reads and writes tight matrices only (ldc = 64 here); got layout.ldc=80)")
    # a plain problem keeps the registry as it is
    cfg, _ = dispatch.resolve_config({"kernel": {"name": "auto"}, "shape": [64, 64, 64]}, plain_only)
    assert cfg["kernel"]["name"] in plain_only.kernels


# --- on a GPU -------------------------------------------------------------------------------------

#: the partial-tile suite per kernel: sgemm_pipelined and gemv_* any shape; decode_bf16 K % 8 == 0
#: (and N % 8 == 0 for a row-major B)
GPU_SHAPES = {
    "sgemm_pipelined": [(1, 1, 1), (31, 33, 17), (63, 65, 33), (100, 100, 100), (129, 255, 1000)],
    "sgemm_pipelined-acol": [(1, 1, 1), (31, 33, 17), (64, 65, 33), (100, 100, 100), (132, 255, 1000)],
    "decode_bf16": [(1, 8, 8), (5, 64, 40), (17, 72, 48), (33, 136, 1000), (64, 200, 512)],
    "decode_bf16-fp16-bcol": [(1, 1, 8), (5, 65, 40), (17, 70, 48), (33, 129, 1000), (64, 200, 512)],
    "decode_tf32": [(1, 8, 8), (5, 64, 40), (17, 72, 48), (33, 136, 1000)],
    "decode_tf32-bcol": [(1, 1, 8), (5, 65, 40), (17, 70, 48), (33, 129, 1000)],
    "gemv_rows": [(1, 1, 1), (5, 70, 33), (16, 129, 1000), (33, 255, 100)],
    "gemv_cols-tf32": [(1, 1, 1), (5, 70, 33), (16, 129, 1000), (33, 255, 100)],
}
GPU_TIMING = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "graph"}


def _gpu_cfg(form: str, shape, epilogue: dict, **over) -> dict:
    _, _, la, lb, _, pad = FORMS[form]
    cfg = _cfg(form, epilogue, timing=dict(GPU_TIMING), **over)
    cfg["shape"] = list(shape)
    cfg["layout"].update(_lds(la, lb, shape, 8 if form.startswith("decode") else pad))
    return cfg


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", EPILOGUES, ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()))
@pytest.mark.parametrize("form, shape", [(f, s) for f, shapes in GPU_SHAPES.items() for s in shapes],
                         ids=lambda x: str(x))
def test_gpu_fast_kernels_each_epilogue_partial_tiles_ld_above_tight(tmp_path, form, shape, epilogue):
    rec = run_point(_gpu_cfg(form, shape, epilogue), tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["epilogue"]["padding"]["written"] == 0 and rec["verification_after_timing"]["passed"]
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    assert rec["compile"]["driver_attributes"]["local_bytes"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("form", list(FORMS))
def test_gpu_fast_kernels_fused_memcheck_clean(tmp_path, form):
    shape = GPU_SHAPES[form][2]
    rec = run_point(_gpu_cfg(form, shape, EPILOGUES[3], sanitizer="memcheck"), tmp_path / "point")
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok", rec.get("error")


@pytest.mark.gpu
def test_gpu_sgemm_pipelined_fused_large_batches_and_interior_tiles(tmp_path):
    """Interior tiles take the unguarded 16-byte copies with ld > tight (multiples of 4) and the
    vector epilogue (ldc % 4 == 0): 4 batches of 512 x 384 x 256 sharing B, bias+gelu_tanh, bf16 C."""
    cfg = _gpu_cfg("sgemm_pipelined", (512, 384, 256), EPILOGUES[2], batch={"count": 4, "stride_b": 0})
    cfg["layout"].update({"lda": 260, "ldb": 388, "ldc": 392})
    rec = run_point(cfg, tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["epilogue"]["padding"]["written"] == 0
