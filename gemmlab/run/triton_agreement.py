"""gemmlab's timing against Triton's own timers on the same compiled Triton kernel (issue 46, item 4).

For one Triton kernel, precision, B layout and shape, :func:`agreement` measures

- ``gemmlab_graph_ms``: a gemmlab point timed with ``timing.mode=graph`` and warm L2
  (:data:`GRAPH_TIMING`: 10 warm-up launches, 30 samples of 20 launches; CUDA events around one
  replay of a captured batch of launches, the median over samples; :mod:`gemmlab.stages.timing`),
  the kernel verified like every point;
- ``gemmlab_matched_ms``: a second warm graph point shaped like ``do_bench_cudagraph`` (below): 10
  samples of ``n = max(1, int(DO_BENCH_REP_MS / gemmlab_graph_ms))`` launches each
  (:func:`matched_batch`, :func:`matched_timing`; ``n`` clamped to ``timing.batch``'s range,
  :data:`BATCH_RANGE`); off with ``agreement(..., matched=False)``;
- ``do_bench_cudagraph_ms``: ``triton.testing.do_bench_cudagraph(fn, return_mode="median")`` on the
  same compiled kernel (gemmlab's own Triton compile of the same function, specialisation and
  parameters) launched on PyTorch tensors of the same shape and types: warm L2 too (no flush), one
  graph of ``rep / estimate`` launches replayed 10 times, the median of the 10 per-launch means.
  While it runs, a background thread reads the GPU's SM clock and throttle reasons through NVML
  every :data:`POLL_INTERVAL_S` (:class:`ClockPoll`, gemmlab's :class:`gemmlab.gpu.monitor.Monitor`):
  ``do_bench_cudagraph_clocks``.

They measure the same thing by the same method, so they should agree: :data:`TOLERANCE` (2%) is the
protocol agreement the gpu test asserts (not a speed target). ``within_tolerance`` holds it for the
default graph point, ``within_tolerance_matched`` for the matched one; ``duty_cycle_note`` states
each protocol's samples, launches per sample, sample length and median SM clock. Where the two
differ by design, cold L2, it measures

- ``gemmlab_cold_ms``: a gemmlab point with ``timing.l2=cold``, ``flush=write`` (each sample one
  launch after a ``cuMemsetD32Async`` over twice the L2, outside the timed interval), events;
- ``do_bench_ms``: ``triton.testing.do_bench(fn, return_mode="median")``: each launch timed alone
  with events after Triton's L2 flush (zeroing a 256 MB buffer with a memset), no graph, so its
  interval also holds the host's launch of ``fn`` when the GPU waits for it;

and reports their ratio without a target (the flush sizes and what a sample holds differ).

Both Triton timers need PyTorch (``torch.cuda`` events, streams and graphs; the kernel's buffers are
torch tensors here). Before timing, the Triton launch on the torch tensors is checked against a
float64 product on the CPU of a row sample (so a timer never times a kernel that computes nothing).

Used by ``.ci/triton_agreement.py OUTDIR`` (every case of its ``CASES``, one record archive) and the
gpu test ``tests/test_gpu_triton_agreement.py`` (one case).
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

TOLERANCE = 0.02  # |do_bench_cudagraph / gemmlab graph - 1| the gpu test accepts (issue 46 item 4)
GRAPH_TIMING = MappingProxyType({"mode": "graph", "l2": "warm", "warmup": 10, "repeat": 30, "batch": 20})
COLD_TIMING = MappingProxyType({"mode": "events", "l2": "cold", "flush": "write", "warmup": 10, "repeat": 50})
#: the launch check's limit on |C - A@B| / (|A||B|) per precision (a sanity check, not gemmlab's bound)
CHECK_LIMITS = MappingProxyType({"fp32": 1e-5, "tf32": 2e-3, "bf16": 1e-2, "fp16": 2e-3})
TORCH_DTYPES = MappingProxyType({"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"})
#: triton.testing.do_bench_cudagraph's default ``rep`` (ms; triton/testing.py do_bench_cudagraph):
#: the graph it replays holds ``max(1, int(rep / estimate_ms))`` launches
DO_BENCH_REP_MS = 20
#: how many times do_bench_cudagraph replays that graph, one sample each (triton/testing.py
#: do_bench_cudagraph)
DO_BENCH_REPLAYS = 10
#: ``timing.batch``'s allowed range, inclusive (gemmlab.stages.config.FIELD_RULES["timing.batch"])
BATCH_RANGE = (1, 100_000)
#: seconds between two NVML reads of :class:`ClockPoll` while do_bench_cudagraph runs
POLL_INTERVAL_S = 0.002


def case_name(kernel: str, precision: str, layout_b: str, shape) -> str:
    """``triton_matmul-bf16-col-4096x4096x4096``."""
    return f"{kernel}-{precision}-{layout_b}-{'x'.join(map(str, shape))}"


#: the gemmlab points run in the calling process (``isolation.process: false``): Triton's timers
#: hold a PyTorch CUDA context in this process (opened by an earlier case, or by the caller), so a
#: point in a worker process would share the GPU with it and the shared-GPU check
#: (``timing.shared=refuse``) would refuse its timing
ISOLATION = MappingProxyType({"process": False})


def point_config(kernel: str, precision: str, layout_b: str, shape, timing: Mapping[str, Any],
                 params: Mapping[str, int] | None = None) -> dict:
    """The gemmlab point's config: the kernel at its defaults (or ``params``), A row-major, no
    baseline, run in the calling process (:data:`ISOLATION`)."""
    return {"kernel": {"name": kernel, **dict(params or {})}, "shape": list(shape), "precision": precision,
            "layout": {"a": "row", "b": layout_b}, "timing": dict(timing), "baseline": None,
            "isolation": dict(ISOLATION)}


def matched_batch(graph_median_ms: float) -> tuple[int, int]:
    """The launches per sample of do_bench_cudagraph's shape for a kernel of ``graph_median_ms`` (ms
    per launch): ``(n, wanted)`` with ``wanted = max(1, int(DO_BENCH_REP_MS / graph_median_ms))`` and
    ``n`` that clamped to :data:`BATCH_RANGE` (``n != wanted`` when clamped).

    Raises:
        ValueError: ``graph_median_ms`` is not a positive finite number.
    """
    ms = float(graph_median_ms)
    if not 0 < ms < float("inf"):
        raise ValueError(f"graph median must be a positive finite number of ms, got {graph_median_ms!r}")
    wanted = max(1, int(DO_BENCH_REP_MS / ms))
    return min(max(wanted, BATCH_RANGE[0]), BATCH_RANGE[1]), wanted


def matched_timing(batch: int) -> dict:
    """The matched point's timing: :data:`GRAPH_TIMING`'s mode, L2 and warm-up with
    :data:`DO_BENCH_REPLAYS` samples of ``batch`` launches (:func:`matched_batch`)."""
    return {"mode": "graph", "l2": "warm", "warmup": GRAPH_TIMING["warmup"], "repeat": DO_BENCH_REPLAYS,
            "batch": int(batch)}


class ClockPoll:
    """A context manager that reads ``monitor`` (a :class:`gemmlab.gpu.monitor.Monitor`, or anything
    whose ``read()`` returns a :class:`gemmlab.gpu.monitor.Reading` or None) every ``interval_s``
    seconds in a background thread from ``__enter__`` to ``__exit__``; :meth:`summary` says what
    the readings show. A read that returns after ``__exit__`` began is dropped.

    Raises:
        RuntimeError: entered twice.
    """

    def __init__(self, monitor, interval_s: float = POLL_INTERVAL_S):
        self.monitor = monitor
        self.interval_s = float(interval_s)
        self.readings: list = []
        self.missed = 0
        self.wall_s = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0

    def __enter__(self) -> "ClockPoll":
        if self._thread is not None:
            raise RuntimeError("ClockPoll entered twice")
        self._start = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="gemmlab-clock-poll", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> bool:
        self._stop.set()
        self._thread.join()
        self.wall_s = time.perf_counter() - self._start
        return False

    def _run(self) -> None:
        while not self._stop.is_set():
            reading = self.monitor.read()
            if self._stop.is_set():
                break
            if reading is None:
                self.missed += 1
            else:
                self.readings.append(reading)
            self._stop.wait(self.interval_s)

    def summary(self) -> dict:
        """``{"readings", "missed", "wall_ms", "median_sm_mhz", "min_sm_mhz", "max_sm_mhz",
        "throttled_share", "reasons_seen"}``: how many reads gave a reading and how many gave none,
        the poll's wall time (ms), the SM clock's median, lowest and highest (MHz), the share of
        readings with a power or thermal reason (``Reading.throttled``, 0..1) and the sorted names
        (:data:`gemmlab.gpu.monitor.REASON_NAMES`) of the reason bits seen in any reading. Without a
        reading: ``{"error": ...}`` (the monitor's error, or that NVML gave no reading)."""
        from gemmlab.gpu.monitor import REASON_NAMES
        got = self.readings
        if not got:
            return {"error": getattr(self.monitor, "error", None) or f"NVML gave no reading in {self.missed} read(s)"}
        mhz = [r.sm_mhz for r in got]
        return {"readings": len(got), "missed": self.missed, "wall_ms": round(self.wall_s * 1e3, 3),
                "median_sm_mhz": statistics.median(mhz), "min_sm_mhz": min(mhz), "max_sm_mhz": max(mhz),
                "throttled_share": sum(bool(r.throttled) for r in got) / len(got),
                "reasons_seen": sorted(name for bit, name in REASON_NAMES.items()
                                       if any(int(r.reasons) & bit for r in got))}


def triton_timers(kernel: str, precision: str, layout_b: str, shape, params: Mapping[str, int] | None = None,
                  out_dir: str | Path | None = None) -> dict:
    """Triton's two timers on gemmlab's compile of ``kernel`` (see the module docstring):
    ``{"do_bench_cudagraph_ms", "do_bench_ms", "do_bench_cudagraph_clocks", "check": {...},
    "triton_version", "torch_version", "params", "grid"}``; ``do_bench_cudagraph_clocks`` is
    :meth:`ClockPoll.summary` of NVML reads of this GPU (found by its PCI bus id) while
    do_bench_cudagraph ran.

    Raises:
        ImportError: PyTorch or Triton cannot be imported.
        RuntimeError: the launch on the torch tensors gives a wrong result (the sampled rows).
        gemmlab.errors.ConfigError: the kernel refuses the problem or parameters.
    """
    import numpy as np
    import torch
    import triton
    import triton.testing
    from gemmlab.contract.hookspecs import Dim, Matrix, Problem, Shape
    from gemmlab.contract.registry import load_registry
    from gemmlab.gpu.backends import TritonBackend
    from gemmlab.gpu.device import open_gpu
    from gemmlab.gpu.monitor import Monitor

    spec = load_registry().get(kernel)
    gpu = open_gpu(0)
    monitor = Monitor(gpu.pci_bus_id)
    facts = gpu.facts
    M, N, K = (int(x) for x in shape)
    problem = Problem(Shape(M, N, K), precision, "row", layout_b)
    backend = TritonBackend("kernel", kernel, spec, {**spec.defaults, **dict(params or {})}, kind="triton")
    backend.validate(problem, facts)
    backend.compile(problem, facts, facts.arch, Path(out_dir or "."), False, None)
    compiled = backend.compiled.compiled
    dtype = getattr(torch, TORCH_DTYPES[precision])
    gen = torch.Generator(device="cuda").manual_seed(46)
    a = torch.randn((M, K), device="cuda", generator=gen).to(dtype)
    b = torch.randn((N, K) if layout_b == "col" else (K, N), device="cuda", generator=gen).to(dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    tensors = {"A": a, "B": b, "C": c}
    values = []
    for arg in backend.arguments:
        if isinstance(arg, Matrix):
            values.append(tensors[arg.name].data_ptr())
        elif isinstance(arg, Dim):
            values.append(int(getattr(problem, arg.name)))
        else:  # Value
            values.append(arg.value)
    args = tuple(values[ref] if how == "arg" else ref for how, ref in backend.special.order)
    meta = compiled.metadata
    per_program = int(getattr(meta, "global_scratch_size", 0) or 0)
    scratch = torch.empty(max(1, per_program * backend.launch.blocks * max(1, int(getattr(meta, "num_ctas", 1) or 1))),
                          device="cuda", dtype=torch.uint8)  # one buffer, allocated before timing
    from triton.runtime import _allocation  # the allocator Triton's launcher reads (triton.set_allocator's)
    token = _allocation._allocator.set(lambda size, align, stream: scratch)
    runner = compiled[tuple(backend.launch.grid)]

    def fn():
        runner(*args, stream=torch.cuda.current_stream().cuda_stream)

    try:
        return _timed(fn, kernel, precision, layout_b, M, a, b, c, backend, torch, triton, np, monitor)
    finally:
        _allocation._allocator.reset(token)
        backend.close()


def _timed(fn, kernel, precision, layout_b, M, a, b, c, backend, torch, triton, np, monitor) -> dict:
    """Check the launch on the torch tensors (sampled rows), then run Triton's two timers, polling
    ``monitor`` (:class:`ClockPoll`) while do_bench_cudagraph runs.

    Raises:
        RuntimeError: the sampled rows are off by more than :data:`CHECK_LIMITS` allows.
    """
    fn()
    torch.cuda.synchronize()
    rows = np.unique(np.linspace(0, M - 1, 8).astype(int))
    picked = torch.tensor(rows.tolist(), device=a.device)
    a64 = a[picked].double().cpu().numpy()
    b64 = (b.double().t() if layout_b == "col" else b.double()).cpu().numpy()
    want = a64 @ b64
    got = c[picked].double().cpu().numpy()
    scale = np.abs(a64) @ np.abs(b64)
    err = float(np.max(np.abs(got - want) / np.maximum(scale, 1e-30)))
    limit = CHECK_LIMITS[precision]
    if not np.isfinite(got).all() or err > limit:  # a sanity check of the launch, not gemmlab's verification
        raise RuntimeError(f"{kernel} on torch tensors: sampled rows off by {err:.3g} x |A||B| (limit {limit:g})")
    with ClockPoll(monitor) as poll:
        graph_ms = float(triton.testing.do_bench_cudagraph(fn, return_mode="median"))
    cold_ms = float(triton.testing.do_bench(fn, return_mode="median"))
    return {"do_bench_cudagraph_ms": graph_ms, "do_bench_ms": cold_ms, "do_bench_cudagraph_clocks": poll.summary(),
            "check": {"rows": [int(r) for r in rows], "max_error_over_abs_product": err, "limit": limit},
            "triton_version": str(triton.__version__), "torch_version": str(torch.__version__),
            "params": dict(backend.params), "grid": list(backend.launch.grid)}


def clocks(record: Mapping[str, Any]) -> dict:
    """What a gemmlab record's timing telemetry says about the SM clock over its samples: median and
    max SM clock (MHz), throttled samples of all samples, and the median over the unthrottled samples
    (ms; None when every sample was throttled). Empty when the record has no timing."""
    t = record.get("timing") or {}
    if not t:
        return {}
    return {"median_sm_mhz": t.get("median_sm_mhz"), "max_sm_mhz": t.get("max_sm_mhz"),
            "throttled_samples": t.get("throttled_samples"), "samples": len(t.get("samples_ms") or []),
            "median_unthrottled_ms": t.get("median_unthrottled_ms")}


def _mhz(value) -> str:
    """``1530 MHz``, or ``an unread SM clock`` for None."""
    return "an unread SM clock" if value is None else f"{value:g} MHz"


def duty_cycle_note(summary: Mapping[str, Any]) -> str:
    """One sentence of the figures behind the protocols' duty cycles, from an :func:`agreement`
    summary holding ``gemmlab_graph_ms`` and ``do_bench_cudagraph_ms``: gemmlab's default protocol
    (samples x launches, each sample's length in ms, median SM clock), do_bench_cudagraph's (10
    replays of about ``max(1, int(DO_BENCH_REP_MS / do_bench_cudagraph_ms))`` launches: its own count
    comes from an estimate it does not return) and, where measured, gemmlab with Triton's shape and
    its ratio.

    Raises:
        KeyError: ``gemmlab_graph_ms`` or ``do_bench_cudagraph_ms`` missing.
    """
    graph_ms, triton_ms = summary["gemmlab_graph_ms"], summary["do_bench_cudagraph_ms"]
    g = summary.get("gemmlab_graph_clocks") or {}
    t = summary.get("do_bench_cudagraph_clocks") or {}
    batch = GRAPH_TIMING["batch"]
    launches = max(1, int(DO_BENCH_REP_MS / triton_ms))
    note = (f"gemmlab's default protocol: {g.get('samples') or GRAPH_TIMING['repeat']} samples of {batch} launches "
            f"({batch * graph_ms:.3g} ms each) at median {_mhz(g.get('median_sm_mhz'))}; do_bench_cudagraph: "
            f"{DO_BENCH_REPLAYS} replays of about {launches} launches ({launches * triton_ms:.3g} ms each) at "
            f"median {_mhz(t.get('median_sm_mhz'))}")
    if "gemmlab_matched_ms" in summary:
        m = summary.get("gemmlab_matched_clocks") or {}
        n = summary["matched_batch"]
        note += (f"; gemmlab with Triton's shape ({m.get('samples') or DO_BENCH_REPLAYS} samples of {n} launches, "
                 f"{n * summary['gemmlab_matched_ms']:.3g} ms each, at median {_mhz(m.get('median_sm_mhz'))}): "
                 f"ratio {summary['ratio_matched']:.4f}")
    return note


def agreement(kernel: str, precision: str, layout_b: str, shape, out_dir: str | Path,
              params: Mapping[str, int] | None = None, cold: bool = True, session=None,
              matched: bool = True) -> tuple[dict, dict]:
    """Measure one case (module docstring) under ``out_dir`` (``graph/``, ``matched/``, ``cold/``
    point folders, run in that order); the gemmlab points run through ``session`` (a
    :class:`gemmlab.run.session.Session`, default a new one), gemmlab's one point runner, in this
    process (:data:`ISOLATION`). ``matched``: also run the matched point (its batch from the graph
    point's median, :func:`matched_batch`); ``cold``: also the cold point.

    Returns:
        ``(summary, records)``: the medians (ms), ``ratio_graph`` (do_bench_cudagraph / gemmlab
        graph), ``within_tolerance``, ``ratio_cold`` (do_bench / gemmlab cold, no target), the
        versions and device; ``gemmlab_graph_clocks`` (:func:`clocks` of the graph point),
        ``do_bench_cudagraph_clocks`` (:meth:`ClockPoll.summary`) and ``duty_cycle_note``
        (:func:`duty_cycle_note`); with ``matched``: ``gemmlab_matched_ms``, ``matched_batch``
        (``matched_batch_note`` where it was clamped to :data:`BATCH_RANGE`), ``ratio_matched``
        (do_bench_cudagraph / gemmlab matched), ``within_tolerance_matched`` and
        ``gemmlab_matched_clocks``; where some graph samples were throttled,
        ``ratio_graph_unthrottled`` (do_bench_cudagraph / the unthrottled samples' median) with
        ``throttled_note``. ``records`` maps ``graph``/``matched``/``cold`` to the gemmlab records.
        A point that is not ok, or Triton or PyTorch missing, gives ``error`` and no ratios.

    Raises:
        RuntimeError: Triton's launch on the torch tensors computes a wrong result
            (:func:`triton_timers`).
        gemmlab.errors.ConfigError: the kernel refuses the problem or parameters (:func:`triton_timers`).
        ValueError: an ok graph point's median is not a positive number (:func:`matched_batch`).
    """
    from gemmlab.run.session import Session
    run_point = (session or Session()).run_point
    out = Path(out_dir)
    records = {"graph": run_point(point_config(kernel, precision, layout_b, shape, GRAPH_TIMING, params), out / "graph")}
    summary: dict = {"case": case_name(kernel, precision, layout_b, shape), "kernel": kernel, "precision": precision,
                     "layout_b": layout_b, "shape": list(shape), "tolerance": TOLERANCE,
                     "device": records["graph"].get("device", {}).get("name")}
    if matched and records["graph"].get("status") == "ok":
        batch, wanted = matched_batch(records["graph"]["timing"]["median_ms"])
        summary["matched_batch"] = batch
        if batch != wanted:
            summary["matched_batch_note"] = (f"do_bench_cudagraph's shape asks for {wanted} launches per sample; "
                                             f"timing.batch allows {BATCH_RANGE[0]}..{BATCH_RANGE[1]}: clamped to {batch}")
        records["matched"] = run_point(point_config(kernel, precision, layout_b, shape, matched_timing(batch), params),
                                       out / "matched")
    if cold:
        records["cold"] = run_point(point_config(kernel, precision, layout_b, shape, COLD_TIMING, params), out / "cold")
    bad = [f"{k}: {r.get('status')}: {r.get('error')}" for k, r in records.items() if r.get("status") != "ok"]
    if bad:
        summary["error"] = "; ".join(bad)
        return summary, records
    summary["gemmlab_graph_ms"] = records["graph"]["timing"]["median_ms"]
    if matched:
        summary["gemmlab_matched_ms"] = records["matched"]["timing"]["median_ms"]
    if cold:
        summary["gemmlab_cold_ms"] = records["cold"]["timing"]["median_ms"]
    try:
        timers = triton_timers(kernel, precision, layout_b, shape, params, out / "triton")
    except ImportError as exc:
        summary["error"] = f"Triton's timers need PyTorch and Triton: {type(exc).__name__}: {exc}"
        return summary, records
    summary.update(timers)
    summary["ratio_graph"] = timers["do_bench_cudagraph_ms"] / summary["gemmlab_graph_ms"]
    summary["within_tolerance"] = abs(summary["ratio_graph"] - 1) <= TOLERANCE
    clock = summary["gemmlab_graph_clocks"] = clocks(records["graph"])
    if matched:
        summary["ratio_matched"] = timers["do_bench_cudagraph_ms"] / summary["gemmlab_matched_ms"]
        summary["within_tolerance_matched"] = abs(summary["ratio_matched"] - 1) <= TOLERANCE
        summary["gemmlab_matched_clocks"] = clocks(records["matched"])
    summary["duty_cycle_note"] = duty_cycle_note(summary)
    if clock.get("throttled_samples"):
        said = (f"{clock['throttled_samples']} of {clock['samples']} gemmlab samples throttled (median SM clock "
                f"{clock['median_sm_mhz']} MHz, highest seen {clock['max_sm_mhz']} MHz); do_bench_cudagraph records "
                "no clock (do_bench_cudagraph_clocks: NVML reads while it ran); ")
        if clock.get("median_unthrottled_ms"):
            summary["ratio_graph_unthrottled"] = timers["do_bench_cudagraph_ms"] / clock["median_unthrottled_ms"]
            summary["throttled_note"] = (said + "against gemmlab's unthrottled samples the ratio is "
                                         f"{summary['ratio_graph_unthrottled']:.4f}")
        else:
            summary["throttled_note"] = said + "every sample was throttled: no unthrottled ratio"
    if cold:
        summary["ratio_cold"] = timers["do_bench_ms"] / summary["gemmlab_cold_ms"]
        summary["cold_by_design"] = ("do_bench flushes L2 by zeroing 256 MB and times each launch alone with events "
                                     "(the host's launch inside the interval when the GPU waits); gemmlab's cold "
                                     "point memsets 2x L2 outside the interval; no agreement target")
    return summary, records
