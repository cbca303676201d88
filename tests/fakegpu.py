"""A host-memory stand-in for :class:`gemmlab.gpu.device.Gpu` (it satisfies :class:`gemmlab.gpu.device.GpuLike`,
tests/test_device.py checks), for CPU tests of the pipeline, the
guard bands and the timing loop. Not a test module (pytest collects ``test_*.py`` only).

Device memory is a set of numpy byte arrays at fake addresses; ``allocate``/``fill32``/
``upload``/``download`` work on raw addresses as the real ones do (``gemmlab.gpu.guards`` passes
``int(buffer.handle)`` plus offsets). A "kernel launch" runs a host function on that memory: by
default a float32 GEMM C = A @ B for the GEMM ABI ``(A, B, C, M, N, K)``, nothing for the
launch-floor kernel, and for the device check's kernels (``gemmlab_dc_*``) their numpy twins
(tests/fake_device_check.py), whatever ``behaviour`` says. Time is a fake clock: every launch advances it by the kernel's duration, and
``stream.record()`` returns events whose difference is the elapsed fake time in ms.
"""

from __future__ import annotations

import math
import re

import numpy as np

from fake_device_check import emulation
from gemmlab.contract.hookspecs import DeviceFacts

BASE_ADDRESS = 0x7F0000000000
ALIGN = 256


class FakeBuffer:
    def __init__(self, gpu, address: int, nbytes: int):
        self.gpu, self.handle, self.size, self.closed = gpu, address, nbytes, False

    def close(self):
        self.closed = True
        self.gpu.freed.append(self.handle)


class FakeEvent:
    def __init__(self, t_ms: float):
        self.t_ms = t_ms

    def sync(self):
        pass

    def __sub__(self, other: "FakeEvent") -> float:
        return self.t_ms - other.t_ms


class FakeStream:
    handle = 12345

    def __init__(self, gpu):
        self.gpu = gpu

    def record(self, options=None):
        self.gpu.log.append("event")
        return FakeEvent(self.gpu.clock_ms)

    def sync(self):
        pass


class NoMonitor:
    error = "NVML unavailable: fake"

    def read(self):
        return None

    def max_sm_mhz(self):
        return None


class FakeLoaded:
    def __init__(self, name_expression: str):
        self.kernel = name_expression
        self.registers, self.local_bytes, self.static_shared_bytes = 32, 0, 0
        self.max_threads_per_block = 1024


class FakeTensorMap:
    """What the fake GPU passes for a TMA tensor-map argument."""

    def __init__(self, tm, address: int, description: dict | None = None):
        self.tm, self.address = tm, address
        self.description = description  # tma_rules.check's: dims, row and batch pitches, element type


class HostGpu:
    """Host-memory fake GPU. ``durations`` maps a kernel name expression prefix (e.g.
    ``"gemm_tiled"``) to its fake duration per launch in ms; ``behaviour`` maps a prefix to a
    function ``(gpu, args) -> None`` that replaces the default host GEMM."""

    #: the last HostGpu made: test-only library kernels (tests/plugins_fp8) compute on its memory
    current = None

    def __init__(self, durations: dict | None = None, behaviour: dict | None = None, l2_bytes: int = 1 << 16):
        HostGpu.current = self
        self.facts = DeviceFacts(name="fake H200", arch="90", sm_count=132, l2_bytes=l2_bytes)
        self.launch_configs: list = []
        self.index = 0
        self.stream = FakeStream(self)
        self.monitor = NoMonitor()
        self.memory: dict[int, np.ndarray] = {}
        self.next_address = BASE_ADDRESS
        self.freed: list[int] = []
        self.clock_ms = 0.0
        self.durations = {"gemmlab_empty": 0.001, "gemmlab_dc_": 0.001, "gemmlab_spin": 0.3, **(durations or {})}
        self.behaviour = {"gemmlab_l2_read": lambda gpu, args: None, **(behaviour or {})}  # the read flush
        self.launches: list[str] = []
        self.log: list[str] = []
        self.captures = 0
        self.fills: list[tuple[int, int, int]] = []
        self.active_clusters = 4  # what cuOccupancyMaxActiveClusters answers (0: cluster refused)

    # --- description ---------------------------------------------------------------------------
    def record(self) -> dict:
        return {"index": 0, "name": self.facts.name, "arch": "sm_90", "sm_count": self.facts.sm_count}

    def dram_bytes_per_s(self) -> float:
        return 4.8e12

    # --- memory at raw addresses ---------------------------------------------------------------
    def allocate(self, nbytes: int) -> FakeBuffer:
        address = self.next_address
        self.memory[address] = np.full(nbytes, 0xAB, dtype=np.uint8)  # contents undefined
        self.next_address += -(-nbytes // ALIGN) * ALIGN + ALIGN
        return FakeBuffer(self, address, nbytes)

    def view(self, address: int, nbytes: int) -> np.ndarray:
        """The live bytes [address, address + nbytes) (must lie inside one allocation)."""
        for base, mem in self.memory.items():
            if base <= address and address + nbytes <= base + mem.size:
                return mem[address - base:address - base + nbytes]
        raise AssertionError(f"fake GPU: access of {nbytes} B at {address:#x} outside every allocation")

    def fill32(self, address: int, pattern: int, count: int) -> None:
        self.fills.append((address, pattern, count))
        self.log.append("fill")
        self.view(address, 4 * count).view(np.uint32)[:] = np.uint32(pattern)

    def upload(self, address: int, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array).view(np.uint8).ravel()
        self.view(address, data.size)[:] = data

    def download(self, address: int, nbytes: int) -> np.ndarray:
        return self.view(address, nbytes).copy()

    def words(self, address: int, count: int) -> np.ndarray:
        return self.view(address, 4 * count).view(np.uint32)

    def floats(self, address: int, count: int) -> np.ndarray:
        return self.view(address, 4 * count).view(np.float32)

    # --- kernels -------------------------------------------------------------------------------
    def load(self, object_code, name_expression: str, dynamic_shared_bytes: int) -> FakeLoaded:
        return FakeLoaded(name_expression)

    def occupancy(self, loaded, launch) -> dict:
        return {"max_active_blocks_per_sm": 1, "theoretical_occupancy": 0.25, "blocks": launch.blocks, "waves": 1.0}

    def max_active_clusters(self, loaded, launch) -> int:
        return self.active_clusters

    def tensor_map(self, tm, problem, address: int):
        """A stand-in descriptor (the rules are checked like the real one's)."""
        from gemmlab.gpu import tma
        return FakeTensorMap(tm, address, tma.check(tm, problem, address))

    def group_tensor_maps(self, tm, problem, address: int) -> np.ndarray:
        """Stand-in descriptors of an ``each_group`` map (the rules checked like the real ones'):
        per group 128 bytes = 16 uint64 words (:data:`FAKE_MAP_MAGIC`, the group matrix's address,
        rows, cols, row stride in bytes, box rows, box cols, then zeros), zeros where no map is
        encoded; :func:`fake_map` reads one back, as a kernel's TMA would use it."""
        from gemmlab.contract.tma_rules import group_matrices
        from gemmlab.gpu import tma
        tma.check(tm, problem, address)
        elem = problem.element_bytes(tm.matrix)
        groups = group_matrices(tm, problem)
        words = np.zeros((len(groups), 16), dtype=np.uint64)
        for g, (rows, cols, offset) in enumerate(groups):
            if rows:
                words[g, :7] = (FAKE_MAP_MAGIC, address + offset * elem, rows, cols, cols * elem, *tm.box)
        return words.view(np.uint8)

    def _lookup(self, table: dict, name: str, default):
        for prefix, value in table.items():
            if name.startswith(prefix):
                return value
        return default

    def launcher(self, loaded: FakeLoaded, launch, args: tuple):
        name = loaded.kernel
        self.launch_configs.append((name, launch))
        duration = self._lookup(self.durations, name, 1.0)
        # gemmlab's device-check kernels (kernels/device_check.cu) always run their numpy twins
        # a single-launch timing's lead (kernels/spin.cu) only takes time, whatever the test's behaviours
        action = (emulation(name) or (_idle if name.startswith("gemmlab_spin") else None)
                  or self._lookup(self.behaviour, name, None) or fused_emulation(name, launch)
                  or (host_gemm if args else None))

        def enqueue():
            self.launches.append(name)
            self.log.append(name)
            if action is not None:
                action(self, args)
            self.clock_ms += duration

        return enqueue

    def capture(self, enqueue, count: int, mode: str = "thread_local"):
        self.captures += 1

        def replay():
            for _ in range(count):
                enqueue()

        replay.graph = ("fake graph", count)
        return replay

    def graph_nodes(self, graph) -> list[str]:
        """One kernel node per captured launch (the fake captures no other work)."""
        return ["kernel"] * graph[1]

    def device_sync(self) -> None:
        pass

    def release_graphs(self) -> None:
        pass

    def sync(self) -> None:
        pass


#: the first word of a fake each_group tensor map (:meth:`HostGpu.group_tensor_maps`)
FAKE_MAP_MAGIC = 0x7E45012A


def fake_map(gpu: HostGpu, maps_address: int, g: int) -> tuple[int, int, int, int]:
    """Group ``g``'s fake tensor map in device memory at ``maps_address``: (address, rows, cols, row
    stride bytes) of the matrix it covers; AssertionError for a map that was never encoded (an
    empty group's zeros: a kernel must not use it)."""
    words = gpu.view(int(maps_address) + 128 * g, 128).view(np.uint64)
    assert int(words[0]) == FAKE_MAP_MAGIC, f"fake GPU: tensor map {g} at {int(maps_address):#x} was never encoded"
    return int(words[1]), int(words[2]), int(words[3]), int(words[4])


def unpack(args: tuple) -> tuple[int, int, int, int, int, int]:
    a, b, c, m, n, k = args
    return int(a), int(b), int(c), int(m), int(n), int(k)


def _idle(gpu, args) -> None:
    """An instrument kernel's emulation: no effect on memory."""


def host_gemm(gpu: HostGpu, args: tuple) -> None:
    """C = A @ B on the fake device memory (the GEMM ABI): float32 in and out, the product taken in
    float64 and rounded once, so the result (and every error figure a record derives from it) is the
    same on every host CPU (a float32 BLAS GEMM's summation order depends on the CPU OpenBLAS picks)."""
    a, b, c, m, n, k = unpack(args)
    A = gpu.floats(a, m * k).reshape(m, k).astype(np.float64)
    B = gpu.floats(b, k * n).reshape(k, n).astype(np.float64)
    gpu.floats(c, m * n).reshape(m, n)[:] = (A @ B).astype(np.float32)


def right_on_first_inputs_only():
    """A kernel behaviour that computes C right, then, on any inputs other than the first it saw
    (keyed by A's first value), zeroes every other row: wrong outside the sampled rows' parity too,
    so only Freivalds' check of the whole product sees it on a sampled verification."""
    first: list = []

    def behaviour(gpu: HostGpu, args: tuple) -> None:
        a, b, c, m, n, k = unpack(args)
        host_gemm(gpu, args)
        key = float(gpu.floats(a, 1)[0])
        if not first:
            first.append(key)
        if key != first[0]:
            gpu.floats(c, m * n).reshape(m, n)[1::2] = 0.0

    return behaviour


# --- the whole GEMM contract (issue 43): plugins/tiled.py's gemm_tiled_epi --------------------------

_TILED_EPI = re.compile(r"gemm_tiled_epi<([^>]*)>")
_OUT_TYPES = {"float": "float32", "__half": "float16", "__nv_bfloat16": "bfloat16"}


#: issue 43 item 3: the fused-epilogue entries of the fast kernels (gemmlab/fused.cuh), template
#: arguments ending in ACT, BIAS, BETA, BIAS_T, OUT_T; the arguments are gemm_tiled_epi's
_FUSED_ENTRY = re.compile(r"(gemm_sgemm_pipelined_epi|gemm_decode16_epi|gemm_gemv_rows_epi|gemm_gemv_cols_epi)<([^>]*)>")


def _fast_fused(entry: str, parts: list[str], launch):
    """The launch function of a fast kernel's fused entry: its input type and layouts from the
    template arguments (sgemm_pipelined_epi: ACOL the 11th; decode16_epi: T first, B_COL the 5th;
    gemv_cols_epi: B column-major), the batch count from the grid (z; decode16_epi: grid y over
    the row blocks of M, 16·MT rows each)."""
    act, bias, beta = (int(p) for p in parts[-5:-2])
    bias_t, out = (_OUT_TYPES[t] for t in parts[-2:])
    inputs, layout_a, layout_b, tf32 = "float32", "row", "row", None
    if entry == "gemm_sgemm_pipelined_epi":
        layout_a = "col" if parts[10] == "true" else "row"
    elif entry == "gemm_decode16_epi":
        inputs, layout_b = _OUT_TYPES[parts[0]], "col" if parts[4] == "true" else "row"
        tf32 = "rna" if parts[0] == "float" else None  # decode_tf32: cvt.rna.tf32.f32 of A and B
    elif entry == "gemm_gemv_cols_epi":
        layout_b = "col"

    def run(gpu, args):
        batches = launch.grid[2]
        if entry == "gemm_decode16_epi":
            batches = launch.grid[1] // -(-int(args[5]) // (16 * int(parts[1])))
        tiled_epi(gpu, args, act, bias, beta, out, batches, inputs, bias_t, layout_a, layout_b, tf32)

    return run


#: issue 43: wgmma_bf16 / wgmma_tf32's fused entries (kernels/wgmma_bf16.cu), single-batch and strided-batched
_WGMMA_EPI = re.compile(r"gemm_wgmma_epi(_tma_store)?(_batched)?<([^>]*)>")


def _map_matrix(gpu: HostGpu, fmap: FakeTensorMap, z: int) -> np.ndarray:
    """Batch ``z`` of what a TMA map reads (float64, rows x cols as stored), from the map's own
    description (dims, row and batch pitches, element type) as the hardware would: a rank-3 map's batch
    ``z`` at its batch pitch, zeros past its batch dimension (TMA's out-of-bounds fill)."""
    d = fmap.description
    dims = d["global"]
    rows, cols = dims[-2], dims[-1]
    if len(dims) == 3 and z >= dims[0]:
        return np.zeros((rows, cols))
    dtype = _out_dtype(d["dtype"])
    pitch = d["row_stride_bytes"]
    base = fmap.address + z * d.get("batch_stride_bytes", 0)
    raw = gpu.view(base, pitch * (rows - 1) + cols * dtype.itemsize)
    return np.lib.stride_tricks.as_strided(raw.view(dtype), (rows, cols), (pitch, dtype.itemsize)).astype(np.float64)


def wgmma_epi(gpu: HostGpu, args: tuple, tma_store: bool, batched: bool, parts: list[str]) -> None:
    """What the wgmma fused entries compute, on the fake memory (issue 43): per batch z (batch-major
    queue; z < batch), A and B read through their maps (:func:`_map_matrix`: the map's dims and pitches,
    batch ``stride_a ? z : 0`` as the kernel picks it; MAJOR bit 1: the map's rows are K (a column-major
    A), bit 0: B's rows are K (row-major B), else N; ELEM = 4: the inputs truncated to TF32 as wgmma reads
    them), the float64 product rounded to float32, then
    alpha * acc + beta * C0 + bias and the activation in float32 (tiled_epi's arithmetic), rounded once
    into C's type. C (and C0) at C + z * stride_c, pitch ldc, in the register entry; through C's map
    (its dims, pitches, batch z) in the TMA-store entry. Only M x N of each batch is written."""
    major, (act, bias_on, beta_on) = int(parts[4]), (int(p) for p in parts[-5:-2])
    bias_t, out = (_out_dtype(_OUT_TYPES[t]) for t in parts[-2:])
    maps = args[:3 if tma_store else 2]
    c, c0, bvec, m, n, k, ldc = (int(x) for x in args[len(maps):len(maps) + 7])
    alpha, beta = np.float32(args[len(maps) + 7]), np.float32(args[len(maps) + 8])
    batch, sa, sb, sc = (int(x) for x in args[len(maps) + 9:]) if batched else (1, 0, 0, 0)
    item = out.itemsize
    for z in range(batch):
        a = _map_matrix(gpu, maps[0], z if sa else 0)
        b = _map_matrix(gpu, maps[1], z if sb else 0)
        A = a[:k, :m].T if major & 2 else a[:m, :k]
        B = b[:k, :n] if major & 1 else b[:n, :k].T
        if parts[0] == "4":  # ELEM = 4: float32 read as TF32 by wgmma, the low 13 mantissa bits dropped (rz)
            A, B = ((x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
                    for x in (A, B))
        prev = gpu.view(c0 + item * z * sc, item * m * ldc).view(out).reshape(m, ldc)[:, :n] if beta_on else None
        result = _epilogue32(gpu, A @ B, alpha, beta, prev, bvec if bias_on else None, bias_t, n, act).astype(out)
        if tma_store:
            d = maps[2].description
            rows, cols, pitch = d["global"][-2], d["global"][-1], d["row_stride_bytes"]
            base = maps[2].address + z * d.get("batch_stride_bytes", 0)
            raw = gpu.view(base, pitch * (rows - 1) + cols * item)
            np.lib.stride_tricks.as_strided(raw.view(out), (rows, cols), (pitch, item))[:m, :n] = result
        else:
            gpu.view(c + item * z * sc, item * m * ldc).view(out).reshape(m, ldc)[:, :n] = result


def fused_emulation(name: str, launch):
    """The fake's launch function for a ``gemm_tiled_epi<BM, BN, BK, TM, TN, ACT, BIAS, BETA, IN_T,
    BIAS_T, OUT_T>`` instance (kernels/tiled.cu; the batch count is the launch's grid z), a fast
    kernel's fused entry (:data:`_FUSED_ENTRY`, :func:`_fast_fused`) or a wgmma fused entry
    (:data:`_WGMMA_EPI`, :func:`wgmma_epi`), or None for any other kernel."""
    wgmma = _WGMMA_EPI.match(name)
    if wgmma:
        parts = [p.strip() for p in wgmma.group(3).split(",")]
        return lambda gpu, args: wgmma_epi(gpu, args, bool(wgmma.group(1)), bool(wgmma.group(2)), parts)
    fast = _FUSED_ENTRY.match(name)
    if fast:
        return _fast_fused(fast.group(1), [p.strip() for p in fast.group(2).split(",")], launch)
    match = _TILED_EPI.match(name)
    if not match:
        return None
    parts = [p.strip() for p in match.group(1).split(",")]
    act, bias, beta = (int(p) for p in parts[5:8])
    types = [_OUT_TYPES[t] for t in parts[8:11]]
    return lambda gpu, args: tiled_epi(gpu, args, act, bias, beta, types[2], launch.grid[2], types[0], types[1])


def _out_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _epilogue32(gpu: HostGpu, product: np.ndarray, alpha: float, beta: float, prev: np.ndarray | None,
                bvec: int | None, bias_t: np.dtype, n: int, act: int) -> np.ndarray:
    """act(alpha * product + beta * C0 + bias) in float32, each step rounded as gemm_tiled_epi's arithmetic:
    the product rounded to float32 first; ``prev`` C0's M x N (None: no beta term); ``bvec`` the bias's
    address on the fake memory (None: no bias), ``n`` elements of ``bias_t``."""
    v = alpha * product.astype(np.float32)
    if prev is not None:
        v = v + beta * prev.astype(np.float32)
    if bvec is not None:
        v = v + gpu.view(bvec, bias_t.itemsize * n).view(bias_t).astype(np.float32)
    return _activation32(act, v)


def _activation32(act: int, z: np.ndarray) -> np.ndarray:
    """gemm_tiled_epi's activation in float32 arithmetic (erf through float64's, rounded)."""
    half, one = np.float32(0.5), np.float32(1.0)
    if act == 1:
        return np.maximum(z, np.float32(0.0))
    if act == 2:
        inner = np.float32(0.7978845608028654) * (z + np.float32(0.044715) * z * z * z)
        return half * z * (one + np.tanh(inner))
    if act == 3:
        erf = np.frompyfunc(math.erf, 1, 1)(z.astype(np.float64) * 0.7071067811865476).astype(np.float32)
        return half * z * (one + erf)
    if act == 4:
        with np.errstate(over="ignore"):
            return z / (one + np.exp(-z))
    return z


def tiled_epi(gpu: HostGpu, args: tuple, act: int, bias: int, beta_on: int, out: str, batches: int,
              inputs: str = "float32", bias_type: str = "float32", layout_a: str = "row", layout_b: str = "row",
              tf32: str | None = None) -> None:
    """What gemm_tiled_epi (and every fused entry of gemmlab/fused.cuh) computes, on the fake device
    memory: per batch z (strides in elements), acc = the float64 product rounded to float32, then
    alpha * acc + beta * C0 + bias, the activation and the output rounding in float32 arithmetic;
    only each batch's M x N is written. A column-major A is stored K x M (pitch lda), a column-major
    B N x K (pitch ldb). ``tf32``: the rounding a TF32 tensor-core kernel applies to A and B first
    (gemmlab.stages.verify.round_tf32's names; decode16_epi<float>: rna)."""
    a, b, c, c0, bvec, m, n, k, lda, ldb, ldc, sa, sb, sc = (int(x) for x in args[:14])
    alpha, beta = np.float32(args[14]), np.float32(args[15])
    dtype, in_t, bias_t = _out_dtype(out), _out_dtype(inputs), _out_dtype(bias_type)
    item, i_item = dtype.itemsize, in_t.itemsize

    def matrix(address: int, rows: int, ld: int, cols: int) -> np.ndarray:
        return gpu.view(address, i_item * rows * ld).view(in_t).reshape(rows, ld)[:, :cols].astype(np.float64)

    for z in range(batches):
        A = matrix(a + i_item * z * sa, m, lda, k) if layout_a == "row" else matrix(a + i_item * z * sa, k, lda, m).T
        B = matrix(b + i_item * z * sb, k, ldb, n) if layout_b == "row" else matrix(b + i_item * z * sb, n, ldb, k).T
        if tf32:
            from gemmlab.stages.verify import round_tf32
            A, B = (round_tf32(x.astype(np.float32), tf32).astype(np.float64) for x in (A, B))
        prev = gpu.view(c0 + item * z * sc, item * m * ldc).view(dtype).reshape(m, ldc)[:, :n] if beta_on else None
        gpu.view(c + item * z * sc, item * m * ldc).view(dtype).reshape(m, ldc)[:, :n] = _epilogue32(
            gpu, A @ B, alpha, beta, prev, bvec if bias else None, bias_t, n, act).astype(dtype)
