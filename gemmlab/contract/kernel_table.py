"""The README's kernel table and the kernel config files, generated from the registry (issue 41
item 1): what a plugin declares (``precisions``, ``layouts``, ``defaults``, ``description``) is the
source; ``README.md``'s "Built-in kernels" table and ``conf/kernel/<name>.yaml`` are checked
against it (tests/test_spaces.py), never kept by hand.

Command line::

    python -m gemmlab.contract.kernel_table --table        # the README's table, Markdown
    python -m gemmlab.contract.kernel_table --check        # each kernel's conf/kernel file: ok or what differs
    python -m gemmlab.contract.kernel_table --write-yamls  # write missing files, rewrite stale values

Exit status: 0; ``--check`` 1 where a file is missing or differs; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from gemmlab.contract.hookspecs import KernelBase, LibraryKernelSpec, TritonKernelSpec
from gemmlab.paths import CONF_DIR

#: the table's header and rule lines (README.md, "Built-in kernels")
HEADER = ("| kernel | precisions | layouts (A/B) | parameters (defaults) | what it is |", "|---|---|---|---|---|")
#: the command that writes the kernel config files (named in each generated file's header)
WRITE_COMMAND = "python -m gemmlab.contract.kernel_table --write-yamls"


def kind_order(spec: KernelBase) -> int:
    """Where a kernel's row sits: 0 an NVRTC-compiled CUDA kernel, 1 a Triton kernel, 2 a vendor
    library's (the baselines)."""
    return 2 if isinstance(spec, LibraryKernelSpec) else 1 if isinstance(spec, TritonKernelSpec) else 0


def defaults_text(spec: KernelBase) -> str:
    """``BM=64 BN=64`` (declared order); ``none`` for a kernel without parameters."""
    return " ".join(f"{k}={v}" for k, v in spec.defaults.items()) or "none"


def layouts_text(spec: KernelBase) -> str:
    """The declared ``(layout.a, layout.b)`` pairs as ``row/row row/col``, in declared order."""
    return " ".join(f"{a}/{b}" for a, b in spec.layouts)


def table_row(spec: KernelBase) -> str:
    """One Markdown row: name, precisions, layouts, defaults, description (``|`` escaped)."""
    cells = [f"`{spec.name}`", " ".join(spec.precisions), layouts_text(spec), defaults_text(spec),
             " ".join(spec.description.split()).replace("|", "\\|")]
    return "| " + " | ".join(cells) + " |"


def kernel_table(kernels: dict[str, KernelBase]) -> list[str]:
    """The README's kernel table for ``kernels`` (``Registry.kernels``): header, rule, one row per
    kernel, CUDA kernels first, then Triton, then library baselines, each by name."""
    specs = sorted(kernels.values(), key=lambda s: (kind_order(s), s.name))
    return [*HEADER, *(table_row(s) for s in specs)]


def yaml_key(key: str) -> str:
    """``key`` as a YAML mapping key: quoted where YAML 1.1 would read it as something else
    (``ON``, ``no``, ``Y``: booleans to PyYAML)."""
    import yaml
    return key if yaml.safe_load(f"{key}: 0") == {key: 0} else f'"{key}"'


def yaml_values(spec: KernelBase) -> list[str]:
    """The config file's value lines: ``name: <kernel>``, then each default as ``P: value``."""
    return [f"name: {spec.name}", *(f"{yaml_key(k)}: {v}" for k, v in spec.defaults.items())]


def new_yaml(spec: KernelBase) -> str:
    """A new ``conf/kernel/<name>.yaml``: the plugin's description as a comment, the generating
    command, then :func:`yaml_values`."""
    lines = textwrap.wrap(" ".join(spec.description.split()), 100, initial_indent="# ", subsequent_indent="# ")
    lines.append(f"# Written from the plugin's declared defaults by `{WRITE_COMMAND}`.")
    return "\n".join([*lines, *yaml_values(spec)]) + "\n"


def yaml_problem(path: Path, spec: KernelBase) -> str | None:
    """What is wrong with ``path`` as ``spec``'s config file (missing; values other than the
    declared defaults, saying which), or None when it holds exactly ``name`` and the defaults."""
    import yaml
    if not path.is_file():
        return f"{path} is missing"
    node = yaml.safe_load(path.read_text())
    want = {"name": spec.name, **dict(spec.defaults)}
    if not isinstance(node, dict) or node != want:
        got = node if isinstance(node, dict) else {}
        diff = [f"{k}: {got.get(k, '(absent)')} -> {v}" for k, v in want.items() if got.get(k, object()) != v]
        diff += [f"{k}: {got[k]} -> (not a parameter)" for k in got if k not in want]
        return f"{path} differs from the plugin's defaults: {'; '.join(diff) or 'not a mapping'}"
    return None


def write_yaml(path: Path, spec: KernelBase) -> None:
    """Write ``spec``'s config file: a new file (:func:`new_yaml`), or an existing one's leading
    comment lines kept and its values replaced by :func:`yaml_values`."""
    if not path.is_file():
        path.write_text(new_yaml(spec))
        return
    lines = path.read_text().splitlines()
    head = []
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            break
        head.append(line)
    path.write_text("\n".join([*head, *yaml_values(spec)]) + "\n")


def builtin_kernels() -> dict[str, KernelBase]:
    """The built-in kernels (no entry points, no drop-in folders): the ones gemmlab ships files for."""
    from gemmlab.contract.registry import load_registry
    return load_registry(entry_points=False).kernels


def main(argv: list[str] | None = None, conf_dir: Path = CONF_DIR) -> int:
    """The command line (module docstring). ``conf_dir``: the config folder (tests pass a copy)."""
    parser = argparse.ArgumentParser(prog="python -m gemmlab.contract.kernel_table",
                                     description="the README's kernel table and conf/kernel files from the registry")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--table", action="store_true", help="print the README's kernel table")
    what.add_argument("--check", action="store_true", help="check each built-in kernel's conf/kernel file")
    what.add_argument("--write-yamls", action="store_true", help="write missing conf/kernel files, fix stale values")
    args = parser.parse_args(argv)
    kernels = builtin_kernels()
    if args.table:
        print("\n".join(kernel_table(kernels)))
        return 0
    bad = 0
    for name, spec in kernels.items():
        path = conf_dir / "kernel" / f"{name}.yaml"
        problem = yaml_problem(path, spec)
        if args.write_yamls and problem:
            write_yaml(path, spec)
            print(f"wrote {path}")
        elif problem:
            bad += 1
            print(problem)
    if args.check:
        print(f"{len(kernels) - bad} of {len(kernels)} kernel config files match the registry")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
