"""One experiment point, end to end: validate -> compile -> inputs -> NaN-fill -> verify -> time ->
record. No Hydra state in here: tests, notebooks and other tools call :func:`run_point` directly.
"""

from __future__ import annotations

import traceback
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from gemmlab import compile as compile_stage
from gemmlab import inputs as inputs_stage
from gemmlab import record as record_stage
from gemmlab import timing as timing_stage
from gemmlab import verify as verify_stage
from gemmlab.config import _plain, parse_config
from gemmlab.errors import CompileError, ConfigError, GemmlabError, VerificationError
from gemmlab.hookspecs import ParamError
from gemmlab.registry import Registry, load_registry

EXIT_INVALID = 2
GRID_LIMITS = (2**31 - 1, 65535, 65535)  # CUDA: max grid dimensions (x, y, z)
BLOCK_LIMITS = (1024, 1024, 64)  # CUDA: max block dimensions (x, y, z)
EXIT_FAILED = 1


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


def run_point(cfg: Mapping[str, Any], out_dir: str | Path) -> dict:
    """Run one experiment point and write ``out_dir/result.json``.

    Args:
        cfg: the composed config (``DictConfig`` or dict with the keys of ``conf/config.yaml``).
        out_dir: the run's own directory (created if missing; must not hold a result yet).

    Returns:
        The record written to ``result.json``. ``record["status"]`` is ``ok`` (verified and
        timed), ``compiled`` (``mode=compile``), or a failure: ``invalid``, ``compile_error``,
        ``wrong_result``, ``cuda_error``, ``no_gpu``, ``error``; ``record["error"]`` holds the
        one-line reason. Failures never raise: a sweep goes on to its next point.
    """
    out_dir = Path(out_dir)
    record = record_stage.new_record(_plain(cfg))
    try:
        _run(cfg, out_dir, record)
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


def _run(cfg: Mapping[str, Any], out_dir: Path, record: dict) -> None:
    registry = registry_for(cfg)
    rc = parse_config(cfg, defaults_of=lambda name: registry.get(name).defaults)
    spec = registry.get(rc.kernel)
    flops = 2 * rc.shape.M * rc.shape.N * rc.shape.K
    record.update(kernel={"name": rc.kernel, "params": rc.params, "plugin": registry.origins[rc.kernel]},
                  shape=rc.shape._asdict(), flops=flops, mode=rc.mode, precision=record_stage.PRECISION)

    from gemmlab.device import offline_facts
    spec.check(rc.shape, rc.params, offline_facts(rc.arch or "90"))  # bad input fails before the GPU opens
    gpu = None
    if rc.mode == "run":
        from gemmlab.device import open_gpu
        gpu = open_gpu(rc.device)
        facts = gpu.facts
        record["device"] = gpu.record()
        if rc.arch is not None and rc.arch != facts.arch:
            raise ConfigError("arch", f"mode=run builds for the device's own arch sm_{facts.arch}; "
                              f"got sm_{rc.arch} (use mode=compile to build for another target)")
    else:
        facts = offline_facts(rc.arch or "90")
        record["device"] = {"name": facts.name, "arch": f"sm_{facts.arch}"}

    spec.check(rc.shape, rc.params, facts)
    launch = spec.launch(rc.shape, rc.params, facts)
    record["launch"] = {"grid": list(launch.grid), "block": list(launch.block), "shared_bytes": launch.shared_bytes,
                        "threads_per_block": launch.threads_per_block, "blocks": launch.blocks}
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

    compiled = compile_stage.compile_kernel(registry.source_path(spec), spec.entry(rc.params),
                                            compile_stage.CompileOptions(arch=facts.arch))
    record["compile"] = compiled.record()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "compile.log").write_text(compiled.log)
    if rc.mode == "compile":
        record["status"] = "compiled"
        return

    loaded = gpu.load(compiled.object_code, compiled.name_expression, launch.shared_bytes)
    record["compile"]["driver_attributes"] = {"registers": loaded.registers, "local_bytes": loaded.local_bytes,
                                              "static_shared_bytes": loaded.static_shared_bytes}
    record["occupancy"] = gpu.occupancy(loaded, launch)

    a, b = inputs_stage.make_inputs(rc.shape, rc.inputs)
    record["inputs"] = {"distribution": rc.inputs.distribution, "seed": rc.inputs.seed, "dtype": "float32",
                        "layout": "row-major", "A": [rc.shape.M, rc.shape.K], "B": [rc.shape.K, rc.shape.N]}
    d_a, d_b = gpu.to_device(a), gpu.to_device(b)
    d_c = gpu.allocate(rc.shape.M * rc.shape.N * 4)
    try:
        enqueue = gpu.launcher(loaded, launch, (d_a, d_b, d_c, np.int32(rc.shape.M), np.int32(rc.shape.N),
                                                np.int32(rc.shape.K)))
        gpu.fill_nan(d_c)  # never reuse another kernel's output: a missing store stays NaN
        enqueue()
        gpu.sync()
        c = gpu.to_host(d_c, (rc.shape.M, rc.shape.N))
        verdict = verify_stage.check(c, verify_stage.reference(a, b), rc.verify)
        record["verification"] = verdict.record()
        if not verdict.passed:
            raise VerificationError(f"wrong result: {verdict.summary()}")
        timing = timing_stage.time_events(gpu, enqueue, rc.timing)
        record["timing"] = timing.record(flops)
        record["status"] = "ok"
    finally:
        for buf in (d_a, d_b, d_c):
            buf.close()
