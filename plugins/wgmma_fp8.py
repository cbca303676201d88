"""Built-in kernel ``wgmma_fp8`` (issue 42, item 4): warp-specialised, persistent Hopper FP8 GEMM
(sm_90a, kernels/wgmma_fp8.cu) with promoted accumulation and every scaling mode of the contract.

``precision=fp8``: A row-major and B column-major (both K-major: FP8 wgmma has no transpose mode; a
row-major B is refused in one line), each E4M3 or E5M2 (``fp8.a`` / ``fp8.b``), C float32 or bf16
(``fp8.out``). The structure is kernels/wgmma_bf16.cu's cooperative schedule: one producer
warpgroup (one thread issues every TMA load, setmaxnreg.dec 40) and two consumer warpgroups
(setmaxnreg.inc 232) that split each BM x BN tile's rows and run ``wgmma.mma_async m64nBNk32`` with
E4M3/E5M2 operands (gemmlab/wgmma_fp8.cuh); a STAGES-deep ring of TMA stages (A BM x 128 bytes, B
BN x 128 bytes, 128-byte swizzle) with full/empty mbarriers; a persistent grid (at most one CTA per
SM, from ``DeviceFacts.sm_count``) walking the tiles in groups of GROUP_M tile rows for L2 reuse.

Accumulation (``fp8_accumulation=128``): each stage (128 of K, 4 wgmma k-steps) is accumulated in a
register partial sum on the tensor cores, then added to a float32 accumulator on the CUDA cores
(DeepSeek-V3's promotion, report §3.3.2; the FP8 tensor core keeps about 14 bits: each k-step aligns
its addends to the largest and truncates them at 14 bits of it, ``emulate``). ``OVERLAP=1`` keeps
two partial-sum banks so the next stage's wgmma group runs while this one is promoted; ``OVERLAP=0``
waits for every stage's group before promoting (one bank, fewer registers).

Scaling (``fp8.scaling``): ``tensor`` — C = acc * A_scale * B_scale in the epilogue; ``row`` — C[m, n]
= acc * A_scale[m] * B_scale[n] in the epilogue; ``block`` (1 x 128 groups of A along K, 128 x 128 blocks
of B) — at each promotion acc += partial * A_scale[k/128, m] * B_scale[n/128, k/128] (the stage is
one 128-group); scales are read by the consumer threads (``__ldg``) before the stage's full wait,
so their latency hides behind it. C leaves from registers (float2 / bf16x2 where N is even), masked
at M and N. Edges: TMA zero-fills box elements outside M, N and K, so a partial last group of K
adds zeros; M and N are free. K must be a multiple of 16 (TMA's 16-byte row stride of A and B;
gemmlab has no FP8 pad copy yet).

Parameters: BM (64 | 128 | 256), BN (64 | 96 | 128 | 160 | 192 with BM 128 or 256; 128 | 192 | 256
with BM 64), STAGES (2..8, within 227 KiB), GROUP_M (>= 1), OVERLAP (0 | 1); accumulator +
partial-sum registers per consumer thread (:func:`acc_registers`) at most 192
(:data:`MAX_ACC_REGISTERS`). Needs an sm_90 GPU.

Small M (issue 42 item 4; ``kernel=auto precision=fp8`` must cover M = 1 ... 16384). With BM = 128
a tile of M <= 64 rows multiplies at least 64 zero rows (M = 1: 127 of 128) and the persistent grid
has only ceil(M/128) x ceil(N/BN) CTAs (N = 7168, BN = 128: 56 of 132 SMs), so small M is bounded
by the B bandwidth of too few SMs, not by the tensor cores. Two forms cover it:

- **BM = 64 (built).** Both consumer warpgroups share the tile's 64 rows and each takes BN/2 columns
  (WN = BN/2, one ``m64nWNk32`` per k-step, its B descriptor WN x 128 bytes into the stage's B box,
  a multiple of 1024); producer, ring, promotion, scales and epilogue as BM = 128. BN is 128, 192 or
  256 (WN 64, 96, 128; 256 x 128 is TMA's largest box). Halves the zero rows at M <= 64 and, at the
  same BN, keeps the CTA count; with BN = 128 a 64-row tile streams B as BM = 128 does.
- **Split-K (design, not built).** For M <= 128 and ceil(N/BN) well under the SM count, split K into
  S = min(ceil(SMs / tiles), K / 512) slices of whole 128-groups (so block scaling's groups never
  straddle a slice); each CTA promotes its slice's partial sums as now and writes float32 partials
  to a workspace (S x M x N float32, declared by ``workspace_bytes``); a second pass (or the last CTA of a tile, by
  a per-tile counter) sums the S slices in slice order (deterministic), applies tensor/row scales
  and rounds to C's type. Declared accumulation stays ``fp8_accumulation=128`` (the promotion
  interval does not change; the float32 sum gains S - 1 additions, which the fp8 bound's float32
  term covers only if the bound's addition count is taken as ceil(K/128) + S - 1 — to be checked
  in gemmlab.stages.verify before it ships). Parameters: SPLIT (1 | 2 | 4 | 8), rule SPLIT > 1 only
  with BM = 64 or 128 and ceil(K/128) >= 2 SPLIT.

Until a GPU run ranks BM = 64 against BM = 128 (``gemmlab -m kernel=wgmma_fp8 kernel.BM=64,128
kernel.BN=128 ...``), ``kernel=auto`` keeps choosing the defaults (BM = 128) at every M: the dispatch
table (gemmlab/data/tuning) has no FP8 rule; :meth:`WgmmaFp8Kernel.candidates` puts BM = 64 first
where M <= 64.
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract import tma_rules as tma
from gemmlab.contract.hookspecs import (FP8_MMA_BITS, DeviceFacts, Dim, KernelOptions, KernelSpec, Launch, Matrix,
                                        ParamError, Problem, Shape, TensorMap, hookimpl)
from gemmlab.contract.plugin_utils import SM90_SHARED_OPTIN_BYTES, cdiv, count_hits, fp8_mma_step, require
from gemmlab.contract.regimes import RANK_FIRST, Preference
from gemmlab.contract.space import Choice, Range, Restriction, Space
from gemmlab.errors import ConfigError

THREADS = 384  #: producer warpgroup + 2 consumer warpgroups
BK = 128  #: K per stage: one 128-byte swizzle row of FP8 = one block-scaling group
PROMOTE = 128  #: elements of K accumulated on the tensor cores before each float32 promotion (one stage)
MAX_ACC_REGISTERS = 192  #: kernels/wgmma_fp8.cu's static_assert: accumulators + partial sums per consumer thread
SCALING_CODE = {"tensor": 0, "row": 1, "block": 2}  #: the kernel's SCALING template argument
FORMAT_CODE = {"e4m3": 0, "e5m2": 1}  #: FA / FB (gemmlab/wgmma_fp8.cuh FP8_E4M3 / FP8_E5M2)


def shared_bytes(p) -> int:
    """Dynamic shared memory (bytes): STAGES x (BM + BN) x 128 B of ring plus 1024 of slack to align
    it to 1024 (the 128-byte swizzle's atom)."""
    return p["STAGES"] * (p["BM"] + p["BN"]) * BK + 1024


def warpgroup_tile(p) -> tuple[int, int]:
    """(rows, columns) of the tile one consumer warpgroup owns: (BM/2, BN) for BM 128 and 256 (the
    consumers split the rows), (64, BN/2) for BM 64 (they split the columns)."""
    return (64, p["BN"] // 2) if p["BM"] == 64 else (p["BM"] // 2, p["BN"])


def acc_registers(p) -> int:
    """Float registers per consumer thread for the accumulator and the partial-sum bank(s):
    (its rows / 64) m64 blocks x (its columns / 2) x (2 + OVERLAP) (:func:`warpgroup_tile`)."""
    wm, wn = warpgroup_tile(p)
    return wm // 64 * wn // 2 * (2 + p["OVERLAP"])


def bn_allowed(p) -> bool:
    """BN allowed with this BM: 128, 192 or 256 with BM 64 (BN/2 is a wgmma n of
    gemmlab/wgmma_fp8.cuh: 64, 96, 128); 64..192 in steps of 32 but not 224 with BM 128 or 256."""
    return p["BN"] in ((128, 192, 256) if p["BM"] == 64 else (64, 96, 128, 160, 192))


#: parameters that are a few codes or sizes (``KernelBase.param_values``)
PARAM_VALUES = {"BM": (64, 128, 256), "BN": (64, 96, 128, 160, 192, 256), "STAGES": (2, 3, 4, 5, 6, 7, 8),
                "OVERLAP": (0, 1)}

DEFAULTS = {"BM": 128, "BN": 128, "STAGES": 6, "GROUP_M": 16, "OVERLAP": 1}

#: the declared tuning space (issue 41 / 14): the rules that need no problem or device as restrictions;
#: the TMA stride rule (K % 16) and the device's limits stay in :meth:`WgmmaFp8Kernel.check_problem`
SPACE = Space(
    params={"BM": Choice((128, 256, 64)), "BN": Choice((128, 64, 96, 160, 192, 256)), "STAGES": Range(2, 8),
            "GROUP_M": Choice((16, 8)), "OVERLAP": Choice((1, 0))},
    restrictions=(
        Restriction("bn_of_bm", bn_allowed,
                    "BN in 128, 192, 256 with BM=64 (each consumer's BN/2 a wgmma n); 64, 96, 128, 160, 192 with "
                    "BM=128 or 256", over=("BM", "BN")),
        Restriction("registers", lambda p: acc_registers(p) <= MAX_ACC_REGISTERS,
                    f"accumulators + partial sums: (rows/64) x (columns/2) x (2 + OVERLAP) of a consumer's part "
                    f"<= {MAX_ACC_REGISTERS} registers "
                    "per consumer thread", over=("BM", "BN", "OVERLAP")),
        Restriction("shared_memory", lambda p: shared_bytes(p) <= SM90_SHARED_OPTIN_BYTES,
                    "STAGES x (BM + BN) x 128 B + 1 KiB within sm_90's 227 KiB", over=("BM", "BN", "STAGES")),
    ))


def tile_order(shape: Shape, p, ctas: int) -> list[list[tuple[int, int]]]:
    """The persistent schedule of kernels/wgmma_fp8.cu per CTA: (tile row, tile column) in order.
    CTA b takes tiles b, b + ctas, ...; tile t lies in group t // (GROUP_M x tile columns), whose
    ``rows`` tile rows (GROUP_M, fewer in the last group) run fastest."""
    num_m, num_n, gm = cdiv(shape.M, p["BM"]), cdiv(shape.N, p["BN"]), p["GROUP_M"]
    out = []
    for cta in range(ctas):
        tiles = []
        for t in range(cta, num_m * num_n, ctas):
            group, in_group = divmod(t, gm * num_n)
            rows = min(num_m - group * gm, gm)
            tiles.append((group * gm + in_group % rows, in_group // rows))
        out.append(tiles)
    return out


def fragment_coords(BM: int, BN: int) -> tuple[np.ndarray, np.ndarray]:
    """Tile-relative (row, column) of every accumulator a CTA's two consumer warpgroups store for
    one BM x BN tile (kernels/wgmma_fp8.cu's epilogue): warpgroup wg rows wg x BM/2.. (BM 128, 256)
    or columns wg x BN/2.. (BM 64), m64 block mi, warp w rows 16 w.., lane (g = lane / 4, t = lane % 4)
    rows g and g + 8, columns 8 j + 2 t + v. Flat int64 arrays of BM x BN entries."""
    wm, wn = warpgroup_tile({"BM": BM, "BN": BN})
    wg, mi, w, j, lane, h, v = np.ix_(range(2), range(wm // 64), range(4), range(wn // 8), range(32), range(2),
                                      range(2))
    split_n = BM == 64
    rows = (0 if split_n else wg * wm) + mi * 64 + w * 16 + lane // 4 + 8 * h
    cols = (wg * wn if split_n else 0) + j * 8 + 2 * (lane % 4) + v
    return tuple(a.ravel().astype(np.int64) for a in np.broadcast_arrays(rows, cols))


def emulate(problem: Problem, a_q: np.ndarray, b_q: np.ndarray, a_scale: np.ndarray, b_scale: np.ndarray,
            acc_bits: int = FP8_MMA_BITS) -> np.ndarray:
    """numpy model of kernels/wgmma_fp8.cu's arithmetic (the fake GPU runs it in the CPU tests).

    ``a_q`` (M, K) and ``b_q`` (N, K, B as stored: column-major) are the FP8 operands' values as
    float64; ``a_scale`` / ``b_scale`` the float32 scale buffers as :class:`Problem` lays them out.
    Per 128-group kb of K the tensor cores form a partial sum T over 4 k-steps of 32, each step
    :func:`~gemmlab.contract.plugin_utils.fp8_mma_step` (the step's products and T aligned to the
    largest of them and truncated toward zero at ``acc_bits`` significant bits of it: the model
    that reproduces this kernel's H100 output bit for bit, issue 42);
    the promotion adds T to a float32 accumulator (``block``: ``fma(T, sa * sb, acc)`` with A's
    scale of (kb, m) and B's of (n // 128, kb)); the epilogue multiplies by A_scale * B_scale
    (``tensor``) or A_scale[m] * B_scale[n] (``row``; the scales' float32 product first, as the kernel).
    Returns float32 (M, N), before C's rounding."""
    M, N, K = problem.M, problem.N, problem.K
    acc = np.zeros((M, N), dtype=np.float32)
    L4 = -(-problem.scale_groups // 4) * 4
    for kb in range(problem.scale_groups):
        t = np.zeros((M, N))
        for k0 in range(kb * BK, min(K, kb * BK + BK), 32):
            t = fp8_mma_step(t, a_q[:, k0:k0 + 32], b_q[:, k0:k0 + 32].T, acc_bits)
        t32 = t.astype(np.float32)
        if problem.scaling == "block":
            sa = a_scale.reshape(-1)[kb * M:(kb + 1) * M].astype(np.float32)
            sb = b_scale.reshape(-1)[np.arange(N) // 128 * L4 + kb].astype(np.float32)
            s = (sa[:, None] * sb[None, :]).astype(np.float32)
            acc = (t32.astype(np.float64) * s + acc).astype(np.float32)  # one rounding: the fma
        else:
            acc = (acc + t32).astype(np.float32)
    if problem.scaling == "tensor":
        return (acc * (np.float32(a_scale.reshape(-1)[0]) * np.float32(b_scale.reshape(-1)[0]))).astype(np.float32)
    if problem.scaling == "row":
        sa, sb = a_scale.reshape(-1)[:M].astype(np.float32), b_scale.reshape(-1)[:N].astype(np.float32)
        return (acc * (sa[:, None] * sb[None, :])).astype(np.float32)  # the kernel's v *= A_scale[m] * B_scale[n]
    return acc


class WgmmaFp8Kernel(KernelSpec):
    """The persistent FP8 wgmma GEMM of kernels/wgmma_fp8.cu (module docstring): BM x BN tiles,
    128-byte K stages by TMA, partial sums promoted to float32 every 128 of K, scales applied by
    the kernel."""

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        """One-line :class:`ParamError` naming the field for: another GPU than sm_90, parameter
        values outside their lists, too many accumulator registers, the device's shared memory,
        and shapes TMA cannot describe (K % 16 != 0: A's and B's row strides of K bytes)."""
        p = params
        require(device.arch == "90", "kernel",
                f"{self.name} needs an sm_90 GPU (FP8 wgmma, setmaxnreg: sm_90a); the compile target is sm_{device.arch} "
                f"on {device.name}")
        require(p["BM"] in PARAM_VALUES["BM"], "kernel.BM",
                f"BM={p['BM']} must be 64 (the two consumer warpgroups split the columns), 128 or 256 (they split "
                "the rows, whole m64 blocks each)")
        require(bn_allowed(p), "kernel.BN",
                f"BN={p['BN']} with BM={p['BM']}: BN must be " + ("128, 192 or 256 with BM=64 (each consumer's "
                "BN/2 an FP8 wgmma n of gemmlab/wgmma_fp8.cuh)" if p["BM"] == 64 else "64, 96, 128, 160 or 192 with "
                f"BM={p['BM']} (an FP8 wgmma n of gemmlab/wgmma_fp8.cuh whose accumulator and partial sum fit the "
                "registers)"))
        require(p["OVERLAP"] in PARAM_VALUES["OVERLAP"], "kernel.OVERLAP",
                f"OVERLAP={p['OVERLAP']} must be 0 (one partial-sum bank) or 1 (two: the next stage's wgmma runs "
                "while this one is promoted)")
        require(p["STAGES"] in PARAM_VALUES["STAGES"], "kernel.STAGES", f"STAGES={p['STAGES']} must be 2..8")
        require(p["GROUP_M"] >= 1, "kernel.GROUP_M", f"GROUP_M={p['GROUP_M']} must be >= 1")
        regs = acc_registers(p)
        require(regs <= MAX_ACC_REGISTERS, "kernel.BN",
                f"BM={p['BM']} x BN={p['BN']} with OVERLAP={p['OVERLAP']} needs {regs} accumulator and partial-sum "
                f"registers per consumer thread ((rows/64) x (columns/2) x (2 + OVERLAP) of its part); at most "
                f"{MAX_ACC_REGISTERS}")
        require(shared_bytes(p) <= device.max_shared_per_block_optin, "kernel.STAGES",
                f"dynamic shared memory {shared_bytes(p)} bytes (STAGES={p['STAGES']} x (BM+BN) x 128 B + 1024) "
                f"exceeds {device.max_shared_per_block_optin}")
        require(problem.K % 16 == 0, "shape",
                f"K={problem.K} must be a multiple of 16: TMA reads A and B with row strides of K bytes, a multiple "
                "of 16 (no FP8 pad copy yet)")
        for tm in self.arguments(problem, p, device)[:2]:
            try:
                tma.check(tm, problem)
            except ConfigError as exc:
                raise ParamError(exc.field, str(exc).split(": ", 1)[1]) from None

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """A shortlist for the problem, then the declared space's points (the core checks each):
        the tile widths BN in 128, 192, 160, 96 ordered by the estimated time of the persistent grid
        (whole waves of 128 x BN tiles over the SMs x the tile's area, with a guessed efficiency
        that favours wider tiles), each with the defaults' other parameters; where M <= 64 the
        BM = 64 forms (BN 128, 192, 256, the same estimate with 64-row tiles) come first: a 128-row
        tile would multiply at least 64 zero rows. A guess until a GPU run ranks them."""
        sms = device.sm_count
        eff = {192: 1.0, 160: 0.98, 128: 0.95, 96: 0.85}
        eff64 = {256: 1.0, 192: 0.98, 128: 0.95}

        def cost(bm, bn, e):
            return cdiv(cdiv(problem.M, bm) * cdiv(problem.N, bn), sms) * bm * bn / e[bn]

        forms = [(128, bn) for bn in sorted(eff, key=lambda bn: cost(128, bn, eff))]
        if problem.M <= 64:
            forms = [(64, bn) for bn in sorted(eff64, key=lambda bn: cost(64, bn, eff64))] + forms
        out = []
        for bm, bn in forms:
            p = {**self.defaults, "BM": bm, "BN": bn}
            if acc_registers(p) > MAX_ACC_REGISTERS:
                p["OVERLAP"] = 0
            p["STAGES"] = min(p["STAGES"], (SM90_SHARED_OPTIN_BYTES - 1024) // ((p["BM"] + bn) * BK))
            out.append(p)
        return out + super().candidates(problem, device)

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rule for fp8 (every regime; the only FP8 kernel): where M <= 64 the first of
        :meth:`candidates`, a 64-row tile (H100, session 33: the BM = 128 tile at M = 64 ran 44-94% of
        cuBLASLt, half of each wgmma's rows past M); elsewhere nothing (the defaults, BM = 128
        BN = 128, as before: the candidates' BN order is an estimate no GPU run has ranked yet)."""
        if problem.M > 64:
            return []
        first = {k: v for k, v in self.candidates(problem, device)[0].items() if self.defaults.get(k) != v}
        return [Preference(RANK_FIRST, first, "M <= 64: a 64-row tile (a 128-row one multiplies rows past M)")]

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape, "fp8", "row", "col"), params, device)

    def instance(self, problem: Problem, params) -> str:
        """``gemm_wgmma_fp8<FA, FB, BM, BN, STAGES, GROUP_M, SCALING, OUT_BF16, OVERLAP>``."""
        p = params
        return (f"gemm_wgmma_fp8<{FORMAT_CODE[problem.fp8_a]}, {FORMAT_CODE[problem.fp8_b]}, {p['BM']}, {p['BN']}, "
                f"{p['STAGES']}, {p['GROUP_M']}, {SCALING_CODE[problem.scaling]}, {int(problem.out == 'bf16')}, "
                f"{p['OVERLAP']}>")

    def entry(self, params) -> str:
        return self.instance(Problem(Shape(1, 1, 1), "fp8", "row", "col"), params)

    def options(self, problem: Problem, params, device: DeviceFacts) -> KernelOptions:
        return KernelOptions(arch_specific=True)

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """TMA maps of A (BM x 128 boxes) and B (BN x 128 boxes of the N x K storage), both with the
        128-byte swizzle; the scale buffers; C; M, N, K."""
        return (TensorMap("A", (params["BM"], BK)), TensorMap("B", (params["BN"], BK)), Matrix("A_scale"),
                Matrix("B_scale"), Matrix("C"), Dim("M"), Dim("N"), Dim("K"))

    def ctas(self, shape: Shape, params, device: DeviceFacts) -> int:
        """Persistent grid: min(SMs, tiles)."""
        return max(1, min(device.sm_count, cdiv(shape.M, params["BM"]) * cdiv(shape.N, params["BN"])))

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        return Launch(grid=(self.ctas(problem.shape, params, device), 1, 1), block=(THREADS, 1, 1),
                      shared_bytes=shared_bytes(params))

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return self.geometry(Problem(shape, "fp8", "row", "col"), params, device)

    def ownership(self, shape: Shape, params, device: DeviceFacts | None = None):
        """Stores: the persistent schedule (:func:`tile_order`, 132 SMs unless ``device`` says
        otherwise) times the accumulator layout of the two consumer warpgroups
        (:func:`fragment_coords`), masked to M x N. Loads: per stage one A box (BM x 128) and one B box (BN x
        128), each tile element written once."""
        facts = device or DeviceFacts(name="sm_90 class (no device given)", arch="90", sm_count=132)
        BM, BN = params["BM"], params["BN"]
        r, c = fragment_coords(BM, BN)
        stores = np.zeros((shape.M, shape.N), dtype=np.int64)
        for cta in tile_order(shape, params, self.ctas(shape, params, facts)):
            for m_blk, n_blk in cta:
                rr, cc = r + m_blk * BM, c + n_blk * BN
                keep = (rr < shape.M) & (cc < shape.N)
                np.add.at(stores, (rr[keep], cc[keep]), 1)
        ar, ac = np.ix_(range(BM), range(BK))
        br, bc = np.ix_(range(BN), range(BK))
        return stores, {"A": count_hits((BM, BK), ar, ac), "B": count_hits((BN, BK), br, bc)}


@hookimpl
def gemmlab_kernels():
    return [WgmmaFp8Kernel(name="wgmma_fp8", source="wgmma_fp8.cu", defaults=dict(DEFAULTS),
                           description="FP8 sm_90a: persistent, producer + 2 consumer warpgroups, TMA ring, wgmma "
                                       "m64nNk32 E4M3/E5M2, partial sums promoted to float32 every 128 of K, "
                                       "tensor/row/block scales",
                           precisions=("fp8",), layouts=(("row", "col"),), param_values=PARAM_VALUES, space=SPACE,
                           sass_classes=("QGMMA", "UTMALDG"), fp8_accumulation=PROMOTE)]
