"""gemmlab.run.precompile (issue 41 throughput): a point's kernels compiled ahead, in this process here,
are the point's own on-disk cache hits under the same driver version (and misses under another), the
device check's kernels too; first-use tuning's top candidates are compiled; a broken point is one line,
never an exception."""

from __future__ import annotations

import numpy as np
import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.contract.hookspecs import Problem, Shape
from gemmlab.gpu import compile as compile_stage
from gemmlab.run import precompile
from gemmlab.run.pipeline import run_point
from gemmlab.stages import device_check

SHAPE = [63, 65, 33]
FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events"}


def point(tmp_path, **extra):
    return {"kernel": {"name": "tiled"}, "shape": SHAPE, "mode": "run", "timing": dict(FAST),
            "verify": {"after_timing": "device"}, "cache": {"enabled": True, "dir": str(tmp_path / "cache")}, **extra}


@pytest.mark.parametrize("driver, hit", [("13.0", "hit"), ("12.9", "miss")])
def test_compiled_ahead_is_the_points_disk_hit(tmp_path, monkeypatch, driver, hit):
    cfg = point(tmp_path)
    done = precompile.precompile([cfg, dict(cfg)], "13.0", workers=0)
    assert done == {"points": 1, "instances": 2, "errors": 0, "first_errors": [], "seconds": done["seconds"],
                    "workers": 0}
    compile_stage.clear_cache()  # the point's worker is another process: nothing in memory
    dc = device_check.compile_kernels(Problem(Shape(*SHAPE), "fp32", "row", "row"), ("none",), "normal", "90",
                                      True, str(tmp_path / "cache"), driver)
    assert dc.disk_cache == hit
    compile_stage.clear_cache()
    gpu = HostGpu()
    monkeypatch.setattr(gpu, "record", lambda: {**HostGpu.record(gpu), "driver_version": driver})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    rec = run_point(cfg, tmp_path / "p")
    assert rec["status"] == "ok", rec["error"]
    assert rec["compile"]["disk_cache"] == hit and rec["compile"]["cache_hit_in_process"] is False
    assert rec["verification_after_timing"]["where"] == "device"


def test_host_after_timing_compiles_no_device_check(tmp_path):
    cfg = point(tmp_path, verify={"after_timing": "host"})
    assert precompile.compile_point(cfg, "13.0")["instances"] == 1
    big = point(tmp_path, verify={"after_timing": "auto"})  # 63x65x33: under auto's 2^30, the host's
    assert precompile.compile_point(big, "13.0")["instances"] == 1



def test_inputs_drawn_on_the_device_compile_the_device_check(tmp_path):
    """inputs.draw=device (after-timing on the host): the device check's kernels compiled ahead too;
    =auto under 2^30 and =host: not."""
    host_after = {"after_timing": "host"}
    assert precompile.compile_point(point(tmp_path, verify=host_after, inputs={"draw": "device"}), "13.0")["instances"] == 2
    assert precompile.compile_point(point(tmp_path, verify=host_after, inputs={"draw": "auto"}), "13.0")["instances"] == 1
    assert precompile.compile_point(point(tmp_path, verify=host_after, inputs={"draw": "host"}), "13.0")["instances"] == 1


def test_first_use_candidates_are_compiled(tmp_path, monkeypatch):
    """kernel=auto with tune=first_use: the tune_k first of the ranking (dispatch.top) besides the choice."""
    from gemmlab.gpu import backends
    seen = []
    monkeypatch.setattr(backends.NvrtcBackend, "compile",
                        lambda self, problem, facts, arch, out, enabled, folder, driver_version="none":
                        seen.append((self.role, self.name, dict(self.params), driver_version)))
    monkeypatch.setattr(device_check, "compile_kernels", lambda *a, **k: seen.append(("device check",)))
    cfg = {"kernel": {"name": "auto", "rank": "model", "tune": "first_use", "tune_k": 3}, "shape": [3, 5000, 3001],
           "mode": "run", "verify": {"after_timing": "host"}}
    r = precompile.compile_point(cfg, "13.0")
    assert "error" not in r, r
    kernel, *cands = seen
    assert kernel[0] == "kernel" and kernel[3] == "13.0" and 1 <= len(cands) <= 3
    assert all(c[0].startswith("candidate") and c[3] == "13.0" for c in cands)
    assert (kernel[1], kernel[2]) not in [(c[1], c[2]) for c in cands]  # the choice compiled once


def test_a_broken_point_is_one_line(tmp_path):
    r = precompile.compile_point({"kernel": {"name": "nope"}, "shape": SHAPE, "mode": "run"}, "13.0")
    assert r["instances"] == 0 and "\n" not in r["error"] and "nope" in r["error"]
    done = precompile.precompile([{"kernel": {"name": "nope"}, "shape": SHAPE}], "13.0", workers=0)
    assert done["errors"] == 1 and done["first_errors"] == [r["error"]]
    assert np.isfinite(done["seconds"])
