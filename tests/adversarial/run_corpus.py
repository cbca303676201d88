"""Run the exploit corpus (tests/adversarial/corpus.py) on this machine's GPU and say, per exploit,
whether gemmlab refused it as it must.

    python tests/adversarial/run_corpus.py OUTDIR [CASE ...]

Each case runs through ``gemmlab.run.isolation.run_point`` (``gemmlab.run.pipeline.run_point`` in a
worker process: a sticky CUDA fault costs only its own point; the worker is renewed before every
case, so no exploit finds another's loaded module or ``__device__`` state) in its own folder
``OUTDIR/points/<case>``. One table line per case (exploit | status | net | expected | PASS/FAIL) is
printed and written to ``OUTDIR/corpus.md``; every record goes into ONE ``OUTDIR/corpus.jsonl.xz``,
gemmlab's record archive (gemmlab/stages/archive.py: member ``<case>/result.json``, the record with
a ``corpus`` field holding the case, its idea, the expected status and net, passed, problems).
Exit status 0 when every case passed, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402


def fired(record: dict) -> str:
    """The nets of the record, short (``-`` for none)."""
    return ", ".join(record.get("nets_fired") or []) or "-"


def run(outdir: Path, names: list[str]) -> int:
    from gemmlab.run import isolation
    cases = [corpus.BY_NAME[n] for n in names] if names else list(corpus.CASES)
    outdir.mkdir(parents=True, exist_ok=True)
    if (outdir / "corpus.jsonl.xz").exists():
        sys.exit(f"run_corpus: {outdir / 'corpus.jsonl.xz'} exists; give another OUTDIR")
    header = "| exploit | status | net | expected | verdict |\n|---|---|---|---|---|"
    print(header, flush=True)
    lines, failed = [header], 0
    started = time.monotonic()
    from gemmlab.stages.archive import Member, write_members
    members = []
    try:
        for case in cases:
            isolation.end_command()  # a renewed worker: fresh modules, no exploit state left behind
            record = isolation.run_point(corpus.config(case), outdir / "points" / case.name)
            wrong = corpus.problems(case, record)
            failed += bool(wrong)
            line = (f"| {case.kernel} ({case.name}) | {record.get('status')} | {fired(record)} | "
                    f"{' or '.join(f'{s} / {n}' for s, n in ((case.status, case.net),) + case.also)} | {'FAIL: ' + '; '.join(wrong) if wrong else 'PASS'} |")
            print(line, flush=True)
            lines.append(line)
            record["corpus"] = {"case": case.name, "kernel": case.kernel, "idea": case.idea,
                                "expected_status": case.status, "expected_net": case.net, "passed": not wrong,
                                "problems": wrong}
            members.append(Member(f"{case.name}/result.json", json.loads(json.dumps(record, default=str))))
    finally:  # what ran is archived, also when the run is cut short
        write_members(members, outdir / "corpus.jsonl.xz", source="tests/adversarial/run_corpus.py")
    isolation.stop_worker()
    summary = (f"{len(cases) - failed} of {len(cases)} exploits refused as expected "
               f"({time.monotonic() - started:.0f} s)")
    print(summary)
    (outdir / "corpus.md").write_text("\n".join(lines + ["", summary, ""]))
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    unknown = [n for n in argv[1:] if n not in corpus.BY_NAME]
    if unknown:
        print(f"run_corpus: unknown case(s) {', '.join(unknown)}; cases: {', '.join(corpus.BY_NAME)}", file=sys.stderr)
        return 2
    return run(Path(argv[0]), argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
