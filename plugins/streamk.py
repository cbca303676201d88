"""Built-in kernels ``splitk_warptile`` and ``streamk`` (issue 10): float32 GEMM on CUDA cores for
shapes whose output tiles leave the GPU idle (K-heavy, few tiles, a partial last wave), both with
the warp-tiled inner tile of the ladder's rung 3 (kernels/splitk_warptile.cu, kernels/streamk.cu;
the shared header kernels/include/gemmlab/warptile_k.cuh is a copy of kernels/sgemm_warptile.cu's
mapping: WM x WN warp tiles, TM x TN per thread in 4x4 pieces, double buffers, guarded float4
loads).

- ``splitk_warptile`` (launch plan Main + Extra): grid (ceil(N/BN), ceil(M/BM), SPLITS); split z
  reduces K range ``k_ranges(K, BK, SPLITS)[z]`` into workspace slab z (SPLITS*M*N float32), then
  ``gemm_warptile_reduce`` sums the slabs in split order into C (deterministic).
- ``streamk`` (Main [+ Extra]): the data-parallel + stream-K hybrid of Osama et al. (2023,
  "Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on the
  GPU") with a separate fixup launch (no block ever waits for another, so residency cannot
  deadlock it). WORKERS = WPS * SMs blocks share the BK-chunk iterations of the first SK tiles
  evenly (:func:`schedule`); the other tiles are data-parallel blocks. Workspace: two BM x BN
  slots per worker for the partial tiles at the ends of its range; ``gemm_streamk_fixup`` (one
  block per stream-K tile) adds the slots of tiles with more than one contributor into C.

Parameters: BM, BN, BK, WM, WN, TM, TN as ``sgemm_warptile`` (same rules: (WM/TM)*(WN/TN) = 32
lanes, TM, TN, BK multiples of 4, float4 load coverage); ``SPLITS`` >= 1; ``WPS`` >= 1 workers
per SM (the blocks of this tile that fit one SM: 2 for the 128x128 default); ``MINB`` the
``__launch_bounds__`` minimum blocks per SM (2: at most 128 registers for 256 threads).

Precisions fp32 and tf32 (issue 41): ``precision=tf32`` allows TF32 tensor-core math but does not
require it (cuBLAS itself runs GEMV-like TF32 problems on FP32 units), so each of the two kernels serves it
as it is: the float32 inputs are read unrounded and multiplied on FP32 CUDA cores (FFMA), hence
``tf32_rounding="none"`` (the TF32 verification's reference then rounds no input; the float32
accumulation bound applies).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gemmlab.contract.hookspecs import (DeviceFacts, Dim, Extra, KernelSpec, Launch, Main, Matrix, Problem, Shape, Value,
                               Workspace, hookimpl)
from gemmlab.contract.plugin_utils import (FP32_TF32, STATIC_SHARED_BYTES, THREADS_PER_SM, cdiv, count_hits, require,
                                          require_block_threads, require_divides, warp_threads, warp_tile_geometry,
                                          warp_tile_restrictions)
from gemmlab.contract.space import Choice, PowerOfTwo, Restriction, Space
from gemmlab.contract.regimes import RANK_FIRST, Preference, fill

REDUCE_THREADS = 256
FIXUP_THREADS = 256
FIXUP_FQ = 2  # float4 per fixup thread: a 128x128 tile is added by 8 blocks
WARPTILE = {"BM": 128, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "MINB": 2}
MAX_THREADS_PER_SM = 2048  # sm_80 .. sm_90


# --- parameter rules and the warp-tile index model ------------------------------------------------

def warp_rules(p, device: DeviceFacts) -> int:
    """sgemm_warptile's tile rules (ownership, float4, threads, load coverage, shared memory) and
    MINB (``__launch_bounds__`` blocks per SM); returns the thread count. Raises ParamError naming
    the parameter."""
    for name in ("BM", "BN", "BK", "WM", "WN", "TM", "TN", "MINB"):
        require(p[name] >= 1, f"kernel.{name}", f"{name}={p[name]} must be a positive integer")
    require_divides(p, "WM", "BM", "ownership (warp tiles cover the block tile)")
    require_divides(p, "WN", "BN", "ownership (warp tiles cover the block tile)")
    require_divides(p, "TM", "WM", "ownership (thread tiles cover the warp tile)")
    require_divides(p, "TN", "WN", "ownership (thread tiles cover the warp tile)")
    lanes = (p["WM"] // p["TM"]) * (p["WN"] // p["TN"])
    require(lanes == 32, "kernel.TM",
            f"ownership: a warp has 32 lanes but (WM/TM)*(WN/TN)={lanes}; choose WM*WN = 32*TM*TN")
    for name in ("TM", "TN", "BK"):
        require(p[name] % 4 == 0, f"kernel.{name}", f"{name}={p[name]} must be a multiple of 4 (float4 fragments and loads)")
    threads = require_block_threads(p, device, "WM", "WN", 32)
    for tile, units in (("A", p["BM"] * p["BK"] // 4), ("B", p["BK"] * p["BN"] // 4)):
        require(units % threads == 0, "kernel.BK",
                f"load coverage: the {tile} tile has {units} float4, not a multiple of the {threads} threads that stage it")
    smem = 2 * 4 * p["BK"] * (p["BM"] + 4 + p["BN"])
    require(smem <= device.max_shared_per_block, "kernel.BK",
            f"static shared memory 2*4*BK*(BM+4+BN)={smem} bytes exceeds {device.max_shared_per_block}")
    require(1 <= p["MINB"] and p["MINB"] * threads <= MAX_THREADS_PER_SM, "kernel.MINB",
            f"MINB={p['MINB']} blocks of {threads} threads: must be >= 1 and fit {MAX_THREADS_PER_SM} threads per SM")
    return threads


def staging(p) -> dict:
    """float4 staging of one chunk: A (BM x BK, four consecutive k of a row) and B (BK x BN)."""
    bm, bn, bk = p["BM"], p["BN"], p["BK"]
    threads = (bm // p["WM"]) * (bn // p["WN"]) * 32
    tid, q = np.arange(threads)[:, None, None], np.arange(4)[None, None, :]
    a = tid + np.arange(bm * bk // 4 // threads)[None, :, None] * threads
    b = tid + np.arange(bk * bn // 4 // threads)[None, :, None] * threads
    return {"A": count_hits((bm, bk), a // (bk // 4) + 0 * q, 4 * (a % (bk // 4)) + q),
            "B": count_hits((bk, bn), b // (bn // 4) + 0 * q, 4 * (b % (bn // 4)) + q)}


def k_ranges(K: int, BK: int, splits: int) -> list[tuple[int, int]]:
    """The [begin, end) K range of each split of ``gemm_splitk_warptile`` (whole BK chunks)."""
    per = cdiv(cdiv(K, splits), BK) * BK
    return [(min(K, z * per), min(K, z * per + per)) for z in range(splits)]


def reduce_blocks(M: int, N: int, sm_count: int) -> int:
    """Blocks of the grid-stride reduction: one float4 (or element) per thread, at most 8 per SM."""
    items = M * N // 4 if (M * N) % 4 == 0 else M * N
    return max(1, min(cdiv(items, REDUCE_THREADS), 8 * sm_count))


# --- stream-K schedule ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Schedule:
    """How ``gemm_streamk`` splits a problem: ``tiles`` output tiles, ``iters`` BK chunks per tile,
    ``workers`` stream-K blocks sharing the first ``sk_tiles`` tiles, ``dp_tiles`` data-parallel
    blocks for the rest."""

    tiles: int
    iters: int
    workers: int
    sk_tiles: int

    @property
    def dp_tiles(self) -> int:
        return self.tiles - self.sk_tiles

    @property
    def blocks(self) -> int:
        return (self.workers if self.sk_tiles else 0) + self.dp_tiles

    def start(self, w: int) -> int:
        """First iteration of worker ``w`` (the kernel's ``sk_start``)."""
        return w * self.sk_tiles * self.iters // self.workers

    def owner(self, x: int) -> int:
        """The worker whose range holds stream-K iteration ``x`` (the fixup's formula)."""
        return ((x + 1) * self.workers - 1) // (self.sk_tiles * self.iters)

    def segments(self, w: int) -> list[tuple[int, int, int, int]]:
        """Worker ``w``'s pieces ``(tile, k_begin_iter, k_end_iter, slot)`` in its order; slot -1: a
        whole tile stored to C, 0/1: its workspace slot (as ``gemm_streamk`` walks them)."""
        it, end = self.start(w), self.start(w + 1)
        first, out = (it // self.iters if it < end else -1), []
        while it < end:
            t = it // self.iters
            kb, ke = it - t * self.iters, min(end - t * self.iters, self.iters)
            out.append((t, kb, ke, -1 if (kb == 0 and ke == self.iters) else (0 if t == first else 1)))
            it = t * self.iters + ke
        return out


FULL_WAVE = 0.9  # a last wave at least this full stays data-parallel (stream-K would split every tile in it)
MIN_ITERS = 8    # stream-K workers get at least this many BK chunks each (fewer workers on short problems)


def schedule(shape: Shape, p, sm_count: int) -> Schedule:
    """The hybrid split over T tiles of BM x BN with up to G = WPS * sm_count workers:

    - the last wave (T mod G tiles, all T when T < G) at least ``FULL_WAVE`` full, or T a whole
      number of waves: data-parallel only (no workspace traffic, no fixup);
    - T < G: every tile stream-K, over min(G, T*ITERS / ``MIN_ITERS``) workers (at least T; exactly
      T means one tile each, i.e. data-parallel);
    - else the last full wave plus the remainder stream-K over G workers (each gets one to two
      tiles of work: Osama et al.'s "two-tile stream-K + data-parallel"), the rest data-parallel.
    """
    tiles = cdiv(shape.M, p["BM"]) * cdiv(shape.N, p["BN"])
    iters = cdiv(shape.K, p["BK"])
    workers = max(1, p["WPS"] * sm_count)
    rem = tiles % workers if tiles > workers else tiles
    if rem == 0 or rem >= FULL_WAVE * workers:
        return Schedule(tiles=tiles, iters=iters, workers=workers, sk_tiles=0)
    if tiles < workers:
        workers = max(tiles, min(workers, tiles * iters // MIN_ITERS))
        return Schedule(tiles=tiles, iters=iters, workers=workers, sk_tiles=0 if workers == tiles else tiles)
    return Schedule(tiles=tiles, iters=iters, workers=workers, sk_tiles=rem + workers)


def fixup_parts(p) -> int:
    """Blocks per stream-K tile in the fixup: FIXUP_FQ float4 per thread of FIXUP_THREADS."""
    return cdiv(p["BM"] * p["BN"] // 4, FIXUP_THREADS * FIXUP_FQ)


# --- the two kernels ------------------------------------------------------------------------------

class _WarpTileBase(KernelSpec):
    def _tparams(self, p) -> str:
        return ", ".join(str(p[k]) for k in ("BM", "BN", "BK", "WM", "WN", "TM", "TN", "MINB"))

    def _threads(self, p) -> int:
        return (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32


class SplitKWarptileKernel(_WarpTileBase):
    """SPLITS warp-tiled partial GEMMs (sgemm_warptile's tile) into a workspace + a reduction launch."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        warp_rules(params, device)
        require(1 <= params["SPLITS"] <= 65535, "kernel.SPLITS", f"SPLITS={params['SPLITS']} must be 1..65535 (grid z)")

    def entry(self, params) -> str:
        return f"gemm_splitk_warptile<{self._tparams(params)}>"

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """First :func:`sized_tile`'s tile with SPLITS = the most K slices whose blocks still fit one
        wave of MINB blocks per SM, each slice >= 256 long (and half that), then the declared space."""
        p = sized_tile(problem.shape)
        tiles = cdiv(problem.M, p["BM"]) * cdiv(problem.N, p["BN"])
        s = max(1, min(p["MINB"] * device.sm_count // tiles, problem.K // 256))
        sized = [{**self.defaults, **p, "SPLITS": v} for v in dict.fromkeys((s, max(1, s // 2))) if v <= 4096]
        return sized + super().candidates(problem, device)

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules (fp32, and tf32 on FP32 CUDA cores): first in ``k_heavy`` (rank 10, SPLITS
        filling exactly one wave: 87.9-89.1% of cuBLAS on the H200) and in ``decode`` for 16 < M <= 64
        (rank 0: 70-74% of cuBLAS vs slicedk's 43-50%), with :func:`wave_splits`."""
        if regime == "k_heavy":
            return [Preference(RANK_FIRST + 10, wave_splits(problem.shape, device.sm_count), "split K in one wave")]
        if regime == "decode" and problem.M > 16:
            return [Preference(RANK_FIRST, wave_splits(problem.shape, device.sm_count),
                               "split-K over 64-row warp tiles")]
        return []

    def sweep_variants(self, problem: Problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep (fp32): decode above 16 rows :func:`wave_splits`; k_heavy it and half the splits."""
        if problem.precision != "fp32":
            return []
        wt = wave_splits(problem.shape, device.sm_count)
        if family == "k_heavy":
            return [{**wt, "SPLITS": s} for s in sorted({max(1, wt["SPLITS"] // 2), wt["SPLITS"]})]
        return [wt] if family == "decode" and problem.M > 16 else []

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        p = params
        return Launch(grid=(cdiv(shape.N, p["BN"]), cdiv(shape.M, p["BM"]), p["SPLITS"]), block=(self._threads(p), 1, 1))

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        return (Matrix("A"), Matrix("B"), Workspace(), Dim("M"), Dim("N"), Dim("K"))

    def workspace_bytes(self, problem: Problem, params, device: DeviceFacts) -> int:
        return 4 * params["SPLITS"] * problem.M * problem.N

    def plan(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        blocks = reduce_blocks(problem.M, problem.N, device.sm_count)
        return (Main(), Extra("gemm_warptile_reduce", Launch(grid=(blocks, 1, 1), block=(REDUCE_THREADS, 1, 1)),
                              (Workspace(), Matrix("C"), Dim("M"), Dim("N"), Value(params["SPLITS"], "int32"))))

    def ownership(self, shape: Shape, params):
        """Stores: C elements written by the reduction's grid-stride loop (float4 path when
        M*N % 4 == 0, with the sm_90 class's 132 SMs), after requiring that every split's slab
        element is written exactly once by the partial kernel (else those counts are returned).
        Loads: the float4 staging of A and B; ``K``: the split ranges cover [0, K) once."""
        p = params
        rows, cols = warp_tile_geometry(p)
        gy, gx = cdiv(shape.M, p["BM"]), cdiv(shape.N, p["BN"])
        by = np.arange(gy)[:, None, None, None, None]
        bx = np.arange(gx)[None, :, None, None, None]
        row, col = by * p["BM"] + rows[None, None], bx * p["BN"] + cols[None, None]
        slab = count_hits((shape.M, shape.N), row, col, (row < shape.M) & (col < shape.N))
        if not (slab == 1).all():
            return slab, {}
        total = shape.M * shape.N
        vec = 4 if total % 4 == 0 else 1
        stride = reduce_blocks(shape.M, shape.N, 132) * REDUCE_THREADS
        items = total // vec
        q = np.arange(stride)[:, None] + stride * np.arange(cdiv(items, stride))[None, :]
        index = (vec * q)[..., None] + np.arange(vec)
        mask = np.broadcast_to((q < items)[..., None], index.shape)
        stores = count_hits((shape.M, shape.N), index // shape.N, index % shape.N, mask)
        k_hits = np.zeros((1, shape.K), dtype=np.int64)
        for begin, end in k_ranges(shape.K, p["BK"], p["SPLITS"]):
            k_hits[0, begin:end] += 1
        return stores, {**staging(p), "K": k_hits}


class StreamKKernel(_WarpTileBase):
    """Data-parallel + stream-K hybrid over warp tiles, partial tiles fixed up by a second launch."""

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        warp_rules(params, device)
        require(1 <= params["WPS"] <= 32, "kernel.WPS", f"WPS={params['WPS']} must be 1..32 (workers per SM)")
        s = schedule(shape, params, device.sm_count)
        require(s.blocks <= 2 ** 31 - 1, "shape", f"{s.blocks} blocks exceed the grid limit")

    def entry(self, params) -> str:
        return f"gemm_streamk<{self._tparams(params)}>"

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """First :func:`sized_tile`'s tile (WPS = MINB) and, for 8 < M <= 16, the 16 x 128 tile of
        4 workers per SM; then the declared space."""
        out = [{**self.defaults, **sized_tile(problem.shape)}]
        out[0]["WPS"] = out[0]["MINB"]
        if 8 < problem.M <= 16:
            out.insert(0, {**self.defaults, **TILE_16})
        return out + super().candidates(problem, device)

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules (fp32, and tf32 on FP32 CUDA cores), with :func:`sized_tile` (WPS = MINB):

        - ``decode``: 8 < M <= 16 first, M <= 8 second, over :data:`TILE_16` (16x4096x4096 on the H200:
          0.0439 ms, 178.8% of cuBLAS; gemv_rows 151.7%); 16 < M <= 64 second (rank 1) with the sized tile;
        - ``k_heavy``: rank 11 (after the split-K warp tile); ``small``: rank 1; ``medium``: first;
        - ``large``: first where 128x256 data-parallel tiles leave their waves under 90% full
          (:func:`gemmlab.contract.regimes.fill`: a partial wave or a tile past N cost the data-parallel
          kernels 15-45 points, docs/results/shapes-h200.md), else after them (rank 20).
        """
        sized = {**sized_tile(problem.shape)}
        sized["WPS"] = sized["MINB"]
        if regime == "decode":
            if problem.M <= 16:
                return [Preference(RANK_FIRST + (1 if problem.M <= 8 else 0), TILE_16, "stream-K over 16-row warp tiles")]
            return [Preference(RANK_FIRST + 1, sized, "stream-K hybrid")]
        rank = {"k_heavy": 11, "small": 1, "medium": 0,
                "large": 20 if fill(problem.shape, device.sm_count) == "128x256" else 0}.get(regime)
        if rank is None:
            return []
        return [Preference(RANK_FIRST + rank, sized, "stream-K hybrid: data-parallel at whole waves, stream-K for the last")]

    def sweep_variants(self, problem: Problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep (fp32): decode 8 <= M <= 16 :data:`TILE_16`, above 16 rows the sized tile
        with 2 workers per SM; k_heavy one worker of one block per SM; none for tiny; else the sized tile."""
        if problem.precision != "fp32" or family == "tiny":
            return []
        sized = {**sized_tile(problem.shape)}
        sized["WPS"] = sized["MINB"]
        if family == "decode":
            return [dict(TILE_16)] if 8 <= problem.M <= 16 else [{**sized, "WPS": 2}] if problem.M > 16 else []
        return [{**sized, "WPS": 1, "MINB": 1}] if family == "k_heavy" else [sized]

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        s = schedule(shape, params, device.sm_count)
        return Launch(grid=(s.blocks, 1, 1), block=(self._threads(params), 1, 1))

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        s = schedule(problem.shape, params, device.sm_count)
        # no stream-K tiles: workers = 0, so every block is a data-parallel tile
        return (Matrix("A"), Matrix("B"), Matrix("C"), Workspace(), Dim("M"), Dim("N"), Dim("K"),
                Value(s.workers if s.sk_tiles else 0, "int32"), Value(s.sk_tiles, "int32"))

    def workspace_bytes(self, problem: Problem, params, device: DeviceFacts) -> int:
        s = schedule(problem.shape, params, device.sm_count)
        slots = 2 * s.workers if s.sk_tiles else 1  # one unused slot keeps the argument valid
        return 4 * slots * params["BM"] * params["BN"]

    def plan(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        p, s = params, schedule(problem.shape, params, device.sm_count)
        if not s.sk_tiles:
            return (Main(),)
        return (Main(), Extra(f"gemm_streamk_fixup<{p['BM']}, {p['BN']}, {p['BK']}, {FIXUP_FQ}>",
                              Launch(grid=(s.sk_tiles, fixup_parts(p), 1), block=(FIXUP_THREADS, 1, 1)),
                              (Workspace(), Matrix("C"), Dim("M"), Dim("N"), Dim("K"), Value(s.workers, "int32"),
                               Value(s.sk_tiles, "int32"))))

    def ownership(self, shape: Shape, params, sm_count: int = 132):
        """Replays the schedule (:class:`Schedule`, the kernel's integer arithmetic) on a GPU of
        ``sm_count`` SMs. Stores: C elements written by data-parallel blocks, by a worker that covers
        a whole tile, or by the fixup of a tile with several contributors. Loads: the float4 staging
        of A and B; ``tile``: one store per element of a tile (the warp-tile mapping); ``iterations``
        (tiles x ITERS): every BK chunk of every tile computed once; ``slots`` (when any tile is
        split): every written workspace slot read once by the fixup, which finds its contributors
        by the kernel's owner formula; ``fixup``: the fixup block's float4 loop covers the tile."""
        p = params
        s = schedule(shape, p, sm_count)
        rows, cols = warp_tile_geometry(p)
        tile_hits = count_hits((p["BM"], p["BN"]), rows, cols)
        iters = np.zeros((s.tiles, s.iters), dtype=np.int64)
        writers = np.zeros(s.tiles, dtype=np.int64)  # C writes per tile (direct, DP or fixup)
        written: dict[tuple[int, int], int] = {}
        for w in range(s.workers if s.sk_tiles else 0):
            for t, kb, ke, slot in s.segments(w):
                iters[t, kb:ke] += 1
                if slot < 0:
                    writers[t] += 1
                else:
                    written[(w, slot)] = written.get((w, slot), 0) + 1
        for t in range(s.sk_tiles, s.tiles):
            iters[t, :] += 1
            writers[t] += 1
        read: dict[tuple[int, int], int] = {}
        for t in range(s.sk_tiles):  # the fixup kernel
            first, last = s.owner(t * s.iters), s.owner((t + 1) * s.iters - 1)
            if first == last:
                continue
            writers[t] += 1
            for w in range(first, last + 1):
                if s.start(w) == s.start(w + 1):
                    continue
                slot = 0 if s.start(w) // s.iters == t else 1
                read[(w, slot)] = read.get((w, slot), 0) + 1
        # tile t covers rows (t // tiles_n) BM.. and columns (t % tiles_n) BN.. (BM x BN, masked to M x N):
        # each of its elements counts the tile's writes
        tiles_m, tiles_n = cdiv(shape.M, p["BM"]), cdiv(shape.N, p["BN"])
        per_element = np.broadcast_to(writers.reshape(tiles_m, 1, tiles_n, 1), (tiles_m, p["BM"], tiles_n, p["BN"]))
        stores = np.ascontiguousarray(per_element.reshape(tiles_m * p["BM"], tiles_n * p["BN"])[:shape.M, :shape.N])
        quads = p["BM"] * p["BN"] // 4  # fixup block (part y, thread x): float4 y*FQ*threads + f*threads + x
        y, f, x = np.ix_(range(fixup_parts(p)), range(FIXUP_FQ), range(FIXUP_THREADS))
        q = (y * FIXUP_FQ) * FIXUP_THREADS + x + f * FIXUP_THREADS
        qv = (4 * q)[..., None] + np.arange(4)
        fixup = count_hits((p["BM"], p["BN"]), qv // p["BN"], qv % p["BN"], np.broadcast_to((q < quads)[..., None], qv.shape))
        loads = {**staging(p), "tile": tile_hits, "iterations": iters, "fixup": fixup}
        if written or read:  # 1 where a slot is written once and read once; anything else fails
            keys = sorted(set(written) | set(read))
            loads["slots"] = np.array([[int(written.get(k, 0) == 1 and read.get(k, 0) == 1) for k in keys]])
        return stores, loads


#: blocks of each warp-tiled (BM, BN) tile (32x64 warps, 8x8 per thread) that fit one SM at <= 128 registers
TILE_BLOCKS_PER_SM = {(128, 128): 2, (64, 128): 4, (128, 64): 4, (64, 64): 8}
#: the 16 x 128 tile for 8 < M <= 16 (2 warps of 16 x 64, 4 x 8 per thread, BK = 16, 4 blocks per SM)
TILE_16 = {"BM": 16, "BN": 128, "BK": 16, "WM": 16, "WN": 64, "TM": 4, "TN": 8, "MINB": 4, "WPS": 4}


def wave_splits(shape: Shape, sms: int) -> dict:
    """splitk_warptile for a problem: :func:`sized_tile` with SPLITS = the most K slices whose blocks
    still fit one wave (tiles x SPLITS <= MINB x SMs: no second, partial wave), each slice at least 256
    long. On the H200 at 512x512x16384: 16 splits (256 blocks) ran in 0.219 ms with 8 splits and 0.305 ms
    with 17 (272 blocks, 8 in a second wave); at 256x256x65536 66 splits (264 blocks) 0.201 ms."""
    p = sized_tile(shape)
    return {**p, "SPLITS": max(1, min(p["MINB"] * sms // (cdiv(shape.M, p["BM"]) * cdiv(shape.N, p["BN"])), shape.K // 256))}


def sized_tile(shape: Shape) -> dict:
    """The 128 x 128 warp tile halved to 64 along M or N where that side is at most 64 (no half-empty
    tile), MINB the blocks of it that fit one SM (:data:`TILE_BLOCKS_PER_SM`)."""
    bm, bn = (64 if shape.M <= 64 else 128), (64 if shape.N <= 64 else 128)
    return {"BM": bm, "BN": bn, "BK": 8, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "MINB": TILE_BLOCKS_PER_SM[(bm, bn)]}


# --- declared spaces (issue 41): warp_rules as restrictions ---------------------------------------

#: the warp tile's domains (16-row tiles for decode-like M: gemmlab.dispatch.auto's STREAMK_16) and MINB
_WARP_PARAMS = {"BM": PowerOfTwo(16, 128), "BN": PowerOfTwo(64, 128), "BK": Choice((8, 16)), "WM": Choice((16, 32)),
                "WN": Choice((64, 32)), "TM": Choice((8, 4)), "TN": Choice((8, 4)), "MINB": PowerOfTwo(1, 8)}
_WARP_RESTRICTIONS = warp_tile_restrictions(4) + (
    Restriction("static_shared", lambda p: 2 * 4 * p["BK"] * (p["BM"] + 4 + p["BN"]) <= STATIC_SHARED_BYTES,
                "2*4*BK*(BM+4+BN) bytes of static shared memory: at most 48 KiB", over=("BM", "BN", "BK")),
    Restriction("resident_threads", lambda p: p["MINB"] * warp_threads(p) <= THREADS_PER_SM,
                "MINB blocks of (BM/WM)*(BN/WN)*32 threads fit one SM (2048 threads)",
                over=("BM", "BN", "WM", "WN", "MINB")),
)

#: splitk_warptile: the warp tile and SPLITS a power of two up to 64 (its candidates() adds the count
#: that fills one wave for the problem)
SPLITK_WARPTILE_SPACE = Space(params={**_WARP_PARAMS, "SPLITS": PowerOfTwo(1, 64)}, restrictions=_WARP_RESTRICTIONS)

#: streamk: the warp tile and WPS workers per SM, at most the blocks MINB lets reside
STREAMK_SPACE = Space(
    params={**_WARP_PARAMS, "WPS": PowerOfTwo(1, 8)},
    restrictions=_WARP_RESTRICTIONS + (
        Restriction("workers_resident", lambda p: p["WPS"] <= p["MINB"],
                    "WPS workers per SM no more than the MINB blocks __launch_bounds__ keeps resident",
                    over=("MINB", "WPS")),
    ))


@hookimpl
def gemmlab_kernels():
    return [
        SplitKWarptileKernel(name="splitk_warptile", source="splitk_warptile.cu", defaults={**WARPTILE, "SPLITS": 4},
                             description="split-K fp32 with the warp-tiled inner tile: SPLITS partial "
                                         "128x128 tiles into a workspace + a reduction launch",
                             sass_classes=("FFMA",), precisions=FP32_TF32, tf32_rounding="none",
                             space=SPLITK_WARPTILE_SPACE),
        StreamKKernel(name="streamk", source="streamk.cu", defaults={**WARPTILE, "WPS": 2},
                      description="data-parallel + stream-K hybrid fp32 (warp-tiled 128x128), partial tiles "
                                  "fixed up by a second launch",
                      sass_classes=("FFMA",), precisions=FP32_TF32, tf32_rounding="none", space=STREAMK_SPACE),
    ]
