"""layout.a=col on the fast kernels (issue 43 item 1): which declare it and which refuse it. The
kernels that read a column-major A (wgmma_bf16 natively with wgmma's transpose bit, wgmma_tf32
through a transposed copy, sgemm_pipelined through its acol entry) are tested with their own
(tests/test_wgmma.py, tests/test_relayout.py, tests/test_ladder.py); the decode kernels
(decode_bf16, gemv_rows, gemv_cols) read A in 16-byte pieces along K and do not declare it: the core
refuses the point in one line naming layout.a before anything compiles."""

from __future__ import annotations

import pytest

from gemmlab.contract.registry import load_registry
from gemmlab.run.pipeline import run_point

REGISTRY = load_registry(entry_points=False)


def test_the_fast_kernels_declare_a_column_major_a():
    for name, pairs in (("wgmma_bf16", {("col", "col"), ("col", "row")}), ("wgmma_tf32", {("col", "col"), ("col", "row")}),
                        ("sgemm_pipelined", {("col", "row")})):
        assert pairs <= set(REGISTRY.get(name).layouts), name


@pytest.mark.parametrize("kernel, precision, layout_b", [("decode_bf16", "bf16", "col"), ("decode_bf16", "fp16", "row"),
                                                         ("gemv_rows", "fp32", "row"), ("gemv_cols", "tf32", "col")])
def test_decode_kernels_refuse_a_column_major_a_in_one_line(tmp_path, kernel, precision, layout_b):
    rec = run_point({"kernel": {"name": kernel}, "shape": [8, 4096, 4096], "mode": "compile", "precision": precision,
                     "layout": {"a": "col", "b": layout_b}}, tmp_path / "run")
    assert rec["status"] == "invalid" and not rec.get("compile"), rec.get("status")  # refused before compiling
    error = rec["error"]
    assert error.startswith("layout.a: ") and f"kernel {kernel} supports" in error and "\n" not in error, error
