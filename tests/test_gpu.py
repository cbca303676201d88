"""GPU tests (marker ``gpu``): run on the H200 through the device tool; skipped elsewhere.

Each point goes through the whole pipeline (compile -> NaN-fill -> verify -> time) via
``run_point``; a passing record proves the kernel wrote every output within tolerance.
"""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from gemmlab.run.pipeline import run_point

pytestmark = pytest.mark.gpu

SEED_SHAPES = [(1, 1, 1), (31, 33, 17), (63, 65, 33), (64, 64, 64), (256, 256, 256), (129, 255, 1000)]
FAST = {"warmup": 1, "repeat": 3, "batch": 2}


def _cfg(kernel: str, shape, **params) -> dict:
    return {"kernel": {"name": kernel, **params}, "shape": list(shape), "mode": "run", "timing": FAST}


def _assert_ok(rec: dict) -> None:
    assert rec["status"] == "ok", rec.get("error")
    assert rec["valid"] is True
    v = rec["verification"]
    assert v["passed"] and v["mismatches"] == 0 and v["nan_outputs"] == 0
    assert v["max_abs_error"] < 1e-3
    t = rec["timing"]
    assert len(t["samples_ms"]) == 3 and all(s > 0 for s in t["samples_ms"])
    assert t["gflops"] > 0
    assert rec["compile"]["driver_attributes"]["registers"] > 0
    assert rec["occupancy"]["max_active_blocks_per_sm"] >= 1


@pytest.mark.parametrize("shape", SEED_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kernel", ["naive", "tiled"])
def test_seed000_kernels_verify(kernel, shape, tmp_path):
    """The kernels of seed 000 (the real-device naive vs register-tiled GEMM lab gemmlab grew
    from) at its shapes, partial tiles included."""
    rec = run_point(_cfg(kernel, shape), tmp_path)
    _assert_ok(rec)
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "ok"


@pytest.mark.parametrize("n", [64, 128, 512])
@pytest.mark.parametrize("kernel", ["ladder_starter", "ladder_strip"])
def test_ladder_kernels_verify(kernel, n, tmp_path):
    _assert_ok(run_point(_cfg(kernel, (n, n, n)), tmp_path))


@pytest.mark.parametrize("params", [dict(BM=32, BN=64, BK=8, TM=4, TN=2), dict(BM=128, BN=128, BK=8, TM=8, TN=8)])
def test_tiled_other_tiles_verify(params, tmp_path):
    _assert_ok(run_point(_cfg("tiled", (129, 255, 100), **params), tmp_path))


BROKEN_PLUGIN = '''
from pathlib import Path
from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv

SOURCE = Path(__file__).with_name("skiplast.cu")

class SkipLast(KernelSpec):
    def entry(self, params):
        return "gemm_skiplast<16>"
    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))

@hookimpl
def gemmlab_kernels():
    return [SkipLast(name="skiplast", source=str(SOURCE), defaults={})]
'''

BROKEN_SOURCE = '''
// Deliberately wrong: never writes the last column of C.
template <int B>
__global__ void gemm_skiplast(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y * B + threadIdx.y, col = blockIdx.x * B + threadIdx.x;
  if (row >= m || col >= n - 1) return;
  float acc = 0.0f;
  for (int i = 0; i < k; i++) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
  c[(long long)row * n + col] = acc;
}
'''


@pytest.fixture
def broken_plugin_dir(tmp_path):
    d = tmp_path / "myplugins"
    d.mkdir()
    (d / "skiplast.py").write_text(textwrap.dedent(BROKEN_PLUGIN))
    (d / "skiplast.cu").write_text(BROKEN_SOURCE)
    return d


def test_nan_fill_catches_missing_column(broken_plugin_dir, tmp_path):
    cfg = _cfg("skiplast", (31, 33, 17))
    cfg["plugin_dirs"] = [str(broken_plugin_dir)]
    rec = run_point(cfg, tmp_path / "run")
    assert rec["status"] == "wrong_result" and rec["valid"] is False
    assert rec["verification"]["nan_outputs"] == 31  # the whole last column stayed NaN
    assert rec["verification"]["first_mismatches"][0][:2] == [0, 32]
    assert "timing" not in rec


def test_sweep_with_failing_point(broken_plugin_dir, tmp_path, gemmlab_cmd, cli_env):
    proc = subprocess.run(gemmlab_cmd + ["-m", "kernel=tiled,skiplast", "shape=[63,65,33]",
                                         f"plugin_dirs=[{broken_plugin_dir}]", "timing.repeat=3", "timing.batch=2"],
                          cwd=tmp_path, env=cli_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    summaries = list((tmp_path / "outputs" / "multirun").glob("*/*/summary.csv"))
    assert len(summaries) == 1
    text = summaries[0].read_text()
    assert "tiled" in text and ",ok," in text and "skiplast" in text and "wrong_result" in text
    statuses = sorted(json.loads(p.read_text())["status"] for p in summaries[0].parent.glob("*/result.json"))
    assert statuses == ["ok", "wrong_result"]
