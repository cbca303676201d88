"""Clocks, temperature, power and throttle reasons per timing sample, through NVML
(nvidia-ml-py's ``pynvml``). Read after each sample's stop event has completed, so the reads
never fall inside a timed interval.

Throttle reasons are NVML's clocks-event reason bits (``nvmlDeviceGetCurrentClocksEventReasons``,
formerly ``...ThrottleReasons``); a sample counts as throttled when any power or thermal bit is
set: SW power cap (0x4), HW slowdown (0x8), SW thermal (0x20), HW thermal (0x40), HW power
brake (0x80). Idle (0x1) and application-clock settings (0x2) do not count.
"""

from __future__ import annotations

from dataclasses import dataclass

POWER_OR_THERMAL = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
REASON_NAMES = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
                0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
                0x100: "display_clocks"}


@dataclass
class Reading:
    """One telemetry reading: SM and memory clocks (MHz), temperature (°C), power (W), the raw
    reason bits and whether a power/thermal reason was active."""

    sm_mhz: int
    mem_mhz: int
    temp_c: int
    power_w: float
    reasons: int
    throttled: bool
    compute_processes: int | None = None

    def record(self) -> dict:
        return {"sm_mhz": self.sm_mhz, "mem_mhz": self.mem_mhz, "temp_c": self.temp_c,
                "power_w": round(self.power_w, 1), "reasons": self.reasons, "throttled": self.throttled,
                "compute_processes": self.compute_processes}


class Monitor:
    """NVML handle for one GPU, found by PCI bus id. ``read()`` returns a :class:`Reading` or None
    when NVML is unavailable (the record then says why in ``error``)."""

    def __init__(self, pci_bus_id: str | None):
        self.error = None
        self._h = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            if not pci_bus_id:  # never read another GPU's clocks by guessing an index
                raise LookupError("the GPU's PCI bus id is unknown")
            self._h = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
            self._reasons = (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                             or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons)
        except Exception as exc:  # no nvidia-ml-py, no NVML library, unknown bus id
            self.error = f"NVML unavailable: {type(exc).__name__}: {exc}"
            self._h = None

    def read(self) -> Reading | None:
        if self._h is None:
            return None
        n, h = self._nvml, self._h
        try:
            reasons = int(self._reasons(h))
            return Reading(sm_mhz=n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                           mem_mhz=n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
                           temp_c=n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
                           power_w=n.nvmlDeviceGetPowerUsage(h) / 1000.0,
                           reasons=reasons, throttled=bool(reasons & POWER_OR_THERMAL),
                           compute_processes=self._compute_processes())
        except Exception as exc:
            self.error = f"NVML read failed: {type(exc).__name__}: {exc}"
            return None

    def _compute_processes(self) -> int | None:
        """How many processes hold a compute context on this GPU (NVML's
        ``nvmlDeviceGetComputeRunningProcesses``; this process is one of them), or None where NVML
        cannot list them (some containers and MIG setups)."""
        try:
            return len(self._nvml.nvmlDeviceGetComputeRunningProcesses(self._h))
        except Exception:
            return None

    def max_sm_mhz(self) -> int | None:
        """The SM clock's maximum (MHz), or None."""
        if self._h is None:
            return None
        try:
            return int(self._nvml.nvmlDeviceGetMaxClockInfo(self._h, self._nvml.NVML_CLOCK_SM))
        except Exception:
            return None
