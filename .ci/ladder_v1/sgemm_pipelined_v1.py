"""``sgemm_pipelined_v1``: sgemm_pipelined as it was before issue 8's second pass (commit 678850d;
kernels/sgemm_pipelined.cu there, renamed), kept only so the GPU script can time the old and the
new code in one process. A drop-in plugin folder: ``plugin_dirs=[.ci/ladder_v1]``."""

from __future__ import annotations

from pathlib import Path

from gemmlab.contract.hookspecs import hookimpl
from gemmlab_plugins.sgemm import PipelinedKernel  # the built-in package, imported before plugin folders


class PipelinedV1(PipelinedKernel):
    """Same parameters, rules and ownership model as sgemm_pipelined; only the entry differs."""

    def entry(self, params) -> str:
        return super().entry(params).replace("gemm_sgemm_pipelined<", "gemm_sgemm_pipelined_v1<", 1)


@hookimpl
def gemmlab_kernels():
    return [PipelinedV1(name="sgemm_pipelined_v1", source=str(Path(__file__).with_name("sgemm_pipelined_v1.cu")),
                        defaults={"BM": 128, "BN": 256, "BK": 16, "WM": 64, "WN": 64, "TM": 16, "TN": 8,
                                  "STAGES": 4, "GS": 8, "MINB": 1},
                        description="sgemm_pipelined before the lean-addressing pass (comparison only)")]
