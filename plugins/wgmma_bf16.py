"""Built-in kernel ``wgmma_bf16``: warp-specialised, persistent Hopper GEMM (sm_90a) in BF16 and FP16
(kernels/wgmma_bf16.cu, whose template kernels/wgmma_tf32.cu includes; the ``wgmma_tf32``
plugin reuses :class:`WgmmaKernel`). The name says bf16 (records and tables name it so); it serves
``precision=fp16`` too (issue 41 item 3), see "Precisions" below.

One producer warpgroup (one thread issues every TMA load, setmaxnreg.dec 40) and two consumer
warpgroups (setmaxnreg.inc 232) running wgmma m64nBNk16 on a BM x BN tile; a STAGES-deep ring of
TMA (128-byte swizzle) stages with full/empty mbarriers; a persistent grid (at most one CTA per SM,
from ``DeviceFacts.sm_count``) walking the tiles in groups of GROUP_M tile rows for L2 reuse;
``CLUSTER=2`` pairs CTAs of consecutive tile rows in a thread-block cluster that share the B tile
by TMA multicast; ``SCHED=1`` (cooperative: the two consumer warpgroups split each tile's rows) or
``SCHED=2`` (ping-pong: they take alternate whole tiles, main loops strictly alternating, so one's
epilogue overlaps the other's main loop). Epilogue (``EPI``): 2 each consumer warp writes
its float32 accumulators, 16 rows x 32 columns at a time, into one of its two 2 KiB shared-memory
buffers (128-byte swizzle) and one lane TMA-stores the box (``cp.async.bulk.tensor`` global <-
shared, clipped at M x N) while the warp goes on — where TMA can describe C (N % 4 == 0), else from
registers; 1 registers straight to the row-major float32 C (masked at the edges); 4 the same
staging, then each lane reads back 16-byte units and the warp stores whole 128-byte lines
(``st.global.v4``, no TMA); 3 every full-tile register store twice (a diagnostic: the time over
``EPI=1`` is what the stores cost); 5 as 2 with the tile's last ring stage held as 6 KiB more
staging per warp (released per warp once its boxes are read; SCHED=1 whole tiles only); 7 as 2 with
each tile's right half (128 columns) left in a third bank of accumulators and stored during the
CTA's next tile's main loop (the default since session 13), one box per warp after the wgmma groups of k-tiles 2, 4, 6 and 8
(two m64n128k16 per k-step instead of one m64n256k16) where the tiles are whole 128x256 tiles of the
cooperative schedule (BM=128, BN=256, SCHED=1, SPLIT_K=1, TAIL=1: :meth:`WgmmaKernel.defers`), else
as 2 (the plan's note says why); 6 was session 11's refuted, unmerged ``hold2`` experiment. Split tiles' items (SPLIT_K, TAIL=2)
in the TMA-store entry stage their boxes too: rank 0 TMA-stores, ranks >= 1 TMA reduce-add
(``cp.reduce.async.bulk.tensor .add``) in the chain's order below; with ``EPI`` 1, 3, 4 they store
from registers (``red.global.add``). Measured on the H200 at 4096³ BF16 (medians,
docs/results/tc-ladder-h200.md "Session 6"): EPI=1 96.2%, EPI=2 98.6%, EPI=4 98.3%, EPI=5 98.6%
(1.6 below EPI=2 in the same call) of cuBLAS; sessions 12-13 ("Session 13": 18 interleaved runs in three
device calls) EPI=7 100.75%, EPI=2 100.25% (4096³ row/col), EPI=7 102.3-103.5% at 8192³; Nsight
Compute at 4096³ EPI=7 293.1k cycles, EPI=2 298.4k, cuBLAS 296.2k.

Precisions ``bf16`` (A and B stored as bfloat16) and ``fp16`` (stored as IEEE float16), float32
accumulate and C. FP16 is the bf16 kernel with wgmma's ``.f16.f16`` form instead of ``.bf16.bf16``
(the PTX ISA gives both one syntax, fragment layout, descriptor format and transpose bits) and TMA
maps of data type FLOAT16 instead of BFLOAT16 (the maps take the problem's storage type): entries
``gemm_wgmma_f16`` / ``gemm_wgmma_tma_store_f16`` with the same template arguments
(:func:`entry_name`), so every path below (epilogues, split K and both reductions, the tail,
ping-pong, clusters, both layouts of A and B, the pad copies of 2-byte rows) serves both, and the
bf16 instances compile to the SASS of before. Layouts (issue 43): A
row-major (K-major) or column-major (``layout.a=col``, M-major: wgmma's transposed-A mode,
imm-trans-a = 1; A arrives as BM/64 boxes of 64 k-rows x 64 m-columns, one box per m64 block); B
column-major (K-major, read untransposed) or row-major (N-major: wgmma's transposed-B mode, B arrives
as 64-column boxes); all four pairs, read natively (no copy where the strides allow TMA). The kernel's
template argument ``MAJOR`` carries both (bit 0 B, bit 1 A: :meth:`WgmmaKernel.major`), so the
row-major-A instances keep their names and code. TMA needs every row stride a multiple of 16
bytes (:func:`gemmlab.contract.tma_rules.check`): where the stored one is not (K % 8 != 0 for a
row-major A and a column-major B, M % 8 != 0 for a column-major A, N % 8 != 0 for row-major B), the
plan pads that operand first
(:func:`gemmlab.contract.relayout.tma_operand`: an Extra step ``gemmlab::relayout_pad`` of
``gemmlab/relayout.cuh`` copies it into the workspace with 16-byte rows and a zero pad, inside
every timed launch) and the kernel's tensor map reads the copy; the record's ``plan`` shows it.
M and N are otherwise free (TMA zero-fills out-of-bounds box elements; stores are masked).
Parameters: BM (128 | 256), BN (64 | 128 | 256; BM=256 needs BN <= 128: at most 128 accumulators
per consumer thread; with SCHED=2 BM x BN <= 16384 and BM may be 64), STAGES (2..8, within 227
KiB of shared memory), CLUSTER (1 | 2), GROUP_M (>= 1, tile rows per scheduling group), SCHED
(1 | 2), SPLIT_K (>= 1: K slices per tile, for few tiles and long K), TAIL (1 | 2 | 3: 2 = stream-K over
the last partial wave's k-tiles; 3 = the same k-aligned, each CTA's range from its last tile's k-tile
0, rank 0 = the item starting at k-tile 0; only with SPLIT_K=1). Needs an sm_90 GPU (compiled for sm_90a).

Split K and the tail (:func:`work_items`): a tile computed by n > 1 work items is reduced in C
itself, without a zero-fill pass or workspace, in a fixed order so that the result is bitwise
repeatable: rank 0 (the item whose k range ends at K; with TAIL=3 the one starting at k-tile 0) stores plainly, rank r waits until the
tile's flag (a ``__device__`` array of the module, zeroed again by rank n - 1) reads r and adds
(``red.global.add.f32`` from registers; in the TMA-store entry a TMA reduce-add of its staged boxes,
and every rank but the last waits for its bulk stores/reductions to complete before it passes the
flag on). The plan stays ``(Main(),)`` (its note says when a requested staged
epilogue fell back to registers: :meth:`WgmmaKernel.epilogue_note`).

``REDUCE=2`` (with SPLIT_K > 1; TAIL=2 needs SPLIT_K=1, so the stream-K tail always keeps the
chain): the parallel workspace reduction instead. Every (tile, K slice) item stores its float32
partial tile plainly into slab ``rank`` of the workspace (S = effective slices slabs of M x N
floats, each :func:`slab_floats` long and 256-byte aligned, placed after the relayout copies'
regions), with no flags and no atomics; an Extra step ``wgmma_split_reduce<4>`` after Main sums
the S slabs in slab order into C (float4 chunks, the last M*N % 4 elements scalar): every slab
element written once per slice, every C element once, bitwise repeatable. The kernel's C argument
is then ``Workspace(slab offset)``. ``REDUCE=1`` (default) is the in-C chain above.

The whole GEMM contract (issue 43 item 3, :data:`EPILOGUE`; wgmma_tf32 too): a problem beyond C = A·B
compiles a fused entry with ``-DGEMMLAB_EPI`` (kernels/wgmma_bf16.cu: the same main loop) that computes
act(alpha·acc + beta·C0 + bias) in float32 and rounds it once into a float32/bf16/fp16 C of row pitch
ldc (gemmlab/fused.cuh's arithmetic; the GELUs through ``tanh.approx.f32`` and SiLU through ``ex2.approx``,
kernels/wgmma_bf16.cu's wgmma_activation, each within the evaluation error it declares:
:data:`ACTIVATION_ERROR`, which the verification bound applies). ``EPI=2`` and ``EPI=7`` (the default): ``gemm_wgmma_epi_tma_store``,
the TMA-store epilogue — each warp computes a box of 16 rows x 128 bytes of C's type (32 float32 or 64
bf16/fp16 columns) in registers (C0 and the bias read per box, before the staging wait), stages it in
its swizzled buffers and TMA-stores it through C's map of row pitch ldc (clipped at M x N); ``EPI=7`` on the cooperative 128x256 tile keeps the right half for the next tile's main
loop: with a 2-byte C and no C0 (beta = 0) its accumulators wait in registers and each box is computed
(bias, activation, rounding) and stored there, after the wgmma groups of k-tiles 2 and 4, so only the
left half's epilogue math lies between two main loops; a float32 C or a C0 to read computes the right
half's words when its tile ends (computed in the loop they spilled 220-236 bytes) and stores them
during the next main loop. They need C's
row stride ldc x its element bytes and N x its element bytes multiples of 16 (TMA; a TMA store writes
whole 16-byte chunks, so a row of C ending inside one would overwrite the padding after N); elsewhere, and with ``EPI=1``, the register
entry ``gemm_wgmma_epi`` stores from the accumulators (column pairs as one access where ldc is even).
The plan's note names the EPI that ran where another was asked (:meth:`WgmmaKernel.epilogue_note`).
Whole tiles only (``SPLIT_K=1``, ``TAIL=1``, ``REDUCE=1``: the fused operation is not additive;
:meth:`WgmmaKernel.check_fused`).

Strided batches (issue 43, ``batch.count`` > 1 with ``stride_a``/``stride_b``/``stride_c``; 0 shares A or B
between batches) run in one launch of ``gemm_wgmma_epi_batched`` / ``gemm_wgmma_epi_tma_store_batched``
(the fused entries' template arguments and code, ``WgmmaFusedBatched``; the single-batch fused entries and the
plain ones are unchanged). Design: the persistent tile queue runs over batch x tile units, batch-major
(unit u -> batch u / units, then the tile of u % units as before: GROUP_M groups inside each batch; the grid
is min(SMs, batch x units) CTAs, :meth:`WgmmaKernel.ctas`), so small batched products fill the GPU as one
queue instead of a launch per batch. A and B are read through rank-3 TMA maps (``TensorMap(batched=True)``:
dims (cols, rows, batches held), strides (ld, batch stride) in bytes), each box loaded at (col, row, batch),
so a box at a matrix's edge is zero-filled by TMA and never reads the next batch's rows (a 2-D map over the
buffer with per-batch row offsets would, where a K-row edge (row-major B, column-major A) falls inside a
box). A shared operand (stride 0) gets a map with one batch and is loaded at batch 0 (the kernel tests
stride_a / stride_b != 0). The batch pitch in bytes must be a multiple of 16 (TMA; the contract's
:func:`gemmlab.contract.tma_rules.check` refuses it in one line naming ``batch.stride_a`` / ``_b`` / ``_c``;
a stride is a multiple of its ld, so it holds wherever ld x the element bytes does). C: the register entry
writes through C + batch x stride_c (C0 likewise; the bias is shared by every batch); the TMA-store entry
through a rank-3 map of C (N, M, batches; pitches ldc and stride_c) at (col, row, batch), clipped at each
batch's M x N, with the 16-byte rules of the single-batch map (ldc and N x C's element bytes multiples of 16;
elsewhere the register entry). EPI=7's deferred right half keeps its tile's batch with its row and column.
``CLUSTER=2``: both CTAs of a cluster take one unit, so one batch, and B arrives by rank-3 multicast loads.
Refused in one line (:meth:`WgmmaKernel.check_batched`): an A or B that needs the pad or transpose copy (lda/ldb x the element bytes not a multiple of 16; tf32's
row-major B or column-major A): those copies move one matrix. lda and ldb above tight: A's and B's maps cover the
matrices at that pitch (:func:`gemmlab.contract.tma_rules.matrix_view`), or where lda/ldb x the element
bytes is not a multiple of 16 the pad (or tf32 transpose) copy reads them at it. A plain problem
compiles the plain entries as before (SASS pinned by tests/test_sass_unchanged.py).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gemmlab.contract import tma_rules as tma
from gemmlab.contract.relayout import tma_operand
from gemmlab.errors import ConfigError
from gemmlab.contract.hookspecs import (DeviceFacts, Dim, Extra, KernelOptions, KernelSpec, Launch, Main, Matrix,
                                        ParamError, Problem, Shape, TensorMap, Value, Workspace, hookimpl)
from gemmlab.contract.epilogue import ACTIVATIONS, OUTPUTS, EpilogueSupport
from gemmlab.contract.plugin_utils import (EPILOGUE_DEFINE, SM90_SHARED_OPTIN_BYTES, cdiv, count_hits,
                                          epilogue_template, require)
from gemmlab.contract.space import Choice, Range, Restriction, Space

THREADS = 384  # producer warpgroup + 2 consumer warpgroups
ROW_BYTES = 128  # one stage row: 128 bytes of K (the 128-byte swizzle span)


def elem_bytes(precision: str) -> int:
    """Bytes per stored A/B element: 2 for bf16 and fp16, 4 for tf32 (float32 storage)."""
    return 2 if precision in ("bf16", "fp16") else 4


def entry_name(base: str, problem: Problem) -> str:
    """The kernel entry of ``problem``'s precision: ``base`` (``gemm_wgmma`` or ``gemm_wgmma_tma_store``)
    for bf16 and tf32, ``base + "_f16"`` for fp16 (kernels/wgmma_bf16.cu: the same template with wgmma's
    ``.f16.f16`` form, F16 = 1; the bf16 instances keep their names and code)."""
    return base + ("_f16" if problem.precision == "fp16" else "")


EPI_STAGE_BYTES = 2 * 4 * 2 * 16 * 128  #: EPI=2: two 16 x 32 float32 staging buffers per consumer warp


def shared_bytes(p, tma_store: bool = False) -> int:
    """STAGES x (A BM x 128 B + B BN x 128 B) plus 1024 bytes of slack to align the ring to 1024;
    with the TMA-store epilogue (``tma_store``) also :data:`EPI_STAGE_BYTES` of staging buffers."""
    return p["STAGES"] * (p["BM"] + p["BN"]) * ROW_BYTES + 1024 + (EPI_STAGE_BYTES if tma_store else 0)


REDUCE_THREADS = 256  #: threads per block of wgmma_split_reduce
REDUCE_BLOCKS_PER_SM = 8  #: its grid: at most this many blocks per SM (grid-stride loop)


def slab_floats(M: int, N: int) -> int:
    """kernels/wgmma_bf16.cu wgmma_slab_stride: floats between split-K slabs, M*N rounded up to 64."""
    return cdiv(M * N, 64) * 64


MAX_FLAGS = 16384  # kernels/wgmma_bf16.cu WGMMA_MAX_FLAGS: split-tile counters (tile units x CLUSTER)


def split_plan(units: int, groups: int, k_tiles: int, split_k: int, tail: int) -> dict:
    """kernels/wgmma_bf16.cu WorkSchedule's constructor (same integer arithmetic): ``kps`` k-tiles
    per slice, ``split`` effective slices, ``full`` whole waves of tile units over ``groups``
    clusters, whether the stream-K ``tail`` applies (it saves >= 2% of a CTA's k-tiles and each of
    the ``groups`` ranges has >= 2 k-tiles), ``dp``
    data-parallel units and ``I`` tail iterations."""
    kps = cdiv(k_tiles, split_k)
    split = cdiv(k_tiles, kps)
    full, rem = divmod(units, groups)
    seg = cdiv(rem * k_tiles, groups)
    use_tail = split == 1 and bool(tail) and rem * k_tiles >= 2 * groups and (k_tiles - seg) * 50 >= (full + 1) * k_tiles
    return {"kps": kps, "split": split, "full": full, "tail": use_tail, "dp": full * groups if use_tail else units,
            "I": rem * k_tiles if use_tail else 0}


def unit_items(units: int, groups: int, c: int, k_tiles: int, split_k: int, tail: int) -> list[tuple[int, ...]]:
    """WorkSchedule.item replayed for cluster ``c``: its (tile unit, kb, ke, role, contributors,
    rank) items in order; role 0 sole owner, 1 storer of a split tile (rank 0), 2 adder (rank r
    adds after ranks 0..r-1). ``tail`` 0: no stream-K tail; 1: a tail range in order, rank 0 = the
    item ending at K; 2 (k-aligned): the range's last tile first, rank 0 = the item starting at
    k-tile 0."""
    sp = split_plan(units, groups, k_tiles, split_k, tail)
    out = []
    if not sp["tail"]:
        split, kps = sp["split"], sp["kps"]
        for u in range(c, units * split, groups):
            r = u // units
            slice_ = split - 1 - r
            kb = slice_ * kps
            out.append((u - r * units, kb, min(k_tiles, kb + kps), 0 if split == 1 else (1 if r == 0 else 2), split, r))
        return out
    full, dp, I = sp["full"], sp["dp"], sp["I"]
    out = [(c + i * groups, 0, k_tiles, 0, 1, 0) for i in range(full)]
    s, e = c * I // groups, (c + 1) * I // groups

    def worker(x):
        return ((x + 1) * groups - 1) // I

    if s >= e:
        return out
    tiles = range(s // k_tiles, (e - 1) // k_tiles + 1)
    for t in (reversed(tiles) if tail == 2 else tiles):
        kb, ke = max(s, t * k_tiles) - t * k_tiles, min(e, (t + 1) * k_tiles) - t * k_tiles
        first, last = worker(t * k_tiles), worker(t * k_tiles + k_tiles - 1)
        n = last - first + 1
        r = c - first if tail == 2 else last - c
        out.append((dp + t, kb, ke, 0 if n == 1 else (1 if r == 0 else 2), n, r))
    return out


def work_items(shape: Shape, p, ctas: int, elem: int = 2) -> list[list[tuple[int, ...]]]:
    """The persistent schedule of kernels/wgmma_bf16.cu, per CTA: (tile row, tile column, kb, ke,
    role, contributors, rank) in order (k-tiles of 128 bytes: 64 bf16 or 32 tf32, ``elem`` bytes each).
    Work units are pairs of CLUSTER tile rows x one tile column, taken by clusters round-robin (or
    as SPLIT_K slices / stream-K tail ranges, :func:`unit_items`); inside a group of GROUP_M unit
    rows the row index runs fastest."""
    BM, BN, cl, gm = p["BM"], p["BN"], p["CLUSTER"], p["GROUP_M"]
    num_m, num_n = cdiv(shape.M, BM), cdiv(shape.N, BN)
    pairs_m = cdiv(num_m, cl)
    units = pairs_m * num_n
    k_tiles = cdiv(shape.K, ROW_BYTES // elem)
    out = []
    for cta in range(ctas):
        rank, first, stride = cta % cl, cta // cl, ctas // cl
        items = []
        for unit, kb, ke, role, n, r in unit_items(units, stride, first, k_tiles, p.get("SPLIT_K", 1), p.get("TAIL", 1) - 1):
            per_group = gm * num_n
            group = unit // per_group
            rows = min(pairs_m - group * gm, gm)
            in_group = unit - group * per_group
            items.append(((group * gm + in_group % rows) * cl + rank, in_group // rows, kb, ke, role, n, r))
        out.append(items)
    return out


def batched_tiles(shape: Shape, p, ctas: int, batch: int) -> list[list[tuple[int, int, int]]]:
    """The batched fused entries' queue per CTA (kernels/wgmma_bf16.cu: WorkSchedule over units x batch,
    then batch_of and tile_of; whole tiles): (batch, tile row, tile column) in order. Unit u of the queue
    (taken by cluster c = cta // CLUSTER at u = c, c + ctas / CLUSTER, ...) is batch u // units, and
    u % units is the tile unit of :func:`work_items`' arithmetic (GROUP_M groups of CLUSTER tile rows
    inside each batch; cluster rank r takes row CLUSTER x pair + r)."""
    BM, BN, gm, cl = p["BM"], p["BN"], p["GROUP_M"], p.get("CLUSTER", 1)
    num_m, num_n = cdiv(shape.M, BM), cdiv(shape.N, BN)
    pairs_m = cdiv(num_m, cl)
    units = pairs_m * num_n
    out = []
    for cta in range(ctas):
        rank, first, stride = cta % cl, cta // cl, ctas // cl
        items = []
        for u in range(first, units * batch, stride):
            z, unit = divmod(u, units)
            per_group = gm * num_n
            group = unit // per_group
            rows = min(pairs_m - group * gm, gm)
            in_group = unit - group * per_group
            items.append((z, (group * gm + in_group % rows) * cl + rank, in_group // rows))
        out.append(items)
    return out


def schedule(shape: Shape, p, ctas: int) -> list[list[tuple[int, int]]]:
    """The tiles of :func:`work_items` per CTA, in order: (tile row, tile column) blocks."""
    return [[(m, n) for m, n, *_ in cta] for cta in work_items(shape, p, ctas)]


def staged_store_coords(BM: int, BN: int, ping: bool, tma: bool) -> tuple[np.ndarray, np.ndarray]:
    """Tile-relative (row, column) of every C element the staged epilogue writes for one tile,
    from the kernel's index arithmetic: per consumer warpgroup (one in ping-pong, rows offset
    wg x BM/2 in the cooperative schedule), m64 block mi, warp w and 32-column chunk c, a box of
    16 rows at ``wg_off + 64 mi + 16 w`` and 32 columns at ``32 c``. ``tma``: each box whole (one
    TMA store, EPI=2/5); else (EPI=4) lane l of the warp stores, for i in 0..3, the float4 of row
    ``4 i + l / 8`` at column ``4 (l % 8)``. Broadcastable integer arrays."""
    wm = BM if ping else BM // 2
    wg, mi, w, c = np.ix_(range(1 if ping else 2), range(wm // 64), range(4), range(BN // 32))
    base, col0 = wg * wm + mi * 64 + w * 16, c * 32
    if tma:
        r, x = np.arange(16).reshape(16, 1), np.arange(32).reshape(1, 32)
        return base[..., None, None] + r, col0[..., None, None] + x
    i, lane, e = np.ix_(range(4), range(32), range(4))
    return base[..., None, None, None] + 4 * i + lane // 8, col0[..., None, None, None] + 4 * (lane % 8) + e


def add_pattern(counts: np.ndarray, hits: np.ndarray, r0: int, c0: int) -> None:
    """``counts[r0 + i, c0 + j] += hits[i, j]`` (int64 2-D arrays, ``counts`` changed in place) where
    ``r0 + i`` < counts' rows and ``c0 + j`` < its columns: what :func:`add_hits` of every hit's
    coordinates shifted by (r0, c0), masked to ``counts.shape``, counts (one window add instead of a
    scatter). Raises IndexError, as that scatter does, if a hit not masked lands at a negative row
    or column."""
    h, w = min(hits.shape[0], counts.shape[0] - r0), min(hits.shape[1], counts.shape[1] - c0)
    if h <= 0 or w <= 0:
        return
    kept = hits[:h, :w]
    lo_r, lo_c = max(0, -r0), max(0, -c0)
    if (lo_r or lo_c) and (kept[:lo_r].any() or kept[:, :lo_c].any()):
        raise IndexError(f"index outside {counts.shape}: a hit at a negative row or column (window at {r0}, {c0})")
    if lo_r < h and lo_c < w:
        counts[r0 + lo_r:r0 + h, c0 + lo_c:c0 + w] += kept[lo_r:, lo_c:]


def add_tiled(counts: np.ndarray, per_tile: np.ndarray, hits: np.ndarray, r0: int, c0: int, BM: int, BN: int) -> None:
    """:func:`add_pattern` of ``hits`` at (r0 + a BM, c0 + b BN), ``per_tile[a, b]`` times for every
    (a, b), a row of tiles at a time: ``per_tile`` (int64, tiles of BM x BN) spread over the tiles'
    elements times each BM x BN block of ``hits`` (one block unless the hits reach beyond one tile)."""
    H, W = hits.shape
    blocks = np.zeros((cdiv(H, BM) * BM, cdiv(W, BN) * BN), dtype=np.int64)
    blocks[:H, :W] = hits
    for dy in range(blocks.shape[0] // BM):
        for dx in range(blocks.shape[1] // BN):
            block = blocks[dy * BM:(dy + 1) * BM, dx * BN:(dx + 1) * BN]
            if not block.any():
                continue
            for a in np.flatnonzero(per_tile.any(axis=1)):
                spread = (block[:, None, :] * per_tile[a][None, :, None]).reshape(BM, per_tile.shape[1] * BN)
                add_pattern(counts, spread, r0 + (a + dy) * BM, c0 + dx * BN)


def reduce_writes(M: int, N: int, grid: int) -> np.ndarray:
    """Replay of kernels/wgmma_bf16.cu wgmma_split_reduce's index arithmetic (``grid`` blocks of
    :data:`REDUCE_THREADS`, grid-stride): how often each element of the packed M x N C is written
    (float4 chunk i covers elements 4i..4i+3 for i < M*N // 4, then one thread per remaining
    element). All ones: each C element written exactly once."""
    n, step = M * N, grid * REDUCE_THREADS
    writes = np.zeros(n, dtype=np.int64)
    chunks = n // 4
    for start in range(0, chunks, step):  # grid-stride passes of the float4 loop
        i = np.arange(start, min(start + step, chunks))
        for j in range(4):
            np.add.at(writes, 4 * i + j, 1)
    for start in range(4 * chunks, n, step):  # the scalar tail
        np.add.at(writes, np.arange(start, min(start + step, n)), 1)
    return writes.reshape(M, N)


class WgmmaKernel(KernelSpec):
    """Persistent warp-specialised wgmma GEMM: BM x BN tile, 128-byte K stages, TMA + mbarriers."""

    def b_mn_major(self, problem: Problem) -> bool:
        """B row-major (K x N stored, N contiguous) is N-major for wgmma; TF32 wgmma reads K-major
        B only, so a row-major TF32 B is read from its transposed copy (:meth:`operands`)."""
        return problem.layout_b == "row" and problem.precision != "tf32"

    def a_mn_major(self, problem: Problem) -> bool:
        """A column-major (K x M stored, M contiguous) is M-major for wgmma (bf16, fp16: imm-trans-a = 1);
        TF32 wgmma reads K-major A only, so a column-major TF32 A is read from its transposed copy
        (:meth:`operands`)."""
        return problem.layout_a == "col" and problem.precision != "tf32"

    def major(self, problem: Problem) -> int:
        """The kernel's ``MAJOR`` template argument: bit 0 B MN-major (:meth:`b_mn_major`), bit 1 A
        MN-major (:meth:`a_mn_major`); 0 and 1 are the row-major-A instances."""
        return int(self.b_mn_major(problem)) | int(self.a_mn_major(problem)) << 1

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        p = params
        require(device.arch == "90", "kernel",
                f"{self.name} needs an sm_90 GPU (wgmma, setmaxnreg: sm_90a); the compile target is sm_{device.arch} on {device.name}")
        require(p["SCHED"] in PARAM_VALUES["SCHED"], "kernel.SCHED",
                f"SCHED={p['SCHED']} must be 1 (cooperative) or 2 (ping-pong)")
        rows = p["BM"] if p["SCHED"] == 2 else p["BM"] // 2  # rows per consumer warpgroup
        allowed = ("64, 128, 192 or 256 with SCHED=2" if p["SCHED"] == 2
                   else "128 or 256 with SCHED=1 (64, 128, 192 or 256 with SCHED=2)")
        require(p["BM"] <= 256 and rows % 64 == 0 and rows > 0, "kernel.BM",
                f"BM={p['BM']} must be {allowed} (whole m64 blocks per consumer warpgroup)")
        require(p["BN"] in PARAM_VALUES["BN"], "kernel.BN", f"BN={p['BN']} must be 64, 128 or 256 (wgmma n)")
        require(rows * p["BN"] <= 64 * 256, "kernel.BN",
                f"BM={p['BM']} x BN={p['BN']} needs {rows * p['BN'] // 128} accumulators per consumer thread; at most 128 "
                f"({'BM x BN <= 16384 with SCHED=2' if p['SCHED'] == 2 else 'BM=256 takes BN <= 128'})")
        require(p["CLUSTER"] in PARAM_VALUES["CLUSTER"], "kernel.CLUSTER", f"CLUSTER={p['CLUSTER']} must be 1 or 2")
        require(p["GROUP_M"] >= 1, "kernel.GROUP_M", f"GROUP_M={p['GROUP_M']} must be >= 1")
        require(p["STAGES"] in PARAM_VALUES["STAGES"], "kernel.STAGES", f"STAGES={p['STAGES']} must be 2..8")
        require(p["SPLIT_K"] >= 1, "kernel.SPLIT_K", f"SPLIT_K={p['SPLIT_K']} must be >= 1")
        require(p["TAIL"] in PARAM_VALUES["TAIL"], "kernel.TAIL", f"TAIL={p['TAIL']} must be 1 (data-parallel), 2 (stream-K over the last partial wave) or 3 (the same, k-aligned)")
        require(p["TAIL"] == 1 or p["SPLIT_K"] == 1, "kernel.TAIL", f"TAIL={p['TAIL']} needs SPLIT_K=1 (got SPLIT_K={p['SPLIT_K']})")
        require(p.get("REDUCE", 1) in PARAM_VALUES["REDUCE"], "kernel.REDUCE",
                f"REDUCE={p.get('REDUCE')} must be 1 (split tiles reduced in C, ordered chain) or 2 (workspace slabs + reduce step)")
        require(p.get("REDUCE", 1) == 1 or p["SPLIT_K"] > 1, "kernel.REDUCE",
                f"REDUCE=2 needs SPLIT_K > 1 (got SPLIT_K={p['SPLIT_K']}; TAIL=2 keeps the in-C chain)")
        if (p["SPLIT_K"] > 1 and p.get("REDUCE", 1) == 1) or p["TAIL"] >= 2:
            flags = cdiv(cdiv(problem.M, p["BM"]), p["CLUSTER"]) * p["CLUSTER"] * cdiv(problem.N, p["BN"])
            require(flags <= MAX_FLAGS, "kernel.SPLIT_K" if p["SPLIT_K"] > 1 else "kernel.TAIL",
                    f"split tiles count in {MAX_FLAGS} per-tile flags; this shape has {flags} tiles of {p['BM']}x{p['BN']}")
        if problem.extended:
            self.check_fused(problem, p, device)
        epi = p.get("EPI", 1)
        require(epi in PARAM_VALUES["EPI"], "kernel.EPI",
                f"EPI={epi} must be 1 (registers to global), 2 (TMA store through shared memory), 3 (registers, twice: "
                f"diagnostic), 4 (shared-memory staging, coalesced 16-byte stores), 5 (as 2, the tile's last ring "
                f"stage held as more staging) or 7 (as 2, each tile's right half stored during the next tile's main loop)")
        require(epi != 5 or (p["SCHED"] == 1 and p["SPLIT_K"] == 1 and p["TAIL"] == 1), "kernel.EPI",
                f"EPI=5 needs whole tiles in the cooperative schedule: SCHED=1, SPLIT_K=1, TAIL=1 "
                f"(got SCHED={p['SCHED']}, SPLIT_K={p['SPLIT_K']}, TAIL={p['TAIL']})")
        staged = self.stages_c(problem, p)
        require(shared_bytes(p, staged) <= device.max_shared_per_block_optin, "kernel.STAGES",
                f"dynamic shared memory {shared_bytes(p, staged)} bytes (STAGES={p['STAGES']} x (BM+BN) x 128 B + 1024"
                + (f" + {EPI_STAGE_BYTES} of EPI=2 staging" if staged else "") + f") exceeds {device.max_shared_per_block_optin}")
        if self.b_mn_major(problem):
            require(p["CLUSTER"] == 1 or p["BN"] >= 128, "kernel.CLUSTER",
                    f"CLUSTER=2 with row-major B splits the B tile's 64-column boxes over the pair: BN={p['BN']} must be >= 128")
        require(p["CLUSTER"] <= device.max_cluster_size, "kernel.CLUSTER",
                f"CLUSTER={p['CLUSTER']} exceeds the device's cluster limit {device.max_cluster_size}")
        for tm in self.arguments(problem, p, device)[:3 if self.tma_store(problem, p) else 2]:
            try:
                tma.check(tm, problem)
            except ConfigError as exc:
                raise ParamError(exc.field, str(exc).split(': ', 1)[1]) from None

    def check_fused(self, problem: Problem, params, device: DeviceFacts) -> None:
        """The fused entries' rules (a problem beyond C = A·B, issue 43): with batch.count > 1
        :meth:`check_batched`'s, whole tiles (SPLIT_K=1, TAIL=1: the fused operation is not additive), and the register epilogue (EPI 1) or the TMA store (EPI 2,
        7: :meth:`tma_store`; where C's map cannot be made they store from registers, the plan's note
        says so); 3, 4, 5 are plain-C experiments.

        Raises:
            ParamError: the first rule broken, one line naming the field."""
        if problem.batch > 1:
            self.check_batched(problem, params, device)
        for name, one in (("SPLIT_K", 1), ("TAIL", 1), ("REDUCE", 1)):
            require(params.get(name, one) == one, f"kernel.{name}",
                    f"{name}={params.get(name)}: the fused epilogue runs on whole tiles ({name}={one}; split tiles' "
                    "partial sums cannot each pass through it)")
        require(params.get("EPI", 1) in (1, 2, 7), "kernel.EPI",
                f"EPI={params.get('EPI')}: the fused epilogue stores from registers (EPI=1) or through the TMA store "
                "(EPI=2, 7); 3, 4 and 5 are plain-C experiments")

    def check_batched(self, problem: Problem, params, device: DeviceFacts) -> None:
        """The strided-batched fused entries' rules (batch.count > 1, issue 43): A and B read by TMA as
        stored (no pad or transpose copy: those copy one matrix; lda / ldb x the element bytes a multiple of 16, and for
        wgmma_tf32 a row-major A and a column-major B). The batch strides' TMA rule (bytes a multiple of
        16) is :func:`gemmlab.contract.tma_rules.check`'s, on the maps.

        Raises:
            ParamError: the first rule broken, one line naming the field."""
        for op in self.operands(problem, params, device):
            if op.kind == "transpose":
                field = "layout.a" if op.matrix == "A" else "layout.b"
                layout = problem.layout_a if op.matrix == "A" else problem.layout_b
                raise ParamError(field, f"{field}={layout}: {self.name} reads it through a transposed copy of one "
                                 f"matrix; with batch.count={problem.batch} it must be K-major "
                                 f"({'layout.a=row' if op.matrix == 'A' else 'layout.b=col'})")
            if op.kind == "pad":
                name = "lda" if op.matrix == "A" else "ldb"
                ld = problem.lda if op.matrix == "A" else problem.ldb
                step = 16 // problem.ab_bytes
                why = (f"TMA reads batched operands as stored (the pad copy that aligns one matrix is not built for "
                       f"batches); with batch.count={problem.batch}")
                if ld == problem.storage(op.matrix).cols:  # tight: the shape's own dimension is the row
                    layout = problem.layout_a if op.matrix == "A" else problem.layout_b
                    dim = {("A", "row"): "K", ("A", "col"): "M", ("B", "row"): "N", ("B", "col"): "K"}[(op.matrix, layout)]
                    raise ParamError("shape", f"{dim}={ld} x {problem.ab_bytes} B ({op.matrix}'s rows, {name} tight) is not a "
                                     f"multiple of 16 bytes: {why} {dim} must be a multiple of {step}, or layout.{name} "
                                     f"a multiple of {step} above it")
                raise ParamError(f"layout.{name}", f"{name}={ld} x {problem.ab_bytes} B is not a multiple of 16 bytes: "
                                 f"{why} {name} must be a multiple of {step}")

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """A shortlist for the problem, then the declared space's points (the core checks each):
        the three tiles of :data:`TILES` with the least estimated time (whole waves of the persistent
        grid over every batch's tiles x tile area / the tile's guessed efficiency), the first also with the stream-K tail
        (TAIL=2) where it leaves a partial last wave; where even 64 x 128 tiles do not fill the SMs
        and K is long, 64 x 128 ping-pong tiles with SPLIT_K = the most slices that still fit one
        wave (each >= 8 k-tiles, at most 32), reduced through the workspace (REDUCE=2)."""
        sms = device.sm_count

        def tiles(bm, bn):  # of every batch: the batched entries' queue (issue 43)
            return cdiv(problem.M, bm) * cdiv(problem.N, bn) * problem.batch

        ranked = sorted(TILES, key=lambda t: cdiv(tiles(t[0], t[1]), sms) * t[0] * t[1] / t[3])
        out = [{**self.defaults, "BM": bm, "BN": bn, "SCHED": sched} for bm, bn, sched, _ in ranked[:3]]
        first = tiles(ranked[0][0], ranked[0][1])
        if first > sms and first % sms:
            out.append({**out[0], "TAIL": 2})
        k_tiles = cdiv(problem.K, ROW_BYTES // elem_bytes(problem.precision))
        split = max(1, min(32, sms // tiles(64, 128), k_tiles // 8))
        if problem.extended:  # the fused entry: whole tiles, the register epilogue (wgmma_picks.fused)
            from gemmlab_plugins.wgmma_picks import fused
            return [fused(p) for p in out if p.get("TAIL", 1) == 1]
        if split > 1:
            out.insert(0, {**self.defaults, "BM": 64, "BN": 128, "SCHED": 2, "STAGES": 6, "SPLIT_K": split, "REDUCE": 2})
        return out + super().candidates(problem, device)

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules: :func:`gemmlab_plugins.wgmma_picks.preferences`."""
        from gemmlab_plugins.wgmma_picks import preferences
        return preferences(problem, device, regime)

    def sweep_variants(self, problem: Problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep: :func:`gemmlab_plugins.wgmma_picks.sweep_variants`."""
        from gemmlab_plugins.wgmma_picks import sweep_variants
        return sweep_variants(problem, device, family)

    def tma_store(self, problem: Problem, params) -> bool:
        """Whether the TMA-store entry runs: ``EPI=2`` (or 5, 7), TMA can describe C (row stride ldc x
        C's element bytes a multiple of 16: N % 4 == 0 for the plain float32 C) and C is the
        destination (not REDUCE=2's slabs); elsewhere ``EPI=2`` stores from registers. The record's
        ``compile.name_expression`` names the entry that ran: ``gemm_wgmma_tma_store<...>`` or
        ``gemm_wgmma<...>``. In the TMA-store entry split tiles' items (SPLIT_K, TAIL=2) stage too:
        rank 0 TMA-stores, ranks >= 1 TMA reduce-add, in the chain's order. A problem beyond C = A·B
        (issue 43) takes the fused TMA-store entry ``gemm_wgmma_epi_tma_store`` with ``EPI`` 2 or 7
        (C's map: 16 rows x 128 bytes boxes, row pitch ldc, :meth:`fused_box`), else its register
        entry ``gemm_wgmma_epi``. With ldc above N the rows of C must end on 16 bytes too (N x C's
        element bytes a multiple of 16): a TMA store writes whole 16-byte chunks, so a row ending
        inside one would overwrite the padding after N (H100, session 33;
        :mod:`gemmlab.contract.tma_rules`); such a problem stores from registers."""
        return (params.get("EPI", 1) in ((2, 7) if problem.extended else (2, 5, 7))
                and (problem.ldc * problem.c_bytes) % 16 == 0 and (problem.N * problem.c_bytes) % 16 == 0
                and params.get("REDUCE", 1) == 1)

    @staticmethod
    def fused_box(problem: Problem) -> tuple[int, int]:
        """The fused TMA-store entry's box of C (rows, cols): a warp's 16 rows x 128 bytes of C's type
        (32 float32 or 64 bf16/fp16 columns; kernels/wgmma_bf16.cu WgmmaFused::BOX_COLS)."""
        return (16, 128 // problem.c_bytes)

    def defers(self, problem: Problem, params) -> bool:
        """Whether ``EPI=7`` keeps each tile's right half for the next tile's main loop: the TMA-store
        entry runs (:meth:`tma_store`) with whole 128x256 tiles in the cooperative schedule (BM=128,
        BN=256, SCHED=1, SPLIT_K=1, TAIL=1); elsewhere ``EPI=7`` is ``EPI=2`` (the plan's note says
        why). The instance is then ``gemm_wgmma_tma_store<..., 2>``."""
        p = params
        return (p.get("EPI", 1) == 7 and self.tma_store(problem, p) and p.get("BM") == 128 and p.get("BN") == 256
                and p.get("SCHED", 1) == 1 and p.get("SPLIT_K", 1) == 1 and p.get("TAIL", 1) == 1)

    def staged_stores(self, problem: Problem, params) -> bool:
        """Whether ``EPI=4`` runs (shared-memory staging, then st.global.v4 of whole 128-byte lines
        per warp instruction, no TMA): N % 4 == 0 (16-byte aligned rows) and C the destination;
        elsewhere the register epilogue. Split tiles' items store from registers."""
        return (params.get("EPI", 1) == 4 and problem.N % 4 == 0 and params.get("REDUCE", 1) == 1
                and not problem.extended)

    def stages_c(self, problem: Problem, params) -> bool:
        """Whether C leaves through the shared-memory staging buffers (:meth:`tma_store` or
        :meth:`staged_stores`): they then take :data:`EPI_STAGE_BYTES` of shared memory."""
        return self.tma_store(problem, params) or self.staged_stores(problem, params)

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape, self.precisions[0], *self.layouts[0]), params, device)

    def instance(self, problem: Problem, params) -> str:
        """The entry and template arguments of ``problem``'s build; beyond C = A·B (issue 43)
        ``gemm_wgmma_epi<ELEM, BM, BN, STAGES, MAJOR, CLUSTER, GROUP_M, PINGPONG, F16, ACT, BIAS, BETA,
        BIAS_T, OUT_T>`` (the register epilogue, whole tiles) or, where :meth:`tma_store`,
        ``gemm_wgmma_epi_tma_store<..., F16, DEFER, ACT, ...>`` (DEFER 1 where :meth:`defers`); with
        batch.count > 1 ``gemm_wgmma_epi_batched`` / ``gemm_wgmma_epi_tma_store_batched`` with the same
        template arguments."""
        p = params
        if problem.extended:
            head = (f"{elem_bytes(problem.precision)}, {p['BM']}, {p['BN']}, {p['STAGES']}, "
                    f"{self.major(problem)}, {p['CLUSTER']}, {p['GROUP_M']}, {p['SCHED'] - 1}, "
                    f"{int(problem.precision == 'fp16')}")
            batched = "_batched" if problem.batch > 1 else ""  # issue 43: the strided-batched entries
            if self.tma_store(problem, p):
                return (f"gemm_wgmma_epi_tma_store{batched}<{head}, {int(self.defers(problem, p))}, "
                        f"{epilogue_template(problem)}>")
            return f"gemm_wgmma_epi{batched}<{head}, {epilogue_template(problem)}>"
        if self.tma_store(problem, p):
            return (f"{entry_name('gemm_wgmma_tma_store', problem)}<{elem_bytes(problem.precision)}, {p['BM']}, {p['BN']}, {p['STAGES']}, "
                    f"{self.major(problem)}, {p['CLUSTER']}, {p['GROUP_M']}, {p['SCHED'] - 1}, "
                    f"{p.get('SPLIT_K', 1)}, {p.get('TAIL', 1) - 1}" + (", 1>" if p.get("EPI") == 5 else ", 2>" if self.defers(problem, p) else ">"))
        if p.get("EPI", 1) == 3 or self.staged_stores(problem, p):
            return (f"{entry_name('gemm_wgmma', problem)}<{elem_bytes(problem.precision)}, {p['BM']}, {p['BN']}, {p['STAGES']}, "
                    f"{self.major(problem)}, {p['CLUSTER']}, {p['GROUP_M']}, {p['SCHED'] - 1}, {p.get('SPLIT_K', 1)}, {p.get('TAIL', 1) - 1}, "
                    f"{int(p.get('REDUCE', 1) == 2)}, {2 if p.get('EPI', 1) == 3 else 3}>")
        return (f"{entry_name('gemm_wgmma', problem)}<{elem_bytes(problem.precision)}, {p['BM']}, {p['BN']}, {p['STAGES']}, "
                f"{self.major(problem)}, {p['CLUSTER']}, {p['GROUP_M']}, {p['SCHED'] - 1}, "
                f"{p.get('SPLIT_K', 1)}, {p.get('TAIL', 1) - 1}"
                + (", 1>" if p.get("REDUCE", 1) == 2 else ">"))  # REDUCE=1: the instance name of before

    def entry(self, params) -> str:
        return self.instance(Problem(Shape(1, 1, 1), self.precisions[0], *self.layouts[0]), params)

    def options(self, problem: Problem, params, device: DeviceFacts) -> KernelOptions:
        """sm_90a (arch-specific); beyond C = A·B also ``-DGEMMLAB_EPI`` (the fused entry)."""
        if problem.extended:
            return KernelOptions(arch_specific=True, defines={EPILOGUE_DEFINE: 1})
        return KernelOptions(arch_specific=True)

    def operands(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """A and B as the kernel reads them (:func:`gemmlab.contract.relayout.tma_operand`): TMA
        maps over the stored matrices where their row strides are 16-byte multiples, else over a
        zero-padded copy in the workspace (A at offset 0, B after it); a TF32 row-major B or
        column-major A over its transposed K-major copy. Boxes: a K-major A (BM, BK), an M-major
        (column-major bf16 or fp16) A (BK, 64): BM/64 per stage; a K-major B (BN/CLUSTER, BK), an N-major B (BK, 64)."""
        bk = ROW_BYTES // elem_bytes(problem.precision)
        b_box = (bk, 64) if self.b_mn_major(problem) else (params["BN"] // params["CLUSTER"], bk)
        a_box = (bk, 64) if self.a_mn_major(problem) else (params["BM"], bk)
        a = tma_operand(problem, "A", a_box, k_major=not self.a_mn_major(problem), sm_count=device.sm_count)
        b = tma_operand(problem, "B", b_box, k_major=not self.b_mn_major(problem), offset=a.end,
                        sm_count=device.sm_count)
        return a, b

    def slices(self, problem: Problem, params) -> int:
        """Effective K slices S of a tile (:func:`split_plan`: cdiv(k_tiles, cdiv(k_tiles, SPLIT_K)))."""
        k_tiles = cdiv(problem.K, ROW_BYTES // elem_bytes(problem.precision))
        return split_plan(1, 1, k_tiles, params.get("SPLIT_K", 1), 0)["split"]

    def slab_offset(self, problem: Problem, params, device: DeviceFacts) -> int:
        """Byte offset of the first split-K slab (REDUCE=2): after the operand copies' regions."""
        return max(op.end for op in self.operands(problem, params, device))

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """Tensor maps of A and B, the destination (C, or with REDUCE=2 the slabs in the
        workspace: ``Workspace(slab_offset)``), M, N, K. Beyond C = A·B the fused entries' (A's and B's
        maps, [C's map,] C, C0 or null, bias or null, M, N, K, ldc, alpha, beta); with batch.count > 1
        the maps are rank 3 (``TensorMap(batched=True)``: cols, rows, batches held) and batch, stride_a,
        stride_b, stride_c (elements; 0: a shared operand) follow."""
        a, b = self.operands(problem, params, device)
        if problem.extended:  # gemm_wgmma_epi: C, C0 (or null), bias (or null), M, N, K, ldc, alpha, beta
            ep, null = problem.epilogue, Value(0, "int64")
            rest = (Matrix("C"), Matrix("C0") if ep is not None and ep.beta != 0.0 else null,
                    Matrix("bias") if problem.bias_dtype else null, Dim("M"), Dim("N"), Dim("K"), Dim("ldc"),
                    Value(ep.alpha if ep else 1.0, "float32"), Value(ep.beta if ep else 0.0, "float32"))
            maps = (a.tensor_map, b.tensor_map)
            c_map = TensorMap("C", self.fused_box(problem))
            if problem.batch > 1:  # the batched entries: rank-3 maps, then batch and the batch strides
                maps = tuple(replace(m, batched=True) for m in maps)
                c_map = replace(c_map, batched=True)
                rest = (*rest, Dim("batch"), Dim("stride_a"), Dim("stride_b"), Dim("stride_c"))
            if self.tma_store(problem, params):  # gemm_wgmma_epi_tma_store: C's map first (row pitch ldc)
                return (*maps, c_map, *rest)
            return (*maps, *rest)
        dst = Workspace(self.slab_offset(problem, params, device)) if params.get("REDUCE", 1) == 2 else Matrix("C")
        if self.tma_store(problem, params):  # EPI=2: C's tensor map too (16 x 32 float32 boxes: a warp's rows, 128-byte swizzle)
            return (a.tensor_map, b.tensor_map, TensorMap("C", (16, 32)), dst, Dim("M"), Dim("N"), Dim("K"))
        return (a.tensor_map, b.tensor_map, dst, Dim("M"), Dim("N"), Dim("K"))

    def workspace_bytes(self, problem: Problem, params, device: DeviceFacts) -> int:
        """The operand copies' regions (0 when TMA reads A and B as stored), then with REDUCE=2
        the S split-K slabs of :func:`slab_floats` float32 each."""
        end = self.slab_offset(problem, params, device)
        if params.get("REDUCE", 1) == 2:
            end += 4 * self.slices(problem, params) * slab_floats(problem.M, problem.N)
        return end

    def reduce_step(self, problem: Problem, params, device: DeviceFacts) -> Extra:
        """The REDUCE=2 Extra step: ``wgmma_split_reduce<4>(slabs, C, M, N, S)``, 256 threads per
        block, one thread per float4 chunk of C, grid-stride over at most 8 blocks per SM."""
        chunks = problem.M * problem.N // 4
        grid = max(1, min(cdiv(chunks, REDUCE_THREADS), REDUCE_BLOCKS_PER_SM * device.sm_count))
        return Extra("wgmma_split_reduce<4>", Launch(grid=(grid, 1, 1), block=(REDUCE_THREADS, 1, 1)),
                     (Workspace(self.slab_offset(problem, params, device)), Matrix("C"), Dim("M"), Dim("N"),
                      Value(self.slices(problem, params))))

    def plan(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """The operand copies (pad / transpose, see :meth:`operands`), then the kernel, then with
        REDUCE=2 the slab reduction (:meth:`reduce_step`)."""
        copies = tuple(op.copy for op in self.operands(problem, params, device) if op.copy is not None)
        main = Main(self.epilogue_note(problem, params))
        if params.get("REDUCE", 1) == 2:
            return (*copies, main, self.reduce_step(problem, params, device))
        return (*copies, main)

    def epilogue_note(self, problem: Problem, params) -> str:
        """The plan's note where the requested staged epilogue (``EPI`` 2, 4 or 5) cannot run and C is
        stored from registers instead (N % 4 != 0: C's rows are not 16-byte aligned; REDUCE=2: the
        destination is the workspace's slabs), or EPI=7 cannot defer; empty otherwise. For a problem
        beyond C = A·B it names the EPI that ran where another was asked: 1 (registers: ldc or N x C's
        element bytes not a multiple of 16) or 2 (EPI=7 off the cooperative 128x256 tile)."""
        epi = params.get("EPI", 1)
        if problem.extended:  # the fused entries (issue 43): which EPI ran
            if epi == 1 or (epi == 2 and self.tma_store(problem, params)) or self.defers(problem, params):
                return ""
            if not self.tma_store(problem, params):
                what = (f"ldc {problem.ldc}" if (problem.ldc * problem.c_bytes) % 16 else f"N {problem.N}")
                return (f"fused epilogue from registers: {what} x {problem.c_bytes} B is not a multiple of 16 "
                        f"bytes (C's TMA map; a TMA store writes whole 16-byte chunks); EPI={epi} runs as 1")
            p = params
            why = ", ".join(f"{k}={p.get(k)}" for k, want in (("BM", 128), ("BN", 256), ("SCHED", 1)) if p.get(k, want) != want)
            return f"fused epilogue, right half not deferred: {why} (needs BM=128, BN=256, SCHED=1); EPI=7 runs as 2"
        if epi == 7 and self.stages_c(problem, params) and not self.defers(problem, params):
            p = params
            why = ", ".join(f"{k}={p.get(k)}" for k, want in (("BM", 128), ("BN", 256), ("SCHED", 1), ("SPLIT_K", 1),
                                                                ("TAIL", 1)) if p.get(k, want) != want)
            return f"right half not deferred: {why} (needs BM=128, BN=256, SCHED=1, SPLIT_K=1, TAIL=1); EPI=7 defers where it can"
        if epi not in (2, 4, 5, 7) or self.stages_c(problem, params):
            return ""
        why = "REDUCE=2 writes slabs" if params.get("REDUCE", 1) == 2 else f"N={problem.N} is not a multiple of 4"
        return f"epilogue from registers: {why}; EPI={epi} stages where it can"

    def ctas(self, shape: Shape, params, device: DeviceFacts, batch: int = 1) -> int:
        """Persistent grid: one CTA per SM at most (whole clusters), never more than the work units
        (tile units x SPLIT_K slices, x ``batch``: the batched entries' queue); with TAIL=2 always one
        CTA per SM (the tail's workers)."""
        cl = params["CLUSTER"]
        units = cdiv(cdiv(shape.M, params["BM"]), cl) * cdiv(shape.N, params["BN"]) * batch
        if params.get("TAIL", 1) >= 2:
            return cl * max(1, device.sm_count // cl)
        k_tiles = cdiv(shape.K, ROW_BYTES // elem_bytes(self.precisions[0]))
        split = cdiv(k_tiles, cdiv(k_tiles, params.get("SPLIT_K", 1)))
        return cl * max(1, min(units * split, device.sm_count // cl))

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        cl = params["CLUSTER"]
        return Launch(grid=(self.ctas(problem.shape, params, device, problem.batch), 1, 1), block=(THREADS, 1, 1),
                      shared_bytes=shared_bytes(params, self.stages_c(problem, params)), cluster=(cl, 1, 1) if cl > 1 else None)

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return self.geometry(Problem(shape, self.precisions[0], *self.layouts[0]), params, device)

    def ownership(self, shape: Shape, params, device: DeviceFacts | None = None):
        """Stores: the persistent schedule (:func:`work_items`, 132 SMs unless ``device`` says
        otherwise) times the m64nBN accumulator layout of the two consumer warpgroups (warp w rows
        16w.., m16n8 fragments along N), masked to M x N: the plain stores of sole owners and of
        split tiles' storers. Loads: per stage one A box (BM x BK) and the B boxes of all CTAs of
        the cluster (K-major: CLUSTER boxes of BN/CLUSTER rows; row-major B: BN/64 boxes of BK x
        64), each tile element written once. With split tiles also ``iterations`` (tiles x
        k-tiles: each computed once), ``adders`` (every adder item covers its tile's elements once,
        nothing outside) and ``contributors`` (each split tile's items carry its item count and
        the ranks 0..n-1 once each, rank 0 the item ending at K (TAIL=3: starting at k-tile 0): the
        flag's order and reset).
        With REDUCE=2 every item stores plainly into slab ``rank``: ``slabs`` (S x M x N: each
        slab element written once per slice, nothing outside M x N) and the stores are the
        reduce step's C writes (:func:`reduce_writes`). Where C is staged (``EPI`` 2/5: TMA boxes of
        16 rows x 32 columns per warp at (row0 + 64 mi, n0 + 32 c); ``EPI=4``: each lane's float4
        of row 4 i + lane / 8, columns 4 (lane % 8)..+3 of each such box) the sole owners' stores
        follow that instead of the fragment layout; with the TMA store the split tiles' items too
        (storers and adders), with EPI=4 they store from registers. ``A_col_major``: a column-major
        A's stage, BM/64 boxes of BK k-rows x 64 m-columns (BK x BM as stored)."""
        facts = device or DeviceFacts(name="sm_90 class (no device given)", arch="90", sm_count=132)
        p = {"SPLIT_K": 1, "TAIL": 1, "REDUCE": 1, **params}
        slabbed = p["REDUCE"] == 2
        if slabbed:
            slab_hits = np.zeros((self.slices(Problem(shape, self.precisions[0], *self.layouts[0]), p), shape.M, shape.N),
                                 dtype=np.int64)
        BM, BN, cl = p["BM"], p["BN"], p["CLUSTER"]
        elem = elem_bytes(self.precisions[0])
        k_tiles = cdiv(shape.K, ROW_BYTES // elem)
        items = [(t, local) for cta in work_items(shape, p, self.ctas(shape, p, facts), elem) for local, t in enumerate(cta)]
        stores = np.zeros((shape.M, shape.N), dtype=np.int64)
        iters: dict[tuple[int, int], np.ndarray] = {}
        counts: dict[tuple[int, int], list[int]] = {}
        adders = []
        ping = p["SCHED"] == 2
        wm = BM if ping else BM // 2  # rows per consumer warpgroup
        wg, mi, w, j, lane, h, v = np.ix_(range(2), range(wm // 64), range(4), range(BN // 8), range(32),
                                          range(2), range(2))
        # tile-relative coordinates of every accumulator stored for an item, counted once: cooperative,
        # both consumer warpgroups (wm rows each); ping-pong, the one warpgroup that takes the item
        # (local % 2, its position in the CTA's list) stores all BM rows: the same coordinates. Each
        # item adds these counts at its tile's offset (:func:`add_tiled`: the same counts as a
        # scatter of every shifted coordinate, masked to M x N)
        def rel(rows, cols):  # the hit counts of the coordinates, the box's origin, inside / outside the tile
            r, c = (a.ravel().astype(np.int64) for a in np.broadcast_arrays(rows, cols))
            origin = (int(r.min()), int(c.min()))
            hits = count_hits((int(r.max()) - origin[0] + 1, int(c.max()) - origin[1] + 1), r - origin[0], c - origin[1])
            inside = np.zeros_like(hits)
            inside[:max(0, BM - origin[0]), :max(0, BN - origin[1])] = 1  # rel row < BM and column < BN
            return hits, origin, hits * inside, hits * (1 - inside)

        fragments = rel((0 if ping else wg * wm) + mi * 64 + w * 16 + lane // 4 + 8 * h, j * 8 + 2 * (lane % 4) + v)
        staged = fragments
        problem = Problem(shape, self.precisions[0], *self.layouts[0])
        tma = self.tma_store(problem, p)
        if self.stages_c(problem, p):  # the staged epilogue's own index arithmetic (kernels/wgmma_bf16.cu)
            staged = rel(*staged_store_coords(BM, BN, ping, tma))
        # per target (C or slab ``rank``) and pattern, how many items store to each tile: one add per group
        m_lo, n_lo = (min((t[i] for t, _ in items), default=0) for i in (0, 1))
        grid = tuple(max((t[i] for t, _ in items), default=lo) - lo + 1 for i, lo in ((0, m_lo), (1, n_lo)))
        tiles: dict[tuple, np.ndarray] = {}
        regions: dict[tuple, np.ndarray] = {}  # an adder's in-tile counts, by the tile's size inside M x N
        for (m_blk, n_blk, kb, ke, role, n, rank), local in items:
            boxed = not slabbed and (role == 0 or tma)  # the TMA-store entry stages every item's boxes
            r0, c0 = m_blk * BM, n_blk * BN
            iters.setdefault((m_blk, n_blk), np.zeros(k_tiles, dtype=np.int64))[kb:ke] += 1
            counts.setdefault((m_blk, n_blk), []).append((n, rank, kb == 0 if p["TAIL"] == 3 else ke == k_tiles, role))
            if role == 2 and not slabbed:
                size = (max(0, min(BM, shape.M - r0)), max(0, min(BN, shape.N - c0)))
                if (size, boxed) not in regions:
                    _, origin, in_tile, _ = staged if boxed else fragments
                    regions[size, boxed] = np.zeros(size, dtype=np.int64)
                    add_pattern(regions[size, boxed], in_tile, origin[0], origin[1])
                if regions[size, boxed].size:
                    adders.append(regions[size, boxed].ravel())
            # slabs: every item into slab ``rank``; an adder's hit outside its tile lands on an owned element
            key = ("slab", rank, False) if slabbed else ("outside" if role == 2 else "all", None, boxed)
            tiles.setdefault(key, np.zeros(grid, dtype=np.int64))[m_blk - m_lo, n_blk - n_lo] += 1
        for (part, rank, boxed), per_tile in tiles.items():
            hits, origin, _, out_tile = staged if boxed else fragments
            add_tiled(slab_hits[rank] if part == "slab" else stores, per_tile, out_tile if part == "outside" else hits,
                      m_lo * BM + origin[0], n_lo * BN + origin[1], BM, BN)
        extra = {}
        if slabbed:
            problem = Problem(shape, self.precisions[0], *self.layouts[0])
            extra["slabs"] = slab_hits
            stores = reduce_writes(shape.M, shape.N, self.reduce_step(problem, p, facts).launch.grid[0])
        if any(len(c) > 1 for c in counts.values()) or p["SPLIT_K"] > 1 or p["TAIL"] >= 2:
            extra["iterations"] = np.stack(list(iters.values()))
            extra["contributors"] = np.array([int(all(n == len(c) for n, *_ in c) and sorted(r for _, r, _, _ in c) == list(range(len(c)))
                                                  and all((r == 0) == end and role == (0 if len(c) == 1 else 1 if r == 0 else 2)
                                                          for _, r, end, role in c))
                                              for c in counts.values()], dtype=np.int64)
            if adders:
                extra["adders"] = np.concatenate(adders)
        bk = 64  # bf16 rows of 128 bytes (the tf32 tiles have the same shape in bytes)
        r, c = np.ix_(range(BM), range(bk))
        b_hits = np.zeros((BN, bk), dtype=np.int64)
        for box in range(cl):  # K-major B: cluster rank `box` loads rows [box*BN/cl, (box+1)*BN/cl)
            rb, cb = np.ix_(range(box * BN // cl, (box + 1) * BN // cl), range(bk))
            b_hits += count_hits((BN, bk), rb, cb)
        bt_hits = np.zeros((bk, BN), dtype=np.int64)
        for box in range(BN // 64):  # row-major B: 64-column boxes of BK rows
            rb, cb = np.ix_(range(bk), range(box * 64, box * 64 + 64))
            bt_hits += count_hits((bk, BN), rb, cb)
        at_hits = np.zeros((bk, BM), dtype=np.int64)
        for box in range(BM // 64):  # column-major A (bf16): 64-column boxes of BK k-rows, box i = tile rows 64 i..
            rb, cb = np.ix_(range(bk), range(box * 64, box * 64 + 64))
            at_hits += count_hits((bk, BM), rb, cb)
        return stores, {"A": count_hits((BM, bk), r, c), "A_col_major": at_hits, "B": b_hits, "B_row_major": bt_hits,
                        **extra}


#: The values of the parameters that are codes or a few sizes (the one-line error for a value outside
#: 1..4096 lists them; :meth:`WgmmaKernel.check_problem` explains each value and checks combinations).
PARAM_VALUES = {"BM": (64, 128, 192, 256), "BN": (64, 128, 256), "STAGES": (2, 3, 4, 5, 6, 7, 8),
                "CLUSTER": (1, 2), "SCHED": (1, 2), "TAIL": (1, 2, 3), "REDUCE": (1, 2), "EPI": (1, 2, 3, 4, 5, 7)}

#: The (layout.a, layout.b) pairs of both wgmma kernels: all four (bf16 and fp16 read every operand natively,
#: a column-major A and a row-major B with wgmma's transpose bits; tf32 copies those two K-major first).
LAYOUTS = (("row", "col"), ("row", "row"), ("col", "col"), ("col", "row"))

#: The shipped parameters of both wgmma kernels (wgmma_bf16 and wgmma_tf32 are one template).
DEFAULTS = {"BM": 128, "BN": 256, "STAGES": 4, "CLUSTER": 1, "GROUP_M": 16, "SCHED": 1, "SPLIT_K": 1, "TAIL": 1,
            "REDUCE": 1, "EPI": 7}


#: tiles (BM, BN, SCHED) :meth:`WgmmaKernel.candidates` ranks, with a guessed relative efficiency per
#: output element (bigger tiles reuse more of each staged byte; 64-row tiles need SCHED=2); the table of
#: gemmlab.dispatch.auto's rules
TILES = ((128, 256, 1, 1.0), (128, 128, 1, 0.85), (64, 256, 2, 0.8), (128, 64, 1, 0.65), (64, 128, 2, 0.6),
         (64, 64, 2, 0.45))


def _rows(p) -> int:
    """Rows per consumer warpgroup: the whole BM tile with SCHED=2 (ping-pong), half with SCHED=1."""
    return p["BM"] if p["SCHED"] == 2 else p["BM"] // 2


#: The declared tuning space of both wgmma kernels (issue 41): :meth:`WgmmaKernel.check_problem`'s rules
#: that need no problem or device, as restrictions. Left out on purpose: the diagnostic and experimental
#: epilogues (EPI 1, 3, 4, 5: accepted as kernel.EPI=..., never offered) and EPI=2 where EPI=7 already
#: runs as EPI=2 (every tile but the cooperative whole 128x256 ones). SPLIT_K: the slice counts auto sizes
#: to one wave (at most 32, ``WGMMA_MAX_SPLIT_K`` of gemmlab.dispatch.auto). TMA strides, the flags
#: limit, CLUSTER=2 with row-major B and the device's shared memory stay in check_problem.
SPACE = Space(
    params={"BM": Choice((128, 64, 256, 192)), "BN": Choice((256, 128, 64)), "STAGES": Range(2, 8),
            "CLUSTER": Choice((1, 2)), "GROUP_M": Choice((16, 8)), "SCHED": Choice((1, 2)),
            "SPLIT_K": Choice((1, 2, 3, 4, 6, 8, 12, 16, 24, 32)), "TAIL": Choice((1, 2, 3)), "REDUCE": Choice((1, 2)),
            "EPI": Choice((7, 2))},
    restrictions=(
        Restriction("m64_blocks", lambda p: p["BM"] <= 256 and _rows(p) % 64 == 0,
                    "whole m64 blocks per consumer warpgroup: BM 128 or 256 with SCHED=1, 64..256 with SCHED=2",
                    over=("BM", "SCHED")),
        Restriction("accumulators", lambda p: _rows(p) * p["BN"] <= 64 * 256,
                    "at most 128 float32 accumulators per consumer thread (rows per warpgroup x BN <= 16384)",
                    over=("BM", "BN", "SCHED")),
        Restriction("shared_memory", lambda p: shared_bytes(p, True) <= SM90_SHARED_OPTIN_BYTES,
                    "STAGES x (BM+BN) x 128 B + 1 KiB + the epilogue's 16 KiB staging within sm_90's 227 KiB",
                    over=("BM", "BN", "STAGES")),
        Restriction("tail_unsplit", lambda p: p["TAIL"] == 1 or p["SPLIT_K"] == 1,
                    "the stream-K tail (TAIL 2, 3) needs SPLIT_K=1", over=("SPLIT_K", "TAIL")),
        Restriction("reduce_split", lambda p: p["REDUCE"] == 1 or p["SPLIT_K"] > 1,
                    "REDUCE=2 (workspace slabs) needs SPLIT_K > 1", over=("SPLIT_K", "REDUCE")),
        Restriction("epi2_distinct", lambda p: p["EPI"] == 7 or (p["BM"], p["BN"], p["SCHED"], p["SPLIT_K"], p["TAIL"])
                    == (128, 256, 1, 1, 1),
                    "EPI=2 only where EPI=7 defers (whole 128x256 cooperative tiles): elsewhere 7 runs as 2",
                    over=("BM", "BN", "SCHED", "SPLIT_K", "TAIL", "EPI")),
    ))


_U32 = 2.0**-24  # float32's unit roundoff
#: PTX ISA, ``tanh.approx.f32``: maximum relative error 2^-10.987 (one MUFU.TANH)
TANH_APPROX_REL = 2.0**-10.987
#: max |tanh(p(x)) - erf(x)| over the reals of kernels/wgmma_bf16.cu's erf fit (x clamped to [-3.5, 3.5],
#: float32 coefficients), evaluated exactly: 3.698e-5 (tests/test_epilogue_approx.py checks it on a dense grid)
ERF_FIT_ERROR = 3.8e-5
#: The float32 evaluation error c (|f^(z) - f(z)| <= c·(|z| + |f(z)|)) of kernels/wgmma_bf16.cu's
#: wgmma_activation, declared for the verification bound (:func:`gemmlab.contract.epilogue.activation_error`;
#: issue 43: libm's tanhf/erff/expf on the epilogue's critical path cost 13% at 4096³ on the H100).
#: Derivations (u = 2^-24; t the exact tanh or erf term, hz = z/2 exact):
#:
#: - gelu_tanh, hz + hz·tanh.approx(w), w = z·(k + k·0.044715·z²) in float32: |ŵ - w| <= 4u|w| (z², the FMA,
#:   the product, the constants), through tanh at most sech²(w)·4u|w| <= 1.8u; tanh.approx adds
#:   2^-10.987·|tanh| <= 2^-10.987; the last FMA rounds once (u|f|). So |f^ - f| <= |z|/2·(2^-10.987 + 1.8u)
#:   + u|f| <= (2^-10.987 / 2 + 4u)·(|z| + |f|). It shows: at z = -2 (f = -0.0454) up to 4.7e-4, where libm's
#:   8u·(|z| + |f|) allows 1e-6 (tests/test_epilogue_approx.py);
#: - gelu_erf, hz + hz·tanh.approx(p(x)), x = z/sqrt 2 clamped: the fit's :data:`ERF_FIT_ERROR`, tanh.approx's
#:   2^-10.987, x's and p's float32 roundings (erf'·2u|x| <= 1u, sech²(p)·5u|p| <= 2.3u) and the FMA (u|f|):
#:   (ERF_FIT_ERROR + 2^-10.987) / 2 + 4u;
#: - silu, z·rcp(1 + ex2(-z·log2 e)) (ex2.approx.ftz.f32, rcp.approx.ftz.f32: what __expf and __fdividef
#:   compile to, less their subnormal scaling): e^-z within (2 + 1.173|z|) ulp (__expf's bound, CUDA C
#:   Programming Guide, intrinsic functions: the same rounded argument and instruction; ulp <= 2u relative),
#:   entering as e/(1+e) of its relative error; the addition (u), the reciprocal (1 ulp, PTX ISA) and the
#:   product (u), within __fdividef's 2 ulp = 4u: |f^ - f| <= |f|·(4u + 2.35u|z|·e/(1+e) + 5u) and
#:   |f|·|z|·e/(1+e) = z²·e/(1+e)² <= 0.224|z|, so <= 9u|f| + 0.53u|z| <= 10u·(|z| + |f|).
ACTIVATION_ERROR = (("gelu_tanh", TANH_APPROX_REL / 2 + 4 * _U32),
                    ("gelu_erf", (ERF_FIT_ERROR + TANH_APPROX_REL) / 2 + 4 * _U32),
                    ("silu", 10 * _U32))

#: What the fused entries ``gemm_wgmma_epi`` / ``gemm_wgmma_epi_tma_store`` run for wgmma_bf16 and wgmma_tf32
#: (issue 43; :meth:`WgmmaKernel.check_fused`): alpha, beta·C0, a float32 or input-typed bias (tf32: float32),
#: every activation, a float32/bf16/fp16 C rounded once, lda, ldb and ldc above tight (``ld``: the TMA maps
#: at those pitches, or the pad / transpose copies reading them); strided batches in one launch (the
#: ``_batched`` entries: :meth:`WgmmaKernel.check_batched`'s rules); the activations
#: through ``tanh.approx.f32`` and ``ex2.approx.ftz.f32`` within :data:`ACTIVATION_ERROR`
EPILOGUE = EpilogueSupport(alpha_beta=True, bias=("float32", "input"), activations=ACTIVATIONS[1:],
                           outs=tuple(OUTPUTS), ld=True, batch=True, activation_error=ACTIVATION_ERROR)


@hookimpl
def gemmlab_kernels():
    return [WgmmaKernel(name="wgmma_bf16", source="wgmma_bf16.cu", defaults=dict(DEFAULTS),
                        description="BF16 and FP16 sm_90a: persistent, producer + 2 consumer warpgroups (setmaxnreg), "
                                    "TMA ring with full/empty mbarriers, wgmma m64n256k16, optional 2-CTA TMA multicast",
                        precisions=("bf16", "fp16"), layouts=LAYOUTS,
                        param_values=PARAM_VALUES, space=SPACE,
                        sass_classes=("HGMMA", "UTMALDG"), epilogue=EPILOGUE)]
