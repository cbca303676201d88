"""Test-only FP8 "library" kernels for the fake GPU (tests/fakegpu.py; issue 42): they read the
FP8 operands and the float32 scale buffers from the fake device memory exactly as the plugin
contract lays them out (gemmlab.contract.hookspecs.Problem), dequantise, and emulate an FP8
tensor-core accumulator (:func:`emulate`: each 32 of K one
:func:`~gemmlab.contract.plugin_utils.fp8_mma_step`, the addends aligned to the largest and truncated
at 14 bits of it, the model that reproduces the H100's output) promoted to float32 every 128 of K
(``fp8_emulated``, honest) or never (``fp8_no_promotion``, a mutant that still declares 128). C is
written as the problem's type (float32 or bf16). Loaded with ``plugin_dirs=[tests/plugins_fp8]``;
needs the fake GPU (``HostGpu.current``)."""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import FP8_MMA_BITS, FP8_MMA_K, SCALE_BLOCK, LibraryKernelSpec, Problem, hookimpl
from gemmlab.contract.plugin_utils import fp8_mma_step


def emulate(a: np.ndarray, b: np.ndarray, interval: int, bits: int = FP8_MMA_BITS) -> np.ndarray:
    """An FP8 wgmma accumulator: per 32 of K one :func:`fp8_mma_step` (the step's products and the
    accumulator aligned to the largest of them, each truncated toward zero at ``bits`` bits of it);
    every ``interval`` of K the partial sum is added to a float32 accumulator (``interval`` >= K:
    never). ``a`` (M, K), ``b`` (K, N) float64; returns float32. On the FP8 values, as the hardware
    (8-bit products: those within 2^6 of the largest keep every bit); on dequantised values (the
    scales' 24-bit mantissas in every product) every product loses bits: a pessimistic model, about
    3x the hardware's error at K = 16384, which the bound must cover too."""
    M, K = a.shape
    acc = np.zeros((M, b.shape[1]), dtype=np.float32)
    tc = np.zeros((M, b.shape[1]))
    for k0 in range(0, K, FP8_MMA_K):
        if k0 and k0 % interval == 0:
            acc = (acc + tc.astype(np.float32)).astype(np.float32)
            tc[:] = 0.0
        tc = fp8_mma_step(tc, a[:, k0:k0 + FP8_MMA_K], b[k0:k0 + FP8_MMA_K], bits)
    return (acc + tc.astype(np.float32)).astype(np.float32)


def expand_scales(problem: Problem, stored: np.ndarray, operand: str) -> np.ndarray:
    """The per-element scale of the logical operand (A: M x K, B: K x N) from its stored buffer."""
    M, N, K = problem.M, problem.N, problem.K
    k = np.arange(K) // SCALE_BLOCK
    if problem.scaling == "tensor":
        return np.full((M, K) if operand == "A" else (K, N), float(stored[0, 0]))
    if problem.scaling == "row":
        return np.repeat(stored.reshape(-1, 1), K, axis=1) if operand == "A" else np.repeat(stored.reshape(1, -1), K, 0)
    if operand == "A":  # (L, M): [k // 128, m]
        return stored[k][:, :M].T.astype(np.float64)
    return stored[np.arange(N) // SCALE_BLOCK][:, k].T.astype(np.float64)  # (NB, L4): [n // 128, k // 128]


class EmulatedFp8(LibraryKernelSpec):
    """An FP8 GEMM computed on the fake GPU's memory (module docstring)."""

    promote: int = 128

    def library_version(self) -> str:
        return "emulated FP8 tensor cores (tests/plugins_fp8)"

    def enqueue_problem(self, problem, params, pointers):
        from fakegpu import HostGpu
        from gemmlab.stages.inputs import c_storage_dtype, fp8_dtype
        gpu = HostGpu.current
        M, N, K = problem.M, problem.N, problem.K
        da, db, dc = fp8_dtype(problem.fp8_a), fp8_dtype(problem.fp8_b), c_storage_dtype(problem)

        def read(address, shape, dtype):
            count = shape[0] * shape[1]
            return gpu.view(address, count * np.dtype(dtype).itemsize).view(dtype).reshape(shape)

        def enqueue():
            a = read(pointers.a, (M, K), da).astype(np.float64)          # layout.a=row
            b = read(pointers.b, (N, K), db).astype(np.float64).T        # layout.b=col: K-major
            sa = read(pointers.a_scale, problem.stored_shape("A_scale"), np.float32)
            sb = read(pointers.b_scale, problem.stored_shape("B_scale"), np.float32)
            interval = self.promote if self.promote else K
            if problem.scaling == "block":  # the scales change along K: the dequantised values (pessimistic)
                c = emulate(a * expand_scales(problem, sa, "A"), b * expand_scales(problem, sb, "B"), interval)
            else:  # the tensor cores multiply the FP8 values; the scales come in the epilogue
                scales = expand_scales(problem, sa, "A")[:, :1] * expand_scales(problem, sb, "B")[:1]  # (M, 1) x (1, N)
                c = emulate(a, b, interval) * scales
            read(pointers.c, (M, N), dc)[:] = c.astype(dc)
            gpu.clock_ms += 0.5  # the fake clock: each launch takes 0.5 ms

        return enqueue, lambda: None


class NoPromotion(EmulatedFp8):
    """The mutant: declares promotion every 128 of K but accumulates all of K in the tensor core."""

    promote: int = 0


@hookimpl
def gemmlab_kernels():
    common = dict(source="", defaults={}, precisions=("fp8",), layouts=(("row", "col"),), fp8_accumulation=128)
    return [EmulatedFp8(name="fp8_emulated", description="test: emulated FP8 GEMM, promotes every 128 of K", **common),
            NoPromotion(name="fp8_no_promotion", description="test mutant: declares 128, never promotes", **common)]
