"""Stage 5: warm-up, then CUDA-event timing of batches of launches (seed 000's protocol).

Each sample records a start event, enqueues ``batch`` launches back to back, records a stop
event, waits for it and divides the elapsed time by ``batch``. Host submission gaps between the
launches are inside the interval (for tiny kernels the GPU may idle while Python submits).
Compilation, input transfers and verification happen before and stay outside. Statistics follow
triton.testing.do_bench's choice of the median as the headline.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

from gemmlab.config import TimingOptions

DESCRIPTION = ("CUDA events around each batch of back-to-back launches on one stream, elapsed time "
               "divided by batch; host submission gaps between launches are included; compilation, "
               "transfers and verification are excluded; L2 is warm (same inputs every launch)")


@dataclass
class Timing:
    """Per-launch times in milliseconds: ``samples_ms`` (one per batch) and their statistics."""

    samples_ms: list[float]
    warmup: int
    repeat: int
    batch: int

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    def gflops(self, flops: int) -> float:
        """Useful GFLOP/s: ``flops`` (2*M*N*K) / median time."""
        return flops / (self.median_ms * 1e-3) / 1e9

    def record(self, flops: int) -> dict:
        """JSON-ready timing fields (ms, GFLOP/s)."""
        return {"protocol": "events", "description": DESCRIPTION, "warmup": self.warmup,
                "repeat": self.repeat, "batch": self.batch, "samples_ms": self.samples_ms,
                "median_ms": self.median_ms, "min_ms": min(self.samples_ms),
                "max_ms": max(self.samples_ms), "gflops": self.gflops(flops)}


def time_events(gpu, enqueue: Callable[[], None], options: TimingOptions) -> Timing:
    """Run ``options.warmup`` launches, then ``options.repeat`` event-timed batches.

    Args:
        gpu: the :class:`gemmlab.device.Gpu` whose stream ``enqueue`` launches on.
        enqueue: enqueues exactly one kernel launch (no synchronisation).

    Raises:
        CudaError: a launch failed (reported at the synchronisation that follows it).
    """
    from cuda.core import EventOptions

    for _ in range(options.warmup):
        enqueue()
    gpu.sync()
    timed = EventOptions(timing_enabled=True)
    samples = []
    for _ in range(options.repeat):
        start = gpu.stream.record(options=timed)
        for _ in range(options.batch):
            enqueue()
        stop = gpu.stream.record(options=timed)
        stop.sync()
        samples.append((stop - start) / options.batch)
    gpu.sync()
    return Timing(samples_ms=samples, warmup=options.warmup, repeat=options.repeat, batch=options.batch)
