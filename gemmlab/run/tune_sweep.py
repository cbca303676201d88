"""The candidate sweep of ``gemmlab-tune sweep``: every candidate of every selected shape measured
once, resumable, into ``OUT/<family>/<M>x<N>x<K>/<kernel>-<params>/result.json``.

:func:`run_sweep` plans the points (:func:`gemmlab.dispatch.suite_candidates.candidates`): the
rules' choice of every shape first, then the variants of the cheapest shapes first, so a time
budget that stops it between points still covers every shape and drops the alternatives of the
most expensive ones. Each point goes through :meth:`gemmlab.run.session.Session.run_point` (verified,
timed against the baseline in the same process). Re-running resumes as ``resume=true`` does for
``gemmlab``: valid points of the same settings are skipped, also where such a record was copied
into OUT in another folder layout (:func:`copied_records`); failed ones and ones measured with
other settings run again (their old records kept aside); a point that finds no GPU stops the
sweep (every point would say the same). :func:`sweep_command` is the command behind
``gemmlab-tune sweep`` (:mod:`gemmlab.cli.tune` parses and prints): its flags checked before any
point runs, its folder claimed, the sweep run.
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
from gemmlab.console import count
from gemmlab.errors import ConfigError, NoGPUError


def parse_families(text: str | None, suite: Suite) -> list[str]:
    """``"decode,tiny"`` -> the names, checked against the suite (ConfigError ``families``)."""
    names = [t for t in (text or "").split(",") if t.strip()]
    if text is not None and not names:  # '' had meant every family
        raise ConfigError("families", "is empty; name families, comma-separated, or leave the option out for all")
    suite.select(names)
    return names


def sweep_command(args, log: Callable[[str], None] = print) -> dict:
    """``gemmlab-tune sweep``: check its flags (``args``, the command's argparse namespace: ``out``,
    ``families``, ``kernels``, ``suite``, ``budget``, ``baseline``, ``mode``, ``repeat``, ``batch``,
    ``max_full``, ``precision``, ``plugin_dirs``) before any point runs, claim ``--out``
    (:func:`gemmlab.run.folders.claim`: one sweep at a time in a folder) and :func:`run_sweep`.

    Returns:
        :func:`run_sweep`'s counts (:func:`sweep_line` says them).

    Raises:
        ConfigError: a flag, naming it and what is allowed.
        FolderError: ``--out`` is in use or cannot be written.
    """
    from gemmlab.dispatch.shapes import load_suite
    from gemmlab.run.session import Session
    suite = load_suite(args.suite)
    session = Session(plugin_dirs=[str(d) for d in args.plugin_dirs])  # the one point runner, and its registry
    registry = session.registry()
    baseline = _check_sweep_flags(args, registry)
    base: dict[str, Any] = {"baseline": baseline, "mode": args.mode,
                            "timing": {"mode": "graph", "warmup": 3, "repeat": args.repeat, "batch": args.batch,
                                       "floor": False},
                            "verify": {"max_full": args.max_full}, "plugin_dirs": list(args.plugin_dirs)}
    if baseline is None:
        base["baseline"] = None  # --baseline none: no baseline (the config's baseline=null)
    kernels = [k for k in (args.kernels or "").split(",") if k.strip()]
    if args.kernels is not None and not kernels:  # '' had meant every kernel
        raise ConfigError("kernels", "is empty; name kernels, comma-separated, or leave the option out for all")
    unknown = sorted(set(kernels) - set(registry.kernels))
    if unknown:
        raise ConfigError("kernels", f"unknown kernel {unknown[0]!r}; registered: {', '.join(sorted(registry.kernels))}")
    missing = _baseline_missing(baseline, registry) if args.mode == "run" else None
    if missing:  # every point would fail the same way (mode=compile notes and skips the baseline)
        raise ConfigError("--baseline", f"{baseline} is not available here ({missing}); install it, or pass "
                          "--baseline none (no baseline) or --mode compile")
    families = parse_families(args.families, suite)
    from gemmlab.run.folders import claim, other_kind_of_folder
    out = Path(args.out)
    refusal = other_kind_of_folder(out, "tune")  # a run's or a -m sweep's folder, or one inside either
    if refusal:
        raise ConfigError("--out", refusal)
    with claim(out, "--out"):  # one sweep at a time in a folder (released when this one ends)
        return run_sweep(args.out, suite, registry, families, args.budget, base, run=session.run_point, log=log,
                         precision=args.precision, kernels=kernels)


def _baseline_missing(baseline: str | None, registry) -> str | None:
    """Why the baseline kernel cannot run here (a library that is not installed), or None."""
    if baseline is None:
        return None
    from gemmlab.gpu.backends import backend_for
    spec = registry.get(baseline)
    return backend_for("baseline", baseline, spec, dict(spec.defaults)).unavailable()


#: ``--baseline`` values that switch the baseline off (the config's ``baseline=null``)
NO_BASELINE = ("none", "null")


def _check_sweep_flags(args, registry) -> str | None:
    """Check the flags of ``gemmlab-tune sweep`` before any point runs; returns the baseline
    kernel (None for ``--baseline none``/``null``).

    Raises:
        ConfigError: the flag as field (``--repeat``, ``--batch``, ``--budget``, ``--max-full``,
            ``--baseline``) and what is allowed.
    """
    for flag, value, low, high in (("--repeat", args.repeat, 1, 100_000), ("--batch", args.batch, 1, 100_000),
                                   ("--max-full", args.max_full, 1, None)):
        if value < low or (high is not None and value > high):
            allowed = f"an integer in [{low}, {high}]" if high is not None else f"an integer >= {low}"
            raise ConfigError(flag, f"must be {allowed}, got {value}")
    if args.budget is not None and not args.budget > 0:  # also NaN
        raise ConfigError("--budget", f"must be a number of seconds > 0 (leave it out for no limit), got {args.budget:g}")
    baseline = args.baseline
    if baseline is None or baseline.strip().lower() in NO_BASELINE:
        return None
    if baseline not in registry.kernels:
        raise ConfigError("--baseline", f"unknown kernel {baseline!r}; registered: {', '.join(sorted(registry.kernels))}"
                          f"; or none (no baseline)")
    return baseline


def sweep_line(out, stats: Mapping[str, Any]) -> str:
    """The final line of ``gemmlab-tune sweep``: the counts of :func:`run_sweep` in words."""
    parts = [f"{count(stats.get('planned', 0), 'point')} planned", f"{stats.get('done', 0)} run",
             f"{stats.get('failed', 0)} failed"]
    if stats.get("retried"):
        parts.append(f"{stats['retried']} of them re-run after failing before (old records kept as "
                     "result.previous-*.json)")
    if stats.get("replaced"):
        parts.append(f"{stats['replaced']} of them re-run as their valid records came from other settings "
                     "(--mode, --precision, --baseline, ...; kept as result.previous-*.json)")
    if stats.get("skipped_existing"):
        parts.append(f"{stats['skipped_existing']} skipped (a valid result.json already there)")
    if stats.get("stopped"):
        parts.append(f"{stats['stopped']} not run (no GPU)")
    if stats.get("cut"):
        parts.append(f"{stats['cut']} not run (budget)")
    return f"{out}: " + ", ".join(parts) + f" in {stats.get('seconds', 0):g} s"


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
        run: ``run(cfg, out_dir) -> record`` (injectable for tests); default: a
            :meth:`gemmlab.run.session.Session.run_point` (each point in a reused worker process, a
            faulty one costs only itself), the runner of the ``gemmlab`` command's points.
        precision: the ``precision`` of every point (the table is keyed by it).
        kernels: measure only variants of these kernels (the rules' choice of every shape is
            always measured); empty: all.

    Returns:
        ``{"planned": n, "done": n, "skipped_existing": n, "retried": n, "replaced": n, "cut": n,
        "failed": n, "seconds": s}`` (``retried``: re-run after failing; ``replaced``: a valid record
        of other settings re-run), plus ``stopped`` (points not run) and ``stopped_by`` (the error) when a point
        found no GPU: every further point would say the same, so the sweep stops there.
    """
    if run is None:  # the one point runner: a worker process with a watchdog, as the gemmlab command's points
        from gemmlab.run.session import Session
        run = Session().run_point
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
