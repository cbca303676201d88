"""GPU tests of the ``wgmma_fp8`` kernel (issue 42, item 4; marker ``gpu``, an sm_90 GPU): points
through gemmlab's own pipeline verified against the float64 reference of the dequantised inputs
under the fp8 bound for the declared accumulation (promotion every 128 of K), with guard bands,
unchanged inputs and repeat stability. The partial-tile suite (odd M and N, K not a multiple of
128: the last k-group zero-padded by TMA) in each scaling mode (tensor, row, block) x C type
(float32, bf16); the BM = 64 form at small M (M = 1 ... 128) in each scaling mode; E5M2 operands;
the other parameters (OVERLAP=0, BN 64/96/160/192/256, BM=256, GROUP_M); K = 16384 inside the promoted bound, where the same kernel built without promotion
(tests/plugins_fp8_mutant) fails it; and 4096^3 graph-timed against ``baseline=cublas``
(cuBLASLt FP8 in the same process), whose ratio the test prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.run.pipeline import run_point

pytestmark = pytest.mark.gpu

FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events"}


MUTANT = str(Path(__file__).parent / "plugins_fp8_mutant")


def _run(tmp_path, shape, params=None, check_only=True, timing=None, baseline=None, kernel="wgmma_fp8", **fp8):
    cfg = {"kernel": {"name": kernel, **(params or {})}, "shape": list(shape), "precision": "fp8", "fp8": fp8,
           "layout": {"a": "row", "b": "col"}, "timing": timing or dict(FAST), "plugin_dirs": [MUTANT]}
    if baseline:
        cfg["baseline"] = baseline
    return run_point(cfg, tmp_path / "run", check_only=check_only)


def _verified(rec):
    """The point passed: verified under the fp8 bound with promotion every 128 declared, no NaN
    output, guard bands intact, inputs unchanged; returns the record."""
    assert rec["status"] in ("checked", "ok"), rec.get("error")
    v = rec["verification"]
    assert v["passed"] and v["nan_outputs"] == 0 and v["rule"] == "bound", v
    assert v["fp8"]["accumulation_declared"] == 128
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    assert rec["sass_check"]["verdict"] == "present", rec["sass_check"]
    return rec


#: odd M and N (partial tiles on both edges), K a multiple of 16 but not of 128 (the last k-group
#: partial: TMA zero-fills it), one tile smaller than a box in every dimension, more tiles than SMs
PARTIAL = [(129, 257, 208), (1, 1, 16), (255, 130, 4112), (300, 520, 1040), (1537, 1153, 400)]


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
@pytest.mark.parametrize("out", ["float32", "bf16"])
@pytest.mark.parametrize("shape", PARTIAL, ids=lambda s: "x".join(map(str, s)))
def test_partial_tiles_every_scaling(tmp_path, scaling, out, shape):
    rec = _verified(_run(tmp_path, shape, scaling=scaling, out=out))
    assert rec["precision_detail"]["scaling"] == scaling


#: BM = 64 (the two consumers split the columns; issue 42 item 4, small M): each BN it takes, OVERLAP 0 and 1
SMALL_M_PARAMS = [{"BM": 64, "BN": 128}, {"BM": 64, "BN": 192, "OVERLAP": 0}, {"BM": 64, "BN": 256, "STAGES": 5}]
#: small M at odd N (a partial column tile; at N = 100 with BN = 256 a tile whose second consumer
#: owns no column: it reads no B scale past the last block and stores nothing), K not a multiple of
#: 128; and one of DeepGEMM's shapes
SMALL_M = [(1, 257, 208), (16, 200, 1040), (16, 100, 1040), (64, 1153, 400), (63, 130, 4112), (65, 520, 656),
           (128, 2112, 7168)]  # N = 100 with BN = 256: the second consumer's columns all lie past N


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
@pytest.mark.parametrize("params", SMALL_M_PARAMS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
@pytest.mark.parametrize("shape", SMALL_M, ids=lambda s: "x".join(map(str, s)))
def test_bm64_partial_tiles_at_small_m(tmp_path, scaling, params, shape):
    """The BM = 64 form (both consumer warpgroups on the tile's 64 rows, BN/2 columns each) on the
    partial-tile suite at small M, every scaling mode, bf16 C (float32 C at M = 63)."""
    rec = _verified(_run(tmp_path, shape, params, scaling=scaling, out="float32" if shape[0] == 63 else "bf16"))
    assert rec["precision_detail"]["scaling"] == scaling


@pytest.mark.parametrize("formats", [("e5m2", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e5m2")], ids=str)
@pytest.mark.parametrize("scaling", ["tensor", "block"])
def test_e5m2_operands(tmp_path, formats, scaling):
    _verified(_run(tmp_path, (200, 300, 656), scaling=scaling, out="bf16", a=formats[0], b=formats[1]))


@pytest.mark.parametrize("params", [{"OVERLAP": 0}, {"BN": 64}, {"BN": 96}, {"BN": 160, "OVERLAP": 0, "STAGES": 5},
                                    {"BN": 192, "OVERLAP": 0, "STAGES": 5}, {"BM": 256, "BN": 64, "STAGES": 4},
                                    {"BM": 256, "BN": 96, "OVERLAP": 0, "STAGES": 4}, {"GROUP_M": 3, "STAGES": 2}],
                         ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
@pytest.mark.parametrize("scaling", ["row", "block"])
def test_other_parameters(tmp_path, params, scaling):
    _verified(_run(tmp_path, (333, 700, 1296), params, scaling=scaling, out="float32"))


@pytest.mark.parametrize("scaling", ["tensor", "block"])
def test_large_k_inside_the_promoted_bound(tmp_path, scaling):
    """K = 16384: the bound for promotion every 128 (which a non-promoting accumulator fails from
    K of about 4096, tests/test_fp8.py) holds: the model (plugin_utils.fp8_mma_step) predicts
    0.065 (tensor) of the bound at this shape."""
    rec = _verified(_run(tmp_path, (256, 384, 16384), scaling=scaling, out="float32"))
    assert rec["verification"]["max_error_over_tolerance"] < 1


@pytest.mark.parametrize("scaling", ["tensor", "row"])
def test_the_non_promoting_mutant_is_caught_at_large_k(tmp_path, scaling):
    """The same kernel built with -D WGMMA_FP8_NO_PROMOTION=1 (tests/plugins_fp8_mutant: all of K in
    the tensor core's accumulator, promotion every 128 still declared) fails the bound at K = 16384,
    where the shipped kernel passes (test_large_k_inside_the_promoted_bound). The model predicts
    4.2 (tensor) and 4.6 (row) times the bound."""
    rec = _run(tmp_path, (256, 384, 16384), kernel="wgmma_fp8_no_promotion", scaling=scaling, out="float32")
    assert rec["status"] == "wrong_result", rec.get("error")
    assert rec["verification"]["max_error_over_tolerance"] > 1 and rec["verification"]["nan_outputs"] == 0


@pytest.mark.parametrize("scaling", ["tensor", "block"])
def test_4096_graph_timed_against_cublaslt(tmp_path, scaling):
    """4096^3, bf16 C, graph timing, cuBLASLt FP8 measured alternately in the same run (the issue's
    target: >= 100% of it per-tensor). Prints TFLOP/s and the ratio; asserts correctness only."""
    rec = _run(tmp_path, (4096, 4096, 4096), check_only=False, baseline="cublas", scaling=scaling, out="bf16",
               timing={"mode": "graph", "warmup": 5, "repeat": 20, "batch": 10})
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["passed"] and rec["verification_after_timing"]["passed"]
    assert rec["baseline"]["verification"]["passed"]
    ratio = rec["ratio_to_baseline"]
    tflops = 2 * 4096**3 / (rec["timing"]["median_ms"] * 1e-3) / 1e12
    print(f"wgmma_fp8 {scaling} 4096^3: {tflops:.0f} TFLOP/s, {ratio['gflops']:.3f}x cuBLASLt ({ratio['protocol']})")
    assert ratio["gflops"] > 0
