"""The whole ``run_point`` pipeline in ``mode=run`` on a host-memory fake GPU (tests/fakegpu.py):
real NVRTC compilation, inputs, guard-banded buffers, NaN fill, verification, the timing loop on a
fake clock, the safety nets (guard bands, input immutability, repeat stability) and the record.
A "launch" runs a host function on the fake device memory; broken kernels are host functions too.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu, host_gemm, right_on_first_inputs_only, unpack
from gemmlab.stages import record as record_stage
from gemmlab.gpu.guards import GUARD_BYTES
from gemmlab.run.pipeline import exit_status, run_point

SHAPE = [63, 65, 33]
FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events"}


def strict_json(path):
    def no_constant(name):
        raise ValueError(f"non-standard JSON constant {name} in {path}")
    return json.loads(path.read_text(), parse_constant=no_constant)


def run(tmp_path, monkeypatch, gpu=None, **cfg):
    gpu = gpu or HostGpu()
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    full = {"kernel": {"name": "tiled"}, "shape": SHAPE, "mode": "run", "timing": dict(FAST)}
    for key, value in cfg.items():
        if isinstance(value, dict) and isinstance(full.get(key), dict):
            full[key] = {**full[key], **value}
        else:
            full[key] = value
    out = tmp_path / "point"
    rec = run_point(full, out)
    assert strict_json(out / "result.json")["status"] == rec["status"]
    assert not (out / "traceback.txt").exists(), (out / "traceback.txt").read_text()
    return rec, gpu


# --- a correct kernel ------------------------------------------------------------------------------

def test_ok_run_with_baseline_both_protocols(tmp_path, monkeypatch):
    gpu = HostGpu(durations={"gemm_tiled": 1.0, "gemm_naive": 2.0, "gemmlab_empty": 2.0**-10})
    rec, gpu = run(tmp_path, monkeypatch, gpu, baseline="naive", timing={"mode": "both"})
    assert rec["status"] == "ok" and rec["valid"] is True and exit_status(rec) == 0
    assert rec["kernel"]["backend"] == "nvrtc"
    v = rec["verification"]
    assert v["passed"] and v["rule"] == "bound" and v["nan_outputs"] == 0
    t = rec["timing"]
    assert t["protocol"] == "graph" and set(t["protocols"]) == {"events", "graph"}
    assert t["samples_ms"] == [1.0] * 3 and t["repeat"] == 3 and t["min_repeat"] == 3 and t["batch"] == 2
    assert t["host_overhead_per_launch_ms"] == 0.0
    assert t["launch_floor_ms"] == {"events": 2.0**-10, "graph": 2.0**-10}
    assert t["median_over_floor"] == 1024.0 and t["launch_bound"] is False
    assert t["stopped_by"] == {"events": "repeat", "graph": "repeat"}
    assert "host submission gaps are excluded" in t["description"]
    assert rec["baseline"]["name"] == "naive" and rec["baseline"]["timing"]["median_ms"] == 2.0
    assert rec["ratio_to_baseline"] == {"baseline": "naive", "protocol": "graph", "median_time": 0.5, "gflops": 2.0}
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"] is True and rec["repeat_stable"] is True
    assert rec["roofline"]["flops"] == 2 * 63 * 65 * 33 and rec["roofline"]["pct_fp32_peak"] is None  # no NVML clock
    assert rec["telemetry_error"].startswith("NVML unavailable")
    assert gpu.captures == 3  # one graph per candidate and one for the floor
    assert getattr(gpu, "_flush_buffer", None) is None  # L2 warm: no flush buffer allocated
    assert sorted(gpu.freed) == sorted(gpu.memory)
    text = record_stage.summary(rec)
    assert "ratio   0.500x the baseline's median time, 2.000x its GFLOP/s (graph)" in text
    assert "baseline naive" in text


def test_correctness_launch_sees_nan_filled_output(tmp_path, monkeypatch):
    seen = []

    def spy(gpu, args):
        a, b, c, m, n, k = unpack(args)
        seen.append(gpu.words(c, m * n).copy())
        host_gemm(gpu, args)

    rec, _ = run(tmp_path, monkeypatch, HostGpu(behaviour={"gemm_tiled": spy}))
    assert rec["status"] == "ok"
    # the first launch wrote into the NaN fill (all-ones words), so an unwritten output cannot pass
    assert (seen[0] == 0xFFFFFFFF).all()


def test_cold_l2_write_flush_memsets_a_scratch_buffer(tmp_path, monkeypatch):
    gpu = HostGpu(l2_bytes=1 << 20)
    rec, gpu = run(tmp_path, monkeypatch, gpu, timing={"l2": "cold", "batch": 20, "floor": False, "flush": "write"})
    assert rec["status"] == "ok"
    scratch = gpu._flush_buffer.handle
    assert gpu.memory[scratch].size == 2 << 20  # 2x the L2 size
    flushes = [f for f in gpu.fills if f[0] == scratch][1:]  # after the one fill at allocation
    assert len(flushes) == 3 and [f[2] for f in flushes] == [(2 << 20) // 4] * 3  # before every sample
    assert len({f[1] for f in flushes}) == 3  # a new pattern each time
    assert rec["timing"]["batch"] == 1 and rec["timing"]["l2"] == "cold"
    assert "is written (L2 left dirty)" in rec["timing"]["description"]


def test_cold_l2_read_flush_reads_the_scratch_buffer_before_every_sample(tmp_path, monkeypatch):
    gpu = HostGpu(l2_bytes=1 << 20)
    rec, gpu = run(tmp_path, monkeypatch, gpu, timing={"l2": "cold", "batch": 20, "floor": False})
    assert rec["status"] == "ok" and rec["timing"]["flush"] == "read"
    scratch = gpu._flush_buffer.handle
    assert [f[0] for f in gpu.fills].count(scratch) == 1  # filled once, never written again
    reads = [name for name in gpu.launches if name.startswith("gemmlab_l2_read")]
    timed = gpu.log[gpu.log.index("event") - 1:]  # from the first sample on: a flush, then start event, launch, stop
    assert len(reads) == 3 and timed[:4] == [reads[0], "event", rec["kernel"]["name"] and timed[2], "event"]
    assert timed[2].startswith("gemm_tiled")
    assert "read by a kernel (L2 left clean)" in rec["timing"]["description"]


def test_integer_inputs_exact_rule_and_sampled_method(tmp_path, monkeypatch):
    rec, _ = run(tmp_path, monkeypatch, inputs={"distribution": "integers", "seed": 5},
                 verify={"method": "sampled", "sample": 8})
    assert rec["status"] == "ok", rec["error"]
    assert rec["inputs"]["distribution"] == "integers"
    assert rec["verification"]["rule"] == "exact"
    assert rec["verification"]["method"].startswith("sampled: 8 whole rows and 8 whole columns")
    assert rec["verification"]["freivalds"]["passed"] is True


def test_adaptive_timing_record(tmp_path, monkeypatch):
    rec, _ = run(tmp_path, monkeypatch, timing={"repeat": 4, "max_repeat": 40, "target_rel_spread": 0.01})
    assert rec["status"] == "ok"
    assert rec["timing"]["stopped_by"] == {"events": "converged"} and rec["timing"]["repeat"] == 4


# --- broken kernels: every safety net ---------------------------------------------------------------

def writes_one_past_the_end(gpu, args):
    host_gemm(gpu, args)
    a, b, c, m, n, k = unpack(args)
    gpu.floats(c + 4 * m * n, 1)[0] = 0.0


def writes_before_the_start(gpu, args):
    host_gemm(gpu, args)
    a, b, c, m, n, k = unpack(args)
    gpu.floats(c - 8, 1)[0] = 0.0


def test_out_of_bounds_write_after_c(tmp_path, monkeypatch):
    rec, _ = run(tmp_path, monkeypatch, HostGpu(behaviour={"gemm_tiled": writes_one_past_the_end}))
    assert rec["status"] == "out_of_bounds" and exit_status(rec) == 1
    assert rec["verification"]["passed"] is True  # the result itself is right ...
    (hit,) = rec["guard_bands"]
    assert hit["matrix"] == "C (tiled)" and hit["first_offsets"] == [63 * 65]  # ... one element past the end
    assert hit["after"] == "the correctness launch"
    assert "out-of-bounds" in rec["error"] and "after the correctness launch" in rec["error"]


def test_out_of_bounds_write_before_c(tmp_path, monkeypatch):
    rec, _ = run(tmp_path, monkeypatch, HostGpu(behaviour={"gemm_tiled": writes_before_the_start}))
    assert rec["status"] == "out_of_bounds"
    assert rec["guard_bands"][0]["first_offsets"] == [-2]


def test_kernel_writing_its_input(tmp_path, monkeypatch):
    def clobber_b(gpu, args):
        host_gemm(gpu, args)
        a, b, c, m, n, k = unpack(args)
        gpu.floats(b, 1)[0] += 1.0

    rec, _ = run(tmp_path, monkeypatch, HostGpu(behaviour={"gemm_tiled": clobber_b}))
    assert rec["status"] == "inputs_modified"
    assert rec["inputs_unchanged"] is False
    assert "B" in rec["error"] and "1 element(s)" in rec["error"]


def test_unstable_kernel(tmp_path, monkeypatch):
    calls = [0]

    def drifting(gpu, args):
        host_gemm(gpu, args)
        calls[0] += 1
        if calls[0] > 1:  # every launch after the correctness launch: one ulp off in one element
            a, b, c, m, n, k = unpack(args)
            x = gpu.floats(c, 1)
            x[0] = np.nextafter(x[0], np.float32(np.inf))

    rec, _ = run(tmp_path, monkeypatch, HostGpu(behaviour={"gemm_tiled": drifting}))
    assert rec["status"] == "unstable"
    assert rec["repeat_stable"] is False
    assert "1 element(s)" in rec["error"] and "race" in rec["error"]


def test_unwritten_output_is_wrong_result(tmp_path, monkeypatch):
    def skips_last(gpu, args):
        a, b, c, m, n, k = unpack(args)
        before = gpu.floats(c + 4 * (m * n - 1), 1).copy()
        host_gemm(gpu, args)
        gpu.floats(c + 4 * (m * n - 1), 1)[:] = before

    rec, _ = run(tmp_path, monkeypatch, HostGpu(behaviour={"gemm_tiled": skips_last}))
    assert rec["status"] == "wrong_result" and exit_status(rec) == 1
    v = rec["verification"]
    assert v["nan_outputs"] == 1 and v["mismatches"] == 1
    assert v["first_mismatches"][0][:3] == [62, 64, "nan"]
    assert "timing" not in rec  # a wrong kernel is never timed


def test_wrong_baseline_fails_the_point(tmp_path, monkeypatch):
    def off_by_one(gpu, args):
        host_gemm(gpu, args)
        a, b, c, m, n, k = unpack(args)
        gpu.floats(c + 4 * 5, 1)[0] += 1.0

    rec, _ = run(tmp_path, monkeypatch, HostGpu(behaviour={"gemm_naive": off_by_one}), baseline="naive")
    assert rec["status"] == "wrong_result"
    assert rec["verification"]["passed"] is True
    assert rec["baseline"]["verification"]["passed"] is False
    assert rec["error"].startswith("wrong result from naive")


def test_sanitizer_without_tool_is_unavailable(tmp_path, monkeypatch):
    # regression: a missing compute-sanitizer used to end as 'sanitizer_errors', as if it had found errors
    from gemmlab.stages import sanitizer
    monkeypatch.setattr(sanitizer, "find_tool", lambda: None)
    rec, _ = run(tmp_path, monkeypatch, sanitizer="memcheck")
    assert rec["status"] == "unavailable"
    assert rec["valid"] is False and exit_status(rec) == 1
    assert rec["sanitizer"]["verdict"] == "unavailable"
    assert "compute-sanitizer" in rec["error"] and "memcheck" in rec["error"]
    assert rec["verification"]["passed"] is True and "timing" in rec  # everything else ran


def test_sanitizer_errors_fail_the_point(tmp_path, monkeypatch):
    from gemmlab.stages import sanitizer
    monkeypatch.setattr(sanitizer, "run", lambda tool, cfg, out_dir, device=None: {
        "tool": tool, "verdict": "errors", "errors": 2, "report": str(out_dir / "sanitizer-racecheck.log")})
    rec, _ = run(tmp_path, monkeypatch, sanitizer="racecheck")
    assert rec["status"] == "sanitizer_errors" and exit_status(rec) == 1
    assert "racecheck" in rec["error"] and "2 errors" in rec["error"]


def test_sanitizer_clean_keeps_the_point_ok(tmp_path, monkeypatch):
    from gemmlab.stages import sanitizer
    calls = []
    monkeypatch.setattr(sanitizer, "run", lambda tool, cfg, out_dir, device=None: calls.append((tool, cfg)) or {
        "tool": tool, "verdict": "clean", "errors": 0, "report": "x"})
    rec, _ = run(tmp_path, monkeypatch, sanitizer="memcheck")
    assert rec["status"] == "ok" and rec["sanitizer"]["verdict"] == "clean"
    (tool, cfg), = calls
    assert tool == "memcheck" and cfg["kernel"]["name"] == "tiled" and cfg["shape"] == SHAPE


def test_arch_other_than_device_is_invalid_in_run_mode(tmp_path, monkeypatch):
    rec, _ = run(tmp_path, monkeypatch, arch="sm_80")
    assert rec["status"] == "invalid" and rec["error"].startswith("arch: ")


# --- a zero launch-floor median (moved from test_rough_edges.py) ------------------------------

def test_zero_launch_floor_median(tmp_path, monkeypatch):
    gpu = HostGpu(durations={"gemmlab_empty": 0.0})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    rec = run_point({"kernel": {"name": "naive"}, "shape": [16, 16, 16], "mode": "run",
                     "timing": {"warmup": 1, "repeat": 3, "batch": 2}}, tmp_path / "p")
    assert rec["status"] == "ok", rec["error"]
    assert rec["launch_floor"]["events"]["median_ms"] == 0.0 and rec["launch_floor"]["events"]["gflops"] is None
    assert "median_over_floor" not in rec["timing"] and "launch_bound" not in rec["timing"]


# --- after timing: the timed path verified on fresh inputs, the plausibility gate (issue 40) --------

def lazy_after(launches: int):
    """A kernel right on its first ``launches`` launches and idle afterwards."""
    count = [0]

    def behaviour(gpu, args):
        count[0] += 1
        if count[0] <= launches:
            host_gemm(gpu, args)

    return behaviour


@pytest.mark.parametrize("mode", ["events", "graph"])
@pytest.mark.parametrize("launches", [1, 1 + FAST["warmup"]])
def test_lazy_kernel_fails_after_timing_and_its_figure_is_withheld(tmp_path, monkeypatch, mode, launches):
    gpu = HostGpu(behaviour={"gemm_tiled": lazy_after(launches)})
    rec, _ = run(tmp_path, monkeypatch, gpu, timing={"mode": mode})
    assert rec["status"] == "wrong_after_timing" and exit_status(rec) == 1
    assert rec["nets_fired"] == ["verification after timing"]
    assert rec["verification"]["passed"] is True and rec["repeat_stable"] is True  # the older nets saw nothing
    after = rec["verification_after_timing"]
    assert after["passed"] is False and after["nan_outputs"] == SHAPE[0] * SHAPE[1]
    assert after["inputs_seed"] != rec["inputs"]["seed"]
    assert "timing" not in rec and "roofline" not in rec and rec["withheld"]["net"] == "verification after timing"
    assert rec["withheld"]["timing"]["median_ms"] == 1.0
    assert rec["error"].startswith("verification after timing: wrong result on fresh inputs") and "\n" not in rec["error"]


def test_stash_keyed_by_pointers_fails_after_timing(tmp_path, monkeypatch):
    stash = {}

    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        if (a, b) not in stash:
            host_gemm(gpu, args)
            stash[(a, b)] = gpu.floats(c, m * n).copy()
        gpu.floats(c, m * n)[:] = stash[(a, b)]

    rec, _ = run(tmp_path, monkeypatch, HostGpu(behaviour={"gemm_tiled": behaviour}))
    assert rec["status"] == "wrong_after_timing" and rec["verification_after_timing"]["mismatches"] > 0


def test_correct_kernel_passes_after_timing_with_the_graph_it_timed(tmp_path, monkeypatch):
    gpu = HostGpu(durations={"gemm_tiled": 1.0, "gemm_naive": 2.0})
    rec, gpu = run(tmp_path, monkeypatch, gpu, baseline="naive", timing={"mode": "graph"})
    assert rec["status"] == "ok", rec.get("error")
    for part in (rec, rec["baseline"]):
        after = part["verification_after_timing"]
        assert after["passed"] and after["path"] == "the graph of one timed batch, replayed"
        assert part["plausibility"]["passed"]
    assert rec["phase_s"]["after_timing"] >= 0 and "withheld" not in rec


def test_faster_than_the_memory_floor_is_implausible(tmp_path, monkeypatch):
    # 1e-9 ms for a 256^3 fp32 product: far above the fake's 4.8 TB/s DRAM and any L2 port
    gpu = HostGpu(durations={"gemm_tiled": 1e-9})
    rec, _ = run(tmp_path, monkeypatch, gpu, shape=[256, 256, 256])
    assert rec["status"] == "implausible" and rec["nets_fired"] == ["plausibility"]
    assert rec["error"].startswith("plausibility: tiled:") and "TB/s" in rec["error"] and "figure withheld" in rec["error"]
    assert rec["withheld"]["timing"]["median_ms"] == pytest.approx(1e-9)
    assert "timing" not in rec and "ratio_to_baseline" not in rec


def test_faster_than_the_fp32_peak_is_implausible(tmp_path, monkeypatch):
    # 1e-4 ms for 256^3 fp32 is 335 TFLOP/s: above 132 SMs x 256 FLOP/clk x 1980 MHz = 66.9 TFLOP/s,
    # while its 786 KB at 7.9 TB/s fit in L2 and stay under the L2 ports' 33 TB/s
    gpu = HostGpu(durations={"gemm_tiled": 1e-4}, l2_bytes=50 << 20)
    gpu.record = lambda: {"index": 0, "name": gpu.facts.name, "arch": "sm_90", "sm_count": 132, "max_sm_mhz": 1980}
    rec, _ = run(tmp_path, monkeypatch, gpu, shape=[256, 256, 256])
    assert rec["status"] == "implausible"
    assert "above the FP32 CUDA cores peak 66.91 TFLOP/s (132 SMs x 256 FLOP/clk x 1980 MHz)" in rec["error"]
    assert rec["plausibility"]["clock_mhz"] == 1980 and rec["plausibility"]["memory_floor_level"].startswith("L2")


def test_kernel_writing_its_input_only_in_later_launches_is_caught(tmp_path, monkeypatch):
    count = [0]

    def behaviour(gpu, args):
        count[0] += 1
        host_gemm(gpu, args)
        if count[0] > 3:
            a, *_ = unpack(args)
            gpu.floats(a, 1)[0] += 1.0

    rec, _ = run(tmp_path, monkeypatch, HostGpu(behaviour={"gemm_tiled": behaviour}))
    assert rec["status"] in ("inputs_modified", "wrong_after_timing") and rec["nets_fired"]


def test_after_timing_samples_a_large_product_with_the_new_seed(tmp_path, monkeypatch):
    import gemmlab.run.pipeline as pipeline
    monkeypatch.setattr(pipeline, "AFTER_TIMING_FULL_MAX", 0)  # every product counts as large here
    rec, _ = run(tmp_path, monkeypatch, HostGpu(behaviour={"gemm_tiled": right_on_first_inputs_only()}))
    after = rec["verification_after_timing"]
    assert after["method"].startswith("sampled") and rec["verification"]["method"].startswith("full")
    assert rec["status"] == "wrong_after_timing" and after["freivalds"]["passed"] is False


def stash_by_values(miss_ms: float):
    """A kernel that keeps C for the inputs it has seen (keyed by their first values) and copies it
    back, fast, when they come again; a miss computes, taking ``miss_ms`` more on the fake clock."""
    stash = {}

    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        key = (float(gpu.floats(a, 1)[0]), float(gpu.floats(b, 1)[0]))
        if key not in stash:
            host_gemm(gpu, args)
            stash[key] = gpu.floats(c, m * n).copy()
            gpu.clock_ms += miss_ms
        gpu.floats(c, m * n)[:] = stash[key]

    return behaviour


def test_a_stash_keyed_by_input_values_is_a_cached_result(tmp_path, monkeypatch):
    gpu = HostGpu(behaviour={"gemm_tiled": stash_by_values(10.0)})
    rec, _ = run(tmp_path, monkeypatch, gpu, timing={"mode": "graph"})
    assert rec["verification_after_timing"]["passed"]  # right on fresh inputs: it computes them once
    assert rec["status"] == "cached_result" and rec["nets_fired"] == ["fresh-input timing"]
    assert rec["fresh_input_timing_ms"] == [[11.0, 1.0], [11.0, 1.0]]
    assert rec["error"].startswith("fresh-input timing: tiled: a launch on inputs it had not seen took 11 and 11 ms")
    assert "timing" not in rec and rec["withheld"]["timing"]["median_ms"] == 1.0


def test_an_honest_kernel_takes_the_same_time_on_fresh_inputs(tmp_path, monkeypatch):
    rec, _ = run(tmp_path, monkeypatch, HostGpu())
    assert rec["status"] == "ok" and rec["fresh_input_timing_ms"] == [[1.0, 1.0]]  # one round when nothing is odd


def test_each_fresh_input_launch_follows_the_spin_lead(tmp_path, monkeypatch):
    # the single-launch timings of the fresh-input net start behind kernels/spin.cu's busy kernel, so the
    # events bracket the device's work and not the host's enqueue (a cuBLAS call timed alone on the H100:
    # 0.106 ms the first time, 0.023 ms the next, 0.005 ms in a graph)
    gpu = HostGpu()
    rec, _ = run(tmp_path, monkeypatch, gpu)
    assert rec["status"] == "ok"
    leads = [i for i, name in enumerate(gpu.log) if name.startswith("gemmlab_spin")]
    assert len(leads) == 2  # one round, two launches of the one backend
    # the lead, then the start event, then the launch under test
    assert [gpu.log[i + 1:i + 3] for i in leads] == [["event", gpu.log[leads[0] + 2]]] * 2
    assert gpu.log[leads[0] + 2].startswith("gemm_tiled")


class SharedMonitor:
    """NVML as the fake GPU's monitor: two processes hold a compute context (another one beside this)."""

    error = None

    def read(self):
        from gemmlab.gpu.monitor import Reading
        return Reading(sm_mhz=1980, mem_mhz=2619, temp_c=40, power_w=300.0, reasons=0, throttled=False,
                       compute_processes=2)

    def max_sm_mhz(self):
        return 1980


def test_a_point_timed_on_a_shared_gpu_is_refused_unless_allowed(tmp_path, monkeypatch):
    # another process's kernels perturb the figure and open the gaps a timing-aware kernel hides skipped
    # launches in (docs/trust.md, "A shared GPU"): timing.shared=refuse withholds it
    gpu = HostGpu()
    gpu.monitor = SharedMonitor()
    rec, _ = run(tmp_path / "refuse", monkeypatch, gpu, timing={"shared": "refuse"})
    assert rec["status"] == "shared_gpu" and rec["nets_fired"] == ["shared GPU"]
    assert rec["error"].startswith("shared GPU: 2 processes held a compute context on the GPU while tiled was timed")
    assert "timing" not in rec and rec["withheld"]["timing"]["max_compute_processes"] == 2
    gpu = HostGpu()
    gpu.monitor = SharedMonitor()
    rec, _ = run(tmp_path / "allow", monkeypatch, gpu, timing={"shared": "allow"})
    assert rec["status"] == "ok" and rec["timing"]["max_compute_processes"] == 2


def test_phase_s_explains_the_points_seconds(tmp_path, monkeypatch):
    """issue 41: the record says where a point's seconds went: every phase, the draw inside allocate,
    the float64 check inside correctness, and run_point (the whole point here but the record's
    writing) holding them all."""
    rec, _ = run(tmp_path, monkeypatch, baseline="naive")
    ph = rec["phase_s"]
    flat = {k: v for k, v in ph.items() if isinstance(v, (int, float)) and k != "run_point"}
    assert {"validate", "open_device", "compile", "allocate", "correctness", "launch_paths", "timing", "safety_nets",
            "after_timing"} <= set(flat)
    assert 0 <= ph["allocate_parts"]["draw"] <= ph["allocate"]
    assert 0 < ph["correctness_parts"]["verify"] <= ph["correctness"]
    assert sum(flat.values()) <= ph["run_point"]
