"""The candidates ``gemmlab-tune sweep`` measures for a shape of the suite: kernel=auto's own choice, then
what the plugins offer for the shape's family.

:func:`candidates` gives, for one shape of the suite (:mod:`gemmlab.dispatch.shapes`), the rules'
own choice (:func:`gemmlab.dispatch.auto.choose` with no table) first, then each registered kernel's
:meth:`~gemmlab.contract.hookspecs.KernelBase.sweep_variants` for the shape's family (the built-in
plugins keep the variants their measured tables rest on; where no kernel offers any, every kernel with
its defaults), then what the kernels of drop-in and entry-point plugins offer
(:func:`plugin_candidates`: their declared spaces, issue 41); only registered kernels that support the
precision and whose check accepts the shape, no duplicates. No kernel is named here. The sweep that
measures them is :mod:`gemmlab.run.tune_sweep`.
"""

from __future__ import annotations

from gemmlab.contract.hookspecs import LibraryKernelSpec, Problem, Shape
from gemmlab.dispatch import auto as dispatch


def candidates(shape: Shape, family: str, registry, table_sms: int = dispatch.DEFAULT_SM_COUNT,
               precision: str = dispatch.DEFAULT_PRECISION) -> list[tuple[str, dict]]:
    """Candidate (kernel, full params) pairs for ``shape`` of suite family ``family``: the rules' choice
    first (on a GPU of ``table_sms`` SMs), then every registered kernel's ``sweep_variants`` (registry
    order) or, where none offers one, every registered kernel with its defaults, then
    :func:`plugin_candidates`; only registered NVRTC kernels that support the precision (row/row) and
    whose check accepts the shape, no duplicates."""
    from gemmlab.gpu.device import offline_facts
    facts = offline_facts("90")
    layout = dispatch.DEFAULT_LAYOUT
    out: list[tuple[str, dict]] = []
    try:
        first = dispatch.choose(shape, registry, dispatch.Table(device={"sm_count": table_sms}), precision)
        out.append((first.kernel, dict(first.params)))
    except Exception:  # no kernel at all: the variants may still have one
        pass
    problem = Problem(Shape(*shape), precision, *layout)
    extra: list[tuple[str, dict]] = []
    for name, spec in registry.kernels.items():
        if isinstance(spec, LibraryKernelSpec) or dispatch._supports(spec, precision, layout):
            continue
        extra += [(name, dict(p)) for p in spec.sweep_variants(problem, facts, family)]
    extra = extra or [(name, {}) for name in registry.kernels]
    extra += plugin_candidates(shape, registry, precision, facts)
    for name, params in extra:
        full, _ = dispatch._try(registry, name, params, shape, precision, layout, facts)
        if full is not None and (name, full) not in out:
            out.append((name, full))
    return out


#: candidates per shape of each kernel from a plugin other than the built-in ones (each is a measured point)
PLUGIN_CANDIDATES = 8


def plugin_candidates(shape: Shape, registry, precision: str, facts, limit: int = PLUGIN_CANDIDATES
                      ) -> list[tuple[str, dict]]:
    """What the kernels of drop-in and entry-point plugins offer for ``shape`` (issue 41: their
    declared spaces or their own ``candidates()``, through :func:`gemmlab.dispatch.candidates.enumerate`),
    at most ``limit`` each: a new kernel takes part in the sweep with no change here. The built-in
    kernels offer their ``sweep_variants`` instead (their measured tables and tests rest on them)."""
    from gemmlab.contract.registry import BUILTIN_PACKAGE
    from gemmlab.dispatch.candidates import enumerate as enumerate_candidates
    origins = getattr(registry, "origins", None) or {}
    others = [name for name, origin in origins.items() if not str(origin).startswith(f"{BUILTIN_PACKAGE}.")]
    if not others:
        return []
    problem = Problem(shape, precision, *dispatch.DEFAULT_LAYOUT)
    return [(c.kernel, dict(c.params)) for c in enumerate_candidates(registry, problem, facts, kernels=others, limit=limit)]
