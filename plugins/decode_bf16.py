"""Built-in kernels ``decode_bf16`` (issue 10) and ``decode_tf32`` (issue 41): decode-like BF16/FP16
and TF32 GEMMs (M small, N and K weight-sized) on tensor cores with B streamed from global memory
into registers (kernels/decode_bf16.cu; ``decode_tf32`` is the same loop on float32 storage with
mma.sync m16n8k8 TF32, each fragment word rounded by cvt.rna.tf32.f32, two 16-byte pieces per 8 k of
a row and four mma steps per 32-long chunk; :class:`DecodeTf32Kernel`).

Each warp owns 16·MT rows x 64 columns of C and walks 32-long K chunks: per chunk every lane
issues eight 16-byte loads of B and 2·MT of A (no shared-memory staging), and the warp issues
2·MT·8 ``mma.sync.m16n8k16``; the k order inside a chunk is permuted identically for A and B so
that every load is 16 contiguous bytes for both layouts of B (see the source's header). A block's
KW warps split its K range round-robin, U chunks at a time (U·4 KiB of B in flight per warp), and
reduce through shared memory; gridDim.z = SPLITS blocks (at most 8) split K further and form one
thread-block cluster (1, 1, SPLITS) per tile, whose blocks add the tile over the cluster's shared
memory (DSMEM) in rank order, each block storing one slice: one launch, no atomics, no memset,
bitwise reproducible.

Parameters: MT (1, 2 or 4 m16 tiles per block: 16, 32 or 64 rows), KW (1..16 warps per block),
U (1..4 chunks per load round), SPLITS (1..8 K splits across blocks: the cluster size). Precisions bf16 and
fp16; layouts A row-major, B row- or column-major. Needs K % 8 == 0 (16-byte rows of A and of a
column-major B) and, for a row-major B, N % 8 == 0; other shapes are refused by :meth:`check_problem`
(one line naming the rule). Fast where B dominates the traffic (M <= 64, N·K in the millions).

The whole GEMM contract (issue 43): ``decode_bf16`` declares the full epilogue (:data:`FULL`: alpha,
beta·C0, a float32 or input-typed bias, every activation, a float32/bf16/fp16 C rounded once,
leading dimensions that are multiples of 8 (its 16-byte loads), strided batches with shared
operands). Such a problem compiles ``gemm_decode16_epi`` with ``-DGEMMLAB_EPI``: the same loop with
the pitches lda/ldb, the fused operation of gemmlab/fused.cuh on the four outputs a thread stores
after the split reduction, and the batches along grid y (gridDim.z stays the K splits of a
cluster); a plain problem compiles ``gemm_decode16`` as before.
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import (FULL, DeviceFacts, KernelOptions, KernelSpec, Launch, Main, Problem, Shape,
                                        hookimpl)
from gemmlab.contract.plugin_utils import (SM90_SHARED_OPTIN_BYTES, cdiv, count_hits,
                                          epilogue_arguments, epilogue_options, fused_entry, require)
from gemmlab.contract.space import Choice, PowerOfTwo, Range, Restriction, Space
from gemmlab.contract.regimes import RANK_FIRST, Preference

ELEMENT = {"bf16": "__nv_bfloat16", "fp16": "__half", "tf32": "float"}
NT = 64  # columns of C per block
CHUNK = 32  # k per chunk
MT_VALUES = (1, 2, 4)  # m16 blocks per block (16, 32 or 64 rows)


def shared_bytes(p) -> int:
    """Dynamic shared memory of the cross-warp reduction: KW x (16·MT) x 64 float32."""
    return 4 * p["KW"] * 16 * p["MT"] * NT


def k_runs(K: int, splits: int) -> list[tuple[int, int]]:
    """The [first, end) 32-long chunk indices of each split, as the kernel computes them."""
    chunks = cdiv(K, CHUNK)
    per = cdiv(chunks, splits)
    return [(min(chunks, z * per), min(chunks, (z + 1) * per)) for z in range(splits)]


#: 16-row blocks (M <= 16): (U, warps per block tried in order, warps per SM wanted) by storage and B
#: layout, fitted on the H100 train-split sweep of session 35 (1x4096x2304, 1x7168x2048, 8x1024x1024,
#: 16x3072x3072; docs/results/auto/README.md): the setting of :func:`fill` with the highest geomean of
#: the measured % of cuBLAS over those shapes, out of U 1/2/4, warps (16, 8, 4) / (8, 4), 3..12 warps per SM
DECODE_FILL = {("bf16", "col"): (2, (16, 8, 4), 7), ("bf16", "row"): (1, (8, 4), 5),
               ("tf32", "col"): (1, (8, 4), 7), ("tf32", "row"): (2, (8, 4), 7)}


def fill(blocks: int, chunks: int, u: int, warps: tuple[int, ...], sm_count: int, per_sm: int) -> tuple[int, int]:
    """``(KW, SPLITS)`` for ``blocks`` output tiles and ``chunks`` 32-long K chunks: the fewest K splits
    (1, 2, 4, 8: a cluster per tile, whose DSMEM reduction costs a cluster barrier) and, within them,
    the first of ``warps`` such that the launch brings ``per_sm`` warps per SM and ``chunks`` covers
    SPLITS x KW x ``u`` (a full round a warp on average: :func:`k_runs` gives the last split the rest,
    which may be less); where none does, the most warps that cover it (ties: fewer splits); where no
    pair covers it (K < 32 x the smallest KW x ``u``), the last of ``warps`` with one split (some warps
    then idle: the problem is a handful of chunks). Issue 41, item 3: the rule behind the decode
    kernels' :meth:`~DecodeBf16Kernel.sized` at 16-row blocks (:data:`DECODE_FILL`; the larger
    ``per_sm`` was kept where two tied on the sweep)."""
    target = per_sm * sm_count
    best, most = (warps[-1], 1), -1
    for splits in (1, 2, 4, 8):
        for kw in warps:
            if chunks < splits * kw * u:  # some warp would have less than one round
                continue
            w = blocks * splits * kw
            if w >= target:
                return kw, splits
            if w > most:
                best, most = (kw, splits), w
    return best


class DecodeBf16Kernel(KernelSpec):
    """Tensor-core decode GEMM: 16·MT x 64 per block, B streamed by 16-byte loads, split K."""

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        p = params
        require(p["MT"] in MT_VALUES, "kernel.MT", f"MT={p['MT']} must be 1, 2 or 4 (16, 32 or 64 rows per block)")
        require(1 <= p["KW"] <= 16, "kernel.KW", f"KW={p['KW']} warps per block must be 1..16")
        require(32 * p["KW"] <= device.max_threads_per_block, "kernel.KW",
                f"32*KW = {32 * p['KW']} threads exceeds the device limit {device.max_threads_per_block}")
        require(1 <= p["U"] <= 4, "kernel.U", f"U={p['U']} chunks per load round must be 1..4")
        require(1 <= p["SPLITS"] <= min(8, device.max_cluster_size), "kernel.SPLITS",
                f"SPLITS={p['SPLITS']} must be 1..{min(8, device.max_cluster_size)} (the splits of a tile are one "
                "thread-block cluster)")
        require(shared_bytes(p) <= device.max_shared_per_block_optin, "kernel.KW",
                f"reduction buffer KW x 16·MT x 64 x 4 B = {shared_bytes(p)} bytes exceeds "
                f"{device.max_shared_per_block_optin}; lower KW or MT")
        require(problem.K % 8 == 0, "shape",
                f"K = {problem.K}: {self.name} reads A{' and B' if problem.layout_b == 'col' else ''} rows in 16-byte "
                "pieces, so K must be a multiple of 8")
        if problem.layout_b == "row":
            require(problem.N % 8 == 0, "shape",
                    f"N = {problem.N}: {self.name} reads a row-major B in 16-byte pieces, so N must be a multiple of 8")
        require(cdiv(problem.M, 16 * p["MT"]) <= 65535, "shape",
                f"M = {problem.M} needs {cdiv(problem.M, 16 * p['MT'])} blocks along y (limit 65535); raise MT")
        if problem.extended:  # issue 43: pitches keep every 16-byte row piece aligned; batches go along y
            for name in ("lda", "ldb"):
                ld = getattr(problem, name)
                require(ld % 8 == 0, f"layout.{name}",
                        f"{name} = {ld}: {self.name} reads rows in 16-byte pieces, so {name} must be a multiple of 8")
            blocks_y = cdiv(problem.M, 16 * p["MT"]) * problem.batch
            require(blocks_y <= 65535, "batch.count",
                    f"{problem.batch} batches x {cdiv(problem.M, 16 * p['MT'])} row blocks = {blocks_y} blocks along y "
                    "(limit 65535); fewer batches or a larger MT")

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape, "bf16", "row", "row"), params, device)

    def sized(self, problem: Problem, device: DeviceFacts) -> dict:
        """Sized to the problem: MT = the m16 tiles covering M (1, 2, 4).

        16-row blocks (M <= 16): :func:`fill` with :data:`DECODE_FILL`'s setting for the storage and B's
        layout (this method serves ``decode_tf32`` too). H100 session 35, train-split sweep, same-run %
        of cuBLAS, graph timing (the rule before -> this one -> the sweep's fastest of 24-37 variants; 10
        of 24 for tf32 B col 1x7168x2048, cut by the budget):
        bf16 B column-major 1x4096x2304 49 -> 88 -> 88, 1x7168x2048 71 -> 105 -> 105, 8x1024x1024
        55 -> 79 -> 79, 16x3072x3072 68 -> 86 -> 90 (geomean 60 -> 89); B row-major 55 -> 67 -> 67,
        64 -> 72 -> 79, 56 -> 58 -> 65, 62 -> 64 -> 64 (59 -> 65); tf32 B column-major 38 -> 47 -> 57,
        85 -> 84 -> 92, 82 -> 93 -> 94, 75 -> 76 -> 78 (67 -> 72); B row-major (1x4096x2304,
        8x1024x1024, 16x3072x3072) 47 -> 54 -> 54, 69 -> 64 -> 83, 66 -> 69 -> 69 (60 -> 62). The test
        split's decode shapes were not run with it (held out; next GPU session).

        32- and 64-row blocks: 4 warps (8 with MT = 4), U = 2 (1 with MT = 4: 230 registers, NVRTC
        13.5), SPLITS = the most K splits (at most 8) whose blocks fit one wave of 4 blocks per SM (1
        with MT = 4) with at least 2 load rounds of K per warp (H200, bf16-pass1: 64x4096x4096 KW=8
        SPLITS=2 23.5 us, KW=4 SPLITS=4 35.1 us)."""
        mt = 1 if problem.M <= 16 else 2 if problem.M <= 32 else 4
        blocks = cdiv(problem.N, NT) * cdiv(problem.M, 16 * mt)
        if mt == 1:
            u, warps, per_sm = DECODE_FILL[("tf32" if problem.precision == "tf32" else "bf16", problem.layout_b)]
            kw, s = fill(blocks, cdiv(problem.K, CHUNK), u, warps, device.sm_count, per_sm)
            return {"MT": 1, "KW": kw, "U": u, "SPLITS": s}
        u, kw, per_sm = (1, 8, 1) if mt == 4 else (2, 4, 4)
        s = max(1, min(8, per_sm * device.sm_count // blocks, cdiv(problem.K, CHUNK) // (2 * kw * u)))
        return {"MT": mt, "KW": kw, "U": u, "SPLITS": s}

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """:meth:`sized` first, then that with twice the splits and with 8 warps and half the
        splits; then the declared space."""
        base = self.sized(problem, device)
        s = base["SPLITS"]
        sized = [base, {**base, "SPLITS": min(8, 2 * s)}, {**base, "KW": 8, "SPLITS": max(1, s // 2)}]
        return sized + super().candidates(problem, device)

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules (bf16, fp16): first in ``decode`` (:meth:`sized`: B streamed by 16-byte
        loads into mma.sync fragments, K split over warps and blocks); second in ``k_heavy`` (after the
        split-K wgmma tile) with 64-row blocks of 8 warps and SPLITS = the splits that fit one wave of
        64x64 tiles, each at least 16 chunks (512x512x16384: KW=8 SPLITS=2 30.3% of cuBLAS, KW=4
        SPLITS=8 18.8%, bf16-pass1)."""
        if regime == "decode":
            return [Preference(RANK_FIRST, self.sized(problem, device), "B streamed through registers, K split")]
        if regime == "k_heavy":
            m, n, k = problem.shape
            splits = max(1, min(8, device.sm_count // (cdiv(n, 64) * cdiv(m, 64)), cdiv(k, CHUNK) // 16))
            return [Preference(RANK_FIRST + 1, {"MT": 4, "KW": 8, "U": 1, "SPLITS": splits}, "split K, 64-row blocks")]
        return []

    def sweep_variants(self, problem: Problem, device: DeviceFacts, family: str) -> list[dict]:
        """gemmlab-tune sweep (decode and k_heavy families): around the rules' parameters for the problem
        (:meth:`preferences` of its first regime that has one, else :meth:`sized`): twice the splits (at
        most 8); 8 warps with half the splits; 8 warps with the same splits where K-heavy or unsplit; for
        M > 32 with 64-row blocks also 32-row blocks, and 8 warps with half the splits and U = 1."""
        if family not in ("decode", "k_heavy"):
            return []
        from gemmlab.contract.regimes import regimes
        p = next((dict(pref.params) for r in regimes(problem, device.sm_count)
                  for pref in self.preferences(problem, device, r.name)), self.sized(problem, device))
        s = p["SPLITS"]
        out = [{**p, "SPLITS": min(8, 2 * s)}, {**p, "KW": 8, "SPLITS": max(1, s // 2)}]
        if family == "k_heavy" or s == 1:
            out.append({**p, "KW": 8})
        if problem.M > 32 and p["MT"] == 4:
            out += [{**p, "MT": 2, "U": 2}, {**p, "KW": 8, "SPLITS": max(1, s // 2), "U": 1}]
        return out

    def instance(self, problem: Problem, params) -> str:
        """``gemm_decode16<T, MT, KW, U, B_COL>``; beyond the plain contract (issue 43)
        ``gemm_decode16_epi<T, MT, KW, U, B_COL, ACT, BIAS, BETA, BIAS_T, OUT_T>``."""
        p = params
        name = (f"gemm_decode16<{ELEMENT[problem.precision]}, {p['MT']}, {p['KW']}, {p['U']}, "
                f"{'true' if problem.layout_b == 'col' else 'false'}>")
        return fused_entry(name, problem)

    def options(self, problem: Problem, params, device: DeviceFacts) -> KernelOptions:
        """``-DGEMMLAB_EPI`` beyond the plain contract (the fused entry, issue 43), else none."""
        return epilogue_options(problem)

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """(A, B, C, M, N, K) for a plain problem; beyond it the fused entry's
        (:func:`~gemmlab.contract.plugin_utils.epilogue_arguments`)."""
        return epilogue_arguments(problem) if problem.extended else super().arguments(problem, params, device)

    def entry(self, params) -> str:
        return self.instance(Problem(Shape(1, 1, 1), "bf16", "row", "row"), params)

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        p = params
        return Launch(grid=(cdiv(problem.N, NT), cdiv(problem.M, 16 * p["MT"]) * problem.batch, p["SPLITS"]),
                      block=(32 * p["KW"], 1, 1), shared_bytes=shared_bytes(p),
                      cluster=(1, 1, p["SPLITS"]) if p["SPLITS"] > 1 else None)

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return self.geometry(Problem(shape, "bf16"), params, device)

    def ownership(self, shape: Shape, params):
        """Stores: thread t of block (x, y, z) stores the float4s e = r·slice + t + i·threads of its
        tile (e < (r+1)·slice, slice = ceil(16·MT·16 / SPLITS), r = z its cluster rank; with one
        split r = 0 and slice = the whole tile), row e // 16, columns 4·(e % 16) .. +3, masked to
        M x N: each output once over the whole grid. Loads, per warp and 32-long chunk: A (16·MT x
        32), B column-major (64 columns x 32 k, stored N x K) and row-major (32 k x 64 columns),
        each element loaded once; the partial tiles in shared memory (KW x 16·MT x 64, each written
        once, for both layouts' accumulator-to-column maps); every chunk of K in exactly one split
        and, inside it, one warp."""
        p = params
        mt, kw, splits = p["MT"], p["KW"], p["SPLITS"]
        rows, threads, vec = 16 * mt, 32 * p["KW"], 16 * p["MT"] * NT // 4
        gx, gy = cdiv(shape.N, NT), cdiv(shape.M, rows)
        slice_ = cdiv(vec, splits)
        bx, by, z, t, i, v = np.ix_(range(gx), range(gy), range(splits), range(threads), range(cdiv(slice_, threads)),
                                    range(4))
        e = z * slice_ + t + i * threads
        row, col = by * rows + e // (NT // 4), bx * NT + 4 * (e % (NT // 4)) + v
        stores = count_hits((shape.M, shape.N), row, col,
                            (e < np.minimum(vec, (z + 1) * slice_)) & (row < shape.M) & (col < shape.N))
        lane = np.arange(32)
        g, q = lane // 4, lane % 4
        # A: lane (g, q) loads rows 16i + g + 8h, k 8q .. 8q+7
        ii, hh, ln, kk = np.ix_(range(mt), range(2), range(32), range(8))
        a = count_hits((rows, CHUNK), 16 * ii + g[ln] + 8 * hh, 8 * q[ln] + kk)
        # B column-major: column 8j + g, k 8q .. +7 (stored as B^T: row n, column k)
        jj, ln2, kk2 = np.ix_(range(8), range(32), range(8))
        b_col = count_hits((NT, CHUNK), 8 * jj + g[ln2], 8 * q[ln2] + kk2)
        # B row-major: rows 8q + r, columns 8g .. 8g+7
        rr, ln3, cc = np.ix_(range(8), range(32), range(8))
        b_row = count_hits((CHUNK, NT), 8 * q[ln3] + rr, 8 * g[ln3] + cc)
        # partial tiles: acc[i][j][e] -> row 16i + g + 8(e >> 1), column (col-major) 8j + 2q + (e & 1)
        # or (row-major) 16q + 8(e & 1) + j
        w, i2, j2, ln4, e2 = np.ix_(range(kw), range(mt), range(8), range(32), range(4))
        prow = w * rows + 16 * i2 + g[ln4] + 8 * (e2 >> 1)
        part_col = count_hits((kw * rows, NT), prow, 8 * j2 + 2 * q[ln4] + (e2 & 1))
        part_row = count_hits((kw * rows, NT), prow, 16 * q[ln4] + 8 * (e2 & 1) + j2)
        # K chunks: split z's run, warp w takes chunks first + w*U + u + n*KW*U
        chunks = cdiv(shape.K, CHUNK)
        k_hits = np.zeros((1, max(chunks, 1)), dtype=np.int64)
        for first, end in k_runs(shape.K, p["SPLITS"]):
            for warp in range(kw):
                for c0 in range(first + warp * p["U"], end, kw * p["U"]):
                    for u in range(p["U"]):
                        if c0 + u < end:
                            k_hits[0, c0 + u] += 1
        loads = {"A": a, "B (column-major)": b_col, "B (row-major)": b_row, "partials (column-major B)": part_col,
                 "partials (row-major B)": part_row, "K chunks": k_hits[:, :chunks] if chunks else k_hits}
        return stores, loads


#: the declared tuning space (issue 41): :meth:`DecodeBf16Kernel.check_problem`'s parameter ranges as
#: domains; the reduction buffer within sm_90's opt-in shared memory (the device's own limit, the cluster
#: limit for SPLITS and the shape rules stay in check_problem)
def spill_free(p, tf32: bool = False) -> bool:
    """Whether ptxas keeps the loop in registers (no local memory): MT x 32 accumulators and U rounds
    of B pieces a lane, under __launch_bounds__(32·KW) (KW = 16: 128 registers). Measured with NVRTC
    13.5 for sm_90 (plain entries, both B layouts, 16x4096x4096): bf16 MT=1 any KW, U; MT=2 with
    KW <= 8, or KW = 16 and U = 1; MT=4 only with KW <= 8 and U = 1 (KW=8 U=2: 12-20 B spilled,
    KW=16 U=1: 896-1752 B). tf32 (two pieces per 8 k): MT=1 any; MT=2 with KW <= 8 (KW=16: 164-516 B)."""
    mt, kw, u = p["MT"], p["KW"], p["U"]
    if tf32:
        return mt == 1 or kw <= 8
    return mt == 1 or (mt == 2 and (kw <= 8 or u == 1)) or (mt == 4 and kw <= 8 and u == 1)


SPACE = Space(
    params={"MT": Choice(MT_VALUES), "KW": PowerOfTwo(1, 16), "U": Range(1, 4), "SPLITS": Range(1, 8)},
    restrictions=(
        Restriction("reduction_buffer", lambda p: shared_bytes(p) <= SM90_SHARED_OPTIN_BYTES,
                    "KW x 16*MT x 64 float32 of cross-warp partials within 227 KiB of shared memory",
                    over=("MT", "KW")),
        Restriction("registers", spill_free, "no spills: 64-row blocks with U = 1 and KW <= 8; 32-row blocks "
                    "with KW <= 8 or U = 1", over=("MT", "KW", "U")),
    ))


#: ``decode_tf32``'s m16 tiles per block: float32 pieces take twice the registers of 16-bit ones (U·8·2
#: 16-byte B pieces a lane), and 64-row blocks spill (MT=4 U=1: 255 registers, 20 bytes spilled, NVRTC 13.5)
TF32_MT_VALUES = (1, 2)
#: ``decode_tf32`` offers candidates up to this M (two row blocks of 32)
TF32_MAX_M = 64
#: ``decode_tf32``'s space: 16- or 32-row blocks, U <= 2 (MT=2 KW<=8 U=2: 186 registers, no spill)
TF32_SPACE = Space(
    params={"MT": Choice(TF32_MT_VALUES), "KW": PowerOfTwo(1, 16), "U": Range(1, 2), "SPLITS": Range(1, 8)},
    restrictions=(
        SPACE.restrictions[0],
        Restriction("registers", lambda p: spill_free(p, tf32=True), "no spills: 32-row blocks with KW <= 8",
                    over=("MT", "KW")),
    ))


class DecodeTf32Kernel(DecodeBf16Kernel):
    """:class:`DecodeBf16Kernel`'s loop on float32 storage with TF32 tensor cores (mma.sync.m16n8k8,
    each element rounded by cvt.rna.tf32.f32, four steps per 32-long chunk): the same 16·MT x 64 block,
    k permutation, K splits and cluster reduction, with 32 bytes of a row per 8 k (two 16-byte loads)."""

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        require(params["MT"] in TF32_MT_VALUES, "kernel.MT",
                f"MT={params['MT']} must be 1 or 2 (16 or 32 rows per block; 64 rows of float32 spill)")
        require(params["U"] <= 2, "kernel.U",
                f"U={params['U']}: {self.name} holds U x 8 x 32 bytes of B a lane; U must be 1 or 2")
        super().check_problem(problem, params, device)

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape, "tf32", "row", "row"), params, device)

    def sized(self, problem: Problem, device: DeviceFacts) -> dict:
        """16-row blocks (M <= 16): :meth:`DecodeBf16Kernel.sized` (:func:`fill` with
        :data:`DECODE_FILL`'s tf32 settings; the figures are there). 32-row blocks (M 17..64; 64 rows
        spill): 4 warps, U = 1, the most splits (at most 8) of 4 blocks per SM with at least 2 chunks
        per warp (not measured yet)."""
        mt = 1 if problem.M <= 16 else 2
        blocks = cdiv(problem.N, NT) * cdiv(problem.M, 16 * mt)
        if mt == 1:
            return super().sized(problem, device)
        kw = 4
        s = max(1, min(8, 4 * device.sm_count // blocks, cdiv(problem.K, CHUNK) // (2 * kw)))
        return {"MT": mt, "KW": kw, "U": 1, "SPLITS": s}

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """:meth:`DecodeBf16Kernel.candidates` where M <= :data:`TF32_MAX_M` (B streamed once per 32 rows
        at most); none above, where B would be re-read per row block from L2 against tiled kernels."""
        return super().candidates(problem, device) if problem.M <= TF32_MAX_M else []

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        return []

    def entry(self, params) -> str:
        return self.instance(Problem(Shape(1, 1, 1), "tf32", "row", "row"), params)

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return self.geometry(Problem(shape, "tf32"), params, device)


@hookimpl
def gemmlab_kernels():
    return [DecodeBf16Kernel(name="decode_bf16", source="decode_bf16.cu",
                             defaults={"MT": 1, "KW": 4, "U": 2, "SPLITS": 4},
                             description="BF16/FP16 decode (M <= 64): mma.sync m16n8k16 with B streamed by 16-byte "
                                         "loads into registers, K split over warps and SPLITS blocks of one "
                                         "cluster (added in rank order over DSMEM, no atomics)",
                             precisions=("bf16", "fp16"), layouts=(("row", "row"), ("row", "col")),
                             param_values={"MT": MT_VALUES}, space=SPACE,
                             sass_classes=("HMMA",), epilogue=FULL),
            DecodeTf32Kernel(name="decode_tf32", source="decode_bf16.cu",
                             defaults={"MT": 1, "KW": 4, "U": 1, "SPLITS": 4},
                             description="TF32 decode (M <= 64): decode_bf16's loop on float32 storage, mma.sync "
                                         "m16n8k8 TF32 (cvt.rna), B streamed by 16-byte loads, K split over warps "
                                         "and SPLITS blocks of one cluster",
                             precisions=("tf32",), layouts=(("row", "row"), ("row", "col")),
                             param_values={"MT": TF32_MT_VALUES}, space=TF32_SPACE,
                             sass_classes=("HMMA",), epilogue=FULL,
                             tf32_rounding="rna")]  # cvt.rna.tf32.f32 of each fragment word before its MMA
