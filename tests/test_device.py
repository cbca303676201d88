"""gemmlab/gpu/device.py without a GPU: the ``GpuLike`` protocol that the real :class:`~gemmlab.gpu.device.Gpu`
and the fake GPU of the CPU tests (tests/fakegpu.py) both satisfy."""

from __future__ import annotations

import inspect

from fakegpu import HostGpu
from gemmlab.gpu.device import Gpu, GpuLike

METHODS = sorted(n for n, v in vars(GpuLike).items() if inspect.isfunction(v) and not n.startswith("_"))
ATTRIBUTES = sorted(GpuLike.__annotations__)


def test_protocol_names_the_interface():
    assert {"allocate", "upload", "download", "fill32", "load", "launcher", "capture", "sync"} <= set(METHODS)
    assert ATTRIBUTES == ["facts", "index", "monitor", "stream"]


def test_fake_gpu_satisfies_gpulike():
    gpu = HostGpu()
    assert isinstance(gpu, GpuLike)
    for name in METHODS:  # same parameters, by name and order, as the protocol
        want = list(inspect.signature(getattr(GpuLike, name)).parameters)
        assert list(inspect.signature(getattr(HostGpu, name)).parameters) == want, name


def test_real_gpu_satisfies_gpulike():
    for name in METHODS:
        want = list(inspect.signature(getattr(GpuLike, name)).parameters)
        assert list(inspect.signature(getattr(Gpu, name)).parameters) == want, name
    init = inspect.getsource(Gpu.__init__)  # no GPU here: the attributes Gpu() sets
    for name in ATTRIBUTES:
        assert f"self.{name} = " in init, name


def test_an_incomplete_stand_in_is_not_gpulike():
    members = {name: getattr(HostGpu(), name) for name in METHODS + ATTRIBUTES}
    assert isinstance(type("Whole", (), members)(), GpuLike)
    for missing in ("sync", "facts"):
        partial = type("Partial", (), {k: v for k, v in members.items() if k != missing})
        assert not isinstance(partial(), GpuLike), missing
