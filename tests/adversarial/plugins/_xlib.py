"""Helpers of the library-plugin exploits (a file whose name starts with ``_`` is not loaded as a
plugin): find gemmlab's open GPU whose stream the core handed over, and compile and load the plain
GEMM of ``x_lib.cu`` (each exploit then launches it where it likes). Loaded by path by the plugins
(:func:`load`) under a ``gemmlab_dropin_`` module name, so a renewed point worker forgets it too."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("x_lib.cu")
MODULE = "gemmlab_dropin_adversarial_xlib"


def load():
    """This module, imported once by path (drop-in plugins cannot import their neighbours)."""
    if MODULE not in sys.modules:
        spec = importlib.util.spec_from_file_location(MODULE, Path(__file__))
        module = importlib.util.module_from_spec(spec)
        sys.modules[MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[MODULE]


def gpu_of(stream_handle: int):
    """The :class:`gemmlab.gpu.device.Gpu` whose stream has this handle (the one the core times)."""
    from gemmlab.gpu import device
    for gpu in list(device.devices().opened.values()):  # the active session's GPUs
        if int(gpu.stream.handle) == int(stream_handle):
            return gpu
    raise RuntimeError(f"exploit: no open gemmlab GPU has stream {stream_handle:#x}")


def gemm(gpu, shape, pointers):
    """``(loaded, launch, args)`` of ``x_lib_gemm<16>`` for C = A @ B (float32, row-major) at the
    given device pointers: launch it with ``gpu.launcher(loaded, launch, args)`` (the timed stream) or
    :func:`launch_on` (any stream)."""
    from gemmlab.contract.hookspecs import Launch
    from gemmlab.gpu import compile as compile_stage
    compiled = compile_stage.compile_kernel(SOURCE, "x_lib_gemm<16>", compile_stage.CompileOptions(arch=gpu.facts.arch),
                                            disassemble=False)
    loaded = gpu.load(compiled.object_code, compiled.name_expression, 0)
    M, N, K = shape.M, shape.N, shape.K
    launch = Launch(grid=(-(-N // 16), -(-M // 16), 1), block=(16, 16, 1))
    args = (np.uint64(pointers.a), np.uint64(pointers.b), np.uint64(pointers.c), np.int32(M), np.int32(N), np.int32(K))
    return loaded, launch, args


def launch_on(stream, loaded, launch, args) -> None:
    """Launch on a cuda.core ``stream`` of the exploit's own."""
    from cuda.core import launch as cu_launch

    from gemmlab.gpu.device import launch_config
    cu_launch(stream, launch_config(launch), loaded.kernel, *args)


def check(result) -> object:
    """A cuda.bindings call's value, or RuntimeError naming the error code."""
    from cuda.bindings import driver
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"exploit: CUDA driver call failed: {err!r}")
    return rest[0] if len(rest) == 1 else tuple(rest)
