"""``experiment=fp8`` (issue 42, item 5): DeepGEMM's normal-GEMM shapes plus 4096³ and 8192³ per
scaling mode, wgmma_fp8 against cuBLASLt FP8, and the published DeepGEMM figures the results page
joins (docs/results/fp8/deepgemm-normal.csv). CPU only: composition and the data file."""

from __future__ import annotations

import csv
from pathlib import Path

import hydra
import pytest

import gemmlab.cli.app
import gemmlab.paths
from gemmlab.contract.hookspecs import Problem, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.gpu.device import offline_facts

DEEPGEMM_CSV = Path(__file__).resolve().parent.parent / "docs" / "results" / "fp8" / "deepgemm-normal.csv"
#: dense FP8 peak of an H100/H800 SXM: 132 SMs x 8192 FLOP/clk x 1.98 GHz (the H100 whitepaper's per-SM rate at
#: the clock the H100 reports under load)
FP8_PEAK_TFLOPS = 132 * 8192 * 1.98e9 / 1e12


@pytest.fixture(scope="module")
def fp8_cfg():
    gemmlab.cli.app.register_resolvers()
    with hydra.initialize_config_dir(config_dir=str(gemmlab.paths.CONF_DIR), version_base="1.3"):
        return hydra.compose("config", overrides=["experiment=fp8"], return_hydra_config=True)


def _swept_shapes(cfg) -> list[tuple[int, int, int]]:
    return [tuple(int(x) for x in s.strip("[]").split(",")) for s in cfg.hydra.sweeper.params.shape.split("],[")]


def _deepgemm_rows() -> list[dict]:
    with open(DEEPGEMM_CSV, newline="") as f:
        return list(csv.DictReader(f))


def test_fp8_experiment_measures_wgmma_fp8_against_cublaslt_as_deepgemm_reports(fp8_cfg):
    cfg = fp8_cfg
    assert cfg.kernel.name == "wgmma_fp8" and cfg.baseline == "cublas" and cfg.precision == "fp8"
    assert (cfg.layout.a, cfg.layout.b) == ("row", "col")  # DeepGEMM's NT: both operands K-major
    assert (cfg.fp8.a, cfg.fp8.b, cfg.fp8.out) == ("e4m3", "e4m3", "bf16")
    assert cfg.timing.mode == "graph"
    assert cfg.hydra.sweeper.params["fp8.scaling"].split(",") == ["tensor", "row", "block"]


def test_fp8_experiment_sweeps_deepgemms_table_and_the_two_squares(fp8_cfg):
    table = [(int(r["M"]), int(r["N"]), int(r["K"])) for r in _deepgemm_rows()]
    assert len(table) == 18 and len(set(table)) == 18  # M = 64, 128, 4096 x six (N, K) pairs
    assert {m for m, _, _ in table} == {64, 128, 4096}
    assert _swept_shapes(fp8_cfg) == table + [(4096, 4096, 4096), (8192, 8192, 8192)]


def test_deepgemm_figures_are_below_the_fp8_peak_and_the_last_published_not_below_the_first():
    for r in _deepgemm_rows():
        last, first = float(r["deepgemm_tflops"]), float(r["deepgemm_tflops_first"])
        assert 0 < first <= last < FP8_PEAK_TFLOPS, r
        # the bytes DeepGEMM counts (A, B, C bf16) over its time reproduce its GB/s column within rounding
        M, N, K = int(r["M"]), int(r["N"]), int(r["K"])
        seconds = 2 * M * N * K / (last * 1e12)
        assert (M * K + N * K + 2 * M * N) / seconds / 1e9 == pytest.approx(float(r["deepgemm_gbps"]), rel=0.02), r


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_every_fp8_point_is_accepted_by_wgmma_fp8(fp8_cfg, scaling):
    kernel = load_registry(entry_points=False).get("wgmma_fp8")
    for M, N, K in _swept_shapes(fp8_cfg):
        kernel.check_problem(Problem(Shape(M, N, K), "fp8", "row", "col", "e4m3", "e4m3", scaling, "bf16"),
                             dict(kernel.defaults), offline_facts("90"))
