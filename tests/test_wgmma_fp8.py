"""CPU tests of the ``wgmma_fp8`` kernel (issue 42, item 4; plugins/wgmma_fp8.py,
kernels/wgmma_fp8.cu): its declarations (fp8 only, TN only, promotion every 128 declared, QGMMA +
UTMALDG), one-line parameter and shape rules naming the field, the declared space and the candidates,
the ownership model over the persistent grid (and that it has teeth), the tensor maps and argument
order, NVRTC compiles for sm_90a (no spills, the FP8 wgmma form in the SASS per format, no
serialized wgmma), and whole points on the fake GPU with the kernel's numpy model (scales read from
the buffers the contract lays out, C float32 or bf16), a wrong model caught."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.contract.hookspecs import Matrix, ParamError, Problem, Shape, TensorMap
from gemmlab.contract.registry import load_registry
from gemmlab.gpu.compile import CompileOptions, compile_kernel
from gemmlab.gpu.device import offline_facts
from gemmlab.paths import KERNELS_DIR
from gemmlab.run.pipeline import run_point

FACTS = offline_facts("90")
SPEC = load_registry(entry_points=False).get("wgmma_fp8")
MODULE = sys.modules[type(SPEC).__module__]


def params(**over):
    return {**SPEC.defaults, **over}


def fp8(M, N, K, scaling="tensor", out="float32", a="e4m3", b="e4m3"):
    return Problem(Shape(M, N, K), "fp8", "row", "col", a, b, scaling, out)


# --- declarations and rules -----------------------------------------------------------------------

def test_declarations():
    assert SPEC.precisions == ("fp8",) and SPEC.layouts == (("row", "col"),)
    assert SPEC.fp8_accumulation == 128 == MODULE.PROMOTE
    assert SPEC.sass_classes == ("QGMMA", "UTMALDG")
    space = SPEC.param_space()
    assert space.contains(SPEC.defaults) and space.size() > 1
    assert space.contains(params(BM=64, BN=256, STAGES=5)) and not space.contains(params(BM=64, BN=64))
    assert not space.contains(params(BM=128, BN=256, OVERLAP=0))
    assert not space.contains(params(BN=192, OVERLAP=1, STAGES=5)) and space.contains(params(BN=192, OVERLAP=0, STAGES=5))


@pytest.mark.parametrize("problem, over, field, words", [
    (fp8(64, 64, 256), {"BM": 96}, "kernel.BM", "64 (the two consumer warpgroups split the columns), 128 or 256"),
    (fp8(64, 64, 256), {"BM": 64, "BN": 64}, "kernel.BN", "128, 192 or 256 with BM=64"),
    (fp8(64, 64, 256), {"BM": 64, "BN": 160, "OVERLAP": 0}, "kernel.BN", "128, 192 or 256 with BM=64"),
    (fp8(64, 64, 256), {"BM": 64, "BN": 256, "STAGES": 6}, "kernel.STAGES", "exceeds"),
    (fp8(64, 64, 256), {"BN": 80}, "kernel.BN", "64, 96, 128, 160 or 192"),
    (fp8(64, 64, 256), {"BN": 256, "OVERLAP": 0}, "kernel.BN", "64, 96, 128, 160 or 192"),
    (fp8(64, 64, 256), {"BN": 192}, "kernel.BN", "at most 192"),
    (fp8(64, 64, 256), {"BM": 256, "BN": 128}, "kernel.BN", "needs 384 accumulator"),
    (fp8(64, 64, 256), {"OVERLAP": 2}, "kernel.OVERLAP", "0 (one partial-sum bank)"),
    (fp8(64, 64, 256), {"STAGES": 9}, "kernel.STAGES", "2..8"),
    (fp8(64, 64, 256), {"BN": 192, "OVERLAP": 0, "STAGES": 6}, "kernel.STAGES", "exceeds"),
    (fp8(64, 64, 256), {"GROUP_M": 0}, "kernel.GROUP_M", ">= 1"),
    (fp8(64, 64, 200), {}, "shape", "K=200 must be a multiple of 16"),
])
def test_rules_are_one_line_naming_the_field(problem, over, field, words):
    with pytest.raises(ParamError) as err:
        SPEC.check_problem(problem, params(**over), FACTS)
    assert err.value.field == field and words in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_refuses_other_gpus():
    with pytest.raises(ParamError, match="needs an sm_90 GPU") as err:
        SPEC.check_problem(fp8(64, 64, 256), params(), offline_facts("89"))
    assert err.value.field == "kernel"


def test_candidates_pass_the_rules():
    for problem in (fp8(4096, 4096, 4096), fp8(4096, 7168, 16384, "block"), fp8(128, 7168, 2048), fp8(1, 1, 16)):
        offered = SPEC.candidates(problem, FACTS)
        assert offered and len(offered) <= 60
        for p in offered:
            SPEC.check_problem(problem, {**SPEC.defaults, **p}, FACTS)
    small = SPEC.candidates(fp8(1, 7168, 2048), FACTS)  # M <= 64: the 64-row forms first
    assert [p["BM"] for p in small[:3]] == [64, 64, 64] and sorted(p["BN"] for p in small[:3]) == [128, 192, 256]
    assert all(p["BM"] == 128 for p in SPEC.candidates(fp8(65, 7168, 2048), FACTS)[:4])
    shortlist = SPEC.candidates(fp8(4096, 4096, 4096), FACTS)[:4]
    assert sorted(p["BN"] for p in shortlist) == [96, 128, 160, 192]
    assert all(p["OVERLAP"] == (p["BN"] <= 128) for p in shortlist)  # two banks only where they fit


def test_instance_arguments_and_launch():
    p = params()
    assert SPEC.instance(fp8(64, 64, 256, "block", "bf16", "e5m2"), p) == "gemm_wgmma_fp8<1, 0, 128, 128, 6, 16, 2, 1, 1>"
    assert SPEC.instance(fp8(64, 64, 256, "row", "float32", "e4m3", "e5m2"), params(OVERLAP=0)) == (
        "gemm_wgmma_fp8<0, 1, 128, 128, 6, 16, 1, 0, 0>")
    args = SPEC.arguments(fp8(64, 64, 256), params(BN=96), FACTS)
    assert args[:5] == (TensorMap("A", (128, 128)), TensorMap("B", (96, 128)), Matrix("A_scale"), Matrix("B_scale"),
                        Matrix("C"))
    launch = SPEC.geometry(fp8(4096, 4096, 4096), p, FACTS)
    assert launch.grid == (132, 1, 1) and launch.block == (384, 1, 1) and launch.shared_bytes == 6 * 256 * 128 + 1024
    small = SPEC.geometry(fp8(1, 7168, 2048), params(BM=64, BN=256, STAGES=5), FACTS)
    assert small.grid == (28, 1, 1) and small.shared_bytes == 5 * 320 * 128 + 1024
    assert SPEC.arguments(fp8(1, 7168, 2048), params(BM=64), FACTS)[0] == TensorMap("A", (64, 128))
    assert SPEC.geometry(fp8(100, 100, 256), p, FACTS).grid == (1, 1, 1)  # never more CTAs than tiles
    assert SPEC.options(fp8(64, 64, 256), p, FACTS).arch_specific  # sm_90a


# --- ownership --------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, over", [
    (Shape(1, 1, 16), {}), (Shape(129, 257, 208), {}), (Shape(1537, 1153, 400), {"BN": 192, "OVERLAP": 0}),
    (Shape(300, 520, 64), {"BM": 256, "BN": 96, "OVERLAP": 0, "GROUP_M": 3}), (Shape(4096, 2048, 128), {"BN": 160, "OVERLAP": 0}),
    (Shape(1, 257, 16), {"BM": 64}), (Shape(5, 100, 16), {"BM": 64, "BN": 256, "STAGES": 5}), (Shape(63, 1153, 400), {"BM": 64, "BN": 192, "OVERLAP": 0}),
    (Shape(130, 600, 128), {"BM": 64, "BN": 256, "STAGES": 5, "GROUP_M": 3}),
], ids=str)
def test_one_owner_per_output_and_each_staged_element_loaded_once(shape, over):
    stores, loads = SPEC.ownership(shape, params(**over), FACTS)
    assert stores.shape == (shape.M, shape.N) and (stores == 1).all()
    assert all((v == 1).all() for v in loads.values()) and set(loads) == {"A", "B"}


def test_model_has_teeth(monkeypatch):
    """A fragment layout with the rows of the upper half (g + 8) at g + 4, or a tile order that skips
    the last CTA's tiles, leaves outputs with no owner and others with two."""
    real = MODULE.fragment_coords

    def rows_off(BM, BN):
        r, c = real(BM, BN)
        return np.where(r % 16 >= 8, r - 4, r), c

    monkeypatch.setattr(MODULE, "fragment_coords", rows_off)
    stores, _ = SPEC.ownership(Shape(256, 256, 128), params(), FACTS)
    assert (stores == 0).any() and (stores == 2).any()
    monkeypatch.undo()

    def both_warpgroups_on_the_left_half(BM, BN):  # BM = 64 with the second consumer's column offset lost
        r, c = real(BM, BN)
        return r, np.where(c >= BN // 2, c - BN // 2, c)

    monkeypatch.setattr(MODULE, "fragment_coords", both_warpgroups_on_the_left_half)
    stores, _ = SPEC.ownership(Shape(64, 256, 128), params(BM=64), FACTS)
    assert (stores[:, :64] == 2).all() and (stores[:, 64:128] == 0).all()  # BN = 128: each tile's right half unowned
    monkeypatch.undo()
    order = MODULE.tile_order
    monkeypatch.setattr(MODULE, "tile_order", lambda shape, p, ctas: order(shape, p, ctas)[:-1])
    stores, _ = SPEC.ownership(Shape(4096, 4096, 128), params(), FACTS)
    assert (stores == 0).any()


# --- compiles ---------------------------------------------------------------------------------------

COMPILES = [  # (problem, parameters, the QGMMA form, QGMMA count: MI x 4 k-steps x banks)
    (fp8(4096, 4096, 4096), {}, "QGMMA.64x128x32.F32.E4M3.E4M3", 16),
    (fp8(4096, 4096, 4096, "block", "bf16"), {}, "QGMMA.64x128x32.F32.E4M3.E4M3", 16),
    (fp8(4096, 4096, 4096, "row", "bf16", "e5m2", "e4m3"), {}, "QGMMA.64x128x32.F32.E5M2.E4M3", 16),
    (fp8(4096, 4096, 4096, "block", "float32", "e4m3", "e5m2"), {"BN": 192, "OVERLAP": 0, "STAGES": 5},
     "QGMMA.64x192x32.F32.E4M3.E5M2", 4),
    (fp8(4096, 4096, 4096, "tensor", "bf16"), {"BM": 256, "BN": 64, "STAGES": 4}, "QGMMA.64x64x32.F32.E4M3.E4M3", 32),
    # BM = 64 (small M): each consumer's wgmma n is BN/2
    (fp8(64, 7168, 2048, "block", "bf16"), {"BM": 64, "BN": 128}, "QGMMA.64x64x32.F32.E4M3.E4M3", 16),
    (fp8(1, 2112, 7168, "row", "float32"), {"BM": 64, "BN": 192, "OVERLAP": 0}, "QGMMA.64x96x32.F32.E4M3.E4M3", 4),
    (fp8(16, 4096, 7168, "tensor", "bf16", "e4m3", "e5m2"), {"BM": 64, "BN": 256, "STAGES": 5},
     "QGMMA.64x128x32.F32.E4M3.E5M2", 16),
]


@pytest.mark.parametrize("problem, over, form, count", COMPILES, ids=lambda x: getattr(x, "scaling", None) or str(x))
def test_compiles_to_fp8_wgmma_without_spills(problem, over, form, count):
    p = params(**over)
    SPEC.check_problem(problem, p, FACTS)
    options = CompileOptions.for_kernel("90", SPEC.options(problem, p, FACTS))
    assert options.target == "sm_90a"
    compiled = compile_kernel(KERNELS_DIR / SPEC.source, SPEC.instance(problem, p), options, persistent=True)
    res = compiled.resources
    assert res is not None and res.spill_store_bytes == 0 and res.spill_load_bytes == 0 and res.stack_frame_bytes == 0
    hist = compiled.sass["histogram"]
    assert hist["QGMMA"] == count and hist["HGMMA"] == 0 and hist["UTMALDG"] == 2, hist
    assert hist["LDL"] == 0 and hist["STL"] == 0, hist
    qgmma = [line for line in compiled.sass_text.splitlines() if "QGMMA" in line]
    assert all(form in line for line in qgmma), qgmma[:2]
    assert "C7508" not in compiled.log and "C7514" not in compiled.log, compiled.log  # setmaxnreg kept; no serialization
    assert not compiled.sass["wgmma"]["all_serialized"] and compiled.sass["warning"] is None, compiled.sass["wgmma"]
    if p["OVERLAP"]:  # the next stage's group stays in flight while one is promoted: no wgmma waits for all
        assert compiled.sass["wgmma"]["serialized"] == 0 and "WARPGROUP.DEPBAR.LE gsb0, 0x1" in compiled.sass_text
    else:  # one group per stage, awaited whole before its promotion (wait_group 0): 1 of its QGMMA waits
        assert compiled.sass["wgmma"]["serialized"] == count // 4 // max(1, p["BM"] // 128)
    if problem.scaling == "block":  # the promotion's fma with the scales
        assert hist["FFMA"] > 0


def test_the_no_promotion_mutant_builds_from_the_same_source(tmp_path):
    """tests/plugins_fp8_mutant's wgmma_fp8_no_promotion (for the GPU test that the bound catches it):
    the shipped source with -D WGMMA_FP8_NO_PROMOTION=1, still declaring promotion every 128; refused
    where the mutant has no form (OVERLAP=1, block scaling); compiles without spills, with no
    promotion adds in its k-loop (another SASS than the shipped OVERLAP=0 build)."""
    registry = load_registry([str(Path(__file__).parent / "plugins_fp8_mutant")], entry_points=False)
    mutant = registry.get("wgmma_fp8_no_promotion")
    assert mutant.fp8_accumulation == 128 and mutant.source == SPEC.source
    problem, p = fp8(256, 384, 16384), {**mutant.defaults}
    mutant.check_problem(problem, p, FACTS)
    for bad, over in ((fp8(256, 384, 16384, "block"), {}), (problem, {"OVERLAP": 1})):
        with pytest.raises(ParamError, match="no-promotion mutant"):
            mutant.check_problem(bad, {**p, **over}, FACTS)
    builds = {}
    for name, s in (("mutant", mutant), ("shipped", SPEC)):
        options = CompileOptions.for_kernel("90", s.options(problem, p, FACTS))
        builds[name] = compile_kernel(KERNELS_DIR / s.source, s.instance(problem, p), options, persistent=True)
    assert dict(builds["mutant"].options.defines) == {"WGMMA_FP8_NO_PROMOTION": "1"}
    assert not dict(builds["shipped"].options.defines)
    assert builds["mutant"].resources.spill_store_bytes == 0
    assert builds["mutant"].sass["histogram"]["QGMMA"] == builds["shipped"].sass["histogram"]["QGMMA"] == 4
    assert builds["mutant"].sass_text != builds["shipped"].sass_text


# --- the fake GPU -----------------------------------------------------------------------------------

def emulated(model=None):
    """Fake-GPU behaviour of gemm_wgmma_fp8: the arguments in the kernel's order (tensor maps of A
    and B, A_scale, B_scale, C, M, N, K), the operands read from the maps' addresses as the problem
    stores them, C written by ``model`` (default: the plugin's numpy model) in C's type."""
    from gemmlab.stages.inputs import c_storage_dtype, fp8_dtype

    def run(gpu, args):
        tma, tmb, sa, sb, c, m, n, k = args
        assert (tma.tm.matrix, tmb.tm.matrix) == ("A", "B") and tma.tm.box[1] == 128 and tmb.tm.box[1] == 128
        problem = run.problem
        m, n, k = int(m), int(n), int(k)
        a = gpu.view(tma.address, m * k).view(fp8_dtype(problem.fp8_a)).reshape(m, k).astype(np.float64)
        b = gpu.view(tmb.address, n * k).view(fp8_dtype(problem.fp8_b)).reshape(n, k).astype(np.float64)
        shape_a, shape_b = problem.stored_shape("A_scale"), problem.stored_shape("B_scale")
        a_scale = gpu.floats(int(sa), shape_a[0] * shape_a[1]).reshape(shape_a)
        b_scale = gpu.floats(int(sb), shape_b[0] * shape_b[1]).reshape(shape_b)
        out = (model or MODULE.emulate)(problem, a, b, a_scale, b_scale)
        dt = c_storage_dtype(problem)
        gpu.view(int(c), m * n * dt.itemsize).view(dt)[:] = out.astype(dt).ravel()
    return run


FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "graph"}


def _point(tmp_path, monkeypatch, shape, behaviour, kernel_params=None, **fp8cfg):
    behaviour.problem = fp8(*shape, fp8cfg.get("scaling", "tensor"), fp8cfg.get("out", "float32"),
                            fp8cfg.get("a", "e4m3"), fp8cfg.get("b", "e4m3"))
    gpu = HostGpu(behaviour={"gemm_wgmma_fp8": behaviour})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    cfg = {"kernel": {"name": "wgmma_fp8", **(kernel_params or {})}, "shape": list(shape), "mode": "run", "timing": dict(FAST),
           "precision": "fp8", "fp8": fp8cfg, "layout": {"a": "row", "b": "col"}}
    return run_point(cfg, tmp_path / "point")


@pytest.mark.parametrize("shape, cfg", [((40, 136, 208), {"scaling": "block", "out": "bf16"}),
                                        ((33, 65, 272), {"scaling": "row", "a": "e5m2"}),
                                        ((17, 10, 1040), {"scaling": "tensor", "out": "bf16", "b": "e5m2"})], ids=str)
def test_a_point_runs_on_the_fake_gpu_through_the_numpy_model(tmp_path, monkeypatch, shape, cfg):
    rec = _point(tmp_path, monkeypatch, shape, emulated(), **cfg)
    assert rec["status"] == "ok", rec.get("error")
    v = rec["verification"]
    assert v["passed"] and v["fp8"]["accumulation_declared"] == 128 and 0 < v["max_error_over_tolerance"] < 1
    assert rec["verification_after_timing"]["passed"] and rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    assert rec["launch"]["block"] == [384, 1, 1]


def test_a_bm64_point_runs_on_the_fake_gpu(tmp_path, monkeypatch):
    """The BM = 64 form through the whole pipeline (its 64-row A box, its launch) at M = 5."""
    rec = _point(tmp_path, monkeypatch, (5, 300, 272), emulated(), {"BM": 64, "BN": 192}, scaling="block", out="bf16")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["passed"] and 0 < rec["verification"]["max_error_over_tolerance"] < 1
    assert rec["launch"]["grid"] == [2, 1, 1] and rec["tensor_maps"][0]["box"][0] == 64, rec["tensor_maps"][0]


def test_a_bf16_c_of_odd_size_runs_timed(tmp_path, monkeypatch):
    rec = _point(tmp_path, monkeypatch, (17, 9, 1040), emulated(), scaling="tensor", out="bf16")
    assert rec["status"] == "ok", rec.get("error")


def test_the_fake_gpu_catches_a_model_that_reads_the_wrong_scale_group(tmp_path, monkeypatch):
    """Block scaling with B's scale of the next 128-block of K (an off-by-one in the scale index):
    wrong_result."""
    def shifted(problem, a, b, a_scale, b_scale):
        return MODULE.emulate(problem, a, b, a_scale, np.roll(b_scale, -1, axis=1))
    rec = _point(tmp_path, monkeypatch, (40, 136, 400), emulated(shifted), scaling="block")
    assert rec["status"] == "wrong_result" and rec["verification"]["max_error_over_tolerance"] > 2


def test_numpy_model_promotes_and_scales():
    """The model against the float64 product of the dequantised operands: within the accumulator's
    truncation per 128 of K for each scaling mode (block: per-group scales applied)."""
    rng = np.random.default_rng(5)
    import ml_dtypes
    M, N, K = 8, 136, 300
    a = rng.standard_normal((M, K)).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    b = rng.standard_normal((N, K)).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    for scaling in ("tensor", "row", "block"):
        problem = fp8(M, N, K, scaling)
        sa = rng.uniform(0.5, 2, problem.stored_shape("A_scale")).astype(np.float32)
        sb = rng.uniform(0.5, 2, problem.stored_shape("B_scale")).astype(np.float32)
        k = np.arange(K) // 128
        if scaling == "tensor":
            ea, eb = np.full((M, K), sa[0, 0]), np.full((N, K), sb[0, 0])
        elif scaling == "row":
            ea, eb = np.repeat(sa.reshape(M, 1), K, 1), np.repeat(sb.reshape(N, 1), K, 1)
        else:
            ea, eb = sa[k].T, sb[np.arange(N) // 128][:, k]
        ref = (a * ea) @ (b * eb).T
        got = MODULE.emulate(problem, a, b, sa, sb)
        scale = np.abs(a * ea) @ np.abs(b * eb).T
        assert np.abs(got - ref).max() <= 2.0**-10 * scale.max() and not np.array_equal(got, np.zeros_like(got))


@pytest.mark.parametrize("m, bm", [(1, 64), (64, 64), (65, 128), (4096, 128)])
def test_kernel_auto_takes_the_64_row_tile_at_m_up_to_64(m, bm):
    """kernel=auto precision=fp8 runs wgmma_fp8's first candidate (its preferences): BM = 64 where
    M <= 64 (the BM = 128 tile at M = 64 ran 44-94% of cuBLASLt on the H100, session 33)."""
    from gemmlab.dispatch import auto
    choice = auto.choose(Shape(m, 7168, 2048), load_registry(entry_points=False), precision="fp8", layout=("row", "col"))
    assert choice.kernel == "wgmma_fp8" and choice.source == "rule" and choice.params["BM"] == bm
