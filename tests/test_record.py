"""gemmlab.stages.record: precision text, and the human summary of a synthetic full record (baseline,
ratio, both timing protocols, launch floor, roofline, safety nets, sanitizer)."""

from __future__ import annotations

import copy
import json

import pytest

from gemmlab.stages import record as record_stage
from gemmlab.stages.roofline import roofline


def series(median, n=10):
    return {"samples_ms": [median] * n, "median_ms": median, "min_ms": median, "max_ms": median, "rel_spread": 0.0,
            "gflops": 2 * 4096**3 / (median * 1e-3) / 1e9, "throttled_samples": 1, "median_unthrottled_ms": median,
            "median_sm_mhz": 1980, "telemetry": [None] * n}


def timing(graph_ms, events_ms, floor_ms=0.005, launch_bound=False):
    t = dict(series(graph_ms))
    t.update(protocol="graph", protocols={"events": series(events_ms), "graph": series(graph_ms)},
             description="...", warmup=5, repeat=10, min_repeat=10, batch=20, l2="warm",
             stopped_by={"events": "repeat", "graph": "repeat"}, launch_floor_ms={"events": 0.006, "graph": floor_ms},
             host_overhead_per_launch_ms=events_ms - graph_ms, median_over_floor=graph_ms / floor_ms,
             launch_bound=launch_bound)
    return t


def verification(rule="bound"):
    return {"passed": True, "max_abs_error": 1.5e-5, "max_rel_error": 2e-6, "mismatches": 0, "nan_outputs": 0,
            "atol": 3e-4, "rtol": 3e-4, "first_mismatches": [], "rule": rule,
            "method": "full float64 reference, every element", "max_error_over_tolerance": 0.012, "safety": 8.0,
            "freivalds": None}


@pytest.fixture
def full_record():
    rec = record_stage.new_record({"kernel": {"name": "tiled"}, "shape": [4096, 4096, 4096], "baseline": "cublas"})
    roof = roofline(4096, 4096, 4096, 5.0, 132, "90", 1980, 4.8e12)
    rec.update(
        status="ok", valid=True,
        kernel={"name": "tiled", "params": {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2},
                "plugin": "gemmlab_plugins.tiled", "backend": "nvrtc"},
        shape={"M": 4096, "N": 4096, "K": 4096}, flops=2 * 4096**3, mode="run",
        precision=record_stage.precision_text("fp32"),
        device={"index": 0, "name": "NVIDIA H200", "arch": "sm_90"},
        compile={"compile_ms": 120.0, "nvrtc_version": "13.0", "options": ["-arch=sm_90"],
                 "resources": {"registers": 80, "spill_store_bytes": 0, "spill_load_bytes": 0,
                               "static_shared_bytes": 8192},
                 "driver_attributes": {"registers": 80, "local_bytes": 0, "static_shared_bytes": 8192}},
        launch={"grid": [64, 64, 1], "block": [32, 8, 1], "shared_bytes": 0, "threads_per_block": 256, "blocks": 4096},
        occupancy={"max_active_blocks_per_sm": 3, "theoretical_occupancy": 0.375, "blocks": 4096, "waves": 10.34},
        verification=verification(), timing=timing(5.0, 5.002), roofline=roof,
        baseline={"name": "cublas", "params": {}, "library": "cuBLAS 13.0.2 via nvmath-python", "compile": None,
                  "verification": verification(), "timing": timing(4.0, 4.001),
                  "roofline": roofline(4096, 4096, 4096, 4.0, 132, "90", 1980, 4.8e12), "repeat_stable": True},
        ratio_to_baseline={"baseline": "cublas", "protocol": "graph", "median_time": 1.25, "gflops": 0.8},
        guard_bands="intact", inputs_unchanged=True, repeat_stable=True,
        launch_floor={"events": series(0.006), "graph": series(0.005)},
        sanitizer={"tool": "memcheck", "verdict": "clean", "errors": 0, "report": "/x/sanitizer-memcheck.log"},
    )
    return rec


def test_summary_full_record(full_record):
    text = record_stage.summary(full_record)
    lines = text.splitlines()
    assert lines[0].startswith("tiled 4096x4096x4096 BM=64 BN=64 BK=16 TM=8 TN=2 [ok] on NVIDIA H200 (sm_90)")
    assert "  ratio   1.250x the baseline's median time, 0.800x its GFLOP/s (graph)" in lines
    assert "  baseline cublas (cuBLAS 13.0.2 via nvmath-python)" in lines
    assert "host/launch overhead 2.00 us per launch" in text  # the kernel's events - graph
    assert "host/launch overhead 1.00 us per launch" in text  # the baseline's
    assert "682.7 FLOP/B" in text and "41.1% of the FP32 CUDA cores peak (66908 GFLOP/s)" in text
    assert "floor 0.00500 ms" in text and "LAUNCH-BOUND" not in text
    assert "verify  PASS (bound)" in text
    assert "guard bands intact, inputs unchanged True, repeat stable True" in text
    assert "sanitizer memcheck: clean (0 errors)" in text
    assert sum("verify  PASS" in line for line in lines) == 2  # kernel and baseline
    assert sum("time    median" in line for line in lines) == 2
    json.loads(json.dumps(full_record, allow_nan=False))


def test_summary_launch_bound_and_failure(full_record):
    rec = copy.deepcopy(full_record)
    rec["timing"]["launch_bound"] = True
    rec.update(status="wrong_result", valid=False, error="wrong result from tiled: FAIL ...")
    rec["verification"].update(passed=False, mismatches=3, max_error_over_tolerance="inf")
    text = record_stage.summary(rec)
    assert "[wrong_result]" in text and "  error   wrong result from tiled" in text
    assert "LAUNCH-BOUND" in text
    assert "verify  FAIL (bound)" in text and "max err/tol inf" in text


def test_summary_minimal_records():
    # an invalid point knows only its config; a compiled one has no timing, verification or baseline
    bare = record_stage.new_record({"kernel": {"name": "tiled"}, "shape": [1, 2]})
    bare.update(status="invalid", error="shape: must be a list [M, N, K]")
    text = record_stage.summary(bare)
    assert "tiled" in text and "[invalid]" in text and "ratio" not in text
    assert record_stage.summary({"status": "error", "config": {}}).startswith("?")


def test_summary_of_a_kernel_without_parameters_has_single_spaces():
    rec = record_stage.new_record({"kernel": {"name": "plain"}, "shape": [256, 256, 256]})
    rec.update(status="compiled", kernel={"name": "plain", "params": {}}, shape={"M": 256, "N": 256, "K": 256})
    assert record_stage.summary(rec).splitlines()[0] == "plain 256x256x256 [compiled]"


def test_summary_of_a_lost_workers_record_names_the_points_parameters():
    """A record the pipeline never filled (the parent writes it for a crashed or hung worker:
    config only) still shows the point's parameters, so a sweep's summary line says which point
    crashed (a new-user trial saw ``sim_fault 64x64x64  [crashed]``)."""
    rec = record_stage.new_record({"kernel": {"name": "sim_fault", "MODE": 5}, "shape": [64, 64, 64]})
    rec.update(status="crashed", error="the point's worker died (signal 11)")
    first = record_stage.summary(rec).splitlines()[0]
    assert first.startswith("sim_fault 64x64x64 MODE=5 [crashed]"), first


def test_precision_text():
    assert record_stage.precision_text("fp32").startswith("fp32: ")
    assert "no TF32" in record_stage.precision_text("fp32")
    assert "TF32" in record_stage.precision_text("tf32") and "tensor cores" in record_stage.precision_text("tf32")
    for p in ("fp32", "tf32"):
        assert "float64" in record_stage.precision_text(p)  # names the reference
    assert "bfloat16" in record_stage.precision_text("bf16") and "float16" in record_stage.precision_text("fp16")
    with pytest.raises(KeyError):
        record_stage.precision_text("fp64")


def test_write_record_never_overwrites(tmp_path):
    rec = record_stage.new_record({})
    path = record_stage.write_record(rec, tmp_path)
    assert json.loads(path.read_text())["schema"] == "gemmlab.result/1"
    with pytest.raises(FileExistsError):
        record_stage.write_record(rec, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary file left


def test_summary_says_what_kernel_auto_chose(full_record):
    rec = copy.deepcopy(full_record)
    rec["dispatch"] = {"requested": "auto", "chosen": "gemv_rows", "source": "table", "match": "nearest"}
    assert "  auto    chose gemv_rows by table entry (nearest)" in record_stage.summary(rec).splitlines()
    rec["dispatch"] = {"requested": "auto", "chosen": "slicedk", "source": "rule", "rule": "K-heavy: few tiles"}
    assert "  auto    chose slicedk by rule K-heavy: few tiles" in record_stage.summary(rec).splitlines()
    assert "auto" not in record_stage.summary(full_record)


def test_compile_only_header_names_the_built_target():
    """mode=compile of a wgmma kernel builds for sm_90a: the header says so, like the compile line."""
    from gemmlab.stages.record import summary
    rec = {"status": "compiled", "mode": "compile", "kernel": {"name": "wgmma_tf32", "params": {}},
           "shape": {"M": 256, "N": 256, "K": 256}, "device": {"name": "no GPU (compile only)", "arch": "sm_90"},
           "compile": {"arch": "sm_90a", "resources": None, "nvrtc_version": "13.5", "options": [], "compile_ms": 1.0}}
    assert summary(rec).splitlines()[0].endswith("(sm_90a)")


def test_compile_line_says_where_the_binary_came_from(full_record):
    """A disk-cache hit or an in-process reuse is named on the console, with what compiling took,
    so a 1 ms "compile" is not read as NVRTC's time; a fresh compile shows its time alone."""
    import copy

    def line(**fields):
        rec = copy.deepcopy(full_record)
        rec["compile"].update(fields)
        return next(l for l in record_stage.summary(rec).splitlines() if l.startswith("  compile "))

    fresh = line(compile_ms=812.0, disk_cache="miss", cache_hit_in_process=False)
    hit = line(compile_ms=1.0, disk_cache="hit", original_compile_ms=1392.4, cache_hit_in_process=False)
    reuse = line(compile_ms=0.0, disk_cache="off", cache_hit_in_process=True)
    assert fresh.startswith("  compile 812.0 ms NVRTC") and "cache" not in fresh and "earlier" not in fresh
    assert hit.startswith("  compile 1.0 ms (disk cache hit; compiled in 1392.4 ms) NVRTC")
    assert reuse.startswith("  compile 0.0 ms (compiled earlier in this process) NVRTC")


def test_summary_gives_the_percent_of_the_precisions_own_peak(full_record):
    from gemmlab.stages.roofline import roofline
    # a bf16 point at 700 TFLOP/s: 52% of the BF16 tensor-core peak, not "521% of FP32 peak"
    n = 4096
    full_record["roofline"] = roofline(n, n, n, 2 * n**3 / 700e12 * 1e3, 132, "90", 1980, 3.35e12, ab_bytes=2,
                                       precision="bf16")
    text = record_stage.summary(full_record)
    assert "% of the BF16 tensor cores (dense) peak (1070531 GFLOP/s)" in text and "of FP32 peak" not in text
    assert "65.4% of the BF16" in text


def test_summary_of_an_older_record_keeps_its_fp32_percent(full_record):
    for key in ("pct_peak", "peak_gflops", "units"):
        full_record["roofline"].pop(key, None)
    assert "41.1% of FP32 peak (66908 GFLOP/s)" in record_stage.summary(full_record)


# --- the typed record being written and the one writer (issue 45 item 3) ---------------------------

def test_result_is_typed_and_its_changes_are_named(tmp_path):
    rec = record_stage.new_record({"kernel": {"name": "tiled"}, "shape": [64, 64, 64]})
    assert isinstance(rec, record_stage.Result) and rec.status == "running" and not rec.valid and rec.error is None
    rec.fire("guard bands").fire("guard bands").fire("inputs unchanged")
    assert rec.nets_fired == ["guard bands", "inputs unchanged"]
    rec.fail("out_of_bounds", "wrote 4 elements past C")
    assert (rec.status, rec.valid, rec.error) == ("out_of_bounds", False, "wrote 4 elements past C")
    with pytest.raises(ValueError, match="status: a failure needs a failure status, not 'ok'"):
        rec.fail("ok", "x")
    ok = record_stage.new_record({})
    ok["status"] = "compiled"
    assert ok.finish().valid and ok["valid"] is True
    path = record_stage.write_record(rec, tmp_path / "a")
    assert path.read_text() == rec.to_json() and json.loads(path.read_text())["nets_fired"] == rec.nets_fired


@pytest.mark.parametrize("change, message", [
    ({"valid": True, "status": "wrong_result"}, "valid: true for status 'wrong_result'"),
    ({"valid": "yes"}, "valid: 'yes' is not true or false"),
    ({"status": None}, "status: None is not a string"),
    ({"schema": "other/1"}, "schema: 'other/1' is not a gemmlab.result/ schema"),
])
def test_the_writer_refuses_a_record_that_contradicts_itself(tmp_path, change, message):
    """A record that claims to be valid for a failure status (or has no readable status, validity
    or schema) is never written: one ValueError naming the field, and no file."""
    rec = record_stage.new_record({})
    rec.update(change)
    with pytest.raises(ValueError, match=f"result.json not written to .*: {message}"):
        record_stage.write_record(rec, tmp_path)
    assert list(tmp_path.iterdir()) == []
    plain = dict(record_stage.new_record({}), status="ok", valid=True)  # a plain dict is written as a Result
    assert json.loads(record_stage.write_record(plain, tmp_path).read_text())["status"] == "ok"


def test_the_summary_names_the_entry_and_each_plan_steps_note():
    """The terminal summary says which entry ran and each plan step's note (e.g. the fused epilogue
    stored from registers, and why), not only the parameters asked for."""
    from gemmlab.stages.record import summary
    rec = {"status": "compiled", "kernel": {"name": "wgmma_bf16", "params": {"EPI": 7}}, "shape": {"M": 63, "N": 65, "K": 40},
           "plan": ["main kernel (fused epilogue from registers: N 65 x 2 B ...; EPI=7 runs as 1)"],
           "compile": {"name_expression": "gemm_wgmma_epi<2, 128, 256>", "nvrtc_version": "13.0", "options": ["-arch=sm_90a"],
                       "compile_ms": 1.0, "resources": {"registers": 168, "spill_store_bytes": 0, "spill_load_bytes": 0,
                                                        "stack_frame_bytes": 0, "static_shared_bytes": 64}}}
    lines = [line for line in summary(rec).splitlines() if line.startswith("  plan")]
    assert lines == ["  plan    main kernel (fused epilogue from registers: N 65 x 2 B ...; EPI=7 runs as 1); entry gemm_wgmma_epi"]
    assert "  plan" not in summary({"status": "compiled", "kernel": {"name": "x", "params": {}}, "plan": ["main kernel"]})


def test_summary_of_a_triton_kernels_driver_attributes(full_record):
    """A Triton kernel's loaded module reports registers, spills and dynamic shared memory (no local or
    static figures): the summary shows what is there (it raised KeyError 'local_bytes' on the H100,
    session 35, ending `gemmlab -m kernel=triton_matmul,...` after its first point)."""
    rec = copy.deepcopy(full_record)
    rec["compile"].update(backend="triton", triton_version="3.6.0", arch="sm_90", shared_bytes=98304,
                          driver_attributes={"registers": 168, "spills": 0, "max_threads": 256,
                                             "dynamic_shared_bytes": 98304})
    text = record_stage.summary(rec)
    assert "(driver: 168 regs, spills 0, dynamic smem 98304 B)" in text
    assert "(driver: 80 regs, local 0 B, smem 8192 B)" in record_stage.summary(full_record)
