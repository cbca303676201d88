"""Plain helpers for kernel plugins: ceil division, parameter checks, the numpy index model
used by :meth:`gemmlab.contract.hookspecs.KernelSpec.ownership` and the numpy model of an FP8
tensor-core step (:func:`fp8_mma_step`). No CUDA here."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import numpy as np

from gemmlab.contract.hookspecs import (FP8_MMA_BITS, DeviceFacts, Dim, KernelOptions, KernelSpec, Launch, Matrix,
                                        ParamError, Problem, Shape, Value)


#: the precisions of a float32 CUDA-core kernel that also serves ``precision=tf32`` (issue 41): TF32 is
#: allowed, not required, so FFMA on the unrounded float32 inputs is a valid TF32 GEMM; such a kernel
#: declares ``precisions=FP32_TF32, tf32_rounding="none"`` (the reference then rounds no input)
FP32_TF32 = ("fp32", "tf32")


# --- the fused epilogue of the whole GEMM contract (issue 43, kernels/include/gemmlab/fused.cuh) ---

#: the ``-D`` define under which a kernel source compiles its fused-epilogue entries (the plain build
#: never sets it, so its program stays as it was)
EPILOGUE_DEFINE = "GEMMLAB_EPI"
#: ``epilogue.activation`` -> the ACT template argument of gemmlab/fused.cuh
ACTIVATION_CODES = MappingProxyType({"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4})
#: storage type name (``Problem.c_dtype``, ``Problem.bias_dtype``, ``Problem.ab_dtype``) -> its CUDA type
CUDA_TYPES = MappingProxyType({"float32": "float", "bfloat16": "__nv_bfloat16", "float16": "__half"})


def epilogue_template(problem: Problem) -> str:
    """The trailing template arguments ``ACT, BIAS, BETA, BIAS_T, OUT_T`` of a fused-epilogue entry
    (gemmlab/fused.cuh's ``Fused``) for ``problem``: the activation's code, 1 with a bias, 1 with
    beta != 0, the bias's CUDA type (``float`` without a bias) and C's."""
    ep = problem.epilogue
    act, bias, beta = ((ACTIVATION_CODES[ep.activation], int(ep.bias != "none"), int(ep.beta != 0.0))
                       if ep is not None else (0, 0, 0))
    return f"{act}, {bias}, {beta}, {CUDA_TYPES[problem.bias_dtype or 'float32']}, {CUDA_TYPES[problem.c_dtype]}"


def fused_entry(name: str, problem: Problem, *extra: str) -> str:
    """``name`` (``kernel<ARGS>``) for a plain problem; beyond the plain contract its fused twin
    ``kernel_epi<ARGS, *extra, ACT, BIAS, BETA, BIAS_T, OUT_T>`` (:func:`epilogue_template`), the
    entry a source compiles under :data:`EPILOGUE_DEFINE`."""
    if not problem.extended:
        return name
    base, args = name.split("<", 1)
    return f"{base}_epi<{', '.join((args[:-1], *extra, epilogue_template(problem)))}>"


def epilogue_options(problem: Problem) -> KernelOptions:
    """``-DGEMMLAB_EPI`` (:data:`EPILOGUE_DEFINE`) beyond the plain contract, else no option: the
    plain build's program stays as it was."""
    return KernelOptions(defines={EPILOGUE_DEFINE: 1}) if problem.extended else KernelOptions()


def epilogue_arguments(problem: Problem) -> tuple:
    """The fused-epilogue entries' arguments (kernels/tiled.cu's gemm_tiled_epi's order): ``(A, B,
    C, C0 or null, bias or null, M, N, K, lda, ldb, ldc, stride_a, stride_b, stride_c, alpha,
    beta)``; strides in elements (0: an operand shared by every batch), alpha and beta float32."""
    ep = problem.epilogue
    null = Value(0, "int64")
    return (Matrix("A"), Matrix("B"), Matrix("C"), Matrix("C0") if ep is not None and ep.beta != 0.0 else null,
            Matrix("bias") if problem.bias_dtype else null, Dim("M"), Dim("N"), Dim("K"), Dim("lda"), Dim("ldb"),
            Dim("ldc"), Dim("stride_a"), Dim("stride_b"), Dim("stride_c"),
            Value(ep.alpha if ep else 1.0, "float32"), Value(ep.beta if ep else 0.0, "float32"))


def fp8_mma_step(acc: np.ndarray, a: np.ndarray, b: np.ndarray, bits: int = FP8_MMA_BITS) -> np.ndarray:
    """One FP8 tensor-core accumulation step (a ``wgmma ... k32`` on Hopper): ``acc + a @ b`` as the
    hardware adds it. ``acc`` (M, N) float64, the accumulator; ``a`` (M, k) and ``b`` (k, N) float64,
    the step's operands (k <= 32; FP8 values, so each product is exact in float64). Per element the
    k products and the accumulator are aligned to the largest magnitude among them, x_max in
    [2^E, 2^(E+1)), each truncated toward zero to a multiple of q = 2^(E + 1 - ``bits``) and added
    exactly (the sum is returned unrounded: float64 holds it; a float32 register does too). So a
    product far below the accumulator loses its low bits, up to q each, and under cancellation the
    grid is set by the largest product, not by the small sum. Returns (M, N) float64.

    Source: the addends aligned to the largest exponent and truncated is Fasi, Higham, Mikaitis and
    Pranesh's model of earlier tensor cores ("Numerical behavior of NVIDIA tensor cores", PeerJ CS
    7:e330, 2021); 14 bits fits DeepSeek-V3's "around 14 bits" (arXiv:2412.19437, §3.3.2) and
    reproduces the H100's wgmma_fp8 output of issue 42 bit for bit (tests/test_fp8.py), where a
    truncation of the running sum alone, or other widths, did not."""
    p = a.T[:, :, None] * b[:, None, :]  # (k, M, N): the reductions run over the outer axis (fast)
    largest = np.maximum(np.abs(acc), np.abs(p).max(axis=0))
    # 2^E (the sign and exponent bits of the largest), then q = 2^(E + 1 - bits); 1 where all are zero
    q = (largest.view(np.uint64) & np.uint64(0xFFF0000000000000)).view(np.float64) * 2.0 ** (1 - bits)
    q[largest == 0] = 1.0
    inv = 1.0 / q  # a power of two: p * inv is exact, as p / q; the integer sums below are exact too
    p *= inv
    np.trunc(p, out=p)
    return (np.trunc(acc * inv) + p.sum(axis=0)) * q


def cdiv(a: int, b: int) -> int:
    """Ceiling of ``a / b`` for positive ints (number of tiles of size ``b`` covering ``a``)."""
    return -(-a // b)


def count_hits(shape: tuple[int, int], rows, cols, mask=None) -> np.ndarray:
    """Count how often each element of an array of ``shape`` is hit by the index arrays
    ``rows``/``cols`` (broadcast together), keeping only entries where ``mask`` is true.

    Returns an int64 array of ``shape``. Raises IndexError if an unmasked index falls outside
    ``shape`` (an out-of-bounds store or staging write in the modelled kernel).
    """
    return add_hits(np.zeros(shape, dtype=np.int64), rows, cols, mask)


def add_hits(counts: np.ndarray, rows, cols, mask=None) -> np.ndarray:
    """:func:`count_hits` added into ``counts`` (an int64 array, changed in place and returned):
    for a model that sums many parts (tiles of a persistent schedule) into one M x N array
    without a full-size temporary per part.

    Raises IndexError if an unmasked index falls outside ``counts.shape``.
    """
    shape = counts.shape
    rows, cols = np.broadcast_arrays(np.asarray(rows), np.asarray(cols))
    if mask is not None:
        mask = np.broadcast_to(mask, rows.shape)
        rows, cols = rows[mask], cols[mask]
    rows, cols = rows.ravel(), cols.ravel()
    if rows.size and (rows.min() < 0 or cols.min() < 0 or rows.max() >= shape[0] or cols.max() >= shape[1]):
        raise IndexError(f"index outside {shape}: rows {rows.min()}..{rows.max()}, cols {cols.min()}..{cols.max()}")
    if counts.flags.c_contiguous:  # numpy's unbuffered add on flat indices: about 3x the 2-D form's speed
        np.add.at(counts.reshape(-1), rows.astype(np.int64, copy=False) * shape[1] + cols, 1)
    else:
        np.add.at(counts, (rows, cols), 1)
    return counts


def require(condition: bool, field: str, message: str) -> None:
    """Raise :class:`ParamError` ``(field, message)`` unless ``condition`` holds."""
    if not condition:
        raise ParamError(field, message)


def require_block_threads(params: Mapping[str, int], device: DeviceFacts, m: str, n: str, lanes: int = 1) -> int:
    """Require the thread block (BN/``n``)*(BM/``m``)*``lanes`` (``m``, ``n``: the per-thread tile
    TM/TN, or the warp tile WM/WN with ``lanes`` = 32) within the device's threads per block; the
    error (field ``kernel.<m>``) shows each factor with its value, so a large BM or BN is seen as
    the cause as readily as a small TM/TN. Returns the thread count."""
    p = params
    threads = (p["BN"] // p[n]) * (p["BM"] // p[m]) * lanes
    per = f"*{lanes}" if lanes != 1 else ""
    require(threads <= device.max_threads_per_block, f"kernel.{m}",
            f"thread block (BN/{n})*(BM/{m}){per}=({p['BN']}/{p[n]})*({p['BM']}/{p[m]}){per}={threads} threads "
            f"exceeds the device limit {device.max_threads_per_block}; raise {m} or {n}, or lower BM or BN")
    return threads


def require_divides(params: Mapping[str, int], small: str, large: str, rule: str) -> None:
    """Require ``params[large] % params[small] == 0``, naming ``rule`` in the error."""
    require(params[large] % params[small] == 0, f"kernel.{small}",
            f"{rule}: {large}={params[large]} must be a multiple of {small}={params[small]}")


def mma_block_stores(shape, BM: int, BN: int, WM: int, WN: int) -> np.ndarray:
    """Store counts (M, N) of a grid of BM x BN blocks whose (BM/WM) x (BN/WN) warps each own a
    WM x WN warp tile of m16n8 accumulator fragments (the mma.sync C layout: lane l = 4g + t
    holds rows g and g+8, columns 2t and 2t+1 of each 16x8 fragment), stores masked to M x N.

    Used by the ownership models of the mma.sync kernels (``mma_tf32``, ``mma_bf16``); source of
    the fragment layout: PTX ISA, "Matrix Fragments for mma.m16n8k8 / m16n8k16" (C/D, f32).
    """
    M, N = shape[0], shape[1]
    gy, gx = cdiv(M, BM), cdiv(N, BN)
    by, bx, wm, wn, i, j, lane, half, v = np.ix_(range(gy), range(gx), range(BM // WM), range(BN // WN),
                                                range(WM // 16), range(WN // 8), range(32), range(2), range(2))
    row = by * BM + wm * WM + i * 16 + lane // 4 + half * 8
    col = bx * BN + wn * WN + j * 8 + 2 * (lane % 4) + v
    return count_hits((M, N), row, col, (row < M) & (col < N))


def chunk_loads(rows: int, cols: int, vector: int, threads: int) -> np.ndarray:
    """Hit counts (rows, cols) of one tile staged by ``threads`` threads in ``vector``-element
    chunks: chunk c = tid + l*threads covers row c // (cols/vector), columns
    (c % (cols/vector))*vector .. +vector-1 (the cp.async loaders of the tensor-core kernels;
    ``vector`` = 1 is the element-wise path). Like the kernels, each thread runs
    chunks // threads iterations (the kernels static_assert divisibility; check_mma_tiles
    enforces it), so a thread count that does not divide leaves chunks unloaded here."""
    per_row = cols // vector
    chunks = rows * per_row
    tid, l, v = np.ix_(range(threads), range(chunks // threads), range(vector))
    chunk = tid + l * threads
    return count_hits((rows, cols), chunk // per_row, (chunk % per_row) * vector + v)


def check_mma_tiles(params: Mapping[str, int], k_step: int, vector: int, device, shared_bytes: int | None) -> int:
    """Parameter rules shared by the mma.sync kernels (BM, BN, BK, WM, WN, STAGES, MIN_BLOCKS); returns the
    thread count. ``k_step`` is the MMA's K (8 for TF32, 16 for BF16/FP16), ``vector`` the
    elements per 16-byte cp.async chunk (4 or 8), ``shared_bytes`` the dynamic shared memory
    (None: the caller checks it later with :func:`require_shared_memory`, after its own layout rules).

    Raises:
        ParamError: naming the parameter and the rule.
    """
    p = params
    require_divides(p, "WM", "BM", "ownership (warp tiles cover the block tile)")
    require_divides(p, "WN", "BN", "ownership (warp tiles cover the block tile)")
    require(p["WM"] % 16 == 0, "kernel.WM", f"WM={p['WM']} must be a multiple of 16 (m16n8 fragments)")
    require(p["WN"] % 16 == 0, "kernel.WN", f"WN={p['WN']} must be a multiple of 16 (ldmatrix.x4 B pairs)")
    require(p["BK"] % k_step == 0 and p["BK"] % vector == 0, "kernel.BK",
            f"BK={p['BK']} must be a multiple of {max(k_step, vector)} (MMA k-step and 16-byte chunks)")
    require(p["STAGES"] >= 2, "kernel.STAGES", f"STAGES={p['STAGES']} must be at least 2")
    require(p.get("MIN_BLOCKS", 1) in (1, 2, 3, 4), "kernel.MIN_BLOCKS",
            f"MIN_BLOCKS={p.get('MIN_BLOCKS')} must be 1..4 (resident blocks per SM for __launch_bounds__)")
    threads = require_block_threads(p, device, "WM", "WN", 32)
    for tile, size in (("A", p["BM"] * p["BK"]), ("B", p["BK"] * p["BN"])):
        require((size // vector) % threads == 0, "kernel.BK",
                f"load coverage: the {tile} tile's {size // vector} 16-byte chunks are not a multiple of "
                f"the {threads} threads that stage them")
    if shared_bytes is not None:
        require_shared_memory(shared_bytes, device)
    return threads


def require_shared_memory(shared_bytes: int, device) -> None:
    """Require ``shared_bytes`` of dynamic shared memory within the device's opt-in limit per block
    (field ``kernel.STAGES``: the stages multiply it)."""
    require(shared_bytes <= device.max_shared_per_block_optin, "kernel.STAGES",
            f"dynamic shared memory {shared_bytes} bytes exceeds {device.max_shared_per_block_optin}; "
            "lower STAGES, BK or the block tile")


def tiled_threads(params: Mapping[str, int]) -> int:
    """Threads per block of the ``tiled`` scheme: (BN/TN) * (BM/TM)."""
    return (params["BN"] // params["TN"]) * (params["BM"] // params["TM"])


def check_tiled_tiles(params: Mapping[str, int], device: DeviceFacts, a_rows: int | None = None,
                      a_label: str = "A") -> int:
    """The parameter rules of the ``tiled`` scheme (kernels tiled, splitk, cluster_tiled):
    TM divides BM and TN divides BN (ownership), at most the device's threads per block, each
    staged tile a multiple of the thread count (load coverage; A: ``a_rows`` x BK, default BM
    rows, named ``a_label``; B: BK x BN), static shared memory 4*(BM*BK + BK*BN) bytes within the
    device's limit. Returns the thread count.

    Raises:
        ParamError: naming the parameter to change.
    """
    p = params
    require_divides(p, "TM", "BM", "ownership (each output row has exactly one owner)")
    require_divides(p, "TN", "BN", "ownership (each output column has exactly one owner)")
    threads = require_block_threads(p, device, "TM", "TN")
    rows = p["BM"] if a_rows is None else a_rows
    for tile, dims, size in ((a_label, f"{rows}x{p['BK']}", rows * p["BK"]),
                             ("B", f"{p['BK']}x{p['BN']}", p["BK"] * p["BN"])):
        require(size % threads == 0, "kernel.BK",
                f"load coverage: the {tile} tile has {dims}={size} elements, not a multiple of the "
                f"{threads} threads that stage it ((BN/TN)*(BM/TM)=({p['BN']}/{p['TN']})*({p['BM']}/{p['TM']})); "
                f"change BK, or BM, BN, TM, TN")
    smem = 4 * (p["BM"] * p["BK"] + p["BK"] * p["BN"])
    require(smem <= device.max_shared_per_block, "kernel.BK",
            f"static shared memory 4*(BM*BK+BK*BN)={smem} bytes exceeds {device.max_shared_per_block}")
    return threads


def strided_linear(elements: int, threads: int) -> np.ndarray:
    """Linear tile indices (threads, elements // threads) of cooperative staging where thread ``t``
    loads elements ``t, t + threads, t + 2*threads, ...`` (seed 000's tiled loaders: the real-device
    naive vs register-tiled GEMM lab gemmlab grew from)."""
    return np.arange(threads)[:, None] + np.arange(elements // threads)[None, :] * threads


def strided_loads(rows: int, cols: int, threads: int) -> np.ndarray:
    """Hit counts (rows, cols) of a row-major tile staged by :func:`strided_linear`."""
    linear = strided_linear(rows * cols, threads)
    return count_hits((rows, cols), linear // cols, linear % cols)


def thread_tile_stores(shape, params: Mapping[str, int], gx: int, gy: int) -> np.ndarray:
    """Store counts (M, N) of a (gx, gy) grid of BM x BN blocks of (BN/TN, BM/TM) threads, thread
    (tx, ty) owning rows ``ty + i*(BM/TM)`` and columns ``tx + j*(BN/TN)`` of its block (the
    ``tiled`` mapping), stores masked to M x N."""
    p = params
    tx_n, ty_n = p["BN"] // p["TN"], p["BM"] // p["TM"]
    by, bx, ty, tx, i, j = np.ix_(range(gy), range(gx), range(ty_n), range(tx_n), range(p["TM"]), range(p["TN"]))
    row = by * p["BM"] + ty + i * ty_n
    col = bx * p["BN"] + tx + j * tx_n
    return count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N))


def mma_model(shape, params: Mapping[str, int], b_col: bool, vector: int):
    """Ownership model of the mma.sync kernels: stores from :func:`mma_block_stores`, loads of the A
    tile (BM x BK) and the B tile (BK x BN, or BN x BK when ``b_col``) by :func:`chunk_loads` in
    ``vector``-element chunks (1: the element-wise or 4-byte path)."""
    p = params
    threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
    stores = mma_block_stores(shape, p["BM"], p["BN"], p["WM"], p["WN"])
    b_rows, b_cols = (p["BN"], p["BK"]) if b_col else (p["BK"], p["BN"])
    return stores, {"A": chunk_loads(p["BM"], p["BK"], vector, threads),
                    "B": chunk_loads(b_rows, b_cols, vector, threads)}


class MmaSyncKernel(KernelSpec):
    """What the warp-tiled mma.sync kernels (``mma_tf32``, ``mma_bf16``) share: parameters BM, BN,
    BK, WM, WN, STAGES, MIN_BLOCKS; a (BN/BN-tiles, BM-tiles) grid of (BM/WM)*(BN/WN) warps; the
    16-byte cp.async path when both row strides are multiples of ``vector`` elements.

    A subclass sets ``home_precision`` (the precision the v1 ``check``/``entry``/``launch`` use),
    ``k_step`` (the MMA's K), ``vector`` (elements per 16 bytes) and implements
    :meth:`shared_bytes` and :meth:`instance` (with :meth:`template_args`).
    """

    home_precision = "tf32"
    k_step = 8
    vector = 4
    #: row-major B's [k][n] shared tile read by scalar fragment loads (mma_tf32), not ldmatrix: with
    #: SWIZZLE=1 it takes gemmlab/mma_sync.cuh ``smem_offset`` layout 2 (chunks per row a multiple of 8)
    scalar_b_reads = True

    def shared_bytes(self, params: Mapping[str, int], b_col: bool) -> int:
        """Dynamic shared memory of all stages, in bytes."""
        raise NotImplementedError

    def template_args(self, problem: Problem, params) -> str:
        """The kernel template's shared arguments ``BM, BN, BK, WM, WN, STAGES, B_COL, ALIGNED,
        MIN_BLOCKS`` for ``problem`` (B_COL: B column-major; ALIGNED: :meth:`aligned`), then
        ``SWIZZLE`` where it is 1 (so SWIZZLE=0 names the instances of before)."""
        p = params
        b_col = "true" if problem.layout_b == "col" else "false"
        return (f"{p['BM']}, {p['BN']}, {p['BK']}, {p['WM']}, {p['WN']}, {p['STAGES']}, {b_col}, "
                f"{'true' if self.aligned(problem) else 'false'}, {p['MIN_BLOCKS']}"
                + (", 1" if p.get("SWIZZLE", 0) else ""))

    def aligned(self, problem: Problem) -> bool:
        """16-byte cp.async usable: the row strides lda and ldb are multiples of ``vector`` elements."""
        return problem.lda % self.vector == 0 and problem.ldb % self.vector == 0

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        check_mma_tiles(params, self.k_step, self.vector, device, None)
        swizzle = params.get("SWIZZLE", 0)
        require(swizzle in (0, 1), "kernel.SWIZZLE",
                f"must be one of 0, 1, got {swizzle!r} (0: rows padded by 16 bytes; 1: XOR-swizzled 16-byte chunks)")
        if swizzle:  # gemmlab/mma_sync.cuh smem_offset: a row's chunks a power of two below 8 or a multiple of 8
            b_row = problem.layout_b != "col"
            for name, cols in (("BK", params["BK"]),) + ((("BN", params["BN"]),) if b_row else ()):
                chunks = cols // self.vector
                scalar_b = name == "BN" and self.scalar_b_reads  # smem_offset layout 2
                ok = chunks % 8 == 0 if scalar_b else (chunks % 8 == 0 or chunks & (chunks - 1) == 0)
                if not ok:  # the way out: padded rows, with fewer stages where those need more shared memory
                    col = problem.layout_b == "col"
                    limit = device.max_shared_per_block_optin
                    padded = self.shared_bytes({**params, "SWIZZLE": 0}, col)
                    fits = [s for s in range(2, params["STAGES"]) if self.shared_bytes(
                        {**params, "SWIZZLE": 0, "STAGES": s}, col) <= limit]
                    way_out = ("kernel.SWIZZLE=0 (padded rows take any)" if padded <= limit else
                               f"kernel.SWIZZLE=0 with kernel.STAGES={max(fits)}{' or fewer' if max(fits) > 2 else ''} "
                               f"(padded rows take any, but "
                               f"at STAGES={params['STAGES']} they need {padded} bytes of shared memory, over the "
                               f"{limit} limit)" if fits else
                               f"a smaller block tile (kernel.SWIZZLE=0's padded rows need more than the {limit}-byte "
                               "shared-memory limit even at STAGES=2)")
                    require(ok, f"kernel.{name}",
                            f"SWIZZLE=1 needs {name}/{self.vector}={chunks} chunks per shared row "
                            + ("a multiple of 8" if scalar_b else "a power of two below 8 or a multiple of 8")
                            + f"; or {way_out}")
        # last: a layout rule above names the parameter to change before the stages' total does
        require_shared_memory(self.shared_bytes(params, problem.layout_b == "col"), device)

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape, self.home_precision), params, device)

    def entry(self, params) -> str:
        return self.instance(Problem(Shape(8, 8, 8), self.home_precision), params)

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        p = params
        threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
        return Launch(grid=(cdiv(problem.N, p["BN"]), cdiv(problem.M, p["BM"]), 1), block=(threads, 1, 1),
                      shared_bytes=self.shared_bytes(p, problem.layout_b == "col"))

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return self.geometry(Problem(shape, self.home_precision), params, device)

    def ownership(self, shape: Shape, params):
        """Stores: the m16n8 fragment layout over the warp grid. Loads (row/row, 16-byte path);
        :func:`mma_model` covers the other paths."""
        return mma_model(shape, params, b_col=False, vector=self.vector)


def warp_tile_geometry(p: Mapping) -> tuple[np.ndarray, np.ndarray]:
    """Output coordinates inside one BM x BN block tile of the warp-tiled float32 scheme
    (kernels/sgemm_warptile.cu, sgemm_pipelined.cu and include/gemmlab/warptile_k.cuh's
    ``wt_store``): warps of WM x WN, each lane TM x TN outputs in 4x4 groups strided across the
    warp tile. Returns ``(rows, cols)``, int arrays of shape (threads, TM, TN), threads =
    (BM/WM)(BN/WN)*32. Used by the ownership models of the sgemm and stream-K plugins."""
    wm, wn, tm, tn = p["WM"], p["WN"], p["TM"], p["TN"]
    lm_n, ln_n, warps_n = wm // tm, wn // tn, p["BN"] // wn
    threads = (p["BM"] // wm) * warps_n * 32
    tid = np.arange(threads)[:, None, None]
    warp, lane = tid // 32, tid % 32
    wy, wx, lm, ln = warp // warps_n, warp % warps_n, lane // ln_n, lane % ln_n
    i, j = np.arange(tm)[None, :, None], np.arange(tn)[None, None, :]
    row = wy * wm + (i // 4) * (4 * lm_n) + 4 * lm + i % 4
    col = wx * wn + (j // 4) * (4 * ln_n) + 4 * ln + j % 4
    return row + 0 * col, col + 0 * row


# --- declared parameter spaces (issue 41): restrictions the built-in kernels share ---------------

#: static shared memory per block on every CUDA GPU (bytes): the limit of ``__shared__`` arrays
STATIC_SHARED_BYTES = 48 * 1024
#: the largest opt-in dynamic shared memory per block of any GPU gemmlab targets (sm_90, bytes): a
#: necessary condition in a space; ``check_problem`` applies the device's own limit
SM90_SHARED_OPTIN_BYTES = 227 * 1024
#: resident threads per SM (sm_80 .. sm_90)
THREADS_PER_SM = 2048


def warp_threads(p: Mapping[str, int]) -> int:
    """Threads of a block of (BM/WM) x (BN/WN) warps."""
    return (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32


def warp_tile_restrictions(a_unit: int = 4):
    """The restrictions of the warp-tiled float32 scheme (``sgemm_warptile``, ``sgemm_pipelined``,
    ``splitk_warptile``, ``streamk``): warp tiles cover the block tile, a warp's 32 lanes cover the
    warp tile with TM x TN thread tiles, at most 1024 threads, and the A tile (``a_unit`` elements
    per copy: 4 for float4 loads, 1 for 4-byte cp.async) and the B tile (float4) split evenly over
    the threads. The same rules as the kernels' ``check`` (``require_divides``, the 32-lane rule,
    ``require_block_threads``, load coverage), stated on the parameter dict alone."""
    from gemmlab.contract.space import Restriction
    return (
        Restriction("warps_cover_block", lambda p: p["BM"] % p["WM"] == 0 and p["BN"] % p["WN"] == 0,
                    "ownership: WM divides BM and WN divides BN (warp tiles cover the block tile)",
                    over=("BM", "BN", "WM", "WN")),
        Restriction("block_threads", lambda p: warp_threads(p) <= 1024,
                    "(BM/WM)*(BN/WN)*32 threads: at most 1024 per block", over=("BM", "BN", "WM", "WN")),
        Restriction("lanes_cover_warp", lambda p: p["WM"] % p["TM"] == 0 and p["WN"] % p["TN"] == 0
                    and (p["WM"] // p["TM"]) * (p["WN"] // p["TN"]) == 32,
                    "ownership: (WM/TM)*(WN/TN) = 32 lanes, each a TM x TN thread tile", over=("WM", "WN", "TM", "TN")),
        Restriction("load_coverage", lambda p: (p["BM"] * p["BK"] // a_unit) % warp_threads(p) == 0
                    and (p["BK"] * p["BN"] // 4) % warp_threads(p) == 0,
                    f"the A tile ({a_unit}-element copies) and the B tile (float4) split evenly over the threads",
                    over=("BM", "BN", "BK", "WM", "WN")),
    )


def mma_space(k_step: int, vector: int, stages=(2, 6)):
    """The space of the mma.sync kernels (``mma_tf32``: ``k_step`` 8, ``vector`` 4; ``mma_bf16``:
    16, 8): block tiles 64..256, BK 32 or 64, warp tiles 32 or 64, STAGES in ``stages``,
    MIN_BLOCKS 1 or 2, SWIZZLE 1 (XOR-swizzled rows) or 0 (padded); restrictions: warp tiles cover
    the block, at most 1024 threads, the 16-byte chunks of both tiles split evenly over the threads
    (:func:`check_mma_tiles`' rules); the SWIZZLE layout and shared-memory rules depend on the
    layout and the device and stay in ``check_problem``."""
    from gemmlab.contract.space import Choice, Range, Restriction, Space
    bks = tuple(b for b in (32, 64) if b % k_step == 0 and b % vector == 0)
    return Space(
        params={"BM": Choice((64, 128, 256)), "BN": Choice((64, 128, 256)), "BK": Choice(bks),
                "WM": Choice((32, 64)), "WN": Choice((32, 64)), "STAGES": Range(*stages),
                "MIN_BLOCKS": Choice((1, 2)), "SWIZZLE": Choice((1, 0))},
        restrictions=(
            Restriction("warps_cover_block", lambda p: p["BM"] % p["WM"] == 0 and p["BN"] % p["WN"] == 0,
                        "ownership: WM divides BM and WN divides BN", over=("BM", "BN", "WM", "WN")),
            Restriction("block_threads", lambda p: warp_threads(p) <= 1024,
                        "(BM/WM)*(BN/WN)*32 threads: at most 1024 per block", over=("BM", "BN", "WM", "WN")),
            Restriction("load_coverage", lambda p: (p["BM"] * p["BK"] // vector) % warp_threads(p) == 0
                        and (p["BK"] * p["BN"] // vector) % warp_threads(p) == 0,
                        f"the A and B tiles' 16-byte chunks ({vector} elements) split evenly over the threads",
                        over=("BM", "BN", "BK", "WM", "WN")),
            Restriction("resident_blocks", lambda p: p["MIN_BLOCKS"] * warp_threads(p) <= THREADS_PER_SM,
                        "__launch_bounds__: MIN_BLOCKS blocks of (BM/WM)*(BN/WN)*32 threads fit one SM (2048 threads)",
                        over=("BM", "BN", "WM", "WN", "MIN_BLOCKS")),
        ))
