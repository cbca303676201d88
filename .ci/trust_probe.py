"""GPU evidence for issue 40 (trust), in one device call:

    python .ci/trust_probe.py OUT_DIR [--only tf32,headline,overhead,cold]

- tf32: every shipped TF32 kernel (mma_tf32, wgmma_tf32 B col and B row) and cuBLAS TF32 at a
  small K where the roundings are told apart (512x512x256) and at 4096^3, re-verified under the new
  rule; the record's verification.tf32 names the rounding that matched (and each tried).
- headline: fp32, bf16 (B col) and tf32 (B col) 4096^3 with kernel=auto vs cuBLAS, graph timing,
  with every new gate on (after-timing verification, plausibility, launch paths).
- overhead: the after-timing phase's seconds against the whole point's, at 256^3 (host path) and
  4096^3 (verify.after_timing=host and =auto, the device path: gemmlab.stages.device_check), with where the seconds go (phase_s.after_timing_parts;
  ``compile`` is the device check's NVRTC compile or cache load, paid once per process and problem kind).
- cold: cuBLAS and the shipped bf16 kernel at 1x4096x4096 and 16x8192x8192 bf16 (B col),
  timing=cold with flush=read and flush=write, against the DRAM floor of reading A and B.
Each point runs through gemmlab's one point runner (gemmlab.run.session.Session.run_point: in the
session's worker process, as the ``gemmlab`` command's points; this process opens no GPU) in its own
folder; every record goes into OUT_DIR/records.jsonl.xz (one JSON line each). A point's seconds in
the tables are the pipeline's own (``phase_s.run_point``, in the worker: the worker's start and the
round trip left out); ``probe.wall_s`` is the whole call. The last thing printed is a short table per part.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from gemmlab.run.session import Session  # noqa: E402
from gemmlab.stages.archive import Member, write_members  # noqa: E402

GRAPH = {"mode": "graph", "warmup": 5, "repeat": 20, "batch": 10}
SESSION = Session()  # the one point runner: each point in the session's worker process


def point(out: Path, name: str, **cfg) -> dict:
    full = {"mode": "run", "timing": dict(GRAPH), **cfg}
    started = time.perf_counter()
    rec = SESSION.run_point(full, out / name)
    wall = round(time.perf_counter() - started, 3)
    rec["probe"] = {"name": name, "wall_s": wall, "point_s": (rec.get("phase_s") or {}).get("run_point", wall)}
    return rec


def tflops(rec, where=None):
    t = (rec.get(where) or {}).get("timing") if where else rec.get("timing")
    return t["gflops"] / 1e3 if t and t.get("gflops") else None


def tf32_part(out):
    rows = []
    cases = [("mma_tf32", "row"), ("mma_tf32", "col"), ("wgmma_tf32", "col"), ("wgmma_tf32", "row"), ("cublas", "col"),
             ("cublas", "row")]
    for shape in ([512, 512, 256], [4096, 4096, 4096]):
        for kernel, lb in cases:
            rec = point(out, f"tf32-{kernel}-{lb}-{'x'.join(map(str, shape))}", kernel={"name": kernel},
                        precision="tf32", layout={"a": "row", "b": lb}, shape=shape)
            v = rec.get("verification") or {}
            rows.append((rec, f"{kernel} B{lb} {'x'.join(map(str, shape))} | {rec['status']} | "
                              f"{(v.get('tf32') or {}).get('rounding')} | {(v.get('tf32') or {}).get('tried')} | "
                              f"{(rec.get('verification_after_timing') or {}).get('passed')} | {rec.get('error') or ''}"))
    return rows, "tf32 case | status | rounding matched | max err/tol per rounding tried | after-timing passed | error"


def headline_part(out):
    rows = []
    for precision, lb in (("fp32", "row"), ("bf16", "col"), ("tf32", "col")):
        rec = point(out, f"headline-{precision}", kernel={"name": "auto"}, precision=precision,
                    layout={"a": "row", "b": lb}, shape=[4096, 4096, 4096], baseline="cublas")
        ratio = (rec.get("ratio_to_baseline") or {}).get("gflops")
        gate = rec.get("plausibility") or {}
        rows.append((rec, f"{precision} B{lb} 4096^3 | {rec['status']} | {rec['kernel']['name']} | {tflops(rec)} | "
                          f"{tflops(rec, 'baseline')} | {ratio} | {(rec.get('roofline') or {}).get('pct_peak')} | "
                          f"{gate.get('compute_floor_ms')} | {rec.get('error') or ''}"))
    return rows, "headline | status | kernel | TFLOP/s | cuBLAS TFLOP/s | ratio | % of precision peak | compute floor ms | error"


def overhead_part(out):
    rows = []
    for shape, wheres in (([256, 256, 256], ("host",)), ([4096, 4096, 4096], ("host", "auto"))):
        for (precision, kernel), where in ((pk, w) for pk in (("fp32", "auto"), ("bf16", "auto")) for w in wheres):
            rec = point(out, f"overhead-{precision}-{shape[0]}-{where}", kernel={"name": kernel}, precision=precision,
                        layout={"a": "row", "b": "col" if precision == "bf16" else "row"}, shape=shape,
                        baseline="cublas", verify={"after_timing": where})
            phase = rec.get("phase_s") or {}
            wall = rec["probe"]["point_s"]
            after = phase.get("after_timing")
            parts = phase.get("after_timing_parts") or {}
            steady = round(after - parts.get("compile", 0.0), 4) if after else None  # a compile-cache hit costs ~0
            where = (rec.get("verification_after_timing") or {}).get("where")
            rows.append((rec, f"{precision} {shape[0]}^3 | {rec['status']} | {where} | {wall} | {phase.get('timing')} | "
                              f"{after} | {round(100 * after / (wall - after), 1) if after else None} | "
                              f"{round(100 * steady / (wall - after), 1) if after else None} | "
                              + " ".join(f"{k}={v}" for k, v in parts.items())))
    return rows, ("overhead | status | where | point s (phase_s.run_point) | timing s | after-timing s | after-timing % of the rest | "
                  "the same without the device check's compile, % | after-timing parts s")


def cold_part(out):
    rows = []
    for shape in ([1, 4096, 4096], [16, 8192, 8192]):
        for kernel in ("cublas", "auto"):
            for flush in ("write", "read"):
                rec = point(out, f"cold-{kernel}-{flush}-{shape[0]}", kernel={"name": kernel}, precision="bf16",
                            layout={"a": "row", "b": "col"}, shape=shape,
                            timing={"mode": "graph", "l2": "cold", "warmup": 5, "repeat": 30, "batch": 1, "flush": flush})
                t, r = rec.get("timing") or {}, rec.get("roofline") or {}
                rows.append((rec, f"{kernel} {'x'.join(map(str, shape))} | {flush} | {rec['status']} | "
                                  f"{t.get('median_ms')} | {r.get('memory_floor_ms')} | {r.get('pct_memory_floor')} | "
                                  f"{rec.get('error') or ''}"))
    return rows, "cold bf16 case | flush | status | median ms | DRAM floor ms (A+B) | % of floor | error"


PARTS = {"tf32": tf32_part, "headline": headline_part, "overhead": overhead_part, "cold": cold_part}


def main():
    out = Path(sys.argv[1])
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else list(PARTS)
    out.mkdir(parents=True, exist_ok=True)
    tables, members = [], []
    for part in only:
        try:
            rows, head = PARTS[part](out / part)
        except Exception as exc:  # one part's crash never costs another
            tables.append((f"{part}: crashed: {type(exc).__name__}: {exc}", []))
            continue
        for rec, _ in rows:
            members.append(Member(f"{part}/{rec['probe']['name']}/result.json", json.loads(json.dumps(rec, default=str))))
        tables.append((head, [line for _, line in rows]))
    SESSION.close()
    write_members(members, out / "records.jsonl.xz", source="trust_probe")
    for head, lines in tables:
        print()
        print(head)
        for line in lines:
            print(line)


if __name__ == "__main__":
    main()
