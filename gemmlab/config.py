"""Validate a composed config (Hydra ``DictConfig`` or a plain dict) into a :class:`RunConfig`.

Every rule raises :class:`~gemmlab.errors.ConfigError` with the field's dotted name and what is
allowed, so the CLI can print one line. Kernel-specific rules live in each plugin's
``KernelSpec.check``; this module only checks what every experiment shares.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from gemmlab.errors import ConfigError
from gemmlab.hookspecs import LAYOUTS, PRECISIONS as hookspec_precisions, Problem, Shape
from gemmlab.inputs import MAX_EXACT_K, InputOptions
from gemmlab.timing import TimingOptions
from gemmlab.verify import VerifyOptions

TOP_LEVEL = ("kernel", "timing", "shape", "mode", "arch", "device", "baseline", "precision", "layout", "sanitizer",
             "inputs", "verify", "plugin_dirs", "cache", "resume", "isolation")
SECTIONS = {"timing": ("mode", "l2", "warmup", "repeat", "max_repeat", "target_rel_spread", "budget_s", "batch",
                       "floor"),
            "verify": ("tolerance", "atol", "rtol", "safety", "method", "max_full", "sample", "trials"),
            "inputs": ("seed", "distribution"),
            "cache": ("enabled", "dir"),
            "layout": ("a", "b"),
            "isolation": ("process", "timeout_s")}
MODES = ("run", "compile")
DISTRIBUTIONS = ("normal", "uniform", "integers")
PRECISIONS = hookspec_precisions
SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
TIMING_MODES = ("events", "graph", "both")
L2_MODES = ("warm", "cold")
TOLERANCE_RULES = ("auto", "bound", "fixed", "exact")
VERIFY_METHODS = ("auto", "full", "sampled")
MAX_ELEMENTS = 2**31 - 1  # per matrix: 32-bit element offsets stay valid in every kernel


@dataclass(frozen=True)
class RunConfig:
    """One experiment point, validated. ``params`` holds the kernel's tile parameters (ints)."""

    kernel: str
    params: dict[str, int]
    shape: Shape
    mode: str = "run"
    arch: str | None = None
    device: int | str = 0
    timing: TimingOptions = field(default_factory=TimingOptions)
    verify: VerifyOptions = field(default_factory=VerifyOptions)
    inputs: InputOptions = field(default_factory=InputOptions)
    plugin_dirs: tuple[str, ...] = ()
    baseline: str | None = None
    precision: str = "fp32"
    layout_a: str = "row"
    layout_b: str = "row"
    sanitizer: str | None = None
    cache_enabled: bool = True
    cache_dir: str | None = None
    resume: bool = False

    @property
    def problem(self) -> Problem:
        """The GEMM problem: shape, precision and layouts."""
        return Problem(self.shape, self.precision, self.layout_a, self.layout_b)

    def label(self) -> str:
        """Short human label: ``tiled 63x65x33 BM=64 ...``."""
        params = " ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.kernel} {self.shape.M}x{self.shape.N}x{self.shape.K} {params}".rstrip()


def _plain(value: Any) -> Any:
    try:
        from omegaconf import OmegaConf
        if OmegaConf.is_config(value):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        pass
    return value


def _int(value: Any, field_name: str, minimum: int, maximum: int | None = None) -> int:
    upper = f" and <= {maximum}" if maximum is not None else ""
    if (isinstance(value, bool) or not isinstance(value, int) or value < minimum
            or (maximum is not None and value > maximum)):
        raise ConfigError(field_name, f"must be an integer >= {minimum}{upper}, got {value!r}")
    return value


def _choice(value: Any, field_name: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(field_name, f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _number(value: Any, field_name: str, low: float, high: float) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not low <= value <= high):
        raise ConfigError(field_name, f"must be a number in [{low:g}, {high:g}], got {value!r}")
    return float(value)


def _bool(value: Any, field_name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(field_name, f"must be true or false, got {value!r}")
    return value


def _device(value: Any) -> int | str:
    if value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError("device", f"must be a GPU index >= 0 or auto, got {value!r}")
    return value


def _optional(value: Any, parse):
    return None if value is None else parse(value)


def _tolerance(value: Any, field_name: str) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not 0 <= value <= 1):
        raise ConfigError(field_name, f"must be a number in [0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class IsolationOptions:
    """How a point is shielded from the others (``gemmlab.isolation``): ``process`` runs it in a
    worker process that is replaced after a CUDA fault; ``timeout_s`` is the watchdog's limit
    for one point (compile, verification, timing, sanitizer) in seconds."""

    process: bool = True
    timeout_s: float = 1800.0


def parse_isolation(value: Any) -> IsolationOptions:
    """Validate the ``isolation`` section (missing keys take the defaults).

    Raises:
        ConfigError: field ``isolation`` or ``isolation.<key>``.
    """
    value = _plain(value)
    if value is None:
        return IsolationOptions()
    if not isinstance(value, Mapping):
        raise ConfigError("isolation", f"must be a mapping with keys process, timeout_s, got {value!r}")
    extra = sorted(set(value) - set(SECTIONS["isolation"]))
    if extra:
        raise ConfigError(f"isolation.{extra[0]}", "unknown key; known: process, timeout_s")
    return IsolationOptions(process=_bool(value.get("process", True), "isolation.process"),
                            timeout_s=_number(value.get("timeout_s", 1800.0), "isolation.timeout_s", 0.001, 7 * 86_400.0))


def parse_shape(value: Any) -> Shape:
    """Validate ``shape`` = ``[M, N, K]``: three integers, each >= 1, each matrix < 2**31 elements.

    Raises:
        ConfigError: field ``shape``.
    """
    value = _plain(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ConfigError("shape", f"must be a list [M, N, K] of three positive integers, got {value!r}")
    for name, dim in zip("MNK", value):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ConfigError("shape", f"{name} must be a positive integer, got {dim!r} "
                              "(shape is [M, N, K] of three positive integers)")
    m, n, k = value
    for name, count in (("A = M*K", m * k), ("B = K*N", k * n), ("C = M*N", m * n)):
        if count > MAX_ELEMENTS:
            raise ConfigError("shape", f"{name} has {count} elements; at most {MAX_ELEMENTS} are allowed")
    return Shape(m, n, k)


def parse_arch(value: Any) -> str | None:
    """Normalize ``arch``: ``None`` (the device's own), ``"sm_90"``, ``"90"`` or ``90`` -> ``"90"``.

    Raises:
        ConfigError: field ``arch``.
    """
    if value is None:
        return None
    match = re.fullmatch(r"(?:sm_)?(\d{2,3})([af]?)", str(value))
    if isinstance(value, bool) or not match:
        raise ConfigError("arch", f"must be a CUDA SM target like sm_90 (or null for the device's own), got {value!r}")
    supported = _nvrtc_archs()
    if supported and int(match.group(1)) not in supported:
        raise ConfigError("arch", f"sm_{match.group(1)} is not supported by this NVRTC; supported: "
                          f"{', '.join(f'sm_{a}' for a in supported)}")
    return match.group(1) + match.group(2)


def _nvrtc_archs() -> list[int]:
    """The SM targets this NVRTC can compile for (``nvrtcGetSupportedArchs``); [] if unknown."""
    try:
        from cuda.bindings import nvrtc
        _, archs = nvrtc.nvrtcGetSupportedArchs()
        return [int(a) for a in archs]
    except Exception:
        return []


def parse_params(spec_defaults: Mapping[str, int], given: Mapping[str, Any], kernel: str) -> dict[str, int]:
    """Merge ``given`` tile parameters over the kernel's defaults; every value a positive int.

    Raises:
        ConfigError: field ``kernel.<P>`` for an unknown parameter or a non-positive/non-int value.
    """
    params = dict(spec_defaults)
    for key, value in given.items():
        if key not in spec_defaults:
            allowed = ", ".join(spec_defaults) or "none"
            raise ConfigError(f"kernel.{key}", f"kernel '{kernel}' has no parameter {key}; its parameters: {allowed}")
        params[key] = _int(value, f"kernel.{key}", 1, 4096)
    return params


def parse_config(cfg: Mapping[str, Any], defaults_of=None) -> RunConfig:
    """Validate the composed config ``cfg`` (keys as in ``conf/config.yaml``).

    ``defaults_of(kernel_name)`` returns that kernel's default parameters (the registry's
    ``get(name).defaults``); it raises ConfigError for an unknown kernel.

    Raises:
        ConfigError: naming the first invalid field.
    """
    cfg = _plain(cfg)
    if not isinstance(cfg, Mapping):
        raise ConfigError("config", "must be a mapping")
    unknown = sorted(set(cfg) - set(TOP_LEVEL))
    if unknown:
        raise ConfigError(unknown[0], f"unknown config key; known: {', '.join(TOP_LEVEL)}")
    for section, keys in SECTIONS.items():
        value = cfg.get(section, {})
        if value is None or not isinstance(value, Mapping):
            raise ConfigError(section, f"must be a mapping with keys {', '.join(keys)}, got {value!r}")
        extra = sorted(set(value) - set(keys))
        if extra:
            raise ConfigError(f"{section}.{extra[0]}", f"unknown key; known: {', '.join(keys)}")
    kernel_cfg = cfg.get("kernel")
    if not isinstance(kernel_cfg, Mapping) or not isinstance(kernel_cfg.get("name"), str):
        raise ConfigError("kernel", "must select a kernel config (kernel=<name>)")
    name = kernel_cfg["name"]
    given = {k: v for k, v in kernel_cfg.items() if k != "name"}
    defaults = defaults_of(name) if defaults_of else {k: v for k, v in given.items()}
    params = parse_params(defaults, given, name)

    mode = _choice(cfg.get("mode", "run"), "mode", MODES)

    timing_cfg = cfg.get("timing") or {}
    timing = TimingOptions(
        mode=_choice(timing_cfg.get("mode", "events"), "timing.mode", TIMING_MODES),
        l2=_choice(timing_cfg.get("l2", "warm"), "timing.l2", L2_MODES),
        warmup=_int(timing_cfg.get("warmup", 5), "timing.warmup", 0, 100_000),
        repeat=_int(timing_cfg.get("repeat", 10), "timing.repeat", 1, 100_000),
        max_repeat=_optional(timing_cfg.get("max_repeat"), lambda v: _int(v, "timing.max_repeat", 1, 1_000_000)),
        target_rel_spread=_optional(timing_cfg.get("target_rel_spread"),
                                    lambda v: _number(v, "timing.target_rel_spread", 0.0, 1.0)),
        budget_s=_optional(timing_cfg.get("budget_s"), lambda v: _number(v, "timing.budget_s", 0.0, 86_400.0)),
        batch=_int(timing_cfg.get("batch", 20), "timing.batch", 1, 100_000),
        floor=_bool(timing_cfg.get("floor", True), "timing.floor"),
    )
    if timing.max_repeat is not None and timing.max_repeat < timing.repeat:
        raise ConfigError("timing.max_repeat", f"must be >= timing.repeat ({timing.repeat}), got {timing.max_repeat}")
    verify_cfg = cfg.get("verify") or {}
    verify = VerifyOptions(
        tolerance=_choice(verify_cfg.get("tolerance", "auto"), "verify.tolerance", TOLERANCE_RULES),
        atol=_tolerance(verify_cfg.get("atol", 3e-4), "verify.atol"),
        rtol=_tolerance(verify_cfg.get("rtol", 3e-4), "verify.rtol"),
        safety=_number(verify_cfg.get("safety", 8.0), "verify.safety", 1.0, 1000.0),
        method=_choice(verify_cfg.get("method", "auto"), "verify.method", VERIFY_METHODS),
        max_full=_int(verify_cfg.get("max_full", 2**37), "verify.max_full", 1),
        sample=_int(verify_cfg.get("sample", 256), "verify.sample", 1, 1_000_000),
        trials=_int(verify_cfg.get("trials", 2), "verify.trials", 1, 100),
    )
    inputs_cfg = cfg.get("inputs") or {}
    distribution = _choice(inputs_cfg.get("distribution", "normal"), "inputs.distribution", DISTRIBUTIONS)
    inputs = InputOptions(seed=_int(inputs_cfg.get("seed", 0), "inputs.seed", 0, 2**63 - 1),
                          distribution=distribution)
    precision = _choice(cfg.get("precision", "fp32"), "precision", PRECISIONS)
    layout_cfg = cfg.get("layout") or {}
    layout_a = _choice(layout_cfg.get("a", "row"), "layout.a", LAYOUTS)
    layout_b = _choice(layout_cfg.get("b", "row"), "layout.b", LAYOUTS)
    baseline = cfg.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise ConfigError("baseline", f"must be a kernel name or null, got {baseline!r}")
    if baseline is not None and defaults_of is not None:
        try:
            defaults_of(baseline)
        except ConfigError as exc:
            raise ConfigError("baseline", str(exc).split(": ", 1)[-1]) from None
    sanitizer = cfg.get("sanitizer")
    if sanitizer is not None:
        sanitizer = _choice(sanitizer, "sanitizer", SANITIZER_TOOLS)
    plugin_dirs = cfg.get("plugin_dirs") or []
    if isinstance(plugin_dirs, str) or not all(isinstance(p, str) for p in plugin_dirs):
        raise ConfigError("plugin_dirs", f"must be a list of directory paths, got {plugin_dirs!r}")
    cache_cfg = cfg.get("cache", {}) or {}
    cache_enabled = _bool(cache_cfg.get("enabled", True), "cache.enabled")
    cache_dir = cache_cfg.get("dir")
    if cache_dir is not None and not isinstance(cache_dir, str):
        raise ConfigError("cache.dir", f"must be a folder path or null, got {cache_dir!r}")
    resume = _bool(cfg.get("resume", False), "resume")
    parse_isolation(cfg.get("isolation"))
    shape = parse_shape(cfg.get("shape"))
    if distribution == "integers" and shape.K > MAX_EXACT_K:
        raise ConfigError("inputs.distribution", f"integers are exact in float32 only for K <= {MAX_EXACT_K}; "
                          f"got K = {shape.K} (use normal or uniform)")
    if verify.tolerance == "exact" and distribution != "integers":
        raise ConfigError("verify.tolerance", "exact needs inputs.distribution=integers (float inputs round)")
    return RunConfig(kernel=name, params=params, shape=shape, mode=mode,
                     arch=parse_arch(cfg.get("arch")), device=_device(cfg.get("device", 0)),
                     timing=timing, verify=verify, inputs=inputs, plugin_dirs=tuple(plugin_dirs),
                     baseline=baseline, precision=precision, layout_a=layout_a, layout_b=layout_b,
                     sanitizer=sanitizer,
                     cache_enabled=cache_enabled, cache_dir=cache_dir, resume=resume)
