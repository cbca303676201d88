"""Exploit x_host_compute (tests/adversarial, issue 40 item 8).

a library plugin that launches no kernel: each call waits for the timed stream, copies A and B to the
host with synchronous copies (the legacy stream, not the timed one), multiplies them with numpy
(float64, rounded once) and copies C back. Its result is right and bitwise repeatable.

Expected: foreign_launch (net 'launch path'): its synchronisation and host copies break the capture
of its enqueue on the run's stream (host work, not device work on that stream)."""

from pathlib import Path

import numpy as np

from gemmlab.contract.hookspecs import LibraryKernelSpec, hookimpl


def _xlib():
    import importlib.util
    spec = importlib.util.spec_from_file_location("x_adversarial_xlib_loader", Path(__file__).with_name("_xlib.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load()


class Exploit(LibraryKernelSpec):
    def library_version(self):
        return "exploit (tests/adversarial)"

    def enqueue_function(self, shape, params, pointers, precision):
        from cuda.bindings import driver
        lib = _xlib()
        stream = driver.CUstream(pointers.stream)
        a = np.empty((shape.M, shape.K), np.float32)
        b = np.empty((shape.K, shape.N), np.float32)

        def enqueue():
            lib.check(driver.cuStreamSynchronize(stream))  # the NaN fill is done
            lib.check(driver.cuMemcpyDtoH(a.ctypes.data, pointers.a, a.nbytes))
            lib.check(driver.cuMemcpyDtoH(b.ctypes.data, pointers.b, b.nbytes))
            c = np.ascontiguousarray((a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32))
            lib.check(driver.cuMemcpyHtoD(pointers.c, c.ctypes.data, c.nbytes))
            lib.check(driver.cuCtxSynchronize())  # a pageable upload may still be in flight on return

        return enqueue, lambda: None


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_host_compute", description="exploit: library plugin, computes C on the host")]
