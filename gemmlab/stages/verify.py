"""Stage 4: verify a kernel's output against float64 products of the same inputs (as stored:
rounded to bf16/fp16 when the precision says so, given here as float32 arrays of those values).

The reference multiplies the already-rounded inputs in float64 on the CPU (as in seed 000, the
real-device naive vs register-tiled GEMM lab gemmlab grew from), separating input rounding from
device accumulation error. NaN and inf never pass, so an output the kernel never wrote
(NaN-filled beforehand) is caught and counted. Tolerance rules (``verify.tolerance``):

- ``fixed``: ``|C - ref| <= atol + rtol*|ref|`` (seed 000: ``assert_allclose`` with 3e-4 each).
- ``bound`` (default for float inputs): ``|C - ref| <= lam*sqrt(K)*u_acc*(|A||B|)_ij +
  u*|ref_ij| + tiny``, with u = 2^-24, u_acc the accumulation unit (u for fp32 on CUDA cores; 2u
  for tensor cores, which align and truncate inside each MMA), lam = ``verify.safety`` (8). The
  reference always multiplies the operands the hardware multiplies, so the bound covers float32
  accumulation only, never the rounding of the inputs: bf16/fp16 inputs are rounded to their
  storage type before the reference is formed; for TF32 the reference multiplies the inputs
  rounded to TF32 (10 explicit mantissa bits) the way the kernel rounds them
  (``KernelBase.tf32_rounding``: ``rn``, to nearest with ties to even as ``cvt.rn.tf32.f32``;
  ``rna``, ties away as ``cvt.rna.tf32.f32``; ``rz``, truncation, what a tensor core does with
  float32 bits it reads as TF32; ``none``, no rounding: a float32 CUDA-core path). A kernel that
  declares no rounding (a library: cuBLAS may pick a CUDA-core kernel for some shapes) passes if
  its whole output is within the bound of one of the four references, tried in the order rn,
  rna, rz, none; the verdict's ``tf32`` field
  names the one that matched and the max error/tolerance of each tried. (Before this rule, TF32
  added 2*2^-11*lam*sqrt(K)*|A||B| for input rounding, which at K >= 1024 exceeds |C| itself for
  normal inputs: an all-zeros C passed.) This is the
  probabilistic rounding-error bound of Higham & Mary, "A New Approach to Probabilistic Rounding
  Error Analysis", SIAM J. Sci. Comput. 41(5), 2019 (deterministic form: gamma_K |A||B|,
  Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.5). It grows with K and
  with each element's |A||B|, so large K raises no false failure. Its limit: for N(0,1) inputs it
  grows like K^1.5 while a dropped k term stays about 0.6 (|a_ik b_kj|), so one dropped term is
  caught in most elements at K = 4096 (221 of 256 in a test), fewer at K = 16384 (78 of 256) and
  none at K = 65536; use ``integers`` inputs with the ``exact`` rule to catch any lost term at
  any K <= 2^19.
- ``exact``: ``C == ref`` (small-integer inputs: every product and partial sum is an integer
  below 2^24, so float32 arithmetic is exact and any difference is a bug).
- ``bound`` for ``precision=fp8`` (issue 42; :class:`Fp8Bound`): the reference multiplies the
  dequantised inputs (q * scale, exact in float64), so input quantisation is not in the bound
  (the record gives it apart: ``inputs.quantisation``). FP8 tensor cores keep fewer bits than
  float32 (DeepSeek-V3 technical report, arXiv:2412.19437, §3.3.2: about 14 bits on H800); a
  kernel declares how it copes (``KernelBase.fp8_accumulation``): ``float32``, or a promotion
  interval P (the tensor core accumulates P elements of K, then the kernel adds that partial sum
  to float32; undeclared: P = K, no promotion). The model
  (:func:`gemmlab.contract.plugin_utils.fp8_mma_step`; it reproduces the H100's output bit for bit
  where the earlier model did not, tests/test_fp8.py): at each wgmma step of 32 elements of K the
  tensor core aligns its addends, the accumulator and the step's exact products, to the largest
  of them, x_j, and truncates each toward zero at :data:`FP8_ACC_BITS` (14) bits of x_j (Fasi et
  al. above: tensor cores align and truncate), so each addend loses less than q_j <= u_tc·x_j,
  u_tc = 2^(1 - bits) = 2^-13: the accumulator's truncation, and up to 32 products' each, however
  small the sum (under cancellation x_j is the largest product) and however small the product
  (one far below the accumulator loses its low bits). The bound is
  ``u_tc·T_ij + (lam·sqrt(ceil(K/P)) + 2)·u·(|A||B|)_ij + (3u + u_out)·|ref_ij| + tiny`` with
  T_ij = sum_j' g_j + lam·sqrt(sum_j n_j·g_j^2) (:func:`fp8_accumulator_term`), g_j =
  2^floor(log2 m_j) >= q_j / u_tc, m_j = max(|s_{j-1}|, max_k|a_ik|·max_k|b_kj|) >= x_j to first
  order (s_{j-1} the exact partial sum since the last promotion, the maxima over the step's k), j'
  the steps that are not the first of their interval: the accumulator's truncations, one sign
  within an interval, summed; the
  products', of their products' signs, independent and symmetric for independent symmetric
  inputs (the normal and uniform draws), by Hoeffding's inequality with lam's probability
  2·exp(-lam²/2) (n_j <= 32 products in step j). Its cost: K/32 thin products, as many flops as the
  reference, and a few passes over the output per step. Then the float32 additions of the
  ceil(K/P) promoted partial sums (Higham–Mary, as above), two float32 scale products per
  partial sum (block scaling applies the scales at each promotion) and in the epilogue, and the
  rounding of C (u_out = 2^-8 for a bf16 C, else 0). The earlier rule, u·sum_j |s_j| with 13
  bits (truncation of the running sum only), failed a correct H100 output at err/tol 1.0013
  (129x257x208, row scaling) and a correct model by up to 40x at K = 16 under cancellation. A
  kernel that declares P = 128 but never promotes carries truncations of running sums some
  sqrt(K/128) times larger than the bound allows for, and fails from K of a few thousand
  (docs/trust.md#fp8; tests at K = 16384 and 65536 in tests/test_fp8.py, an honest P = 128
  passes, both emulated). Limits: the model is fitted to public measurements and one H100
  element, not NVIDIA's specification; inputs with correlated signs (all positive) make the
  products' truncations coherent, up to 32·q_j a step, which the Hoeffding term does not cover;
  the bound is 7-25x the modelled error, about 2^-8 of |C| where tightest, so a float32 C rounded
  to bf16 and declared float32 is not caught.

The whole GEMM contract (issue 43: alpha, beta·C0, bias, activation, a bf16/fp16 C, leading
dimensions, strided batches) is verified by :mod:`gemmlab.stages.verify_fused`: the float64
reference of the fused operation, and this bound carried through it (the pre-activation's float32
operations, the activation's conditioning sup|f'| and evaluation, half an ulp of the output type),
batch by batch, with the padding of C checked untouched.

Method (``verify.method``): ``full`` compares every element; ``sampled`` (chosen by ``auto`` when
M*N*K exceeds ``verify.max_full``) compares ``verify.sample`` random whole rows and whole
columns against float64 and runs Freivalds' check on the whole product (C·x vs A·(B·x) for random
±1 vectors x, R. Freivalds, "Probabilistic machines can use less running time", IFIP 1977), with
the bound summed along each row as tolerance.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Callable

import numpy as np

from gemmlab.contract import hookspecs
from gemmlab.stages import hostpass

FIRST_MISMATCHES = 8
U_FP32 = 2.0**-24
#: rounding of the inputs the bound still covers, per precision: 0 everywhere, since the reference
#: multiplies the operands as the hardware sees them (TF32: rounded by :func:`round_tf32`)
U_INPUT = {"fp32": 0.0, "tf32": 0.0, "bf16": 0.0, "fp16": 0.0, "fp8": 0.0}
# accumulation unit per precision: float32 (2^-24); tensor cores (TF32, BF16, FP16) align and
# truncate inside each MMA instead of rounding (Fasi, Higham, Mikaitis, Pranesh, "Numerical
# behavior of NVIDIA tensor cores", PeerJ CS 7:e330, 2021), so they get twice the unit
U_ACC = {"fp32": U_FP32, "tf32": 2 * U_FP32, "bf16": 2 * U_FP32, "fp16": 2 * U_FP32, "fp8": U_FP32}
#: significant bits of its largest addend an FP8 tensor-core step keeps (the accumulator and the
#: step's products aligned to the largest and truncated there: :data:`hookspecs.FP8_MMA_BITS`, the
#: H100's), and the unit of the truncation: each addend loses less than U_FP8_ACC x the largest
FP8_ACC_BITS = hookspecs.FP8_MMA_BITS
U_FP8_ACC = 2.0 ** (1 - FP8_ACC_BITS)
#: rounding unit of the store of C beyond float32's (a bf16 C: 8 significant bits, to nearest)
U_OUT = MappingProxyType({"float32": 0.0, "bfloat16": 2.0**-8})
#: TF32 roundings of the inputs the reference can model (:func:`round_tf32`), in the order an
#: undeclared kernel's output is tried against them (declared by kernels: ``KernelBase.tf32_rounding``)
TF32_ROUNDINGS = hookspecs.TF32_ROUNDINGS
TINY = 1e-30
#: where the after-timing verification may run (:attr:`VerifyOptions.after_timing`)
AFTER_TIMING_WHERE = ("host", "auto", "device")


@dataclass(frozen=True)
class VerifyOptions:
    """Acceptance rule and method (see the module docstring).

    Attributes:
        tolerance: ``auto`` (``exact`` for integer inputs, else ``bound``) | ``bound`` | ``fixed`` | ``exact``.
        atol, rtol: the ``fixed`` rule's constants (seed: 3e-4 each).
        safety: lam of the ``bound`` rule.
        method: ``auto`` | ``full`` | ``sampled``.
        max_full: ``auto`` uses ``full`` while M*N*K <= this.
        sample: rows and columns compared in ``sampled`` mode; trials: Freivalds vectors.
        after_timing: where the after-timing verification runs (:data:`AFTER_TIMING_WHERE`):
            ``host`` (fresh inputs drawn here, C checked by :func:`check`); ``auto`` (default), on
            the device above :data:`gemmlab.stages.device_check.DEVICE_MIN_MNK` where the problem
            allows it (kernels/device_check.cu: fresh inputs drawn there, the same rule there,
            counts brought back), else here; ``device``, there at every size it allows. ``auto`` is
            the default since the device path passed on an H100 (session 31: the exploit corpus
            29 of 29 with ``device`` at every size; the after-timing phase at 4096^3 1.5% (fp32)
            and 0.4% (bf16) of the point's rest against 12.9% and 14.6% on the host, not counting
            the device check's one compile per process and problem kind, 1.5-2.0 s, cached on disk).
    """

    tolerance: str = "auto"
    atol: float = 3e-4
    rtol: float = 3e-4
    safety: float = 8.0
    method: str = "auto"
    max_full: int = 2**37
    sample: int = 256
    trials: int = 2
    after_timing: str = "auto"


def round_tf32(x: np.ndarray, rounding: str) -> np.ndarray:
    """``x`` (float32 array) rounded to TF32 (1 sign, 8 exponent, 10 explicit mantissa bits, kept in
    float32 storage): ``rn`` to nearest with ties to even (PTX ``cvt.rn.tf32.f32``), ``rna`` to
    nearest with ties away from zero (PTX ``cvt.rna.tf32.f32``),
    ``rz`` toward zero (the low 13 mantissa bits dropped: what a tensor core does with float32
    bits it reads as TF32), ``none`` unchanged. Finite inputs only (gemmlab draws no inf/NaN).

    Raises:
        ValueError: an unknown ``rounding``.
    """
    if rounding == "none":
        return x
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    if rounding == "rna":  # sign-magnitude bits: adding half an ulp of TF32 rounds the magnitude half away
        bits = bits + np.uint32(0x1000)
    elif rounding == "rn":  # half an ulp less one, plus the kept part's last bit: ties go to even
        bits = bits + np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))
    elif rounding != "rz":
        raise ValueError(f"tf32 rounding: one of {TF32_ROUNDINGS}, got {rounding!r}")
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


@dataclass(frozen=True)
class Fp8Bound:
    """What the ``precision=fp8`` bound needs beyond the inputs (module docstring).

    Attributes:
        accumulation: the kernel's declared ``fp8_accumulation``: ``"float32"``, a promotion
            interval in elements of K (a multiple of 32), or None (undeclared: no promotion, P = K).
        c_dtype: the type of C, ``float32`` | ``bfloat16``.
    """

    accumulation: int | str | None = None
    c_dtype: str = "float32"

    def interval(self, K: int) -> int | None:
        """The promotion interval P the bound assumes (None: float32 accumulation, no tensor-core term)."""
        if self.accumulation == "float32":
            return None
        return K if self.accumulation is None else min(int(self.accumulation), K)

    def record(self, K: int) -> dict:
        """The verdict's ``fp8`` field: the accumulation assumed and the model's constants."""
        P = self.interval(K)
        return {"accumulation_declared": self.accumulation,
                "assumed": "float32 accumulation" if P is None else
                (f"tensor-core accumulator (each {hookspecs.FP8_MMA_K} of K: the addends aligned to the largest, "
                 f"truncated at {FP8_ACC_BITS} bits of it), "
                 + ("never promoted (P = K)" if P >= K else f"promoted to float32 every {P} of K")),
                "acc_bits": FP8_ACC_BITS, "c_dtype": self.c_dtype}


#: a float64's sign and exponent bits: x & this is 2^floor(log2 x) for a positive normal x
_EXPONENT_BITS = np.uint64(0xFFF0000000000000)


#: output elements of one tile of :func:`fp8_accumulator_term`'s work arrays (5 float64 arrays of
#: 256 KB: they stay in a core's cache across the K/32 steps instead of streaming M x N from DRAM)
TERM_TILE_ELEMENTS = 1 << 15
#: rows of A per tile of :func:`fp8_accumulator_term`
TERM_TILE_ROWS = 256


def step_maxima(x: np.ndarray, step: int, axis: int) -> np.ndarray:
    """The max of |x| over each ``step`` consecutive elements along ``axis`` (1: A's K, giving
    (M, ceil(K/step)); 0: B's K, giving (ceil(K/step), N)): ``np.maximum.reduceat(np.abs(x), starts,
    axis)`` with starts = 0, step, 2 step, ...; a max is exact, so the reshaped form taken where
    ``step`` divides K gives the same values."""
    K = x.shape[axis]
    if K and K % step == 0:
        if axis == 1:
            return np.abs(x).reshape(x.shape[0], K // step, step).max(axis=2)
        return np.abs(x).reshape(K // step, step, x.shape[1]).max(axis=1)
    if not K:
        return np.zeros((x.shape[0], 0)) if axis == 1 else np.zeros((0, x.shape[1]))
    return np.maximum.reduceat(np.abs(x), np.arange(0, K, step), axis=axis)


def fp8_accumulator_term(a: np.ndarray, b: np.ndarray, interval: int, safety: float,
                         step: int = hookspecs.FP8_MMA_K) -> np.ndarray:
    """T (M, N) float64 with |tensor-core error| <= :data:`U_FP8_ACC` * T per element of A @ B, for an
    accumulator promoted every ``interval`` elements of K (module docstring). ``a`` (M, K) and ``b``
    (K, N) float64 (dequantised); ``safety`` the bound's lam.

    At step j (``step`` = 32 elements of K: FP8 wgmma's K) the hardware aligns the accumulator and
    the n_j <= 32 products to the largest of them, x_j, and truncates each toward zero below
    q_j = U_FP8_ACC * 2^floor(log2 x_j) (:func:`gemmlab.contract.plugin_utils.fp8_mma_step`).
    Bounded first-order, with x_j <= m_j = max(|s_{j-1}|, max_k|a_ik| * max_k|b_kj|) (s_{j-1} the
    exact partial sum since the last promotion, the maxima over the step's k), so q_j <=
    U_FP8_ACC * g_j, g_j = 2^floor(log2 m_j):

    - the accumulator's truncation, one sign within an interval: sum_j g_j over the steps that are
      not the first of their interval (the first adds to zero);
    - the products' truncations, each below q_j and of its product's sign, independent and
      symmetric for independent symmetric inputs (the normal and uniform draws): at most
      ``safety`` * sqrt(sum_j n_j g_j^2) but with probability 2 exp(-safety^2 / 2) (Hoeffding).

    T is their sum. Cost: K/step products of (M, step) by (step, N) (the reference's flops) and a
    few passes over M x N per step. The output is computed in tiles of at most
    :data:`TERM_TILE_ROWS` rows and :data:`TERM_TILE_ELEMENTS` elements, in threads
    (:func:`gemmlab.stages.hostpass.threads`), each tile's 32-deep products on one BLAS thread
    (issue 42: the whole-array form streamed five M x N float64 arrays from memory at each of the
    K/32 steps, and OpenBLAS split each small product over its threads: ~10 s at 64 x 7168 x 16384
    on the fake GPU's host, 1.3 CPU s now): every element is computed by the same operations in the
    same order as in one tile."""
    M, K = a.shape
    N = b.shape[1]
    out = np.zeros((M, N))
    if not M or not N or not K:
        return out
    starts = range(0, K, step)
    rows = min(M, TERM_TILE_ROWS)
    cols = min(N, max(step, TERM_TILE_ELEMENTS // rows))
    row_starts, col_starts = range(0, M, rows), range(0, N, cols)
    a_max = hostpass.each_of(row_starts, lambda r: step_maxima(a[r:r + rows], step, 1))  # (rows, K/step) each
    b_max = hostpass.each_of(col_starts, lambda c0: step_maxima(b[:, c0:c0 + cols], step, 0))  # (K/step, cols)

    def tile(job: tuple[int, int]) -> None:
        i, j_col = job
        r, c0 = row_starts[i], col_starts[j_col]
        a_rows, a_steps, b_cols, b_steps = a[r:r + rows], a_max[i], b[:, c0:c0 + cols], b_max[j_col]
        acc, squares, s, m, t = (np.zeros((a_rows.shape[0], b_cols.shape[1])) for _ in range(5))
        bits = m.view(np.uint64)
        for j, k0 in enumerate(starts):
            np.multiply(a_steps[:, j:j + 1], b_steps[j:j + 1], out=m)
            if k0 % interval:
                np.abs(s, out=t)
                np.maximum(m, t, out=m)
            np.bitwise_and(bits, _EXPONENT_BITS, out=bits)  # 2^floor(log2 m): the grid's power of two
            if k0 % interval:
                acc += m
                s += a_rows[:, k0:k0 + step] @ b_cols[k0:k0 + step]
            else:  # a new partial sum: the accumulator starts from zero
                np.matmul(a_rows[:, k0:k0 + step], b_cols[k0:k0 + step], out=s)
            np.multiply(m, m, out=m)
            m *= min(step, K - k0)
            squares += m
        np.sqrt(squares, out=squares)
        squares *= safety
        acc += squares
        out[r:r + a_rows.shape[0], c0:c0 + b_cols.shape[1]] = acc

    # every tile in the pool, its 32-deep products on one BLAS thread
    hostpass.each_of([(i, j) for i in range(len(row_starts)) for j in range(len(col_starts))], tile, one_blas=True)
    return out


def fp8_weights(K: int, interval: int, step: int = hookspecs.FP8_MMA_K) -> np.ndarray:
    """w_k (K,) with sum_j |s_{j-1}| <= sum_k w_k |a_k b_k| over the steps j of
    :func:`fp8_accumulator_term`: the steps after k's own through the end of its promotion interval
    (Freivalds' row bound of the fp8 term, :func:`fp8_row_bound`)."""
    k = np.arange(K)
    end = np.minimum((k // interval + 1) * interval, K)  # one past the interval's last element
    return ((end - 1) // step - k // step).astype(np.float64)


def fp8_row_bound(a64: np.ndarray, b64: np.ndarray, interval: int, safety: float, abs_b_rows: np.ndarray,
                  step: int = hookspecs.FP8_MMA_K, rows: int = 1024) -> np.ndarray:
    """An upper bound (M,) of the row sums sum_n T_in of :func:`fp8_accumulator_term` from thin
    products only (Freivalds' check): with g_j <= m_j <= |s_{j-1}| + max|a| max|b| and the square
    root of a sum of squares at most the sum, T <= (1 + safety sqrt(step)) sum_j m_j, whose row sums are
    |A| (w * |B| 1) (:func:`fp8_weights`) plus a_max (b_max 1) (the steps' maxima). ``abs_b_rows``
    (K,): |B| 1. ``a64`` read in blocks of ``rows`` rows (never a whole |A| copy)."""
    M, K = a64.shape
    starts = np.arange(0, K, step)
    if not M or not K:
        return np.zeros(M)
    b_max_rows = step_maxima(b64, step, 0) @ np.ones(b64.shape[1])  # (K/step,)
    w_b = fp8_weights(K, interval, step) * abs_b_rows
    out = np.concatenate([np.abs(a64[r:r + rows]) @ w_b
                          + np.maximum.reduceat(np.abs(a64[r:r + rows]), starts, axis=1) @ b_max_rows
                          for r in range(0, M, rows)])
    return (1 + safety * math.sqrt(step)) * out


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float64 product ``A @ B`` of float32 arrays (M, K) and (K, N); returns (M, N) float64."""
    return a.astype(np.float64) @ b.astype(np.float64)


@functools.lru_cache(maxsize=1)
def _products_slot(key: tuple) -> dict:
    return {}


def products_for(a: np.ndarray, b: np.ndarray) -> dict:
    """The ``products`` dict of :func:`check` for the logical inputs ``a`` and ``b``: the one the
    previous call gave when it was for these very arrays (identity; the dict holds them, so their
    ids name no other arrays while it lives), else a new one (the previous is dropped). Read-only
    inputs kept between points (:func:`gemmlab.stages.inputs.rounded_draw`: a shape's row- and
    column-major B of one precision) share their float64 products: the verification of the
    second point compares against the same references without computing them again (issue 41).
    Everything a product depends on besides the inputs is in its key (:func:`_check`)."""
    slot = _products_slot((id(a), id(b)))
    if slot.get(("inputs",), (None, None))[0] is not a or slot[("inputs",)][1] is not b:
        slot.clear()
        slot[("inputs",)] = (a, b)
    return slot


def clear_cache() -> None:
    """Forget the products :func:`products_for` keeps (see :func:`gemmlab.clear_caches`)."""
    _products_slot.cache_clear()


def resolve_rule(options: VerifyOptions, distribution: str) -> str:
    """The tolerance rule actually applied."""
    if options.tolerance != "auto":
        return options.tolerance
    return "exact" if distribution == "integers" else "bound"


def tolerance(rule: str, options: VerifyOptions, ref: np.ndarray, abs_ab: np.ndarray | None, K: int,
              precision: str = "fp32", fp8: Fp8Bound | None = None,
              fp8_term: np.ndarray | None = None) -> np.ndarray | float:
    """Per-element allowed |C - ref| for ``rule`` (ref and abs_ab float64, same shape); for the fp8
    bound also ``fp8`` and ``fp8_term`` (:func:`fp8_accumulator_term` of the assumed interval; None
    for float32 accumulation)."""
    if rule == "exact":
        return 0.0
    if rule == "fixed":
        return options.atol + options.rtol * np.abs(ref)
    if precision == "fp8":
        fp8 = fp8 or Fp8Bound()
        return _fp8_abs_coefficient(options, K, fp8) * abs_ab + (
            U_FP8_ACC * fp8_term if fp8_term is not None else 0.0) + _fp8_ref_coefficient(fp8) * np.abs(ref) + TINY
    scale, ref_coefficient = bound_coefficients(options, K, precision)
    return scale * abs_ab + ref_coefficient * np.abs(ref) + TINY


def bound_coefficients(options: VerifyOptions, K: int, precision: str = "fp32") -> tuple[float, float]:
    """The ``bound`` rule's factors of (|A||B|)_ij and of |ref_ij| for a precision other than fp8:
    ``(lam * sqrt(K) * (u_acc + 2 u_input), u)`` (module docstring); the device check
    (:mod:`gemmlab.stages.device_check`) applies the same two numbers."""
    return options.safety * math.sqrt(K) * (U_ACC[precision] + 2 * U_INPUT[precision]), U_FP32


def draw_sample(seed: int, M: int, N: int, options: VerifyOptions) -> tuple[np.ndarray, np.ndarray, list]:
    """The sampled method's choices for ``seed``: ``(rows, cols, xs)``, ``options.sample`` sorted
    distinct rows of M and columns of N (all where fewer) and ``options.trials`` random ±1 float64
    vectors of length N for Freivalds' check, from ``numpy.random.default_rng(seed + 1)`` in that
    order (the host and the device check draw the same ones)."""
    rng = np.random.default_rng(seed + 1)
    rows = np.sort(rng.choice(M, size=min(M, options.sample), replace=False))
    cols = np.sort(rng.choice(N, size=min(N, options.sample), replace=False))
    return rows, cols, [rng.choice([-1.0, 1.0], size=N) for _ in range(options.trials)]


def _fp8_abs_coefficient(options: VerifyOptions, K: int, fp8: Fp8Bound) -> float:
    """The fp8 bound's factor of |A||B|: float32 additions of the ceil(K/P) promoted partial sums
    (all K products for float32 accumulation) and two scale products per partial sum."""
    P = fp8.interval(K)
    additions = K if P is None else -(-K // P)
    return (options.safety * math.sqrt(additions) + 2) * U_FP32


def _fp8_ref_coefficient(fp8: Fp8Bound) -> float:
    """The fp8 bound's factor of |ref|: the epilogue's two scale products and float32 rounding, and
    the rounding of a bf16 C."""
    return 3 * U_FP32 + U_OUT.get(fp8.c_dtype, 0.0)


@dataclass
class Verdict:
    """Outcome of :func:`check`.

    Attributes:
        passed: every compared element within tolerance, none NaN/inf (and Freivalds passed).
        max_abs_error: max |C - ref| over finite compared outputs.
        max_rel_error: max |C - ref| / |ref| over finite compared outputs with ref != 0.
        max_error_over_tolerance: max |C - ref| / tolerance (> 1 fails; inf for exact mismatches).
        mismatches: compared elements failing the rule (NaN and inf included).
        nan_outputs: NaN outputs in the whole C (most likely never written by the kernel).
        first_mismatches: up to 8 ``[row, col, got, expected]``.
        rule, method: what was applied; atol/rtol/safety: its constants.
    """

    passed: bool
    max_abs_error: float
    max_rel_error: float
    mismatches: int
    nan_outputs: int
    atol: float
    rtol: float
    first_mismatches: list = field(default_factory=list)
    rule: str = "fixed"
    method: str = "full float64 reference, every element"
    max_error_over_tolerance: float = 0.0
    safety: float | None = None
    freivalds: dict | None = None
    tf32: dict | None = None
    fp8: dict | None = None
    grouped: dict | None = None
    epilogue: dict | None = None

    def record(self) -> dict:
        """JSON-ready fields for ``result.json`` (non-finite floats as strings)."""
        out = asdict(self)
        for key in ("max_abs_error", "max_rel_error", "max_error_over_tolerance"):
            if not np.isfinite(out[key]):
                out[key] = str(out[key])
        if out["freivalds"] and not np.isfinite(out["freivalds"]["max_error_over_tolerance"]):
            out["freivalds"]["max_error_over_tolerance"] = str(out["freivalds"]["max_error_over_tolerance"])
        if out["tf32"]:
            out["tf32"]["tried"] = {k: v if np.isfinite(v) else str(v) for k, v in out["tf32"]["tried"].items()}
        else:
            del out["tf32"]
        if not out["fp8"]:
            del out["fp8"]
        if out["grouped"] is None:
            del out["grouped"]
        if out["epilogue"] is None:
            del out["epilogue"]
        return out

    def summary(self) -> str:
        """One line: pass/fail, max errors, mismatches and NaN count."""
        word = "PASS" if self.passed else "FAIL"
        text = (f"{word} ({self.rule}): max abs err {self.max_abs_error:.3g}, max rel err {self.max_rel_error:.3g}, "
                f"max err/tol {self.max_error_over_tolerance:.3g}, {self.mismatches} mismatches, "
                f"{self.nan_outputs} NaN outputs")
        if self.first_mismatches:
            r, c, got, exp = self.first_mismatches[0]
            text += f"; first at (row {r}, col {c}): got {got}, expected {exp}"
        if self.freivalds and not self.freivalds["passed"]:
            text += "; Freivalds check failed"
        if self.tf32:
            text += f"; TF32 inputs rounded {self.tf32['rounding']}"
        if self.grouped:
            detail = grouped_summary(self)
            text += f"; {detail}" if detail else ""
        padding = (self.epilogue or {}).get("padding") or {}
        if padding.get("written"):
            r, col = padding["first_written"][0]
            text += (f"; {padding['written']} of {padding['elements']} padding elements of C (past N in a row, or "
                     f"between batches: they must stay untouched) were written, first at (row {r}, col {col}) of "
                     "the buffer")
        return text


def _compare(c: np.ndarray, ref: np.ndarray, tol, rows=None, cols=None):
    c64 = c.astype(np.float64)
    finite = np.isfinite(c64)
    err = np.abs(c64 - ref)
    bad = ~finite | (err > tol)
    tol_arr = np.broadcast_to(np.asarray(tol, dtype=np.float64), err.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / tol_arr)
    ratio = np.where(finite, ratio, np.inf)
    nz = finite & (ref != 0)
    r_idx, c_idx = np.nonzero(bad)
    rr = rows[r_idx] if rows is not None else r_idx
    cc = cols[c_idx] if cols is not None else c_idx
    first = [[int(r), int(k), float(c[i, j]) if np.isfinite(c[i, j]) else str(c[i, j]), float(ref[i, j])]
             for r, k, i, j in zip(rr[:FIRST_MISMATCHES], cc[:FIRST_MISMATCHES],
                                   r_idx[:FIRST_MISMATCHES], c_idx[:FIRST_MISMATCHES])]
    return {"mismatches": int(bad.sum()),
            "max_abs": float(err[finite].max()) if finite.any() else (float("inf") if err.size else 0.0),
            "max_rel": float((err[nz] / np.abs(ref[nz])).max()) if nz.any() else 0.0,
            "max_ratio": float(ratio.max()) if ratio.size else 0.0, "first": first}


#: host memory one verification block may use (float64 reference, |A||B|, tolerance, errors ...)
BLOCK_BYTES = 256 << 20
FREIVALDS_BLOCK_BYTES = 4 << 20  # float64 rows of C per Freivalds block (:func:`_freivalds`)
#: bytes of host memory per output element of one block, counted from the temporaries of
#: tolerance() and _compare() (measured with tracemalloc in tests/test_verify_memory.py)
BYTES_PER_ELEMENT = 96


def block_rows(M: int, N: int, block_bytes: int = BLOCK_BYTES) -> int:
    """Rows per verification block so that one block uses at most ``block_bytes`` (at least 1 row)."""
    return max(1, min(M, block_bytes // max(1, N * BYTES_PER_ELEMENT)))


def _merge(parts: list[dict]) -> dict:
    """Combine the _compare results of disjoint blocks (in row order)."""
    return {"mismatches": sum(p["mismatches"] for p in parts), "max_abs": max(p["max_abs"] for p in parts),
            "max_rel": max(p["max_rel"] for p in parts), "max_ratio": max(p["max_ratio"] for p in parts),
            "first": [f for p in parts for f in p["first"]][:FIRST_MISMATCHES]}


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray, options: VerifyOptions, distribution: str = "normal",
          precision: str = "fp32", seed: int = 0, products: dict | None = None,
          block_bytes: int = BLOCK_BYTES, tf32_rounding: str | None = None, fp8: Fp8Bound | None = None,
          grouped: hookspecs.Grouped | None = None) -> Verdict:
    """Verify ``c`` (M, N) float32 against the float64 product of ``a`` (M, K) and ``b`` (K, N),
    as :func:`_check` does; for ``precision="tf32"`` the operands are first rounded to TF32 the
    way ``tf32_rounding`` says (:func:`round_tf32`), or, when it is None (undeclared), by each of
    :data:`TF32_ROUNDINGS` in turn until the whole output passes (the verdict of the first that
    passes, else of the one with the fewest mismatches; its ``tf32`` field names the rounding
    used and the max error/tolerance of each tried). For ``precision="fp8"``, ``a`` and ``b`` are the
    dequantised operands (float64) and ``fp8`` says the kernel's declared accumulation and C's type
    (None: undeclared accumulation, float32 C); ``c`` may be bfloat16.

    ``grouped`` (issue 44): ``c`` is a grouped problem's C as stored, ``a`` and ``b`` the packed
    logical operands of :func:`gemmlab.stages.inputs.make_grouped_inputs`; every group is checked
    alone and the rows outside the groups must be untouched (:func:`check_grouped`).

    Raises:
        ValueError: inconsistent shapes, or an unknown ``tf32_rounding``.
    """
    if grouped is not None:
        return check_grouped(c, a, b, grouped, options, distribution, precision, seed, products, tf32_rounding)
    if precision == "fp8":
        fp8 = fp8 or Fp8Bound()
        verdict = _check(c, a, b, options, distribution, precision, seed, products, block_bytes, fp8)
        verdict.fp8 = fp8.record(a.shape[1])
        return verdict
    if precision != "tf32":
        return _check(c, a, b, options, distribution, precision, seed, products, block_bytes)

    def one(rounding: str) -> Verdict:
        cache = None if products is None else products.setdefault(("tf32", rounding), {})
        return _check(c, round_tf32(a, rounding), round_tf32(b, rounding), options, distribution, precision, seed,
                      cache, block_bytes)

    return tf32_verdict(one, tf32_rounding)


def tf32_verdict(check_rounding: Callable[[str], "Verdict"], tf32_rounding: str | None) -> "Verdict":
    """The TF32 rule's verdict over the input roundings: the declared one alone, else each of
    :data:`TF32_ROUNDINGS` in turn until one passes (``check_rounding(rounding)`` verifies against
    the float64 product of the inputs so rounded); the passing verdict, or the closest failing one
    (fewest mismatches, then smallest error over tolerance), with ``tf32`` = the rounding taken,
    the declared one and each tried one's max error over tolerance. Shared by the host check, the
    fused-epilogue check (:mod:`gemmlab.stages.verify_fused`) and the device check
    (:mod:`gemmlab.stages.device_check`).

    Raises:
        ValueError: ``tf32_rounding`` is not one of :data:`TF32_ROUNDINGS`.
    """
    if tf32_rounding is not None and tf32_rounding not in TF32_ROUNDINGS:
        raise ValueError(f"tf32 rounding: one of {TF32_ROUNDINGS}, got {tf32_rounding!r}")
    tried, verdicts = {}, []
    for rounding in (tf32_rounding,) if tf32_rounding else TF32_ROUNDINGS:
        v = check_rounding(rounding)
        tried[rounding] = v.max_error_over_tolerance
        verdicts.append((v, rounding))
        if v.passed:
            break
    verdict, rounding = next(((v, r) for v, r in verdicts if v.passed),
                             min(verdicts, key=lambda vr: (vr[0].mismatches, vr[0].max_error_over_tolerance)))
    verdict.tf32 = {"rounding": rounding, "declared": tf32_rounding, "tried": tried}
    return verdict


def _check(c: np.ndarray, a: np.ndarray, b: np.ndarray, options: VerifyOptions, distribution: str = "normal",
           precision: str = "fp32", seed: int = 0, products: dict | None = None,
           block_bytes: int = BLOCK_BYTES, fp8: Fp8Bound | None = None) -> Verdict:
    """Verify ``c`` (M, N) float32 against the float64 product of ``a`` (M, K) and ``b`` (K, N).

    The full method works in blocks of rows (:func:`block_rows`: at most ``block_bytes`` of
    host memory for the float64 work arrays, about 96 bytes per element of a block), so its
    memory is bounded whatever M*N is; the verdict is the same as for one block.
    ``products`` is a dict shared between calls on the same inputs (a kernel and its baseline):
    when the whole product fits in one block, the float64 products ``A @ B`` and ``|A| @ |B|``
    are computed once and kept there (larger ones are recomputed per call, block by block).

    Raises:
        ValueError: inconsistent shapes.
    """
    (M, K), (K2, N) = a.shape, b.shape
    if K != K2 or c.shape != (M, N):
        raise ValueError(f"shapes do not match: A {a.shape}, B {b.shape}, C {c.shape}")
    rule = resolve_rule(options, distribution)
    method = options.method
    if method == "auto":
        method = "full" if M * N * K <= options.max_full else "sampled"
    need_abs = rule == "bound"
    # the fp8 bound's tensor-core term for the assumed promotion interval (None: float32 accumulation)
    interval = fp8.interval(K) if (fp8 is not None and need_abs) else None
    step = block_rows(M, N, block_bytes * BYTES_PER_ELEMENT // (BYTES_PER_ELEMENT + (48 if interval else 0)))
    term_key = ("fp8_term", interval, options.safety)

    def partial(a_rows, b_cols):
        return fp8_accumulator_term(a_rows, b_cols, interval, options.safety) if interval else None

    nan_outputs = sum(hostpass.each_of(range(0, M, step), lambda r: int(np.isnan(c[r:r + step]).sum())))
    if method == "full":
        if step >= M:
            cache = products if products is not None else {}
            if ("ref" not in cache or need_abs and "abs_ab" not in cache  # float64 copies only on a miss
                    or interval and term_key not in cache):
                a64, b64 = hostpass.as_float64(a), hostpass.as_float64(b)  # astype's values, in threads
            if "ref" not in cache:
                cache["ref"] = a64 @ b64
            if need_abs and "abs_ab" not in cache:
                cache["abs_ab"] = hostpass.absolute(a64) @ hostpass.absolute(b64)
            if interval and term_key not in cache:
                cache[term_key] = partial(a64, b64)
            ref = cache["ref"]
            tol = tolerance(rule, options, ref, cache["abs_ab"] if need_abs else None, K, precision, fp8,
                            cache.get(term_key))
            parts = [_compare(c, ref, tol)]
        else:
            a64, b64 = hostpass.as_float64(a), hostpass.as_float64(b)
            abs_b = hostpass.absolute(b64) if need_abs else None
            blocks = []
            for r in range(0, M, step):
                rows = np.arange(r, min(r + step, M))
                ref = a64[r:r + step] @ b64
                tol = tolerance(rule, options, ref, np.abs(a64[r:r + step]) @ abs_b if need_abs else None, K, precision,
                                fp8, partial(a64[r:r + step], b64))
                blocks.append(_compare(c[r:r + step], ref, tol, rows=rows))
                del ref, tol
            parts = [_merge(blocks)]
        described = "full float64 reference, every element"
        if step < M:
            described += f" (in blocks of {step} rows)"
        freivalds = None
    else:
        # what depends on the inputs only is computed once for a kernel and its baseline (``products``)
        cache = products if products is not None else {}
        key = ("sampled", seed, options.sample, options.trials, rule, options.safety, options.atol, options.rtol, fp8,
               precision)  # precision: the bound's factors (products_for shares the dict between points)
        if key not in cache:
            a64, b64 = hostpass.as_float64(a), hostpass.as_float64(b)
            rows, cols, xs = draw_sample(seed, M, N, options)
            others = np.setdiff1d(np.arange(M), rows)  # columns are checked outside the sampled rows: no double count
            ref_r = a64[rows] @ b64
            ref_c = (a64 @ b64[:, cols])[others]  # no copy of A's other rows
            abs_b = hostpass.absolute(b) if need_abs else None  # float32: the bound's |A||B| term (:func:`abs_product`)
            cache[key] = {
                "rows": rows, "cols": cols, "others": others, "ref_r": ref_r, "ref_c": ref_c,
                "tol_r": tolerance(rule, options, ref_r, abs_product(np.abs(a[rows]), abs_b) if need_abs else None, K,
                                   precision, fp8, partial(a64[rows], b64)),
                "tol_c": tolerance(rule, options, ref_c,
                                   abs_product(hostpass.absolute(a), abs_b[:, cols])[others] if need_abs else None,
                                   K, precision, fp8,
                                   partial(a64[others], b64[:, cols]) if interval else None),
                "freivalds": _freivalds_sides(a64, b64, rule, options, K, precision, xs, N, fp8)}
        s = cache[key]
        rows, cols, others = s["rows"], s["cols"], s["others"]
        parts = [_compare(c[rows], s["ref_r"], s["tol_r"], rows=rows),
                 _compare(c[np.ix_(others, cols)], s["ref_c"], s["tol_c"], rows=others, cols=cols)]
        freivalds = _freivalds(c, s["freivalds"], rule, options, step)
        described = (f"sampled: {len(rows)} whole rows and {len(cols)} whole columns vs float64, plus "
                     f"Freivalds' check of the whole product with {options.trials} random ±1 vectors")
    mismatches = sum(p["mismatches"] for p in parts)
    passed = mismatches == 0 and nan_outputs == 0 and (freivalds is None or freivalds["passed"])
    return Verdict(passed=passed, max_abs_error=max(p["max_abs"] for p in parts),
                   max_rel_error=max(p["max_rel"] for p in parts), mismatches=mismatches, nan_outputs=nan_outputs,
                   atol=options.atol, rtol=options.rtol, first_mismatches=[f for p in parts for f in p["first"]][:8],
                   rule=rule, method=described, max_error_over_tolerance=max(p["max_ratio"] for p in parts),
                   safety=options.safety if rule == "bound" else None, freivalds=freivalds)


def abs_product(abs_a: np.ndarray, abs_b: np.ndarray) -> np.ndarray:
    """An upper bound of the exact (|A||B|) (float64, m x n) from float32 |A| (m x K) and |B| (K x n):
    the float32 product (BLAS sgemm: half the work of dgemm and no float64 copies) divided by
    (1 - gamma_{K+1}), gamma_n = n*u/(1 - n*u), u = 2^-24: a float32 sum of K products of
    non-negative terms is at least (1 - gamma_{K+1}) times the exact one (Higham, "Accuracy and
    Stability of Numerical Algorithms", 2nd ed., §3.1, Lemma 3.4), so the bound's |A||B| term is
    never under-estimated. Float64 products where K*u >= 1/4 (K >= 2^22) or the inputs are not
    float32.
    """
    K = abs_a.shape[1]
    n = K + 1
    if abs_a.dtype != np.float32 or abs_b.dtype != np.float32 or n * U_FP32 >= 0.25:
        return abs_a.astype(np.float64) @ abs_b.astype(np.float64)
    gamma = n * U_FP32 / (1 - n * U_FP32)
    return (abs_a @ abs_b).astype(np.float64) / (1 - gamma)


#: elements of |A| per block of :func:`_abs_times` (1024 whole rows of a 2048 x 128256 B were a 1 GB copy)
ABS_BLOCK_ELEMENTS = 1 << 20


def _abs_times(a64: np.ndarray, v: np.ndarray) -> np.ndarray:
    """|A| @ v (float64) in blocks of at most 1024 whole rows and about :data:`ABS_BLOCK_ELEMENTS`
    elements (a power of two rows: the blocks of 1024 rows this took before are unions of them), in
    threads (:func:`gemmlab.stages.hostpass.each_of`, one BLAS thread each): never a whole |A| copy.
    Each row's sum is a dot product of that row with v; BLAS may order its additions by the row's
    place in a block and by its own threads' split, so a sum may differ from before in its last
    bits (it is a bound's row sum, ~1e-16 relative)."""
    if not len(a64):
        return np.zeros(0)
    rows = 1 << min(10, max(0, (ABS_BLOCK_ELEMENTS // max(1, a64.shape[1])).bit_length() - 1))  # divides 1024
    return np.concatenate(hostpass.each_of(range(0, a64.shape[0], rows),
                                           lambda r: np.abs(a64[r:r + rows]) @ v, one_blas=True))


def _freivalds_sides(a64, b64, rule, options, K, precision, xs, N, fp8: Fp8Bound | None = None) -> dict:
    """What Freivalds' check needs of the inputs alone for the random ±1 vectors ``xs``
    (:func:`draw_sample`): each right-hand side A·(B·x), and for the ``bound`` rule the row sums of
    the bound's |A||B| term (fp8: plus the tensor-core term's row sums bounded by
    :func:`fp8_row_bound`) and the factor of |C|'s row sums."""
    sides = {"xs": xs, "rhs": [a64 @ (b64 @ x) for x in xs], "N": N, "ref_coefficient": U_FP32}
    if rule == "bound":
        abs_b_rows = _abs_times(b64, np.ones(N))
        if precision == "fp8":
            fp8 = fp8 or Fp8Bound()
            P = fp8.interval(K)
            sides["bound_rows"] = _fp8_abs_coefficient(options, K, fp8) * _abs_times(a64, abs_b_rows)
            if P is not None:
                sides["bound_rows"] += U_FP8_ACC * fp8_row_bound(a64, b64, P, options.safety, abs_b_rows)
            sides["ref_coefficient"] = _fp8_ref_coefficient(fp8)
        else:
            sides["bound_rows"] = bound_coefficients(options, K, precision)[0] * _abs_times(a64, abs_b_rows)
    return sides


def _freivalds(c, sides: dict, rule, options, step: int | None = None) -> dict:
    """Freivalds' check C·x vs A·(B·x) for the vectors of ``sides`` (:func:`_freivalds_sides`); C
    is read in blocks of ``step`` rows (never a whole float64 copy)."""
    M, N = c.shape
    # blocks of at most FREIVALDS_BLOCK_BYTES of float64 (cache-sized: the copy, the products with
    # every x at once and the |C| row sums read it from cache, not DRAM), and never above ``step``
    step = max(1, min(step or M, FREIVALDS_BLOCK_BYTES // (8 * max(1, N))))
    xs = np.column_stack(sides["xs"])
    lhs_all = np.empty((M, xs.shape[1]))
    abs_c_rows = np.empty(M)

    def block(r: int) -> None:  # the blocks in threads (issue 41: C of 1024 x 128256 is 131 M elements)
        c64 = c[r:r + step].astype(np.float64)
        lhs_all[r:r + step] = c64 @ xs
        abs_c_rows[r:r + step] = np.abs(c64, out=c64).sum(axis=1)

    hostpass.each_of(range(0, M, step), block, one_blas=True)
    return freivalds_compare(lhs_all, abs_c_rows, sides, rule, options)


def freivalds_compare(lhs_all: np.ndarray, abs_c_rows: np.ndarray, sides: dict, rule: str,
                      options: VerifyOptions) -> dict:
    """Freivalds' verdict from C's side, ``lhs_all`` (M, trials) = C·x per vector and ``abs_c_rows``
    (M,) = |C|·1 (float64; non-finite where C holds NaN or inf: then it fails), and the inputs'
    side ``sides`` (:func:`_freivalds_sides`: ``rhs``, ``N``, ``bound_rows``, ``ref_coefficient``);
    the tolerance per row is the rule's summed along the row. Returns ``{"passed", "trials",
    "max_error_over_tolerance"}`` (the verdict's ``freivalds`` field)."""
    N = sides["N"]
    # a NaN or inf in C makes its row's |C| sum non-finite
    passed = bool(np.isfinite(abs_c_rows).all())
    lhs = list(np.asarray(lhs_all).T)
    worst = 0.0
    for rhs, lhs_x in zip(sides["rhs"], lhs):
        if rule == "exact":
            tol = np.zeros_like(lhs_x)
        elif rule == "fixed":
            tol = options.atol * N + options.rtol * abs_c_rows
        else:
            tol = sides["bound_rows"] + sides.get("ref_coefficient", U_FP32) * abs_c_rows
        err = np.abs(lhs_x - rhs)
        if not np.isfinite(err).all() or (err > tol + TINY).any():
            passed = False
        with np.errstate(divide="ignore", invalid="ignore"):
            worst = max(worst, float(np.nanmax(np.where(tol > 0, err / tol, np.where(err > 0, np.inf, 0.0)))))
    return {"passed": passed, "trials": options.trials, "max_error_over_tolerance": worst}


# --- grouped GEMM (issue 44) ----------------------------------------------------------------------

def untouched_writes(grouped: hookspecs.Grouped, c: np.ndarray) -> dict:
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
            first += [[int((start + i) // cols), int((start + i) % cols)] for i in bad[:FIRST_MISMATCHES - len(first)]]
    return {"elements": total, "written": written, "first_written": first[:FIRST_MISMATCHES]}


def check_grouped(c: np.ndarray, a: np.ndarray, b: np.ndarray, grouped: hookspecs.Grouped, options: VerifyOptions,
                  distribution: str = "normal", precision: str = "fp32", seed: int = 0, products: dict | None = None,
                  tf32_rounding: str | None = None) -> Verdict:
    """Verify a grouped problem's C (as stored) group by group (module docstring).

    Each non-empty group g is checked by :func:`gemmlab.stages.verify.check` with seed ``seed + g``
    (its sampled rows and columns) and its own float64 products cached in ``products[("group", g)]``;
    empty groups have nothing to check. The verdict passes when every group passes and no element
    outside the groups was written; its ``grouped`` field lists per group M_g, N_g, K_g, mismatches,
    NaN outputs, max error over tolerance and the method, and the untouched check
    (:func:`untouched_writes`); ``first_mismatches`` give rows and columns of C as stored (``general``: of C_g).

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
        c_g, a_g, b_g = grouped.operands(c, a, b, g)
        cache = None if products is None else products.setdefault(("group", g), {})
        v = check(c_g, a_g, b_g, options, distribution, precision, seed + g, products=cache,
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
    verdict = Verdict(
        passed=not failed and untouched["written"] == 0,
        max_abs_error=max((v.max_abs_error for v in vs), default=0.0),
        max_rel_error=max((v.max_rel_error for v in vs), default=0.0),
        mismatches=sum(v.mismatches for v in vs), nan_outputs=sum(v.nan_outputs for v in vs),
        atol=options.atol, rtol=options.rtol,
        first_mismatches=[f for v in vs for f in v.first_mismatches][:FIRST_MISMATCHES],
        rule=first_rule.rule if first_rule else resolve_rule(options, distribution),
        method=f"per group ({grouped.G} groups, {len(vs)} non-empty): " + ("; ".join(methods) or
                                                                           "no product to check, C untouched"),
        max_error_over_tolerance=max((v.max_error_over_tolerance for v in vs), default=0.0),
        safety=first_rule.safety if first_rule else None)
    verdict.grouped = {"kind": grouped.kind, "groups": groups, "failed_groups": failed[:FIRST_MISMATCHES],
                       "failed_group_count": len(failed), "untouched": untouched}
    return verdict


def grouped_summary(verdict: Verdict) -> str:
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
