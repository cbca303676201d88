"""Roofline fields for one timed GEMM: useful FLOPs, the minimum memory traffic, arithmetic
intensity, the fraction of the peak of the units the precision runs on, the memory floor, and the
plausibility gate that refuses a figure no hardware can produce.

Model (Williams, Waterman, Patterson, "Roofline", CACM 52(4), 2009): minimum bytes = A and B read
once and C written once, ``ab_bytes``·(M·K + K·N) + 4·M·N (4-byte A and B for fp32/tf32, 2-byte for
bf16/fp16; C float32).

Peaks: SMs × dense FLOP per clock per SM of the precision's units × SM clock (read through NVML
during the run). Per-SM rates (:data:`FLOP_PER_CLK_PER_SM`): sm_90 (H100/H200) FP32 CUDA cores
256 (128 lanes × FMA), TF32 tensor cores 2048, BF16/FP16 4096, FP8 8192 — NVIDIA H100 Tensor Core
GPU Architecture whitepaper (989.4 dense BF16 TFLOP/s = 132 SMs × 4096 × 1.83 GHz); sm_80 (A100
whitepaper: 19.5 FP32, 156 TF32, 312 BF16 TFLOP/s at 108 SMs × 1.41 GHz) FP32 128, TF32 1024,
BF16/FP16 2048; other architectures: FP32 from the lane count (CUDA C++ Programming Guide,
arithmetic instruction throughput), tensor rates unknown (None). DRAM peak = 2 (double data
rate) × memory clock × bus width / 8, from the device attributes.

Memory floor (:func:`memory_floor`): the fewest seconds the bytes that must move can take. With
``l2=cold`` (L2 flushed, inputs not in it) A and B come from DRAM: ``ab_bytes``·(MK + KN) / DRAM
peak (C may stay in L2, dirty, past the interval, so it is not counted). With a warm L2 and a
working set that fits in L2, every byte still crosses the SMs' L2 ports, at most
:data:`L2_BYTES_PER_CLK_PER_SM` (128: one L1 line per clock per SM, an upper bound on the
L2-to-SM path) × SMs × clock. A warm working set larger than L2: at least its excess over L2 comes
from DRAM.

Plausibility gate (:func:`plausibility`): a median time under the compute floor (FLOPs / the
precision's peak at the highest SM clock seen during the samples, or the device's maximum clock
when none was read) or under the memory floor, each with :data:`MARGIN` (5%) for clock reading and
attribute rounding, cannot be a measurement of the work: the point is refused as ``implausible``.
"""

from __future__ import annotations

from types import MappingProxyType

FP32_LANES_PER_SM = {"90": 128, "89": 128, "86": 128, "80": 64, "75": 64, "70": 64}
#: dense FLOP per clock per SM of the units each precision runs on, per architecture (see above)
FLOP_PER_CLK_PER_SM = MappingProxyType({
    "90": MappingProxyType({"fp32": 256, "tf32": 2048, "bf16": 4096, "fp16": 4096, "fp8": 8192}),
    "80": MappingProxyType({"fp32": 128, "tf32": 1024, "bf16": 2048, "fp16": 2048}),
})
#: which units a precision runs on, for the record
UNITS = MappingProxyType({"fp32": "FP32 CUDA cores", "tf32": "TF32 tensor cores (dense)",
                          "bf16": "BF16 tensor cores (dense)", "fp16": "FP16 tensor cores (dense)",
                          "fp8": "FP8 tensor cores (dense)"})
#: bytes per clock per SM that can cross from L2 into an SM (an upper bound: one 128-byte line)
L2_BYTES_PER_CLK_PER_SM = 128
#: the plausibility gate's margin over each floor (clock reading error, attribute rounding)
MARGIN = 0.05


def flop_per_clk_per_sm(arch: str, precision: str) -> int | None:
    """Dense FLOP per clock per SM of ``precision``'s units on ``arch`` (e.g. "90"); None when unknown."""
    table = FLOP_PER_CLK_PER_SM.get(str(arch))
    if table and precision in table:
        return table[precision]
    if precision == "fp32" and str(arch) in FP32_LANES_PER_SM:
        return 2 * FP32_LANES_PER_SM[str(arch)]
    return None


def peak_flops(arch: str, precision: str, sm_count: int, sm_mhz: float | None) -> float | None:
    """FLOP/s of ``precision``'s units: SMs × rate × clock; None when the rate or clock is unknown."""
    rate = flop_per_clk_per_sm(arch, precision)
    return sm_count * rate * sm_mhz * 1e6 if (rate and sm_mhz) else None


def memory_floor(M: int, N: int, K: int, ab_bytes: int, l2: str, l2_bytes: int, sm_count: int,
                 sm_mhz: float | None, dram_bytes_per_s: float | None,
                 traffic: tuple[int, int, int] | None = None) -> dict:
    """The memory floor of one GEMM launch (module docstring): ``{"seconds", "bytes", "level",
    "bytes_per_s"}``; ``seconds`` is None when the bandwidth it needs is unknown.

    Args:
        ab_bytes: bytes per element of A and B (C is float32). l2: ``warm`` | ``cold``.
        l2_bytes: the device's L2 size (0: unknown, taken as no L2).
        traffic: a grouped GEMM's (flops, elements of A and B, elements of C)
            (:attr:`gemmlab.contract.hookspecs.Problem.traffic`) in place of M, N, K's.
    """
    ab_elements, c_elements = (traffic[1], traffic[2]) if traffic else (M * K + K * N, M * N)
    ab = ab_bytes * ab_elements
    total = ab + 4 * c_elements
    if l2 == "cold":
        level, nbytes, bandwidth = "DRAM (L2 flushed: A and B read from DRAM)", ab, dram_bytes_per_s
    elif l2_bytes and total <= l2_bytes:
        level, nbytes = "L2 (warm working set fits in L2)", total
        bandwidth = sm_count * L2_BYTES_PER_CLK_PER_SM * sm_mhz * 1e6 if sm_mhz else None
    else:
        level, nbytes, bandwidth = "DRAM (warm working set larger than L2: its excess)", max(0, total - l2_bytes), dram_bytes_per_s
    seconds = nbytes / bandwidth if bandwidth else None
    return {"seconds": seconds, "bytes": nbytes, "level": level, "bytes_per_s": bandwidth}


def roofline(M: int, N: int, K: int, median_ms: float, sm_count: int, arch: str, sm_mhz: float | None,
             dram_bytes_per_s: float | None, ab_bytes: int = 4, precision: str = "fp32", l2: str = "warm",
             l2_bytes: int = 0, traffic: tuple[int, int, int] | None = None) -> dict:
    """Return the roofline fields (FLOPs, bytes, FLOP/byte, GFLOP/s, % of the precision's peak and
    of DRAM bandwidth, the memory floor; None where unknown).

    ``ab_bytes``: bytes per element of A and B (C is float32). ``fp32_peak_gflops`` and
    ``pct_fp32_peak`` stay (the CUDA-core peak, for every precision); ``peak_gflops`` and
    ``pct_peak`` are of ``precision``'s own units (``units`` names them). ``traffic``: a grouped
    GEMM's (flops, elements of A and B, elements of C) in place of M, N, K's (:func:`memory_floor`).
    """
    flops = traffic[0] if traffic else 2 * M * N * K
    min_bytes = (ab_bytes * traffic[1] + 4 * traffic[2]) if traffic else ab_bytes * (M * K + K * N) + 4 * M * N
    seconds = median_ms * 1e-3
    fp32_peak = peak_flops(arch, "fp32", sm_count, sm_mhz)
    peak = peak_flops(arch, precision, sm_count, sm_mhz)
    achieved = flops / seconds
    bandwidth = min_bytes / seconds
    floor = memory_floor(M, N, K, ab_bytes, l2, l2_bytes, sm_count, sm_mhz, dram_bytes_per_s, traffic)
    return {"flops": flops, "min_bytes": min_bytes, "arithmetic_intensity": round(flops / min_bytes, 3) if min_bytes else None,
            "gflops": achieved / 1e9, "fp32_peak_gflops": fp32_peak / 1e9 if fp32_peak else None,
            "pct_fp32_peak": round(100 * achieved / fp32_peak, 2) if fp32_peak else None,
            "units": UNITS.get(precision, precision), "peak_gflops": peak / 1e9 if peak else None,
            "pct_peak": round(100 * achieved / peak, 2) if peak else None,
            "sm_mhz_used": sm_mhz, "min_bytes_per_s": bandwidth,
            "dram_peak_bytes_per_s": dram_bytes_per_s,
            "pct_dram_bandwidth": round(100 * bandwidth / dram_bytes_per_s, 2) if dram_bytes_per_s else None,
            "memory_floor_ms": floor["seconds"] * 1e3 if floor["seconds"] is not None else None,
            "memory_floor_level": floor["level"],
            "pct_memory_floor": round(100 * floor["seconds"] / seconds, 2) if floor["seconds"] else None}


def plausibility(M: int, N: int, K: int, median_ms: float, sm_count: int, arch: str, sm_mhz_max: float | None,
                 dram_bytes_per_s: float | None, ab_bytes: int, precision: str, l2: str, l2_bytes: int,
                 traffic: tuple[int, int, int] | None = None) -> dict:
    """The plausibility gate for one timed median (module docstring).

    Args:
        sm_mhz_max: the highest SM clock read during the samples (else the device's maximum).
        traffic: a grouped GEMM's (flops, elements of A and B, elements of C) in place of M, N, K's.

    Returns:
        ``{"passed", "compute_floor_ms", "memory_floor_ms", "margin", "clock_mhz", "reason"}``:
        ``reason`` is one line naming the floor broken and the figure (None when it passed); a
        floor that cannot be computed (unknown rate or clock) is None and not applied.
    """
    flops = traffic[0] if traffic else 2 * M * N * K
    peak = peak_flops(arch, precision, sm_count, sm_mhz_max)
    compute = flops / peak if peak else None
    floor = memory_floor(M, N, K, ab_bytes, l2, l2_bytes, sm_count, sm_mhz_max, dram_bytes_per_s, traffic)
    seconds = median_ms * 1e-3
    out = {"passed": True, "compute_floor_ms": compute * 1e3 if compute else None,
           "memory_floor_ms": floor["seconds"] * 1e3 if floor["seconds"] is not None else None,
           "memory_floor_level": floor["level"], "margin": MARGIN, "clock_mhz": sm_mhz_max, "reason": None}
    tflops = flops / seconds / 1e12 if seconds > 0 else float("inf")
    if compute is not None and seconds * (1 + MARGIN) < compute:
        out.update(passed=False, reason=(
            f"{median_ms:.4g} ms = {tflops:.4g} TFLOP/s at {M}x{N}x{K} {precision} is above the "
            f"{UNITS.get(precision, precision)} peak {peak / 1e12:.4g} TFLOP/s ({sm_count} SMs x "
            f"{flop_per_clk_per_sm(arch, precision)} FLOP/clk x {sm_mhz_max:.0f} MHz) by more than {MARGIN:.0%}"))
    elif floor["seconds"] is not None and floor["seconds"] > 0 and seconds * (1 + MARGIN) < floor["seconds"]:
        out.update(passed=False, reason=(
            f"{median_ms:.4g} ms at {M}x{N}x{K} {precision} moves {floor['bytes']} B at "
            f"{floor['bytes'] / seconds / 1e12:.4g} TB/s, above the {floor['level']} bandwidth "
            f"{floor['bytes_per_s'] / 1e12:.4g} TB/s by more than {MARGIN:.0%}"))
    return out
