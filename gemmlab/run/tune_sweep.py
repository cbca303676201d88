"""The candidate sweep of ``gemmlab-tune sweep``: every candidate of every selected shape measured
once, resumable, into ``OUT/<family>/<M>x<N>x<K>/<kernel>-<params>/result.json``.

:func:`run_sweep` plans the points (:func:`gemmlab.dispatch.suite_candidates.candidates`): the
rules' choice of every shape first, then the variants of the cheapest shapes first, so a time
budget that stops it between points still covers every shape and drops the alternatives of the
most expensive ones. Each point goes through :func:`gemmlab.run.isolation.run_point` (verified,
timed against the baseline in the same process). Re-running resumes as ``resume=true`` does for
``gemmlab``: valid points of the same settings are skipped, also where such a record was copied
into OUT in another folder layout (:func:`copied_records`); failed ones and ones measured with
other settings run again (their old records kept aside); a point that finds no GPU stops the
sweep (every point would say the same).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from gemmlab.contract.hookspecs import Shape
from gemmlab.dispatch import auto as dispatch
from gemmlab.dispatch.shapes import Suite
from gemmlab.dispatch.suite_candidates import candidates
from gemmlab.errors import NoGPUError

def point_dir(out: Path, family: str, shape: Shape, kernel: str, params: Mapping[str, int]) -> Path:
    """``OUT/<family>/<M>x<N>x<K>/<kernel>-<k1>_<v1>-...``."""
    tag = "-".join(f"{k}{v}" for k, v in params.items())
    return out / family / f"{shape.M}x{shape.N}x{shape.K}" / (f"{kernel}-{tag}" if tag else kernel)


def run_sweep(out: str | Path, suite: Suite, registry, families: Sequence[str] = (), budget_s: float | None = None,
              base_config: Mapping[str, Any] | None = None, log: Callable[[str], None] = print,
              run: Callable | None = None, precision: str = dispatch.DEFAULT_PRECISION, kernels: Sequence[str] = ()) -> dict:
    """Measure the candidates of every selected shape: the rules' choice of every shape first, then
    the variants, cheapest shapes first (so a budget cuts the expensive shapes' alternatives).

    Args:
        out: sweep folder (re-running resumes as ``resume=true`` does for ``gemmlab``: a point whose
            result.json is a success of the same config is skipped, as is one whose valid record of
            the same config lies elsewhere under ``out`` (copied in: :func:`copied_records`); a failed point, or one measured
            with other settings (``--mode``, ``--precision``, the baseline, ...), runs again, its old
            record and artifacts kept as ``*.previous-<time>-<pid>*``).
        suite, families: the shapes (all families when empty).
        budget_s: stop starting new points after this many seconds (None: no limit).
        base_config: config fields for every point (baseline, timing, verify, mode, ...).
        run: ``run_point`` (injectable for tests); default: ``gemmlab.run.isolation.run_point`` when it
            exists (each point in a reused worker process, a faulty one costs only itself), else
            ``gemmlab.run.pipeline.run_point``.
        precision: the ``precision`` of every point (the table is keyed by it).
        kernels: measure only variants of these kernels (the rules' choice of every shape is
            always measured); empty: all.

    Returns:
        ``{"planned": n, "done": n, "skipped_existing": n, "retried": n, "replaced": n, "cut": n,
        "failed": n, "seconds": s}`` (``retried``: re-run after failing; ``replaced``: a valid record
        of other settings re-run), plus ``stopped`` (points not run) and ``stopped_by`` (the error) when a point
        found no GPU: every further point would say the same, so the sweep stops there.
    """
    if run is None:
        try:  # fault isolation (a worker process with a watchdog) where this gemmlab has it
            from gemmlab.run.isolation import run_point as run
        except ImportError:
            from gemmlab.run.pipeline import run_point as run
    out = Path(out)
    base = dict(base_config or {})
    start = time.monotonic()
    plan: list[tuple[str, Shape, str, dict]] = []
    per_shape = [(fam, s, candidates(s, fam, registry, precision=precision)) for fam in suite.families
                 if not families or fam in families for s in suite.families[fam]]
    # the rules' choice of every shape first (suite order); then the variants, cheapest shapes first
    # (by the elements of A, B and C: input generation and transfers dominate a point's cost)
    plan += [(fam, s, *cands[0]) for fam, s, cands in per_shape if cands]
    firsts = len(plan)
    rest = [(s.M * s.K + s.K * s.N + s.M * s.N, i, fam, s, *c) for fam, s, cands in per_shape
            for i, c in enumerate(cands[1:], 1) if not kernels or c[0] in kernels]
    plan += [(fam, s, kernel, params) for _, _, fam, s, kernel, params in sorted(rest, key=lambda r: (r[0], r[1]))]
    stats = {"planned": len(plan), "done": 0, "skipped_existing": 0, "retried": 0, "replaced": 0, "cut": 0,
             "failed": 0}
    from gemmlab.run.store import resume_key
    copied = copied_records(out, {point_dir(out, fam, s, kernel, params) / "result.json"
                                  for fam, s, kernel, params in plan})
    for n, (fam, s, kernel, params) in enumerate(plan):
        if budget_s is not None and time.monotonic() - start > budget_s:
            stats["cut"] = len(plan) - n
            what = (f"the rules' choices of {firsts - n} shapes and every variant" if n < firsts
                    else "variants after the rules' choices")
            log(f"budget of {budget_s:g} s reached: {stats['cut']} of {len(plan)} points not run ({what}; "
                f"first cut: {kernel} {dispatch._ptext(params)} at {s.M}x{s.N}x{s.K})")
            break
        d = point_dir(out, fam, s, kernel, params)
        cfg = {**base, "kernel": {"name": kernel, **params}, "shape": [s.M, s.N, s.K], "precision": precision}
        earlier = os.path.lexists(d / "result.json")
        if not earlier and copied.get(resume_key(cfg)):  # copied into --out elsewhere: it competes in build
            stats["skipped_existing"] += 1
            continue
        if earlier:  # gemmlab's resume=true decides: a valid record of the same config is kept, any other
            cfg["resume"] = True  # (failed, or made with another --mode/--precision/...) is set aside and re-run
        rec = run(cfg, d)
        if earlier and rec.get("resumed"):
            stats["skipped_existing"] += 1
            continue
        if earlier:
            stats["replaced" if _set_aside_was_valid(rec, d) else "retried"] += 1
        stats["done"] += 1
        ratio = (rec.get("ratio_to_baseline") or {}).get("median_time")
        ms = (rec.get("timing") or {}).get("median_ms")
        if not rec.get("valid"):
            stats["failed"] += 1
        log(f"[{n + 1}/{len(plan)}] {fam} {s.M}x{s.N}x{s.K} {kernel} {dispatch._ptext(params)}: {rec.get('status')}"
            + (f" {ms:.5f} ms" if isinstance(ms, float) else "")
            + (f", {100 / ratio:.1f}% of baseline" if isinstance(ratio, float) and ratio > 0 else "")
            + (f" ({rec.get('error')})" if rec.get("error") else ""))
        if rec.get("status") == NoGPUError.status:  # every further point would say the same: stop here
            stats["stopped"] = len(plan) - n - 1
            stats["stopped_by"] = rec.get("error")
            break
    stats["seconds"] = round(time.monotonic() - start, 1)
    return stats


def copied_records(out: Path, own: set[Path]) -> dict[str, Path]:
    """The valid records under ``out`` that lie elsewhere than at a planned point's own path
    (``own``): records copied in from an earlier sweep, in any folder layout. Keyed by
    :func:`gemmlab.run.store.valid_record_key`, so a planned point of the same config (same
    settings) finds its record among them and is not measured again; ``build`` ranks them with the
    rest (it reads every record under the folder). Each is read once, through the one record model
    (:mod:`gemmlab.stages.record_model`); a point's own record is left to the pipeline's resume."""
    from gemmlab.run.store import valid_record_key
    from gemmlab.stages.record_model import find_records, read_record
    if not out.is_dir():
        return {}
    found: dict[str, Path] = {}
    for path in find_records([out], children=False):
        if path not in own:
            key = valid_record_key(read_record(path).raw)
            if key is not None:
                found.setdefault(key, path)
    return found


def _set_aside_was_valid(rec: Mapping[str, Any], folder: Path) -> bool:
    """Whether the earlier record a re-run point's resume set aside was valid (then it was of other
    settings: ``replaced``; else ``retried``), as the pipeline's resume decided it from its one
    read: the ``why`` of the new record's last ``previous`` entry
    (:data:`gemmlab.run.store.SET_ASIDE`). Only where the resume's word was lost (its worker
    died after setting the record aside: the entry names the kept file alone; or it could not set
    it aside: no entry) is the earlier record read here (:func:`gemmlab.stages.record_model.read_record`;
    an unreadable one, also a fifo, is not valid)."""
    from gemmlab.run.store import SET_ASIDE
    from gemmlab.stages.record_model import read_record
    previous = rec.get("previous")
    entry = previous[-1] if isinstance(previous, list) and previous and isinstance(previous[-1], Mapping) else {}
    if entry.get("why") in SET_ASIDE.values():
        return entry["why"] == SET_ASIDE[True]
    kept = entry.get("record")
    return read_record(folder / (kept if isinstance(kept, str) else "result.json")).is_valid
