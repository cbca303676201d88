"""Hydra's and OmegaConf's errors about a command line or the configs it composes, as gemmlab's
one-line :class:`~gemmlab.errors.ConfigError` (the field, what is wrong, what is allowed):
:func:`hydra_error` is the entry; :func:`gemmlab.cli.app.main` calls it on whatever Hydra raised
and prints its line (exit 2) instead of Hydra's traceback.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from gemmlab.errors import ConfigError
from gemmlab.paths import CONF_DIR
from gemmlab.stages import config_files
from gemmlab.stages.config import sweeper_params


#: Hydra's own messages: lines that only locate an OmegaConf error (the field is named already)
_LOCATOR = re.compile(r"^\s*(full_key:|object_type=|reference_type=)")


def _one_line(text: str) -> str:
    """Hydra's multi-line message as one line (its lines joined by ``; ``, locator lines dropped)."""
    lines = [line.strip().rstrip(".") for line in str(text).splitlines() if line.strip() and not _LOCATOR.match(line)]
    return "; ".join(lines)


#: Hydra plugin options gemmlab's configs use -> (plugin in words, gemmlab's extra that installs it)
PLUGIN_EXTRAS = MappingProxyType({
    "hydra/launcher": MappingProxyType({"submitit_local": ("the submitit launcher", "cluster"),
                                        "submitit_slurm": ("the submitit launcher", "cluster"),
                                        "joblib": ("the joblib launcher", "cluster")}),
    "hydra/sweeper": MappingProxyType({"optuna": ("the Optuna sweeper", "search")})})


def _missing_plugin(group: str, option: str, args: list[str]) -> ConfigError | None:
    """The one line for a Hydra plugin option that is not installed (:data:`PLUGIN_EXTRAS`),
    naming what the user chose on ``args`` (``hydra/launcher=gemmlab_local``, an experiment)."""
    plugin = PLUGIN_EXTRAS.get(group, {}).get(option)
    if plugin is None:
        return None
    chosen = option
    for arg in args:
        key, _, value = arg.lstrip("+~").partition("=")
        if key == group and value:
            chosen = value
        elif key == "experiment" and value and chosen == option:
            chosen = f"experiment={value}"
    return ConfigError(group, f"{chosen} needs {plugin[0]}, which is not installed: pip install 'gemmlab[{plugin[1]}]'")


def hydra_error(exc: BaseException, args: list[str] | None = None) -> ConfigError | None:
    """The one-line :class:`ConfigError` for an error Hydra (or OmegaConf under it) raised about
    the command line or the configs it composes: a missing ``--config-dir``/``--config-path``
    folder, an unknown ``--config-name`` or group option (``hydra/launcher=nope``), an override
    Hydra cannot merge (``hydra.mode=NOPE``), flags that cannot be combined. None for anything
    else (an error of gemmlab's own code stays a traceback).

    The field is the flag, the config group or the key; the message is Hydra's, in one line,
    with what is allowed (the group's options, the expected values) where Hydra says it. A
    launcher or sweeper plugin that is not installed names the extra that brings it, and the
    option or experiment of ``args`` (the command line) that asked for it.
    """
    from hydra.errors import HydraException, MissingConfigException, OverrideParseException
    from omegaconf.errors import OmegaConfBaseException
    syntax = config_files.yaml_syntax_error(exc)
    if syntax is not None:
        return syntax
    composing = re.match(r"In '([^']+)': Config\w+Error raised while composing config", str(exc))
    if composing:
        not_mapping = config_files.not_a_mapping(composing.group(1), list(args or []))
        if not_mapping is not None:
            return not_mapping
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    origin = tb.tb_frame.f_globals.get("__name__", "") if tb is not None else ""
    from_hydra = origin.split(".")[0] in ("hydra", "omegaconf")
    if not isinstance(exc, (HydraException, OmegaConfBaseException)) and not from_hydra:
        return None
    text = str(exc)
    # hydra.sweeper.params.kernel.BK=... in any form (unquoted: a sweep of a Hydra key; quoted: Key 'kernel'
    # is not in struct; with '+': nested as params.kernel.BK, which no sweeper reads): what works instead
    overrides = [a.lstrip("+").split("=", 1) for a in args or [] if "=" in a]
    dotted = next((kv for kv in overrides if _dotted_param(kv[0])), None)
    if dotted is not None:
        return _dotted_param_error(*dotted)
    if isinstance(exc, OverrideParseException):
        return ConfigError(exc.override.split("=", 1)[0] or "override", _one_line(exc.message))
    m = re.match(r"Sweeping over Hydra's configuration is not supported\s*:\s*'([^'=]+)=(.*)'", text)
    if m:  # hydra.sweeper.params.tc_rung=a,b: a comma list is a sweep, and Hydra keys are not swept
        return ConfigError(m.group(1), f"{m.group(2)} is a comma list, i.e. a sweep, and Hydra does not sweep its "
                           f"own hydra.* keys; quote the value to give it as one string: \"{m.group(1)}='{m.group(2)}'\"")
    m = re.match(r"Could not override '([^'=\s]+)'", text)
    if m and not m.group(1).startswith("hydra."):  # a key the schema lacks, from the command line or a sweep's params
        return _cannot_override(m.group(1), exc, list(args or []))
    m = re.search(r"Error in call to target '([\w.]+)'.*unexpected keyword argument '(\w+)'", text, re.DOTALL)
    if m:  # +hydra.sweeper.foo=1: the plugin's class takes no such argument
        return _unknown_plugin_argument(m.group(1), m.group(2))
    m = re.match(r"Additional config directory '(.*)' not found", text)
    if m:
        return ConfigError("--config-dir", f"{m.group(1)} is not a directory; give a folder of config files "
                           "(added to the config search path)")
    m = re.search(r"config directory '(.*)' exists|Primary config module '(.*)' not found", text)
    if m:
        where = m.group(1) or m.group(2)
        return ConfigError("--config-path", f"{where} is not a config folder (or Python module with an __init__.py); "
                           f"gemmlab's own is {CONF_DIR}")
    if isinstance(exc, MissingConfigException):
        missing = exc.missing_cfg_file or ""
        m = re.match(r"Cannot find primary config '(.*?)'", text)
        if m:
            return ConfigError("--config-name", f"no primary config '{m.group(1)}' in the config search path "
                               "(a YAML file in the config folder or --config-dir, named without .yaml; "
                               "gemmlab's own is config)")
        if "/" in missing:
            group, _, option = missing.rpartition("/")
            plugin = _missing_plugin(group, option, list(args or []))
            if plugin is not None:
                return plugin
            options = ", ".join(exc.options or []) or "none"
            what = f"experiment '{option}'" if group == "experiment" else f"option '{option}'"  # as the pre-check
            where = ""
            experiment = config_files.experiment_file(list(args or []))
            if group != "experiment" and experiment is not None and config_files.in_defaults(experiment[1], group, option):
                where = f" (in experiment/{experiment[0]}'s defaults)"
            return ConfigError(group, f"unknown {what}{where}; available: {options}")
        return ConfigError(missing or "config", _one_line(text))
    cause = exc.__cause__ if isinstance(exc.__cause__, OmegaConfBaseException) else None
    m = re.match(r"In '([^']+)': ConfigKeyError raised while composing config", text)
    unknown = re.search(r"Key '([^']+)' not in '(\w+)'", text + "\n" + str(cause or ""))
    if m and unknown:  # a config file (a user's experiment) sets a key the schema does not have
        full = re.search(r"full_key: (\S+)", text)
        key = str(getattr(cause, "full_key", None) or (full.group(1) if full else unknown.group(1)))
        hint = ("; an experiment file starts with the line '# @package _global_' (its keys are then the config's "
                "own, not the experiment's)") if key == "experiment" and m.group(1).startswith("experiment/") else ""
        return config_files.unknown_key_in(key, f" (in {m.group(1)})", hint)  # its keys landed under experiment.*
    key = getattr(cause or exc, "full_key", None)
    m = re.search(r"(?:Error merging override |Could not override ')([^='\s]+)", text)
    if not key and m:
        key = m.group(1)
    if not key:
        key = _override_key(exc.__traceback__)
    if not key:  # an experiment file's error Hydra names no key of: the file and the key, not the command line
        in_file = _experiment_error(text, list(args or []))
        if in_file is not None:
            return in_file
    if not key:  # e.g. "The --resolve flag can only be used ..."; "Only one of --run, --multirun, ..."
        m = re.match(r"The (--\w[\w-]*) flag", text)
        key = m.group(1) if m else "command line"
    detail = _one_line(text)
    if cause is not None and str(cause).strip():
        detail = f"{detail}: {_one_line(cause)}" if not detail.startswith(_one_line(cause)) else detail
    env = re.search(r"Environment variable '([^']+)' not found", detail)
    if env:  # ${oc.env:X} of a variable that is not set: say how to give it (OmegaConf's oc.env resolver)
        return ConfigError(str(key), f"the environment variable {env.group(1)} is not set (in ${{oc.env:{env.group(1)}}}); "
                           f"set it, or give a default: ${{oc.env:{env.group(1)},<default>}}")
    return ConfigError(str(key), detail)


_SWEPT = "hydra.sweeper.params."


def _dotted_param(key: str) -> bool:
    """``key`` is ``hydra.sweeper.params.<a key with a dot>`` (``kernel.BK``): a sweep's params
    entry that no override path reaches (Hydra reads each dot as a level)."""
    return key.startswith(_SWEPT) and "." in key[len(_SWEPT):]


def _dotted_param_error(key: str, value: str | None) -> ConfigError:
    """The one line for ``hydra.sweeper.params.kernel.BK=...`` on the command line: unquoted it is a
    sweep of a Hydra key, quoted it is a path through a key ``kernel`` that params does not hold,
    and Hydra's '+...' advice adds ``params.kernel.BK``, which no sweeper reads. What works: sweep
    the key itself, or give params an entry as a mapping."""
    swept = key[len(_SWEPT):]
    value = (value or "").strip("'\"") or "a,b"
    return ConfigError(key, f"the sweep's params key {swept} has a dot, which an override path reads as a level "
                       f"(params has no {swept.split('.')[0]}); sweep the key itself: gemmlab -m {swept}={value}, "
                       f"or give params the entry as a mapping: \"hydra.sweeper.params={{{swept}:'{value}'}}\"")








def _cannot_override(key: str, exc: BaseException, args: list[str]) -> ConfigError:
    """Hydra's "Could not override 'kernel.FOO'. To append to your config use +kernel.FOO=1" for a
    key the config has no place for, from the command line (a custom config folder, which gemmlab's
    pre-check leaves to Hydra) or from the ``hydra.sweeper.params`` of the experiment file: the
    kernel's parameters or the section's known keys, as the command-line check says them, naming
    the experiment file where the key is its; never Hydra's "+key" advice (gemmlab has no such keys)."""
    from hydra.core.override_parser.types import Override
    cfg, tb = None, exc.__traceback__
    while tb is not None:  # Hydra's _apply_overrides_to_config(overrides, cfg): the point's composed config
        if isinstance(tb.tb_frame.f_locals.get("override"), Override):
            cfg = tb.tb_frame.f_locals.get("cfg", cfg)
        tb = tb.tb_next
    where = ""
    experiment = config_files.experiment_file(args)
    given = {a.lstrip("+~").split("=", 1)[0] for a in args}
    if experiment is not None and key in sweeper_params(experiment[1]) and key not in given:
        where = f" (in experiment/{experiment[0]}'s hydra.sweeper.params)"
    top, _, sub = key.partition(".")
    kernel = None
    try:
        kernel = cfg.kernel if top == "kernel" and sub and "." not in sub else None
        name = str(kernel.name)
        params = [str(k) for k in kernel.keys() if k != "name"]
    except Exception:
        kernel = None
    if kernel is not None:
        return ConfigError(key, f"kernel '{name}' has no parameter {sub}{where}; its parameters: "
                           f"{', '.join(params) or 'none'}")
    return config_files.unknown_key_in(key, where)




def _experiment_error(text: str, args: list[str]) -> ConfigError | None:
    """Hydra's errors about the experiment file the command line chose that name no key (they read
    as the command line's): a group chosen without ``override`` in its defaults list, a section
    given a list or a value, an interpolation of a key the config lacks. The key and the file;
    None where ``text`` is none of these or names another file."""
    experiment = config_files.experiment_file(args)
    m = re.match(r"Multiple values for ([\w/]+)\. To override a value use 'override ([\w/]+): (\S+)'", text)
    if m:
        group, option = m.group(1), m.group(3)
        if experiment is not None and config_files.in_defaults(experiment[1], group, option):
            return ConfigError(group, f"experiment/{experiment[0]}'s defaults list has '- /{group}: {option}', but the "
                               f"config already chose a {group}; write '- override /{group}: {option}' to replace it")
        return ConfigError(group, f"a defaults list chooses {group} '{option}' while the config already chose a {group}; "
                           f"write '- override /{group}: {option}' to replace it")
    m = re.match(r"In '(experiment/[^']+)': (\w+) raised while composing config:?\s*(.*)", text, re.DOTALL)
    if m and experiment is not None and m.group(1) == f"experiment/{experiment[0]}":
        detail = _one_line(m.group(3))
        merge = re.match(r"Merge error: (\w+) is not a subclass of (\w+)\. value: (.*)", detail)
        section = config_files.section_not_mapping(experiment[1], merge.group(1), merge.group(3), m.group(1)) if merge else None
        return section or ConfigError("experiment", f"{detail} (in {m.group(1)})")
    m = re.match(r"Interpolation key '([^']+)' not found", text)
    if m and experiment is not None:
        params = sweeper_params(experiment[1])
        found = config_files.find_interpolation(params, m.group(1))
        where = f"experiment/{experiment[0]}'s hydra.sweeper.params" if found else f"experiment/{experiment[0]}"
        found = found or config_files.find_interpolation({k: v for k, v in experiment[1].items() if k != "defaults"}, m.group(1))
        if found:
            return ConfigError(found, f"the interpolation ${{{m.group(1)}}} names no key of the config (in {where})")
    return None


def _unknown_plugin_argument(target: str, name: str) -> ConfigError:
    """``+hydra.sweeper.foo=1`` (or ``hydra.launcher``): Hydra's 'Error in call to target ...
    TypeError(... unexpected keyword argument ...)' as the key and the arguments the plugin's class
    takes (its ``__init__``, read with :mod:`inspect`)."""
    import importlib
    import inspect
    node = "hydra.sweeper" if "sweeper" in target.lower() else "hydra.launcher" if "launcher" in target.lower() else "hydra"
    module, _, cls = target.rpartition(".")
    try:
        params = inspect.signature(getattr(importlib.import_module(module), cls).__init__).parameters.values()
        taken = [p.name for p in params if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except Exception:
        taken = []
    return ConfigError(f"{node}.{name}", f"{cls} takes no argument {name!r}"
                       + (f"; its arguments: {', '.join(taken)}" if taken else ""))








def _override_key(tb) -> str | None:
    """The key of the Hydra override being applied where ``tb`` ended (a local ``override`` of
    Hydra's override parser in one of its frames), if any."""
    from hydra.core.override_parser.types import Override
    key = None
    while tb is not None:
        value = tb.tb_frame.f_locals.get("override")
        if isinstance(value, Override):
            key = value.key_or_group
        tb = tb.tb_next
    return key


def override_parse_error(text: str, previous: str | None, following: str | None, exc: Exception) -> ConfigError:
    """The one line for the override ``text`` that Hydra's override parser refused (``exc``), given the
    command-line words around it (:func:`gemmlab.cli.precheck._parse_overrides` says what the hints mean)."""
    if "=" not in text:
        value = previous.split("=", 1)[1] if previous and "=" in previous else ""
        if "/" in value:
            return ConfigError(text, f"not an override (key=value); if it belongs to {previous!r} (a path with a "
                               f"space, split by the shell), quote the whole override: '{previous} {text}'")
        return ConfigError(text, "not an override: an override is key=value, e.g. kernel=tiled or shape=[63,65,33]")
    value = text.split("=", 1)[1]
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if first == f"Error parsing override '{text}'" or value.startswith(",") or value.endswith(",") or ",," in value:
        first = "an empty value in a comma list: write A,B,C" if "," in value else "Hydra's override grammar does not accept it"
    split = ((value.count("[") > value.count("]") or value.endswith(","))
             and following is not None and "=" not in following)
    key = text.split("=", 1)[0].lstrip("+~") or "override"
    if split:  # the grammar's own words (what it expected at the end) say nothing useful here
        return ConfigError(key, f"cannot parse override {text!r}: the shell split it at a space: write lists and "
                           "sweeps without spaces, [8,8,8] or naive,tiled, or quote the override")
    hint = ""
    if "[" in value or "]" in value:
        inner = value[1:-1] if value.startswith("[") and value.endswith("]") else None
        if inner and not any(q in inner for q in "'\"[]"):  # e.g. plugin_dirs=[~/x]: ~ is no bare value
            quoted = ",".join(f'"{element}"' for element in inner.split(","))
            hint = (f" (an element with characters the grammar does not take bare, such as ~ or a space, is quoted "
                    f"for Hydra inside the list and the whole override for the shell: '{text.split('=', 1)[0]}=[{quoted}]')")
        else:
            hint = " (lists are written [a,b,c]; quote them in the shell)"
    elif _not_bare(value) and not any(c in value for c in "'\"{}()"):  # e.g. hydra.run.dir=out/é
        quoted = ",".join(f'"{element}"' for element in value.split(","))  # a sweep's elements stay a sweep
        hint = (f" (a value with characters the grammar does not take bare, such as {_not_bare(value)}, is quoted "
                f"for Hydra and the whole override for the shell: '{text.split('=', 1)[0]}={quoted}')")
    return ConfigError(key, f"cannot parse override {text!r}: {first}{hint}")


#: ASCII characters Hydra's override grammar refuses in a bare value that have no meaning of their
#: own there (brackets, braces, parentheses, quotes and ``=`` do: they are left to their own errors;
#: ``~`` too: quoted it is no home folder, ``~/runs`` would be a folder named ``~``)
_NOT_BARE = "!#&;<>^`"


def _not_bare(value: str) -> str | None:
    """The first character of ``value`` that Hydra's grammar takes only quoted (any non-ASCII
    character, or one of :data:`_NOT_BARE`), else None."""
    return next((c for c in value if not c.isascii() or c in _NOT_BARE), None)
