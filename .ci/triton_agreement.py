"""gemmlab's graph-timed median against triton.testing.do_bench_cudagraph on the same Triton kernel
and shape (issue 46, item 4), and the cold-L2 difference by design (triton.testing.do_bench flushes
L2 with a memset before each launch): every case of CASES below (the built-in
Triton kernels at 4096^3 and 8192^3 bf16, 4096^3 fp32/tf32). Each case also runs gemmlab's matched
point (warm graph timing shaped like do_bench_cudagraph: 10 samples of max(1, int(20 ms / the graph
median)) launches; gemmlab.run.triton_agreement.matched_batch) and reads the SM clock through NVML
every 2 ms while do_bench_cudagraph runs (gemmlab.run.triton_agreement.ClockPoll).

Usage (on the GPU machine; needs Triton and PyTorch): python .ci/triton_agreement.py OUTDIR [CASE ...]
(CASE: a case name such as triton_matmul-bf16-col-4096x4096x4096; default: all). Prints two lines per
case (the two warm medians and their ratio, target within 2%; the matched median, its batch and
ratio; the median SM clock of gemmlab's graph and matched samples and of the NVML reads during
do_bench_cudagraph; the two cold medians and their ratio; then the duty-cycle note) and writes every
gemmlab record and each case's summary to OUTDIR/triton-agreement.jsonl.xz (gemmlab.stages.archive).
Bad arguments (OUTDIR missing or a case name, an unknown CASE) are refused in one line, exit 2, before any
case; without a GPU or Triton the first case says so and the others are not run. Exit status 1 if a case failed or, per case, its matched ratio is outside 2% (its default warm ratio
where the matched point was not measured).
The gemmlab points run through one session (gemmlab.run.session.Session.run_point, gemmlab's one
point runner) in this process: Triton's timers hold a PyTorch context here
(gemmlab.run.triton_agreement.ISOLATION says why)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gemmlab.run.session import Session
from gemmlab.run.triton_agreement import TOLERANCE, agreement, case_name
from gemmlab.stages.archive import Member, write_members

#: (kernel, precision, layout.b, (M, N, K)) the script measures
CASES = (("triton_tma_persistent", "bf16", "col", (4096, 4096, 4096)),
         ("triton_tma_persistent", "bf16", "col", (8192, 8192, 8192)),
         ("triton_matmul", "bf16", "col", (4096, 4096, 4096)),
         ("triton_matmul", "bf16", "col", (8192, 8192, 8192)),
         ("triton_matmul", "fp32", "row", (4096, 4096, 4096)),
         ("triton_matmul", "tf32", "row", (4096, 4096, 4096)))


def _mhz(clock: dict | None) -> str:
    """A clocks dict's median SM clock as ``1530 MHz``, or ``? MHz`` (with NVML's error where it gave one)."""
    clock = clock or {}
    if clock.get("median_sm_mhz") is None:
        return f"? MHz ({clock['error']})" if clock.get("error") else "? MHz"
    return f"{clock['median_sm_mhz']:g} MHz"


def main(argv: list[str]) -> int:
    from gemmlab.console import OneLineParser
    known = [case_name(*c) for c in CASES]
    ap = OneLineParser(prog=".ci/triton_agreement.py", description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path, help="where the records and summary.json go (not a case name)")
    ap.add_argument("cases", nargs="*", metavar="CASE", help=f"default all: {', '.join(known)}")
    args = ap.parse_args(argv)
    out = args.outdir
    if out.name in known or out.name.startswith("-"):
        ap.error(f"OUTDIR: {str(out)!r} is a case name or an option; give the output folder first")
    unknown = [c for c in args.cases if c not in known]
    if unknown:
        ap.error(f"CASE: unknown {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    wanted = set(args.cases)
    cases = [c for c in CASES if not wanted or case_name(*c) in wanted]
    out.mkdir(parents=True, exist_ok=True)
    members, failed = [], 0
    session = Session()
    for i, case in enumerate(cases):
        name = case_name(*case)
        summary, records = agreement(*case, out / name, session=session)
        for kind, rec in records.items():
            members.append(Member(f"{name}/{kind}/result.json", rec))
        members.append(Member(f"{name}/agreement.json", summary))
        if "error" in summary:
            failed += 1
            print(f"{name}: FAILED: {summary['error']}")
            why = {r.get("status") for r in records.values()} & {"no_gpu", "unavailable"}
            if why and i + 1 < len(cases):  # no GPU, or no Triton: the other cases cannot run either
                print(f"{' and '.join(sorted(why))}: the other {len(cases) - i - 1} case(s) not run")
                break
            continue
        ok = summary["within_tolerance"]
        ok_matched = summary.get("within_tolerance_matched")
        failed += not (ok_matched if ok_matched is not None else ok)
        print(f"{name}: warm L2: gemmlab graph {summary['gemmlab_graph_ms']:.4f} ms, do_bench_cudagraph "
              f"{summary['do_bench_cudagraph_ms']:.4f} ms, ratio {summary['ratio_graph']:.4f} "
              f"({'within' if ok else 'OUTSIDE'} {TOLERANCE:.0%})"
              + (f"; matched (batch {summary['matched_batch']}) {summary['gemmlab_matched_ms']:.4f} ms, ratio "
                 f"{summary['ratio_matched']:.4f} ({'within' if ok_matched else 'OUTSIDE'} {TOLERANCE:.0%})"
                 if ok_matched is not None else "")
              + f"; median SM clock: gemmlab graph {_mhz(summary.get('gemmlab_graph_clocks'))}"
              + (f", matched {_mhz(summary.get('gemmlab_matched_clocks'))}" if ok_matched is not None else "")
              + f", do_bench_cudagraph {_mhz(summary.get('do_bench_cudagraph_clocks'))}"
              + (f" [{summary['throttled_note']}]" if summary.get("throttled_note") else "")
              + "; cold L2 (by design different): gemmlab "
              f"{summary['gemmlab_cold_ms']:.4f} ms, do_bench {summary['do_bench_ms']:.4f} ms, ratio "
              f"{summary['ratio_cold']:.4f}")
        print(f"  {summary['duty_cycle_note']}", flush=True)
    n = write_members(members, out / "triton-agreement.jsonl.xz", source=out.name)
    (out / "summary.json").write_text(json.dumps([m.record for m in members if m.path.endswith("agreement.json")],
                                                 indent=1) + "\n")
    print(f"{n} records in {out / 'triton-agreement.jsonl.xz'}; {failed} case(s) failed or outside {TOLERANCE:.0%} "
          "(the matched ratio where measured)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
