"""Roofline fields for one timed GEMM: useful FLOPs, the minimum DRAM traffic, arithmetic
intensity, and the fractions of the FP32 peak and of DRAM bandwidth achieved.

Model (Williams, Waterman, Patterson, "Roofline", CACM 52(4), 2009): minimum bytes = A and B read
once and C written once, 4·(M·K + K·N + M·N) for float32 (2-byte A and B for bf16/fp16:
2·(M·K + K·N) + 4·M·N). FP32 peak = SMs × 128 FP32 lanes × 2
FLOP (FMA) × SM clock — the SM clock read through NVML during the run (Hopper has 128 FP32 lanes
per SM: CUDA C++ Programming Guide, arithmetic instruction throughput, compute capability 9.0).
DRAM peak = 2 (double data rate) × memory clock × bus width / 8,
from the device attributes.
"""

from __future__ import annotations

FP32_LANES_PER_SM = {"90": 128, "89": 128, "86": 128, "80": 64, "75": 64, "70": 64}


def roofline(M: int, N: int, K: int, median_ms: float, sm_count: int, arch: str, sm_mhz: float | None,
             dram_bytes_per_s: float | None, ab_bytes: int = 4, precision: str = "fp32") -> dict:
    """Return the roofline fields (FLOPs, bytes, FLOP/byte, GFLOP/s, % of peaks; None when unknown).

    ``ab_bytes``: bytes per element of A and B (C is float32). For a tensor-core ``precision``
    (tf32, bf16, fp16) the FP32 peak is the CUDA-core peak, not the ceiling: ``note`` says so.
    """
    flops = 2 * M * N * K
    min_bytes = ab_bytes * (M * K + K * N) + 4 * M * N
    seconds = median_ms * 1e-3
    lanes = FP32_LANES_PER_SM.get(arch)
    peak = sm_count * lanes * 2 * sm_mhz * 1e6 if (lanes and sm_mhz) else None
    achieved = flops / seconds
    bandwidth = min_bytes / seconds
    return {"flops": flops, "min_bytes": min_bytes, "arithmetic_intensity": round(flops / min_bytes, 3),
            "gflops": achieved / 1e9, "fp32_peak_gflops": peak / 1e9 if peak else None,
            "pct_fp32_peak": round(100 * achieved / peak, 2) if peak else None,
            "sm_mhz_used": sm_mhz, "min_bytes_per_s": bandwidth,
            "dram_peak_bytes_per_s": dram_bytes_per_s,
            "pct_dram_bandwidth": round(100 * bandwidth / dram_bytes_per_s, 2) if dram_bytes_per_s else None,
            **({"note": f"precision {precision} runs on tensor cores: pct_fp32_peak compares with the "
                        "CUDA-core FP32 peak, which is not its ceiling"} if precision != "fp32" else {})}
