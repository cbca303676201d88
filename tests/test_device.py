"""gemmlab/gpu/device.py without a GPU: the ``GpuLike`` protocol that the real
:class:`~gemmlab.gpu.device.Gpu` and the fake GPU of the CPU tests (tests/fakegpu.py) both
satisfy; device=auto (NVML count, one lock file per GPU) and a device index out of range."""

from __future__ import annotations

import inspect
import select
import subprocess
import sys
import textwrap
import time

import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.errors import NoGPUError
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


# --- device=auto: NVML count, one lock file per GPU -------------------------------------------

CFG = {"kernel": {"name": "naive"}, "shape": [8, 8, 8]}

@pytest.fixture
def no_held_locks():
    gemmlab.gpu.device.release_held_locks()
    yield
    gemmlab.gpu.device.release_held_locks()

def test_pick_device_without_gpus_raises(monkeypatch, no_held_locks, tmp_path):
    monkeypatch.setattr(gemmlab.gpu.device, "gpu_count", lambda: 0)
    with pytest.raises(NoGPUError) as info:
        gemmlab.gpu.device.pick_device(str(tmp_path / "locks"))
    assert "device=auto" in str(info.value)

def test_pick_device_keeps_its_gpu(monkeypatch, no_held_locks, tmp_path):
    monkeypatch.setattr(gemmlab.gpu.device, "gpu_count", lambda: 2)
    first = gemmlab.gpu.device.pick_device(str(tmp_path / "locks"))
    assert first == 0
    assert gemmlab.gpu.device.pick_device(str(tmp_path / "locks")) == first
    assert (tmp_path / "locks" / "gpu0.lock").exists()

def test_run_point_device_auto_without_gpu_is_no_gpu(monkeypatch, no_held_locks, tmp_path):
    monkeypatch.setattr(gemmlab.gpu.device, "gpu_count", lambda: 0)
    from gemmlab.run.pipeline import run_point
    rec = run_point({**CFG, "device": "auto", "mode": "run"}, tmp_path / "p")
    assert rec["status"] == "no_gpu" and rec["valid"] is False
    assert "device=auto" in rec["error"]

# picks a GPU, says which, and holds it (the process lives on) until its stdin is closed
PICK = textwrap.dedent("""
    import sys
    import gemmlab.gpu.device as d
    d.gpu_count = lambda: 2
    print(d.pick_device(sys.argv[1]), flush=True)
    sys.stdin.read()
""")

def test_pick_device_two_processes_get_distinct_gpus(tmp_path, cli_env):
    """Two processes at once: each holds the GPU it picked while the other picks (both have
    answered before either is let go), so they get different ones."""
    locks = str(tmp_path / "locks")
    procs = [subprocess.Popen([sys.executable, "-c", PICK, locks], env=cli_env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    picked, deadline = [], time.monotonic() + 60
    try:
        for p in procs:  # both still running, each holding its pick (a process that never says: "")
            ready, _, _ = select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))
            picked.append(p.stdout.readline() if ready else "")
        for p in procs:
            p.stdin.close()  # let them end
        outs = [(p.stdout.read(), p.stderr.read()) for p in procs if p.wait(timeout=60) is not None]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert sorted(int(line.strip() or -1) for line in picked) == [0, 1], (picked, outs)

def test_device_index_out_of_range_message(monkeypatch):
    from cuda.core import Device
    monkeypatch.setattr(Device, "get_all_devices", staticmethod(lambda: (object(),)))
    with pytest.raises(NoGPUError) as info:
        gemmlab.gpu.device.open_gpu(1)
    text = str(info.value)
    assert "index 1 does not exist" in text and "1 GPU(s) visible" in text
    assert 1 not in gemmlab.gpu.device.devices().opened
