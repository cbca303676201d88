"""GPU tests of precision=fp8 through the cuBLASLt baseline (issue 42, item 2; marker ``gpu``, an
sm_90 GPU and nvmath-python): ``kernel=cublas precision=fp8`` with A row-major and B column-major
(cuBLASLt's FP8 "TN" form) verified against the float64 reference of the dequantised inputs under
the fp8 bound (cuBLASLt declares no accumulation: no promotion assumed) in each scaling mode
cuBLASLt has on sm_90 (tensor, row = outer vector, block = VEC128 x BLK128x128), with float32 and
bf16 C, E4M3 and E5M2, at 256x512x1024 and 4096^3, and one point graph-timed end to end through
``run_point`` (after-timing verification with fresh inputs and scales, plausibility gate)."""

from __future__ import annotations

import pytest

from gemmlab.run.pipeline import run_point

pytestmark = pytest.mark.gpu

FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events"}


def _run(tmp_path, shape, check_only=True, timing=None, **fp8):
    cfg = {"kernel": {"name": "cublas"}, "shape": list(shape), "precision": "fp8", "fp8": fp8,
           "layout": {"a": "row", "b": "col"}, "timing": timing or dict(FAST)}
    return run_point(cfg, tmp_path / "run", check_only=check_only)


def _checked(rec):
    assert rec["status"] in ("checked", "ok"), rec.get("error")
    v = rec["verification"]
    assert v["passed"] and v["nan_outputs"] == 0 and v["rule"] == "bound"
    assert v["fp8"]["accumulation_declared"] is None  # cuBLASLt says nothing: no promotion assumed
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    return rec


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
@pytest.mark.parametrize("out", ["float32", "bf16"])
@pytest.mark.parametrize("formats", [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e4m3", "e5m2")], ids=str)
def test_cublaslt_fp8_small(tmp_path, scaling, out, formats):
    rec = _checked(_run(tmp_path, (256, 512, 1024), scaling=scaling, out=out, a=formats[0], b=formats[1]))
    assert rec["precision_detail"]["scaling"] == scaling
    assert rec["inputs"]["quantisation"]["A"]["rms_relative_error"] > 0


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_cublaslt_fp8_4096(tmp_path, scaling):
    rec = _checked(_run(tmp_path, (4096, 4096, 4096), scaling=scaling, out="bf16"))
    assert rec["verification"]["max_error_over_tolerance"] < 1


def test_cublaslt_fp8_large_k_within_the_bound(tmp_path):
    """K = 16384: cuBLASLt (fast accumulation off) stays inside the no-promotion bound."""
    _checked(_run(tmp_path, (256, 256, 16384), scaling="tensor", out="float32"))


@pytest.mark.parametrize("scaling", ["tensor", "block"])
def test_cublaslt_fp8_graph_timed_end_to_end(tmp_path, scaling):
    rec = _run(tmp_path, (4096, 4096, 4096), check_only=False,
               timing={"mode": "graph", "warmup": 3, "repeat": 10, "batch": 5}, scaling=scaling, out="bf16")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification_after_timing"]["passed"]
    assert rec["plausibility"]["passed"] and rec["roofline"]["units"].startswith("FP8")
    assert rec["timing"]["protocol"] == "graph" and rec["timing"]["median_ms"] > 0
