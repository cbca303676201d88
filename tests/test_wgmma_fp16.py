"""CPU tests of ``precision=fp16`` through ``wgmma_bf16`` (issue 41 item 3, "fp16 like bf16"): the
plugin declares fp16; an fp16 problem gets the bf16 problem's launch plan, arguments, TMA boxes,
workspace and rules, with the fp16 entries (``gemm_wgmma_f16`` / ``gemm_wgmma_tma_store_f16``, same
template arguments) and FLOAT16 tensor maps; each fp16 build compiles (NVRTC, sm_90a) to the SASS of
the bf16 build of the same parameters except the HGMMA type (``HGMMA.64xNx16.F32`` for f16,
``.F32.BF16`` for bf16: nvdisasm prints no suffix for f16 operands), with the same registers and no
spills; ``kernel=auto``'s rules choose for fp16 what they choose for bf16, and fp16 decode stays on
``decode_bf16``. GPU runs: tests/test_gpu_wgmma.py (the fp16 section)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gemmlab.contract import tma_rules
from gemmlab.contract.hookspecs import Extra, ParamError, Problem, Shape, TensorMap
from gemmlab.contract.registry import load_registry
from gemmlab.gpu.compile import CompileOptions, compile_kernel
from gemmlab.gpu.device import offline_facts
from gemmlab.paths import KERNELS_DIR

FACTS = offline_facts("90")
REGISTRY = load_registry(entry_points=False)
SPEC = REGISTRY.get("wgmma_bf16")
LAYOUTS = (("row", "col"), ("row", "row"), ("col", "col"), ("col", "row"))
#: every path of the kernel: the epilogues, split K with both reductions, the stream-K tail in both
#: orders, ping-pong, the 2-CTA cluster, 256-row tiles
VARIANTS = ({}, {"EPI": 1}, {"EPI": 2}, {"EPI": 3}, {"EPI": 4}, {"EPI": 5}, {"SPLIT_K": 3},
            {"SPLIT_K": 4, "REDUCE": 2}, {"TAIL": 2}, {"TAIL": 3}, {"SCHED": 2, "BN": 128, "STAGES": 6},
            {"SCHED": 2, "BM": 64}, {"CLUSTER": 2}, {"BM": 256, "BN": 128})


def params(**over):
    return {**SPEC.defaults, **over}


def as_bf16(steps) -> list:
    """``steps`` (arguments or plan steps) with every workspace region's float16 element type read as
    bfloat16: an fp16 plan equals the bf16 one after this, and only then (the regions' dtype is checked
    separately)."""
    import dataclasses

    def one(x):
        if isinstance(x, TensorMap) and x.region is not None and x.region.dtype == "float16":
            return dataclasses.replace(x, region=dataclasses.replace(x.region, dtype="bfloat16"))
        if isinstance(x, Extra):
            return dataclasses.replace(x, arguments=tuple(one(a) for a in x.arguments))
        return x
    return [one(x) for x in steps]


def regions(steps) -> set:
    """The element types of the workspace regions named in ``steps`` (tensor maps and Extra steps' arguments)."""
    out = set()
    for x in steps:
        for a in (x.arguments if isinstance(x, Extra) else (x,)):
            region = getattr(a, "region", None)
            if region is not None:
                out.add(region.dtype)
    return out


def f16_name(bf16_instance: str) -> str:
    """The fp16 entry of a bf16 instance: ``gemm_wgmma<...>`` -> ``gemm_wgmma_f16<...>`` (and the TMA-store entry)."""
    base, args = bf16_instance.split("<", 1)
    return f"{base}_f16<{args}"


def test_declared():
    """wgmma_bf16 serves bf16 and fp16 in all four layouts and says so; wgmma_tf32 stays tf32."""
    assert SPEC.precisions == ("bf16", "fp16") and set(SPEC.layouts) == set(LAYOUTS)
    assert "FP16" in SPEC.description and "BF16" in SPEC.description
    assert REGISTRY.get("wgmma_tf32").precisions == ("tf32",)


@pytest.mark.parametrize("layout", LAYOUTS, ids="/".join)
@pytest.mark.parametrize("shape", [Shape(300, 264, 200), Shape(35, 79, 19), Shape(2100, 2050, 1000)], ids=str)
def test_fp16_plan_is_the_bf16_plan_with_the_f16_entries(layout, shape):
    """Per layout, shape (TMA-describable, padded: K, M, N odd) and variant: the same plan (pad copies
    of 2-byte rows, the reduce step), arguments (tensor-map boxes, the workspace's regions), launch,
    workspace bytes and notes; only the main entry's name differs (``_f16``). Where a variant does not
    fit the shape, both refuse it with the same one-line error."""
    seen = set()
    for over in VARIANTS:
        p = params(**over)
        bf, fp = Problem(shape, "bf16", *layout), Problem(shape, "fp16", *layout)
        try:
            SPEC.check_problem(bf, p, FACTS)
        except ParamError as exc:
            with pytest.raises(ParamError) as err:
                SPEC.check_problem(fp, p, FACTS)
            assert (err.value.field, str(err.value)) == (exc.field, str(exc))
            continue
        SPEC.check_problem(fp, p, FACTS)
        name = SPEC.instance(bf, p)
        assert SPEC.instance(fp, p) == f16_name(name) and name.startswith(("gemm_wgmma<", "gemm_wgmma_tma_store<"))
        seen.add(name.split("<")[0])
        fp_args, bf_args = SPEC.arguments(fp, p, FACTS), SPEC.arguments(bf, p, FACTS)
        fp_plan, bf_plan = SPEC.plan(fp, p, FACTS), SPEC.plan(bf, p, FACTS)
        assert as_bf16(fp_args) == list(bf_args) and as_bf16(fp_plan) == list(bf_plan)
        assert regions(fp_args) | regions(fp_plan) <= {"float16"} and regions(bf_args) | regions(bf_plan) <= {"bfloat16"}
        assert SPEC.geometry(fp, p, FACTS) == SPEC.geometry(bf, p, FACTS)
        assert SPEC.workspace_bytes(fp, p, FACTS) == SPEC.workspace_bytes(bf, p, FACTS)
        assert SPEC.options(fp, p, FACTS) == SPEC.options(bf, p, FACTS)
    assert seen, "no variant fits the shape: the test compared nothing"


def test_tensor_maps_move_float16():
    """The maps of A and B (and of their pad copies in the workspace) describe float16 elements for
    fp16 and bfloat16 for bf16 (same boxes and strides); gemmlab.gpu.tma hands float16 to cuda.core
    as numpy's float16, which cuda.core encodes as CU_TENSOR_MAP_DATA_TYPE_FLOAT16 (bf16 as before)."""
    from gemmlab.gpu.tma import element_type
    for shape, layout, copies in ((Shape(300, 264, 200), ("row", "col"), 0), (Shape(35, 80, 19), ("col", "col"), 2)):
        described = {}
        for precision in ("bf16", "fp16"):
            problem = Problem(shape, precision, *layout)
            p = params()
            ws = SPEC.workspace_bytes(problem, p, FACTS)
            maps = [a for a in SPEC.arguments(problem, p, FACTS) if isinstance(a, TensorMap)]
            described[precision] = [tma_rules.check(tm, problem, workspace_bytes=ws) for tm in maps]
        want = {"bf16": "bfloat16", "fp16": "float16"}
        for precision, descs in described.items():
            assert [d["dtype"] for d in descs[:2]] == [want[precision]] * 2 and descs[2]["dtype"] == "float32"
            assert sum(d["matrix"] == "workspace" for d in descs) == copies
        strip = [{k: v for k, v in d.items() if k != "dtype"} for d in described["fp16"]]
        assert strip == [{k: v for k, v in d.items() if k != "dtype"} for d in described["bf16"]]
    assert element_type("float16") == ("<f2", np.dtype(np.float16))
    typestr, bf = element_type("bfloat16")
    assert typestr == "<u2" and bf.name == "bfloat16" and bf != np.dtype(np.float16)
    tensor_map = pytest.importorskip("cuda.core._tensor_map")
    table = getattr(tensor_map, "_NUMPY_DTYPE_TO_TMA", None)
    if table is None:
        pytest.skip("this cuda.core keeps no numpy-dtype table to check against")
    assert table[np.dtype(np.float16)] == tensor_map.TensorMapDataType.FLOAT16
    if bf in table:  # cuda.core adds ml_dtypes' bfloat16 where it imports it
        assert table[bf] == tensor_map.TensorMapDataType.BFLOAT16


# --- compiles: the fp16 build is the bf16 build with wgmma's f16 form -------------------------------------

#: (layout, shape, parameters over the defaults, HGMMA count): the default (EPI=7 deferred halves) in every
#: layout's transpose bits, ping-pong with the cluster, the TMA reduce-add chain, workspace slabs, the tail
#: with the register epilogue, staged stores, the held stage, and a padded shape (register epilogue)
COMPILE_PAIRS = [
    (("row", "col"), (4096, 4096, 4096), {}, 8),
    (("col", "row"), (4096, 4096, 4096), {}, 8),
    (("row", "row"), (4096, 4096, 4096), {"CLUSTER": 2, "SCHED": 2, "BN": 128}, 8),
    (("row", "col"), (4096, 4096, 4096), {"SPLIT_K": 4}, 4),
    (("row", "col"), (4096, 4096, 4096), {"SPLIT_K": 16, "REDUCE": 2, "BN": 128}, 4),
    (("row", "col"), (4096, 4096, 4096), {"TAIL": 2, "EPI": 1}, 4),
    (("row", "col"), (4096, 4096, 4096), {"EPI": 4}, 4),
    (("col", "col"), (4096, 4096, 4096), {"EPI": 5, "CLUSTER": 2}, 4),
    (("row", "col"), (1000, 1001, 999), {"TAIL": 3}, 4),
]


def _compile(precision: str, layout, shape, over):
    problem, p = Problem(Shape(*shape), precision, *layout), params(**over)
    SPEC.check_problem(problem, p, FACTS)
    extra = tuple(s.entry for s in SPEC.plan(problem, p, FACTS) if isinstance(s, Extra))
    return compile_kernel(KERNELS_DIR / SPEC.source, SPEC.instance(problem, p),
                          CompileOptions.for_kernel("90", SPEC.options(problem, p, FACTS)), persistent=True,
                          extra_names=extra)  # the session's disk cache (tests/conftest.py)


def _code(sass_text: str) -> list[str]:
    """The instructions in order, addresses, encodings and symbol names (the entries' mangled names) dropped."""
    out = []
    for line in sass_text.splitlines():
        line = re.sub(r"/\*[0-9a-f]{4,}\*/|/\* 0x[0-9a-f]+ \*/", "", line)
        line = re.sub(r"_Z\w+", "<symbol>", line).strip()
        if line:
            out.append(line)
    return out


@pytest.mark.parametrize("layout, shape, over, hgmma", COMPILE_PAIRS, ids=str)
def test_fp16_build_is_the_bf16_build_with_f16_hgmma(layout, shape, over, hgmma):
    bf, fp = _compile("bf16", layout, shape, over), _compile("fp16", layout, shape, over)
    for c in (bf, fp):
        res, hist = c.resources, c.sass["histogram"]
        assert res is not None and res.spill_store_bytes == 0 and res.spill_load_bytes == 0 and res.stack_frame_bytes == 0
        assert hist["HGMMA"] == hgmma and hist["UTMALDG"] >= 2 and hist["LDL"] == 0 and hist["STL"] == 0, hist
        assert c.sass["wgmma"]["serialized"] == 0 and c.sass["warning"] is None, c.sass["wgmma"]
    assert fp.resources.registers == bf.resources.registers
    bf_mma = re.findall(r"HGMMA\.[^ ;]*", bf.sass_text)
    fp_mma = re.findall(r"HGMMA\.[^ ;]*", fp.sass_text)
    assert len(bf_mma) == len(fp_mma) == hgmma
    assert all(x.endswith(".F32.BF16") for x in bf_mma), bf_mma
    assert all(x.endswith(".F32") for x in fp_mma) and ".BF16" not in fp.sass_text, fp_mma
    # instruction for instruction the bf16 program but for the operand type of each HGMMA
    assert _code(fp.sass_text) == [line.replace(".F32.BF16 ", ".F32 ") for line in _code(bf.sass_text)]
    lines = re.findall(r"HGMMA\.[^;]*", fp.sass_text)  # the transpose bits: A column-major, B row-major
    assert all((".tnspA" in x) == (layout[0] == "col") and (".tnspB" in x) == (layout[1] == "row") for x in lines), lines


def test_code_comparison_has_teeth():
    """_code tells a changed instruction, a dropped one and another order apart; it ignores addresses,
    encodings and symbol names only."""
    a = "/*0010*/ HGMMA.64x128x16.F32.BF16 R24, gdesc[UR28], R24 ; /* 0x0000 */\n/*0020*/ BAR.SYNC 0x1 ;\n"
    assert _code(a) == _code(a.replace("/*0010*/", "/*0a10*/").replace("0x0000", "0xffff"))
    assert _code(a) != _code(a.replace("R24,", "R26,")) and _code(a) != _code(a.split("\n", 1)[1])
    assert _code("_Z10gemm_wgmmaILi2E: ;") == _code("_Z14gemm_wgmma_f16ILi2E: ;")


@pytest.mark.parametrize("layout, shape, entry, copies", [
    (("row", "col"), [35, 79, 24], "gemm_wgmma_f16<", []),             # N % 4 != 0: the register epilogue
    (("row", "row"), [63, 72, 40], "gemm_wgmma_tma_store_f16<", []),
    (("col", "col"), [35, 80, 19], "gemm_wgmma_tma_store_f16<", ["pad", "pad"]),   # M and K odd: A and B padded
], ids=str)
def test_mode_compile_record(tmp_path, layout, shape, entry, copies):
    """gemmlab's pipeline in mode=compile with precision=fp16: sm_90a, HGMMA (f16) + UTMALDG, no
    local memory, the fp16 entry, float16 tensor maps of A and B (or of their pad copies)."""
    from gemmlab.run.pipeline import run_point
    rec = run_point({"kernel": {"name": "wgmma_bf16"}, "shape": shape, "mode": "compile", "precision": "fp16",
                     "layout": {"a": layout[0], "b": layout[1]}}, tmp_path / "run")
    assert rec["status"] == "compiled", rec.get("error")
    assert rec["compile"]["arch"] == "sm_90a" and rec["compile"]["name_expression"].startswith(entry)
    hist = rec["compile"]["sass"]["histogram"]
    assert hist["HGMMA"] > 0 and hist["UTMALDG"] > 0 and hist["LDL"] == 0 and hist["STL"] == 0, hist
    kinds = [line.split("(")[1].split(")")[0] for line in rec["plan"][:-1]]
    assert kinds == copies, rec["plan"]
    assert [m["dtype"] for m in rec["tensor_maps"][:2]] == ["float16", "float16"], rec["tensor_maps"]


# --- kernel=auto: fp16 like bf16 -----------------------------------------------------------------------

AUTO_SHAPES = [Shape(1, 4096, 4096), Shape(16, 4096, 14336), Shape(64, 8192, 8192), Shape(128, 4096, 4096),
               Shape(512, 4096, 4096), Shape(777, 11008, 4096), Shape(1024, 1024, 1024), Shape(4096, 4096, 4096),
               Shape(16384, 2048, 8192), Shape(256, 16384, 2048), Shape(8192, 8192, 8192), Shape(256, 256, 65536),
               Shape(65536, 64, 1024), Shape(100, 100, 100), Shape(2, 2, 100000)]


def test_auto_rules_choose_for_fp16_what_they_choose_for_bf16():
    """With no table entry (the rules on 132 SMs), in every layout: the same kernel and parameters
    for fp16 as for bf16, wgmma_bf16 among them where B is column-major at the session-31 shapes
    (16384x2048x8192, 256x16384x2048: mma_bf16 before); decode (M <= 64) stays on decode_bf16."""
    from gemmlab.dispatch import auto
    table = auto.Table(device={"sm_count": 132})
    picks = {}
    for layout in LAYOUTS:
        for shape in AUTO_SHAPES:
            bf = auto.choose(shape, REGISTRY, table, "bf16", layout)
            fp = auto.choose(shape, REGISTRY, table, "fp16", layout)
            assert (fp.kernel, dict(fp.params), fp.reason) == (bf.kernel, dict(bf.params), bf.reason), (layout, shape)
            picks[layout, tuple(shape)] = fp.kernel
    for layout in (("row", "col"), ("row", "row")):
        for shape in ((16384, 2048, 8192), (256, 16384, 2048), (4096, 4096, 4096), (256, 256, 65536)):
            assert picks[layout, shape] == "wgmma_bf16", (layout, shape)
        for shape in ((1, 4096, 4096), (16, 4096, 14336), (64, 8192, 8192)):
            assert picks[layout, shape] == "decode_bf16", (layout, shape)
    assert sum(k == "wgmma_bf16" for k in picks.values()) >= 4 * 10


def test_sweep_variants_of_fp16_are_bf16s():
    from gemmlab.contract.hookspecs import Problem as P
    for shape, family in ((Shape(4096, 4096, 4096), "square"), (Shape(64, 4096, 4096), "decode"),
                          (Shape(256, 256, 65536), "k_heavy"), (Shape(100, 100, 100), "tiny")):
        bf = SPEC.sweep_variants(P(shape, "bf16", "row", "row"), FACTS, family)
        assert SPEC.sweep_variants(P(shape, "fp16", "row", "row"), FACTS, family) == bf
        assert bool(bf) == (family != "tiny")
