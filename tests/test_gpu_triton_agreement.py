"""The protocol agreement of issue 46 item 4 on the GPU: for one Triton kernel and shape
(triton_matmul, bf16, B column-major, 4096^3), gemmlab's graph-timed median (warm L2) and
``triton.testing.do_bench_cudagraph``'s on gemmlab's compile of the same kernel agree within 2%
(:data:`gemmlab.run.triton_agreement.TOLERANCE`): a check that the two timers measure the same
thing, not a speed target. Skipped with the reason without a GPU, Triton or PyTorch (Triton's
timers need torch)."""

from __future__ import annotations

import importlib.util

import pytest

from gemmlab.gpu.triton_compile import unavailable
from gemmlab.run.triton_agreement import TOLERANCE, agreement

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(unavailable() is not None, reason=f"Triton not importable: {unavailable()}"),
              pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="PyTorch not installed: triton.testing.do_bench_cudagraph needs torch")]


def test_graph_median_agrees_with_do_bench_cudagraph(tmp_path):
    summary, records = agreement("triton_matmul", "bf16", "col", (4096, 4096, 4096), tmp_path, cold=False)
    assert "error" not in summary, summary["error"]
    assert records["graph"]["verification"]["passed"] and summary["check"]["max_error_over_abs_product"] < 1e-2
    assert summary["gemmlab_graph_ms"] > 0 and summary["do_bench_cudagraph_ms"] > 0
    assert abs(summary["ratio_graph"] - 1) <= TOLERANCE, (
        f"gemmlab graph {summary['gemmlab_graph_ms']:.4f} ms vs do_bench_cudagraph "
        f"{summary['do_bench_cudagraph_ms']:.4f} ms: ratio {summary['ratio_graph']:.4f}")
