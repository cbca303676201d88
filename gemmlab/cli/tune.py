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
import json
import sys
from typing import Sequence

from gemmlab.console import OneLineParser, folder_path, guard_streams, output_path, run_command, settled_exit
from gemmlab.dispatch import auto as dispatch, table_file
from gemmlab.errors import ConfigError
from gemmlab.run.folders import FolderError
from gemmlab.run.tune_sweep import parse_families, sweep_command, sweep_line  # noqa: F401  (parse_families: re-exported)
from gemmlab.stages.config_files import experiment_baseline

#: what an interrupted ``gemmlab-tune`` keeps (:func:`gemmlab.console.run_command`)
INTERRUPTED = "the points it finished keep their records; run the same command again to resume"


def sweep_main(args) -> int:
    """``gemmlab-tune sweep`` (:func:`gemmlab.run.tune_sweep.sweep_command`): its final line, and the
    error that stopped it; exit 1 when a point failed."""
    try:
        stats = sweep_command(args)
    except FolderError as exc:
        print(f"{dispatch.PROG}: error: {exc.message}", file=sys.stderr)
        return exc.code
    print(sweep_line(args.out, stats))
    if stats.get("stopped_by"):
        print(f"{dispatch.PROG}: error: {stats['stopped_by']}; the sweep stopped at its first point (every point "
              "would say the same); run it where a GPU is, or with --mode compile", file=sys.stderr)
    return 1 if stats.get("failed") else 0


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


def main(argv: Sequence[str] | None = None) -> int:
    """``gemmlab-tune sweep|build|show|choose``. Exit 0 on success, 1 when a sweep point failed,
    2 with one line on bad input (flags checked before any point runs)."""
    guard_streams(dispatch.PROG)
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "sweep":
            return sweep_main(args)
        if args.cmd == "build":
            print(table_file.build(args.paths, table_file.table_out(args.out, args.force), args.device,
                                   args.records_dir))
        elif args.cmd == "show":
            print("\n".join(table_file.show_lines(args.table)))
        else:
            print(json.dumps(table_file.choice([args.M, args.N, args.K], args.table, args.precision, args.layout,
                                               args.plugin_dirs), indent=1))
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
