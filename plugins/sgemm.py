"""Built-in kernels ``sgemm_block2d``, ``sgemm_warptile`` and ``sgemm_pipelined``: the float32
CUDA-core ladder of issue 8 (kernels/sgemm_*.cu), general in shape (any M, N, K >= 1).

Rungs (each adds one idea to the one before):

- ``sgemm_block2d``: 2-D block tile (BM x BN x BK), contiguous TM x TN thread tile, A transposed
  in shared memory, float4 global loads behind an alignment guard with a scalar edge path.
- ``sgemm_warptile``: warp tile WM x WN, each thread's TM x TN outputs in 4x4 pieces spread over
  the warp tile (conflict-free LDS.128), register double-buffered fragments, double-buffered
  shared memory fed through registers.
- ``sgemm_pipelined``: the warp tile fed by a STAGES-deep cp.async pipeline (16-byte copies, 4-byte
  zero-filling copies at edges and odd strides), epilogue through shared memory with 16-byte
  stores, thread-block swizzle (GS block rows per group), ``__launch_bounds__(threads, MINB)``.
  Layouts (issue 43): A row-major or column-major (``layout.a=col``: the entry
  ``gemm_sgemm_pipelined_acol`` copies A's K x M stored chunks like B's, 16-byte copies of four
  consecutive m where M % 4 == 0, into the same transposed shared tile), B row-major.
  The whole GEMM contract (issue 43): ``sgemm_pipelined`` declares the full epilogue (:data:`FULL`:
  alpha, beta·C0, a float32 bias, every activation, a float32/bf16/fp16 C rounded once, leading
  dimensions above the tight ones, strided batches with shared operands, either layout of A). Such
  a problem compiles ``gemm_sgemm_pipelined_epi`` with ``-DGEMMLAB_EPI`` (the same main loop with
  the pitches lda/ldb in place of K/M/N, batch = blockIdx.z, the fused operation in the
  register-to-global store of gemmlab/fused.cuh); a plain problem compiles the plain entries
  exactly as before (SASS pinned by tests/test_sass_unchanged.py).

Each spec's :meth:`ownership` replays the kernel's index arithmetic in numpy (one owner per
output, every staged element written once per chunk); :meth:`check` enforces the same rules
before compiling.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from gemmlab.contract.hookspecs import (FULL, DeviceFacts, KernelOptions, KernelSpec, Launch, ParamError, Problem, Shape,
                                        hookimpl)
from gemmlab.contract.plugin_utils import (STATIC_SHARED_BYTES, THREADS_PER_SM, cdiv, count_hits, epilogue_arguments,
                                          epilogue_options, fused_entry, require, require_block_threads, require_divides,
                                          warp_threads, warp_tile_geometry, warp_tile_restrictions)
from gemmlab.contract.space import Choice, PowerOfTwo, Range, Restriction, Space
from gemmlab.contract.regimes import RANK_FIRST, Preference

MAX_THREADS_PER_SM = 2048  # sm_80 .. sm_90


def _positive(p, names) -> None:
    for name in names:
        require(p[name] >= 1, f"kernel.{name}", f"{name}={p[name]} must be a positive integer")


def _vector_rules(p) -> None:
    for name in ("TM", "TN", "BK"):
        require(p[name] % 4 == 0, f"kernel.{name}",
                f"{name}={p[name]} must be a multiple of 4 (float4 fragments and loads)")


def _coverage_rule(p, threads: int, a_unit: int) -> None:
    """A is staged in units of ``a_unit`` elements (4: float4, 1: 4-byte copies); B in float4."""
    a_units, b_units = p["BM"] * p["BK"] // a_unit, p["BK"] * p["BN"] // 4
    require(a_units % threads == 0, "kernel.BK",
            f"load coverage: the A tile has {a_units} copy units (BM*BK/{a_unit}), not a multiple of "
            f"the {threads} threads that stage it")
    require(b_units % threads == 0, "kernel.BK",
            f"load coverage: the B tile has {b_units} float4 (BK*BN/4), not a multiple of the "
            f"{threads} threads that stage it")


def _staging_vec4(p, threads: int) -> dict:
    """float4 staging of A (four consecutive k of one row) and B (four consecutive columns)."""
    bm, bn, bk = p["BM"], p["BN"], p["BK"]
    tid, q = np.arange(threads)[:, None, None], np.arange(4)[None, None, :]
    a = tid + np.arange(bm * bk // 4 // threads)[None, :, None] * threads
    b = tid + np.arange(bk * bn // 4 // threads)[None, :, None] * threads
    return {"A": count_hits((bm, bk), a // (bk // 4) + 0 * q, 4 * (a % (bk // 4)) + q),
            "B": count_hits((bk, bn), b // (bn // 4) + 0 * q, 4 * (b % (bn // 4)) + q)}


def _warp_rules(p, device: DeviceFacts) -> int:
    """Ownership and thread rules shared by the warp-tiled rungs; returns the thread count."""
    require_divides(p, "WM", "BM", "ownership (warp tiles cover the block tile)")
    require_divides(p, "WN", "BN", "ownership (warp tiles cover the block tile)")
    require_divides(p, "TM", "WM", "ownership (thread tiles cover the warp tile)")
    require_divides(p, "TN", "WN", "ownership (thread tiles cover the warp tile)")
    lanes = (p["WM"] // p["TM"]) * (p["WN"] // p["TN"])
    require(lanes == 32, "kernel.TM",
            f"ownership: a warp has 32 lanes but (WM/TM)*(WN/TN)={lanes}; choose WM*WN = 32*TM*TN")
    _vector_rules(p)
    threads = require_block_threads(p, device, "WM", "WN", 32)
    return threads


class _Rung(KernelSpec):
    """kernel=auto's rules for the ladder's rungs, with their defaults: ``large`` (a wave of 128x128
    tiles; the core passes over a launch of fewer blocks than SMs) best rung first, pipelined 10,
    warptile 11, block2d 12 (stream-K ranks 0 before them where 128x256 tiles leave their waves
    under-filled, else 20 after); ``medium``: warptile 1, block2d 2 (after stream-K)."""

    RANKS = MappingProxyType({})  # regime -> rank

    def preferences(self, problem, device: DeviceFacts, regime: str) -> list:
        rank = self.RANKS.get(regime)
        return [] if rank is None else [Preference(RANK_FIRST + rank, {}, "its default tile")]

    def sweep_variants(self, problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep (fp32): the defaults, for every family but decode, tiny and k_heavy."""
        return [{}] if problem.precision == "fp32" and family not in ("decode", "tiny", "k_heavy") else []


class Block2dKernel(_Rung):
    """Rung 2: BM x BN x BK block tile, (BN/TN)*(BM/TM) threads, contiguous TM x TN per thread."""

    RANKS = MappingProxyType({"large": 12, "medium": 2})

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        p = params
        _positive(p, ("BM", "BN", "BK", "TM", "TN"))
        require_divides(p, "TM", "BM", "ownership (each output row has exactly one owner)")
        require_divides(p, "TN", "BN", "ownership (each output column has exactly one owner)")
        _vector_rules(p)
        threads = require_block_threads(p, device, "TM", "TN")
        _coverage_rule(p, threads, 4)
        smem = 4 * p["BK"] * (p["BM"] + p["BN"])
        require(smem <= device.max_shared_per_block, "kernel.BK",
                f"static shared memory 4*BK*(BM+BN)={smem} bytes exceeds {device.max_shared_per_block}")

    def entry(self, params) -> str:
        p = params
        return f"gemm_sgemm_block2d<{p['BM']}, {p['BN']}, {p['BK']}, {p['TM']}, {p['TN']}>"

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        p = params
        return Launch(grid=(cdiv(shape.N, p["BN"]), cdiv(shape.M, p["BM"]), 1),
                      block=((p["BM"] // p["TM"]) * (p["BN"] // p["TN"]), 1, 1))

    def ownership(self, shape: Shape, params):
        p = params
        tx_n, ty_n = p["BN"] // p["TN"], p["BM"] // p["TM"]
        threads = tx_n * ty_n
        by, bx, t, i, j = np.ix_(range(cdiv(shape.M, p["BM"])), range(cdiv(shape.N, p["BN"])),
                                 range(threads), range(p["TM"]), range(p["TN"]))
        row = by * p["BM"] + (t // tx_n) * p["TM"] + i
        col = bx * p["BN"] + (t % tx_n) * p["TN"] + j
        stores = count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N))
        return stores, _staging_vec4(p, threads)


class WarptileKernel(_Rung):
    """Rung 3: warp tiles of WM x WN, TM x TN per thread in 4x4 pieces, double buffers."""

    RANKS = MappingProxyType({"large": 11, "medium": 1})

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        p = params
        _positive(p, ("BM", "BN", "BK", "WM", "WN", "TM", "TN"))
        threads = _warp_rules(p, device)
        _coverage_rule(p, threads, 4)
        smem = 2 * 4 * p["BK"] * (p["BM"] + 4 + p["BN"])
        require(smem <= device.max_shared_per_block, "kernel.BK",
                f"static shared memory 2*4*BK*(BM+4+BN)={smem} bytes exceeds {device.max_shared_per_block}")

    def entry(self, params) -> str:
        p = params
        return (f"gemm_sgemm_warptile<{p['BM']}, {p['BN']}, {p['BK']}, {p['WM']}, {p['WN']}, "
                f"{p['TM']}, {p['TN']}>")

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        p = params
        threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
        return Launch(grid=(cdiv(shape.N, p["BN"]), cdiv(shape.M, p["BM"]), 1), block=(threads, 1, 1))

    def ownership(self, shape: Shape, params):
        p = params
        r, c = warp_tile_geometry(p)
        gy, gx = cdiv(shape.M, p["BM"]), cdiv(shape.N, p["BN"])
        by = np.arange(gy)[:, None, None, None, None]
        bx = np.arange(gx)[None, :, None, None, None]
        row, col = by * p["BM"] + r[None, None], bx * p["BN"] + c[None, None]
        stores = count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N))
        return stores, _staging_vec4(p, r.shape[0])


def swizzle(pid, gm: int, gn: int, gs: int):
    """Block index -> (block row, block column) of sgemm_pipelined's grouped order (numpy or int)."""
    width = gs * gn
    group = pid // width
    first = group * gs
    size = np.minimum(gm - first, gs)
    return first + (pid % width) % size, (pid % width) // size


def pipelined_shared_bytes(p) -> tuple[int, int]:
    """(pipeline bytes, epilogue bytes) of sgemm_pipelined's dynamic shared memory."""
    pipe = 4 * p["STAGES"] * p["BK"] * (p["BM"] + 4 + p["BN"])
    warps = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"])
    epi = 4 * warps * 4 * (p["WM"] // p["TM"]) * (p["WN"] + 4)
    return pipe, epi


class PipelinedKernel(_Rung):
    """Rung 4: warp tile + STAGES-deep cp.async pipeline, smem epilogue, swizzle, launch bounds."""

    RANKS = MappingProxyType({"large": 10})

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        p = params
        _positive(p, ("BM", "BN", "BK", "WM", "WN", "TM", "TN", "GS", "MINB"))
        require(p["STAGES"] >= 2, "kernel.STAGES", f"STAGES={p['STAGES']}: the pipeline needs at least 2 stages")
        threads = _warp_rules(p, device)
        _coverage_rule(p, threads, 1)
        require(p["MINB"] * threads <= MAX_THREADS_PER_SM, "kernel.MINB",
                f"MINB={p['MINB']} blocks of {threads} threads exceed {MAX_THREADS_PER_SM} threads per SM")
        smem = max(pipelined_shared_bytes(p))
        require(smem <= device.max_shared_per_block_optin, "kernel.STAGES",
                f"dynamic shared memory max(4*STAGES*BK*(BM+4+BN), epilogue)={smem} bytes exceeds "
                f"{device.max_shared_per_block_optin}")
        require(p["MINB"] * smem <= device.max_shared_per_block_optin, "kernel.MINB",
                f"MINB={p['MINB']} blocks of {smem} bytes of shared memory do not fit one SM "
                f"({device.max_shared_per_block_optin} bytes)")

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        """:meth:`check`, and for a column-major A (``layout.a=col``) the rules of its float4 copies:
        BM*BK/4 float4 split evenly over the threads and BM/4 (float4 per k row) divides the threads.

        Raises:
            ParamError: ``kernel.BM`` / ``kernel.BK``, one line naming the rule.
        """
        self.check(problem.shape, params, device)
        if problem.layout_a == "col":
            p = params
            threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
            units = p["BM"] * p["BK"] // 4
            require(units % threads == 0, "kernel.BK",
                    f"load coverage (layout.a=col): the A tile has {units} float4 (BM*BK/4), not a multiple of the "
                    f"{threads} threads that stage it")
            require(threads % (p["BM"] // 4) == 0, "kernel.BM",
                    f"layout.a=col: each thread copies fixed m columns, so BM/4 = {p['BM'] // 4} float4 per k row must "
                    f"divide the {threads} threads")

    def entry(self, params) -> str:
        p = params
        return (f"gemm_sgemm_pipelined<{p['BM']}, {p['BN']}, {p['BK']}, {p['WM']}, {p['WN']}, {p['TM']}, "
                f"{p['TN']}, {p['STAGES']}, {p['GS']}, {p['MINB']}>")

    def instance(self, problem: Problem, params) -> str:
        """:meth:`entry` (row-major A), or its ``gemm_sgemm_pipelined_acol`` twin (the same template
        arguments) for a column-major A; beyond the plain contract (issue 43)
        ``gemm_sgemm_pipelined_epi<..., MINB, ACOL, ACT, BIAS, BETA, BIAS_T, OUT_T>``."""
        name = self.entry(params)
        if problem.extended:
            return fused_entry(name, problem, "true" if problem.layout_a == "col" else "false")
        return name.replace("gemm_sgemm_pipelined<", "gemm_sgemm_pipelined_acol<") if problem.layout_a == "col" else name

    def options(self, problem: Problem, params, device: DeviceFacts) -> KernelOptions:
        """``-DGEMMLAB_EPI`` beyond the plain contract (the fused entry), else none."""
        return epilogue_options(problem)

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        """:meth:`launch`, with one grid layer (z) per batch."""
        launch = self.launch(problem.shape, params, device)
        return Launch(grid=(launch.grid[0], 1, problem.batch), block=launch.block, shared_bytes=launch.shared_bytes)

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """(A, B, C, M, N, K) for a plain problem; beyond it the fused entry's
        (:func:`~gemmlab.contract.plugin_utils.epilogue_arguments`)."""
        return epilogue_arguments(problem) if problem.extended else super().arguments(problem, params, device)

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        p = params
        threads = (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32
        blocks = cdiv(shape.M, p["BM"]) * cdiv(shape.N, p["BN"])
        return Launch(grid=(blocks, 1, 1), block=(threads, 1, 1), shared_bytes=max(pipelined_shared_bytes(p)))

    def ownership(self, shape: Shape, params):
        """Stores follow the epilogue (the thread that writes C is not the one that accumulated it):
        pass p, vector q, lane -> row/column of the warp tile; ``loads`` also holds ``C``, the
        epilogue's shared staging of one warp and pass (must be written exactly once)."""
        p = params
        wm, wn, tm, tn = p["WM"], p["WN"], p["TM"], p["TN"]
        lm_n, ln_n, warps_n = wm // tm, wn // tn, p["BN"] // wn
        threads = (p["BM"] // wm) * warps_n * 32
        gm, gn = cdiv(shape.M, p["BM"]), cdiv(shape.N, p["BN"])
        bm, bn = swizzle(np.arange(gm * gn), gm, gn, p["GS"])
        tid = np.arange(threads)
        warp, lane = tid // 32, tid % 32
        wy, wx = warp // warps_n, warp % warps_n
        pp, q, e = np.arange(tm // 4), np.arange(tn), np.arange(4)
        idx = lane[:, None, None] + 32 * q[None, None, :] + 0 * pp[None, :, None]          # (t, pass, q)
        r = wy[:, None, None] * wm + pp[None, :, None] * 4 * lm_n + idx // (wn // 4)
        c = wx[:, None, None] * wn + 4 * (idx % (wn // 4))
        row = bm[:, None, None, None, None] * p["BM"] + r[None, ..., None]
        col = bn[:, None, None, None, None] * p["BN"] + c[None, ..., None] + e
        stores = count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N))
        # staging: A by 4-byte copies (e = tid + l*threads -> As[e % BK][e / BK]), B by float4; a
        # column-major A (K x M stored) by float4 like B: thread t's float4 l is k row t // (BM/4) +
        # l*threads/(BM/4), m columns 4 (t % (BM/4)) .. +3
        bmk, bk = p["BM"], p["BK"]
        a = tid[:, None] + np.arange(bmk * bk // threads)[None, :] * threads
        loads = {"A": count_hits((bmk, bk), a // bk, a % bk), "B": _staging_vec4(p, threads)["B"]}
        if (bmk * bk // 4) % threads == 0 and threads % (bmk // 4) == 0:
            q4 = np.arange(4)[None, None, :]
            kr = (tid // (bmk // 4))[:, None, None] + np.arange(bmk * bk // 4 // threads)[None, :, None] * (threads // (bmk // 4))
            loads["A (column-major)"] = count_hits((bk, bmk), kr + 0 * q4, (4 * (tid % (bmk // 4)))[:, None, None] + q4)
        # epilogue staging of one warp's pass: thread (lm, ln) writes rows 4*lm + r, columns j*4*LN + 4*ln + e
        lm, ln = lane[:32] // ln_n, lane[:32] % ln_n
        rr, jj = np.arange(4), np.arange(tn // 4)
        crow = 4 * lm[:, None, None, None] + rr[None, :, None, None] + 0 * e
        ccol = jj[None, None, :, None] * 4 * ln_n + 4 * ln[:, None, None, None] + e
        loads["C"] = count_hits((4 * lm_n, wn), crow, ccol)
        return stores, loads


# --- declared spaces (issue 41): each kernel's check() rules that need no device, as restrictions ---

def _block2d_threads(p) -> int:
    return (p["BN"] // p["TN"]) * (p["BM"] // p["TM"])


BLOCK2D_SPACE = Space(
    params={"BM": PowerOfTwo(32, 256), "BN": PowerOfTwo(32, 256), "BK": Choice((8, 16, 32)), "TM": Choice((4, 8)),
            "TN": Choice((4, 8))},
    restrictions=(
        Restriction("ownership", lambda p: p["BM"] % p["TM"] == 0 and p["BN"] % p["TN"] == 0,
                    "TM divides BM and TN divides BN (each output one owner)", over=("BM", "BN", "TM", "TN")),
        Restriction("block_threads", lambda p: _block2d_threads(p) <= 1024, "(BN/TN)*(BM/TM) threads: at most 1024",
                    over=("BM", "BN", "TM", "TN")),
        Restriction("load_coverage", lambda p: (p["BM"] * p["BK"] // 4) % _block2d_threads(p) == 0
                    and (p["BK"] * p["BN"] // 4) % _block2d_threads(p) == 0,
                    "the A and B tiles' float4 split evenly over the threads", over=("BM", "BN", "BK", "TM", "TN")),
        Restriction("static_shared", lambda p: 4 * p["BK"] * (p["BM"] + p["BN"]) <= STATIC_SHARED_BYTES,
                    "4*BK*(BM+BN) bytes of static shared memory: at most 48 KiB", over=("BM", "BN", "BK")),
    ))

#: the warp tile's domains (sgemm_warptile, sgemm_pipelined)
_WARP_PARAMS = {"BM": PowerOfTwo(32, 256), "BN": PowerOfTwo(32, 256), "BK": Choice((8, 16, 32)),
                "WM": Choice((16, 32, 64)), "WN": Choice((32, 64, 128)), "TM": Choice((4, 8)), "TN": Choice((4, 8))}

WARPTILE_SPACE = Space(
    params=dict(_WARP_PARAMS),
    restrictions=warp_tile_restrictions(4) + (
        Restriction("static_shared", lambda p: 2 * 4 * p["BK"] * (p["BM"] + 4 + p["BN"]) <= STATIC_SHARED_BYTES,
                    "2*4*BK*(BM+4+BN) bytes of double-buffered static shared memory: at most 48 KiB",
                    over=("BM", "BN", "BK")),
    ))

PIPELINED_SPACE = Space(
    params={**_WARP_PARAMS, "STAGES": Range(2, 6), "GS": Choice((4, 8, 16)), "MINB": Range(1, 4)},
    restrictions=warp_tile_restrictions(1) + (
        Restriction("resident_threads", lambda p: p["MINB"] * warp_threads(p) <= THREADS_PER_SM,
                    "MINB blocks of (BM/WM)*(BN/WN)*32 threads fit one SM (2048 threads)",
                    over=("BM", "BN", "WM", "WN", "MINB")),
    ))


@hookimpl
def gemmlab_kernels():
    return [
        Block2dKernel(name="sgemm_block2d", source="sgemm_block2d.cu",
                      defaults={"BM": 64, "BN": 128, "BK": 16, "TM": 8, "TN": 4},
                      description="ladder 2: 64x128x16 block tile, 8x4 per thread, A transposed, "
                                  "guarded float4 loads",
                      sass_classes=("FFMA",), space=BLOCK2D_SPACE),
        WarptileKernel(name="sgemm_warptile", source="sgemm_warptile.cu",
                       defaults={"BM": 128, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "TM": 8, "TN": 8},
                       description="ladder 3: warp tiles, register double-buffered fragments, "
                                   "double-buffered smem",
                       sass_classes=("FFMA",), space=WARPTILE_SPACE),
        PipelinedKernel(name="sgemm_pipelined", source="sgemm_pipelined.cu",
                        defaults={"BM": 64, "BN": 128, "BK": 16, "WM": 32, "WN": 64, "TM": 8, "TN": 8,
                                  "STAGES": 4, "GS": 8, "MINB": 4},
                        description="ladder 4: cp.async STAGES-deep pipeline, lean addressing, smem "
                                    "epilogue, block swizzle, 4 blocks/SM",
                        sass_classes=("FFMA",), space=PIPELINED_SPACE, layouts=(("row", "row"), ("col", "row")),
                        epilogue=FULL),
    ]
