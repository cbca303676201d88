"""Verification of the whole GEMM contract (issue 43): alpha·A·B + beta·C0 + bias, an activation,
the output type, leading dimensions and strided batches (:mod:`gemmlab.contract.epilogue`).

The reference (:func:`fused_reference`) is float64 throughout: z = alpha·A_b·B_b + beta·C0_b +
bias (the stored inputs' values: A and B rounded to their storage type, and for TF32 to TF32 the
way the kernel declares, C0 in C's type, the bias in its own), then the activation
(:func:`activation`, float64: ``math.erf`` for the erf GELU), then, for the reference a perfect
kernel writes, one rounding to the output type (:func:`round_out`).

The bound (``verify.tolerance=bound``) compares C with the unrounded f(z) and allows, per element:

- E_z, the pre-activation error: |alpha|·(lam·sqrt(K)·u_acc·(|A||B|) + u·|A·B|) (the plain
  bound of :mod:`gemmlab.stages.verify`: float32 accumulation, Higham–Mary, and the product's
  float32 rounding) + 4u·(|alpha·A·B| + |beta·C0| + |bias|) (the float32 scaling by alpha and beta
  and the two additions, each at most u of the running sum's terms, with a unit of margin);
- the activation's conditioning: L·E_z, L = sup |f'| (:data:`~gemmlab.contract.epilogue.LIPSCHITZ`:
  1 for none and relu, 1.13 for both GELUs, 1.1 for SiLU), plus its float32 evaluation,
  c·(|z| + |f(z)|) with the c the kernel declares
  (:func:`gemmlab.contract.epilogue.activation_error`): by default float32 libm's,
  :data:`~gemmlab.contract.epilogue.LIBM_ACTIVATION_ERROR` (8u for GELU and SiLU: tanhf / erff /
  expf within 2 ulp, a few float32 operations around them; 0 for none and relu, which are exact);
  a kernel with approximate activations (``tanh.approx.f32``: wgmma_bf16) declares its larger c, and
  the verdict's ``epilogue.activation_error`` gives the c applied;
- the output rounding: C = round_out(f̂) with |round_out(x) - x| <= u_out·|x| + tiny_out
  (u_out = 2^-24 float32, 2^-8 bf16, 2^-11 fp16: half an ulp; tiny_out half fp16's subnormal
  spacing, 2^-25), so |C - f(z)| <= (1 + u_out)·(L·E_z + eval) + u_out·|f(z)| + tiny_out.
- for a kernel that declares ``rounds_before_epilogue``
  (:class:`~gemmlab.contract.epilogue.EpilogueSupport`; cuBLASLt, ``plugins/cublas.py`` says why),
  with a 16-bit C and a bias or an activation: t = alpha·A·B + beta·C0 may be rounded to C's type
  before the bias and the activation, one more rounding, so E_z grows by u_out·(|t| + E_z) +
  tiny_out (|t| = |z - bias|, float64). The verdict's ``epilogue.rounding_before_epilogue`` says
  when the bound covers it; every other kernel is held to one rounding.

With alpha = 1, beta = 0, no bias, no activation and a float32 C the bound is the plain one plus
4u·|A·B| + 2u·|ref|: a few float32 roundings more than the plain bound, which never reads a fused
result. ``exact`` (integer inputs) compares C == round_out(f(z)): chosen by ``auto`` where
:func:`gemmlab.contract.epilogue.exact_possible` says integers keep the result exact (none or relu,
float32 C, integer alpha and beta, small enough K), else ``auto`` takes ``bound``. ``fixed``:
atol + rtol·|ref|.

Method: every batch ``full`` while batch·M·N·K <= ``verify.max_full`` (or ``verify.method=full``);
else each checked batch ``sampled`` (:func:`gemmlab.stages.verify.draw_sample` with the seed plus
the batch index: whole rows and whole columns against float64) and, where the epilogue is linear
(no activation), Freivalds' check of the batch's whole output (C·x against alpha·A·(B·x) +
beta·C0·x + bias·Σx, the bound summed along each row). An activation makes the output nonlinear
in A·B, so no Freivalds check is possible then (the verdict says so). Above
:data:`MAX_CHECKED_BATCHES` batches, that many are checked (the first, the last and others drawn by
the seed); every batch is checked for NaN (a batch never written stays NaN-filled). Every element
of C's buffer outside every batch's M x N (the padding past N in each row and the rows between
batches) must hold the NaN fill bit for bit (:func:`padding_writes`).
"""

from __future__ import annotations

import math
from types import MappingProxyType

import numpy as np

from gemmlab.contract.epilogue import LIBM_ACTIVATION_ERROR, LIPSCHITZ, exact_possible
from gemmlab.contract.hookspecs import Problem
from gemmlab.stages.inputs import INT_RANGE, batch_matrix
from gemmlab.stages.verify import (FIRST_MISMATCHES, TINY, U_FP32, Verdict, VerifyOptions,
                                   _compare, _merge, bound_coefficients, block_rows, draw_sample, round_tf32,
                                   tf32_verdict)

#: the output type's unit of its one rounding (half an ulp: to nearest), and its absolute part
#: (half the subnormal spacing; float16's 2^-24 spacing, bfloat16's and float32's below any result)
U_OUT = MappingProxyType({"float32": U_FP32, "bfloat16": 2.0**-8, "float16": 2.0**-11})
TINY_OUT = MappingProxyType({"float32": 0.0, "bfloat16": 0.0, "float16": 2.0**-25})
#: the pre-activation's float32 operations beyond the product (alpha·acc, beta·C0, two additions, and
#: one more as margin): this many u of the sum of the terms' magnitudes
Z_ROUNDINGS = 4
#: at most this many batches are compared element by element (all are checked for NaN)
MAX_CHECKED_BATCHES = 16
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_erf = np.frompyfunc(math.erf, 1, 1)


def activation(name: str, z: np.ndarray) -> np.ndarray:
    """``name`` (:data:`~gemmlab.contract.epilogue.ACTIVATIONS`) applied to ``z`` in float64
    (the definitions of :mod:`gemmlab.contract.epilogue`).

    Raises:
        ValueError: an unknown activation.
    """
    z = np.asarray(z, dtype=np.float64)
    if name == "none":
        return z
    if name == "relu":
        return np.maximum(z, 0.0)
    if name == "gelu_tanh":
        return 0.5 * z * (1.0 + np.tanh(_SQRT_2_OVER_PI * (z + 0.044715 * z**3)))
    if name == "gelu_erf":
        return 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)).astype(np.float64))
    if name == "silu":
        with np.errstate(over="ignore"):
            return z / (1.0 + np.exp(-z))
    raise ValueError(f"activation: one of none, relu, gelu_tanh, gelu_erf, silu; got {name!r}")


def round_out(y: np.ndarray, c_dtype: str) -> np.ndarray:
    """``y`` (float64) rounded once to ``c_dtype`` (``float32`` | ``bfloat16`` | ``float16``, to
    nearest even: numpy's and ml_dtypes' casts from float64 round once), back as float64."""
    if c_dtype == "bfloat16":
        import ml_dtypes
        return np.asarray(y, dtype=np.float64).astype(ml_dtypes.bfloat16).astype(np.float64)
    return np.asarray(y, dtype=np.float64).astype(c_dtype).astype(np.float64)


def pre_activation(a: np.ndarray, b: np.ndarray, c0: np.ndarray | None, bias: np.ndarray | None,
                   alpha: float, beta: float) -> np.ndarray:
    """z = alpha·(A @ B) + beta·C0 + bias in float64: ``a`` (m, K), ``b`` (K, n), ``c0`` (m, n) or
    None (beta = 0), ``bias`` (n,) or None; returns (m, n) float64."""
    z = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if c0 is not None and beta != 0.0:
        z += beta * c0.astype(np.float64)
    if bias is not None:
        z += bias.astype(np.float64)
    return z


def fused_reference(a: np.ndarray, b: np.ndarray, c0: np.ndarray | None, bias: np.ndarray | None, alpha: float = 1.0,
                    beta: float = 0.0, act: str = "none", c_dtype: str = "float32", rounded: bool = True) -> np.ndarray:
    """The float64 reference of one batch of the fused GEMM: round_out(act(alpha·A·B + beta·C0 +
    bias)) (``rounded=False``: without the output rounding). ``a`` (M, K), ``b`` (K, N), ``c0``
    (M, N) or None, ``bias`` (N,) or None, all holding the stored values; returns (M, N) float64."""
    y = activation(act, pre_activation(a, b, c0, bias, alpha, beta))
    return round_out(y, c_dtype) if rounded else y


def resolve_rule(options: VerifyOptions, distribution: str, problem: Problem) -> str:
    """The tolerance rule applied to an extended problem: ``auto`` is ``exact`` for integer inputs
    where the result stays exact (:func:`~gemmlab.contract.epilogue.exact_possible`), else ``bound``."""
    if options.tolerance != "auto":
        return options.tolerance
    exact = distribution == "integers" and exact_possible(problem.epilogue, problem.out, problem.K, INT_RANGE)
    return "exact" if exact else "bound"


def _tolerance(rule: str, options: VerifyOptions, problem: Problem, z: np.ndarray, y: np.ndarray,
               abs_ab: np.ndarray | None, abs_rest: np.ndarray | None, precision: str,
               abs_t: np.ndarray | None = None, act_error: float | None = None) -> np.ndarray | float:
    """Per-element allowed |C - y| (module docstring): ``z`` the pre-activation and ``y`` = act(z)
    (unrounded, float64), ``abs_ab`` = |A||B| and ``abs_rest`` = |beta·C0| + |bias| (or None);
    ``abs_t`` = |alpha·A·B + beta·C0| where the kernel may round that to C's type before its
    epilogue (:func:`rounds_before_epilogue`), else None; ``act_error`` the activation's declared
    evaluation error c (None: libm's, :data:`~gemmlab.contract.epilogue.LIBM_ACTIVATION_ERROR`)."""
    if rule == "exact":
        return 0.0
    if rule == "fixed":
        return options.atol + options.rtol * np.abs(y)
    ep = problem.epilogue
    alpha, act = (ep.alpha, ep.activation) if ep is not None else (1.0, "none")
    scale, _ = bound_coefficients(options, problem.K, precision)
    u_out, tiny_out = U_OUT[problem.c_dtype], TINY_OUT[problem.c_dtype]
    z_terms = abs(alpha) * abs_ab if abs_rest is None else abs(alpha) * abs_ab + abs_rest
    # |A·B| <= |A||B|: the product's own float32 rounding, u|A·B|, bounded by u|A||B|
    e_z = abs(alpha) * (scale + U_FP32) * abs_ab + Z_ROUNDINGS * U_FP32 * z_terms
    if abs_t is not None:  # t = alpha·A·B + beta·C0 rounded to C's type once more (module docstring)
        e_z = e_z + u_out * (abs_t + e_z) + tiny_out
    c_eval = LIBM_ACTIVATION_ERROR[act] if act_error is None or act in ("none", "relu") else act_error
    evaluation = c_eval * (np.abs(z) + np.abs(y)) if c_eval else 0.0
    return (1 + u_out) * (LIPSCHITZ[act] * e_z + evaluation) + u_out * np.abs(y) + tiny_out + TINY


def rounds_before_epilogue(problem: Problem, declared: bool) -> bool:
    """Whether the bound covers a rounding of alpha·A·B + beta·C0 to C's type before the epilogue:
    the kernel ``declared`` it (``EpilogueSupport.rounds_before_epilogue``), C is 16-bit and there is
    a bias or an activation (without either, that rounding is the output's one)."""
    ep = problem.epilogue
    return (declared and problem.c_dtype != "float32" and ep is not None
            and (problem.bias_dtype is not None or ep.activation != "none"))


def padding_writes(problem: Problem, image: np.ndarray) -> dict:
    """How many elements of C's buffer ``image`` (``problem.stored_shape("C")``) outside every
    batch's M x N differ from the all-ones NaN fill, and the first few as ``[row, col]`` of the
    buffer (``elements``: how many such padding elements there are)."""
    st = problem.storage("C")
    word = image.view(np.dtype(f"u{image.dtype.itemsize}"))
    ones = np.iinfo(word.dtype).max
    inside = np.zeros(image.shape[0], dtype=bool)
    for i in range(st.copies):
        r0 = i * (st.stride // st.ld)
        inside[r0:r0 + st.rows] = True
    bad_rows = np.nonzero(word[~inside] != ones)
    bad_cols = np.nonzero(word[inside, st.cols:] != ones)
    rows_out, rows_in = np.nonzero(~inside)[0], np.nonzero(inside)[0]
    first = ([[int(rows_out[r]), int(c)] for r, c in zip(*bad_rows)][:FIRST_MISMATCHES]
             + [[int(rows_in[r]), int(c) + st.cols] for r, c in zip(*bad_cols)][:FIRST_MISMATCHES])
    elements = int((~inside).sum()) * image.shape[1] + int(inside.sum()) * (image.shape[1] - st.cols)
    return {"elements": elements, "written": int(bad_rows[0].size + bad_cols[0].size),
            "first_written": sorted(first)[:FIRST_MISMATCHES]}


def checked_batches(batch: int, seed: int) -> list[int]:
    """The batches compared element by element: all up to :data:`MAX_CHECKED_BATCHES`, else the
    first, the last and others drawn from ``default_rng(seed + 2)``, sorted."""
    if batch <= MAX_CHECKED_BATCHES:
        return list(range(batch))
    rng = np.random.default_rng(seed + 2)
    middle = rng.choice(np.arange(1, batch - 1), size=MAX_CHECKED_BATCHES - 2, replace=False)
    return sorted({0, batch - 1, *map(int, middle)})


def _operands(problem: Problem, inputs, b: int, rounding: str | None):
    """Batch ``b``'s logical A (M, K), B (K, N) (TF32-rounded as ``rounding`` says), C0 and bias."""
    a = inputs.a[b if inputs.a.shape[0] > 1 else 0]
    bm = inputs.b[b if inputs.b.shape[0] > 1 else 0]
    if rounding is not None:
        a, bm = round_tf32(a, rounding), round_tf32(bm, rounding)
    c0 = inputs.c0[b] if inputs.c0 is not None else None
    return a, bm, c0, inputs.bias


def _abs_rest(problem: Problem, c0, bias, rows=slice(None), cols=slice(None)):
    ep = problem.epilogue
    rest = None
    if c0 is not None and ep is not None and ep.beta != 0.0:
        rest = abs(ep.beta) * np.abs(c0[rows][:, cols].astype(np.float64))
    if bias is not None:
        part = np.abs(bias[cols].astype(np.float64))
        rest = part if rest is None else rest + part
    return rest


def _check_batch(problem: Problem, c: np.ndarray, a, bm, c0, bias, options: VerifyOptions, rule: str, method: str,
                 seed: int, precision: str, pre_round: bool = False,
                 act_error: float | None = None) -> tuple[dict, dict | None]:
    """One batch: ``_compare`` parts merged, and Freivalds' verdict (None: not run). ``pre_round``:
    the bound covers a rounding before the epilogue (:func:`rounds_before_epilogue`); ``act_error``:
    the activation's declared evaluation error (:func:`_tolerance`)."""
    ep = problem.epilogue
    alpha, beta, act = (ep.alpha, ep.beta, ep.activation) if ep is not None else (1.0, 0.0, "none")
    M, N = c.shape
    need_abs = rule == "bound"
    a64, b64 = a.astype(np.float64), bm.astype(np.float64)
    abs_b = np.abs(b64) if need_abs else None

    def compare(rows, cols, out_rows=None, out_cols=None):
        z = pre_activation(a64[rows], b64[:, cols], None if c0 is None else c0[rows][:, cols], None if bias is None
                           else bias[cols], alpha, beta)
        y = activation(act, z)
        ref = round_out(y, problem.c_dtype) if rule == "exact" else y
        abs_t = None
        if need_abs and pre_round:
            abs_t = np.abs(z - bias[cols].astype(np.float64)) if bias is not None else np.abs(z)
        tol = _tolerance(rule, options, problem, z, y, np.abs(a64[rows]) @ abs_b[:, cols] if need_abs else None,
                         _abs_rest(problem, c0, bias, rows, cols) if need_abs else None, precision, abs_t,
                         act_error)
        return _compare(c[rows][:, cols], ref, tol, rows=out_rows, cols=out_cols)

    if method == "full":
        step = block_rows(M, N)
        parts = [compare(slice(r, r + step), slice(None), np.arange(r, min(r + step, M))) for r in range(0, M, step)]
        return _merge(parts), None
    rows, cols, xs = draw_sample(seed, M, N, options)
    others = np.setdiff1d(np.arange(M), rows)
    parts = [compare(rows, slice(None), rows), compare(others, cols, others, cols) if len(others) else None]
    merged = _merge([p for p in parts if p is not None])
    if act != "none":
        return merged, {"passed": True, "trials": 0, "max_error_over_tolerance": 0.0,
                        "skipped": "the activation is not linear in A·B: no Freivalds check"}
    c64 = c.astype(np.float64)
    lhs = c64 @ np.column_stack(xs)
    abs_c_rows = np.abs(c64).sum(axis=1)
    passed, worst = bool(np.isfinite(abs_c_rows).all()), 0.0
    u_out, tiny_out = U_OUT[problem.c_dtype], TINY_OUT[problem.c_dtype]
    if need_abs:
        scale, _ = bound_coefficients(options, problem.K, precision)
        ab_rows = np.abs(a64) @ (np.abs(b64) @ np.ones(N))
        rest_rows = 0.0
        if c0 is not None and beta != 0.0:
            rest_rows = abs(beta) * np.abs(c0.astype(np.float64)).sum(axis=1)
        if bias is not None:
            rest_rows = rest_rows + np.abs(bias.astype(np.float64)).sum()
        e_rows = abs(alpha) * (scale + U_FP32) * ab_rows + Z_ROUNDINGS * U_FP32 * (abs(alpha) * ab_rows + rest_rows)
        if pre_round:  # |t| <= |alpha||A||B| + |beta||C0|, summed along the row
            t_rows = abs(alpha) * ab_rows
            if c0 is not None and beta != 0.0:
                t_rows = t_rows + abs(beta) * np.abs(c0.astype(np.float64)).sum(axis=1)
            e_rows = e_rows + u_out * (t_rows + e_rows) + N * tiny_out
    for j, x in enumerate(xs):
        rhs = alpha * (a64 @ (b64 @ x))
        if c0 is not None and beta != 0.0:
            rhs = rhs + beta * (c0.astype(np.float64) @ x)
        if bias is not None:
            rhs = rhs + float(bias.astype(np.float64) @ x)
        err = np.abs(lhs[:, j] - rhs)
        if rule == "exact":
            tol = np.zeros(M)
        elif rule == "fixed":
            tol = options.atol * N + options.rtol * abs_c_rows
        else:  # |f(z)| <= |C| / (1 - u_out) + tiny_out per element
            tol = (1 + u_out) * e_rows + u_out / (1 - u_out) * abs_c_rows + 2 * N * tiny_out
        if not np.isfinite(err).all() or (err > tol + TINY).any():
            passed = False
        with np.errstate(divide="ignore", invalid="ignore"):
            worst = max(worst, float(np.nanmax(np.where(tol > 0, err / tol, np.where(err > 0, np.inf, 0.0)))))
    return merged, {"passed": passed, "trials": options.trials, "max_error_over_tolerance": worst}


def check(c_image: np.ndarray, inputs, problem: Problem, options: VerifyOptions, distribution: str = "normal",
          seed: int = 0, tf32_rounding: str | None = None, rounds_before: bool = False,
          activation_error: float | None = None) -> Verdict:
    """Verify an extended ``problem``'s C buffer ``c_image`` (``problem.stored_shape("C")``, C's
    type) against the fused float64 reference of ``inputs``
    (:func:`gemmlab.stages.inputs.make_epilogue_inputs`), batch by batch (module docstring). For
    ``precision=tf32`` A and B are rounded to TF32 as ``tf32_rounding`` says, or, undeclared, by
    each of :data:`~gemmlab.stages.verify.TF32_ROUNDINGS` until the output passes (as
    :func:`gemmlab.stages.verify.check` does). The verdict's ``epilogue`` field gives the fused
    operation, the checked batches (each with its mismatches, NaN count, max error over tolerance
    and Freivalds' verdict) and the padding check. ``rounds_before``: the kernel declares
    ``EpilogueSupport.rounds_before_epilogue`` (the bound then covers that rounding where
    :func:`rounds_before_epilogue` says, and the verdict's ``epilogue.rounding_before_epilogue``
    says so). ``activation_error``: the c the kernel declares for its activation's float32
    evaluation (:func:`gemmlab.contract.epilogue.activation_error`; None: float32 libm's); the
    verdict's ``epilogue.activation_error`` gives the c applied where the activation is not exact.

    Raises:
        ValueError: ``c_image`` not of the problem's stored shape, or an unknown ``tf32_rounding``.
    """
    if c_image.shape != problem.stored_shape("C"):
        raise ValueError(f"C is {c_image.shape}, the problem stores C as {problem.stored_shape('C')}")
    if problem.precision != "tf32":
        return _check(c_image, inputs, problem, options, distribution, seed, None, rounds_before, activation_error)
    return tf32_verdict(lambda rounding: _check(c_image, inputs, problem, options, distribution, seed, rounding,
                                                rounds_before, activation_error), tf32_rounding)


def _check(c_image, inputs, problem: Problem, options: VerifyOptions, distribution: str, seed: int,
           rounding: str | None, rounds_before: bool = False, activation_error: float | None = None) -> Verdict:
    rule = resolve_rule(options, distribution, problem)
    pre_round = rounds_before_epilogue(problem, rounds_before)
    M, N, K = problem.shape
    method = options.method
    if method == "auto":
        method = "full" if problem.batch * M * N * K <= options.max_full else "sampled"
    chosen = checked_batches(problem.batch, seed)
    batches, parts, nan_outputs, freivalds_ok, worst_f = [], [], 0, True, 0.0
    for b in range(problem.batch):
        out = batch_matrix(problem, "C", c_image, b)
        nans = int(np.isnan(out.astype(np.float32)).sum())
        nan_outputs += nans
        if b not in chosen:
            continue
        a, bm, c0, bias = _operands(problem, inputs, b, rounding)
        part, freivalds = _check_batch(problem, out, a, bm, c0, bias, options, rule, method, seed + b, problem.precision,
                                       pre_round, activation_error)
        r0 = b * (problem.storage("C").stride // problem.ldc)  # rows of C's buffer, as the padding's
        part["first"] = [[r + r0, *rest] for r, *rest in part["first"]]
        parts.append(part)
        entry = {"batch": b, "mismatches": part["mismatches"], "nan_outputs": nans,
                 "max_error_over_tolerance": part["max_ratio"] if np.isfinite(part["max_ratio"]) else str(part["max_ratio"])}
        if freivalds is not None:
            entry["freivalds"] = {k: v for k, v in freivalds.items() if k != "trials"}
            freivalds_ok &= freivalds["passed"]
            worst_f = max(worst_f, freivalds["max_error_over_tolerance"])
        batches.append(entry)
    merged = _merge(parts)
    padding = padding_writes(problem, c_image)
    passed = merged["mismatches"] == 0 and nan_outputs == 0 and freivalds_ok and padding["written"] == 0
    described = ("full float64 reference of the fused operation, every element" if method == "full" else
                 f"sampled per batch: {min(options.sample, M)} whole rows and {min(options.sample, N)} whole columns "
                 "vs the fused float64 reference" + (", plus Freivalds' check of each batch's whole output"
                                                    if problem.epilogue is None or problem.epilogue.activation == "none"
                                                    else " (no Freivalds check: the activation is not linear)"))
    if len(chosen) < problem.batch:
        described += f"; {len(chosen)} of {problem.batch} batches compared, every batch checked for NaN"
    ep = problem.epilogue
    verdict = Verdict(passed=passed, max_abs_error=merged["max_abs"], max_rel_error=merged["max_rel"],
                      mismatches=merged["mismatches"], nan_outputs=nan_outputs, atol=options.atol, rtol=options.rtol,
                      first_mismatches=merged["first"][:FIRST_MISMATCHES], rule=rule, method=described,
                      max_error_over_tolerance=merged["max_ratio"], safety=options.safety if rule == "bound" else None,
                      freivalds=None if method == "full" else {"passed": freivalds_ok, "trials": options.trials,
                                                               "max_error_over_tolerance": worst_f})
    verdict.epilogue = {"operation": describe(problem), **(ep.record() if ep is not None else {}), "out": problem.out,
                        "c_dtype": problem.c_dtype, "batches": batches, "padding": padding,
                        "first_mismatches_are": "[row of C's buffer (batch b's row r: b * stride_c / ldc + r), "
                                                "col, got, expected]"}
    act = ep.activation if ep is not None else "none"
    if rule == "bound" and act not in ("none", "relu"):
        c_eval = LIBM_ACTIVATION_ERROR[act] if activation_error is None else activation_error
        verdict.epilogue["activation_error"] = {
            "c": c_eval, "declared": activation_error is not None and activation_error != LIBM_ACTIVATION_ERROR[act],
            "means": f"the bound allows c·(|z| + |{act}(z)|) for the kernel's float32 evaluation of {act}"}
    if pre_round and rule == "bound":
        verdict.epilogue["rounding_before_epilogue"] = (
            f"the bound covers alpha·A·B + beta·C0 rounded to {problem.c_dtype} before the bias and the activation "
            "(declared by the kernel: EpilogueSupport.rounds_before_epilogue), one rounding more than the output's")
    return verdict


def describe(problem: Problem) -> str:
    """The fused operation in words, e.g. ``C = bf16(gelu_tanh(2·A·B + 1·C0 + bias))``."""
    ep = problem.epilogue
    text = "A·B" if ep is None or ep.alpha == 1.0 else f"{ep.alpha:g}·A·B"
    if ep is not None and ep.beta != 0.0:
        text += f" + {ep.beta:g}·C0"
    if problem.bias_dtype is not None:
        text += f" + bias ({problem.bias_dtype})"
    if ep is not None and ep.activation != "none":
        text = f"{ep.activation}({text})"
    out = {"float32": "float32", "bfloat16": "bf16", "float16": "fp16"}[problem.c_dtype]
    return f"C = {out}({text})" + (f", {problem.batch} batches" if problem.batch > 1 else "")
