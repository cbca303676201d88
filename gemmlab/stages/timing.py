"""Stage 5: warm-up, then timing with CUDA events, by one of two protocols.

``events`` (the protocol of seed 000, the real-device naive vs register-tiled GEMM lab gemmlab
grew from): each sample records a start event, enqueues ``batch`` launches back to back, records
a stop event, waits for it and divides by ``batch``. Host submission gaps between launches are
inside the interval.

``graph``: the ``batch`` launches are captured once into a CUDA graph; each sample records
events around one graph launch, so host submission gaps disappear (the method of
``triton.testing.do_bench_cudagraph``). ``both`` runs the two and records the difference of the
medians as the host/launch overhead per launch.

``l2=cold`` flushes L2 before every sample, outside the timed interval; each sample is then a
single launch (``batch`` is ignored), since a later launch in a batch would find L2 warm. The flush
(``flush``) is ``read`` (default): a kernel reads a scratch buffer of 2x the device's L2 size
(kernels/l2_flush.cu), leaving L2 full of clean scratch lines; or ``write``: the buffer is written
(``cuMemsetD32Async``, as nvbench's L2 flush does), which leaves 2x L2 of dirty lines that the
timed kernel then writes back to DRAM as it evicts them (measured on the H100: docs/results/cold-flush.md).

Adaptive stopping (after nvbench's stopping criterion): at least ``repeat`` samples; then stop
once every candidate's relative standard deviation is at most ``target_rel_spread``, or
``budget_s`` seconds of sampling have passed, or ``max_repeat`` samples exist. Raw samples are
always kept. Candidates (a kernel and its baseline) are sampled alternately, one sample each in
turn, so drifting clocks hit both alike.

An empty kernel timed by the same protocol on the same stream gives the launch floor: a median
near it means the measurement is of the launch, not the kernel.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gemmlab.errors import CudaError
from gemmlab.paths import KERNELS_DIR

PROTOCOLS = ("events", "graph")
DESCRIPTIONS = {
    "events": "CUDA events around each batch of back-to-back launches on one stream, divided by the batch; "
              "host submission gaps between launches are included",
    "graph": "CUDA events around one replay of a CUDA graph holding the batch of launches, divided by the "
             "batch; host submission gaps are excluded",
}
COMMON = "compilation, transfers and verification are excluded"
FLOOR_SOURCE = KERNELS_DIR / "launch_floor.cu"
FLOOR_ENTRY = "gemmlab_empty<0>"
FLUSH_SOURCE = KERNELS_DIR / "l2_flush.cu"
FLUSH_ENTRY = "gemmlab_l2_read<0>"
FLUSHES = ("read", "write")
#: ``timing.shared``: what a point does when the GPU was shared while it was timed
SHARED_MODES = ("refuse", "allow")
#: the environment variable that sets ``timing.shared``'s default, for harnesses that run several
#: gemmlab processes on one GPU on purpose (the gpu test suite's xdist workers: tests/conftest.py)
SHARED_ENV = "GEMMLAB_TIMING_SHARED"


def _shared_default() -> str:
    """``timing.shared``'s default: ``refuse``, or what :data:`SHARED_ENV` says."""
    return os.environ.get(SHARED_ENV) or "refuse"
SPIN_SOURCE = KERNELS_DIR / "spin.cu"
SPIN_ENTRY = "gemmlab_spin<0>"
#: how long the lead kernel (kernels/spin.cu) keeps the GPU busy before a single-launch timing's start
#: event: longer than the host's enqueue of one launch (a cuBLAS call from Python on a cold path:
#: about 0.1 ms on the H100 host, session 31), so the events bracket device work only
SPIN_NS = 300_000
ADAPTIVE_MAX = 1000  # max samples when target_rel_spread is set and max_repeat is null


@dataclass(frozen=True)
class TimingOptions:
    """The timing protocol (``conf/timing/*.yaml``). Times are per launch, in ms.

    Attributes:
        mode: ``events`` | ``graph`` | ``both``.
        l2: ``warm`` (same inputs every launch) | ``cold`` (flush before every sample).
        warmup: launches before sampling. repeat: minimum samples. max_repeat: maximum samples
        (None: = repeat, or 1000 when target_rel_spread is set). target_rel_spread: stop when stdev/mean <= this (None: off).
        budget_s: stop sampling after this many seconds (None: no limit). batch: launches per
        sample. floor: also time an empty kernel. flush: with ``l2=cold``, ``read`` (a read-only
        kernel over a 2x-L2 buffer: L2 left clean) | ``write`` (a memset of it: L2 left dirty).
        shared: ``refuse`` (default) | ``allow``: with ``refuse``, a point during whose timing
        another process held a compute context on the GPU (NVML, ``timing.max_compute_processes``
        > 1) is refused ``shared_gpu``, its figure withheld: another process's kernels perturb the
        figure and open the gaps a timing-aware kernel hides skipped work in (docs/trust.md, "A
        shared GPU"); ``allow`` records it, marked ``SHARED GPU``. Default from
        :data:`SHARED_ENV` where set.
    """

    mode: str = "events"
    l2: str = "warm"
    warmup: int = 5
    repeat: int = 10
    max_repeat: int | None = None
    target_rel_spread: float | None = None
    budget_s: float | None = None
    batch: int = 20
    floor: bool = True
    flush: str = "read"
    shared: str = field(default_factory=_shared_default)

    @property
    def protocols(self) -> tuple[str, ...]:
        return PROTOCOLS if self.mode == "both" else (self.mode,)

    @property
    def launches_per_sample(self) -> int:
        return 1 if self.l2 == "cold" else self.batch


def rel_spread(samples: list[float]) -> float:
    """Relative standard deviation (sample stdev / mean); 0 for fewer than two samples or a zero mean."""
    if len(samples) < 2:
        return 0.0
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if mean > 0 else 0.0


@dataclass
class Series:
    """One candidate's samples under one protocol, with the telemetry read after each sample."""

    samples_ms: list[float] = field(default_factory=list)
    telemetry: list[dict | None] = field(default_factory=list)
    idle_gaps_ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    def record(self, flops: int) -> dict:
        """JSON-ready fields: raw samples, statistics, GFLOP/s, telemetry and throttling."""
        throttled = [t is not None and t["throttled"] for t in self.telemetry]
        clean = [s for s, th in zip(self.samples_ms, throttled) if not th]
        med = self.median_ms
        sm = [t["sm_mhz"] for t in self.telemetry if t]
        procs = [t["compute_processes"] for t in self.telemetry if t and t.get("compute_processes") is not None]
        return {"samples_ms": self.samples_ms, "median_ms": med, "min_ms": min(self.samples_ms),
                "max_ms": max(self.samples_ms), "rel_spread": rel_spread(self.samples_ms),
                "gflops": flops / (med * 1e-3) / 1e9 if med > 0 else None, "throttled_samples": sum(throttled),
                "median_unthrottled_ms": statistics.median(clean) if clean else None,
                "median_sm_mhz": statistics.median(sm) if sm else None, "max_sm_mhz": max(sm) if sm else None,
                "telemetry": self.telemetry,
                # processes with a compute context on the GPU after each sample (this one included):
                # more than 1 means the timed launches shared the GPU (docs/trust.md, "A shared GPU")
                "max_compute_processes": max(procs) if procs else None,
                **({"idle_gaps_ms": self.idle_gaps_ms} if self.idle_gaps_ms else {})}


class Sampler:
    """Times one enqueue function by one protocol on ``gpu``'s stream."""

    def __init__(self, gpu, enqueue: Callable[[], None], protocol: str, launches: int,
                 flush: Callable[[], None] | None, idle_check: bool = False):
        from cuda.core import EventOptions
        self.gpu, self.launches, self.flush, self.idle_check = gpu, launches, flush, idle_check
        self.idle_gap_ms: float | None = None
        self.timed = EventOptions(timing_enabled=True)
        if protocol == "graph":
            self.body = gpu.capture(enqueue, launches)
            self.body()  # the first replay uploads the graph: keep it out of the samples
            gpu.sync()
        else:
            def body():
                for _ in range(launches):
                    enqueue()
            self.body = body

    def take(self) -> float:
        """One sample: ms per launch."""
        if self.flush is not None:
            self.flush()
        elapsed = _between_events(self.gpu, self.timed, self.body)
        if self.idle_check:  # device-wide completion: how long this context still had work after the stop
            self.idle_gap_ms = time_device_sync(self.gpu)
        return elapsed / self.launches


def _between_events(gpu, timed, body: Callable[[], None]) -> float:
    """ms between CUDA events recorded (with ``timed`` options) before and after ``body()`` on
    ``gpu``'s stream, waited for.

    Raises:
        CudaError: a launch failed, or a fault first seen at the stop event (cuda.core's CUDAError).
    """
    try:
        start = gpu.stream.record(options=timed)
        body()
        stop = gpu.stream.record(options=timed)
        stop.sync()
        return stop - start
    except CudaError:
        raise
    except Exception as exc:
        raise CudaError(f"kernel failed: {exc}") from None


def measure(gpu, candidates: dict[str, Callable[[], None]], options: TimingOptions, flush=None,
            floor_enqueue: Callable[[], None] | None = None, replay: bool = False,
            idle_check: frozenset = frozenset()) -> dict:
    """Warm up and sample every candidate (alternately) under each protocol of ``options``.

    Args:
        gpu: :class:`gemmlab.gpu.device.Gpu`.
        candidates: ``{name: enqueue}``; each ``enqueue()`` issues exactly one launch.
        flush: L2 flush (required when ``options.l2 == "cold"``).
        floor_enqueue: launches the empty kernel (timed like the candidates when given).
        replay: keep what the last protocol timed (the graph of a batch, or the batch of direct
            launches) as ``out["replay"][name]``, a zero-argument function, so that the output of
            exactly that path can be verified afterwards; its graphs are then not released (the
            caller calls ``gpu.release_graphs()``).
        idle_check: candidates whose every sample also measures the device-idle gap: after the
            stop event completes, the host times ``gpu.device_sync()`` (every stream of this
            context; other processes' work does not count): how long this context still had work
            (``Series.idle_gaps_ms``, ms; the empty floor kernel gets the same, the call's own cost).

    Returns:
        ``{"protocols": {protocol: {name: Series}}, "floor": {protocol: Series},
        "stopped_by": {protocol: reason}, "replay": {name: fn}}`` (``replay`` only when asked).

    Raises:
        CudaError: a launch, capture or synchronisation failed.
    """
    launches = options.launches_per_sample
    flush = flush if options.l2 == "cold" else None
    out = {"protocols": {}, "floor": {}, "stopped_by": {}}
    max_repeat = options.max_repeat or (ADAPTIVE_MAX if options.target_rel_spread is not None else options.repeat)
    for protocol in options.protocols:
        for enqueue in candidates.values():
            for _ in range(options.warmup):
                enqueue()
        gpu.sync()
        samplers = {name: Sampler(gpu, enq, protocol, launches, flush, idle_check=name in idle_check)
                    for name, enq in candidates.items()}
        series = {name: Series() for name in candidates}
        started = time.perf_counter()
        while True:
            for name, sampler in samplers.items():
                series[name].samples_ms.append(sampler.take())
                if sampler.idle_gap_ms is not None:
                    series[name].idle_gaps_ms.append(sampler.idle_gap_ms)
                reading = gpu.monitor.read()
                series[name].telemetry.append(reading.record() if reading else None)
            n = len(next(iter(series.values())).samples_ms)
            if n < options.repeat:
                continue
            over_budget = options.budget_s is not None and time.perf_counter() - started >= options.budget_s
            if options.target_rel_spread is None:
                if n >= max_repeat or over_budget:
                    reason = "repeat" if n >= max_repeat else "budget"
                    break
                continue
            if all(rel_spread(s.samples_ms) <= options.target_rel_spread for s in series.values()):
                reason = "converged"
                break
            if n >= max_repeat:
                reason = "max_repeat"
                break
            if over_budget:
                reason = "budget"
                break
        out["protocols"][protocol] = series
        out["stopped_by"][protocol] = reason
        if options.floor and floor_enqueue is not None:
            floor = Sampler(gpu, floor_enqueue, protocol, launches, flush, idle_check=bool(idle_check))
            for _ in range(options.warmup):
                floor_enqueue()
            floor_series = Series()
            for _ in range(options.repeat):
                floor_series.samples_ms.append(floor.take())
                if floor.idle_gap_ms is not None:
                    floor_series.idle_gaps_ms.append(floor.idle_gap_ms)
            out["floor"][protocol] = floor_series
        if replay and protocol == options.protocols[-1]:
            out["replay"] = {name: sampler.body for name, sampler in samplers.items()}
        else:
            gpu.release_graphs()
    gpu.sync()
    return out


def time_once(gpu, enqueue: Callable[[], None], lead: Callable[[], None] | None = None) -> float:
    """ms of one ``enqueue()`` between two CUDA events on ``gpu``'s stream (synchronised).

    ``lead``: device work enqueued before the start event (:func:`spin_enqueue`'s kernel), so the
    GPU is still busy with it while the host enqueues ``enqueue``'s launch: without it an idle GPU
    reaches the start event at once and the interval holds the host's enqueue time too (on the H100,
    a decode-shape cuBLAS launch timed alone: 0.106 ms for the first call, 0.023 ms for the next, 0.005
    ms in a graph; session 31). nvbench's blocking kernel serves the same purpose.

    Raises:
        CudaError: the launch or the events failed.
    """
    from cuda.core import EventOptions
    if lead is not None:
        lead()
    return _between_events(gpu, EventOptions(timing_enabled=True), enqueue)


def time_device_sync(gpu) -> float:
    """ms the host waits in ``gpu.device_sync()``: every stream of this context (other processes'
    work is not waited for), so more than the call's own cost means this context still had work."""
    waited = time.perf_counter()
    gpu.device_sync()
    return (time.perf_counter() - waited) * 1e3



def describe(options: TimingOptions) -> str:
    """One line saying what the recorded times include."""
    parts = [DESCRIPTIONS[p] for p in options.protocols]
    how = "read by a kernel (L2 left clean)" if options.flush == "read" else "written (L2 left dirty)"
    l2 = (f"L2 cold: a 2x-L2 scratch buffer is {how} before every sample (outside the interval), one "
          "launch per sample" if options.l2 == "cold" else "L2 warm: the same inputs every launch")
    return "; ".join(parts) + f"; {COMMON}; {l2}"


def floor_source() -> Path:
    """The empty kernel used for the launch floor."""
    return FLOOR_SOURCE
