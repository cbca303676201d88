"""Built-in kernel ``grouped_ref`` (issue 44): the correctness REFERENCE for grouped GEMM
(kernels/grouped_ref.cu), not a fast kernel: one thread per output of one group, float32 ``fmaf``
over k in order. It runs every grouped kind (contiguous, masked, general; the layouts of
:mod:`gemmlab.contract.grouped`) in fp32, bf16 or fp16 with B row-major or column-major per expert,
so ``experiment=moe`` exercises the pipeline before a fast grouped kernel exists.

:func:`emulate` is the kernel's numpy twin for the fake GPU of the CPU tests: it reads the group
arrays and the operands from device memory at the addresses the kernel gets, in the kernel's own
index arithmetic, and writes only the outputs the kernel writes.
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.grouped import GROUPED_KINDS
from gemmlab.contract.hookspecs import DeviceFacts, Dim, KernelSpec, Launch, Matrix, ParamError, Problem, hookimpl
from gemmlab.contract.plugin_utils import cdiv, require

#: the C++ element type of A and B per precision
ELEMENT = {"fp32": "float", "bf16": "__nv_bfloat16", "fp16": "__half"}


class GroupedReference(KernelSpec):
    """One output per thread in a BX x BY block, one grid z-slice per group (module docstring)."""

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        """A grouped problem (the core refuses a plain one first) and BX*BY within the device's limit.

        Raises:
            ParamError: ``grouped.kind`` for a plain GEMM; ``kernel.BX`` for too many threads.
        """
        if problem.grouped is None:
            raise ParamError("grouped.kind", f"kernel grouped_ref runs grouped GEMMs only ({', '.join(GROUPED_KINDS)})")
        threads = params["BX"] * params["BY"]
        require(threads <= device.max_threads_per_block, "kernel.BX",
                f"BX*BY={threads} threads exceeds the device limit {device.max_threads_per_block}")

    def instance(self, problem: Problem, params) -> str:
        """``grouped_ref_<kind><T, B_COL, BX, BY>``."""
        b_col = "true" if problem.layout_b == "col" else "false"
        return (f"grouped_ref_{problem.grouped.kind}<{ELEMENT[problem.precision]}, {b_col}, "
                f"{params['BX']}, {params['BY']}>")

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        """Grid (ceil(max N_g / BX), ceil(rows per slot / BY), G), block (BX, BY)."""
        gr = problem.grouped
        n_max = max(n for _, n, _ in gr.shapes)
        rows = max(gr.slot_rows, 1)
        return Launch(grid=(cdiv(n_max, params["BX"]), cdiv(rows, params["BY"]), gr.G),
                      block=(params["BX"], params["BY"], 1))

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """Per kind (kernels/grouped_ref.cu): contiguous (A, B, C, group_offsets, group_m, N, K);
        masked (A, B, C, group_m, M_max, N, K); general (A, B, C, group_dims, group_offsets)."""
        kind = problem.grouped.kind
        head = (Matrix("A"), Matrix("B"), Matrix("C"))
        if kind == "contiguous":
            return head + (Matrix("group_offsets"), Matrix("group_m"), Dim("N"), Dim("K"))
        if kind == "masked":
            return head + (Matrix("group_m"), Dim("M_max"), Dim("N"), Dim("K"))
        return head + (Matrix("group_dims"), Matrix("group_offsets"))


def emulate(gpu, args: tuple, kind: str, dtype, b_col: bool, G: int) -> None:
    """The kernel on the fake GPU (tests/fakegpu.py): ``args`` as the core resolves
    :meth:`GroupedReference.arguments` (pointers, then ints), ``dtype`` the numpy storage type of A
    and B, ``G`` the grid's z extent (the kernel has no G argument); group g's outputs computed only
    where the kernel's threads store (row < M_g, col < N_g), products in float64 rounded once to
    float32 (the fake's convention)."""
    dtype = np.dtype(dtype)
    item = dtype.itemsize

    def ints(address, count, width=4):
        return gpu.view(int(address), width * count).view(np.int32 if width == 4 else np.int64)

    def mat(address, offset, rows, cols):
        return gpu.view(int(address) + offset * item, rows * cols * item).view(dtype).reshape(rows, cols)

    def store(address, offset, value):
        rows, cols = value.shape
        gpu.view(int(address) + offset * 4, rows * cols * 4).view(np.float32).reshape(rows, cols)[:] = value

    a_ptr, b_ptr, c_ptr = args[:3]
    for g in range(G):
        if kind == "general":
            m, n, k = (int(x) for x in ints(args[3], 3 * G).reshape(G, 3)[g])
            oa, ob, oc = (int(x) for x in ints(args[4], 3 * G, width=8).reshape(G, 3)[g])
        else:
            n, k = int(args[-2]), int(args[-1])
            m = int(ints(args[4] if kind == "contiguous" else args[3], G)[g])
            r = int(ints(args[3], G + 1)[g]) if kind == "contiguous" else g * int(args[4])
            oa, ob, oc = r * k, g * k * n, r * n
        if m == 0:
            continue
        a = mat(a_ptr, oa, m, k).astype(np.float64)
        b = mat(b_ptr, ob, *((n, k) if b_col else (k, n))).astype(np.float64)
        store(c_ptr, oc, (a @ (b.T if b_col else b)).astype(np.float32))


@hookimpl
def gemmlab_kernels():
    return [GroupedReference(name="grouped_ref", source="grouped_ref.cu", defaults={"BX": 16, "BY": 16},
                             precisions=("fp32", "bf16", "fp16"), layouts=(("row", "row"), ("row", "col")),
                             grouped_kinds=("contiguous", "masked", "general"), sass_classes=("FFMA",),
                             description="correctness reference for grouped GEMM (issue 44; not a fast "
                                         "kernel): one output per thread per group, contiguous/masked/general")]
