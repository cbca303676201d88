"""The planning step of a ``gemmlab`` command: the config Hydra composed, checked once before any
folder is made.

:class:`Plan` is the first of gemmlab's Hydra callbacks (``hydra.callbacks`` in conf/config.yaml):
Hydra hands it the config it composed from the command line and the files it selects, before any
other callback claims a folder and before a sweeper or launcher starts. A run's config is parsed
as its point will parse it (:func:`gemmlab.stages.config.parse_config`); a sweep's config is
checked field by field, and each value of each swept key (the command line's sweeps and the
sweeper's ``params``, an experiment file's included) by the same field rules, so that a value no
point could accept is one line (exit 2) and not a failed record in every point. Nothing here reads
a config file: the composed config says what the files hold (``hydra.sweeper.params``,
``hydra.runtime.choices``), Hydra's config loader lists a group's options, and an experiment of a
sweep of experiments is composed with Hydra's compose API to read its own sweep.
"""

from __future__ import annotations

import math
import os
import re
import sys
from typing import Any, Mapping

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from gemmlab.dispatch.auto import AUTO, AUTO_KEYS
from gemmlab.errors import ConfigError
from gemmlab.run.folders import SWEEP_FILES
from gemmlab.run.pipeline import registry_for
from gemmlab.stages.config import (FIELD_RULES, SECTIONS, TOP_LEVEL, check_baseline, check_field, parse_config,
                                   parse_params, unknown_key_error)

#: values one key of a sweep may take (``range(1,100000000)`` grew to 18 GB before a point ran)
MAX_SWEEP_VALUES = 100_000


class Refused(SystemExit):
    """The plan refused the command: ``error`` is the :class:`ConfigError` to print (exit 2). A
    ``SystemExit``, so it passes Hydra's callback runner (which only warns about an ``Exception``)
    to :func:`gemmlab.cli.app.main`."""

    def __init__(self, error: ConfigError):
        super().__init__(2)
        self.error = error


class Plan(Callback):
    """Hydra callback: :func:`plan_run` at the start of a run, :func:`plan_sweep` at the start of a
    multirun; a refusal is :class:`Refused`. What the plan cannot read (a value that resolves only
    in the running job) is left to the point."""

    def on_run_start(self, config, **kwargs) -> None:
        _refuse(plan_run, config)

    def on_multirun_start(self, config, **kwargs) -> None:
        _refuse(plan_sweep, config)


def _refuse(step, config) -> None:
    try:
        step(config)
    except ConfigError as exc:
        raise Refused(exc) from None
    except Exception as exc:  # a surprise must not hide the point's or Hydra's own, better message
        print(f"gemmlab: warning: could not plan the command ({type(exc).__name__}: {exc})", file=sys.stderr)


def _job(config) -> dict | None:
    """The composed config without its ``hydra`` node, resolved; None where it resolves only in
    the running job (``${hydra:runtime.output_dir}``)."""
    try:
        job = OmegaConf.to_container(config, resolve=False)
        job.pop("hydra", None)
        return OmegaConf.to_container(OmegaConf.create(job), resolve=True)
    except Exception:
        return None


def _folder_checks(config, key: str) -> None:
    """``hydra.run.dir``/``hydra.sweep.dir`` set to '' was the working directory itself."""
    value = OmegaConf.select(config, key, default=None, throw_on_resolution_failure=False)
    if isinstance(value, str) and not value.strip():
        raise ConfigError(key, "is empty; give a folder for the command's output (leave it out for Hydra's dated default)")


def plan_run(config) -> None:
    """A run: its composed config parsed as the point parses it (:func:`check_point`).

    Raises:
        ConfigError: naming the field and what is allowed.
    """
    _folder_checks(config, "hydra.run.dir")
    job = _job(config)
    if job is None:
        return
    choice = OmegaConf.select(config, "hydra.runtime.choices.kernel", default=None)
    name = (job.get("kernel") or {}).get("name") if isinstance(job.get("kernel"), Mapping) else None
    if choice and isinstance(name, str) and name != choice:
        return  # a file set kernel.name itself: the point's record says so (gemmlab.cli.app._task)
    check_point(job, registry_for(job))


def check_point(job: Mapping[str, Any], registry) -> None:
    """Parse one point's plain config ``job`` (:func:`gemmlab.stages.config.parse_config`, with the
    registry's kernels); ``kernel=auto`` has its own keys checked (:data:`AUTO_KEYS`) and the rest
    parsed, its choice being the point's.

    Raises:
        ConfigError: naming the first invalid field.
    """
    defaults = lambda name: registry.get(name).defaults  # noqa: E731
    kernel = job.get("kernel")
    if isinstance(kernel, Mapping) and kernel.get("name") == AUTO:
        for key, value in kernel.items():
            if key != "name":
                _check_value(f"kernel.{key}", value, [AUTO], registry)
        check_baseline(job.get("baseline"), defaults)
        job, defaults = {**job, "kernel": {"name": AUTO}}, (lambda name: {} if name == AUTO else registry.get(name).defaults)
    parse_config(job, defaults_of=defaults, values_of=lambda name: registry.get(name).param_values,
                 origin_of=registry.origins.get)


def _check_value(key: str, value: Any, kernels: list[str], registry) -> None:
    """One value of ``key`` checked alone: a field of :data:`FIELD_RULES`, ``baseline``, or a
    parameter ``kernel.<P>`` of each of ``kernels`` (``kernel=auto`` takes only :data:`AUTO_KEYS`).

    Raises:
        ConfigError: naming the field.
    """
    top, _, param = key.partition(".")
    if top == "kernel" and param:
        for name in kernels:
            if name == AUTO:
                if param not in AUTO_KEYS:
                    raise ConfigError(key, "kernel=auto chooses the parameters itself; it accepts only "
                                      "kernel.table=<tuning table file>")
                check_field(key, value)
                continue
            spec = registry.get(name)
            parse_params(spec.defaults, {param: value}, name, spec.param_values, registry.origins.get(name))
    elif key == "baseline":
        check_baseline(value, lambda name: registry.get(name).defaults)
    elif top not in TOP_LEVEL or (param and top in SECTIONS and param.split(".")[0] not in SECTIONS[top]):
        raise unknown_key_error(key)
    else:
        check_field(key, value)


def plan_sweep(config) -> None:
    """A sweep: its folders' keys, every field of the composed config that no sweep sets, and each
    value of each swept key (:func:`sweep_entries`) checked alone (:func:`_check_value`); a group's
    options must exist (a glob must match one), a sweep of experiments must not hold one that
    sweeps itself (Hydra sweeps once), and ``hydra.sweep.subdir`` must give each point its own
    folder inside the sweep's (:func:`_subdir_problem`).

    Raises:
        ConfigError: naming the field, the value and, for an entry of the sweeper's params, where
            it was given (``(in experiment X's hydra.sweeper.params.K)``).
    """
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.object_type import ObjectType
    _folder_checks(config, "hydra.sweep.dir")
    size = OmegaConf.select(config, "hydra.sweeper.max_batch_size", default=None)
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ConfigError("hydra.sweeper.max_batch_size", f"must be an integer >= 1 (jobs per batch) or null (all at "
                          f"once), got {size!r}")  # Hydra's basic sweeper asserts it > 0, after making the folder
    job = _job(config) or {}
    registry = registry_for(job)
    loader = GlobalHydra.instance().config_loader()
    entries = sweep_entries(config)
    swept = any(o.is_sweep_override() for o, _ in entries.values())
    search = "optuna" in str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).lower()
    subdir = OmegaConf.to_container(config.hydra.sweep, resolve=False).get("subdir")
    problem = _subdir_problem(subdir, one_point=not swept and not search)
    if problem:
        raise ConfigError("hydra.sweep.subdir", f"{subdir!r} {problem}; name each point's own folder inside the sweep's: "
                          "${hydra.job.num} (the default) or ${hydra.job.override_dirname}")
    groups = set(loader.get_group_options("", results_filter=ObjectType.GROUP)) - {"hydra"}
    kernel = job.get("kernel") if isinstance(job.get("kernel"), Mapping) else {}
    kernels = [kernel.get("name")] if isinstance(kernel.get("name"), str) else []
    for key, (o, where) in entries.items():
        said = f" (in {where})" if where else ""
        if key == "resume" and o.is_sweep_override():  # every point would run twice, in two folders
            raise ConfigError("resume", f"{_text(o)} is a sweep; resume is one choice for the whole command (true: "
                              "keep the valid records already in its folders and run the rest), give one value")
        problem = _sweep_values_error(o, groups)
        if problem:
            raise ConfigError(key, problem + said)
        if key in groups:
            options = sorted(set(loader.get_group_options(key)) | (set(registry.kernels) if key == "kernel" else set()))
            chosen = _values(o, options)
            if chosen == [] and _is_glob(o):  # Hydra would launch 0 jobs
                raise ConfigError(key, f"{_text(o)} in {where} matches no option; available: {', '.join(options)}"
                                  if where else f"{_text(o)} matches no {key}; "
                                  f"{'kernels' if key == 'kernel' else 'available'}: {', '.join(options)}")
            for value in chosen or []:
                if value not in options:
                    if key == "kernel":  # the one unknown-kernel message, with its plugin_dirs hint
                        raise registry.unknown(value, f" in {where}" if where else "")
                    what = f"{key} '{value}'" if key == "experiment" else f"option '{value}'"
                    raise ConfigError(key, f"unknown {what}{' in ' + where if where else ''}; available: "
                                      f"{', '.join(options)}")
            if key == "kernel" and chosen:
                kernels = chosen
            if key == "experiment" and o.is_sweep_override() and chosen:
                _experiments_sweeping(o, chosen, config)
    for key, (o, where) in entries.items():
        if "/" in key or key in groups or key.split(".")[0] == "hydra" or o.package is not None or o.is_delete():
            continue
        if "." in key and (where or "").startswith("hydra.sweeper.params.") and key.startswith("kernel."):
            continue  # a dotted params key no sweeper reads (hydra.sweeper.params.kernel.BK): hydra_errors says what works
        try:
            for value in _typed_values(o):
                _check_value(key, value, kernels, registry)
        except ConfigError as exc:
            if not where or not where.startswith("experiment "):
                raise
            if "unknown key in" in str(exc) or "unknown config key" in str(exc):
                where = where.replace(" ", "/", 1)[:-len(key) - 1]  # a key of the file's own: experiment/X's ...params
            head, sep, tail = str(exc).partition(": ")[2].partition("; ")  # the file's sweep: say which
            raise ConfigError(exc.field, f"{head} (in {where}){sep}{tail}") from None
    for top, value in job.items():  # what the files and the command line's plain values set
        fields = value.items() if top in SECTIONS and isinstance(value, Mapping) else [(None, value)]
        for sub, v in fields:
            key = f"{top}.{sub}" if sub else top
            if top != "kernel" and key not in entries and top not in entries:
                _check_value(key, v, kernels, registry)
    if "kernel" not in entries and kernels and kernels[0] != AUTO:
        given = {p: v for p, v in kernel.items() if p != "name" and f"kernel.{p}" not in entries}
        spec = registry.get(kernels[0])
        parse_params(spec.defaults, given, kernels[0], spec.param_values, registry.origins.get(kernels[0]))


def sweep_entries(config) -> dict:
    """The sweep a multirun's composed ``config`` describes, as Hydra's sweepers read it: the
    sweeper's ``params`` (``key=value``), then the command line's overrides
    (``hydra.overrides.task``), a later entry of a key replacing an earlier one; key -> (Hydra's
    parsed override, where the entry was given: ``hydra.sweeper.params.K`` on the command line,
    ``experiment X's hydra.sweeper.params.K`` from the experiment file, None the command line's
    own). An entry that Hydra's grammar refuses or that resolves only in the job is left out.

    Raises:
        ConfigError: an experiment file's entry that is no sweep string (a YAML list, a mapping).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    parser = OverridesParser.create()
    node = OmegaConf.select(config, "hydra.sweeper.params", default=None)
    params = OmegaConf.to_container(node, resolve=False) if node is not None else {}
    given = {re.sub(r"^\+*", "", o).partition("=")[0] for o in _raw(config, "hydra.overrides.hydra")}
    experiment = OmegaConf.select(config, "hydra.runtime.choices.experiment", default=None)
    entries: dict = {}
    for key, value in _flat(params or {}, given):
        where = (f"hydra.sweeper.params.{key}" if experiment is None or any(g.startswith("hydra.sweeper.params") for g
                 in given if key.startswith(g.removeprefix("hydra.sweeper.params").lstrip(".")))
                 else f"experiment {experiment}'s hydra.sweeper.params.{key}")
        if not isinstance(value, (str, int, float, bool)):  # Hydra would make one bogus point of it
            if where.startswith("experiment "):
                raise ConfigError(key, _not_a_sweep_string(key, value, config, experiment))
            continue
        if "${" in str(value):
            try:
                value = node[key]  # a resolver's sweep string, e.g. ${gemmlab_suite:...}
            except Exception:
                continue
        try:
            (o,) = parser.parse_overrides([f"{key}={str(value).lower() if isinstance(value, bool) else value}"])
        except Exception:
            continue  # Hydra says what does not parse
        entries[o.get_key_element()] = (o, where)
    for text in _raw(config, "hydra.overrides.task"):
        try:
            (o,) = parser.parse_overrides([text])
        except Exception:
            continue
        entries.pop(o.get_key_element(), None)
        entries[o.get_key_element()] = (o, None)
    return entries


def _raw(config, key: str) -> list:
    """The list at ``key`` of ``config`` as written (an override's ``${...}`` unresolved), or []."""
    node = OmegaConf.select(config, key, default=None, throw_on_resolution_failure=False)
    return OmegaConf.to_container(node, resolve=False) if node is not None else []


def _flat(params: dict, given: set[str]):
    """(key, value) of the sweeper's ``params``; a mapping the command line nested there
    (``+hydra.sweeper.params.timing.repeat=1,0``) as its dotted keys."""
    for key, value in params.items():
        if isinstance(value, dict) and any(g.startswith(f"hydra.sweeper.params.{key}.") for g in given):
            yield from ((f"{key}.{k}", v) for k, v in _flat(value, {g.replace(f".{key}.", ".", 1) for g in given}))
        else:
            yield key, value


def count_jobs(config) -> int | None:
    """How many jobs the multirun ``config`` launches: the product of the swept keys' value counts
    (Hydra's basic sweep, gemmlab's), ``n_trials`` for a search; None where not known (an interval)."""
    if "optuna" in str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).lower():
        return OmegaConf.select(config, "hydra.sweeper.n_trials", default=None)
    try:
        from hydra.core.global_hydra import GlobalHydra
        counts = []
        for key, (o, _) in sweep_entries(config).items():
            if _is_glob(o):  # matched against the group's options as Hydra's config loader lists them
                counts.append(len(o.value().filter(GlobalHydra.instance().config_loader().get_group_options(key))))
            elif o.is_sweep_override():
                if not o.is_discrete_sweep():
                    return None
                counts.append(len(list(o.sweep_string_iterator())))
        return math.prod(counts)
    except Exception:
        return None


def _experiments_sweeping(o, chosen: list[str], config) -> None:
    """A sweep of experiments whose files sweep points of their own: each job composes one
    experiment, and Hydra sweeps once (one point per experiment). Each experiment is composed with
    Hydra's compose API to read its ``hydra.sweeper.params``."""
    from hydra import compose
    name = OmegaConf.select(config, "hydra.job.config_name", default="config")
    sweeping = [v for v in chosen
                if OmegaConf.select(compose(config_name=name, overrides=[f"experiment={v}"], return_hydra_config=True),
                                    "hydra.sweeper.params", default=None)]
    if sweeping:
        one = f"name it alone: experiment={chosen[0]}" if len(chosen) == 1 else "run one experiment per command"
        raise ConfigError("experiment", f"{_text(o)} is a sweep of experiments, and {', '.join(sweeping)} "
                          f"sweep{'s' if len(sweeping) == 1 else ''} points of {'its' if len(sweeping) == 1 else 'their'} "
                          f"own, which Hydra would not expand (one point per experiment); {one}")


def _text(o) -> str:
    """The value of override ``o`` as typed."""
    return o.input_line.partition("=")[2]


def _is_glob(o) -> bool:
    from hydra.core.override_parser.types import Glob
    return isinstance(o.value(), Glob)


def _values(o, options: list[str]) -> list[str] | None:
    """The string value(s) of a group override (a glob matched against ``options``); None for an
    interval."""
    if _is_glob(o):
        return o.value().filter(options)
    if o.is_sweep_override():
        return [str(v) for v in o.sweep_string_iterator()] if o.is_discrete_sweep() else None
    return [o.get_value_element_as_str()]


def _typed_values(o) -> list:
    """The value(s) of an override as the composed config would hold them: a discrete sweep gives
    each of its values (a list, ``choice``, an integer ``range``, also inside ``tag``, ``shuffle``
    or ``sort``), a quoted one as its text (``'a b'`` as ``a b``); left out where they are not
    known here: an interval, a glob, a float range, an interpolation (also inside a list)."""
    from hydra.core.override_parser.types import Override, RangeSweep, Sweep
    if _is_glob(o) or (o.is_sweep_override() and not o.is_discrete_sweep()):
        return []
    values = []
    for v in o.sweep_iterator(Override._convert_value) if o.is_sweep_override() else [o.value()]:
        if isinstance(v, RangeSweep):  # a range inside a list: range(1,3),0 (integer ranges only)
            values += list(range(v.start, v.stop, v.step)) if all(isinstance(x, int) for x in (v.start, v.stop, v.step)) else []
        elif not isinstance(v, Sweep) and "${" not in str(v):
            values.append(v)
    return values


def _not_a_sweep_string(key: str, value: object, config, experiment: str | None) -> str:
    """The message for an experiment file's ``hydra.sweeper.params`` entry that is no string or
    number (a YAML list, a mapping, null): Hydra's sweepers take ``<key>=<value>`` as text, so a
    list is one value (one point with ``shape=[[32,32,32],[64,64,64]]``), not the sweep it looks like."""
    import json
    from gemmlab.paths import config_file
    sources = OmegaConf.select(config, "hydra.runtime.config_sources", default=[]) or []
    folders = [s.path for s in sources if s.get("provider") in ("main", "command-line") and s.schema == "file"]
    path = config_file("experiment", str(experiment), folders)

    def text(v):
        return "[" + ",".join(text(x) for x in v) + "]" if isinstance(v, (list, tuple)) else str(v)
    if isinstance(value, list) and value:
        joined = ",".join(text(v) for v in value)
        got, example = "a YAML list", f'{key}: "{joined}"' if joined.startswith("[") else f"{key}: {joined}"
    else:
        got = "an empty YAML list" if isinstance(value, list) else "a mapping" if isinstance(value, dict) else "null"
        example = f"{key}: \"[32,32,32],[64,64,64]\"" if key == "shape" else f"{key}: 8,16"
    return (f"{path} gives hydra.sweeper.params.{key} {got} ({json.dumps(value)}); a sweep is written as one "
            f"comma string, e.g. {example}")


def _sweep_values_error(o, groups: set[str]) -> str | None:
    """What is wrong with the values of a sweep that Hydra's basic sweeper would take and
    mishandle, or None: no value at all (an empty ``range(5,1)``: 0 jobs after making the sweep's
    folder), too many (:data:`MAX_SWEEP_VALUES`), a sweep inside a comma list (``range(2,4),8``:
    not expanded), or a glob over a key that is no config group (``kernel.TM=glob(*)``: 0 jobs)."""
    from hydra.core.override_parser.types import RangeSweep, Sweep
    key, text = o.key_or_group, _text(o)
    if _is_glob(o):
        if "/" in key or key in groups:
            return None
        how = ("list the shapes (e.g. [64,64,64],[128,128,128])" if key == "shape" else
               "list the values (e.g. 2,4,8) or give a range(START,STOP)" if key.startswith(("kernel.", "timing.")) else
               f"list the values, comma-separated ({key}=A,B)")
        return f"{text}: a glob picks options of a config group ({', '.join(sorted(groups))}); {key} is a value: {how}"
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
    if any(isinstance(v, Sweep) for v in values):
        return (f"{text}: Hydra does not expand a range or choice inside a comma list; sweep one range alone "
                "or write the values out (e.g. 2,3,8)")
    return None


#: interpolations that are the same for every point of a sweep (Hydra's job name, the clock)
_SAME_FOR_EVERY_POINT = re.compile(r"\$\{(?:hydra:)?(?:hydra\.job\.name|hydra\.runtime\.[\w.]+|now:[^}]*)\}")


def _subdir_problem(subdir: object, one_point: bool = False) -> str | None:
    """What makes ``hydra.sweep.subdir`` wrong for every sweeper, told from its text alone, or
    None: a constant, or interpolations that are the same for every point (``${hydra.job.name}``,
    ``${now:%H}``), give all points one folder (unless the sweep has ``one_point``); a path that
    leaves the sweep's folder (absolute, or ``..`` past it) or is that folder puts points where
    its summary does not look. gemmlab's launcher also resolves each job's folder
    (``hydra_plugins/gemmlab_launcher``)."""
    same = "names the same folder for every point of the sweep (the second would find the first's result)"
    if subdir is None:
        return same
    if not isinstance(subdir, (str, int, float)):
        return None
    text = str(subdir)
    if "${" not in _SAME_FOR_EVERY_POINT.sub("", text) and not one_point:
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
