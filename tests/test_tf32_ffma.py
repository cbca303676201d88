"""FP32 CUDA-core kernels serving ``precision=tf32`` (issue 41, item 3): TF32 is allowed, not
required, so ``gemv_rows``, ``streamk``, ``splitk_warptile``, ``slicedk``, ``splitk`` and
``small_tile`` declare ``precisions=("fp32", "tf32")`` with ``tf32_rounding="none"``. On the fake
GPU (tests/fakegpu.py; real NVRTC compiles, the launch plan's steps emulated in numpy as the
kernels split the work) a tf32 point of each runs, verifies against the reference that rounds no
input, and its record says so; the core keys nothing else on the precision (float32 storage,
the TF32 peak in the roofline, FFMA in the SASS check). A kernel that did round its inputs to TF32
while declaring ``none`` fails: the verification has teeth."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.contract.registry import load_registry
from gemmlab.run.pipeline import exit_status, run_point
from gemmlab.stages.verify import round_tf32

REGISTRY = load_registry(entry_points=False)
FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events", "floor": False}
FFMA_TF32 = ("gemv_rows", "streamk", "splitk_warptile", "slicedk", "splitk", "small_tile")


def _mat(gpu, address, rows, cols):
    return gpu.floats(int(address), rows * cols).reshape(rows, cols)


def _slabs_kernel(k_ranges, bk: int, splits: int):
    """The partial launch of a split-K plan: slab z = A[:, K range z] @ B[K range z, :] (float32)."""
    def run(gpu, args):
        a, b, ws, m, n, k = (int(x) for x in args)
        A, B = _mat(gpu, a, m, k).astype(np.float64), _mat(gpu, b, k, n).astype(np.float64)
        slabs = _mat(gpu, ws, splits * m, n).reshape(splits, m, n)
        for z, (lo, hi) in enumerate(k_ranges(k, bk, splits)):
            slabs[z] = (A[:, lo:hi] @ B[lo:hi]).astype(np.float32)
    return run


def _reduce(gpu, args):
    """The reduction launch: C = the slabs summed in split order, in float32."""
    ws, c, m, n, splits = (int(x) for x in args)
    slabs = _mat(gpu, ws, splits * m, n).reshape(splits, m, n)
    acc = np.zeros((m, n), np.float32)
    for z in range(splits):
        acc += slabs[z]
    _mat(gpu, c, m, n)[:] = acc


def _streamk(gpu, args):
    """gemm_streamk emulated as a whole product into C (the fixup then adds nothing: at these
    shapes every tile is data-parallel or, if stream-K, its emulated partials are already in C)."""
    a, b, c, _ws, m, n, k = (int(x) for x in args[:7])
    _mat(gpu, c, m, n)[:] = (_mat(gpu, a, m, k).astype(np.float64) @ _mat(gpu, b, k, n)).astype(np.float32)


def behaviour(name: str, params) -> dict:
    """Fake-GPU host functions for ``name``'s launch plan (the single-launch kernels take the fake
    GPU's default float32 GEMM on their ``(A, B, C, M, N, K)`` arguments)."""
    if name == "splitk":
        import gemmlab_plugins.splitk as mod
        return {"gemm_splitk_partial": _slabs_kernel(mod.k_ranges, params["BK"], params["SPLITS"]),
                "gemm_splitk_reduce": _reduce}
    if name == "splitk_warptile":
        import gemmlab_plugins.streamk as mod
        return {"gemm_splitk_warptile": _slabs_kernel(mod.k_ranges, params["BK"], params["SPLITS"]),
                "gemm_warptile_reduce": _reduce}
    if name == "streamk":
        return {"gemm_streamk_fixup": lambda gpu, args: None, "gemm_streamk": _streamk}
    return {}


def run(tmp_path, monkeypatch, name, shape, gpu=None, **params):
    spec = REGISTRY.get(name)
    full = {**dict(spec.defaults), **params}
    gpu = gpu or HostGpu(behaviour=behaviour(name, full))
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    cfg = {"kernel": {"name": name, **params}, "shape": list(shape), "precision": "tf32", "mode": "run",
           "timing": dict(FAST)}
    out = tmp_path / name
    rec = run_point(cfg, out)
    assert json.loads((out / "result.json").read_text())["status"] == rec["status"]
    assert not (out / "traceback.txt").exists(), (out / "traceback.txt").read_text()
    return rec, gpu


@pytest.mark.parametrize("name", FFMA_TF32)
def test_declares_fp32_and_tf32_without_rounding(name):
    spec = REGISTRY.get(name)
    assert spec.precisions == ("fp32", "tf32") and spec.tf32_rounding == "none" and spec.sass_classes == ("FFMA",)
    import importlib
    doc = importlib.import_module(type(spec).__module__).__doc__
    assert 'tf32_rounding="none"' in doc and "Precisions fp32 and tf32" in doc  # documented in the plugin


# one decode-like and one odd shape per kernel (partial tiles along every axis; splitk SPLITS=3 uneven K ranges)
POINTS = [("gemv_rows", (3, 37, 41), {}), ("streamk", (17, 70, 45), {}),
          ("splitk_warptile", (9, 33, 70), {"SPLITS": 3}), ("slicedk", (5, 37, 33), {}),
          ("splitk", (7, 65, 99), {"SPLITS": 3}), ("small_tile", (3, 11, 70), {})]


@pytest.mark.parametrize("name, shape, params", POINTS, ids=[p[0] for p in POINTS])
def test_tf32_point_runs_and_verifies_with_no_input_rounding(tmp_path, monkeypatch, name, shape, params):
    rec, gpu = run(tmp_path, monkeypatch, name, shape, **params)
    assert rec["status"] == "ok" and rec["valid"] is True and exit_status(rec) == 0, rec.get("error")
    assert rec["precision"].startswith("tf32: ") and "unrounded on FP32 CUDA cores" in rec["precision"]
    v = rec["verification"]
    assert v["passed"] and v["mismatches"] == 0 and v["rule"] == "bound"
    assert v["tf32"]["declared"] == "none" and v["tf32"]["rounding"] == "none" and list(v["tf32"]["tried"]) == ["none"]
    d = rec["precision_detail"]
    assert d["name"] == "tf32" and d["a_dtype"] == d["b_dtype"] == "float32" and "CUDA cores" in d["compute"]
    assert rec["roofline"]["units"].startswith("TF32")  # the precision's peak: a looser plausibility floor
    assert rec["sass_check"]["declared"] == ["FFMA"] and rec["sass_check"]["counts"]["FFMA"] > 0
    assert rec["sass_check"]["verdict"] == "present" and not rec["sass_check"]["missing"], rec["sass_check"]
    main = [n for n, _ in gpu.launch_configs]
    assert main and all(n.startswith("gemm_") or n.startswith("gemmlab_") for n in main)


def test_a_kernel_that_rounds_to_tf32_while_declaring_none_is_caught(tmp_path, monkeypatch):
    """Teeth: the reference of ``none`` rounds no input, so products of TF32-truncated inputs
    (what a tensor core would compute) are off by ~2^-11 relative per term, far beyond the float32
    accumulation bound."""
    def truncating(gpu, args):
        a, b, c, m, n, k = (int(x) for x in args)
        A = round_tf32(_mat(gpu, a, m, k).copy(), "rz").astype(np.float64)
        B = round_tf32(_mat(gpu, b, k, n).copy(), "rz").astype(np.float64)
        _mat(gpu, c, m, n)[:] = (A @ B).astype(np.float32)
    rec, _ = run(tmp_path, monkeypatch, "gemv_rows", (3, 37, 41), gpu=HostGpu(behaviour={"gemm_gemv_rows": truncating}))
    assert rec["status"] == "wrong_result" and rec["verification"]["passed"] is False
    assert rec["verification"]["tf32"]["tried"] and list(rec["verification"]["tf32"]["tried"]) == ["none"]
