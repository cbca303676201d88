"""``kernel=auto``: pick a kernel and its parameters per (precision, layout, shape).

Two sources, in this order:

1. **The tuning table** (``source: "table"``): a JSON file that ``gemmlab-tune build`` makes from
   sweep records. Each entry names, for one (precision, layout, M, N, K) on one GPU, the fastest
   valid record's kernel and parameters. An exact entry is used first (``match: "exact"``), else
   the nearest entry whose M, N, K are each within 1.5x and that falls under the same rule
   (``match: "nearest"``). The H200's table ships as package data
   (``gemmlab/data/tuning/h200.json``); ``kernel.table=<file>`` uses another.
2. **The rules** (``source: "rule"``), for shapes the table has not seen: the ordered heuristic of
   :func:`rules`, based on how many output tiles a kernel would launch against the GPU's SM count
   (``sm_count`` of the table's GPU, else the sm_90 class's 132), the reduction length K and the
   alignment the kernel's own ``check`` demands. Each rule lists candidates in preference order;
   a candidate that is not registered, or whose ``check`` rejects the shape (alignment, limits),
   is skipped and the reason kept in the record.

The chosen kernel is resolved before anything compiles (:func:`resolve_config`, called by the
pipeline), and the record gains ``dispatch``: ``{"requested": "auto", "chosen", "params",
"source", "rule" | "entry", "table", "skipped"}``. A shape no registered kernel supports is an
``invalid`` record naming every rejection, never a crash. Library kernels (cuBLAS) are never
candidates: auto is measured against them.

Table file (``schema: gemmlab.tuning/1``)::

    {"schema": "gemmlab.tuning/1",
     "device": {"name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132},
     "made_by": "gemmlab-tune build ...", "created_utc": "...", "metric": "...",
     "entries": [{"precision": "fp32", "layout": ["row", "row"], "shape": [M, N, K],
                  "kernel": "<name>", "params": {"BM": 64, ...}, "median_ms": 0.09,
                  "ratio_to_baseline": 1.21, "baseline": "<baseline>", "candidates": 5,
                  "record": "sweep/3/result.json"}, ...]}

A malformed file is one line: ``gemmlab: error: kernel.table: <file>: <rule broken>``.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as _dt
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from gemmlab.stages import record_model as results
from gemmlab.errors import ConfigError
from gemmlab.paths import DATA_DIR, not_a_regular_file
from gemmlab.contract import regimes as _regimes
from gemmlab.contract.regimes import regimes
from gemmlab.contract.hookspecs import (LAYOUTS, PRECISIONS, DeviceFacts, KernelBase, LibraryKernelSpec, ParamError,
                                        Problem, Shape)

AUTO = "auto"
TABLE_SCHEMA = "gemmlab.tuning/1"
TABLE_DIR = DATA_DIR / "tuning"
DEFAULT_TABLE = TABLE_DIR / "h200.json"
DEFAULT_SM_COUNT = 132  # the sm_90 class (H100/H200 SXM) when the table names no GPU
AUTO_KEYS = ("name", "table", "rank", "tune", "tune_k", "tune_budget_s", "tune_cache", "model")  # kernel=auto's keys
RANK_KEYS = AUTO_KEYS[2:]  # the ranking path's (gemmlab.dispatch.tuning)
PRECISION_NAMES = PRECISIONS  # the plugin contract's (gemmlab.contract.hookspecs), one source
LAYOUT_NAMES = LAYOUTS
DEFAULT_PRECISION = Problem.precision  # fp32: the contract's default problem, as the config schema's
DEFAULT_LAYOUT = (Problem.layout_a, Problem.layout_b)  # row/row (also what a record without layout stands for)
# the regimes' thresholds (gemmlab.contract.regimes, where the plugins read them too)
TINY, TINY_OUTPUT_MAX_MN, TINY_OUTPUT_MIN_K = _regimes.TINY, _regimes.TINY_OUTPUT_MAX_MN, _regimes.TINY_OUTPUT_MIN_K
PROG = "gemmlab-tune"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --- the table ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One table entry: the kernel and parameters to use for one (precision, layout, shape)."""

    precision: str
    layout: tuple[str, str]
    shape: Shape
    kernel: str
    params: Mapping[str, int]
    extra: Mapping[str, Any] = field(default_factory=dict)  # median_ms, ratio, record path, ...

    @property
    def key(self) -> tuple:
        return (self.precision, self.layout, tuple(self.shape))

    def as_json(self) -> dict:
        """The entry as stored in the table file."""
        return {"precision": self.precision, "layout": list(self.layout), "shape": list(self.shape),
                "kernel": self.kernel, "params": dict(self.params), **dict(self.extra)}


@dataclass(frozen=True)
class Table:
    """A validated tuning table. ``device`` is the GPU its records came from (may be empty)."""

    entries: tuple[Entry, ...] = ()
    device: Mapping[str, Any] = field(default_factory=dict)
    path: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    def lookup(self, shape: Shape, precision: str = DEFAULT_PRECISION,
               layout: tuple[str, str] = DEFAULT_LAYOUT) -> Entry | None:
        """The entry for exactly this (precision, layout, shape), or None."""
        key = (precision, tuple(layout), tuple(shape))
        return next((e for e in self.entries if e.key == key), None)

    @property
    def sm_count(self) -> int:
        """The SM count the rules use: the table's GPU's, else 132 (sm_90 class)."""
        n = self.device.get("sm_count") if isinstance(self.device, Mapping) else None
        return n if isinstance(n, int) and n > 0 else DEFAULT_SM_COUNT

    def as_json(self) -> dict:
        """The table as stored on disk."""
        return {"schema": TABLE_SCHEMA, "device": dict(self.device), **dict(self.meta),
                "entries": [e.as_json() for e in self.entries]}


def parse_table(data: Any, source: str = "<table>", field_name: str = "kernel.table") -> Table:
    """Validate the parsed JSON of a table file.

    Raises:
        ConfigError: ``field_name``: ``<source>: <the first rule broken>`` (one line).
    """
    def bad(what: str) -> ConfigError:
        return ConfigError(field_name, f"{source}: {what}")

    if not isinstance(data, Mapping):
        raise bad(f"must be a JSON object with schema {TABLE_SCHEMA}")
    if data.get("schema") != TABLE_SCHEMA:
        raise bad(f"schema must be {TABLE_SCHEMA!r}, got {data.get('schema')!r}")
    device = data.get("device", {})
    if not isinstance(device, Mapping):
        raise bad("device must be an object (name, arch, sm_count)")
    if "sm_count" in device and (not isinstance(device["sm_count"], int) or isinstance(device["sm_count"], bool)
                                 or device["sm_count"] < 1):
        raise bad(f"device.sm_count must be a positive integer, got {device['sm_count']!r}")
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise bad("entries must be a list")
    out, seen = [], set()
    for i, e in enumerate(entries):
        where = f"entries[{i}]"
        if not isinstance(e, Mapping):
            raise bad(f"{where} must be an object")
        for key in ("precision", "layout", "shape", "kernel", "params"):
            if key not in e:
                raise bad(f"{where} lacks {key!r} (each entry needs precision, layout, shape, kernel, params)")
        if e["precision"] not in PRECISION_NAMES:
            raise bad(f"{where}.precision must be one of {', '.join(PRECISION_NAMES)}, got {e['precision']!r}")
        lay = e["layout"]
        if not isinstance(lay, list) or len(lay) != 2 or not all(x in LAYOUT_NAMES for x in lay):
            raise bad(f"{where}.layout must be [a, b] with each row or col, got {lay!r}")
        s = e["shape"]
        if (not isinstance(s, list) or len(s) != 3
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in s)):
            raise bad(f"{where}.shape must be [M, N, K] of three positive integers, got {s!r}")
        if not isinstance(e["kernel"], str) or not e["kernel"] or e["kernel"] == AUTO:
            raise bad(f"{where}.kernel must be a kernel name (not auto), got {e['kernel']!r}")
        p = e["params"]
        if not isinstance(p, Mapping) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                                 for k, v in p.items()):
            raise bad(f"{where}.params must map parameter names to integers, got {p!r}")
        entry = Entry(precision=e["precision"], layout=(lay[0], lay[1]), shape=Shape(*s), kernel=e["kernel"],
                      params=dict(p), extra={k: v for k, v in e.items()
                                             if k not in ("precision", "layout", "shape", "kernel", "params")})
        if entry.key in seen:
            raise bad(f"{where}: a second entry for {e['precision']} {'/'.join(lay)} {s}")
        seen.add(entry.key)
        out.append(entry)
    meta = {k: v for k, v in data.items() if k not in ("schema", "device", "entries")}
    return Table(entries=tuple(out), device=dict(device), path=source, meta=meta)


def load_table(path: str | os.PathLike | None = None, field_name: str = "kernel.table") -> Table:
    """Read and validate a table file (``None``: the shipped H200 table).

    Raises:
        ConfigError: ``field_name``: missing or unreadable file, invalid JSON, or a broken rule.
    """
    p = Path(path).expanduser() if path is not None else DEFAULT_TABLE
    odd = not_a_regular_file(p)
    if odd:  # a fifo would block the reader
        raise ConfigError(field_name, f"{p}: {odd}; give a table file (JSON)")
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError(field_name, f"{p}: no such file") from None
    except OSError as exc:
        raise ConfigError(field_name, f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(field_name, f"{p}: not valid JSON: {exc}") from None
    return parse_table(data, str(p), field_name)


def shipped_tables() -> dict[str, Path]:
    """GPU name (a shipped table's ``device.name``) -> its file in :data:`TABLE_DIR`; a file that
    does not parse is left out (tests/test_dispatch.py checks the shipped ones parse)."""
    out = {}
    for f in sorted(TABLE_DIR.glob("*.json")):
        try:
            name = load_table(f).device.get("name")
        except ConfigError:
            continue
        if name:
            out[str(name)] = f
    return out


def shipped_table_for(gpu_name: str) -> tuple[Table | None, list[str]]:
    """The shipped table made on ``gpu_name`` (None: there is none) and the GPU names that have one."""
    shipped = shipped_tables()
    return (load_table(shipped[gpu_name]) if gpu_name in shipped else None), sorted(shipped)


# --- the rules ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    """One regime of a problem with its candidates: ``text`` says when it applies and why;
    ``candidates`` are ``(kernel, params, why)`` triples in the order auto tries them (params override
    the kernel's defaults), gathered from the plugins' preferences (:func:`rules`)."""

    name: str
    text: str
    candidates: tuple[tuple[str, Mapping[str, int], str], ...]
    min_blocks: int = 0  # a candidate whose launch has fewer blocks (a partial first wave) is skipped


def _facts(sms: int) -> DeviceFacts:
    """The sm_90 class's facts with ``sms`` SMs (what the rules and kernel checks see without a GPU)."""
    from gemmlab.gpu.device import offline_facts
    base = offline_facts("90")
    return DeviceFacts(name=base.name, arch=base.arch, sm_count=sms, l2_bytes=base.l2_bytes)


def rules(shape: Shape, precision: str, layout: tuple[str, str], sms: int, registry=None,
          facts: DeviceFacts | None = None, problem: Problem | None = None) -> list[Rule]:
    """The rules that apply to ``shape``, in the order auto tries them: one :class:`Rule` per regime
    of :func:`gemmlab.contract.regimes.regimes` (tiny_output, decode, tiny, k_heavy, large | medium |
    small, tensor_core: the shape's classes, documented in docs/user-guide.md, "How kernel=auto
    decides"), then ``any``.

    A regime's candidates are what the registered kernels that declare the precision and layouts
    state for it (:meth:`gemmlab.contract.hookspecs.KernelBase.preferences`: parameters sized by the
    plugin, a rank), sorted by (rank, registry order, the plugin's order). No kernel is named here: a
    drop-in plugin that states preferences takes part with no change to the core. ``any``: every
    registered kernel with its defaults, in registry order (:func:`choose` fills it in).

    Args:
        shape, precision, layout: the problem.
        sms: the GPU's SM count (the regimes' wave tests and the plugins' sizing read it).
        registry: the kernels (default: the built-in ones, entry points included).
        facts: what the plugins see (default: the sm_90 class with ``sms`` SMs).
        problem: the whole problem (issue 43: its epilogue, C type and leading dimensions) the plugins'
            preferences see, of this shape, precision and layout; default the plain one.
    """
    if registry is None:
        from gemmlab.contract.registry import load_registry
        registry = load_registry([])
    facts = facts if facts is not None else _facts(sms)
    problem = problem if problem is not None else Problem(Shape(*shape), precision, layout[0], layout[1])
    specs = [(name, spec) for name, spec in registry.kernels.items()
             if not isinstance(spec, LibraryKernelSpec) and _supports(spec, precision, tuple(layout)) is None]
    out: list[Rule] = []
    for regime in regimes(problem, sms):
        stated = []
        for order, (name, spec) in enumerate(specs):
            try:
                prefs = list(spec.preferences(problem, facts, regime.name) or ())
            except Exception as exc:  # a plugin's own method failing: it states nothing here, the others go on
                prefs = []
                stated.append((math.inf, order, 0, name, None, f"preferences() raised {type(exc).__name__}: {exc}"))
            for j, pref in enumerate(prefs):
                stated.append((float(pref.rank), order, j, name, dict(pref.params), pref.why))
        stated.sort(key=lambda t: t[:3])
        out.append(Rule(regime.name, regime.text, tuple((name, params, why) for _, _, _, name, params, why in stated),
                        regime.min_blocks))
    out.append(Rule("any", "any: the first registered kernel that supports this precision, layout and shape", ()))
    return out


# --- choosing -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    """What auto chose: kernel, full parameters, and why (``source`` "table" or "rule")."""

    kernel: str
    params: Mapping[str, int]
    source: str
    reason: str
    entry: Mapping[str, Any] | None = None
    table: str | None = None
    skipped: tuple[str, ...] = ()
    match: str | None = None  # table choices: "exact" or "nearest"

    def record(self) -> dict:
        """The record's ``dispatch`` field."""
        out = {"requested": AUTO, "chosen": self.kernel, "params": dict(self.params), "source": self.source,
               "table": self.table}
        if self.source == "table":
            out["entry"] = dict(self.entry or {})
            out["match"] = self.match
            out["reason"] = self.reason
        else:
            out["rule"] = self.reason
        out["skipped"] = list(self.skipped)
        return out


def _supports(spec, precision: str, layout: tuple[str, str]) -> str | None:
    """None if ``spec`` declares support for precision and layout, else why not."""
    precisions = tuple(getattr(spec, "precisions", KernelBase.precisions))
    if precision not in precisions:
        return f"supports {', '.join(precisions)}, not {precision}"
    layouts = tuple(tuple(x) for x in getattr(spec, "layouts", KernelBase.layouts))
    if tuple(layout) not in layouts:
        return f"supports layouts {', '.join('/'.join(x) for x in layouts)}, not {'/'.join(layout)}"
    return None


def _try(registry, name: str, params: Mapping[str, int], shape: Shape, precision: str,
         layout: tuple[str, str], facts: DeviceFacts, problem: Problem | None = None) -> tuple[dict | None, str | None]:
    """Full parameters if kernel ``name`` with ``params`` can run this problem, else (None, why);
    ``problem``: the whole problem its check sees (issue 43), default the plain one of this shape."""
    spec = registry.kernels.get(name)
    if spec is None:
        return None, f"{name}: not registered"
    if isinstance(spec, LibraryKernelSpec):
        return None, f"{name}: a library kernel (auto picks gemmlab's own kernels)"
    why = _supports(spec, precision, layout)
    if why:
        return None, f"{name}: {why}"
    unknown = sorted(set(params) - set(spec.defaults))
    if unknown:
        return None, f"{name}: has no parameter {unknown[0]}"
    full = {**dict(spec.defaults), **dict(params)}
    try:
        check_problem = getattr(spec, "check_problem", None)
        problem_cls = _problem_class()
        if check_problem is not None and problem_cls is not None:
            check_problem(problem if problem is not None else
                          problem_cls(shape=shape, precision=precision, layout_a=layout[0], layout_b=layout[1]),
                          full, facts)
        else:
            spec.check(shape, full, facts)
    except ParamError as exc:
        return None, f"{name} {_ptext(full)}: {exc}"
    return full, None


def _blocks(spec, shape: Shape, params: Mapping[str, int], precision: str, layout: tuple[str, str],
            facts: DeviceFacts) -> int | None:
    """Blocks in the kernel's launch for this problem (its ``geometry`` under contract v2, else
    ``launch``), or None when it cannot say."""
    try:
        geometry, problem_cls = getattr(spec, "geometry", None), _problem_class()
        if geometry is not None and problem_cls is not None:
            launch = geometry(problem_cls(shape=shape, precision=precision, layout_a=layout[0], layout_b=layout[1]),
                              params, facts)
        else:
            launch = spec.launch(shape, params, facts)
        return int(launch.blocks)
    except Exception:
        return None


def _problem_class():
    """The v2 contract's ``Problem`` class when this gemmlab has it (None before contract v2)."""
    from gemmlab.contract import hookspecs
    return getattr(hookspecs, "Problem", None)


def _ptext(params: Mapping[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "(no parameters)"


def ratio_text(ratio: float, baseline: str | None) -> str:
    """A table entry's ``ratio_to_baseline`` (kernel median time / baseline median time, > 1:
    slower) in words that cannot be read as a speed-up: ``ratio_text(1.369, "base")`` is
    ``"time / base 1.369 = 73.0% of base's speed"``."""
    base = baseline or "baseline"
    speed = f" = {100 / ratio:.1f}% of {base}'s speed" if ratio > 0 else ""
    return f"time / {base} {ratio:.3f}{speed}"


NEAREST_FACTOR = 1.5  # a table entry stands in for a shape whose M, N and K are each within this factor


def _regime(shape: Shape, precision: str, layout: tuple[str, str], sms: int) -> str:
    """The name of the first regime that applies to ``shape`` (:func:`gemmlab.contract.regimes.regimes`:
    decode, tiny, k_heavy, large, ...; the layout does not enter)."""
    found = regimes(Problem(Shape(*shape), precision, layout[0], layout[1]), sms)
    return found[0].name if found else "any"


def nearest_entry(table: Table, shape: Shape, precision: str = DEFAULT_PRECISION,
                  layout: tuple[str, str] = DEFAULT_LAYOUT) -> Entry | None:
    """The table entry nearest to ``shape`` (smallest sum of |log2| ratios of M, N, K) among the
    entries of the same precision and layout whose M, N and K are each within ``NEAREST_FACTOR``
    of the shape's and that fall under the same first rule (so a decode shape never borrows a
    prefill tile); None if there is none."""
    limit = math.log2(NEAREST_FACTOR)
    regime = _regime(shape, precision, layout, table.sm_count)
    best, best_d = None, math.inf
    for e in table.entries:
        if e.precision != precision or e.layout != tuple(layout):
            continue
        logs = [abs(math.log2(a / b)) for a, b in zip(e.shape, shape)]
        if max(logs) > limit or sum(logs) >= best_d:
            continue
        if _regime(e.shape, precision, layout, table.sm_count) != regime:
            continue
        best, best_d = e, sum(logs)
    return best


def choose(shape: Shape, registry, table: Table | None = None, precision: str = DEFAULT_PRECISION,
           layout: tuple[str, str] = DEFAULT_LAYOUT, facts: DeviceFacts | None = None,
           last_resort: str = "registry", problem: Problem | None = None) -> Choice:
    """Pick the kernel and parameters for one problem (pure: no GPU; reads the shipped model file
    only with ``last_resort="model"``).

    Order: the table's exact entry (when its kernel is registered and accepts the problem), the
    nearest entry (:func:`nearest_entry`), then :func:`rules`. ``facts`` is what kernel ``check`` sees (default: the sm_90 class with the
    table's SM count). ``last_resort``: how the rules' last rule (``any``) orders the kernels left:
    ``"registry"`` (each kernel's defaults in registry order: the rules as recorded in
    tests/data/auto_rules_golden.json.xz) or ``"model"`` (:func:`ranked_last_resort`: their
    candidates by the ranking model's predicted time, for a registry narrowed to the kernels that
    declare an epilogue, :func:`declaring`, whose regimes may state no candidate at all).
    ``problem``: the whole problem of this shape, precision and layout (issue 43: an epilogue, a C type,
    leading dimensions), which the plugins' preferences and checks then see; default the plain one.
    With strided batches (``problem.batch`` > 1) the rules and the plugins' sizing see one batch's
    share of the SMs, ceil(SMs / batch.count): the other batches fill the rest.

    Raises:
        ConfigError: field ``kernel``: no registered kernel supports the problem (every rejection
            named).
    """
    table = table or Table()
    sms = table.sm_count
    if facts is None:
        from gemmlab.gpu.device import offline_facts
        base = offline_facts("90")
        facts = DeviceFacts(name=base.name, arch=base.arch, sm_count=sms, l2_bytes=base.l2_bytes)
    layout = (layout[0], layout[1])
    skipped: list[str] = []
    entry = table.lookup(shape, precision, layout)
    if entry is not None:
        full, why = _try(registry, entry.kernel, entry.params, shape, precision, layout, facts, problem)
        if full is not None:
            return Choice(entry.kernel, full, "table", f"table entry {list(shape)}", entry=entry.as_json(),
                          table=table.path or None, match="exact")
        skipped.append(f"table entry: {why}")
    near = nearest_entry(table, shape, precision, layout)
    if near is not None:
        full, why = _try(registry, near.kernel, near.params, shape, precision, layout, facts, problem)
        if full is not None:
            return Choice(near.kernel, full, "table",
                          f"nearest table entry {list(near.shape)}: each of M, N, K within {NEAREST_FACTOR:g}x, "
                          f"same rule regime ({_regime(shape, precision, layout, sms)})", entry=near.as_json(),
                          table=table.path or None, skipped=tuple(skipped), match="nearest")
        skipped.append(f"nearest table entry {list(near.shape)}: {why}")
    tried: set[str] = set()
    # the plugins size for the table's GPU; with strided batches for one batch's share of its SMs (the
    # other batches fill the rest: 64 batches of 32 tiles are 15.5 waves on 132 SMs, not a quarter of one)
    batch = max(1, int(getattr(problem, "batch", 1) or 1))
    share = max(1, -(-sms // batch))
    sized = facts if facts.sm_count == share else dataclasses.replace(facts, sm_count=share)
    shared = f" (batch.count={batch}: each batch's share, {share} of {sms} SMs)" if batch > 1 else ""
    for rule in rules(shape, precision, layout, share, registry, sized, problem):
        rule_skips: list[tuple[str, str]] = []  # (candidate, why) this rule passed over
        candidates, text = rule.candidates, rule.text
        if rule.name == "any":
            candidates = tuple((name, {}, "") for name in registry.kernels)
            if last_resort == "model":
                ranked, text = ranked_last_resort(registry, problem or Problem(Shape(*shape), precision, *layout), sized,
                                                  table.device.get("name") if table.device else None)
                candidates = ranked + candidates
        for name, params, pref_why in candidates:
            full, why = ((None, f"{name}: {pref_why}") if params is None else
                         _try(registry, name, params, shape, precision, layout, facts, problem))
            blocks = (_blocks(registry.kernels[name], shape, full, precision, layout, facts)
                      if full is not None and rule.min_blocks else None)
            if blocks is not None and blocks < rule.min_blocks:
                full, why = None, f"{name} {_ptext(full)}: {blocks} blocks < {rule.min_blocks} SMs (a partial wave)"
            if full is not None:
                passed = [w for n, w in rule_skips if n != name]  # the rule's text names its first candidates
                note = f" (not taken: {passed[0]})" if passed and rule.name != "any" else ""
                told = f": {pref_why}" if pref_why else ""
                return Choice(name, full, "rule", f"{text}{shared}{told}{note} -> {name} {_ptext(full)}",
                              table=table.path or None, skipped=tuple(skipped))
            line = f"rule {rule.name}: {why}"
            if (rule.name != "any" or name not in tried) and line not in skipped:  # one line per distinct reason
                skipped.append(line)
                rule_skips.append((name, why))
            tried.add(name)
    # the layouts that some kernel of this precision does declare: the likely fix, said first
    declared = sorted({"/".join(lay) for spec in registry.kernels.values() if not isinstance(spec, LibraryKernelSpec)
                       and precision in tuple(getattr(spec, "precisions", KernelBase.precisions))
                       for lay in (tuple(x) for x in getattr(spec, "layouts", KernelBase.layouts))})
    hint = (f"; {precision} runs layouts {', '.join(declared)} (layout.a/layout.b)"
            if declared and "/".join(layout) not in declared else "")
    raise ConfigError("kernel", f"auto: no registered kernel supports {precision} {'/'.join(layout)} "
                      f"{shape.M}x{shape.N}x{shape.K}{hint} ({'; '.join(skipped[-6:])})")


def ranked_last_resort(registry, problem: Problem, facts: DeviceFacts, gpu_name: str | None = None
                       ) -> tuple[tuple[tuple[str, Mapping[str, int], str], ...], str]:
    """The last rule's candidates for a narrowed registry (issue 41): every candidate the kernels
    of ``registry`` offer for ``problem`` (:func:`gemmlab.dispatch.candidates.enumerate`), sorted by
    the ranking model's predicted time (:func:`gemmlab.dispatch.model.rank`, the fit of
    :func:`gemmlab.dispatch.model.model_for` ``gpu_name``), as ``(kernel, params, why)`` triples,
    and the rule's text naming the fit. So with an epilogue that only tiled and decode_bf16 declare
    in bf16, a 4096^3 problem gets tiled's tiles (predicted faster) and not a decode kernel that
    registry order would put first. Never raises for a plugin: a kernel whose candidates fail is
    left to the registry-order defaults that follow."""
    from gemmlab.dispatch import candidates as cands, model as mdl
    model, why = mdl.model_for(gpu_name)
    try:
        ranked = mdl.rank(cands.enumerate(registry, problem, facts), registry, problem, facts, model)
    except Exception as exc:  # a plugin's geometry failing: the registry order stands
        return (), f"any: the first registered kernel that supports this problem (ranking failed: {exc})"
    out = tuple((r.candidate.kernel, dict(r.candidate.params),
                 f"predicted {r.predicted_ms:.4g} ms ({r.fit} fit; {mdl.waves_text(r.geometry, facts.sm_count)})")
                for r in ranked)
    return out, (f"any: the remaining kernels' candidates ranked by the model's predicted time ({why}), "
                 "then each kernel's defaults in registry order")


def table_choice(problem: Problem, registry, table: Table, facts: DeviceFacts) -> Choice | None:
    """The table's exact entry, else its nearest (:func:`nearest_entry`), for ``problem`` when its
    kernel is registered and accepts the problem (as :func:`choose` takes them), else None."""
    layout = (problem.layout_a, problem.layout_b)
    for entry, match in ((table.lookup(problem.shape, problem.precision, layout), "exact"),
                         (nearest_entry(table, problem.shape, problem.precision, layout), "nearest")):
        if entry is None:
            continue
        full, _ = _try(registry, entry.kernel, entry.params, problem.shape, problem.precision, layout, facts)
        if full is not None:
            return Choice(entry.kernel, full, "table", f"{match} table entry {list(entry.shape)}",
                          entry=entry.as_json(), table=table.path or None, match=match)
    return None


def extended_problem(plain: Mapping[str, Any], shape: Shape, precision: str, layout: tuple[str, str]) -> Problem | None:
    """The whole problem of the config ``plain`` when it goes beyond C = A·B (issue 43: an epilogue, a
    C type, leading dimensions or batches), else None (also for fp8, whose C type is its own, and for
    invalid epilogue fields: validation names them)."""
    from gemmlab.stages.config import FIELD_RULES, parse_epilogue
    if precision == "fp8":
        return None
    try:
        lay = plain.get("layout") if isinstance(plain.get("layout"), Mapping) else {}
        lds = {k: FIELD_RULES[f"layout.{k}"](lay.get(k)) for k in ("lda", "ldb", "ldc")}
        out, ep = parse_epilogue(plain.get("epilogue"), plain.get("batch"), lds, shape, precision, *layout, None)
    except ConfigError:
        return None
    problem = Problem(shape, precision, layout[0], layout[1], out=out, epilogue=ep)
    return problem if problem.extended else None


def declaring(registry, plain: Mapping[str, Any], shape: Shape, precision: str, layout: tuple[str, str]):
    """``registry``, or for a problem beyond C = A·B (issue 43: an epilogue, a C type, leading
    dimensions or batches, read from the config ``plain``) a shallow copy holding only the kernels
    that declare it (:func:`gemmlab.contract.epilogue.refusal` is None): kernel=auto never chooses
    a kernel that would refuse the problem. A config whose epilogue fields are invalid keeps the
    registry (validation names the field).

    Raises:
        ConfigError: field ``kernel``: no gemmlab kernel declares the problem (each one's refusal
            of the first few named).
    """
    from gemmlab.contract.epilogue import PLAIN, refusal
    problem = extended_problem(plain, shape, precision, layout)
    if problem is None:
        return registry
    kept, refused = {}, []
    for name, spec in registry.kernels.items():
        why = refusal(getattr(spec, "epilogue", PLAIN), problem, name)
        if why is None:
            kept[name] = spec
        elif not isinstance(spec, LibraryKernelSpec):
            refused.append(why[1])
    if not any(not isinstance(spec, LibraryKernelSpec) for spec in kept.values()):
        raise ConfigError("kernel", f"auto: no registered kernel declares this problem's epilogue, output type, "
                          f"leading dimensions and batch ({'; '.join(refused[:3])})")
    narrowed = copy.copy(registry)
    narrowed.kernels = kept
    return narrowed


def resolve_config(cfg: Mapping[str, Any], registry, out_dir: str | os.PathLike | None = None,
                   runner=None) -> tuple[dict, dict | None]:
    """Turn ``kernel=auto`` in a composed config into the chosen kernel and parameters.

    Returns ``(config, dispatch)``: for any other kernel the config unchanged (as a plain dict)
    and ``None``; for auto the config with ``kernel`` replaced by ``{"name": chosen, **params}``
    and the record's ``dispatch`` field. Called by the pipeline before validation.

    With ``kernel.rank=model`` or ``kernel.tune=first_use`` the ranking path of
    :mod:`gemmlab.dispatch.tuning` chooses (the table, the per-device cache, first-use tuning of
    the model's top candidates, planned here and run by the point itself as backends of its run:
    :mod:`gemmlab.run.first_use`; the model); ``out_dir`` is the point's folder and ``runner`` the
    pipeline's ``run_point`` (either None: no first-use tuning).

    Raises:
        ConfigError: ``kernel.<key>`` other than :data:`AUTO_KEYS`; ``kernel.table`` bad file; ``shape``;
            ``kernel`` when no kernel supports the problem.
    """
    from gemmlab.stages.config import _plain, check_field, parse_shape
    plain = _plain(cfg)
    kernel = plain.get("kernel") if isinstance(plain, Mapping) else None
    if not isinstance(kernel, Mapping) or kernel.get("name") != AUTO:
        return plain, None
    extra = sorted(set(kernel) - set(AUTO_KEYS))
    if extra:
        raise ConfigError(f"kernel.{extra[0]}", "kernel=auto chooses the parameters itself; it accepts only "
                          "kernel.table=<tuning table file> and the ranking path's kernel.rank, kernel.tune, "
                          "kernel.tune_k, kernel.tune_budget_s, kernel.tune_cache, kernel.model "
                          "(pick a kernel by name to set parameters)")
    table_path = check_field("kernel.table", kernel.get("table"))  # a file name or null, never blank
    table = load_table(table_path)
    shape = parse_shape(plain.get("shape"))
    precision = plain.get("precision", DEFAULT_PRECISION)
    layout_cfg = plain.get("layout") or {}
    layout = ((layout_cfg.get("a", DEFAULT_LAYOUT[0]), layout_cfg.get("b", DEFAULT_LAYOUT[1]))
              if isinstance(layout_cfg, Mapping) else DEFAULT_LAYOUT)
    from gemmlab.dispatch import tuning
    opts = tuning.settings(kernel)
    precision = precision if isinstance(precision, str) else DEFAULT_PRECISION
    narrowed = declaring(registry, plain, shape, precision, layout)  # issue 43: only kernels that run the epilogue
    full_registry, registry = registry, narrowed
    resolved = dict(plain)
    if opts["rank"] == "model" or opts["tune"] == "first_use":
        problem = Problem(shape, precision, *layout)
        name, params, record = tuning.choose_ranked(plain, registry, problem, table, opts, out_dir, runner,
                                                    lambda facts, t: table_choice(problem, registry, t, facts),
                                                    own_table=None if table_path is not None else shipped_table_for)
        resolved["kernel"] = {"name": name, **params}
        return resolved, record
    whole = extended_problem(plain, shape, precision, layout)  # issue 43: the plugins see the epilogue
    try:  # with an epilogue: the plain choice where its kernel declares it (issue 43)
        choice = choose(shape, full_registry, table, precision, layout, problem=whole)
    except ConfigError:
        if registry is full_registry:
            raise
        choice = None
    if choice is None or choice.kernel not in registry.kernels:  # else the rules on the kernels left, whose
        choice = choose(shape, registry, table, precision, layout, last_resort="model",  # last rule ranks (issue 41)
                        problem=whole)
    resolved["kernel"] = {"name": choice.kernel, **dict(choice.params)}
    return resolved, choice.record()


# --- building a table from records ----------------------------------------------------------------

def find_records(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Every ``result.json`` under the given files or folders (:func:`gemmlab.stages.record_model.find_records`;
    a record inside another run's folder, e.g. a sanitizer child's, belongs to that run and is
    left out).

    Raises:
        ConfigError: field ``paths``: a path that does not exist or holds no records (a device, a
            fifo), in find_records' words (``<path>: <why>``).
    """
    try:
        return results.find_records(list(paths), children=False)
    except FileNotFoundError as exc:
        raise ConfigError("paths", str(exc)) from None


def _layout_of(rec: Mapping[str, Any]) -> tuple[str, str]:
    lay = rec.get("layout")
    if not isinstance(lay, Mapping):
        cfg = rec.get("config") if isinstance(rec.get("config"), Mapping) else {}
        lay = cfg.get("layout") if isinstance(cfg.get("layout"), Mapping) else {}
    return (lay.get("a", DEFAULT_LAYOUT[0]), lay.get("b", DEFAULT_LAYOUT[1]))


def build_table(paths: Iterable[str | os.PathLike], device: str | None = None,
                records_dir: str | os.PathLike | None = None) -> tuple[Table, dict]:
    """Build a tuning table from the records under ``paths`` (folders, record files, record
    archives or folders inside one: :mod:`gemmlab.stages.archive`).

    Per (precision, layout, shape) the fastest **valid, timed** record of an NVRTC kernel wins
    (library kernels and failed points never enter). "Fastest" is the smallest kernel/baseline
    time ratio when every candidate of that problem was timed against the same baseline in its
    own run (ratios measured in one process are robust to drift between runs), else the smallest
    median time. Records from several GPUs need ``device`` (a name) to pick one.

    ``records_dir``: each entry's ``record`` is written relative to it and the table's meta names
    it (``records_dir``, as given), so a table shipped with its records (e.g. under docs/results)
    points at them wherever the build ran; without it the paths are as found. ``records_dir`` may be
    an archive: each ``record`` is then a member's path inside it (``records_dir/record`` is read as
    a path through the archive, as the shipped table's ``docs/results/shapes-h200.jsonl.xz``).

    Returns:
        ``(table, stats)``: stats counts records read, used and skipped (by reason).

    Raises:
        ConfigError: field ``paths`` (missing path, no usable record), ``device`` (mixed GPUs),
            ``records_dir`` (a record outside it).
    """
    files = find_records(paths)
    stats = {"records": len(files), "used": 0, "skipped": {}}

    def skip(why: str) -> None:
        stats["skipped"][why] = stats["skipped"].get(why, 0) + 1

    groups: dict[tuple, list[dict]] = {}
    devices: dict[str, dict] = {}
    for f in files:
        rec = results.read_record(f)  # the one record model (gemmlab.stages.record_model)
        raw = rec.raw if isinstance(rec.raw, dict) else None
        if raw is None:
            skip("unreadable")
            continue
        if not rec.is_valid or rec.status != "ok":
            skip("not a valid timed record")
            continue
        kern = raw.get("kernel")
        if (not isinstance(kern, Mapping) or rec.kernel is None or rec.shape is None or rec.shape_from != "shape"
                or rec.median_ms is None):
            skip("no kernel, shape or timing")
            continue
        if kern.get("backend") != "nvrtc":
            skip("library kernel")
            continue
        dname = rec.device or "unknown"
        if device is not None and dname != device:
            skip(f"other device ({dname})")
            continue
        dev = raw.get("device") if isinstance(raw.get("device"), Mapping) else {}
        devices.setdefault(dname, {"name": dname, "arch": rec.arch, "sm_count": dev.get("sm_count")})
        key = (rec.precision if rec.precision in PRECISION_NAMES else DEFAULT_PRECISION, _layout_of(raw), rec.shape)
        has_ratio = rec.ratio_to_baseline is not None
        groups.setdefault(key, []).append({
            "kernel": rec.kernel, "params": dict(rec.params), "median_ms": rec.median_ms, "protocol": rec.protocol,
            "ratio_to_baseline": rec.ratio_to_baseline, "baseline": rec.baseline if has_ratio else None,
            "record": _record_path(f, records_dir)})
        stats["used"] += 1
    if len(devices) > 1:
        raise ConfigError("device", f"records from several GPUs ({', '.join(sorted(devices))}); pass --device NAME")
    if not groups:
        raise ConfigError("paths", f"no valid timed record of an NVRTC kernel among {len(files)} result.json file(s)")
    entries = []
    for (precision, layout, shape), cands in sorted(groups.items()):
        same_base = (all(c["ratio_to_baseline"] is not None for c in cands)
                     and len({c["baseline"] for c in cands}) == 1)
        metric = "ratio_to_baseline" if same_base else "median_ms"
        best = min(cands, key=lambda c: (c[metric], c["median_ms"]))
        extra = {"median_ms": best["median_ms"], "ratio_to_baseline": best["ratio_to_baseline"],
                 "baseline": best["baseline"], "ranked_by": metric, "candidates": len(cands),
                 "protocol": best["protocol"], "record": best["record"]}
        entries.append(Entry(precision, layout, Shape(*shape), best["kernel"], best["params"], extra))
    dev = next(iter(devices.values()))
    meta = {"created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "made_by": f"{PROG} build " + " ".join(str(p) for p in paths),
            "rule": "per (precision, layout, shape): the fastest valid timed record of an NVRTC kernel "
                    "(smallest kernel/baseline time ratio when all share a baseline, else smallest median)"}
    if records_dir is not None:
        meta["records_dir"] = str(records_dir)
    return Table(entries=tuple(entries), device=dev, meta=meta), stats


def _record_path(path: str | os.PathLike, records_dir: str | os.PathLike | None) -> str:
    """``path`` as a table entry's ``record``: relative to ``records_dir`` when given (POSIX
    separators), else as found. Raises ConfigError (field ``records_dir``) for a record outside it."""
    if records_dir is None:
        return str(path)
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(records_dir)).as_posix()
    except ValueError:
        raise ConfigError("records_dir", f"{path} is not under {records_dir}") from None
