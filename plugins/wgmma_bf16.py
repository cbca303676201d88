"""Built-in kernel ``wgmma_bf16``: warp-specialised, persistent Hopper GEMM (sm_90a) in BF16
(kernels/wgmma_bf16.cu, whose template kernels/wgmma_tf32.cu includes; the ``wgmma_tf32``
plugin reuses :class:`WgmmaKernel`).

One producer warpgroup (one thread issues every TMA load, setmaxnreg.dec 40) and two consumer
warpgroups (setmaxnreg.inc 232) running wgmma m64nBNk16 on a BM x BN tile; a STAGES-deep ring of
TMA (128-byte swizzle) stages with full/empty mbarriers; a persistent grid (at most one CTA per SM,
from ``DeviceFacts.sm_count``) walking the tiles in groups of GROUP_M tile rows for L2 reuse;
``CLUSTER=2`` pairs CTAs of consecutive tile rows in a thread-block cluster that share the B tile
by TMA multicast; ``SCHED=1`` (cooperative: the two consumer warpgroups split each tile's rows) or
``SCHED=2`` (ping-pong: they take alternate whole tiles, main loops strictly alternating, so one's
epilogue overlaps the other's main loop). Epilogue: float32 accumulators straight from registers to the row-major float32
C (masked at the edges).

Precision ``bf16`` (A and B stored as bfloat16, float32 accumulate and C). Layouts: A row-major;
B column-major (K-major, both operands read untransposed) or row-major (N-major: wgmma's
transposed-B mode, B arrives as 64-column boxes). TMA rules (checked with
:func:`gemmlab.contract.tma_rules.check`, the rules ``tma_bf16`` states): every stored row stride a multiple of 16
bytes, so K % 8 == 0 (A, and B column-major) and N % 8 == 0 (B row-major); M and N are otherwise
free (TMA zero-fills out-of-bounds box elements; stores are masked).
Parameters: BM (128 | 256), BN (64 | 128 | 256; BM=256 needs BN <= 128: at most 128 accumulators
per consumer thread; with SCHED=2 BM x BN <= 16384 and BM may be 64), STAGES (2..8, within 227
KiB of shared memory), CLUSTER (1 | 2), GROUP_M (>= 1, tile rows per scheduling group), SCHED
(1 | 2). Needs an sm_90 GPU (compiled for sm_90a).
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract import tma_rules as tma
from gemmlab.errors import ConfigError
from gemmlab.contract.hookspecs import (DeviceFacts, Dim, KernelOptions, KernelSpec, Launch, Matrix, ParamError, Problem,
                               Shape, TensorMap, hookimpl)
from gemmlab.contract.plugin_utils import add_hits, cdiv, count_hits, require

THREADS = 384  # producer warpgroup + 2 consumer warpgroups
ROW_BYTES = 128  # one stage row: 128 bytes of K (the 128-byte swizzle span)


def elem_bytes(precision: str) -> int:
    """Bytes per stored A/B element: 2 for bf16, 4 for tf32 (float32 storage)."""
    return 2 if precision == "bf16" else 4


def shared_bytes(p) -> int:
    """STAGES x (A BM x 128 B + B BN x 128 B) plus 1024 bytes of slack to align the ring to 1024."""
    return p["STAGES"] * (p["BM"] + p["BN"]) * ROW_BYTES + 1024


def schedule(shape: Shape, p, ctas: int) -> list[list[tuple[int, int]]]:
    """The persistent tile schedule of kernels/wgmma_bf16.cu, per CTA: the (tile row, tile column)
    blocks CTA b computes, in order. Work units are pairs of CLUSTER tile rows x one tile column,
    taken by clusters round-robin; inside a group of GROUP_M unit rows the row index runs fastest."""
    BM, BN, cl, gm = p["BM"], p["BN"], p["CLUSTER"], p["GROUP_M"]
    num_m, num_n = cdiv(shape.M, BM), cdiv(shape.N, BN)
    pairs_m = cdiv(num_m, cl)
    units = pairs_m * num_n
    out = []
    for cta in range(ctas):
        rank, first, stride = cta % cl, cta // cl, ctas // cl
        tiles = []
        for unit in range(first, units, stride):
            per_group = gm * num_n
            group = unit // per_group
            rows = min(pairs_m - group * gm, gm)
            in_group = unit - group * per_group
            tiles.append(((group * gm + in_group % rows) * cl + rank, in_group // rows))
        out.append(tiles)
    return out


class WgmmaKernel(KernelSpec):
    """Persistent warp-specialised wgmma GEMM: BM x BN tile, 128-byte K stages, TMA + mbarriers."""

    def b_mn_major(self, problem: Problem) -> bool:
        """B row-major (K x N stored, N contiguous) is N-major for wgmma."""
        return problem.layout_b == "row"

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        p = params
        require(device.arch == "90", "kernel",
                f"{self.name} needs an sm_90 GPU (wgmma, setmaxnreg: sm_90a); {device.name} is sm_{device.arch}")
        require(p["SCHED"] in (1, 2), "kernel.SCHED",
                f"SCHED={p['SCHED']} must be 1 (cooperative) or 2 (ping-pong)")
        rows = p["BM"] if p["SCHED"] == 2 else p["BM"] // 2  # rows per consumer warpgroup
        allowed = "64, 128, 192 or 256" if p["SCHED"] == 2 else "128 or 256"
        require(p["BM"] <= 256 and rows % 64 == 0 and rows > 0, "kernel.BM",
                f"BM={p['BM']} must be {allowed} (whole m64 blocks per consumer warpgroup)")
        require(p["BN"] in (64, 128, 256), "kernel.BN", f"BN={p['BN']} must be 64, 128 or 256 (wgmma n)")
        require(rows * p["BN"] <= 64 * 256, "kernel.BN",
                f"BM={p['BM']} x BN={p['BN']} needs {rows * p['BN'] // 128} accumulators per consumer thread; at most 128 "
                f"({'BM x BN <= 16384 with SCHED=2' if p['SCHED'] == 2 else 'BM=256 takes BN <= 128'})")
        require(p["CLUSTER"] in (1, 2), "kernel.CLUSTER", f"CLUSTER={p['CLUSTER']} must be 1 or 2")
        require(p["GROUP_M"] >= 1, "kernel.GROUP_M", f"GROUP_M={p['GROUP_M']} must be >= 1")
        require(2 <= p["STAGES"] <= 8, "kernel.STAGES", f"STAGES={p['STAGES']} must be 2..8")
        require(shared_bytes(p) <= device.max_shared_per_block_optin, "kernel.STAGES",
                f"dynamic shared memory {shared_bytes(p)} bytes (STAGES={p['STAGES']} x (BM+BN) x 128 B + 1024) "
                f"exceeds {device.max_shared_per_block_optin}")
        if self.b_mn_major(problem):
            require(p["CLUSTER"] == 1 or p["BN"] >= 128, "kernel.CLUSTER",
                    f"CLUSTER=2 with row-major B splits the B tile's 64-column boxes over the pair: BN={p['BN']} must be >= 128")
        require(p["CLUSTER"] <= device.max_cluster_size, "kernel.CLUSTER",
                f"CLUSTER={p['CLUSTER']} exceeds the device's cluster limit {device.max_cluster_size}")
        for tm in self.arguments(problem, p, device)[:2]:
            try:
                tma.check(tm, problem)
            except ConfigError as exc:
                raise ParamError(exc.field, str(exc).split(': ', 1)[1]) from None

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape, self.precisions[0], *self.layouts[0]), params, device)

    def instance(self, problem: Problem, params) -> str:
        p = params
        return (f"gemm_wgmma<{elem_bytes(problem.precision)}, {p['BM']}, {p['BN']}, {p['STAGES']}, "
                f"{int(self.b_mn_major(problem))}, {p['CLUSTER']}, {p['GROUP_M']}, {p['SCHED'] - 1}>")

    def entry(self, params) -> str:
        return self.instance(Problem(Shape(1, 1, 1), self.precisions[0], *self.layouts[0]), params)

    def options(self, problem: Problem, params, device: DeviceFacts) -> KernelOptions:
        return KernelOptions(arch_specific=True)

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        bk = ROW_BYTES // elem_bytes(problem.precision)
        b_box = (bk, 64) if self.b_mn_major(problem) else (params["BN"] // params["CLUSTER"], bk)
        return (TensorMap("A", (params["BM"], bk), swizzle="128B"), TensorMap("B", b_box, swizzle="128B"),
                Matrix("C"), Dim("M"), Dim("N"), Dim("K"))

    def ctas(self, shape: Shape, params, device: DeviceFacts) -> int:
        """Persistent grid: one CTA per SM at most (whole clusters), never more than the work units."""
        cl = params["CLUSTER"]
        units = cdiv(cdiv(shape.M, params["BM"]), cl) * cdiv(shape.N, params["BN"])
        return cl * max(1, min(units, device.sm_count // cl))

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        cl = params["CLUSTER"]
        return Launch(grid=(self.ctas(problem.shape, params, device), 1, 1), block=(THREADS, 1, 1),
                      shared_bytes=shared_bytes(params), cluster=(cl, 1, 1) if cl > 1 else None)

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return self.geometry(Problem(shape, self.precisions[0], *self.layouts[0]), params, device)

    def ownership(self, shape: Shape, params, device: DeviceFacts | None = None):
        """Stores: the persistent schedule (:func:`schedule`, 132 SMs unless ``device`` says
        otherwise) times the m64nBN accumulator layout of the two consumer warpgroups (warp w rows
        16w.., m16n8 fragments along N), masked to M x N. Loads: per stage one A box (BM x BK) and
        the B boxes of all CTAs of the cluster (K-major: CLUSTER boxes of BN/CLUSTER rows; row-major
        B: BN/64 boxes of BK x 64), each tile element written once."""
        facts = device or DeviceFacts(name="sm_90 class (no device given)", arch="90", sm_count=132)
        p = params
        BM, BN, cl = p["BM"], p["BN"], p["CLUSTER"]
        tiles = [(t, local) for cta in schedule(shape, p, self.ctas(shape, p, facts)) for local, t in enumerate(cta)]
        stores = np.zeros((shape.M, shape.N), dtype=np.int64)
        ping = p["SCHED"] == 2
        wm = BM if ping else BM // 2  # rows per consumer warpgroup
        wg, mi, w, j, lane, h, v = np.ix_(range(2), range(wm // 64), range(4), range(BN // 8), range(32),
                                          range(2), range(2))
        # cooperative: both consumer warpgroups, wm rows each; ping-pong: warpgroup local % 2
        # (the tile's position in its CTA's list) computes all BM rows, the other skips it
        tile_row = (0 if ping else wg * wm) + mi * 64 + w * 16 + lane // 4 + 8 * h
        tile_col = j * 8 + 2 * (lane % 4) + v
        for first in range(0, len(tiles), 64):  # 64 tiles at a time (a leading tile axis)
            m_blk, n_blk, local = (np.array(x).reshape(-1, *[1] * wg.ndim)
                                   for x in zip(*[(m, n, t) for (m, n), t in tiles[first:first + 64]]))
            row = m_blk * BM + tile_row
            if ping:
                row = np.where(wg == local % 2, row, -1)
            col = n_blk * BN + tile_col
            add_hits(stores, row, col, (row >= 0) & (row < shape.M) & (col < shape.N))
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
        return stores, {"A": count_hits((BM, bk), r, c), "B": b_hits, "B_row_major": bt_hits}


@hookimpl
def gemmlab_kernels():
    return [WgmmaKernel(name="wgmma_bf16", source="wgmma_bf16.cu",
                        defaults={"BM": 128, "BN": 256, "STAGES": 4, "CLUSTER": 1, "GROUP_M": 8, "SCHED": 1},
                        description="BF16 sm_90a: persistent, producer + 2 consumer warpgroups (setmaxnreg), "
                                    "TMA ring with full/empty mbarriers, wgmma m64n256k16, optional 2-CTA TMA multicast",
                        precisions=("bf16",), layouts=(("row", "col"), ("row", "row")))]
