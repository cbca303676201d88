"""Built-in kernel ``triton_tma_persistent`` (issue 46, item 2): a Hopper persistent matmul in Triton
whose A and B tiles arrive by TMA (``kernels/triton_tma_persistent.py``, function
``matmul_tma_persistent``).

bf16 and fp16 inputs, C float32, float32 accumulation on the tensor cores (wgmma: HGMMA in the
SASS, TMA loads: UTMALDG, both declared and checked after each compile); ``layout.a=row``,
``layout.b=col`` (the nn.Linear layout: B stored N x K) or ``row``.

- Grid: ``min(SMs, tiles)`` programs (:meth:`launch_grid`, from the device's SM count); each walks
  the BLOCK_M x BLOCK_N tiles of C in the GROUP_M-swizzled order.
- TMA descriptors are made on the device (``tl.make_tensor_descriptor``) into Triton's global
  scratch, which the core allocates once per point before timing (guard-banded, 256 B per program
  for the two descriptors in Triton 3.6 and 3.9) and hands to Triton's launcher at each launch
  (``gemmlab.gpu.backends.TritonBackend``): no host-side descriptor is encoded per launch, and the
  timed interval holds only the launch. Each program writes its descriptors once, before its
  tile loop (inside the kernel's time, as in any use of device-side descriptors).
- Shapes: TMA needs every row stride a multiple of 16 bytes, so K must be a multiple of 8 (A's rows;
  also B's with ``layout.b=col``) and, with ``layout.b=row``, N a multiple of 8 (B's rows); M is
  free. Other shapes are refused in one line naming ``shape`` (``triton_matmul`` takes any shape).
  Partial tiles need no masks on the loads (TMA fills the part of a box outside the matrix with
  zeros); C's stores are masked.

Optional: ``pip install 'gemmlab[triton]'`` (Triton >= 3.3 for ``tl.make_tensor_descriptor``; checked
with 3.6 and 3.9); without Triton the kernel is listed and a run of it is refused in one line.
"""

from __future__ import annotations

from gemmlab.contract.hookspecs import Dim, Matrix, ParamError, TritonKernelSpec, hookimpl
from gemmlab.contract.plugin_utils import cdiv
from gemmlab.contract.space import Choice, Restriction, Space

DEFAULTS = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "FLATTEN": 0, "num_warps": 8,
            "num_stages": 3}

#: the sm_90 opt-in shared memory per block (227 KiB), the budget of the space's restriction
SHARED_LIMIT = 232448


def shared_estimate(p) -> int:
    """Shared memory the compile needs, in bytes, as Triton 3.6 and 3.9 lay it out for this kernel:
    ``num_stages`` buffers of the A and B tiles (2-byte elements), and with ``FLATTEN=1`` a float32
    BLOCK_M x BLOCK_N staging buffer for the epilogue (measured: 128x256x64, 3 stages, 8 warps:
    147,480 B unflattened, 278,552 B flattened); plus barriers (< 1 KiB)."""
    ring = p["num_stages"] * (p["BLOCK_M"] + p["BLOCK_N"]) * p["BLOCK_K"] * 2
    return ring + (p["BLOCK_M"] * p["BLOCK_N"] * 4 if p["FLATTEN"] else 0) + 1024


SPACE = Space({"BLOCK_M": Choice((128, 64)), "BLOCK_N": Choice((256, 128, 64)), "BLOCK_K": Choice((64, 128)),
               "GROUP_M": Choice((8, 4, 16)), "FLATTEN": Choice((0, 1)), "num_warps": Choice((8, 4)),
               "num_stages": Choice((3, 4, 2, 5))},
              (Restriction("accumulators", lambda p: p["BLOCK_M"] * p["BLOCK_N"] <= 128 * 32 * p["num_warps"],
                           "at most 128 float32 accumulators per thread (BLOCK_M x BLOCK_N / (32 x num_warps)): "
                           "more spill", over=("BLOCK_M", "BLOCK_N", "num_warps")),
               Restriction("shared", lambda p: shared_estimate(p) <= SHARED_LIMIT,
                           "the A/B stages (and the flattened epilogue's float32 tile) fit 227 KiB of shared memory",
                           over=("BLOCK_M", "BLOCK_N", "BLOCK_K", "FLATTEN", "num_stages"))))


class TritonTmaPersistent(TritonKernelSpec):
    """A persistent Triton matmul fed by device-side TMA descriptors (module docstring)."""

    def launch_grid(self, problem, params, device):
        tiles = cdiv(problem.M, params["BLOCK_M"]) * cdiv(problem.N, params["BLOCK_N"])
        return (max(1, min(int(device.sm_count), tiles)),)

    def grid(self, problem, params):
        """One program per tile (what :meth:`launch_grid` caps at the SM count)."""
        return (cdiv(problem.M, params["BLOCK_M"]) * cdiv(problem.N, params["BLOCK_N"]),)

    def arguments(self, problem, params, device):
        return (Matrix("A"), Matrix("B"), Matrix("C"), Dim("M"), Dim("N"), Dim("K"), Dim("lda"), Dim("ldb"), Dim("ldc"))

    def constants(self, problem, params):
        return dict(super().constants(problem, params), B_COL=int(problem.layout_b == "col"))

    def check_problem(self, problem, params, device):
        K, N = problem.K, problem.N
        if K % 8:
            raise ParamError("shape", f"K={K}: this kernel's TMA descriptors need every row stride a multiple of 16 "
                                      f"bytes, so K a multiple of 8 for {problem.precision} (use triton_matmul for "
                                      "any K)")
        if problem.layout_b == "row" and N % 8:
            raise ParamError("shape", f"N={N}: with layout.b=row, B's rows are N elements; TMA needs N a multiple of "
                                      "8 (16-byte row stride; layout.b=col or triton_matmul take any N)")
        for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
            v = params[name]
            if v < 16 or v > 256 or v & (v - 1):
                raise ParamError(f"kernel.{name}", f"must be a power of two 16..256 (a TMA box side and a wgmma "
                                                   f"tile), got {v}")
        if params["FLATTEN"] not in (0, 1):
            raise ParamError("kernel.FLATTEN", f"must be one of 0, 1 (1: flatten the tile and K loops), got "
                                               f"{params['FLATTEN']}")
        if shared_estimate(params) > device.max_shared_per_block_optin:
            raise ParamError("kernel.num_stages", f"num_stages={params['num_stages']} x (BLOCK_M + BLOCK_N) x BLOCK_K "
                                                  f"bf16 tiles{' + the flattened epilogue tile' if params['FLATTEN'] else ''}"
                                                  f" need about {shared_estimate(params)} B of shared memory; the "
                                                  f"device allows {device.max_shared_per_block_optin} B")


@hookimpl
def gemmlab_kernels():
    return [TritonTmaPersistent(
        name="triton_tma_persistent", source="triton_tma_persistent.py", function="matmul_tma_persistent",
        defaults=dict(DEFAULTS), space=SPACE, param_values={"FLATTEN": (0, 1)}, precisions=("bf16", "fp16"),
        layouts=(("row", "col"), ("row", "row")), sass_classes=("HGMMA", "UTMALDG"),
        description="Triton persistent matmul, TMA loads by device-side descriptors (optional extra gemmlab[triton]): "
                    "grid = SMs, GROUP_M tile order, wgmma; bf16/fp16, layout.b col|row, K % 8 == 0")]
