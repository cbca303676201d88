"""The config schema (:class:`GemmlabConfig`, Hydra's ``base_config``) and the validation of a
composed config (Hydra ``DictConfig`` or a plain dict) into a :class:`RunConfig`.

Keys and defaults live in one place: the option dataclasses (:class:`~gemmlab.stages.timing.TimingOptions`,
:class:`~gemmlab.stages.verify.VerifyOptions`, :class:`~gemmlab.stages.inputs.InputOptions`,
:class:`LayoutOptions`, :class:`CacheOptions`, :class:`IsolationOptions`, the top-level defaults of
:class:`RunConfig`); the schema, ``TOP_LEVEL``/``SECTIONS`` and parse_config's defaults are derived
from them.

Every rule raises :class:`~gemmlab.errors.ConfigError` with the field's dotted name and what is
allowed, so the CLI can print one line. Kernel-specific rules live in each plugin's
``KernelSpec.check``; this module only checks what every experiment shares.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from gemmlab.errors import ConfigError
from gemmlab.contract.hookspecs import (FP8_FORMATS, FP8_OUTPUTS, LAYOUTS, PRECISIONS as hookspec_precisions, SCALINGS,
                                        Problem, Shape)
from gemmlab.contract.epilogue import ACTIVATIONS, BIAS_KINDS, MAX_BATCH, OUTPUTS, Epilogue, exact_possible
from gemmlab.contract.grouped import GROUPED_KINDS, Grouped
from gemmlab.stages.grouped import GENERATORS, group_sizes
from gemmlab.stages.inputs import DRAW_WHERE, MAX_EXACT_K, InputOptions
from gemmlab.stages.timing import FLUSHES, SHARED_MODES, TimingOptions
from gemmlab.stages.verify import AFTER_TIMING_WHERE, VerifyOptions

MODES = ("run", "compile")
DISTRIBUTIONS = ("normal", "uniform", "integers")
PRECISIONS = hookspec_precisions
SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
TIMING_MODES = ("events", "graph", "both")
L2_MODES = ("warm", "cold")
TOLERANCE_RULES = ("auto", "bound", "fixed", "exact")
VERIFY_METHODS = ("auto", "full", "sampled")
MAX_ELEMENTS = 2**31 - 1  # per matrix: 32-bit element offsets stay valid in every kernel
DEFAULT_SHAPE = (256, 256, 256)


@dataclass(frozen=True)
class IsolationOptions:
    """How a point is shielded from the others (``gemmlab.run.isolation``): ``process`` runs it in a
    worker process that is replaced after a CUDA fault; ``timeout_s`` is the watchdog's limit
    for one point (compile, verification, timing, sanitizer) in seconds."""

    process: bool = True
    timeout_s: float = 1800.0


@dataclass(frozen=True)
class LayoutOptions:
    """Storage order of A (M x K) and B (K x N): ``row`` | ``col`` (col B = K-major); C is always
    row-major. A kernel declares the layouts it supports. ``lda``, ``ldb``, ``ldc`` (issue 43):
    the leading dimensions in elements, each >= the tight one (A: K row-major, M col-major; B: N
    row-major, K col-major; C: N), null: tight; the elements past each row are padding that must
    stay untouched (:mod:`gemmlab.contract.epilogue`)."""

    a: str = Problem.layout_a  # row: the plugin contract's default problem (gemmlab.contract.hookspecs)
    b: str = Problem.layout_b
    lda: int | None = None
    ldb: int | None = None
    ldc: int | None = None


@dataclass(frozen=True)
class EpilogueOptions:
    """What the GEMM computes beyond A·B (issue 43; :mod:`gemmlab.contract.epilogue`):
    C = out(activation(alpha·A·B + beta·C0 + bias)). ``alpha`` a nonzero number, ``beta`` a number
    (nonzero: the input C0, M x N per batch, of C's type, drawn like A and B); ``bias``: ``none`` |
    ``float32`` | ``input`` (a vector of N, float32 or the input precision's type, drawn like A
    and B); ``activation``: ``none`` | ``relu`` | ``gelu_tanh`` | ``gelu_erf`` | ``silu`` (after the
    bias); ``out``: C's type, ``float32`` | ``bf16`` | ``fp16`` (rounded once, to nearest even).
    Precisions fp32, tf32, bf16, fp16 (fp8 has ``fp8.out``); plain GEMMs (not grouped). A kernel
    declares what it runs; the rest is refused before compiling."""

    alpha: float = 1.0
    beta: float = 0.0
    bias: str = "none"
    activation: str = "none"
    out: str = "float32"


@dataclass(frozen=True)
class BatchOptions:
    """Strided-batched GEMM (issue 43): ``count`` products in one launch (1..65535); batch b's A, B
    and C start ``b * stride_a`` (``stride_b``, ``stride_c``) elements after batch 0's. null: tight
    (rows x ld of the stored matrix); 0: one A or B shared by every batch (e.g. one weight); else a
    multiple of the matrix's leading dimension, at least rows x ld (batches never overlap; the rows
    between them are padding). C0 follows C's stride; the bias is shared by every batch."""

    count: int = 1
    stride_a: int | None = None
    stride_b: int | None = None
    stride_c: int | None = None


@dataclass(frozen=True)
class Fp8Options:
    """``precision=fp8`` only (issue 42): the formats of A (``a``) and B (``b``), ``e4m3`` | ``e5m2``;
    ``scaling``: ``tensor`` | ``row`` | ``block`` (one float32 scale per operand; per row of A and
    column of B; per 1 x 128 group along K of A and 128 x 128 block of B); ``out``: the type of C,
    ``float32`` | ``bf16`` (the kernel's epilogue applies the scales). Each group's scale is its
    amax / 448 (E4M3) or / 57344 (E5M2); inputs are drawn as float32 and quantised once
    (:func:`gemmlab.stages.inputs.quantise`)."""

    a: str = Problem.fp8_a
    b: str = Problem.fp8_b
    scaling: str = Problem.scaling
    out: str = Problem.out


@dataclass(frozen=True)
class GroupedOptions:
    """A grouped GEMM (issue 44; the layouts: :mod:`gemmlab.contract.grouped`). ``kind``: null (a
    plain GEMM) | ``contiguous`` | ``masked`` | ``general``. ``shape=[M, N, K]`` gives the routed rows
    M = sum_g M_g and the experts' N and K.

    Group sizes M_g: ``sizes`` (a list of G ints >= 0 summing to M), or ``groups`` (G) experts
    filled by ``generator``: ``uniform`` (balanced), ``zipf`` (skewed, ``seed`` and ``exponent``),
    ``all_but_one_empty`` (:mod:`gemmlab.stages.grouped`). ``general`` may give ``shapes``, a list
    of [M_g, N_g, K_g] (then shape must be [sum M_g, max N_g, max K_g]). ``align``: contiguous pads
    each M_g up to a multiple of it (rows; DeepGEMM: 128), masked rounds M_max up to it; ``m_max``:
    masked rows per expert slot (null: max M_g rounded up to ``align``)."""

    kind: str | None = None
    groups: int | None = None
    sizes: list | None = None
    generator: str = "uniform"
    seed: int = 0
    exponent: float = 1.2
    align: int = 128
    m_max: int | None = None
    shapes: list | None = None


@dataclass(frozen=True)
class CacheOptions:
    """The persistent compile cache (``gemmlab.gpu.cache``): ``enabled``; ``dir`` null: the folder
    ``$GEMMLAB_CACHE_DIR`` or ``~/.cache/gemmlab/compile``."""

    enabled: bool = True
    dir: str | None = None


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
    precision: str = Problem.precision  # fp32 (gemmlab.contract.hookspecs.Problem, the one source)
    layout_a: str = LayoutOptions.a
    layout_b: str = LayoutOptions.b
    sanitizer: str | None = None
    cache_enabled: bool = CacheOptions.enabled
    cache_dir: str | None = CacheOptions.dir
    resume: bool = False
    fp8: Fp8Options = field(default_factory=Fp8Options)
    grouped: Grouped | None = None
    out: str = EpilogueOptions.out
    epilogue: Epilogue | None = None

    @property
    def problem(self) -> Problem:
        """The GEMM problem: shape, precision, layouts (and for fp8 its formats, scaling, output; for
        a grouped GEMM its groups; the epilogue, leading dimensions and batches, issue 43)."""
        f = self.fp8
        return Problem(self.shape, self.precision, self.layout_a, self.layout_b, f.a, f.b, f.scaling,
                       f.out if self.precision == "fp8" else self.out, self.grouped, self.epilogue)

    def label(self) -> str:
        """Short human label: ``tiled 63x65x33 BM=64 ...``."""
        params = " ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.kernel} {self.shape.M}x{self.shape.N}x{self.shape.K} {params}".rstrip()


# --- the config schema ----------------------------------------------------------------------------
# One place for the config's keys and defaults: the option dataclasses above and in timing.py,
# verify.py, inputs.py. The nodes below copy their field names and defaults into Hydra structured
# configs (stored as ``base_config``, the first entry of conf/config.yaml's defaults list), so
# OmegaConf rejects unknown keys while composing. Values are typed ``Any`` on purpose: OmegaConf's
# own conversions are looser than gemmlab's rules (it turns 1 into true and "12" into 12, and
# fails a wrong type with a multi-line Hydra error), so types and ranges stay with parse_config
# and its one-line errors.

def _defaults(cls) -> dict[str, Any]:
    """Field name -> default of the dataclass ``cls`` (a fresh value for a factory default)."""
    return {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
            for f in dataclasses.fields(cls)}


def _node(cls, name: str):
    """A mutable structured-config dataclass with the fields and defaults of ``cls``, each typed
    ``Any``, named ``name`` in this module (so a pickled config finds it again)."""
    specs = [(key, Any, field(default_factory=lambda v=value: v) if isinstance(value, (list, dict))
              else field(default=value)) for key, value in _defaults(cls).items()]
    node = dataclasses.make_dataclass(name, specs)
    node.__module__, node.__qualname__ = __name__, name
    node.__doc__ = f"Config node of :class:`{cls.__name__}` (same keys and defaults): {cls.__doc__}"
    return node


TimingNode = _node(TimingOptions, "TimingNode")
VerifyNode = _node(VerifyOptions, "VerifyNode")
InputsNode = _node(InputOptions, "InputsNode")
LayoutNode = _node(LayoutOptions, "LayoutNode")
CacheNode = _node(CacheOptions, "CacheNode")
Fp8Node = _node(Fp8Options, "Fp8Node")
EpilogueNode = _node(EpilogueOptions, "EpilogueNode")
BatchNode = _node(BatchOptions, "BatchNode")
GroupedNode = _node(GroupedOptions, "GroupedNode")
IsolationNode = _node(IsolationOptions, "IsolationNode")


@dataclass
class GemmlabConfig:
    """The config schema (Hydra structured config ``base_config``); ``gemmlab --cfg job`` prints it
    composed. The sections' fields are documented on their option classes.

    Attributes:
        kernel: group ``conf/kernel/<name>.yaml`` (or a plugin's defaults): ``name`` and the
            kernel's own parameters (free-form here; checked against the kernel's defaults).
        timing: group ``conf/timing/<name>.yaml`` (:class:`~gemmlab.stages.timing.TimingOptions`).
        shape: ``[M, N, K]``: A (M x K), B (K x N), C (M x N); storage per precision and layout.
        mode: ``run``: compile, verify and time on the GPU; ``compile``: NVRTC compile and
            resource report, no GPU.
        arch: compile target, e.g. ``sm_90``; null: the device's own (mode=run) or sm_90 (compile).
        device: CUDA device index used by mode=run, or ``auto`` (a free GPU; see
            hydra/launcher=gemmlab_gpus).
        baseline: a second kernel measured alternately with the same inputs and protocol (e.g.
            cublas), or null.
        precision: ``fp32`` | ``tf32`` | ``bf16`` | ``fp16`` | ``fp8``: storage of A and B (bf16/fp16:
            2 bytes; tf32: float32 rounded by the tensor core; fp8: 1 byte, scaled, see ``fp8``); C is
            float32 (fp8: or bf16), accumulation float32 (fp8: as the kernel declares). A kernel
            declares the precisions it supports.
        fp8: :class:`Fp8Options` (``precision=fp8`` only: formats, scaling, output type).
        grouped: :class:`GroupedOptions` (a grouped GEMM of mixture-of-experts layers, issue 44).
        epilogue: :class:`EpilogueOptions` (alpha, beta·C0, bias, activation, output type; issue 43).
        batch: :class:`BatchOptions` (strided-batched GEMM; issue 43).
        layout: :class:`LayoutOptions` (storage orders, leading dimensions).
        sanitizer: re-run the correctness launch under compute-sanitizer: null | memcheck |
            racecheck | synccheck | initcheck.
        inputs: :class:`~gemmlab.stages.inputs.InputOptions`.
        verify: :class:`~gemmlab.stages.verify.VerifyOptions`.
        plugin_dirs: folders of drop-in kernel plugins (``*.py`` files with a gemmlab_kernels hook).
        cache: :class:`CacheOptions`.
        resume: re-running a sweep into its own directory (``hydra.sweep.dir=<it>``) with
            resume=true skips the points that already hold a valid result and re-runs the rest
            (earlier failed results are kept as ``result.previous-<time>.json``).
        isolation: :class:`IsolationOptions` (fault isolation, see docs/user-guide.md): every point runs in a
            worker process that is replaced after a CUDA fault or a crash; a point still running
            after ``timeout_s`` seconds (a hung kernel) is killed and recorded as status timeout.
    """

    kernel: Any = None
    timing: Any = field(default_factory=TimingNode)
    shape: Any = field(default_factory=lambda: list(DEFAULT_SHAPE))
    mode: Any = RunConfig.mode
    arch: Any = RunConfig.arch
    device: Any = RunConfig.device
    baseline: Any = RunConfig.baseline
    precision: Any = RunConfig.precision
    layout: Any = field(default_factory=LayoutNode)
    fp8: Any = field(default_factory=Fp8Node)
    grouped: Any = field(default_factory=GroupedNode)
    epilogue: Any = field(default_factory=EpilogueNode)
    batch: Any = field(default_factory=BatchNode)
    sanitizer: Any = RunConfig.sanitizer
    inputs: Any = field(default_factory=InputsNode)
    verify: Any = field(default_factory=VerifyNode)
    plugin_dirs: Any = field(default_factory=list)
    cache: Any = field(default_factory=CacheNode)
    resume: Any = RunConfig.resume
    isolation: Any = field(default_factory=IsolationNode)


SCHEMA_NAME = "base_config"
TOP_LEVEL = tuple(f.name for f in dataclasses.fields(GemmlabConfig))
SECTIONS = {name: tuple(_defaults(type(value))) for name, value in _defaults(GemmlabConfig).items()
            if dataclasses.is_dataclass(value)}


def store_schema() -> None:
    """Store :class:`GemmlabConfig` in Hydra's ConfigStore as ``base_config`` (idempotent), the
    schema conf/config.yaml's defaults list starts with (Hydra docs, "Structured Configs:
    Extending Configs"). Call it before composing conf/ (``gemmlab.cli.app.register_resolvers`` does).

    Stored once per process: the node is built from the dataclass (``OmegaConf.structured``, about
    20 ms) and never changes (``ConfigStore.load`` gives each compose a copy of it); a process that
    runs many commands (the tests, a long-lived caller) calls this for each."""
    from hydra.core.config_store import ConfigStore
    store = ConfigStore.instance()
    if f"{SCHEMA_NAME}.yaml" not in store.repo:
        store.store(name=SCHEMA_NAME, node=GemmlabConfig)


def unknown_key_error(key: str) -> ConfigError:
    """The one-line error for a config key the schema does not have (``foo``, ``verify.foo``)."""
    top, _, sub = key.partition(".")
    if not top:
        return ConfigError("override", f"{key!r} names no key; write key=value, e.g. kernel=tiled or shape=[M,N,K]")
    if top in SECTIONS and sub:
        return ConfigError(key, f"unknown key in {top}; known: {', '.join(sorted(SECTIONS[top]))}")
    return ConfigError(key, f"unknown config key; known: {', '.join(sorted((*TOP_LEVEL, 'experiment')))}")


def check_config_file(path, package: str = "") -> None:
    """Check a config file's keys against the schema the way Hydra will compose it, so a bad key
    is one line instead of Hydra's composition report. ``package`` is where the file lands
    (``timing`` for conf/timing/*.yaml); a ``# @package _global_`` header puts it at the top.
    Its ``defaults`` and ``hydra`` entries are Hydra's and not checked.

    Raises:
        ConfigError: ``<file's field>``: OmegaConf's rejection (an unknown key), or the file is
            not valid YAML (field ``package`` or ``config``).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException
    try:
        text = open(path, encoding="utf-8").read()
        node = OmegaConf.to_container(OmegaConf.create(text) if text.strip() else OmegaConf.create({}))
    except Exception as exc:
        raise ConfigError(package or "config", f"{path} is not a valid config: {str(exc).splitlines()[0]}") from None
    if re.search(r"^#\s*@package\s+_global_\s*$", text, re.M):
        package = ""
    if not isinstance(node, dict):
        return  # Hydra reports a file that is not a mapping
    node = {k: v for k, v in node.items() if k not in ("defaults", "hydra")}
    if package:
        node = {package: node}
    try:
        OmegaConf.merge(OmegaConf.structured(GemmlabConfig), node)
    except ConfigKeyError as exc:
        raise unknown_key_error(str(exc.full_key)) from None
    except OmegaConfBaseException as exc:  # pragma: no cover - every value is typed Any
        raise ConfigError(str(exc.full_key or package or "config"), str(exc).splitlines()[0]) from None


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
        raise ConfigError(field_name, f"must be an integer >= {minimum}{upper}, got {typed(value)}")
    return value


def typed(value: Any) -> str:
    """``value`` as a command line or a YAML file writes it, for error messages: ``null``, ``true``,
    ``false``; anything else as Python's ``repr`` (a string quoted). (``mode=null`` was said as
    ``got None``.)"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _choice(value: Any, field_name: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(field_name, f"must be one of {', '.join(allowed)}, got {typed(value)}")
    return value


def _number(value: Any, field_name: str, low: float, high: float) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not low <= value <= high):
        raise ConfigError(field_name, f"must be a number in [{low:g}, {high:g}], got {typed(value)}")
    return float(value)


def _bool(value: Any, field_name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(field_name, f"must be true or false, got {'null' if value is None else repr(value)}")
    return value


def _device(value: Any) -> int | str:
    if value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError("device", f"must be a GPU index >= 0 or auto, got {typed(value)}")
    return value


def _optional(value: Any, parse):
    return None if value is None else parse(value)


def _tolerance(value: Any, field_name: str) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not 0 <= value <= 1):
        raise ConfigError(field_name, f"must be a number in [0, 1], got {typed(value)}")
    return float(value)


def _path(value: Any, field_name: str, what: str, null_means: str) -> str | None:
    """A path-valued field: a string that names a path (``what``), or None (``null_means``). An empty
    or blank string is refused, as ``hydra.run.dir=''`` is (``cache.dir=' '`` made a folder named
    blank; ``''`` silently meant the default)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(field_name, f"must be {what} or null ({null_means}), got {typed(value)}")
    if not value.strip():
        raise ConfigError(field_name, f"is {'blank' if value else 'empty'}; give {what}, or null ({null_means})")
    return value


def _path_rule(what: str, null_means: str):
    """A field rule for :data:`FIELD_RULES` of a path-valued field (:func:`_path`)."""
    return lambda field_name: lambda value: _path(value, field_name, what, null_means)


def _rule(parse, *args, optional: bool = False):
    """A field rule for :data:`FIELD_RULES`: ``field -> (value -> parse(value, field, *args))``;
    ``optional``: None passes as None."""
    def for_field(field_name: str):
        def check(value: Any) -> Any:
            if optional and value is None:
                return None
            try:
                return parse(value, field_name, *args)
            except ConfigError as exc:
                if not optional:
                    raise
                head, _, got = str(exc).partition(": ")[2].rpartition(", got ")
                raise ConfigError(field_name, f"{head} or null, got {got}") from None
        return check
    return for_field


#: the fields whose values are checked alone (no other field decides whether a value is valid):
#: field -> ``check(value)`` returning the parsed value or raising ConfigError naming the field.
#: :func:`parse_config` parses these fields with them (``kernel.table``: kernel=auto's
#: ``gemmlab.dispatch.auto.resolve_config``), and the command line checks a value given
#: there (each value of a sweep) before any point runs (:func:`check_field`)
FIELD_RULES: Mapping[str, Any] = MappingProxyType({name: rule(name) for name, rule in {
    "shape": lambda name: lambda value: parse_shape(value, empty_m=True),  # M = 0: parse_config decides
    "arch": lambda name: lambda value: parse_arch(value),
    "mode": _rule(_choice, MODES),
    "precision": _rule(_choice, PRECISIONS),
    "resume": _rule(_bool),
    "device": lambda name: _device,
    "sanitizer": _rule(_choice, SANITIZER_TOOLS, optional=True),
    "timing.mode": _rule(_choice, TIMING_MODES),
    "timing.l2": _rule(_choice, L2_MODES),
    "timing.warmup": _rule(_int, 0, 100_000),
    "timing.repeat": _rule(_int, 1, 100_000),
    "timing.max_repeat": _rule(_int, 1, 1_000_000, optional=True),
    "timing.target_rel_spread": _rule(_number, 0.0, 1.0, optional=True),
    "timing.budget_s": _rule(_number, 0.0, 86_400.0, optional=True),
    "timing.batch": _rule(_int, 1, 100_000),
    "timing.floor": _rule(_bool),
    "timing.flush": _rule(_choice, FLUSHES),
    "timing.shared": _rule(_choice, SHARED_MODES),
    "verify.tolerance": _rule(_choice, TOLERANCE_RULES),
    "verify.atol": _rule(_tolerance),
    "verify.rtol": _rule(_tolerance),
    "verify.safety": _rule(_number, 1.0, 1000.0),
    "verify.method": _rule(_choice, VERIFY_METHODS),
    "verify.max_full": _rule(_int, 1),
    "verify.sample": _rule(_int, 1, 1_000_000),
    "verify.trials": _rule(_int, 1, 100),
    "verify.after_timing": _rule(_choice, AFTER_TIMING_WHERE),
    "inputs.distribution": _rule(_choice, DISTRIBUTIONS),
    "inputs.seed": _rule(_int, 0, 2**63 - 1),
    "inputs.draw": _rule(_choice, DRAW_WHERE),
    "layout.a": _rule(_choice, LAYOUTS),
    "layout.b": _rule(_choice, LAYOUTS),
    "layout.lda": _rule(_int, 1, MAX_ELEMENTS, optional=True),
    "layout.ldb": _rule(_int, 1, MAX_ELEMENTS, optional=True),
    "layout.ldc": _rule(_int, 1, MAX_ELEMENTS, optional=True),
    "epilogue.alpha": _rule(_number, -2.0**24, 2.0**24),
    "epilogue.beta": _rule(_number, -2.0**24, 2.0**24),
    "epilogue.bias": _rule(_choice, BIAS_KINDS),
    "epilogue.activation": _rule(_choice, ACTIVATIONS),
    "epilogue.out": _rule(_choice, tuple(OUTPUTS)),
    "batch.count": _rule(_int, 1, MAX_BATCH),
    "batch.stride_a": _rule(_int, 0, MAX_ELEMENTS, optional=True),
    "batch.stride_b": _rule(_int, 0, MAX_ELEMENTS, optional=True),
    "batch.stride_c": _rule(_int, 1, MAX_ELEMENTS, optional=True),
    "fp8.a": _rule(_choice, tuple(FP8_FORMATS)),
    "fp8.b": _rule(_choice, tuple(FP8_FORMATS)),
    "fp8.scaling": _rule(_choice, SCALINGS),
    "fp8.out": _rule(_choice, tuple(FP8_OUTPUTS)),
    "grouped.kind": _rule(_choice, GROUPED_KINDS, optional=True),
    "grouped.groups": _rule(_int, 1, 65535, optional=True),
    "grouped.generator": _rule(_choice, GENERATORS),
    "grouped.seed": _rule(_int, 0, 2**63 - 1),
    "grouped.exponent": _rule(_number, 0.01, 16.0),
    "grouped.align": _rule(_int, 1, 4096),
    "grouped.m_max": _rule(_int, 1, MAX_ELEMENTS, optional=True),
    "cache.enabled": _rule(_bool),
    "cache.dir": _path_rule("a folder for the compile cache",
                            "the default: $GEMMLAB_CACHE_DIR, else ~/.cache/gemmlab/compile"),
    "kernel.table": _path_rule("a tuning table file (JSON)", "the shipped table"),  # kernel=auto's (dispatch.auto)
    # kernel=auto's ranking path (gemmlab.dispatch.tuning): rules|model, off|first_use, top-k, budget, cache, model
    "kernel.rank": _rule(_choice, ("rules", "model")),
    "kernel.tune": _rule(_choice, ("off", "first_use")),
    "kernel.tune_k": _rule(_int, 1, 1024),  # 1024: every candidate of a problem (an exhaustive search)
    "kernel.tune_budget_s": _rule(_number, 0.0, 86_400.0),
    "kernel.tune_cache": _path_rule("a folder for kernel=auto's first-use tuning cache",
                                    "the default: $GEMMLAB_TUNING_CACHE, else ~/.cache/gemmlab/tuning"),
    "kernel.model": _path_rule("a ranking model file (JSON, python -m gemmlab.dispatch.model fit)",
                               "the shipped fit for the GPU"),
    "isolation.process": _rule(_bool),
    "isolation.timeout_s": _rule(_number, 0.001, 7 * 86_400.0),
}.items()})


def sweeper_params(node: Any) -> dict:
    """A config file's ``hydra.sweeper.params`` (key -> value as written) from its parsed YAML
    mapping ``node``, or {} (none, or not a mapping)."""
    hydra = node.get("hydra") if isinstance(node, dict) else None
    sweeper = hydra.get("sweeper") if isinstance(hydra, dict) else None
    params = sweeper.get("params") if isinstance(sweeper, dict) else None
    return params if isinstance(params, dict) else {}


def check_field(key: str, value: Any) -> Any:
    """Check one value of a field of :data:`FIELD_RULES` (as the composed config holds it: bool,
    int, float, str or None) and return it parsed; a key without a rule is returned unchecked.

    Raises:
        ConfigError: naming the field, with what it allows (the message :func:`parse_config` gives).
    """
    rule = FIELD_RULES.get(key)
    return value if rule is None else rule(value)


def check_baseline(value: Any, defaults_of=None) -> str | None:
    """Check ``baseline``: a kernel name (``defaults_of(name)``, as in :func:`parse_config`, raises
    ConfigError for an unknown one; None: names are not checked) or None; returns it.

    Raises:
        ConfigError: field ``baseline``.
    """
    if value is not None and not isinstance(value, str):
        raise ConfigError("baseline", f"must be a kernel name or null, got {typed(value)}")
    if value is not None and defaults_of is not None:
        try:
            defaults_of(value)
        except ConfigError as exc:
            from gemmlab.contract.registry import AUTO_HINT
            text = str(exc).split(": ", 1)[-1].replace(AUTO_HINT, "")  # auto picks per shape: no fixed baseline
            why = (": kernel=auto chooses per shape, a baseline is one fixed kernel" if value == "auto" else
                   ": baseline=null measures no baseline" if value.lower() in ("none", "no", "off", "") else "")
            raise ConfigError("baseline", f"{text}; or null (no baseline){why}") from None
    return value


def parse_isolation(value: Any) -> IsolationOptions:
    """Validate the ``isolation`` section (missing keys take the defaults).

    Raises:
        ConfigError: field ``isolation`` or ``isolation.<key>``.
    """
    value = _plain(value)
    if value is None:
        return IsolationOptions()
    if not isinstance(value, Mapping):
        raise ConfigError("isolation", f"must be a mapping with keys process, timeout_s, got {typed(value)}")
    extra = sorted(set(value) - set(SECTIONS["isolation"]))
    if extra:
        raise ConfigError(f"isolation.{extra[0]}", f"unknown key; known: {', '.join(SECTIONS['isolation'])}")
    value = {**_defaults(IsolationOptions), **value}
    return IsolationOptions(process=FIELD_RULES["isolation.process"](value["process"]),
                            timeout_s=FIELD_RULES["isolation.timeout_s"](value["timeout_s"]))


def parse_fp8(value: Any, precision: str) -> Fp8Options:
    """Validate the ``fp8`` section (missing keys take the defaults) for ``precision``: a value other
    than the default is refused for any precision but fp8 (it would be ignored).

    Raises:
        ConfigError: field ``fp8`` or ``fp8.<key>``, naming what is allowed.
    """
    defaults = _defaults(Fp8Options)
    parsed = {k: FIELD_RULES[f"fp8.{k}"](v) for k, v in _section("fp8", value, defaults).items()}
    if precision != "fp8":
        for key, v in parsed.items():
            if v != defaults[key]:
                raise ConfigError(f"fp8.{key}", f"applies to precision=fp8 only; got precision={precision} "
                                  f"(leave fp8.{key} at {defaults[key]}, or add precision=fp8)")
    return Fp8Options(**parsed)


def _section(name: str, value: Any, defaults: Mapping[str, Any]) -> dict:
    """An optional config section (``fp8``, ``grouped``, ``epilogue``, ``batch``) as a plain dict over ``defaults``: null is
    every default; anything but a mapping, or a key outside :data:`SECTIONS`, is a one-line
    :class:`ConfigError` naming the section or the key."""
    value = _plain(value)
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ConfigError(name, f"must be a mapping with keys {', '.join(SECTIONS[name])}, got {typed(value)}")
    extra = sorted(set(value) - set(SECTIONS[name]))
    if extra:
        raise ConfigError(f"{name}.{extra[0]}", f"unknown key; known: {', '.join(SECTIONS[name])}")
    return {**defaults, **value}


def _int_list(value: Any, field_name: str, what: str, minimum: int) -> list[int]:
    """A list of ints >= ``minimum`` (``what`` says what it holds), 1..65535 long."""
    value = _plain(value)
    if (isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 65535
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum for v in value)):
        raise ConfigError(field_name, f"must be a list of {what} (ints >= {minimum}), 1 to 65535 of them, or null; "
                          f"got {typed(value)}")
    return list(value)


def parse_grouped(value: Any, shape: Shape, precision: str, layout_a: str, layout_b: str) -> Grouped | None:
    """Validate the ``grouped`` section for a point of ``shape``, ``precision`` and layouts and return
    the grouped problem (its group sizes drawn by the generator), or None for a plain GEMM
    (``grouped.kind`` null, every other key at its default).

    Rules (:class:`GroupedOptions`): the sizes sum to shape's M (``general`` with ``shapes``: shape is
    [sum M_g, max N_g, max K_g]); precision fp32, tf32, bf16 or fp16; A row-major; ``groups`` or a
    size list; ``m_max`` (masked only) >= every M_g; ``shapes`` for ``general`` only; every stored
    matrix below 2**31 elements.

    Raises:
        ConfigError: field ``grouped.<key>`` (or ``precision``, ``layout.a``, ``shape``), naming what
            is allowed.
    """
    defaults = _defaults(GroupedOptions)
    cfg = _section("grouped", value, defaults)
    parsed = {k: FIELD_RULES[f"grouped.{k}"](v) for k, v in cfg.items() if f"grouped.{k}" in FIELD_RULES}
    kind = parsed["kind"]
    if kind is None:
        for key, v in cfg.items():
            if v != defaults[key]:
                raise ConfigError(f"grouped.{key}", f"applies to a grouped GEMM only; set grouped.kind to one of "
                                  f"{', '.join(GROUPED_KINDS)} (or leave grouped.{key} at {typed(defaults[key])})")
        return None
    if precision not in ("fp32", "tf32", "bf16", "fp16"):
        raise ConfigError("precision", f"a grouped GEMM (grouped.kind={kind}) runs fp32, tf32, bf16 or fp16; got "
                          f"{precision} (FP8 grouped forms wait for block-scaled kernels, issue 44 item 3)")
    if layout_a != "row":
        raise ConfigError("layout.a", f"a grouped GEMM stores A row-major (the tokens of each expert as rows, "
                          f"grouped.kind={kind}); got layout.a={layout_a}")
    sizes = None if cfg["sizes"] is None else _int_list(cfg["sizes"], "grouped.sizes", "rows M_g per expert", 0)
    shapes = None
    if cfg["shapes"] is not None:
        if kind != "general":
            raise ConfigError("grouped.shapes", f"applies to grouped.kind=general only (per-group N_g and K_g); "
                              f"got grouped.kind={kind}: give grouped.sizes, or grouped.groups with a generator")
        raw = _plain(cfg["shapes"])
        if (isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)) or not 1 <= len(raw) <= 65535
                or not all(isinstance(t, (list, tuple)) and len(t) == 3 and all(isinstance(x, int) and not isinstance(
                    x, bool) for x in t) and t[0] >= 0 and t[1] >= 1 and t[2] >= 1 for t in raw)):
            raise ConfigError("grouped.shapes", f"must be a list of [M_g, N_g, K_g] (M_g >= 0, N_g and K_g >= 1), "
                              f"1 to 65535 of them, or null; got {typed(raw)}")
        if sizes is not None:
            raise ConfigError("grouped.shapes", "gives M_g already; leave grouped.sizes null")
        shapes = [tuple(t) for t in raw]
        sizes = [t[0] for t in shapes]
    G = parsed["groups"]
    if sizes is not None:
        if G is not None and G != len(sizes):
            what = "grouped.shapes" if shapes else "grouped.sizes"
            raise ConfigError("grouped.groups", f"is {G} but {what} lists {len(sizes)} groups; leave grouped.groups null")
        total = sum(sizes)
        if shapes:
            want = [total, max(t[1] for t in shapes), max(t[2] for t in shapes)]
            if list(shape) != want:
                raise ConfigError("shape", f"a grouped.shapes point's shape is [sum M_g, max N_g, max K_g] = {want}; "
                                  f"got {list(shape)}")
        elif total != shape.M:
            raise ConfigError("grouped.sizes", f"sum to {total} rows, but shape's M (the routed rows, sum of M_g) is "
                              f"{shape.M}; give shape=[{total},{shape.N},{shape.K}]")
        generator = "list"
    else:
        if G is None:
            raise ConfigError("grouped.groups", f"give the number of experts G (an int >= 1) for grouped.generator="
                              f"{parsed['generator']}, or the group sizes as grouped.sizes=[M_0,M_1,...]")
        generator = parsed["generator"]
        sizes = list(group_sizes(generator, shape.M, G, parsed["seed"], parsed["exponent"]))
    if parsed["m_max"] is not None:
        if kind != "masked":
            raise ConfigError("grouped.m_max", f"applies to grouped.kind=masked only; got grouped.kind={kind}")
        if parsed["m_max"] < max(sizes):
            raise ConfigError("grouped.m_max", f"must be >= the largest group's M_g = {max(sizes)} (rows per expert "
                              f"slot), got {parsed['m_max']}")
    grouped = Grouped(kind=kind, sizes=tuple(sizes), N=shape.N, K=shape.K,
                      nk=tuple((n, k) for _, n, k in shapes) if shapes else (), align=parsed["align"],
                      m_max=parsed["m_max"] or 0, layout_b=layout_b, generator=generator, seed=parsed["seed"],
                      exponent=parsed["exponent"])
    for matrix in ("A", "B", "C"):
        rows, cols = grouped.stored_shape(matrix)
        if rows * cols > MAX_ELEMENTS:
            raise ConfigError("shape", f"grouped.kind={kind} stores {matrix} as {rows} x {cols} = {rows * cols} "
                              f"elements; at most {MAX_ELEMENTS} are allowed (fewer rows, experts or a smaller align)")
    return grouped


def _stride(given: int | None, count: int, rows: int, ld: int, field_name: str, what: str) -> int | None:
    """One batch stride (``batch.stride_<x>``): None (tight), 0 (shared; A and B), or a multiple of
    ``ld`` of at least ``rows * ld`` (batches never overlap)."""
    if given is None:
        return None
    if count == 1:
        raise ConfigError(field_name, f"applies to batch.count > 1; got batch.count=1 (leave {field_name} null)")
    if given and (given % ld or given < rows * ld):
        shared = f"0 (one {what} shared by every batch), " if what != "C" else ""
        raise ConfigError(field_name, f"must be {shared}null (tight: {rows * ld}) or a "
                          f"multiple of its leading dimension {ld} of at least rows x ld = {rows * ld}; got {given}")
    return given


def parse_epilogue(value: Any, batch_value: Any, lds: Mapping[str, int | None], shape: Shape, precision: str,
                   layout_a: str, layout_b: str, grouped: Grouped | None) -> tuple[str, Epilogue | None]:
    """Validate the ``epilogue`` and ``batch`` sections and ``layout.lda/ldb/ldc`` (issue 43) for a
    point of ``shape``, ``precision``, layouts and ``grouped``; return ``(out, epilogue)``: C's type
    and the :class:`~gemmlab.contract.epilogue.Epilogue` (None when every field is at its default).

    Rules (:class:`EpilogueOptions`, :class:`BatchOptions`, :class:`LayoutOptions`): alpha nonzero
    (alpha = 0 would leave A·B untested); every field at its default for precision fp8 or a grouped
    GEMM; each ld >= the tight one; a batch stride null, 0 (A and B only) or a multiple of its ld
    of at least rows x ld; every buffer below 2^31 elements.

    Raises:
        ConfigError: field ``epilogue.<key>``, ``batch.<key>`` or ``layout.<ld>``, naming what is allowed.
    """
    parsed = {k: FIELD_RULES[f"epilogue.{k}"](v)
              for k, v in _section("epilogue", value, _defaults(EpilogueOptions)).items()}
    batch = {k: FIELD_RULES[f"batch.{k}"](v) for k, v in _section("batch", batch_value, _defaults(BatchOptions)).items()}
    if parsed["alpha"] == 0.0:
        raise ConfigError("epilogue.alpha", "must be nonzero (alpha=0 leaves A·B out of C: nothing of the GEMM would "
                          "be tested); got 0")
    given = {**{f"epilogue.{k}": v for k, v in parsed.items() if v != getattr(EpilogueOptions, k)},
             **{f"batch.{k}": v for k, v in batch.items() if v != getattr(BatchOptions, k)},
             **{f"layout.{k}": v for k, v in lds.items() if v is not None}}
    if not given:
        return parsed["out"], None
    first, first_value = next(iter(given.items()))
    if precision == "fp8":
        hint = "fp8's C type is fp8.out; " if first == "epilogue.out" else ""
        raise ConfigError(first, f"applies to precisions fp32, tf32, bf16, fp16; got precision=fp8 ({hint}leave {first} "
                          "at its default)")
    if grouped is not None:
        raise ConfigError(first, f"applies to a plain GEMM; got grouped.kind={grouped.kind} (leave {first} at its "
                          "default)")
    M, N, K = shape
    tight = {"lda": K if layout_a == "row" else M, "ldb": N if layout_b == "row" else K, "ldc": N}
    rows = {"lda": M if layout_a == "row" else K, "ldb": K if layout_b == "row" else N, "ldc": M}
    for key, value in lds.items():
        if value is not None and value < tight[key]:
            what = {"lda": f"A {layout_a}-major", "ldb": f"B {layout_b}-major", "ldc": "C row-major"}[key]
            raise ConfigError(f"layout.{key}", f"must be >= the tight leading dimension {tight[key]} ({what}, shape "
                              f"{list(shape)}), or null (tight); got {value}")
    ld = {k: lds[k] or tight[k] for k in lds}
    count = batch["count"]
    strides = {}
    for x, key, what in (("a", "lda", "A"), ("b", "ldb", "B"), ("c", "ldc", "C")):
        strides[x] = _stride(batch[f"stride_{x}"], count, rows[key], ld[key], f"batch.stride_{x}", what)
        copies = 1 if strides[x] == 0 or count == 1 else count
        step = strides[x] if strides[x] else rows[key] * ld[key]
        elements = (copies - 1) * step + rows[key] * ld[key]
        if elements > MAX_ELEMENTS:
            raise ConfigError(f"batch.count" if copies > 1 else f"layout.{key}",
                              f"{what} would hold {elements} elements ({copies} batches of {rows[key]} rows of "
                              f"{ld[key]}); at most {MAX_ELEMENTS} are allowed")
    epilogue = Epilogue(alpha=parsed["alpha"], beta=parsed["beta"], bias=parsed["bias"],
                        activation=parsed["activation"], lda=lds["lda"] or 0, ldb=lds["ldb"] or 0,
                        ldc=lds["ldc"] or 0, batch=count, stride_a=strides["a"], stride_b=strides["b"],
                        stride_c=strides["c"])
    return parsed["out"], (None if epilogue.plain() else epilogue)


#: what ``shape``'s M = 0 is for (the one place both messages take it from, issue 44)
EMPTY_M = "M=0 only for a grouped GEMM whose groups are all empty (grouped.kind set, every M_g 0)"


def parse_shape(value: Any, empty_m: bool = False) -> Shape:
    """Validate ``shape`` = ``[M, N, K]``: three integers, each >= 1, each matrix < 2**31 elements.
    ``empty_m``: M may be 0 (a grouped GEMM whose groups are all empty, issue 44: an MoE step that
    routes no token to this GPU's experts; :func:`parse_config` refuses M = 0 for anything else).

    Raises:
        ConfigError: field ``shape``.
    """
    value = _plain(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ConfigError("shape", f"must be a list [M, N, K] of three positive integers, got {typed(value)}")
    for name, dim in zip("MNK", value):  # the whole shape is named too: a sweep's values differ
        low = 0 if (empty_m and name == "M") else 1
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < low:
            raise ConfigError("shape", f"{name} must be a positive integer, got {typed(dim)} in {typed(list(value))} "
                              f"(shape is [M, N, K] of three positive integers; {EMPTY_M})")
    m, n, k = value
    for name, count in (("A = M*K", m * k), ("B = K*N", k * n), ("C = M*N", m * n)):
        if count > MAX_ELEMENTS:
            raise ConfigError("shape", f"{name} has {count} elements in {list(value)}; at most {MAX_ELEMENTS} "
                              "are allowed")
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
        raise ConfigError("arch", f"must be a CUDA SM target like sm_90 (or null for the device's own), got {typed(value)}")
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


def _param(value: Any, key: str, listed: tuple[int, ...] | None) -> int:
    """One tile parameter's value: one of ``listed`` (the kernel's codes, which may lie outside
    1..4096), else an int in 1..4096.

    Raises:
        ConfigError: field ``kernel.<key>``, naming the listed values where there are some.
    """
    if listed and isinstance(value, int) and not isinstance(value, bool) and value in listed:
        return value  # a listed code, even outside 1..4096 (mma_*'s SWIZZLE=0)
    try:
        return _int(value, f"kernel.{key}", 1, 4096)
    except ConfigError:
        if not listed:
            raise
        raise ConfigError(f"kernel.{key}", f"must be one of {', '.join(map(str, listed))}, got {typed(value)}") from None


def _bad_default(kernel: str, key: str, default: Any, exc: ConfigError, origin: str | None) -> ConfigError:
    """The error for a kernel whose own default of ``key`` breaks the rule ``exc`` states: the
    plugin is at fault, not the user (``kernel.BX: must be ..., got 0`` read as if they had typed
    ``kernel.BX=0``)."""
    rule = str(exc).partition(": ")[2].rpartition(", got ")[0] or str(exc).partition(": ")[2]
    where = f" (plugin {origin})" if origin else ""
    return ConfigError(f"kernel.{key}", f"kernel '{kernel}' declares an invalid default {key}={typed(default)}"
                       f"{where}: {rule}; fix the plugin's defaults, or give kernel.{key}=<value>")


def parse_params(spec_defaults: Mapping[str, int], given: Mapping[str, Any], kernel: str,
                 values: Mapping[str, tuple[int, ...]] | None = None, origin: str | None = None) -> dict[str, int]:
    """Merge ``given`` tile parameters over the kernel's defaults; every value an int in 1..4096, or
    one of the values the kernel lists for that parameter (``KernelBase.param_values``, which may lie
    outside that range, e.g. ``SWIZZLE=0``). A value that is neither is refused naming the listed
    values where there are some, else the generic range; values inside the range are left to the
    kernel's own check (its messages say what each value means).

    A refused value that is the kernel's own default (Hydra's kernel node of a plugin is built from
    its defaults, so the composed config holds them as given: a value of the default's type equal
    to it) is said to be the plugin's, naming it (``origin``: its name or file,
    :attr:`gemmlab.contract.registry.Registry.origins`), not the user's. Defaults not in ``given``
    are taken as they are (a config handed to ``run_point`` from Python).

    Raises:
        ConfigError: field ``kernel.<P>`` for an unknown parameter or a non-int or out-of-range value
            (given, or the plugin's default composed as given).
    """
    params = dict(spec_defaults)
    for key, value in given.items():
        if key not in spec_defaults:
            allowed = ", ".join(spec_defaults) or "none"
            raise ConfigError(f"kernel.{key}", f"kernel '{kernel}' has no parameter {key}; its parameters: {allowed}")
        try:
            params[key] = _param(value, key, (values or {}).get(key))
        except ConfigError as exc:
            default = spec_defaults[key]
            if type(value) is type(default) and value == default:
                raise _bad_default(kernel, key, default, exc, origin) from None
            raise
    return params


def parse_config(cfg: Mapping[str, Any], defaults_of=None, values_of=None, origin_of=None) -> RunConfig:
    """Validate the composed config ``cfg`` (keys as in :class:`GemmlabConfig`).

    ``defaults_of(kernel_name)`` returns that kernel's default parameters (the registry's
    ``get(name).defaults``); it raises ConfigError for an unknown kernel. ``values_of(kernel_name)``
    (optional) returns the values its parameters allow where it lists them (``get(name).param_values``);
    ``origin_of(kernel_name)`` (optional) the plugin that provides it (``registry.origins[name]``),
    named when one of its own defaults is invalid.

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
            raise ConfigError(section, f"must be a mapping with keys {', '.join(keys)}, got {typed(value)}")
        extra = sorted(set(value) - set(keys))
        if extra:
            raise ConfigError(f"{section}.{extra[0]}", f"unknown key; known: {', '.join(keys)}")
    kernel_cfg = cfg.get("kernel")
    if not isinstance(kernel_cfg, Mapping) or not isinstance(kernel_cfg.get("name"), str):
        raise ConfigError("kernel", "must select a kernel config (kernel=<name>)")
    name = kernel_cfg["name"]
    given = {k: v for k, v in kernel_cfg.items() if k != "name"}
    defaults = defaults_of(name) if defaults_of else {k: v for k, v in given.items()}
    params = parse_params(defaults, given, name, values_of(name) if values_of else None,
                          origin_of(name) if origin_of else None)

    # a missing plain key takes the schema's default; shape does not (the command line's composed config
    # has the schema's [256, 256, 256]; a config handed to run_point must name its shape)
    cfg = {**{k: v for k, v in _defaults(GemmlabConfig).items() if k not in SECTIONS and k not in ("kernel", "shape")},
           **cfg}
    mode = FIELD_RULES["mode"](cfg["mode"])

    timing_cfg = {**_defaults(TimingOptions), **(cfg.get("timing") or {})}
    timing = TimingOptions(**{k: FIELD_RULES[f"timing.{k}"](timing_cfg[k]) for k in _defaults(TimingOptions)})
    if timing.max_repeat is not None and timing.max_repeat < timing.repeat:
        raise ConfigError("timing.max_repeat", f"must be >= timing.repeat ({timing.repeat}), got {timing.max_repeat}")
    verify_cfg = {**_defaults(VerifyOptions), **(cfg.get("verify") or {})}
    verify = VerifyOptions(**{k: FIELD_RULES[f"verify.{k}"](verify_cfg[k]) for k in _defaults(VerifyOptions)})
    inputs_cfg = {**_defaults(InputOptions), **(cfg.get("inputs") or {})}
    distribution = FIELD_RULES["inputs.distribution"](inputs_cfg["distribution"])
    inputs = InputOptions(seed=FIELD_RULES["inputs.seed"](inputs_cfg["seed"]),
                          distribution=distribution, draw=FIELD_RULES["inputs.draw"](inputs_cfg["draw"]))
    precision = FIELD_RULES["precision"](cfg["precision"])
    layout_cfg = {**_defaults(LayoutOptions), **(cfg.get("layout") or {})}
    layout_a = FIELD_RULES["layout.a"](layout_cfg["a"])
    layout_b = FIELD_RULES["layout.b"](layout_cfg["b"])
    lds = {k: FIELD_RULES[f"layout.{k}"](layout_cfg[k]) for k in ("lda", "ldb", "ldc")}
    fp8 = parse_fp8(cfg.get("fp8"), precision)
    baseline = check_baseline(cfg.get("baseline"), defaults_of)
    sanitizer = FIELD_RULES["sanitizer"](cfg.get("sanitizer"))
    plugin_dirs = cfg.get("plugin_dirs") or []
    if isinstance(plugin_dirs, str) or not all(isinstance(p, str) for p in plugin_dirs):
        raise ConfigError("plugin_dirs", f"must be a list of directory paths, got {plugin_dirs!r}")
    cache_cfg = {**_defaults(CacheOptions), **(cfg.get("cache") or {})}
    cache_enabled = FIELD_RULES["cache.enabled"](cache_cfg["enabled"])
    cache_dir = FIELD_RULES["cache.dir"](cache_cfg["dir"])
    resume = FIELD_RULES["resume"](cfg["resume"])
    parse_isolation(cfg.get("isolation"))
    shape = FIELD_RULES["shape"](cfg.get("shape"))
    if distribution == "integers" and shape.K > MAX_EXACT_K:
        raise ConfigError("inputs.distribution", f"integers are exact in float32 only for K <= {MAX_EXACT_K}; "
                          f"got K = {shape.K} (use normal or uniform)")
    if precision == "fp8" and distribution == "integers":
        raise ConfigError("inputs.distribution", "precision=fp8 scales each group by its amax / 448 (E4M3) or / 57344 "
                          "(E5M2), so integers are not exact; use normal or uniform")
    if verify.tolerance == "exact" and distribution != "integers":
        raise ConfigError("verify.tolerance", "exact needs inputs.distribution=integers (float inputs round)")
    grouped = parse_grouped(cfg.get("grouped"), shape, precision, layout_a, layout_b)
    if shape.M == 0 and (grouped is None or any(grouped.sizes)):  # parse_grouped: M is the sum of the M_g
        raise ConfigError("shape", f"M must be a positive integer, got 0 in {list(shape)} ({EMPTY_M})")
    out, epilogue = parse_epilogue(cfg.get("epilogue"), cfg.get("batch"), lds, shape, precision, layout_a, layout_b,
                                   grouped)
    if distribution == "integers" and verify.tolerance == "exact" and not exact_possible(epilogue, out, shape.K):
        raise ConfigError("verify.tolerance", "exact needs a result integer inputs keep exact in float32: "
                          "epilogue.activation none or relu, epilogue.out=float32, integer alpha and beta (and "
                          "|alpha|*16*K + 4*|beta| + 4 < 2^24); use bound (the default auto picks it)")
    return RunConfig(kernel=name, params=params, shape=shape, mode=mode,
                     arch=FIELD_RULES["arch"](cfg["arch"]), device=FIELD_RULES["device"](cfg["device"]),
                     timing=timing, verify=verify, inputs=inputs, plugin_dirs=tuple(plugin_dirs),
                     baseline=baseline, precision=precision, layout_a=layout_a, layout_b=layout_b,
                     sanitizer=sanitizer,
                     cache_enabled=cache_enabled, cache_dir=cache_dir, resume=resume, fp8=fp8, grouped=grouped,
                     out=out, epilogue=epilogue)
