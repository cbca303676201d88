"""GPU correctness of ``splitk_dot`` (issue 41, item 3: tiny outputs with a huge K): every precision
and B layout at the issue's shape 2x2x100000 and at odd ones (one element, K not a multiple of the
16-byte vector, partial output tiles, N > 8 so a row-major B takes the element path), with the
parameters the plugin offers first and with others (several tiles, uneven and empty K ranges, U = 1 and
4, 64 threads). Each point is verified against the float64 reference of its inputs, NaN-free, bitwise
repeatable (the fixed-order final sum), guard bands intact (tickets and partials stay inside the
workspace); the graph-timed points are verified again after the graph was replayed on fresh inputs
(the ticket reset and the plan's Memset). Small-integer inputs where the sums stay exact in float32,
the default distribution (bound rule) for the long ones."""

from __future__ import annotations

import pytest

from gemmlab.contract.hookspecs import Problem, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.gpu.device import offline_facts
from gemmlab.run.pipeline import run_point
from tcpoint import FAST, ok

pytestmark = pytest.mark.gpu

SPEC = load_registry(entry_points=False).get("splitk_dot")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
SHAPES = [(2, 2, 100000), (1, 1, 65536), (3, 5, 100001), (16, 16, 50000), (1, 1, 1), (7, 3, 999), (2, 9, 4099),
          (1, 64, 20000)]


def offered(shape, precision, layout_b) -> dict:
    """The plugin's first candidate for the problem on the H100/H200 class (132 SMs)."""
    return SPEC.candidates(Problem(Shape(*shape), precision, "row", layout_b), offline_facts("90"))[0]


def run(tmp_path, shape, precision, layout_b, params, **over):
    cfg = {"kernel": {"name": "splitk_dot", **params}, "shape": list(shape), "precision": precision,
           "layout": {"a": "row", "b": layout_b}, "timing": dict(FAST), **over}
    return run_point(cfg, tmp_path / "run")


@pytest.mark.parametrize("layout_b", ["row", "col"])
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_offered_parameters_verify(tmp_path, shape, precision, layout_b):
    rec = ok(run(tmp_path, shape, precision, layout_b, offered(shape, precision, layout_b)))
    assert rec["verification_after_timing"]["passed"]
    assert rec["sass_check"]["verdict"] == "present"


OTHERS = [dict(OM=1, ON=1, THREADS=64, U=4, SPLITS=1000),   # 4 tiles x 1000 ranges, most of them short
          dict(OM=2, ON=3, THREADS=128, U=1, SPLITS=7),       # partial tiles, uneven ranges
          dict(OM=4, ON=8, THREADS=256, U=1, SPLITS=264),     # the largest tile
          dict(OM=2, ON=2, THREADS=256, U=2, SPLITS=4096)]    # more ranges than vectors at small K: empty ranges


@pytest.mark.parametrize("layout_b", ["row", "col"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("params", OTHERS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
@pytest.mark.parametrize("shape", [(2, 2, 100000), (5, 7, 1001), (3, 3, 8)], ids=lambda s: "x".join(map(str, s)))
def test_other_parameters_verify(tmp_path, shape, params, precision, layout_b):
    ok(run(tmp_path, shape, precision, layout_b, params, inputs={"distribution": "integers"}))


@pytest.mark.parametrize("precision, layout_b", [("fp32", "row"), ("tf32", "col"), ("bf16", "col"), ("fp16", "row")])
def test_graph_replays_stay_right(tmp_path, precision, layout_b):
    """Graph timing (one graph of a batch of launches, replayed many times): every launch's last
    block finds its ticket; the replay on fresh inputs after timing verifies."""
    shape = (2, 2, 100000)
    rec = ok(run(tmp_path, shape, precision, layout_b, offered(shape, precision, layout_b),
                 timing={"warmup": 3, "repeat": 20, "batch": 10, "mode": "graph"}))
    after = rec["verification_after_timing"]
    assert after["passed"] and after["path"].startswith("the graph")


@pytest.mark.parametrize("precision, layout_b", [("fp32", "row"), ("tf32", "row"), ("tf32", "col"), ("bf16", "col"),
                                                 ("fp16", "col")])
def test_auto_picks_it_for_a_tiny_output_with_huge_k(tmp_path, precision, layout_b):
    rec = run_point({"kernel": {"name": "auto"}, "shape": [2, 2, 100000], "precision": precision,
                     "layout": {"a": "row", "b": layout_b}, "inputs": {"distribution": "integers"}},
                    tmp_path / "p", check_only=True)
    assert rec["status"] == "checked", rec["error"]
    assert rec["dispatch"]["chosen"] == "splitk_dot" == rec["kernel"]["name"]
