"""Plugin contract v2 (issue 7) on the CPU: precisions and layouts (inputs, verification, bad
input), includes (mechanics, cache keys, errors), compile options, SASS histograms, launch plans
inside the timed region (fake GPU), workspace, clusters, TMA tensor-map rules, cuBLAS for every
precision and layout (fake cuBLAS). The test plugin is tests/v2plugins/v2kernels.py."""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.gpu import compile as compile_stage
from gemmlab.stages import inputs as inputs_stage
from gemmlab.gpu import sass, tma
from gemmlab.gpu.compile import CompileOptions, compile_kernel, scan_includes
from gemmlab.errors import CompileError, ConfigError
from gemmlab.contract.hookspecs import KernelOptions, Problem, Shape, TensorMap
from gemmlab.stages.inputs import InputOptions
from gemmlab.run.pipeline import exit_status, run_point
from gemmlab.stages.verify import VerifyOptions, check

PLUGINS = str(Path(__file__).with_name("v2plugins"))
FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events", "floor": False}


# --- fake-GPU behaviour of the v2 test kernels ------------------------------------------------------

def _stored(gpu, address, rows, cols, dtype=np.float32):
    dtype = np.dtype(dtype)
    return gpu.view(int(address), rows * cols * dtype.itemsize).view(dtype).reshape(rows, cols).astype(np.float64)


def layout_gemm(gpu, args):
    """gemm_layout<LA, LB>: reads A and B through lda/ldb as the layouts say (from the shapes)."""
    a, b, c, m, n, k, lda, ldb = (int(x) for x in args)
    A = _stored(gpu, a, m, k) if lda == k and not (lda == m and m != k) else _stored(gpu, a, k, m).T
    B = _stored(gpu, b, k, n) if ldb == n and not (ldb == k and k != n) else _stored(gpu, b, n, k).T
    gpu.floats(c, m * n)[:] = (A @ B).astype(np.float32).ravel()


def part_gemm(gpu, args):
    a, b, c, ws, m, n, k, scale = args
    a, b, c, ws, m, n, k = (int(x) for x in (a, b, c, ws, m, n, k))
    assert isinstance(scale, np.float32)
    prod = (_stored(gpu, a, m, k) @ _stored(gpu, b, k, n)).astype(np.float32).ravel()
    gpu.floats(c, m * n)[:] += scale * prod  # NaN unless the plan's memset zeroed C first
    gpu.floats(ws, m * n)[:] = prod - scale * prod


def add_ws(gpu, args):
    c, ws, m, n = (int(x) for x in args)
    gpu.floats(c, m * n)[:] += gpu.floats(ws, m * n)


def after_map(gpu, args):
    tmap, a, b, c, m, n, k = args
    assert tmap.tm.matrix == "A" and tmap.address == int(a)
    a, b, c, m, n, k = (int(x) for x in (a, b, c, m, n, k))
    gpu.floats(c, m * n)[:] = (_stored(gpu, a, m, k) @ _stored(gpu, b, k, n)).astype(np.float32).ravel()


def half_gemm(dtype):
    def run(gpu, args):
        a, b, c, m, n, k = (int(x) for x in args)
        gpu.floats(c, m * n)[:] = (_stored(gpu, a, m, k, dtype) @ _stored(gpu, b, k, n, dtype)).astype(np.float32).ravel()
    return run


BEHAVIOUR = {"gemm_layout": layout_gemm, "gemm_part": part_gemm, "add_ws": add_ws, "gemm_after_map": after_map,
             "gemm_half<__nv": half_gemm(ml_dtypes.bfloat16), "gemm_half<__half": half_gemm(np.float16)}


def run(tmp_path, monkeypatch, gpu=None, name="point", **cfg):
    gpu = gpu or HostGpu(durations={"gemm_part": 1.0, "add_ws": 0.5}, behaviour=BEHAVIOUR)
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    full = {"kernel": {"name": "v2_layout"}, "shape": [33, 20, 17], "mode": "run", "timing": dict(FAST),
            "plugin_dirs": [PLUGINS]}
    full.update(cfg)
    out = tmp_path / name
    rec = run_point(full, out)
    assert json.loads((out / "result.json").read_text())["status"] == rec["status"]
    assert not (out / "traceback.txt").exists(), (out / "traceback.txt").read_text()
    return rec, gpu


# --- precisions and layouts: inputs and verification (numpy) -----------------------------------------

@pytest.mark.parametrize("precision, dtype", [("bf16", ml_dtypes.bfloat16), ("fp16", np.float16)])
def test_inputs_rounded_once_to_the_storage_type(precision, dtype):
    problem = Problem(Shape(7, 5, 9), precision)
    inp = inputs_stage.make_problem_inputs(problem, InputOptions(seed=3))
    a32, b32 = inputs_stage.make_inputs(problem.shape, InputOptions(seed=3))
    assert inp.a_stored.dtype == np.dtype(dtype) and inp.a_stored.shape == (7, 9)
    np.testing.assert_array_equal(inp.a, a32.astype(dtype).astype(np.float32))  # exactly the rounded values
    np.testing.assert_array_equal(inp.b, b32.astype(dtype).astype(np.float32))
    assert not np.array_equal(inp.a, a32)  # rounding really happened (bf16/fp16 keep fewer bits)
    assert problem.ab_bytes == 2 and inp.a_stored.nbytes == 7 * 9 * 2


def test_fp32_row_row_inputs_are_unchanged_from_v1():
    problem = Problem(Shape(6, 4, 5))
    inp = inputs_stage.make_problem_inputs(problem, InputOptions(seed=1))
    a, b = inputs_stage.make_inputs(problem.shape, InputOptions(seed=1))
    assert np.array_equal(inp.a_stored, a) and np.array_equal(inp.b_stored, b)


@pytest.mark.parametrize("la, lb", [("col", "row"), ("row", "col"), ("col", "col")])
def test_column_major_storage_and_leading_dimensions(la, lb):
    problem = Problem(Shape(6, 4, 5), "fp32", la, lb)
    inp = inputs_stage.make_problem_inputs(problem, InputOptions(seed=2))
    flat_a, flat_b = inp.a_stored.ravel(), inp.b_stored.ravel()
    for m in range(6):
        for k in range(5):
            at = m * problem.lda + k if la == "row" else m + k * problem.lda
            assert flat_a[at] == inp.a[m, k]
    for k in range(5):
        for n in range(4):
            at = k * problem.ldb + n if lb == "row" else k + n * problem.ldb
            assert flat_b[at] == inp.b[k, n]
    assert problem.stored_shape("A") == inp.a_stored.shape and problem.stored_shape("B") == inp.b_stored.shape
    assert problem.ldc == 4


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_verification_of_half_inputs_passes_float32_accumulation_and_catches_a_dropped_term(precision):
    problem = Problem(Shape(32, 24, 512), precision)
    inp = inputs_stage.make_problem_inputs(problem, InputOptions(seed=5))
    c = np.zeros((32, 24), np.float32)
    for k in range(512):  # float32 accumulation of exact products, one k at a time
        c += np.outer(inp.a[:, k], inp.b[k, :]).astype(np.float32)
    assert check(c, inp.a, inp.b, VerifyOptions(), precision=precision).passed
    wrong = c - np.outer(inp.a[:, 7], inp.b[7, :]).astype(np.float32)  # one k term lost
    assert not check(wrong, inp.a, inp.b, VerifyOptions(), precision=precision).passed


def test_integer_inputs_stay_exact_in_every_precision():
    for precision in ("bf16", "fp16", "tf32"):
        problem = Problem(Shape(8, 8, 64), precision)
        inp = inputs_stage.make_problem_inputs(problem, InputOptions(seed=0, distribution="integers"))
        a, b = inputs_stage.make_inputs(problem.shape, InputOptions(seed=0, distribution="integers"))
        assert np.array_equal(inp.a, a) and np.array_equal(inp.b, b)
        c = (inp.a.astype(np.float64) @ inp.b).astype(np.float32)
        assert check(c, inp.a, inp.b, VerifyOptions(), "integers", precision).rule == "exact"


# --- bad input: one line, exit 2, before anything compiles ------------------------------------------

@pytest.mark.parametrize("cfg, field, words", [
    ({"kernel": {"name": "naive"}, "precision": "bf16"}, "precision", "kernel naive supports fp32; got bf16"),
    ({"kernel": {"name": "tiled"}, "layout": {"a": "row", "b": "col"}}, "layout.b",
     "kernel tiled supports layout.a/layout.b row/row; got row/col"),
    ({"kernel": {"name": "v2_half"}, "precision": "fp32"}, "precision", "supports bf16, fp16; got fp32"),
    ({"kernel": {"name": "v2_cluster", "PAD": 1}}, "kernel", "is not a multiple of cluster (2, 1, 1)"),
    ({"kernel": {"name": "v2_cluster", "CX": 16}}, "kernel", "at most 8"),
    ({"kernel": {"name": "v2_tma", "BC": 300}}, "kernel", "1..256"),
    ({"kernel": {"name": "v2_tma", "BC": 2}}, "kernel", "not a multiple of 16 bytes"),
    ({"kernel": {"name": "v2_tma", "BC": 64, "SW": 2}}, "kernel", "exceeds the 64B swizzle span"),
    ({"kernel": {"name": "v2_tma"}, "shape": [64, 64, 33]}, "shape", "K must be a multiple of 4"),
])
def test_bad_input_is_one_line_before_compiling(tmp_path, monkeypatch, cfg, field, words):
    compiled = []
    monkeypatch.setattr(compile_stage, "compile_kernel", lambda *a, **k: compiled.append(a))
    full = {"shape": [64, 64, 64], "mode": "compile", "plugin_dirs": [PLUGINS], **cfg}
    rec = run_point(full, tmp_path / "p")
    assert rec["status"] == "invalid" and exit_status(rec) == 2
    assert rec["error"].startswith(f"{field}: ") and words in rec["error"] and "\n" not in rec["error"]
    assert compiled == []


def test_cli_refuses_unsupported_precision_with_one_line(tmp_path, cli):
    proc = cli(["kernel=naive", "precision=bf16", "mode=compile", "layout.b=col"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "gemmlab: error: precision: kernel naive supports fp32; got bf16"


def test_cluster_the_device_refuses_is_one_line(tmp_path, monkeypatch, sass_not_read):
    gpu = HostGpu(behaviour=BEHAVIOUR)
    gpu.active_clusters = 0
    rec, _ = run(tmp_path, monkeypatch, gpu, kernel={"name": "v2_cluster"})
    assert rec["status"] == "invalid" and rec["error"].startswith("kernel: v2_cluster: the device refuses cluster")
    assert sorted(gpu.freed) == sorted(gpu.memory)  # everything allocated was released


# --- includes ----------------------------------------------------------------------------------------

def _source(tmp_path, body, header="#pragma once\nconstexpr int twice(int x) { return 2 * x; }\n"):
    (tmp_path / "helper.cuh").write_text(header)
    src = tmp_path / "k.cu"
    src.write_text('#include "helper.cuh"\n#include "gemmlab/README.cuh"\n' + body)
    return src


KERNEL = "template <int X> __global__ void k(float *c) { c[threadIdx.x] = twice(X); }\n"


def test_includes_are_scanned_and_hashed(tmp_path, sass_not_read):
    src = _source(tmp_path, KERNEL)
    names = [i["name"] for i in scan_includes(src)]
    assert names == ["helper.cuh", "gemmlab/README.cuh"]
    compiled = compile_kernel(src, "k<3>", CompileOptions())  # constexpr helper: -default-device
    assert [i["name"] for i in compiled.record()["includes"]] == names
    assert "-default-device" in compiled.record()["options"]


def test_cache_key_covers_included_files(tmp_path, monkeypatch, sass_not_read):
    compile_stage.clear_cache()
    src = _source(tmp_path, KERNEL)
    folder = str(tmp_path / "cache")
    first = compile_kernel(src, "k<3>", CompileOptions(), persistent=True, cache_folder=folder)
    assert first.disk_cache == "miss"
    assert compile_kernel(src, "k<3>", CompileOptions(), persistent=True, cache_folder=folder).cache_hit
    (tmp_path / "helper.cuh").write_text("#pragma once\nconstexpr int twice(int x) { return 3 * x; }\n")
    edited = compile_kernel(src, "k<3>", CompileOptions(), persistent=True, cache_folder=folder)
    assert not edited.cache_hit and edited.disk_cache == "miss"  # the source is unchanged, the header is not
    assert edited.includes[0]["sha256"] != first.includes[0]["sha256"]
    compile_stage.clear_cache()  # a new process: the disk entry of the edited header hits
    again = compile_kernel(src, "k<3>", CompileOptions(), persistent=True, cache_folder=folder)
    assert again.disk_cache == "hit" and again.includes == edited.includes


def test_missing_header_is_nvrtcs_one_line_error(tmp_path):
    """A header found nowhere is not refused up front (it may sit in a branch NVRTC skips, see
    tests/test_compile.py): when NVRTC needs it, its error names it, in one line with the folders."""
    src = tmp_path / "k.cu"
    src.write_text('#include "nowhere.cuh"\n' + KERNEL)
    with pytest.raises(CompileError) as info:
        compile_kernel(src, "k<1>", CompileOptions())
    message = str(info.value)
    assert "\n" not in message and 'cannot open source file "nowhere.cuh"' in message
    assert str(tmp_path) in message  # where headers are looked up


@pytest.mark.parametrize("include", ['"../outside.cuh"', '"/etc/hostname"'])
def test_header_outside_the_allowed_folders_is_refused(tmp_path, include):
    (tmp_path / "outside.cuh").write_text("#pragma once\n")
    inner = tmp_path / "src"
    inner.mkdir()
    src = inner / "k.cu"
    src.write_text(f"#include {include}\n" + KERNEL)
    if include == '"/etc/hostname"' and not Path("/etc/hostname").is_file():
        pytest.skip("no /etc/hostname here")
    with pytest.raises(ConfigError) as info:
        compile_kernel(src, "k<1>", CompileOptions())
    assert info.value.field == "include" and "outside the allowed folders" in str(info.value)


def test_commented_out_include_is_ignored(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text('// #include "nowhere.cuh"\n/* #include "gone.cuh" */\n'
                   "template <int X> __global__ void k(float *c) { c[0] = X; }\n")
    assert scan_includes(src) == []


def test_compile_error_in_a_header_names_the_header_and_line(tmp_path):
    src = _source(tmp_path, KERNEL, header="#pragma once\nconstexpr int twice(int x) { return 2 * x; }\nint oops = nope;\n")
    with pytest.raises(CompileError) as info:
        compile_kernel(src, "k<1>", CompileOptions())
    assert "helper.cuh(3)" in str(info.value)


# --- compile options ---------------------------------------------------------------------------------

def test_kernel_options_become_flags_and_key():
    opts = CompileOptions.for_kernel("90", KernelOptions(defines={"STAGES": 4, "NAME": "x"}, max_registers=128,
                                                         arch_specific=True, extra=("-lineinfo", "-Xptxas=-O2")))
    flags = opts.flags()
    assert opts.target == "sm_90a" and "-arch=sm_90a" in flags
    assert {"-DNAME=x", "-DSTAGES=4", "-maxrregcount=128", "-lineinfo", "-Xptxas=-O2", "-default-device"} <= set(flags)
    assert CompileOptions.for_kernel("90", KernelOptions()) != opts  # in-process key differs
    assert CompileOptions.for_kernel("90", KernelOptions()).flags()[0] == "-arch=sm_90"


@pytest.mark.parametrize("options, words", [
    (KernelOptions(defines={"1BAD": 1}), "define"),
    (KernelOptions(max_registers=300), "max_registers"),
    (KernelOptions(extra=("--dangerous",)), "extra flag"),
])
def test_bad_kernel_options_are_config_errors(options, words):
    with pytest.raises(ConfigError) as info:
        CompileOptions.for_kernel("90", options)
    assert info.value.field == "kernel.options" and words in str(info.value)


def test_options_reach_nvrtc(tmp_path, sass_not_read):
    src = tmp_path / "k.cu"
    src.write_text("#ifndef STAGES\n#error STAGES missing\n#endif\n"
                   "template <int X> __global__ void k(float *c) { c[threadIdx.x] = X * STAGES; }\n")
    opts = CompileOptions.for_kernel("90", KernelOptions(defines={"STAGES": 3}, max_registers=32, arch_specific=True))
    compiled = compile_kernel(src, "k<2>", opts)
    assert compiled.record()["arch"] == "sm_90a"
    if compiled.resources is not None:
        assert compiled.resources.registers <= 32
    with pytest.raises(CompileError):
        compile_kernel(src, "k<2>", CompileOptions())  # without the define: #error


# --- SASS ---------------------------------------------------------------------------------------------

SASS = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @P0  FFMA R2, R3, R4, R2 ;
        /*0020*/                   FFMA R5, R3, R4, R5 ;
        /*0030*/                   LDS.128 R8, [R2] ;
        /*0040*/                   LDS R9, [R2+0x4] ;
        /*0050*/                   LDG.E.128 R12, desc[UR4][R6.64] ;
        /*0060*/              @!P1 LDGSTS.E.BYPASS.128 [R3], desc[UR4][R4.64] ;
        /*0070*/                   HMMA.16816.F32.BF16 R20, R4, R8, R20 ;
        /*0080*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;
        /*0088*/                   QGMMA.64x128x32.F32.E4M3.E4M3 R88, gdesc[UR12], RZ, !UPT ;
        /*0090*/                   UTMALDG.2D [UR8], [UR4] ;
        /*00a0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00b0*/                   STL [R1], R3 ;
        /*00c0*/                   LDL R3, [R1] ;
        /*00d0*/                   HFMA2.MMA R7, -RZ, RZ, 1.875, 0 ;
        /*00e0*/                   LDSM.16.M88.4 R40, [R9] ;
        /*00f0*/             @!PT  LDS RZ, [RZ] ;
        /*0100*/                   UTMASTG.2D [UR4], [UR6] ;
        /*0110*/                   UTMAREDG.2D.ADD [UR4], [UR6] ;
"""


def test_sass_histogram_counts_instruction_classes():
    h = sass.histogram(SASS)
    # LDSM is ldmatrix; the @!PT LDS never executes: counted in total, in no class
    assert h == {"FFMA": 2, "HMMA": 1, "HGMMA": 1, "QGMMA": 1, "LDS": 2, "LDS.128": 1, "LDG": 1, "LDG.128": 1, "LDGSTS": 1,
                 "LDSM": 1, "UTMALDG": 1, "UTMASTG": 1, "UTMAREDG": 1, "BAR": 1, "LDL": 1, "STL": 1,
                 "total": 19}


PIPELINED = """
        /*1720*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR28], R24 ;
        /*1860*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR28], R24 ;
        /*1920*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR28], R24, gsb0 ;
        /*1930*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*1a40*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
"""
SERIALIZED = """
        /*2f40*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;
        /*3060*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*3070*/                   WARPGROUP.ARRIVE ;
        /*3080*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;
        /*30f0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
"""


def test_wgmma_check_tells_a_pipelined_group_from_serialized_wgmmas():
    assert sass.wgmma_check(SASS) == {"hgmma": 2, "serialized": 0, "all_serialized": False}  # HGMMA + FP8 QGMMA
    assert sass.wgmma_check(PIPELINED) == {"hgmma": 3, "serialized": 0, "all_serialized": False}
    assert sass.wgmma_check(SERIALIZED) == {"hgmma": 2, "serialized": 2, "all_serialized": True}
    fp8 = SERIALIZED.replace("HGMMA.64x256x16.F32.BF16", "QGMMA.64x256x32.F32.E4M3.E4M3")  # FP8 wgmma (issue 42)
    assert "HGMMA" not in fp8 and sass.wgmma_check(fp8)["all_serialized"]
    assert sass.wgmma_check("        /*0000*/                   FFMA R2, R3, R4, R2 ;") is None
    note = sass.serialization_note({"wgmma": sass.wgmma_check(SERIALIZED)})
    assert note.startswith("wgmma serialized: each of the 2 HGMMA") and "C7510" in note
    assert sass.serialization_note({"wgmma": sass.wgmma_check(PIPELINED)}) is None


def test_summary_warns_of_serialized_wgmma_and_an_older_stored_sass_gets_the_check(monkeypatch):
    monkeypatch.setattr(sass, "tool_id", lambda: "nvdisasm test")
    old = {"tool": "nvdisasm test", "text": SERIALIZED,  # stored before the check existed
           "summary": {"file": "kernel.sass", "histogram": sass.histogram(SERIALIZED), "disassembler": "x", "error": None}}
    summary, text = sass.reuse(b"cubin", old)
    assert text == SERIALIZED and summary["wgmma"]["all_serialized"] and "wgmma serialized" in summary["warning"]
    from gemmlab.stages.record import summary as summary_text
    rec = {"status": "compiled", "kernel": {"name": "k", "params": {}}, "shape": {"M": 1, "N": 1, "K": 1},
           "compile": {"resources": None, "compile_ms": 1.0, "nvrtc_version": "13", "options": [], "sass": summary}}
    assert any(l.startswith("  WARNING wgmma serialized") for l in summary_text(rec).splitlines())


def test_mode_compile_writes_sass_and_histogram(tmp_path):
    rec = run_point({"kernel": {"name": "tiled"}, "shape": [64, 64, 64], "mode": "compile"}, tmp_path / "p")
    s = rec["compile"]["sass"]
    if s["error"] is not None:
        pytest.skip(f"no disassembler here: {s['error']}")
    assert s["file"] == "kernel.sass" and (tmp_path / "p" / "kernel.sass").read_text().count("FFMA") > 0
    assert s["histogram"]["FFMA"] >= 64 * 64 * 64 // (32 * 8) // 4  # the tiled kernel is FFMA-bound
    assert s["histogram"]["LDS"] > 0 and s["histogram"]["BAR"] > 0 and s["histogram"]["HMMA"] == 0


def test_missing_disassembler_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(sass, "find_disassembler", lambda: (None, "no disassembler found (tried nvdisasm)"))
    compile_stage.clear_cache()
    rec = run_point({"kernel": {"name": "naive"}, "shape": [16, 16, 16], "mode": "compile"}, tmp_path / "p")
    assert rec["status"] == "compiled"
    assert rec["compile"]["sass"] == {"file": None, "histogram": None, "disassembler": None,
                                      "error": "no disassembler found (tried nvdisasm)"}
    assert not (tmp_path / "p" / "kernel.sass").exists()


SPILLS = r"""
extern "C" __global__ void spills(float* c, const float* a, int n) {
    float acc[48];
    #pragma unroll
    for (int i = 0; i < 48; ++i) acc[i] = a[i * n + threadIdx.x];
    for (int k = 1; k < n; ++k) {
        #pragma unroll
        for (int i = 0; i < 48; ++i) acc[i] = acc[i] * a[k] + acc[(i + 7) % 48];
    }
    #pragma unroll
    for (int i = 0; i < 48; ++i) c[i * n + threadIdx.x] = acc[i];
}
"""


def test_needs_dataflow_only_for_local_memory_or_pre_volta_targets():
    head = "\t.target\tsm_90a\n"
    assert not sass._needs_dataflow(head + SASS.replace("STL", "STS").replace("LDL", "LDS"))
    assert sass._needs_dataflow(head + SASS)  # LDL/STL: nvdisasm's analysis annotates spills and refills
    assert sass._needs_dataflow(head + "        /*0000*/              @P0  LDL.LU.64 R2, [R1] ;")
    assert sass._needs_dataflow("\t.target\tsm_61\n        /*0000*/                   FFMA R2, R3, R4, R2 ;")
    assert sass._needs_dataflow("        /*0000*/                   FFMA R2, R3, R4, R2 ;")  # no target line


@pytest.mark.parametrize("max_registers", [None, 32], ids=["no-spills", "spills"])
def test_disassembly_is_nvdisasms_full_listing(tmp_path, monkeypatch, max_registers):
    """nvdisasm -ndf first (gemmlab.gpu.sass): the text is still exactly `nvdisasm -c`'s. A cubin
    with a local-memory frame is disassembled with the analysis at once (one run), and where the
    frame is not seen (``_has_local_frame`` false) the quick run's LDL/STL bring the full run
    after it: the same text either way.

    The spilling case's reference listing is the product's own run of ``nvdisasm -c`` on the
    cubin's bytes (its arguments and file checked here), not a third run of the disassembler."""
    argv, described = sass.find_disassembler()
    if argv is None or not described.startswith("nvdisasm"):
        pytest.skip(f"needs nvdisasm: {described}")
    source = tmp_path / "spills.cu"
    source.write_text(SPILLS)
    compiled = compile_kernel(source, "spills", CompileOptions(arch="90", max_registers=max_registers), disassemble=False)
    code = bytes(compiled.object_code.code)
    spilled = max_registers is not None  # 48 live floats under a 32-register cap; ptxas's log is not always returned
    assert sass._has_local_frame(code) == spilled
    runs, fulls = [], []
    real_run = sass.subprocess.run

    def run(args, **kw):
        runs.append(list(args))
        proc = real_run(args, **kw)
        if "-ndf" not in args:  # nvdisasm -c on a file holding exactly this cubin
            assert list(args[:-1]) == argv and Path(args[-1]).read_bytes() == code, args
            fulls.append(proc.stdout)
        return proc
    monkeypatch.setattr(sass.subprocess, "run", run)
    disassemble = getattr(sass.disassemble, "__wrapped__", sass.disassemble)
    if not spilled:
        cubin = tmp_path / "k.cubin"
        cubin.write_bytes(code)
        fulls.append(real_run([*argv, str(cubin)], capture_output=True, text=True, check=True).stdout)
    summary, text = disassemble(code)
    assert [("-ndf" in r) for r in runs] == ([False] if spilled else [True])
    assert summary["error"] is None and text == fulls[0]  # nvdisasm 13.5 marks spills (*"SpillRefill"*), 13.0 does not
    local = summary["histogram"]["STL"] + summary["histogram"]["LDL"]
    assert (local > 0) == spilled, summary["histogram"]
    if spilled:  # the frame not seen: the quick run, then the full one for its LDL/STL
        runs.clear()
        monkeypatch.setattr(sass, "_has_local_frame", lambda cubin: False)
        again, text = disassemble(code)
        assert [("-ndf" in r) for r in runs] == [True, False]
        assert again == summary and text == fulls[0] == fulls[1]


# --- TMA rules ----------------------------------------------------------------------------------------

def test_tensor_map_rules():
    p32 = Problem(Shape(64, 64, 64), "fp32")
    good = tma.check(TensorMap("A", (64, 32)), p32, address=0x1000)
    assert good["row_stride_bytes"] == 256 and good["box"] == [64, 32] and good["dtype"] == "float32"
    with pytest.raises(ConfigError, match="exceeds the 128B swizzle span"):
        tma.check(TensorMap("A", (64, 64)), p32)  # 64 x 4 B = 256 B inner box
    assert tma.check(TensorMap("A", (64, 64), swizzle="none"), p32)["box"] == [64, 64]
    with pytest.raises(ConfigError, match="16-byte aligned"):
        tma.check(TensorMap("B", (8, 8), swizzle="none"), p32, address=0x1008)
    with pytest.raises(ConfigError, match=r"box rows = 257"):
        tma.check(TensorMap("C", (257, 4), swizzle="none"), p32)
    with pytest.raises(ConfigError, match="swizzle"):
        tma.check(TensorMap("C", (8, 8), swizzle="16B"), p32)
    bf = Problem(Shape(64, 64, 100), "bf16", "row", "col")  # K = 100: 200 B rows, not a multiple of 16
    with pytest.raises(ConfigError) as info:
        tma.check(TensorMap("B", (64, 64)), bf)
    assert info.value.field == "shape" and "K must be a multiple of 8" in str(info.value)
    ok = tma.check(TensorMap("B", (64, 64)), Problem(Shape(64, 64, 128), "bf16", "row", "col"))
    assert ok["global"] == [64, 128] and ok["dtype"] == "bfloat16"  # col-major B stored N x K


# --- the pipeline on the fake GPU ---------------------------------------------------------------------

@pytest.mark.parametrize("la, lb", [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col")])
def test_layouts_run_and_verify(tmp_path, monkeypatch, la, lb, sass_not_read):
    rec, gpu = run(tmp_path, monkeypatch, layout={"a": la, "b": lb})
    assert rec["status"] == "ok", rec["error"]
    assert rec["layout"] == {"a": la, "b": lb}
    assert rec["inputs"]["stored"]["A"] == ([33, 17] if la == "row" else [17, 33])
    assert rec["arguments"][-2:] == ["lda (int32)", "ldb (int32)"]


def test_launch_plan_is_inside_every_timed_launch(tmp_path, monkeypatch, sass_not_read):
    rec, gpu = run(tmp_path, monkeypatch, kernel={"name": "v2_plan"}, timing={**FAST, "mode": "both"})
    assert rec["status"] == "ok", rec["error"]
    assert rec["plan"] == ["memset C to 0x00000000", "main kernel",
                           "extra kernel add_ws<1> grid (3, 1, 1) block (256, 1, 1)"]
    assert rec["workspace_bytes"] == 4 * 33 * 20
    # every sample interval holds batch x (memset, main, extra): the plan's whole cost is counted
    assert rec["timing"]["protocols"]["events"]["samples_ms"] == [1.5] * 3
    assert rec["timing"]["protocols"]["graph"]["samples_ms"] == [1.5] * 3
    log = gpu.log
    events = [i for i, e in enumerate(log) if e == "event"][:2 * 3 * 2]  # the samples of both protocols
    inside = [log[a + 1:b] for a, b in zip(events[::2], events[1::2])]  # (the fresh-input timing's come later)
    assert inside and all(part == ["fill", "gemm_part<1>", "add_ws<1>"] * 2 for part in inside)
    assert rec["guard_bands"] == "intact" and sorted(gpu.freed) == sorted(gpu.memory)  # workspace released
    assert rec["compile"]["extra_name_expressions"] == ["add_ws<1>"]
    assert {"-DV2_PLAN=1", "-maxrregcount=64"} <= set(rec["compile"]["options"])


def test_plan_without_its_memset_fails_verification(tmp_path, monkeypatch, sass_not_read):
    from fakegpu import HostGpu as G
    gpu = G(behaviour=BEHAVIOUR)
    real_fill = gpu.fill32
    gpu.fill32 = lambda address, pattern, count: real_fill(address, 0xFFFFFFFF if pattern == 0 else pattern, count)
    rec, _ = run(tmp_path, monkeypatch, gpu, kernel={"name": "v2_plan"})
    assert rec["status"] == "wrong_result" and rec["verification"]["nan_outputs"] == 33 * 20


def test_cluster_launch_is_recorded(tmp_path, monkeypatch, sass_not_read):
    rec, gpu = run(tmp_path, monkeypatch, kernel={"name": "v2_cluster"})
    assert rec["status"] == "ok", rec["error"]
    assert rec["launch"]["cluster"] == [2, 1, 1] and rec["launch"]["grid"] == [2, 3, 1]
    assert rec["occupancy_clusters"] == {"gemm_layout<0, 0>": 4}


def test_tensor_map_argument_is_built_and_passed_first(tmp_path, monkeypatch, sass_not_read):
    rec, gpu = run(tmp_path, monkeypatch, kernel={"name": "v2_tma"}, shape=[32, 24, 16])
    assert rec["status"] == "ok", rec["error"]
    assert rec["tensor_maps"] == [{"matrix": "A", "dtype": "float32", "global": [32, 16], "row_stride_bytes": 64,
                                   "box": [16, 32], "swizzle": "128B", "l2_promotion": "256B", "oob_fill": "zero"}]


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_half_precision_nvrtc_kernel_on_fake_gpu(tmp_path, monkeypatch, precision, sass_not_read):
    rec, gpu = run(tmp_path, monkeypatch, kernel={"name": "v2_half"}, precision=precision)
    assert rec["status"] == "ok", rec["error"]
    assert rec["precision_detail"]["a_dtype"] == {"bf16": "bfloat16", "fp16": "float16"}[precision]
    assert rec["inputs"]["dtype"] == rec["precision_detail"]["a_dtype"] and rec["inputs_unchanged"] is True
    assert any(i["name"] == "cuda_bf16.h" for i in rec["compile"]["includes"])


def test_existing_kernel_record_keeps_its_fields(tmp_path, monkeypatch):
    rec, _ = run(tmp_path, monkeypatch, kernel={"name": "tiled"}, plugin_dirs=[])
    assert rec["status"] == "ok"
    assert rec["plan"] == ["main kernel"] and rec["workspace_bytes"] == 0
    assert rec["arguments"] == ["A pointer", "B pointer", "C pointer", "M (int32)", "N (int32)", "K (int32)"]
    assert rec["inputs"]["layout"] == "row-major" and rec["inputs"]["dtype"] == "float32"
    assert rec["precision"].startswith("fp32: ") and rec["layout"] == {"a": "row", "b": "row"}
    assert "cluster" not in rec["launch"]


# --- cuBLAS for every precision and layout (fake nvmath) ----------------------------------------------

class FakeCublasV2:
    """sgemm and gemm_ex with transposes, column-major, on a HostGpu's memory."""

    class Math:
        DEFAULT_MATH = 0
        TF32_TENSOR_OP_MATH = 3

    class Operation:
        N = 0
        T = 1

    class ComputeType:
        COMPUTE_32F = 68

    class GemmAlgo:
        DEFAULT = -1

    def __init__(self, gpu):
        self.gpu, self.calls, self.math = gpu, [], None

    def create(self):
        return 1

    def destroy(self, h):
        pass

    def get_version(self, h):
        return 130002

    def set_stream(self, h, s):
        pass

    def set_math_mode(self, h, mode):
        self.math = mode

    def _op(self, ptr, op, rows, cols, ld, dtype):
        """op(X) of column-major X with leading dimension ld: rows x cols after op."""
        stored = (rows, cols) if op == self.Operation.N else (cols, rows)
        x = _stored(self.gpu, ptr, stored[1], ld, dtype)[:, :stored[0]].T  # column-major stored[0] x stored[1]
        return x if op == self.Operation.N else x.T

    def sgemm(self, h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        self.calls.append(("sgemm", ta, tb, m, n, k, lda, ldb, ldc))
        self._gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, np.float32)

    def gemm_ex(self, h, ta, tb, m, n, k, alpha, a, atype, lda, b, btype, ldb, beta, c, ctype, ldc, compute, algo):
        self.calls.append(("gemm_ex", ta, tb, m, n, k, lda, ldb, ldc, atype, ctype, compute))
        self._gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, {14: ml_dtypes.bfloat16, 2: np.float16}[atype])

    def _gemm(self, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, dtype):
        A = self._op(a, ta, m, k, lda, dtype)
        B = self._op(b, tb, k, n, ldb, dtype)
        self.gpu.floats(c, ldc * n).reshape(n, ldc).T[:m, :] = (A @ B).astype(np.float32)
        self.gpu.clock_ms += 0.5


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
@pytest.mark.parametrize("la, lb", [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col")])
def test_cublas_every_precision_and_layout_on_fake_gpu(tmp_path, monkeypatch, precision, la, lb):
    import types
    gpu = HostGpu()
    fake = FakeCublasV2(gpu)
    nvmath = types.ModuleType("nvmath")
    nvmath.bindings = types.ModuleType("nvmath.bindings")
    nvmath.bindings.cublas = fake
    for name, mod in (("nvmath", nvmath), ("nvmath.bindings", nvmath.bindings), ("nvmath.bindings.cublas", fake)):
        monkeypatch.setitem(sys.modules, name, mod)
    from gemmlab.contract.registry import load_registry
    load_registry(entry_points=False)  # makes the built-in plugins importable as gemmlab_plugins
    import gemmlab_plugins.cublas as plugin
    plugin.clear_cache()
    rec, _ = run(tmp_path, monkeypatch, gpu, kernel={"name": "cublas"}, precision=precision,
                 layout={"a": la, "b": lb}, plugin_dirs=[])
    plugin.clear_cache()
    assert rec["status"] == "ok", rec["error"]
    call = fake.calls[0]
    assert call[0] == ("sgemm" if precision in ("fp32", "tf32") else "gemm_ex")
    assert call[1:3] == (int(lb == "col"), int(la == "col"))  # op(B), op(A): T for a column-major operand
    assert rec["precision_detail"]["c_dtype"] == "float32"
    assert fake.math == (3 if precision == "tf32" else 0)
    if precision in ("bf16", "fp16"):
        assert call[-3:] == ({"bf16": 14, "fp16": 2}[precision], 0, 68)  # 16-bit in, R_32F out, COMPUTE_32F


def test_roofline_counts_two_byte_inputs_and_labels_tensor_core_precisions():
    from gemmlab.stages.roofline import roofline
    fp32 = roofline(64, 64, 64, 1.0, 132, "90", 1980.0, 4.8e12)
    bf16 = roofline(64, 64, 64, 1.0, 132, "90", 1980.0, 4.8e12, ab_bytes=2, precision="bf16")
    assert fp32["min_bytes"] == 4 * 3 * 64 * 64 and fp32["units"] == "FP32 CUDA cores"
    assert fp32["pct_peak"] == fp32["pct_fp32_peak"]
    assert bf16["min_bytes"] == 2 * 2 * 64 * 64 + 4 * 64 * 64 and bf16["units"].startswith("BF16 tensor cores")
    assert bf16["peak_gflops"] == 16 * bf16["fp32_peak_gflops"]  # sm_90: 4096 vs 256 FLOP/clk/SM
