"""Regression tests for issues a fresh-user trial found in the sweep tools."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).with_name("data") / "h200"
REPO = Path(__file__).resolve().parents[1]


def _compare(*args, cwd):
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "gemmlab.compare", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def two_copies(tmp_path):
    a, b = tmp_path / "A", tmp_path / "B"
    shutil.copytree(DATA, a)
    shutil.copytree(DATA, b)
    return a, b


def test_point_missing_after_fails_the_gate(two_copies, tmp_path):
    a, b = two_copies
    shutil.rmtree(b / "tiled-1024")
    proc = _compare(a, b, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "only in BEFORE" in proc.stdout
    assert _compare(a, b, "--allow-missing", cwd=tmp_path).returncode == 0


def test_compare_refuses_existing_out(two_copies, tmp_path):
    a, b = two_copies
    out = tmp_path / "cmp.md"
    out.write_text("keep me")
    proc = _compare(a, b, "--out", out, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "already exists" in proc.stderr
    assert out.read_text() == "keep me"


def test_compare_malformed_record_is_one_line(two_copies, tmp_path):
    a, b = two_copies
    path = b / "tiled-1024" / "result.json"
    rec = json.loads(path.read_text())
    rec["timing"]["samples_ms"] = ["fast", "slow", "x"]
    path.write_text(json.dumps(rec))
    proc = _compare(a, b, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("gemmlab-compare: error:")


def test_cache_entry_with_garbage_resources_is_a_miss(tmp_path):
    from gemmlab import cache, compile as compile_stage
    from gemmlab.compile import CompileOptions, compile_kernel
    from gemmlab.paths import KERNELS_DIR
    folder = tmp_path / "cache"
    compile_stage._CACHE.clear()
    first = compile_kernel(KERNELS_DIR / "naive.cu", "gemm_naive<16, 16>", CompileOptions(), True, str(folder))
    (meta_path,) = folder.glob("*.json")
    meta = json.loads(meta_path.read_text())
    meta["resources"] = "garbage"
    meta_path.write_text(json.dumps(meta))
    assert cache.load(folder, meta_path.stem) is None
    compile_stage._CACHE.clear()
    meta["resources"] = {"nonsense": 1}
    meta_path.write_text(json.dumps(meta))
    again = compile_kernel(KERNELS_DIR / "naive.cu", "gemm_naive<16, 16>", CompileOptions(), True, str(folder))
    assert first.disk_cache == "miss" and again.disk_cache == "miss" and again.resources is not None


def test_resume_ignores_cache_settings(tmp_path):
    from gemmlab.pipeline import run_point
    cfg = {"kernel": {"name": "naive"}, "shape": [8, 8, 8], "mode": "compile", "cache": {"enabled": True, "dir": None}}
    first = run_point(cfg, tmp_path / "p")
    assert first["status"] == "compiled"
    again = run_point(dict(cfg, resume=True, cache={"enabled": False, "dir": str(tmp_path / "c")}), tmp_path / "p")
    assert again.get("resumed") is True
    assert not list((tmp_path / "p").glob("result.previous-*"))


def test_sampled_with_every_row_sampled_reports_finite_errors():
    import numpy as np
    from gemmlab.verify import VerifyOptions, check
    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 64)).astype(np.float32)
    b = rng.standard_normal((64, 50)).astype(np.float32)
    c = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    v = check(c, a, b, VerifyOptions(method="sampled", sample=256))
    assert v.passed and np.isfinite(v.max_abs_error) and v.max_abs_error < 1e-4


def test_budget_stops_a_fixed_count_protocol():
    from gemmlab.timing import TimingOptions, measure
    import time as _time

    class Ev:
        def __init__(self, t):
            self.t = t

        def sync(self):
            pass

        def __sub__(self, other):
            return self.t - other.t

    class Stream:
        def record(self, options=None):
            return Ev(_time.perf_counter() * 1e3)

    class Gpu:
        stream = Stream()

        class monitor:
            @staticmethod
            def read():
                return None

        def sync(self):
            pass

        def release_graphs(self):
            pass

    def slow():
        _time.sleep(0.01)

    out = measure(Gpu(), {"k": slow}, TimingOptions(mode="events", warmup=0, repeat=3, max_repeat=1000,
                                                      budget_s=0.1, batch=1, floor=False))
    n = len(out["protocols"]["events"]["k"].samples_ms)
    assert out["stopped_by"]["events"] == "budget" and 3 <= n < 50


def test_compile_without_ptxas_report_is_not_cached(tmp_path, monkeypatch):
    from gemmlab import compile as compile_stage
    from gemmlab.compile import CompileOptions, CompileError, compile_kernel
    from gemmlab.paths import KERNELS_DIR

    def no_report(text, lowered):
        raise CompileError("no report", text)

    monkeypatch.setattr(compile_stage, "parse_ptxas", no_report)
    compile_stage._CACHE.clear()
    c = compile_kernel(KERNELS_DIR / "naive.cu", "gemm_naive<16, 16>", CompileOptions(), True, str(tmp_path))
    assert c.resources is None and c.disk_cache == "miss"
    assert not list(tmp_path.glob("*.cubin"))  # a missing report is never made permanent


def test_products_are_computed_once_for_kernel_and_baseline(monkeypatch):
    import numpy as np
    from gemmlab import verify
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal((32, 8)).astype(np.float32)
    c = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    products = {}
    first = verify.check(c, a, b, verify.VerifyOptions(), products=products)
    assert set(products) == {"ref", "abs_ab"}
    ref_id = id(products["ref"])
    second = verify.check(c, a, b, verify.VerifyOptions(), products=products)
    assert id(products["ref"]) == ref_id and first.passed and second.passed
    assert first.max_abs_error == second.max_abs_error
