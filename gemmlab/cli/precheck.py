"""The ``gemmlab`` command line's pre-check: what the command line and the config files it selects
hold is checked before Hydra runs anything, so a mistake is one line naming the field (exit 2) and
no folder is made. :func:`_prepare` reads the overrides with Hydra's own parser, loads the plugins
(``plugin_dirs``), stores their kernel nodes, and refuses unknown keys and group options, sweeps
without ``-m``, values that no point could accept (each value of a sweep too, also an experiment
file's), point folders that would clash, and options of a ``--config-dir`` shadowed by gemmlab's
own; it notes in the :class:`Invocation` what :mod:`gemmlab.cli.app` needs (plugin folders, run
mode). What only Hydra can tell is left to it (:mod:`gemmlab.cli.hydra_errors` words it).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from gemmlab.cli import sweep
from gemmlab.run.folders import SWEEP_FILES
from gemmlab.cli.hydra_errors import override_parse_error
from gemmlab.dispatch.auto import AUTO, AUTO_KEYS
from gemmlab.errors import ConfigError
from gemmlab.paths import CONF_DIR, config_file
from gemmlab.run.pipeline import registry_for
from gemmlab.stages.config import (FIELD_RULES, check_baseline, check_config_file, check_field, parse_params,
                                   sweeper_params, unknown_key_error)

_FILE_GROUPS = ("experiment", "timing")  # config groups whose options are only YAML files in conf/


@dataclass
class Invocation:
    """The state of one ``gemmlab`` command, created by :func:`gemmlab.cli.app.main` and handed to the pre-check
    and (through a closure) to the Hydra task.

    Attributes:
        plugin_dirs: ``plugin_dirs`` named on the command line (the pre-check reads them; the
            help text's kernel list loads plugins from them).
        statuses: exit status of each point run in this process (0 valid, 1 failed, 2 invalid
            input; :func:`gemmlab.run.pipeline.exit_status`), in run order.
        refused_existing: points refused because their folder already holds a result.json (the
            line is said for the first only: a re-run sweep would repeat it for every point).
        folder_errors: the sweep's points that could not create or write their own folder
            (gemmlab's launcher, ``hydra_plugins/gemmlab_launcher``): they have no record, so the
            end of the sweep names them.
        point_dirs: the output folder of each point started in this process, in run order (where
            an interrupt landed once Hydra has let go of the point's config, :func:`gemmlab.cli.app._interrupted_advice`).
        multirun: True a sweep (``-m`` or ``hydra.mode`` on the command line, or gemmlab's sweeper or
            launcher set up), False a single run (no file the command selects can set ``hydra.mode``),
            None not known yet (an experiment or tensor-core rung may set it).
        sweep_dir: ``hydra.sweep.dir`` of a multirun, set when gemmlab's sweeper or launcher is set
            up (``hydra_plugins``); None for a run or before.
        hydra_full_error: the user's ``HYDRA_FULL_ERROR`` (None: unset). gemmlab sets the variable
            to 1 around its Hydra call (:func:`_hydra_raises`) and gives each point this value
            back, so the processes a point starts (its worker, compute-sanitizer's child
            ``gemmlab``) see the user's choice, not gemmlab's.
    """

    plugin_dirs: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    point_dirs: list[Path] = field(default_factory=list)
    refused_existing: int = 0  # points refused because their folder already holds a result.json
    hydra_full_error: str | None = None
    folder_errors: list[str] = field(default_factory=list)  # sweep points whose folder could not be written
    sweep_dir: str | None = None  # hydra.sweep.dir once gemmlab's sweeper or launcher is set up
    multirun: bool | None = None  # a sweep, a single run, None not known yet

    def exit_status(self) -> int:
        """The command's exit status when the points ran to the end: the worst point's, 0 for none."""
        return max(self.statuses, default=0)


def _values(o, options: list[str] | None = None) -> list[str] | None:
    """The string value(s) of a group override (a sweep gives several; a glob is matched against
    ``options``); None when they cannot be enumerated here (an interval, a glob without options)."""
    from hydra.core.override_parser.types import Glob
    value = o.value()
    if isinstance(value, Glob):
        return value.filter(sorted(options)) if options is not None else None
    if o.is_sweep_override():
        if not o.is_discrete_sweep():
            return None
        return [str(v) for v in o.sweep_string_iterator()]
    return [o.get_value_element_as_str()]


def _is_glob(o) -> bool:
    """The override's value is Hydra's ``glob(...)``."""
    from hydra.core.override_parser.types import Glob
    return isinstance(o.value(), Glob)


def _known_keys() -> dict[str, set[str] | None]:
    """Top-level config keys and, for mapping sections, their keys (None: free-form), from the
    config schema (:class:`gemmlab.stages.config.GemmlabConfig`)."""
    from gemmlab.stages.config import SECTIONS, TOP_LEVEL
    known: dict[str, set[str] | None] = {k: set(SECTIONS[k]) if k in SECTIONS else None for k in TOP_LEVEL}
    known["experiment"] = None  # kernel stays None: checked against the selected kernels' parameters
    return known


def hydra_args_parser():
    """Hydra 1.3's command-line parser, flag for flag (``@hydra.main``'s flags, ``-cd=DIR``,
    optional values such as ``-i defaults``; help texts left out). Hydra's own
    (``hydra._internal.utils.get_args_parser``) is private, so this is a copy:
    ``tests/test_cli.py`` checks it against Hydra's installed parser, flag by flag."""
    import argparse
    parser = argparse.ArgumentParser(add_help=False, description="Hydra")
    parser.add_argument("--help", "-h", action="store_true")
    parser.add_argument("--hydra-help", action="store_true")
    parser.add_argument("--version", action="version", version="Hydra")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--cfg", "-c", choices=["job", "hydra", "all"])
    parser.add_argument("--resolve", action="store_true")
    parser.add_argument("--package", "-p")
    parser.add_argument("--run", "-r", action="store_true")
    parser.add_argument("--multirun", "-m", action="store_true")
    parser.add_argument("--shell-completion", "-sc", action="store_true")
    parser.add_argument("--config-path", "-cp")
    parser.add_argument("--config-name", "-cn")
    parser.add_argument("--config-dir", "-cd")
    parser.add_argument("--experimental-rerun")
    parser.add_argument("--info", "-i", const="all", nargs="?", action="store",
                        choices=["all", "config", "defaults", "defaults-tree", "plugins", "searchpath"])
    return parser


def _hydra_args(args: list[str]):
    """The command line as Hydra's own argument parser reads it (flags, ``--flag=value``,
    ``-cd=DIR``, optional values such as ``-i defaults``).

    Raises:
        ConfigError: Hydra's parser refuses it (``--cfg nope``, ``-cd`` without a folder):
            argparse's own reason in one line, the field being the flag.
    """
    import io
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            return hydra_args_parser().parse_args(args)
    except SystemExit:
        reason = (err.getvalue().strip().splitlines() or ["error: cannot parse the command line"])[-1]
        reason = reason.split("error: ", 1)[-1]  # argparse: "<prog>: error: <reason>"
        flag = re.match(r"argument (\S+?)(?:/\S+)?: (.*)", reason)
        if flag:
            raise ConfigError(flag.group(1), flag.group(2)) from None
        raise ConfigError("command line", f"{reason} (see gemmlab --help)") from None


def _parse_overrides(overrides: list[str]) -> list:
    """Hydra's override parser, one override at a time; a parse error is one line.

    The hint says what a shell did where that is the likely cause: a word with no ``=`` after an
    override whose value is a path is most often the rest of a path with a space
    (``hydra.run.dir=/tmp/a b``); a value ending inside a list (an unclosed ``[``) or after a comma,
    followed by such a word, a list or sweep the shell split at a space (``shape=[8, 8, 8]``,
    ``kernel=naive, tiled``). Other words are said to be no override; a list value gets the list
    syntax; anything else Hydra's own reason alone.

    Raises:
        ConfigError: naming the key of the override that does not parse (the word, for a word).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    parser = OverridesParser.create()
    parsed = []
    previous = None
    for i, text in enumerate(overrides):
        try:
            parsed.extend(parser.parse_overrides([text]))
        except Exception as exc:  # Hydra's OverrideParseException: keep its first line only
            raise override_parse_error(text, previous, overrides[i + 1] if i + 1 < len(overrides) else None,
                                  exc) from None
        previous = text
    return parsed


def _plugin_dirs(parsed: list) -> list[str]:
    """``plugin_dirs`` named on the command line (the last override wins).

    Raises:
        ConfigError: the value is not a list.
    """
    dirs: list[str] = []
    for o in parsed:
        if o.key_or_group == "plugin_dirs" and o.package is None and not o.is_delete():
            if o.is_sweep_override() or not isinstance(o.value(), list):
                value = o.input_line.split("=", 1)[-1]  # the value as typed, without the key
                raise ConfigError("plugin_dirs", f"must be a list of directory paths like [dir1,dir2], got {value!r}"
                                  + ("" if value.startswith("[") else f" (write plugin_dirs=[{value}])"))
            dirs = [str(d) for d in o.value()]
    return dirs


def _is_multirun(ns, parsed: list) -> bool:
    """-m/--multirun, or ``hydra.mode=MULTIRUN`` on the command line."""
    if ns.multirun:
        return True
    return any(o.key_or_group == "hydra.mode" and not o.is_sweep_override()
               and str(o.value()).upper().endswith("MULTIRUN") for o in parsed)


def _prescan(parsed: list, multirun: bool, custom_conf: bool, kernel_options: list[str],
             registry, conf_dirs: tuple[Path, ...] | None = (CONF_DIR,),
             values: bool = True, experiment_params: list | None = None) -> tuple[list[str], list[str]]:
    """Return (kernel names, kernel parameter names) named by the parsed command-line overrides
    and reject, in one line, what Hydra would only reject with a multi-line message: unknown
    gemmlab keys (also added with ``+``), unknown group options, sweeps without -m. ``hydra.*``
    keys and overrides with a package are Hydra's and never checked. ``conf_dirs``: the config
    folders whose files the command composes, in Hydra's search order (``--config-dir DIR`` adds
    DIR after gemmlab's ``conf/``), None where another primary config is named (``--config-name``/``--config-path``):
    the values of fields checked alone and the sweeps of experiment files are checked only then;
    with ``custom_conf`` (any of the three) gemmlab's own key and option lists are not. ``values``
    False (``--cfg``, which prints the config Hydra composes and runs nothing): values Hydra
    accepts (``shape=abc``) are not checked either. ``experiment_params``: where given, the
    kernel parameters (``kernel.<P>``) an experiment file sweeps and the command line leaves alone
    are appended to it as ``(where, override)``, for :func:`_check_experiment_params`.

    Raises:
        ConfigError: naming the field.
    """
    known = _known_keys()
    groups = None if conf_dirs is None else _config_groups(conf_dirs)
    experiment = [o for o in parsed if o.key_or_group == "experiment" and not o.is_delete()]
    kernels, params = [], []
    for o in parsed:
        key = o.key_or_group
        top, _, sub = key.partition(".")
        if key.startswith(_SWEPT_GROUP) and conf_dirs is not None and not o.is_delete():
            _check_swept(key[len(_SWEPT_GROUP):], o.value(), key, kernel_options, registry, conf_dirs, groups, values)
        if key == "hydra.sweeper.max_batch_size" and not o.is_delete():
            for size in _typed_values(o):  # Hydra's basic sweeper asserts it > 0, after making the sweep's folder
                if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
                    raise ConfigError(key, f"must be an integer >= 1 (jobs per batch) or null (all at once), got {size!r}")
        if (key in ("hydra.run.dir", "hydra.sweep.dir") and not o.is_delete() and not o.is_sweep_override()
                and isinstance(o.value(), str) and not o.value().strip()):  # '' was the working directory itself
            raise ConfigError(key, "is empty; give a folder for the command's output (leave it out for Hydra's "
                              "dated default)")
        if key == "hydra.sweep.subdir" and multirun and not o.is_delete() and not o.is_sweep_override():
            problem = _subdir_problem(o.value(), one_point=_one_point(parsed))
            if problem:
                raise ConfigError("hydra.sweep.subdir", f"{o.input_line.partition('=')[2]!r} {problem}; name each point's "
                                  "own folder inside the sweep's: ${hydra.job.num} (the default) or "
                                  "${hydra.job.override_dirname}")
        if key == "resume" and o.is_sweep_override():  # every point would run twice, in two folders
            raise ConfigError("resume", f"{o.input_line.partition('=')[2]} is a sweep; resume is one choice for the "
                              "whole command (true: keep the valid records already in its folders and run the rest), "
                              "give one value")
        if multirun and top != "hydra" and not o.is_delete():
            problem = _sweep_values_error(o, groups)
            if problem:
                raise ConfigError(key, problem)
        if o.is_hydra_override() or top == "hydra" or o.package is not None:
            continue
        if not custom_conf:
            if top not in known:
                raise unknown_key_error(key)
            if sub and known[top] is not None and sub.split(".")[0] not in known[top]:
                raise unknown_key_error(key)
            if top in _FILE_GROUPS and not sub and not o.is_delete():
                available = sorted(p.stem for p in (CONF_DIR / top).glob("*.yaml"))
                chosen = _values(o, available) or []
                if not chosen and _is_glob(o):  # Hydra would launch 0 jobs
                    raise ConfigError(top, f"{o.input_line.partition('=')[2]} matches no {top}; available: "
                                      f"{', '.join(available)}")
                for value in chosen:
                    if value == "null" and top == "experiment":
                        raise ConfigError("experiment", "null is the default; leave experiment out")
                    if value not in available:
                        raise ConfigError(top, f"unknown {top} '{value}'; available: {', '.join(available)}")
                    check_config_file(CONF_DIR / top / f"{value}.yaml", top)  # its keys, in one line
                sweeping = ([v for v in chosen if _experiment_sweeps(v, conf_dirs or (CONF_DIR,))]
                            if top == "experiment" and o.is_sweep_override() else [])
                if sweeping:  # each job composes one experiment; its own sweep is not expanded (Hydra sweeps once)
                    one = f"name it alone: experiment={chosen[0]}" if len(chosen) == 1 else "run one experiment per command"
                    raise ConfigError("experiment", f"{o.input_line.partition('=')[2]} is a sweep of experiments, and "
                                      f"{', '.join(sweeping)} sweep{'s' if len(sweeping) == 1 else ''} points of "
                                      f"{'its' if len(sweeping) == 1 else 'their'} own, which Hydra would not expand "
                                      f"(one point per experiment); {one}")
        if conf_dirs is not None and values and not o.is_delete():  # the fields' rules are the point's own (FIELD_RULES)
            _check_values(o, registry)
        if o.is_sweep_override() and not multirun and not experiment and not custom_conf:
            raise ConfigError(key, f"{o.input_line!r} is a sweep (several values); run it with -m (gemmlab -m ...)")
        if key == "kernel" and not o.is_delete():
            kernels = _values(o, kernel_options) or []
            if not kernels and _is_glob(o) and not custom_conf:  # Hydra would launch 0 jobs
                raise ConfigError("kernel", f"{o.input_line.partition('=')[2]} matches no kernel; kernels: "
                                  f"{', '.join(sorted(kernel_options))}")
        elif top == "kernel" and sub:
            if sub == "name":
                raise ConfigError("kernel.name", "select the kernel with kernel=<name>, not kernel.name")
            params.append(sub)  # also +kernel.P=... and ++kernel.P=...: only the kernel's own parameters exist
    if experiment and not kernels and not custom_conf:
        for value in _values(experiment[0]) or []:
            kernels += [k for k in _experiment_kernels(value) if k not in kernels]
    if experiment and conf_dirs is not None:  # the experiment's own sweep, where the command line leaves it
        given = {o.key_or_group.removeprefix(_SWEPT_GROUP) for o in parsed}
        for name in _values(experiment[0]) or []:
            for key, value in _experiment_sweeps(name, conf_dirs).items():
                if key in given:
                    continue
                where = f"experiment {name}'s hydra.sweeper.params.{key}"
                if not isinstance(value, (str, int, float, bool)):  # Hydra would make one bogus point of it
                    raise ConfigError(key, _not_a_sweep_string(key, value, config_file("experiment", name, conf_dirs)))
                swept = _check_swept(key, value, where, kernel_options, registry, conf_dirs, groups, values)
                if experiment_params is not None and key.startswith("kernel.") and swept is not None:
                    experiment_params.append((where, swept))
    return kernels, params


def _not_a_sweep_string(key: str, value: object, path: Path) -> str:
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
    return (f"{path} gives hydra.sweeper.params.{key} {got} ({_json_text(value)}); a sweep is written as one "
            f"comma string, e.g. {example}")


def _json_text(value: object) -> str:
    """``value`` as it reads in YAML's flow style (``[[32, 32, 32], [64, 64, 64]]``, ``[]``, ``null``)."""
    import json
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


_SWEPT_GROUP = "hydra.sweeper.params."


def _config_groups(conf_dirs: tuple[Path, ...]) -> set[str]:
    """The config groups (sub-folders) of ``conf_dirs``: what a ``glob(...)`` can pick options of."""
    return {p.name for d in conf_dirs if d.is_dir() for p in d.iterdir() if p.is_dir()}


def _check_swept(key: str, value: object, where: str, kernel_options: list[str], registry,
                 conf_dirs: tuple[Path, ...] = (CONF_DIR,), groups: set[str] | None = None,
                 values: bool = True):
    """One entry of a sweeper's ``params`` (``hydra.sweeper.params.<key>=<value>`` on the command
    line, or an experiment file's ``hydra.sweeper.params``): for a config group (tc_ladder's
    ``tc_rung``, ``kernel``, ``timing``) each option must be a file of ``conf/<group>/`` (or a
    kernel), and a glob must match one; for a field checked alone (``resume``, ``timing.repeat``,
    ``baseline``, ...) each value must be one it allows. Hydra would refuse an unknown option only
    after it made the sweep's folder and wrote multirun.yaml there, and a bad field value made every
    point a failed record (a new-user trial). ``values`` False (``--cfg``): the fields' values are
    not checked (:func:`_prescan`).

    Returns:
        the entry as Hydra's parsed override, or None where it is left to Hydra (no plain value,
        an interpolation, a text its grammar refuses).

    Raises:
        ConfigError: naming the field (the group or key), the value and what is allowed.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    folders = [d / key for d in conf_dirs if (d / key).is_dir()]  # the group's options: files of every folder
    group = key != "hydra" and "/" not in key and "." not in key and bool(folders)
    if not isinstance(value, (str, int, float, bool)) or "${" in str(value):
        return None
    try:
        swept = OverridesParser.create().parse_overrides([f"{key}={str(value).lower() if isinstance(value, bool) else value}"])[0]
    except Exception:
        return None  # Hydra says what does not parse
    if groups is None:
        groups = _config_groups(conf_dirs)
    problem = _sweep_values_error(swept, groups) if swept.is_sweep_override() else None
    if problem:  # range(4,2), glob(*) over a value: 0 jobs, as on the command line
        raise ConfigError(key, f"{problem} (in {where})")
    if not group and key not in FIELD_RULES and key != "baseline":
        return swept
    if not group:
        if values:
            try:
                _check_values(swept, registry)
            except ConfigError as exc:
                if not where.startswith("experiment "):  # the command line's own key: it names itself
                    raise
                raise _said_in(exc, where) from None  # the file's sweep: say which file (a new-user trial)
        return swept
    available = sorted({p.stem for folder in folders for p in folder.glob("*.yaml")}
                       | (set(kernel_options) if key == "kernel" else set()))
    options = _values(swept, available)
    if options == [] and _is_glob(swept):
        raise ConfigError(key, f"{swept.input_line.partition('=')[2]} in {where} matches no option; available: "
                          f"{', '.join(available)}")
    for option in options or []:
        if option not in available:
            if key == "kernel" and registry is not None:  # the one unknown-kernel message, with its plugin_dirs hint
                raise registry.unknown(option, f" in {where}")
            raise ConfigError(key, f"unknown option '{option}' in {where}; available: {', '.join(available)}")
    return swept


def _said_in(exc: ConfigError, where: str) -> ConfigError:
    """``exc`` with where its value was given appended (``(in experiment X's hydra.sweeper.params.K)``)."""
    return ConfigError(exc.field, f"{str(exc).partition(': ')[2]} (in {where})")


def _experiment_sweeps(name: str, conf_dirs: tuple[Path, ...] = (CONF_DIR,)) -> dict:
    """An experiment file's ``hydra.sweeper.params`` (key -> value as written), or {} (no file, no
    sweep, a file that does not read: the experiment check names that). The file is the first
    ``<dir>/experiment/<name>.yaml`` of ``conf_dirs``, in Hydra's search order (gemmlab's ``conf/``,
    then a ``--config-dir``)."""
    path = config_file("experiment", name, conf_dirs)
    try:
        return sweeper_params(OmegaConf.to_container(OmegaConf.load(path)))
    except Exception:
        return {}


def _shadowed_option(parsed: list, conf_dirs: tuple[Path, ...] | None) -> None:
    """Refuse a group option the command names (``experiment=seed_lab``) whose file a
    ``--config-dir`` holds under the name of one of gemmlab's own: Hydra's search path puts
    gemmlab's ``conf/`` first, so the user's file was silently not used (a new-user trial's own
    ``experiment/seed_lab.yaml`` ran gemmlab's seed_lab, on a GPU, instead of theirs).

    Raises:
        ConfigError: the group, naming both files and how to use one's own.
    """
    if not conf_dirs or len(conf_dirs) < 2:
        return
    for o in parsed:
        if o.is_delete() or o.package is not None or "." in o.key_or_group or "/" in o.key_or_group:
            continue
        group = o.key_or_group
        names = _typed_values(o) if o.is_sweep_override() else [o.value()]
        for name in names:
            if not isinstance(name, str):
                continue
            ours = CONF_DIR / group / f"{name}.yaml"
            theirs = [d / group / f"{name}.yaml" for d in conf_dirs[1:] if (d / group / f"{name}.yaml").is_file()]
            if ours.is_file() and theirs:
                raise ConfigError(group, f"{name}: {theirs[0]} has the name of gemmlab's own {group} {name} "
                                  f"({ours}), which Hydra takes first (gemmlab's configs come before --config-dir in "
                                  f"its search path); give yours another name")


def _typed_values(o) -> list:
    """The value(s) of an override as the composed config would hold them: a discrete sweep gives
    each of its values (a list, ``choice``, an integer ``range``, also inside ``tag``, ``shuffle``
    or ``sort``), a quoted one as its text (``'a b'`` as ``a b``, as Hydra composes it); left out
    where they are not known here: an interval, a glob, a float range, an interpolation (also one
    inside a list: ``[${x},2,3]``)."""
    from hydra.core.override_parser.types import Glob, Override, RangeSweep, Sweep
    value = o.value()
    if isinstance(value, Glob):
        return []
    if o.is_sweep_override():
        if not o.is_discrete_sweep():
            return []
        values = []
        for v in o.sweep_iterator(Override._convert_value):  # choice, range, tag(...), shuffle(...), sort(...)
            if isinstance(v, RangeSweep):  # a range inside a list: range(1,3),0 (integer ranges only)
                ints = all(isinstance(x, int) for x in (v.start, v.stop, v.step))
                values += list(range(v.start, v.stop, v.step)) if ints else []
            else:
                values.append(v)
    else:
        values = [value]
    return [v for v in values if not _interpolated(v) and not isinstance(v, Sweep)]


def _interpolated(value) -> bool:
    """``value`` (a string, or a list or mapping holding one) has an interpolation ``${...}``: what
    it composes to is known only to Hydra."""
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, (list, tuple)):
        return any(_interpolated(v) for v in value)
    if isinstance(value, dict):
        return any(_interpolated(k) or _interpolated(v) for k, v in value.items())
    return False


#: interpolations that are the same for every point of a sweep (Hydra's job name, the clock)
_SAME_FOR_EVERY_POINT = re.compile(r"\$\{(?:hydra:)?(?:hydra\.job\.name|hydra\.runtime\.[\w.]+|now:[^}]*)\}")


def _one_point(parsed) -> bool:
    """Whether the command line's multirun has one point for sure: no swept value, no experiment
    (its file may sweep), no sweeper but a grid one (Hydra's basic, gemmlab's: a search has
    trials) and nothing set under ``hydra.sweeper`` (its params, its trials)."""
    return not any(o.is_sweep_override() or o.key_or_group == "experiment" or o.key_or_group.startswith("hydra.sweeper")
                   or (o.key_or_group == "hydra/sweeper" and o.value() not in ("basic", "gemmlab")) for o in parsed)


def _subdir_problem(subdir: object, one_point: bool = False) -> str | None:
    """What makes ``hydra.sweep.subdir`` wrong for every sweeper, told from its text alone, or
    None: a constant, or interpolations that are the same for every point (``${hydra.job.name}``,
    ``${now:%H}``), give all points one folder (unless the sweep has ``one_point``); a path that
    leaves the sweep's folder (absolute, or ``..`` past it: ``../x${hydra.job.num}``) or is that
    folder (``${hydra.job.num}/..``) puts points where its summary does not look. gemmlab's
    sweeper also resolves each job's folder (``hydra_plugins/gemmlab_sweeper``); this catches
    these cases for Hydra's basic and Optuna sweepers before any point runs."""
    same = "names the same folder for every point of the sweep (the second would find the first's result)"
    if subdir is None:
        return same
    if not isinstance(subdir, (str, int, float)):
        return None
    text = str(subdir)
    if "${" not in _SAME_FOR_EVERY_POINT.sub("", text) and not one_point:  # a constant, or what every point shares
        return same
    shape = os.path.normpath(re.sub(r"\$\{[^}]*\}", "x", text))
    first = shape.split(os.sep)[0]
    if first in SWEEP_FILES:
        return f"puts points under {first}, a file of the sweep's own"
    if os.path.isabs(shape) or shape == ".." or shape.startswith(".." + os.sep):
        return "puts points outside the sweep's folder, where its summary does not look"
    if shape == ".":
        return "puts points in the sweep's folder itself"
    return None


#: values one key of a sweep may take (``range(1,100000000)`` grew to 18 GB before a point ran)
MAX_SWEEP_VALUES = 100_000


def _sweep_values_error(o, groups: set[str] | None) -> str | None:
    """What is wrong with the values of a command-line sweep that Hydra's basic sweeper would
    take and mishandle, or None: no value at all (an empty ``range(5,1)``: Hydra launches 0 jobs
    after making the sweep's folder), a sweep inside a comma list (``range(2,4),8``: not
    expanded, Hydra then fails with ``tags: Unexpected type annotation: Set[str]``), or a glob
    over a key that is no config group (``kernel.TM=glob(*)``: no options to match, 0 jobs).
    ``groups``: the config groups of the composed config's folders (None: not known)."""
    from hydra.core.override_parser.types import Glob, RangeSweep, Sweep
    text = o.input_line.partition("=")[2]
    if isinstance(o.value(), Glob):  # a group's glob is matched against its options later (kernel: _prescan)
        key = o.key_or_group
        if groups is None or "/" in key or key in groups:
            return None
        if key == "shape":
            how = "list the shapes (e.g. [64,64,64],[128,128,128])"
        elif key.startswith("kernel.") or key.startswith("timing."):
            how = "list the values (e.g. 2,4,8) or give a range(START,STOP)"
        else:
            how = f"list the values, comma-separated ({key}=A,B)"
        return f"{text}: a glob picks options of a config group ({', '.join(sorted(groups - {'hydra'}))}); {key} is a value: {how}"
    if not o.is_sweep_override() or not o.is_discrete_sweep():
        return None
    value = o.value()
    ints = isinstance(value, RangeSweep) and all(isinstance(x, int) for x in (value.start, value.stop, value.step))
    size = len(range(value.start, value.stop, value.step)) if ints and value.step else 0
    if size > MAX_SWEEP_VALUES:
        return (f"{text} gives {size} values; a sweep takes at most {MAX_SWEEP_VALUES} per key (Hydra lists every "
                "point before the first runs)")
    try:
        values = list(o.sweep_iterator())
    except Exception:  # what Hydra cannot expand here, it says itself
        return None
    if not values:
        return (f"{text} gives no value, so the sweep would run no point; give at least one (range(START,STOP) "
                "stops before STOP, and counts down only with a negative step: range(5,1,-1))")
    inner = next((v for v in values if isinstance(v, Sweep)), None)
    if inner is not None:
        return (f"{text}: Hydra does not expand a range or choice inside a comma list; sweep one range alone "
                "or write the values out (e.g. 2,3,8)")
    return None


def _check_values(o, registry) -> None:
    """Check each value the command line gives a field that is checked alone (``resume``,
    ``timing.repeat``, ...: :data:`gemmlab.stages.config.FIELD_RULES`) and ``baseline`` (a kernel
    or null), so that a bad value (also one value of a sweep) is one line before any point runs
    rather than a failed record in every point.

    Raises:
        ConfigError: naming the field, as the point's own check would (:func:`gemmlab.stages.config.parse_config`).
    """
    key = o.key_or_group
    if key not in FIELD_RULES and key != "baseline":
        return
    for value in _typed_values(o):
        if key == "baseline":
            check_baseline(value, lambda name: registry.get(name).defaults)
        else:
            check_field(key, value)


def _experiment_kernels(name: str, conf_dirs: tuple[Path, ...] = (CONF_DIR,)) -> list[str]:
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


def _default_kernel() -> str:
    defaults = OmegaConf.load(CONF_DIR / "config.yaml").get("defaults", [])
    return next((d["kernel"] for d in defaults if isinstance(d, dict) and "kernel" in d), "tiled")


def _prepare(args: list[str], invocation: Invocation) -> None:
    """Load plugins named on the command line (their folders go to ``invocation.plugin_dirs``),
    give every kernel without a ``conf/kernel/<name>.yaml`` a config node built from its defaults
    (so Hydra's own completion, help, globs and sweeps see it), then reject bad gemmlab fields
    early in one line.
    Anything Hydra itself accepts is left to Hydra: the command line is read by Hydra's argument
    parser and override parser; shell completion, --info, --help and --cfg are not checked.

    Raises:
        ConfigError: unknown kernel, kernel parameter or gemmlab key; broken plugin folder.
    """
    ns = _hydra_args(args)
    # Hydra's own commands: never refused by gemmlab. --cfg is not among them: it composes the
    # config, so an unknown key or kernel, which Hydra refuses too, gets gemmlab's one line.
    passive = bool(ns.shell_completion or ns.info is not None or ns.help or ns.hydra_help
                   or ns.experimental_rerun)
    if ns.experimental_rerun is not None and not os.path.isfile(ns.experimental_rerun):
        # Hydra would warn that the option is experimental, then fail on the missing file
        raise ConfigError("--experimental-rerun", f"{ns.experimental_rerun} is not a file; give the .hydra/config.pickle "
                          "of a run (Hydra's PickleJobInfoCallback writes it)")
    try:
        parsed = _parse_overrides(ns.overrides or [])
        dirs = _plugin_dirs(parsed)
        invocation.plugin_dirs = dirs
        registry = registry_for({"plugin_dirs": dirs})
    except ConfigError:
        if passive:
            return  # --help lists the plugin failure itself; Hydra reports the rest
        raise
    store = ConfigStore.instance()
    stored = store.repo.get("kernel", {})  # nodes an earlier command of this process stored (its plugins)
    for key in [k for k in stored if k.endswith(".yaml") and k[:-5] not in registry.kernels]:
        del stored[key]
    for name, spec in registry.kernels.items():
        if not (CONF_DIR / "kernel" / f"{name}.yaml").is_file():
            store.store(group="kernel", name=name, node={"name": name, **dict(spec.defaults)})
    if passive:
        return
    _check_suite_families(args)
    _check_shapeset_selection(args)
    custom_conf = any(v is not None for v in (ns.config_dir, ns.config_path, ns.config_name))
    # a file in package _global_ (an experiment, a tensor-core rung) or another config may set hydra.mode: known
    # once Hydra composes (gemmlab's sweeper or launcher then notes the sweep), not read here
    by_files = custom_conf or any(o.key_or_group in ("experiment", "tc_rung") and not o.is_delete() for o in parsed)
    invocation.multirun = True if _is_multirun(ns, parsed) else None if by_files else False
    options = sweep.kernel_options()  # registry.kernels: each a conf/kernel file or a node stored above
    conf_dirs = (None if ns.config_path is not None or ns.config_name is not None else
                 (CONF_DIR, Path(ns.config_dir).absolute()) if ns.config_dir is not None else (CONF_DIR,))
    values = ns.cfg is None  # --cfg prints what Hydra composes: values it accepts are not refused
    _shadowed_option(parsed, conf_dirs)
    swept: list = []  # kernel parameters an experiment file sweeps: (where, override)
    kernels, params = _prescan(parsed, _is_multirun(ns, parsed), custom_conf, options, registry, conf_dirs, values,
                               experiment_params=swept)
    if swept and values:
        chosen = kernels
        if not chosen:  # conf_dirs is gemmlab's conf/ (and a --config-dir after it): its config.yaml is the primary
            names = [n for o in parsed if o.key_or_group == "experiment" and not o.is_delete() for n in _values(o) or []]
            chosen = [k for n in names for k in _experiment_kernels(n, conf_dirs)] or [_default_kernel()]
        _check_experiment_params(swept, chosen, registry)
    if custom_conf and not kernels:
        return  # another primary config may select another default kernel
    for name in kernels or [_default_kernel()]:
        if name == AUTO:  # kernel=auto resolves per point (gemmlab.dispatch.auto); only kernel.table is its own
            for p in params:
                if p not in AUTO_KEYS:
                    raise ConfigError(f"kernel.{p}", "kernel=auto chooses the parameters itself; it accepts only "
                                      "kernel.table=<tuning table file>")
            continue
        spec = registry.get(name)
        for p in params:
            if p not in spec.defaults:
                raise ConfigError(f"kernel.{p}", f"kernel '{name}' has no parameter {p}; its parameters: "
                                  f"{', '.join(spec.defaults) or 'none'}")
        if values:
            _check_params(parsed, name, spec, registry.origins.get(name))


def _check_params(parsed: list, name: str, spec, origin: str | None) -> None:
    """Check each value the command line gives a parameter of kernel ``name`` (``kernel.BK=8``,
    each value of a sweep ``kernel.BK=8,0``) by the point's own rule
    (:func:`gemmlab.stages.config.parse_params`: an integer 1..4096 or one of the values the kernel
    lists), so that a bad one is one line before any point runs, not a failed point of the sweep.
    What depends on other values (the kernel's own ``check``: tile ownership, load coverage) stays
    with the point.

    Raises:
        ConfigError: naming ``kernel.<P>``, the bad value and what is allowed.
    """
    for o in parsed:
        top, _, p = o.key_or_group.partition(".")
        if top != "kernel" or p not in spec.defaults or o.is_delete() or o.package is not None:
            continue
        listed = {p: spec.param_values[p]} if p in spec.param_values else None
        for value in _typed_values(o):
            parse_params({p: spec.defaults[p]}, {p: value}, name, listed, origin)


def _check_experiment_params(swept: list, kernels: list[str], registry) -> None:
    """Check the kernel parameters an experiment file sweeps (``hydra.sweeper.params.kernel.BK``:
    ``swept`` holds ``(where, override)``) for each of ``kernels`` as :func:`_prepare` checks the
    command line's: the kernel has the parameter, and each value passes the point's own rule
    (:func:`gemmlab.stages.config.parse_params`). Kernels gemmlab's registry does not hold (an
    option file of a ``--config-dir``), and ``auto``, are left to the point.

    Raises:
        ConfigError: naming ``kernel.<P>``, the value and the experiment file's key.
    """
    for name in kernels:
        if name == AUTO or name not in registry.kernels:
            continue
        spec = registry.get(name)
        for where, o in swept:
            p = o.key_or_group.partition(".")[2]
            if p not in spec.defaults:
                raise ConfigError(o.key_or_group, f"kernel '{name}' has no parameter {p} (in {where}); its parameters: "
                                  f"{', '.join(spec.defaults) or 'none'}")
            try:
                _check_params([o], name, spec, registry.origins.get(name))
            except ConfigError as exc:
                raise _said_in(exc, where) from None


_SUITE_REF = re.compile(r"\$\{gemmlab_suite:([^}]*)\}")


def _check_suite_families(args: list[str]) -> None:
    """Family names in ``${gemmlab_suite:a,b}`` on the command line exist in the shape suite (Hydra
    resolves the sweep string later, where an error would be a traceback).

    Raises:
        ConfigError: field ``shape``: an unknown family, naming the suite's families.
    """
    for arg in args:
        for names in _SUITE_REF.findall(arg):
            from gemmlab.dispatch.shapes import load_suite
            try:
                load_suite().select(n.strip() for n in names.split(","))
            except ConfigError as exc:
                reason = str(exc).split(": ", 1)[-1]  # the message without its field
                raise ConfigError("shape", f"${{gemmlab_suite:{names}}}: {reason}") from None


_SHAPESET_REF = re.compile(r"\$\{gemmlab_shapeset:([^}]*)\}")


def _check_shapeset_selection(args: list[str]) -> None:
    """The split and region names in ``${gemmlab_shapeset:test,decode}`` on the command line exist in
    the public shape set (:mod:`gemmlab.dispatch.shapeset`; Hydra resolves the sweep string later).

    Raises:
        ConfigError: field ``shape``: an unknown split or region, naming the known ones.
    """
    for arg in args:
        for names in _SHAPESET_REF.findall(arg):
            from gemmlab.dispatch.shapeset import load_shapeset
            split, *regions = [n.strip() for n in names.split(",")]
            try:
                load_shapeset().select(split or "test", regions)
            except ConfigError as exc:
                reason = str(exc).split(": ", 1)[-1]  # the message without its field
                raise ConfigError("shape", f"${{gemmlab_shapeset:{names}}}: {reason}") from None
