"""The package layout (docs/plugin-guide.md, "Layout"): gemmlab's folders are layers and imports flow one way.

Read from the source with :mod:`ast` (nothing is imported): every ``import``/``from ... import``
of a gemmlab module, at module level or inside a function, is an edge. The rules:

* every module belongs to one layer of :data:`LAYERS` (its folder; the root's ``errors`` and
  ``paths`` are the base; the package ``__init__``, which re-exports the plugin API, sits with the
  contract; ``__main__`` is the command line);
* a module imports only its own layer or lower ones (never an upper layer, not even lazily);
* no import cycle between modules;
* plugins (``plugins/``) import only the base and the contract;
* every module opens with a docstring that says what it owns.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from clirun import REPO_ROOT as REPO, command_env  # noqa: E402  (the checkout, defined once)
PKG = REPO / "gemmlab"

# The layer order, lowest first: written once, here (docs/plugin-guide.md, "Layout", draws the same picture).
LAYERS = ("base", "contract", "gpu", "stages", "dispatch", "run", "results", "cli")
ROOT_LAYER = {"gemmlab.errors": "base", "gemmlab.paths": "base", "gemmlab.console": "base",
              "gemmlab.hookspecs": "contract", "gemmlab.plugin_utils": "contract",  # the old paths (see those files)
              "gemmlab": "contract",       # __init__ re-exports the plugin API (hookimpl, KernelSpec, ...)
              "gemmlab.__main__": "cli"}   # ``python -m gemmlab`` is the gemmlab command


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def layer_of(mod: str) -> str:
    if mod in ROOT_LAYER:
        return ROOT_LAYER[mod]
    parts = mod.split(".")
    assert len(parts) >= 2 and parts[1] in LAYERS, (
        f"{mod}: not in a layer folder; put it in one of {LAYERS} or name it in ROOT_LAYER")
    return parts[1]


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    """The syntax tree of the file ``path``, parsed once for this module's tests (only read)."""
    return ast.parse(path.read_text(), str(path))


def imports_of(path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """``(line, module)`` for every gemmlab module the file imports (anywhere in it)."""
    own = module_name(path) if path.is_relative_to(PKG) else ""
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    out = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "gemmlab"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if base.split(".")[0] != "gemmlab":
                continue
            for a in node.names:  # ``from gemmlab.stages import record``: the submodule itself
                sub = f"{base}.{a.name}"
                out.append((node.lineno, sub if sub in modules else base))
    return out


def graph() -> dict[str, list[tuple[int, str]]]:
    modules = all_modules()
    edges = {}
    for mod, path in modules.items():
        found = imports_of(path, modules)
        for line, target in found:
            assert target in modules or target.rpartition(".")[0] in modules, (
                f"{path.relative_to(REPO)}:{line}: imports {target}, which is not a gemmlab module")
        edges[mod] = [(line, t if t in modules else t.rpartition(".")[0]) for line, t in found]
    return edges


def test_every_module_is_in_a_layer_and_folders_are_the_layers():
    for mod in all_modules():
        layer_of(mod)
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders == set(LAYERS) - {"base"}, "each layer but the base is one folder of gemmlab/"


def upward_imports(edges: dict[str, list[tuple[int, str]]]) -> list[str]:
    """``"module:line imports target"`` for every import of an upper layer."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    return [f"{mod}:{line}: {mod} ({layer_of(mod)}) imports {target} ({layer_of(target)}), an upper layer"
            for mod, found in edges.items() for line, target in found
            if rank[layer_of(target)] > rank[layer_of(mod)]]


def test_imports_flow_one_way():
    upward = upward_imports(graph())
    assert not upward, "\n".join(upward)


def find_cycle(edges: dict[str, list[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None (depth-first search, colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in edges.get(node, ()):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle():
    # the package __init__ is left out as a target: every submodule import runs it first anyway
    edges = {m: sorted({t for _, t in found if t not in (m, "gemmlab")}) for m, found in graph().items()}
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_and_layer_checks_can_fail():
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b"], "b": []}) is None
    with pytest.raises(AssertionError, match="not in a layer folder"):
        layer_of("gemmlab.stray_module")
    assert layer_of("gemmlab.run.pipeline") == "run" and layer_of("gemmlab.errors") == "base"
    assert upward_imports({"gemmlab.gpu.device": [(7, "gemmlab.run.pipeline")]}) == [
        "gemmlab.gpu.device:7: gemmlab.gpu.device (gpu) imports gemmlab.run.pipeline (run), an upper layer"]
    assert upward_imports({"gemmlab.run.pipeline": [(7, "gemmlab.gpu.device"), (8, "gemmlab.run.isolation")]}) == []
    path = PKG / "stages" / "timing.py"  # a real module: its imports are found, the lazy ones too
    assert {t for _, t in imports_of(path, all_modules())} >= {"gemmlab.paths"}
    assert {t for _, t in imports_of(PKG / "gpu" / "compile.py", all_modules())} >= {"gemmlab.gpu.cache",
                                                                                        "gemmlab.gpu.sass"}


@pytest.mark.parametrize("plugin", sorted((REPO / "plugins").glob("*.py")), ids=lambda p: p.name)
def test_plugins_import_only_the_contract_and_base(plugin):
    modules = all_modules()
    bad = [f"{plugin.name}:{line}: {t}" for line, t in imports_of(plugin, modules)
           if layer_of(t if t in modules else t.rpartition(".")[0]) not in ("base", "contract")]
    assert not bad, "plugins may import only gemmlab.contract.* and the base: " + "; ".join(bad)


@pytest.mark.parametrize("mod", sorted(all_modules()), ids=str)
def test_module_docstring_says_what_it_owns(mod):
    doc = ast.get_docstring(parsed(all_modules()[mod]))
    assert doc and len(doc.splitlines()[0].split()) >= 4, f"{mod}: needs a docstring whose first line says what it owns"


def test_old_plugin_contract_paths_are_the_same_modules():
    """``gemmlab.hookspecs``/``gemmlab.plugin_utils`` (the import paths plugins were documented with
    before the layers) are the very module objects of ``gemmlab.contract``, not copies: one contract."""
    import gemmlab.contract.hookspecs
    import gemmlab.contract.plugin_utils
    import gemmlab.hookspecs
    import gemmlab.plugin_utils
    assert gemmlab.hookspecs is gemmlab.contract.hookspecs
    assert gemmlab.plugin_utils is gemmlab.contract.plugin_utils
    from gemmlab.hookspecs import hookimpl, KernelSpec
    assert hookimpl is gemmlab.contract.hookspecs.hookimpl and KernelSpec is gemmlab.contract.hookspecs.KernelSpec


def test_a_drop_in_plugin_of_the_old_import_paths_loads(tmp_path):
    """A plugin written with ``from gemmlab.hookspecs import ...`` (the README's plugin example
    before the layers) registers its kernel, in a fresh interpreter where it is the first import."""
    import subprocess
    import sys
    old = (REPO / "plugins" / "naive.py").read_text()
    old = old.replace("gemmlab.contract.hookspecs", "gemmlab.hookspecs").replace(
        "gemmlab.contract.plugin_utils", "gemmlab.plugin_utils").replace('name="naive"', 'name="old_naive"')
    assert "from gemmlab.hookspecs import" in old and "from gemmlab.plugin_utils import" in old
    (tmp_path / "old_naive.py").write_text(old)
    code = ("import sys; from gemmlab.contract.registry import load_registry; "
            f"r = load_registry([{str(tmp_path)!r}]); spec = r.get('old_naive'); "
            "import gemmlab.hookspecs, gemmlab.contract.hookspecs; "
            "assert gemmlab.hookspecs is gemmlab.contract.hookspecs; print(type(spec).__name__, spec.defaults)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=command_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "NaiveKernel {'BX': 16, 'BY': 16}"
