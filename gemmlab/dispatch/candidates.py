"""Candidates from the kernels' declared spaces (issue 41, item 1): which (kernel, parameters) the
registered plugins offer for one problem, checked and named by the core.

Every kernel has a parameter space (:attr:`gemmlab.contract.hookspecs.KernelBase.space`: declared
with typed domains and restrictions, or derived from ``defaults`` and ``param_values``) and a
``candidates(problem, device)`` method (default: the space's points that pass the restrictions and
the kernel's ``check_problem``, the defaults first; a plugin may override it with a shortlist for
the problem). :func:`enumerate` asks every registered kernel that supports the problem's precision
and layouts, checks each offered dict as the core checks a config (known parameters, ints in the
core's rule or ``param_values``, ``check_problem``), drops duplicates and the ones that fail (each
with its reason in ``rejected``), and returns :class:`Candidate` objects with stable names
(:func:`candidate_name`: ``wgmma_bf16[BM=128,BN=256,STAGES=4,...]``, every parameter in the order
of the kernel's ``defaults``). No kernel is named here: a drop-in plugin that declares a space
takes part with no change to the core.

``python -m gemmlab.dispatch.candidates --list`` prints each kernel's declared space;
``python -m gemmlab.dispatch.candidates M N K [--precision P] [--layout a,b]`` the candidates for a
problem (no GPU needed: the sm_90 class's facts). ``kernel=auto`` reads this with ``kernel.rank=model``
(:mod:`gemmlab.dispatch.tuning`, opt-in; its default is the rules of :mod:`gemmlab.dispatch.auto`); ``gemmlab-tune sweep`` measures the candidates of kernels
from plugins other than the built-in ones (:func:`gemmlab.dispatch.suite_candidates.candidates`).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

from gemmlab.contract.hookspecs import (CANDIDATE_LIMIT, DeviceFacts, KernelBase, LibraryKernelSpec, ParamError, Problem,
                                        TritonKernelSpec,
                                        Shape)
from gemmlab.contract.space import PARAM_MAX, PARAM_MIN

#: where a candidate came from: the kernel's space through the default ``candidates`` method
#: ("declared"), or the plugin's own ``candidates`` override ("offered")
SOURCES = ("declared", "offered")


def candidate_name(kernel: str, params: Mapping[str, int]) -> str:
    """The stable name of a candidate: ``kernel[P1=v1,P2=v2,...]`` with every parameter, in the
    order given (the kernel's ``defaults`` order in :class:`Candidate`); ``kernel[]`` without any."""
    return f"{kernel}[{','.join(f'{k}={v}' for k, v in params.items())}]"


NAME_RULE = re.compile(r"([a-z][a-z0-9_]*)\[((?:[A-Za-z_][A-Za-z0-9_-]*=-?\d+)(?:,[A-Za-z_][A-Za-z0-9_-]*=-?\d+)*)?\]")


def parse_name(name: str) -> tuple[str, dict[str, int]]:
    """The inverse of :func:`candidate_name`: ``(kernel, params)``.

    Raises:
        ValueError: ``name`` is not of the form ``kernel[P=v,...]``.
    """
    m = NAME_RULE.fullmatch(name.strip())
    if not m:
        raise ValueError(f"{name!r} is not a candidate name kernel[P=v,...]")
    params = {}
    for part in filter(None, (m.group(2) or "").split(",")):
        k, v = part.split("=")
        params[k] = int(v)
    return m.group(1), params


@dataclass(frozen=True)
class Candidate:
    """One (kernel, full parameters) pair a plugin offers for a problem.

    Attributes:
        kernel: the kernel's registered name.
        params: every parameter of the kernel (ints), in its ``defaults`` order (read-only).
        source: ``"declared"`` (the kernel's space, default ``candidates``) or ``"offered"`` (the
            plugin's own ``candidates``).
    """

    kernel: str
    params: Mapping[str, int]
    source: str = "declared"

    def __post_init__(self):
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @property
    def name(self) -> str:
        """:func:`candidate_name` of this candidate."""
        return candidate_name(self.kernel, self.params)

    def as_dict(self) -> dict:
        """Plain data for a record or JSON: kernel, params, source, name."""
        return {"kernel": self.kernel, "params": dict(self.params), "source": self.source, "name": self.name}


@dataclass(frozen=True)
class Rejected:
    """A kernel or an offered parameter dict :func:`enumerate` left out, and why (one line)."""

    kernel: str
    why: str
    params: Mapping[str, int] | None = field(default=None)


def supports(spec: KernelBase, problem: Problem) -> str | None:
    """None if ``spec`` declares the problem's precision and (layout.a, layout.b), else why not."""
    if problem.precision not in tuple(spec.precisions):
        return f"supports {', '.join(spec.precisions)}, not {problem.precision}"
    layouts = tuple(tuple(x) for x in spec.layouts)
    if (problem.layout_a, problem.layout_b) not in layouts:
        return f"supports layouts {', '.join('/'.join(x) for x in layouts)}, not {problem.layout_a}/{problem.layout_b}"
    return None


def value_problem(spec: KernelBase, key: str, value) -> str | None:
    """Why ``value`` is not a value the core takes for parameter ``key`` of ``spec`` (one of
    ``param_values`` where the kernel lists them, else an int 1..4096), or None."""
    if not isinstance(value, int) or isinstance(value, bool):
        return f"{key}={value!r} is not an int"
    listed = (spec.param_values or {}).get(key)
    if listed:
        return None if value in listed else f"{key}={value} is not one of {', '.join(map(str, listed))}"
    return None if PARAM_MIN <= value <= PARAM_MAX else f"{key}={value} is outside {PARAM_MIN}..{PARAM_MAX}"


def overrides_candidates(spec: KernelBase) -> bool:
    """Whether the plugin offers its own ``candidates`` (not the default enumeration of its space)."""
    return getattr(type(spec), "candidates", None) is not KernelBase.candidates


def _ptext(params: Mapping[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "(no parameters)"


def kernel_candidates(spec: KernelBase, problem: Problem, device: DeviceFacts, limit: int = CANDIDATE_LIMIT,
                      rejected: list | None = None) -> list[Candidate]:
    """The checked candidates of one kernel for ``problem`` (see :func:`enumerate`)."""
    rejected = rejected if rejected is not None else []
    source = "offered" if overrides_candidates(spec) else "declared"
    try:
        offered = spec.candidates(problem, device)
        offered = list(offered or [])
    except Exception as exc:  # a plugin's own method failing: say so, fall back to its declared space
        rejected.append(Rejected(spec.name, f"candidates() raised {type(exc).__name__}: {exc}; its declared space "
                                            "is enumerated instead"))
        offered, source = KernelBase.candidates(spec, problem, device), "declared"
    out: list[Candidate] = []
    seen = set()
    for params in offered:
        if not isinstance(params, Mapping):
            rejected.append(Rejected(spec.name, f"candidates() returned {type(params).__name__}, not a dict of parameters"))
            continue
        unknown = [k for k in params if k not in spec.defaults]
        if unknown:
            rejected.append(Rejected(spec.name, f"has no parameter {unknown[0]} (its parameters: "
                                                f"{', '.join(spec.defaults) or 'none'})", dict(params)))
            continue
        full = {k: params.get(k, v) for k, v in spec.defaults.items()}
        bad = next((w for w in (value_problem(spec, k, v) for k, v in full.items()) if w), None)
        if bad:
            rejected.append(Rejected(spec.name, bad, full))
            continue
        key = tuple(full.items())
        if key in seen:
            continue
        if source == "offered":  # the default method has checked its own points
            try:
                spec.check_problem(problem, full, device)
            except ParamError as exc:
                rejected.append(Rejected(spec.name, f"{_ptext(full)}: {exc}", full))
                continue
            except Exception as exc:
                rejected.append(Rejected(spec.name, f"{_ptext(full)}: check_problem raised {type(exc).__name__}: {exc}",
                                         full))
                continue
        seen.add(key)
        out.append(Candidate(spec.name, full, source))
        if len(out) >= limit:
            break
    return out


def enumerate(registry, problem: Problem, device: DeviceFacts, *, kernels: Iterable[str] | None = None,
              limit: int = CANDIDATE_LIMIT, library: bool = False, rejected: list | None = None,
              triton: bool | None = None) -> list[Candidate]:
    """Every candidate the registered kernels offer for ``problem`` on ``device``, kernel by kernel
    in the registry's order, each kernel's in its own order (best guesses first), at most
    ``limit`` per kernel.

    Args:
        registry: a :class:`gemmlab.contract.registry.Registry` (or anything with ``kernels``).
        problem: shape, precision, layouts.
        device: the target's facts (``gemmlab.gpu.device.offline_facts("90")`` without a GPU).
        kernels: only these kernel names (default: all registered).
        limit: per kernel.
        library: include library kernels (cuBLAS; default False: kernel=auto chooses only
            gemmlab's own kernels).
        triton: include Triton kernels (:class:`TritonKernelSpec`); default None: when Triton can be
            imported here (the optional extra ``gemmlab[triton]``; issue 46 item 3), else each is
            left out with the reason in ``rejected``.
        rejected: a list to which each kernel or offered dict left out is appended as
            :class:`Rejected` (unsupported precision or layout, unknown parameter, a value outside
            the core's rule, ``check_problem`` refusing it, ``candidates()`` raising).

    Returns:
        :class:`Candidate` objects, no two alike.
    """
    rejected = rejected if rejected is not None else []
    wanted = None if kernels is None else set(kernels)
    out: list[Candidate] = []
    no_triton = None
    for name, spec in registry.kernels.items():
        if wanted is not None and name not in wanted:
            continue
        if isinstance(spec, LibraryKernelSpec) and not library:
            continue
        if isinstance(spec, TritonKernelSpec):
            if triton is None and no_triton is None:
                from gemmlab.gpu.triton_compile import unavailable
                no_triton = unavailable() or ""
            if triton is False:
                continue
            if triton is None and no_triton:
                rejected.append(Rejected(name, f"a Triton kernel: {no_triton}"))
                continue
        why = supports(spec, problem)
        if why:
            rejected.append(Rejected(name, why))
            continue
        out += kernel_candidates(spec, problem, device, limit, rejected)
    return out


def describe_space(spec: KernelBase) -> list[str]:
    """Lines describing a kernel's space for ``--list``: declared or derived, the number of points
    (before and after restrictions), each domain, the fixed parameters and the restrictions."""
    space = spec.param_space()
    points = sum(1 for _ in space.points(spec.defaults))
    kind = "declared" if spec.space is not None else "derived from defaults and param_values"
    head = (f"{spec.name}: space {kind}; {space.size()} combinations, {points} pass the restrictions"
            + ("; candidates() offers a shortlist per problem" if overrides_candidates(spec) else ""))
    return [head] + [f"  {line}" for line in space.describe(spec.defaults)]


def _parser() -> argparse.ArgumentParser:
    from gemmlab.console import OneLineParser, folder_path
    p = OneLineParser(prog="python -m gemmlab.dispatch.candidates",
                      description="List each kernel's declared parameter space (--list), or the candidates the "
                                  "plugins offer for a problem M N K (no GPU needed).")
    p.add_argument("--list", action="store_true", help="print each registered kernel's space")
    p.add_argument("shape", nargs="*", type=int, help="M N K")
    p.add_argument("--precision", default="fp32", help="fp32, tf32, bf16 or fp16 (default fp32)")
    p.add_argument("--layout", default="row,row", help="a,b: each row or col (default row,row)")
    p.add_argument("--kernels", help="comma-separated kernel names (default: all)")
    p.add_argument("--limit", type=int, default=CANDIDATE_LIMIT, help=f"per kernel (default {CANDIDATE_LIMIT})")
    p.add_argument("--rejected", action="store_true", help="also print what was left out and why")
    p.add_argument("--plugin-dir", action="append", default=[], dest="plugin_dirs", type=folder_path)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gemmlab.dispatch.candidates``: exit 0, or 2 with one line on bad input."""
    from gemmlab.contract.registry import load_registry
    from gemmlab.errors import ConfigError
    from gemmlab.gpu.device import offline_facts
    from gemmlab.console import guard_streams
    prog = "python -m gemmlab.dispatch.candidates"
    guard_streams(prog)  # output into a pipe that closes early (| head) ends quietly
    args = _parser().parse_args(argv)
    try:
        registry = load_registry(args.plugin_dirs)
        if args.list or not args.shape:
            for spec in registry.kernels.values():
                print("\n".join(describe_space(spec)))
            return 0
        if len(args.shape) != 3 or min(args.shape) < 1:
            raise ConfigError("shape", f"give M N K, three positive ints, got {' '.join(map(str, args.shape))}")
        layout = tuple(args.layout.split(","))
        if len(layout) != 2 or not all(x in ("row", "col") for x in layout):
            raise ConfigError("layout", f"must be a,b with each row or col, got {args.layout!r}")
        if args.precision not in ("fp32", "tf32", "bf16", "fp16"):
            raise ConfigError("precision", f"must be one of fp32, tf32, bf16, fp16, got {args.precision!r}")
        problem = Problem(Shape(*args.shape), args.precision, *layout)
        kernels = [k for k in (args.kernels or "").split(",") if k.strip()] or None
        if kernels:
            unknown = sorted(set(kernels) - set(registry.kernels))
            if unknown:
                raise ConfigError("kernels", f"unknown kernel {unknown[0]!r}; registered: {', '.join(registry.kernels)}")
        rejected: list[Rejected] = []
        found = enumerate(registry, problem, offline_facts("90"), kernels=kernels, limit=args.limit, rejected=rejected)
        for c in found:
            print(f"{c.name}  ({c.source})")
        print(f"{len(found)} candidates for {'x'.join(map(str, args.shape))} {args.precision} {'/'.join(layout)}")
        if args.rejected:
            for r in rejected:
                print(f"left out: {r.kernel}: {r.why}")
    except ConfigError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
