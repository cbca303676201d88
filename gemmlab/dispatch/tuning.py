"""``kernel=auto`` with ``kernel.rank=model`` and ``kernel.tune=first_use`` (issue 41, item 2).

The ranking path (:func:`choose_ranked`), in this order:

1. the tuning table's exact or near entry (:func:`gemmlab.dispatch.auto.choose`'s table step), when
   the table was made on this GPU (its ``device.name``) or the GPU is not known (``mode=compile``);
2. with ``tune=first_use``: the per-device cache's entry for this problem (``source: "cache"``), else
   first-use tuning of the top ``tune_k`` candidates of the model's ranking in the point itself:
   :func:`choose_ranked` plans it (``dispatch.tuning.tried`` lists the candidates, ``state:
   "planned"``) and the pipeline runs ONE point whose backends are the candidates (plus the
   baseline): the inputs drawn, uploaded and referenced (float64) once, each candidate verified
   against the same reference and refused by the same safety nets, all timed alternately by the
   point's protocol (:mod:`gemmlab.run.first_use`). A candidate that fails verification or a net
   is dropped and recorded with its failure; candidates after the first are not reached once
   ``tune_budget_s`` is spent (checked between their compiles, and against each one's sampling
   time estimated from a probe launch before timing). :func:`finish` keeps the fastest survivor as
   the point's kernel (``source: "first_use"``); :func:`store_choice` writes it to the cache once
   the point is ``ok``;
3. otherwise the model's first candidate (``source: "model"``).

The candidates are :func:`gemmlab.dispatch.candidates.enumerate`'s (every registered gemmlab kernel's
declared or offered candidates; never a library kernel), ranked by :mod:`gemmlab.dispatch.model`
with the fit of this GPU (by name) or, for a GPU without a shipped fit, the shipped fit of the
nearest sm_90 GPU (SM count and DRAM bandwidth: :func:`gemmlab.dispatch.model.model_for`) with the
GPU's own SM count; with no ``kernel.table`` given, the table step uses the GPU's own shipped table
where there is one, none otherwise (the record's ``table``, ``table_note`` and ``model`` say which).

**The cache** (like Triton's autotune cache, but verified): one JSON file per device key, the key
being the GPU name, SM count, driver version, gemmlab version and a hash of every registered kernel's
source (:func:`device_key`), so a new driver, a new gemmlab or an edited kernel starts a new file.
Location: ``kernel.tune_cache`` (a folder), else ``$GEMMLAB_TUNING_CACHE``, else
``$XDG_CACHE_HOME/gemmlab/tuning`` (``~/.cache/gemmlab/tuning``). A write takes an exclusive
``fcntl.flock`` on ``<file>.lock``, re-reads the file, adds its entry and replaces the file
atomically (a temporary file in the same folder, ``os.replace``), so concurrent processes (several
GPUs of one host tuning at once) never lose each other's entries or leave a torn file; a reader
needs no lock. A file that cannot be read is treated as empty (the record says so) and rewritten on
the next store. Tuning runs inside the point, on the GPU the point holds (its per-GPU lock): its
measurement of the winner is the point's own.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from gemmlab.contract.hookspecs import DeviceFacts, LibraryKernelSpec, Problem, Shape
from gemmlab.errors import ConfigError

CACHE_SCHEMA = "gemmlab.tunecache/1"
RANKS = ("rules", "model")
TUNES = ("off", "first_use")
DEFAULT_RANK = "rules"  # kept until the model path is measured on the GPU (README: "Ranking and first-use tuning")
DEFAULT_TUNE = "off"
DEFAULT_TUNE_K = 4
DEFAULT_TUNE_BUDGET_S = 60.0
TOP_IN_RECORD = 8  # the model's top candidates listed in the record


def default_cache_dir() -> Path:
    """``$GEMMLAB_TUNING_CACHE``, else ``$XDG_CACHE_HOME/gemmlab/tuning``, else ``~/.cache/gemmlab/tuning``."""
    env = os.environ.get("GEMMLAB_TUNING_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gemmlab" / "tuning"


def sources_hash(registry) -> str:
    """sha256 over every registered gemmlab kernel's name, defaults and source file bytes (a
    kernel without a readable source contributes its name and defaults)."""
    h = hashlib.sha256()
    for name in sorted(registry.kernels):
        spec = registry.kernels[name]
        if isinstance(spec, LibraryKernelSpec):
            continue
        h.update(name.encode() + b"\0" + json.dumps(dict(spec.defaults), sort_keys=True).encode() + b"\0")
        try:
            h.update(Path(registry.source_path(spec)).read_bytes())
        except Exception:
            pass
        h.update(b"\1")
    return h.hexdigest()


def device_key(device: Mapping[str, Any], registry) -> dict:
    """The cache key: GPU name, SM count, driver version, gemmlab version, kernel sources' hash."""
    from gemmlab import __version__
    return {"gpu": str(device.get("name") or "unknown"), "sm_count": device.get("sm_count"),
            "driver_version": str(device.get("driver_version") or "none"), "gemmlab_version": __version__,
            "kernel_sources_sha256": sources_hash(registry)}


def cache_file(key: Mapping[str, Any], folder: str | os.PathLike | None = None) -> Path:
    """``<folder>/<gpu-slug>-<sha256 of the key, 16 hex>.json``."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(key.get("gpu", "gpu")).lower()).strip("-") or "gpu"
    digest = hashlib.sha256(json.dumps(dict(key), sort_keys=True).encode()).hexdigest()[:16]
    return Path(folder if folder is not None else default_cache_dir()) / f"{slug}-{digest}.json"


def problem_key(problem: Problem) -> str:
    """``"bf16 row/col 64x4096x4096"``."""
    s = problem.shape
    return f"{problem.precision} {problem.layout_a}/{problem.layout_b} {s.M}x{s.N}x{s.K}"


def read_cache(path: Path) -> tuple[dict, str | None]:
    """The cache file's entries (``{problem key: entry}``) and why it could not be read (None: read,
    or absent). A reader takes no lock: writers replace the file atomically."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as exc:
        return {}, f"{path}: unreadable ({type(exc).__name__}: {exc}); treated as empty"
    if not isinstance(data, Mapping) or data.get("schema") != CACHE_SCHEMA or not isinstance(data.get("entries"), Mapping):
        return {}, f"{path}: not a {CACHE_SCHEMA} file; treated as empty"
    return dict(data["entries"]), None


@contextlib.contextmanager
def _locked(path: Path):
    import fcntl
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def store(path: Path, key: Mapping[str, Any], pkey: str, entry: Mapping[str, Any]) -> None:
    """Add ``entry`` under ``pkey`` to the cache file: under an exclusive flock of ``<path>.lock``,
    re-read, merge, write a temporary file beside it and ``os.replace`` it into place."""
    with _locked(path):
        entries, _ = read_cache(path)
        entries[pkey] = dict(entry)
        data = {"schema": CACHE_SCHEMA, "key": dict(key), "entries": entries}
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


# --- settings ---------------------------------------------------------------------------------------

def settings(kernel: Mapping[str, Any]) -> dict:
    """``kernel.rank``, ``kernel.tune``, ``kernel.tune_k``, ``kernel.tune_budget_s``,
    ``kernel.tune_cache``, ``kernel.model`` of a ``kernel=auto`` config, checked (each field's rule
    in :data:`gemmlab.stages.config.FIELD_RULES`), with their defaults."""
    from gemmlab.stages.config import check_field
    tune = kernel.get("tune", DEFAULT_TUNE)
    if tune is False:  # YAML 1.1 reads a bare off as false
        tune = "off"
    return {"rank": check_field("kernel.rank", kernel.get("rank", DEFAULT_RANK)),
            "tune": check_field("kernel.tune", tune),
            "tune_k": check_field("kernel.tune_k", kernel.get("tune_k", DEFAULT_TUNE_K)),
            "tune_budget_s": float(check_field("kernel.tune_budget_s", kernel.get("tune_budget_s", DEFAULT_TUNE_BUDGET_S))),
            "tune_cache": check_field("kernel.tune_cache", kernel.get("tune_cache")),
            "model": check_field("kernel.model", kernel.get("model"))}


# --- the ranking path ---------------------------------------------------------------------------------

def _device(plain: Mapping[str, Any], tune: str, out_dir) -> tuple[dict, DeviceFacts, int | None]:
    """The GPU's record and facts when the point will run on one and tuning needs it (the point's
    own device, under its lock), else the sm_90 class's offline facts (``name``: compile only)."""
    from gemmlab.gpu.device import offline_facts
    if tune == "first_use" and plain.get("mode", "run") == "run" and out_dir is not None:
        from gemmlab.gpu.device import open_gpu, pick_device
        want = plain.get("device", 0)
        index = pick_device() if want == "auto" else int(want if want is not None else 0)
        gpu = open_gpu(index)
        return dict(gpu.record()), gpu.facts, index
    facts = offline_facts(str(plain.get("arch") or "90").removeprefix("sm_").rstrip("af") or "90")
    return {"name": None, "sm_count": facts.sm_count}, facts, None


def choose_ranked(plain: Mapping[str, Any], registry, problem: Problem, table, opts: Mapping[str, Any],
                  out_dir: str | os.PathLike | None = None, runner: Callable | None = None,
                  table_choice: Callable | None = None, own_table: Callable | None = None) -> tuple[str, dict, dict]:
    """The ranking path (module docstring). Returns ``(kernel, params, dispatch record)``.

    ``runner``: given (the pipeline passes its ``run_point``), the point runs first-use tuning
    itself, in the session that runs the point (:class:`gemmlab.run.session.Session`: the GPU is
    opened through its devices, under the point's lease; the candidates come from its registry and
    compile into its memo), so a cache miss plans it (:func:`planned`) and returns the model's first candidate
    until :func:`finish` chooses; None: no first-use tuning. ``table_choice(facts, table)`` returns the table's
    exact or near :class:`gemmlab.dispatch.auto.Choice` for the problem, or None (the caller's table
    step). ``own_table(gpu_name) -> (Table | None, [GPU names with a shipped table])`` (None when
    ``kernel.table`` was given): ``table`` is the shipped default, and a GPU with a shipped table of
    its own uses that one. ``record["table"]`` names the table used (None where none was) and
    ``record["model"]`` the fit and why.

    Raises:
        ConfigError: ``kernel``: no registered kernel offers a candidate for the problem.
    """
    from gemmlab.dispatch import candidates as cands, model as mdl
    device_rec, facts, index = _device(plain, opts["tune"], out_dir if runner is not None else None)
    gpu_name = device_rec.get("name")
    record: dict = {"requested": "auto", "path": None, "rank": opts["rank"], "tune": opts["tune"],
                    "table": table.path or None, "device": {"name": gpu_name or f"none ({facts.name})",
                                                            "sm_count": facts.sm_count}}
    # 1. the table, when it was made on this GPU (or the GPU is not known here); with no kernel.table
    # given, the shipped table of this GPU where there is one (gemmlab/data/tuning/<gpu>.json)
    table_gpu = table.device.get("name") if isinstance(table.device, Mapping) else None
    if gpu_name is not None and own_table is not None and table_gpu not in (None, gpu_name):
        mine, shipped = own_table(gpu_name)
        if mine is not None:
            table, table_gpu = mine, gpu_name
            record["table"] = table.path
        else:
            record["table_note"] = (f"no shipped table for {gpu_name} (shipped: {', '.join(sorted(shipped)) or 'none'}): "
                                    "the model's ranking and first-use tuning choose")
    if table.entries and table_choice is not None and (gpu_name is None or table_gpu in (None, gpu_name)):
        hit = table_choice(facts, table)
        if hit is not None:
            record.update(hit.record(), path="table", rank=opts["rank"], tune=opts["tune"])
            return hit.kernel, dict(hit.params), record
    elif table.entries:
        record["table_skipped"] = f"the table was made on {table_gpu}, this GPU is {gpu_name}"
        record["table"] = None  # none was used; table_skipped names the one given
    # 2. the model's ranking
    rejected: list = []
    found = cands.enumerate(registry, problem, facts, rejected=rejected)
    if not found:
        raise ConfigError("kernel", f"auto: no registered kernel offers a candidate for {problem_key(problem)} "
                          f"({'; '.join(f'{r.kernel}: {r.why}' for r in rejected[-6:])})")
    model, why = mdl.model_for(gpu_name, opts["model"], device_rec)
    dram = device_rec.get("dram_peak_bytes_per_s") or mdl.DRAM_BW
    ranked = mdl.rank(found, registry, problem, facts, model, dram)
    record["model"] = {"file": model.path, "gpu": model.gpu, "why": why, "candidates": len(ranked)}
    record["top"] = [r.as_dict(facts.sm_count) for r in ranked[:TOP_IN_RECORD]]
    best = ranked[0]
    if opts["tune"] == "first_use":
        if index is None:
            record["tuning"] = {"skipped": "first-use tuning runs candidates on the GPU: it needs mode=run (and "
                                           "the pipeline's point runner)"}
        else:
            hit = _first_use(registry, problem, ranked, opts, device_rec, index, record)
            if hit is not None:
                return hit
    record.update(path="model", source="model", chosen=best.candidate.kernel, params=dict(best.candidate.params),
                  predicted_ms=round(best.predicted_ms, 6))
    return best.candidate.kernel, dict(best.candidate.params), record


def _still_offered(registry, problem: Problem, facts: DeviceFacts, kernel: str, params: Mapping[str, int]) -> bool:
    spec = registry.kernels.get(kernel)
    if spec is None or isinstance(spec, LibraryKernelSpec) or set(params) != set(spec.defaults):
        return False
    try:
        spec.check_problem(problem, dict(params), facts)
    except Exception:
        return False
    return True


def _first_use(registry, problem, ranked, opts, device_rec, index, record: dict):
    """The cache's entry for the problem (returns ``(kernel, params, record)``), else first-use
    tuning planned in ``record["tuning"]`` (returns None: the point runs it, :func:`planned`)."""
    from gemmlab.gpu.device import open_gpu
    key = device_key(device_rec, registry)
    path = cache_file(key, opts["tune_cache"])
    pkey = problem_key(problem)
    entries, unreadable = read_cache(path)
    tuning: dict = {"cache": {"file": str(path), "key": key, "hit": False}, "problem": pkey, "k": opts["tune_k"],
                    "budget_s": opts["tune_budget_s"]}
    if unreadable:
        tuning["cache"]["unreadable"] = unreadable
    record["tuning"] = tuning
    facts = open_gpu(index).facts
    hit = entries.get(pkey)
    if isinstance(hit, Mapping) and _still_offered(registry, problem, facts, hit.get("kernel"), hit.get("params") or {}):
        tuning["cache"]["hit"] = True
        tuning["cache"]["entry"] = dict(hit)
        record.update(path="cache", source="cache", chosen=hit["kernel"], params=dict(hit["params"]),
                      reason=f"cache hit: {pkey} tuned {hit.get('created_utc', '?')} "
                             f"({hit.get('median_ms')} ms, best of {len(hit.get('tried') or [])} verified runs)")
        return hit["kernel"], dict(hit["params"]), record
    tuning.update(state="planned", result="not finished: the point stopped before its candidates were judged",
                  tried=[{"name": r.candidate.name, "kernel": r.candidate.kernel, "params": dict(r.candidate.params),
                          "predicted_ms": round(r.predicted_ms, 6), "median_ms": None, "status": "not_run",
                          "verified": False, "error": None} for r in ranked[:opts["tune_k"]]])
    return None


def planned(dispatch: Mapping[str, Any] | None) -> list[dict] | None:
    """The candidates first-use tuning is to time in this point: ``dispatch.tuning.tried`` (each
    ``{"name", "kernel", "params", "predicted_ms", "median_ms": None, "status": "not_run",
    "verified": False, "error": None}``, in the model's order) when :func:`choose_ranked` planned it
    (``state: "planned"``), else None. The runner fills each entry in place: ``median_ms`` (ms, the
    point's primary protocol), ``status`` (``ok``, a failure status, or ``not_reached``),
    ``verified``, ``error``."""
    t = dispatch.get("tuning") if isinstance(dispatch, Mapping) else None
    if isinstance(t, dict) and t.get("state") == "planned" and isinstance(t.get("tried"), list):
        return t["tried"]
    return None


def finish(dispatch: dict, elapsed_s: float, stopped_by: str | None = None) -> int | None:
    """Judge planned first-use tuning once the point has timed its candidates and run its nets:
    the fastest entry of ``dispatch.tuning.tried`` that is ``ok``, verified and has a median wins;
    the record gets ``path``/``source`` ``first_use``, ``chosen``, ``params``, ``predicted_ms``,
    ``measured_ms``, ``reason`` and ``tuning.model_error`` (median |predicted - measured| /
    measured over the timed candidates, and the model's rank of the winner). Returns the winner's
    index in ``tried``, or None when no candidate passed (``tuning.result`` says so; the record
    keeps the model's first candidate). ``elapsed_s``: the tuning's seconds; ``stopped_by``: why
    candidates were not reached (the budget), if any."""
    tuning = dispatch["tuning"]
    tuning.pop("state", None)
    tried = tuning["tried"]
    tuning["elapsed_s"] = round(elapsed_s, 3)
    if stopped_by:
        tuning["stopped_by"] = stopped_by
    good = [t for t in tried if t["status"] == "ok" and t["verified"] and isinstance(t["median_ms"], (int, float))]
    if not good:
        tuning["result"] = ("no candidate passed; the point fails with the model's first candidate's failure "
                            "(nothing is stored)")
        return None
    tuning.pop("result", None)
    best = min(good, key=lambda t: t["median_ms"])
    errs = [abs(t["predicted_ms"] - t["median_ms"]) / t["median_ms"] for t in good if t["median_ms"] > 0]
    tuning["model_error"] = {"median_abs_rel": round(sorted(errs)[len(errs) // 2], 4) if errs else None,
                             "model_first_rank_of_best": tried.index(best) + 1}
    dispatch.update(path="first_use", source="first_use", chosen=best["kernel"], params=dict(best["params"]),
                    predicted_ms=best["predicted_ms"], measured_ms=best["median_ms"],
                    reason=f"fastest verified of {len(good)}/{len(tried)} candidates timed in this point "
                           f"({best['median_ms']:.4g} ms; model predicted {best['predicted_ms']:.4g} ms)")
    return tried.index(best)


def store_choice(dispatch: dict) -> None:
    """Store the winner :func:`finish` chose in the per-device cache (``tuning.cache.stored``; a
    folder that cannot be written is recorded as ``store_error``: the choice stands and the next
    run tunes again). Call it once the point is ``ok``: a winner whose point failed a later net
    (the sanitizer) is never stored."""
    tuning = dispatch["tuning"]
    tried = tuning["tried"]
    best = next(t for t in tried if t["kernel"] == dispatch["chosen"] and t["params"] == dispatch["params"]
                and t["status"] == "ok")
    entry = {"kernel": best["kernel"], "params": best["params"], "name": best["name"], "median_ms": best["median_ms"],
             "predicted_ms": best["predicted_ms"], "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(
                 timespec="seconds"), "tried": [{k: t[k] for k in ("name", "predicted_ms", "median_ms", "status")}
                                                for t in tried]}
    cache = tuning["cache"]
    try:
        store(Path(cache["file"]), cache["key"], tuning["problem"], entry)
        cache["stored"] = True
    except OSError as exc:  # a read-only cache folder: the choice stands, the next run tunes again
        cache["stored"] = False
        cache["store_error"] = f"{type(exc).__name__}: {exc}"
