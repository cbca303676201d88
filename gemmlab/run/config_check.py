"""The check of a ``gemmlab`` command's settings before any point runs: what the command line and
the config files it selects hold, in one line naming the field (exit 2), before a folder is made.

The shell (:mod:`gemmlab.cli.precheck`) reads the command line with Hydra's own parsers and hands
each override here as a plain :class:`Setting`; this module holds gemmlab's rules about them:
unknown keys and group options, sweeps without ``-m``, values no point could accept (each value of
a sweep too, also an experiment file's own sweep: the point's own rules,
:data:`gemmlab.stages.config.FIELD_RULES` and :func:`gemmlab.stages.config.parse_params`), kernel
parameters of the selected kernels, options a ``--config-dir`` shadows, shape-suite and shape-set
names. It imports nothing of Hydra: what only Hydra can tell (its grammar, what its sweepers
mishandle) the shell works out and gives each setting (:attr:`Setting.problem`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from gemmlab.dispatch.auto import AUTO, AUTO_KEYS
from gemmlab.errors import ConfigError
from gemmlab.paths import CONF_DIR, config_file
from gemmlab.run.folders import subdir_problem
from gemmlab.stages import config_files
from gemmlab.stages.config import (FIELD_RULES, check_baseline, check_config_file, check_field, parse_params, parse_shape,
                                   unknown_key_error)

_FILE_GROUPS = ("experiment", "timing")  # config groups whose options are only YAML files in conf/


@dataclass(frozen=True)
class Setting:
    """One override of the command line (or one entry of an experiment file's sweep), as the
    shell read it with Hydra's override grammar.

    Attributes:
        key: the key or config group (``kernel.BK``, ``experiment``, ``hydra/launcher``).
        line: the override as typed (``kernel.BK=8,16``).
        package: the override's ``@package`` (None: none).
        delete: a ``~key`` deletion.
        sweep: several values (a comma list, ``range``, ``choice``, an interval).
        discrete: the values can be listed (False: an interval of a search).
        value: the value of a plain override as the composed config holds it (a quoted text
            unquoted); None for a sweep or a glob.
        typed: each value as the composed config would hold it (:func:`gemmlab.cli.precheck.typed_values`:
            every value of a discrete sweep; none where they are not known here: an interval, a
            glob, an interpolation).
        strings: each value as text (a group's options); None where not enumerable.
        glob: a ``glob(...)``'s match over a group's options (a function of the sorted option
            names), None for any other value.
        problem: what Hydra's sweepers would mishandle in the values (no value at all, a range
            inside a comma list, a glob over a value, too many values), or None.
    """

    key: str
    line: str
    package: str | None = None
    delete: bool = False
    sweep: bool = False
    discrete: bool = True
    value: Any = None
    typed: tuple = ()
    strings: tuple[str, ...] | None = None
    glob: Callable[[list[str]], list[str]] | None = None
    problem: str | None = None

    @property
    def text(self) -> str:
        """The value as typed (the override without its key)."""
        return self.line.partition("=")[2]

    @property
    def hydra(self) -> bool:
        """A key of Hydra's own config (``hydra.*``) or a Hydra config group (``hydra/...``)."""
        return self.key.startswith(("hydra.", "hydra/"))

    def choices(self, options: list[str] | None = None) -> list[str] | None:
        """The string value(s) of a group override (a sweep gives several; a glob is matched against
        ``options``); None when they cannot be listed here (an interval, a glob without options)."""
        if self.glob is not None:
            return self.glob(sorted(options)) if options is not None else None
        return list(self.strings) if self.strings is not None else None


def interpolated(value) -> bool:
    """``value`` (a string, or a list or mapping holding one) has an interpolation ``${...}``: what
    it composes to is known only to Hydra."""
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, (list, tuple)):
        return any(interpolated(v) for v in value)
    if isinstance(value, dict):
        return any(interpolated(k) or interpolated(v) for k, v in value.items())
    return False


def check_command(settings: list[Setting], registry, kernel_options: list[str], *, multirun: bool,
                  custom_conf: bool, conf_dirs: tuple[Path, ...] | None, values: bool,
                  parse: Callable[[str], Setting | None]) -> None:
    """Check the settings of one ``gemmlab`` command line before Hydra runs.

    Args:
        settings: the command line's overrides, in order.
        registry: the kernels (:class:`gemmlab.contract.registry.Registry`, with the command's plugins).
        kernel_options: the ``kernel`` config group's options as Hydra sees them.
        multirun: the command sweeps (``-m`` or ``hydra.mode=MULTIRUN`` on the command line).
        custom_conf: another config folder or primary config is named (``--config-dir``,
            ``--config-path``, ``--config-name``): gemmlab's own key and option lists are not used.
        conf_dirs: the config folders the command composes, in Hydra's search order (gemmlab's
            ``conf/``, then a ``--config-dir``); None for another primary config.
        values: False for ``--cfg`` (it prints what Hydra composes): values Hydra accepts are not refused.
        parse: reads one ``key=value`` text (an experiment file's sweep entry) as a :class:`Setting`,
            None where Hydra's grammar refuses it.

    Raises:
        ConfigError: naming the field, what is wrong and what is allowed.
    """
    _shadowed_option(settings, conf_dirs)
    swept: list = []  # kernel parameters an experiment file sweeps: (where, setting)
    kernels, params = _prescan(settings, multirun, custom_conf, kernel_options, registry, conf_dirs, values,
                               parse, experiment_params=swept)
    if swept and values:
        chosen = kernels
        if not chosen:  # conf_dirs is gemmlab's conf/ (and a --config-dir after it): its config.yaml is the primary
            names = [n for o in settings if o.key == "experiment" and not o.delete for n in o.choices() or []]
            chosen = ([k for n in names for k in config_files.experiment_kernels(n, conf_dirs)]
                      or [config_files.default_kernel()])
        _check_experiment_params(swept, chosen, registry)
    if custom_conf and not kernels:
        return  # another primary config may select another default kernel
    for name in kernels or [config_files.default_kernel()]:
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
            _check_params(settings, name, spec, registry.origins.get(name))


def _known_keys() -> dict[str, set[str] | None]:
    """Top-level config keys and, for mapping sections, their keys (None: free-form), from the
    config schema (:class:`gemmlab.stages.config.GemmlabConfig`)."""
    from gemmlab.stages.config import SECTIONS, TOP_LEVEL
    known: dict[str, set[str] | None] = {k: set(SECTIONS[k]) if k in SECTIONS else None for k in TOP_LEVEL}
    known["experiment"] = None  # kernel stays None: checked against the selected kernels' parameters
    return known


def plugin_dirs(parsed: list[Setting]) -> list[str]:
    """``plugin_dirs`` named on the command line (the last override wins).

    Raises:
        ConfigError: the value is not a list.
    """
    dirs: list[str] = []
    for o in parsed:
        if o.key == "plugin_dirs" and o.package is None and not o.delete:
            if o.sweep or not isinstance(o.value, list):
                value = o.line.split("=", 1)[-1]  # the value as typed, without the key
                raise ConfigError("plugin_dirs", f"must be a list of directory paths like [dir1,dir2], got {value!r}"
                                  + ("" if value.startswith("[") else f" (write plugin_dirs=[{value}])"))
            dirs = [str(d) for d in o.value]
    return dirs


def _prescan(parsed: list, multirun: bool, custom_conf: bool, kernel_options: list[str],
             registry, conf_dirs: tuple[Path, ...] | None = (CONF_DIR,),
             values: bool = True, parse: Callable[[str], Setting | None] = lambda text: None,
             experiment_params: list | None = None) -> tuple[list[str], list[str]]:
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
    experiment = [o for o in parsed if o.key == "experiment" and not o.delete]
    # shape's M = 0 is a grouped step with every group empty (issue 44): left to the point where the
    # command may make the point grouped (a grouped.* key, an experiment, other config folders)
    empty_m = bool(experiment) or custom_conf or any(o.key.split(".")[0] == "grouped" and not o.delete for o in parsed)
    kernels, params = [], []
    for o in parsed:
        key = o.key
        top, _, sub = key.partition(".")
        if key.startswith(_SWEPT_GROUP) and conf_dirs is not None and not o.delete:
            _check_swept(key[len(_SWEPT_GROUP):], o.value, key, kernel_options, registry, conf_dirs, values, parse)
        if key == "hydra.sweeper.max_batch_size" and not o.delete:
            for size in o.typed:  # Hydra's basic sweeper asserts it > 0, after making the sweep's folder
                if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
                    raise ConfigError(key, f"must be an integer >= 1 (jobs per batch) or null (all at once), got {size!r}")
        if (key in ("hydra.run.dir", "hydra.sweep.dir") and not o.delete and not o.sweep
                and isinstance(o.value, str) and not o.value.strip()):  # '' was the working directory itself
            raise ConfigError(key, "is empty; give a folder for the command's output (leave it out for Hydra's "
                              "dated default)")
        if key == "hydra.sweep.subdir" and multirun and not o.delete and not o.sweep:
            problem = subdir_problem(o.value, one_point=_one_point(parsed))
            if problem:
                raise ConfigError("hydra.sweep.subdir", f"{o.line.partition('=')[2]!r} {problem}; name each point's "
                                  "own folder inside the sweep's: ${hydra.job.num} (the default) or "
                                  "${hydra.job.override_dirname}")
        if key == "resume" and o.sweep:  # every point would run twice, in two folders
            raise ConfigError("resume", f"{o.line.partition('=')[2]} is a sweep; resume is one choice for the "
                              "whole command (true: keep the valid records already in its folders and run the rest), "
                              "give one value")
        if multirun and top != "hydra" and not o.delete:
            if o.problem:
                raise ConfigError(key, o.problem)
        if o.hydra or top == "hydra" or o.package is not None:
            continue
        if not custom_conf:
            if top not in known:
                raise unknown_key_error(key)
            if sub and known[top] is not None and sub.split(".")[0] not in known[top]:
                raise unknown_key_error(key)
            if top in _FILE_GROUPS and not sub and not o.delete:
                available = sorted(p.stem for p in (CONF_DIR / top).glob("*.yaml"))
                chosen = o.choices(available) or []
                if not chosen and (o.glob is not None):  # Hydra would launch 0 jobs
                    raise ConfigError(top, f"{o.line.partition('=')[2]} matches no {top}; available: "
                                      f"{', '.join(available)}")
                for value in chosen:
                    if value == "null" and top == "experiment":
                        raise ConfigError("experiment", "null is the default; leave experiment out")
                    if value not in available:
                        raise ConfigError(top, f"unknown {top} '{value}'; available: {', '.join(available)}")
                    check_config_file(CONF_DIR / top / f"{value}.yaml", top)  # its keys, in one line
                sweeping = ([v for v in chosen if config_files.experiment_sweeps(v, conf_dirs or (CONF_DIR,))]
                            if top == "experiment" and o.sweep else [])
                if sweeping:  # each job composes one experiment; its own sweep is not expanded (Hydra sweeps once)
                    one = f"name it alone: experiment={chosen[0]}" if len(chosen) == 1 else "run one experiment per command"
                    raise ConfigError("experiment", f"{o.line.partition('=')[2]} is a sweep of experiments, and "
                                      f"{', '.join(sweeping)} sweep{'s' if len(sweeping) == 1 else ''} points of "
                                      f"{'its' if len(sweeping) == 1 else 'their'} own, which Hydra would not expand "
                                      f"(one point per experiment); {one}")
        if conf_dirs is not None and values and not o.delete:  # the fields' rules are the point's own (FIELD_RULES)
            check_values(o, registry, empty_m)
        if o.sweep and not multirun and not experiment and not custom_conf:
            raise ConfigError(key, f"{o.line!r} is a sweep (several values); run it with -m (gemmlab -m ...)")
        if key == "kernel" and not o.delete:
            kernels = o.choices(kernel_options) or []
            if not kernels and (o.glob is not None) and not custom_conf:  # Hydra would launch 0 jobs
                raise ConfigError("kernel", f"{o.line.partition('=')[2]} matches no kernel; kernels: "
                                  f"{', '.join(sorted(kernel_options))}")
        elif top == "kernel" and sub:
            if sub == "name":
                raise ConfigError("kernel.name", "select the kernel with kernel=<name>, not kernel.name")
            params.append(sub)  # also +kernel.P=... and ++kernel.P=...: only the kernel's own parameters exist
    if experiment and not kernels and not custom_conf:
        for value in experiment[0].choices() or []:
            kernels += [k for k in config_files.experiment_kernels(value) if k not in kernels]
    if experiment and conf_dirs is not None:  # the experiment's own sweep, where the command line leaves it
        given = {o.key.removeprefix(_SWEPT_GROUP) for o in parsed}
        for name in experiment[0].choices() or []:
            for key, value in config_files.experiment_sweeps(name, conf_dirs).items():
                if key in given:
                    continue
                where = f"experiment {name}'s hydra.sweeper.params.{key}"
                if not isinstance(value, (str, int, float, bool)):  # Hydra would make one bogus point of it
                    raise ConfigError(key, config_files.not_a_sweep_string(key, value, config_file("experiment", name, conf_dirs)))
                swept = _check_swept(key, value, where, kernel_options, registry, conf_dirs, values, parse)
                if experiment_params is not None and key.startswith("kernel.") and swept is not None:
                    experiment_params.append((where, swept))
    return kernels, params


_SWEPT_GROUP = "hydra.sweeper.params."


def _check_swept(key: str, value: object, where: str, kernel_options: list[str], registry,
                 conf_dirs: tuple[Path, ...] = (CONF_DIR,), values: bool = True,
                 parse: Callable[[str], Setting | None] = lambda text: None) -> Setting | None:
    """One entry of a sweeper's ``params`` (``hydra.sweeper.params.<key>=<value>`` on the command
    line, or an experiment file's ``hydra.sweeper.params``): for a config group (tc_ladder's
    ``tc_rung``, ``kernel``, ``timing``) each option must be a file of ``conf/<group>/`` (or a
    kernel), and a glob must match one; for a field checked alone (``resume``, ``timing.repeat``,
    ``baseline``, ...) each value must be one it allows. Hydra would refuse an unknown option only
    after it made the sweep's folder and wrote multirun.yaml there, and a bad field value made every
    point a failed record (a new-user trial). ``values`` False (``--cfg``): the fields' values are
    not checked (:func:`_prescan`).

    Returns:
        the entry as a :class:`Setting` (read by ``parse``), or None where it is left to Hydra (no plain value,
        an interpolation, a text its grammar refuses).

    Raises:
        ConfigError: naming the field (the group or key), the value and what is allowed.
    """
    folders = [d / key for d in conf_dirs if (d / key).is_dir()]  # the group's options: files of every folder
    group = key != "hydra" and "/" not in key and "." not in key and bool(folders)
    if not isinstance(value, (str, int, float, bool)) or "${" in str(value):
        return None
    swept = parse(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    if swept is None:
        return None  # Hydra says what does not parse
    problem = swept.problem if swept.sweep else None
    if problem:  # range(4,2), glob(*) over a value: 0 jobs, as on the command line
        raise ConfigError(key, f"{problem} (in {where})")
    if not group and key not in FIELD_RULES and key != "baseline":
        return swept
    if not group:
        if values:
            try:
                check_values(swept, registry, empty_m=True)  # an experiment file may make its points grouped
            except ConfigError as exc:
                if not where.startswith("experiment "):  # the command line's own key: it names itself
                    raise
                raise _said_in(exc, where) from None  # the file's sweep: say which file (a new-user trial)
        return swept
    available = sorted({p.stem for folder in folders for p in folder.glob("*.yaml")}
                       | (set(kernel_options) if key == "kernel" else set()))
    options = swept.choices(available)
    if options == [] and (swept.glob is not None):
        raise ConfigError(key, f"{swept.line.partition('=')[2]} in {where} matches no option; available: "
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
        if o.delete or o.package is not None or "." in o.key or "/" in o.key:
            continue
        group = o.key
        names = o.typed if o.sweep else [o.value]
        for name in names:
            if not isinstance(name, str):
                continue
            ours = CONF_DIR / group / f"{name}.yaml"
            theirs = [d / group / f"{name}.yaml" for d in conf_dirs[1:] if (d / group / f"{name}.yaml").is_file()]
            if ours.is_file() and theirs:
                raise ConfigError(group, f"{name}: {theirs[0]} has the name of gemmlab's own {group} {name} "
                                  f"({ours}), which Hydra takes first (gemmlab's configs come before --config-dir in "
                                  f"its search path); give yours another name")


def _one_point(parsed) -> bool:
    """Whether the command line's multirun has one point for sure: no swept value, no experiment
    (its file may sweep), no sweeper but a grid one (Hydra's basic, gemmlab's: a search has
    trials) and nothing set under ``hydra.sweeper`` (its params, its trials)."""
    return not any(o.sweep or o.key == "experiment" or o.key.startswith("hydra.sweeper")
                   or (o.key == "hydra/sweeper" and o.value not in ("basic", "gemmlab")) for o in parsed)


def check_values(o: Setting, registry, empty_m: bool = False) -> None:
    """Check each value the command line gives a field that is checked alone (``resume``,
    ``timing.repeat``, ...: :data:`gemmlab.stages.config.FIELD_RULES`) and ``baseline`` (a kernel
    or null), so that a bad value (also one value of a sweep) is one line before any point runs
    rather than a failed record in every point. ``shape``'s M = 0 (a grouped step whose groups are
    all empty, issue 44) passes only with ``empty_m`` (the command may make its points grouped;
    the point's own check decides), else it is refused here as for a plain GEMM.

    Raises:
        ConfigError: naming the field, as the point's own check would (:func:`gemmlab.stages.config.parse_config`).
    """
    key = o.key
    if key not in FIELD_RULES and key != "baseline":
        return
    for value in o.typed:
        if key == "baseline":
            check_baseline(value, lambda name: registry.get(name).defaults)
        elif key == "shape":
            parse_shape(value, empty_m=empty_m)
        else:
            check_field(key, value)


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
        top, _, p = o.key.partition(".")
        if top != "kernel" or p not in spec.defaults or o.delete or o.package is not None:
            continue
        listed = {p: spec.param_values[p]} if p in spec.param_values else None
        for value in o.typed:
            parse_params({p: spec.defaults[p]}, {p: value}, name, listed, origin)


def _check_experiment_params(swept: list, kernels: list[str], registry) -> None:
    """Check the kernel parameters an experiment file sweeps (``hydra.sweeper.params.kernel.BK``:
    ``swept`` holds ``(where, override)``) for each of ``kernels`` as :func:`check_command` checks the
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
            p = o.key.partition(".")[2]
            if p not in spec.defaults:
                raise ConfigError(o.key, f"kernel '{name}' has no parameter {p} (in {where}); its parameters: "
                                  f"{', '.join(spec.defaults) or 'none'}")
            try:
                _check_params([o], name, spec, registry.origins.get(name))
            except ConfigError as exc:
                raise _said_in(exc, where) from None


_SUITE_REF = re.compile(r"\$\{gemmlab_suite:([^}]*)\}")


def check_suite_families(args: list[str]) -> None:
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


def check_shapeset_selection(args: list[str]) -> None:
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


def kernel_choice_error(cfg, choice: str | None) -> ConfigError | None:
    """The error when the composed ``kernel.name`` is not the kernel group's choice ``choice``
    (``hydra.runtime.choices.kernel``): a config file merged after the group (an experiment) set
    ``kernel.name`` itself, so ``kernel=<name>`` on the command line chose the group's parameters
    but not the kernel. None when they agree (or there is no choice to compare)."""
    try:  # a missing or unresolvable name is the point's own error to report
        kernel = cfg.get("kernel") if hasattr(cfg, "get") else None
        name = kernel.get("name") if hasattr(kernel, "get") else None
    except Exception:
        return None
    if not choice or not isinstance(name, str) or name == choice:
        return None
    return ConfigError("kernel.name", f"the config names kernel '{name}' but the kernel group chose '{choice}' "
                       f"(kernel={choice}, given or by default): a config file sets kernel.name after the group; select the kernel "
                       f"in that file's defaults list with '- override /kernel: {name}' instead, so that "
                       "kernel= on the command line chooses it")
