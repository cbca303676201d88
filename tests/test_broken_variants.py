"""The safety nets catch real kernel bugs (marker ``gpu``; run on the H200).

Each variant is the tiled kernel with one bug (tests/broken/broken_tiled.py); each is run on a
shape where the bug matters, and must be caught by some net (NaN fill + verification, guard
bands, or compute-sanitizer's racecheck).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.run.pipeline import run_point

pytestmark = pytest.mark.gpu
BROKEN_DIR = str(Path(__file__).with_name("broken"))

CASES = [
    # (variant, shape, sanitizer, statuses that count as caught)
    ("tiled_no_second_barrier", (64, 64, 512), "racecheck", {"sanitizer_errors", "wrong_result", "unstable"}),
    ("tiled_no_store_mask", (63, 65, 33), None, {"out_of_bounds", "wrong_result"}),
    ("tiled_no_zero_pad_a", (31, 33, 17), None, {"wrong_result", "out_of_bounds"}),
    ("tiled_drop_last_chunk", (63, 65, 33), None, {"wrong_result"}),
]


@pytest.mark.parametrize("variant,shape,sanitizer,caught", CASES, ids=[c[0] for c in CASES])
def test_broken_variant_is_caught(variant, shape, sanitizer, caught, tmp_path):
    cfg = {"kernel": {"name": variant}, "shape": list(shape), "plugin_dirs": [BROKEN_DIR], "sanitizer": sanitizer,
           "timing": {"warmup": 1, "repeat": 3, "batch": 2}}
    rec = run_point(cfg, tmp_path)
    assert rec["status"] in caught, (rec["status"], rec.get("error"))
    assert rec["valid"] is False


def test_the_unbroken_kernel_passes_the_same_racecheck(tmp_path):
    cfg = {"kernel": {"name": "tiled"}, "shape": [64, 64, 512], "sanitizer": "racecheck",
           "timing": {"warmup": 1, "repeat": 3, "batch": 2}}
    rec = run_point(cfg, tmp_path)
    assert rec["status"] == "ok", rec.get("error")
    assert rec["sanitizer"]["verdict"] == "clean"
