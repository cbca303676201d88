"""Declared parameter spaces of kernels (issue 41, item 1): what a kernel may be tuned over.

A kernel spec's ``space`` (:attr:`gemmlab.contract.hookspecs.KernelBase.space`) declares, for each
tunable parameter, its domain as a typed value, plus restrictions: named predicates over the whole
parameter dict (the spirit of Kernel Tuner's ``tune_params`` + ``restrictions`` and of CUTLASS's
typed tile descriptions)::

    from gemmlab.contract.space import Choice, PowerOfTwo, Range, Restriction, Space

    SPACE = Space(
        params={"BM": PowerOfTwo(32, 256), "BN": Choice((64, 128, 256)), "STAGES": Range(2, 6)},
        restrictions=(Restriction("tile_area", lambda p: p["BM"] * p["BN"] <= 128 * 256,
                                  "at most 128x256 outputs per block (register budget)", over=("BM", "BN")),))

Parameters of ``defaults`` that the space does not name are fixed at their defaults. Values are
ints (tile sizes in elements, counts, codes), like every kernel parameter. A restriction sees the
full parameter dict (the declared parameters and the fixed ones) and returns true where the
combination is allowed; rules that depend on the problem (shape, precision, layouts) or the device
(shared-memory limit, SM count) stay in the kernel's ``check_problem``, which enumeration runs on
every combination the restrictions let through.

What the space is not: the values a user may pass as ``kernel.P=...`` are still those of the core's
rule (an int 1..4096, or one of ``param_values``) and the kernel's check. The space is what the
core enumerates and offers as candidates (``gemmlab.dispatch.candidates``), e.g. a diagnostic code
(``wgmma_bf16``'s ``EPI=3``) is accepted on the command line but left out of the space.

The core checks a declaration when the plugin is loaded (:func:`space_problem`, called by
:func:`gemmlab.contract.registry.check_declaration`): an unknown parameter name, a value outside the
core's rule or the kernel's ``param_values``, a default outside its declared domain, a restriction
that is not callable, names an unknown parameter, raises, or refuses the defaults: each one line
naming the plugin, the kernel and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Iterator, Mapping, Union

#: the core's range for a kernel parameter that ``param_values`` does not list (``gemmlab.stages.config``)
PARAM_MIN, PARAM_MAX = 1, 4096


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Choice:
    """A parameter that takes one of a few listed values (sizes or codes), tried in the order given.

    Attributes:
        values: a non-empty tuple of distinct ints, e.g. ``Choice((64, 128, 256))``.

    Raises:
        ValueError: ``values`` empty, not ints, or repeated (at construction).
    """

    values: tuple[int, ...]

    def __post_init__(self):
        values = tuple(self.values) if isinstance(self.values, (tuple, list)) else self.values
        if not isinstance(values, tuple) or not values or not all(_is_int(v) for v in values):
            raise ValueError(f"Choice(values={self.values!r}): values must be a non-empty tuple of ints")
        if len(set(values)) != len(values):
            raise ValueError(f"Choice(values={self.values!r}): each value once")
        object.__setattr__(self, "values", values)

    def domain(self) -> tuple[int, ...]:
        """Every value, in the declared order."""
        return self.values

    def describe(self) -> str:
        """Short text, e.g. ``64|128|256``."""
        return "|".join(map(str, self.values))


@dataclass(frozen=True)
class PowerOfTwo:
    """A power of two from ``lo`` to ``hi`` inclusive (both powers of two, 1 <= lo <= hi), tried in
    increasing order, e.g. ``PowerOfTwo(16, 256)``: 16, 32, 64, 128, 256.

    Raises:
        ValueError: bounds not ints, not powers of two, or ``lo > hi`` (at construction).
    """

    lo: int
    hi: int

    def __post_init__(self):
        ok = all(_is_int(v) and v >= 1 and v & (v - 1) == 0 for v in (self.lo, self.hi))
        if not ok or self.lo > self.hi:
            raise ValueError(f"PowerOfTwo(lo={self.lo!r}, hi={self.hi!r}): lo and hi must be powers of two, 1 <= lo <= hi")

    def domain(self) -> tuple[int, ...]:
        out, v = [], self.lo
        while v <= self.hi:
            out.append(v)
            v *= 2
        return tuple(out)

    def describe(self) -> str:
        return f"2^k in {self.lo}..{self.hi}"


@dataclass(frozen=True)
class Range:
    """Integers ``lo, lo + step, ...`` up to ``hi`` inclusive (``hi`` itself only when on the step),
    tried in increasing order, e.g. ``Range(2, 8)`` (stages) or ``Range(4, 16, 4)``.

    Raises:
        ValueError: bounds not ints, ``lo > hi`` or ``step < 1`` (at construction).
    """

    lo: int
    hi: int
    step: int = 1

    def __post_init__(self):
        if not all(_is_int(v) for v in (self.lo, self.hi, self.step)) or self.lo > self.hi or self.step < 1:
            raise ValueError(f"Range(lo={self.lo!r}, hi={self.hi!r}, step={self.step!r}): need ints with lo <= hi "
                             "and step >= 1")

    def domain(self) -> tuple[int, ...]:
        return tuple(range(self.lo, self.hi + 1, self.step))

    def describe(self) -> str:
        return f"{self.lo}..{self.hi}" + (f" step {self.step}" if self.step != 1 else "")


#: a parameter's declared domain
ParamDecl = Union[Choice, PowerOfTwo, Range]
PARAM_DECLS = (Choice, PowerOfTwo, Range)


@dataclass(frozen=True)
class Restriction:
    """A rule every enumerated combination must satisfy: ``predicate(params)`` is true where the
    combination is allowed (``params``: the full parameter dict, ints by name).

    Attributes:
        name: a short identifier (``[a-z][a-z0-9_]*`` by convention), unique in its space, shown
            in listings and in the one-line error when the defaults break it.
        predicate: callable taking the parameter dict, returning a bool.
        why: one line saying what the rule protects (ownership, register budget, ...).
        over: the parameters the predicate reads. Enumeration checks it as soon as these are
            assigned (pruning the rest of the search); empty: checked on complete combinations only.
    """

    name: str
    predicate: Callable[[Mapping[str, int]], bool]
    why: str = ""
    over: tuple[str, ...] = ()

    def holds(self, params: Mapping[str, int]) -> bool:
        """Whether ``params`` satisfy this restriction (exceptions propagate)."""
        return bool(self.predicate(params))


@dataclass(frozen=True)
class Space:
    """A kernel's tunable parameters and the restrictions on their combinations.

    Attributes:
        params: ``{name: Choice | PowerOfTwo | Range}``; parameters of the kernel's ``defaults`` not
            named here are fixed at their defaults.
        restrictions: :class:`Restriction` objects, all of which an enumerated combination satisfies.
    """

    params: Mapping[str, ParamDecl] = field(default_factory=dict)
    restrictions: tuple[Restriction, ...] = ()

    def __post_init__(self):
        if isinstance(self.params, Mapping):
            object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        if isinstance(self.restrictions, list):
            object.__setattr__(self, "restrictions", tuple(self.restrictions))

    def size(self) -> int:
        """Combinations before restrictions (the product of the domains' sizes)."""
        n = 1
        for decl in self.params.values():
            n *= len(decl.domain())
        return n

    def contains(self, params: Mapping[str, int]) -> bool:
        """Whether ``params`` lie in every declared domain and pass every restriction."""
        return not self.violations(params)

    def violations(self, params: Mapping[str, int]) -> list[str]:
        """What ``params`` break: ``"BM=96 not in 64|128"`` per domain, ``"restriction <name>: <why>"``
        per restriction (one that raises counts as broken)."""
        out = [f"{k}={params.get(k)!r} not in {d.describe()}" for k, d in self.params.items()
               if params.get(k) not in d.domain()]
        for r in self.restrictions:
            try:
                ok = r.holds(params)
            except Exception as exc:  # a predicate that cannot judge these params refuses them
                ok, r_why = False, f"{type(exc).__name__}: {exc}"
            else:
                r_why = r.why
            if not ok:
                out.append(f"restriction {r.name}" + (f": {r_why}" if r_why else ""))
        return out

    def points(self, base: Mapping[str, int]) -> Iterator[dict[str, int]]:
        """Every combination that passes the restrictions, as full parameter dicts: ``base`` (the
        kernel's defaults) with the declared parameters set, in declared order (the first declared
        parameter varies slowest, values in each domain's order). A restriction is checked as soon
        as every parameter in its ``over`` is set (the search below is pruned); the others, and one
        that raises on a partial dict, on complete combinations."""
        names = list(self.params)
        domains = [self.params[n].domain() for n in names]
        fixed = {k: v for k, v in base.items() if k not in self.params}
        early: dict[int, list[Restriction]] = {}
        late: list[Restriction] = []
        for r in self.restrictions:
            over = tuple(r.over)
            if over and all(o in fixed or o in self.params for o in over):
                level = max((names.index(o) for o in over if o in self.params), default=-1)
                early.setdefault(level, []).append(r)
            else:
                late.append(r)
        current = dict(fixed)

        def ok(rs) -> bool:
            for r in rs:
                try:
                    if not r.holds(current):
                        return False
                except KeyError:  # ``over`` understated: judged again on the complete combination
                    continue
                except Exception:
                    return False
            return True

        if not ok(early.get(-1, ())):
            return

        def walk(i: int) -> Iterator[dict[str, int]]:
            if i == len(names):
                if ok(late) and ok(r for rs in early.values() for r in rs):
                    out = {k: current[k] for k in base}
                    out.update({k: current[k] for k in names if k not in base})
                    yield out
                return
            for v in domains[i]:
                current[names[i]] = v
                if ok(early.get(i, ())):
                    yield from walk(i + 1)
            current.pop(names[i], None)

        yield from walk(0)

    def describe(self, defaults: Mapping[str, int] | None = None) -> list[str]:
        """Lines for a listing: each parameter's domain (``*`` marks the default), the fixed ones,
        then each restriction with its ``why``."""
        defaults = dict(defaults or {})
        out = []
        for k, d in self.params.items():
            out.append(f"{k}: {d.describe()}" + (f" (default {defaults[k]})" if k in defaults else ""))
        fixed = {k: v for k, v in defaults.items() if k not in self.params}
        if fixed:
            out.append("fixed: " + " ".join(f"{k}={v}" for k, v in fixed.items()))
        for r in self.restrictions:
            out.append(f"restriction {r.name}" + (f": {r.why}" if r.why else ""))
        return out


def derived_space(defaults: Mapping[str, int], param_values: Mapping[str, tuple[int, ...]] | None = None) -> Space:
    """The space of a kernel that declares none: each parameter listed in ``param_values`` a
    :class:`Choice` of those values (in their order), the others fixed at their defaults; no
    restrictions (the kernel's ``check_problem`` judges each combination). Every existing and
    drop-in plugin thus has a space without declaring one."""
    params = {}
    for k, values in (param_values or {}).items():
        if (k in defaults and isinstance(values, (tuple, list)) and values and all(_is_int(v) for v in values)
                and len(set(values)) == len(values)):
            params[k] = Choice(tuple(values))
    return Space(params)


def distance(params: Mapping[str, int], defaults: Mapping[str, int]) -> int:
    """How many parameters of ``params`` differ from ``defaults`` (the enumeration order: the
    defaults first, then one change away, ...)."""
    return sum(1 for k, v in params.items() if defaults.get(k) != v)


def ordered_points(space: Space, defaults: Mapping[str, int]) -> list[dict[str, int]]:
    """:meth:`Space.points` sorted by :func:`distance` from ``defaults`` (stable: ties keep the
    declared order), so a capped enumeration keeps the defaults and their nearest variants."""
    pts = list(space.points(defaults))
    return [p for _, _, p in sorted((distance(p, defaults), i, p) for i, p in enumerate(pts))]


def space_problem(space, defaults: Mapping[str, int], param_values: Mapping[str, tuple[int, ...]] | None = None
                  ) -> tuple[str, str] | None:
    """Why ``space`` is not a valid declaration for a kernel with these ``defaults`` and
    ``param_values``: ``(field, reason)`` (field e.g. ``space.params['BM']``), or None when it is.

    Rules: a :class:`Space`; each parameter name one of ``defaults``; each domain a
    :class:`Choice`, :class:`PowerOfTwo` or :class:`Range`, every value within the core's rule for
    that parameter (one of ``param_values`` where the kernel lists values, else an int
    1..4096); each default inside its declared domain; each restriction a :class:`Restriction`
    with a unique name, a callable predicate, ``over`` naming parameters of ``defaults``; the
    defaults pass every restriction (a predicate that raises on them is a mistake too).
    """
    if not isinstance(space, Space):
        return "space", (f"it must be a gemmlab.contract.space.Space (or None: derived from defaults and "
                         f"param_values), got {type(space).__name__}")
    if not isinstance(space.params, Mapping):
        return "space.params", "it must be a dict {parameter name: Choice | PowerOfTwo | Range}"
    listed = dict(param_values or {})
    for name, decl in space.params.items():
        where = f"space.params[{name!r}]"
        if name not in defaults:
            known = ", ".join(defaults) or "none"
            return where, f"the kernel has no parameter {name!r} (its defaults name: {known})"
        if not isinstance(decl, PARAM_DECLS):
            return where, f"{decl!r} is not a Choice, PowerOfTwo or Range"
        values = decl.domain()
        allowed = listed.get(name)
        for v in values:
            if allowed and v not in allowed:
                return where, (f"{decl.describe()} includes {v}, which the kernel's param_values do not list "
                               f"({', '.join(map(str, allowed))})")
            if not allowed and not PARAM_MIN <= v <= PARAM_MAX:
                return where, f"{decl.describe()} includes {v}; a parameter value must be an int {PARAM_MIN}..{PARAM_MAX}"
        if defaults[name] not in values:
            return where, f"the default {name}={defaults[name]!r} is outside its declared domain {decl.describe()}"
    if not isinstance(space.restrictions, tuple):
        return "space.restrictions", "it must be a tuple of Restriction"
    seen = set()
    for i, r in enumerate(space.restrictions):
        where = f"space.restrictions[{i}]"
        if not isinstance(r, Restriction):
            return where, f"{r!r} is not a gemmlab.contract.space.Restriction(name, predicate, why, over)"
        where = f"space.restrictions[{r.name!r}]"
        if not isinstance(r.name, str) or not r.name:
            return f"space.restrictions[{i}]", "a restriction needs a name (a short identifier)"
        if r.name in seen:
            return where, "restriction names must be unique in a space"
        seen.add(r.name)
        if not callable(r.predicate):
            return where, f"predicate {r.predicate!r} is not callable; give a function of the parameter dict"
        if isinstance(r.over, str) or not isinstance(r.over, (tuple, list)):
            return where, f"over={r.over!r} must be a tuple of parameter names"
        for o in r.over:
            if o not in defaults:
                return where, f"over names {o!r}, not a parameter of the kernel ({', '.join(defaults) or 'none'})"
        try:
            ok = r.holds(dict(defaults))
        except Exception as exc:
            return where, f"the predicate raised {type(exc).__name__}: {exc} on the defaults"
        if not ok:
            return where, "the kernel's defaults break it" + (f" ({r.why})" if r.why else "")
    return None



def config_params(config, options: tuple[str, ...] = ("num_warps", "num_stages", "num_ctas", "maxnreg")) -> dict[str, int]:
    """One autotune config as a gemmlab parameter dict: a ``triton.Config`` (read by its attributes
    ``kwargs``, ``num_warps``, ``num_stages``, ``num_ctas``, ``maxnreg``; Triton is not imported)
    or a mapping of the same names. Booleans become 0/1; an option left at None is left out.

    Raises:
        ValueError: a value that is not an int (or bool), a ``pre_hook`` or ``ir_override`` set
            (gemmlab runs no hook around a launch and compiles from source), or not a config at all.
    """
    if isinstance(config, Mapping):
        raw = dict(config)
    elif isinstance(getattr(config, "kwargs", None), Mapping):
        for hook in ("pre_hook", "ir_override"):
            if getattr(config, hook, None) is not None:
                raise ValueError(f"its {hook} is set; gemmlab owns the buffers and compiles the function itself, "
                                 f"so it runs no {hook}: leave it out")
        raw = dict(config.kwargs)
        for name in options:
            value = getattr(config, name, None)
            if value is not None:
                raw[name] = value
    else:
        raise ValueError(f"{config!r} is neither a triton.Config nor a dict of parameters")
    out = {}
    for name, value in raw.items():
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(name, str) or not _is_int(value):
            raise ValueError(f"{name}={value!r}: gemmlab parameters are ints (tile sizes, counts, codes; bools as 0/1)")
        out[name] = value
    return out


def configs_space(configs, options: tuple[str, ...] = ("num_warps", "num_stages", "num_ctas", "maxnreg")
                  ) -> tuple[dict[str, int], Space, dict[str, tuple[int, ...]]]:
    """Triton's autotune configs (the list ``@triton.autotune(configs=...)`` takes) as a declared
    space (issue 46, item 3): ``(defaults, space, param_values)``.

    - ``defaults``: the first config's parameters.
    - ``space``: each parameter a :class:`Choice` of the values the configs give it (first use
      first), and the restriction ``autotune_configs``: exactly the listed combinations, so the
      space's points are the configs (duplicates once), in the product's order.
    - ``param_values``: for a parameter with a value outside the core's rule (an int 1..4096, e.g. a
      flag 0/1), the values the configs use (the kernel's ``param_values`` entry).

    Raises:
        ValueError: ``configs`` empty or not a sequence, a config :func:`config_params` refuses, or
            configs that name different parameters (the message names the config's index).
    """
    if isinstance(configs, (str, bytes)) or not isinstance(configs, (tuple, list)) or not configs:
        raise ValueError("configs must be a non-empty list of triton.Config (or dicts of parameters)")
    rows = []
    for i, config in enumerate(configs):
        try:
            rows.append(config_params(config, options))
        except ValueError as exc:
            raise ValueError(f"configs[{i}]: {exc}") from None
    names = list(rows[0])
    for i, row in enumerate(rows[1:], 1):
        if set(row) != set(names):
            diff = sorted(set(row) ^ set(names))
            raise ValueError(f"configs[{i}] names {', '.join(sorted(row))}, configs[0] {', '.join(names)}: every config "
                             f"must set the same parameters (differ in {', '.join(diff)})")
    domains: dict[str, list[int]] = {n: [] for n in names}
    for row in rows:
        for n in names:
            if row[n] not in domains[n]:
                domains[n].append(row[n])
    listed = frozenset(tuple(row[n] for n in names) for row in rows)
    space = Space({n: Choice(tuple(v)) for n, v in domains.items()},
                  (Restriction("autotune_configs", lambda p, names=tuple(names), listed=listed:
                               tuple(p[n] for n in names) in listed,
                               f"one of the {len(listed)} configs the plugin lists (Triton's autotune configs)",
                               over=tuple(names)),))
    values = {n: tuple(sorted(v)) for n, v in domains.items() if any(not PARAM_MIN <= x <= PARAM_MAX for x in v)}
    return dict(rows[0]), space, values
