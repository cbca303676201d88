"""Exploit x_timer_patch (tests/adversarial, issue 40 item 8; GPU MODE's "timer / stats patch").

a library plugin that launches a right GEMM on the timed stream, and while it is prepared replaces
gemmlab's own sample reader (``gemmlab.stages.timing.Sampler.take``) in the process with one that
reports a thousandth of each sample (restored at close). A drop-in plugin is code run in the point's
process; gemmlab cannot stop it patching gemmlab, but the figure it fakes is refused.

Expected: implausible (net 'plausibility': a thousandth of the naive GEMM's time at 256^3 is far past
the FP32 peak)."""

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
        from gemmlab.stages import timing
        lib = _xlib()
        gpu = lib.gpu_of(pointers.stream)
        honest = gpu.launcher(*lib.gemm(gpu, shape, pointers))
        original = getattr(getattr(timing, "Sampler", None), "take", None)
        if original is None:
            raise RuntimeError("x_timer_patch: gemmlab.stages.timing.Sampler.take is gone; update the exploit")

        def take(sampler):
            return original(sampler) / 1000.0

        timing.Sampler.take = take

        def close():
            timing.Sampler.take = original

        return honest, close


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_timer_patch", description="exploit: library plugin, patches gemmlab's sample reader")]
