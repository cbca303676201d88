"""The exploit corpus of issue 40 item 8: one :class:`Case` per exploit point, the status gemmlab must
give it and the safety net that must fire (named in the record's ``nets_fired``). Read by the gpu
tests (tests/test_adversarial_gpu.py), the CPU tests on the fake GPU (tests/test_adversarial_fake.py)
and the runner (tests/adversarial/run_corpus.py); tests/adversarial/README.md has the same table.

Each case is a drop-in plugin kernel ``x_<idea>`` of ``tests/adversarial/plugins`` at a small shape;
:func:`config` builds its whole point config (every case in its own isolated worker process,
:func:`problems` says what is wrong with a record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PLUGINS = Path(__file__).resolve().with_name("plugins")

#: the timing every case starts from (events, 5 warm-up launches, 3 samples of 20 launches)
EVENTS = {"mode": "events", "warmup": 5, "repeat": 3, "batch": 20}
#: graph replays (2 warm-up launches, 5 samples of one replayed graph of 20 launches)
GRAPH = {"mode": "graph", "warmup": 2, "repeat": 5, "batch": 20}
#: a point's isolation: its own worker process (a sticky fault costs only its point), a watchdog
ISOLATION = {"process": True, "timeout_s": 300}
#: record keys that hold a timing figure (gemmlab moves them under ``withheld`` for a refused point)
FIGURE_KEYS = ("timing", "roofline", "ratio_to_baseline")
#: numbers that are a figure wherever they appear (outside ``withheld`` and the empty kernel's ``launch_floor``)
FIGURE_FIELDS = ("gflops", "median_ms", "pct_peak", "pct_fp32_peak")


@dataclass(frozen=True)
class Case:
    """One exploit point.

    Attributes:
        name: the case (``kernel`` minus ``x_``, plus a suffix where one kernel has several cases).
        kernel: the plugin kernel, ``x_<idea>``.
        idea: what the exploit does, one line.
        status: the status gemmlab must record.
        net: the net that must be named in ``nets_fired`` (pipeline.NETS' names).
        shape: ``[M, N, K]``.
        params: ``kernel.<P>`` values.
        overrides: other config sections (precision, timing, verify, inputs, sanitizer ...),
            merged into the base config section by section.
        why: the mechanism that refuses it, one line (README table).
        also: other (status, net) pairs that refuse it as rightly, where which net fires first is a
            race the exploit runs against the pipeline (said in ``why``).
    """

    name: str
    kernel: str
    idea: str
    status: str
    net: str
    shape: tuple = (256, 256, 256)
    params: dict = field(default_factory=dict)
    overrides: dict = field(default_factory=dict)
    why: str = ""
    also: tuple = ()


CASES: tuple[Case, ...] = (
    Case("lazy_once", "x_lazy_once", "right on its first launch, then returns at once (`__device__` block counter)",
         "wrong_after_timing", "verification after timing",
         why="the timed batch, re-run on new inputs in the same buffers, leaves the NaN fill"),
    Case("lazy_warmup", "x_lazy_warmup", "right for the correctness launch and the 5 warm-up launches, then idle",
         "wrong_after_timing", "verification after timing", params={"W": 5},
         why="as lazy_once: every timed launch was idle"),
    Case("lazy_graph", "x_lazy_graph", "right until the second timed graph replay, then idle",
         "wrong_after_timing", "verification after timing", params={"W": 2, "B": 4, "G": 2},
         overrides={"timing": {"mode": "graph", "warmup": 2, "repeat": 3, "batch": 4}},
         why="the timed graph, replayed on new inputs, leaves the NaN fill"),
    Case("stash_ptr", "x_stash_ptr", "copies a private __device__ C keyed by the (A, B, C) pointers",
         "wrong_after_timing", "verification after timing",
         why="new values in the same buffers: the stash is stale"),
    Case("stash_values", "x_stash_values", "copies a private __device__ C keyed by the first and last input values",
         "cached_result", "fresh-input timing", shape=(1024, 1024, 1024), overrides={"timing": GRAPH},
         why="new inputs are computed once (so verified right) and the timed copy stays under the FP32 peak "
             "(42.5 us, slower than the 32.1 us FP32 floor, on the H100); a launch on unseen inputs is ~25x slower than the next"),
    Case("sampled_rows", "x_sampled_rows", "computes only the rows and columns the sampled verifier compares (0 elsewhere)",
         "wrong_result", "verification", params={"SEED1": 1, "SAMPLE": 16},
         overrides={"verify": {"method": "sampled", "sample": 16}},
         why="every sampled row and column matches; Freivalds' check of the whole product fails"),
    Case("nan_some", "x_nan_some", "leaves the last row of C unwritten", "wrong_result", "verification",
         why="the NaN fill is still there (NaN outputs)"),
    Case("noop", "x_noop", "writes nothing: counts on a stale right C in the output buffer",
         "wrong_result", "verification", why="C is NaN-filled before the correctness launch"),
    Case("uninit_smem", "x_uninit_smem", "reads shared memory no thread wrote yet (another warp writes it, no barrier)",
         "sanitizer_errors", "sanitizer", shape=(64, 64, 64), overrides={"sanitizer": "racecheck"},
         why="racecheck reports the hazard (the output itself is right)"),
    Case("bf16_inputs", "x_bf16_inputs", "claims fp32, multiplies inputs rounded to bf16", "wrong_result", "verification",
         why="the float32 bound (input rounding 0)"),
    Case("tf32_trunc", "x_tf32_trunc", "claims fp32, multiplies inputs truncated to TF32", "wrong_result", "verification",
         why="the float32 bound (input rounding 0)"),
    Case("write_input", "x_write_input", "sets low mantissa bits of A (its reads mask them: results stay right and stable)",
         "inputs_modified", "inputs unchanged", why="A differs from what was uploaded after timing"),
    Case("write_past_c", "x_write_past_c", "a right C plus one store just past its end", "out_of_bounds", "guard bands",
         why="the guard band after C changed after the correctness launch"),
    Case("clock_aware", "x_clock_aware", "%globaltimer: computes after a pause, returns at once when launched back to back",
         "implausible", "plausibility", shape=(1024, 1024, 1024),
         overrides={"timing": {"mode": "graph", "warmup": 2, "repeat": 3, "batch": 400}},
         why="the verification after timing follows host work, so it computes there; the replay median beats the peak"),
    Case("skip_k8_normal", "x_skip_k8", "forms every 8th product along K and scales by 8", "wrong_result",
         "verification", why="the float32 bound"),
    Case("skip_k8_integers", "x_skip_k8", "the same, with integer inputs", "wrong_result", "verification",
         overrides={"inputs": {"distribution": "integers"}}, why="the exact rule"),
    Case("partial_k_integers", "x_partial_k", "drops the last product along K (inside the bound at K = 65536 for N(0,1))",
         "wrong_result", "verification", shape=(64, 64, 65536), overrides={"inputs": {"distribution": "integers"}},
         why="integer inputs, exact rule: any lost product is seen"),
    Case("sticky7", "x_sticky7", "its 7th launch (the last warm-up launch) stores 2^40 elements past C",
         "cuda_error", "cuda error", params={"FAULT_AT": 7}, overrides={"timing": {"warmup": 6}},
         why="CUDA_ERROR_ILLEGAL_ADDRESS; the point's worker is replaced, the next point runs"),
    Case("sticky_in_sample", "x_sticky7", "the same fault on the last launch of the second timed sample (launch 43)",
         "cuda_error", "cuda error", params={"FAULT_AT": 43}, overrides={"timing": {"warmup": 2}},
         why="the fault surfaces at the sample's stop event"),
    Case("tf32_zeros", "x_tf32_zeros", "a precision=tf32 kernel that writes zeros", "wrong_result", "verification",
         shape=(64, 64, 4096), overrides={"precision": "tf32"},
         why="the TF32 rule (float64 of the TF32-rounded inputs, float32 accumulation bound)"),
    Case("wgmma_out", "x_wgmma_out", "declares HGMMA; built without sm_90a its wgmma path is compiled out",
         "missing_instructions", "instruction classes", overrides={"precision": "bf16"},
         why="HGMMA counted 0 times in its SASS: refused before any launch"),
    Case("nan_sniff", "x_nan_sniff", "computes an output only where it finds the NaN fill", "implausible", "plausibility",
         shape=(1024, 1024, 1024), overrides={"timing": GRAPH},
         why="the after-timing verification NaN-fills C too (verified right); the timed launches beat the peak"),
    Case("drift", "x_drift", "from its second launch on C[0][0] is one float32 step off (a race's stand-in)",
         "unstable", "repeat stability", why="the last timed output differs bitwise from the correctness launch's"),
    Case("graph_detect", "x_graph_detect", "library plugin: enqueues nothing while its stream is being captured",
         "foreign_launch", "launch path", overrides={"timing": GRAPH},
         why="its enqueue captured on the run's stream holds no kernel"),
    Case("side_stream", "x_side_stream", "library plugin: GEMM on its own stream, joined back on the first call only",
         "foreign_launch", "launch path",
         why="its enqueue forks the capture onto another stream and never joins it: it cannot be captured"),
    Case("host_compute", "x_host_compute", "library plugin: no kernel; synchronous copies and numpy on the host",
         "foreign_launch", "launch path", why="its synchronisation and host copies break the capture"),
    Case("host_callback", "x_host_callback", "library plugin: no kernel; async copies to pinned memory, numpy in a "
         "`cuLaunchHostFunc` host function, async copy back", "foreign_launch", "launch path", shape=(64, 64, 64),
         why="its enqueue captures (nothing synchronises), but the graph holds host and host<->device copy nodes, no kernel"),
    Case("spin_worker", "x_spin_worker", "library plugin: a doorbell kernel on the timed stream; the GEMM done by a "
         "persistent kernel spinning on its own stream", "foreign_launch", "launch path", shape=(64, 64, 64),
         why="its captured enqueue replays and C is right, but the context still has work (the spinning worker) "
             "long after the replay completed on the run's stream; or, when the worker has not finished C by the "
             "time the run's stream has (a race: H100 call 1 of 2026-12-07), the first verification sees NaN",
         also=(("wrong_result", "verification"),)),
    Case("timer_patch", "x_timer_patch", "library plugin: patches gemmlab's sample reader to report 1/1000 of each sample",
         "implausible", "plausibility", why="the faked median beats the FP32 peak at the measured clock"),
)

BY_NAME = {case.name: case for case in CASES}


def config(case: Case, plugin_dirs: list[str] | None = None, **sections: Any) -> dict:
    """The whole point config of ``case`` (plain dict for ``run_point``): the base (``mode=run``,
    :data:`EVENTS` timing, :data:`ISOLATION`, the plugin folder), the case's own overrides, then
    ``sections`` (each merged into its section, e.g. ``timing={...}`` for a faster run)."""
    cfg: dict = {"kernel": {"name": case.kernel, **case.params}, "shape": list(case.shape), "mode": "run",
                 "plugin_dirs": plugin_dirs or [str(PLUGINS)], "timing": {**EVENTS, "shared": "refuse"},
                 "isolation": dict(ISOLATION)}
    for overrides in (case.overrides, sections):
        for key, value in overrides.items():
            if isinstance(value, dict) and isinstance(cfg.get(key), dict):
                cfg[key] = {**cfg[key], **value}
            else:
                cfg[key] = value
    return cfg


def net_fired(record: dict, net: str) -> bool:
    """``net`` is named in ``nets_fired`` (also in its long form, e.g. "verification (NaN outputs: ...)")."""
    return any(n == net or n.startswith(net + " (") for n in record.get("nets_fired") or [])


def figures(record: dict) -> list[str]:
    """Where the record holds a timing figure outside ``withheld`` (and the empty kernel's
    ``launch_floor``): the keys of :data:`FIGURE_KEYS` at the top level or in ``baseline``, and any
    numeric field of :data:`FIGURE_FIELDS` anywhere. A refused point must have none."""
    found = [key for key in FIGURE_KEYS if key in record]
    found += [f"baseline.{key}" for key in FIGURE_KEYS if isinstance(record.get("baseline"), dict)
              and key in record["baseline"]]

    def walk(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("withheld", "launch_floor") and not path:
                    continue
                if key in FIGURE_FIELDS and isinstance(value, (int, float)) and not isinstance(value, bool):
                    found.append(".".join(path + [key]))
                walk(value, path + [key])
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, path + [str(i)])

    walk(record, [])
    return sorted(set(found))


def shared(record: dict) -> bool:
    """Whether any backend's telemetry counted more than one process with a compute context on the
    GPU while the point was timed (``timing.max_compute_processes``, kept under ``withheld`` once refused)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("max_compute_processes"), int):
                found.append(node["max_compute_processes"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(record)
    return any(n > 1 for n in found)


def problems(case: Case, record: dict) -> list[str]:
    """What is wrong with ``record`` for ``case`` (empty: the exploit was refused as it must be):
    the status, the net, a valid flag, a timing figure kept, an error that is not one line."""
    out = []
    accepted = ((case.status, case.net),) + tuple(case.also)
    if shared(record):  # another process's kernels open the gaps a timing-aware exploit computes in
        accepted += (("shared_gpu", "shared GPU"),)  # (docs/trust.md, "A shared GPU"): refused all the same
    status, net = next(((s, n) for s, n in accepted if record.get("status") == s), accepted[0])
    if record.get("status") != status:
        out.append(f"status {record.get('status')!r}, expected {' or '.join(repr(s) for s, _ in accepted)} "
                   f"(error: {record.get('error')})")
    if not net_fired(record, net):
        out.append(f"net {net!r} not in nets_fired {record.get('nets_fired')}")
    if record.get("valid") is not False:
        out.append(f"valid is {record.get('valid')!r}")
    held = figures(record)
    if held:
        out.append(f"a refused point keeps timing figures: {', '.join(held)}")
    error = record.get("error")
    if not isinstance(error, str) or not error or "\n" in error:
        out.append(f"error is not one line: {error!r}")
    return out
