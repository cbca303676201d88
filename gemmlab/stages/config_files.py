"""What gemmlab's config files say, read without Hydra: an experiment file's sweep
(``hydra.sweeper.params``), the kernels it selects, the default kernel of ``conf/config.yaml``, a
file's defaults list and interpolations, the config groups of a config folder; and the one-line
error for a config file that is not valid YAML or not a mapping.

The command-line check (:mod:`gemmlab.run.config_check`) and the wording of Hydra's errors
(:mod:`gemmlab.cli.hydra_errors`) read the files through these, in Hydra's search order
(gemmlab's ``conf/`` first, then ``--config-dir`` folders: :func:`gemmlab.paths.config_file`).
"""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import OmegaConf

from gemmlab.errors import ConfigError
from gemmlab.paths import CONF_DIR, config_file
from gemmlab.stages.config import SECTIONS, sweeper_params, unknown_key_error


def config_groups(conf_dirs: tuple[Path, ...]) -> set[str]:
    """The config groups (sub-folders) of ``conf_dirs``: what a ``glob(...)`` can pick options of."""
    return {p.name for d in conf_dirs if d.is_dir() for p in d.iterdir() if p.is_dir()}


def experiment_sweeps(name: str, conf_dirs: tuple[Path, ...] = (CONF_DIR,)) -> dict:
    """An experiment file's ``hydra.sweeper.params`` (key -> value as written), or {} (no file, no
    sweep, a file that does not read: the experiment check names that). The file is the first
    ``<dir>/experiment/<name>.yaml`` of ``conf_dirs``, in Hydra's search order (gemmlab's ``conf/``,
    then a ``--config-dir``)."""
    path = config_file("experiment", name, conf_dirs)
    try:
        return sweeper_params(OmegaConf.to_container(OmegaConf.load(path)))
    except Exception:
        return {}


def experiment_kernels(name: str, conf_dirs: tuple[Path, ...] = (CONF_DIR,)) -> list[str]:
    """The kernels an experiment file sweeps (``hydra.sweeper.params.kernel``) or selects
    (``defaults: [override /kernel: X]``), if it names any (the file: :func:`gemmlab.paths.config_file`).

    Raises:
        ConfigError: the experiment file is not valid YAML.
    """
    path = config_file("experiment", name, conf_dirs)
    if not path.is_file():
        return []
    try:
        conf = OmegaConf.load(path)
        swept = OmegaConf.select(conf, "hydra.sweeper.params.kernel")
        chosen = [d["override /kernel"] for d in OmegaConf.to_container(conf).get("defaults", []) or []
                  if isinstance(d, dict) and "override /kernel" in d]  # e.g. experiment=shapes: auto
    except Exception as exc:
        raise ConfigError("experiment", f"{path} is not a valid config: {str(exc).splitlines()[0]}") from None
    return [k.strip() for k in str(swept).split(",")] if swept else [str(k) for k in chosen]


def default_kernel() -> str:
    """The kernel gemmlab's ``conf/config.yaml`` selects in its defaults list (``- kernel: X``): the
    config files name kernels, the core does not (issue 41).

    Raises:
        ConfigError: field ``kernel``, the file selects none (gemmlab's own always does).
    """
    defaults = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml")).get("defaults", [])
    name = next((d["kernel"] for d in defaults if isinstance(d, dict) and "kernel" in d), None)
    if not name:
        raise ConfigError("kernel", f"{CONF_DIR / 'config.yaml'} selects no default kernel; its defaults list "
                          "needs '- kernel: <name>'")
    return str(name)


def experiment_baseline(name: str, conf_dirs: tuple[Path, ...] = (CONF_DIR,)) -> str | None:
    """The ``baseline:`` an experiment file sets (e.g. ``experiment=shapes``: the shape suite's
    baseline, the default of ``gemmlab-tune sweep --baseline``); None where the file sets none or
    is missing.

    Raises:
        ConfigError: field ``experiment``, the file is not valid YAML.
    """
    path = config_file("experiment", name, conf_dirs)
    if not path.is_file():
        return None
    try:
        value = OmegaConf.load(path).get("baseline")
    except Exception as exc:
        raise ConfigError("experiment", f"{path} is not a valid config: {str(exc).splitlines()[0]}") from None
    return None if value is None else str(value)


def not_a_sweep_string(key: str, value: object, path: Path) -> str:
    """The message for a value under an experiment file's ``hydra.sweeper.params`` that is no
    string or number (a YAML list, a mapping, null): Hydra's sweepers take ``<key>=<value>`` as
    text, so a list is one value (one point with ``shape=[[32,32,32],[64,64,64]]``, an empty list
    one point with ``[]``), not the sweep it looks like."""
    def text(v):
        return "[" + ",".join(text(x) for x in v) + "]" if isinstance(v, (list, tuple)) else str(v)
    if isinstance(value, list) and value:
        joined = ",".join(text(v) for v in value)
        got, example = "a YAML list", f'{key}: "{joined}"' if joined.startswith("[") else f"{key}: {joined}"
    else:
        got = ("an empty YAML list" if isinstance(value, list) else "a mapping" if isinstance(value, dict)
               else "null")
        example = f"{key}: \"[32,32,32],[64,64,64]\"" if key == "shape" else f"{key}: 8,16"
    return (f"{path} gives hydra.sweeper.params.{key} {got} ({json_text(value)}); a sweep is written as one "
            f"comma string, e.g. {example}")


def json_text(value: object) -> str:
    """``value`` as it reads in YAML's flow style (``[[32, 32, 32], [64, 64, 64]]``, ``[]``, ``null``)."""
    import json
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def config_dirs(args: list[str]) -> list[str]:
    """The ``--config-dir``/``-cd`` folders of the command line ``args``."""
    dirs = []
    for i, arg in enumerate(args):
        for flag in ("--config-dir", "-cd"):
            if arg == flag and i + 1 < len(args):
                dirs.append(args[i + 1])
            elif arg.startswith(flag + "="):
                dirs.append(arg.split("=", 1)[1])
    return dirs


def experiment_file(args: list[str]) -> tuple[str, dict] | None:
    """(name, its YAML content as a mapping) of the one experiment the command line ``args``
    chooses (``experiment=NAME``), looked up as Hydra does (gemmlab's conf/, then ``--config-dir``
    folders); None for none, a sweep of experiments, or a file that does not read."""
    import yaml
    names = [a.split("=", 1)[1] for a in args if a.lstrip("+").startswith("experiment=")]
    if not names or not re.fullmatch(r"[\w.\-/]+", names[-1]):
        return None
    try:
        path = config_file("experiment", names[-1], [CONF_DIR, *map(Path, config_dirs(args))])
        node = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return (names[-1], node) if isinstance(node, dict) else None


def in_defaults(node: dict, group: str, option: str) -> bool:
    """The config file ``node``'s defaults list chooses ``option`` of ``group``."""
    for entry in node.get("defaults") or []:
        if isinstance(entry, dict):
            for k, v in entry.items():
                if str(k).split()[-1].lstrip("/") == group and str(v) == option:
                    return True
    return False


def find_interpolation(node, name: str, path: str = "") -> str | None:
    """The dotted key of the first value of ``node`` (a YAML mapping or list) that interpolates
    ``${name}`` (also ``${name.sub}``, ``${name:...}``), or None."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        key = f"{path}.{k}" if path else str(k)
        if isinstance(v, str) and re.search(r"\$\{\s*" + re.escape(name) + r"\s*[.:}\[]", v):
            return key
        found = find_interpolation(v, name, key)
        if found:
            return found
    return None


def field_of_file(path: Path) -> str:
    """The config group a config file belongs to (its folder: ``experiment``, ``timing``, ...),
    else ``config`` (a primary config)."""
    from gemmlab.stages.config import TOP_LEVEL
    return path.parent.name if path.parent.name in (*TOP_LEVEL, "experiment") else "config"


def yaml_syntax_error(exc: BaseException) -> ConfigError | None:
    """The one line for a config file that is not valid YAML (PyYAML's error, raised while Hydra
    loads the file, in ``exc`` or its causes): the file, the line and column, PyYAML's reason."""
    import yaml
    seen = 0
    while exc is not None and seen < 8 and not isinstance(exc, yaml.MarkedYAMLError):
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    if not isinstance(exc, yaml.MarkedYAMLError):
        return None
    mark = exc.context_mark or exc.problem_mark
    path = Path(str(getattr(mark, "name", "") or "?"))
    reason = "; ".join(str(p) for p in (exc.context, exc.problem) if p)
    if exc.context_mark is not None and exc.problem_mark is not None and exc.problem_mark.line != mark.line:
        reason += f" (at line {exc.problem_mark.line + 1})"
    where = f"{path}, line {mark.line + 1} column {mark.column + 1}" if mark is not None else str(path)
    return ConfigError(field_of_file(path), f"{where}: not valid YAML: {reason}; a config file is a YAML mapping "
                       "(key: value lines)")


def not_a_mapping(name: str, args: list[str]) -> ConfigError | None:
    """The one line for the config file ``name`` (``experiment/mine``, as Hydra names it while
    composing) when it is not a YAML mapping (a list, a plain value); the file is looked up in the
    ``--config-dir`` folders of ``args`` and gemmlab's conf/. None when it is a mapping or not found."""
    import yaml
    for folder in [*config_dirs(args), str(CONF_DIR)]:
        path = Path(folder) / f"{name}.yaml"
        try:
            node = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if node is None or isinstance(node, dict):
            return None
        return ConfigError(field_of_file(path), f"{path} holds a YAML {type(node).__name__}, but a config file must "
                           "be a mapping (key: value lines)")
    return None


def unknown_key_in(key: str, where: str, hint: str = "") -> ConfigError:
    """The unknown-key error of ``key`` (:func:`gemmlab.stages.config.unknown_key_error`) with where it
    was given (``where``, e.g. `` (in experiment/mine)``) after the key's words and ``hint`` after the
    known keys."""
    what = str(unknown_key_error(key)).split(": ", 1)[-1]
    head, sep, known = what.partition("; known")
    return ConfigError(key, f"{head}{where}{sep}{known}{hint}")


def section_not_mapping(node: dict, type_name: str, value: str, name: str) -> ConfigError | None:
    """The one line for a config file ``node`` (``name``: ``experiment/mine``) that gives a section
    (``timing``, ``verify``, ...) a value of type ``type_name`` (OmegaConf's merge error: ``value``
    as it printed it) instead of a mapping of its fields; None when no section of ``node`` is one."""
    section = next((k for k, v in node.items() if k in SECTIONS and not isinstance(v, dict)
                    and type(v).__name__ == type_name), None)
    if section is None:
        return None
    kind = {"list": "a list", "str": "a string", "int": "a number", "float": "a number",
            "bool": "a boolean"}.get(type_name, f"a {type_name}")
    return ConfigError(section, f"{kind} ({value}) where a group of fields is expected (in {name}); write its "
                       f"fields as key: value lines under '{section}:'; known: {', '.join(sorted(SECTIONS[section]))}")
