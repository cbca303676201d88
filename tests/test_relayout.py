"""CPU tests of operand relayout (contract: ``Region``, ``TensorMap("workspace", region=...)``,
``Workspace(offset)``; helper :mod:`gemmlab.contract.relayout`; kernels of
kernels/include/gemmlab/relayout.cuh): the core's validation of workspace maps and offsets
(bounds, alignment, one-line errors naming the field), the plans wgmma_bf16 / wgmma_tf32 build per
shape and layout (direct TMA where the strides allow, a pad copy where not, the transpose for
TF32 row-major B), a replay of each copy kernel's index arithmetic (every destination element
written once, the pad zero, the values right), the record of a compiled relayout plan, and the
whole pipeline on the fake GPU with host models of the copies and of a GEMM that reads only
through its tensor maps (so wrong workspace offsets or addresses fail verification)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.contract import relayout
from gemmlab.contract import tma_rules
from gemmlab.contract.hookspecs import (Extra, Main, Matrix, Problem, Region, Shape, TensorMap, Value, Workspace)
from gemmlab.contract.registry import load_registry
from gemmlab.errors import ConfigError
from gemmlab.gpu.backends import check_arguments, describe_step
from gemmlab.gpu.device import offline_facts
from gemmlab.run.pipeline import run_point

FACTS = offline_facts("90")
REGISTRY = load_registry(entry_points=False)
SUITE = [Shape(1, 1, 1), Shape(31, 33, 17), Shape(63, 65, 33), Shape(4097, 1, 3), Shape(35, 79, 19),
         Shape(100, 100, 100), Shape(129, 260, 36)]
CASES = [("wgmma_bf16", "bf16", "col"), ("wgmma_bf16", "bf16", "row"), ("wgmma_tf32", "tf32", "col"),
         ("wgmma_tf32", "tf32", "row")]


def params(name, **over):
    return {**REGISTRY.get(name).defaults, **over}


# --- the contract: validation ---------------------------------------------------------------------

P = Problem(Shape(64, 64, 64), "bf16", "row", "col")


def region_map(**over):
    fields = {"offset": 0, "rows": 64, "cols": 64, "dtype": "bfloat16", **over}
    return TensorMap("workspace", (64, 64), region=Region(**fields))


def test_valid_workspace_map_is_described_with_its_offset():
    maps = check_arguments((region_map(offset=8192), Workspace(256)), P, 8192 + 64 * 64 * 2, "k")
    assert maps == [{"matrix": "workspace", "dtype": "bfloat16", "global": [64, 64], "row_stride_bytes": 128,
                     "box": [64, 64], "swizzle": "128B", "l2_promotion": "256B", "oob_fill": "zero",
                     "workspace_offset": 8192}]
    strided = check_arguments((region_map(cols=60, ld=64),), P, 64 * 64 * 2, "k")[0]
    assert strided["global"] == [64, 60] and strided["row_stride_bytes"] == 128


@pytest.mark.parametrize("args, workspace, words", [
    ((region_map(offset=8),), 1 << 20, "region.offset = 8 must be an int >= 0 and a multiple of 16"),
    ((region_map(offset=256),), 64 * 64 * 2, "past workspace_bytes = 8192"),
    ((region_map(rows=65),), 64 * 64 * 2, "past workspace_bytes"),
    ((region_map(cols=60),), 1 << 20, "region.ld = 60 x 2 B = 120 B is not a multiple of 16"),
    ((region_map(cols=60, ld=50),), 1 << 20, "region.ld = 50 must be 0 (packed) or >= region.cols = 60"),
    ((region_map(dtype="int8"),), 1 << 20, "region.dtype = 'int8'; allowed: float32, bfloat16, float16"),
    ((region_map(rows=0),), 1 << 20, "region.rows = 0 must be an int >= 1"),
    ((region_map(),), 0, "a TensorMap over the workspace needs workspace_bytes > 0"),
    ((TensorMap("workspace", (64, 64)),), 1 << 20, "TensorMap.region is required with matrix='workspace'"),
    ((TensorMap("A", (64, 64), region=Region(0, 64, 64, "bfloat16")),), 1 << 20, "not allowed with A, B or C"),
    ((TensorMap("D", (64, 64)),), 1 << 20, "matrix must be A, B, C or workspace"),
    ((Workspace(8),), 1024, "Workspace.offset = 8 must be an int, a multiple of 16 bytes and below workspace_bytes"),
    ((Workspace(1024),), 1024, "Workspace.offset = 1024"),
    ((region_map(), ), 64 * 64 * 2 - 16, "ends at 8192 B, past workspace_bytes = 8176"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_workspace_rules_are_one_line_errors_naming_the_field(args, workspace, words):
    with pytest.raises(ConfigError) as err:
        check_arguments(args, P, workspace, "k")
    assert err.value.field == "kernel" and words in str(err.value) and "\n" not in str(err.value)


def test_region_address_alignment_is_checked_when_built():
    with pytest.raises(ConfigError, match="16-byte aligned"):
        tma_rules.check(region_map(), P, address=0x1008)


def test_defaults_are_backwards_compatible():
    """Workspace() is the start of the workspace, TensorMap without region is over A/B/C."""
    assert Workspace() == Workspace(0) and TensorMap("A", (8, 8)).region is None
    text = describe_step(Extra("add_ws<1>", gemmlab.contract.hookspecs.Launch((3, 1, 1), (256, 1, 1))))
    assert text == "extra kernel add_ws<1> grid (3, 1, 1) block (256, 1, 1)"


# --- plans of the wgmma rungs ----------------------------------------------------------------------

def expected_kinds(precision, layout_b, shape):
    vec = 8 if precision == "bf16" else 4
    a = "pad" if shape.K % vec else "direct"
    if precision == "tf32" and layout_b == "row":
        b = "transpose"
    elif layout_b == "col":
        b = "pad" if shape.K % vec else "direct"
    else:
        b = "pad" if shape.N % vec else "direct"
    return a, b


@pytest.mark.parametrize("name, precision, layout_b", CASES, ids=str)
@pytest.mark.parametrize("shape", SUITE + [Shape(4096, 4096, 4096), Shape(4095, 4097, 1023), Shape(1000, 3000, 777),
                                           Shape(2047, 1025, 513)], ids=str)
def test_plan_per_shape_and_layout(name, precision, layout_b, shape):
    s, p = REGISTRY.get(name), params(name)
    problem = Problem(shape, precision, "row", layout_b)
    s.check_problem(problem, p, FACTS)  # no refusal: every shape has a path
    a, b = s.operands(problem, p, FACTS)
    assert (a.kind, b.kind) == expected_kinds(precision, layout_b, shape)
    plan = s.plan(problem, p, FACTS)
    copies = [op.copy for op in (a, b) if op.copy is not None]
    # the main step's note says where the default EPI=7 stores from registers (N % 4 != 0)
    main = Main("" if shape.N % 4 == 0 else f"epilogue from registers: N={shape.N} is not a multiple of 4; EPI=7 stages where it can")
    assert plan == (*copies, main)
    ws = s.workspace_bytes(problem, p, FACTS)
    args = s.arguments(problem, p, FACTS)
    assert args[:2] == (a.tensor_map, b.tensor_map)
    maps = check_arguments(args, problem, ws, name)
    for step in copies:
        check_arguments(step.arguments, problem, ws, name)
    if not copies:  # TMA-describable: the v2 plan and arguments of before, no workspace
        # C's map: the default EPI=7 (TMA-store epilogue) where N % 4 == 0
        assert plan == (main,) and ws == 0 and [m["matrix"] for m in maps] == ["A", "B"] + (["C"] if shape.N % 4 == 0 else [])
        return
    for op in (a, b):
        if op.region is None:
            continue
        assert op.tensor_map.matrix == "workspace" and op.region.offset % 256 == 0
        assert op.region.cols * problem.ab_bytes % 16 == 0 and op.end <= ws
        assert op.copy.arguments[0] == Matrix(op.matrix) and op.copy.arguments[1] == Workspace(op.region.offset)
    if a.region is not None and b.region is not None:
        assert b.region.offset >= a.end  # regions do not overlap
    transposed = precision == "tf32" and layout_b == "row"
    assert s.instance(problem, p).split(", ")[4] == str(int(layout_b == "row" and not transposed))
    if transposed:  # the K-major kernel instance on the N x Kp copy, box (BN, 32)
        assert b.region.rows == shape.N and b.region.cols == -(-shape.K // 4) * 4 and b.tensor_map.box == (256, 32)


def test_declared_layouts():
    four = {("row", "col"), ("row", "row"), ("col", "col"), ("col", "row")}  # layout.a=col too (issue 43)
    assert set(REGISTRY.get("wgmma_tf32").layouts) == four and set(REGISTRY.get("wgmma_bf16").layouts) == four


COL_A = [("wgmma_bf16", "bf16", "col"), ("wgmma_bf16", "bf16", "row"), ("wgmma_tf32", "tf32", "col"),
         ("wgmma_tf32", "tf32", "row")]


@pytest.mark.parametrize("name, precision, layout_b", COL_A, ids=str)
@pytest.mark.parametrize("shape", SUITE + [Shape(4096, 4096, 4096), Shape(4095, 4097, 1023)], ids=str)
def test_plan_of_a_column_major_a(name, precision, layout_b, shape):
    """layout.a=col (issue 43): bf16 reads A as stored (K x M, M-major, boxes of BK k-rows x 64
    m-columns), pad-copied where M's rows are not 16-byte multiples (M % 8 != 0); tf32 always reads
    the transposed K-major M x Kp copy (at the workspace's start, B's copy after it); B as for a
    row-major A. Every map and copy argument passes the core's checks."""
    s, p = REGISTRY.get(name), params(name)
    problem = Problem(shape, precision, "col", layout_b)
    s.check_problem(problem, p, FACTS)
    a, b = s.operands(problem, p, FACTS)
    if precision == "tf32":
        assert a.kind == "transpose" and (a.region.rows, a.region.cols) == (shape.M, -(-shape.K // 4) * 4)
        assert a.tensor_map.box == (128, 32) and a.region.offset == 0
    else:
        assert a.kind == ("pad" if shape.M % 8 else "direct") and a.tensor_map.box == (64, 64)
        if a.region is not None:
            assert (a.region.rows, a.region.cols) == (shape.K, -(-shape.M // 8) * 8)
    assert b.kind == expected_kinds(precision, layout_b, shape)[1]
    if a.region is not None and b.region is not None:
        assert b.region.offset >= a.end
    ws = s.workspace_bytes(problem, p, FACTS)
    check_arguments(s.arguments(problem, p, FACTS), problem, ws, name)
    for op in (a, b):
        if op.copy is not None:
            check_arguments(op.copy.arguments, problem, ws, name)
    major = int(layout_b == "row" and precision == "bf16") | (2 if precision == "bf16" else 0)
    assert s.instance(problem, p).split(", ")[4] == str(major)


def test_transpose_grid_limit_is_a_shape_error():
    """K past 64 x 65535 rows of copy blocks: the core's grid check names the shape."""
    from gemmlab.gpu.backends import check_launch
    problem = Problem(Shape(8, 8, 64 * 65536), "tf32", "row", "row")
    _, b = REGISTRY.get("wgmma_tf32").operands(problem, params("wgmma_tf32"), FACTS)
    with pytest.raises(ConfigError) as err:
        check_launch(b.copy.launch, FACTS, "wgmma_tf32 extra")
    assert err.value.field == "shape"


# --- the copy kernels' index arithmetic ----------------------------------------------------------

@pytest.mark.parametrize("name, precision, layout_b", CASES, ids=str)
@pytest.mark.parametrize("shape", SUITE + [Shape(300, 1030, 1023)], ids=str)
@pytest.mark.parametrize("layout_a", ["row", "col"])
def test_copies_write_every_element_once_with_a_zero_pad(name, precision, layout_b, shape, layout_a):
    problem = Problem(shape, precision, layout_a, layout_b)
    dtype = np.dtype(ml_dtypes.bfloat16) if precision == "bf16" else np.dtype(np.float32)
    rng = np.random.default_rng(1)
    for op in REGISTRY.get(name).operands(problem, params(name), FACTS):
        if op.copy is None:
            continue
        src = (rng.random(problem.stored_shape(op.matrix)) + 0.5).astype(dtype)  # no zeros in the source
        dst, writes = relayout.replay(op.copy, src)
        assert writes.shape == (op.region.rows, op.region.cols) and (writes == 1).all()
        view = src.T if op.kind == "transpose" else src
        np.testing.assert_array_equal(dst[:, :view.shape[1]], view)
        assert not dst[:, view.shape[1]:].astype(np.float32).any()  # the pad is zero


def test_replay_has_teeth():
    """A transpose grid one block column short leaves destination rows unwritten; the pad copy's
    grid-stride loop covers everything even on a smaller grid."""
    problem = Problem(Shape(64, 100, 33), "tf32", "row", "row")
    op = relayout.tma_operand(problem, "B", (256, 32), k_major=True)
    src = np.ones((33, 100), np.float32)
    short = Extra(op.copy.entry, gemmlab.contract.hookspecs.Launch((op.copy.launch.grid[0] - 1, op.copy.launch.grid[1], 1),
                                                                  (256, 1, 1)), op.copy.arguments)
    _, writes = relayout.replay(short, src)
    assert (writes == 0).any()
    pad = relayout.tma_operand(Problem(Shape(4097, 64, 3), "bf16", "row", "col"), "A", (128, 64))
    smaller = Extra(pad.copy.entry, gemmlab.contract.hookspecs.Launch((1, 1, 1), (256, 1, 1)), pad.copy.arguments)
    _, writes = relayout.replay(smaller, np.ones((4097, 3), np.float32).astype(ml_dtypes.bfloat16))
    assert (writes == 1).all()


def test_helper_argument_errors():
    with pytest.raises(ValueError, match="offset"):
        relayout.tma_operand(P, "A", (64, 64), offset=16)
    with pytest.raises(ValueError, match="A or B"):
        relayout.tma_operand(P, "C", (64, 64))


# --- the record of a relayout plan (mode=compile, NVRTC) -----------------------------------------

#: wgmma_tf32 with A pad-copied and B transposed: the record test below and the fake-GPU launch
#: test at (63, 65, 33) build the same program (instance and copy kernels): one pytest-xdist
#: group, so one worker compiles it once and the other test reads the session's disk cache
#: (tests/conftest.py), instead of both workers compiling it at the same time (about 1 CPU s a suite)
TF32_PAD_TRANSPOSE_GROUP = pytest.mark.xdist_group("test_relayout::wgmma_tf32_pad_transpose")


@pytest.mark.parametrize("kernel, precision, layout_b, shape, kinds", [
    ("wgmma_bf16", "bf16", "row", [129, 260, 36], ["pad", "pad"]),
    pytest.param("wgmma_tf32", "tf32", "row", [35, 79, 19], ["pad", "transpose"], marks=TF32_PAD_TRANSPOSE_GROUP),
], ids=str)
def test_compiled_record_shows_the_relayout(tmp_path, kernel, precision, layout_b, shape, kinds):
    rec = run_point({"kernel": {"name": kernel}, "shape": shape, "mode": "compile", "precision": precision,
                     "layout": {"a": "row", "b": layout_b}}, tmp_path / "r")
    assert rec["status"] == "compiled", rec.get("error")
    plan = rec["plan"]
    assert plan[-1].startswith("main kernel") and len(plan) == 3
    for line, kind, matrix in zip(plan, kinds, "AB"):
        assert line.startswith(f"relayout ({kind}) of {matrix} into workspace + ")
    assert [m["matrix"] for m in rec["tensor_maps"][:2]] == ["workspace", "workspace"]
    assert rec["workspace_bytes"] > 0
    assert set(rec["compile"]["extra_name_expressions"]) == {
        f"gemmlab::relayout_{k}<{2 if precision == 'bf16' else 4}{', 64, 32' if k == 'transpose' else ''}>"
        for k in kinds}
    assert any(i["name"] == "gemmlab/relayout.cuh" for i in rec["compile"]["includes"])
    hist = rec["compile"]["sass"]["histogram"]
    assert hist["HGMMA"] > 0 and hist["LDL"] == 0 and hist["STL"] == 0


# --- the pipeline on the fake GPU ----------------------------------------------------------------

def _bits(nbytes):
    return np.uint16 if nbytes == 2 else np.uint32


def _host_pad(e):
    def run(gpu, args):
        src, dst, rows, cols, ld_src, ld = (int(x) for x in args)
        s = gpu.view(src, rows * ld_src * e).view(_bits(e)).reshape(rows, ld_src)
        d = gpu.view(dst, rows * ld * e).view(_bits(e)).reshape(rows, ld)
        d[:] = 0
        d[:, :cols] = s[:, :cols]
    return run


def _host_transpose(gpu, args):
    src, dst, rows, cols, ld_src, ld = (int(x) for x in args)
    s = gpu.view(src, rows * ld_src * 4).view(np.uint32).reshape(rows, ld_src)
    d = gpu.view(dst, cols * ld * 4).view(np.uint32).reshape(cols, ld)
    d[:] = 0
    d[:, :rows] = s[:, :cols].T


def _through_map(gpu, tmap, problem_dtype, stored):
    """What the kernel's TMA reads: the region (workspace) or the matrix as stored."""
    tm = tmap.tm
    if tm.region is not None:
        r = tm.region
        dtype = np.dtype(ml_dtypes.bfloat16) if r.dtype == "bfloat16" else np.dtype(r.dtype)
        return gpu.view(tmap.address, r.rows * r.cols * dtype.itemsize).view(dtype).reshape(r.rows, r.cols)
    rows, cols = stored[tm.matrix]
    return gpu.view(tmap.address, rows * cols * problem_dtype.itemsize).view(problem_dtype).reshape(rows, cols)


def _tensor_core_view(x, problem):
    """What wgmma multiplies, in float64: TF32 reads float32 bits truncated to TF32 (the kernel's
    declared ``tf32_rounding="rz"``, measured on the H100), bf16 as stored."""
    if problem.precision == "tf32":
        from gemmlab.stages.verify import round_tf32
        x = round_tf32(np.ascontiguousarray(x, dtype=np.float32), "rz")
    return x.astype(np.float64)


def _major(gpu):
    """The MAJOR template argument of the wgmma instance being run (the fake GPU logs the name
    before it calls the behaviour): bit 0 B read N-major, bit 1 A read M-major."""
    return int(gpu.log[-1].split("<")[1].split(",")[4])


def _operands(gpu, ta, tb, problem, m, n, k):
    """A (m x k) and B (k x n) as the instance reads them through its maps, oriented by its MAJOR
    bits (not by the problem's layouts: an instance reading a map the wrong way gives a wrong C)."""
    dtype = np.dtype(ml_dtypes.bfloat16) if problem.precision == "bf16" else np.dtype(np.float32)
    stored = {x: problem.stored_shape(x) for x in "AB"}
    major = _major(gpu)
    a = _tensor_core_view(_through_map(gpu, ta, dtype, stored), problem)
    b = _tensor_core_view(_through_map(gpu, tb, dtype, stored), problem)
    A = a[:k, :m].T if major & 2 else a[:m, :k]  # M-major: stored K x M
    B = b[:k, :n] if major & 1 else b[:n, :k].T  # K-major: stored (or copied) N x K
    return A, B


def _host_wgmma(problem):
    def run(gpu, args):
        ta, tb, *rest = args  # EPI=7 (TMA-store entry): C's tensor map before the C pointer
        c, m, n, k = (int(x) for x in rest[-4:])
        A, B = _operands(gpu, ta, tb, problem, m, n, k)
        gpu.floats(c, m * n)[:] = (A @ B).astype(np.float32).ravel()
    return run


@pytest.mark.parametrize("kernel, precision, layout_b, shape", [
    ("wgmma_bf16", "bf16", "row", (31, 33, 17)), ("wgmma_bf16", "bf16", "col", (35, 79, 19)),
    pytest.param("wgmma_tf32", "tf32", "row", (63, 65, 33), marks=TF32_PAD_TRANSPOSE_GROUP),
    ("wgmma_tf32", "tf32", "row", (64, 64, 64)),
    ("wgmma_bf16", "bf16", "row", (64, 72, 64)),
], ids=str)
def test_pipeline_runs_the_copies_before_the_kernel_in_every_launch(tmp_path, monkeypatch, kernel, precision,
                                                                     layout_b, shape, sass_not_read):
    problem = Problem(Shape(*shape), precision, "row", layout_b)
    gpu = HostGpu(durations={"gemmlab::relayout": 0.25, "gemm_wgmma": 1.0},
                  behaviour={"gemmlab::relayout_pad<2>": _host_pad(2), "gemmlab::relayout_pad<4>": _host_pad(4),
                             "gemmlab::relayout_transpose<4": _host_transpose, "gemm_wgmma": _host_wgmma(problem)})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    rec = run_point({"kernel": {"name": kernel}, "shape": list(shape), "mode": "run", "precision": precision,
                     "layout": {"a": "row", "b": layout_b},
                     "timing": {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events", "floor": False}}, tmp_path / "r")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["passed"] and rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    copies = len(rec["plan"]) - 1
    s = REGISTRY.get(kernel)
    assert copies == sum(op.copy is not None for op in s.operands(problem, params(kernel), FACTS))
    log = gpu.log
    events = [i for i, e in enumerate(log) if e == "event"][:2 * 3]  # the 3 samples' (later: fresh-input timing)
    inside = [log[a + 1:b] for a, b in zip(events[::2], events[1::2])]
    assert inside and all(len(part) == 2 * (copies + 1) and part[copies].startswith("gemm_wgmma")
                          and all(x.startswith("gemmlab::relayout") for x in part[:copies]) for part in inside)
    assert rec["timing"]["protocols"]["events"]["samples_ms"] == [1.0 + 0.25 * copies] * 3  # the copies are timed
    if copies:
        assert rec["workspace_bytes"] > 0 and rec["plan"][0].startswith("relayout (")
    else:
        assert rec["plan"] == ["main kernel"] and rec["workspace_bytes"] == 0


COL_A_POINTS = [("wgmma_bf16", "bf16", "col", (35, 79, 24), {}),  # A pad-copied (M % 8 != 0), then read M-major
                ("wgmma_bf16", "bf16", "row", (64, 72, 64), {}),  # both read as stored, both transposed by wgmma
                ("wgmma_tf32", "tf32", "col", (63, 65, 33), {}),  # A transposed K-major, B pad-copied
                ("wgmma_tf32", "tf32", "row", (64, 64, 64), {})]  # both transposed


def _col_a_point(tmp_path, monkeypatch, kernel, precision, layout_b, shape, over):
    problem = Problem(Shape(*shape), precision, "col", layout_b)
    gpu = HostGpu(durations={"gemmlab::relayout": 0.25, "gemm_wgmma": 1.0, "wgmma_split_reduce": 0.5},
                  behaviour={"gemmlab::relayout_pad<2>": _host_pad(2), "gemmlab::relayout_pad<4>": _host_pad(4),
                             "gemmlab::relayout_transpose<4": _host_transpose,
                             "gemm_wgmma": _host_wgmma_slabs(problem, over["SPLIT_K"]) if over else _host_wgmma(problem),
                             "wgmma_split_reduce": _host_reduce})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    rec = run_point({"kernel": {"name": kernel, **over}, "shape": list(shape), "mode": "run", "precision": precision,
                     "layout": {"a": "col", "b": layout_b},
                     "timing": {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events", "floor": False}}, tmp_path / "r")
    return rec, gpu


@pytest.mark.parametrize("kernel, precision, layout_b, shape, over",
                         COL_A_POINTS + [("wgmma_bf16", "bf16", "col", (35, 79, 601), {"SPLIT_K": 4, "REDUCE": 2})], ids=str)
def test_pipeline_with_a_column_major_a(tmp_path, monkeypatch, kernel, precision, layout_b, shape, over, sass_not_read):
    """layout.a=col on the fake GPU (issue 43): the core stores A column-major (K x M), the copies run
    before the kernel in every timed launch, and a host model of the instance that reads A and B
    through its tensor maps in the orientation its MAJOR template argument says verifies."""
    rec, gpu = _col_a_point(tmp_path, monkeypatch, kernel, precision, layout_b, shape, over)
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["passed"] and rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    assert rec["layout"] == {"a": "col", "b": layout_b}
    problem = Problem(Shape(*shape), precision, "col", layout_b)
    ops = REGISTRY.get(kernel).operands(problem, params(kernel, **over), FACTS)
    copies = sum(op.copy is not None for op in ops)
    assert copies == len(rec["plan"]) - 1 - bool(over) and (copies > 0) == (precision == "tf32" or shape[0] % 8 != 0)
    assert all(x.startswith("relayout (") for x in rec["plan"][:copies])
    assert rec["timing"]["protocols"]["events"]["samples_ms"] == [1.0 + 0.5 * bool(over) + 0.25 * copies] * 3


def test_column_major_a_model_has_teeth(tmp_path, monkeypatch, sass_not_read):
    """The same point with the instance's A bit cleared (the row-major-A instance on the K x M stored A)
    fails verification: the host model reads A the way the instance says, not the way the problem is."""
    module = type(REGISTRY.get("wgmma_bf16"))
    real = module.major
    monkeypatch.setattr(module, "major", lambda self, problem: real(self, problem) & 1)
    rec, _ = _col_a_point(tmp_path, monkeypatch, "wgmma_bf16", "bf16", "row", (64, 72, 64), {})
    assert rec["status"] != "ok" and not rec["verification"]["passed"], rec.get("status")


def _host_wgmma_slabs(problem, split_k):
    """REDUCE=2 as kernels/wgmma_bf16.cu does it: slab r (of S, wgmma_slab_stride floats apart)
    gets the partial product of K slice S - 1 - r (kps k-tiles of 128 bytes each)."""
    bk = 64 if problem.precision == "bf16" else 32

    def run(gpu, args):
        ta, tb, w, m, n, k = args
        w, m, n, k = (int(x) for x in (w, m, n, k))
        kt = -(-k // bk)
        kps = -(-kt // split_k)
        S = -(-kt // kps)
        stride = -(-(m * n) // 64) * 64
        A, B = _operands(gpu, ta, tb, problem, m, n, k)
        for r in range(S):
            kb, ke = (S - 1 - r) * kps * bk, min(k, (S - r) * kps * bk)
            gpu.floats(w + 4 * r * stride, m * n)[:] = (A[:, kb:ke] @ B[kb:ke]).astype(np.float32).ravel()
    return run


def _host_reduce(gpu, args):
    w, c, m, n, s = (int(x) for x in args)
    stride = -(-(m * n) // 64) * 64
    acc = gpu.floats(w, m * n).copy()
    for r in range(1, s):
        acc += gpu.floats(w + 4 * r * stride, m * n)
    gpu.floats(c, m * n)[:] = acc


@pytest.mark.parametrize("kernel, precision, layout_b, shape", [
    ("wgmma_bf16", "bf16", "row", (31, 33, 1001)), ("wgmma_bf16", "bf16", "col", (35, 79, 601)),
    ("wgmma_tf32", "tf32", "row", (63, 65, 330)),
], ids=str)
def test_pipeline_reduce2_slabs_after_the_copies(tmp_path, monkeypatch, kernel, precision, layout_b, shape,
                                                sass_not_read):
    """SPLIT_K with REDUCE=2 on the fake GPU: copies, the kernel writing its slabs through the
    Workspace(offset) argument, the reduce step summing them into C, all in every timed launch;
    slabs placed over the copies' regions (a wrong offset) would corrupt the copies and fail."""
    problem = Problem(Shape(*shape), precision, "row", layout_b)
    gpu = HostGpu(durations={"gemmlab::relayout": 0.25, "gemm_wgmma": 1.0, "wgmma_split_reduce": 0.5},
                  behaviour={"gemmlab::relayout_pad<2>": _host_pad(2), "gemmlab::relayout_pad<4>": _host_pad(4),
                             "gemmlab::relayout_transpose<4": _host_transpose, "gemm_wgmma": _host_wgmma_slabs(problem, 4),
                             "wgmma_split_reduce": _host_reduce})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    rec = run_point({"kernel": {"name": kernel, "SPLIT_K": 4, "REDUCE": 2}, "shape": list(shape), "mode": "run",
                     "precision": precision, "layout": {"a": "row", "b": layout_b},
                     "timing": {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events", "floor": False}}, tmp_path / "r")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["passed"] and rec["guard_bands"] == "intact" and rec["inputs_unchanged"]
    copies = len(rec["plan"]) - 2
    assert copies >= 1 and rec["plan"][-2].startswith("main kernel") and "wgmma_split_reduce" in rec["plan"][-1]
    assert rec["timing"]["protocols"]["events"]["samples_ms"] == [1.5 + 0.25 * copies] * 3
