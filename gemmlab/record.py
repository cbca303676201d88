"""Stage 6: the run record (``result.json``) and the human summary.

``result.json`` is written atomically (temporary file, then rename) into the run's own directory
and never over an existing record: a second write to the same directory is an error, so nothing
measured is lost. ``valid`` is true only for a verified and timed run (``status: ok``) or a
successful ``mode=compile`` (``status: compiled``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
from pathlib import Path

from gemmlab import __version__
from gemmlab.paths import SOURCE_ROOT

SCHEMA = "gemmlab.result/1"
VALID_STATUSES = ("ok", "compiled")
PRECISION = ("float32 inputs, float32 accumulation on CUDA cores (no tensor cores, no TF32); "
             "NVRTC default IEEE float32 (fma contraction on, no fast-math); reference: float64 "
             "product of the same float32 inputs on the CPU")


def git_commit() -> dict:
    """``{"commit": sha or None, "dirty": bool or None}`` of the gemmlab source checkout, if any."""
    if SOURCE_ROOT is None or not (SOURCE_ROOT / ".git").exists():
        return {"commit": None, "dirty": None}
    try:
        sha = subprocess.run(["git", "-C", str(SOURCE_ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5).stdout.strip() or None
        dirty = subprocess.run(["git", "-C", str(SOURCE_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip() != ""
        return {"commit": sha, "dirty": dirty if sha else None}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def new_record(config: dict) -> dict:
    """The skeleton every record starts from (status ``running`` until finished)."""
    return {"schema": SCHEMA, "status": "running", "valid": False, "error": None,
            "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "gemmlab_version": __version__, "git": git_commit(), "config": config}


def write_record(record: dict, out_dir: Path) -> Path:
    """Write ``record`` to ``out_dir/result.json`` atomically.

    Raises:
        FileExistsError: ``out_dir`` already holds a result (never overwritten).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "result.json"
    if path.exists():
        raise FileExistsError(f"{path} exists; gemmlab never overwrites a result")
    tmp = out_dir / f".result.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path


def summary(record: dict) -> str:
    """A few human lines describing ``record`` (what ran, verification, timing, resources)."""
    cfg = record.get("config", {})
    kernel = record.get("kernel", {})
    shape = record.get("shape") or {}
    label = f"{kernel.get('name', cfg.get('kernel', {}).get('name', '?'))} " + \
        ("x".join(str(shape.get(d)) for d in "MNK") if shape else str(cfg.get("shape")))
    params = " ".join(f"{k}={v}" for k, v in (kernel.get("params") or {}).items())
    dev = record.get("device", {})
    lines = [f"{label} {params} [{record['status']}]" + (f" on {dev.get('name')} ({dev.get('arch')})" if dev else "")]
    if record.get("error"):
        lines.append(f"  error   {record['error']}")
    comp = record.get("compile")
    if comp:
        r = comp["resources"]
        res = (f"{r['registers']} regs, spills {r['spill_store_bytes']}/{r['spill_load_bytes']} B, "
               f"static smem {r['static_shared_bytes']} B") if r else "no ptxas report"
        drv = comp.get("driver_attributes")
        if drv:
            res += f" (driver: {drv['registers']} regs, local {drv['local_bytes']} B, smem {drv['static_shared_bytes']} B)"
        lines.append(f"  compile {comp['compile_ms']:.1f} ms NVRTC {comp['nvrtc_version']} {' '.join(comp['options'])}: {res}")
    launch = record.get("launch")
    if launch:
        occ = record.get("occupancy") or {}
        text = f"  launch  grid {tuple(launch['grid'])} block {tuple(launch['block'])} dyn smem {launch['shared_bytes']} B"
        if occ:
            text += (f"; {occ['max_active_blocks_per_sm']} blocks/SM, occupancy {occ['theoretical_occupancy']:.2f}, "
                     f"{occ['waves']:.2f} waves")
        lines.append(text)
    ver = record.get("verification")
    if ver:
        lines.append(f"  verify  {'PASS' if ver['passed'] else 'FAIL'} max abs err {ver['max_abs_error']}, "
                     f"max rel err {ver['max_rel_error']}, {ver['mismatches']} mismatches, {ver['nan_outputs']} NaN")
    t = record.get("timing")
    if t:
        lines.append(f"  time    median {t['median_ms']:.5f} ms (min {t['min_ms']:.5f}, max {t['max_ms']:.5f}) "
                     f"over {t['repeat']}x{t['batch']} launches -> {t['gflops']:.1f} GFLOP/s")
    return "\n".join(lines)
