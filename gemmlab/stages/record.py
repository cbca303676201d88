"""Stage 6: writing the run record (``result.json``) and its human summary.

This module owns the typed record being written (:class:`Result`), the one writer
(:func:`new_record`, :func:`write_record`, :meth:`Result.to_json`) and :func:`summary`. The
schema name, the valid statuses and reading records back live in :mod:`gemmlab.stages.record_model` (one
record model for every reader); they are re-exported here for the writer's callers.

``result.json`` is written atomically (temporary file, then rename) into the run's own directory
and never over an existing record: a second write to the same directory is an error, so nothing
measured is lost. ``valid`` is true only for a verified and timed run (``status: ok``), a
successful ``mode=compile`` (``status: compiled``) or a sanitizer child's check (``checked``).
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import functools
import json
import os
import subprocess
from pathlib import Path

from gemmlab import __version__
from gemmlab.paths import SOURCE_ROOT
from gemmlab.stages.record_model import SCHEMA, VALID_STATUSES, view

__all__ = ["SCHEMA", "VALID_STATUSES", "PRECISIONS", "REFERENCE", "ARTIFACTS", "is_artifact", "precision_text",
           "git_commit", "clear_cache", "Result", "new_record", "write_record", "summary"]
PRECISIONS = {
    "fp32": ("float32 inputs and outputs, float32 accumulation (no tensor cores, no TF32; NVRTC kernels: "
             "IEEE float32, fma contraction on, no fast-math)"),
    "tf32": ("float32 inputs and outputs, inputs rounded to TF32 (10-bit mantissa) on tensor cores, "
             "float32 accumulation"),
    "bf16": ("bfloat16 A and B (float32 inputs rounded once to bf16, round to nearest even), float32 "
             "accumulation and C"),
    "fp16": ("float16 A and B (float32 inputs rounded once to fp16, round to nearest even), float32 "
             "accumulation and C"),
    "fp8": ("FP8 A and B (E4M3 or E5M2: float32 inputs scaled per group by amax / the format's max and "
            "quantised once, round to nearest even), float32 scales applied in the epilogue, accumulation as "
            "the kernel declares (fp8_accumulation), float32 or bf16 C; reference of the dequantised values"),
}
#: the files and folders a point writes next to its ``result.json`` (glob patterns); a re-run under
#: ``resume=true`` keeps them with the old record (:func:`gemmlab.run.store.keep_previous`)
ARTIFACTS = ("compile*.log", "kernel*.sass", "traceback.txt", "sanitizer-*")
REFERENCE = "reference: float64 product of the same inputs (as stored) on the CPU"


#: ``precision=tf32`` run by a kernel that declares ``tf32_rounding="none"`` (issue 41: TF32 is allowed,
#: not required; e.g. the float32 CUDA-core decode kernels)
TF32_UNROUNDED = ("float32 inputs and outputs; TF32 allowed, not used by this kernel: inputs multiplied unrounded "
                  "on FP32 CUDA cores (tf32_rounding none), float32 accumulation")


def precision_text(precision: str, tf32_rounding: str | None = None) -> str:
    """The record's one-line precision policy for ``precision`` (fp32 | tf32 | bf16 | fp16);
    ``tf32_rounding``: the kernel's declared TF32 rounding (``KernelBase.tf32_rounding``), which for
    tf32 with ``"none"`` says the inputs are multiplied unrounded on CUDA cores (:data:`TF32_UNROUNDED`)."""
    policy = TF32_UNROUNDED if precision == "tf32" and tf32_rounding == "none" else PRECISIONS[precision]
    return f"{precision}: {policy}; {REFERENCE}"


def is_artifact(name: str) -> bool:
    """True when ``name`` (a file or folder in a run directory) is one of a point's
    :data:`ARTIFACTS`."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in ARTIFACTS)


def clear_cache() -> None:
    """Forget the checkout's git commit (a commit made since is read again). For tests and
    long-lived processes (see :func:`gemmlab.clear_caches`)."""
    git_commit.cache_clear()


@functools.lru_cache(maxsize=1)
def git_commit() -> dict:
    """``{"commit": sha or None, "dirty": bool or None}`` of the gemmlab source checkout, if any."""
    if SOURCE_ROOT is None or not (SOURCE_ROOT / ".git").exists():
        return {"commit": None, "dirty": None}
    try:
        proc = subprocess.run(["git", "-C", str(SOURCE_ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        sha = proc.stdout.strip() if proc.returncode == 0 and len(proc.stdout.strip()) == 40 else None
        dirty = subprocess.run(["git", "-C", str(SOURCE_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip() != ""
        return {"commit": sha, "dirty": dirty if sha else None}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


class Result(dict):
    """The record of one point as the pipeline fills it: the JSON object ``result.json`` holds
    (schema :data:`SCHEMA`), with typed access to the fields every writer sets and every reader
    judges by. It is a ``dict`` so that each phase adds its section (``compile``, ``launch``,
    ``timing``, ...) as the schema names it; the read side is
    :class:`gemmlab.stages.record_model.Record`.

    Typed fields: :attr:`status` (``running`` until finished; one of :data:`VALID_STATUSES` or a
    failure status such as ``invalid`` or ``compile_error``), :attr:`valid` (bool), :attr:`error`
    (the one-line reason, or None), :attr:`nets_fired` (the safety nets that refused the point).
    :meth:`succeed`, :meth:`fail`, :meth:`fire`, :meth:`looked`, :meth:`resumed` and :meth:`finish`
    are the ways they change (the pipeline sets every status, success or failure, through them);
    :meth:`to_json` is the one serialisation (:func:`write_record` writes it). Every record a point
    returns is one: run, resumed, adopted, refused, or left by a lost worker (:meth:`of`).
    """

    @classmethod
    def of(cls, record: "dict | Result") -> "Result":
        """``record`` as a :class:`Result` (the same object when it is one; a copy of a plain dict)."""
        return record if isinstance(record, Result) else cls(record)

    @property
    def status(self) -> str:
        """The point's status (``running`` while the pipeline fills it)."""
        return self.get("status", "running")

    @property
    def valid(self) -> bool:
        """True for a finished point whose status is one of :data:`VALID_STATUSES`."""
        return self.get("valid") is True

    @property
    def error(self) -> str | None:
        """The one-line reason of a failure (None for a valid point)."""
        return self.get("error")

    @property
    def nets_fired(self) -> list[str]:
        """The safety nets that refused the point, in the order they fired (empty: none)."""
        return list(self.get("nets_fired") or [])

    def fail(self, status: str, error: str) -> "Result":
        """Mark the point failed: ``status`` (a failure status, e.g. ``invalid``), ``error`` (its
        one-line reason), ``valid`` false.

        Raises:
            ValueError: ``status`` is a valid status or not a non-empty string (naming the field).
        """
        if not isinstance(status, str) or not status or status in VALID_STATUSES:
            raise ValueError(f"status: a failure needs a failure status, not {status!r} "
                             f"(the valid ones are {', '.join(VALID_STATUSES)})")
        self.update(status=status, valid=False, error=error)
        return self

    def succeed(self, status: str) -> "Result":
        """Mark the point a success: ``status`` one of :data:`VALID_STATUSES` (``ok``: verified and
        timed; ``compiled``: ``mode=compile``; ``checked``: a sanitizer child's check), ``valid`` true
        and no error. A later failure (:meth:`fail`) still takes precedence.

        Raises:
            ValueError: ``status`` is not one of :data:`VALID_STATUSES` (naming the field).
        """
        if status not in VALID_STATUSES:
            raise ValueError(f"status: a success is one of {', '.join(VALID_STATUSES)}, not {status!r}")
        self.update(status=status, valid=True, error=None)
        return self

    def fire(self, *nets: str) -> "Result":
        """Add each safety net of ``nets`` to ``nets_fired`` (once each, in order); with none, the
        field is made (empty: the nets looked and none fired)."""
        fired = self.setdefault("nets_fired", [])
        for net in nets:
            if net not in fired:
                fired.append(net)
        return self

    def looked(self, fired: list[str]) -> "Result":
        """The nets of one look fired exactly ``fired`` (empty: none): ``nets_fired`` is set to it."""
        self["nets_fired"] = list(fired)
        return self

    def resumed(self, resumed_from: str | None = None, previous: list | None = None) -> "Result":
        """Mark an earlier valid record of the same config as this point's (``resume=true``):
        ``resumed`` true, ``resumed_from`` the folder it was adopted from (relative to the sweep;
        None: this folder's own record, and an earlier adoption's mark is dropped), ``previous``
        this folder's records set aside (None: the key is dropped)."""
        self["resumed"] = True
        if resumed_from is None:
            self.pop("resumed_from", None)
        else:
            self["resumed_from"] = resumed_from
            self.pop("previous", None)  # the source's own set-aside records lie in its folder, not in this one
            if previous:
                self["previous"] = previous
        return self

    def finish(self) -> "Result":
        """Set ``valid`` from the status (true only for one of :data:`VALID_STATUSES`)."""
        self["valid"] = self.status in VALID_STATUSES
        return self

    def problems(self) -> list[str]:
        """Why this record must not be written as it is, one phrase per field (empty: none): the
        schema is not :data:`SCHEMA`'s family, the status is not a string, ``valid`` is not a bool,
        or ``valid`` is true for a status that is not valid."""
        out = []
        schema = self.get("schema")
        if not (isinstance(schema, str) and schema.startswith(SCHEMA.rsplit("/", 1)[0] + "/")):
            out.append(f"schema: {schema!r} is not a {SCHEMA.rsplit('/', 1)[0]}/ schema (this gemmlab writes {SCHEMA})")
        if not isinstance(self.get("status"), str):
            out.append(f"status: {self.get('status')!r} is not a string")
        if not isinstance(self.get("valid"), bool):
            out.append(f"valid: {self.get('valid')!r} is not true or false")
        elif self.valid and self.status not in VALID_STATUSES:
            out.append(f"valid: true for status {self.status!r} (valid only for {', '.join(VALID_STATUSES)})")
        return out

    def to_json(self) -> str:
        """The record as ``result.json``'s text: JSON, indent 2, a value JSON cannot hold as its
        ``str`` (a path, a numpy scalar), a final newline."""
        return json.dumps(self, indent=2, default=str) + "\n"


def new_record(config: dict | None) -> Result:
    """The skeleton every record starts from (status ``running`` until finished): the schema, the
    creation time (UTC), gemmlab's version and git commit, and ``config`` (the resolved config)."""
    return Result(schema=SCHEMA, status="running", valid=False, error=None,
                  created_utc=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                  gemmlab_version=__version__, git=git_commit(), config=config)


def write_record(record: dict, out_dir: Path) -> Path:
    """Write ``record`` (a :class:`Result`, or a dict read as one) to ``out_dir/result.json``
    atomically: the one writer of ``result.json`` (:meth:`Result.to_json`).

    Raises:
        ValueError: the record is not fit to be written (:meth:`Result.problems`: e.g. valid for a
            failure status); nothing is written.
        FileExistsError: ``out_dir`` already holds a result (never overwritten, also not by a
            write racing this one: the record is linked into place, which fails if one is there).
    """
    result = Result.of(record)
    problems = result.problems()
    if problems:
        raise ValueError(f"result.json not written to {out_dir}: " + "; ".join(problems))
    text = result.to_json()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "result.json"
    if path.exists():
        raise FileExistsError(f"{path} exists; gemmlab never overwrites a result")
    tmp = out_dir / f".result.json.{os.getpid()}.tmp"
    try:
        tmp.write_text(text)
    except OSError:  # a full disk: no partial file left behind
        tmp.unlink(missing_ok=True)
        raise
    try:
        os.link(tmp, path)  # atomic and never over a record another process wrote meanwhile
    except FileExistsError:
        tmp.unlink()
        raise FileExistsError(f"{path} exists; gemmlab never overwrites a result") from None
    except OSError:  # a file system without hard links: the check above, then a rename
        os.replace(tmp, path)
        return path
    tmp.unlink()
    return path


def summary(record: dict) -> str:
    """A few human lines describing ``record`` (what ran, verification, timing, resources)."""
    v = view(record)
    cfg = record.get("config") if isinstance(record.get("config"), dict) else {}
    label = f"{v.kernel or '?'} " + (v.shape_text or str(cfg.get("shape")))
    params = v.params_text  # a record the pipeline never filled (a lost worker's) has them from its config
    dev = record.get("device", {})
    built = (record.get("compile") or {}).get("arch") if isinstance(record.get("compile"), dict) else None
    arch = built if record.get("mode") == "compile" and built else dev.get("arch") if dev else None  # sm_90a
    lines = [" ".join(p for p in (label, params, f"[{record['status']}]") if p)
             + (f" on {dev.get('name')} ({arch})" if dev else "")]
    if record.get("error"):
        lines.append(f"  error   {record['error']}")
    previous = record.get("previous")
    if isinstance(previous, list) and previous and isinstance(previous[-1], dict) and previous[-1].get("record"):
        lines.append(f"  earlier result.json kept as {previous[-1]['record']} (resume=true: it was no valid "
                     "result of this config, so the point ran again)")
    dispatch = record.get("dispatch")
    if isinstance(dispatch, dict):  # kernel=auto: what it chose and why (gemmlab.dispatch.auto)
        why = "table entry" if dispatch.get("source") == "table" else f"rule {dispatch.get('rule', '?')}"
        lines.append(f"  auto    chose {dispatch.get('chosen')} by {why}"
                     + (f" ({dispatch.get('match')})" if dispatch.get("match") else ""))
    comp = record.get("compile")
    if comp:
        r = comp["resources"]
        res = (f"{r['registers']} regs, spills {r['spill_store_bytes']}/{r['spill_load_bytes']} B, "
               f"static smem {r['static_shared_bytes']} B") if r else "no ptxas report"
        drv = comp.get("driver_attributes")
        if drv:  # what the loaded module reports: NVRTC's cubin (local, static smem) or Triton's (spills, dynamic smem)
            named = (("registers", "{} regs"), ("local_bytes", "local {} B"), ("spills", "spills {}"),
                     ("static_shared_bytes", "smem {} B"), ("dynamic_shared_bytes", "dynamic smem {} B"))
            shown = [form.format(drv[key]) for key, form in named if drv.get(key) is not None]
            if shown:
                res += f" (driver: {', '.join(shown)})"
        how = f"{comp['compile_ms']:.1f} ms"
        if comp.get("disk_cache") == "hit":  # loaded from the disk cache: say so, and what compiling took
            orig = comp.get("original_compile_ms")
            how += " (disk cache hit" + (f"; compiled in {orig:.1f} ms" if isinstance(orig, (int, float)) else "") + ")"
        elif comp.get("cache_hit_in_process"):
            how += " (compiled earlier in this process)"
        if comp.get("disk_cache_error"):  # a miss that could not be stored: every later run misses too
            how += f" (disk cache not usable: {comp['disk_cache_error']})"
        if comp.get("backend") == "triton":  # a Triton kernel (issue 46): Triton's version, options, shared memory
            res += f", Triton shared memory {comp.get('shared_bytes')} B"
            lines.append(f"  compile {how} Triton {comp.get('triton_version')} {comp.get('arch')} "
                         f"{' '.join(comp.get('options') or [])}: {res}")
        else:
            lines.append(f"  compile {how} NVRTC {comp['nvrtc_version']} {' '.join(comp['options'])}: {res}")
        stale = comp.get("stale_checkout_source")
        if isinstance(stale, dict) and stale.get("message"):  # an installed copy, not the checkout's edit
            lines.append(f"  WARNING {stale['message']}")
        sass = comp.get("sass")
        if sass:
            hist = sass.get("histogram")
            lines.append("  sass    " + (", ".join(f"{k} {v}" for k, v in hist.items() if v and k != "total")
                                         + f" of {hist.get('total')} instructions ({sass.get('file')})"
                                         if hist else f"not disassembled: {sass.get('error')}"))
            if sass.get("warning"):  # e.g. wgmma serialized (gemmlab.gpu.sass.wgmma_check)
                lines.append(f"  WARNING {sass['warning']}")
        classes = _classes_line(record.get("sass_check"), record.get("mode"))
        if classes:  # the declared SASS classes (gemmlab.gpu.sass_check)
            lines.append(classes)
    entry = str((record.get("compile") or {}).get("name_expression") or "").split("<")[0]
    plan = [str(step) for step in record.get("plan") or []]
    if entry or plan != ["main kernel"] and plan:  # the entry that ran, and each plan step's note (e.g. the EPI)
        lines.append("  plan    " + "; ".join(plan or ["main kernel"]) + (f"; entry {entry}" if entry else ""))
    launch = record.get("launch")
    if launch:
        occ = record.get("occupancy") or {}
        text = f"  launch  grid {tuple(launch['grid'])} block {tuple(launch['block'])} dyn smem {launch['shared_bytes']} B"
        if occ:
            text += (f"; {occ['max_active_blocks_per_sm']} blocks/SM, occupancy {occ['theoretical_occupancy']:.2f}, "
                     f"{occ['waves']:.2f} waves")
        lines.append(text)
    lines += _measure_lines(record, "")
    base = record.get("baseline")
    if base and base.get("skipped"):
        lines.append(f"  baseline {base['name']}: skipped, {base['skipped']}")
    elif base:
        lines.append(f"  baseline {base['name']}" + (f" ({base['library']})" if base.get("library") else ""))
        lines += _measure_lines(base, "  ")
    ratio = record.get("ratio_to_baseline")
    if ratio:
        lines.append(f"  ratio   {ratio['median_time']:.3f}x the baseline's median time, "
                     f"{ratio['gflops']:.3f}x its GFLOP/s ({ratio['protocol']})")
    for key in ("guard_bands", "inputs_unchanged"):
        if key in record:
            lines.append(f"  nets    guard bands {record.get('guard_bands')}, inputs unchanged "
                         f"{record.get('inputs_unchanged')}, repeat stable {record.get('repeat_stable')}")
            break
    san = record.get("sanitizer")
    if san and san.get("skipped"):
        lines.append(f"  sanitizer {san.get('tool')}: skipped, {san['skipped']}")
    elif san:
        counts = san.get("counts") or f"{san.get('errors')} errors"
        lines.append(f"  sanitizer {san['tool']}: {san['verdict']} ({counts}) {san.get('report') or ''}")
    return "\n".join(lines)


def _classes_line(check, mode) -> str | None:
    """The summary's line for a record's ``sass_check`` (:mod:`gemmlab.gpu.sass_check`; None when
    the kernel declares no class): the counts, or a WARNING that a declared class is missing (which
    ``mode=run`` refuses) or was not counted."""
    if not isinstance(check, dict) or not check.get("declared"):
        return None
    verdict, declared = check.get("verdict"), ", ".join(map(str, check.get("declared") or []))
    if verdict == "present" and isinstance(check.get("counts"), dict):
        return f"  classes {declared} declared: present ({', '.join(f'{c} {n}' for c, n in check['counts'].items())})"
    if verdict == "missing":
        return f"  WARNING {check.get('message')}" + ("; mode=run refuses this kernel" if mode == "compile" else "")
    return f"  WARNING instruction classes {declared} not checked: {check.get('reason')}"


def _measure_lines(rec: dict, indent: str) -> list[str]:
    lines = []
    ver = rec.get("verification")
    if ver:
        lines.append(f"{indent}  verify  {'PASS' if ver['passed'] else 'FAIL'} ({ver.get('rule')}) max abs err "
                     f"{_g(ver['max_abs_error'])}, max rel err {_g(ver['max_rel_error'])}, max err/tol "
                     f"{_g(ver.get('max_error_over_tolerance'))}, {ver['mismatches']} mismatches, {ver['nan_outputs']} NaN")
    t = rec.get("timing")
    if t:
        floor = (t.get("launch_floor_ms") or {}).get(t["protocol"])
        lines.append(f"{indent}  time    median {t['median_ms']:.5f} ms (min {t['min_ms']:.5f}, max {t['max_ms']:.5f}, "
                     f"{t['repeat']} samples x {t['batch']} launches, {t['protocol']}, L2 {t['l2']}) -> "
                     f"{t['gflops']:.1f} GFLOP/s" + (f"; floor {floor:.5f} ms" if floor else "")
                     + (" LAUNCH-BOUND" if t.get("launch_bound") else ""))
        if "host_overhead_per_launch_ms" in t:
            ev = t["protocols"]["events"]["median_ms"]
            lines.append(f"{indent}          events {ev:.5f} ms, graph {t['protocols']['graph']['median_ms']:.5f} ms: "
                         f"host/launch overhead {t['host_overhead_per_launch_ms'] * 1e3:.2f} us per launch")
        lines.append(f"{indent}          {t['throttled_samples']} throttled samples, median SM clock "
                     f"{t.get('median_sm_mhz')} MHz")
        if (t.get("max_compute_processes") or 0) > 1:
            lines.append(f"{indent}          SHARED GPU: {t['max_compute_processes']} processes held a compute context "
                         "during timing (docs/trust.md, \"A shared GPU\")")
    roof = rec.get("roofline")
    if roof and roof.get("pct_peak") is not None:  # the peak of the units the precision runs on
        units = roof.get("units") or "FP32 CUDA cores"
        lines.append(f"{indent}  roof    {roof['arithmetic_intensity']:.1f} FLOP/B, {roof['pct_peak']:.1f}% of the {units} "
                     f"peak ({roof['peak_gflops']:.0f} GFLOP/s), {roof['pct_dram_bandwidth']}% of DRAM bandwidth")
    elif roof and roof.get("pct_fp32_peak") is not None:  # a record from before each precision had its peak
        lines.append(f"{indent}  roof    {roof['arithmetic_intensity']:.1f} FLOP/B, {roof['pct_fp32_peak']:.1f}% of FP32 peak "
                     f"({roof['fp32_peak_gflops']:.0f} GFLOP/s), {roof['pct_dram_bandwidth']}% of DRAM bandwidth")
    return lines


def _g(value) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) else str(value)
