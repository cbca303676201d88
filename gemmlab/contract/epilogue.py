"""The whole GEMM contract beyond C = A·B (issue 43, items 1 and 2): alpha, beta·C0, bias,
activation, output type, leading dimensions and strided batches, as plugins see them.

One batch b of an :class:`Epilogue` problem computes, for every (m, n) of the M x N output::

    z[m, n]   = alpha · sum_k A_b[m, k] · B_b[k, n]  +  beta · C0_b[m, n]  +  bias[n]
    C_b[m, n] = round_out(act(z[m, n]))

- ``alpha`` (a nonzero float32 value) and ``beta`` (float32; ``beta != 0`` reads the input C0, an
  M x N matrix per batch stored like C: same type, ``ldc`` and batch stride, drawn like A and B).
- ``bias``: ``none``, or one row vector of N values shared by every row and every batch, stored as
  float32 (``float32``) or in the input precision's storage type (``input``: bf16 / fp16; float32
  for fp32 and tf32).
- ``act`` (``activation``, after the bias): ``none``; ``relu`` max(z, 0); ``gelu_tanh``
  0.5·z·(1 + tanh(sqrt(2/pi)·(z + 0.044715·z³))) (the tanh approximation: cuBLASLt's GELU,
  PyTorch's ``approximate="tanh"``); ``gelu_erf`` 0.5·z·(1 + erf(z / sqrt 2)) (PyTorch's default);
  ``silu`` z / (1 + exp(-z)).
- ``round_out``: the output type (``Problem.out``: ``float32``, ``bf16``, ``fp16``), one rounding
  to nearest even of the float32 value.

Storage (every matrix row-major as :meth:`Problem.stored_shape` says, with the leading dimension
as its row pitch): a stored (rows x cols) operand has row r at element ``r · ld`` (``lda``,
``ldb``, ``ldc`` >= the tight extent ``cols``; 0 in :class:`Epilogue` means tight). Batch b's
matrix starts ``b · stride`` elements after batch 0's (``stride_a``, ``stride_b``, ``stride_c``:
None is tight, rows · ld; 0 shares one A or B between all batches, e.g. one weight matrix; a
stride is a multiple of its ld, so every buffer is a 2-D image of ld columns). The elements of a
buffer that belong to no batch's matrix (the columns past ``cols`` in each row, the rows between
batches) are padding: inputs hold NaN there (a kernel that reads padding computes NaN) and must
keep it; C's padding keeps the NaN fill the core writes before every launch, bit for bit
(verification checks both, like the guard bands around every buffer).

What a kernel runs is declared on its spec, :class:`EpilogueSupport` (``KernelBase.epilogue``):
the default :data:`PLAIN` is today's contract (alpha = 1, beta = 0, no bias, no activation, a
float32 C, tight leading dimensions, one batch), and the core refuses every other problem for that
kernel in one line before anything compiles (:func:`refusal`), naming the field and what the
kernel allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from types import MappingProxyType

#: ``epilogue.activation`` values (applied after the bias)
ACTIVATIONS = ("none", "relu", "gelu_tanh", "gelu_erf", "silu")
#: ``epilogue.bias`` values: none, a float32 vector, or one in the input precision's storage type
BIAS_KINDS = ("none", "float32", "input")
#: output (C) types (``epilogue.out``, :attr:`Problem.out`) and their storage names
OUTPUTS = MappingProxyType({"float32": "float32", "bf16": "bfloat16", "fp16": "float16"})
#: the extra input buffers an epilogue problem may have: ``C0`` (beta != 0) and ``bias``
EPILOGUE_MATRICES = ("C0", "bias")
#: the batch-count limit (a kernel's gridDim.z carries it: CUDA's 65535)
MAX_BATCH = 65535
#: sup |act'(z)| over the reals: the factor by which an activation can enlarge an error in z
#: (relu 1; gelu 1.1289 at z = 2.4 (tanh form 1.1290); silu 1.0998 at z = 2.4), rounded up
LIPSCHITZ = MappingProxyType({"none": 1.0, "relu": 1.0, "gelu_tanh": 1.13, "gelu_erf": 1.13, "silu": 1.1})
#: float32's unit roundoff 2^-24 (the unit of :data:`LIBM_ACTIVATION_ERROR`)
_U32 = 2.0**-24
#: the default evaluation error of each activation, c in |f̂(z) - f(z)| <= c·(|z| + |f(z)|) for the
#: float32 value f̂ a kernel computes from a float32 z: float32 libm (tanhf, erff, expf within 2 ulp,
#: a few float32 operations around them: 8u for GELU and SiLU), 0 for none and relu (exact). A kernel
#: with cheaper activations declares its own (:attr:`EpilogueSupport.activation_error`).
LIBM_ACTIVATION_ERROR = MappingProxyType({"none": 0.0, "relu": 0.0, "gelu_tanh": 8 * _U32, "gelu_erf": 8 * _U32,
                                          "silu": 8 * _U32})


@dataclass(frozen=True)
class Epilogue:
    """The fields of a problem beyond C = A·B (module docstring); ``Problem.epilogue``, None when
    every one is at its default (:meth:`plain`).

    Attributes:
        alpha: the product's factor (float, nonzero).
        beta: C0's factor (float; 0: no C0).
        bias: ``none`` | ``float32`` | ``input`` (:data:`BIAS_KINDS`).
        activation: one of :data:`ACTIVATIONS`.
        lda, ldb, ldc: leading dimensions in elements (0: tight, the stored row's length).
        batch: the number of products, 1..:data:`MAX_BATCH`.
        stride_a, stride_b, stride_c: elements between consecutive batches' matrices (None:
            tight, rows · ld; 0: A or B shared by all batches; C never).
    """

    alpha: float = 1.0
    beta: float = 0.0
    bias: str = "none"
    activation: str = "none"
    lda: int = 0
    ldb: int = 0
    ldc: int = 0
    batch: int = 1
    stride_a: int | None = None
    stride_b: int | None = None
    stride_c: int | None = None

    def plain(self) -> bool:
        """Every field at its default (a plain GEMM's contract; ``Problem.epilogue`` is then None)."""
        return self == Epilogue()

    @property
    def fused(self) -> bool:
        """Anything computed beyond A·B: alpha != 1, beta != 0, a bias or an activation."""
        return self.alpha != 1.0 or self.beta != 0.0 or self.bias != "none" or self.activation != "none"

    def record(self) -> dict:
        """The record's ``epilogue`` field: every field (strides None: tight)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class EpilogueSupport:
    """What a kernel runs beyond the plain contract (``KernelBase.epilogue``); the core refuses the
    rest before compiling (:func:`refusal`).

    Attributes:
        alpha_beta: any alpha, and beta != 0 (reading C0); False: alpha = 1 and beta = 0 only.
        bias: the bias kinds besides ``none`` it adds (``float32``, ``input``).
        activations: the activations besides ``none`` it applies.
        outs: the output types (``float32``, ``bf16``, ``fp16``; :data:`OUTPUTS`).
        ld: leading dimensions above the tight ones (``layout.lda/ldb/ldc``).
        batch: more than one batch (``batch.count``), with any strides (0: a shared A or B).
        activation_error: ``(activation, c)`` pairs: the kernel's float32 evaluation of that activation
            is within c·(|z| + |f(z)|) of the exact f(z) (absolute, not in ulps), where it computes the
            activation another way than float32 libm (e.g. ``tanh.approx.f32``, one MUFU operation);
            the bound of :mod:`gemmlab.stages.verify_fused` then allows c instead of
            :data:`LIBM_ACTIVATION_ERROR`'s value (:func:`activation_error`). A declaration needs its
            derivation in the plugin (the instruction's documented error and the arithmetic around
            it); an activation not named keeps libm's.
        rounds_before_epilogue: the kernel may round alpha·A·B + beta·C0 to C's type before it adds
            the bias and applies the activation (a library that runs its epilogue as a second pass
            over a 16-bit C: two roundings to the output type instead of one). The bound of
            :mod:`gemmlab.stages.verify_fused` then covers that one more rounding, for a 16-bit C
            with a bias or an activation only, and the verdict says so. A declaration needs its
            measured cause in the plugin (a library's, never a gemmlab kernel's: those round once).
    """

    alpha_beta: bool = False
    bias: tuple[str, ...] = ()
    activations: tuple[str, ...] = ()
    outs: tuple[str, ...] = ("float32",)
    ld: bool = False
    batch: bool = False
    rounds_before_epilogue: bool = False
    activation_error: tuple[tuple[str, float], ...] = ()


def activation_error(support: EpilogueSupport, act: str) -> float:
    """c of the bound |f̂(z) - f(z)| <= c·(|z| + |f(z)|) on ``act``'s float32 evaluation by a kernel
    that declares ``support``: its :attr:`EpilogueSupport.activation_error` entry for ``act``, else
    float32 libm's (:data:`LIBM_ACTIVATION_ERROR`).

    Raises:
        KeyError: an unknown activation.
    """
    default = LIBM_ACTIVATION_ERROR[act]
    return float(dict(support.activation_error).get(act, default))


#: today's contract, every kernel's default: C = A·B into a fresh float32 C, tight, one batch
PLAIN = EpilogueSupport()
#: everything :class:`Epilogue` can ask for (a kernel with the full epilogue declares this)
FULL = EpilogueSupport(alpha_beta=True, bias=("float32", "input"), activations=ACTIVATIONS[1:],
                       outs=tuple(OUTPUTS), ld=True, batch=True)


def check_support(value) -> str | None:
    """Why ``value`` (a plugin's ``epilogue`` declaration) is malformed, or None (the registry's
    check when the plugin loads)."""
    if not isinstance(value, EpilogueSupport):
        return "it must be an EpilogueSupport (gemmlab.contract.epilogue), e.g. epilogue=EpilogueSupport(outs=(...))"
    if not isinstance(value.bias, tuple) or not set(value.bias) <= set(BIAS_KINDS[1:]):
        return f"its bias must be a tuple of {', '.join(BIAS_KINDS[1:])}"
    if not isinstance(value.activations, tuple) or not set(value.activations) <= set(ACTIVATIONS[1:]):
        return f"its activations must be a tuple of {', '.join(ACTIVATIONS[1:])}"
    if not isinstance(value.outs, tuple) or not value.outs or not set(value.outs) <= set(OUTPUTS):
        return f"its outs must be a non-empty tuple of {', '.join(OUTPUTS)}"
    if not isinstance(value.rounds_before_epilogue, bool):
        return "its rounds_before_epilogue must be True or False"
    pairs = value.activation_error
    if (not isinstance(pairs, tuple) or not all(isinstance(p, tuple) and len(p) == 2 for p in pairs)
            or not all(p[0] in ACTIVATIONS[1:] and isinstance(p[1], (int, float)) and not isinstance(p[1], bool)
                       and math.isfinite(p[1]) and p[1] >= 0 for p in pairs)
            or len({p[0] for p in pairs}) != len(pairs)):
        return (f"its activation_error must be a tuple of (activation, c) pairs, one per activation of "
                f"{', '.join(ACTIVATIONS[1:])}, c a finite float >= 0")
    return None


def _allowed(items: tuple[str, ...]) -> str:
    return ", ".join(("none", *items))


def refusal(support: EpilogueSupport, problem, kernel: str) -> tuple[str, str] | None:
    """``(field, message)`` of the first field of ``problem`` that ``support`` does not cover (the
    kernel named ``kernel``), or None. Output types are checked for every precision but fp8 (whose
    C type is ``fp8.out``, the fp8 kernels' own)."""
    ep = problem.epilogue
    if problem.precision != "fp8" and problem.out not in support.outs:
        return "epilogue.out", (f"kernel {kernel} writes a {' or '.join(support.outs)} C; got epilogue.out="
                                f"{problem.out}")
    if ep is None:
        return None
    if not support.alpha_beta and (ep.alpha != 1.0 or ep.beta != 0.0):
        name = "epilogue.alpha" if ep.alpha != 1.0 else "epilogue.beta"
        value = ep.alpha if ep.alpha != 1.0 else ep.beta
        return name, f"kernel {kernel} computes C = A·B only (alpha=1, beta=0); got {name}={value:g}"
    if ep.bias != "none" and ep.bias not in support.bias:
        return "epilogue.bias", f"kernel {kernel} supports epilogue.bias {_allowed(support.bias)}; got {ep.bias}"
    if ep.activation != "none" and ep.activation not in support.activations:
        return "epilogue.activation", (f"kernel {kernel} supports epilogue.activation "
                                       f"{_allowed(support.activations)}; got {ep.activation}")
    if not support.ld:
        for name, tight in (("lda", problem.tight_ld("A")), ("ldb", problem.tight_ld("B")),
                            ("ldc", problem.tight_ld("C"))):
            value = getattr(ep, name)
            if value and value != tight:
                return f"layout.{name}", (f"kernel {kernel} reads and writes tight matrices only ({name} = {tight} "
                                          f"here); got layout.{name}={value}")
    if not support.batch and ep.batch != 1:
        return "batch.count", f"kernel {kernel} runs one GEMM per launch (batch.count=1); got {ep.batch}"
    return None


def exact_possible(ep: Epilogue | None, out: str, K: int, int_range: int = 4) -> bool:
    """True when integer inputs (magnitudes <= ``int_range``: A, B, C0, bias) keep the fused result
    exact in float32: no activation but relu, a float32 C, integer alpha and beta, and every
    partial value |alpha|·r²·K + |beta|·r + r below 2^24."""
    if out != "float32":
        return False
    if ep is None:
        return True
    if ep.activation not in ("none", "relu"):
        return False
    if ep.alpha != int(ep.alpha) or ep.beta != int(ep.beta):
        return False
    r = int_range
    return abs(ep.alpha) * r * r * K + abs(ep.beta) * r + r < 2**24 and math.isfinite(ep.alpha)
