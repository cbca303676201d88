"""Exploit x_spin_worker (tests/adversarial, issue 40 item 8): returning before the work is done,
with a spin in another launch.

A library plugin whose first call launches a persistent worker kernel on a stream of its own (one
thread per element of C, alive for ``LIFETIME_S``, recomputing its element whenever a doorbell word
changes); every call then enqueues, on the timed stream, only a one-thread kernel that rings the
doorbell and returns. The timed interval holds the doorbell; the GEMM runs beside it.

Expected: foreign_launch (net 'launch path'): the captured enqueue (a doorbell kernel) replays and
C is right, but this context still has work (the spinning worker) long after the replay completed
on the run's stream: the launch-path check waits for the whole context and refuses the wait."""

from pathlib import Path

import numpy as np

from gemmlab.contract.hookspecs import LibraryKernelSpec, hookimpl

SOURCE = Path(__file__).with_name("x_spin.cu")
LIFETIME_S = 2.0


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
        from gemmlab.contract.hookspecs import Launch
        from gemmlab.gpu import compile as compile_stage
        lib = _xlib()
        gpu = lib.gpu_of(pointers.stream)
        options = compile_stage.CompileOptions(arch=gpu.facts.arch)
        worker = compile_stage.compile_kernel(SOURCE, "x_spin_worker<16>", options, disassemble=False)
        bell_k = compile_stage.compile_kernel(SOURCE, "x_spin_bell<0>", options, disassemble=False)
        worker_loaded = gpu.load(worker.object_code, worker.name_expression, 0)
        bell_loaded = gpu.load(bell_k.object_code, bell_k.name_expression, 0)
        bell = gpu.allocate(256)
        gpu.fill32(int(bell.handle), 0, 64)
        gpu.sync()
        M, N, K = shape.M, shape.N, shape.K
        work = Launch(grid=(-(-N // 16), -(-M // 16), 1), block=(16, 16, 1))
        work_args = (np.uint64(pointers.a), np.uint64(pointers.b), np.uint64(pointers.c), np.int32(M), np.int32(N),
                     np.int32(K), bell, np.uint64(int(LIFETIME_S * 1e9)))
        ring = gpu.launcher(bell_loaded, Launch(grid=(1, 1, 1), block=(1, 1, 1)), (bell,))
        side = gpu.device.create_stream()
        started = [False]

        def enqueue():
            if not started[0]:  # the worker, once, beside the timed stream
                lib.launch_on(side, worker_loaded, work, work_args)
                started[0] = True
            ring()

        def close():  # never raises
            for call in (side.sync, side.close, bell.close):
                try:
                    call()
                except Exception:
                    pass

        return enqueue, close


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_spin_worker",
                    description="exploit: library plugin, a doorbell on the timed stream, the GEMM in a spinning launch")]
