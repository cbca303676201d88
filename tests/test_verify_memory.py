"""Issue 11.7: full verification used ~80 bytes of host memory per output element (170 GB for an
accepted 46340 x 46340 x 1). It now works in blocks of rows: bounded memory, the same verdict;
the record reports the point's peak host memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from gemmlab.run.pipeline import run_point
from gemmlab.stages.verify import VerifyOptions, check

BLOCK = 4 << 20


def peak_of(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1024, 4)).astype(np.float32)
    b = rng.standard_normal((4, 1536)).astype(np.float32)
    c = (a @ b).astype(np.float32)
    c[700, 5] += 1.0  # one wrong element and one unwritten one
    c[1000, 1500] = np.nan
    return a, b, c


@pytest.mark.parametrize("options", [VerifyOptions(), VerifyOptions(tolerance="fixed"),
                                     VerifyOptions(method="sampled", sample=64)])
def test_blocks_bound_memory_and_keep_the_verdict(problem, options):
    a, b, c = problem
    elements = c.size
    whole, _ = peak_of(lambda: check(c, a, b, options, block_bytes=1 << 40))
    blocked, peak = peak_of(lambda: check(c, a, b, options, block_bytes=BLOCK))
    assert peak < BLOCK * 2 + 4 * elements, f"{peak / elements:.1f} bytes per output element"  # + a float64 row sample
    for key in ("passed", "mismatches", "nan_outputs", "rule", "first_mismatches"):
        assert getattr(blocked, key) == getattr(whole, key), key
    for key in ("max_abs_error", "max_rel_error", "max_error_over_tolerance"):
        assert getattr(blocked, key) == pytest.approx(getattr(whole, key), rel=1e-12), key
    assert not blocked.passed and blocked.nan_outputs == 1
    if options.method != "sampled":
        assert blocked.mismatches == 2 and blocked.first_mismatches[0][:2] == [700, 5]
        assert "in blocks of" in blocked.method


def test_unblocked_verification_used_much_more(problem):
    a, b, c = problem
    _, peak = peak_of(lambda: check(c, a, b, VerifyOptions(), block_bytes=1 << 40))
    assert peak > 40 * c.size  # what the blocks save (about 80 bytes per element in one piece)


def test_record_reports_peak_host_memory(tmp_path):
    rec = run_point({"kernel": {"name": "naive"}, "shape": [8, 8, 8], "mode": "compile"}, tmp_path / "p")
    hm = rec["host_memory"]
    assert hm["peak_bytes"] > 10 << 20 and "VmHWM" in hm["source"]
