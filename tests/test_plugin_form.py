"""Issue 11.6: plugins that are wrong in form give one line naming the plugin file and what is
wrong (pluggy validates); an exception inside a plugin's check/launch names the kernel, the
method and the file holding the traceback; a zero-sized grid blames the plugin, not the shape."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from gemmlab.errors import ConfigError
from gemmlab.run.pipeline import run_point
from gemmlab.contract.registry import load_registry

GOOD_SPEC = """\
from gemmlab.contract.hookspecs import hookimpl
from gemmlab_plugins.naive import NaiveKernel
"""

FORMS = {
    "misspelled_hook": ("@hookimpl\ndef gemmlab_kernel():\n    return [NaiveKernel(name='form_k', source='naive.cu', "
                        "defaults={'BX': 16, 'BY': 16})]\n",
                        "@hookimpl gemmlab_kernel is not a gemmlab hook; did you mean gemmlab_kernels?"),
    "no_marker": ("def gemmlab_kernels():\n    return [NaiveKernel(name='form_k', source='naive.cu', "
                  "defaults={'BX': 16, 'BY': 16})]\n",
                  "gemmlab_kernels is not marked @hookimpl"),
    "module_self": ("@hookimpl\ndef gemmlab_kernels(self):\n    return [NaiveKernel(name='form_k', source='naive.cu', "
                    "defaults={'BX': 16, 'BY': 16})]\n",
                    "hook gemmlab_kernels() takes no arguments, but the plugin's takes {'self'}"),
}


def write(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(GOOD_SPEC + "\n\n" + body)
    return path


@pytest.mark.parametrize("form", sorted(FORMS))
def test_wrong_form_is_one_line_naming_the_file(tmp_path, form):
    body, expected = FORMS[form]
    path = write(tmp_path / "p", form, body)
    with pytest.raises(ConfigError) as info:
        load_registry([tmp_path / "p"], entry_points=False)
    text = str(info.value)
    assert str(path) in text and expected in text and "\n" not in text, text


@pytest.mark.parametrize("form", sorted(FORMS))
def test_wrong_form_on_the_command_line(cli, tmp_path, form):
    body, expected = FORMS[form]
    path = write(tmp_path / "p", form, body)
    proc = cli(["kernel=form_k", f"plugin_dirs=[{tmp_path / 'p'}]", "mode=compile"], tmp_path)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("gemmlab: error: plugin_dirs: ") and str(path) in lines[0] and expected in lines[0]


RAISING = """\
class Raising(NaiveKernel):
    def {method}(self, *args):
        raise KeyError("BQ")


@hookimpl
def gemmlab_kernels():
    return [Raising(name="raising", source="naive.cu", defaults={{"BX": 16, "BY": 16}})]
"""


@pytest.mark.parametrize("method", ["check", "launch", "entry", "arguments", "options", "plan", "workspace_bytes",
                                    "geometry", "check_problem"])
def test_exception_in_plugin_method_names_plugin_method_and_traceback(tmp_path, method):
    path = write(tmp_path / "p", f"raising_{method}", RAISING.format(method=method))
    out = tmp_path / "run"
    rec = run_point({"kernel": {"name": "raising"}, "shape": [8, 8, 8], "mode": "compile",
                     "plugin_dirs": [str(tmp_path / "p")]}, out)
    assert rec["status"] == "error"
    err = rec["error"]
    assert "\n" not in err
    assert f"kernel 'raising' raised KeyError: 'BQ' in Raising.{method}() ({path}:" in err, err
    assert f"traceback: {out / 'traceback.txt'}" in err
    assert "KeyError" in (out / "traceback.txt").read_text()


NOT_A_TUPLE = """\
from gemmlab.contract.hookspecs import Main, Matrix


class Bare(NaiveKernel):
    def {method}(self, problem, params, device):
        return {value}


@hookimpl
def gemmlab_kernels():
    return [Bare(name="bare", source="naive.cu", defaults={{"BX": 16, "BY": 16}})]
"""


@pytest.mark.parametrize("method,value", [("arguments", "Matrix('A')"), ("plan", "Main()")])
def test_a_method_returning_no_tuple_blames_the_plugin_method(tmp_path, method, value):
    """arguments() returning a bare Matrix('A') was "TypeError: 'Matrix' object is not iterable"
    with a traceback (a new-user trial); it names the kernel, the method, the file and what to return."""
    path = write(tmp_path / "p", f"bare_{method}", NOT_A_TUPLE.format(method=method, value=value))
    rec = run_point({"kernel": {"name": "bare"}, "shape": [8, 8, 8], "mode": "compile",
                     "plugin_dirs": [str(tmp_path / "p")]}, tmp_path / "run")
    assert rec["status"] == "invalid", rec
    assert rec["error"].startswith(f"plugin: kernel 'bare': Bare.{method}() ({path}:"), rec["error"]
    assert "it must return a tuple, e.g. (" in rec["error"] and "\n" not in rec["error"]


# --- what a plugin declares: checked when it is loaded, blamed on its file -------------------------

DECLARED = """\
@hookimpl
def gemmlab_kernels():
    return [NaiveKernel(name="declared", source="naive.cu", defaults={defaults}, {extra})]
"""

DECLARATIONS = {  # the trial's cases: each was blamed on the command line, or crashed later
    "precision_name": ("precisions=('float32',)", "declares precisions=('float32',); it must be a tuple of one "
                       "or more of fp32, tf32, bf16, fp16"),
    "precision_str": ("precisions='fp32'", "declares precisions='fp32'; it must be a tuple of one or more of"),
    "layout_name": ("layouts=(('row', 'column'),)", "declares layouts=(('row', 'column'),); it must be a tuple of "
                    "(layout.a, layout.b) pairs, each row or col"),
    "layout_one_pair": ("layouts=('row', 'col')", "declares layouts=('row', 'col'); it must be a tuple of "
                        "(layout.a, layout.b) pairs"),
    "param_name": ("description=''", "a parameter may not be called 'name'"),
    "source_type": ("source=3", "declares source=3; give the .cu file as a str"),
}


def _declared(name: str) -> str:
    extra, _ = DECLARATIONS[name]
    defaults = {"BX": 16, "BY": 16, **({"name": 1} if name == "param_name" else {})}
    body = DECLARED.format(defaults=defaults, extra=extra)
    return body.replace('source="naive.cu", ', "") if extra.startswith("source=") else body


@pytest.mark.parametrize("name", sorted(DECLARATIONS))
def test_a_bad_declaration_is_refused_at_load_naming_the_file_and_field(tmp_path, name):
    path = write(tmp_path / "p", name, _declared(name))
    with pytest.raises(ConfigError) as info:
        load_registry([tmp_path / "p"], entry_points=False)
    text = str(info.value)
    assert info.value.field == "plugin_dirs" and "\n" not in text, text
    assert text.startswith(f"plugin_dirs: {path}: kernel 'declared' ") and DECLARATIONS[name][1] in text, text


def test_one_layout_pair_without_its_own_parentheses_says_how_to_write_it(tmp_path):
    write(tmp_path / "p", "one_pair", _declared("layout_one_pair"))
    with pytest.raises(ConfigError, match=r"one pair is written layouts=\(\('row', 'col'\),\)"):
        load_registry([tmp_path / "p"], entry_points=False)


@pytest.mark.parametrize("name", ["precision_name", "layout_one_pair", "param_name"])
def test_a_bad_declaration_on_the_command_line_and_in_help(cli, tmp_path, name):
    """Not 'precision: kernel declared supports float32; got fp32' (the user's fault), not a
    ValueError traceback, not 'kernel: must select a kernel config'; --help still lists the kernels."""
    path = write(tmp_path / "p", name, _declared(name))
    proc = cli(["kernel=declared", f"plugin_dirs=[{tmp_path / 'p'}]", "mode=compile"], tmp_path)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"gemmlab: error: plugin_dirs: {path}: kernel 'declared' declares "), lines
    out = cli(["--help", f"plugin_dirs=[{tmp_path / 'p'}]"], tmp_path).stdout
    assert f"plugins failed to load: plugin_dirs: {path}: kernel 'declared' declares" in out, out
    assert re.search(r"^tiled\s", out, re.M) and re.search(r"^wgmma_bf16\s", out, re.M)


ZERO_GRID = """\
from gemmlab.contract.hookspecs import Launch


class Floor(NaiveKernel):
    def launch(self, shape, params, device):
        return Launch(grid=(shape.N // params["BX"], shape.M // params["BY"], 1), block=(params["BX"], params["BY"], 1))


@hookimpl
def gemmlab_kernels():
    return [Floor(name="floor_div", source="naive.cu", defaults={"BX": 16, "BY": 16})]
"""


def test_zero_sized_grid_blames_the_plugin(tmp_path):
    write(tmp_path / "p", "floor_div", ZERO_GRID)
    rec = run_point({"kernel": {"name": "floor_div"}, "shape": [8, 8, 8], "mode": "compile",
                     "plugin_dirs": [str(tmp_path / "p")]}, tmp_path / "run")
    assert rec["status"] == "invalid"
    assert rec["error"].startswith("plugin: kernel floor_div: Floor.launch() returned grid (0, 0, 1)"), rec["error"]
    assert "shape:" not in rec["error"]


ENV_PROBE = """\
import os

from gemmlab.contract.hookspecs import ParamError


class EnvProbe(NaiveKernel):
    def check(self, shape, params, device):
        raise ParamError("kernel.BX", "HYDRA_FULL_ERROR=" + str(os.environ.get("HYDRA_FULL_ERROR")))


@hookimpl
def gemmlab_kernels():
    return [EnvProbe(name="env_probe", source="naive.cu", defaults={"BX": 16, "BY": 16})]
"""


@pytest.mark.parametrize("user", [None, "1"])
def test_a_point_sees_the_users_hydra_full_error_not_gemmlabs(cli, tmp_path, user):
    """gemmlab sets HYDRA_FULL_ERROR=1 around its Hydra call (to say Hydra's errors in one line);
    the processes a point starts (its worker here; compute-sanitizer's child gemmlab) inherit the
    user's value instead: a child gemmlab would otherwise print tracebacks for a bad input."""
    write(tmp_path / "p", "env_probe", ENV_PROBE)
    proc = cli(["kernel=env_probe", f"plugin_dirs=[{tmp_path / 'p'}]", "mode=compile",
                f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, env={"HYDRA_FULL_ERROR": user})
    assert proc.returncode == 2, proc.stderr
    assert f"kernel.BX: HYDRA_FULL_ERROR={user}" in proc.stderr, proc.stderr
