"""Test-only drop-in plugin: the built-in tiled kernel with one deliberate bug each.

Each variant is generated from kernels/tiled.cu by one textual edit, so it differs from the real
kernel in exactly that bug. Used by tests/test_broken_variants.py and .ci/evidence.py to prove
that gemmlab's safety nets catch real kernel bugs. Never registered unless this folder is named
in ``plugin_dirs``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from gemmlab.contract.hookspecs import hookimpl
from gemmlab.paths import KERNELS_DIR

EDITS = {
    # the barrier after the inner product: the next chunk's loads may overwrite tiles still being read
    "tiled_no_second_barrier": ("    __syncthreads();  // No producer overwrites a tile while another warp reads it.\n", ""),
    # final stores unmasked: partial blocks write outside C (or into the next row)
    "tiled_no_store_mask": ("if (row < m && col < n) c[", "c["),
    # partial tiles not zero-padded: loads read past the rows/columns of A and B
    "tiled_no_zero_pad_a": ("row_base + row < m && reduction_base + inner < k", "true"),
    # the last reduction chunk is skipped
    "tiled_drop_last_chunk": ("reduction_base < k; reduction_base += BK", "reduction_base < k - BK; reduction_base += BK"),
}


def variant_source(name: str) -> Path:
    """Write the variant's source to a temporary folder and return its path."""
    old, new = EDITS[name]
    text = (KERNELS_DIR / "tiled.cu").read_text()
    # the first match is in gemm_tiled, the plain kernel the variants build; the fused-epilogue kernel
    # below it (gemm_tiled_epi, compiled only under GEMMLAB_TILED_EPI) repeats some of these lines
    plain = text.split("GEMMLAB_TILED_EPI", 1)[0]
    assert plain.count(old) == 1, f"edit for {name} no longer matches gemm_tiled in kernels/tiled.cu"
    folder = Path(tempfile.gettempdir()) / "gemmlab-broken-variants"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.cu"
    path.write_text(text.replace(old, new, 1))
    return path


@hookimpl
def gemmlab_kernels():
    import importlib
    tiled = importlib.import_module("gemmlab_plugins.tiled")
    seed = {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2}
    return [tiled.TiledKernel(name=name, source=str(variant_source(name)), defaults=dict(seed),
                              description=f"BROKEN on purpose: {name}") for name in EDITS]
