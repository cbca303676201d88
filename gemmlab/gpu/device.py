"""The GPU a run uses: open it once per process (cuda.core), describe it as plain data, move
bytes to and from raw device addresses, fill memory, capture graphs, load cubins and launch.
The one module that holds CUDA device objects (``timing`` only records events on its stream).

Sources: cuda.core 1.x API (``Device``, ``Stream``, ``Buffer``, ``launch``, ``LaunchConfig``) and
the driver API through ``cuda.bindings.driver`` (memcpy/memset on addresses, stream capture,
``cuKernelSetAttribute``); facts checked on the H200 (numpy scalar arguments, the
shared-memory opt-in). NaN fill: ``cuMemsetD32Async`` with 0xFFFFFFFF (a float32 NaN).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from gemmlab.errors import CudaError, NoGPUError
from gemmlab.contract.hookspecs import DeviceFacts, Launch
from gemmlab.contract.session_slot import SessionSlot


#: DeviceFacts for ``mode=compile`` without a GPU: the limits of an sm_90 part (H200 SXM).
def offline_facts(arch: str) -> DeviceFacts:
    """DeviceFacts for compiling for ``sm_<arch>`` with no GPU present (sm_90 limits, 132 SMs)."""
    return DeviceFacts(name="no GPU (compile only)", arch=arch, sm_count=132,
                       l2_bytes=50 * 1024 * 1024, max_cluster_size=cluster_limit(arch))


def cluster_limit(arch: str) -> int:
    """Portable thread-block cluster size: 8 blocks from sm_90 on, 1 (no clusters) before."""
    digits = "".join(ch for ch in str(arch) if ch.isdigit())
    return 8 if digits and int(digits) >= 90 else 1


# Per-SM limits of compute capability 9.0 (CUDA C Programming Guide, "Compute Capabilities",
# Table 23 / the occupancy calculator): used to estimate occupancy in mode=compile (no driver).
SM90_LIMITS = {"threads": 2048, "blocks": 32, "registers": 65536, "reg_unit": 256, "shared": 233472,
               "shared_reserved_per_block": 1024, "shared_unit": 128, "warp": 32}


def estimate_occupancy(registers: int, static_shared: int, launch: Launch, sm_count: int) -> dict:
    """Theoretical occupancy without a GPU, by the occupancy calculator's rules for sm_90:
    blocks per SM = min(thread, block, register and shared-memory limits). Registers are
    allocated per warp in units of 256; shared memory per block in units of 128 bytes plus 1 KiB
    reserved by the system."""
    L = SM90_LIMITS
    threads = launch.threads_per_block
    warps = -(-threads // L["warp"])
    regs_per_warp = -(-registers * L["warp"] // L["reg_unit"]) * L["reg_unit"]
    by_regs = L["registers"] // (regs_per_warp * warps) if registers else L["blocks"]
    smem = static_shared + launch.shared_bytes
    smem_block = -(-smem // L["shared_unit"]) * L["shared_unit"] + L["shared_reserved_per_block"]
    by_smem = L["shared"] // smem_block
    blocks_per_sm = max(0, min(L["threads"] // threads, L["blocks"], by_regs, by_smem))
    waves = launch.blocks / (sm_count * blocks_per_sm) if blocks_per_sm else float("inf")
    return {"max_active_blocks_per_sm": blocks_per_sm,
            "theoretical_occupancy": round(blocks_per_sm * threads / L["threads"], 4),
            "blocks": launch.blocks, "waves": round(waves, 3),
            "source": "estimate: occupancy-calculator rules for sm_90 (mode=compile, no driver)"}


def _driver_call(result):
    """Check a ``cuda.bindings.driver`` call's status; return its value(s)."""
    from cuda.bindings import driver
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        raise CudaError(f"CUDA driver call failed: {name.decode() if isinstance(name, bytes) else name}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def launch_config(launch: Launch):
    """cuda.core ``LaunchConfig`` for ``launch``: with a cluster, cuda.core's grid counts
    clusters, so the grid in blocks is divided by the cluster dims (validated as multiples)."""
    from cuda.core import LaunchConfig
    if launch.cluster is None:
        return LaunchConfig(grid=launch.grid, block=launch.block, shmem_size=launch.shared_bytes)
    grid = tuple(g // c for g, c in zip(launch.grid, launch.cluster))
    return LaunchConfig(grid=grid, cluster=tuple(launch.cluster), block=launch.block, shmem_size=launch.shared_bytes)


@dataclass
class LoadedKernel:
    """A cubin loaded on the GPU: the cuda.core ``Kernel`` and its driver-reported attributes."""

    kernel: object
    registers: int
    local_bytes: int
    static_shared_bytes: int
    max_threads_per_block: int = 1024  # what fits with this kernel's registers and shared memory


@runtime_checkable
class GpuLike(Protocol):
    """What the pipeline, the guard bands and the timing loop use of a GPU: the interface of
    :class:`Gpu`, and of any stand-in (tests/fakegpu.py's ``HostGpu`` keeps device memory on the
    host and runs kernels as numpy functions; a test checks that it satisfies this protocol).

    Addresses are raw device addresses (``int(buffer.handle)`` plus a byte offset); ``count``
    is in 32-bit words, ``nbytes`` in bytes; every copy and fill is ordered on ``stream``.
    """

    index: int  #: CUDA device ordinal
    facts: DeviceFacts  #: name, arch, SM count, L2 bytes, limits
    stream: Any  #: the run's stream (``record()`` returns events whose difference is in ms)
    monitor: Any  #: clocks/temperature/throttle reader (:class:`gemmlab.gpu.monitor.Monitor`)

    def record(self) -> dict:
        """Device fields for ``result.json``."""

    def dram_bytes_per_s(self) -> float | None:
        """Peak DRAM bandwidth in bytes/s, or None when unknown."""

    def allocate(self, nbytes: int) -> Any:
        """A device buffer of ``nbytes`` (``handle``: its address; ``close()`` frees it)."""

    def upload(self, address: int, array: np.ndarray) -> None:
        """Copy a host array to ``address``."""

    def download(self, address: int, nbytes: int) -> np.ndarray:
        """Copy ``nbytes`` from ``address`` into a new host uint8 array."""

    def fill32(self, address: int, pattern: int, count: int) -> None:
        """Write ``count`` 32-bit words of ``pattern`` at ``address``."""

    def load(self, object_code, name_expression: str, dynamic_shared_bytes: int) -> LoadedKernel:
        """Load a kernel of a compiled cubin."""

    def occupancy(self, loaded: LoadedKernel, launch: Launch) -> dict:
        """Max active blocks per SM, theoretical occupancy and waves of ``launch``."""

    def max_active_clusters(self, loaded: LoadedKernel, launch: Launch) -> int:
        """How many clusters of ``launch`` can be co-resident (0: none)."""

    def tensor_map(self, tm, problem, address: int) -> Any:
        """A TMA tensor map over the matrix at ``address``."""

    def group_tensor_maps(self, tm, problem, address: int) -> np.ndarray:
        """The G tensor maps of an ``each_group`` map over the matrix at ``address``: a host array
        of G x 128 uint8 for the core to copy to device memory (issue 44, general kind)."""

    def launcher(self, loaded: LoadedKernel, launch: Launch, args: tuple) -> Callable[[], None]:
        """A zero-argument function that enqueues one launch."""

    def capture(self, enqueue: Callable[[], None], count: int, mode: str = "thread_local") -> Callable[[], None]:
        """A zero-argument function that replays ``count`` calls of ``enqueue`` (a CUDA graph,
        its ``graph`` attribute for :meth:`graph_nodes`); ``mode``: ``thread_local`` | ``global``."""

    def graph_nodes(self, graph) -> list[str]:
        """The kinds of a captured graph's nodes (``kernel``, ``memset``, ``memcpy device->device`` ...)."""

    def device_sync(self) -> None:
        """Wait for every stream of the context."""

    def release_graphs(self) -> None:
        """Destroy the graphs captured so far."""

    def sync(self) -> None:
        """Wait for the stream (an asynchronous kernel fault raises :class:`CudaError`)."""


#: pinned staging kept by a :class:`Gpu` between transfers up to this size (larger ones allocate their own)
STAGING_KEEP_BYTES = 1 << 30


class Gpu:
    """One CUDA device with a non-blocking stream, kept for the whole process (sweeps reuse it).

    Use :func:`open_gpu`; never construct directly.
    """

    def __init__(self, index: int):
        from cuda.core import Device
        try:
            count = len(Device.get_all_devices())
        except Exception as exc:  # cuda.pathfinder's DynamicLibNotFoundError, CUDAError, ...
            raise NoGPUError(f"no CUDA driver or GPU available ({type(exc).__name__}); "
                             "use mode=compile to compile and get the resource report without a GPU") from None
        if count == 0:
            raise NoGPUError("no CUDA GPU visible; use mode=compile to compile without a GPU")
        if index >= count:
            raise NoGPUError(f"device: index {index} does not exist; {count} GPU(s) visible (0..{count - 1})")
        self.device = Device(index)
        self.device.set_current()
        self.stream = self.device.create_stream()
        props = self.device.properties
        from cuda.bindings import driver
        self.driver_version = int(_driver_call(driver.cuDriverGetVersion()))
        self.facts = DeviceFacts(
            name=self.device.name, arch=self.device.arch, sm_count=props.multiprocessor_count,
            max_threads_per_block=props.max_threads_per_block,
            max_shared_per_block=props.max_shared_memory_per_block,
            max_shared_per_block_optin=props.max_shared_memory_per_block_optin,
            l2_bytes=props.l2_cache_size, max_cluster_size=cluster_limit(self.device.arch))
        self.index = index
        self.max_threads_per_sm = props.max_threads_per_multiprocessor
        self._graphs: list = []
        try:
            self.pci_bus_id = str(self.device.pci_bus_id)
        except Exception:
            self.pci_bus_id = None
        from gemmlab.gpu.monitor import Monitor
        self.monitor = Monitor(self.pci_bus_id)

    def record(self) -> dict:
        """Device fields for ``result.json``."""
        import cuda.core
        d = self.driver_version
        return {"index": self.index, "name": self.facts.name, "arch": f"sm_{self.facts.arch}",
                "sm_count": self.facts.sm_count, "l2_bytes": self.facts.l2_bytes,
                "uuid": str(getattr(self.device, "uuid", "")), "pci_bus_id": self.pci_bus_id,
                "dram_peak_bytes_per_s": self.dram_bytes_per_s(), "max_sm_mhz": self.monitor.max_sm_mhz(),
                "driver_version": f"{d // 1000}.{(d % 1000) // 10}", "cuda_core_version": cuda.core.__version__}

    # --- raw device addresses (guard-banded buffers, see gemmlab.gpu.guards) -------------------------
    def _staging(self, nbytes: int):
        """A pinned host buffer of at least ``nbytes`` for :meth:`upload`/:meth:`download`: one kept
        for the process (grown to the largest transfer up to :data:`STAGING_KEEP_BYTES`; page-locking
        64 MB costs tens of ms per call), or a new one for larger transfers. Returns ``(buffer, keep)``."""
        from cuda.core import LegacyPinnedMemoryResource
        nbytes = max(nbytes, 1)
        if nbytes > STAGING_KEEP_BYTES:
            return LegacyPinnedMemoryResource().allocate(nbytes, stream=self.stream), False
        kept = getattr(self, "_kept_staging", None)
        if kept is None or kept.size < nbytes:
            if kept is not None:
                kept.close()
            self._kept_staging = kept = LegacyPinnedMemoryResource().allocate(nbytes, stream=self.stream)
        return kept, True

    def upload(self, address: int, array: np.ndarray) -> None:
        """Copy a host array to device ``address`` (synchronous; through pinned staging, :meth:`_staging`)."""
        from cuda.bindings import driver
        array = np.ascontiguousarray(array)
        if not array.nbytes:  # an empty matrix (a grouped step with every M_g 0, issue 44): nothing to copy
            return
        staging, keep = self._staging(array.nbytes)
        np.from_dlpack(staging).view(np.uint8)[:array.nbytes] = array.view(np.uint8).ravel()
        _driver_call(driver.cuMemcpyHtoDAsync(address, int(staging.handle), array.nbytes, self.stream.handle))
        self.sync()
        if not keep:
            staging.close()

    def download(self, address: int, nbytes: int) -> np.ndarray:
        """Copy ``nbytes`` from device ``address`` into a new host uint8 array (synchronous; through
        pinned staging, :meth:`_staging`)."""
        from cuda.bindings import driver
        if not nbytes:  # an empty matrix (issue 44): nothing to copy
            return np.zeros(0, dtype=np.uint8)
        staging, keep = self._staging(nbytes)
        _driver_call(driver.cuMemcpyDtoHAsync(int(staging.handle), address, nbytes, self.stream.handle))
        self.sync()
        out = np.from_dlpack(staging).view(np.uint8)[:nbytes].copy()
        if not keep:
            staging.close()
        return out

    def fill32(self, address: int, pattern: int, count: int) -> None:
        """Write ``count`` 32-bit words of ``pattern`` at ``address``, ordered on the run's stream."""
        from cuda.bindings import driver
        if count:  # none for an empty matrix (issue 44)
            _driver_call(driver.cuMemsetD32Async(address, pattern, count, self.stream.handle))

    def dram_bytes_per_s(self) -> float | None:
        """Peak DRAM bandwidth from the device attributes: 2 x memory clock x bus width / 8."""
        props = self.device.properties
        try:
            return 2.0 * props.memory_clock_rate * 1e3 * props.global_memory_bus_width / 8
        except Exception:
            return None

    # --- CUDA graphs (driver API through cuda.bindings) ---------------------------------------
    def capture(self, enqueue, count: int, mode: str = "thread_local"):
        """Capture ``count`` calls of ``enqueue`` on the run's stream into an instantiated CUDA
        graph; return a zero-argument function that launches the graph on the stream (its
        ``graph`` attribute is the ``CUgraph``, for :meth:`graph_nodes`).

        ``mode``: the stream capture mode, ``thread_local`` or ``global`` (where an unsafe call
        from any thread during the capture, e.g. a synchronisation, fails the capture).

        Raises:
            CudaError: capture or instantiation failed (e.g. the enqueue synchronised).
        """
        from cuda.bindings import driver
        handle = self.stream.handle
        capture_mode = (driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL if mode == "global"
                        else driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        _driver_call(driver.cuStreamBeginCapture(handle, capture_mode))
        try:
            for _ in range(count):
                enqueue()
        finally:
            graph = _driver_call(driver.cuStreamEndCapture(handle))
        exec_graph = _driver_call(driver.cuGraphInstantiate(graph, 0))
        self._graphs.append((graph, exec_graph))

        def launch_graph():
            _driver_call(driver.cuGraphLaunch(exec_graph, handle))

        launch_graph.graph = graph
        return launch_graph

    def graph_nodes(self, graph) -> list[str]:
        """The kinds of the nodes of a captured ``CUgraph`` (child graphs expanded): ``kernel``,
        ``memset``, ``memcpy device->device`` (or another direction: ``host``, ``array``,
        ``unified`` per side, from the copy's memory types), ``host`` (a host function),
        ``empty``, ``event record``, ``event wait``, ``mem alloc``, ``mem free``, or the
        driver's type name for any other.

        Raises:
            CudaError: the driver refused a query.
        """
        from cuda.bindings import driver
        T = driver.CUgraphNodeType
        names = {T.CU_GRAPH_NODE_TYPE_KERNEL: "kernel", T.CU_GRAPH_NODE_TYPE_MEMSET: "memset",
                 T.CU_GRAPH_NODE_TYPE_HOST: "host", T.CU_GRAPH_NODE_TYPE_EMPTY: "empty",
                 T.CU_GRAPH_NODE_TYPE_EVENT_RECORD: "event record", T.CU_GRAPH_NODE_TYPE_WAIT_EVENT: "event wait",
                 T.CU_GRAPH_NODE_TYPE_MEM_ALLOC: "mem alloc", T.CU_GRAPH_NODE_TYPE_MEM_FREE: "mem free"}
        memory = {1: "host", 2: "device", 3: "array", 4: "unified"}
        _, count = _driver_call(driver.cuGraphGetNodes(graph, 0))
        nodes, count = _driver_call(driver.cuGraphGetNodes(graph, count)) if count else ([], 0)
        kinds = []
        for node in nodes[:count]:
            kind = _driver_call(driver.cuGraphNodeGetType(node))
            if kind == T.CU_GRAPH_NODE_TYPE_GRAPH:
                kinds += self.graph_nodes(_driver_call(driver.cuGraphChildGraphNodeGetGraph(node)))
            elif kind == T.CU_GRAPH_NODE_TYPE_MEMCPY:
                params = _driver_call(driver.cuGraphMemcpyNodeGetParams(node))
                src = memory.get(int(params.srcMemoryType), str(params.srcMemoryType))
                dst = memory.get(int(params.dstMemoryType), str(params.dstMemoryType))
                kinds.append(f"memcpy {src}->{dst}")
            else:
                kinds.append(names.get(kind, str(kind).rsplit(".", 1)[-1]))
        return kinds

    def device_sync(self) -> None:
        """Wait for every stream of the context (``cuCtxSynchronize``): work enqueued anywhere.

        Raises:
            CudaError: an asynchronous fault, or the driver refused the call.
        """
        from cuda.bindings import driver
        _driver_call(driver.cuCtxSynchronize())

    def release_graphs(self) -> None:
        """Destroy the graphs captured so far."""
        from cuda.bindings import driver
        for graph, exec_graph in self._graphs:
            driver.cuGraphExecDestroy(exec_graph)
            driver.cuGraphDestroy(graph)
        self._graphs.clear()

    # --- memory -------------------------------------------------------------------------------
    def allocate(self, nbytes: int):
        """A device ``Buffer`` of ``nbytes`` (contents undefined)."""
        return self.device.allocate(nbytes, stream=self.stream)

    # --- kernels ------------------------------------------------------------------------------
    def load(self, object_code, name_expression: str, dynamic_shared_bytes: int) -> LoadedKernel:
        """Load ``name_expression`` from a compiled ``ObjectCode``; opt in to more than 48 KiB of
        dynamic shared memory when the launch needs it.

        Raises:
            CudaError: the driver refused the module or the attribute.
        """
        try:
            kernel = object_code.get_kernel(name_expression)
        except Exception as exc:
            raise CudaError(f"could not load {name_expression}: {exc}") from None
        if dynamic_shared_bytes > 48 * 1024:
            # cuda.core loads modules as libraries: the handle is a CUkernel, set per device
            from cuda.bindings import driver
            _driver_call(driver.cuKernelSetAttribute(
                driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dynamic_shared_bytes, kernel.handle, driver.CUdevice(self.index)))
        a = kernel.attributes
        return LoadedKernel(kernel=kernel, registers=a.num_regs, local_bytes=a.local_size_bytes,
                            static_shared_bytes=a.shared_size_bytes, max_threads_per_block=a.max_threads_per_block)

    def occupancy(self, loaded: LoadedKernel, launch: Launch) -> dict:
        """Max active blocks per SM (occupancy API), theoretical occupancy and waves."""
        blocks_per_sm = loaded.kernel.occupancy.max_active_blocks_per_multiprocessor(
            launch.threads_per_block, launch.shared_bytes)
        occupancy = blocks_per_sm * launch.threads_per_block / self.max_threads_per_sm
        waves = launch.blocks / (self.facts.sm_count * blocks_per_sm) if blocks_per_sm else float("inf")
        return {"max_active_blocks_per_sm": blocks_per_sm, "theoretical_occupancy": round(occupancy, 4),
                "blocks": launch.blocks, "waves": round(waves, 3),
                "source": "driver occupancy API (cuOccupancyMaxActiveBlocksPerMultiprocessor)"}

    def max_active_clusters(self, loaded: LoadedKernel, launch: Launch) -> int:
        """``cuOccupancyMaxActiveClusters`` for ``launch`` (0: the device cannot run this cluster)."""
        try:
            return int(loaded.kernel.occupancy.max_active_clusters(launch_config(launch), stream=self.stream))
        except Exception:  # the driver refuses the configuration outright
            return 0

    def tensor_map(self, tm, problem, address: int):
        """A TMA tensor map over the matrix at ``address`` (:func:`gemmlab.gpu.tma.build`)."""
        from gemmlab.gpu import tma
        return tma.build(tm, problem, address)

    def group_tensor_maps(self, tm, problem, address: int) -> np.ndarray:
        """The G tensor maps of an ``each_group`` map (:func:`gemmlab.gpu.tma.build_each_group`)."""
        from gemmlab.gpu import tma
        return tma.build_each_group(tm, problem, address)

    def launcher(self, loaded: LoadedKernel, launch: Launch, args: tuple):
        """Return a zero-argument function that enqueues one launch on the run's stream.

        ``args`` must already hold device buffers and numpy scalars of the C types
        (``np.int32``): a Python int is passed as 64 bits and misplaces later parameters.
        Tensor maps (cuda.core ``TensorMapDescriptor``) are passed by value.
        """
        from cuda.core import launch as cu_launch
        config = launch_config(launch)
        stream, kernel = self.stream, loaded.kernel

        def enqueue():
            try:
                cu_launch(stream, config, kernel, *args)
            except Exception as exc:  # cuda.core's CUDAError: invalid configuration, ...
                raise CudaError(f"launch of grid {launch.grid} block {launch.block} failed: {exc}") from None

        return enqueue

    def sync(self) -> None:
        """Wait for the stream; turn an asynchronous kernel fault into :class:`CudaError`."""
        try:
            self.stream.sync()
        except Exception as exc:
            raise CudaError(f"kernel failed: {exc}") from None


class Devices:
    """The GPUs a session has opened and the GPU locks it holds (the session,
    :class:`gemmlab.run.session.Session`, owns one: ``Session.devices``; the module functions below
    act on the active session's, :func:`devices`). A CUDA context and an ``flock`` belong to the
    process, so a session shares the default session's unless it is given its own (tests).

    Attributes:
        opened: GPU index -> :class:`Gpu` opened (one CUDA context each, opened once).
        held_locks: GPU index -> the lock file handle of a GPU locked outside a lease scope (held
            for the session's life, as an OS lock is for the process's).
        scopes: the open :meth:`lease_scope` blocks, innermost last, each ``[(index, handle)]``.
    """

    def __init__(self):
        self.opened: dict[int, Gpu] = {}
        self.held_locks: dict[int, object] = {}
        self.scopes: list[list] = []

    def release_held_locks(self) -> None:
        """Unlock the GPUs locked outside a lease scope (see :func:`release_held_locks`)."""
        for handle in self.held_locks.values():
            try:
                handle.close()
            except OSError:
                pass
        self.held_locks.clear()

    @contextmanager
    def lease_scope(self):
        """Scope of one point (see :func:`lease_scope`)."""
        held: list = []
        self.scopes.append(held)
        try:
            yield held
        finally:
            self.scopes.remove(held)
            for _, handle in held:
                handle.close()  # closing the file drops its flock lock

    def pick_device(self, lock_dir: str | None = None, wait_s: float | None = None) -> int:
        """``device=auto`` (see :func:`pick_device`)."""
        import os
        import time
        scope = self.scopes[-1] if self.scopes else None
        if scope:
            return scope[0][0]
        if scope is None and self.held_locks:
            return next(iter(self.held_locks))
        count = gpu_count()
        if count == 0:
            raise NoGPUError("device=auto: NVML sees no GPU; use mode=compile without a GPU")
        folder = lock_folder(lock_dir)
        os.makedirs(folder, exist_ok=True)
        order = sorted(range(count), key=lambda i: i not in self.opened)  # a GPU this session has opened first
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while True:
            for i in order:
                handle = _try_lock(folder, i)
                if handle is not None:
                    if scope is not None:
                        scope.append((i, handle))
                    else:
                        self.held_locks[i] = handle
                    return i
            if deadline is not None and time.monotonic() > deadline:
                raise NoGPUError(f"device=auto: no GPU became free within {wait_s:g} s")
            time.sleep(LOCK_POLL_S)

    def open_gpu(self, index: int = 0) -> Gpu:
        """Open (once) and return GPU ``index`` (see :func:`open_gpu`)."""
        if index not in self.opened:
            self.opened[index] = Gpu(index)
        self.opened[index].device.set_current()  # a sweep over device=0,1 switches contexts per point
        return self.opened[index]


#: the default session's devices (:func:`gemmlab.run.session.default`: the process's GPUs and
#: locks) and the devices of the session whose point runs now (:meth:`gemmlab.run.session.Session.active`)
_DEVICES: SessionSlot[Devices] = SessionSlot("gemmlab.gpu.device.devices", default=Devices())
LOCK_POLL_S = 0.05


def devices() -> Devices:
    """The devices of the active session (the default session's when none is active)."""
    return _DEVICES.get()


def default_devices() -> Devices:
    """The default session's devices (one a process)."""
    return _DEVICES.default()


def using(held: Devices):
    """Inside the block, :func:`open_gpu`, :func:`pick_device` and :func:`lease_scope` act on
    ``held`` (a session's; :meth:`gemmlab.run.session.Session.active`)."""
    return _DEVICES.using(held)


def release_held_locks() -> None:
    """Unlock the GPUs the active session locked outside a lease scope (otherwise held until the
    process ends, as an OS lock is). For tests and long-lived processes; a point's own locks end
    with its :func:`lease_scope`."""
    devices().release_held_locks()


def gpu_count() -> int:
    """GPUs visible to NVML (no CUDA initialisation); 0 without NVML."""
    try:
        import pynvml
        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0


def lock_folder(lock_dir: str | None = None) -> str:
    """The folder of the per-GPU lock files: ``lock_dir``, else ``$GEMMLAB_LOCK_DIR``, else
    ``$TMPDIR/gemmlab-gpu-locks`` (processes sharing GPUs must share the folder)."""
    import os
    import tempfile
    return lock_dir or os.environ.get("GEMMLAB_LOCK_DIR") or os.path.join(tempfile.gettempdir(), "gemmlab-gpu-locks")


@contextmanager
def lease_scope():
    """Scope of one point: a GPU that :func:`pick_device` locks inside it is unlocked when the
    scope ends, on every exit path (return, exception; a killed process loses its ``flock``
    locks to the kernel). Scopes nest; the innermost one owns the locks taken inside it. The
    active session's (:func:`devices`)."""
    with devices().lease_scope() as held:
        yield held


def _try_lock(folder: str, index: int):
    import fcntl
    import os
    handle = open(os.path.join(folder, f"gpu{index}.lock"), "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def pick_device(lock_dir: str | None = None, wait_s: float | None = None) -> int:
    """``device=auto``: lock the first free GPU (one lock file per GPU, chosen through NVML before
    CUDA initialises), so concurrent processes use distinct GPUs. Inside a :func:`lease_scope`
    (every point the CLI runs) the lock lasts for that point only; outside one it lasts for the
    process's life. With every GPU busy, poll all of them until one frees (``wait_s``: give up
    after that many seconds; None waits for ever).

    Raises:
        NoGPUError: NVML sees no GPU, or none freed within ``wait_s``.
    """
    return devices().pick_device(lock_dir, wait_s)


def open_gpu(index: int = 0) -> Gpu:
    """Open (once for the active session's devices, :func:`devices`: by default the process's) and return GPU ``index``.

    Raises:
        NoGPUError: no driver, no device, or ``index`` out of range (message says how many exist).
    """
    return devices().open_gpu(index)
