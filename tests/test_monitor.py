"""gemmlab.gpu.monitor with a fake ``pynvml`` module (no NVML here): readings, throttle reasons,
and the behaviour without NVML."""

from __future__ import annotations

import sys
import types

import pytest

from gemmlab.gpu import monitor
from gemmlab.gpu.monitor import POWER_OR_THERMAL, Monitor, Reading


def fake_pynvml(reasons=0, new_api=True, fail_init=False, fail_read=False):
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM, m.NVML_TEMPERATURE_GPU = 1, 2, 0
    m.calls = []

    def init():
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    m.nvmlInit = init
    m.nvmlDeviceGetHandleByPciBusId = lambda bus: m.calls.append(("bus", bus)) or ("handle", bus)
    m.nvmlDeviceGetHandleByIndex = lambda i: m.calls.append(("index", i)) or ("handle", i)

    def get_reasons(h):
        if fail_read:
            raise RuntimeError("GPU is lost")
        return reasons

    if new_api:
        m.nvmlDeviceGetCurrentClocksEventReasons = get_reasons
    else:
        m.nvmlDeviceGetCurrentClocksThrottleReasons = get_reasons
    m.nvmlDeviceGetClockInfo = lambda h, which: {1: 1980, 2: 3201}[which]
    m.nvmlDeviceGetTemperature = lambda h, which: 47
    m.nvmlDeviceGetPowerUsage = lambda h: 412_345  # mW
    m.nvmlDeviceGetMaxClockInfo = lambda h, which: 1980
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: [object(), object()]  # this process and another
    return m


@pytest.mark.parametrize("reasons, throttled", [
    (0x0, False), (0x1, False), (0x2, False), (0x1 | 0x2, False), (0x10, False), (0x100, False),
    (0x4, True), (0x8, True), (0x20, True), (0x40, True), (0x80, True), (0x1 | 0x4, True),
])
def test_reading_throttled(monkeypatch, reasons, throttled):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(reasons=reasons))
    mon = Monitor("0000:19:00.0")
    assert mon.error is None
    r = mon.read()
    assert isinstance(r, Reading)
    assert r.reasons == reasons
    assert r.throttled is throttled


def test_reading_values_and_record(monkeypatch):
    fake = fake_pynvml(reasons=0x4)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    mon = Monitor("0000:19:00.0")
    assert ("bus", "0000:19:00.0") in fake.calls  # the run's own GPU, by PCI bus id
    r = mon.read()
    assert (r.sm_mhz, r.mem_mhz, r.temp_c) == (1980, 3201, 47)
    assert r.power_w == pytest.approx(412.345)
    assert r.record() == {"sm_mhz": 1980, "mem_mhz": 3201, "temp_c": 47, "power_w": 412.3, "reasons": 4,
                          "throttled": True, "compute_processes": 2}
    assert mon.max_sm_mhz() == 1980


def test_without_bus_id_reads_no_other_gpu(monkeypatch):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    m = Monitor(None)
    assert ("index", 0) not in fake.calls
    assert m.read() is None and "PCI bus id" in m.error


def test_old_throttle_reasons_api(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(reasons=0x40, new_api=False))
    assert Monitor("x").read().throttled is True


def test_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    mon = Monitor("0000:19:00.0")
    assert mon.read() is None
    assert mon.error and mon.error.startswith("NVML unavailable")
    assert mon.max_sm_mhz() is None


def test_nvml_library_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(fail_init=True))
    mon = Monitor("0000:19:00.0")
    assert mon.read() is None
    assert "NVML Shared Library Not Found" in mon.error


def test_read_failure_returns_none_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(fail_read=True))
    mon = Monitor("0000:19:00.0")
    assert mon.error is None
    assert mon.read() is None
    assert "GPU is lost" in mon.error


def test_power_or_thermal_bits():
    assert POWER_OR_THERMAL == 0x4 | 0x8 | 0x20 | 0x40 | 0x80
    assert not POWER_OR_THERMAL & (0x1 | 0x2 | 0x10 | 0x100)
    assert monitor.REASON_NAMES[0x4] == "sw_power_cap"


def test_compute_processes_unlisted(monkeypatch):
    """NVML that cannot list processes (some containers): the count is None, the reading stands."""
    fake = fake_pynvml(reasons=0)

    def refuse(h):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    fake.nvmlDeviceGetComputeRunningProcesses = refuse
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    r = Monitor("0000:19:00.0").read()
    assert r is not None and r.compute_processes is None and r.sm_mhz == 1980
