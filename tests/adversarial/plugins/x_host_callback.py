"""Exploit x_host_callback (tests/adversarial, issue 40 item 8).

a library plugin that launches no kernel but, unlike x_host_compute, never synchronises: each call
enqueues on the run's stream asynchronous copies of A and B into pinned host buffers, a host
function (``cuLaunchHostFunc``, a Python callback through ctypes) that multiplies them with numpy
(float64, rounded once) into a pinned C, and an asynchronous copy of that C back to the device. All of
it is ordered on the run's stream and capturable; the result is right and bitwise repeatable.

Expected: foreign_launch (net 'launch path'): its enqueue, captured on the run's stream, holds a host
node and host<->device copy nodes (and no kernel): host work, not device work on that stream."""

import ctypes
from pathlib import Path

import numpy as np

from gemmlab.contract.hookspecs import LibraryKernelSpec, hookimpl

#: the ctypes trampolines handed to the driver: never collected while a host node may still call one
_KEEP: list = []


def _xlib():
    import importlib.util
    spec = importlib.util.spec_from_file_location("x_adversarial_xlib_loader", Path(__file__).with_name("_xlib.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load()


def _pinned(lib, shape: tuple) -> tuple[int, np.ndarray]:
    """A pinned host buffer of float32 ``shape``: its address and a numpy view of it."""
    from cuda.bindings import driver
    count = int(np.prod(shape))
    address = int(lib.check(driver.cuMemAllocHost(4 * count)))
    view = np.ctypeslib.as_array((ctypes.c_float * count).from_address(address)).reshape(shape)
    return address, view


class Exploit(LibraryKernelSpec):
    def library_version(self):
        return "exploit (tests/adversarial)"

    def enqueue_function(self, shape, params, pointers, precision):
        from cuda.bindings import driver
        lib = _xlib()
        M, N, K = shape.M, shape.N, shape.K
        stream = driver.CUstream(pointers.stream)
        buffers = [_pinned(lib, dims) for dims in ((M, K), (K, N), (M, N))]
        (ha, a), (hb, b), (hc, c) = buffers

        def compute(_user_data):  # on the driver's callback thread, after both downloads; no CUDA calls
            try:
                c[:] = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
            except BaseException:
                c[:] = np.nan  # never raise into the driver: a failure shows as a wrong C

        trampoline = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(compute)
        _KEEP.append(trampoline)
        host_fn = driver.CUhostFn(ctypes.cast(trampoline, ctypes.c_void_p).value)

        def enqueue():  # no synchronisation: everything is ordered on the run's stream
            lib.check(driver.cuMemcpyDtoHAsync(ha, pointers.a, a.nbytes, stream))
            lib.check(driver.cuMemcpyDtoHAsync(hb, pointers.b, b.nbytes, stream))
            lib.check(driver.cuLaunchHostFunc(stream, host_fn, 0))
            lib.check(driver.cuMemcpyHtoDAsync(pointers.c, hc, c.nbytes, stream))

        def close():  # never raises; the pinned buffers are freed once every pending callback ran
            try:
                driver.cuCtxSynchronize()
            except Exception:
                pass
            for address, _view in buffers:
                try:
                    driver.cuMemFreeHost(address)
                except Exception:
                    pass

        return enqueue, close


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_host_callback",
                    description="exploit: library plugin, C computed in a host function on the run's stream")]
