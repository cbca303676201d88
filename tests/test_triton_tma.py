"""Triton kernels, part 2 (issue 46 items 2-3) on the CPU: the built-in ``triton_tma_persistent``
(registration, its grid from the device's SM count, the shapes and parameters it refuses in one
line, its declared space, Triton's global scratch allocated by the core and handed to Triton's
launcher, ``mode=compile`` for sm_90 with HGMMA and UTMALDG in the SASS) and Triton's autotune
configs as a kernel's declared space (a drop-in plugin in a ``plugin_dirs`` folder whose configs
become its candidates with no core change; malformed configs and autotune hooks refused in one
line; ``candidates.enumerate`` offers Triton kernels only where Triton imports). Tests that import
or compile Triton skip, with the reason, where it cannot be imported (CI: no ``gemmlab[triton]``)."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

import gemmlab.gpu.triton_compile as triton_compile
from fakegpu import HostGpu
from gemmlab.contract.hookspecs import Problem, Shape, TritonKernelSpec
from gemmlab.contract.registry import load_registry
from gemmlab.contract.space import config_params, configs_space
from gemmlab.dispatch import candidates as cands
from gemmlab.errors import ConfigError
from gemmlab.gpu import guards
from gemmlab.gpu.backends import Buffers, TritonBackend
from gemmlab.gpu.device import offline_facts
from gemmlab.gpu.triton_compile import specialise, unavailable
from gemmlab.run.pipeline import run_point

NO_TRITON = unavailable()
needs_triton = pytest.mark.skipif(NO_TRITON is not None, reason=f"Triton not importable: {NO_TRITON}")
FACTS = offline_facts("90")
NAME = "triton_tma_persistent"


def _spec():
    return load_registry(entry_points=False).get(NAME)


def _validated(shape, precision="bf16", layout_b="col", **params):
    spec = _spec()
    backend = TritonBackend("kernel", NAME, spec, {**spec.defaults, **params}, kind="triton")
    backend.validate(Problem(Shape(*shape), precision, "row", layout_b), FACTS)
    return backend


# --- the persistent TMA built-in -------------------------------------------------------------------

def test_persistent_builtin_is_registered_without_importing_triton():
    spec = _spec()
    assert isinstance(spec, TritonKernelSpec) and spec.function == "matmul_tma_persistent"
    assert spec.precisions == ("bf16", "fp16") and spec.layouts == (("row", "col"), ("row", "row"))
    assert spec.sass_classes == ("HGMMA", "UTMALDG")
    points = list(spec.param_space().points(spec.defaults))
    assert points[0] == dict(spec.defaults) and len(points) > 20
    assert all(p["BLOCK_M"] * p["BLOCK_N"] <= 128 * 32 * p["num_warps"] for p in points)  # the restriction holds


@pytest.mark.parametrize("shape, params, grid", [
    ((4096, 4096, 4096), {}, 132),                      # 32 x 16 = 512 tiles of 128x256: one program per SM
    ((1000, 1000, 1000), {}, 32),                       # 8 x 4 = 32 tiles: one program per tile
    ((100, 100, 104), {}, 1),
    ((2100, 2050, 1000), {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4}, 132),
])
def test_persistent_grid_is_min_of_sms_and_tiles(shape, params, grid):
    backend = _validated(shape, **params)
    assert backend.launch.grid == (grid, 1, 1) and backend.launch.block == (32 * backend.params["num_warps"], 1, 1)
    assert _spec().geometry(Problem(Shape(*shape), "bf16", "row", "col"), backend.params, FACTS).grid == (grid, 1, 1)
    small = SimpleNamespace(**{**FACTS.__dict__, "sm_count": 7})  # another GPU: the grid follows its SM count
    assert _spec().launch_grid(Problem(Shape(*shape), "bf16", "row", "col"), backend.params, small) == (min(7, grid),)


@pytest.mark.parametrize("shape, layout_b, params, field, words", [
    ((64, 64, 100), "col", {}, "shape", "K=100"),                   # A's rows: 200 B, not a multiple of 16
    ((64, 64, 33), "row", {}, "shape", "K=33"),
    ((64, 999, 64), "row", {}, "shape", "N=999"),                   # row-major B's rows
    ((64, 64, 64), "col", {"BLOCK_M": 96}, "kernel.BLOCK_M", "power of two 16..256"),
    ((64, 64, 64), "col", {"BLOCK_K": 512}, "kernel.BLOCK_K", "power of two 16..256"),
    ((64, 64, 64), "col", {"BLOCK_K": 128, "num_stages": 5}, "kernel.num_stages", "shared memory"),
    ((64, 64, 64), "col", {"FLATTEN": 2}, "kernel.FLATTEN", "one of 0, 1"),
])
def test_persistent_refuses_in_one_line(shape, layout_b, params, field, words):
    with pytest.raises(ConfigError) as info:
        _validated(shape, layout_b=layout_b, **params)
    assert info.value.field == field and words in str(info.value) and "\n" not in str(info.value)


def test_persistent_takes_any_m_and_n_with_a_column_major_b():
    assert _validated((1, 1, 8)).launch.grid == (1, 1, 1)
    assert _validated((4097, 999, 1000)).launch.grid == (132, 1, 1)


def test_shared_estimate_matches_tritons_layout():
    """The space's shared-memory rule against what Triton 3.6 and 3.9 allocated (measured with
    mode=compile here): 147,480 B for 128x256x64 x 3 stages, 278,552 B flattened."""
    from gemmlab_plugins.triton_tma_persistent import shared_estimate
    p = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 3}
    assert 0 <= shared_estimate({**p, "FLATTEN": 0}) - 147480 <= 1024
    assert 0 <= shared_estimate({**p, "FLATTEN": 1}) - 278552 <= 1024


class FakeScratchCompiled:
    """Triton's CompiledKernel as far as the scratch goes: its launcher asks the allocator of the
    current context for ``global_scratch_size`` x programs bytes at each launch, as Triton 3.6's and
    3.9's ``CudaLauncher.__call__`` do."""

    def __init__(self, per_program=256):
        self.metadata = SimpleNamespace(shared=147480, num_warps=8, name="matmul_tma_persistent", num_ctas=1,
                                        global_scratch_size=per_program, global_scratch_align=128,
                                        profile_scratch_size=0)
        self.n_regs, self.n_spills, self.n_max_threads = 155, 0, 256
        self.calls = []

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            from triton.runtime import _allocation
            size = grid[0] * grid[1] * grid[2] * self.metadata.global_scratch_size
            buffer = _allocation._allocator.get()(size, self.metadata.global_scratch_align, stream)
            self.calls.append((grid, args, stream, buffer.data_ptr()))
        return runner


@needs_triton
def test_global_scratch_is_the_cores_buffer_allocated_before_timing():
    """prepare() allocates the scratch once (guard-banded, checked by the safety nets), every launch
    gets the same address through Triton's allocator hook, the hook is this launch's only (reset
    after), a larger request fails, and close() releases the buffer."""
    from triton.runtime import _allocation
    backend = _validated((1000, 1000, 1000))
    fn = SimpleNamespace(__name__="matmul_tma_persistent", params=[
        SimpleNamespace(name=n, is_constexpr=n.isupper() and len(n) > 1)
        for n in ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "lda", "ldb", "ldc", "BLOCK_M", "BLOCK_N", "BLOCK_K",
                  "GROUP_M", "FLATTEN", "B_COL")])
    problem = Problem(Shape(1000, 1000, 1000), "bf16", "row", "col")
    backend.special = specialise(fn, NAME, backend.arguments, backend._values(problem, None), backend.constants,
                                 problem)
    fake = FakeScratchCompiled()
    backend.compiled = SimpleNamespace(compiled=fake)
    backend.record["compile"] = {}
    gpu = HostGpu()
    a = guards.allocate(gpu, "A", (1000, 1000), np.ones((1000, 1000), np.float32))
    b = guards.allocate(gpu, "B", (1000, 1000), np.ones((1000, 1000), np.float32))
    c = guards.allocate(gpu, "C", (1000, 1000))
    backend.prepare(gpu, problem, Buffers(a, b, c))
    (scratch,) = backend.guarded()
    assert scratch.nbytes >= 256 * 32 and backend.record["workspace_bytes"] == 256 * 32
    before = _allocation._allocator.get()
    backend.enqueue()
    backend.enqueue()
    assert [call[3] for call in fake.calls] == [scratch.address] * 2 and scratch.address % 128 == 0
    grid, args, stream, _ = fake.calls[0]
    assert grid == (32, 1, 1) and stream == gpu.stream.handle
    assert args[:9] == (a.address, b.address, c.address, 1000, 1000, 1000, 1000, 1000, 1000)
    assert args[9:] == (128, 256, 64, 8, 0, 1)  # BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, FLATTEN, B_COL
    assert _allocation._allocator.get() is before  # the hook does not outlive the launch
    fake.metadata.global_scratch_size = 512  # a kernel asking for more than was allocated
    with pytest.raises(RuntimeError, match="asked for 16384 B of global scratch"):
        backend.enqueue()
    backend.close()
    assert backend.guarded() == []


@needs_triton
@pytest.mark.parametrize("precision, layout_b, shape", [("bf16", "col", (200, 300, 1000)),
                                                        ("fp16", "row", (129, 136, 1000))])
def test_persistent_compiles_for_sm90_with_wgmma_and_tma(tmp_path, precision, layout_b, shape):
    rec = run_point({"kernel": {"name": NAME}, "mode": "compile", "shape": list(shape), "precision": precision,
                     "layout": {"a": "row", "b": layout_b}}, tmp_path / "p")
    assert rec["status"] == "compiled", rec.get("error")
    comp = rec["compile"]
    assert comp["backend"] == "triton" and comp["arch"] == "sm_90a" and comp["function"] == "matmul_tma_persistent"
    assert comp["global_scratch_bytes_per_program"] == 256  # two 128-byte CUtensorMaps (A, B)
    assert comp["constexprs"]["B_COL"] == int(layout_b == "col") and comp["shared_bytes"] > 100000
    assert comp["resources"]["registers"] > 0 and comp["resources"]["spill_store_bytes"] >= 0
    check = rec["sass_check"]
    assert check["verdict"] == "present" and check["counts"]["HGMMA"] > 0 and check["counts"]["UTMALDG"] > 0
    tiles = -(-shape[0] // 128) * -(-shape[1] // 256)
    assert rec["launch"]["grid"] == [min(132, tiles), 1, 1] and rec["launch"]["block"] == [256, 1, 1]


# --- Triton's autotune configs as the declared space -----------------------------------------------

CONFIGS = [{"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 4},
           {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3},
           {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 2, "num_stages": 2}]

# a drop-in that reuses gemmlab's tutorial kernel (kernels/triton_matmul.py) with its own configs:
# no Triton import at load, so it loads where Triton is absent (CI)
CONFIGS_PLUGIN = '''
from gemmlab.contract.hookspecs import Dim, Matrix, TritonKernelSpec, Value, hookimpl

CONFIGS = {configs!r}


class Tuned(TritonKernelSpec):
    def grid(self, problem, params):
        return (-(-problem.M // params["BLOCK_M"]) * -(-problem.N // params["BLOCK_N"]),)

    def arguments(self, problem, params, device):
        sb = (problem.ldb, 1) if problem.layout_b == "row" else (1, problem.ldb)
        return (Matrix("A"), Matrix("B"), Matrix("C"), Dim("M"), Dim("N"), Dim("K"),
                *(Value(s, "int32") for s in (problem.lda, 1, *sb, problem.ldc, 1)))

    def constants(self, problem, params):
        return dict(super().constants(problem, params), INPUT_PRECISION="tf32")


@hookimpl
def gemmlab_kernels():
    return [Tuned(name="tuned_triton", source="triton_matmul.py", function="matmul_kernel", configs={configs_expr},
                  precisions=("bf16",), layouts=(("row", "row"), ("row", "col")), description="autotune configs")]
'''


def _configs_plugin(folder, configs=CONFIGS, configs_expr="CONFIGS"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tuned.py").write_text(textwrap.dedent(CONFIGS_PLUGIN.format(configs=configs, configs_expr=configs_expr)))
    return folder


def test_configs_become_the_space_and_the_candidates_with_no_core_change(tmp_path):
    registry = load_registry(plugin_dirs=[str(_configs_plugin(tmp_path / "mine"))], entry_points=False)
    spec = registry.get("tuned_triton")
    assert dict(spec.defaults) == CONFIGS[0]  # no defaults given: the first config
    assert [r.name for r in spec.space.restrictions] == ["autotune_configs"]
    problem = Problem(Shape(300, 200, 512), "bf16", "row", "col")
    found = cands.enumerate(registry, problem, FACTS, kernels=["tuned_triton"], triton=True)
    assert [dict(c.params) for c in found][0] == CONFIGS[0]
    assert sorted(tuple(sorted(c.params.items())) for c in found) == sorted(tuple(sorted(c.items())) for c in CONFIGS)
    assert all(c.source == "declared" for c in found) and found[1].name.startswith("tuned_triton[BLOCK_M=")
    # the product of the values the configs use has 3 x 3 x 2 x 2 x 3 x 3 = 324 points; the restriction keeps 3
    assert spec.space.size() == 324 and len(list(spec.space.points(spec.defaults))) == 3


def test_enumerate_offers_triton_kernels_only_where_triton_imports(monkeypatch, tmp_path):
    registry = load_registry(plugin_dirs=[str(_configs_plugin(tmp_path / "mine"))], entry_points=False)
    problem = Problem(Shape(256, 256, 256), "bf16", "row", "col")
    monkeypatch.setattr(triton_compile, "unavailable", lambda: "Triton is not installed; install gemmlab[triton]")
    rejected = []
    found = cands.enumerate(registry, problem, FACTS, rejected=rejected)
    assert not any(c.kernel in ("tuned_triton", NAME, "triton_matmul") for c in found) and found
    why = {r.kernel: r.why for r in rejected}
    assert why["tuned_triton"] == why[NAME] == "a Triton kernel: Triton is not installed; install gemmlab[triton]"
    monkeypatch.setattr(triton_compile, "unavailable", lambda: None)
    kernels = {c.kernel for c in cands.enumerate(registry, problem, FACTS)}
    assert {"tuned_triton", NAME, "triton_matmul"} <= kernels
    assert not {"tuned_triton", NAME} & {c.kernel for c in cands.enumerate(registry, problem, FACTS, triton=False)}


def test_config_params_reads_a_triton_config_by_its_attributes():
    config = SimpleNamespace(kwargs={"BLOCK_M": 64, "SUBTILE": True}, num_warps=4, num_stages=3, num_ctas=1,
                             maxnreg=None, pre_hook=None, ir_override=None)
    assert config_params(config) == {"BLOCK_M": 64, "SUBTILE": 1, "num_warps": 4, "num_stages": 3, "num_ctas": 1}
    defaults, space, values = configs_space([config, SimpleNamespace(**{**config.__dict__, "kwargs": {
        "BLOCK_M": 128, "SUBTILE": False}})])
    assert values == {"SUBTILE": (0, 1)} and defaults["SUBTILE"] == 1  # 0 is outside 1..4096: listed values


BAD_CONFIGS = {  # configs expression: what the one line says
    "string": ("'BLOCK_M=64'", "configs must be a non-empty list of triton.Config"),
    "mixed": ("CONFIGS[:1] + [dict(BLOCK_M=64)]", "configs[1] names BLOCK_M, configs[0] BLOCK_M, BLOCK_N"),
    "float": ("[dict(CONFIGS[0], BLOCK_K=0.5)]", "configs[0]: BLOCK_K=0.5: gemmlab parameters are ints"),
    "both": ("CONFIGS, space=__import__('gemmlab.contract.space', fromlist=['Space']).Space()",
             "give the autotune configs or a space, not both"),
    "pre_hook": ("[type('C', (), dict(kwargs=CONFIGS[0], num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, "
                 "pre_hook=print, ir_override=None))()]", "configs[0]: its pre_hook is set"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_malformed_configs_are_refused_in_one_line(tmp_path, case):
    expr, words = BAD_CONFIGS[case]
    folder = _configs_plugin(tmp_path / "bad", configs_expr=expr)
    with pytest.raises(ConfigError) as info:
        load_registry(plugin_dirs=[str(folder)], entry_points=False)
    text = str(info.value)
    assert "\n" not in text and "tuned_triton" in text and "declares configs=" in text and words in text, text


@pytest.mark.parametrize("hook, words", [("reset_to_zero", "sets reset_to_zero=['c_ptr']"),
                                         ("restore_value", "sets restore_value=['c_ptr']"),
                                         ("user_defined_pre_hook", "sets a pre_hook or post_hook")])
def test_autotune_hooks_are_refused_in_one_line(tmp_path, hook, words):
    """An @triton.autotune kernel (duck-typed: Triton's Autotuner attributes) whose hooks would
    touch the buffers between launches is refused when the plugin loads."""
    from gemmlab.contract.registry import triton_problem
    jit = SimpleNamespace(params=[], run=lambda *a, **k: None)
    tuner = SimpleNamespace(fn=jit, configs=[CONFIGS[0]], reset_to_zero=[], restore_value=[],
                            user_defined_pre_hook=False, user_defined_post_hook=False)
    setattr(tuner, hook, ["c_ptr"] if hook != "user_defined_pre_hook" else True)
    spec = TritonKernelSpec(name="tuned", kernel=tuner)
    field, _, why = triton_problem(spec)
    assert field == "kernel" and words in why and "\n" not in why


def test_an_autotuned_kernel_gives_its_configs():
    jit = SimpleNamespace(params=[], run=lambda *a, **k: None)
    tuner = SimpleNamespace(fn=jit, configs=CONFIGS, reset_to_zero=[], restore_value=[],
                            user_defined_pre_hook=False, user_defined_post_hook=False)
    spec = TritonKernelSpec(name="tuned", kernel=tuner)
    assert dict(spec.defaults) == CONFIGS[0] and len(list(spec.space.points(spec.defaults))) == 3
    from gemmlab.contract.registry import triton_jit
    assert triton_jit(tuner) is jit and triton_jit(SimpleNamespace(fn=None)) is None


AUTOTUNED_PLUGIN = '''
import triton
import triton.language as tl
from gemmlab.contract.hookspecs import TritonKernelSpec, hookimpl


@triton.autotune(configs=[triton.Config({"BLOCK_N": 64}, num_warps=2), triton.Config({"BLOCK_N": 32}, num_warps=1),
                          triton.Config({"BLOCK_N": 128}, num_warps=4, num_stages=2)], key=["N"])
@triton.jit
def rows_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_N: tl.constexpr):
    m = tl.program_id(0)
    for n0 in range(0, N, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
        for k in range(0, K):
            acc += tl.load(a_ptr + m * K + k) * tl.load(b_ptr + k * N + cols, mask=cols < N, other=0.0)
        tl.store(c_ptr + m * N + cols, acc, mask=cols < N)


class Rows(TritonKernelSpec):
    def grid(self, problem, params):
        return (problem.M,)


@hookimpl
def gemmlab_kernels():
    return [Rows(name="rows_autotuned", kernel=rows_kernel, sass_classes=("FFMA",), description="autotuned drop-in")]
'''


@needs_triton
def test_an_autotuned_dropin_runs_its_configs_as_candidates(tmp_path):
    """A user's @triton.autotune kernel, unchanged, in a plugin_dirs folder: its three configs are the
    candidates (num_stages taken from each config), and a non-first config compiles through the core."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "rows.py").write_text(textwrap.dedent(AUTOTUNED_PLUGIN))
    registry = load_registry(plugin_dirs=[str(folder)], entry_points=False)
    found = cands.enumerate(registry, Problem(Shape(31, 33, 17)), FACTS, kernels=["rows_autotuned"], triton=True)
    assert [c.params["BLOCK_N"] for c in found] == [64, 32, 128]  # the first config, then by distance from it
    assert dict(found[0].params) == {"BLOCK_N": 64, "num_warps": 2, "num_stages": 3, "num_ctas": 1}
    rec = run_point({"kernel": {"name": "rows_autotuned", **dict(found[-1].params)}, "mode": "compile",
                     "shape": [31, 33, 17], "plugin_dirs": [str(folder)]}, tmp_path / "p")
    assert rec["status"] == "compiled", rec.get("error")
    assert rec["compile"]["constexprs"]["BLOCK_N"] == found[-1].params["BLOCK_N"]
    assert f"num_warps={found[-1].params['num_warps']}" in rec["compile"]["options"]
