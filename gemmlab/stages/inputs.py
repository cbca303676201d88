"""Stage 2: the experiment's inputs, drawn on the host from a recorded seed.

float32 A (M x K) and B (K x N), row-major, from ``numpy.random.default_rng(seed)``. The same
seed gives the same matrices on every machine (numpy's PCG64 stream). Never zeros (the rule of
seed 000, the real-device naive vs register-tiled GEMM lab gemmlab grew from). For a
:class:`~gemmlab.contract.hookspecs.Problem` they are then rounded once to the precision's storage type
(bf16 through ml_dtypes, fp16 through numpy) and stored in the problem's layout
(:func:`make_problem_inputs`); the reference multiplies exactly the rounded values.

``precision=fp8`` (issue 42): each group of A and B (the whole operand, a row of A / column of B,
or a 1 x 128 group of A along K / 128 x 128 block of B: ``Problem.scaling``) gets the float32
scale amax / 448 (E4M3) or amax / 57344 (E5M2), the recipe of production FP8 training and
serving; A / scale is quantised once to the format with ml_dtypes (round to nearest even) and
the reference multiplies the dequantised values q * scale (exact in float64). An element that
quantises to zero is stored as the format's smallest subnormal of its sign (never a zero input).
The quantisation error of the inputs is recorded apart from the kernel's error
(:attr:`ProblemInputs.quantisation`).
"""

from __future__ import annotations

import functools
import math
import os
import queue
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from gemmlab.contract.hookspecs import AB_DTYPES, FP8_FORMATS, FP8_MAX, SCALE_BLOCK, Problem, Shape
from gemmlab.stages import hostpass

INT_RANGE = 4
MAX_EXACT_K = 2**19  # 16 * K < 2^24 keeps every partial sum exact in float32
FAST_CHUNKS = 16  # row blocks of a ``fast`` draw, each its own child seed (the values never depend on the cores)
FAST_THREADED_MIN = 1 << 20  # elements from which a ``fast`` draw fills its blocks in threads
#: elements from which a seeded draw (:func:`_draw_rows`) converts its row blocks in threads while the
#: next block is drawn (below: one draw and one cast per matrix)
DRAW_PIPELINED_MIN = 1 << 21
#: elements of one row block of a pipelined draw (whole rows; at least one row)
DRAW_BLOCK = 1 << 18


#: where a point's inputs may be drawn and first verified (:attr:`InputOptions.draw`)
DRAW_WHERE = ("host", "auto", "device")


@dataclass(frozen=True)
class InputOptions:
    """Inputs A, B drawn as float32 from ``distribution`` (normal | uniform | integers) with a
    numpy ``default_rng(seed)``; ``draw`` (:data:`DRAW_WHERE`): where they are drawn and the first
    verification runs. ``host`` (default): here, the float64 reference here
    (:func:`gemmlab.stages.verify.check`); ``device``: on the GPU by the device check's generator from
    ``seed`` (:meth:`gemmlab.stages.device_check.DeviceCheck.draw`: other values of the same
    distribution), C checked there by the same rule, method and samples, the inputs-unchanged net on
    device snapshots: no matrix crosses PCIe but C for the repeat-stability net, wherever the device
    check handles the problem (fp32/tf32/bf16/fp16, a plain problem), else here; ``auto``: on the
    device above :data:`gemmlab.stages.device_check.DEVICE_MIN_MNK`. The record's ``inputs.drawn``
    says where."""

    seed: int = 0
    distribution: str = "normal"
    draw: str = "host"


def make_inputs(shape: Shape, options: InputOptions, fast: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(A, B)``: float32 arrays of shapes (M, K) and (K, N), C-contiguous.

    ``normal``: N(0, 1) samples drawn in float64 and rounded to float32 (seed 000's recipe).
    ``uniform``: U[-1, 1). ``integers``: uniform integers in [-4, -1] ∪ [1, 4] (never zero); with K <= 2^19 every product
    and partial sum is an integer below 2^24, so float32 GEMM is exact and verification can
    demand equality.

    ``fast``: draw normal and uniform values in float32 directly (numpy's float32 ziggurat and
    ``random(dtype=float32)``: the same distributions, about 4x faster, other values for the same
    seed; in threads, :func:`_draw_fast`), for the fresh inputs of the after-timing verification.

    Raises:
        ValueError: an unknown distribution (config validation rejects it earlier).
    """
    sizes = ((shape.M, shape.K), (shape.K, shape.N))
    if fast and options.distribution in ("normal", "uniform"):
        return tuple(_draw_fast(s, options.seed, i, options.distribution) for i, s in enumerate(sizes))
    rng = np.random.default_rng(options.seed)
    if options.distribution in ("normal", "uniform"):
        a, b = (np.empty(s, dtype=np.float32) for s in sizes)

        def store(i: int, r0: int, r1: int, values: np.ndarray) -> None:
            (a, b)[i][r0:r1] = values  # float64 -> float32, as astype rounds

        _draw_rows(rng, sizes, options.distribution, store)
    elif options.distribution == "integers":
        # nonzero magnitudes 1..4 with random signs: never an all-zero matrix, even at 1x1x1
        a, b = ((rng.integers(1, INT_RANGE + 1, s) * rng.choice([-1, 1], s)).astype(np.float32) for s in sizes)
    else:
        raise ValueError(f"inputs.distribution: unknown {options.distribution!r}")
    return a, b


def _draw_fast(size: tuple[int, int], seed: int, which: int, distribution: str) -> np.ndarray:
    """float32 N(0, 1) or U[-1, 1) draws of ``size``, in :data:`FAST_CHUNKS` row blocks, each from
    its own child of ``SeedSequence((seed, which))`` and filled in place by a thread (numpy's
    "Multithreaded generation" recipe: the fill releases the GIL); the values depend on the seed
    alone, not on the machine's cores."""
    out = np.empty(size, dtype=np.float32)
    flat = out.reshape(-1)
    bounds = np.linspace(0, flat.size, FAST_CHUNKS + 1).astype(np.int64)
    children = np.random.SeedSequence((seed, which)).spawn(FAST_CHUNKS)

    def fill(i: int) -> None:
        rng, part = np.random.default_rng(children[i]), flat[bounds[i]:bounds[i + 1]]
        if distribution == "normal":
            rng.standard_normal(dtype=np.float32, out=part)
        else:
            rng.random(dtype=np.float32, out=part)
            part *= 2
            part -= 1

    if flat.size < FAST_THREADED_MIN:
        for i in range(FAST_CHUNKS):
            fill(i)
    else:
        with ThreadPoolExecutor(max_workers=min(FAST_CHUNKS, os.cpu_count() or 1)) as pool:
            list(pool.map(fill, range(FAST_CHUNKS)))
    return out


def _draw_rows(rng: np.random.Generator, sizes, distribution: str, consume) -> None:
    """Draw each matrix of ``sizes`` in turn from ``rng``, exactly the values of
    ``rng.standard_normal(size)`` (``normal``) or ``rng.uniform(-1.0, 1.0, size)`` (``uniform``) one
    matrix after the other (both fill element by element from the stream and keep no state between
    calls, so blocks of whole rows drawn in order give the same float64 values), and hand each block
    to ``consume(matrix index, first row, end row, float64 values of those rows)``.

    From :data:`DRAW_PIPELINED_MIN` elements the blocks (:data:`DRAW_BLOCK` elements of whole rows)
    are consumed in a pool of threads while this thread draws the next (issue 41: the draw is one
    stream, drawn on one core; the casts, roundings and transposes a point's inputs need then run
    beside it instead of after it, each in one more pass over the whole matrix). ``consume`` must
    write only its block's part of its outputs and must not keep ``values`` (its buffer is reused).
    An exception in ``consume`` is raised here once the drawing stops."""
    total = sum(int(np.prod(size)) for size in sizes)
    if total < DRAW_PIPELINED_MIN or hostpass.threads() < 2:
        for i, size in enumerate(sizes):
            values = rng.standard_normal(size) if distribution == "normal" else rng.uniform(-1.0, 1.0, size)
            consume(i, 0, size[0], values)
        return
    workers = hostpass.threads() - 1  # this thread draws
    free: queue.SimpleQueue = queue.SimpleQueue()
    for _ in range(workers + 2):
        free.put(np.empty(DRAW_BLOCK, dtype=np.float64))
    failed: list = []

    def job(i: int, r0: int, r1: int, buf: np.ndarray, values: np.ndarray) -> None:
        try:
            if not failed:
                consume(i, r0, r1, values)
        except BaseException as exc:  # noqa: BLE001 (raised in the caller's thread below)
            failed.append(exc)
        finally:
            free.put(buf)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gemmlab-draw") as pool:
        for i, (rows, cols) in enumerate(sizes):
            step = max(1, DRAW_BLOCK // max(1, cols))
            for r0 in range(0, rows, step):
                r1 = min(rows, r0 + step)
                buf = free.get()
                if failed:
                    free.put(buf)
                    break
                if distribution == "normal":
                    values = (buf if (r1 - r0) * cols <= buf.size else np.empty((r1 - r0) * cols))[:(r1 - r0) * cols]
                    values = values.reshape(r1 - r0, cols)
                    rng.standard_normal(out=values)
                else:
                    values = rng.uniform(-1.0, 1.0, (r1 - r0, cols))
                pool.submit(job, i, r0, r1, buf, values)
    if failed:
        raise failed[0]


def storage_dtype(precision: str) -> np.dtype:
    """numpy dtype of A and B for ``precision``: float32 (fp32, tf32), ml_dtypes.bfloat16 (bf16),
    float16 (fp16).

    Raises:
        UnavailableError: bf16 without the ml_dtypes package.
    """
    name = AB_DTYPES[precision]
    if name == "bfloat16" or name.startswith("float8"):
        try:
            import ml_dtypes
        except ImportError:
            from gemmlab.errors import UnavailableError
            raise UnavailableError(
                f"precision={precision} needs ml_dtypes for host-side {name}: pip install ml_dtypes") from None
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def c_storage_dtype(problem: Problem) -> np.dtype:
    """numpy dtype of C (and C0): float32, ml_dtypes.bfloat16 (``out=bf16``) or float16 (``out=fp16``)."""
    if problem.c_dtype == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(problem.c_dtype)


def fp8_dtype(fmt: str) -> np.dtype:
    """ml_dtypes' numpy dtype of the FP8 format ``fmt`` (``e4m3``: float8_e4m3fn, ``e5m2``: float8_e5m2).

    Raises:
        KeyError: another format (config validation refuses it earlier).
    """
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, FP8_FORMATS[fmt]))


@dataclass(frozen=True)
class ProblemInputs:
    """The inputs of one problem.

    Attributes:
        a, b: logical A (M x K) and B (K x N) as float32 arrays holding exactly the values the
            device gets (already rounded to the storage type): what the float64 reference multiplies.
        a_stored, b_stored: the device images: storage dtype, C-contiguous, in the problem's
            layout (a column-major A is stored as its transpose, K x M).
        a_scale, b_scale: fp8 only: the float32 scale buffers as stored (shapes and layouts:
            ``Problem.stored_shape("A_scale")``, see :class:`~gemmlab.contract.hookspecs.Problem`); else None.
            For fp8, ``a`` and ``b`` are float64 (the dequantised values q * scale, exact).
        quantisation: fp8 only: the recipe and the inputs' quantisation error
            (:func:`quantise_problem`), for the record; else None.
        c0, bias, c0_stored, bias_stored: an extended problem's (issue 43, :func:`make_epilogue_inputs`)
            C0 and bias vector, logical (float32 values of the stored ones) and as stored; else None.
            For such a problem ``a`` and ``b`` are (copies, M, K) and (copies, K, N): one matrix per
            batch, or one for a shared operand (batch stride 0).
    """

    a: np.ndarray
    b: np.ndarray
    a_stored: np.ndarray
    b_stored: np.ndarray
    a_scale: np.ndarray | None = None
    b_scale: np.ndarray | None = None
    quantisation: dict | None = None
    c0: np.ndarray | None = None
    bias: np.ndarray | None = None
    c0_stored: np.ndarray | None = None
    bias_stored: np.ndarray | None = None


def make_problem_inputs(problem: Problem, options: InputOptions, fast: bool = False) -> ProblemInputs:
    """Draw A and B as :func:`make_inputs` does, round them once to the precision's storage type
    (round-to-nearest-even, ml_dtypes/numpy casts) and lay them out as the problem says
    (``fast``: :func:`make_inputs`' float32 draws).

    fp32/tf32 store float32 unchanged (the TF32 tensor core rounds its inputs itself; verification
    allows for it), so ``precision=fp32`` row/row gives exactly :func:`make_inputs`' arrays. A grouped
    problem's inputs: :func:`make_grouped_inputs`.
    """
    if problem.grouped is not None:  # issue 44: every group drawn alone (make_grouped_inputs)
        return make_grouped_inputs(problem, options, fast=fast)
    if problem.extended:  # issue 43: batches, leading dimensions, C0 and bias (make_epilogue_inputs)
        return make_epilogue_inputs(problem, options, fast=fast)
    if not fast and options.distribution in ("normal", "uniform"):
        if problem.precision != "fp8":
            return _drawn_stored(problem, options)
        a32, b32 = seeded_draw(problem.M, problem.N, problem.K, options.seed, options.distribution)
        return quantise_problem(problem, a32, b32)
    a32, b32 = make_inputs(problem.shape, options, fast=fast)
    if problem.precision == "fp8":
        return quantise_problem(problem, a32, b32, stats=not fast)
    dtype = storage_dtype(problem.precision)
    # no copies where the type is already right (fp32/tf32: the drawn arrays are stored and logical
    # alike; issue 41: two copies of a ~1 GB decode B each cost a pass); nothing writes these arrays
    a_st, b_st = a32.astype(dtype, copy=False), b32.astype(dtype, copy=False)
    a, b = a_st.astype(np.float32, copy=False), b_st.astype(np.float32, copy=False)
    a_stored = np.ascontiguousarray(a_st if problem.layout_a == "row" else a_st.T)
    b_stored = np.ascontiguousarray(b_st if problem.layout_b == "row" else b_st.T)
    return ProblemInputs(a=a, b=b, a_stored=a_stored, b_stored=b_stored)


#: elements of A and B together up to which :func:`seeded_draw` and :func:`rounded_draw` keep a draw
#: for the next point (2 GB of float32; a larger one is drawn again: it would be held between points
#: beside the next one's)
KEEP_MAX_ELEMENTS = 1 << 29


def _keep_last(draw):
    """``draw(M, N, K, ...)`` with its last result kept for the next call with the same arguments
    (``functools.lru_cache(maxsize=1)``) while A and B hold at most :data:`KEEP_MAX_ELEMENTS`
    elements together; a larger draw is made again (held between points it would sit beside the
    next one's). ``cache_clear()`` forgets the kept one."""
    kept = functools.lru_cache(maxsize=1)(draw)

    @functools.wraps(draw)
    def call(M: int, N: int, K: int, *rest):
        return (kept if M * K + K * N <= KEEP_MAX_ELEMENTS else draw)(M, N, K, *rest)

    call.cache_clear = kept.cache_clear
    return call


@_keep_last
def seeded_draw(M: int, N: int, K: int, seed: int, distribution: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`make_inputs`' A (M x K) and B (K x N) for ``normal`` or ``uniform`` inputs, float32,
    C-contiguous and read-only (a write raises ``ValueError``), kept for the next call with the same
    arguments (the last one only, up to :data:`KEEP_MAX_ELEMENTS`: :func:`_keep_last`;
    :func:`clear_cache` forgets it).

    A point's inputs depend on the shape, seed and distribution alone until they are rounded to the
    precision's type and laid out (:func:`make_problem_inputs`); the held-out benchmark runs the six
    precisions and layouts of a shape one after the other in one worker process, and
    ``experiment=fp8`` the three scaling modes of a shape (issue 41, 42): the draw (one stream, one
    core: ~5 ns an element) is made once for them. Read-only, so no point can change what the
    next one is given."""
    sizes = ((M, K), (K, N))
    a, b = (np.empty(size, dtype=np.float32) for size in sizes)

    def store(i: int, r0: int, r1: int, values: np.ndarray) -> None:
        (a, b)[i][r0:r1] = values  # float64 -> float32, as astype rounds

    _draw_rows(np.random.default_rng(seed), sizes, distribution, store)
    a.flags.writeable = False
    b.flags.writeable = False
    return a, b


def clear_cache() -> None:
    """Forget the draws :func:`seeded_draw` and :func:`rounded_draw` keep (for tests and long-lived
    processes; see :func:`gemmlab.clear_caches`)."""
    seeded_draw.cache_clear()
    rounded_draw.cache_clear()


def _row_blocks(rows: int, cols: int) -> list[tuple[int, int]]:
    """``(first, end)`` row ranges of about :data:`DRAW_BLOCK` elements (whole rows, at least one)."""
    step = max(1, DRAW_BLOCK // max(1, cols))
    return [(r, min(rows, r + step)) for r in range(0, rows, step)]


def _in_row_blocks(arrays, convert) -> None:
    """``convert((i, first row, end row))`` over the row blocks (:func:`_row_blocks`) of each of
    ``arrays``, in threads from :data:`DRAW_PIPELINED_MIN` elements."""
    jobs = [(i, r0, r1) for i, x in enumerate(arrays) for r0, r1 in _row_blocks(*x.shape)]
    if sum(x.size for x in arrays) < DRAW_PIPELINED_MIN:
        for job in jobs:
            convert(job)
    else:
        hostpass.each_of(jobs, convert)


@_keep_last
def rounded_draw(M: int, N: int, K: int, seed: int, distribution: str,
                 precision: str) -> tuple[np.ndarray, np.ndarray]:
    """The logical A and B of a plain problem of ``precision`` (not fp8) with normal or uniform
    inputs: :func:`seeded_draw`'s float32 values rounded once to the storage type, as float32
    (fp32/tf32: :func:`seeded_draw`'s arrays themselves), read-only, kept for the next call with the
    same arguments (the last one only, up to :data:`KEEP_MAX_ELEMENTS`: :func:`_keep_last`): a shape's two layouts of a precision get the same arrays,
    so the float64 products of their verification are made once (:func:`gemmlab.stages.verify.products_for`)."""
    drawn = seeded_draw(M, N, K, seed, distribution)
    dtype = storage_dtype(precision)
    if dtype == np.dtype(np.float32):
        return drawn
    out = [np.empty(x.shape, dtype=np.float32) for x in drawn]

    def convert(job: tuple[int, int, int]) -> None:
        i, r0, r1 = job
        out[i][r0:r1] = drawn[i][r0:r1].astype(dtype)  # the rounded values, exactly, as float32

    _in_row_blocks(drawn, convert)
    for x in out:
        x.flags.writeable = False
    return out[0], out[1]


def _drawn_stored(problem: Problem, options: InputOptions) -> ProblemInputs:
    """:func:`make_problem_inputs` of a plain problem (not fp8) with normal or uniform inputs: the
    same arrays, the logical ones :func:`rounded_draw`'s (read-only), the stored ones their values
    in the storage type (exact: they are its values) in their layout (transposed for a
    column-major operand), written in blocks of rows in threads (:func:`gemmlab.stages.hostpass.each_of`).
    Where the storage type is float32 a row-major operand's stored array is its logical one."""
    dtype = storage_dtype(problem.precision)
    same = dtype == np.dtype(np.float32)
    logical = rounded_draw(problem.M, problem.N, problem.K, options.seed, options.distribution, problem.precision)
    layouts = (problem.layout_a, problem.layout_b)
    stored = [lg if same and lay == "row" else np.empty(lg.shape if lay == "row" else lg.shape[::-1], dtype=dtype)
              for lg, lay in zip(logical, layouts)]

    def convert(job: tuple[int, int, int]) -> None:
        i, r0, r1 = job
        if stored[i] is logical[i]:
            return
        part = logical[i][r0:r1] if same else logical[i][r0:r1].astype(dtype)
        if layouts[i] == "row":
            stored[i][r0:r1] = part
        else:
            stored[i][:, r0:r1] = part.T

    _in_row_blocks(logical, convert)
    return ProblemInputs(a=logical[0], b=logical[1], a_stored=stored[0], b_stored=stored[1])


def logical(stored: np.ndarray, layout: str) -> np.ndarray:
    """The logical matrix of a stored image (its transpose for ``col``), as float32."""
    arr = stored.astype(np.float32)
    return arr if layout == "row" else arr.T


# --- FP8 quantisation (issue 42) -----------------------------------------------------------------

def _group_amax(x: np.ndarray, scaling: str, operand: str) -> np.ndarray:
    """The amax of each scaling group of the logical operand ``x`` (A: M x K, B: K x N), shaped to
    broadcast against :func:`_grouped`'s view: tensor (1, 1); row: A (M, 1), B (1, N); block: A
    (M, L, 1), B (L, 1, NB, 1)."""
    a = np.abs(_grouped(x, scaling, operand))
    if scaling == "tensor":
        return a.max(keepdims=True).reshape(1, 1)
    if scaling == "row":
        return a.max(axis=1 if operand == "A" else 0, keepdims=True)
    return a.max(axis=2, keepdims=True) if operand == "A" else a.max(axis=(1, 3), keepdims=True)


def _grouped(x: np.ndarray, scaling: str, operand: str) -> np.ndarray:
    """``x`` as a view (block: a zero-padded copy) whose axes separate the scaling groups: tensor
    and row as it is; block: A (M, L, 128), B (L, 128, NB, 128) with L = ceil(K / 128)."""
    if scaling != "block":
        return x
    if operand == "A":
        M, K = x.shape
        L = -(-K // SCALE_BLOCK)
        if K % SCALE_BLOCK:
            x = np.pad(x, ((0, 0), (0, L * SCALE_BLOCK - K)))
        return x.reshape(M, L, SCALE_BLOCK)
    K, N = x.shape
    L, NB = -(-K // SCALE_BLOCK), -(-N // SCALE_BLOCK)
    if K % SCALE_BLOCK or N % SCALE_BLOCK:
        x = np.pad(x, ((0, L * SCALE_BLOCK - K), (0, NB * SCALE_BLOCK - N)))
    return x.reshape(L, SCALE_BLOCK, NB, SCALE_BLOCK)


def _ungrouped(g: np.ndarray, shape: tuple[int, int], scaling: str, operand: str) -> np.ndarray:
    """The inverse of :func:`_grouped`: the (rows, cols) = ``shape`` array, padding dropped."""
    if scaling != "block":
        return g
    rows, cols = shape
    if operand == "A":
        return g.reshape(rows, -1)[:, :cols]
    L, _, NB, _ = g.shape
    return g.reshape(L * SCALE_BLOCK, NB * SCALE_BLOCK)[:rows, :cols]


def _quant_blocks(rows: int, cols: int) -> list[tuple[int, int]]:
    """Row ranges of an operand for :func:`quantise`'s threaded passes: multiples of
    :data:`SCALE_BLOCK` rows (a B block's 128 rows stay in one range; any range suits A's groups,
    which lie within a row), about :data:`DRAW_BLOCK` elements each."""
    step = SCALE_BLOCK * max(1, DRAW_BLOCK // max(1, SCALE_BLOCK * cols))
    return [(r, min(rows, r + step)) for r in range(0, rows, step)] or [(0, 0)]


def _block_scales(scales: np.ndarray, scaling: str, operand: str, r0: int, r1: int) -> np.ndarray:
    """The part of ``scales`` (as :func:`_group_amax` shapes them) that rows ``r0:r1`` of the
    operand use (``r0`` a multiple of :data:`SCALE_BLOCK`)."""
    if scaling == "tensor" or (scaling == "row" and operand == "B"):
        return scales
    if operand == "A":  # row (M, 1), block (M, L, 1)
        return scales[r0:r1]
    return scales[r0 // SCALE_BLOCK:-(-r1 // SCALE_BLOCK)]  # block B (L, 1, NB, 1)


def _combine_amax(parts: list, scaling: str, operand: str) -> np.ndarray:
    """:func:`_group_amax` of a whole operand from that of its row ranges (:func:`_quant_blocks`)."""
    if scaling == "tensor":
        return np.max(np.stack([p.reshape(()) for p in parts])).reshape(1, 1)
    if scaling == "row" and operand == "B":
        return np.maximum.reduce(parts)
    return np.concatenate(parts, axis=0)


@functools.lru_cache(maxsize=None)
def _fp8_values(fmt: str) -> np.ndarray:
    """float64 value of each of the 256 bit patterns of FP8 ``fmt`` (ml_dtypes' cast of each): a
    lookup by bits gives ``q.astype(np.float64)`` exactly."""
    out = np.arange(256, dtype=np.uint8).view(fp8_dtype(fmt)).astype(np.float64)
    out.flags.writeable = False
    return out


def quantise(x: np.ndarray, fmt: str, scaling: str, operand: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quantise the logical float32 operand ``x`` (A: M x K, or B: K x N) to FP8 ``fmt``.

    Each scaling group (``scaling``: tensor | row | block, as :class:`~gemmlab.contract.hookspecs.Problem`
    says for ``operand`` "A" or "B") gets the float32 scale s = amax / 448 (E4M3) or amax / 57344
    (E5M2) (1.0 for an all-zero group); q = fp8(x / s), x / s in float32, rounded to nearest even by
    ml_dtypes' cast (|x / s| <= the format's max, so nothing saturates); an element that rounds to
    zero is stored as the smallest subnormal of its sign (never a zero input: seed 000's rule).

    The passes run over ranges of rows in threads (:func:`_quant_blocks`; issue 42: a 16384 x 7168
    B took seconds on one core): the group maxima of each range, combined (a max is exact), then
    q and the dequantised values of each range, every element by the same operations as in one
    pass over the whole operand (q * s with q's float64 value looked up by its bits).

    Returns:
        ``(q, deq, scales)``: q the FP8 array (logical shape of ``x``, ml_dtypes dtype); deq the
        float64 dequantised values q * s (exact: a 4- or 3-bit mantissa times float32's 24 bits);
        scales the float32 group scales as :func:`_group_amax` shapes them.
    """
    dtype = fp8_dtype(fmt)
    x = np.asarray(x, dtype=np.float32)
    blocks = _quant_blocks(*x.shape)
    amax = _combine_amax(hostpass.each_of(blocks, lambda r: _group_amax(x[r[0]:r[1]], scaling, operand)),
                         scaling, operand).astype(np.float32)
    scales = np.where(amax > 0, amax / np.float32(FP8_MAX[fmt]), np.float32(1.0)).astype(np.float32)
    scales64 = scales.astype(np.float64)
    values = _fp8_values(fmt)
    q = np.empty(x.shape, dtype=dtype)
    deq = np.empty(x.shape, dtype=np.float64)

    def part(r: tuple[int, int]) -> None:
        r0, r1 = r
        g = _grouped(x[r0:r1], scaling, operand)
        qg = (g / _block_scales(scales, scaling, operand, r0, r1)).astype(dtype)
        bits = qg.view(np.uint8)
        zero = (bits & 0x7F) == 0  # +0 or -0: the smallest subnormal (bit pattern 1) of the draw's sign
        if zero.any():
            bits[zero] = np.where(np.signbit(g[zero]), np.uint8(0x81), np.uint8(0x01))
        shape = (r1 - r0, x.shape[1])
        q[r0:r1] = _ungrouped(qg, shape, scaling, operand)
        deq[r0:r1] = _ungrouped(values[bits] * _block_scales(scales64, scaling, operand, r0, r1), shape, scaling,
                                operand)

    hostpass.each_of(blocks, part)
    return q, deq, scales


def _laid_out(q: np.ndarray, layout: str) -> np.ndarray:
    """``q`` as stored: itself (row-major, C-contiguous) or its transpose, C-contiguous, copied in
    column ranges in threads (``col``)."""
    if layout == "row":
        return np.ascontiguousarray(q)
    out = np.empty(q.shape[::-1], dtype=q.dtype)

    def part(c0: int) -> None:
        out[c0:c0 + step] = q[:, c0:c0 + step].T

    step = max(1, DRAW_BLOCK // max(1, q.shape[0]))
    hostpass.each_of(range(0, q.shape[1], step), part)
    return out


def scale_buffer(scales: np.ndarray, problem: Problem, operand: str) -> np.ndarray:
    """The device image of ``operand``'s group scales (as :func:`quantise` returns them): float32,
    C-contiguous, of shape ``problem.stored_shape(operand + "_scale")`` in the layouts the plugin
    contract fixes (:class:`~gemmlab.contract.hookspecs.Problem`): block A (L, M) M-major, block B
    (ceil(N/128), L4) K-major with 1.0 in the pad columns."""
    rows, cols = problem.stored_shape(f"{operand}_scale")
    if problem.scaling == "tensor":
        out = scales.reshape(1, 1)
    elif problem.scaling == "row":
        out = scales.reshape(1, -1)
    elif operand == "A":
        out = scales.reshape(problem.M, -1).T  # (M, L, 1) -> (L, M)
    else:
        L, NB = scales.shape[0], scales.shape[2]
        out = np.ones((rows, cols), dtype=np.float32)
        out[:NB, :L] = scales.reshape(L, NB).T
    out = np.ascontiguousarray(out, dtype=np.float32)
    assert out.shape == (rows, cols), (out.shape, rows, cols)
    return out


#: rows of A whose products the record's product-level quantisation error is measured on
QUANT_ERROR_ROWS = 8


def quantise_problem(problem: Problem, a32: np.ndarray, b32: np.ndarray, stats: bool = True) -> ProblemInputs:
    """FP8 inputs of ``problem`` from the float32 draws ``a32`` (M x K) and ``b32`` (K x N):
    :func:`quantise` each operand in its format and scaling, lay the FP8 values out as the problem
    says and build the scale buffers (:func:`scale_buffer`).

    ``stats``: also measure the quantisation error for the record (``quantisation``): per operand
    the RMS relative error ||deq - x|| / ||x||, the max |deq - x| and that over its group's amax, and for
    the product, over :data:`QUANT_ERROR_ROWS` rows, ||A_deq B_deq - A B|| / ||A B|| (float64):
    the error the inputs carry before any kernel runs, which the kernel's verification never sees
    (its reference multiplies the dequantised values).
    """
    qa, a, sa = quantise(a32, problem.fp8_a, problem.scaling, "A")
    qb, b, sb = quantise(b32, problem.fp8_b, problem.scaling, "B")
    a_stored, b_stored = _laid_out(qa, problem.layout_a), _laid_out(qb, problem.layout_b)
    quant = None
    if stats:
        groups = {"tensor": ("one scale for all of A", "one scale for all of B"),
                  "row": ("one scale per row of A (M)", "one scale per column of B (N)"),
                  "block": (f"one scale per 1 x {SCALE_BLOCK} group of A along K (M x ceil(K/{SCALE_BLOCK}))",
                            f"one scale per {SCALE_BLOCK} x {SCALE_BLOCK} block of B "
                            f"(ceil(K/{SCALE_BLOCK}) x ceil(N/{SCALE_BLOCK}))")}[problem.scaling]
        quant = {"recipe": (f"drawn as float32; scale per group = amax / {FP8_MAX[problem.fp8_a]:g} (A, "
                            f"{problem.fp8_a}) and amax / {FP8_MAX[problem.fp8_b]:g} (B, {problem.fp8_b}), float32; "
                            "q = fp8(x / scale), round to nearest even (ml_dtypes), a zero stored as the smallest "
                            "subnormal of its sign; the reference multiplies q * scale in float64"),
                 "scaling": problem.scaling, "formats": {"A": problem.fp8_a, "B": problem.fp8_b},
                 "groups": {"A": groups[0], "B": groups[1]},
                 "scales": {"A": list(problem.stored_shape("A_scale")), "B": list(problem.stored_shape("B_scale")),
                            "dtype": "float32"},
                 "A": _quant_error(a32, a, sa * np.float32(FP8_MAX[problem.fp8_a]), problem.scaling, "A"),
                 "B": _quant_error(b32, b, sb * np.float32(FP8_MAX[problem.fp8_b]), problem.scaling, "B")}
        rows = np.linspace(0, problem.M - 1, min(QUANT_ERROR_ROWS, problem.M)).astype(np.int64)
        a_rows32, a_rows = a32[rows].astype(np.float64), a[rows]
        step = max(1, DRAW_BLOCK // max(1, problem.K))

        def squares(c0: int) -> tuple[float, float]:  # this column range's sums of squares (no float64 B)
            exact = a_rows32 @ b32[:, c0:c0 + step].astype(np.float64)
            diff = a_rows @ b[:, c0:c0 + step] - exact
            return float(np.vdot(diff, diff)), float(np.vdot(exact, exact))

        sums = np.array(hostpass.each_of(range(0, problem.N, step), squares, one_blas=True)).reshape(-1, 2).sum(axis=0)
        quant["product_rms_relative_error"] = float(math.sqrt(sums[0]) / max(math.sqrt(sums[1]), 1e-300))
        quant["product_rows"] = len(rows)
    return ProblemInputs(a=a, b=b, a_stored=a_stored, b_stored=b_stored, a_scale=scale_buffer(sa, problem, "A"),
                         b_scale=scale_buffer(sb, problem, "B"), quantisation=quant)


def _quant_error(x: np.ndarray, deq: np.ndarray, amax: np.ndarray, scaling: str, operand: str) -> dict:
    """RMS relative error, max absolute error and the max error over its group's amax (``amax``,
    shaped as :func:`_group_amax`) of one quantised operand; sums and maxima over ranges of rows in
    threads (:func:`_quant_blocks`), combined."""
    amax64 = amax.astype(np.float64)

    def part(r: tuple[int, int]) -> tuple[float, float, float, float]:
        r0, r1 = r
        diff = deq[r0:r1] - x[r0:r1]
        x64 = x[r0:r1].astype(np.float64)
        err = _grouped(np.abs(diff), scaling, operand)
        over = float((err / _block_scales(amax64, scaling, operand, r0, r1)).max()) if err.size else 0.0
        return (float(np.vdot(diff, diff)), float(np.vdot(x64, x64)),
                float(np.abs(diff).max()) if diff.size else 0.0, over)

    parts = np.array(hostpass.each_of(_quant_blocks(*x.shape), part)).reshape(-1, 4)
    rel_rms = float(math.sqrt(parts[:, 0].sum()) / max(math.sqrt(parts[:, 1].sum()), 1e-300))
    return {"rms_relative_error": rel_rms, "max_abs_error": float(parts[:, 2].max()),
            "max_error_over_group_amax": float(parts[:, 3].max())}


# --- grouped GEMM (issue 44) ----------------------------------------------------------------------

def child_seed(seed: int, g: int) -> int:
    """The seed of group ``g``'s draws: a 63-bit integer from ``numpy.random.SeedSequence((seed, g))``
    (independent streams per group, the same on every machine)."""
    return int(np.random.SeedSequence((seed, g)).generate_state(1, np.uint64)[0] >> np.uint64(1))


def _nan_array(shape, dtype) -> np.ndarray:
    return np.full(shape, np.nan, dtype=np.float32).astype(dtype)


def make_grouped_inputs(problem: Problem, options: InputOptions, fast: bool = False) -> ProblemInputs:
    """The inputs of a grouped ``problem`` (module docstring): ``a``/``a_stored`` as A is stored
    (:meth:`Grouped.stored_shape`), ``b`` the logical B (contiguous/masked: (G, K, N) float32;
    general: (1, elements) with each B_g K_g x N_g row-major at its offset), ``b_stored`` as B is
    stored; NaN wherever no group lies. fp32/tf32/bf16/fp16 (fp8 is refused by the config).

    Raises:
        ValueError: precision fp8 (grouped FP8 waits for block-scaled kernels, issue 44 item 3).
    """
    grouped = problem.grouped
    if problem.precision == "fp8":
        raise ValueError("grouped inputs: precision=fp8 is not supported")
    dtype = storage_dtype(problem.precision)
    a_stored = _nan_array(grouped.stored_shape("A"), dtype)
    b_stored = _nan_array(grouped.stored_shape("B"), dtype)
    general = grouped.kind == "general"
    if general:
        b_logical = np.full(b_stored.shape, np.nan, dtype=np.float32)
    else:
        b_logical = np.full((grouped.G, grouped.K, grouped.N), np.nan, dtype=np.float32)
        b_view = b_stored.reshape(grouped.G, *((grouped.K, grouped.N) if grouped.layout_b == "row"
                                               else (grouped.N, grouped.K)))
    offsets = grouped.element_offsets if general else None
    for g, (m, n, k) in enumerate(grouped.shapes):
        a32, b32 = make_inputs(Shape(max(m, 1), n, k), InputOptions(seed=child_seed(options.seed, g),
                                                                   distribution=options.distribution), fast=fast)
        a_g, b_g = a32[:m].astype(dtype), b32.astype(dtype)
        b_st = b_g if grouped.layout_b == "row" else b_g.T
        if general:
            oa, ob, _ = offsets[g]
            a_stored[0, oa:oa + m * k] = a_g.reshape(-1)
            b_stored[0, ob:ob + n * k] = b_st.reshape(-1)
            b_logical[0, ob:ob + n * k] = b_g.astype(np.float32).reshape(-1)
        else:
            a_stored[grouped.valid_rows(g)] = a_g
            b_view[g] = b_st
            b_logical[g] = b_g.astype(np.float32)
    return ProblemInputs(a=a_stored.astype(np.float32), b=b_logical, a_stored=np.ascontiguousarray(a_stored),
                         b_stored=np.ascontiguousarray(b_stored))


# --- the whole GEMM contract (issue 43) ----------------------------------------------------------

def _draw(rng: np.random.Generator, size: tuple, distribution: str) -> np.ndarray:
    """float32 values of ``size`` from ``rng`` as :func:`make_inputs` draws each matrix."""
    if distribution == "normal":
        return rng.standard_normal(size).astype(np.float32)
    if distribution == "uniform":
        return rng.uniform(-1.0, 1.0, size).astype(np.float32)
    if distribution == "integers":
        return (rng.integers(1, INT_RANGE + 1, size) * rng.choice([-1, 1], size)).astype(np.float32)
    raise ValueError(f"inputs.distribution: unknown {distribution!r}")


def padded_image(problem: Problem, matrix: str, logical: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The stored buffer of ``matrix`` ("A" | "B" | "C0") of an extended ``problem``: shape
    ``problem.stored_shape(matrix)`` of ``dtype``, every batch's matrix (``logical``: (copies, rows,
    cols) as the problem's layout logically has it: A (M, K), B (K, N), C0 (M, N)) at its place,
    transposed for a column-major operand, and every other element all-ones bits (NaN in every
    float type): the padding between rows and batches (:mod:`gemmlab.contract.epilogue`)."""
    st = problem.storage(matrix)
    image = np.empty(problem.stored_shape(matrix), dtype=dtype)
    image.view(np.uint8)[...] = 0xFF
    layout = {"A": problem.layout_a, "B": problem.layout_b}.get(matrix, "row")
    for i in range(st.copies):
        r0 = i * (st.stride // st.ld)
        image[r0:r0 + st.rows, :st.cols] = logical[i] if layout == "row" else logical[i].T
    return image


def batch_matrix(problem: Problem, matrix: str, image: np.ndarray, b: int) -> np.ndarray:
    """Batch ``b``'s ``matrix`` ("A" | "B" | "C" | "C0") as stored, a view into the buffer ``image``
    (``problem.stored_shape(matrix)``): rows x cols of one batch (batch 0's for a shared operand)."""
    st = problem.storage(matrix)
    r0 = (b if st.copies > 1 else 0) * (st.stride // st.ld)
    return image[r0:r0 + st.rows, :st.cols]


def make_epilogue_inputs(problem: Problem, options: InputOptions, fast: bool = False) -> ProblemInputs:
    """The inputs of an extended ``problem`` (issue 43: epilogue, leading dimensions, batches).

    From ``numpy.random.default_rng(seed)``, in this order, drawn like A and B (:func:`make_inputs`'
    distributions; never zeros): A (copies, M, K), B (copies, K, N) (copies: the batch count, or 1 for
    a shared operand), C0 (batch, M, N) where beta != 0, the bias (N,) where there is one. ``fast``:
    float32 draws in threads (:func:`_draw_fast`, one stream per matrix) for the after-timing check.
    A and B are rounded once to the precision's storage type, C0 to C's type, the bias to its own
    (float32, or the inputs' type); the logical arrays hold exactly the stored values as float32.
    The stored images (:func:`padded_image`) put every batch's matrix at its place in a buffer of
    ``problem.stored_shape``, the padding all-ones bits (NaN).
    """
    ep = problem.epilogue
    sizes = {"A": (problem.storage("A").copies, problem.M, problem.K),
             "B": (problem.storage("B").copies, problem.K, problem.N)}
    if ep is not None and ep.beta != 0.0:
        sizes["C0"] = (problem.batch, problem.M, problem.N)
    if problem.bias_dtype is not None:
        sizes["bias"] = (problem.N,)
    if fast and options.distribution in ("normal", "uniform"):
        drawn = {name: _draw_fast(size, options.seed, i, options.distribution) for i, (name, size) in enumerate(sizes.items())}
    else:
        rng = np.random.default_rng(options.seed)
        drawn = {name: _draw(rng, size, options.distribution) for name, size in sizes.items()}
    ab = storage_dtype(problem.precision)
    c = c_storage_dtype(problem)
    dtypes = {"A": ab, "B": ab, "C0": c, "bias": np.dtype(np.float32) if problem.bias_dtype == "float32" else ab}
    stored = {name: x.astype(dtypes[name]) for name, x in drawn.items()}
    logical = {name: x.astype(np.float32) for name, x in stored.items()}
    images = {name: padded_image(problem, name, stored[name], dtypes[name]) for name in ("A", "B", "C0") if name in stored}
    return ProblemInputs(a=logical["A"], b=logical["B"], a_stored=images["A"], b_stored=images["B"],
                         c0=logical.get("C0"), bias=logical.get("bias"), c0_stored=images.get("C0"),
                         bias_stored=stored["bias"].reshape(1, -1) if "bias" in stored else None)
