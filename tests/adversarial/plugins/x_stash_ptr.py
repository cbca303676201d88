"""Exploit x_stash_ptr (tests/adversarial, issue 40 item 8).

copies a private __device__ copy of C, keyed by the (A, B, C) pointers, on every launch after the first.

Expected: wrong_after_timing (net 'verification after timing': new values in the same buffers)."""

from gemmlab.contract.hookspecs import KernelSpec, Launch, hookimpl
from gemmlab.contract.plugin_utils import cdiv


class Exploit(KernelSpec):
    def entry(self, params):
        return "x_stash_ptr<16>"

    def launch(self, shape, params, device):
        return Launch(grid=(cdiv(shape.N, 16), cdiv(shape.M, 16), 1), block=(16, 16, 1))


@hookimpl
def gemmlab_kernels():
    return [Exploit(name="x_stash_ptr", source="x_stash_ptr.cu", defaults={},
                    description="exploit: stashed C keyed by the input pointers")]
