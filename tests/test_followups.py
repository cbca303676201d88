"""Regression tests for issues a fresh-user trial found in the sweep tools."""

from __future__ import annotations

import json


def test_cache_entry_with_garbage_resources_is_a_miss(tmp_path):
    from gemmlab.gpu import cache, compile as compile_stage
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.paths import KERNELS_DIR
    folder = tmp_path / "cache"
    compile_stage.clear_cache()
    first = compile_kernel(KERNELS_DIR / "naive.cu", "gemm_naive<16, 16>", CompileOptions(), True, str(folder))
    (meta_path,) = folder.glob("*.json")
    meta = json.loads(meta_path.read_text())
    meta["resources"] = "garbage"
    meta_path.write_text(json.dumps(meta))
    assert cache.load(folder, meta_path.stem) is None
    compile_stage.clear_cache()
    meta["resources"] = {"nonsense": 1}
    meta_path.write_text(json.dumps(meta))
    again = compile_kernel(KERNELS_DIR / "naive.cu", "gemm_naive<16, 16>", CompileOptions(), True, str(folder))
    assert first.disk_cache == "miss" and again.disk_cache == "miss" and again.resources is not None


def test_resume_ignores_cache_settings(tmp_path):
    from gemmlab.run.pipeline import run_point
    cfg = {"kernel": {"name": "naive"}, "shape": [8, 8, 8], "mode": "compile", "cache": {"enabled": True, "dir": None}}
    first = run_point(cfg, tmp_path / "p")
    assert first["status"] == "compiled"
    again = run_point(dict(cfg, resume=True, cache={"enabled": False, "dir": str(tmp_path / "c")}), tmp_path / "p")
    assert again.get("resumed") is True
    assert not list((tmp_path / "p").glob("result.previous-*"))


def test_sampled_with_every_row_sampled_reports_finite_errors():
    import numpy as np
    from gemmlab.stages.verify import VerifyOptions, check
    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 64)).astype(np.float32)
    b = rng.standard_normal((64, 50)).astype(np.float32)
    c = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    v = check(c, a, b, VerifyOptions(method="sampled", sample=256))
    assert v.passed and np.isfinite(v.max_abs_error) and v.max_abs_error < 1e-4


def test_compile_without_ptxas_report_is_not_cached(tmp_path, monkeypatch):
    from gemmlab.gpu import compile as compile_stage
    from gemmlab.gpu.compile import CompileOptions, CompileError, compile_kernel
    from gemmlab.paths import KERNELS_DIR

    def no_report(text, lowered):
        raise CompileError("no report", text)

    monkeypatch.setattr(compile_stage, "parse_ptxas", no_report)
    compile_stage.clear_cache()
    c = compile_kernel(KERNELS_DIR / "naive.cu", "gemm_naive<16, 16>", CompileOptions(), True, str(tmp_path))
    assert c.resources is None and c.disk_cache == "miss"
    assert not list(tmp_path.glob("*.cubin"))  # a missing report is never made permanent


def test_products_are_computed_once_for_kernel_and_baseline(monkeypatch):
    import numpy as np
    from gemmlab.stages import verify
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
