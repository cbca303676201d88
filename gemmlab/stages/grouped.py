"""Grouped GEMM (issue 44) on the host: group sizes from a named generator, the inputs of every
group, and the verification of every group against its own float64 reference.

Group-size generators (``grouped.generator``, for ``rows`` = sum_g M_g routed rows over G experts):

- ``uniform``: balanced routing, every expert gets rows // G rows and the first rows % G one more.
- ``zipf``: skewed routing: each row goes to expert e with probability proportional to
  rank(e)^-s (``grouped.exponent`` s > 0, Zipf's law), the ranks a random permutation of the experts,
  drawn with ``numpy.random.default_rng(grouped.seed)`` (the counts are one multinomial draw), so the
  heaviest expert is not always group 0. s = 0 is uniform random routing; s around 1-1.5 resembles
  the skew of routers measured without load balancing.
- ``all_but_one_empty``: every row to one expert (``grouped.seed`` % G), the others empty.

Inputs (:func:`make_grouped_inputs`): each group draws its own A_g and B_g as a plain point does
(:func:`gemmlab.stages.inputs.make_inputs`, never zeros), from a child seed of ``inputs.seed`` and g,
rounded once to the storage type; rows and gaps that belong to no group hold NaN in A and B, so a
kernel that reads across groups produces NaN, which verification reports.

Verification (:func:`check_grouped`): every non-empty group by :func:`gemmlab.stages.verify.check`
against the float64 product of its own A_g and B_g, with the rule and method of a plain point of that
shape (bound / exact / fixed; full or sampled), its mismatches counted per group; and every element of
C that belongs to no group (padding rows, masked rows, gaps) must still hold the NaN fill bit for bit.
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.grouped import Grouped
from gemmlab.contract.hookspecs import Problem, Shape
from gemmlab.stages import verify as verify_stage
from gemmlab.stages.inputs import InputOptions, ProblemInputs, make_inputs, storage_dtype

#: ``grouped.generator`` values
GENERATORS = ("uniform", "zipf", "all_but_one_empty")
#: groups listed by number in the record's and the summary's first failures
FIRST_GROUPS = 8


def group_sizes(generator: str, rows: int, G: int, seed: int = 0, exponent: float = 1.2) -> tuple[int, ...]:
    """M_g for G experts receiving ``rows`` routed rows in all (module docstring).

    Args:
        generator: one of :data:`GENERATORS`.
        rows: sum of M_g (>= 0). G: experts (>= 1). seed: the routing seed (zipf, all_but_one_empty).
        exponent: zipf's s (> 0 in the config; 0 here gives uniform random routing).

    Returns:
        G ints >= 0 summing to ``rows``.

    Raises:
        ValueError: an unknown generator or G < 1.
    """
    if G < 1:
        raise ValueError(f"G must be >= 1, got {G}")
    if generator == "uniform":
        base, extra = divmod(rows, G)
        return tuple(base + (1 if g < extra else 0) for g in range(G))
    if generator == "zipf":
        rng = np.random.default_rng(seed)
        ranks = rng.permutation(G) + 1
        p = ranks.astype(np.float64) ** -float(exponent)
        return tuple(int(x) for x in rng.multinomial(rows, p / p.sum()))
    if generator == "all_but_one_empty":
        return tuple(rows if g == seed % G else 0 for g in range(G))
    raise ValueError(f"generator must be one of {', '.join(GENERATORS)}, got {generator!r}")


def child_seed(seed: int, g: int) -> int:
    """The seed of group ``g``'s draws: a 63-bit integer from ``numpy.random.SeedSequence((seed, g))``
    (independent streams per group, the same on every machine)."""
    return int(np.random.SeedSequence((seed, g)).generate_state(1, np.uint64)[0] >> np.uint64(1))


def _nan_array(shape, dtype) -> np.ndarray:
    return np.full(shape, np.nan, dtype=np.float32).astype(dtype)


def make_grouped_inputs(problem: Problem, options: InputOptions, fast: bool = False) -> ProblemInputs:
    """The inputs of a grouped ``problem`` (module docstring): ``a``/``a_stored`` as A is stored
    (:meth:`Grouped.stored_shape`), ``b`` the logical B (contiguous/masked: (G, K, N) float32;
    general: (1, elements) with each B_g K_g x N_g row-major at its offset), ``b_stored`` as B is
    stored; NaN wherever no group lies. fp32/tf32/bf16/fp16 (fp8 is refused by the config).

    Raises:
        ValueError: precision fp8 (grouped FP8 waits for block-scaled kernels, issue 44 item 3).
    """
    grouped = problem.grouped
    if problem.precision == "fp8":
        raise ValueError("grouped inputs: precision=fp8 is not supported")
    dtype = storage_dtype(problem.precision)
    a_stored = _nan_array(grouped.stored_shape("A"), dtype)
    b_stored = _nan_array(grouped.stored_shape("B"), dtype)
    general = grouped.kind == "general"
    if general:
        b_logical = np.full(b_stored.shape, np.nan, dtype=np.float32)
    else:
        b_logical = np.full((grouped.G, grouped.K, grouped.N), np.nan, dtype=np.float32)
        b_view = b_stored.reshape(grouped.G, *((grouped.K, grouped.N) if grouped.layout_b == "row"
                                               else (grouped.N, grouped.K)))
    offsets = grouped.element_offsets if general else None
    for g, (m, n, k) in enumerate(grouped.shapes):
        a32, b32 = make_inputs(Shape(max(m, 1), n, k), InputOptions(seed=child_seed(options.seed, g),
                                                                   distribution=options.distribution), fast=fast)
        a_g, b_g = a32[:m].astype(dtype), b32.astype(dtype)
        b_st = b_g if grouped.layout_b == "row" else b_g.T
        if general:
            oa, ob, _ = offsets[g]
            a_stored[0, oa:oa + m * k] = a_g.reshape(-1)
            b_stored[0, ob:ob + n * k] = b_st.reshape(-1)
            b_logical[0, ob:ob + n * k] = b_g.astype(np.float32).reshape(-1)
        else:
            a_stored[grouped.valid_rows(g)] = a_g
            b_view[g] = b_st
            b_logical[g] = b_g.astype(np.float32)
    return ProblemInputs(a=a_stored.astype(np.float32), b=b_logical, a_stored=np.ascontiguousarray(a_stored),
                         b_stored=np.ascontiguousarray(b_stored))


def group_operands(grouped: Grouped, c: np.ndarray, a: np.ndarray, b: np.ndarray, g: int):
    """Group ``g``'s (C_g (M_g, N_g), A_g (M_g, K_g), B_g (K_g, N_g)) as views into C as stored and the
    logical packed A and B of :func:`make_grouped_inputs`."""
    m, n, k = grouped.shape(g)
    if grouped.kind == "general":
        oa, ob, oc = grouped.element_offsets[g]
        return (c.reshape(-1)[oc:oc + m * n].reshape(m, n), a.reshape(-1)[oa:oa + m * k].reshape(m, k),
                b.reshape(-1)[ob:ob + k * n].reshape(k, n))
    rows = grouped.valid_rows(g)
    return c[rows], a[rows], b[g]


def untouched_writes(grouped: Grouped, c: np.ndarray) -> dict:
    """How many elements of C that belong to no group differ from the all-ones NaN fill
    (:func:`gemmlab.gpu.guards.nan_fill`), and the first few as ``[row, col]`` of C as stored."""
    flat = c.reshape(-1)
    word = flat.view(np.dtype(f"u{flat.dtype.itemsize}"))
    ones = np.iinfo(word.dtype).max
    written, first, total = 0, [], 0
    cols = c.shape[1]
    for start, stop in grouped.untouched_ranges():
        total += stop - start
        bad = np.nonzero(word[start:stop] != ones)[0]
        if bad.size:
            written += int(bad.size)
            first += [[int((start + i) // cols), int((start + i) % cols)] for i in bad[:FIRST_GROUPS - len(first)]]
    return {"elements": total, "written": written, "first_written": first[:FIRST_GROUPS]}


def check_grouped(c: np.ndarray, a: np.ndarray, b: np.ndarray, grouped: Grouped, options: verify_stage.VerifyOptions,
                  distribution: str = "normal", precision: str = "fp32", seed: int = 0, products: dict | None = None,
                  tf32_rounding: str | None = None) -> verify_stage.Verdict:
    """Verify a grouped problem's C (as stored) group by group (module docstring).

    Each non-empty group g is checked by :func:`gemmlab.stages.verify.check` with seed ``seed + g``
    (its sampled rows and columns) and its own float64 products cached in ``products[("group", g)]``;
    empty groups have nothing to check. The verdict passes when every group passes and no element
    outside the groups was written; its ``grouped`` field lists per group M_g, N_g, K_g, mismatches,
    NaN outputs, max error over tolerance and the method, and the untouched check
    (:func:`untouched_writes`); ``first_mismatches`` give rows and columns of C as stored.

    Raises:
        ValueError: shapes that do not match the grouped problem.
    """
    if c.shape != grouped.stored_shape("C"):
        raise ValueError(f"C is {c.shape}, the grouped problem stores C as {grouped.stored_shape('C')}")
    groups, verdicts = [], []
    for g, (m, n, k) in enumerate(grouped.shapes):
        if m == 0:
            groups.append({"g": g, "M": 0, "N": n, "K": k, "mismatches": 0, "nan_outputs": 0, "passed": True,
                           "method": "empty: nothing to check"})
            continue
        c_g, a_g, b_g = group_operands(grouped, c, a, b, g)
        cache = None if products is None else products.setdefault(("group", g), {})
        v = verify_stage.check(c_g, a_g, b_g, options, distribution, precision, seed + g, products=cache,
                               tf32_rounding=tf32_rounding)
        row0 = 0 if grouped.kind == "general" else grouped.valid_rows(g).start
        v.first_mismatches = [[r + row0, col, got, exp] for r, col, got, exp in v.first_mismatches]
        verdicts.append((g, v))
        entry = {"g": g, "M": m, "N": n, "K": k, "mismatches": v.mismatches, "nan_outputs": v.nan_outputs,
                 "passed": v.passed, "max_error_over_tolerance": v.max_error_over_tolerance
                 if np.isfinite(v.max_error_over_tolerance) else str(v.max_error_over_tolerance), "method": v.method}
        if v.freivalds is not None:
            entry["freivalds_passed"] = v.freivalds["passed"]
        if v.tf32 is not None:
            entry["tf32_rounding"] = v.tf32["rounding"]
        groups.append(entry)
    untouched = untouched_writes(grouped, c)
    failed = [g for g, v in verdicts if not v.passed]
    vs = [v for _, v in verdicts]
    methods = sorted({v.method for v in vs})
    first_rule = vs[0] if vs else None
    verdict = verify_stage.Verdict(
        passed=not failed and untouched["written"] == 0,
        max_abs_error=max((v.max_abs_error for v in vs), default=0.0),
        max_rel_error=max((v.max_rel_error for v in vs), default=0.0),
        mismatches=sum(v.mismatches for v in vs), nan_outputs=sum(v.nan_outputs for v in vs),
        atol=options.atol, rtol=options.rtol,
        first_mismatches=[f for v in vs for f in v.first_mismatches][:verify_stage.FIRST_MISMATCHES],
        rule=first_rule.rule if first_rule else verify_stage.resolve_rule(options, distribution),
        method=f"per group ({grouped.G} groups, {len(vs)} non-empty): " + "; ".join(methods),
        max_error_over_tolerance=max((v.max_error_over_tolerance for v in vs), default=0.0),
        safety=first_rule.safety if first_rule else None)
    verdict.grouped = {"kind": grouped.kind, "groups": groups, "failed_groups": failed[:FIRST_GROUPS],
                       "failed_group_count": len(failed), "untouched": untouched}
    return verdict


def grouped_summary(verdict: verify_stage.Verdict) -> str:
    """The failing parts of a grouped verdict in words (added to :meth:`Verdict.summary`)."""
    info = verdict.grouped or {}
    parts = []
    if info.get("failed_group_count"):
        bad = [e for e in info["groups"] if not e["passed"]]
        first = bad[0]
        parts.append(f"{info['failed_group_count']} of {len(info['groups'])} groups wrong (first: group {first['g']}, "
                     f"M_g={first['M']}, {first['mismatches']} mismatches, {first['nan_outputs']} NaN)")
    u = info.get("untouched") or {}
    if u.get("written"):
        r, col = u["first_written"][0]
        parts.append(f"{u['written']} of {u['elements']} elements of C outside every group (padding, masked rows or "
                     f"gaps, which must stay untouched) were written, first at (row {r}, col {col})")
    return "; ".join(parts)

