"""The one record model (gemmlab.stages.record_model) and the structure issue 12 asks for: SCHEMA defined
once, every reader on the model, no module-level mutable state anywhere in the gemmlab package
(an explicit allowlist of constants and per-process resources), report and compare modules under
~400 lines, each module's docstring saying what it owns. The layers and the import rule (one way,
no cycle) are tests/test_layout.py's."""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import pytest

from gemmlab.stages import record, record_model as results
from gemmlab.stages.record_model import find_records, measurement_settings, read_record, view

from clirun import REPO_ROOT  # noqa: E402  (the checkout, defined once)
PKG = REPO_ROOT / "gemmlab"
MODEL_MODULES = ("stages.record_model", "stages.record", "results.report", "results.report_tables",
                 "results.report_plots", "results.report_html", "results.compare", "results.compare_stats",
                 "results.compare_match", "results.compare_render", "cli.sweep")


def _path(name: str) -> Path:
    """``stages.record`` -> gemmlab/stages/record.py."""
    return PKG.joinpath(*name.split(".")).with_suffix(".py")


@functools.lru_cache(maxsize=None)
def _parsed(path: Path) -> ast.Module:
    """The syntax tree of the file ``path``, parsed once for this module's tests (only read)."""
    return ast.parse(path.read_text())


def _tree(name: str) -> ast.Module:
    return _parsed(_path(name))


def test_schema_defined_once_and_shared():
    owners = sorted(f"{_name(p)}.{t.id}" for p in _package_modules()
                    for node in ast.parse(p.read_text()).body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)
                    and (t.id == "VALID_STATUSES" or "gemmlab.result/" in ast.unparse(node.value)))
    assert owners == ["stages.record_model.SCHEMA", "stages.record_model.VALID_STATUSES"]
    assert record.SCHEMA is results.SCHEMA and record.VALID_STATUSES is results.VALID_STATUSES


def test_readers_use_the_model():
    for name in ("stages.record", "results.report", "results.compare_match", "run.tune_sweep"):
        froms = [n for n in ast.walk(_tree(name)) if isinstance(n, ast.ImportFrom)]
        imports = {a.name for n in froms if n.module == "gemmlab.stages.record_model" for a in n.names}
        imports |= {a.name for n in froms if n.module == "gemmlab.stages" for a in n.names if a.name == "record_model"}
        assert imports, f"{name} does not read records through gemmlab.stages.record_model"
        assert "json.loads" not in _path(name).read_text(), f"{name} parses result.json itself"


# Module-level containers that may exist in gemmlab (issue 12: no module-level mutable state used
# as a channel between functions). Anything else assigned a list/dict/set at module level fails
# test_no_module_level_mutable_state; a channel must travel as a return value or one small object
# (e.g. gemmlab.cli.app.Invocation, gemmlab.results.summary.SweepOutcome).
#
# True constants: tables written once at import and never changed; the test also checks that no
# code in the package mutates them (item assignment, del, augmented assignment, append/update/...).
CONSTANTS = {
    "__all__",  # every module's export list
    "gpu.backends.NUMPY_CTYPES", "results.compare_render._STYLES", "stages.config.SECTIONS",
    "gpu.device.SM90_LIMITS", "results.families.TARGETS", "contract.hookspecs.AB_DTYPES",
    "contract.hookspecs.COMPUTE", "contract.hookspecs.SWIZZLES", "contract.hookspecs.REGION_DTYPES", "gpu.monitor.REASON_NAMES",
    "stages.record.PRECISIONS", "results.report_html.CATEGORY_TEXT",
    "results.report_plots.TITLES", "results.report_plots._PLOTTERS", "results.report_tables._CATEGORY_TEXT",
    "stages.roofline.FP32_LANES_PER_SM", "stages.timing.DESCRIPTIONS", "stages.verify.U_INPUT", "stages.verify.U_ACC",
    "gpu.triton_compile.VALUE_TYPES", "gpu.triton_compile.POINTER_TYPES",
}
# Per-process resources, not channels. What a command's points share is owned by the session
# (gemmlab.run.session.Session: registries, compile memo, devices and locks, worker); each lower
# layer holds only one gemmlab.contract.session_slot.SessionSlot: the default session's object (not a
# container: gemmlab.gpu.compile.CompileMemo, gemmlab.gpu.device.Devices,
# gemmlab.contract.registry.Registries, gemmlab.run.isolation's default runner) and a ContextVar naming
# the active session's (tests/test_session.py, tests/test_session_slot.py). Nothing is left here.
PROCESS_RESOURCES: frozenset = frozenset()
_CONTAINER_CALLS = ("list", "dict", "set", "defaultdict", "Counter", "OrderedDict", "deque")
_MUTATORS = ("append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault",
             "add", "discard", "sort", "reverse", "__setitem__", "__delitem__")


def _module_containers(path: Path) -> list[str]:
    """Names bound at module level to a list/dict/set display, comprehension or constructor."""
    found = []
    for node in _parsed(path).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) or (
                isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", None))
                in _CONTAINER_CALLS):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [ast.unparse(t) for t in targets]
    return found


def _package_modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def _name(path: Path) -> str:
    return ".".join(path.relative_to(PKG).with_suffix("").parts)


def test_package_modules_are_scanned():
    names = {_name(p) for p in _package_modules()}
    assert {"cli.app", "cli.sweep", "gpu.compile", "gpu.device", "run.isolation", *MODEL_MODULES} <= names


@pytest.mark.parametrize("path", _package_modules(), ids=_name)
def test_no_module_level_mutable_state(path):
    bad = [f"{_name(path)}.{t}" for t in _module_containers(path)
           if t != "__all__" and f"{_name(path)}.{t}" not in CONSTANTS | PROCESS_RESOURCES]
    assert bad == [], "module-level mutable state: return it, or pass one small object (see CONSTANTS above)"
    no_globals = [n.lineno for n in ast.walk(_parsed(path)) if isinstance(n, ast.Global)]
    assert no_globals == [], f"{_name(path)}: `global` statements at lines {no_globals}"


def _mutations(tree: ast.Module, name: str) -> list[int]:
    """Lines where ``name`` (bare or as ``module.name``) is changed in place."""
    return _mutation_lines(tree).get(name, [])


@functools.lru_cache(maxsize=None)
def _mutation_lines(tree: ast.Module) -> dict[str, list[int]]:
    """For each name (bare or the attribute of ``module.name``), the lines of ``tree`` where it is
    changed in place: an item assigned or deleted, an augmented assignment, a mutating method
    called. One walk of the tree for every name asked about (the trees do not change)."""
    def key(node) -> str | None:
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None

    lines: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                name = key(t.value) if isinstance(t, ast.Subscript) else key(t) if isinstance(node, ast.AugAssign) else None
                if name is not None:
                    lines.setdefault(name, []).append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            name = key(node.func.value)
            if name is not None:
                lines.setdefault(name, []).append(node.lineno)
    return lines


def test_constants_stay_constant():
    trees = {_name(p): _parsed(p) for p in _package_modules()}
    listed = {c.rsplit(".", 1)[0] for c in CONSTANTS | PROCESS_RESOURCES if "." in c}
    assert listed <= set(trees), f"allowlist names modules that do not exist: {listed - set(trees)}"
    for constant in CONSTANTS - {"__all__"}:
        module, name = constant.rsplit(".", 1)
        assert name in _module_containers(_path(module)), f"{constant} is listed but not defined"
        changed = {m: lines for m, tree in trees.items() if (lines := _mutations(tree, name))}
        assert changed == {}, f"{constant} is changed at {changed}: it is not a constant"


@pytest.mark.parametrize("name", [n for n in MODEL_MODULES if n.startswith(("results.report", "results.compare"))])
def test_report_and_compare_modules_are_small_and_say_what_they_own(name):
    text = _path(name).read_text()
    assert text.count("\n") < 400, f"{name}.py has {text.count(chr(10))} lines"
    doc = ast.get_docstring(_tree(name))
    assert doc and "owns" in doc, name


# --- the model ---------------------------------------------------------------------------------

def _put(path: Path, rec) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "result.json").write_text(json.dumps(rec))
    return path / "result.json"


def test_find_records_children_and_natural_order(tmp_path):
    _put(tmp_path / "10", {})
    _put(tmp_path / "2", {})
    child = _put(tmp_path / "2" / "sanitizer-memcheck" / "run", {})
    nested = _put(tmp_path / "2" / "deeper", {})
    assert find_records(tmp_path) == [nested, tmp_path / "2" / "result.json", child, tmp_path / "10" / "result.json"]
    assert find_records(tmp_path, children=False) == [tmp_path / "2" / "result.json", tmp_path / "10" / "result.json"]
    assert find_records([child], children=False) == [child]  # a file named directly is always read
    assert nested not in find_records(tmp_path / "2", children=False)
    assert find_records(tmp_path / "2" / "deeper", children=False) == [nested]  # the search starts there
    with pytest.raises(FileNotFoundError):
        find_records(tmp_path / "missing")


def test_a_folder_or_a_link_to_nowhere_named_result_json_is_found_and_unreadable(tmp_path, odd_result_entries):
    """The one finder lists both odd entries (the folder was passed over in silence), and the one
    reader gives each one reason (the link said "No such file or directory")."""
    real = _put(tmp_path / "ok", {"status": "ok", "config": {}})
    odd = odd_result_entries(tmp_path)
    assert find_records(tmp_path) == [odd["link"], odd["folder"], real]
    assert find_records(tmp_path, children=False) == [odd["link"], odd["folder"], real]
    folder, link = read_record(odd["folder"]), read_record(odd["link"])
    assert folder.category == link.category == "unreadable"
    assert folder.error == "cannot read the file: a folder"
    assert link.error == f"cannot read the file: a link to nowhere (-> {tmp_path / 'nowhere.json'})"



def test_two_links_to_one_missing_target_are_two_entries(tmp_path):
    """A new-user trial: ``result.json -> /nonexistent`` and ``q/result.json -> /nonexistent`` were
    one entry (both resolve to the same missing path), so the top-level one was never named; a
    file reached twice is still listed once."""
    (tmp_path / "q").mkdir()
    for link in (tmp_path / "result.json", tmp_path / "q" / "result.json"):
        link.symlink_to(tmp_path / "nonexistent.json")
    assert find_records(tmp_path) == [tmp_path / "q" / "result.json", tmp_path / "result.json"]
    real = _put(tmp_path / "r", {"status": "ok", "config": {}})
    assert find_records([real, real.parent]) == [real]

def test_view_fallbacks_are_named():
    rec = view({"schema": "gemmlab.result/1", "status": "invalid", "valid": False, "error": "kernel.TM: bad",
                "config": {"kernel": {"name": "tiled", "TM": 3}, "shape": [8, 8, 8]}}, "x/result.json")
    assert (rec.kernel, rec.params, rec.shape, rec.shape_from) == ("tiled", {"TM": 3}, (8, 8, 8), "config.shape")
    assert rec.category == "failed" and not rec.is_valid and rec.unread == []  # a failure: nothing expected
    ok = view({"status": "ok", "valid": True, "config": {"kernel": "naive", "shape": [4, 4, 4]}})
    assert ok.kernel == "naive" and "kernel.name (taken from config.kernel)" in ok.unread
    assert view([1]).category == "unreadable" and "not a JSON object" in view([1]).error


def test_samples_policy(tmp_path):
    base = {"schema": "gemmlab.result/1", "status": "ok", "valid": True,
            "kernel": {"name": "k", "params": {}}, "shape": {"M": 2, "N": 2, "K": 2},
            "timing": {"protocol": "graph", "median_ms": 1.0, "protocols": {"graph": {"samples_ms": [1.0, None]}}}}
    rec = read_record(_put(tmp_path / "a", base))
    assert rec.samples_ms == [1.0] and rec.nonfinite_samples == 1 and rec.samples_recorded == 2
    assert any("timing.protocols.graph" in d for d in rec.derived)
    base["timing"]["samples_ms"] = ["fast", 1.0]
    rec = read_record(_put(tmp_path / "b", base))
    assert rec.samples_not_numbers and "'fast'" in rec.samples_not_numbers


def test_measurement_settings_defaults_and_values():
    assert measurement_settings({}) == {"precision": "fp32", "layout": "row/row", "l2": "warm", "batch": None,
                                        "inputs": "normal", "target": None}
    rec = {"config": {"precision": "tf32", "layout": {"a": "col", "b": "row"}, "arch": "sm_80",
                      "timing": {"l2": "cold", "batch": 1}, "inputs": {"distribution": "integers"}},
           "device": {"arch": "sm_90"}}
    assert measurement_settings(rec) == {"precision": "tf32", "layout": "col/row", "l2": "cold", "batch": 1,
                                         "inputs": "integers", "target": "80"}
    same_arch = {"config": {"arch": "90"}, "device": {"arch": "sm_90"}}
    assert measurement_settings(same_arch)["target"] is None  # the device's own arch is the default
    text = {"precision": "tf32: float32 inputs ..."}
    assert measurement_settings(text)["precision"] == "tf32"


def _within(seconds: float, call):
    """``call()``'s result, or a failure if it has not returned within ``seconds`` (run in a daemon
    thread: a reader blocked on a fifo must fail the test, not hang it)."""
    import threading
    box = {}

    def target():
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the test
            box["error"] = exc
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still reading after {seconds} s (blocked on a fifo)"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_a_fifo_is_never_read_as_a_record_a_table_or_a_suite(tmp_path):
    """A new-user trial: a fifo named result.json inside a results folder blocked gemmlab-report,
    -compare, -tune build and families forever, as did a fifo given as kernel.table, --table or a
    suite. A record there is unreadable (listed, the command goes on); a table or suite is one line."""
    import os

    from gemmlab.dispatch.auto import load_table
    from gemmlab.dispatch.shapes import load_suite
    from gemmlab.errors import ConfigError
    (tmp_path / "p").mkdir()
    os.mkfifo(tmp_path / "p" / "result.json")
    os.mkfifo(tmp_path / "tab")
    rec = _within(10, lambda: read_record(tmp_path / "p" / "result.json"))
    assert rec.category == "unreadable" and "not a regular file" in rec.error, rec.error
    for load, field in ((lambda: load_table(tmp_path / "tab"), "kernel.table"), (lambda: load_suite(tmp_path / "tab"), "shapes")):
        with pytest.raises(ConfigError) as err:
            _within(10, load)
        assert err.value.field == field and "not a regular file" in str(err.value), str(err.value)


def test_a_bf16_record_whose_min_bytes_counted_4_byte_inputs_gets_the_intensity_of_2_byte_ones(tmp_path):
    """A new-user trial: records written before gemmlab counted 2-byte A and B (the committed
    docs/results/contract-h200 run) carry roofline.min_bytes = 4(MK + KN + MN) for bf16, and the
    report drew them at intensity 682.7 instead of 1024 (4096^3). The reader takes the intensity
    from the shape with the precision's element size and says so; an fp32 record is read as written."""
    from gemmlab.stages.record_model import read_record
    M = N = K = 4096
    old = {"schema": "gemmlab.result/1", "status": "ok", "valid": True,
           "config": {"kernel": {"name": "k"}, "shape": [M, N, K], "precision": "bf16"},
           "kernel": {"name": "k", "params": {}}, "shape": {"M": M, "N": N, "K": K},
           "timing": {"median_ms": 0.5}, "roofline": {"min_bytes": 4 * (M * K + K * N + M * N),
                                                       "arithmetic_intensity": 682.667}}
    path = tmp_path / "a" / "result.json"
    path.parent.mkdir()
    path.write_text(json.dumps(old))
    row = read_record(path)
    assert row.arithmetic_intensity == 1024.0 and any("4-byte" in d for d in row.derived), row.derived
    fp32 = {**old, "config": {**old["config"], "precision": "fp32"}}
    path.write_text(json.dumps(fp32))
    assert read_record(path).arithmetic_intensity == 682.667
    written_right = {**old, "roofline": {"min_bytes": 2 * (M * K + K * N) + 4 * M * N, "arithmetic_intensity": 1024.0}}
    path.write_text(json.dumps(written_right))
    row = read_record(path)
    assert row.arithmetic_intensity == 1024.0 and not any("intensity" in d for d in row.derived)
