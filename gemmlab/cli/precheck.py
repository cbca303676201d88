"""The ``gemmlab`` command line before Hydra composes it: :func:`_prepare` reads the command line
with Hydra's own argument and override parsers (a copy of the argument parser: Hydra's
``get_args_parser`` is private), so a line Hydra cannot parse is one line naming the override (with
the shell's likely doing: a path or a list split at a space); loads the plugins of ``plugin_dirs``
and stores their kernel nodes (so Hydra composes, lists and globs them); refuses a ``--config-dir``
option shadowed by gemmlab's own and unknown shape families; and notes in the :class:`Invocation`
what :mod:`gemmlab.cli.app` needs (plugin folders, run mode). Everything else is checked on the
config Hydra composes, once, before any folder is made (:mod:`gemmlab.cli.plan`); what only Hydra
can tell it says itself (:mod:`gemmlab.cli.hydra_errors` words it).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.config_store import ConfigStore

from gemmlab.cli.hydra_errors import override_parse_error
from gemmlab.cli.plan import _typed_values
from gemmlab.errors import ConfigError
from gemmlab.paths import CONF_DIR
from gemmlab.run.pipeline import registry_for
from gemmlab.stages.config import unknown_key_error


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
        names = _typed_values(o)
        for name in names:
            if not isinstance(name, str):
                continue
            ours = CONF_DIR / group / f"{name}.yaml"
            theirs = [d / group / f"{name}.yaml" for d in conf_dirs[1:] if (d / group / f"{name}.yaml").is_file()]
            if ours.is_file() and theirs:
                raise ConfigError(group, f"{name}: {theirs[0]} has the name of gemmlab's own {group} {name} "
                                  f"({ours}), which Hydra takes first (gemmlab's configs come before --config-dir in "
                                  f"its search path); give yours another name")



def _prepare(args: list[str], invocation: Invocation) -> None:
    """Load plugins named on the command line (their folders go to ``invocation.plugin_dirs``),
    give every kernel without a ``conf/kernel/<name>.yaml`` a config node built from its defaults
    (so Hydra's own completion, help, globs and sweeps see it), and refuse what the command line
    alone shows is wrong. Hydra's own commands (shell completion, --info, --help) are never
    refused; the values of the config are checked on what Hydra composes (:mod:`gemmlab.cli.plan`).

    Raises:
        ConfigError: a command line Hydra's parsers refuse; a broken plugin folder; an option of
            a ``--config-dir`` shadowed by gemmlab's own; an unknown shape family.
    """
    ns = _hydra_args(args)
    passive = bool(ns.shell_completion or ns.info is not None or ns.help or ns.hydra_help
                   or ns.experimental_rerun)
    if ns.experimental_rerun is not None and not os.path.isfile(ns.experimental_rerun):
        # Hydra would warn that the option is experimental, then fail on the missing file
        raise ConfigError("--experimental-rerun", f"{ns.experimental_rerun} is not a file; give the .hydra/config.pickle "
                          "of a run (Hydra's PickleJobInfoCallback writes it)")
    try:
        parsed = _parse_overrides(ns.overrides or [])
        for o in parsed:
            if not o.key_or_group:  # '=5': Hydra's grammar takes it, Hydra's merge then fails
                raise unknown_key_error("")
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
    if ns.config_dir is not None and ns.config_path is None and ns.config_name is None:
        _shadowed_option(parsed, (CONF_DIR, Path(ns.config_dir).absolute()))


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
