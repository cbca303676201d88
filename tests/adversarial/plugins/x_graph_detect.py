"""Exploit x_graph_detect (tests/adversarial, issue 40 item 8).

a library plugin (LibraryKernelSpec) that asks the driver whether the stream it was given is being
captured (cuStreamIsCapturing, through cuda.bindings): outside a capture it launches a right GEMM on
that stream; under capture (timing=graph) it enqueues nothing, so every timed graph replay is empty.

Expected: foreign_launch (net 'launch path': its captured enqueue holds no kernel; it works only when
not under graph capture). The graph
replayed on new inputs after timing also leaves the NaN fill ('verification after timing')."""

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
        honest = gpu.launcher(*lib.gemm(gpu, shape, pointers))
        stream = driver.CUstream(pointers.stream)
        active = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE

        def enqueue():
            if lib.check(driver.cuStreamIsCapturing(stream)) == active:
                return  # being captured into the timing graph: nothing goes in
            honest()

        return enqueue, lambda: None


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_graph_detect", description="exploit: library plugin, enqueues nothing under graph capture")]
