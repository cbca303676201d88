"""The float32 CUDA-core ladder (issue 8): ladder_tile2d, sgemm_block2d, sgemm_warptile,
sgemm_pipelined. CPU tests: ownership models (one owner per output, exact load coverage) over the
partial-tile suite and parameter variants, parameter rules, launch geometry, the block swizzle
being a bijection, and the ladder experiment's composition. GPU tests (marked ``gpu``): every rung
verifies on the partial-tile suite and is clean under compute-sanitizer racecheck and memcheck.
"""

from __future__ import annotations

import numpy as np
import pytest

from gemmlab.gpu.device import offline_facts
from gemmlab.contract.hookspecs import ParamError, Shape
from gemmlab.contract.registry import load_registry

FACTS = offline_facts("90")
REGISTRY = load_registry(entry_points=False)
PARTIAL = [Shape(1, 1, 1), Shape(31, 33, 17), Shape(63, 65, 33), Shape(4097, 1, 3), Shape(35, 79, 19),
           Shape(100, 100, 100), Shape(129, 260, 36)]
GENERAL = ["sgemm_block2d", "sgemm_warptile", "sgemm_pipelined"]


def params(name, **over):
    return {**REGISTRY.get(name).defaults, **over}


def check_model(name, shape, p):
    spec = REGISTRY.get(name)
    spec.check(shape, p, FACTS)
    stores, loads = spec.ownership(shape, p)
    assert stores.shape == (shape.M, shape.N) and stores.dtype == np.int64
    assert (stores == 1).all(), f"{name} {shape} {p}: {(stores == 0).sum()} unowned, {(stores > 1).sum()} owned twice"
    assert set(loads) >= {"A", "B"}
    for tile, hits in loads.items():
        assert hits.size and (hits == 1).all(), f"{name} staging of {tile}: {np.argwhere(hits != 1)[:3].tolist()}"
    return stores, loads


PIPE_1 = dict(BM=128, BN=256, BK=16, WM=64, WN=64, TM=16, TN=8, STAGES=4, GS=8, MINB=1)  # the first pass's default
VARIANTS = {
    "sgemm_block2d": [{}, dict(BM=128, BN=128, BK=8, TM=8, TN=8), dict(BM=64, BN=64, BK=16, TM=4, TN=4), dict(BM=128, BN=64, BK=16, TM=8, TN=4)],
    "sgemm_warptile": [{}, dict(BK=16), dict(WM=64, WN=32), dict(BM=64, BN=128, WM=32, WN=64)],
    "sgemm_pipelined": [{}, PIPE_1, dict(PIPE_1, BK=8), dict(PIPE_1, GS=1), dict(PIPE_1, BM=256, BN=128),
                        dict(PIPE_1, TM=8, TN=16, WM=32, WN=128),
                        dict(PIPE_1, BM=128, BN=128, WM=32, WN=64, TM=8, TN=8, GS=3), dict(PIPE_1, BK=32, STAGES=2, GS=5),
                        # the second pass's candidates (2 and 3 blocks per SM, deeper chunks)
                        dict(PIPE_1, BN=128, MINB=2), dict(PIPE_1, BN=128, WM=32, TM=8, MINB=2),
                        dict(PIPE_1, BN=128, WM=32, TM=8, MINB=2, BK=8), dict(PIPE_1, BK=32, STAGES=3),
                        dict(STAGES=3, GS=1),
                        # the fp32b candidates (.ci/fp32_final.py, removed in 1511331; MINB=4 became the default):
                        # 3 and 4 blocks/SM, BK 32, 3 stages
                        dict(MINB=3), dict(MINB=4, STAGES=3), dict(MINB=4, BK=32, STAGES=2),
                        dict(BK=32, STAGES=3, MINB=3), dict(BM=128, MINB=2, STAGES=3)],
}
# interior blocks whose K is not a multiple of BK (the pipelined rung's shifted first chunk)
INTERIOR = [Shape(512, 512, 100), Shape(384, 512, 777)]


@pytest.mark.parametrize("shape", PARTIAL + INTERIOR, ids=str)
@pytest.mark.parametrize("name, over", [(n, v) for n, vs in VARIANTS.items() for v in vs],
                         ids=lambda x: x if isinstance(x, str) else "-".join(f"{k}{v}" for k, v in x.items()) or "defaults")
def test_general_rungs_one_owner_and_exact_loads(name, over, shape):
    check_model(name, shape, params(name, **over))


@pytest.mark.parametrize("n", [64, 128, 320])
@pytest.mark.parametrize("bk", [4, 8, 16, 32, 64])
def test_ladder_tile2d_one_owner_and_exact_loads(n, bk):
    _, loads = check_model("ladder_tile2d", Shape(n, n, n), params("ladder_tile2d", BK=bk))
    assert loads["A"].shape == (64, bk) and loads["B"].shape == (bk, 64)


def test_staging_shapes():
    _, loads = check_model("sgemm_pipelined", Shape(300, 300, 300), params("sgemm_pipelined"))
    assert loads["A"].shape == (64, 16) and loads["B"].shape == (16, 128) and loads["C"].shape == (16, 64)
    _, loads = check_model("sgemm_block2d", Shape(300, 300, 300), params("sgemm_block2d"))
    assert loads["A"].shape == (64, 16) and loads["B"].shape == (16, 128)


def test_pipelined_column_major_a():
    """layout.a=col (issue 43): sgemm_pipelined declares it (B row-major), runs the
    ``gemm_sgemm_pipelined_acol`` twin with the same template arguments, stages A's K x M chunks by
    float4 (each element of the BK x BM tile once), and refuses in one line a tile whose A float4 do
    not split over the threads; the other layouts stay refused by the core (not declared)."""
    from gemmlab.contract.hookspecs import Problem
    s = REGISTRY.get("sgemm_pipelined")
    assert set(s.layouts) == {("row", "row"), ("col", "row")}
    p = params("sgemm_pipelined")
    col = Problem(Shape(300, 300, 300), "fp32", "col", "row")
    s.check_problem(col, p, FACTS)
    assert s.instance(col, p) == s.entry(p).replace("gemm_sgemm_pipelined<", "gemm_sgemm_pipelined_acol<")
    assert s.instance(Problem(Shape(300, 300, 300), "fp32", "row", "row"), p) == s.entry(p)
    _, loads = check_model("sgemm_pipelined", Shape(300, 300, 300), p)
    assert loads["A (column-major)"].shape == (16, 64)
    small = params("sgemm_pipelined", BM=32, BN=64, BK=8, WM=16, WN=32, TM=4, TN=4, MINB=1)
    s.check(Shape(64, 64, 64), small, FACTS)  # a row-major A takes it (4-byte copies) ...
    with pytest.raises(ParamError) as err:  # ... a column-major A's 64 float4 do not cover 128 threads
        s.check_problem(Problem(Shape(64, 64, 64), "fp32", "col", "row"), small, FACTS)
    assert err.value.field == "kernel.BK" and "layout.a=col" in str(err.value) and "\n" not in str(err.value)
    assert "A (column-major)" not in s.ownership(Shape(64, 64, 64), small)[1]


def test_pipelined_column_major_a_compiles():
    """The column-major-A entry compiles without spills or local memory, FFMA and 16-byte cp.async
    (LDGSTS) for A as for B (NVRTC, sm_90; no GPU)."""
    from gemmlab.contract.hookspecs import Problem
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    from gemmlab.paths import KERNELS_DIR
    s, p = REGISTRY.get("sgemm_pipelined"), params("sgemm_pipelined")
    problem = Problem(Shape(4096, 4096, 4096), "fp32", "col", "row")
    compiled = compile_kernel(KERNELS_DIR / s.source, s.instance(problem, p),
                              CompileOptions.for_kernel("90", s.options(problem, p, FACTS)), persistent=True)
    res, hist = compiled.resources, compiled.sass["histogram"]
    assert res.spill_store_bytes == 0 and res.spill_load_bytes == 0 and hist["LDL"] == 0 and hist["STL"] == 0, hist
    assert hist["FFMA"] > 0 and hist["LDGSTS"] > 0 and "gemm_sgemm_pipelined_acol" in compiled.sass_text


def test_pipelined_column_major_a_on_the_fake_gpu(tmp_path, monkeypatch):
    """The core stores A column-major (K x M) and the plugin runs the acol entry: a host model that
    reads A as K x M only under that entry's name verifies; the row-major entry's model (A read M x K)
    on the same point fails."""
    import gemmlab.gpu.device
    from fakegpu import HostGpu, unpack
    from gemmlab.run.pipeline import run_point

    def acol(gpu, args):
        a, b, c, m, n, k = unpack(args)
        A = gpu.floats(a, m * k).reshape(k, m).T.astype(np.float64)
        B = gpu.floats(b, k * n).reshape(k, n).astype(np.float64)
        gpu.floats(c, m * n).reshape(m, n)[:] = (A @ B).astype(np.float32)

    def run(behaviour):
        gpu = HostGpu(behaviour=behaviour)
        monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
        return run_point({"kernel": {"name": "sgemm_pipelined"}, "shape": [63, 65, 33], "mode": "run",
                          "layout": {"a": "col", "b": "row"}, "timing": dict(FAST, mode="events")}, tmp_path / str(len(behaviour)))

    rec = run({"gemm_sgemm_pipelined_acol": acol})
    assert rec["status"] == "ok" and rec["verification"]["passed"], rec.get("error")
    assert rec["compile"]["name_expression"].startswith("gemm_sgemm_pipelined_acol<")
    bad = run({})  # the row-major entry's model on the column-major A
    assert bad["status"] != "ok" and not bad["verification"]["passed"]


def test_model_has_teeth():
    """A pipelined model with a wrong epilogue stride (or an unfinished swizzle) is caught."""
    from gemmlab_plugins import sgemm
    spec = REGISTRY.get("sgemm_pipelined")
    good = spec.ownership(Shape(300, 520, 9), params("sgemm_pipelined"))[0]
    assert (good == 1).all()
    # a swizzle that maps every block of a group onto its first row: rows of blocks collide
    bm, bn = sgemm.swizzle(np.arange(3 * 3), 3, 3, 3)
    assert sorted(zip(bm.tolist(), bn.tolist())) == [(r, c) for r in range(3) for c in range(3)]
    wrong = sorted(zip((bm * 0).tolist(), bn.tolist()))
    assert len(set(wrong)) < 9


@pytest.mark.parametrize("gm, gn, gs", [(1, 1, 1), (7, 3, 2), (4, 5, 8), (33, 17, 8), (32, 32, 16), (9, 1, 4)])
def test_swizzle_is_a_bijection(gm, gn, gs):
    from gemmlab_plugins.sgemm import swizzle
    bm, bn = swizzle(np.arange(gm * gn), gm, gn, gs)
    assert bm.min() >= 0 and bm.max() < gm and bn.min() >= 0 and bn.max() < gn
    assert len(set(zip(bm.tolist(), bn.tolist()))) == gm * gn


def test_swizzle_groups_walk_columns():
    from gemmlab_plugins.sgemm import swizzle
    bm, bn = swizzle(np.arange(8), 4, 4, 4)
    assert bm.tolist() == [0, 1, 2, 3, 0, 1, 2, 3] and bn.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    bm, bn = swizzle(np.arange(4), 4, 4, 1)  # GS = 1: plain row-major block order
    assert bm.tolist() == [0, 0, 0, 0] and bn.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("name, over, shape, grid, block, smem", [
    ("ladder_tile2d", {}, Shape(512, 512, 512), (64, 1, 1), (256, 1, 1), 0),
    ("sgemm_block2d", {}, Shape(4097, 1, 3), (1, 65, 1), (256, 1, 1), 0),
    ("sgemm_warptile", {}, Shape(4096, 4096, 4096), (32, 32, 1), (256, 1, 1), 0),
    ("sgemm_pipelined", {}, Shape(4096, 4096, 4096), (64 * 32, 1, 1), (128, 1, 1), 50176),
    ("sgemm_pipelined", {}, Shape(4095, 4097, 1023), (64 * 33, 1, 1), (128, 1, 1), 50176),
    ("sgemm_pipelined", dict(BM=128, BN=256, WM=64, TM=16, MINB=1), Shape(4096, 4096, 4096), (512, 1, 1),
     (256, 1, 1), 99328),
])
def test_launch_geometry(name, over, shape, grid, block, smem):
    launch = REGISTRY.get(name).launch(shape, params(name, **over), FACTS)
    assert (launch.grid, launch.block, launch.shared_bytes) == (grid, block, smem)


@pytest.mark.parametrize("name, over, shape, field, words", [
    ("ladder_tile2d", dict(BK=6), Shape(128, 128, 128), "kernel.BK", "multiple of 4"),
    ("ladder_tile2d", {}, Shape(100, 100, 100), "shape", "multiple of 64"),
    ("ladder_tile2d", {}, Shape(128, 64, 128), "shape", "square"),
    ("sgemm_block2d", dict(TM=6), Shape(64, 64, 64), "kernel.TM", "ownership"),
    ("sgemm_block2d", dict(TN=2), Shape(64, 64, 64), "kernel.TN", "multiple of 4"),
    ("sgemm_block2d", dict(BK=4), Shape(64, 64, 64), "kernel.BK", "load coverage"),
    ("sgemm_block2d", dict(BM=256, BN=256, TM=4, TN=4), Shape(64, 64, 64), "kernel.TM", "exceeds the device limit"),
    ("sgemm_block2d", dict(BK=128), Shape(64, 64, 64), "kernel.BK", "shared memory"),
    ("sgemm_warptile", dict(WM=64), Shape(64, 64, 64), "kernel.TM", "32 lanes"),
    ("sgemm_warptile", dict(WM=48), Shape(64, 64, 64), "kernel.WM", "ownership"),
    ("sgemm_warptile", dict(BK=4), Shape(64, 64, 64), "kernel.BK", "load coverage"),
    ("sgemm_pipelined", dict(STAGES=1), Shape(64, 64, 64), "kernel.STAGES", "at least 2"),
    ("sgemm_pipelined", dict(BK=64, STAGES=8), Shape(64, 64, 64), "kernel.STAGES", "shared memory"),
    ("sgemm_pipelined", dict(MINB=17), Shape(64, 64, 64), "kernel.MINB", "threads per SM"),
    ("sgemm_pipelined", dict(BK=32, STAGES=4, MINB=3), Shape(64, 64, 64), "kernel.MINB", "do not fit"),
    ("sgemm_pipelined", dict(GS=0), Shape(64, 64, 64), "kernel.GS", "positive"),
    ("sgemm_pipelined", dict(TN=6, WN=48, BN=192), Shape(64, 64, 64), "kernel.TN", "multiple of 4"),
])
def test_check_rejects(name, over, shape, field, words):
    with pytest.raises(ParamError) as info:
        REGISTRY.get(name).check(shape, params(name, **over), FACTS)
    assert info.value.field == field and words in info.value.message, str(info.value)


@pytest.mark.parametrize("name", ["ladder_tile2d"] + GENERAL)
def test_conf_defaults_match_plugin(name):
    import yaml
    from gemmlab.paths import CONF_DIR
    conf = yaml.safe_load((CONF_DIR / "kernel" / f"{name}.yaml").read_text())
    assert conf.pop("name") == name
    assert conf == dict(REGISTRY.get(name).defaults)


def test_sgemm_ladder_experiment_composes():
    import hydra
    import gemmlab.cli.app
    import gemmlab.paths
    gemmlab.cli.app.register_resolvers()
    with hydra.initialize_config_dir(config_dir=str(gemmlab.paths.CONF_DIR), version_base="1.3"):
        cfg = hydra.compose("config", overrides=["experiment=sgemm_ladder"], return_hydra_config=True)
    params_ = cfg.hydra.sweeper.params
    kernels = params_.kernel.split(",")
    assert kernels == ["naive", "tiled", "ladder_starter", "ladder_strip", "ladder_tile2d", "sgemm_block2d",
                       "sgemm_warptile", "sgemm_pipelined"]
    assert cfg.baseline == "cublas" and cfg.timing.mode in ("graph", "both")
    assert params_.shape.count("[") == 6


# --- GPU ------------------------------------------------------------------------------------------

GPU_PARTIAL = [(1, 1, 1), (31, 33, 17), (63, 65, 33), (4097, 1, 3), (35, 79, 19), (100, 100, 100), (129, 260, 36)]
FAST = {"mode": "graph", "warmup": 1, "repeat": 3, "batch": 2, "floor": False}


def _cfg(kernel, shape, **over):
    return {"kernel": {"name": kernel}, "shape": list(shape), "mode": "run", "timing": FAST, **over}


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_PARTIAL, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kernel", GENERAL)
def test_general_rungs_verify_partial_tiles(kernel, shape, tmp_path):
    from gemmlab.run.pipeline import run_point
    rec = run_point(_cfg(kernel, shape), tmp_path)
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["passed"] and rec["verification"]["nan_outputs"] == 0
    assert rec["guard_bands"] == "intact"
    assert rec["compile"]["driver_attributes"]["local_bytes"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_PARTIAL + [(512, 512, 100), (384, 512, 777)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("over", [dict(BM=128, MINB=2), dict(MINB=4)], ids=lambda o: "-".join(f"{k}{v}" for k, v in o.items()))
def test_pipelined_lean_copy_verifies_partial_tiles(over, shape, tmp_path):
    """sgemm_pipelined's lean guarded copy (instances under 160 registers per thread) on the
    partial-tile suite and interior blocks with K % BK != 0."""
    from gemmlab.run.pipeline import run_point
    rec = run_point({**_cfg("sgemm_pipelined", shape), "kernel": {"name": "sgemm_pipelined", **over}}, tmp_path)
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["passed"] and rec["verification"]["nan_outputs"] == 0
    assert rec["guard_bands"] == "intact"


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_PARTIAL + [(512, 512, 100), (384, 512, 777), (64, 4096, 512)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("over", [{}, dict(BM=128, MINB=2), dict(PIPE_1)],
                         ids=lambda o: "-".join(f"{k}{v}" for k, v in o.items()) or "defaults")
def test_pipelined_column_major_a_verifies_partial_tiles(over, shape, tmp_path):
    """layout.a=col (issue 43): the acol entry on the partial-tile suite (M % 4 != 0: 4-byte copies of
    A; M % 4 == 0: 16-byte), interior blocks with K % BK != 0, the lean (MINB 2, 4) and full copies."""
    from gemmlab.run.pipeline import run_point
    rec = run_point({**_cfg("sgemm_pipelined", shape, layout={"a": "col", "b": "row"}),
                     "kernel": {"name": "sgemm_pipelined", **over}}, tmp_path)
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["passed"] and rec["verification"]["nan_outputs"] == 0
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    assert rec["compile"]["name_expression"].startswith("gemm_sgemm_pipelined_acol<")
    assert rec["compile"]["driver_attributes"]["local_bytes"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("n", [64, 128, 512])
def test_ladder_tile2d_verifies(n, tmp_path):
    from gemmlab.run.pipeline import run_point
    rec = run_point(_cfg("ladder_tile2d", (n, n, n)), tmp_path)
    assert rec["status"] == "ok", rec.get("error")


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["racecheck", "memcheck"])
@pytest.mark.parametrize("kernel, shape", [("ladder_tile2d", (64, 64, 64))] + [(k, (63, 65, 33)) for k in GENERAL])
def test_rungs_sanitizer_clean(kernel, shape, tool, tmp_path):
    from gemmlab.run.pipeline import run_point
    rec = run_point(_cfg(kernel, shape, sanitizer=tool), tmp_path)
    assert rec["sanitizer"]["verdict"] == "clean", rec["sanitizer"]
    assert rec["status"] == "ok", rec.get("error")


# --- compiled code (NVRTC, no GPU) ----------------------------------------------------------------

def _sass(compiled) -> str:
    """``nvdisasm -c``'s listing of ``compiled``'s cubin: the one :func:`compile_kernel` already
    made (:func:`gemmlab.gpu.sass.disassemble` runs ``nvdisasm -c`` on the cubin), not a second
    run of the disassembler. Skips (with the reason) without nvdisasm."""
    summary = compiled.sass or {}
    if summary.get("error") or not str(summary.get("disassembler") or "").startswith("nvdisasm"):
        pytest.skip(f"no nvdisasm listing ({summary.get('error') or summary.get('disassembler')}): "
                    "pip install nvidia-cuda-nvdisasm")
    return compiled.sass_text


SASS_EXPECT = {  # instruction classes each rung's shipped instance must contain
    "ladder_tile2d": ["LDG.E.128", "LDS.128", "STG.E.128"],
    "sgemm_block2d": ["LDG.E.128", "LDS.128", "STG.E.128"],
    "sgemm_warptile": ["LDG.E.128", "LDS.128", "STG.E.128"],
    "sgemm_pipelined": ["LDGSTS.E.BYPASS.128", "LDGSTS.E ", "LDS.128", "STS.128", "STG.E.128"],
}


#: The H200's NVRTC (the compiler of every measured figure).
DEVICE_NVRTC = "13.0"
#: Local-memory bytes a shipped instance may take under ANOTHER NVRTC than the device's: the
#: sgemm_pipelined default (64x128, 4 blocks/SM, 128 registers) is spill-free under NVRTC 13.0
#: (ptxas via the 13.0 wheel; ncu on the H200: 0 local-memory bytes, docs/results/ladder-h200.md
#: "Pass 3") but NVRTC 13.5 spills 8 bytes in its 4-byte B (N % 4 != 0) edge body.
LOCAL_BYTES_OFF_DEVICE = {"sgemm_pipelined": 8}


#: the shipped sgemm_pipelined instance, compiled (2-3 CPU s) and disassembled by
#: test_rungs_compile_without_spills_and_use_wide_accesses and test_pipelined_interior_loop_is_lean:
#: one pytest-xdist group, so one worker compiles it and the other test reads the session's disk
#: cache (tests/conftest.py) rather than both workers compiling it at the same time
PIPELINED_DEFAULT = pytest.mark.xdist_group("test_ladder::sgemm_pipelined_default")


@pytest.mark.parametrize("kernel", [pytest.param(k, marks=PIPELINED_DEFAULT) if k == "sgemm_pipelined" else k
                                    for k in sorted(SASS_EXPECT)])
def test_rungs_compile_without_spills_and_use_wide_accesses(kernel):
    """The shipped instance of each rung compiles for sm_90 with no local memory (ptxas: no spill,
    no stack frame; SASS: no LDL/STL) and uses the wide loads/stores and cp.async it is built on."""
    import re
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    spec = REGISTRY.get(kernel)
    compiled = compile_kernel(REGISTRY.source_path(spec), spec.entry(spec.defaults), CompileOptions(arch="90"),
                              persistent=True)  # the session's disk cache (tests/conftest.py)
    if compiled.resources is None:
        pytest.skip(f"NVRTC {compiled.nvrtc_version} returned no ptxas report")
    r = compiled.resources
    allowed = LOCAL_BYTES_OFF_DEVICE.get(kernel, 0) if compiled.nvrtc_version != DEVICE_NVRTC else 0
    assert max(r.spill_store_bytes, r.spill_load_bytes, r.stack_frame_bytes) <= allowed, r
    sass = _sass(compiled)
    assert allowed or not re.search(r"\b(LDL|STL)\b", sass), "local-memory access in SASS"
    for op in SASS_EXPECT[kernel]:
        assert op in sass, f"{kernel}: no {op.strip()} in SASS"


@pytest.mark.parametrize("kernel", ["ladder_tile2d", "sgemm_block2d", "sgemm_warptile", "sgemm_pipelined"])
def test_optuna_experiment_per_rung_composes(kernel):
    """experiment=optuna_<rung>: the Optuna sweeper over exactly the rung's parameters at 4096^3,
    cuBLAS alongside, and the rung's shipped defaults are one of the searched points."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    import hydra
    import gemmlab.cli.app
    import gemmlab.paths
    gemmlab.cli.app.register_resolvers()
    with hydra.initialize_config_dir(config_dir=str(gemmlab.paths.CONF_DIR), version_base="1.3"):
        cfg = hydra.compose("config", overrides=[f"experiment=optuna_{kernel}"], return_hydra_config=True)
    assert cfg.kernel.name == kernel and list(cfg.shape) == [4096, 4096, 4096] and cfg.baseline == "cublas"
    assert cfg.hydra.sweeper.direction == "maximize"
    params = cfg.hydra.sweeper.params
    assert {k.split(".", 1)[1] for k in params} == set(REGISTRY.get(kernel).defaults)
    for name, value in REGISTRY.get(kernel).defaults.items():
        choices = params[f"kernel.{name}"].removeprefix("choice(").removesuffix(")").split(",")
        assert value in [int(c) for c in choices], (name, value)


@pytest.mark.parametrize("over", [dict(BM=128, MINB=2), dict(BM=128, MINB=2, STAGES=3), dict(MINB=4, BK=32, STAGES=2)],
                         ids=lambda o: "-".join(f"{k}{v}" for k, v in o.items()))
def test_pipelined_lean_guarded_copy_has_no_spills(over):
    """At 128 registers per thread (256 threads x 2 blocks/SM, or 128 x 4) sgemm_pipelined takes its
    lean guarded copy (kernels/sgemm_pipelined.cu, LEAN): no local memory in any path. The 128x128
    8x8 2-blocks/SM instance spilled 16-28 bytes in its edge paths with the shipped instance's copy
    (docs/results/ladder-h200.md). (64x128 at 4 blocks/SM: spill-free under the H200's NVRTC 13.0,
    one 8-byte spill in the 4-byte B path under 13.5, so not listed here.)"""
    import re
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    spec = REGISTRY.get("sgemm_pipelined")
    p = params("sgemm_pipelined", **over)
    threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
    assert 65536 // (threads * p["MINB"]) < 160  # the kernel's LEAN condition holds
    compiled = compile_kernel(REGISTRY.source_path(spec), spec.entry(p), CompileOptions(arch="90"), persistent=True)
    if compiled.resources is None:
        pytest.skip(f"NVRTC {compiled.nvrtc_version} returned no ptxas report")
    r = compiled.resources
    assert r.registers <= 128 and (r.spill_store_bytes, r.spill_load_bytes, r.stack_frame_bytes) == (0, 0, 0), r
    sass = _sass(compiled)
    assert not re.search(r"\b(LDL|STL)\b", sass), "local-memory access in SASS"
    assert len(_main_loops(sass)) == 3  # the interior, edge and 4-byte B main loops are all there


def _main_loops(sass: str) -> list[list[str]]:
    """Bodies (SASS lines) of the loops ending in a backward branch that hold the most FFMA."""
    import re
    lines, labels, loops = sass.splitlines(), {}, []
    for i, line in enumerate(lines):
        m = re.match(r"^\s*\.?(L_x_\d+):", line)
        if m:
            labels[m.group(1)] = i
        m = re.search(r"\bBRA\b.*`\(\.?(L_x_\d+)\)", line)
        if m and m.group(1) in labels and labels[m.group(1)] <= i:
            loops.append([x for x in lines[labels[m.group(1)]:i + 1] if re.search(r"/\*[0-9a-f]+\*/\s+\S", x)])
    most = max((sum("FFMA" in x for x in body) for body in loops), default=0)
    return [body for body in loops if most and sum("FFMA" in x for x in body) == most]


def _lean_loop_figures(source, entry):
    """(fraction of 'other' instructions, predicated LDGSTS count) of the leanest main loop."""
    import re
    from gemmlab.gpu.compile import CompileOptions, compile_kernel
    sass = _sass(compile_kernel(source, entry, CompileOptions(arch="90"), persistent=True))
    best = None
    for body in _main_loops(sass):
        ops = [x for x in body if "@!PT" not in x]  # never executed (padding after LDGSTS)
        other = [x for x in ops if not re.search(r"\b(FFMA|LDS\.128|LDGSTS\S*|BAR\.SYNC\S*)\b", x)]
        guarded = [x for x in ops if "LDGSTS" in x and re.search(r",\s*!?P\d\s*;", x)]
        figures = (len(other) / len(ops), len(guarded))
        best = figures if best is None or figures < best else best
    return best


@PIPELINED_DEFAULT
def test_pipelined_interior_loop_is_lean():
    """sgemm_pipelined's lean addressing (issue 8, second pass): the interior main loop of the
    shipped instance issues its cp.async without predicates and at most 5% of its instructions
    are not FFMA, LDS.128, LDGSTS or the barrier (34 of 1135 with NVRTC 13.5, 35 of 1136 with the
    H200's 13.0); the first pass's code (.ci/ladder_v1) with the same parameters fails both."""
    from pathlib import Path
    spec = REGISTRY.get("sgemm_pipelined")
    entry = spec.entry(spec.defaults)
    other, guarded = _lean_loop_figures(REGISTRY.source_path(spec), entry)
    assert guarded == 0 and other <= 0.05, (other, guarded)
    old = Path(__file__).resolve().parents[1] / ".ci" / "ladder_v1" / "sgemm_pipelined_v1.cu"
    other, guarded = _lean_loop_figures(old, entry.replace("gemm_sgemm_pipelined<", "gemm_sgemm_pipelined_v1<"))
    assert guarded > 0 and other > 0.05, (other, guarded)
