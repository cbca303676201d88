"""The whole gemmlab plugin contract, in one place.

A kernel plugin is a Python module (or any object) with a ``gemmlab_kernels`` hook implementation
that returns :class:`KernelSpec` objects. It is found in one of three ways (``gemmlab.registry``):

1. built in: a module in gemmlab's ``plugins/`` folder (installed as ``gemmlab_plugins``);
2. a third-party package exposing a module under the entry-point group ``gemmlab``
   (``[project.entry-points.gemmlab] mykernels = "mypkg.gemm_plugin"``);
3. a drop-in ``*.py`` file in a folder named by the ``plugin_dirs`` config field.

Plugins see plain gemmlab data only: ``Shape``, parameter dicts of ints, :class:`DeviceFacts` and
return :class:`Launch` values. They never import or receive cuda.core objects; the core compiles,
allocates, launches, verifies and times (pattern: pytest's ``hookspec.py``; hook machinery:
pluggy, https://pluggy.readthedocs.io).

The kernel ABI every spec follows (row-major, float32, no leading-dimension padding)::

    extern "C"-free C++ template, instantiated through a name expression, with parameters
    (const float* A, const float* B, float* C, int M, int N, int K)
    A is M x K, B is K x N, C is M x N; C = A @ B (no alpha/beta).

Tile parameters are C++ template arguments, so they are compile-time constants in the generated
code; :meth:`KernelSpec.entry` turns a parameter dict into the name expression, e.g.
``gemm_tiled<64, 64, 16, 8, 2>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, NamedTuple

import pluggy

PROJECT = "gemmlab"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class Shape(NamedTuple):
    """GEMM problem size: A is M x K, B is K x N, C is M x N (row-major, elements)."""

    M: int
    N: int
    K: int


@dataclass(frozen=True)
class DeviceFacts:
    """What a plugin may know about the target GPU (plain data, no CUDA handles).

    ``arch`` is the compile target without prefix ("90" for sm_90). Shared-memory limits are in
    bytes; ``max_shared_per_block`` is the 48 KiB default, ``max_shared_per_block_optin`` the
    limit after the opt-in attribute. In ``mode=compile`` without a GPU, ``sm_count`` and the
    limits are those of the H200 class (sm_90) and ``name`` says so.
    """

    name: str
    arch: str
    sm_count: int
    max_threads_per_block: int = 1024
    max_shared_per_block: int = 48 * 1024
    max_shared_per_block_optin: int = 227 * 1024
    l2_bytes: int = 0


@dataclass(frozen=True)
class Launch:
    """Launch geometry: ``grid`` in blocks and ``block`` in threads (x, y, z), and the dynamic
    shared memory per block in bytes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


class ParamError(ValueError):
    """Raised by :meth:`KernelSpec.check` for a parameter set or shape the kernel cannot run.

    ``field`` names the offending config field (``"kernel.BK"``, ``"shape"``); the message says
    which rule is broken and what is allowed.
    """

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass
class KernelSpec:
    """One GEMM kernel: a CUDA C++ source template plus the rules to instantiate and launch it.

    Subclass it and override :meth:`check`, :meth:`entry`, :meth:`launch` (required) and
    :meth:`ownership` (recommended: it lets the CPU tests prove that every output has exactly
    one owner and every staged tile element is loaded exactly once).

    NVRTC-compiled kernels accept ``precision=fp32`` only; library kernels subclass
    :class:`LibraryKernelSpec`.

    Attributes:
        name: the kernel's config name (``kernel=<name>``); lowercase, ``[a-z][a-z0-9_]*``.
        source: the ``.cu`` file. A bare file name is looked up in gemmlab's ``kernels/``
            folder; a plugin shipping its own source gives an absolute path.
        defaults: tile parameters and their default values (ints), e.g. ``{"BM": 64, ...}``.
            These are the only keys accepted under ``kernel.`` in the config.
        description: one line for ``gemmlab --help``.
    """

    name: str
    source: str | Path
    defaults: Mapping[str, int] = field(default_factory=dict)
    description: str = ""

    def check(self, shape: Shape, params: Mapping[str, int], device: DeviceFacts) -> None:
        """Reject parameters or shapes this kernel cannot run, before anything is compiled.

        Raises:
            ParamError: naming the field (``kernel.<P>`` or ``shape``) and the rule.
        """

    def entry(self, params: Mapping[str, int]) -> str:
        """Return the C++ name expression of the kernel instance, e.g. ``"gemm_naive<16, 16>"``."""
        raise NotImplementedError

    def launch(self, shape: Shape, params: Mapping[str, int], device: DeviceFacts) -> Launch:
        """Return grid, block and dynamic shared bytes for ``shape`` and ``params``."""
        raise NotImplementedError

    def ownership(self, shape: Shape, params: Mapping[str, int]):
        """Replay the kernel's index arithmetic in numpy (optional, used by the CPU tests).

        Returns:
            ``(stores, loads)``: ``stores`` is an int64 array (M, N) counting the guarded stores
            that hit each C element over the whole grid (must be all ones); ``loads`` maps a tile
            name (``"A"``, ``"B"``) to an int64 array counting, for one block and one reduction
            chunk, how often each staged shared-memory element is written (must be all ones).
            Return ``None`` when the kernel has no model.
        """
        return None


@dataclass(frozen=True)
class DevicePointers:
    """Device addresses (plain ints) of the row-major float32 matrices of one launch, and the
    CUDA stream handle (an int) to enqueue on. Given to library-backed kernels only."""

    a: int
    b: int
    c: int
    stream: int


@dataclass
class LibraryKernelSpec(KernelSpec):
    """A kernel provided by a vendor library (e.g. cuBLAS) instead of an NVRTC-compiled source.

    The core still owns the buffers, NaN fill, verification, timing and records; the plugin only
    turns plain data (shape, params, :class:`DevicePointers`, precision) into a zero-argument
    enqueue function through a maintained binding. ``source`` is unused (leave it empty);
    :meth:`entry` and :meth:`launch` are not called.

    Attributes:
        precisions: the ``precision`` values this kernel accepts (``"fp32"``, ``"tf32"``).
    """

    precisions: tuple[str, ...] = ("fp32",)

    def available(self) -> str | None:
        """``None`` when the library can be used here, else a one-line reason with the install hint."""
        return None

    def library_version(self) -> str:
        """The library's version string for the record."""
        return "unknown"

    def enqueue_function(self, shape: Shape, params: Mapping[str, int], pointers: DevicePointers,
                         precision: str):
        """Return ``(enqueue, close)``: ``enqueue()`` issues one C = A @ B on ``pointers.stream``
        without synchronising (it must be capturable in a CUDA graph); ``close()`` frees the
        library's resources.

        Raises:
            ParamError: the precision or parameters are not supported.
        """
        raise NotImplementedError


class KernelHooks:
    """Hook specifications (project name ``gemmlab``). Implement them with ``@hookimpl``."""

    @hookspec
    def gemmlab_kernels(self) -> list[KernelSpec]:
        """Return the kernels this plugin provides.

        Called once when the registry is built. Names must be unique across all plugins; a
        duplicate is an error naming both plugins.
        """
