"""Issue 40 item 6, declared instruction classes (gemmlab/gpu/sass_check.py): a kernel declares the
SASS classes it is built around (``sass_classes`` / ``sass_classes_for``); the declaration is
checked when the plugin loads; after each compile the classes are counted in the main kernel's own
SASS function; a class counted 0 times is flagged in ``mode=compile`` and refused in ``mode=run``
(on the fake GPU: status ``missing_instructions``, nothing launched); no SASS is "not checked",
never a pass. The built-in kernels' declarations hold at their defaults, and a wgmma kernel built
for plain sm_90 (its wgmma compiled out: 0 HGMMA) is caught."""

from __future__ import annotations

import textwrap

import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.contract.hookspecs import SASS_CLASSES, KernelSpec, Problem, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.errors import ConfigError
from gemmlab.gpu import sass, sass_check
from gemmlab.run.pipeline import exit_status, run_point
from gemmlab.stages import record as record_stage

FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events"}


def test_declarable_classes_are_histogram_classes():
    assert set(SASS_CLASSES) <= set(sass.CLASSES) and not {"LDL", "STL"} & set(SASS_CLASSES)


# --- the listing: the main kernel's own function -----------------------------------------------------

def nvdisasm_listing(functions: dict) -> str:
    """A listing in nvdisasm's layout: one ``.text.<name>`` section per function."""
    out = ["\t.target\tsm_90a\n"]
    address = 0
    for name, opcodes in functions.items():
        out.append(f"\n//--------------------- .text.{name} --------------------------\n"
                   f"\t.section\t.text.{name},\"ax\",@progbits\n{name}:\n")
        for op in opcodes:
            out.append(f"        /*{address:04x}*/                   {op} ;\n")
            address += 16
    return "".join(out)


LISTING = nvdisasm_listing({"_Z4mainv": ["HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0", "FFMA R1, R2, R3, R4",
                                         "@!PT HMMA.16816.F32 R0, R2, R4, R0"],
                            "_Z6reducev": ["UTMALDG.2D [UR8], [UR4]", "HMMA.16816.F32 R0, R2, R4, R0"],
                            "_Z6helperv": ["LDGSTS.E.128 [R1], desc[UR4][R2.64]"]})


def test_functions_split_nvdisasm_and_cuobjdump_listings():
    parts = sass_check.functions(LISTING)
    assert list(parts) == ["_Z4mainv", "_Z6reducev", "_Z6helperv"] and "UTMALDG" in parts["_Z6reducev"]
    cuobjdump = ("\tcode for sm_90\n\t\tFunction : _Z1av\n        /*0000*/                   HMMA.16816.F32 R0, R2, R4, R0 ;\n"
                 "\t\t..........\n\n\t\tFunction : _Z1bv\n        /*0000*/                   FFMA R1, R2, R3, R4 ;\n")
    parts = sass_check.functions(cuobjdump)
    assert list(parts) == ["_Z1av", "_Z1bv"] and "FFMA" not in parts["_Z1av"]
    assert sass_check.functions("no functions here") == {}


def test_the_plans_other_kernels_never_stand_in_for_the_main_one():
    summary = sass.summarize(LISTING, "nvdisasm (test)")
    declared = ("HGMMA", "FFMA", "HMMA", "UTMALDG", "LDGSTS")
    got = sass_check.check(declared, summary, LISTING, "_Z4mainv", ["_Z6reducev"], kernel="k", target="sm_90a",
                           name_expression="main<1>")
    # the reduce kernel's UTMALDG and HMMA do not count; the @!PT HMMA is padding; the helper (not an
    # entry of the plan) does: a non-inlined device function the main kernel may call
    assert got["counts"] == {"HGMMA": 1, "FFMA": 1, "HMMA": 0, "UTMALDG": 0, "LDGSTS": 1}
    assert got["verdict"] == "missing" and got["missing"] == ["HMMA", "UTMALDG"]
    assert got["scope"] == "main kernel and 1 device function(s) (not the plan's 1 other kernel(s))"
    assert got["message"] == ("instruction classes: kernel k declares HGMMA, FFMA, HMMA, UTMALDG, LDGSTS but its SASS "
                              "has 0 HMMA, 0 UTMALDG in the main kernel (main<1> built for sm_90a)")
    # the main kernel's function not found: the whole cubin is counted, and the scope says so
    whole = sass_check.check(("HMMA",), summary, LISTING, "_Z7missingv", kernel="k", target="sm_90a")
    assert whole["verdict"] == "present" and whole["scope"].startswith("whole cubin")


def test_missing_hgmma_on_a_plain_target_says_what_wgmma_needs():
    summary = sass.summarize(LISTING, "nvdisasm (test)")
    listing = nvdisasm_listing({"_Z4mainv": ["FFMA R1, R2, R3, R4"]})
    got = sass_check.check(("HGMMA",), sass.summarize(listing, "x"), listing, "_Z4mainv", kernel="w", target="sm_90")
    assert got["message"].endswith("0 HGMMA in the main kernel (built for sm_90); wgmma needs an arch-specific "
                                   "target (sm_90a: KernelOptions(arch_specific=True))")
    assert sass_check.check((), summary, LISTING, "_Z4mainv")["verdict"] == "none declared"


def test_no_listing_is_not_checked_never_a_pass():
    failed = {"file": None, "histogram": None, "disassembler": None, "error": "no disassembler found (tried nvdisasm)"}
    got = sass_check.check(("HMMA",), failed, "", "_Z4mainv", kernel="k")
    assert got["verdict"] == "not checked" and got["missing"] is None and got["message"] is None
    assert "no disassembler found" in got["reason"] and "HMMA were not counted" in got["reason"]


# --- declarations checked when the plugin loads ------------------------------------------------------

PLUGIN = """\
from gemmlab.contract.hookspecs import hookimpl
from gemmlab_plugins.tiled import TiledKernel
from gemmlab_plugins.cublas import CublasSgemm


{body}


@hookimpl
def gemmlab_kernels():
    return [{spec}]
"""
TILED = 'TiledKernel(name="{name}", source="tiled.cu", defaults={{"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2}}, {extra})'


def write_plugin(folder, name: str, extra: str = "", body: str = "", spec: str | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(PLUGIN.format(body=body, spec=spec or TILED.format(name=name, extra=extra)))
    return path


BAD = {  # declaration: what the one line says
    "typo": ("sass_classes=('HGMA',)", "declares sass_classes=('HGMA',); it must be a tuple of SASS instruction "
             "classes, each one of FFMA, HMMA, HGMMA,"),
    "case": ("sass_classes=('hgmma',)", "'hgmma' is not one (did you mean 'HGMMA'?)"),
    "bare_string": ("sass_classes='HGMMA'", "one class is written sass_classes=('HGMMA',)"),
    "not_a_string": ("sass_classes=(3,)", "; 3 is not one"),
    "spill": ("sass_classes=('LDL',)", "; 'LDL' is not one"),
    "twice": ("sass_classes=('FFMA', 'FFMA')", "; each class once"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_declaration_is_refused_at_load_in_one_line(tmp_path, case):
    extra, expected = BAD[case]
    path = write_plugin(tmp_path / "p", f"bad_{case}", extra)
    with pytest.raises(ConfigError) as info:
        load_registry([tmp_path / "p"], entry_points=False)
    text = str(info.value)
    assert info.value.field == "plugin_dirs" and "\n" not in text, text
    assert text.startswith(f"plugin_dirs: {path}: kernel 'bad_{case}' declares sass_classes=") and expected in text, text


def test_a_library_kernel_declares_no_classes(tmp_path):
    spec = 'CublasSgemm(name="libk", source="", defaults={}, sass_classes=("HMMA",))'
    path = write_plugin(tmp_path / "p", "libk", spec=spec)
    with pytest.raises(ConfigError, match="a library kernel has no SASS gemmlab compiles") as info:
        load_registry([tmp_path / "p"], entry_points=False)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_builtin_declarations():
    kernels = load_registry((), entry_points=False).kernels
    wanted = {"wgmma_bf16": ("HGMMA", "UTMALDG"), "wgmma_tf32": ("HGMMA", "UTMALDG"), "tma_bf16": ("HGMMA", "UTMALDG"),
              "mma_tf32": ("HMMA",), "mma_bf16": ("HMMA",), "decode_bf16": ("HMMA",), "decode_tf32": ("HMMA",), "cublas": (),
              "triton_matmul": (), "splitk_dot": ("FFMA", "LDG.128"), "triton_tma_persistent": ("HGMMA", "UTMALDG"),
              "gemv_cols": ("FFMA", "LDG.128"), "wgmma_fp8": ("QGMMA", "UTMALDG"), "wgmma_grouped": ("HGMMA", "UTMALDG"),
              "cublas_grouped": (), "cublas_grouped_loop": ()}  # per precision (sass_classes_for): FFMA for fp32, none for the tensor cores
    for name, spec in kernels.items():
        expected = wanted.get(name, ("FFMA",))  # every other built-in: float32 CUDA-core arithmetic
        assert tuple(spec.sass_classes) == expected, name


# --- compile mode: flagged; run mode: refused ----------------------------------------------------------

def point(tmp_path, monkeypatch=None, gpu=None, **cfg):
    if gpu is not None:
        monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    full = {"kernel": {"name": "tiled"}, "shape": [63, 65, 33], "mode": "compile", "timing": dict(FAST), **cfg}
    out = tmp_path / f"point-{len(list(tmp_path.glob('point-*')))}"
    return run_point(full, out)


@pytest.mark.parametrize("name", ["tiled", "mma_tf32", "wgmma_bf16"])
def test_a_declared_class_present_passes(tmp_path, name):
    spec = load_registry((), entry_points=False).get(name)
    rec = point(tmp_path, kernel={"name": name}, shape=[256, 256, 256], precision=spec.precisions[0],
                layout={"a": spec.layouts[0][0], "b": spec.layouts[0][1]})
    check = rec["sass_check"]
    assert rec["status"] == "compiled" and check["verdict"] == "present" and check["missing"] == [], check
    assert check["declared"] == list(spec.sass_classes) and all(n > 0 for n in check["counts"].values())
    counts = ", ".join(f"{c} {n}" for c, n in check["counts"].items())
    assert f"  classes {', '.join(spec.sass_classes)} declared: present ({counts})" in record_stage.summary(rec)


def test_a_class_the_sass_lacks_is_flagged_in_compile_mode(tmp_path):
    dirs = [str(tmp_path / "p")]
    write_plugin(tmp_path / "p", "fake_tc", 'sass_classes=("FFMA", "HGMMA")')
    rec = point(tmp_path, kernel={"name": "fake_tc"}, plugin_dirs=dirs)
    check = rec["sass_check"]
    assert rec["status"] == "compiled" and rec["valid"] is True and check["verdict"] == "missing"
    assert check["missing"] == ["HGMMA"] and check["counts"]["HGMMA"] == 0 and check["counts"]["FFMA"] > 0
    assert check["message"].startswith("instruction classes: kernel fake_tc declares FFMA, HGMMA but its SASS has "
                                       "0 HGMMA in the main kernel (gemm_tiled<")
    lines = record_stage.summary(rec).splitlines()
    assert f"  WARNING {check['message']}; mode=run refuses this kernel" in lines
    assert "nets_fired" not in rec


def test_a_class_the_sass_lacks_is_refused_in_run_mode_before_any_launch(tmp_path, monkeypatch):
    write_plugin(tmp_path / "p", "fake_tc", 'sass_classes=("HGMMA",)')
    gpu = HostGpu()
    rec = point(tmp_path, monkeypatch, gpu, kernel={"name": "fake_tc"}, plugin_dirs=[str(tmp_path / "p")], mode="run")
    assert rec["status"] == "missing_instructions" and rec["valid"] is False and exit_status(rec) == 1
    assert rec["nets_fired"] == ["instruction classes"] and rec["sass_check"]["missing"] == ["HGMMA"]
    assert rec["error"] == rec["sass_check"]["message"] and "\n" not in rec["error"]
    assert rec["error"].startswith("instruction classes: kernel fake_tc declares HGMMA but its SASS has 0 HGMMA")
    assert gpu.launches == [] and "timing" not in rec and "verification" not in rec


def test_a_declared_class_present_runs_on_the_fake_gpu(tmp_path, monkeypatch):
    rec = point(tmp_path, monkeypatch, HostGpu(), mode="run")
    assert rec["status"] == "ok" and rec["sass_check"]["verdict"] == "present" and not rec.get("nets_fired")


WGMMA_PLAIN = """\
import dataclasses
from gemmlab_plugins.wgmma_bf16 import DEFAULTS, PARAM_VALUES, WgmmaKernel


class Plain(WgmmaKernel):
    \"\"\"wgmma_bf16 built for plain sm_90: the wgmma helpers compile to nothing.\"\"\"

    def options(self, problem, params, device):
        return dataclasses.replace(super().options(problem, params, device), arch_specific=False)
"""
WGMMA_SPEC = ('Plain(name="wgmma_plain", source="wgmma_bf16.cu", defaults=dict(DEFAULTS), precisions=("bf16",), '
              'layouts=(("row", "col"),), param_values=PARAM_VALUES, sass_classes=("HGMMA", "UTMALDG"))')


def test_wgmma_compiled_out_for_plain_sm90_is_flagged_then_refused(tmp_path, monkeypatch):
    """The issue's case: the same source for sm_90 instead of sm_90a compiles (its wgmma helpers
    are empty without __CUDA_ARCH_FEAT_SM90_ALL) to no HGMMA at all; it was recorded "compiled",
    valid. The built-in (sm_90a) has them (test_a_declared_class_present_passes)."""
    write_plugin(tmp_path / "p", "wgmma_plain", body=WGMMA_PLAIN, spec=WGMMA_SPEC)
    cfg = dict(kernel={"name": "wgmma_plain"}, shape=[256, 256, 256], precision="bf16", layout={"a": "row", "b": "col"},
               plugin_dirs=[str(tmp_path / "p")])
    rec = point(tmp_path, **cfg)
    assert rec["compile"]["arch"] == "sm_90" and rec["compile"]["sass"]["histogram"]["HGMMA"] == 0
    check = rec["sass_check"]
    assert rec["status"] == "compiled" and check["missing"] == ["HGMMA"] and check["counts"]["UTMALDG"] > 0
    assert check["message"].endswith("built for sm_90); wgmma needs an arch-specific target (sm_90a: "
                                     "KernelOptions(arch_specific=True))")
    gpu = HostGpu()
    rec = point(tmp_path, monkeypatch, gpu, mode="run", **cfg)
    assert rec["status"] == "missing_instructions" and rec["nets_fired"] == ["instruction classes"]
    assert rec["error"] == check["message"] and gpu.launches == []


def test_classes_per_problem_from_sass_classes_for(tmp_path):
    body = textwrap.dedent("""\
        class PerPrecision(TiledKernel):
            def sass_classes_for(self, problem, params):
                return ("FFMA",) if params["TM"] == 8 else ("HMMA",)
        """)
    spec = ('PerPrecision(name="per_problem", source="tiled.cu", defaults={"BM": 64, "BN": 64, "BK": 16, "TM": 8, '
            '"TN": 2})')
    write_plugin(tmp_path / "p", "per_problem", body=body, spec=spec)
    dirs = [str(tmp_path / "p")]
    rec = point(tmp_path, kernel={"name": "per_problem"}, plugin_dirs=dirs)
    assert rec["sass_check"]["declared"] == ["FFMA"] and rec["sass_check"]["verdict"] == "present"
    rec = point(tmp_path, kernel={"name": "per_problem", "TM": 4}, plugin_dirs=dirs)
    assert rec["sass_check"]["declared"] == ["HMMA"] and rec["sass_check"]["missing"] == ["HMMA"]


def test_sass_classes_for_returning_a_bad_value_blames_the_plugin(tmp_path):
    body = "class Bad(TiledKernel):\n    def sass_classes_for(self, problem, params):\n        return 'FFMA'\n"
    write_plugin(tmp_path / "p", "bad_for", body=body,
                 spec='Bad(name="bad_for", source="tiled.cu", defaults={"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2})')
    rec = point(tmp_path, kernel={"name": "bad_for"}, plugin_dirs=[str(tmp_path / "p")])
    assert rec["status"] == "invalid" and "\n" not in rec["error"], rec["error"]
    assert rec["error"].startswith("plugin: kernel 'bad_for': Bad.sass_classes_for() returned 'FFMA'; it must be a "
                                   "tuple of SASS instruction classes") and "sass_classes=('FFMA',)" in rec["error"]


def test_without_a_disassembler_the_check_is_recorded_as_not_run(tmp_path, monkeypatch):
    from gemmlab.gpu import compile as compile_stage
    compile_stage.clear_cache()  # no listing from this process's cache
    reason = "no disassembler found (tried nvdisasm, cuobjdump); install it: pip install nvidia-cuda-nvdisasm"
    monkeypatch.setattr(sass, "disassemble", lambda cubin: ({"file": None, "histogram": None, "disassembler": None,
                                                            "error": reason}, ""))
    try:
        rec = point(tmp_path, cache={"enabled": False})
    finally:
        compile_stage.clear_cache()  # nothing without SASS is left for later tests
    check = rec["sass_check"]
    assert rec["status"] == "compiled" and check["verdict"] == "not checked" and check["missing"] is None
    assert reason in check["reason"]
    assert f"  WARNING instruction classes FFMA not checked: {check['reason']}" in record_stage.summary(rec).splitlines()


def test_library_kernels_have_no_check():
    spec = load_registry((), entry_points=False).get("cublas")
    assert not isinstance(spec, KernelSpec) and spec.sass_classes == ()
    assert spec.sass_classes_for(Problem(Shape(1, 1, 1)), {}) == ()


@pytest.mark.parametrize("rounding", ["nearest", "RN", 3])
def test_a_bad_tf32_rounding_is_refused_at_load_in_one_line(tmp_path, rounding):
    path = write_plugin(tmp_path / "p", "bad_rounding", f"tf32_rounding={rounding!r}")
    with pytest.raises(ConfigError) as info:
        load_registry([tmp_path / "p"], entry_points=False)
    text = str(info.value)
    assert info.value.field == "plugin_dirs" and "\n" not in text and str(path) in text, text
    assert f"declares tf32_rounding={rounding!r}; it must be None (undeclared) or one of rn, rna, rz, none" in text


def test_the_tf32_kernels_declare_how_they_round():
    kernels = load_registry((), entry_points=False)
    assert kernels.get("mma_tf32").tf32_rounding == "rna" and kernels.get("wgmma_tf32").tf32_rounding == "rz"
    assert kernels.get("decode_tf32").tf32_rounding == "rna"
    assert kernels.get("cublas").tf32_rounding is None  # cuBLAS picks its kernel: any of the four roundings
