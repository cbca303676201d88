"""Grouped GEMM (issue 44): the config section, the size generators, the problem descriptions, the
per-group inputs and verification (a wrong group and a written padding row caught), the reference
grouped kernel through the whole pipeline on the fake GPU, and (gpu-marked) the baselines and the
reference kernel on a real GPU."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import gemmlab.gpu.device
from gemmlab.contract.grouped import Grouped
from gemmlab.contract.hookspecs import Problem, Shape
from gemmlab.errors import ConfigError
from gemmlab.run.pipeline import run_point
from gemmlab.stages import verify
from gemmlab.stages.config import check_field, parse_config
from gemmlab.stages.grouped import group_sizes
from gemmlab.stages.inputs import InputOptions, make_problem_inputs, storage_dtype
from tests.fakegpu import HostGpu

REF = importlib.import_module("gemmlab_plugins.grouped_ref")


def config(shape=(300, 40, 48), kernel="x", **grouped):
    return {"kernel": {"name": kernel}, "shape": list(shape), "grouped": grouped}


# --- config -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("grouped, field, words", [
    ({"kind": "ragged"}, "grouped.kind", "contiguous, masked, general"),
    ({"kind": "contiguous"}, "grouped.groups", "number of experts"),
    ({"kind": "contiguous", "sizes": [100, 100]}, "grouped.sizes", "shape=[200,40,48]"),
    ({"kind": "contiguous", "sizes": [100, -1]}, "grouped.sizes", "ints >= 0"),
    ({"kind": "contiguous", "sizes": [300], "groups": 2}, "grouped.groups", "lists 1 groups"),
    ({"kind": "masked", "sizes": [200, 100], "m_max": 150}, "grouped.m_max", ">= the largest"),
    ({"kind": "contiguous", "groups": 4, "m_max": 512}, "grouped.m_max", "masked only"),
    ({"kind": "masked", "shapes": [[300, 40, 48]]}, "grouped.shapes", "general only"),
    ({"kind": "general", "shapes": [[300, 40, 48], [1, 0, 4]]}, "grouped.shapes", "N_g and K_g >= 1"),
    ({"kind": "contiguous", "groups": 4, "generator": "pareto"}, "grouped.generator", "uniform, zipf"),
    ({"kind": "contiguous", "groups": 4, "exponent": 0}, "grouped.exponent", "[0.01, 16]"),
    ({"kind": "contiguous", "groups": 4, "align": 0}, "grouped.align", ">= 1"),
    ({"seed": 3}, "grouped.seed", "grouped GEMM only"),
    ({"kind": "contiguous", "groups": 4, "bogus": 1}, "grouped.bogus", "unknown key"),
], ids=lambda v: str(v)[:40])
def test_bad_grouped_config_is_one_line_naming_the_field(grouped, field, words):
    with pytest.raises(ConfigError) as err:
        parse_config(config(**grouped))
    text = str(err.value)
    assert text.startswith(f"{field}: ") and words in text and "\n" not in text


def test_grouped_refuses_fp8_and_a_column_major_a():
    with pytest.raises(ConfigError, match=r"^precision: .*grouped"):
        parse_config({**config(kind="contiguous", groups=2), "precision": "fp8"})
    with pytest.raises(ConfigError, match=r"^layout\.a: .*row-major"):
        parse_config({**config(kind="masked", groups=2), "layout": {"a": "col", "b": "row"}})


def test_general_shapes_fix_the_plain_shape():
    with pytest.raises(ConfigError, match=r"^shape: .*\[7, 16, 32\]"):
        parse_config(config(kind="general", shapes=[[3, 16, 8], [4, 8, 32]]))
    rc = parse_config(config((7, 16, 32), kind="general", shapes=[[3, 16, 8], [4, 8, 32]]))
    assert rc.grouped.shapes == ((3, 16, 8), (4, 8, 32)) and rc.problem.flops == 2 * (3 * 16 * 8 + 4 * 8 * 32)


@pytest.mark.parametrize("grouped, shape", [
    ({"kind": "contiguous", "sizes": [0, 0, 0]}, (0, 128, 64)),
    ({"kind": "masked", "sizes": [0, 0], "align": 64}, (0, 128, 64)),
    ({"kind": "contiguous", "groups": 8, "generator": "zipf", "seed": 3}, (0, 128, 64)),
    ({"kind": "general", "shapes": [[0, 16, 16], [0, 64, 64]]}, (0, 64, 64)),
], ids=["contiguous", "masked", "zipf", "general"])
def test_an_all_empty_grouped_step_has_m_0(grouped, shape):
    """An MoE step that routes no token to this GPU's experts (issue 44): shape's M = 0 with every
    M_g 0, no FLOP; the refusal of a size list that sums to 0 with M = 1 names the shape that is
    then accepted (both messages agree), and M = 0 stays refused for anything else in one line."""
    rc = parse_config(config(shape, **grouped))
    assert rc.shape.M == 0 and not any(rc.grouped.sizes) and rc.problem.flops == 0
    assert rc.grouped.record()["empty_groups"] == rc.grouped.G
    assert check_field("shape", list(shape)) == shape  # a value alone: M = 0 is the point's to decide
    from types import SimpleNamespace
    from gemmlab.run.config_check import check_values
    check_values(SimpleNamespace(key="shape", typed=[list(shape)]), None, empty_m=True)  # a grouped.* key given
    with pytest.raises(ConfigError, match=r"^shape: M must be a positive integer, got 0 .*all empty"):
        check_values(SimpleNamespace(key="shape", typed=[list(shape)]), None)  # the command makes no point grouped
    if "sizes" in grouped:
        with pytest.raises(ConfigError) as err:
            parse_config(config((1,) + shape[1:], **grouped))
        assert str(err.value).startswith("grouped.sizes: ") and f"give shape=[0,{shape[1]},{shape[2]}]" in str(err.value)


@pytest.mark.parametrize("cfg, field, words", [
    ({"kernel": {"name": "x"}, "shape": [0, 16, 16]}, "shape", "M must be a positive integer, got 0"),
    (config((0, 40, 48), kind="contiguous", sizes=[1, 0]), "grouped.sizes", "give shape=[1,40,48]"),
    (config((0, 40, 48), kind="general", shapes=[[2, 40, 48]]), "shape", "[sum M_g, max N_g, max K_g] = [2, 40, 48]"),
    ({"kernel": {"name": "x"}, "shape": [4, 0, 16]}, "shape", "N must be a positive integer"),
    ({"kernel": {"name": "x"}, "shape": [-1, 16, 16]}, "shape", "M must be a positive integer"),
], ids=["plain", "sizes", "shapes", "N", "negative"])
def test_m_0_is_refused_outside_an_all_empty_grouped_step(cfg, field, words):
    with pytest.raises(ConfigError) as err:
        parse_config(cfg)
    text = str(err.value)
    assert text.startswith(f"{field}: ") and words in text and "\n" not in text, text
    if field == "shape" and "M must" in words:
        assert "M=0 only for a grouped GEMM whose groups are all empty" in text


def test_the_record_names_kind_groups_sizes_generator_and_seed():
    rc = parse_config(config(kind="contiguous", groups=8, generator="zipf", seed=7, exponent=1.5, align=64))
    rec = rc.grouped.record()
    assert rec["kind"] == "contiguous" and rec["G"] == 8 and sum(rec["sizes"]) == 300 == rec["routed_rows"]
    assert rec["generator"] == "zipf" and rec["seed"] == 7 and rec["exponent"] == 1.5 and rec["align"] == 64
    assert rec["flops"] == 2 * 300 * 40 * 48 == rc.problem.flops
    assert parse_config(config(kind="masked", sizes=[100, 0, 200])).grouped.record()["generator"] == "list"


# --- generators -------------------------------------------------------------------------------------

def test_generators_sum_to_the_rows_and_differ_in_imbalance():
    uniform = group_sizes("uniform", 1001, 8)
    assert sum(uniform) == 1001 and max(uniform) - min(uniform) == 1
    zipf = group_sizes("zipf", 4096, 16, seed=1, exponent=1.5)
    assert sum(zipf) == 4096 and max(zipf) > 4 * 4096 / 16  # one expert far above the balanced share
    assert group_sizes("zipf", 4096, 16, seed=1, exponent=1.5) == zipf != group_sizes("zipf", 4096, 16, seed=2,
                                                                                      exponent=1.5)
    flatter = group_sizes("zipf", 4096, 16, seed=1, exponent=0.1)
    assert max(flatter) < max(zipf)
    one = group_sizes("all_but_one_empty", 500, 6, seed=8)
    assert one == (0, 0, 500, 0, 0, 0)
    with pytest.raises(ValueError):
        group_sizes("pareto", 10, 2)


# --- problem descriptions ---------------------------------------------------------------------------

def test_contiguous_layout_offsets_padding_and_untouched_rows():
    gr = Grouped("contiguous", (5, 0, 130, 3), N=24, K=40, align=16, layout_b="col")
    assert gr.row_offsets == (0, 16, 16, 160, 176)
    assert gr.stored_shape("A") == (176, 40) and gr.stored_shape("B") == (4 * 24, 40) and gr.stored_shape("C") == (176, 24)
    arrays = gr.arrays()
    assert list(arrays) == ["group_offsets", "group_m"] and arrays["group_offsets"].dtype == np.int32
    assert arrays["group_offsets"].tolist() == [[0, 16, 16, 160, 176]] and arrays["group_m"].tolist() == [[5, 0, 130, 3]]
    assert gr.untouched_ranges() == ((5 * 24, 16 * 24), (146 * 24, 160 * 24), (163 * 24, 176 * 24))
    assert gr.traffic == (gr.flops, 138 * 40 + 3 * 24 * 40, 138 * 24)  # the empty expert's B not read


def test_masked_and_general_layouts():
    gr = Grouped("masked", (5, 0, 30), N=8, K=4, align=16)
    assert gr.slot_rows == 32 and gr.stored_shape("C") == (96, 8) and list(gr.arrays()) == ["group_m"]
    assert gr.untouched_ranges() == ((5 * 8, 32 * 8), (32 * 8, 64 * 8), (94 * 8, 96 * 8))
    assert Grouped("masked", (5, 30), N=8, K=4, m_max=40).slot_rows == 40
    gen = Grouped("general", (3, 0, 2), N=0, K=0, nk=((16, 8), (4, 4), (8, 32)))
    off = gen.element_offsets
    assert all(o % 64 == 0 for t in off for o in t) and gen.arrays()["group_offsets"].dtype == np.int64
    assert gen.arrays()["group_dims"].tolist() == [[3, 16, 8], [0, 4, 4], [2, 8, 32]]
    for g, (m, n, _) in enumerate(gen.shapes):  # at least 64 untouched elements after every C_g
        assert off[g + 1][2] - (off[g][2] + m * n) >= 64
    p = Problem(Shape(5, 16, 32), "bf16", grouped=gen)
    assert p.stored_shape("C") == (1, off[-1][2]) and p.element_dtype("group_offsets") == "int64"


# --- inputs and verification ------------------------------------------------------------------------

def _correct_c(problem, inp):
    gr = problem.grouped
    c = np.empty(gr.stored_shape("C"), np.float32)
    c.view(np.uint32)[:] = 0xFFFFFFFF  # the core's NaN fill
    for g in range(gr.G):
        cg, ag, bg = gr.operands(c, inp.a, inp.b, g)
        cg[:] = (ag.astype(np.float64) @ bg.astype(np.float64)).astype(np.float32)
    return c


KINDS = [Grouped("contiguous", (5, 0, 70, 3), N=24, K=40, align=16, layout_b="col"),
         Grouped("masked", (9, 0, 20), N=24, K=40, align=8),
         Grouped("general", (5, 0, 11), N=0, K=0, nk=((24, 40), (8, 8), (16, 72)), layout_b="col")]


@pytest.mark.parametrize("gr", KINDS, ids=lambda g: g.kind)
def test_inputs_per_group_never_zero_nan_outside_and_reference_passes(gr):
    problem = Problem(Shape(sum(gr.sizes), 24, 72), "bf16", "row", gr.layout_b, grouped=gr)
    inp = make_problem_inputs(problem, InputOptions(seed=3))
    assert inp.a_stored.dtype == storage_dtype("bf16") and inp.a_stored.shape == gr.stored_shape("A")
    for g in range(gr.G):
        _, a_g, b_g = gr.operands(np.zeros(gr.stored_shape("C"), np.float32), inp.a, inp.b, g)
        assert np.isfinite(a_g).all() and (a_g != 0).all() and np.isfinite(b_g).all() and (b_g != 0).all()
    assert np.isnan(inp.a).any()  # padding / masked rows / gaps hold NaN
    c = _correct_c(problem, inp)
    v = verify.check(c, inp.a, inp.b, verify.VerifyOptions(), precision="bf16", grouped=gr)
    assert v.passed, v.summary()
    assert [e["mismatches"] for e in v.grouped["groups"]] == [0] * gr.G and v.grouped["untouched"]["written"] == 0


@pytest.mark.parametrize("gr", KINDS, ids=lambda g: g.kind)
def test_verification_catches_a_wrong_group_and_a_written_padding_element(gr):
    problem = Problem(Shape(sum(gr.sizes), 24, 72), "fp32", "row", gr.layout_b, grouped=gr)
    inp = make_problem_inputs(problem, InputOptions(seed=4))
    good = _correct_c(problem, inp)
    swapped = good.copy()  # group 2 computed with group 0's B (where the shapes allow: a wrong expert)
    cg, ag, _ = gr.operands(swapped, inp.a, inp.b, 2)
    _, _, b0 = gr.operands(swapped, inp.a, inp.b, 0)
    cg[:] = (ag @ b0[:, :cg.shape[1]]).astype(np.float32) if ag.shape[1] == b0.shape[0] else cg + 1
    v = verify.check(swapped, inp.a, inp.b, verify.VerifyOptions(), grouped=gr)
    assert not v.passed and v.grouped["failed_groups"] == [2] and v.grouped["groups"][2]["mismatches"] > 0
    assert "group 2" in v.summary()
    written = good.copy()
    start, _ = gr.untouched_ranges()[0]
    written.reshape(-1)[start] = 0.0  # a padding / masked / gap element written (even with a plausible value)
    v = verify.check(written, inp.a, inp.b, verify.VerifyOptions(), grouped=gr)
    assert not v.passed and v.mismatches == 0 and v.grouped["untouched"]["written"] == 1
    assert "must stay untouched" in v.summary()


def test_exact_rule_per_group_with_integers():
    rc = parse_config({**config((64, 16, 24), kind="contiguous", sizes=[40, 0, 24], align=32),
                       "inputs": {"distribution": "integers"}, "verify": {"tolerance": "exact"}})
    problem = rc.problem
    inp = make_problem_inputs(problem, rc.inputs)
    c = _correct_c(problem, inp)
    assert verify.check(c, inp.a, inp.b, rc.verify, "integers", grouped=problem.grouped).rule == "exact"
    c[problem.grouped.valid_rows(2).start + 1, 3] += 1  # one unit off in the last group
    v = verify.check(c, inp.a, inp.b, rc.verify, "integers", grouped=problem.grouped)
    assert not v.passed and v.grouped["failed_groups"] == [2]


# --- the reference kernel through the pipeline on the fake GPU ---------------------------------------

FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "graph"}


def _fake_point(tmp_path, monkeypatch, grouped, shape, precision="bf16", layout_b="col", behaviour=None, **extra):
    rc = parse_config({**config(shape, "grouped_ref", **grouped), "precision": precision,
                       "layout": {"a": "row", "b": layout_b}})
    kind, G = rc.grouped.kind, rc.grouped.G
    dtype = storage_dtype(precision)

    def run(gpu, args):
        REF.emulate(gpu, args, kind, dtype, layout_b == "col", G)

    gpu = HostGpu(behaviour={"grouped_ref_": behaviour or run})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    cfg = {"kernel": {"name": "grouped_ref"}, "shape": list(shape), "mode": "run", "timing": dict(FAST),
           "precision": precision, "layout": {"a": "row", "b": layout_b}, "grouped": grouped,
           "isolation": {"process": False}, **extra}
    return run_point(cfg, tmp_path / "point"), gpu


@pytest.mark.parametrize("grouped, shape, precision, layout_b", [
    ({"kind": "contiguous", "sizes": [17, 0, 40, 3], "align": 16}, (60, 24, 40), "bf16", "col"),
    ({"kind": "masked", "groups": 3, "generator": "zipf", "seed": 2, "align": 8}, (50, 16, 24), "fp16", "row"),
    ({"kind": "general", "shapes": [[5, 16, 8], [0, 8, 8], [9, 24, 40]]}, (14, 24, 40), "fp32", "col"),
], ids=["contiguous", "masked", "general"])
def test_reference_kernel_point_on_the_fake_gpu(tmp_path, monkeypatch, grouped, shape, precision, layout_b):
    rec, _ = _fake_point(tmp_path, monkeypatch, grouped, shape, precision, layout_b)
    assert rec["status"] == "ok", rec.get("error")
    assert rec["grouped"]["kind"] == grouped["kind"] and rec["flops"] == rec["grouped"]["flops"]
    v = rec["verification"]
    assert v["passed"] and v["grouped"]["untouched"]["written"] == 0 and len(v["grouped"]["groups"]) == rec["grouped"]["G"]
    assert rec["verification_after_timing"]["passed"] and rec["verification_after_timing"]["grouped"]
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"] is True
    assert rec["roofline"]["flops"] == rec["flops"]


@pytest.mark.parametrize("grouped, shape", [
    ({"kind": "contiguous", "sizes": [0, 0, 0], "align": 16}, (0, 24, 40)),
    ({"kind": "masked", "groups": 3, "generator": "zipf", "align": 8}, (0, 24, 40)),
    ({"kind": "general", "shapes": [[0, 16, 8], [0, 8, 8]]}, (0, 16, 8)),
], ids=["contiguous", "masked", "general"])
def test_an_all_empty_step_runs_on_the_fake_gpu(tmp_path, monkeypatch, grouped, shape):
    """Every M_g 0 (issue 44): the point runs, nothing to compute, C's padding / masked rows / gaps
    (all of C) untouched, guard bands intact; no FLOP, so GFLOP/s 0 and no arithmetic intensity."""
    rec, _ = _fake_point(tmp_path, monkeypatch, grouped, shape)
    assert rec["status"] == "ok", rec.get("error")
    assert rec["flops"] == 0 and rec["grouped"]["empty_groups"] == rec["grouped"]["G"]
    v = rec["verification"]
    assert v["passed"] and v["grouped"]["untouched"]["written"] == 0 and "no product to check" in v["method"]
    assert rec["guard_bands"] == "intact" and rec["verification_after_timing"]["passed"]
    assert rec["timing"]["gflops"] == 0 and rec["roofline"]["arithmetic_intensity"] is None
    assert rec["grouped"]["untouched_elements"] == (0 if grouped["kind"] == "contiguous" else
                                                    np.prod(parse_config(config(shape, **grouped)).grouped
                                                            .stored_shape("C")))


def test_fake_gpu_catches_a_write_into_an_all_empty_masked_step(tmp_path, monkeypatch):
    """All experts empty: every row of C is masked; a kernel that stores anything is wrong_result."""
    def sloppy(gpu, args):
        gpu.view(int(args[2]) + 4 * 24 * 8, 4).view(np.float32)[:] = 0.0  # slot 1's first row, column 0

    rec, _ = _fake_point(tmp_path, monkeypatch, {"kind": "masked", "sizes": [0, 0], "align": 8}, (0, 24, 40),
                         behaviour=sloppy)
    assert rec["status"] == "wrong_result" and "untouched" in rec["error"]
    assert rec["verification"]["grouped"]["untouched"]["written"] == 1


def test_fake_gpu_catches_a_kernel_that_writes_padding_rows(tmp_path, monkeypatch):
    """A grouped kernel that stores whole padded tiles (the padding rows of each expert): wrong_result."""
    grouped = {"kind": "contiguous", "sizes": [17, 0, 40, 3], "align": 16}
    inner = None

    def sloppy(gpu, args):
        inner(gpu, args)
        c, offsets = int(args[2]), gpu.view(int(args[3]), 4 * 5).view(np.int32)
        gpu.view(c + 4 * (17 * 24), 4 * 24).view(np.float32)[:] = 0.0  # row 17: expert 0's first padding row

    def run(gpu, args):
        REF.emulate(gpu, args, "contiguous", storage_dtype("bf16"), True, 4)

    inner = run
    rec, _ = _fake_point(tmp_path, monkeypatch, grouped, (60, 24, 40), behaviour=sloppy)
    assert rec["status"] == "wrong_result" and "untouched" in rec["error"]
    assert rec["verification"]["grouped"]["untouched"]["first_written"][0] == [17, 0]


def test_fake_gpu_catches_a_kernel_that_skips_a_group(tmp_path, monkeypatch):
    grouped = {"kind": "masked", "sizes": [10, 20, 30], "align": 8}

    def skip_last(gpu, args):
        REF.emulate(gpu, args, "masked", storage_dtype("bf16"), True, 2)  # grid z one short

    rec, _ = _fake_point(tmp_path, monkeypatch, grouped, (60, 24, 40), behaviour=skip_last)
    assert rec["status"] == "wrong_result"
    assert rec["verification"]["grouped"]["failed_groups"] == [2] and rec["verification"]["nan_outputs"] == 30 * 24


def test_plain_and_grouped_kernels_refuse_each_other(tmp_path, monkeypatch):
    rec = run_point({"kernel": {"name": "naive"}, "shape": [64, 16, 16], "mode": "compile",
                     "grouped": {"kind": "contiguous", "groups": 2}}, tmp_path / "a")
    assert rec["status"] == "invalid" and rec["error"].startswith("grouped.kind: kernel naive runs plain GEMMs only")
    rec = run_point({"kernel": {"name": "grouped_ref"}, "shape": [64, 16, 16], "mode": "compile"}, tmp_path / "b")
    assert rec["status"] == "invalid" and rec["error"].startswith("grouped.kind: kernel grouped_ref is a grouped")


# --- on a GPU ---------------------------------------------------------------------------------------

GPU_TIMING = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "graph"}
#: uneven groups with an empty one, M_g not a multiple of any tile (1, 127, 129, 300), an empty first group
GPU_CASES = [
    ({"kind": "contiguous", "sizes": [0, 1, 127, 129, 300], "align": 128}, (557, 200, 136)),
    ({"kind": "contiguous", "sizes": [45, 0, 0, 19], "align": 1}, (64, 136, 72)),
    ({"kind": "masked", "sizes": [3, 0, 64, 1], "align": 64}, (68, 264, 512)),
    ({"kind": "general", "shapes": [[33, 72, 40], [0, 16, 16], [130, 200, 136]]}, (163, 200, 136)),
    ({"kind": "contiguous", "sizes": [0, 0, 0], "align": 128}, (0, 136, 72)),  # no token routed: M = 0
]


def _gpu_point(tmp_path, kernel, grouped, shape, precision="bf16", layout_b="col", baseline=None, **extra):
    cfg = {"kernel": {"name": kernel}, "shape": list(shape), "mode": "run", "timing": dict(GPU_TIMING),
           "precision": precision, "layout": {"a": "row", "b": layout_b}, "grouped": grouped, "baseline": baseline,
           **extra}
    return run_point(cfg, tmp_path / "point")


@pytest.mark.gpu
@pytest.mark.parametrize("grouped, shape", GPU_CASES, ids=lambda v: str(v)[:30])
@pytest.mark.parametrize("precision, layout_b", [("bf16", "col"), ("fp16", "row"), ("fp32", "col")])
def test_gpu_reference_kernel_uneven_empty_groups_masked_rows_untouched(tmp_path, grouped, shape, precision, layout_b):
    rec = _gpu_point(tmp_path, "grouped_ref", grouped, shape, precision, layout_b)
    assert rec["status"] == "ok", rec.get("error")
    v = rec["verification"]["grouped"]
    assert v["untouched"]["written"] == 0 and all(e["passed"] for e in v["groups"])
    assert rec["verification_after_timing"]["passed"] and rec["guard_bands"] == "intact" and rec["inputs_unchanged"]


@pytest.mark.gpu
@pytest.mark.parametrize("grouped, shape", GPU_CASES, ids=lambda v: str(v)[:30])
def test_gpu_cublas_grouped_loop_baseline(tmp_path, grouped, shape):
    """The cuBLAS grouped baseline (one call per non-empty group) as the kernel, with grouped_ref as
    its baseline: both verified per group with untouched padding / masked rows, the graph replay
    checked (launch path); the all-empty step enqueues nothing (``no_work``)."""
    rec = _gpu_point(tmp_path, "cublas_grouped_loop", grouped, shape, baseline="grouped_ref")
    if rec["status"] == "unavailable":
        pytest.skip(rec["error"])
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["grouped"]["untouched"]["written"] == 0
    assert rec["launch_path"]["replay_verified"] and rec["baseline"]["verification"]["passed"]
    empty = not any(rec["grouped"]["sizes"])
    assert rec["launch_path"].get("no_work", False) is empty
    assert (rec["launch_path"]["captured_nodes"] == {}) is empty


@pytest.mark.gpu
@pytest.mark.parametrize("grouped, shape", GPU_CASES, ids=lambda v: str(v)[:30])
def test_gpu_cublas_grouped_is_refused_by_the_launch_path_net(tmp_path, grouped, shape):
    """cublasGemmGroupedBatchedEx uploads its host arrays of per-group sizes inside every call
    (H100 session 32: {'kernel': 1, 'mem alloc': 1, 'mem free': 1, 'memcpy host->device': 1}); a
    host->device copy inside a library's timed enqueue is refused: ``foreign_launch``, one line
    naming the copy (fp32; bf16 with a float32 C is refused by cuBLAS itself at planning, one line).
    The all-empty step makes no call: nothing to refuse."""
    empty = not any(parse_config(config(shape, "grouped_ref", **grouped)).grouped.sizes)
    refused = _gpu_point(tmp_path / "bf16", "cublas_grouped", grouped, shape, baseline="grouped_ref")
    if refused["status"] == "unavailable":
        pytest.skip(refused["error"])
    if not empty:  # cuBLAS 12.x's grouped-batched GEMM has no bf16 x bf16 -> float32 C form
        assert refused["status"] != "ok" and refused["error"].startswith("precision: cublasGemmGroupedBatchedEx "
                                                                         "refuses bf16 inputs with a float32 C")
        assert "\n" not in refused["error"]
    rec = _gpu_point(tmp_path, "cublas_grouped", grouped, shape, precision="fp32", baseline="grouped_ref")
    if empty:
        assert rec["status"] == "ok" and rec["launch_path"]["no_work"], rec.get("error")
        return
    assert rec["status"] == "foreign_launch", (rec["status"], rec.get("error"))
    error = rec["error"]
    assert error.startswith("launch path: cublas_grouped's captured enqueue has foreign nodes memcpy host->device")
    assert "\n" not in error and rec.get("launch_path", {}).get("captured_nodes", {}).get("memcpy host->device")


@pytest.mark.gpu
def test_gpu_reference_kernel_sanitizer_racecheck_clean(tmp_path):
    rec = _gpu_point(tmp_path, "grouped_ref", {"kind": "contiguous", "sizes": [5, 0, 40], "align": 16}, (45, 64, 32),
                     sanitizer="racecheck")
    if rec["status"] == "unavailable":
        pytest.skip(rec["error"])
    assert rec["status"] == "ok" and rec["sanitizer"]["verdict"] == "clean", rec.get("error")
