"""CPU tests of the ``gemv_cols`` kernel (kernels/gemv_cols.cu, plugins/gemv_cols.py; issue 41):
the parameter rules (one line naming the field), the declared space and the sized candidates, the
ownership model (one store per output, every (column, k) of B and (row, k) of A read once, every
cross-warp partial written once), the numpy emulation of the kernel's K split and butterfly
reduce-scatter (exact on small integers, and it has teeth), a fake-GPU run of fp32 and tf32 points
at small odd shapes through the whole pipeline, and NVRTC compiles (registers, no spills, FFMA and
LDG.128 in the SASS). GPU verification: tests/test_gpu_gemv_cols.py."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.contract.hookspecs import ParamError, Problem, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.dispatch.candidates import enumerate as enumerate_candidates
from gemmlab.gpu.device import offline_facts
from gemmlab.run.pipeline import exit_status, run_point

FACTS = offline_facts("90")
REGISTRY = load_registry(entry_points=False)
SPEC = REGISTRY.get("gemv_cols")
MODULE = sys.modules[type(SPEC).__module__]
FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events", "floor": False}


def params(**overrides):
    return {**SPEC.defaults, **overrides}


def problem(shape, precision="fp32"):
    return Problem(Shape(*shape), precision, "row", "col")


# --- declaration, rules, space, candidates ---------------------------------------------------------

def test_declares_fp32_tf32_b_column_major_no_rounding():
    assert SPEC.precisions == ("fp32", "tf32") and SPEC.layouts == (("row", "col"),)
    assert SPEC.tf32_rounding == "none" and SPEC.sass_classes == ("FFMA", "LDG.128")


@pytest.mark.parametrize("p, field", [
    (dict(MT=3), "kernel.MT"), (dict(MT=64), "kernel.MT"), (dict(CW=3), "kernel.CW"), (dict(U=3), "kernel.U"),
    (dict(WN=3), "kernel.WN"), (dict(KW=6), "kernel.KW"),
    (dict(MT=32, CW=4), "kernel.CW"),                # 128 sums per lane
    (dict(MT=16, CW=4, U=2), "kernel.U"),            # spills under the 128-register cap
    (dict(WN=8, KW=8), "kernel.KW"),                 # 2048 threads
])
def test_rules_refuse_with_the_field(p, field):
    with pytest.raises(ParamError) as exc:
        SPEC.check_problem(problem((1, 64, 64)), params(**p), FACTS)
    assert exc.value.field == field and "\n" not in exc.value.message


def test_too_many_column_blocks_is_a_shape_error():
    with pytest.raises(ParamError) as exc:
        SPEC.check_problem(problem((1, 65536 * 4 + 4, 64)), params(CW=4, WN=1), FACTS)
    assert exc.value.field == "shape" and "raise CW or WN" in exc.value.message
    SPEC.check_problem(problem((1, 65536 * 4 + 4, 64)), params(CW=4, WN=2), FACTS)


def test_every_space_point_passes_the_rules_and_the_offered_ones_too():
    """The space's restrictions are check_problem's parameter rules: every point they let through
    passes it (at a shape with no shape rule in play), and every offered candidate is checked."""
    points = list(MODULE.SPACE.points(SPEC.defaults))
    assert len(points) > 50
    for p in points:
        SPEC.check_problem(problem((7, 4096, 4095)), p, FACTS)
    offered = SPEC.candidates(problem((7, 4096, 4095)), FACTS)
    assert offered and all(set(c) == set(SPEC.defaults) for c in offered)
    for c in offered:
        SPEC.check_problem(problem((7, 4096, 4095)), c, FACTS)


@pytest.mark.parametrize("shape, first", [
    ((1, 1536, 2048), {"MT": 1, "CW": 4, "WN": 1, "KW": 8, "U": 2}),    # 384 column groups: K over 8 warps
    ((7, 4096, 4095), {"MT": 8, "CW": 4, "WN": 2, "KW": 4, "U": 2}),
    ((16, 11008, 4096), {"MT": 16, "CW": 4, "WN": 8, "KW": 1, "U": 1}),  # 2752 column groups fill the GPU
    ((32, 5000, 3000), {"MT": 16, "CW": 4, "WN": 8, "KW": 1, "U": 1}),   # two row blocks (B from L2 the 2nd time)
    ((1, 8, 100), {"MT": 1, "CW": 4, "WN": 8, "KW": 1, "U": 1}),         # one K step: no split
])
def test_sized_candidate_first(shape, first):
    assert SPEC.candidates(problem(shape), FACTS)[0] == first


def test_core_enumerates_it_for_tf32_b_col_only():
    names = lambda prob: {c.kernel for c in enumerate_candidates(REGISTRY, prob, FACTS)}
    assert "gemv_cols" in names(problem((1, 1536, 2048), "tf32"))
    assert "gemv_cols" not in names(Problem(Shape(1, 1536, 2048), "tf32", "row", "row"))
    assert "gemv_cols" not in names(Problem(Shape(1, 1536, 2048), "bf16", "row", "col"))


# --- the index model and the emulation ------------------------------------------------------------

SHAPES = [Shape(1, 1, 1), Shape(3, 37, 41), Shape(7, 65, 515), Shape(17, 33, 300), Shape(5, 130, 1000),
          Shape(2, 9, 128)]
VARIANTS = [{}, dict(MT=8, CW=4, WN=2, KW=4, U=2), dict(MT=16, CW=4, WN=1, KW=16, U=1), dict(MT=1, CW=1, WN=8, KW=2, U=4),
            dict(MT=2, CW=8, WN=1, KW=8, U=2), dict(MT=32, CW=1, WN=4, KW=1, U=1), dict(MT=4, CW=8, WN=2, KW=1, U=1)]
IDS = ["defaults", "MT8-KW4", "MT16-KW16", "CW1-WN8", "CW8-KW8", "MT32-KW1", "V32-KW1"]


@pytest.mark.parametrize("p", VARIANTS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.M}x{s.N}x{s.K}")
def test_one_owner_and_exact_coverage(shape, p):
    full = params(**p)
    SPEC.check_problem(Problem(shape, "fp32", "row", "col"), full, FACTS)
    stores, loads = SPEC.ownership(shape, full)
    assert stores.shape == (shape.M, shape.N) and (stores == 1).all(), np.unique(stores)
    for what, hits in loads.items():
        assert hits.size and (hits == 1).all(), f"{what}: {np.unique(hits)}"


@pytest.mark.parametrize("p", VARIANTS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.M}x{s.N}x{s.K}")
def test_emulation_is_exact_on_small_integers(shape, p):
    rng = np.random.default_rng(shape.M * 7 + shape.K)
    A = rng.integers(-4, 5, size=(shape.M, shape.K)).astype(np.float32)
    B = rng.integers(-4, 5, size=(shape.K, shape.N)).astype(np.float32)
    np.testing.assert_array_equal(MODULE.emulate(A, B, params(**p)), A.astype(np.float64) @ B)


def test_holders_cover_every_slot_once():
    for V in (1, 2, 4, 8, 16, 32, 64):
        lanes, slot0 = MODULE.holders(V)
        slots = np.concatenate([slot0 + q for q in range(max(1, V // 32))])
        assert sorted(slots.tolist()) == list(range(V)), V


def test_a_wrong_slot_map_is_caught_by_the_emulation_and_the_model(monkeypatch):
    """Holder slots rotated by one (each output still stored once, with another output's sum): the
    emulated C is wrong; slots that collide (two lanes write one slot): the model counts stores
    twice and never."""
    rng = np.random.default_rng(1)
    A = rng.integers(-4, 5, size=(4, 300)).astype(np.float32)
    B = rng.integers(-4, 5, size=(300, 16)).astype(np.float32)
    real = MODULE.holders
    p = params(MT=4, CW=4, WN=1, KW=1, U=1)
    with monkeypatch.context() as patch:
        patch.setattr(MODULE, "holders", lambda V: (real(V)[0], (real(V)[1] + 1) % V))
        assert not np.array_equal(MODULE.emulate(A, B, p), A.astype(np.float64) @ B)
    monkeypatch.setattr(MODULE, "holders", lambda V: (real(V)[0], real(V)[1] // 2 * 2))
    stores, _ = SPEC.ownership(Shape(4, 16, 300), p)
    assert (stores == 2).any() and (stores == 0).any()


def test_a_wrong_k_step_is_caught_by_the_model(monkeypatch):
    """A 64-long step (the lanes cover 128 k per step): k read twice by the model's count."""
    monkeypatch.setattr(MODULE, "STEP", 64)
    _, loads = SPEC.ownership(Shape(4, 16, 300), params(MT=4, CW=4, WN=1, KW=2, U=1))
    assert not (loads["B"] == 1).all() and not (loads["A (per column group)"] == 1).all()


# --- the pipeline on the fake GPU ------------------------------------------------------------------

def emulated(p):
    """Fake-GPU behaviour of gemm_gemv_cols: reads A (M x K) and B as stored (N x K) and writes C."""
    def run(gpu, args):
        a, b, c, m, n, k = (int(x) for x in args)
        A = gpu.floats(a, m * k).reshape(m, k)
        B = gpu.floats(b, n * k).reshape(n, k).T  # column-major B: B[k, n] at k + n*K
        gpu.floats(c, m * n)[:] = MODULE.emulate(A, B, p).ravel()
    return run


@pytest.mark.parametrize("precision", ["fp32", "tf32"])
@pytest.mark.parametrize("shape, p", [((3, 37, 41), {}), ((7, 65, 515), dict(MT=8, CW=4, WN=2, KW=4, U=2)),
                                      ((17, 33, 300), dict(MT=16, CW=4, WN=1, KW=2, U=1))],
                         ids=["3x37x41", "7x65x515", "17x33x300"])
def test_fake_gpu_point_verifies(tmp_path, monkeypatch, precision, shape, p):
    gpu = HostGpu(behaviour={"gemm_gemv_cols": emulated(params(**p))})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    out = tmp_path / "p"
    rec = run_point({"kernel": {"name": "gemv_cols", **p}, "shape": list(shape), "precision": precision,
                     "layout": {"a": "row", "b": "col"}, "mode": "run", "timing": dict(FAST)}, out)
    assert json.loads((out / "result.json").read_text())["status"] == rec["status"]
    assert rec["status"] == "ok" and exit_status(rec) == 0, rec.get("error")
    assert rec["verification"]["passed"] and rec["verification"]["mismatches"] == 0
    if precision == "tf32":
        assert rec["verification"]["tf32"]["declared"] == "none"
    assert rec["launch"]["grid"][:2] == [-(-shape[0] // params(**p)["MT"]),
                                         -(-shape[1] // (params(**p)["WN"] * params(**p)["CW"]))]
    assert rec["sass_check"]["verdict"] == "present", rec["sass_check"]


def test_fake_gpu_catches_a_wrong_slot_map(tmp_path, monkeypatch):
    real = MODULE.holders
    monkeypatch.setattr(MODULE, "holders", lambda V: (real(V)[0], (real(V)[1] + 1) % V))
    gpu = HostGpu(behaviour={"gemm_gemv_cols": emulated(params())})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    rec = run_point({"kernel": {"name": "gemv_cols"}, "shape": [3, 37, 41], "precision": "tf32",
                     "layout": {"a": "row", "b": "col"}, "mode": "run", "timing": dict(FAST)}, tmp_path / "p")
    assert rec["status"] == "wrong_result"


# --- compile ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, p", [((1, 1536, 2048), {}), ((16, 11008, 4096), dict(MT=16, CW=4, WN=8, KW=1, U=1)),
                                      ((7, 4096, 4095), dict(MT=8, CW=4, WN=2, KW=4, U=2))],
                         ids=["decode-1", "decode-16", "odd-K"])
def test_compiles_without_spills(shape, p):
    """NVRTC for sm_90: at most 128 registers (the kernel's launch bounds), no spills, FFMA and
    128-bit global loads (U*CW of B and U*MT of A per round, the float4 path)."""
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.gpu.sass import histogram
    from gemmlab.paths import KERNELS_DIR
    prob, full = problem(shape, "tf32"), params(**p)
    SPEC.check_problem(prob, full, FACTS)
    compiled = compile_kernel(KERNELS_DIR / SPEC.source, SPEC.instance(prob, full),
                              CompileOptions.for_kernel("90", SPEC.options(prob, full, FACTS)), persistent=True)
    res = compiled.resources
    assert res is not None and res.registers <= 128 and res.spill_store_bytes == 0 and res.spill_load_bytes == 0, res
    h = histogram(compiled.sass_text)
    assert h["FFMA"] >= 4 * full["U"] * full["MT"] * full["CW"], h
    assert h["LDG.128"] >= full["U"] * (full["CW"] + full["MT"]), h
    assert h["LDL"] == 0 and "ATOMG" not in compiled.sass_text and "RED" not in h
