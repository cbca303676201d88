"""The ``gemmlab`` command line's pre-check, the shell's part: the command line is read with Hydra's
own argument and override parsers, each override becomes a plain
:class:`~gemmlab.run.config_check.Setting`, the plugins (``plugin_dirs``) are loaded and their kernel
nodes stored in Hydra's ConfigStore, and :func:`gemmlab.run.config_check.check_command` checks the
settings before Hydra runs anything, so a mistake is one line naming the field (exit 2) and no folder
is made. What Hydra's grammar or sweepers would mishandle (an empty range, a range inside a comma
list, a glob over a value) is worked out here, where Hydra's types are; the :class:`Invocation` notes
what :mod:`gemmlab.cli.app` needs (plugin folders, run mode). What only Hydra can tell is left to it
(:mod:`gemmlab.cli.hydra_errors` words it).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.config_store import ConfigStore

from gemmlab.cli import sweep
from gemmlab.cli.hydra_errors import override_parse_error
from gemmlab.errors import ConfigError
from gemmlab.paths import CONF_DIR
from gemmlab.run import config_check
from gemmlab.run.config_check import Setting, interpolated
from gemmlab.run.session import Session
from gemmlab.stages import config_files


@dataclass
class Invocation(Session):
    """The state of one ``gemmlab`` command: its :class:`~gemmlab.run.session.Session` (the points it
    runs, their folders and statuses, its plugin folders), created by :func:`gemmlab.cli.app.main`
    and handed to the pre-check and (through a closure) to the Hydra task, with what the shell
    learns of Hydra's run.

    Attributes:
        folder_errors: the sweep's points that could not create or write their own folder
            (gemmlab's launcher, ``hydra_plugins/gemmlab_launcher``): they have no record, so the
            end of the sweep names them.
        multirun: True a sweep (``-m`` or ``hydra.mode`` on the command line, or gemmlab's sweeper or
            launcher set up), False a single run (no file the command selects can set ``hydra.mode``),
            None not known yet (an experiment or tensor-core rung may set it).
        sweep_dir: ``hydra.sweep.dir`` of a multirun, set when gemmlab's sweeper or launcher is set
            up (``hydra_plugins``); None for a run or before.
        hydra_full_error: the user's ``HYDRA_FULL_ERROR`` (None: unset). gemmlab sets the variable
            to 1 around its Hydra call (:func:`gemmlab.cli.app._hydra_raises`) and gives each point
            this value back, so the processes a point starts (its worker, compute-sanitizer's child
            ``gemmlab``) see the user's choice, not gemmlab's.
    """

    hydra_full_error: str | None = None
    folder_errors: list[str] = field(default_factory=list)  # sweep points whose folder could not be written
    sweep_dir: str | None = None  # hydra.sweep.dir once gemmlab's sweeper or launcher is set up
    multirun: bool | None = None  # a sweep, a single run, None not known yet


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
        late = "; options such as -m or --cfg go before the overrides" if re.search("unrecognized arguments: .*=", reason) else ""
        raise ConfigError("command line", f"{reason}{late} (see gemmlab --help)") from None


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
    if isinstance(o.value(), Glob):  # a group's glob is matched against its options later (kernel: :mod:`gemmlab.run.config_check`)
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


def typed_values(o) -> list:
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
    return [v for v in values if not interpolated(v) and not isinstance(v, Sweep)]


def _setting(o, groups: set[str] | None) -> Setting:
    """Hydra's parsed override ``o`` as gemmlab's :class:`~gemmlab.run.config_check.Setting`: its key,
    values (typed and as text), glob, and what Hydra's sweepers would mishandle in its values
    (:func:`_sweep_values_error`, with ``groups`` the config groups of the composed config's folders)."""
    from hydra.core.override_parser.types import Glob
    value = o.value()
    sweep, discrete, problem = o.is_sweep_override(), o.is_discrete_sweep(), _problem(o, groups)
    try:  # a refused sweep's values are not listed (range(1,100000000) took 82 CPU s and GBs before its refusal)
        if isinstance(value, Glob) or problem:
            strings = None
        elif sweep:
            strings = tuple(str(v) for v in o.sweep_string_iterator()) if discrete else None
        else:
            strings = (o.get_value_element_as_str(),)
        typed = () if problem else tuple(typed_values(o))
    except Exception:  # values Hydra cannot list here are left to it
        strings, typed = None, ()
    return Setting(key=o.key_or_group, line=o.input_line, package=o.package, delete=o.is_delete(), sweep=sweep,
                   discrete=discrete, value=None if sweep or isinstance(value, Glob) else value, typed=typed,
                   strings=strings, glob=value.filter if isinstance(value, Glob) else None,
                   problem=problem)


def _problem(o, groups: set[str] | None) -> str | None:
    """:func:`_sweep_values_error`, None where Hydra's objects do not answer here (Hydra then says it)."""
    try:
        return _sweep_values_error(o, groups)
    except Exception:
        return None


def _reader(groups: set[str] | None):
    """``parse(text) -> Setting | None``: one ``key=value`` text read with Hydra's override grammar
    (None where it refuses it), for the sweep entries of experiment files."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    parser = OverridesParser.create()

    def parse(text: str) -> Setting | None:
        try:
            return _setting(parser.parse_overrides([text])[0], groups)
        except Exception:
            return None
    return parse


def _is_multirun(ns, settings: list[Setting]) -> bool:
    """-m/--multirun, or ``hydra.mode=MULTIRUN`` on the command line."""
    if ns.multirun:
        return True
    return any(o.key == "hydra.mode" and not o.sweep and str(o.value).upper().endswith("MULTIRUN") for o in settings)


def _prepare(args: list[str], invocation: Invocation) -> None:
    """Load plugins named on the command line (their folders go to ``invocation.plugin_dirs``),
    give every kernel without a ``conf/kernel/<name>.yaml`` a config node built from its defaults
    (so Hydra's own completion, help, globs and sweeps see it), then reject bad gemmlab fields
    early in one line (:func:`gemmlab.run.config_check.check_command`).
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
    conf_dirs = (None if ns.config_path is not None or ns.config_name is not None else
                 (CONF_DIR, Path(ns.config_dir).absolute()) if ns.config_dir is not None else (CONF_DIR,))
    groups = None if conf_dirs is None else config_files.config_groups(conf_dirs)
    try:
        settings = [_setting(o, groups) for o in _parse_overrides(ns.overrides or [])]
        dirs = config_check.plugin_dirs(settings)
        invocation.plugin_dirs = dirs
        registry = invocation.registry()
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
    config_check.check_suite_families(args)
    config_check.check_shapeset_selection(args)
    custom_conf = any(v is not None for v in (ns.config_dir, ns.config_path, ns.config_name))
    # a file in package _global_ (an experiment, a tensor-core rung) or another config may set hydra.mode: known
    # once Hydra composes (gemmlab's sweeper or launcher then notes the sweep), not read here
    by_files = custom_conf or any(o.key in ("experiment", "tc_rung") and not o.delete for o in settings)
    multirun = _is_multirun(ns, settings)
    invocation.multirun = True if multirun else None if by_files else False
    config_check.check_command(settings, registry, sweep.kernel_options(), multirun=multirun, custom_conf=custom_conf,
                               conf_dirs=conf_dirs, values=ns.cfg is None, parse=_reader(groups))
