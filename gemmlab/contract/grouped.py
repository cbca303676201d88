"""Grouped GEMM for mixture-of-experts layers (issue 44): the problem description plugins see.

A grouped problem is G products C_g = A_g · B_g (float32 accumulation, C float32) in one launch,
one per expert g, described by :class:`Grouped` (``Problem.grouped``). The layouts follow the
field's three forms (DeepGEMM's "contiguous" and "masked" MoE layouts, CUTLASS's "grouped" GEMM
with per-problem shapes):

- ``contiguous``: the tokens are sorted by expert; A is (R x K), row-major, where expert g's M_g
  rows start at row ``offsets[g]`` and each M_g is rounded up to ``align`` rows (R = offsets[G]);
  the padding rows after each expert's M_g rows are filled with NaN. B is G x K x N (``layout.b=row``,
  row-major per expert, stored (G·K) x N) or G x N x K (``layout.b=col``, nn.Linear's weight per
  expert, stored (G·N) x K). C is R x N, row-major, expert g's rows at the same offsets as in A.
  Device arrays: ``group_offsets`` (int32, G + 1: the padded row offsets, offsets[0] = 0) and
  ``group_m`` (int32, G: the valid rows M_g).
- ``masked``: A is G x M_max x K (stored (G·M_max) x K): expert g's slot holds M_g valid rows
  (``group_m[g]``, int32, G), then NaN rows; B as for contiguous; C is G x M_max x N.
- ``general``: G independent problems (M_g, N_g, K_g). A, B and C are each one buffer holding every
  group's matrix packed (row-major A_g M_g x K_g; B_g K_g x N_g row-major or N_g x K_g for
  ``layout.b=col``; C_g M_g x N_g row-major) at element offsets aligned to :data:`ALIGN_ELEMENTS`;
  between two groups' C_g lie at least :data:`GAP_ELEMENTS` elements no kernel may write, and the
  gaps of A and B hold NaN. Device arrays: ``group_dims`` (int32, G x 3: M_g, N_g, K_g) and
  ``group_offsets`` (int64, G x 3: the element offsets of A_g, B_g, C_g from the A, B, C pointers,
  the "pointer arrays" as offsets: a kernel forms ``A + offsets[g][0]``; library baselines build
  real pointer arrays from them).

The contract on C (``untouched``): a kernel writes exactly the valid rows of every group. The
padding rows (contiguous), the masked rows (masked) and the gaps (general) must keep the NaN fill
the core wrote before the launch, bit for bit; verification checks it and a written element fails
the point (``wrong_result``), as do guard bands around the whole buffers (``out_of_bounds``).

FLOPs are sum_g 2·M_g·N_g·K_g (padding and masked rows not counted). The plain shape of a grouped
point (``shape=[M, N, K]``) is (sum_g M_g, N, K): M the routed rows of the step, N and K the
experts' (for ``general`` with ``grouped.shapes``: the largest N_g and K_g).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

#: ``grouped.kind`` values (null: a plain GEMM)
GROUPED_KINDS = ("contiguous", "masked", "general")
#: the device arrays (inputs, int32/int64, shared by every backend) each kind has, by name
GROUP_ARRAYS = MappingProxyType({"contiguous": ("group_offsets", "group_m"), "masked": ("group_m",),
                                 "general": ("group_dims", "group_offsets")})
#: every name a kernel argument ``Matrix(name)`` may give a group array
GROUP_ARRAY_NAMES = ("group_offsets", "group_m", "group_dims")
#: the ``general`` kind's matrices start at element offsets that are multiples of this (256 B of
#: float32, 128 B of bf16: 16-byte aligned rows for vector loads and TMA)
ALIGN_ELEMENTS = 64
#: at least this many elements lie between two ``general`` groups' C_g (the gap must stay untouched)
GAP_ELEMENTS = 64


def _round_up(x: int, to: int) -> int:
    return -(-x // to) * to


@dataclass(frozen=True)
class Grouped:
    """One grouped problem (module docstring).

    Attributes:
        kind: ``contiguous`` | ``masked`` | ``general``.
        sizes: M_g per group (G ints >= 0; rows of A_g and C_g that hold tokens).
        N, K: the experts' N and K (``contiguous``/``masked``; ``general`` without ``nk``).
        nk: ``general`` only: (N_g, K_g) per group, or () (every group N x K).
        align: ``contiguous``: each M_g rounded up to a multiple of it (rows); ``masked``:
            M_max rounded up to it.
        m_max: ``masked``: rows per expert slot (>= every M_g); 0: max M_g rounded up to ``align``.
        layout_b: ``row`` (B_g K x N row-major) | ``col`` (B_g stored N x K).
        generator, seed, exponent: how ``sizes`` were made (for the record): ``list`` (given) or a
            generator's name (:mod:`gemmlab.stages.grouped`), its routing seed and Zipf exponent.
    """

    kind: str
    sizes: tuple[int, ...]
    N: int
    K: int
    nk: tuple[tuple[int, int], ...] = ()
    align: int = 128
    m_max: int = 0
    layout_b: str = "row"
    generator: str = "list"
    seed: int = 0
    exponent: float = 0.0

    # --- per-group figures -----------------------------------------------------------------------
    @property
    def G(self) -> int:
        """Number of groups (experts)."""
        return len(self.sizes)

    def shape(self, g: int) -> tuple[int, int, int]:
        """(M_g, N_g, K_g) of group ``g``."""
        n, k = self.nk[g] if self.nk else (self.N, self.K)
        return self.sizes[g], n, k

    @property
    def shapes(self) -> tuple[tuple[int, int, int], ...]:
        """(M_g, N_g, K_g) of every group."""
        return tuple(self.shape(g) for g in range(self.G))

    @property
    def flops(self) -> int:
        """sum_g 2 M_g N_g K_g: the work of the valid rows only (padding and masked rows not counted)."""
        return sum(2 * m * n * k for m, n, k in self.shapes)

    @property
    def traffic(self) -> tuple[int, int, int]:
        """(flops, elements of A and B a kernel must read, elements of C it must write): A_g of every
        group, B_g of the non-empty groups only (an empty expert's weights need not be read), C_g."""
        shapes = self.shapes
        ab = sum(m * k + (n * k if m else 0) for m, n, k in shapes)
        return self.flops, ab, sum(m * n for m, n, _ in shapes)

    @property
    def slot_rows(self) -> int:
        """``masked``: rows per expert slot (M_max); ``contiguous``: the largest padded M_g; ``general``: max M_g."""
        if self.kind == "masked":
            return self.m_max or max(_round_up(max(self.sizes), self.align), self.align)
        if self.kind == "contiguous":
            return max(_round_up(m, self.align) for m in self.sizes)
        return max(self.sizes)

    @property
    def row_offsets(self) -> tuple[int, ...]:
        """``contiguous``/``masked``: the first row of each group in A and C, and the rows in all
        (G + 1 ints); contiguous: padded M_g cumulated; masked: g · M_max."""
        if self.kind == "masked":
            return tuple(g * self.slot_rows for g in range(self.G + 1))
        if self.kind != "contiguous":
            raise ValueError("row_offsets: the general kind has element offsets (element_offsets)")
        out = [0]
        for m in self.sizes:
            out.append(out[-1] + _round_up(m, self.align))
        return tuple(out)

    @property
    def element_offsets(self) -> tuple[tuple[int, int, int], ...]:
        """``general``: the element offsets of (A_g, B_g, C_g) from the start of A, B, C, and as the
        last entry the elements of each buffer in all (G + 1 triples)."""
        out, a, b, c = [], 0, 0, 0
        for m, n, k in self.shapes:
            out.append((a, b, c))
            a = _round_up(a + m * k, ALIGN_ELEMENTS)
            b = _round_up(b + n * k, ALIGN_ELEMENTS)
            c = _round_up(c + m * n + GAP_ELEMENTS, ALIGN_ELEMENTS)
        out.append((max(a, 1), max(b, 1), max(c, 1)))
        return tuple(out)

    # --- storage -----------------------------------------------------------------------------------
    def stored_shape(self, matrix: str) -> tuple[int, int]:
        """(rows, cols) of ``matrix`` as stored (cols contiguous): "A", "B", "C" or a group array.

        Raises:
            ValueError: a name this kind has no buffer for.
        """
        G = self.G
        if matrix in GROUP_ARRAY_NAMES:
            if matrix not in GROUP_ARRAYS[self.kind]:
                raise ValueError(f"grouped.kind={self.kind} has no {matrix} array; it has "
                                 f"{', '.join(GROUP_ARRAYS[self.kind])}")
            if self.kind == "general":
                return (G, 3)
            return (1, G + 1) if matrix == "group_offsets" else (1, G)
        if self.kind == "general":
            total = self.element_offsets[-1]
            return (1, total["ABC".index(matrix)]) if matrix in ("A", "B", "C") else self._bad(matrix)
        rows = self.row_offsets[-1]
        if matrix == "A":
            return (rows, self.K)
        if matrix == "B":
            return (G * self.K, self.N) if self.layout_b == "row" else (G * self.N, self.K)
        if matrix == "C":
            return (rows, self.N)
        return self._bad(matrix)

    def _bad(self, matrix: str):
        raise ValueError(f"matrix must be A, B, C or one of {', '.join(GROUP_ARRAYS[self.kind])}, got {matrix!r}")

    def array_dtype(self, matrix: str) -> str:
        """Element type of a group array: int32, or int64 for ``general``'s ``group_offsets``."""
        return "int64" if (self.kind == "general" and matrix == "group_offsets") else "int32"

    def arrays(self) -> dict[str, np.ndarray]:
        """The group arrays' host images (name -> C-contiguous int32/int64 array of
        :meth:`stored_shape`), in the order of :data:`GROUP_ARRAYS`."""
        out = {}
        for name in GROUP_ARRAYS[self.kind]:
            if name == "group_m":
                arr = np.array([self.sizes], dtype=np.int32)
            elif name == "group_dims":
                arr = np.array(self.shapes, dtype=np.int32).reshape(self.G, 3)
            elif self.kind == "general":
                arr = np.array(self.element_offsets[:-1], dtype=np.int64).reshape(self.G, 3)
            else:
                arr = np.array([self.row_offsets], dtype=np.int32)
            out[name] = np.ascontiguousarray(arr)
        return out

    def valid_rows(self, g: int) -> slice:
        """``contiguous``/``masked``: the rows of A and C that hold group ``g``'s tokens."""
        start = self.row_offsets[g]
        return slice(start, start + self.sizes[g])

    def operands(self, c: np.ndarray, a: np.ndarray, b: np.ndarray, g: int):
        """Group ``g``'s (C_g (M_g, N_g), A_g (M_g, K_g), B_g (K_g, N_g)): views into C as stored and
        into the packed logical A and B of :func:`gemmlab.stages.inputs.make_grouped_inputs` (A as
        stored; B (G, K, N), or for ``general`` flat with each B_g K_g x N_g row-major at its offset)."""
        m, n, k = self.shape(g)
        if self.kind == "general":
            oa, ob, oc = self.element_offsets[g]
            return (c.reshape(-1)[oc:oc + m * n].reshape(m, n), a.reshape(-1)[oa:oa + m * k].reshape(m, k),
                    b.reshape(-1)[ob:ob + k * n].reshape(k, n))
        rows = self.valid_rows(g)
        return c[rows], a[rows], b[g]

    def untouched_ranges(self) -> tuple[tuple[int, int], ...]:
        """The element ranges [start, stop) of C as stored, flat, that no kernel may write: the
        padding rows after each group's M_g rows (contiguous), the masked rows of each slot
        (masked), the gaps between and after the ``general`` groups' C_g; empty ranges left out."""
        out = []
        if self.kind == "general":
            offsets = self.element_offsets
            for g, (m, n, _) in enumerate(self.shapes):
                out.append((offsets[g][2] + m * n, offsets[g + 1][2]))
        else:
            offsets = self.row_offsets
            for g, m in enumerate(self.sizes):
                out.append(((offsets[g] + m) * self.N, offsets[g + 1] * self.N))
        return tuple((a, b) for a, b in out if b > a)

    def record(self) -> dict:
        """The record's ``grouped`` field: kind, G, group sizes, how they were made, the storage."""
        out = {"kind": self.kind, "G": self.G, "sizes": list(self.sizes), "generator": self.generator,
               "routed_rows": sum(self.sizes), "empty_groups": sum(1 for m in self.sizes if m == 0),
               "flops": self.flops, "layout_b": self.layout_b}
        if self.generator == "zipf":
            out.update(seed=self.seed, exponent=self.exponent)
        elif self.generator == "all_but_one_empty":
            out["seed"] = self.seed
        if self.kind == "general":
            out["shapes"] = [list(s) for s in self.shapes]
        else:
            out.update(N=self.N, K=self.K, align=self.align, stored_rows=self.row_offsets[-1])
            if self.kind == "masked":
                out["m_max"] = self.slot_rows
        out["untouched_elements"] = sum(b - a for a, b in self.untouched_ranges())
        return out
