"""GPU correctness of ``gemv_cols`` (issue 41; B column-major decode on FP32 CUDA cores), fp32 and
tf32: the brief's decode shapes with the plugin's sized parameters against the float64 reference
(normal inputs, the bound rule; tf32 declares no input rounding), odd edge shapes exactly on
small integers (float4 and scalar paths, partial row and column blocks, K shorter than a step),
and repeated CUDA-graph launches re-verified after timing. Skipped without a GPU."""

from __future__ import annotations

import pytest

from gemmlab.contract.hookspecs import Problem, Shape
from gemmlab.gpu.device import offline_facts
from gemmlab.run.pipeline import run_point

pytestmark = pytest.mark.gpu

DECODE = [(1, 1536, 2048), (7, 4096, 4095), (16, 11008, 4096), (32, 5000, 3000)]
EDGES = [(1, 1, 1), (3, 37, 41), (5, 130, 1000), (17, 33, 300), (32, 9, 129), (2, 4097, 515)]
VARIANTS = [{}, {"MT": 8, "CW": 4, "WN": 2, "KW": 4, "U": 2}, {"MT": 16, "CW": 4, "WN": 8, "KW": 1, "U": 1},
            {"MT": 2, "CW": 8, "WN": 1, "KW": 16, "U": 2}, {"MT": 32, "CW": 1, "WN": 4, "KW": 2, "U": 1}]


def sized(shape, precision):
    from gemmlab.contract.registry import load_registry
    spec = load_registry(entry_points=False).get("gemv_cols")
    return spec.candidates(Problem(Shape(*shape), precision, "row", "col"), offline_facts("90"))[0]


def point(shape, precision, params, **extra):
    return {"kernel": {"name": "gemv_cols", **params}, "shape": list(shape), "precision": precision,
            "layout": {"a": "row", "b": "col"}, **extra}


@pytest.mark.parametrize("precision", ["fp32", "tf32"])
@pytest.mark.parametrize("shape", DECODE, ids=lambda s: "x".join(map(str, s)))
def test_decode_shapes_vs_float64(tmp_path, shape, precision):
    rec = run_point(point(shape, precision, sized(shape, precision)), tmp_path / "p", check_only=True)
    assert rec["status"] == "checked", rec["error"]
    v = rec["verification"]
    assert v["passed"] and v["rule"] == "bound" and rec["guard_bands"] == "intact"
    if precision == "tf32":
        assert v["tf32"]["declared"] == v["tf32"]["rounding"] == "none"


@pytest.mark.parametrize("params", VARIANTS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()) or "defaults")
@pytest.mark.parametrize("shape", EDGES, ids=lambda s: "x".join(map(str, s)))
def test_edges_exact(tmp_path, shape, params):
    rec = run_point(point(shape, "fp32", params, inputs={"distribution": "integers"}), tmp_path / "p", check_only=True)
    assert rec["status"] == "checked", rec["error"]
    assert rec["verification"]["passed"] and rec["verification"]["rule"] == "exact" and rec["guard_bands"] == "intact"


@pytest.mark.parametrize("shape", [(1, 1536, 2048), (16, 11008, 4096)], ids=lambda s: "x".join(map(str, s)))
def test_repeated_graph_launches_verify_after_timing(tmp_path, shape):
    """Timed in CUDA graphs (many replays), then verified again: the same output every time."""
    rec = run_point(point(shape, "tf32", sized(shape, "tf32"), timing={"mode": "graph"}, baseline="cublas"),
                    tmp_path / "p")
    assert rec["status"] == "ok", rec["error"]
    assert rec["verification"]["passed"] and rec["verification_after_timing"]["passed"]
    assert rec["repeat_stable"] is True and rec["inputs_unchanged"] is True and rec["guard_bands"] == "intact"
