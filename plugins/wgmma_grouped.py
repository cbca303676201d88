"""Built-in kernel ``wgmma_grouped`` (issue 44, item 3): a persistent, warp-specialised Hopper grouped
GEMM in BF16 (sm_90a, kernels/wgmma_grouped.cu) for mixture-of-experts layers, kinds ``contiguous``,
``masked`` and ``general`` (:mod:`gemmlab.contract.grouped`), B per expert column-major (N x K,
nn.Linear's weight, ``layout.b=col``) or row-major (K x N, ``layout.b=row``: wgmma's transposed-B mode).

One launch, one tile queue over all groups: every CTA builds, from the device's group arrays
(``group_m``, contiguous also ``group_offsets``), each group's tile count ceil(M_g / BM) x
ceil(N / BN) and their prefix sum in shared memory (the M_g are known only on the device; the host
never reads them), then takes tiles ``blockIdx.x + i x gridDim.x`` of the queue; a forward-only
cursor maps a tile index to (group, tile row, tile column), GROUP_M tile rows at a time inside a group
(the row fastest). An empty group has no tiles and costs one prefix-sum entry. :func:`tile_map` is the
same arithmetic in Python (the CPU tests replay it; :func:`emulate` runs it on the fake GPU).

TMA, one descriptor per operand for all groups (no per-group rebuild): A a 2-D map over the whole
stored A (BM x 64 boxes; a tile's rows start at group_offsets[g] or g x M_max); B a per-group 3-D
map (``TensorMap(per_group=True)``: dims (G, N, K) or (G, K, N), zero-filled at an expert's edge);
C a 2-D map of 16 x 32 float32 boxes for the TMA-store epilogue. Structure as
kernels/wgmma_bf16.cu's cooperative schedule: a producer warpgroup (one thread issues every TMA load,
setmaxnreg.dec 40) and two consumer warpgroups (setmaxnreg.inc 232) splitting each BM x BN tile's
rows, wgmma m64nBNk16, a STAGES-deep ring with full/empty mbarriers, a persistent grid of at most
one CTA per SM.

The ``general`` kind (G independent (M_g, N_g, K_g), every matrix packed at its own element
offset): one 2-D tensor map per group and operand (``TensorMap(each_group=True)``: A_g, B_g, C_g
with their own strides, encoded on the host once per point, before any timed launch, and passed as
pointers to G maps in device memory; each thread that issues a TMA fences a group's map once,
CUDA Programming Guide), the same queue with each group's own tile columns ceil(N_g / BN) and K
tiles ceil(K_g / 64) (``group_dims``; 3 G + 1 ints of shared memory), C_g at its element offset.
A box past a group's rows or K reads zeros (the group's own map), never the next group's data.
The grid is min(SMs, the queue's exact length): the general kind's sizes are host-known.

Rows past M_g are never stored (the contract: padding and masked rows stay untouched). ``EPI=2``
(default): a warp's 16-row band that lies wholly inside M_g leaves through shared-memory staging
and TMA stores (clipped at N); the group's last partial band, and every band where N % 4 != 0
(C's rows not 16-byte aligned; general: any non-empty group's N_g % 4 != 0; the plan's note says
so), from registers with the row mask;
``EPI=1``: every band from registers.

Parameters: BM (128 | 256), BN (64 | 128 | 256; BM=256 needs BN <= 128: at most 128 accumulators
per consumer thread), STAGES (2..8, within 227 KiB with the staging and the queue's 2 G + 1 ints),
GROUP_M (>= 1, tile rows per band inside a group), EPI (1 | 2). TMA rules: K % 8 == 0 (A's and
column-major B's row stride), N % 8 == 0 for row-major B (general: every non-empty group's K_g and
N_g). Needs an sm_90 GPU (compiled for sm_90a).
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from gemmlab.contract import tma_rules as tma
from gemmlab.contract.hookspecs import (DeviceFacts, Dim, KernelOptions, KernelSpec, Launch, Main, Matrix,
                                        ParamError, Problem, TensorMap, hookimpl)
from gemmlab.contract.plugin_utils import SM90_SHARED_OPTIN_BYTES, cdiv, require
from gemmlab.contract.space import Choice, Range, Restriction, Space
from gemmlab.errors import ConfigError

THREADS = 384  #: producer warpgroup + 2 consumer warpgroups
BK = 64  #: bf16 elements of K per stage (one 128-byte swizzle row)
EPI_STAGE_BYTES = 8 * 2 * 16 * 128  #: EPI=2: two 16 x 32 float32 staging buffers per consumer warp
KINDS = ("contiguous", "masked", "general")

#: parameters that are a few codes or sizes (``KernelBase.param_values``)
PARAM_VALUES = MappingProxyType({"BM": (128, 256), "BN": (64, 128, 256), "STAGES": (2, 3, 4, 5, 6, 7, 8),
                                 "EPI": (1, 2)})
#: the shipped parameters
DEFAULTS = MappingProxyType({"BM": 128, "BN": 256, "STAGES": 4, "GROUP_M": 8, "EPI": 2})


def queue_bytes(G: int, general: bool = False) -> int:
    """Shared memory of the tile queue (gemmlab/grouped.cuh): GroupTiles 2 G + 1 ints, the general
    kind's GeneralTiles 3 G + 1 (tile starts, M_g, N_g)."""
    return 4 * ((3 if general else 2) * G + 1)


def shared_bytes(p, G: int, staged: bool = True, general: bool = False) -> int:
    """Dynamic shared memory (kernels/wgmma_grouped.cu grouped_ring_bytes + slack + queue): 1024
    bytes of slack to align the ring to 1024, STAGES x (BM + BN) x 128 B of ring, with the TMA-store
    epilogue (``staged``) :data:`EPI_STAGE_BYTES` of staging, then :func:`queue_bytes`."""
    return (1024 + p["STAGES"] * (p["BM"] + p["BN"]) * 128 + (EPI_STAGE_BYTES if staged else 0)
            + queue_bytes(G, general))


def accumulators(p) -> int:
    """Float32 accumulators per consumer thread: BM/128 m64 blocks x BN/2."""
    return p["BM"] // 128 * p["BN"] // 2


#: The declared tuning space (issue 41 / 14): the rules that need neither problem nor device. The
#: queue's shared memory (2 G + 1 ints), the TMA strides and the device's limits stay in
#: :meth:`WgmmaGroupedKernel.check_problem`; the shared-memory rule here keeps 2 KiB for the queue
#: (G <= 255).
SPACE = Space(
    params={"BM": Choice((128, 256)), "BN": Choice((256, 128, 64)), "STAGES": Range(2, 8),
            "GROUP_M": Choice((8, 16, 4)), "EPI": Choice((2, 1))},
    restrictions=(
        Restriction("accumulators", lambda p: accumulators(p) <= 128,
                    "at most 128 float32 accumulators per consumer thread (BM/128 x BN/2): BM=256 takes BN <= 128",
                    over=("BM", "BN")),
        Restriction("shared_memory", lambda p: shared_bytes(p, 0, p["EPI"] == 2) + 2044 <= SM90_SHARED_OPTIN_BYTES,
                    "1 KiB + STAGES x (BM+BN) x 128 B + the EPI=2 staging (32 KiB) + 2 KiB of tile queue within "
                    "sm_90's 227 KiB", over=("BM", "BN", "STAGES", "EPI")),
    ))


def _cols(N, G: int) -> list[int]:
    """N_g of every group: ``N`` one int for all (contiguous, masked) or a sequence (general)."""
    return [int(N)] * G if isinstance(N, (int, np.integer)) else [int(n) for n in N]


def tile_counts(sizes, BM: int, BN: int, N) -> list[int]:
    """Tiles of each group: ceil(M_g / BM) x ceil(N_g / BN) (0 for an empty group); ``N`` one int
    (every group's) or the N_g of each group (general kind)."""
    return [cdiv(m, BM) * cdiv(n, BN) for m, n in zip(sizes, _cols(N, len(sizes)))]


def tile_map(sizes, p, N, ctas: int) -> list[list[tuple[int, int, int]]]:
    """The kernel's queue per CTA, replayed (gemmlab/grouped.cuh GroupTiles + GroupCursor, or for
    the general kind GeneralTiles + GeneralCursor: ``N`` the N_g of each group): CTA b takes tiles
    b, b + ctas, ... of the prefix sum of :func:`tile_counts`; each becomes (g, m_blk, n_blk): the
    cursor moves past every group whose tiles end at or before the index (empty groups included),
    the index inside the group runs GROUP_M tile rows per band (the group's own ceil(N_g / BN) tile
    columns), the row fastest."""
    BM, BN, gm = p["BM"], p["BN"], p["GROUP_M"]
    cols = _cols(N, len(sizes))
    start = np.concatenate(([0], np.cumsum(tile_counts(sizes, BM, BN, cols)))).astype(np.int64)
    total = int(start[-1])
    out = []
    for cta in range(ctas):
        g, items = 0, []
        for t in range(cta, total, ctas):
            while start[g + 1] <= t:
                g += 1
            local = t - int(start[g])
            tiles_n = cdiv(cols[g], BN)
            tiles_m = (int(start[g + 1]) - int(start[g])) // tiles_n
            band, in_band = divmod(local, gm * tiles_n)
            rows = min(tiles_m - band * gm, gm)
            items.append((g, band * gm + in_band % rows, in_band // rows))
        out.append(items)
    return out


def grid_bound(problem: Problem, p) -> int:
    """An upper bound of the queue's length from host-known sizes only (the stored rows, G, N; never
    the M_g): contiguous sum_g ceil(padded M_g / BM) <= ceil(R / BM) + G, masked G x ceil(M_max / BM);
    times the tile columns. General: the queue's exact length (its shapes are the contract's, known
    on the host: :func:`tile_counts` over the N_g)."""
    gr = problem.grouped
    if gr.kind == "general":
        return sum(tile_counts(gr.sizes, p["BM"], p["BN"], [n for _, n, _ in gr.shapes]))
    tiles_n = cdiv(problem.N, p["BN"])
    if gr.kind == "masked":
        return gr.G * cdiv(gr.slot_rows, p["BM"]) * tiles_n
    return (cdiv(gr.row_offsets[-1], p["BM"]) + gr.G) * tiles_n


class WgmmaGroupedKernel(KernelSpec):
    """The persistent grouped wgmma GEMM of kernels/wgmma_grouped.cu (module docstring)."""

    def b_mn_major(self, problem: Problem) -> bool:
        """B row-major per expert (K x N stored, N contiguous) is N-major for wgmma (transposed-B mode)."""
        return problem.layout_b == "row"

    def tma_store(self, problem: Problem, params) -> bool:
        """Whether whole 16-row bands leave by TMA store: ``EPI=2`` and N % 4 == 0 (C's row stride of
        N x 4 bytes a multiple of 16); general: every non-empty group's N_g % 4 == 0."""
        gr = problem.grouped
        if gr is not None and gr.kind == "general":
            return params.get("EPI", 2) == 2 and all(n % 4 == 0 for m, n, _ in gr.shapes if m)
        return params.get("EPI", 2) == 2 and problem.N % 4 == 0

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        """One-line :class:`ParamError` naming the field for: a plain GEMM or the general kind
        (``grouped.kind``), another GPU than sm_90, parameter values outside their lists, too many
        accumulators, shared memory over the device's limit (the tile queue grows with G), K or N
        that TMA cannot stride (``shape``), and any other TMA rule of the three maps."""
        p = params
        gr = problem.grouped
        require(gr is not None and gr.kind in KINDS, "grouped.kind",
                f"kernel {self.name} runs grouped GEMMs of kind {', '.join(KINDS)}, got "
                f"{'a plain GEMM (grouped.kind=null)' if gr is None else gr.kind}")
        general = gr.kind == "general"
        require(device.arch == "90", "kernel",
                f"{self.name} needs an sm_90 GPU (wgmma, setmaxnreg: sm_90a); the compile target is sm_{device.arch} "
                f"on {device.name}")
        require(p["BM"] in PARAM_VALUES["BM"], "kernel.BM",
                f"BM={p['BM']} must be 128 or 256 (two consumer warpgroups, whole m64 blocks each)")
        require(p["BN"] in PARAM_VALUES["BN"], "kernel.BN", f"BN={p['BN']} must be 64, 128 or 256 (wgmma n)")
        require(accumulators(p) <= 128, "kernel.BN",
                f"BM={p['BM']} x BN={p['BN']} needs {accumulators(p)} accumulators per consumer thread; at most 128 "
                "(BM=256 takes BN <= 128)")
        require(p["STAGES"] in PARAM_VALUES["STAGES"], "kernel.STAGES", f"STAGES={p['STAGES']} must be 2..8")
        require(p["GROUP_M"] >= 1, "kernel.GROUP_M", f"GROUP_M={p['GROUP_M']} must be >= 1")
        require(p["EPI"] in PARAM_VALUES["EPI"], "kernel.EPI",
                f"EPI={p['EPI']} must be 1 (registers) or 2 (TMA store of whole 16-row bands inside M_g)")
        smem = shared_bytes(p, gr.G, self.tma_store(problem, p), general)
        require(smem <= device.max_shared_per_block_optin, "kernel.STAGES",
                f"dynamic shared memory {smem} bytes (STAGES={p['STAGES']} x (BM+BN) x 128 B + 1024"
                + (f" + {EPI_STAGE_BYTES} of staging" if self.tma_store(problem, p) else "")
                + f" + the tile queue's {queue_bytes(gr.G, general)} for G={gr.G}) exceeds "
                f"{device.max_shared_per_block_optin}")
        if general:  # every group that has tiles: its own strides (empty groups get no map)
            field = "grouped.shapes" if gr.nk else "shape"
            for g, (m, n, k) in enumerate(gr.shapes):
                require(not m or k % 8 == 0, field,
                        f"group {g}'s K_g={k} must be a multiple of 8: TMA reads A_g (and column-major B_g) with "
                        "row strides of K_g x 2 bytes, a multiple of 16")
                require(not m or not self.b_mn_major(problem) or n % 8 == 0, field,
                        f"group {g}'s N_g={n} must be a multiple of 8 with layout.b=row: TMA reads B_g with row "
                        "strides of N_g x 2 bytes, a multiple of 16")
        require(general or problem.K % 8 == 0, "shape",
                f"K={problem.K} must be a multiple of 8: TMA reads A (and column-major B) with row strides of "
                "K x 2 bytes, a multiple of 16 (no pad copy for grouped operands)")
        require(general or not self.b_mn_major(problem) or problem.N % 8 == 0, "shape",
                f"N={problem.N} must be a multiple of 8 with layout.b=row: TMA reads B with row strides of N x 2 "
                "bytes, a multiple of 16")
        for tm in self.arguments(problem, p, device)[:3]:
            try:
                tma.check(tm, problem)
            except ConfigError as exc:
                raise ParamError(exc.field, str(exc).split(": ", 1)[1]) from None

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """A shortlist, then the declared space's points (the core checks each): the tiles (BM, BN)
        in 128x256, 128x128, 256x128, 128x64 ordered by an estimated time (whole waves of the
        estimated queue over the SMs x the tile's area x K / a guessed efficiency per tile), with
        the defaults' other parameters and STAGES as deep as shared memory allows (at most 6). The
        queue is estimated from the shape's M (the routed rows, a host-side sum) as
        (ceil(M / BM) + G / 2) x ceil(N / BN): each group's last tile row is on average half empty;
        general: the exact tiles of every group, weighted by its K_g over the largest K."""
        gr, sms = problem.grouped, device.sm_count
        eff = {(128, 256): 1.0, (256, 128): 0.97, (128, 128): 0.85, (128, 64): 0.65}
        general = gr.kind == "general"

        def cost(t):
            if general:
                work = sum(cdiv(m, t[0]) * cdiv(n, t[1]) * k for m, n, k in gr.shapes) / max(problem.K, 1)
                return max(work / sms, 1.0) * t[0] * t[1] / eff[t]
            tiles = (cdiv(problem.M, t[0]) + gr.G // 2) * cdiv(problem.N, t[1])
            return cdiv(max(tiles, 1), sms) * t[0] * t[1] / eff[t]

        out = []
        for bm, bn in sorted(eff, key=cost):
            p = {**self.defaults, "BM": bm, "BN": bn}
            room = device.max_shared_per_block_optin - shared_bytes({**p, "STAGES": 0}, gr.G, self.tma_store(problem, p),
                                                                    general)
            p["STAGES"] = max(2, min(6, room // ((bm + bn) * 128)))
            out.append(p)
        return out + super().candidates(problem, device)

    def instance(self, problem: Problem, params) -> str:
        """``gemm_wgmma_grouped_<kind><BM, BN, STAGES, B_MN_MAJOR, GROUP_M, EPI>`` (the template's
        EPI: 1 where :meth:`tma_store`, else 0)."""
        p = params
        return (f"gemm_wgmma_grouped_{problem.grouped.kind}<{p['BM']}, {p['BN']}, {p['STAGES']}, "
                f"{int(self.b_mn_major(problem))}, {p['GROUP_M']}, {int(self.tma_store(problem, p))}>")

    def options(self, problem: Problem, params, device: DeviceFacts) -> KernelOptions:
        return KernelOptions(arch_specific=True)

    def plan(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """The kernel alone; its note says where ``EPI=2`` stores from registers (N % 4 != 0; general:
        the first non-empty group whose N_g % 4 != 0)."""
        if params.get("EPI", 2) == 2 and not self.tma_store(problem, params):
            gr = problem.grouped
            if gr.kind == "general":
                g, n = next((g, n) for g, (m, n, _) in enumerate(gr.shapes) if m and n % 4)
                return (Main(f"epilogue from registers: group {g}'s N_g={n} is not a multiple of 4; EPI=2 stages "
                             "where every group's C_g rows are 16-byte aligned"),)
            return (Main(f"epilogue from registers: N={problem.N} is not a multiple of 4; EPI=2 stages where it can"),)
        return (Main(),)

    def ctas(self, problem: Problem, params, device: DeviceFacts) -> int:
        """Persistent grid: min(SMs, :func:`grid_bound`), at least 1; CTAs past the queue's real
        length (known on the device only) build the queue and leave."""
        return max(1, min(device.sm_count, grid_bound(problem, params)))

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        gr = problem.grouped
        return Launch(grid=(self.ctas(problem, params, device), 1, 1), block=(THREADS, 1, 1),
                      shared_bytes=shared_bytes(params, gr.G, self.tma_store(problem, params), gr.kind == "general"))

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """Tensor maps of A (2-D, BM x 64 boxes), B (per group, 3-D: BN x 64 boxes of an expert's
        N x K, or 64 x 64 of its K x N) and C (2-D, 16 x 32 float32 boxes; where C is not staged,
        A's map again in its place, never read), then C; contiguous: group_offsets, group_m, G, N,
        K; masked: group_m, G, M_max, N, K. General: the same three maps per group
        (``each_group``: pointers to G maps each, A_g BM x 64, B_g BN x 64 or 64 x 64, C_g 16 x 32),
        C, group_dims, group_offsets (int64 element offsets), G."""
        p = params
        if problem.grouped.kind == "general":
            a = TensorMap("A", (p["BM"], BK), each_group=True)
            b = TensorMap("B", (BK, 64) if self.b_mn_major(problem) else (p["BN"], BK), each_group=True)
            c = TensorMap("C", (16, 32), each_group=True) if self.tma_store(problem, p) else a
            return (a, b, c, Matrix("C"), Matrix("group_dims"), Matrix("group_offsets"), Dim("G"))
        a = TensorMap("A", (p["BM"], BK))
        b = TensorMap("B", (BK, 64) if self.b_mn_major(problem) else (p["BN"], BK), per_group=True)
        c = TensorMap("C", (16, 32)) if self.tma_store(problem, p) else a
        head = (a, b, c, Matrix("C"))
        if problem.grouped.kind == "contiguous":
            return head + (Matrix("group_offsets"), Matrix("group_m"), Dim("G"), Dim("N"), Dim("K"))
        return head + (Matrix("group_m"), Dim("G"), Dim("M_max"), Dim("N"), Dim("K"))

    def sass_classes_for(self, problem: Problem, params) -> tuple[str, ...]:
        """HGMMA and UTMALDG always; UTMASTG where whole bands are TMA-stored (:meth:`tma_store`)."""
        return self.sass_classes + (("UTMASTG",) if self.tma_store(problem, params) else ())


def emulate_general(gpu, args: tuple, b_col: bool, p, ctas: int, fake_map) -> None:
    """The general kind on the fake GPU (tests/fakegpu.py): ``args`` as the core resolves
    :meth:`WgmmaGroupedKernel.arguments` (three device pointers to G fake tensor maps each, C,
    group_dims, group_offsets, G). Reads group_dims from device memory, replays the queue of
    :func:`tile_map` over the N_g, and per tile reads A_g and B_g through the group's own maps
    (``fake_map(gpu, maps, g)`` -> the matrix's address, rows, cols, row stride: the fake's
    descriptor; a tile of an empty group would find no map) and writes rows < M_g, columns < N_g of
    C_g at group_offsets[g][2]; float64 products rounded once to float32."""
    maps_a, maps_b, c_ptr, dims_ptr, offs_ptr, G = (int(x) for x in args[:2] + args[3:7])
    dims = gpu.view(dims_ptr, 12 * G).view(np.int32).reshape(G, 3)
    offsets = gpu.view(offs_ptr, 24 * G).view(np.int64).reshape(G, 3)
    bf16 = np.dtype("<u2")

    def as_f64(x):  # bfloat16 bits -> float64
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)

    def through(maps, g):
        address, rows, cols, stride = fake_map(gpu, maps, g)
        return gpu.view(address, rows * stride).view(bf16).reshape(rows, stride // 2)[:, :cols]

    BM, BN = p["BM"], p["BN"]
    for cta in tile_map([int(m) for m in dims[:, 0]], p, [int(n) for n in dims[:, 1]], ctas):
        for g, m_blk, n_blk in cta:
            m, n, k = (int(x) for x in dims[g])
            A, B = through(maps_a, g), through(maps_b, g)
            assert A.shape == (m, k) and B.shape == ((n, k) if b_col else (k, n)), (g, A.shape, B.shape)
            C = gpu.view(c_ptr + 4 * int(offsets[g, 2]), 4 * m * n).view(np.float32).reshape(m, n)
            r0, r1 = m_blk * BM, min(m, (m_blk + 1) * BM)
            c0, c1 = n_blk * BN, min(n, (n_blk + 1) * BN)
            b = as_f64(B[c0:c1, :]).T if b_col else as_f64(B[:, c0:c1])
            C[r0:r1, c0:c1] = (as_f64(A[r0:r1]) @ b).astype(np.float32)


def emulate(gpu, args: tuple, kind: str, b_col: bool, p, ctas: int) -> None:
    """The kernel on the fake GPU (tests/fakegpu.py): ``args`` as the core resolves
    :meth:`WgmmaGroupedKernel.arguments` (three tensor maps with ``.address``, C, the group arrays,
    ints). Reads the group arrays from device memory, replays the queue of :func:`tile_map` for
    ``ctas`` CTAs and writes, per tile, exactly the elements the kernel stores: rows < M_g of the
    tile's BM rows, columns < N of its BN; products in float64 rounded once to float32 (the fake's
    convention). Rows read past M_g (padding NaN) are never used, as in the kernel."""
    a_ptr, b_ptr, c_ptr = int(args[0].address), int(args[1].address), int(args[3])
    if kind == "contiguous":
        offs_ptr, m_ptr, G, N, K = int(args[4]), int(args[5]), int(args[6]), int(args[7]), int(args[8])
        offsets = gpu.view(offs_ptr, 4 * (G + 1)).view(np.int32).astype(np.int64)
        rows_total = int(offsets[-1])
    else:
        m_ptr, G, M_max, N, K = int(args[4]), int(args[5]), int(args[6]), int(args[7]), int(args[8])
        offsets = np.arange(G + 1, dtype=np.int64) * M_max
        rows_total = G * M_max
    sizes = [int(x) for x in gpu.view(m_ptr, 4 * G).view(np.int32)]
    sizes = [max(0, min(m, int(offsets[g + 1] - offsets[g]))) for g, m in enumerate(sizes)]
    bf16 = np.dtype("<u2")
    A = gpu.view(a_ptr, 2 * rows_total * K).view(bf16).reshape(rows_total, K)
    B = gpu.view(b_ptr, 2 * G * N * K).view(bf16).reshape((G, N, K) if b_col else (G, K, N))
    C = gpu.view(c_ptr, 4 * rows_total * N).view(np.float32).reshape(rows_total, N)

    def as_f64(x):  # bfloat16 bits -> float64
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)

    BM, BN = p["BM"], p["BN"]
    for cta in tile_map(sizes, p, N, ctas):
        for g, m_blk, n_blk in cta:
            r0 = int(offsets[g]) + m_blk * BM
            r1 = int(offsets[g]) + min(sizes[g], (m_blk + 1) * BM)
            c0, c1 = n_blk * BN, min(N, (n_blk + 1) * BN)
            b = as_f64(B[g, c0:c1, :]).T if b_col else as_f64(B[g, :, c0:c1])
            C[r0:r1, c0:c1] = (as_f64(A[r0:r1]) @ b).astype(np.float32)


@hookimpl
def gemmlab_kernels():
    return [WgmmaGroupedKernel(name="wgmma_grouped", source="wgmma_grouped.cu", defaults=dict(DEFAULTS),
                               description="grouped BF16 sm_90a (issue 44): persistent, one tile queue over all "
                                           "groups built on the device, producer + 2 consumer warpgroups, TMA "
                                           "(per-group 3-D map of B; general: per-group maps of A_g, B_g, C_g), "
                                           "wgmma, contiguous/masked/general",
                               precisions=("bf16",), layouts=(("row", "col"), ("row", "row")),
                               param_values=PARAM_VALUES, space=SPACE, grouped_kinds=KINDS,
                               sass_classes=("HGMMA", "UTMALDG"))]
