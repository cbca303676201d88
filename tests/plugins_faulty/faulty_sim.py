"""Drop-in test plugin: kernel ``sim_fault`` simulates, on a machine without a GPU, what a faulty
CUDA kernel does to the process that runs it, from inside ``check()`` (called in every mode):

- ``MODE=1`` healthy (compiles and runs the naive kernel);
- ``MODE=2`` a *sticky* CUDA error: this point fails with CUDA_ERROR_MISALIGNED_ADDRESS and every
  later point in the same process fails the same way (a poisoned CUDA context);
- ``MODE=3`` the process dies (``os._exit(3)``); ``MODE=4`` a segfault (SIGSEGV);
- ``MODE=5`` a hang (sleeps for an hour; only a watchdog ends it); where the environment names a
  file in ``GEMMLAB_TEST_HANG_MARKER``, it is created first (a test then knows the point hangs);
- ``MODE=6`` the same hang inside a temporary folder like the one ``gemmlab.gpu.sass.disassemble``
  holds while nvdisasm runs (a worker killed there: who removes the folder?);
- ``MODE=7`` ``check()`` raises KeyboardInterrupt itself (no signal: the plugin's own code).
"""

import os
import signal
import time

from gemmlab.errors import CudaError
from gemmlab.contract.hookspecs import hookimpl
from gemmlab_plugins.naive import NaiveKernel

POISONED = []  # this process's simulated CUDA context state
#: environment variable: a file that a MODE=5 point creates just before it hangs
HANG_MARKER_ENV = "GEMMLAB_TEST_HANG_MARKER"


class SimFault(NaiveKernel):
    def check(self, shape, params, device):
        if POISONED:
            raise CudaError("kernel failed: CUDA_ERROR_MISALIGNED_ADDRESS (sticky, from an earlier point)")
        mode = params["MODE"]
        if mode == 2:
            POISONED.append(True)
            raise CudaError("kernel failed: CUDA_ERROR_MISALIGNED_ADDRESS")
        if mode == 3:
            os._exit(3)
        if mode == 4:
            os.kill(os.getpid(), signal.SIGSEGV)
        if mode == 5:
            if os.environ.get(HANG_MARKER_ENV):
                open(os.environ[HANG_MARKER_ENV], "a").close()
            time.sleep(3600)
        if mode == 6:
            import tempfile

            from gemmlab.gpu import sass
            tempfile.mkdtemp(prefix=f"{sass.TEMP_PREFIX}{os.getpid()}-")
            time.sleep(3600)
        if mode == 7:
            raise KeyboardInterrupt
        super().check(shape, params, device)

    def entry(self, params):
        return f"gemm_naive<{params['BX']}, {params['BY']}>"


@hookimpl
def gemmlab_kernels():
    return [SimFault(name="sim_fault", source="naive.cu", defaults={"BX": 16, "BY": 16, "MODE": 1},
                     description="test plugin: MODE 2 sticky CUDA error, 3 exit, 4 segfault, 5 hang, "
                                 "6 hang in a temp folder, 7 raises KeyboardInterrupt")]
