"""Optional stage: re-run the correctness launch under NVIDIA compute-sanitizer.

``sanitizer=memcheck|racecheck|synccheck|initcheck`` starts a child process
``compute-sanitizer --tool <tool> --log-file <run>/sanitizer-<tool>.log python -m gemmlab.run.sanitizer_child
<config.json> <dir>``; the child runs the pipeline with timing off (compile, NaN fill, one launch,
verification). The verdict comes from the tool's summary line ("ERROR SUMMARY: N errors" or
"RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)") and its exit status
(compute-sanitizer docs: ``--error-exitcode``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

CHILD_MODULE = "gemmlab.run.sanitizer_child"  # the child entry (a layer above: it runs the pipeline)
ERROR_EXIT = 86
CANDIDATES = ("/usr/local/cuda/bin/compute-sanitizer", "/opt/nvidia/compute-sanitizer/compute-sanitizer")


def find_tool() -> str | None:
    """Path of compute-sanitizer (PATH first, then the usual CUDA locations), or None."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    return next((c for c in CANDIDATES if os.access(c, os.X_OK)), None)


def parse_summary(text: str) -> int | None:
    """Number of errors the tool reported, or None if it printed no summary."""
    m = re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?", text)
    if m:
        return int(m.group(1))
    m = re.search(r"ERROR SUMMARY: (\d+) errors?", text)
    return int(m.group(1)) if m else None


def parse_counts(text: str) -> dict | None:
    """Everything the tool's summary counts: ``errors``, and for racecheck also ``hazards`` and
    ``warnings``; ``text`` is the one-line form for messages (``"3 hazards (0 errors, 3
    warnings)"``, ``"2 errors"``). None if it printed no summary."""
    m = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)", text)
    if m:
        hazards, errors, warnings = (int(g) for g in m.groups())
        return {"errors": errors, "hazards": hazards, "warnings": warnings,
                "text": f"{hazards} hazard{'s' * (hazards != 1)} ({errors} error{'s' * (errors != 1)}, "
                        f"{warnings} warning{'s' * (warnings != 1)})"}
    errors = parse_summary(text)
    if errors is None:
        return None
    return {"errors": errors, "text": f"{errors} error{'s' * (errors != 1)}"}


def run(tool: str, cfg: dict, out_dir: Path, timeout_s: int = 600, device: int | None = None) -> dict:
    """Run ``tool`` over the correctness launch of ``cfg``; return the record's ``sanitizer`` field:
    ``{"tool", "verdict": clean|errors|unavailable|failed, "errors", "report", "exit_status"}``."""
    exe = find_tool()
    if exe is None:
        return {"tool": tool, "verdict": "unavailable", "errors": None, "report": None,
                "message": "compute-sanitizer not found on PATH or in /usr/local/cuda/bin"}
    work = out_dir / f"sanitizer-{tool}"
    work.mkdir(parents=True, exist_ok=True)
    import shutil as _shutil
    _shutil.rmtree(work / "run", ignore_errors=True)  # never let the child "resume" an old check
    # the inputs drawn on the host (inputs.draw): the device check's own kernels stay out of the report
    child_cfg = dict(cfg, sanitizer=None, baseline=None, mode="run", resume=False,
                     inputs={**(cfg.get("inputs") or {}), "draw": "host"})
    if device is not None:
        child_cfg["device"] = device  # the GPU the parent measured (device=auto resolved)
    (work / "config.json").write_text(json.dumps(child_cfg, default=str))
    log = out_dir / f"sanitizer-{tool}.log"
    cmd = [exe, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--log-file", str(log),
           sys.executable, "-m", CHILD_MODULE, str(work / "config.json"), str(work / "run")]
    if tool == "racecheck":
        cmd[3:3] = ["--racecheck-report", "all"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"tool": tool, "verdict": "failed", "errors": None, "report": str(log),
                "message": f"compute-sanitizer did not finish within {timeout_s} s"}
    text = log.read_text(errors="replace") if log.exists() else proc.stdout + proc.stderr
    counts = parse_counts(text) or {}
    errors = counts.get("errors")
    child = work / "run" / "result.json"
    try:
        child_status = json.loads(child.read_text())["status"] if child.exists() else None
    except (OSError, ValueError, KeyError, TypeError):
        child_status = None
    if errors is None:
        verdict = "failed"
    elif errors > 0 or counts.get("hazards", 0) > 0 or proc.returncode == ERROR_EXIT:
        verdict = "errors"
    else:  # clean only if the child really ran and checked the kernel under the tool
        verdict = "clean" if child_status == "checked" else "failed"
    extra = {k: counts[k] for k in ("hazards", "warnings") if k in counts}
    return {"tool": tool, "verdict": verdict, "errors": errors, **extra,
            "counts": counts.get("text", "no summary printed"), "report": str(log), "exit_status": proc.returncode,
            "child_status": child_status, "command": " ".join(cmd[:6]) + " ..."}

