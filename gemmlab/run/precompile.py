"""Compile the kernels of points ahead of their runs, in parallel processes, into the on-disk compile
cache (:mod:`gemmlab.gpu.cache`), so that each point's own compile is a cache hit (issue 41: the
held-out benchmark's 1,092 points need ~200 distinct kernel instances, each an NVRTC compile and a
disassembly of 0.2-2 s, one at a time in the point's worker).

A point is compiled as ``mode=compile`` would compile it (:meth:`gemmlab.run.pipeline.Run.validate`:
``kernel=auto``'s choice, the config check, the backends), with the run's compile-cache settings
and the GPU's ``driver_version`` (part of the on-disk key; the caller takes it from a record of the
same machine), for ``sm_<arch>`` of the point (default 90). Compiled ahead:

- each NVRTC backend of the point (the kernel and an NVRTC baseline; a library baseline such as
  cuBLAS compiles nothing);
- with ``kernel.tune=first_use``, the ``kernel.tune_k`` first candidates of the ranking mode=compile
  makes (``dispatch.top``: offline device facts, so the run's ranking may differ; a candidate not
  compiled here is compiled by the point as before);
- the device check's kernels (:func:`gemmlab.stages.device_check.compile_kernels`) where
  ``verify.after_timing`` or ``inputs.draw`` takes the device path for the problem.

Nothing here opens a GPU or creates a CUDA context (a context would count as a second process on the
GPU while points are timed). A compile that fails is reported in the summary and left to the point,
whose record then says so as before; nothing else changes in any record (a point's ``compile``
record says ``disk_cache: hit``).
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Sequence

#: points per task sent to a compile process (amortises the process's start-up; small enough to balance)
CHUNK = 4


def _job_key(cfg: Mapping[str, Any]) -> str:
    """What decides a point's compiles (its config without what changes nothing compiled)."""
    import json
    keep = {k: v for k, v in cfg.items() if k not in ("shape", "isolation", "timing", "baseline")}
    return json.dumps([keep, list(cfg.get("shape") or [])], sort_keys=True, default=str)


def compile_point(cfg: Mapping[str, Any], driver_version: str) -> dict:
    """Compile one point's kernels (module docstring) into the on-disk cache; returns
    ``{"instances": n, "seconds": s}`` or ``{"error": one line}``. Never raises for a point."""
    from gemmlab.contract.hookspecs import Problem
    from gemmlab.gpu.backends import backend_for
    from gemmlab.gpu.device import offline_facts
    from gemmlab.run import pipeline
    from gemmlab.stages import device_check
    from gemmlab.stages import record as record_stage
    from gemmlab.stages.config import _plain
    started = time.perf_counter()
    plain = dict(_plain(cfg), mode="compile")
    count = 0
    try:
        with tempfile.TemporaryDirectory(prefix="gemmlab-precompile-") as tmp:
            run = pipeline.Run(plain, Path(tmp), record_stage.new_record(plain))
            run.validate()
            rc, registry = run.rc, pipeline.registry_for(plain)
            facts = offline_facts(rc.arch or "90")
            backends = [b for b in run.backends if b.kind == "nvrtc"]
            kernel = (_plain(cfg).get("kernel") or {})
            dispatch = run.record.get("dispatch") or {}
            if isinstance(kernel, Mapping) and kernel.get("tune") == "first_use":
                k = int(kernel.get("tune_k") or 0)
                for i, top in enumerate((dispatch.get("top") or [])[:k]):
                    name, params = top.get("kernel"), top.get("params") or {}
                    if name in registry.kernels and (name, params) != (rc.kernel, rc.params):
                        spec = registry.get(name)
                        cand = backend_for(f"candidate{i}", name, spec, {**spec.defaults, **params})
                        try:
                            cand.validate(run.problem, facts)  # as the run's candidates are, before compiling
                        except Exception:  # refused: the point drops it as before
                            continue
                        if cand.kind == "nvrtc":
                            backends.append(cand)
            for backend in backends:
                backend.compile(run.problem, facts, facts.arch, Path(tmp), rc.cache_enabled, rc.cache_dir,
                                driver_version=driver_version)
                count += 1
            where = (_plain(cfg).get("verify") or {}).get("after_timing", "auto")
            draw = (_plain(cfg).get("inputs") or {}).get("draw", "host")  # the point's own inputs on the device
            problem: Problem = run.problem
            dense = (problem.precision in device_check.PRECISIONS and problem.grouped is None
                     and not problem.extended)
            large = problem.M * problem.N * problem.K > device_check.DEVICE_MIN_MNK
            if dense and any(w == "device" or (w == "auto" and large) for w in (where, draw)):
                roundings = device_check.roundings_for(problem.precision,
                                                       [getattr(b.spec, "tf32_rounding", None) for b in run.backends])
                device_check.compile_kernels(problem, roundings, rc.inputs.distribution, facts.arch,
                                             rc.cache_enabled, rc.cache_dir, driver_version)
                count += 1
            for backend in run.backends:
                backend.close()
    except Exception as exc:  # the point compiles it again and its record says why
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300],
                "instances": count, "seconds": time.perf_counter() - started}
    return {"instances": count, "seconds": time.perf_counter() - started}


def _compile_chunk(cfgs: list, driver_version: str) -> list[dict]:
    return [compile_point(c, driver_version) for c in cfgs]


def precompile(cfgs: Sequence[Mapping[str, Any]], driver_version: str, workers: int | None = None) -> dict:
    """Compile the kernels of every config of ``cfgs`` (points of ``mode=run``; duplicates once) in
    ``workers`` new processes (None: this machine's cores, at most 16; 0: in this process, one at a
    time), into the on-disk cache the points' own compiles read. Returns ``{"points": distinct configs, "instances": compiles
    asked, "errors": count, "first_errors": [...], "seconds": wall, "workers": n}``.

    ``driver_version``: the ``device.driver_version`` of a record made on this machine (the on-disk
    key holds it; another value compiles for nothing)."""
    started = time.monotonic()
    distinct = list({_job_key(c): dict(c) for c in cfgs}.values())
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    chunks = [distinct[i:i + CHUNK] for i in range(0, len(distinct), CHUNK)]
    results: list[dict] = []
    if workers == 0:
        for part in chunks:
            results += _compile_chunk(part, driver_version)
    elif chunks:
        workers = max(1, min(workers or min(cores, 16), len(chunks)))
        # spawn: a fresh interpreter, never a copy of a parent that may hold a CUDA context
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            for part in pool.map(_compile_chunk, chunks, [driver_version] * len(chunks)):
                results += part
    errors = [r["error"] for r in results if "error" in r]
    return {"points": len(distinct), "instances": sum(r.get("instances", 0) for r in results),
            "errors": len(errors), "first_errors": errors[:5], "seconds": round(time.monotonic() - started, 2),
            "workers": workers if chunks else 0}
