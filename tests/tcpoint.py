"""One point of a tensor-core rung through gemmlab's own pipeline, for the GPU tests of the wgmma
and relayout paths (tests/test_gpu_wgmma.py, tests/test_gpu_relayout.py): the config they share,
the run, and the checks every passing point must meet."""

from __future__ import annotations

from gemmlab.run.pipeline import run_point

#: Short event timing: these tests verify; they do not measure speed.
FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events"}


def run(tmp_path, kernel, precision, layout_b, shape, params=None, **over):
    """``run_point`` of ``kernel`` (params over its defaults) at ``shape`` with A row-major and B
    ``layout_b``; returns the record (a dict)."""
    cfg = {"kernel": {"name": kernel, **(params or {})}, "shape": list(shape), "precision": precision,
           "layout": {"a": "row", "b": layout_b}, "timing": dict(FAST), **over}
    return run_point(cfg, tmp_path / "run")


def ok(rec):
    """Assert the record passed: status ok, verified, no NaN output, guard bands intact, inputs
    unchanged, bitwise repeatable; returns it."""
    assert rec["status"] == "ok", rec.get("error")
    assert rec["verification"]["passed"] and rec["verification"]["nan_outputs"] == 0
    assert rec["guard_bands"] == "intact" and rec["inputs_unchanged"] and rec["repeat_stable"]
    return rec
