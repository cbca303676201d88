"""Print the wsplit evidence table (set 6 of .ci/wgmma_evidence.py): per row the case, status,
error over tolerance, median ms (the record's headline: graph timing) and % of cuBLAS BF16, the
cuBLAS time taken from the first row of the same shape (timed in the same worker process)."""
import json
import sys

rows = json.load(open(sys.argv[1]))["rows"]
base = {}
for r in rows:
    if r.get("cublas_ms"):
        base.setdefault(tuple(r["shape"]), r["cublas_ms"])
print("shape | params | status | err/tol | ms | cuBLAS ms | % cuBLAS")
for r in rows:
    b, ms = base.get(tuple(r["shape"])), r.get("median_ms")
    pct = f"{100 * b / ms:.1f}" if b and ms else "-"
    print(" | ".join(["x".join(map(str, r["shape"])), json.dumps(r["params"], separators=(",", ":")), str(r["status"]),
                      f"{r['max_err_over_tol']:.3g}" if r.get("max_err_over_tol") is not None else "-",
                      f"{ms:.4f}" if ms else "-", f"{b:.4f}" if b else "-", pct]
                     + ([str(r.get("error"))[:120]] if r["status"] != "ok" else [])))
