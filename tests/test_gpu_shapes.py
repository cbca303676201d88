"""GPU correctness of the issue-10 kernels (gemv_rows, small_tile, slicedk, streamk, splitk_warptile) and of kernel=auto on
edge shapes: odd M, N, K; N not a multiple of 4 (gemv_rows' scalar path); K not a multiple of the
chunk; M above MT; one element. Small-integer inputs, compared exactly: a dropped, doubled or
misplaced k term fails. Each point stops after verification and the safety nets (check_only)."""

from __future__ import annotations

import pytest

from gemmlab.run.pipeline import run_point

pytestmark = pytest.mark.gpu

SHAPES = [(1, 1, 1), (5, 37, 33), (16, 4097, 1000), (64, 130, 4099), (35, 79, 19), (129, 255, 1000), (3, 4096, 515),
          (68, 100, 1000), (20, 44, 84)]  # the last two: K and N multiples of 4 (float4 paths), not of the tiles
KERNELS = [("gemv_rows", {"MT": 1, "NT": 16, "KW": 8, "U": 8}), ("gemv_rows", {"MT": 16, "NT": 32, "KW": 8, "U": 4}),
           ("gemv_rows", {"MT": 8, "NT": 128, "KW": 4, "U": 8}),
           ("small_tile", {"BX": 16, "BY": 16, "KS": 4}), ("small_tile", {"BX": 32, "BY": 8, "KS": 1}),
           ("slicedk", {"BM": 16, "BN": 32, "BK": 16, "TM": 4, "TN": 4, "KS": 8}),
           ("slicedk", {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "KS": 2}),
           ("slicedk", {"BM": 16, "BN": 16, "BK": 7, "TM": 4, "TN": 4, "KS": 3})]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kernel, params", KERNELS, ids=lambda v: str(v))
def test_exact_on_edge_shapes(tmp_path, kernel, params, shape):
    rec = run_point({"kernel": {"name": kernel, **params}, "shape": list(shape),
                     "inputs": {"distribution": "integers"}}, tmp_path / "p", check_only=True)
    assert rec["status"] == "checked", rec["error"]
    assert rec["verification"]["passed"] and rec["guard_bands"] == "intact"


WARP = {"BK": 8, "WM": 32, "WN": 64, "TM": 8, "TN": 8}
STREAMK = [("streamk", {}), ("streamk", {"BM": 64, "BN": 128, **WARP, "MINB": 4, "WPS": 4}),
           ("streamk", {"BM": 16, "BN": 128, "BK": 16, "WM": 16, "WN": 64, "TM": 4, "TN": 8, "MINB": 4, "WPS": 4}),
           ("splitk_warptile", {"SPLITS": 3}), ("splitk_warptile", {"BM": 64, "BN": 128, **WARP, "MINB": 4, "SPLITS": 7})]
# on 132 SMs: 3000x3000x33 is the hybrid (576 tiles of 128x128: 312 stream-K over 264 workers, 264
# data-parallel); 256x256x4096 all stream-K (4 tiles, 264 workers); 2048^2 x 40 data-parallel only
STREAMK_SHAPES = SHAPES + [(3000, 3000, 33), (256, 256, 4096), (2048, 2048, 40), (1000, 3000, 777)]


@pytest.mark.parametrize("shape", STREAMK_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kernel, params", STREAMK, ids=lambda v: str(v))
def test_streamk_splitk_exact(tmp_path, kernel, params, shape):
    """Every schedule (stream-K only, hybrid, data-parallel only) and split count, exactly."""
    test_exact_on_edge_shapes(tmp_path, kernel, params, shape)


@pytest.mark.parametrize("shape", [(1, 4096, 4096), (64, 4096, 4096), (256, 256, 4096), (35, 79, 19)],
                         ids=lambda s: "x".join(map(str, s)))
def test_auto_runs_and_records_its_choice(tmp_path, shape):
    rec = run_point({"kernel": {"name": "auto"}, "shape": list(shape), "inputs": {"distribution": "integers"}},
                    tmp_path / "p", check_only=True)
    assert rec["status"] == "checked", rec["error"]
    assert rec["dispatch"]["chosen"] == rec["kernel"]["name"] != "auto"


# decode_bf16 (BF16 tensor cores, B streamed into registers): partial-tile shapes it accepts
# (K % 8 == 0; N % 8 == 0 for a row-major B: partial M, N and K tiles, K shorter than a chunk),
# both layouts of B, one split (plain stores) and several (a cluster adding over DSMEM in rank order); then the
# suite's decode shapes with the rules' parameters (the 16-, 32- and 64-row blocks); small
# integers, exact
DECODE16_EDGES = [(16, 16, 16), (1, 8, 8), (3, 72, 40), (17, 136, 1000), (33, 200, 8), (65, 64, 96)]
DECODE16 = [{}, {"MT": 4, "KW": 2, "U": 1, "SPLITS": 7}, {"MT": 2, "KW": 8, "U": 2, "SPLITS": 1}]


@pytest.mark.parametrize("layout_b", ["row", "col"])
@pytest.mark.parametrize("shape", DECODE16_EDGES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("params", DECODE16, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()) or "defaults")
def test_decode_bf16_exact(tmp_path, params, shape, layout_b):
    _decode_exact(tmp_path, "decode_bf16", "bf16", params, shape, layout_b)


def _decode_exact(tmp_path, kernel: str, precision: str, params, shape, layout_b: str) -> None:
    """One decode kernel point on small integers, checked exactly (check_only), guard bands intact."""
    rec = run_point({"kernel": {"name": kernel, **params}, "shape": list(shape), "precision": precision,
                     "layout": {"a": "row", "b": layout_b}, "inputs": {"distribution": "integers"}},
                    tmp_path / "p", check_only=True)
    assert rec["status"] == "checked", rec["error"]
    assert rec["verification"]["passed"] and rec["guard_bands"] == "intact"


@pytest.mark.parametrize("layout_b", ["row", "col"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (16, 11008, 4096), (32, 4096, 4096), (64, 4096, 14336)],
                         ids=lambda s: "x".join(map(str, s)))
def test_decode_bf16_suite_shapes_with_rule_params(tmp_path, shape, layout_b):
    from gemmlab.contract.hookspecs import Problem, Shape
    from gemmlab.contract.registry import load_registry
    from gemmlab.gpu.device import offline_facts
    plugin = load_registry(entry_points=False).kernels["decode_bf16"]
    params = plugin.sized(Problem(Shape(*shape), "bf16", "row", layout_b), offline_facts("90"))
    test_decode_bf16_exact(tmp_path, params, shape, layout_b)


def test_decode_bf16_column_major_any_n(tmp_path):
    test_decode_bf16_exact(tmp_path, {"SPLITS": 3}, (35, 79, 24), "col")


# decode_tf32 (decode_bf16's loop on float32 storage, TF32 mma m16n8k8): the same edges (small integers
# are exact in TF32 and their sums in float32), 16- and 32-row blocks, one and several splits, U 1 and 2
DECODE_TF32 = [{}, {"MT": 2, "KW": 2, "U": 2, "SPLITS": 7}, {"MT": 2, "KW": 8, "U": 1, "SPLITS": 1},
               {"MT": 1, "KW": 16, "U": 2, "SPLITS": 8}]


@pytest.mark.parametrize("layout_b", ["row", "col"])
@pytest.mark.parametrize("shape", DECODE16_EDGES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("params", DECODE_TF32, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()) or "defaults")
def test_decode_tf32_exact(tmp_path, params, shape, layout_b):
    _decode_exact(tmp_path, "decode_tf32", "tf32", params, shape, layout_b)


@pytest.mark.parametrize("layout_b", ["row", "col"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (16, 3072, 4096), (32, 4096, 14336)], ids=lambda s: "x".join(map(str, s)))
def test_decode_tf32_normal_inputs_within_the_tf32_bound(tmp_path, shape, layout_b):
    """Normal inputs at decode shapes with the plugin's sized parameters: within the TF32 bound (a
    missing cvt.rna, a dropped step or a wrong k pairing exceeds it), verified again after timing."""
    from gemmlab.contract.hookspecs import Problem, Shape
    from gemmlab.contract.registry import load_registry
    from gemmlab.gpu.device import offline_facts
    plugin = load_registry(entry_points=False).kernels["decode_tf32"]
    params = plugin.sized(Problem(Shape(*shape), "tf32", "row", layout_b), offline_facts("90"))
    rec = run_point({"kernel": {"name": "decode_tf32", **params}, "shape": list(shape), "precision": "tf32",
                     "layout": {"a": "row", "b": layout_b}, "timing": {"warmup": 1, "repeat": 3, "batch": 2}},
                    tmp_path / "p")
    assert rec["status"] == "ok", rec["error"]
    assert rec["verification"]["passed"] and rec["verification_after_timing"]["passed"]


# the decode kernels' reductions (KW warps through shared memory, SPLITS blocks of a cluster through
# DSMEM in rank order) under compute-sanitizer: racecheck and memcheck clean at small shapes
@pytest.mark.parametrize("tool", ["racecheck", "memcheck"])
@pytest.mark.parametrize("kernel, precision, params, shape, layout_b", [
    ("decode_bf16", "bf16", {"MT": 2, "KW": 4, "U": 1, "SPLITS": 3}, (17, 136, 1000), "col"),
    ("decode_bf16", "bf16", {"MT": 1, "KW": 8, "U": 2, "SPLITS": 2}, (3, 72, 520), "row"),
    ("decode_tf32", "tf32", {"MT": 2, "KW": 4, "U": 1, "SPLITS": 3}, (17, 136, 1000), "col"),
    ("decode_tf32", "tf32", {"MT": 1, "KW": 8, "U": 2, "SPLITS": 2}, (3, 72, 520), "row")],
    ids=lambda v: v if isinstance(v, str) else None)
def test_decode_sanitizer_clean(tmp_path, tool, kernel, precision, params, shape, layout_b):
    rec = run_point({"kernel": {"name": kernel, **params}, "shape": list(shape), "precision": precision,
                     "layout": {"a": "row", "b": layout_b}, "sanitizer": tool,
                     "timing": {"warmup": 1, "repeat": 3, "mode": "events"}}, tmp_path / "p")
    assert rec["status"] == "ok", rec["error"]
    assert rec["verification"]["passed"]
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
