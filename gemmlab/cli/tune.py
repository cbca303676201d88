"""``gemmlab-tune``: the candidate sweep behind kernel=auto's tuning table, and its build/show/choose.

``gemmlab-tune sweep`` measures candidates (below); ``build`` makes a table from the sweep's records
(:func:`gemmlab.dispatch.auto.build_table`), ``show`` prints one, ``choose M N K`` prints what
kernel=auto picks (:func:`gemmlab.dispatch.auto.choose`, no GPU needed).

For each shape of the suite (:mod:`gemmlab.dispatch.shapes`) it measures a short list of candidate kernels
and parameters (:func:`candidates`): first the rules' own choice (:func:`gemmlab.dispatch.auto.choose`
with no table) for every shape, then the family's variants, each point through
:func:`gemmlab.run.pipeline.run_point` (verified, timed against the baseline in the same process),
into ``OUT/<family>/<M>x<N>x<K>/<kernel>-<params>/result.json``. A time budget stops it between
points; the rules' choices come first, then the variants of the cheapest shapes, so a cut sweep still covers
every shape and drops the alternatives of the most expensive ones. Re-running resumes (as ``resume=true``
does for ``gemmlab``): valid points of the same settings are skipped, also where such a record was
copied into OUT in another folder layout (:func:`copied_records`: it competes in ``build`` where it
lies), failed ones and ones measured
with other settings (``--mode``, ``--precision``, ...) run again (their old records kept aside); a point that finds no GPU stops
the sweep (every point would say the same). Then
``gemmlab-tune build OUT -o table.json`` picks the fastest valid record per shape (``OUT`` may also be
the sweep packed by ``gemmlab-report --archive``, read directly).

Candidates only name kernels that are registered and accept the shape (their ``check``); kernels
from other plugins are used when registered (``sgemm_*`` with their defaults, ``splitk`` with
SPLITS sized by the SM count; ``streamk`` and ``splitk_warptile`` with the rules' tile, WPS and
SPLITS variants). Kernels of drop-in and entry-point plugins add what their declared spaces (or
their own ``candidates()``) offer for the shape (:func:`plugin_candidates`, issue 41), with no
change here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from gemmlab.console import OneLineParser, count, folder_path, guard_streams, output_path, run_command, settled_exit
from gemmlab.contract.hookspecs import Shape
from gemmlab.dispatch import auto as dispatch
from gemmlab.dispatch.shapes import Suite
from gemmlab.errors import ConfigError, NoGPUError
from gemmlab.paths import file_in_the_way, not_a_regular_file

#: what an interrupted ``gemmlab-tune`` keeps (:func:`gemmlab.console.run_command`)
INTERRUPTED = "the points it finished keep their records; run the same command again to resume"
# kernels of other branches, tried with their defaults where registered
LARGE_KERNELS = ("sgemm_pipelined", "sgemm_warptile", "sgemm_block2d")
SPLIT_KERNELS = ("splitk",)
SEED_TILE = {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2}
OPTUNA_TILE = {"BM": 128, "BN": 128, "BK": 32, "TM": 16, "TN": 4}


def _sk(bm: int, bn: int, ks: int, bk: int = 16) -> tuple[str, dict]:
    return ("slicedk", {"BM": bm, "BN": bn, "BK": bk, "TM": 4, "TN": 4, "KS": ks})


def variants(shape: Shape, family: str) -> list[tuple[str, dict]]:
    """The family's extra candidates (before filtering), cheapest-to-measure families widest."""
    m = shape.M
    mt = 1
    while mt < min(m, 16):
        mt *= 2
    sms = dispatch.DEFAULT_SM_COUNT
    streamk = dispatch._streamk_params(shape, sms)
    out: list[tuple[str, dict]] = []
    if family == "decode":
        if m <= 16:
            for nt in (16, 32, 64):
                for u in (4, 8):
                    out.append(("gemv_rows", {"MT": mt, "NT": nt, "KW": 8, "U": u}))
            if m >= 8:  # half or all of a 16-row warp tile used: stream-K over 16 x 128 tiles
                out.append(("streamk", dict(dispatch.STREAMK_16)))
            out += [_sk(16, 32, 8, bk=8)]
        else:
            out += [("streamk", {**streamk, "WPS": 2}), ("splitk_warptile", dispatch._splitk_wt_params(shape, sms)),
                    _sk(32, 32, 4), _sk(16, 32, 8, bk=8), _sk(32, 64, 4), _sk(64, 64, 2),
                    ("gemv_rows", {"MT": 16, "NT": 32, "KW": 8, "U": 8}), ("tiled", dict(SEED_TILE))]
        out += [(k, dispatch._splitk_params(shape, sms)) for k in SPLIT_KERNELS]
    elif family == "tiny":
        out += [_sk(16, 16, 2, bk=8), _sk(16, 16, 4, bk=8), _sk(16, 16, 16, bk=8),
                ("small_tile", {"BX": 16, "BY": 16, "KS": 1}), ("small_tile", {"BX": 16, "BY": 16, "KS": 4}),
                ("small_tile", {"BX": 32, "BY": 8, "KS": 4}), _sk(16, 32, 8, bk=8), _sk(32, 32, 4),
                ("naive", {"BX": 16, "BY": 16}), ("tiled", {"BM": 32, "BN": 32, "BK": 16, "TM": 4, "TN": 1})]
    elif family == "k_heavy":
        wt = dispatch._splitk_wt_params(shape, sms)
        out += [("splitk_warptile", {**wt, "SPLITS": s}) for s in sorted({max(1, wt["SPLITS"] // 2), wt["SPLITS"]})]
        out += [("streamk", {**streamk, "WPS": 1, "MINB": 1})]
        splits = dispatch._splitk_params(shape, sms)["SPLITS"]
        out += [(k, {"SPLITS": s}) for k in SPLIT_KERNELS for s in sorted({max(1, splits // 2), splits, 2 * splits})]
        out += [_sk(16, 16, 16, bk=8), _sk(16, 32, 8, bk=8), _sk(16, 32, 8), _sk(32, 32, 4), _sk(32, 64, 4)]
    else:  # large, medium, odd, skinny: the big kernels, stream-K, two tiled tiles, slicedk where tiles are few
        out += [("streamk", streamk)] + [(k, {}) for k in LARGE_KERNELS]
        out += [("tiled", dict(OPTUNA_TILE)), ("tiled", dict(SEED_TILE))]
        if family in ("tall_skinny", "short_wide", "odd"):
            out += [_sk(32, 32, 4), _sk(64, 64, 2)]
        out += ([(k, dispatch._splitk_params(shape, sms)) for k in SPLIT_KERNELS]
                if family in ("tall_skinny", "short_wide") else [])
    return out


def variants_tc(shape: Shape, family: str) -> list[tuple[str, dict]]:
    """bf16/fp16 candidates beyond the rules' choice (before filtering): ``decode_bf16`` around its
    rule parameters (twice the splits, at most 8; 8 warps with half the splits, and with the same
    splits where K-heavy or unsplit; for M > 32 also 32-row
    blocks, and 64-row blocks of 8 warps) for decode and K-heavy shapes, ``wgmma_bf16`` SPLIT_K
    (where the kernel has it) for K-heavy ones, and for the other families the three
    ``wgmma_bf16`` tiles of least estimated cost (:func:`gemmlab.dispatch.auto._wgmma_params`'s
    model; the first also with TAIL=2 (stream-K) where its tiles leave a partial last wave) and ``mma_bf16``
    64x64; decode: also wgmma_bf16 64x128 (M > 32: and 64x256) ping-pong with SPLIT_K. Empty for tiny shapes (every kernel's defaults are measured)."""
    sms = dispatch.DEFAULT_SM_COUNT
    out: list[tuple[str, dict]] = []
    if family in ("decode", "k_heavy"):
        rules = dispatch.rules(shape, "bf16", dispatch.DEFAULT_LAYOUT, sms)
        p = next((dict(c[1]) for r in rules for c in r.candidates if c[0] == "decode_bf16"),
                 dispatch._decode16_params(shape, sms))
        s = p["SPLITS"]
        out += [("decode_bf16", {**p, "SPLITS": min(dispatch.DECODE16_MAX_SPLITS, 2 * s)}),
                ("decode_bf16", {**p, "KW": 8, "SPLITS": max(1, s // 2)})]
        if family == "k_heavy" or s == 1:
            out.append(("decode_bf16", {**p, "KW": 8}))
        if shape.M > 32 and p["MT"] == 4:
            out += [("decode_bf16", {**p, "MT": 2, "U": 2}), ("decode_bf16", {**p, "KW": 8, "SPLITS": max(1, s // 2),
                                                                             "U": 1})]
        if family == "decode":  # 64-row ping-pong wgmma tiles with split K (REDUCE=2), where wgmma_bf16 has it
            out += [("wgmma_bf16", dispatch._wgmma_split_params(shape, sms, (64, bn, 2)))
                    for bn in ((128, 256) if shape.M > 32 else (128,))]
        if family == "k_heavy":
            wg = dispatch._wgmma_split_params(shape, sms)
            out += [("wgmma_bf16", {**wg, "SPLIT_K": max(1, wg["SPLIT_K"] // 2)}),
                    ("wgmma_bf16", dispatch._wgmma_split_params(shape, sms, (128, 128, 1))),
                    ("wgmma_bf16", dispatch._wgmma_split_params(shape, sms, (64, 256, 2)))]
        return out
    if family == "tiny":
        return out
    ranked = sorted(dispatch._WGMMA_TILES, key=lambda t: dispatch._cdiv(dispatch._cdiv(shape.M, t[0])
                                                                        * dispatch._cdiv(shape.N, t[1]), sms)
                    * t[0] * t[1] / t[3])
    out += [("wgmma_bf16", {"BM": bm, "BN": bn, "SCHED": sched}) for bm, bn, sched, _ in ranked[:3]]
    bm, bn, sched, _ = ranked[0]
    tiles = dispatch._cdiv(shape.M, bm) * dispatch._cdiv(shape.N, bn)
    if tiles > sms and tiles % sms:  # a partial last wave: the stream-K tail (TAIL=2), where wgmma_bf16 has it
        out.append(("wgmma_bf16", {"BM": bm, "BN": bn, "SCHED": sched, "TAIL": 2}))
    out.append(dispatch._MMA16_64)
    return out


def candidates(shape: Shape, family: str, registry, table_sms: int = dispatch.DEFAULT_SM_COUNT,
               precision: str = dispatch.DEFAULT_PRECISION) -> list[tuple[str, dict]]:
    """Candidate (kernel, full params) pairs for ``shape``: the rules' choice first, then the
    family's :func:`variants` (fp32), :func:`variants_tc` (bf16, fp16) or, where those have
    none, every registered kernel with its defaults; only registered NVRTC
    kernels that support the precision and whose check accepts the shape, no duplicates. Where an
    ``sgemm_*`` rung is registered, ``tiled`` is no variant for the large-shape families."""
    from gemmlab.gpu.device import offline_facts
    facts = offline_facts("90")
    out: list[tuple[str, dict]] = []
    try:
        first = dispatch.choose(shape, registry, dispatch.Table(device={"sm_count": table_sms}), precision)
        out.append((first.kernel, dict(first.params)))
    except Exception:  # no kernel at all: the variants may still have one
        pass
    extra = (variants(shape, family) if precision == "fp32"
             else variants_tc(shape, family) or [(name, {}) for name in registry.kernels])
    extra += plugin_candidates(shape, registry, precision, facts)
    if any(k in registry.kernels for k in LARGE_KERNELS) and family not in ("tiny", "k_heavy", "decode"):
        extra = [(k, p) for k, p in extra if k != "tiled"]  # the sgemm rungs beat it (docs/results/ladder-h200.md)
    for name, params in extra:
        full, _ = dispatch._try(registry, name, params, shape, precision, dispatch.DEFAULT_LAYOUT, facts)
        if full is not None and (name, full) not in out:
            out.append((name, full))
    return out


#: candidates per shape of each kernel from a plugin other than the built-in ones (each is a measured point)
PLUGIN_CANDIDATES = 8


def plugin_candidates(shape: Shape, registry, precision: str, facts, limit: int = PLUGIN_CANDIDATES
                      ) -> list[tuple[str, dict]]:
    """What the kernels of drop-in and entry-point plugins offer for ``shape`` (issue 41: their
    declared spaces or their own ``candidates()``, through :func:`gemmlab.dispatch.candidates.enumerate`),
    at most ``limit`` each: a new kernel takes part in the sweep with no change here. The built-in
    kernels keep the hand-picked :func:`variants` / :func:`variants_tc` (their measured tables and
    tests rest on them)."""
    from gemmlab.contract.hookspecs import Problem
    from gemmlab.contract.registry import BUILTIN_PACKAGE
    from gemmlab.dispatch.candidates import enumerate as enumerate_candidates
    origins = getattr(registry, "origins", None) or {}
    others = [name for name, origin in origins.items() if not str(origin).startswith(f"{BUILTIN_PACKAGE}.")]
    if not others:
        return []
    problem = Problem(shape, precision, *dispatch.DEFAULT_LAYOUT)
    return [(c.kernel, dict(c.params)) for c in enumerate_candidates(registry, problem, facts, kernels=others, limit=limit)]


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
    from gemmlab.run.pipeline import resume_key
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
    :func:`gemmlab.run.pipeline.valid_record_key`, so a planned point of the same config (same
    settings) finds its record among them and is not measured again; ``build`` ranks them with the
    rest (it reads every record under the folder). Each is read once, through the one record model
    (:mod:`gemmlab.stages.record_model`); a point's own record is left to the pipeline's resume."""
    from gemmlab.run.pipeline import valid_record_key
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
    (:data:`gemmlab.run.pipeline.SET_ASIDE`). Only where the resume's word was lost (its worker
    died after setting the record aside: the entry names the kept file alone; or it could not set
    it aside: no entry) is the earlier record read here (:func:`gemmlab.stages.record_model.read_record`;
    an unreadable one, also a fifo, is not valid)."""
    from gemmlab.run.pipeline import SET_ASIDE
    from gemmlab.stages.record_model import read_record
    previous = rec.get("previous")
    entry = previous[-1] if isinstance(previous, list) and previous and isinstance(previous[-1], Mapping) else {}
    if entry.get("why") in SET_ASIDE.values():
        return entry["why"] == SET_ASIDE[True]
    kept = entry.get("record")
    return read_record(folder / (kept if isinstance(kept, str) else "result.json")).is_valid


def parse_families(text: str | None, suite: Suite) -> list[str]:
    """``"decode,tiny"`` -> the names, checked against the suite (ConfigError ``families``)."""
    names = [t for t in (text or "").split(",") if t.strip()]
    if text is not None and not names:  # '' had meant every family
        raise ConfigError("families", "is empty; name families, comma-separated, or leave the option out for all")
    suite.select(names)
    return names


def sweep_main(args) -> int:
    """``gemmlab-tune sweep``: see the module docstring."""
    from gemmlab.contract.registry import load_registry
    from gemmlab.dispatch.shapes import load_suite
    suite = load_suite(args.suite)
    registry = load_registry(args.plugin_dirs)
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
    from gemmlab.cli.folders import FolderError, claim, other_kind_of_folder
    out = Path(args.out)
    refusal = other_kind_of_folder(out, "tune")  # a run's or a -m sweep's folder, or one inside either
    if refusal:
        raise ConfigError("--out", refusal)
    try:
        held = claim(Path(args.out), "--out")  # one sweep at a time in a folder (released when this one ends)
    except FolderError as exc:
        print(f"{dispatch.PROG}: error: {exc.message}", file=sys.stderr)
        return exc.code
    with held:
        stats = run_sweep(args.out, suite, registry, families, args.budget, base, precision=args.precision,
                          kernels=kernels)
    print(sweep_line(args.out, stats))
    if stats.get("stopped_by"):
        print(f"{dispatch.PROG}: error: {stats['stopped_by']}; the sweep stopped at its first point (every point "
              "would say the same); run it where a GPU is, or with --mode compile", file=sys.stderr)
    return 1 if stats.get("failed") else 0


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


def add_parser(sub) -> None:
    """Register ``gemmlab-tune sweep`` on an argparse subparsers object."""
    s = sub.add_parser("sweep", help="measure candidate kernels over the shape suite (records for build)")
    s.add_argument("--out", type=output_path, required=True, help="sweep folder (re-running resumes: valid points of the same "
                   "settings are skipped; failed ones, and ones measured with other settings, run again)")
    s.add_argument("--families", help="comma-separated families (default: all)")
    s.add_argument("--kernels", help="comma-separated kernels: only their variants are measured (the rules' "
                   "choice of every shape always is; default: all)")
    s.add_argument("--suite", help="shape suite YAML (default: the shipped one)")
    s.add_argument("--budget", type=float, help="seconds; no new point starts after it")
    s.add_argument("--baseline", default="cublas", help="baseline kernel measured alternately (default cublas; none: no baseline)")
    s.add_argument("--mode", default="run", choices=("run", "compile"))
    s.add_argument("--repeat", type=int, default=5, help="graph-timed samples per point (default 5)")
    s.add_argument("--batch", type=int, default=10, help="launches per sample (default 10)")
    s.add_argument("--max-full", type=int, default=2 ** 32, dest="max_full",
                   help="full float64 check up to this M*N*K, sampled rows/columns + Freivalds above (default 2^32)")
    s.add_argument("--precision", default=dispatch.DEFAULT_PRECISION, choices=dispatch.PRECISION_NAMES)
    s.add_argument("--plugin-dir", action="append", default=[], dest="plugin_dirs", type=folder_path)


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=dispatch.PROG, description="Measure candidates (sweep), build, show and query "
                                "kernel=auto's tuning table.")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build a table from sweep records (result.json under the paths)")
    b.add_argument("paths", nargs="+", help="sweep folders, record archives (*.jsonl.xz, or a folder inside one) "
                   "or result.json files")
    b.add_argument("-o", "--out", type=output_path, required=True, help="table file to write (refused if it exists unless --force)")
    b.add_argument("--device", help="use only records of this GPU name")
    b.add_argument("--force", action="store_true", help="overwrite --out")
    b.add_argument("--records-dir", dest="records_dir",
                   help="write each entry's record path relative to this folder (or record archive) and name "
                        "it in the table (for a table shipped with its records)")
    s = sub.add_parser("show", help="print a table's entries")
    s.add_argument("table", nargs="?", help="table file (default: the shipped H200 table)")
    c = sub.add_parser("choose", help="what kernel=auto picks for a shape (no GPU needed)")
    c.add_argument("M", type=int)
    c.add_argument("N", type=int)
    c.add_argument("K", type=int)
    c.add_argument("--table", help="table file (default: the shipped H200 table)")
    c.add_argument("--precision", default=dispatch.DEFAULT_PRECISION, choices=dispatch.PRECISION_NAMES)
    c.add_argument("--layout", default="row,row", help="a,b: each row or col")
    c.add_argument("--plugin-dir", action="append", default=[], dest="plugin_dirs", type=folder_path)
    add_parser(sub)
    return p


def _table_out(text: str, force: bool) -> Path:
    """The ``build -o`` path checked before any record is read: a regular file it may write (an
    existing one only with ``--force``), never a folder, a device, a pipe or a socket (``--force``
    turned /dev/null into a table, a folder into a traceback).

    Raises:
        ConfigError: ``out``, naming what is wrong and what is allowed."""
    out = Path(text)  # an empty one is refused by the parser (gemmlab.console.output_path)
    if out.is_dir():
        raise ConfigError("out", f"{out} is a folder; give a table file, e.g. -o {out / 'table.json'}")
    odd = "a broken link" if out.is_symlink() and not out.exists() else not_a_regular_file(out)
    if odd:
        raise ConfigError("out", f"{out} is {odd}; give a table file")
    if out.exists() and not force:
        raise ConfigError("out", f"{out} exists; pass --force to replace it")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``gemmlab-tune sweep|build|show|choose``. Exit 0 on success, 1 when a sweep point failed,
    2 with one line on bad input (flags checked before any point runs)."""
    guard_streams(dispatch.PROG)
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "sweep":
            return sweep_main(args)
        if args.cmd == "build":
            out = _table_out(args.out, args.force)
            table, stats = dispatch.build_table(args.paths, args.device, args.records_dir)
            tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(json.dumps(table.as_json(), indent=1) + "\n")
                os.replace(tmp, out)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                blocking = file_in_the_way(out)
                why = f"{blocking} is a file, not a folder" if blocking is not None else exc.strerror or str(exc)
                raise ConfigError("out", f"cannot write {out} ({why}); give a table file in a folder that can be "
                                  "written") from None
            skipped = ", ".join(f"{v} {k}" for k, v in stats["skipped"].items()) or "none"
            print(f"{out}: {len(table.entries)} entries from {stats['used']} of {stats['records']} records "
                  f"(skipped: {skipped}); device {table.device.get('name')}")
        elif args.cmd == "show":
            table = dispatch.load_table(args.table, field_name="table")
            print(f"{table.path}: device {table.device.get('name', '?')}, {len(table.entries)} entries")
            for e in table.entries:
                ratio = e.extra.get("ratio_to_baseline")
                print(f"  {e.precision} {'/'.join(e.layout)} {e.shape.M}x{e.shape.N}x{e.shape.K}: {e.kernel} "
                      f"{dispatch._ptext(e.params)}" + (f"  ({dispatch.ratio_text(ratio, e.extra.get('baseline'))})"
                                                        if isinstance(ratio, (int, float)) else ""))
        else:
            from gemmlab.stages.config import parse_shape
            from gemmlab.contract.registry import load_registry
            layout = tuple(args.layout.split(","))
            if len(layout) != 2 or not all(x in dispatch.LAYOUT_NAMES for x in layout):
                raise ConfigError("layout", f"must be a,b with each row or col, got {args.layout!r}")
            table = dispatch.load_table(args.table, field_name="table")
            choice = dispatch.choose(parse_shape([args.M, args.N, args.K]), load_registry(args.plugin_dirs), table,
                                     args.precision, layout)
            shown = choice.record()
            entry = shown.get("entry") or {}
            if isinstance(entry.get("ratio_to_baseline"), (int, float)):  # a time ratio, not a speed-up: say so
                entry["ratio_to_baseline_means"] = dispatch.ratio_text(entry["ratio_to_baseline"], entry.get("baseline"))
            print(json.dumps(shown, indent=1))
    except ConfigError as exc:
        print(f"{dispatch.PROG}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _entry() -> None:
    """``python -m gemmlab.cli.tune``: :func:`main`, an interrupt in one line (:func:`gemmlab.console.run_command`)."""
    sys.exit(run_command(dispatch.PROG, main, INTERRUPTED))


if __name__ == "__main__":
    with settled_exit():
        _entry()
