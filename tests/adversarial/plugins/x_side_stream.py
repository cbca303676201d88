"""Exploit x_side_stream (tests/adversarial, issue 40 item 8).

a library plugin that launches its GEMM on a stream of its own (after waiting for the timed stream,
so it sees the NaN fill and the inputs) and joins that stream back into the timed stream only on its
first call (the correctness launch); every later call's work runs outside the timed interval.

Expected: foreign_launch (net 'launch path'): captured on the run's stream, its second call forks the
capture onto its own stream and never joins it back, so the enqueue cannot be captured."""

from pathlib import Path

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
        gpu = lib.gpu_of(pointers.stream)
        loaded, launch, args = lib.gemm(gpu, shape, pointers)
        side = gpu.device.create_stream()
        core, other = driver.CUstream(pointers.stream), driver.CUstream(int(side.handle))
        flags = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        ready, done = lib.check(driver.cuEventCreate(flags)), lib.check(driver.cuEventCreate(flags))
        calls = [0]

        def enqueue():
            lib.check(driver.cuEventRecord(ready, core))  # after the NaN fill and the inputs
            lib.check(driver.cuStreamWaitEvent(other, ready, 0))
            lib.launch_on(side, loaded, launch, args)
            calls[0] += 1
            if calls[0] == 1:  # only the first call (the correctness launch) is joined back
                lib.check(driver.cuEventRecord(done, other))
                lib.check(driver.cuStreamWaitEvent(core, done, 0))

        def close():  # never raises: a capture that failed may have left the side stream unusable
            for call in (side.sync, lambda: driver.cuEventDestroy(ready), lambda: driver.cuEventDestroy(done),
                         side.close):
                try:
                    call()
                except Exception:
                    pass

        return enqueue, close


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_side_stream", description="exploit: library plugin, GEMM on a side stream of its own")]
