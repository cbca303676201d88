"""``gemmlab-tune``: the command line of the candidate sweep behind kernel=auto's tuning table, and
of its build/show/choose.

``gemmlab-tune sweep`` measures the candidates of the shape suite
(:func:`gemmlab.run.tune_sweep.run_sweep`, the candidates from
:mod:`gemmlab.dispatch.suite_candidates`; re-running resumes); ``build`` makes a table from the
sweep's records (:func:`gemmlab.dispatch.auto.build_table`; ``OUT`` may also be the sweep packed by
``gemmlab-report --archive``, read directly), ``show`` prints one, ``choose M N K`` prints what
kernel=auto picks (:func:`gemmlab.dispatch.auto.choose`, no GPU needed). Flags are checked before
any point runs; bad input is one line, exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from gemmlab.console import OneLineParser, count, folder_path, guard_streams, output_path, run_command, settled_exit
from gemmlab.dispatch import auto as dispatch
from gemmlab.dispatch.shapes import Suite
from gemmlab.errors import ConfigError
from gemmlab.paths import file_in_the_way, not_a_regular_file
from gemmlab.run.tune_sweep import run_sweep
from gemmlab.stages.config_files import experiment_baseline

#: what an interrupted ``gemmlab-tune`` keeps (:func:`gemmlab.console.run_command`)
INTERRUPTED = "the points it finished keep their records; run the same command again to resume"


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
    from gemmlab.run.folders import FolderError, claim, other_kind_of_folder
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
    base = experiment_baseline("shapes")  # the shape suite's own baseline (conf/experiment/shapes.yaml)
    s.add_argument("--baseline", default=base, help=f"baseline kernel measured alternately (default {base}, "
                   "experiment=shapes's; none: no baseline)")
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
