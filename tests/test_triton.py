"""Triton kernels (issue 46) on the CPU: the plugin kind's registration checks, ``mode=compile`` of
the built-in ``triton_matmul`` for sm_90 in every precision and layout (Triton compiles for an
explicit target with no GPU; registers, spills and shared memory recorded; the cubin disassembled
by gemmlab), a drop-in Triton plugin in a ``plugin_dirs`` folder with no core change, and the
launch path (pointers, constants and the run's stream handed to the compiled kernel) with a
stand-in for Triton's compiled kernel on the fake GPU. Tests that compile skip, with the reason,
where Triton cannot be imported (CI: the optional extra ``gemmlab[triton]`` is not installed)."""

from __future__ import annotations

import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from fakegpu import HostGpu
from gemmlab.contract.hookspecs import Problem, Shape, TritonKernelSpec
from gemmlab.contract.registry import load_registry
from gemmlab.errors import ConfigError
from gemmlab.gpu import guards
from gemmlab.gpu.backends import Buffers, TritonBackend, backend_for
from gemmlab.gpu.device import offline_facts
from gemmlab.gpu.triton_compile import specialise, unavailable
from gemmlab.run.pipeline import run_point

NO_TRITON = unavailable()
needs_triton = pytest.mark.skipif(NO_TRITON is not None, reason=f"Triton not importable: {NO_TRITON}")
FACTS = offline_facts("90")


def test_builtin_is_a_triton_kernel_registered_without_importing_it():
    spec = load_registry(entry_points=False).get("triton_matmul")
    assert isinstance(spec, TritonKernelSpec) and spec.function == "matmul_kernel"
    assert spec.precisions == ("fp32", "tf32", "bf16", "fp16") and ("row", "col") in spec.layouts
    assert backend_for("kernel", "triton_matmul", spec, dict(spec.defaults)).kind == "triton"


def test_without_triton_a_run_is_refused_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "triton", None)  # ImportError, installed or not
    rec = run_point({"kernel": {"name": "triton_matmul"}, "mode": "compile", "shape": [64, 64, 64]}, tmp_path / "p")
    assert rec["status"] == "unavailable" and "gemmlab[triton]" in rec["error"] and "\n" not in rec["error"]


@needs_triton
def test_a_repeated_compile_disassembles_once(tmp_path, monkeypatch):
    """The cubin is disassembled once per Triton compile and the listing kept with it: a second point of
    the same specialisation (an in-process hit) runs no disassembler and records the same histogram."""
    from gemmlab.gpu import sass
    from gemmlab.gpu.triton_compile import clear_cache
    clear_cache()
    calls = []
    real = sass.disassemble
    monkeypatch.setattr(sass, "disassemble", lambda cubin: calls.append(len(cubin)) or real(cubin))
    cfg = {"kernel": {"name": "triton_matmul"}, "mode": "compile", "shape": [256, 512, 1024], "precision": "bf16",
           "layout": {"a": "row", "b": "col"}}
    first = run_point(cfg, tmp_path / "a")
    second = run_point({**cfg, "shape": [256, 512, 2048]}, tmp_path / "b")  # K % 16 == 0 again: the same compile
    assert first["status"] == second["status"] == "compiled"
    assert len(calls) == 1 and second["compile"]["cache_hit_in_process"] is True
    assert second["compile"]["sass"]["histogram"] == first["compile"]["sass"]["histogram"]
    assert (tmp_path / "b" / "kernel.sass").read_text() == (tmp_path / "a" / "kernel.sass").read_text() != ""


@needs_triton
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
@pytest.mark.parametrize("layout_b", ["row", "col"])
def test_builtin_compiles_for_sm90_without_a_gpu(tmp_path, precision, layout_b):
    rec = run_point({"kernel": {"name": "triton_matmul"}, "mode": "compile", "shape": [63, 65, 33],
                     "precision": precision, "layout": {"a": "row", "b": layout_b}}, tmp_path / "p")
    assert rec["status"] == "compiled", rec.get("error")
    comp = rec["compile"]
    assert comp["backend"] == "triton" and comp["triton_version"] and comp["arch"].startswith("sm_90")
    assert comp["compile_ms"] > 0 and comp["shared_bytes"] > 0
    res = comp["resources"]
    assert res["registers"] > 0 and res["spill_store_bytes"] >= 0 and res["spill_load_bytes"] >= 0
    assert comp["sass"]["histogram"]["total"] > 0 and (tmp_path / "p" / "kernel.sass").is_file()
    assert comp["signature"]["a_ptr"] == {"fp32": "*fp32", "tf32": "*fp32", "bf16": "*bf16", "fp16": "*fp16"}[precision]
    # a unit stride is a constant, as Triton's JIT makes it: row-major B's stride_bn, column-major B's stride_bk
    assert comp["constexprs"]["stride_bn" if layout_b == "row" else "stride_bk"] == 1
    assert comp["constexprs"]["INPUT_PRECISION"] == ("ieee" if precision == "fp32" else "tf32")
    assert rec["launch"]["grid"] == [1 * 2, 1, 1] and rec["launch"]["block"] == [128, 1, 1]
    assert rec["launch"]["shared_bytes"] == comp["shared_bytes"]
    check = rec["sass_check"]
    if precision == "fp32":
        assert check["verdict"] == "present" and check["counts"]["FFMA"] > 0
    else:
        assert check["verdict"] == "none declared" and (comp["sass"]["histogram"]["HGMMA"]
                                                        + comp["sass"]["histogram"]["HMMA"]) > 0


DROPIN_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def rows_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_N: tl.constexpr):
    """One row of C per program, BLOCK_N columns at a time (row-major float32)."""
    m = tl.program_id(0)
    for n0 in range(0, N, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
        for k in range(0, K):
            a = tl.load(a_ptr + m * K + k)
            b = tl.load(b_ptr + k * N + cols, mask=cols < N, other=0.0)
            acc += a * b
        tl.store(c_ptr + m * N + cols, acc, mask=cols < N)
'''

DROPIN_PLUGIN = '''
from gemmlab.contract.hookspecs import TritonKernelSpec, hookimpl


class Rows(TritonKernelSpec):
    def grid(self, problem, params):
        return (problem.M,)


@hookimpl
def gemmlab_kernels():
    return [Rows(name="rows_triton", source="rows_kernel.py", function="rows_kernel",
                 defaults={"BLOCK_N": 64, "num_warps": 2}, sass_classes=("FFMA",),
                 description="a drop-in Triton kernel")]
'''


def _dropin(folder, plugin=DROPIN_PLUGIN):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rows_kernel.py").write_text(textwrap.dedent(DROPIN_KERNEL))
    (folder / "rows.py").write_text(textwrap.dedent(plugin))
    return folder


@needs_triton
def test_dropin_triton_plugin_compiles_with_no_core_change(tmp_path):
    folder = _dropin(tmp_path / "mine")
    rec = run_point({"kernel": {"name": "rows_triton"}, "mode": "compile", "shape": [31, 33, 17],
                     "plugin_dirs": [str(folder)]}, tmp_path / "p")
    assert rec["status"] == "compiled", rec.get("error")
    assert rec["kernel"]["backend"] == "triton" and rec["compile"]["source_file"] == str(folder / "rows_kernel.py")
    assert rec["compile"]["function"] == "rows_kernel" and rec["compile"]["options"] == ["num_warps=2"]
    assert rec["launch"]["grid"] == [31, 1, 1] and rec["launch"]["block"] == [64, 1, 1]
    assert rec["compile"]["resources"]["registers"] > 0 and rec["sass_check"]["verdict"] == "present"


@needs_triton  # the drop-in folder's kernel module imports triton (plugin_dirs loads every .py in it)
@pytest.mark.parametrize("change, field", [
    ('function="rows_kernel"', "function"),                       # no function named
    ('source="rows_kernel.py"', "source"),                        # no .py source
    ('"num_warps": 2', "defaults"),                               # num_warps not a power of two
    ("def grid(self, problem, params):", "grid"),                 # grid() not overridden
])
def test_a_malformed_triton_spec_is_refused_in_one_line(tmp_path, change, field):
    plugin = DROPIN_PLUGIN.replace(change, {"function": 'function=""', "source": 'source="rows_kernel.cu"',
                                            "defaults": '"num_warps": 3', "grid": "def grid_(self, problem, params):"}[field])
    folder = _dropin(tmp_path / "bad", plugin)
    with pytest.raises(ConfigError) as info:
        load_registry(plugin_dirs=[str(folder)], entry_points=False)
    text = str(info.value)
    assert "\n" not in text and "rows_triton" in text and f"declares {field}=" in text and str(folder) in text


def test_argument_count_must_match_the_function():
    fn = SimpleNamespace(__name__="k", params=[SimpleNamespace(name=n, is_constexpr=False) for n in "abc"])
    from gemmlab.contract.hookspecs import DEFAULT_ARGUMENTS
    with pytest.raises(ConfigError, match="takes 3 runtime arguments"):
        specialise(fn, "k", DEFAULT_ARGUMENTS, [None] * 3 + [1, 2, 3], {}, Problem(Shape(1, 2, 3)))


class FakeCompiled:
    """Just enough of Triton's CompiledKernel: ``kernel[grid](*args, stream=...)`` records the call."""

    def __init__(self):
        self.metadata = SimpleNamespace(shared=4096, num_warps=4, name="matmul_kernel", global_scratch_size=0,
                                        profile_scratch_size=0)
        self.n_regs, self.n_spills, self.n_max_threads = 96, 0, 1024
        self.calls = []

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            self.calls.append((grid, args, stream))
        return runner


@pytest.mark.parametrize("layout_b", ["row", "col"])
def test_enqueue_launches_on_the_runs_stream_with_the_cores_buffers(layout_b):
    """prepare() hands the compiled kernel raw addresses of the core's buffers, the problem's dims and
    strides and the constexpr values in the function's parameter order, on the run's stream; every
    enqueue() is one launch (what the core times and captures)."""
    spec = load_registry(entry_points=False).get("triton_matmul")
    problem = Problem(Shape(63, 65, 33), "bf16", "row", layout_b)
    backend = TritonBackend("kernel", "triton_matmul", spec, dict(spec.defaults), kind="triton")
    backend.validate(problem, FACTS)
    names = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm",
             "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "INPUT_PRECISION"]
    fn = SimpleNamespace(__name__="matmul_kernel", params=[SimpleNamespace(name=n, is_constexpr=n.isupper() and len(n) > 1)
                                                          for n in names])
    backend.special = specialise(fn, "triton_matmul", backend.arguments, backend._values(problem, None),
                                 backend.constants, problem)
    fake = FakeCompiled()
    backend.compiled = SimpleNamespace(compiled=fake)
    backend.record["compile"] = {}
    gpu = HostGpu()
    a = guards.allocate(gpu, "A", (63, 33), np.zeros((63, 33), np.float32))
    b = guards.allocate(gpu, "B", (33, 65), np.zeros((33, 65), np.float32))
    c = guards.allocate(gpu, "C", (63, 65))
    backend.prepare(gpu, problem, Buffers(a, b, c))
    backend.enqueue()
    backend.enqueue()
    assert len(fake.calls) == 2
    grid, args, stream = fake.calls[0]
    assert grid == (1 * 2, 1, 1) and stream == gpu.stream.handle
    ldb = 65 if layout_b == "row" else 33
    sb = (ldb, 1) if layout_b == "row" else (1, ldb)
    assert args == (a.address, b.address, c.address, 63, 65, 33, 33, 1, *sb, 65, 1, 128, 64, 32, 8, "tf32")
    assert backend.special.signature["a_ptr"] == "*bf16" and backend.special.signature["c_ptr"] == "*fp32"
    assert backend.record["compile"]["driver_attributes"]["registers"] == 96
    backend.close()


def test_a_triton_compilation_error_is_one_line_reason_first():
    """Triton's CompilationError text is "at L:C:", the source excerpt, a caret, then the reason: the
    one-line error leads with the reason (BLOCK_M=100 used to show only the excerpt, cut at 400 chars)."""
    from gemmlab.gpu.triton_compile import triton_error_text

    class CompilationError(Exception):
        pass

    text = ("at 14:31:\n    pid = tl.program_id(axis=0)\n" + "    x = 1\n" * 60
            + "    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)\n                               ^\n"
            "arange's range must be a power of 2")
    line = triton_error_text(CompilationError(text), "matmul_kernel")
    assert line == "arange's range must be a power of 2 (at 14:31 of matmul_kernel)"
    other = triton_error_text(RuntimeError("PTXAS error:\n  ptxas  fatal"), "matmul_kernel")
    assert other == "PTXAS error: ptxas fatal" and "\n" not in other


@pytest.mark.parametrize("name", ["BLOCK_M", "BLOCK_N", "BLOCK_K"])
def test_triton_matmul_refuses_a_block_that_is_not_a_power_of_two(name):
    """tl.arange takes only power-of-two ranges: a BLOCK_* of 100 is bad input (one line naming the field),
    refused before Triton is imported, not a compile error from Triton's compiler."""
    from gemmlab.contract.hookspecs import ParamError
    spec = load_registry(entry_points=False).get("triton_matmul")
    params = dict(spec.defaults, **{name: 100})
    with pytest.raises(ParamError) as info:
        spec.check_problem(Problem(Shape(63, 65, 33)), params, offline_facts("90"))
    assert str(info.value) == f"kernel.{name}: must be a power of two (a tl.arange range), got 100"
    spec.check_problem(Problem(Shape(63, 65, 33)), dict(spec.defaults, **{name: 16}), offline_facts("90"))
