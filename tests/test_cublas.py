"""The built-in ``cublas`` kernel (plugins/cublas.py) without a GPU.

Without nvmath-python: ``available()`` says how to install it. With a fake
``nvmath.bindings.cublas`` whose ``sgemm`` computes a column-major GEMM on host memory (the
cuBLAS contract), the row-major trick (C^T = B^T A^T, operands swapped) must give C = A @ B, and
the math mode must follow ``precision``.
"""

from __future__ import annotations

import ctypes
import sys
import types

import numpy as np
import pytest

from fakegpu import HostGpu
from gemmlab.contract.hookspecs import DevicePointers, LibraryKernelSpec, ParamError, Shape
from gemmlab.contract.registry import load_registry


@pytest.fixture
def spec():
    return load_registry(entry_points=False).get("cublas")


def test_is_a_library_kernel(spec):
    assert isinstance(spec, LibraryKernelSpec)
    assert spec.precisions == ("fp32", "tf32", "bf16", "fp16", "fp8")
    assert set(spec.layouts) == {("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")}
    assert dict(spec.defaults) == {}


def test_available_without_nvmath_names_the_extra(spec, monkeypatch):
    for name in ("nvmath", "nvmath.bindings", "nvmath.bindings.cublas"):  # ImportError, installed or not
        monkeypatch.setitem(sys.modules, name, None)
    reason = spec.available()
    assert reason is not None
    assert "gemmlab[cublas]" in reason
    assert "nvmath" in reason
    assert "\n" not in reason  # one line for the CLI


class FakeCublas(types.ModuleType):
    """Just enough of nvmath.bindings.cublas; sgemm works on a HostGpu's memory, column-major."""

    class Math:
        DEFAULT_MATH = 0
        TF32_TENSOR_OP_MATH = 3

    class Operation:
        N = 0
        T = 1

    def __init__(self, gpu: HostGpu):
        super().__init__("nvmath.bindings.cublas")
        self.gpu = gpu
        self.handles: dict[int, dict] = {}
        self.calls: list[tuple] = []

    def create(self):
        h = 1000 + len(self.handles)
        self.handles[h] = {"open": True}
        return h

    def destroy(self, h):
        self.handles[h]["open"] = False

    def get_version(self, h):
        return 130002

    def set_stream(self, h, stream):
        self.handles[h]["stream"] = stream

    def set_math_mode(self, h, mode):
        self.handles[h]["math"] = mode

    def sgemm(self, h, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        assert self.handles[h]["open"]
        self.calls.append((h, transa, transb, m, n, k, a, lda, b, ldb, c, ldc))
        assert transa == transb == self.Operation.N
        al = ctypes.c_float.from_address(alpha).value
        be = ctypes.c_float.from_address(beta).value
        g = self.gpu
        A = g.floats(a, lda * k).reshape(k, lda).T[:m, :]  # column-major m x k
        B = g.floats(b, ldb * n).reshape(n, ldb).T[:k, :]  # column-major k x n
        C = g.floats(c, ldc * n).reshape(n, ldc).T[:m, :]
        C[:] = al * (A @ B) + (be * C if be else 0)
        g.clock_ms += 0.5


@pytest.fixture
def fake_nvmath(monkeypatch):
    gpu = HostGpu()
    cublas = FakeCublas(gpu)
    bindings = types.ModuleType("nvmath.bindings")
    bindings.cublas = cublas
    nvmath = types.ModuleType("nvmath")
    nvmath.bindings = bindings
    for name, mod in (("nvmath", nvmath), ("nvmath.bindings", bindings), ("nvmath.bindings.cublas", cublas)):
        monkeypatch.setitem(sys.modules, name, mod)
    return gpu, cublas


def device_matrices(gpu, m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bufs = [gpu.allocate(x.nbytes) for x in (a, b)] + [gpu.allocate(m * n * 4)]
    gpu.upload(bufs[0].handle, a)
    gpu.upload(bufs[1].handle, b)
    gpu.fill32(bufs[2].handle, 0xFFFFFFFF, m * n)
    return a, b, DevicePointers(a=bufs[0].handle, b=bufs[1].handle, c=bufs[2].handle, stream=77)


def test_available_and_version_with_nvmath(spec, fake_nvmath):
    gpu, cublas = fake_nvmath
    assert spec.available() is None
    assert spec.library_version() == "cuBLAS 13.0.2 via nvmath-python"
    assert all(not h["open"] for h in cublas.handles.values())  # the version probe closes its handle


@pytest.mark.parametrize("m, n, k", [(3, 5, 7), (1, 1, 1), (17, 4, 9)])
def test_row_major_trick_gives_a_times_b(spec, fake_nvmath, m, n, k):
    gpu, cublas = fake_nvmath
    a, b, ptrs = device_matrices(gpu, m, n, k)
    enqueue, close = spec.enqueue_function(Shape(m, n, k), {}, ptrs, "fp32")
    enqueue()
    c = gpu.floats(ptrs.c, m * n).reshape(m, n)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
    (h, _, _, cm, cn, ck, pa, lda, pb, ldb, pc, ldc), = cublas.calls
    assert (cm, cn, ck) == (n, m, k)  # C^T (n x m) = B^T (n x k) @ A^T (k x m)
    assert (pa, lda, pb, ldb, pc, ldc) == (ptrs.b, n, ptrs.a, k, ptrs.c, n)
    assert cublas.handles[h]["stream"] == 77  # enqueued on the run's stream
    close()
    assert cublas.handles[h]["open"] is False


@pytest.mark.parametrize("precision, mode", [("fp32", FakeCublas.Math.DEFAULT_MATH),
                                             ("tf32", FakeCublas.Math.TF32_TENSOR_OP_MATH)])
def test_math_mode_follows_precision(spec, fake_nvmath, precision, mode):
    gpu, cublas = fake_nvmath
    _, _, ptrs = device_matrices(gpu, 2, 2, 2)
    enqueue, close = spec.enqueue_function(Shape(2, 2, 2), {}, ptrs, precision)
    (h,) = cublas.handles
    assert cublas.handles[h]["math"] == mode
    close()


def test_unsupported_precision(spec, fake_nvmath):
    gpu, _ = fake_nvmath
    _, _, ptrs = device_matrices(gpu, 2, 2, 2)
    with pytest.raises(ParamError) as info:
        spec.enqueue_function(Shape(2, 2, 2), {}, ptrs, "fp64")
    assert info.value.field == "precision"


def test_pipeline_baseline_cublas_on_fake_gpu(fake_nvmath, monkeypatch, tmp_path):
    # the whole run (tiled vs cublas baseline) on the host-memory fake GPU with the fake cuBLAS
    import gemmlab.gpu.device
    from gemmlab.run.pipeline import run_point
    gpu, cublas = fake_nvmath
    gpu.durations["gemm_tiled"] = 1.0  # cublas: 0.5 ms per call (FakeCublas.sgemm)
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    cfg = {"kernel": {"name": "tiled"}, "shape": [63, 65, 33], "baseline": "cublas", "mode": "run",
           "timing": {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events"}}
    rec = run_point(cfg, tmp_path / "p")
    assert rec["status"] == "ok", rec["error"]
    base = rec["baseline"]
    assert base["name"] == "cublas" and base["library"] == "cuBLAS 13.0.2 via nvmath-python"
    assert base["compile"] is None
    assert base["verification"]["passed"] is True
    assert base["timing"]["median_ms"] == 0.5 and rec["timing"]["median_ms"] == 1.0
    assert rec["ratio_to_baseline"] == {"baseline": "cublas", "protocol": "events", "median_time": 2.0, "gflops": 0.5}
    assert all(not h["open"] for h in cublas.handles.values())  # close() called at the end


def test_pipeline_cublas_tf32_on_fake_gpu(fake_nvmath, monkeypatch, tmp_path):
    import gemmlab.gpu.device
    from gemmlab.run.pipeline import run_point
    gpu, cublas = fake_nvmath
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    cfg = {"kernel": {"name": "cublas"}, "shape": [16, 8, 32], "precision": "tf32", "mode": "run",
           "timing": {"warmup": 0, "repeat": 2, "batch": 1, "floor": False}}
    rec = run_point(cfg, tmp_path / "p")
    assert rec["status"] == "ok", rec["error"]
    assert rec["kernel"]["backend"] == "library"
    assert rec["precision"].startswith("tf32: ")
    assert "launch" not in rec and rec["compile"] is None
    assert [h["math"] for h in cublas.handles.values() if "math" in h] == [FakeCublas.Math.TF32_TENSOR_OP_MATH]


def test_compile_mode_without_nvmath_compiles_the_kernel_and_skips_the_baseline(monkeypatch, tmp_path):
    """``mode=compile`` never runs the baseline: a missing cuBLAS extra is noted, not a failure;
    ``kernel=cublas`` itself still says it is unavailable."""
    from gemmlab.run.pipeline import run_point
    from gemmlab.stages.record import summary
    for name in ("nvmath", "nvmath.bindings", "nvmath.bindings.cublas"):
        monkeypatch.setitem(sys.modules, name, None)
    rec = run_point({"kernel": {"name": "tiled"}, "baseline": "cublas", "mode": "compile",
                     "shape": [64, 64, 64]}, tmp_path / "a")
    assert rec["status"] == "compiled" and rec["valid"], rec.get("error")
    assert rec["baseline"]["name"] == "cublas" and "gemmlab[cublas]" in rec["baseline"]["skipped"]
    assert "baseline cublas: skipped" in summary(rec)
    own = run_point({"kernel": {"name": "cublas"}, "mode": "compile", "shape": [64, 64, 64]}, tmp_path / "b")
    assert own["status"] == "unavailable"
