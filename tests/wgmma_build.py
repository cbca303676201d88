"""A wgmma fused-epilogue instance compiled and checked the same way by the compile tests of
tests/test_epilogue_wgmma.py and tests/test_epilogue_wgmma_batched.py (not a test module: NVRTC, no GPU)."""

from __future__ import annotations

import re

import pytest

from gemmlab.contract.registry import load_registry
from gemmlab.gpu.device import offline_facts

REGISTRY = load_registry([])
FACTS = offline_facts("90")


def compile_clean(kernel: str, problem, over: dict, tma: bool, entry: str):
    """Compile ``kernel``'s instance for ``problem`` with its defaults plus ``over`` (sm_90a, NVRTC) and
    assert what every fused build must show: the plugin accepts it, takes the TMA store exactly when
    ``tma``, no spills and no local memory (ptxas and the SASS: no LDL/STL), the ``entry`` function,
    HGMMA present and none serialized. Skips where NVRTC gives no ptxas report or nvdisasm no listing.
    Returns ``(spec, params, compiled)`` for the caller's own checks."""
    from gemmlab.gpu import compile as compile_stage
    spec = REGISTRY.get(kernel)
    params = {**spec.defaults, **over}
    spec.check_problem(problem, params, FACTS)
    assert spec.tma_store(problem, params) == tma
    options = compile_stage.CompileOptions.for_kernel("90", spec.options(problem, params, FACTS))
    compiled = compile_stage.compile_kernel(REGISTRY.source_path(spec), spec.instance(problem, params), options,
                                            persistent=True)
    if compiled.resources is None:
        pytest.skip(f"NVRTC {compiled.nvrtc_version} returned no ptxas report")
    r = compiled.resources
    assert (r.spill_store_bytes, r.spill_load_bytes, r.stack_frame_bytes) == (0, 0, 0), r
    if not compiled.sass_text:
        pytest.skip("no SASS listing (nvdisasm)")
    assert entry in compiled.sass_text and re.search(r"\bHGMMA\.", compiled.sass_text)
    assert compiled.sass["wgmma"]["serialized"] == 0, compiled.sass["wgmma"]
    assert not re.search(r"\b(LDL|STL)\b", compiled.sass_text)
    return spec, params, compiled
