"""The ranking model of ``kernel=auto`` (issue 41, item 2): a candidate's predicted time for a problem.

A candidate is a (kernel, parameters) pair that :func:`gemmlab.dispatch.candidates.enumerate`
offers. Its time is predicted as a linear combination of a few physical terms (:func:`features`),
each in milliseconds, with non-negative coefficients fitted per (kernel, precision) on measured
records::

    t = c_launch * 1e-3                       (a fixed cost per launch: launch, prologue, epilogue)
      + c_wave   * ceil(W / S) * T_tile       (whole waves of work items at the SM's peak rate)
      + c_fluid  * 2*M*N*K / P                (the same work spread perfectly over the GPU)
      + c_dram   * bytes_min / BW             (A and B read once, C written once, split-K partials)
      + c_l2     * W * (BM + BN) * Kw * e / L2BW   (operand traffic of every tile: bytes per FLOP)
      + c_kstep  * ceil(W / S) * Kw / 1000 * 1e-3  (serial K steps of a wave: latency per K)

with W the work items of the launch (output tiles x K splits: :func:`geometry_of`), S the SM
count, ``T_tile = 2 * BM * BN * Kw / (P / S)`` the time of one work item at the SM's peak rate P / S
(P: the precision's dense peak, :data:`PEAK_FLOPS`), Kw the K length of one work item, e the input
element size and BW the DRAM bandwidth. ``c_wave`` against ``c_fluid`` is the wave-quantization
model of the CUTLASS documentation and of the Stream-K paper (Osama et al., "Stream-K: Work-centric
Parallel Decomposition for Dense Matrix-Matrix Multiplication on the GPU", PPoPP 2023): a data-
parallel launch pays for whole waves of tiles, a stream-K one close to the fluid time; the fill of
the last wave is ``(W / S) / ceil(W / S)``. ``c_dram`` and ``c_l2`` are the roofline's two memory
levels (Williams, Waterman, Patterson, "Roofline", CACM 2009): the minimum DRAM traffic and the
traffic of re-reading operand panels per tile, whose ratio to the FLOPs (bytes per FLOP) falls as
tiles grow. 1/c_wave is a kernel's efficiency at full waves.

Fitting (:func:`fit`): relative least squares (each row divided by its measured time, so a 10 us
shape weighs as much as a 10 ms one) with :func:`numpy.linalg.lstsq`, non-negativity by dropping a
negative coefficient and solving again (an active-set loop in the spirit of Lawson & Hanson's NNLS),
and ridge rows that pull each kernel's coefficients towards its precision's pooled fit
(:data:`PRIOR_WEIGHT`), so a kernel with few records stays near the pooled fit; a kernel the fit
never saw in a precision uses its own fit in a sibling precision (same units, rate and element
size: fp16 <-> bf16, :func:`sibling_precisions`), else the pooled fit of its precision (a drop-in
plugin). The ranking says which (:attr:`Ranked.fit`). Records of shapes whose
weight (N, K) occurs in the shape set's test split are left out (:mod:`gemmlab.dispatch.shapeset`).

The fitted parameters ship with the data they came from in ``gemmlab/data/model/<gpu>.json``
(schema :data:`SCHEMA`: the GPU, the archives, how many records each gave and were left out, the fit
error per kernel). Refit::

    python -m gemmlab.dispatch.model fit docs/results/*.jsonl.xz --gpu "NVIDIA H200" -o gemmlab/data/model/h200.json
    python -m gemmlab.dispatch.model fit TRAIN/records.jsonl.xz --gpu "NVIDIA H100 80GB HBM3" -o gemmlab/data/model/h100.json

A ``kernel=auto`` record made with first-use tuning gives the fit every candidate it timed and
verified (``dispatch.tuning.tried``: same shape, inputs and timing), not only the chosen one
(:func:`read_samples`), so a train-split run of ``.ci/heldout_bench.py --split train --auto
rank=model,tune=first_use,tune_k=K`` is K measurements a shape. A GPU without a shipped fit ranks
with the nearest sm_90 GPU's (:func:`model_for`).
    python -m gemmlab.dispatch.model rank 64 4096 4096 --precision bf16   # the ranking for a shape
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from gemmlab.contract.hookspecs import DeviceFacts, Problem, Shape
from gemmlab.errors import ConfigError
from gemmlab.paths import DATA_DIR

SCHEMA = "gemmlab.model/1"
MODEL_DIR = DATA_DIR / "model"
DEFAULT_MODEL = MODEL_DIR / "h200.json"
#: the terms of :func:`features`, in the order of a coefficient vector
TERMS = ("launch", "wave", "fluid", "dram", "l2", "kstep")
#: dense peak FLOP/s of the sm_90 class (H100/H200 SXM, boost clock) per precision's units:
#: CUDA-core FP32, TF32 / BF16 / FP16 tensor cores (NVIDIA H100 datasheet, dense figures)
PEAK_FLOPS = MappingProxyType({"fp32": 67e12, "tf32": 495e12, "bf16": 989e12, "fp16": 989e12})
AB_BYTES = MappingProxyType({"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2})
DRAM_BW = 4.8e12  # H200 HBM3e; the record's device.dram_peak_bytes_per_s where known
L2_BW = 12e12  # an order of magnitude for the sm_90 L2 (not a measured figure: c_l2 absorbs the error)
PRIOR_WEIGHT = 0.3  # ridge weight towards the pooled fit, per coefficient (relative-error units)
MIN_KERNEL_RECORDS = 6  # fewer: the kernel uses its precision's pooled fit
MIN_POOLED_RECORDS = 20  # fewer records of a precision: no pooled fit of its own (fp16 borrows bf16's, tf32 fp32's)
FALLBACK_PRECISION = MappingProxyType({"fp16": "bf16", "tf32": "fp32", "bf16": "fp16"})  # a precision without a pooled fit borrows


def sibling_precisions(precision: str) -> tuple[str, ...]:
    """The other precisions that run on the same units at the same rate with the same element size
    (equal :data:`PEAK_FLOPS` and :data:`AB_BYTES`: fp16 <-> bf16, both 989 TFLOP/s dense on the
    tensor cores and 2 bytes an element), in :data:`PEAK_FLOPS` order; ``()`` for an unknown precision.
    A kernel's fit in a sibling precision describes its time in this one better than the pooled fit
    does (issue 41: ``wgmma_bf16`` serves fp16 since 7effa16, with records in bf16 only)."""
    if precision not in PEAK_FLOPS or precision not in AB_BYTES:
        return ()
    return tuple(p for p in PEAK_FLOPS if p != precision and PEAK_FLOPS[p] == PEAK_FLOPS[precision]
                 and AB_BYTES.get(p) == AB_BYTES[precision])
SPLIT_KEYS = ("SPLIT_K", "SPLITS")  # parameters that split K across blocks (each a work item)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Geometry:
    """What :func:`features` needs of a candidate: its tile (BM x BN), K splits, work items and blocks."""

    bm: int
    bn: int
    splits: int
    work: int
    blocks: int


def geometry_of(spec, problem: Problem, params: Mapping[str, int], device: DeviceFacts) -> Geometry:
    """The candidate's tile, splits and work items, read from its parameters where they name the
    tile (``BM``/``BN``, else Triton's ``BLOCK_M``/``BLOCK_N``, else ``BY``/``BX``, else ``MT``/``NT``) and its launch
    (``spec.geometry``) otherwise: a kernel that names no tile gets the output area per block.
    Work items = output tiles x K splits (``SPLIT_K`` or ``SPLITS``); blocks = the launch's."""
    M, N, K = problem.shape
    try:
        blocks = int(spec.geometry(problem, dict(params), device).blocks)
    except Exception:
        blocks = 0
    splits = next((int(params[k]) for k in SPLIT_KEYS if k in params), 1)
    splits = max(1, min(splits, K))
    tile = next(((int(params[a]), int(params[b])) for a, b in (("BM", "BN"), ("BLOCK_M", "BLOCK_N"), ("BY", "BX"),
                                                                ("MT", "NT"))
                 if a in params and b in params), None)
    if tile is None:
        per = max(1, blocks // splits) if blocks else 1
        side = max(1.0, math.sqrt(M * N / per))
        bm = max(1, min(M, round(side)))
        tile = (bm, max(1, _cdiv(M * N, per * bm)))
    bm, bn = tile
    work = _cdiv(M, bm) * _cdiv(N, bn) * splits
    return Geometry(bm, bn, splits, work, blocks or work)


def features(shape: Sequence[int], precision: str, geo: Geometry, sm_count: int,
             dram_bw: float = DRAM_BW) -> np.ndarray:
    """The model's terms (:data:`TERMS`), each in ms, for one candidate on one problem (see the
    module docstring)."""
    M, N, K = (int(x) for x in shape)
    peak = PEAK_FLOPS.get(precision, PEAK_FLOPS["fp32"])
    e = AB_BYTES.get(precision, 4)
    kw = _cdiv(K, geo.splits)
    waves = _cdiv(geo.work, sm_count)
    t_tile = 2.0 * geo.bm * geo.bn * kw / (peak / sm_count)
    c_bytes = M * N * 4 * (1 + (2 * geo.splits if geo.splits > 1 else 0))  # split-K partials written and read
    return np.array([
        1e-3,
        waves * t_tile * 1e3,
        2.0 * M * N * K / peak * 1e3,
        ((M * K + K * N) * e + c_bytes) / dram_bw * 1e3,
        geo.work * (geo.bm + geo.bn) * kw * e / L2_BW * 1e3,
        waves * kw / 1000 * 1e-3,
    ])


def waves_text(geo: Geometry, sm_count: int) -> str:
    """``"1.45 waves of 64x128 tiles x 2 splits (fill 73%)"``."""
    w = geo.work / sm_count
    fill = w / max(1, math.ceil(w))
    splits = f" x {geo.splits} splits" if geo.splits > 1 else ""
    return f"{w:.2f} waves of {geo.bm}x{geo.bn} tiles{splits} (fill {fill:.0%})"


# --- the fitted model ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Model:
    """Fitted coefficients: ``kernels[(kernel, precision)]`` and ``pooled[precision]`` (each a dict
    term -> coefficient), the GPU they came from (``device``: name, sm_count) and ``meta`` (the
    data: archives, record counts, fit error). ``path``: the file it was read from."""

    kernels: Mapping[tuple[str, str], Mapping[str, float]]
    pooled: Mapping[str, Mapping[str, float]]
    device: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    path: str = ""

    def coefficients(self, kernel: str, precision: str) -> tuple[np.ndarray, str]:
        """The coefficient vector for ``kernel`` at ``precision`` and where it came from, in this
        order: ``"kernel"`` (its own fit at ``precision``); ``"kernel <sibling>"``, e.g. ``"kernel
        bf16"`` for fp16 (its own fit at a sibling precision: :func:`sibling_precisions`, same units,
        rate and element size); ``"pooled"`` (the pooled fit of ``precision``, else of its
        :data:`FALLBACK_PRECISION`); ``"default"`` (no fit at all)."""
        own = self.kernels.get((kernel, precision))
        if own is not None:
            return np.array([own.get(t, 0.0) for t in TERMS]), "kernel"
        for sib in sibling_precisions(precision):
            own = self.kernels.get((kernel, sib))
            if own is not None:
                return np.array([own.get(t, 0.0) for t in TERMS]), f"kernel {sib}"
        pool = self.pooled.get(precision) or self.pooled.get(FALLBACK_PRECISION.get(precision, ""))
        if pool is not None:
            return np.array([pool.get(t, 0.0) for t in TERMS]), "pooled"
        return np.array([5.0, 1.5, 0.0, 1.0, 0.0, 0.0]), "default"

    def predict_ms(self, kernel: str, precision: str, feats: np.ndarray) -> float:
        coef, _ = self.coefficients(kernel, precision)
        return float(coef @ feats)

    @property
    def gpu(self) -> str:
        return str(self.device.get("name") or "unknown GPU")

    def as_json(self) -> dict:
        return {"schema": SCHEMA, "device": dict(self.device), **dict(self.meta), "terms": list(TERMS),
                "pooled": {p: dict(c) for p, c in sorted(self.pooled.items())},
                "kernels": [{"kernel": k, "precision": p, "coefficients": dict(c)}
                            for (k, p), c in sorted(self.kernels.items())]}


def parse_model(data: Any, source: str = "<model>", field_name: str = "kernel.model") -> Model:
    """Validate a model file's JSON.

    Raises:
        ConfigError: ``field_name``: ``<source>: <the first rule broken>`` (one line).
    """
    def bad(what: str) -> ConfigError:
        return ConfigError(field_name, f"{source}: {what}")

    def coefs(c: Any, where: str) -> dict:
        if not isinstance(c, Mapping) or set(c) - set(TERMS):
            raise bad(f"{where}: coefficients must be an object over {', '.join(TERMS)}")
        for t, v in c.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise bad(f"{where}: coefficient {t} must be a finite number >= 0, got {v!r}")
        return {t: float(v) for t, v in c.items()}

    if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
        raise bad(f"schema must be {SCHEMA!r}")
    device = data.get("device") or {}
    if not isinstance(device, Mapping):
        raise bad("device must be an object (name, sm_count)")
    pooled = data.get("pooled") or {}
    if not isinstance(pooled, Mapping):
        raise bad("pooled must be an object precision -> coefficients")
    pooled = {str(p): coefs(c, f"pooled.{p}") for p, c in pooled.items()}
    kernels = {}
    for i, e in enumerate(data.get("kernels") or []):
        if not isinstance(e, Mapping) or not isinstance(e.get("kernel"), str) or not isinstance(e.get("precision"), str):
            raise bad(f"kernels[{i}] must name kernel and precision")
        kernels[(e["kernel"], e["precision"])] = coefs(e.get("coefficients"), f"kernels[{i}]")
    meta = {k: v for k, v in data.items() if k not in ("schema", "device", "pooled", "kernels", "terms")}
    return Model(kernels, pooled, device, meta, source)


@lru_cache(maxsize=16)
def _load(path: str, mtime_ns: int) -> Model:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError("kernel.model", f"{path}: cannot read it ({exc})") from None
    return parse_model(data, path)


def load_model(path: str | os.PathLike | None = None) -> Model:
    """Read a model file (default: the shipped :data:`DEFAULT_MODEL`)."""
    p = Path(path) if path is not None else DEFAULT_MODEL
    try:
        mtime = p.stat().st_mtime_ns
    except OSError as exc:
        raise ConfigError("kernel.model", f"{p}: cannot read it ({exc.strerror or exc})") from None
    return _load(str(p.resolve()), mtime)


def shipped_models() -> dict[str, Path]:
    """GPU name (the file's ``device.name``) -> shipped model file."""
    out = {}
    for f in sorted(MODEL_DIR.glob("*.json")):
        try:
            out[str(load_model(f).device.get("name"))] = f
        except ConfigError:
            continue
    return out


def gpu_distance(device: Mapping[str, Any], fitted: Mapping[str, Any]) -> float:
    """How far apart two sm_90 GPUs are for the model: |log| of the ratio of their SM counts plus
    |log| of the ratio of their DRAM bandwidths (the terms the features scale with: waves and the
    memory floor). A side that does not say uses the sm_90 SXM class's (132 SMs, :data:`DRAM_BW`)."""
    def num(d, key, default):
        v = d.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else default
    return (abs(math.log(num(device, "sm_count", 132) / num(fitted, "sm_count", 132)))
            + abs(math.log(num(device, "dram_peak_bytes_per_s", DRAM_BW) / num(fitted, "dram_peak_bytes_per_s", DRAM_BW))))


def model_for(gpu_name: str | None, path: str | os.PathLike | None = None,
              device: Mapping[str, Any] | None = None) -> tuple[Model, str]:
    """The model to rank with on GPU ``gpu_name``, and why: ``path`` if given; else the shipped fit
    whose GPU name matches (the H200's for ``NVIDIA H200``); else, for a GPU without a shipped fit,
    the shipped fit of the nearest GPU (:func:`gpu_distance` from ``device``, the GPU's record with
    ``sm_count`` and ``dram_peak_bytes_per_s``; ties and an unknown GPU: the default, the H200's),
    never an error; the SM count the ranking uses is always the device's own, not the fit's."""
    if path is not None:
        m = load_model(path)
        return m, f"model file {path} (fitted on {m.gpu})"
    models = shipped_models()
    if gpu_name and gpu_name in models:
        m = load_model(models[gpu_name])
        return m, f"shipped fit for {gpu_name} ({models[gpu_name].name})"
    m = load_model(DEFAULT_MODEL)
    if not gpu_name:
        return m, f"no GPU known here (mode=compile or no tuning): the shipped default fit, {m.gpu} ({DEFAULT_MODEL.name})"
    facts = dict(device or {})
    fits = sorted(((gpu_distance(facts, load_model(f).device), f != DEFAULT_MODEL, f) for f in models.values()),
                  key=lambda x: (round(x[0], 6), x[1], str(x[2])))
    if fits:
        m = load_model(fits[0][2])
    return m, (f"no fit for {gpu_name}; the shipped fit of the nearest sm_90 GPU, {m.gpu} ({Path(m.path).name}; "
               f"by SM count and DRAM bandwidth), with this GPU's SM count")


# --- ranking --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ranked:
    """A candidate with its predicted time and the terms behind it."""

    candidate: Any  # gemmlab.dispatch.candidates.Candidate
    predicted_ms: float
    geometry: Geometry
    fit: str  # "kernel", "kernel <sibling precision>", "pooled" or "default": Model.coefficients

    def as_dict(self, sm_count: int) -> dict:
        return {"name": self.candidate.name, "kernel": self.candidate.kernel, "params": dict(self.candidate.params),
                "predicted_ms": round(self.predicted_ms, 6), "fit": self.fit,
                "waves": waves_text(self.geometry, sm_count)}


def rank(candidates: Iterable, registry, problem: Problem, device: DeviceFacts, model: Model,
         dram_bw: float = DRAM_BW) -> list[Ranked]:
    """``candidates`` sorted by predicted time (ties: the enumeration's order)."""
    out = []
    for i, c in enumerate(candidates):
        spec = registry.kernels[c.kernel]
        geo = geometry_of(spec, problem, c.params, device)
        coef, how = model.coefficients(c.kernel, problem.precision)
        t = float(coef @ features(problem.shape, problem.precision, geo, device.sm_count, dram_bw))
        out.append((t, i, Ranked(c, t, geo, how)))
    return [r for _, _, r in sorted(out, key=lambda x: (x[0], x[1]))]


# --- fitting --------------------------------------------------------------------------------------

@dataclass
class Sample:
    """One measured record as the fit sees it."""

    kernel: str
    precision: str
    shape: tuple[int, int, int]
    layout: tuple[str, str]
    params: dict
    median_ms: float
    feats: np.ndarray
    source: str
    sm_count: int = 0  # the GPU's, from the record (0: not known)
    dram_bw: float = 0.0  # bytes/s the features used (the record's DRAM peak, else DRAM_BW)


def test_weights() -> set[tuple[int, int]]:
    """The (N, K) weights of the shipped shape set's test split (never fitted on)."""
    from gemmlab.dispatch.shapeset import load_shapes
    return {(e.shape.N, e.shape.K) for e in load_shapes("test")}


def tried_candidates(raw: Mapping[str, Any]) -> list[dict]:
    """The candidates first-use tuning timed for a ``kernel=auto`` record (``dispatch.tuning.tried``,
    :mod:`gemmlab.dispatch.tuning`) that were verified and have a median: ``[{"kernel", "params",
    "median_ms"}]``, in the order tried. Each was a backend of the record's own point (its inputs,
    float64 reference, verification, nets and timing protocol, sampled alternately with the others;
    older records: its own point with the same config), so its median is a measurement like the
    record's own."""
    d = raw.get("dispatch") if isinstance(raw.get("dispatch"), Mapping) else {}
    t = d.get("tuning") if isinstance(d.get("tuning"), Mapping) else {}
    out = []
    for e in t.get("tried") or []:
        if not isinstance(e, Mapping):
            continue
        median = e.get("median_ms")
        if (e.get("status") == "ok" and e.get("verified") is True and isinstance(e.get("kernel"), str)
                and isinstance(e.get("params"), Mapping) and isinstance(median, (int, float))
                and not isinstance(median, bool) and math.isfinite(median) and median > 0):
            out.append({"kernel": e["kernel"], "params": dict(e["params"]), "median_ms": float(median)})
    return out


def read_samples(archives: Iterable[str | os.PathLike], gpu: str, registry, excluded: set[tuple[int, int]],
                 counts: dict | None = None) -> list[Sample]:
    """The usable measurements of ``gpu`` in ``archives`` (record archives or sweep folders; a
    record inside another point's folder, such as a tuning candidate's ``tuning/<i>/result.json``
    or a sanitizer child's, is read through its parent only): each record that is ok and valid with
    a median time of a registered gemmlab (not library) kernel whose geometry can be computed, and
    each candidate its first-use tuning timed and verified (:func:`tried_candidates`; the one the
    point measured itself is its record), for shapes whose (N, K) is not in ``excluded``;
    duplicates (same kernel, params, shape, precision, layout, median) once. ``counts[archive]``
    gets {records, used, from_tuning, test_split, other_gpu, unusable}: ``used`` counts every
    sample, ``from_tuning`` those of them that came from tuning lists."""
    from gemmlab.contract.hookspecs import LibraryKernelSpec
    from gemmlab.gpu.device import offline_facts
    from gemmlab.stages import record_model
    base = offline_facts("90")
    out, seen = [], set()
    counts = counts if counts is not None else {}
    for arc in archives:
        c = counts.setdefault(str(arc), {"records": 0, "used": 0, "from_tuning": 0, "test_split": 0,
                                         "other_gpu": 0, "unusable": 0})
        for _, rec in record_model.records_of(arc, children=False):
            c["records"] += 1
            raw = rec.raw if isinstance(rec.raw, Mapping) else {}
            tried = tried_candidates(raw)
            own = rec.status == "ok" and rec.is_valid and rec.median_ms and rec.kernel
            if rec.shape is None or not (own or tried):
                c["unusable"] += 1
                continue
            if rec.device != gpu:
                c["other_gpu"] += 1
                continue
            M, N, K = rec.shape
            if (N, K) in excluded:
                c["test_split"] += 1
                continue
            settings = record_model.measurement_settings(raw)
            precision = settings.get("precision") or "fp32"
            lay = raw.get("layout") if isinstance(raw.get("layout"), Mapping) else {}
            layout = (lay.get("a", "row"), lay.get("b", "row"))
            dev = raw.get("device") if isinstance(raw.get("device"), Mapping) else {}
            sms = dev.get("sm_count") if isinstance(dev.get("sm_count"), int) else base.sm_count
            facts = DeviceFacts(name=gpu, arch="90", sm_count=sms, l2_bytes=base.l2_bytes)
            problem = Problem(Shape(M, N, K), precision, *layout)
            bw = rec.dram_peak_bytes_per_s or DRAM_BW

            def sample(kernel: str, params: Mapping[str, Any], median: float) -> tuple | None:
                spec = registry.kernels.get(kernel)
                if spec is None or isinstance(spec, LibraryKernelSpec):
                    return None
                full = {**dict(spec.defaults), **{k: v for k, v in params.items() if k in spec.defaults}}
                try:
                    geo = geometry_of(spec, problem, full, facts)
                except Exception:
                    return None
                key = (kernel, tuple(sorted(full.items())), (M, N, K), precision, layout, median)
                return key, Sample(kernel, precision, (M, N, K), layout, full, float(median),
                                   features((M, N, K), precision, geo, sms, bw), str(arc), sms,
                                   float(rec.dram_peak_bytes_per_s or 0.0))

            mine = sample(rec.kernel, rec.params or {}, rec.median_ms) if own else None
            took = 0
            if mine is not None and mine[0] not in seen:
                seen.add(mine[0])
                out.append(mine[1])
                took += 1
            measured_itself = (mine[1].kernel, mine[1].params) if mine is not None else None
            for t in tried:
                got = sample(t["kernel"], t["params"], t["median_ms"])
                if got is None or got[0] in seen or (got[1].kernel, got[1].params) == measured_itself:
                    continue
                seen.add(got[0])
                out.append(got[1])
                took += 1
                c["from_tuning"] += 1
            c["used"] += took
            if not took:
                c["unusable"] += 1
    return out


def _solve(X: np.ndarray, y: np.ndarray, prior: np.ndarray | None, weight: float) -> np.ndarray:
    """Non-negative relative least squares (numpy.linalg.lstsq on rows scaled by 1/y; a negative
    coefficient is fixed at 0 and the rest solved again), with ridge rows ``weight * (c - prior)``."""
    A = X / y[:, None]
    b = np.ones(len(y))
    n = X.shape[1]
    free = np.ones(n, dtype=bool)
    scale = np.maximum(np.abs(A).max(axis=0), 1e-12)  # columns on one scale for the solver
    for _ in range(n + 1):
        cols = np.flatnonzero(free)
        As, bs = A[:, cols] / scale[cols], b
        if prior is not None and weight > 0:  # ridge on the scaled coefficients: weight * (u - u_prior) = 0
            k = weight * math.sqrt(len(y))
            As = np.vstack([As, k * np.eye(len(cols))])
            bs = np.concatenate([b, k * prior[cols] * scale[cols]])
        sol, *_ = np.linalg.lstsq(As, bs, rcond=None)
        coef = np.zeros(n)
        coef[cols] = sol / scale[cols]
        if (coef >= 0).all():
            return coef
        worst = cols[np.argmin(sol)]
        free[worst] = False
    return np.clip(coef, 0, None)


def _errors(X: np.ndarray, y: np.ndarray, coef: np.ndarray) -> dict:
    rel = np.abs(X @ coef - y) / y
    return {"records": int(len(y)), "median_abs_rel_error": round(float(np.median(rel)), 4),
            "mean_abs_rel_error": round(float(np.mean(rel)), 4), "p90_abs_rel_error": round(float(np.quantile(rel, 0.9)), 4)}


def fit(samples: Sequence[Sample], prior_weight: float = PRIOR_WEIGHT) -> tuple[dict, dict, dict]:
    """Fit pooled coefficients per precision, then per (kernel, precision) with ridge rows towards
    the pooled ones (kernels with fewer than :data:`MIN_KERNEL_RECORDS` records keep the pooled
    fit). Returns ``(pooled, kernels, errors)``."""
    pooled, kernels, errors = {}, {}, {"pooled": {}, "kernels": {}}
    by_prec: dict[str, list[Sample]] = {}
    for s in samples:
        by_prec.setdefault(s.precision, []).append(s)
    for prec, ss in sorted(by_prec.items()):
        if len(ss) < MIN_POOLED_RECORDS:
            continue
        X = np.array([s.feats for s in ss])
        y = np.array([s.median_ms for s in ss])
        coef = _solve(X, y, None, 0.0)
        pooled[prec] = coef
        errors["pooled"][prec] = _errors(X, y, coef)
    by_kernel: dict[tuple[str, str], list[Sample]] = {}
    for s in samples:
        by_kernel.setdefault((s.kernel, s.precision), []).append(s)
    for key, ss in sorted(by_kernel.items()):
        if len(ss) < MIN_KERNEL_RECORDS:
            continue
        X = np.array([s.feats for s in ss])
        y = np.array([s.median_ms for s in ss])
        prior = pooled.get(key[1])
        if prior is None:
            prior = pooled.get(FALLBACK_PRECISION.get(key[1], ""))
        coef = _solve(X, y, prior, prior_weight if prior is not None else 0.0)
        kernels[key] = coef
        errors["kernels"][f"{key[0]}/{key[1]}"] = _errors(X, y, coef)
    # the whole model's error: each sample with the coefficients it would be ranked with
    X = np.array([s.feats for s in samples])
    y = np.array([s.median_ms for s in samples])
    model = Model({k: dict(zip(TERMS, v)) for k, v in kernels.items()}, {p: dict(zip(TERMS, v)) for p, v in pooled.items()})
    pred = np.array([model.predict_ms(s.kernel, s.precision, s.feats) for s in samples])
    rel = np.abs(pred - y) / y
    errors["all"] = {"records": int(len(y)), "median_abs_rel_error": round(float(np.median(rel)), 4),
                     "mean_abs_rel_error": round(float(np.mean(rel)), 4),
                     "p90_abs_rel_error": round(float(np.quantile(rel, 0.9)), 4)}
    errors["ranking"] = ranking_quality(samples, pred)
    return pooled, kernels, errors


def ranking_quality(samples: Sequence[Sample], pred: np.ndarray) -> dict:
    """Over the problems (shape, precision, layout) with 2+ measured candidates: how often the
    predicted fastest is the measured fastest, and the geomean of (measured time of the predicted
    fastest / measured fastest): 1.0 is a perfect ranking."""
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(samples):
        groups.setdefault((s.shape, s.precision, s.layout), []).append(i)
    hits, ratios = 0, []
    for idx in groups.values():
        if len(idx) < 2:
            continue
        best = min(idx, key=lambda i: samples[i].median_ms)
        pick = min(idx, key=lambda i: pred[i])
        hits += pick == best
        ratios.append(samples[pick].median_ms / samples[best].median_ms)
    n = len(ratios)
    return {"problems": n, "top1": round(hits / n, 3) if n else None,
            "geomean_slowdown_of_pick": round(float(np.exp(np.mean(np.log(ratios)))), 4) if n else None,
            "worst_slowdown_of_pick": round(float(max(ratios)), 3) if n else None}


def fit_model(archives: Sequence[str | os.PathLike], gpu: str, registry=None, excluded: set | None = None,
              prior_weight: float = PRIOR_WEIGHT) -> Model:
    """Read ``archives``, fit, and return the :class:`Model` with its provenance in ``meta``."""
    if registry is None:
        from gemmlab.contract.registry import load_registry
        registry = load_registry([])
    excluded = test_weights() if excluded is None else excluded
    counts: dict = {}
    samples = read_samples(archives, gpu, registry, excluded, counts)
    if not samples:
        raise ConfigError("archives", f"no usable {gpu} record in {', '.join(map(str, archives))}")
    pooled, kernels, errors = fit(samples, prior_weight)
    root = Path.cwd()

    def rel(p) -> str:
        try:
            return Path(p).resolve().relative_to(root).as_posix()
        except ValueError:
            return str(p)

    meta = {"made_by": "python -m gemmlab.dispatch.model fit", "created_utc": _dt.datetime.now(_dt.timezone.utc)
            .strftime("%Y-%m-%dT%H:%M:%SZ"),
            "method": "per (kernel, precision) non-negative relative least squares (numpy.linalg.lstsq, active "
                      f"set), ridge weight {prior_weight} towards the precision's pooled fit; kernels with fewer "
                      f"than {MIN_KERNEL_RECORDS} records use the pooled fit",
            "excluded": "records whose weight (N, K) occurs in the shape set's test split "
                        f"({len(excluded)} weights)",
            "records_used": len(samples),
            "from_tuning": sum(c.get("from_tuning", 0) for c in counts.values()),
            "archives": {rel(a): c for a, c in counts.items()},
            "per_precision": {p: sum(1 for s in samples if s.precision == p) for p in sorted({s.precision for s in samples})},
            "fit_error": errors,
            "constants": {"peak_flops": dict(PEAK_FLOPS), "dram_bytes_per_s_default": DRAM_BW, "l2_bytes_per_s": L2_BW}}
    return Model({k: dict(zip(TERMS, map(float, v))) for k, v in kernels.items()},
                 {p: dict(zip(TERMS, map(float, v))) for p, v in pooled.items()},
                 {"name": gpu, "arch": "sm_90", **_device_of(samples)}, meta)


def _device_of(samples: Sequence[Sample]) -> dict:
    """The SM count and DRAM bandwidth most of the samples were measured with (what
    :func:`gpu_distance` compares a GPU without a fit against); empty where none says."""
    from collections import Counter
    out: dict = {}
    sms = Counter(s.sm_count for s in samples if s.sm_count)
    bws = Counter(s.dram_bw for s in samples if s.dram_bw)
    if sms:
        out["sm_count"] = sms.most_common(1)[0][0]
    if bws:
        out["dram_peak_bytes_per_s"] = bws.most_common(1)[0][0]
    return out


# --- CLI ------------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    from gemmlab.console import OneLineParser
    p = OneLineParser(prog="python -m gemmlab.dispatch.model",
                      description="Fit kernel=auto's ranking model on record archives (fit), or print the ranking "
                                  "of the candidates for a shape (rank).")
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="fit on record archives/folders; write the model file")
    f.add_argument("archives", nargs="+", help="record archives (*.jsonl.xz) or sweep folders")
    f.add_argument("--gpu", default="NVIDIA H200", help="the device name of the records to use")
    f.add_argument("-o", "--out", required=True, help="the model file to write (JSON)")
    f.add_argument("--prior-weight", type=float, default=PRIOR_WEIGHT)
    r = sub.add_parser("rank", help="rank the candidates for M N K")
    r.add_argument("shape", nargs=3, type=int)
    r.add_argument("--precision", default="fp32")
    r.add_argument("--layout", default="row,row")
    r.add_argument("--model", default=None, help="a model file (default: the shipped one)")
    r.add_argument("--top", type=int, default=10)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from gemmlab.console import guard_streams
    prog = "python -m gemmlab.dispatch.model"
    guard_streams(prog)
    args = _parser().parse_args(argv)
    try:
        if args.command == "fit":
            model = fit_model(args.archives, args.gpu, prior_weight=args.prior_weight)
            out = Path(args.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(model.as_json(), indent=1) + "\n")
            e = model.meta["fit_error"]["all"]
            q = model.meta["fit_error"]["ranking"]
            print(f"{out}: {model.meta['records_used']} records of {args.gpu} ({model.meta['from_tuning']} of them "
                  f"candidates timed by first-use tuning); median |rel error| "
                  f"{e['median_abs_rel_error']:.1%}, p90 {e['p90_abs_rel_error']:.1%}; ranking over {q['problems']} "
                  f"problems: top-1 {q['top1']}, pick's geomean slowdown {q['geomean_slowdown_of_pick']}")
            return 0
        from gemmlab.contract.registry import load_registry
        from gemmlab.dispatch import candidates as cands
        from gemmlab.gpu.device import offline_facts
        registry = load_registry([])
        layout = tuple(args.layout.split(","))
        problem = Problem(Shape(*args.shape), args.precision, *layout)
        device = offline_facts("90")
        model, why = model_for(device.name, args.model)
        ranked = rank(cands.enumerate(registry, problem, device), registry, problem, device, model)
        print(f"model: {why}")
        for r in ranked[:args.top]:
            print(f"{r.predicted_ms:9.4f} ms  {r.candidate.name}  ({waves_text(r.geometry, device.sm_count)}; {r.fit} fit)")
        print(f"{len(ranked)} candidates")
    except (ConfigError, FileNotFoundError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
