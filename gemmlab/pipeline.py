"""One experiment point, end to end: validate -> compile -> inputs -> NaN-fill -> verify -> time ->
safety nets -> record. No Hydra state in here: tests, notebooks and other tools call
:func:`run_point` directly.

With ``baseline=<kernel>`` a second kernel (usually ``cublas``) gets the same inputs, the same
verification and the same timing protocol, sampled alternately with the kernel in one process;
the record gains ``ratio_to_baseline``.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from gemmlab import compile as compile_stage
from gemmlab import guards
from gemmlab import inputs as inputs_stage
from gemmlab import record as record_stage
from gemmlab import timing as timing_stage
from gemmlab import verify as verify_stage
from gemmlab.config import RunConfig, _plain, parse_config
from gemmlab.dispatch import resolve_config as resolve_auto
from gemmlab.errors import CompileError, ConfigError, GemmlabError, SafetyNetError, UnavailableError, \
    VerificationError
from gemmlab.hookspecs import DeviceFacts, DevicePointers, KernelSpec, Launch, LibraryKernelSpec, ParamError
from gemmlab.roofline import roofline
from gemmlab.registry import Registry, load_registry

EXIT_INVALID = 2
EXIT_FAILED = 1
GRID_LIMITS = (2**31 - 1, 65535, 65535)  # CUDA: max grid dimensions (x, y, z)
BLOCK_LIMITS = (1024, 1024, 64)  # CUDA: max block dimensions (x, y, z)


@lru_cache(maxsize=8)
def _registry(plugin_dirs: tuple[str, ...]) -> Registry:
    return load_registry(plugin_dirs)


def registry_for(cfg: Mapping[str, Any]) -> Registry:
    """The (cached) registry for the ``plugin_dirs`` of ``cfg``.

    Raises:
        ConfigError: ``plugin_dirs`` is not a list of folders, or a plugin fails to load.
    """
    dirs = _plain(cfg.get("plugin_dirs")) or []
    if isinstance(dirs, str) or not isinstance(dirs, (list, tuple)) or not all(isinstance(d, str) for d in dirs):
        raise ConfigError("plugin_dirs", f"must be a list of directory paths, got {dirs!r}")
    return _registry(tuple(dirs))


def exit_status(record: Mapping[str, Any]) -> int:
    """0 for a valid record, 2 for invalid input, 1 for any other failure."""
    if record.get("valid"):
        return 0
    return EXIT_INVALID if record.get("status") == ConfigError.status else EXIT_FAILED


def run_point(cfg: Mapping[str, Any], out_dir: str | Path, check_only: bool = False) -> dict:
    """Run one experiment point and write ``out_dir/result.json``.

    Args:
        cfg: the composed config (``DictConfig`` or dict with the keys of ``conf/config.yaml``).
        out_dir: the run's own directory (created if missing; must not hold a result yet).
        check_only: stop after verification and the safety nets (no timing, no sanitizer); the
            status is then ``checked``. Used by the sanitizer's child process.

    Returns:
        The record written to ``result.json``. ``record["status"]`` is ``ok`` (verified and
        timed), ``compiled`` (``mode=compile``), ``checked``, or a failure: ``invalid``,
        ``compile_error``, ``wrong_result``, ``out_of_bounds``, ``unstable``, ``inputs_modified``,
        ``sanitizer_errors``, ``cuda_error``, ``no_gpu``, ``unavailable``, ``error``;
        ``record["error"]`` holds the one-line reason. Failures never raise: a sweep goes on.
    """
    out_dir = Path(out_dir)
    try:
        record = record_stage.new_record(_plain(cfg))
    except Exception as exc:  # e.g. an interpolation that does not resolve
        record = record_stage.new_record(None)
        record.update(status=ConfigError.status, error=f"config: cannot resolve: {str(exc).splitlines()[0]}")
    if (out_dir / "result.json").exists():  # never touch an earlier measurement
        resumed = _resume(cfg, out_dir)
        if resumed is not None:
            return resumed
        if (out_dir / "result.json").exists():
            record.update(status=ConfigError.status, valid=False,
                          error=f"out_dir: {out_dir} already holds a result.json; gemmlab never overwrites a "
                                "result (resume=true re-runs only failed points)")
            return record
    if record["status"] != "running":
        record_stage.write_record(record, out_dir)
        return record
    try:
        _run(cfg, out_dir, record, check_only)
    except ParamError as exc:
        record.update(status=ConfigError.status, error=str(exc))
    except GemmlabError as exc:
        record.update(status=exc.status, error=str(exc))
        if isinstance(exc, CompileError):
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "compile.log").write_text(exc.log)
    except Exception as exc:  # an unexpected failure still leaves a record behind
        record.update(status="error", error=f"{type(exc).__name__}: {exc}")
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "traceback.txt").write_text(traceback.format_exc())
    record["valid"] = record["status"] in record_stage.VALID_STATUSES
    record_stage.write_record(record, out_dir)
    return record


def _resume(cfg: Mapping[str, Any], out_dir: Path) -> dict | None:
    """With ``resume=true``: return the existing record (marked ``resumed``) when it is valid and
    was made with the same config; otherwise move it aside as ``result.previous-<time>.json``
    and return None (the point re-runs)."""
    try:
        wanted = _plain(cfg.get("resume", False)) is True
        current = _plain(cfg)
    except Exception:
        return None
    if not wanted:
        return None
    path = out_dir / "result.json"
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = None
    if not isinstance(old, dict):
        old = {}
    ignored = ("resume", "cache")  # settings that cannot change a measurement
    same_config = isinstance(old.get("config"), dict) and \
        {k: v for k, v in old["config"].items() if k not in ignored} == \
        {k: v for k, v in current.items() if k not in ignored}
    if old.get("valid") and old.get("status") in record_stage.VALID_STATUSES and same_config:
        old["resumed"] = True
        return old
    stamp = time.strftime("%Y%m%dT%H%M%S")
    os.replace(path, out_dir / f"result.previous-{stamp}-{os.getpid()}.json")
    return None


@dataclass
class Candidate:
    """A kernel under measurement (``role`` kernel or baseline) and what the stages learn of it."""

    role: str
    name: str
    spec: KernelSpec
    params: dict
    launch: Launch | None = None
    compiled: compile_stage.CompiledKernel | None = None
    record: dict = field(default_factory=dict)
    enqueue: Callable[[], None] | None = None
    close: Callable[[], None] | None = None
    c: guards.GuardedMatrix | None = None

    @property
    def is_library(self) -> bool:
        return isinstance(self.spec, LibraryKernelSpec)


def _static_checks(cand: Candidate, rc: RunConfig, facts: DeviceFacts) -> None:
    """Everything decidable before compiling: parameters, shape, precision, launch limits."""
    spec = cand.spec
    if cand.is_library:
        if rc.precision not in spec.precisions:
            raise ConfigError("precision", f"kernel {cand.name} supports {', '.join(spec.precisions)}, got {rc.precision}")
        spec.check(rc.shape, cand.params, facts)
        return
    if rc.precision != "fp32":
        raise ConfigError("precision", f"kernel {cand.name} is an NVRTC float32 kernel and supports fp32 only, "
                          f"got {rc.precision} (tf32 is for library kernels such as cublas)")
    spec.check(rc.shape, cand.params, facts)
    launch = spec.launch(rc.shape, cand.params, facts)
    for axis, (count, limit) in enumerate(zip(launch.grid, GRID_LIMITS)):
        if not 1 <= count <= limit:
            raise ConfigError("shape", f"needs grid {tuple(launch.grid)}: grid dimension {'xyz'[axis]} must be "
                              f"1..{limit} (CUDA limit); use a smaller shape or a kernel with larger tiles")
    for axis, (count, limit) in enumerate(zip(launch.block, BLOCK_LIMITS)):
        if not 1 <= count <= limit:
            raise ConfigError("kernel", f"block {tuple(launch.block)}: dimension {'xyz'[axis]} must be 1..{limit}")
    if launch.threads_per_block > facts.max_threads_per_block or launch.shared_bytes > facts.max_shared_per_block_optin:
        raise ConfigError("kernel", f"launch needs {launch.threads_per_block} threads and {launch.shared_bytes} B "
                          f"dynamic shared memory per block; the device allows {facts.max_threads_per_block} "
                          f"and {facts.max_shared_per_block_optin} B")
    cand.launch = launch
    cand.record["launch"] = {"grid": list(launch.grid), "block": list(launch.block),
                             "shared_bytes": launch.shared_bytes, "threads_per_block": launch.threads_per_block,
                             "blocks": launch.blocks}


def _compile(cand: Candidate, registry: Registry, arch: str, out_dir: Path, rc: RunConfig,
             driver_version: str = "none") -> None:
    if cand.is_library:
        cand.record["compile"] = None
        return
    cand.compiled = compile_stage.compile_kernel(registry.source_path(cand.spec), cand.spec.entry(cand.params),
                                                 compile_stage.CompileOptions(arch=arch), persistent=rc.cache_enabled,
                                                 cache_folder=rc.cache_dir, driver_version=driver_version)
    cand.record["compile"] = cand.compiled.record()
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "" if cand.role == "kernel" else f"-{cand.role}"
    (out_dir / f"compile{suffix}.log").write_text(cand.compiled.log)


def _run(cfg: Mapping[str, Any], out_dir: Path, record: dict, check_only: bool) -> None:
    registry = registry_for(cfg)
    cfg, dispatch = resolve_auto(cfg, registry)  # kernel=auto -> the chosen kernel (gemmlab.dispatch)
    if dispatch is not None:
        record["dispatch"] = dispatch
    rc = parse_config(cfg, defaults_of=lambda name: registry.get(name).defaults)
    cands = [Candidate("kernel", rc.kernel, registry.get(rc.kernel), rc.params)]
    if rc.baseline is not None:
        base = registry.get(rc.baseline)
        cands.append(Candidate("baseline", rc.baseline, base, dict(base.defaults)))
    flops = 2 * rc.shape.M * rc.shape.N * rc.shape.K
    record.update(kernel={"name": rc.kernel, "params": rc.params, "plugin": registry.origins[rc.kernel],
                          "backend": "library" if cands[0].is_library else "nvrtc"},
                  shape=rc.shape._asdict(), flops=flops, mode=rc.mode, precision=record_stage.precision_text(rc.precision))

    from gemmlab.device import offline_facts
    for cand in cands:  # bad input fails before the GPU opens
        _static_checks(cand, rc, offline_facts(rc.arch or "90"))
    for cand in cands:
        missing = cand.spec.available() if cand.is_library else None
        if missing is not None:
            raise UnavailableError(missing)

    if rc.mode == "compile":
        facts = offline_facts(rc.arch or "90")
        record["device"] = {"name": facts.name, "arch": f"sm_{facts.arch}"}
        from gemmlab.device import estimate_occupancy
        for cand in cands:
            _compile(cand, registry, facts.arch, out_dir, rc)
            res = cand.compiled.resources if cand.compiled else None
            if res is not None and facts.arch == "90":
                cand.record["occupancy"] = estimate_occupancy(res.registers, res.static_shared_bytes, cand.launch,
                                                              facts.sm_count)
        _merge(record, cands)
        record["status"] = "compiled"
        return

    from gemmlab.device import open_gpu, pick_device
    gpu = open_gpu(pick_device() if rc.device == "auto" else rc.device)
    facts = gpu.facts
    record["device"] = gpu.record()
    if rc.arch is not None and rc.arch != facts.arch:
        raise ConfigError("arch", f"mode=run builds for the device's own arch sm_{facts.arch}; "
                          f"got sm_{rc.arch} (use mode=compile to build for another target)")
    for cand in cands:
        _static_checks(cand, rc, facts)
        _compile(cand, registry, facts.arch, out_dir, rc, driver_version=str(record["device"].get("driver_version", "none")))

    a, b = inputs_stage.make_inputs(rc.shape, rc.inputs)
    record["inputs"] = {"distribution": rc.inputs.distribution, "seed": rc.inputs.seed, "dtype": "float32",
                        "layout": "row-major", "A": [rc.shape.M, rc.shape.K], "B": [rc.shape.K, rc.shape.N]}
    shape = rc.shape
    d_a = guards.allocate(gpu, "A", (shape.M, shape.K), a)
    d_b = guards.allocate(gpu, "B", (shape.K, shape.N), b)
    owned = [d_a, d_b]
    try:
        for cand in cands:
            cand.c = guards.allocate(gpu, f"C ({cand.name})", (shape.M, shape.N))
            owned.append(cand.c)
            cand.enqueue, cand.close = _enqueue_for(gpu, cand, rc, d_a, d_b)

        # correctness: NaN-fill this candidate's own C, one launch, verify, check the guard bands
        outputs, products = {}, {}  # products: the float64 references, computed once for all candidates
        for cand in cands:
            gpu.fill32(cand.c.address, 0xFFFFFFFF, shape.M * shape.N)  # never reuse another output
            cand.enqueue()
            gpu.sync()
            outputs[cand.role] = guards.read(gpu, cand.c)
            verdict = verify_stage.check(outputs[cand.role], a, b, rc.verify, rc.inputs.distribution,
                                         rc.precision, rc.inputs.seed, products=products)
            cand.record["verification"] = verdict.record()
            _merge(record, cands)
            # every net looks before any verdict is raised, so the record says all that fired
            hit = _bands(gpu, record, [cand.c, d_a, d_b], after="the correctness launch")
            record["nets_fired"] = (["guard bands"] if hit else []) + \
                ([] if verdict.passed else ["verification (NaN outputs: unwritten, or a guard canary read)"
                                            if verdict.nan_outputs else "verification"])
            if hit:
                raise SafetyNetError("out_of_bounds", f"{hit['message']} (after the correctness launch)"
                                     + ("" if verdict.passed else f"; also {verdict.summary()}"))
            if not verdict.passed:
                raise VerificationError(f"wrong result from {cand.name}: {verdict.summary()}")
        if check_only:
            _check_inputs(gpu, record, d_a, d_b, a, b)
            record["status"] = "checked"
            return

        floor = _floor_enqueue(gpu) if rc.timing.floor else None
        flush = _flush_fn(gpu) if rc.timing.l2 == "cold" else None
        measured = timing_stage.measure(gpu, {c.role: c.enqueue for c in cands}, rc.timing,
                                        flush=flush, floor_enqueue=floor)
        _record_timing(record, cands, measured, rc, flops, gpu)

        # safety nets after timing: bands, inputs, repeat stability (bitwise)
        _check_bands(gpu, record, [d_a, d_b] + [c.c for c in cands], after="timing")
        _check_inputs(gpu, record, d_a, d_b, a, b)
        for cand in cands:
            last = guards.read(gpu, cand.c)
            same = np.array_equal(last.view(np.uint32), outputs[cand.role].view(np.uint32))
            cand.record["repeat_stable"] = bool(same)
            if not same:
                diff = int((last.view(np.uint32) != outputs[cand.role].view(np.uint32)).sum())
                _merge(record, cands)
                raise SafetyNetError("unstable", f"{cand.name}: the last timed launch differs bitwise from the "
                                     f"correctness launch in {diff} element(s): likely a race")
        _merge(record, cands)
        if rc.sanitizer:
            from gemmlab import sanitizer
            result = sanitizer.run(rc.sanitizer, _plain(cfg), out_dir, device=gpu.index)
            record["sanitizer"] = result
            if result["verdict"] == "unavailable":
                raise UnavailableError(f"sanitizer={rc.sanitizer}: {result['message']}")
            if result["verdict"] != "clean":
                raise SafetyNetError("sanitizer_errors", f"compute-sanitizer {rc.sanitizer}: {result['verdict']}"
                                     f" ({result.get('errors')} errors; report {result.get('report')})")
        record["status"] = "ok"
    finally:
        for cand in cands:
            if cand.close:
                cand.close()
        guards.release(*owned)


def _enqueue_for(gpu, cand: Candidate, rc: RunConfig, d_a, d_b):
    if cand.is_library:
        ptrs = DevicePointers(a=d_a.address, b=d_b.address, c=cand.c.address, stream=int(gpu.stream.handle))
        cand.record["library"] = cand.spec.library_version()
        return cand.spec.enqueue_function(rc.shape, cand.params, ptrs, rc.precision)
    loaded = gpu.load(cand.compiled.object_code, cand.compiled.name_expression, cand.launch.shared_bytes)
    if cand.launch.threads_per_block > loaded.max_threads_per_block:
        raise ConfigError("kernel", f"{cand.name} needs {cand.launch.threads_per_block} threads per block, but with "
                          f"{loaded.registers} registers per thread at most {loaded.max_threads_per_block} fit "
                          "(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES otherwise); use a larger thread tile")
    cand.record["compile"]["driver_attributes"] = {"registers": loaded.registers, "local_bytes": loaded.local_bytes,
                                                   "static_shared_bytes": loaded.static_shared_bytes}
    cand.record["occupancy"] = gpu.occupancy(loaded, cand.launch)
    args = (np.uint64(d_a.address), np.uint64(d_b.address), np.uint64(cand.c.address),
            np.int32(rc.shape.M), np.int32(rc.shape.N), np.int32(rc.shape.K))
    return gpu.launcher(loaded, cand.launch, args), None


def _floor_enqueue(gpu):
    compiled = compile_stage.compile_kernel(timing_stage.floor_source(), timing_stage.FLOOR_ENTRY,
                                            compile_stage.CompileOptions(arch=gpu.facts.arch))
    loaded = gpu.load(compiled.object_code, compiled.name_expression, 0)
    return gpu.launcher(loaded, Launch(grid=(1, 1, 1), block=(32, 1, 1)), ())


def _flush_fn(gpu):
    """L2 flush: memset a scratch buffer of 2x the L2 size (allocated once per process)."""
    nbytes = max(2 * gpu.facts.l2_bytes, 1 << 20)
    if getattr(gpu, "_flush_buffer", None) is None:
        gpu._flush_buffer = gpu.allocate(nbytes)
    address, words = int(gpu._flush_buffer.handle), nbytes // 4
    counter = [0]

    def flush():
        counter[0] += 1
        gpu.fill32(address, counter[0], words)

    return flush


def _bands(gpu, record, matrices, after: str) -> dict | None:
    """Check the guard bands of ``matrices``; record and return the first hit (None: intact)."""
    for g in matrices:
        hit = guards.check_bands(gpu, g)
        if hit:
            record["guard_bands"] = [dict(hit, after=after)]
            return hit
    record["guard_bands"] = "intact"
    return None


def _check_bands(gpu, record, matrices, after: str) -> None:
    hit = _bands(gpu, record, matrices, after)
    if hit:
        record.setdefault("nets_fired", []).append("guard bands")
        raise SafetyNetError("out_of_bounds", f"{hit['message']} (after {after})")


def _check_inputs(gpu, record, d_a, d_b, a, b) -> None:
    for g, host in ((d_a, a), (d_b, b)):
        now = guards.read(gpu, g)
        if not np.array_equal(now.view(np.uint32), host.view(np.uint32)):
            changed = int((now.view(np.uint32) != host.view(np.uint32)).sum())
            record["inputs_unchanged"] = False
            raise SafetyNetError("inputs_modified", f"the kernel wrote its input {g.name}: {changed} element(s) changed")
    record["inputs_unchanged"] = True


def _record_timing(record, cands, measured, rc: RunConfig, flops: int, gpu) -> None:
    protocols = rc.timing.protocols
    primary = "graph" if rc.timing.mode == "both" else rc.timing.mode
    floor = {p: s.record(flops) for p, s in measured["floor"].items()}
    for cand in cands:
        per = {p: measured["protocols"][p][cand.role].record(flops) for p in protocols}
        t = dict(per[primary])
        t.update(protocol=primary, protocols=per, description=timing_stage.describe(rc.timing),
                 warmup=rc.timing.warmup, repeat=len(t["samples_ms"]), min_repeat=rc.timing.repeat,
                 batch=rc.timing.launches_per_sample, l2=rc.timing.l2, stopped_by=measured["stopped_by"],
                 launch_floor_ms={p: f["median_ms"] for p, f in floor.items()})
        if rc.timing.mode == "both":
            t["host_overhead_per_launch_ms"] = per["events"]["median_ms"] - per["graph"]["median_ms"]
        if primary in floor:
            t["median_over_floor"] = t["median_ms"] / floor[primary]["median_ms"]
            t["launch_bound"] = t["median_over_floor"] < 2.0
        cand.record["timing"] = t
        sm_mhz = t.get("median_sm_mhz")
        cand.record["roofline"] = roofline(rc.shape.M, rc.shape.N, rc.shape.K, t["median_ms"], gpu.facts.sm_count,
                                           gpu.facts.arch, sm_mhz, gpu.dram_bytes_per_s())
    if floor:
        record["launch_floor"] = floor
    if gpu.monitor.error:
        record["telemetry_error"] = gpu.monitor.error
    if len(cands) == 2:
        k, bl = cands[0].record["timing"], cands[1].record["timing"]
        record["ratio_to_baseline"] = {"baseline": cands[1].name, "protocol": primary,
                                       "median_time": k["median_ms"] / bl["median_ms"],
                                       "gflops": k["gflops"] / bl["gflops"]}
    _merge(record, cands)


def _merge(record: dict, cands: list[Candidate]) -> None:
    """The kernel's fields go to the top level; the baseline's under ``baseline``."""
    for cand in cands:
        if cand.role == "kernel":
            record.update(cand.record)
        else:
            record["baseline"] = {"name": cand.name, "params": cand.params, **cand.record}
