"""kernel=auto's tf32 rules (gemmlab/dispatch/auto.py ``_tf32_rules``, issue 41 item 3): decode on
FP32 CUDA cores (gemv_rows / streamk / splitk_warptile for a row-major B, gemv_cols for a
column-major B, sized by its plugin), tiny and K-heavy shapes, and the tensor-core rule with a
wgmma_tf32 tile (or split K) chosen for the shape and mma_tf32 with 64x64 tiles below a wave of
128x128 tiles. Every candidate a rule names is one its kernel accepts or skips with a reason."""

from __future__ import annotations

import pytest

from gemmlab.contract.hookspecs import KernelSpec, Problem, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.dispatch import auto
from gemmlab.gpu.device import offline_facts

FULL = load_registry(entry_points=False)
TABLE = auto.Table(device={"sm_count": 132})
FACTS = offline_facts("90")
COL, ROW = ("row", "col"), ("row", "row")


def choose(shape, layout, registry=FULL):
    return auto.choose(Shape(*shape), registry, TABLE, "tf32", layout)


@pytest.mark.parametrize("shape", [(1, 1536, 2048), (7, 4096, 4095), (16, 11008, 4096), (32, 5000, 3000)],
                         ids=lambda s: "x".join(map(str, s)))
def test_decode_b_col_takes_gemv_cols_with_its_plugins_sizing(shape):
    c = choose(shape, COL)
    offered = FULL.get("gemv_cols").candidates(Problem(Shape(*shape), "tf32", *COL), FACTS)[0]
    assert c.kernel == "gemv_cols" and dict(c.params) == offered, c.reason
    assert c.reason.startswith("decode-like") and "K-contiguous float4 loads" in c.reason, c.reason


def test_decode_b_col_above_32_rows_takes_split_k_wgmma_with_tf32_k_tiles():
    c = choose((48, 4096, 4096), COL)
    assert c.kernel == "wgmma_tf32" and (c.params["BM"], c.params["BN"], c.params["SCHED"]) == (64, 128, 2)
    # 32 tiles of 64x128 on 132 SMs: at most 4 slices per tile; K = 4096 holds 128 k-tiles of 32 (16 slices
    # of 8; with bf16's 64-long k-tiles it would be 8): SPLIT_K = min(32, 4, 16) = 4
    assert c.params["SPLIT_K"] == 4
    from gemmlab_plugins.wgmma_picks import split
    assert split(Shape(48, 4096, 640), 132, k_tile=32)["SPLIT_K"] == 2  # 20 k-tiles of 32
    assert split(Shape(48, 4096, 640), 132)["SPLIT_K"] == 1  # 10 k-tiles of 64
    assert c.params["REDUCE"] == 2 and "split-K" in c.reason
    FULL.get("wgmma_tf32").check_problem(Problem(Shape(48, 4096, 4096), "tf32", *COL), c.params, FACTS)


@pytest.mark.parametrize("shape, kernel", [((1, 1536, 2048), "gemv_rows"), ((16, 11008, 4096), "streamk"),
                                           ((32, 5000, 3000), "splitk_warptile")], ids=["M1", "M16", "M32"])
def test_decode_b_row_takes_the_fp32_decode_kernels(shape, kernel):
    c = choose(shape, ROW)
    fp32 = auto.choose(Shape(*shape), FULL, TABLE, "fp32", ROW)
    assert c.kernel == kernel == fp32.kernel and dict(c.params) == dict(fp32.params), c.reason
    assert c.reason.startswith("decode-like") and "wgmma" not in c.reason, c.reason


def test_tiny_shapes_stay_on_cuda_cores():
    assert choose((64, 64, 64), ROW).kernel == "slicedk"
    assert choose((1, 1, 1), ROW).kernel == "small_tile"
    c = choose((64, 64, 64), COL)
    assert c.kernel == "gemv_cols" and c.reason.startswith("tiny"), c.reason


@pytest.mark.parametrize("layout", [ROW, COL], ids=["B row", "B col"])
def test_k_heavy_splits_k_on_wgmma(layout):
    c = choose((256, 256, 65536), layout)
    assert c.kernel == "wgmma_tf32" and c.params["SPLIT_K"] == 16 and c.reason.startswith("K-heavy"), c.reason
    assert ("B transposed first" in c.reason) == (layout == ROW)


def test_medium_and_large_b_col_wgmma_tile_for_the_shape():
    mid = choose((800, 4096, 4096), COL)
    assert mid.kernel == "wgmma_tf32" and (mid.params["BM"], mid.params["BN"]) == (128, 256)
    assert mid.params["TAIL"] == 1 and mid.params["SPLIT_K"] == 1  # the bf16-measured tail is not used for tf32
    few = choose((128, 4096, 4096), COL)  # 64 tiles of 64x128 on 132 SMs: split K in 2
    assert few.kernel == "wgmma_tf32" and few.params["SPLIT_K"] == 2 and few.params["SCHED"] == 2, few.reason
    wide = choose((65536, 64, 1024), COL)  # a 64-wide N: the 128x64 tile (as for bf16)
    assert wide.kernel == "wgmma_tf32" and (wide.params["BM"], wide.params["BN"]) == (128, 64), wide.reason


def test_b_row_below_a_wave_reads_b_as_stored_with_64x64_mma_tiles():
    c = choose((128, 4096, 4096), ROW)
    assert c.kernel == "mma_tf32" and (c.params["BM"], c.params["BN"], c.params["WM"], c.params["WN"]) == (64, 64, 32, 32)
    big = choose((4096, 4096, 4096), ROW)
    assert big.kernel == "wgmma_tf32" and (big.params["BM"], big.params["BN"]) == (128, 256)


SHAPES = [(1, 1536, 2048), (7, 4096, 4095), (48, 4096, 4096), (96, 3000, 4096), (128, 4096, 4096), (512, 512, 512),
          (800, 4096, 4096), (4096, 4096, 4096), (256, 256, 65536), (8, 8, 65536), (200, 300, 100), (1, 1, 1),
          (3, 5000, 3)]


@pytest.mark.parametrize("layout", [ROW, COL], ids=["B row", "B col"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_named_candidate_is_a_kernel_that_takes_tf32_and_its_parameters(shape, layout):
    """No rule names a kernel without tf32 (or the layout), an unknown parameter, or parameters its
    check refuses at a shape it is meant for (a skip must be the shape's alignment, not a typo)."""
    s = Shape(*shape)
    for rule in auto.rules(s, "tf32", layout, 132, FULL):
        for name, params, _ in rule.candidates:
            spec = FULL.get(name)
            assert "tf32" in spec.precisions, (rule.name, name)
            if tuple(layout) not in spec.layouts:
                continue  # e.g. the fp32 decode kernels under B column-major: never named there
            full, why = auto._try(FULL, name, params, s, "tf32", tuple(layout), FACTS)
            assert full is not None or "shape" in why or "blocks" in why, (rule.name, name, why)


def test_rules_name_only_kernels_of_the_layout():
    for shape in SHAPES:
        for layout in (ROW, COL):
            for rule in auto.rules(Shape(*shape), "tf32", layout, 132, FULL):
                for name, _, _ in rule.candidates:
                    assert tuple(layout) in FULL.get(name).layouts, (shape, layout, rule.name, name)


class _Silent(KernelSpec):
    """A stand-in gemv_cols that states (for decode) only parameters its check refuses."""

    def preferences(self, problem, device, regime):
        from gemmlab.contract.regimes import Preference
        return [Preference(0, {"MT": 3})] if regime == "decode" else []

    def check_problem(self, problem, params, device):
        from gemmlab.contract.hookspecs import ParamError
        if params["MT"] == 3:
            raise ParamError("kernel.MT", "MT=3 is not a power of two")


class _Registry:
    def __init__(self, kernels):
        self.kernels = kernels

    def get(self, name):
        return self.kernels[name]


def test_offered_parameters_come_from_the_plugin_and_a_refusal_is_a_named_skip():
    spec = FULL.get("gemv_cols")
    silent = _Silent(name="gemv_cols", source="gemv_cols.cu", defaults=dict(spec.defaults), precisions=("tf32",),
                     layouts=(("row", "col"),))
    kernels = {**FULL.kernels, "gemv_cols": silent}
    c = auto.choose(Shape(1, 1536, 2048), _Registry(kernels), TABLE, "tf32", COL)
    assert c.kernel == "wgmma_tf32", c.reason
    assert any(s.startswith("rule decode: gemv_cols MT=3") and "not a power of two" in s for s in c.skipped), c.skipped
    without = {k: v for k, v in FULL.kernels.items() if k != "gemv_cols"}
    c = auto.choose(Shape(1, 1536, 2048), _Registry(without), TABLE, "tf32", COL)
    assert c.kernel != "gemv_cols" and not any("gemv_cols" in s for s in c.skipped), c.skipped
