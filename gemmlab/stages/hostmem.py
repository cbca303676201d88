"""Peak host memory of one point: the process's resident-set high-water mark (``VmHWM`` in
``/proc/self/status``), reset at the start of each point by writing ``5`` to
``/proc/self/clear_refs`` (Linux >= 4.0, proc(5)), so a worker process that runs many points
reports each point's own peak. Where the reset is not possible the process-lifetime peak
(``getrusage`` ``ru_maxrss``) is reported and the record says so.
"""

from __future__ import annotations

import resource


def reset_peak() -> bool:
    """Reset this process's RSS high-water mark; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _vm_hwm() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak(reset_done: bool) -> dict:
    """The record's ``host_memory`` field: ``peak_bytes`` and where the figure comes from."""
    hwm = _vm_hwm()
    if hwm is not None and reset_done:
        return {"peak_bytes": hwm, "source": "VmHWM of the point's process, reset at the point's start"}
    return {"peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "source": "ru_maxrss: the process's lifetime peak (could not reset it per point)"}
