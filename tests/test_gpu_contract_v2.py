"""Contract v2 on the GPU: cuBLAS in every precision and layout, and the v2 test kernels
(tests/v2plugins: layouts, launch plan with workspace and extra kernel, clusters, a real TMA
tensor map argument, bf16/fp16 inputs) verified against float64 and timed, each with
``baseline=cublas`` in the same precision and layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.run.pipeline import run_point

PLUGINS = str(Path(__file__).with_name("v2plugins"))
FAST = {"warmup": 2, "repeat": 3, "batch": 5}


def _run(tmp_path, name, **cfg):
    full = {"shape": [128, 96, 160], "timing": dict(FAST), "plugin_dirs": [PLUGINS], **cfg}
    rec = run_point(full, tmp_path / name)
    assert rec["status"] == "ok", rec["error"]
    assert rec["verification"]["passed"] and rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    return rec


def _cublas_available():
    from gemmlab.contract.registry import load_registry
    return load_registry().get("cublas").available()


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
@pytest.mark.parametrize("la, lb", [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col")])
@pytest.mark.parametrize("shape", [[128, 96, 160], [63, 65, 33]])
def test_cublas_every_precision_and_layout_verifies(tmp_path, precision, la, lb, shape):
    if _cublas_available():
        pytest.skip(_cublas_available())
    rec = _run(tmp_path, "p", kernel={"name": "cublas"}, precision=precision, layout={"a": la, "b": lb}, shape=shape)
    assert rec["precision_detail"]["name"] == precision and rec["layout"] == {"a": la, "b": lb}
    assert rec["timing"]["median_ms"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("la, lb", [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col")])
def test_nvrtc_fp32_kernel_with_layout_arguments(tmp_path, la, lb):
    base = {} if _cublas_available() else {"baseline": "cublas"}
    rec = _run(tmp_path, "p", kernel={"name": "v2_layout"}, layout={"a": la, "b": lb}, shape=[63, 65, 33], **base)
    assert rec["layout"] == {"a": la, "b": lb}
    if base:
        assert rec["baseline"]["verification"]["passed"]


@pytest.mark.gpu
def test_launch_plan_with_workspace_and_extra_kernel(tmp_path):
    rec = _run(tmp_path, "p", kernel={"name": "v2_plan"}, timing={**FAST, "mode": "both"})
    assert rec["workspace_bytes"] == 4 * 128 * 96 and len(rec["plan"]) == 3
    assert rec["repeat_stable"] is True  # every timed launch re-zeroed C: the result never doubles


@pytest.mark.gpu
def test_cluster_launch(tmp_path):
    rec = _run(tmp_path, "p", kernel={"name": "v2_cluster", "CX": 2})
    assert rec["launch"]["cluster"] == [2, 1, 1] and min(rec["occupancy_clusters"].values()) >= 1


@pytest.mark.gpu
@pytest.mark.parametrize("archa", [0, 1])
def test_tensor_map_argument_passed_by_value(tmp_path, archa):
    rec = _run(tmp_path, "p", kernel={"name": "v2_tma", **({"ARCHA": 1} if archa else {})})  # params are >= 1
    assert rec["tensor_maps"][0]["box"] == [16, 32]
    assert rec["compile"]["arch"] == ("sm_90a" if archa else "sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_half_precision_nvrtc_kernel(tmp_path, precision):
    base = {} if _cublas_available() else {"baseline": "cublas"}
    rec = _run(tmp_path, "p", kernel={"name": "v2_half"}, precision=precision, **base)
    if base:
        assert rec["baseline"]["precision_detail"]["a_dtype"] == rec["precision_detail"]["a_dtype"]
