"""gemmlab's timing against Triton's own timers on the same compiled Triton kernel (issue 46, item 4).

For one Triton kernel, precision, B layout and shape, :func:`agreement` measures

- ``gemmlab_graph_ms``: a gemmlab point timed with ``timing.mode=graph`` and warm L2 (CUDA events
  around one replay of a captured batch of launches, the median over samples;
  :mod:`gemmlab.stages.timing`), the kernel verified like every point;
- ``do_bench_cudagraph_ms``: ``triton.testing.do_bench_cudagraph(fn, return_mode="median")`` on the
  same compiled kernel (gemmlab's own Triton compile of the same function, specialisation and
  parameters) launched on PyTorch tensors of the same shape and types: warm L2 too (no flush), one
  graph of ``rep / estimate`` launches replayed 10 times, the median of the 10 per-launch means.

They measure the same thing by the same method, so they should agree: :data:`TOLERANCE` (2%) is the
protocol agreement the gpu test asserts (not a speed target). Where the two differ by design, cold
L2, it measures

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

from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

TOLERANCE = 0.02  # |do_bench_cudagraph / gemmlab graph - 1| the gpu test accepts (issue 46 item 4)
GRAPH_TIMING = MappingProxyType({"mode": "graph", "l2": "warm", "warmup": 10, "repeat": 30, "batch": 20})
COLD_TIMING = MappingProxyType({"mode": "events", "l2": "cold", "flush": "write", "warmup": 10, "repeat": 50})
#: the launch check's limit on |C - A@B| / (|A||B|) per precision (a sanity check, not gemmlab's bound)
CHECK_LIMITS = MappingProxyType({"fp32": 1e-5, "tf32": 2e-3, "bf16": 1e-2, "fp16": 2e-3})
TORCH_DTYPES = MappingProxyType({"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"})


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


def triton_timers(kernel: str, precision: str, layout_b: str, shape, params: Mapping[str, int] | None = None,
                  out_dir: str | Path | None = None) -> dict:
    """Triton's two timers on gemmlab's compile of ``kernel`` (see the module docstring):
    ``{"do_bench_cudagraph_ms", "do_bench_ms", "check": {...}, "triton_version", "torch_version"}``.

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

    spec = load_registry().get(kernel)
    gpu = open_gpu(0)
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
        return _timed(fn, kernel, precision, layout_b, M, a, b, c, backend, torch, triton, np)
    finally:
        _allocation._allocator.reset(token)
        backend.close()


def _timed(fn, kernel, precision, layout_b, M, a, b, c, backend, torch, triton, np) -> dict:
    """Check the launch on the torch tensors (sampled rows), then run Triton's two timers."""
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
    graph_ms = float(triton.testing.do_bench_cudagraph(fn, return_mode="median"))
    cold_ms = float(triton.testing.do_bench(fn, return_mode="median"))
    return {"do_bench_cudagraph_ms": graph_ms, "do_bench_ms": cold_ms,
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


def agreement(kernel: str, precision: str, layout_b: str, shape, out_dir: str | Path,
              params: Mapping[str, int] | None = None, cold: bool = True, session=None) -> tuple[dict, dict]:
    """Measure one case (module docstring) under ``out_dir`` (``graph/``, ``cold/`` point folders);
    the gemmlab points run through ``session`` (a :class:`gemmlab.run.session.Session`, default a new
    one), gemmlab's one point runner, in this process (:data:`ISOLATION`).

    Returns:
        ``(summary, records)``: the medians (ms), ``ratio_graph`` (do_bench_cudagraph / gemmlab
        graph), ``within_tolerance``, ``ratio_cold`` (do_bench / gemmlab cold, no target), the
        versions and device; ``gemmlab_graph_clocks`` (:func:`clocks` of the graph point) and, where
        some of its samples were throttled, ``ratio_graph_unthrottled`` (do_bench_cudagraph / the
        unthrottled samples' median: Triton's timer records no clock, and gemmlab's warm protocol
        keeps the GPU busy for longer, e.g. 30 samples x 20 launches of a 1.6 ms kernel: about 1 s at
        the power limit, H100 session 35) with ``throttled_note``; ``records`` maps ``graph``/``cold``
        to the gemmlab records.
    """
    from gemmlab.run.session import Session
    run_point = (session or Session()).run_point
    out = Path(out_dir)
    records = {"graph": run_point(point_config(kernel, precision, layout_b, shape, GRAPH_TIMING, params), out / "graph")}
    if cold:
        records["cold"] = run_point(point_config(kernel, precision, layout_b, shape, COLD_TIMING, params), out / "cold")
    summary: dict = {"case": case_name(kernel, precision, layout_b, shape), "kernel": kernel, "precision": precision,
                     "layout_b": layout_b, "shape": list(shape), "tolerance": TOLERANCE,
                     "device": records["graph"].get("device", {}).get("name")}
    bad = [f"{k}: {r.get('status')}: {r.get('error')}" for k, r in records.items() if r.get("status") != "ok"]
    if bad:
        summary["error"] = "; ".join(bad)
        return summary, records
    summary["gemmlab_graph_ms"] = records["graph"]["timing"]["median_ms"]
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
    if clock.get("throttled_samples"):
        said = (f"{clock['throttled_samples']} of {clock['samples']} gemmlab samples throttled (median SM clock "
                f"{clock['median_sm_mhz']} MHz, highest seen {clock['max_sm_mhz']} MHz); do_bench_cudagraph records "
                "no clock; ")
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
