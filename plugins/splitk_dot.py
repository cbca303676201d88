"""Built-in kernel ``splitk_dot`` (issue 41, item 3): a split-K GEMV-style reduction for tiny outputs
with a huge K (2x2x100000), one launch (kernels/splitk_dot.cu).

C (M x N, row-major float32) = A (M x K, row-major) @ B (K x N, row-major or column-major). The
output is cut into ``OM`` x ``ON`` tiles (numbered row-major; ``grid.y`` = the tiles) and
K into ``SPLITS`` ranges (``grid.x``; :func:`k_ranges`: whole 16-byte vectors of V = 16 / element
bytes elements each), so ``tiles x SPLITS`` blocks of ``THREADS`` threads fill the GPU even for a
single output element. Each thread walks V-long steps of its block's range (thread i: steps i, i +
THREADS, ..., ``U`` steps' loads in flight per round) with 16-byte loads where the rows are aligned
(K % V == 0 for A and a column-major B; a row-major B when N == ON, its V x N step block being
contiguous) and masked element loads elsewhere, so any M, N, K >= 1 is right. The block's OM*ON
sums are reduced by a warp butterfly plus shared memory and stored to its slot of the workspace;
after ``__threadfence()`` an atomic ticket per tile finds the last block of the tile, which adds the
SPLITS partials in a fixed order (bitwise the same every launch), stores C and resets the ticket.

Launch plan ``(Memset("workspace"), Main())``: the workspace (:func:`layout`: one uint32 ticket per
tile, then SPLITS x OM*ON float32 partials per tile) is zeroed inside every launch, so no launch
depends on what an earlier one left there (gemmlab refills workspaces with a canary between phases);
every partial slot is written before it is read.

Precisions: fp32, tf32 (float32 storage), bf16, fp16 (2-byte storage); every product is formed and
accumulated in float32 on the CUDA cores (FFMA). ``precision=tf32`` allows TF32 tensor-core math but
does not require it (cuBLAS runs GEMV-like TF32 work on FP32 units too), so the kernel reads the
float32 inputs unrounded and declares ``tf32_rounding="none"`` (the TF32 verification's reference
then rounds no input; the float32 accumulation bound applies).

Parameters: ``OM``, ``ON`` (1..8 each, OM*ON <= 32: accumulators per thread), ``THREADS`` (64, 128 or
256: ``__launch_bounds__`` then leaves up to 255 registers, which the 4x8 tile of 2-byte storage needs), ``U`` (1..4 steps per round; U*(OM+ON) <= 16 16-byte vectors in registers),
``SPLITS`` (1..4096 K ranges). :meth:`SplitKDotKernel.candidates` sizes them to the problem.
"""

from __future__ import annotations

import numpy as np

from gemmlab.contract.hookspecs import (DeviceFacts, Dim, KernelSpec, Launch, Main, Matrix, Memset, Problem, Shape,
                                        Workspace, hookimpl)
from gemmlab.contract.plugin_utils import cdiv, count_hits, require
from gemmlab.contract.space import Choice, Range, Restriction, Space
from gemmlab.contract.regimes import RANK_FIRST, Preference

#: C++ storage type of A and B per precision
ELEMENT = {"fp32": "float", "tf32": "float", "bf16": "__nv_bfloat16", "fp16": "__half"}
MAX_SIDE = 8         #: OM, ON at most this
MAX_OUT = 32         #: OM*ON accumulators per thread at most
MAX_VECTORS = 16     #: U*(OM+ON) 16-byte vectors (4 registers each) in flight per thread at most
MAX_TILES = 65535    #: grid.y
THREADS_VALUES = (256, 128, 64)  #: threads per block (whole warps; 512 would cap registers at 128: spills)
MAX_SPLITS = 4096    #: the core's parameter range (grid.x could hold more)
OFFER_MAX_OUTPUTS = 1024  #: candidates() offers nothing above this many outputs (M*N): not this kernel's region
PARTIALS_ALIGN = 256  #: byte offset of the partials after the tickets


def vector(precision: str = "fp32") -> int:
    """Elements per 16-byte vector, V: 4 for float32 storage (fp32, tf32), 8 for bf16/fp16."""
    return 8 if precision in ("bf16", "fp16") else 4


def tiles(shape: Shape, params) -> tuple[int, int]:
    """(tiles along M, tiles along N) of OM x ON; grid.y is their product."""
    return cdiv(shape.M, params["OM"]), cdiv(shape.N, params["ON"])


def k_ranges(K: int, splits: int, v: int = 4) -> list[tuple[int, int]]:
    """The [begin, end) K range of each split, as the kernel computes it: KC = ceil(ceil(K/SPLITS)/V)*V
    (whole V-element vectors), split z gets [min(K, z*KC), min(K, z*KC + KC)) (trailing ones may be empty)."""
    per = cdiv(cdiv(K, splits), v) * v
    return [(min(K, z * per), min(K, min(K, z * per) + per)) for z in range(splits)]


def layout(shape: Shape, params) -> tuple[int, int]:
    """(byte offset of the partials, workspace bytes): ``tiles`` uint32 tickets at offset 0, then the
    float32 partials [tile][split][OM*ON] from the next multiple of :data:`PARTIALS_ALIGN` bytes."""
    tm, tn = tiles(shape, params)
    offset = cdiv(4 * tm * tn, PARTIALS_ALIGN) * PARTIALS_ALIGN
    return offset, offset + 4 * tm * tn * params["SPLITS"] * params["OM"] * params["ON"]


class SplitKDotKernel(KernelSpec):
    """Tiny output, huge K: OM x ON outputs per block, K split over SPLITS blocks, ticketed final sum."""

    def check_problem(self, problem: Problem, params, device: DeviceFacts) -> None:
        """Raises ParamError naming the field: OM/ON outside 1..8 or OM*ON > 32, THREADS not 64, 128
        or 256, U outside 1..4 or U*(OM+ON) > 16, SPLITS outside
        1..4096, or more than 65535 output tiles (``shape``)."""
        p = params
        for side in ("OM", "ON"):
            require(1 <= p[side] <= MAX_SIDE, f"kernel.{side}", f"{side}={p[side]} must be 1..{MAX_SIDE} (outputs per "
                    "block along " + ("M" if side == "OM" else "N") + ")")
        require(p["OM"] * p["ON"] <= MAX_OUT, "kernel.ON",
                f"OM*ON = {p['OM']}*{p['ON']} = {p['OM'] * p['ON']} accumulators per thread: at most {MAX_OUT}")
        require(p["THREADS"] in THREADS_VALUES and p["THREADS"] <= device.max_threads_per_block, "kernel.THREADS",
                f"THREADS={p['THREADS']} must be 64, 128 or 256 (with 512 ptxas caps a thread at 128 registers and the "
                "larger tiles spill)")
        require(1 <= p["U"] <= 4, "kernel.U", f"U={p['U']} steps in flight per thread must be 1..4")
        require(p["U"] * (p["OM"] + p["ON"]) <= MAX_VECTORS, "kernel.U",
                f"U*(OM+ON) = {p['U']}*({p['OM']}+{p['ON']}) = {p['U'] * (p['OM'] + p['ON'])} 16-byte vectors in "
                f"registers per thread: at most {MAX_VECTORS}; lower U")
        require(1 <= p["SPLITS"] <= MAX_SPLITS, "kernel.SPLITS", f"SPLITS={p['SPLITS']} must be 1..{MAX_SPLITS}")
        tm, tn = tiles(problem.shape, p)
        require(tm * tn <= MAX_TILES, "shape",
                f"{problem.M}x{problem.N} outputs need {tm * tn} tiles of OM x ON = {p['OM']}x{p['ON']} (grid.y holds at "
                f"most {MAX_TILES}); this kernel is for tiny outputs: raise OM/ON or use another kernel")

    def check(self, shape: Shape, params, device: DeviceFacts) -> None:
        self.check_problem(Problem(shape), params, device)

    def instance(self, problem: Problem, params) -> str:
        """``splitk_dot<T, OM, ON, THREADS, U, BCOL>``: T the storage type of A and B (:data:`ELEMENT`),
        BCOL 1 for a column-major B."""
        p = params
        return (f"splitk_dot<{ELEMENT[problem.precision]}, {p['OM']}, {p['ON']}, {p['THREADS']}, {p['U']}, "
                f"{int(problem.layout_b == 'col')}>")

    def entry(self, params) -> str:
        """The fp32, row-major-B instance (the v1 form)."""
        return self.instance(Problem(Shape(1, 1, 1)), params)

    def geometry(self, problem: Problem, params, device: DeviceFacts) -> Launch:
        """Grid (SPLITS, output tiles, 1) of THREADS-thread blocks; static shared memory only
        (THREADS/32 x OM*ON floats for the block sums)."""
        tm, tn = tiles(problem.shape, params)
        return Launch(grid=(params["SPLITS"], tm * tn, 1), block=(params["THREADS"], 1, 1))

    def launch(self, shape: Shape, params, device: DeviceFacts) -> Launch:
        return self.geometry(Problem(shape), params, device)

    def arguments(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """``(A, B, C, tickets, partials, M, N, K)``; tickets and partials point into the workspace."""
        offset, _ = layout(problem.shape, params)
        return (Matrix("A"), Matrix("B"), Matrix("C"), Workspace(0), Workspace(offset), Dim("M"), Dim("N"), Dim("K"))

    def workspace_bytes(self, problem: Problem, params, device: DeviceFacts) -> int:
        """Tickets plus partials (:func:`layout`): 4 x tiles + padding + 4 x tiles x SPLITS x OM x ON bytes."""
        return layout(problem.shape, params)[1]

    def plan(self, problem: Problem, params, device: DeviceFacts) -> tuple:
        """Zero the workspace (tickets) inside every launch, then the kernel."""
        return (Memset("workspace"), Main())

    def candidates(self, problem: Problem, device: DeviceFacts) -> list[dict]:
        """A few parameter sets sized to the problem, none for more than :data:`OFFER_MAX_OUTPUTS`
        outputs (M*N; not this kernel's region). The tile: ON = N when N <= 8 (a row-major B is then
        read in 16-byte vectors), else 8; OM = min(M, 8, 32 // ON). SPLITS = enough K ranges for
        ``bps`` blocks per SM over all tiles (``cdiv(bps * SMs, tiles)``), but no more than leave each
        range one 16-byte vector step per lane of a warp (``cdiv(K, 32 V)``). In order: 256 threads
        at 1 block per SM, then 2 per SM, 128 threads at 2 and 4 per SM, 256 at 4; U = 2 where the
        tile's vectors allow it (else 1), and then the first set again with U = 1."""
        if problem.M * problem.N > OFFER_MAX_OUTPUTS:
            return []
        on = problem.N if problem.N <= MAX_SIDE else MAX_SIDE
        om = min(problem.M, MAX_SIDE, MAX_OUT // on)
        u = 2 if 2 * (om + on) <= MAX_VECTORS else 1
        count = cdiv(problem.M, om) * cdiv(problem.N, on)
        most = cdiv(problem.K, 32 * vector(problem.precision))

        def sized(threads: int, per_sm: int, steps: int = u) -> dict:
            splits = max(1, min(cdiv(per_sm * device.sm_count, count), most, MAX_SPLITS))
            return {"OM": om, "ON": on, "THREADS": threads, "U": steps, "SPLITS": splits}

        out = [sized(256, 1), sized(256, 2), sized(128, 2), sized(128, 4), sized(256, 4)] + ([sized(256, 1, 1)] if u == 2 else [])
        return [dict(t) for t in dict.fromkeys(tuple(p.items()) for p in out)]

    def preferences(self, problem: Problem, device: DeviceFacts, regime: str) -> list:
        """kernel=auto's rules: first in ``tiny_output`` (every precision it declares; 2x2x100000: K split
        over the whole GPU), each of :meth:`candidates` at that rank in order (the first its check
        accepts is taken)."""
        if regime != "tiny_output":
            return []
        return [Preference(RANK_FIRST, p, "K split over the whole GPU") for p in self.candidates(problem, device)]

    def ownership(self, shape: Shape, params, v: int = 4):
        """Replays the kernel's index arithmetic (``v`` elements per vector: 4 for float32 storage, 8
        for 2-byte). Stores: C elements written by the last block of each tile (thread i < OM*ON
        stores row m0 + i // ON, column n0 + i % ON, masked to M x N). Loads: ``"K"``, how often each
        k of [0, K) is read by one tile's blocks (split z's range, thread i's steps i + r*THREADS*U +
        u*THREADS, element e < the step's valid count): every k exactly once."""
        p = params
        tm, tn = tiles(shape, p)
        t = np.arange(tm * tn)[:, None]
        i = np.arange(p["OM"] * p["ON"])[None, :]
        rows, cols = (t // tn) * p["OM"] + i // p["ON"], (t % tn) * p["ON"] + i % p["ON"]
        stores = count_hits((shape.M, shape.N), rows, cols, (rows < shape.M) & (cols < shape.N))
        hits = np.zeros(shape.K, dtype=np.int64)
        threads, u_steps = p["THREADS"], p["U"]
        for begin, end in k_ranges(shape.K, p["SPLITS"], v):
            length = end - begin
            steps = cdiv(length, v)
            rounds = cdiv(steps, threads * u_steps)
            s0 = np.arange(threads)[:, None, None] + threads * u_steps * np.arange(rounds)[None, :, None]
            s = s0 + threads * np.arange(u_steps)[None, None, :]  # the loop runs while s0 < steps
            valid = np.where(s < length // v, v, np.where(s < steps, length - s * v, 0)) * (s0 < steps)
            e = np.arange(v)
            k = begin + s[..., None] * v + e
            np.add.at(hits, k[e < valid[..., None]], 1)
        return stores, {"K": hits[None, :]}


#: the declared tuning space (issue 41): tile sides, threads, steps in flight and split counts, with
#: the register rules as restrictions (:meth:`SplitKDotKernel.candidates` sizes SPLITS to the problem)
SPACE = Space(
    params={"OM": Range(1, MAX_SIDE), "ON": Range(1, MAX_SIDE), "THREADS": Choice(THREADS_VALUES), "U": Range(1, 4),
            "SPLITS": Choice((132, 264, 528, 66, 33, 16, 8, 4, 2, 1))},
    restrictions=(
        Restriction("accumulators", lambda p: p["OM"] * p["ON"] <= MAX_OUT,
                    f"OM*ON accumulators per thread: at most {MAX_OUT}", over=("OM", "ON")),
        Restriction("vectors", lambda p: p["U"] * (p["OM"] + p["ON"]) <= MAX_VECTORS,
                    f"U*(OM+ON) 16-byte vectors in registers per thread: at most {MAX_VECTORS}", over=("OM", "ON", "U")),
    ))


@hookimpl
def gemmlab_kernels():
    return [SplitKDotKernel(name="splitk_dot", source="splitk_dot.cu",
                            defaults={"OM": 2, "ON": 2, "THREADS": 256, "U": 2, "SPLITS": 132},
                            description="tiny outputs, huge K: OM x ON outputs per block, K split over SPLITS blocks "
                                        "(16-byte loads, shuffle reduction), the last block by an atomic ticket adds "
                                        "the partials in a fixed order; one launch",
                            precisions=("fp32", "tf32", "bf16", "fp16"), layouts=(("row", "row"), ("row", "col")),
                            sass_classes=("FFMA", "LDG.128"), tf32_rounding="none", space=SPACE)]
