"""Plugin discovery (gemmlab.contract.registry.load_registry): built-ins, drop-in folders, entry points.

Also checks, through the ``cli`` fixture (a fresh command; its point runs in a worker process), that the ``gemmlab`` CLI sees a drop-in kernel: it composes a
config for a kernel that has no conf/kernel/<name>.yaml and compiles it (mode=compile, no GPU).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from gemmlab.errors import ConfigError
from gemmlab.contract.hookspecs import KernelSpec, Shape
from gemmlab.paths import KERNELS_DIR
from gemmlab.contract.registry import load_registry


BUILTINS = {
    "naive": "gemmlab_plugins.naive",
    "tiled": "gemmlab_plugins.tiled",
    "ladder_starter": "gemmlab_plugins.ladder",
    "ladder_strip": "gemmlab_plugins.ladder",
    "ladder_tile2d": "gemmlab_plugins.ladder",
    "sgemm_block2d": "gemmlab_plugins.sgemm",
    "sgemm_warptile": "gemmlab_plugins.sgemm",
    "sgemm_pipelined": "gemmlab_plugins.sgemm",
    "mma_tf32": "gemmlab_plugins.mma_tf32",
    "mma_bf16": "gemmlab_plugins.mma_bf16",
    "splitk": "gemmlab_plugins.splitk",
    "tma_bf16": "gemmlab_plugins.tma_bf16",
    "cluster_tiled": "gemmlab_plugins.cluster_tiled",
    "gemv_rows": "gemmlab_plugins.gemv_rows",
    "gemv_cols": "gemmlab_plugins.gemv_cols",
    "small_tile": "gemmlab_plugins.small_tile",
    "slicedk": "gemmlab_plugins.slicedk",
    "splitk_warptile": "gemmlab_plugins.streamk",
    "streamk": "gemmlab_plugins.streamk",
    "wgmma_bf16": "gemmlab_plugins.wgmma_bf16",
    "wgmma_tf32": "gemmlab_plugins.wgmma_tf32",
    "decode_bf16": "gemmlab_plugins.decode_bf16",
    "decode_tf32": "gemmlab_plugins.decode_bf16",
    "splitk_dot": "gemmlab_plugins.splitk_dot",
    "wgmma_fp8": "gemmlab_plugins.wgmma_fp8",
    "grouped_ref": "gemmlab_plugins.grouped_ref",
    "wgmma_grouped": "gemmlab_plugins.wgmma_grouped",
}
# built-in kernels backed by a vendor library (no .cu source)
LIBRARY_BUILTINS = {"cublas": "gemmlab_plugins.cublas", "cublas_grouped_loop": "gemmlab_plugins.cublas",
                    "cublas_grouped": "gemmlab_plugins.cublas"}
# built-in Triton kernels (issue 46: a .py source compiled by Triton, the optional extra)
TRITON_BUILTINS = {"triton_matmul": "gemmlab_plugins.triton_matmul",
                   "triton_tma_persistent": "gemmlab_plugins.triton_tma_persistent"}
ALL_BUILTINS = {**BUILTINS, **LIBRARY_BUILTINS, **TRITON_BUILTINS}

# A one-row-per-block-row GEMM: block (BX, 1), grid (ceil(N/BX), M). Same ABI as the built-ins.
DROPIN_CU = """\
template <int BX>
__global__ void gemm_rowwise(const float *a, const float *b, float *c, int m, int n, int k) {
  const int row = blockIdx.y;
  const int col = blockIdx.x * BX + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i) acc += a[(long long)row * k + i] * b[(long long)i * n + col];
  c[(long long)row * n + col] = acc;
}
"""

DROPIN_PY = """\
from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl


class RowWise(KernelSpec):
    def check(self, shape, params, device):
        pass

    def entry(self, params):
        return f"gemm_rowwise<{{params['BX']}}>"

    def launch(self, shape, params, device):
        bx = params["BX"]
        return Launch(grid=(-(-shape.N // bx), shape.M, 1), block=(bx, 1, 1))


@hookimpl
def gemmlab_kernels():
    return [RowWise(name={name!r}, source={source!r}, defaults={{"BX": 32}},
                    description="test drop-in: one block per output row")]
"""


def write_dropin(folder: Path, name: str = "rowwise_test", filename: str | None = None) -> Path:
    """Write a drop-in plugin ``<filename>.py`` and its ``.cu`` (absolute source path) into folder."""
    folder.mkdir(parents=True, exist_ok=True)
    cu = folder / f"{name}.cu"
    cu.write_text(DROPIN_CU)
    py = folder / f"{filename or name}.py"
    py.write_text(DROPIN_PY.format(name=name, source=str(cu.resolve())))
    return py


# --- built-ins ------------------------------------------------------------------------------------

#: built-ins compiled from another kernel's source (decode_tf32: decode_bf16.cu's loop on float32)
SHARED_SOURCE = {"decode_tf32": "decode_bf16"}


def test_builtin_kernels_and_origins():
    registry = load_registry(entry_points=False)
    assert registry.kernels.keys() >= BUILTINS.keys()
    assert list(registry.kernels) == sorted(registry.kernels)  # sorted by name
    for name, origin in BUILTINS.items():
        assert registry.origins[name] == origin
        spec = registry.kernels[name]
        assert isinstance(spec, KernelSpec)
        assert spec.name == name
        assert spec.description
        assert registry.source_path(spec) == KERNELS_DIR / f"{SHARED_SOURCE.get(name, name)}.cu"
        assert registry.source_path(spec).is_file()


def test_builtin_only_without_entry_points_or_dirs():
    registry = load_registry(entry_points=False)
    assert set(registry.kernels) == set(ALL_BUILTINS)


def test_library_builtins():
    from gemmlab.contract.hookspecs import LibraryKernelSpec
    registry = load_registry(entry_points=False)
    for name, origin in LIBRARY_BUILTINS.items():
        spec = registry.kernels[name]
        assert isinstance(spec, LibraryKernelSpec)
        assert registry.origins[name] == origin
        assert spec.description
        assert dict(spec.defaults) == {}
    assert registry.get("cublas").precisions == ("fp32", "tf32", "bf16", "fp16", "fp8")
    assert not isinstance(registry.get("tiled"), LibraryKernelSpec)


def test_builtin_defaults():
    registry = load_registry(entry_points=False)
    assert dict(registry.get("naive").defaults) == {"BX": 16, "BY": 16}
    assert dict(registry.get("tiled").defaults) == {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2}
    assert dict(registry.get("ladder_starter").defaults) == {"BK": 8}
    assert dict(registry.get("ladder_strip").defaults) == {"TM": 16, "BK": 8}


def test_builtin_entries():
    registry = load_registry(entry_points=False)
    get = registry.get
    assert get("naive").entry({"BX": 16, "BY": 16}) == "gemm_naive<16, 16>"
    assert get("tiled").entry(dict(get("tiled").defaults)) == "gemm_tiled<64, 64, 16, 8, 2>"
    assert get("ladder_starter").entry({"BK": 8}) == "gemm_ladder_starter<8>"
    assert get("ladder_strip").entry({"TM": 16, "BK": 8}) == "gemm_ladder_strip<16, 8>"


def test_unknown_kernel_lists_registered():
    registry = load_registry(entry_points=False)
    with pytest.raises(ConfigError) as info:
        registry.get("foo")
    assert info.value.field == "kernel"
    assert "'foo'" in str(info.value)
    for name in ALL_BUILTINS:
        assert name in str(info.value)


# --- drop-in folders ------------------------------------------------------------------------------

def test_dropin_plugin_found(tmp_path):
    folder = tmp_path / "plugins"
    py = write_dropin(folder)
    registry = load_registry([folder], entry_points=False)
    assert set(registry.kernels) == set(ALL_BUILTINS) | {"rowwise_test"}
    assert registry.origins["rowwise_test"] == str(py.resolve())
    spec = registry.get("rowwise_test")
    assert dict(spec.defaults) == {"BX": 32}
    assert spec.entry({"BX": 32}) == "gemm_rowwise<32>"
    assert registry.source_path(spec) == (folder / "rowwise_test.cu").resolve()
    launch = spec.launch(Shape(5, 70, 3), {"BX": 32}, None)
    assert launch.grid == (3, 5, 1) and launch.block == (32, 1, 1)
    # built-ins are still there with their own origins
    assert registry.origins["tiled"] == "gemmlab_plugins.tiled"


def test_dropin_dir_given_as_str_and_relative(tmp_path, monkeypatch):
    write_dropin(tmp_path / "rel")
    monkeypatch.chdir(tmp_path)
    registry = load_registry(["rel"], entry_points=False)
    assert "rowwise_test" in registry.kernels


def test_dropin_same_dir_twice_is_not_a_duplicate(tmp_path):
    folder = tmp_path / "plugins"
    write_dropin(folder)
    registry = load_registry([folder, str(folder)], entry_points=False)
    assert "rowwise_test" in registry.kernels


def test_dropin_underscore_files_are_skipped(tmp_path):
    folder = tmp_path / "plugins"
    write_dropin(folder)
    (folder / "_private.py").write_text("raise RuntimeError('must not be imported')\n")
    registry = load_registry([folder], entry_points=False)
    assert "rowwise_test" in registry.kernels


def test_dropin_folder_without_plugins_adds_nothing(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a plugin")
    registry = load_registry([folder], entry_points=False)
    assert set(registry.kernels) == set(ALL_BUILTINS)


def test_broken_dropin_is_config_error(tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    broken = folder / "broken.py"
    broken.write_text("import gemmlab\nraise RuntimeError('plugin exploded')\n")
    loaded = {m for m in sys.modules if m.startswith("gemmlab_dropin_")}  # other tests' drop-ins (one may be a broken.py)
    with pytest.raises(ConfigError) as info:
        load_registry([folder], entry_points=False)
    assert info.value.field == "plugin_dirs"
    assert str(broken) in str(info.value)
    assert "RuntimeError: plugin exploded" in str(info.value)
    # a failed import leaves nothing half-initialised behind
    assert {m for m in sys.modules if m.startswith("gemmlab_dropin_")} == loaded


def test_dropin_syntax_error_is_config_error(tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "typo.py").write_text("def gemmlab_kernels(:\n")
    with pytest.raises(ConfigError) as info:
        load_registry([folder], entry_points=False)
    assert info.value.field == "plugin_dirs"
    assert "SyntaxError" in str(info.value)


def test_missing_plugin_dir_is_config_error(tmp_path):
    missing = tmp_path / "does-not-exist"
    with pytest.raises(ConfigError) as info:
        load_registry([missing], entry_points=False)
    assert info.value.field == "plugin_dirs"
    assert str(missing) in str(info.value)
    assert "not a directory" in str(info.value)


def test_plugin_dir_that_is_a_file_is_config_error(tmp_path):
    f = tmp_path / "file.py"
    f.write_text("")
    with pytest.raises(ConfigError) as info:
        load_registry([f], entry_points=False)
    assert info.value.field == "plugin_dirs"


@pytest.mark.parametrize("blank", ["", " "])
def test_empty_plugin_dir_is_config_error(tmp_path, monkeypatch, blank):
    """A new-user trial: ``plugin_dirs=['']`` loaded the working directory as a plugin folder
    (every ``*.py`` there imported); an empty or blank entry is refused, naming plugin_dirs."""
    (tmp_path / "stray.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_registry([blank], entry_points=False)
    assert info.value.field == "plugin_dirs"
    assert str(info.value) == (f"plugin_dirs: {blank!r} is {'blank' if blank else 'empty'}; each entry must be a "
                               "folder of drop-in plugins (*.py), e.g. plugin_dirs=[./myplugins]; leave plugin_dirs "
                               "out for none")


def test_duplicate_of_builtin_is_config_error(tmp_path):
    folder = tmp_path / "plugins"
    py = write_dropin(folder, name="tiled", filename="shadow")
    with pytest.raises(ConfigError) as info:
        load_registry([folder], entry_points=False)
    assert info.value.field == "plugin"
    message = str(info.value)
    assert "'tiled'" in message
    assert "gemmlab_plugins.tiled" in message  # names both providers
    assert str(py.resolve()) in message


def test_duplicate_between_two_dropins_is_config_error(tmp_path):
    write_dropin(tmp_path / "one", name="twin_kernel", filename="first")
    write_dropin(tmp_path / "two", name="twin_kernel", filename="second")
    with pytest.raises(ConfigError) as info:
        load_registry([tmp_path / "one", tmp_path / "two"], entry_points=False)
    assert info.value.field == "plugin"
    assert "'twin_kernel'" in str(info.value)
    assert "first.py" in str(info.value) and "second.py" in str(info.value)


def test_plugin_returning_non_spec_is_config_error(tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "wrong.py").write_text(textwrap.dedent("""\
        from gemmlab.contract.hookspecs import hookimpl

        @hookimpl
        def gemmlab_kernels():
            return ["not a spec"]
        """))
    with pytest.raises(ConfigError) as info:
        load_registry([folder], entry_points=False)
    assert info.value.field == "plugin"
    assert "str" in str(info.value) and "KernelSpec" in str(info.value)


def test_plugin_hook_raising_is_config_error(tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "raiser.py").write_text(textwrap.dedent("""\
        from gemmlab.contract.hookspecs import hookimpl

        @hookimpl
        def gemmlab_kernels():
            raise RuntimeError("hook exploded")
        """))
    with pytest.raises(ConfigError) as info:
        load_registry([folder], entry_points=False)
    assert "hook exploded" in str(info.value)


@pytest.mark.parametrize("bad_name", ["Bad Name", "UPPER", "with-dash", ""])
def test_kernel_name_rule_enforced(tmp_path, bad_name):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "oddname.py").write_text(textwrap.dedent(f"""\
        from gemmlab.contract.hookspecs import KernelSpec, hookimpl

        @hookimpl
        def gemmlab_kernels():
            return [KernelSpec(name={bad_name!r}, source="naive.cu")]
        """))
    with pytest.raises(ConfigError) as info:
        load_registry([folder], entry_points=False)
    assert info.value.field == "plugin"


# --- entry points ---------------------------------------------------------------------------------

@pytest.fixture
def fake_distribution(tmp_path, monkeypatch, request):
    """An installed-looking distribution ``fakegemm`` exposing ``fake = fake_gemm_plugin``."""
    site = tmp_path / "site"
    dist = site / "fakegemm-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakegemm\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[gemmlab]\nfake = fake_gemm_plugin\n")
    cu = site / "fake_gemm.cu"
    cu.write_text(DROPIN_CU)
    (site / "fake_gemm_plugin.py").write_text(DROPIN_PY.format(name="fake_ep_kernel", source=str(cu)))
    sys.modules.pop("fake_gemm_plugin", None)
    request.addfinalizer(lambda: sys.modules.pop("fake_gemm_plugin", None))
    monkeypatch.syspath_prepend(str(site))
    return site


def test_entry_point_plugin_found(fake_distribution):
    registry = load_registry()
    assert "fake_ep_kernel" in registry.kernels
    assert registry.origins["fake_ep_kernel"] == "fake"  # the entry point's name
    spec = registry.get("fake_ep_kernel")
    assert spec.entry({"BX": 8}) == "gemm_rowwise<8>"
    assert registry.source_path(spec) == fake_distribution / "fake_gemm.cu"
    for name, origin in BUILTINS.items():
        assert registry.origins[name] == origin


def test_entry_points_can_be_turned_off(fake_distribution):
    registry = load_registry(entry_points=False)
    assert "fake_ep_kernel" not in registry.kernels


def test_entry_point_and_dropin_together(fake_distribution, tmp_path):
    write_dropin(tmp_path / "plugins")
    registry = load_registry([tmp_path / "plugins"])
    assert {"fake_ep_kernel", "rowwise_test"} <= set(registry.kernels)
    assert registry.origins["fake_ep_kernel"] == "fake"


@pytest.fixture
def broken_distribution(tmp_path, monkeypatch):
    """An installed distribution whose gemmlab entry point names a module that does not exist."""
    site = tmp_path / "brokensite"
    dist = site / "brokenep-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenep\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[gemmlab]\nbroken = no_such_module_for_gemmlab_tests\n")
    monkeypatch.syspath_prepend(str(site))
    return site


def test_broken_entry_point_is_config_error(broken_distribution):
    with pytest.raises(ConfigError) as info:
        load_registry()
    assert "no_such_module_for_gemmlab_tests" in str(info.value)


def test_broken_entry_point_ignored_when_entry_points_off(broken_distribution):
    assert set(load_registry(entry_points=False).kernels) == set(ALL_BUILTINS)


# --- the CLI sees drop-ins ------------------------------------------------------------------------

def test_cli_compiles_dropin_kernel(cli, tmp_path):
    folder = tmp_path / "myplugins"
    write_dropin(folder, name="cli_dropin")
    proc = cli(["kernel=cli_dropin", f"plugin_dirs=['{folder}']", "kernel.BX=64", "shape=[31,33,17]",
                    "mode=compile"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    results = list((tmp_path / "outputs").rglob("result.json"))
    assert len(results) == 1
    record = json.loads(results[0].read_text())
    assert record["status"] == "compiled"
    assert record["valid"] is True
    assert record["kernel"] == {"name": "cli_dropin", "params": {"BX": 64},
                                "plugin": str((folder / "cli_dropin.py").resolve()), "backend": "nvrtc"}
    assert record["compile"]["name_expression"] == "gemm_rowwise<64>"
    assert record["compile"]["source_file"] == str((folder / "cli_dropin.cu").resolve())
    assert record["compile"]["resources"]["registers"] > 0
    assert record["launch"]["grid"] == [1, 31, 1] and record["launch"]["block"] == [64, 1, 1]


def test_cli_a_plugins_invalid_default_names_the_plugin(cli, tmp_path):
    """A drop-in declaring ``BX: 0`` was refused as ``kernel.BX: must be ..., got 0``, blaming the
    user as if they had typed kernel.BX=0; the line (and the record) now say it is the plugin's
    default, naming the kernel and the plugin's file. A valid kernel.BX still runs it."""
    folder = tmp_path / "myplugins"
    py = write_dropin(folder, name="cli_bad_default")
    py.write_text(py.read_text().replace('defaults={"BX": 32}', 'defaults={"BX": 0}'))
    proc = cli(["kernel=cli_bad_default", f"plugin_dirs=['{folder}']", "mode=compile"], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    line = (f"kernel.BX: kernel 'cli_bad_default' declares an invalid default BX=0 (plugin {py.resolve()}): must be "
            "an integer >= 1 and <= 4096; fix the plugin's defaults, or give kernel.BX=<value>")
    assert proc.stderr.strip().splitlines() == [f"gemmlab: error: {line}"], proc.stderr
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "outputs").rglob("result.json")]
    assert record["status"] == "invalid" and record["error"] == line
    proc = cli(["kernel=cli_bad_default", f"plugin_dirs=['{folder}']", "mode=compile", "kernel.BX=32",
                "shape=[8,8,8]"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_cli_help_lists_dropin_kernel(cli, tmp_path):
    folder = tmp_path / "myplugins"
    write_dropin(folder, name="help_dropin")
    proc = cli(["--help", f"plugin_dirs=['{folder}']"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "help_dropin" in proc.stdout
    assert "test drop-in: one block per output row" in proc.stdout


def test_cli_unknown_dropin_dir_is_invalid(cli, tmp_path):
    proc = cli(["kernel=cli_dropin", f"plugin_dirs=['{tmp_path / 'nope'}']", "mode=compile"], cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: plugin_dirs: ")


def test_cli_empty_plugin_dir_is_one_line_before_any_folder(cli, tmp_path):
    """``plugin_dirs=['']`` compiled and exited 0 with the working directory loaded as a plugin
    folder; now one line naming plugin_dirs, exit 2, nothing written."""
    proc = cli(["kernel=tiled", "mode=compile", "plugin_dirs=['']"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: plugin_dirs: '' is empty; "), lines
    assert not (tmp_path / "outputs").exists()


def test_cli_plugin_hook_raising_is_one_line_error(cli, tmp_path):
    folder = tmp_path / "myplugins"
    folder.mkdir()
    (folder / "raiser.py").write_text("from gemmlab.contract.hookspecs import hookimpl\n\n\n@hookimpl\n"
                                      "def gemmlab_kernels():\n    raise RuntimeError('hook exploded')\n")
    proc = cli([f"plugin_dirs=['{folder}']", "mode=compile"], cwd=tmp_path)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: ")


def test_tile_error_names_the_parameter_the_user_set(tmp_path):
    """``kernel.BM=7`` breaks "BM must be a multiple of WM": the error names kernel.BM (set),
    not kernel.WM (its default); with WM set it stays kernel.WM."""
    from gemmlab.run.pipeline import run_point
    rec = run_point({"kernel": {"name": "sgemm_pipelined", "BM": 7}, "mode": "compile", "shape": [256, 256, 256]}, tmp_path / "a")
    assert rec["status"] == "invalid" and rec["error"].startswith("kernel.BM: "), rec["error"]
    rec = run_point({"kernel": {"name": "sgemm_pipelined", "WM": 24}, "mode": "compile", "shape": [256, 256, 256]}, tmp_path / "b")
    assert rec["status"] == "invalid" and rec["error"].startswith("kernel.WM: "), rec["error"]


def test_cli_param_values_are_the_values_allowed(cli, tmp_path):
    """``param_values`` lists a parameter's values (hookspecs.KernelBase); help shows them as the
    rule, yet a drop-in whose check did not repeat the list compiled with any other value in
    1..4096 (a new-user trial: RPT listed as 2|8, kernel.RPT=16 and the default 4 both ran). The
    core now refuses a value outside the list after the kernel's own check (which keeps the first
    word: built-ins explain their codes), a default outside it as the plugin's."""
    folder = tmp_path / "myplugins"
    py = write_dropin(folder, name="listed_values")
    py.write_text(py.read_text().replace('defaults={"BX": 32}', 'defaults={"BX": 32}, param_values={"BX": (32, 64)}'))
    assert "param_values" in py.read_text()
    base = ["kernel=listed_values", f"plugin_dirs=['{folder}']", "mode=compile", "shape=[8,8,8]"]
    proc = cli([*base, "kernel.BX=16", "hydra.run.dir=a"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == ("gemmlab: error: kernel.BX: must be one of 32, 64 (kernel "
                                                    "listed_values's param_values), got 16")
    assert cli([*base, "kernel.BX=64", "hydra.run.dir=b"], cwd=tmp_path).returncode == 0
    py.write_text(py.read_text().replace("(32, 64)", "(64, 128)"))
    proc = cli([*base, "hydra.run.dir=c"], cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(
        "got 32 (the kernel's own default: fix the plugin)"), proc.stderr


# --- a drop-in's source: beside its file first, then gemmlab's kernels/ ----------------------------

def copy_builtin_tiled(folder: Path, with_source: bool, marker: str = "") -> Path:
    """plugins/tiled.py copied into ``folder`` as kernel ``mytiled`` (bare ``source="tiled.cu"``),
    with a copy of kernels/tiled.cu beside it (``marker`` appended) when ``with_source``."""
    from gemmlab.paths import PLUGINS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    text = (PLUGINS_DIR / "tiled.py").read_text()
    assert 'name="tiled", source="tiled.cu"' in text
    (folder / "tiled.py").write_text(text.replace('name="tiled"', 'name="mytiled"'))
    if with_source:
        (folder / "tiled.cu").write_text((KERNELS_DIR / "tiled.cu").read_text() + marker)
    return folder / "tiled.cu"


def test_a_dropin_copied_with_its_source_compiles_its_own_copy(tmp_path):
    """A new-user trial: the copy's bare source="tiled.cu" compiled gemmlab's kernels/tiled.cu, not
    the (broken) copy beside the plugin."""
    from gemmlab.run.pipeline import run_point
    copy = copy_builtin_tiled(tmp_path / "p", with_source=True, marker="\n#error THIS IS MY COPY\n")
    registry = load_registry([tmp_path / "p"], entry_points=False)
    assert registry.source_path(registry.get("mytiled")) == copy.resolve()
    assert registry.source_path(registry.get("tiled")) == KERNELS_DIR / "tiled.cu"  # the built-in keeps its own
    rec = run_point({"kernel": {"name": "mytiled"}, "shape": [64, 64, 64], "mode": "compile",
                     "plugin_dirs": [str(tmp_path / "p")]}, tmp_path / "run")
    assert rec["status"] == "compile_error" and "THIS IS MY COPY" in rec["error"], rec["error"]


@pytest.mark.parametrize("with_source", [True, False])
def test_the_record_names_the_source_really_compiled(tmp_path, with_source):
    """Without a file beside it, a bare name reuses gemmlab's kernels/ source (on purpose)."""
    from gemmlab.run.pipeline import run_point
    copy = copy_builtin_tiled(tmp_path / "p", with_source=with_source)
    rec = run_point({"kernel": {"name": "mytiled"}, "shape": [64, 64, 64], "mode": "compile",
                     "plugin_dirs": [str(tmp_path / "p")]}, tmp_path / "run")
    assert rec["status"] == "compiled", rec.get("error")
    assert rec["compile"]["source_file"] == str(copy.resolve() if with_source else KERNELS_DIR / "tiled.cu")


# --- one message for an unknown kernel, with a plugin_dirs hint -------------------------------------

def test_unknown_kernel_without_plugin_dirs_says_a_dropin_needs_them():
    with pytest.raises(ConfigError) as info:
        load_registry(entry_points=False).get("mytile")
    assert str(info.value).startswith("kernel: unknown kernel 'mytile'; registered kernels: cluster_tiled, ")
    assert str(info.value).endswith("; no plugin_dirs: a drop-in kernel needs plugin_dirs=[the folder of its .py file]")


def test_unknown_kernel_says_what_each_plugin_folder_registered(tmp_path):
    (tmp_path / "empty").mkdir()
    write_dropin(tmp_path / "full", name="rowwise_test")
    with pytest.raises(ConfigError) as info:
        load_registry([tmp_path / "empty", tmp_path / "full"], entry_points=False).get("mytile")
    text = str(info.value)
    assert text.startswith("kernel: unknown kernel 'mytile'; registered kernels: "), text
    assert text.endswith(f"; plugin_dirs folder {(tmp_path / 'empty').resolve()} registered no kernel"
                         f"; plugin_dirs folder {(tmp_path / 'full').resolve()} registered rowwise_test"), text


@pytest.mark.parametrize("dirs", [None, "[]", "[{tmp}/empty]"])
def test_unknown_kernel_is_one_message_wherever_it_is_named(cli, tmp_path, dirs):
    """kernel=mytile said 'unknown kernel', a sweeper's params 'unknown option ...; available:'."""
    (tmp_path / "empty").mkdir()
    extra = [] if dirs is None else [f"plugin_dirs={dirs.format(tmp=tmp_path)}"]
    hint = ("no plugin_dirs: a drop-in kernel needs plugin_dirs=" if dirs != "[{tmp}/empty]" else
            f"plugin_dirs folder {(tmp_path / 'empty').resolve()} registered no kernel")
    for args, where in ((["kernel=mytile"], ""),
                        (["-m", "hydra.sweeper.params.kernel=mytile"], " in hydra.sweeper.params.kernel")):
        proc = cli([*args, *extra, "mode=compile"], tmp_path)
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"gemmlab: error: kernel: unknown kernel 'mytile'{where}; registered kernels: "), lines
        assert hint in lines[0], lines


def test_the_plugin_manager_finds_the_hookimpls_pluggy_finds(tmp_path):
    """load_registry's plugin manager (gemmlab.contract.registry._PluginManager) reads a plain
    module's attributes from its ``__dict__`` instead of pluggy's ``inspect.getattr_static`` (a
    speed-up): for every name of every built-in and test plugin module, and of a module holding
    each kind of attribute pluggy tells apart, its answer is pluggy's own."""
    import importlib
    import types

    import pluggy

    from gemmlab.contract import hookspecs, registry
    hookimpl = pluggy.HookimplMarker(hookspecs.PROJECT)
    odd = types.ModuleType("odd_plugin")

    @hookimpl
    def gemmlab_kernels():
        return []

    def carries_func():
        pass

    carries_func.__func__ = gemmlab_kernels  # pluggy falls back to __func__'s marker

    def not_a_dict():
        pass

    not_a_dict.gemmlab_impl = "yes"

    class Holder:
        @hookimpl
        def method(self):
            pass

        @staticmethod
        @hookimpl
        def static():
            pass

        @classmethod
        @hookimpl
        def cls(cls):
            pass

    odd.__dict__.update(gemmlab_kernels=gemmlab_kernels, carries_func=carries_func, not_a_dict=not_a_dict,
                        Holder=Holder, static=Holder.__dict__["static"], cls=Holder.__dict__["cls"],
                        bound=Holder().method, number=3, module=types, __annotations__={"number": int},
                        marked_lambda=hookimpl(lambda: None))
    odd.__dir__ = lambda: ["gemmlab_kernels", "not_in_the_dict", "__class__", "__dict__"]
    subclass = type("Sub", (types.ModuleType,), {})("sub_plugin")
    subclass.__dict__.update(odd.__dict__)
    plugins = [importlib.import_module(f"{registry.BUILTIN_PACKAGE}.{name}")
               for name in sorted(registry._import_builtin_package().BUILTIN_MODULES)]
    folders = [Path(__file__).parent / "plugins_faulty", Path(__file__).parent / "v2plugins"]
    plugins += [registry._load_file(path) for folder in folders for path in sorted(folder.glob("[!_]*.py"))]
    plugins += [odd, subclass, Holder, Holder()]
    ours, theirs = registry._PluginManager(hookspecs.PROJECT), pluggy.PluginManager(hookspecs.PROJECT)
    names = 0
    for plugin in plugins:
        for name in sorted(set(dir(plugin)) | set(vars(plugin)) | {"__class__", "__dict__", "absent"}):
            assert ours.parse_hookimpl_opts(plugin, name) == theirs.parse_hookimpl_opts(plugin, name), (plugin, name)
            names += 1
    assert names > 500
    assert ours.parse_hookimpl_opts(odd, "gemmlab_kernels") == {"hookwrapper": False, "optionalhook": False,
                                                                "tryfirst": False, "trylast": False,
                                                                "specname": None, "wrapper": False}
