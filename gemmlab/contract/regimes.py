"""Problem regimes and the plugins' preferences in them: what ``kernel=auto rank=rules`` is made of (issue 41).

``kernel=auto`` with ``kernel.rank=rules`` (the default) orders the candidates of every registered
kernel without knowing any kernel (:func:`gemmlab.dispatch.auto.choose`):

1. :func:`regimes` classifies the problem by its shape alone (no kernel named): the regimes that
   apply, in the order the core tries them, e.g. ``decode`` then ``tensor_core`` for a bf16
   64x4096x4096. Each :class:`Regime` says when it applies in numbers (``text``) and whether a
   candidate must launch at least one block per SM (``min_blocks``).
2. Each kernel states, through :meth:`gemmlab.contract.hookspecs.KernelBase.preferences`, what it
   would run in a regime of this problem: :class:`Preference` objects, each a parameter dict (sized
   by the plugin for the problem and the device's SM count) with a ``rank`` and a line saying why.
   The plugin owns that knowledge: its tile sizing, and where it stands against the other kernels
   in that regime (the rank scale below), with the measurements behind it in its docstrings.
3. The core sorts the regime's preferences of every kernel that supports the problem's precision and
   layouts by (rank, registry order, the plugin's own order), checks each as any config is checked
   (known parameters, ``check_problem``, ``min_blocks``) and takes the first that passes; a regime
   with none passing hands over to the next; after the last, every kernel with its defaults in
   registry order (``any``). Library kernels never take part.

**Rank scale** (lower first; one regime's ranks compare across kernels): 0-99 the regime's own
candidates (:data:`RANK_FIRST`), 100-199 the tensor-core candidates that follow a regime's own ones
in the tensor-core precisions (:data:`RANK_TENSOR_CORE`). A drop-in plugin that states nothing
takes part through ``any`` and through ``kernel.rank=model`` (its :meth:`candidates`).

The thresholds of the regimes (a decode shape's M, the tiny product, the wave tests) are shape
facts of the sm_90 class, measured on the H200 (docs/results/shapes-h200.md); the plugins read the
helpers here (:func:`tiles`, :func:`wave_efficiency`, :func:`fill`) so that a regime and the
preferences inside it use one arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from gemmlab.contract.hookspecs import Problem, Shape

#: a regime's own candidates rank from here (0: first)
RANK_FIRST = 0
#: the tensor-core candidates that follow a regime's own ones (bf16, fp16, tf32) rank from here
RANK_TENSOR_CORE = 100

#: the regimes, in the order they can apply (``any``, the core's last resort, is no regime)
REGIME_NAMES = ("tiny_output", "decode", "tiny", "k_heavy", "large", "medium", "small", "tensor_core")

TINY = 256 ** 3  # "tiny": M*N*K <= 256^3 (launch-bound)
#: ``tiny_output``: at most this many outputs: 16x16 output tiles number at most 16, fewer than a
#: quarter of the 132 SMs, so they fill the GPU only by splitting K ...
TINY_OUTPUT_MAX_MN = 256
#: ... and at least this K (below it a single block's K slices finish in a few dependent round trips)
TINY_OUTPUT_MIN_K = 4096
#: ``decode`` in the 2-byte precisions needs a K long enough to split (64x65536x64 writes C, it streams no B)
DECODE_MIN_K_2BYTE = 1024
#: a data-parallel launch of this tile (128x256, one block per SM) fills the GPU when its tiles use at
#: least :data:`FULL_WAVES` of their waves' block slots
WIDE_TILE = (128, 256)
FULL_WAVES = 0.9

#: the precisions whose regimes are those of float32 CUDA cores, of tensor cores with float32
#: storage (tf32), of 2-byte storage, and of FP8
CUDA_CORE = frozenset({"fp32"})
TWO_BYTE = frozenset({"bf16", "fp16"})


def cdiv(a: int, b: int) -> int:
    """Ceiling of ``a / b`` for positive ints."""
    return -(-a // b)


def tiles(shape: Shape, bm: int, bn: int) -> int:
    """Output tiles of ``bm`` x ``bn`` covering the M x N output."""
    return cdiv(shape[0], bm) * cdiv(shape[1], bn)


def wave_efficiency(shape: Shape, tile: tuple[int, int], sms: int) -> float:
    """Useful share of the block slots of a one-block-per-SM launch of ``tile``: M*N over (whole
    waves x ``sms`` x tile area); 1.0 when the last wave is full and no tile hangs past M or N."""
    n = tiles(shape, *tile)
    return shape[0] * shape[1] / (cdiv(n, sms) * sms * tile[0] * tile[1])


def fill(shape: Shape, sms: int) -> str:
    """Which standard output tile fills the GPU: ``"128x256"`` (at least a wave of 128x256 tiles,
    using >= :data:`FULL_WAVES` of their waves' slots), ``"128x128"`` (at least a wave of 128x128
    tiles), else ``"under_a_wave"``."""
    if tiles(shape, *WIDE_TILE) >= sms and wave_efficiency(shape, WIDE_TILE, sms) >= FULL_WAVES:
        return "128x256"
    return "128x128" if tiles(shape, 128, 128) >= sms else "under_a_wave"


def is_decode(shape: Shape, precision: str) -> bool:
    """Rows times a weight matrix: M <= 16 with N*K >= 2^20, or M <= 64 with N*K >= 2^22 (2-byte
    precisions also K >= :data:`DECODE_MIN_K_2BYTE`)."""
    m, n, k = shape
    rows = (m <= 16 and n * k >= 2 ** 20) or (m <= 64 and n * k >= 2 ** 22)
    return rows and (precision not in TWO_BYTE or k >= DECODE_MIN_K_2BYTE)


def is_k_heavy(shape: Shape, precision: str, sms: int) -> bool:
    """Fewer 64x64 output tiles than SMs and K >= 16*max(M, N) (2-byte precisions: also not tiny)."""
    m, n, k = shape
    return (tiles(shape, 64, 64) < sms and k >= 16 * max(m, n)
            and (precision not in TWO_BYTE or m * n * k > TINY))


@dataclass(frozen=True)
class Regime:
    """One class of problems kernel=auto's rules tell apart.

    Attributes:
        name: one of :data:`REGIME_NAMES`.
        text: when it applies, with the problem's numbers (the record's ``rule`` starts with it).
        min_blocks: a candidate whose launch has fewer blocks (a partial first wave) is passed over.
    """

    name: str
    text: str
    min_blocks: int = 0


@dataclass(frozen=True)
class Preference:
    """What a kernel would run in one regime of one problem (:meth:`KernelBase.preferences`).

    Attributes:
        rank: lower is tried first; compared across kernels inside the regime (module docstring).
        params: parameter values (ints) over the kernel's defaults, sized for the problem.
        why: one line for the record, e.g. ``"stream B once, K split over 8 warps"``.
    """

    rank: float
    params: Mapping[str, int] = field(default_factory=dict)
    why: str = ""

    def __post_init__(self):
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))


def regimes(problem: Problem, sms: int) -> tuple[Regime, ...]:
    """The regimes that apply to ``problem`` on a GPU of ``sms`` SMs, in the order kernel=auto's rules
    try them:

    - ``tiny_output`` (every precision): M*N <= :data:`TINY_OUTPUT_MAX_MN` and K >= :data:`TINY_OUTPUT_MIN_K`;
    - ``decode`` (fp32, tf32, bf16, fp16): :func:`is_decode`;
    - ``tiny`` (fp32, tf32): M*N*K <= :data:`TINY`;
    - ``k_heavy`` (fp32, tf32, bf16, fp16): :func:`is_k_heavy`;
    - fp32 (CUDA cores) then exactly one of ``large`` (a wave of 128x128 tiles, min(M, N) >= 128),
      ``medium`` (a wave of 64x64 tiles, min(M, N) >= 64) - both with ``min_blocks`` = the SM count -
      and ``small``;
    - the tensor-core precisions (tf32, bf16, fp16, fp8) then ``tensor_core``.
    """
    shape = problem.shape
    m, n, k = shape
    p = problem.precision
    out: list[Regime] = []
    if m * n <= TINY_OUTPUT_MAX_MN and k >= TINY_OUTPUT_MIN_K:
        out.append(Regime("tiny_output", f"tiny output, huge K: M*N = {m * n} <= {TINY_OUTPUT_MAX_MN} (at most 16 "
                          f"output tiles of 16x16: < 1/4 of the SMs) and K = {k} >= {TINY_OUTPUT_MIN_K}"))
    if p == "fp8":
        return tuple(out) + (Regime("tensor_core", "tensor cores (fp8)"),)
    if is_decode(shape, p):
        out.append(Regime("decode", f"decode-like: M = {m} <= {16 if m <= 16 else 64} rows against a {k}x{n} weight "
                          "matrix" + (f" (K = {k} >= {DECODE_MIN_K_2BYTE})" if p in TWO_BYTE else "")))
    if p not in TWO_BYTE and m * n * k <= TINY:
        out.append(Regime("tiny", f"tiny: M*N*K = {m * n * k} <= 256^3: launch-bound"))
    if is_k_heavy(shape, p, sms):
        out.append(Regime("k_heavy", f"K-heavy: {tiles(shape, 64, 64)} 64x64 output tiles < {sms} SMs and K = {k} >= "
                          "16*max(M, N): split K"))
    t64, t128 = tiles(shape, 64, 64), tiles(shape, 128, 128)
    if p in CUDA_CORE:
        if t128 >= sms and min(m, n) >= 128:
            out.append(Regime("large", f"large: {t128} 128x128 output tiles >= {sms} SMs", min_blocks=sms))
        elif t64 >= sms and min(m, n) >= 64:
            out.append(Regime("medium", f"medium: {t64} 64x64 output tiles >= {sms} SMs, no full wave of 128x128 "
                              "tiles or min(M, N) < 128", min_blocks=sms))
        else:
            out.append(Regime("small", f"small: {t64} 64x64 output tiles < {sms} SMs or min(M, N) < 64: smaller "
                              "tiles fill more SMs"))
    else:
        out.append(Regime("tensor_core", f"tensor cores: {t128} 128x128 tiles {'>=' if t128 >= sms else '<'} {sms} SMs"))
    return tuple(out)
