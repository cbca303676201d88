"""The kernels whose shared pieces live in kernels/include/gemmlab/ (mma_sync.cuh: mma_tf32 and
mma_bf16; tiled.cuh: splitk and cluster_tiled; mma16.cuh: mma_bf16 and decode_bf16) compile to
the same SASS, instruction for instruction, as their sources did before the pieces moved there
(commit 1d5e85e; decode_bf16's digests recorded from its source before mma16.cuh; the wgmma template's
bf16/tf32 builds from its source before the fp16 entries, issue 41 item 3): the sha256 of
each instance's disassembly, addresses and encodings stripped, recorded in
tests/data/sass_digests.json together with the NVRTC version that produced it. Each kernel at its
defaults (16-byte cp.async path) and at a second tile set with unaligned strides (the element
path) and the other B layout; the mma kernels with padded shared rows (``SWIZZLE=0``,
their only layout then; the default is now 1). No GPU needed (mode=compile's NVRTC and nvdisasm).

SASS depends on the compiler: with another NVRTC version the digests say nothing and the test
skips with the reason. A deliberate change to one of these kernels or headers regenerates the
file: ``PYTHONPATH=. python tests/test_sass_unchanged.py --update`` (say why in the commit).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

DIGESTS = Path(__file__).resolve().parent / "data" / "sass_digests.json"
OTHER_MMA = {"BM": 64, "BN": 128, "WM": 32, "WN": 64, "STAGES": 3, "SWIZZLE": 0}
PADDED = {"SWIZZLE": 0}  # the mma kernels' shared layout when the digests were recorded (SWIZZLE=1 came later)
OTHER_TILED = {"BM": 32, "BN": 64, "BK": 8, "TM": 4, "TN": 4}
CASES = {  # tag: (kernel, parameters over the defaults, precision, layout of B, shape[, layout of A: row])
    "mma_tf32-padded": ("mma_tf32", PADDED, "tf32", "row", (256, 256, 256)),
    "mma_tf32-other": ("mma_tf32", dict(OTHER_MMA, BK=16), "tf32", "col", (63, 65, 33)),
    "mma_bf16-padded": ("mma_bf16", PADDED, "bf16", "row", (256, 256, 256)),
    "mma_bf16-other-fp16": ("mma_bf16", dict(OTHER_MMA, BK=64), "fp16", "col", (63, 65, 33)),
    "splitk-defaults": ("splitk", {}, "fp32", "row", (256, 256, 256)),
    "splitk-other": ("splitk", dict(OTHER_TILED, SPLITS=3), "fp32", "row", (63, 65, 33)),
    "cluster_tiled-defaults": ("cluster_tiled", {}, "fp32", "row", (256, 256, 256)),
    "cluster_tiled-other": ("cluster_tiled", OTHER_TILED, "fp32", "row", (63, 65, 33)),
    "decode_bf16-defaults": ("decode_bf16", {}, "bf16", "row", (16, 4096, 4096)),
    "decode_bf16-fp16-col": ("decode_bf16", {"MT": 4, "KW": 8, "U": 1, "SPLITS": 2}, "fp16", "col", (64, 4096, 4096)),
    # issue 43 item 3: the plain builds of the kernels that gained the fused epilogue (recorded from
    # their sources before it): sgemm_pipelined at its defaults (the lean guarded copy), with the full
    # guarded copy (MINB=2), with a column-major A; gemv_rows and gemv_cols at their defaults
    "sgemm_pipelined-defaults": ("sgemm_pipelined", {}, "fp32", "row", (256, 256, 256)),
    "sgemm_pipelined-minb2": ("sgemm_pipelined", {"MINB": 2}, "fp32", "row", (63, 65, 33)),
    "sgemm_pipelined-acol": ("sgemm_pipelined", {}, "fp32", "row", (256, 256, 256), "col"),
    "gemv_rows-defaults": ("gemv_rows", {}, "fp32", "row", (1, 4096, 4096)),
    "gemv_cols-defaults": ("gemv_cols", {}, "fp32", "col", (1, 4096, 4096)),
    # issue 41 item 3: the bf16 and tf32 builds of the wgmma template, recorded from its source before
    # wgmma_bf16 served fp16 (the fp16 entries and F16 were added beside them): the default (EPI=7's
    # TMA-store entry), both transpose bits with the k-aligned tail in a cluster, split K into workspace
    # slabs with the reduce step, and wgmma_tf32's default
    "wgmma_bf16-defaults": ("wgmma_bf16", {}, "bf16", "col", (4096, 4096, 4096)),
    "wgmma_bf16-colrow": ("wgmma_bf16", {}, "bf16", "row", (4096, 4096, 4096), "col"),
    "wgmma_bf16-reduce2": ("wgmma_bf16", {"BM": 64, "BN": 128, "SCHED": 2, "STAGES": 6, "SPLIT_K": 8, "REDUCE": 2},
                           "bf16", "col", (256, 512, 8192)),
    "wgmma_tf32-defaults": ("wgmma_tf32", {}, "tf32", "col", (4096, 4096, 4096)),
}


def normalized_sass(text: str) -> str:
    """nvdisasm's text without instruction addresses (``/*0a10*/``) and encodings, blank lines
    dropped: two compiles with the same instructions in the same order give the same text."""
    lines = []
    for line in text.splitlines():
        line = re.sub(r"/\*[0-9a-f]{4,}\*/", "", line)
        line = re.sub(r"/\* 0x[0-9a-f]+ \*/", "", line).rstrip()
        if line.strip():
            lines.append(line)
    return "\n".join(lines) + "\n"


def digest(tag: str) -> tuple[str, str]:
    """``(sha256 of the normalized SASS, NVRTC version)`` of case ``tag``, compiled for sm_90 the
    way mode=compile does (the plugin's instance, options and launch-plan kernels)."""
    from gemmlab.gpu import compile as compile_stage
    from gemmlab.gpu.device import offline_facts
    from gemmlab.contract.hookspecs import Extra, Problem, Shape
    from gemmlab.contract.registry import load_registry, source_path
    kernel, over, precision, layout_b, shape, *layout_a = CASES[tag]
    spec = load_registry(()).get(kernel)
    params = {**spec.defaults, **over}
    problem, facts = Problem(Shape(*shape), precision, (layout_a or ["row"])[0], layout_b), offline_facts("90")
    spec.check_problem(problem, params, facts)
    options = compile_stage.CompileOptions.for_kernel("90", spec.options(problem, params, facts))
    extra = tuple(s.entry for s in spec.plan(problem, params, facts) if isinstance(s, Extra))
    # the session's disk cache (tests/conftest.py): a kernel another test compiled is read back
    # with its stored SASS, keyed by the source, its includes, the options and the NVRTC version
    compiled = compile_stage.compile_kernel(source_path(spec), spec.instance(problem, params), options,
                                            persistent=True, extra_names=extra)
    assert compiled.sass_text, compiled.sass.get("error")
    return hashlib.sha256(normalized_sass(compiled.sass_text).encode()).hexdigest(), compiled.nvrtc_version


@pytest.fixture(scope="module")
def recorded() -> dict:
    data = json.loads(DIGESTS.read_text())
    from gemmlab.gpu.compile import nvrtc_version
    if nvrtc_version() != data["nvrtc_version"]:
        pytest.skip(f"the digests are NVRTC {data['nvrtc_version']}'s; this is NVRTC {nvrtc_version()} "
                    "(SASS depends on the compiler)")
    return data["cases"]


@pytest.mark.parametrize("tag", sorted(CASES))
def test_sass_unchanged(tag, recorded):
    got, _ = digest(tag)
    assert got == recorded[tag], (f"{tag}: the SASS differs from the recorded one; a deliberate change "
                                  "regenerates tests/data/sass_digests.json (see the module docstring)")


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    results = {tag: digest(tag) for tag in sorted(CASES)}
    versions = {v for _, v in results.values()}
    DIGESTS.write_text(json.dumps({"nvrtc_version": versions.pop(), "cases": {t: d for t, (d, _) in results.items()},
                                   "note": "tests/test_sass_unchanged.py"}, indent=1) + "\n")
    print(f"wrote {DIGESTS}")
