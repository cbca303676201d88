"""The ``gemmlab`` command: Hydra app around :func:`gemmlab.pipeline.run_point`.

``gemmlab kernel=tiled shape=[63,65,33]`` runs one point into ``outputs/<date>/<time>_<id>/``;
``gemmlab -m ...`` sweeps in one process (CUDA context and compiled modules reused) into
``outputs/multirun/<date>/<time>_<id>/<job>/`` and writes ``summary.{csv,md}`` there.

Exit status: 0 all points valid; 2 invalid input (one line naming the field); 1 any other
failure (wrong result, compile error, CUDA error, no GPU).
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from gemmlab import record as record_stage
from gemmlab import sweep
from gemmlab.errors import CompileError, ConfigError, NoGPUError
from gemmlab.paths import CONF_DIR
from gemmlab.pipeline import exit_status, registry_for, run_point

_STATUSES: list[int] = []
_FLAGS_WITH_VALUE = {"-c", "--cfg", "-p", "--package", "-cn", "--config-name", "-cp", "--config-path",
                     "-cd", "--config-dir", "--info", "--experimental-rerun"}
_PLUGIN_DIRS: list[str] = []
_FILE_GROUPS = ("experiment", "timing")  # config groups whose options are only YAML files in conf/


def _kernels_help() -> str:
    try:
        registry = registry_for({"plugin_dirs": _PLUGIN_DIRS})
    except ConfigError as exc:
        return f"(plugins failed to load: {exc})"
    lines = []
    for name, spec in registry.kernels.items():
        params = " ".join(f"{k}={v}" for k, v in spec.defaults.items())
        lines.append(f"{name:16s} {spec.description}\n{'':16s} defaults: {params or '-'}   [{registry.origins[name]}]")
    return "\n".join(lines)


def register_resolvers() -> None:
    """Register gemmlab's OmegaConf resolvers (idempotent): ``gemmlab_unique`` (pid + random
    suffix, cached per config so a sweep keeps one directory) and ``gemmlab_kernels`` (help)."""
    OmegaConf.register_new_resolver("gemmlab_unique", lambda: f"{os.getpid()}-{secrets.token_hex(3)}",
                                    use_cache=True, replace=True)
    OmegaConf.register_new_resolver("gemmlab_kernels", _kernels_help, replace=True)


def _prescan(args: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Return (plugin_dirs, kernel names, kernel parameter names) named by command-line
    overrides, using Hydra's parser.

    Raises:
        ConfigError: an override that Hydra's grammar rejects, or a sweep without ``-m``.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides, skip, multirun = [], False, False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg.startswith("-"):
            skip = arg in _FLAGS_WITH_VALUE
            multirun = multirun or arg in ("-m", "--multirun")
            continue
        overrides.append(arg)
    parser = OverridesParser.create()
    parsed = []
    for text in overrides:
        try:
            parsed.extend(parser.parse_overrides([text]))
        except Exception as exc:  # Hydra's OverrideParseException: keep its first line only
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(text.split("=", 1)[0].lstrip("+~"), f"cannot parse override {text!r}: {first} "
                              "(lists are written [a,b,c]; quote them in the shell)") from None
    for o in parsed:
        if o.key_or_group in _FILE_GROUPS and o.package is None and not o.is_delete():
            available = sorted(p.stem for p in (CONF_DIR / o.key_or_group).glob("*.yaml"))
            values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
            for value in values:
                if value not in available and value != "null":
                    raise ConfigError(o.key_or_group, f"unknown {o.key_or_group} '{value}'; available: "
                                      f"{', '.join(available)}")
    experiment = any(o.key_or_group == "experiment" for o in parsed)
    dirs, kernels, params = [], [], []
    for o in parsed:
        if o.is_sweep_override() and not multirun and not experiment:
            raise ConfigError(o.key_or_group, f"{o.input_line!r} is a sweep (several values); "
                              "run it with -m (gemmlab -m ...)")
        if o.key_or_group == "plugin_dirs" and isinstance(o.value(), list):
            dirs = [str(d) for d in o.value()]
        elif o.key_or_group == "kernel" and o.package is None and not o.is_delete():
            kernels = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
        elif o.key_or_group.startswith("kernel.") and not o.is_add() and o.key_or_group.count(".") == 1:
            params.append(o.key_or_group.split(".", 1)[1])
    if experiment and not kernels:
        kernels = _experiment_kernels(next(o for o in parsed if o.key_or_group == "experiment"))
    return dirs, kernels, params


def _experiment_kernels(override) -> list[str]:
    """The kernels an experiment file sweeps (``hydra.sweeper.params.kernel``), if it names any."""
    path = CONF_DIR / "experiment" / f"{override.get_value_element_as_str()}.yaml"
    if not path.is_file():
        return []  # Hydra reports the missing option itself
    swept = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.params.kernel")
    return [k.strip() for k in str(swept).split(",")] if swept else []


def _default_kernel() -> str:
    defaults = OmegaConf.load(CONF_DIR / "config.yaml").get("defaults", [])
    return next((d["kernel"] for d in defaults if isinstance(d, dict) and "kernel" in d), "tiled")


def _prepare(args: list[str]) -> None:
    """Load plugins named on the command line, reject unknown kernels early, and give every
    kernel without a ``conf/kernel/<name>.yaml`` a config node built from its defaults.

    Raises:
        ConfigError: unknown kernel or broken plugin folder.
    """
    dirs, kernels, params = _prescan(args)
    _PLUGIN_DIRS[:] = dirs
    registry = registry_for({"plugin_dirs": dirs})
    for name in kernels or [_default_kernel()]:
        spec = registry.get(name)
        for p in params:
            if p not in spec.defaults:
                raise ConfigError(f"kernel.{p}", f"kernel '{name}' has no parameter {p}; its parameters: "
                                  f"{', '.join(spec.defaults) or 'none'}")
    store = ConfigStore.instance()
    for name, spec in registry.kernels.items():
        if not (CONF_DIR / "kernel" / f"{name}.yaml").is_file():
            store.store(group="kernel", name=name, node={"name": name, **dict(spec.defaults)})


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _task(cfg) -> None:
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    record = run_point(cfg, out_dir)
    status = exit_status(record)
    _STATUSES.append(status)
    if record["status"] not in (ConfigError.status, NoGPUError.status):  # those get their one line only
        print(record_stage.summary(record))
        print(f"  result  {out_dir / 'result.json'}", flush=True)
    if record["status"] == CompileError.status and (out_dir / "compile.log").is_file():
        print((out_dir / "compile.log").read_text().rstrip(), file=sys.stderr)  # NVRTC log, line numbers
    if status:
        print(f"gemmlab: error: {record['error']}", file=sys.stderr, flush=True)


def main() -> None:
    """Console entry point (``gemmlab``)."""
    register_resolvers()
    try:
        _prepare(sys.argv[1:])
    except ConfigError as exc:
        print(f"gemmlab: error: {exc}", file=sys.stderr)
        sys.exit(2)
    _task()
    if sweep.FAILED_POINTS:
        sys.exit(1)
    sys.exit(max(_STATUSES, default=0))


if __name__ == "__main__":
    main()
