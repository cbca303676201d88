"""The ``gemmlab`` command: Hydra app around :func:`gemmlab.run.pipeline.run_point`.

``gemmlab kernel=tiled shape=[63,65,33]`` runs one point into ``outputs/<date>/<time>_<id>/``;
``gemmlab -m ...`` sweeps in one process (CUDA context and compiled modules reused) into
``outputs/multirun/<date>/<time>_<id>/<job>/`` and writes ``summary.{csv,md}`` there.

Exit status: 0 all points valid; 2 invalid input in a single run, or a command line rejected
before any point runs (one line naming the field); 1 any other failure, and any failed point of
a sweep (wrong result, safety net, compile error, CUDA error, no GPU, an invalid point); 130 on
Ctrl-C, 143 on SIGTERM (a batch system's time limit), each with the line that resumes a sweep. A search (Optuna) exits 0 unless no trial was valid.

One :class:`Invocation` per command carries what the pre-check learns (plugin folders) and what
each point reports (exit statuses) to :func:`main`; no module-level state is written. What Hydra
raises becomes one line in :mod:`gemmlab.cli.hydra_errors`; :mod:`gemmlab.cli.hydra_patches`
holds the parse-once speed-ups :func:`register_resolvers` installs.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from gemmlab.run import isolation
from gemmlab.stages import record as record_stage
from gemmlab.cli import sweep

from gemmlab.cli.folders import SWEEP_FILES, FolderError, output_folder_error, sweep_guard
from gemmlab.cli.hydra_errors import hydra_error, override_parse_error
from gemmlab.cli.hydra_patches import (config_files_parsed_once, config_store_is_not_copied,
                                       interpolations_parsed_once, register_gemmlab_sweeper)
from gemmlab.dispatch.auto import AUTO, AUTO_KEYS
from gemmlab.stages.config import (FIELD_RULES, check_baseline, check_config_file, check_field, parse_params,
                                   unknown_key_error)
from gemmlab.console import PipeSafeStream, guard_streams, run_command, settled_exit, signals_deferred  # noqa: F401  (PipeSafeStream: re-exported)
from gemmlab.errors import CompileError, ConfigError, NoGPUError, UnavailableError, in_chain, was_interrupted
from gemmlab.paths import CONF_DIR
from gemmlab.run.pipeline import exit_status, registry_for

_FILE_GROUPS = ("experiment", "timing")  # config groups whose options are only YAML files in conf/

#: :func:`run_mode`'s answer when only composing the config tells the mode (Hydra is asked then).
ASK_HYDRA = "ask hydra"


@dataclass
class Invocation:
    """The state of one ``gemmlab`` command, created by :func:`main` and handed to the pre-check
    and (through a closure) to the Hydra task.

    Attributes:
        plugin_dirs: ``plugin_dirs`` named on the command line (the pre-check reads them; the
            help text's kernel list loads plugins from them).
        statuses: exit status of each point run in this process (0 valid, 1 failed, 2 invalid
            input; :func:`gemmlab.run.pipeline.exit_status`), in run order.
        refused_existing: points refused because their folder already holds a result.json (the
            line is said for the first only: a re-run sweep would repeat it for every point).
        run_mode: ``hydra.mode`` of the config the command line composes, when the pre-check could
            read it from the files it selects (:func:`run_mode`), else :data:`ASK_HYDRA`.
        folder_errors: the sweep's points that could not create or write their own folder
            (:func:`gemmlab.cli.folders.sweep_guard`): they have no record, so the
            end of the sweep names them.
        point_dirs: the output folder of each point started in this process, in run order (where
            an interrupt landed once Hydra has let go of the point's config, :func:`_interrupted_advice`).
        multirun: the pre-check's reading of the command: True a sweep (``-m``, or ``hydra.mode``
            set by the command line or a file it selects), False a single run, None not known.
        sweep_dir: ``hydra.sweep.dir`` of a multirun, set when Hydra starts its sweeper
            (:func:`gemmlab.cli.folders.sweep_guard`); None for a run or before.
        hydra_full_error: the user's ``HYDRA_FULL_ERROR`` (None: unset). gemmlab sets the variable
            to 1 around its Hydra call (:func:`_hydra_raises`) and gives each point this value
            back, so the processes a point starts (its worker, compute-sanitizer's child
            ``gemmlab``) see the user's choice, not gemmlab's.
    """

    plugin_dirs: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    point_dirs: list[Path] = field(default_factory=list)
    refused_existing: int = 0  # points refused because their folder already holds a result.json
    run_mode: object = ASK_HYDRA  # the pre-check's: a RunMode, None (no file sets it) or ASK_HYDRA
    hydra_full_error: str | None = None
    folder_errors: list[str] = field(default_factory=list)  # sweep points whose folder could not be written
    sweep_dir: str | None = None  # hydra.sweep.dir once Hydra starts a multirun's sweeper (folders.sweep_guard)
    multirun: bool | None = None  # the pre-check's: a sweep (-m or a file's hydra.mode), a single run, None unknown

    def exit_status(self) -> int:
        """The command's exit status when the points ran to the end: the worst point's, 0 for none."""
        return max(self.statuses, default=0)


def _gpu_count() -> int:
    from gemmlab.gpu.device import gpu_count
    return gpu_count()


def _kernels_help(plugin_dirs: list[str]) -> str:
    failed = ""
    try:
        registry = registry_for({"plugin_dirs": plugin_dirs})
    except ConfigError as exc:  # say why, and still list the built-in kernels
        failed = f"(plugins failed to load: {exc}; the built-in kernels:)\n"
        registry = registry_for({"plugin_dirs": []})
    lines = [failed.rstrip("\n")] if failed else []
    for name, spec in registry.kernels.items():
        params = " ".join(f"{k}={v}" for k, v in spec.defaults.items())
        lines.append(f"{name:16s} {spec.description}\n{'':16s} defaults: {params or '-'}   [{registry.origins[name]}]")
        layouts = ", ".join(f"{a}/{b}" for a, b in spec.layouts)
        values = ", ".join(f"{k} {'|'.join(map(str, v))}" for k, v in spec.param_values.items())
        lines.append(f"{'':16s} precision: {', '.join(spec.precisions) or '-'}; layout.a/b: {layouts or '-'}"
                     + (f"; values: {values}" if values else ""))
    return "\n".join(lines)


def register_resolvers(invocation: Invocation | None = None) -> None:
    """Register gemmlab's OmegaConf resolvers (idempotent): ``gemmlab_unique`` (pid + random
    suffix, cached per config so a sweep keeps one directory), ``gemmlab_kernels`` (help: the
    kernels of the built-in plugins and of ``invocation.plugin_dirs``, read when the help is
    shown) and ``gemmlab_suite`` (the shape suite's sweep string, :mod:`gemmlab.dispatch.shapes`); also
    stores the config schema ``base_config`` (:func:`gemmlab.stages.config.store_schema`) that
    conf/config.yaml needs, and lets Hydra's copies of its config repository share the
    ``ConfigStore`` (:func:`config_store_is_not_copied`), each YAML text and each interpolation be
    parsed once a process (:func:`config_files_parsed_once`, :func:`interpolations_parsed_once`).
    (:func:`main` registers gemmlab's sweeper with Hydra, :func:`register_gemmlab_sweeper`, after its
    pre-check: Hydra's plugin scan imports every installed plugin, Optuna's too, which a command
    line refused before Hydra runs does not need.)"""
    from gemmlab.stages.config import store_schema
    config_store_is_not_copied()
    config_files_parsed_once()
    interpolations_parsed_once()
    store_schema()
    OmegaConf.register_new_resolver("gemmlab_unique", lambda: f"{os.getpid()}-{secrets.token_hex(3)}",
                                    use_cache=True, replace=True)
    OmegaConf.register_new_resolver("gemmlab_kernels",
                                    lambda: _kernels_help(invocation.plugin_dirs if invocation else []), replace=True)
    OmegaConf.register_new_resolver("gemmlab_gpu_count", lambda: max(1, _gpu_count()), replace=True)
    from gemmlab.dispatch.shapes import suite_resolver
    OmegaConf.register_new_resolver("gemmlab_suite", suite_resolver, replace=True)


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


def _hydra_args(args: list[str]):
    """The command line as Hydra's own argument parser reads it (flags, ``--flag=value``,
    ``-cd=DIR``, optional values such as ``-i defaults``).

    Raises:
        ConfigError: Hydra's parser refuses it (``--cfg nope``, ``-cd`` without a folder):
            argparse's own reason in one line, the field being the flag.
    """
    import contextlib
    import io

    from hydra._internal.utils import get_args_parser
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            return get_args_parser().parse_args(args)
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
                    raise ConfigError(key, _not_a_sweep_string(key, value, _experiment_file(name, conf_dirs)))
                _check_swept(key, value, where, kernel_options, registry, conf_dirs, groups, values)
                if experiment_params is not None and key.startswith("kernel.") and "${" not in str(value):
                    with contextlib.suppress(Exception):  # what does not parse, Hydra says
                        from hydra.core.override_parser.overrides_parser import OverridesParser
                        text = str(value).lower() if isinstance(value, bool) else value
                        experiment_params.append((where, OverridesParser.create().parse_overrides([f"{key}={text}"])[0]))
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
                 values: bool = True) -> None:
    """One entry of a sweeper's ``params`` (``hydra.sweeper.params.<key>=<value>`` on the command
    line, or an experiment file's ``hydra.sweeper.params``): for a config group (tc_ladder's
    ``tc_rung``, ``kernel``, ``timing``) each option must be a file of ``conf/<group>/`` (or a
    kernel), and a glob must match one; for a field checked alone (``resume``, ``timing.repeat``,
    ``baseline``, ...) each value must be one it allows. Hydra would refuse an unknown option only
    after it made the sweep's folder and wrote multirun.yaml there, and a bad field value made every
    point a failed record (a new-user trial). ``values`` False (``--cfg``): the fields' values are
    not checked (:func:`_prescan`).

    Raises:
        ConfigError: naming the field (the group or key), the value and what is allowed.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    folders = [d / key for d in conf_dirs if (d / key).is_dir()]  # the group's options: files of every folder
    group = key != "hydra" and "/" not in key and "." not in key and bool(folders)
    if not isinstance(value, (str, int, float, bool)) or "${" in str(value):
        return
    try:
        swept = OverridesParser.create().parse_overrides([f"{key}={str(value).lower() if isinstance(value, bool) else value}"])[0]
    except Exception:
        return  # Hydra says what does not parse
    if groups is None:
        groups = _config_groups(conf_dirs)
    problem = _sweep_values_error(swept, groups) if swept.is_sweep_override() else None
    if problem:  # range(4,2), glob(*) over a value: 0 jobs, as on the command line
        raise ConfigError(key, f"{problem} (in {where})")
    if not group and key not in FIELD_RULES and key != "baseline":
        return
    if not group:
        if values:
            _check_values(swept, registry)
        return
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


def _experiment_sweeps(name: str, conf_dirs: tuple[Path, ...] = (CONF_DIR,)) -> dict:
    """An experiment file's ``hydra.sweeper.params`` (key -> value as written), or {} (no file, no
    sweep, a file that does not read: the experiment check names that). The file is the first
    ``<dir>/experiment/<name>.yaml`` of ``conf_dirs``, in Hydra's search order (gemmlab's ``conf/``,
    then a ``--config-dir``)."""
    path = _experiment_file(name, conf_dirs)
    try:
        params = OmegaConf.to_container(OmegaConf.load(path)).get("hydra", {}).get("sweeper", {}).get("params")
    except Exception:
        return {}
    return params if isinstance(params, dict) else {}


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


def _experiment_file(name: str, conf_dirs: tuple[Path, ...] = (CONF_DIR,)) -> Path:
    """The file of experiment ``name``: the first ``<dir>/experiment/<name>.yaml`` of ``conf_dirs``
    (Hydra's search order), else gemmlab's own path for it (which may not exist)."""
    return next((p for d in conf_dirs if (p := d / "experiment" / f"{name}.yaml").is_file()),
                CONF_DIR / "experiment" / f"{name}.yaml")


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
    (``defaults: [override /kernel: X]``), if it names any (the file: :func:`_experiment_file`).

    Raises:
        ConfigError: the experiment file is not valid YAML.
    """
    path = _experiment_file(name, conf_dirs)
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


def run_mode(parsed: list, custom_conf: bool):
    """``hydra.mode`` of the config that the parsed command-line overrides compose (a Hydra
    ``RunMode``, or None when no file sets it), read from the config files the command line
    selects, without composing: what Hydra's ``Hydra.get_mode`` finds by composing the whole
    config once more before the run composes it (about 0.1 s a command).

    In gemmlab's own configs only files in package ``_global_`` (experiments, tensor-core rungs)
    can set ``hydra.mode``; conf/config.yaml and the files it selects by default set none
    (tests/test_cli.py checks both against Hydra). Sweep overrides are left out, as Hydra's
    ``get_mode`` leaves them out of its compose. Returns :data:`ASK_HYDRA` wherever the files
    alone may not tell: another primary config, ``hydra.mode`` on the command line, a deleted
    group, a group option with a package, a ``hydra/...`` group other than the launcher and the
    sweeper (:func:`_launcher_or_sweeper`), a defaults
    entry other than ``[override] /group: option``, a file that cannot be read, two modes."""
    if custom_conf:
        return ASK_HYDRA
    selected = []
    for o in parsed:
        key = o.key_or_group
        if key == "hydra.mode" or key.startswith("hydra.mode.") or o.package is not None:
            return ASK_HYDRA
        if key.startswith("hydra/"):
            if not _launcher_or_sweeper(key):
                return ASK_HYDRA
            continue
        if o.is_sweep_override():
            continue  # Hydra leaves sweeps (kernel=a,b; kernel.BM=32,64; globs) out of get_mode's compose
        if "." in key or not (CONF_DIR / key).is_dir():
            continue  # a value (kernel.BM=..., shape=..., hydra.sweep.dir=...), not a config group
        if o.is_delete():
            return ASK_HYDRA
        selected.append((key, o.get_value_element_as_str()))
    modes = set()
    for group, option in selected:
        found = _file_mode(group, option, depth=0)
        if found is ASK_HYDRA:
            return ASK_HYDRA
        modes |= found
    if len(modes) > 1:
        return ASK_HYDRA
    if not modes:
        return None
    from hydra.types import RunMode
    try:
        return RunMode[str(modes.pop()).upper()]
    except KeyError:
        return ASK_HYDRA  # Hydra reports the bad value when it composes


def _file_mode(group: str, option: str, depth: int):
    """The ``hydra.mode`` values (a set) set by ``conf/<group>/<option>.yaml`` and the group
    options its defaults list selects, or :data:`ASK_HYDRA` (see :func:`run_mode`)."""
    if _launcher_or_sweeper(group):
        return set()
    path = CONF_DIR / group / f"{option}.yaml"
    if not path.is_file():
        # a kernel of a plugin without a YAML file: its ConfigStore node holds its parameters only
        return set() if group == "kernel" else ASK_HYDRA
    try:
        text = path.read_text(encoding="utf-8")
        header = re.search(r"^#\s*@package\s+(\S+)", text, re.MULTILINE)
        conf = OmegaConf.load(path)
    except Exception:
        return ASK_HYDRA
    if header is None:
        return set()  # package: the group (kernel.*, timing.*): cannot reach hydra.mode
    if header.group(1) != "_global_" or depth > 4:
        return ASK_HYDRA
    modes = set()
    mode = OmegaConf.select(conf, "hydra.mode", default=None)
    if mode is not None:
        modes.add(mode)
    for entry in OmegaConf.to_container(conf).get("defaults") or []:
        if entry == "_self_":
            continue
        if not isinstance(entry, dict) or len(entry) != 1:
            return ASK_HYDRA
        (name, value), = entry.items()
        name = str(name).removeprefix("override ").strip()
        if not name.startswith("/") or not isinstance(value, str):
            return ASK_HYDRA
        found = _file_mode(name[1:], value, depth + 1)
        if found is ASK_HYDRA:
            return ASK_HYDRA
        modes |= found
    return modes


def _launcher_or_sweeper(group: str) -> bool:
    """``hydra/launcher``, ``hydra/sweeper`` and their subgroups (``hydra/sweeper/sampler``): their
    options live in package ``hydra.launcher``/``hydra.sweeper.*`` and cannot set ``hydra.mode``."""
    return any(group == g or group.startswith(g + "/") for g in ("hydra/launcher", "hydra/sweeper"))


@contextlib.contextmanager
def _known_run_mode(mode):
    """Within: Hydra's ``Hydra.get_mode`` answers ``mode`` (from :func:`run_mode`) instead of
    composing the config to find it, so a command composes its config once; with
    :data:`ASK_HYDRA`, Hydra's own method. Restored afterwards."""
    from hydra._internal.hydra import Hydra
    own = Hydra.__dict__.get("get_mode")
    if mode is ASK_HYDRA or own is None:
        yield
        return

    def get_mode(self, config_name, overrides):
        return mode

    Hydra.get_mode = get_mode
    try:
        yield
    finally:
        Hydra.get_mode = own


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
    invocation.run_mode = ASK_HYDRA
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
    custom_conf = any(v is not None for v in (ns.config_dir, ns.config_path, ns.config_name))
    invocation.run_mode = run_mode(parsed, custom_conf)
    from hydra.types import RunMode
    invocation.multirun = (True if _is_multirun(ns, parsed) or invocation.run_mode == RunMode.MULTIRUN
                           else False if invocation.run_mode in (RunMode.RUN, None) else None)
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
                raise ConfigError(exc.field, f"{str(exc).partition(': ')[2]} (in {where})") from None


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


def objective(record: dict) -> float | None:
    """The value a sweeper optimises: GFLOP/s of a verified, timed point; 0.0 for a valid
    compile-only point (no speed known); None for a failed point, which Hydra's Optuna sweeper
    records as a FAILED trial, so it can never be reported as best."""
    if not record.get("valid"):
        return None
    timing = record.get("timing")
    return float(timing["gflops"]) if timing else 0.0


def _hydra_app(invocation: Invocation):
    """The Hydra app of one command: :func:`_task` with ``invocation`` bound (a closure, so the
    statuses of the points reach :func:`main` without module-level state)."""

    @hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
    def task(cfg) -> float | None:
        return _task(cfg, invocation)

    return task


def _kernel_choice_error(cfg, choice: str | None) -> ConfigError | None:
    """The error when the composed ``kernel.name`` is not the kernel group's choice ``choice``
    (``hydra.runtime.choices.kernel``): a config file merged after the group (an experiment) set
    ``kernel.name`` itself, so ``kernel=<name>`` on the command line chose the group's parameters
    but not the kernel. None when they agree (or there is no choice to compare)."""
    from omegaconf import OmegaConf
    name = OmegaConf.select(cfg, "kernel.name", default=None)
    if not choice or not isinstance(name, str) or name == choice:
        return None
    return ConfigError("kernel.name", f"the config names kernel '{name}' but the kernel group chose '{choice}' "
                       f"(kernel={choice}, given or by default): a config file sets kernel.name after the group; select the kernel "
                       f"in that file's defaults list with '- override /kernel: {name}' instead, so that "
                       "kernel= on the command line chooses it")


def _task(cfg, invocation: Invocation) -> float | None:
    """Run one point (a Hydra job) and print its summary; its exit status goes to
    ``invocation.statuses``. Returns the sweeper's :func:`objective`."""
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    invocation.point_dirs.append(out_dir)
    mismatch = _kernel_choice_error(cfg, HydraConfig.get().runtime.choices.get("kernel"))
    if mismatch is not None:  # every point of the command would say the same: stop here
        if not (out_dir / "result.json").exists():  # an invalid record, as for any refused input
            from omegaconf import OmegaConf
            record = record_stage.new_record(OmegaConf.to_container(cfg, resolve=False))
            record.update(status=ConfigError.status, valid=False, error=str(mismatch))
            record_stage.write_record(record, out_dir)
        print(f"gemmlab: error: {mismatch}", file=sys.stderr, flush=True)
        sys.exit(2)
    ignored = _ignored_sweep(HydraConfig.get())
    if ignored:
        print(f"gemmlab: warning: {ignored}", file=sys.stderr, flush=True)
    try:
        with _environ("HYDRA_FULL_ERROR", invocation.hydra_full_error):  # the user's, not _hydra_raises's
            record = isolation.run_point(cfg, out_dir)  # a worker process with a watchdog
    except KeyboardInterrupt as exc:  # Hydra's job config is still set here: name the real folder
        raise type(exc)(_interrupted_advice()) from None
    status = exit_status(record)
    invocation.statuses.append(status)
    if record.get("resumed"):
        source = (f"took the same point's valid result from {record['resumed_from']}" if record.get("resumed_from")
                  else "it already holds a valid result")
        line = f"{out_dir}: skipped, {source} (resume=true)"
        print(line, flush=True)
        _log_point(out_dir, line)  # the folder's log says which command kept or brought its record
        return objective(record)
    if record["status"] not in (ConfigError.status, NoGPUError.status, UnavailableError.status):  # one line only
        text = record_stage.summary(record) + f"\n  result  {out_dir / 'result.json'}"
        print(text, flush=True)
        _log_point(out_dir, text)
    if record["status"] == NoGPUError.status:  # every further point would say the same: stop here
        print(f"gemmlab: error: {record['error']}", file=sys.stderr, flush=True)
        sys.exit(1)
    if status and _holds_result(record):
        invocation.refused_existing += 1
        if invocation.refused_existing > 1:
            return objective(record)  # said once; the summary lists every refused point
        multirun = str(HydraConfig.get().mode).upper().endswith("MULTIRUN")
        print(f"gemmlab: error: {record['error']}" + ("; further points whose folder holds one are refused "
              "without this line" if multirun else ""), file=sys.stderr, flush=True)
    elif status:
        where = ""  # a compile error's whole NVRTC log (warnings, every error) stays in the point's compile.log
        if record["status"] == CompileError.status and (out_dir / "compile.log").is_file():
            where = f" (full NVRTC log: {out_dir / 'compile.log'})"
        print(f"gemmlab: error: {record['error']}{where}", file=sys.stderr, flush=True)
        if record["status"] in (ConfigError.status, NoGPUError.status, UnavailableError.status):
            _log_point(out_dir, f"gemmlab: error: {record['error']}")
    return objective(record)


def _ignored_sweep(hc) -> str | None:
    """What a single run (no ``-m``, no ``hydra.mode: MULTIRUN``) leaves out: the sweep of
    ``hydra.sweeper.params`` (an experiment file's, or the command line's), which only a multirun
    expands; None for a multirun or no params. Said as a warning, not refused: the composed
    config (Hydra's, ``hc``) is the only reading of the mode that holds for every config (the
    pre-check cannot tell it for another primary config or a ``--config-dir``), and a single run of
    an experiment's own values is a command one may mean."""
    if str(hc.mode).upper().endswith("MULTIRUN"):
        return None
    params = OmegaConf.select(hc, "sweeper.params", default=None)
    keys = list(params.keys()) if hasattr(params, "keys") else []
    if not keys:
        return None
    return (f"hydra.sweeper.params sweeps {', '.join(map(str, keys))}, but this command is a single run, which "
            "ignores the sweep (one point of the config's own values): run it with -m (gemmlab -m ...) or set "
            "hydra.mode: MULTIRUN in the experiment file to sweep")


def _log_point(out_dir: Path, text: str) -> None:
    """Append what the command printed for a point to the point folder's Hydra job log
    (``<job name>.log``, ``app.log``: Hydra creates it, gemmlab prints rather than logs), so the
    folder keeps its console lines; a log that cannot be written costs nothing."""
    try:
        name = HydraConfig.get().job.name
        if not out_dir.is_dir():  # never create a folder for it
            return
        with open(out_dir / f"{name}.log", "a", encoding="utf-8") as log:
            log.write(text.rstrip("\n") + "\n")
    except Exception:
        pass


def _holds_result(record: dict) -> bool:
    """The point was refused because its folder already holds a result.json (no resume)."""
    error = record.get("error") or ""
    return (record.get("status") == ConfigError.status and error.startswith("out_dir: ")
            and "already holds a result.json" in error)


def sweep_resume_advice(sweep_dir: Path | str) -> str:
    """The line after Ctrl-C (or SIGTERM) in a sweep whose folder is ``sweep_dir`` (quoted for the
    shell and Hydra's override grammar where it holds a space or other special character)."""
    import shlex
    value = str(sweep_dir)
    if shlex.quote(value) != value:
        plain = not any(c in value for c in "'\"$`\\!")  # then "hydra.sweep.dir='<value>'" reads as typed
        value = f"\"hydra.sweep.dir='{value}'\"" if plain else shlex.quote(f"hydra.sweep.dir='{value}'")
        return (f"finished points keep their result.json; to finish the sweep, re-run the same command with "
                f"{value} resume=true")
    return (f"finished points keep their result.json; to finish the sweep, re-run the same command with "
            f"hydra.sweep.dir={value} resume=true")


def _interrupted_advice(invocation: Invocation | None = None) -> str:
    """What to do after Ctrl-C, naming the real sweep directory (Hydra's job config of the
    interrupted point: its output folder minus ``hydra.sweep.subdir``). Before Hydra started a
    point, ``invocation.multirun`` tells a single run (nothing to resume) from a sweep. A single
    run whose record was written before the interrupt (its point ended; the interrupt came while
    gemmlab or Hydra finished up) names the record."""
    try:
        hc = HydraConfig.get()
        out = hc.runtime.output_dir
        multirun = str(hc.mode).upper().endswith("MULTIRUN")
    except Exception:  # not in Hydra's job (before it, or after: Hydra resets its config as the job ends)
        out = invocation.point_dirs[-1] if invocation is not None and invocation.point_dirs else None
        multirun = invocation is None or invocation.multirun is not False
    if not multirun:
        if out and (Path(out) / "result.json").is_file():  # a run's folder never holds an earlier one (folders.py)
            return f"the run's record was written before the interrupt: {Path(out) / 'result.json'}"
        if out:
            return f"the run's folder {out} holds no result for it"
        return "the run stopped before its point started; nothing was measured"
    folder = None
    if out:
        try:
            depth = len(Path(str(HydraConfig.get().sweep.subdir)).parts)
            folder = Path(out).parents[depth - 1] if depth else Path(out)
        except Exception:
            pass
    if folder is None and invocation is not None and invocation.sweep_dir is not None:
        folder = Path(invocation.sweep_dir)
    if folder is None:
        return ("finished points keep their result.json; to finish a sweep, re-run the same command with "
                "hydra.sweep.dir=DIR resume=true, DIR being the sweep's folder (under outputs/multirun/ by default)")
    if not folder.is_dir() or next(folder.rglob("result.json"), None) is None:  # e.g. while the sweeper composed
        where = "holds no record" if folder.is_dir() else "was not made"   # its points (a long sweep takes seconds)
        return f"no point of the sweep had finished, so nothing was measured (its folder {folder} {where})"
    return sweep_resume_advice(folder) + _summary_of_interrupted(folder)


def _summary_of_interrupted(folder: Path) -> str:
    """Write the summary of an interrupted sweep's finished points (:func:`gemmlab.cli.sweep.save_summary`:
    Hydra's end-of-sweep callback that writes it never runs after Ctrl-C) and say where, as the
    tail of the interrupt's line; '' when no point finished or it cannot be written."""
    try:
        rows = sweep.save_summary(folder) if next(folder.rglob("result.json"), None) is not None else []
    except (OSError, ValueError):
        return ""
    return f"; the summary of the {len(rows)} points so far: {folder / 'summary.md'}" if rows else ""


#: what the console script (:mod:`gemmlab.cli.entry`) says of an interrupt that reaches it: :func:`main`
#: handles every interrupt while the command runs, so one that gets past it came as the command ended
INTERRUPTED = "it came as the command ended: what the command wrote is complete"


def main() -> None:
    """Console entry point (``gemmlab``): the command line in ``sys.argv``; exits with the
    command's status (:meth:`Invocation.exit_status`; 2 for a refused command line). An interrupt
    (Ctrl-C, or SIGTERM) is one line through :func:`gemmlab.console.run_command`, saying what was
    kept and how to resume a sweep (:func:`_interrupted_advice`), exit 130 (143)."""
    guard_streams("gemmlab")
    if not sys.stderr.isatty() and "FORCE_COLOR" not in os.environ:
        # libraries that colour their log lines whatever the stream (Optuna's colorlog handler) write
        # escape codes into logs and pipes; NO_COLOR (no-color.org) turns them off
        os.environ.setdefault("NO_COLOR", "1")
    if "--version" in sys.argv[1:]:
        from gemmlab import __version__
        print(f"gemmlab {__version__} (Hydra {hydra.__version__})")
        sys.exit(0)
    invocation = Invocation()
    register_resolvers(invocation)
    sys.exit(run_command("gemmlab", lambda: _run(invocation), advice=lambda: _interrupted_advice(invocation)))


def _run(invocation: Invocation) -> int:
    """The command of :func:`main`: check the command line, then Hydra's run or multirun; returns
    (or exits with) the exit status. An interrupt propagates to :func:`main`'s handler."""
    with signals_deferred("gemmlab"):  # Ctrl-C or SIGTERM here: one line once this is done (nothing ran)
        try:
            _prepare(sys.argv[1:], invocation)
        except ConfigError as exc:
            print(f"gemmlab: error: {exc}", file=sys.stderr)
            sys.exit(2)
        except Exception as exc:  # a prescan surprise must not hide Hydra's own, better message
            print(f"gemmlab: warning: could not pre-check the command line ({type(exc).__name__}: {exc})",
                  file=sys.stderr)
        register_gemmlab_sweeper()  # after the pre-check: a refused command line never pays Hydra's plugin scan
    invocation.hydra_full_error = os.environ.get("HYDRA_FULL_ERROR")
    full_error = bool(invocation.hydra_full_error)  # the user asked for Hydra's tracebacks
    try:
        with (_hydra_raises(), _known_run_mode(invocation.run_mode), sweep_guard(invocation)):
            _hydra_app(invocation)()
    except FolderError as refused:  # the output folder is in use or cannot be written (gemmlab.cli.folders)
        print(f"gemmlab: error: {refused.message}", file=sys.stderr)
        sys.exit(refused.code)
    except ConfigError as exc:  # refused inside Hydra's run (the sweepers' folder checks)
        if invocation.sweep_dir is not None and not invocation.statuses:  # before any point: the folder as it was
            from gemmlab.cli.folders import undo_refused_sweep
            undo_refused_sweep(invocation.sweep_dir)
        if full_error:
            traceback.print_exc()
        print(f"gemmlab: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except sweep.SweepFinished as done:  # a multirun: the summary's outcome, from the records on disk
        for text in invocation.folder_errors:  # points without a record: not in the summary's table
            print(f"gemmlab: error: hydra.sweep.dir: {text}; not in the summary (no record)", file=sys.stderr)
        failed = [1] if invocation.folder_errors else []
        sys.exit(done.outcome.exit_status_with([*invocation.statuses, *failed]))
    except Exception as exc:
        if was_interrupted(exc):  # Ctrl-C inside Hydra or OmegaConf, whose clean-up then failed on the state it
            raise  # left: main's handler says it (run_command finds the interrupt in the chain)
        unusable = output_folder_error(exc, invocation.sweep_dir)  # e.g. a full disk while Hydra writes .hydra/
        if unusable is not None:
            if full_error:
                traceback.print_exc()
            print(f"gemmlab: error: {unusable.message}", file=sys.stderr)
            sys.exit(unusable.code)
        sweep_dir = invocation.sweep_dir
        if sweep_dir is not None and _search_found_no_best(exc):  # every trial failed: Optuna has no best one
            if full_error:
                traceback.print_exc()
            outcome = sweep.summarize(Path(sweep_dir), search=True)
            print("gemmlab: error: hydra.sweeper: no trial of the search gave a valid measurement (each failed or "
                  "was invalid; the summary above says why), so there is no best one", file=sys.stderr)
            sys.exit(outcome.exit_status_with(invocation.statuses))
        error = hydra_error(exc, sys.argv[1:]) or _launcher_argument_error(exc)
        if error is None:
            raise
        if sweep_dir is not None and not invocation.statuses:  # refused after Hydra made the sweep's folder, before
            from gemmlab.cli.folders import undo_refused_sweep  # a point ran (the sweeper's own arguments)
            undo_refused_sweep(sweep_dir)
        if full_error:  # the traceback the user asked for, and the same exit status as without it
            traceback.print_exc()
        print(f"gemmlab: error: {error}", file=sys.stderr)
        sys.exit(2)
    return invocation.exit_status()


def _launcher_argument_error(exc: BaseException) -> ConfigError | None:
    """submitit's ``NameError: Unknown argument 'foo' for executor 'local' ... Valid arguments: ...``
    (``+hydra.launcher.foo=1`` with hydra/launcher=gemmlab_local or gemmlab_slurm, raised when the
    launcher sets up its executor) as one line naming the key; None for anything else."""
    found = in_chain(exc, NameError)
    m = re.search(r"Unknown argument '(\w+)' for executor '(\w+)'[^\n]*?Valid arguments: ([^\n]*)", str(found or ""))
    if m is None:
        return None
    return ConfigError(f"hydra.launcher.{m.group(1)}", f"submitit's {m.group(2)} executor takes no argument "
                       f"{m.group(1)!r}; its arguments: {m.group(3)}")


def _search_found_no_best(exc: BaseException) -> bool:
    """``exc`` is Optuna's ``ValueError: No trials are completed yet.``, raised when Hydra's Optuna
    sweeper asks the study for its best trial after every trial failed (gemmlab's objective is None
    for a failed or invalid point: :func:`objective`)."""
    found = in_chain(exc, ValueError)
    if found is None or str(found) != "No trials are completed yet.":
        return False
    tb = found.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and str(tb.tb_frame.f_globals.get("__name__", "")).startswith("optuna")


@contextlib.contextmanager
def _environ(name: str, value: str | None):
    """Within: the environment variable ``name`` is ``value`` (None: unset); restored afterwards."""
    before = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _hydra_raises():
    """Within: Hydra raises its errors instead of printing them over several lines and exiting 1
    (its documented ``HYDRA_FULL_ERROR=1``), so :func:`main` can say them in one line
    (:func:`hydra_error`). The variable is restored afterwards (and inside each point: :func:`_task`)."""
    return _environ("HYDRA_FULL_ERROR", "1")


if __name__ == "__main__":
    with settled_exit():
        main()
