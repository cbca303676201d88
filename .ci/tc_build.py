"""Standalone NVRTC build + SASS histogram for the tensor-core proof kernels (no gemmlab core needed).

Used locally (compile-only) and by .ci/tc_evidence.py on the GPU machine.
    python .ci/tc_build.py            # compile every default instance, print registers/spills/SASS classes
"""
from __future__ import annotations

import collections
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"


def include_paths() -> list[str]:
    from cuda import pathfinder
    paths = [str(KERNELS), str(KERNELS / "include")]
    for lib in ("cccl", "cudart"):
        try:
            found = pathfinder.find_nvidia_header_directory(lib)
        except Exception:
            found = None
        if found:
            paths.append(str(found))
    return paths


def compile_instance(source: str, name: str, arch: str = "90", max_registers=None):
    """Compile kernels/<source> instance `name` to a cubin; returns (ObjectCode, log, resources dict)."""
    from cuda.core import Program, ProgramOptions
    text = (KERNELS / source).read_text()
    opts = ProgramOptions(name=source, arch=f"sm_{arch}", std="c++17", include_path=include_paths(),
                          device_as_default_execution_space=True, ptxas_options=["-v"],
                          max_register_count=max_registers)
    log = io.StringIO()
    code = Program(text, "c++", opts).compile("cubin", name_expressions=(name,), logs=log)
    lowered = code.symbol_mapping.get(name, name)
    lowered = lowered.decode() if isinstance(lowered, bytes) else lowered
    res = parse(log.getvalue(), lowered)
    return code, log.getvalue(), lowered, res


def parse(log: str, lowered: str) -> dict:
    text = log.replace("\x00", "")
    start = text.find(f"Compiling entry function '{lowered}'")
    if start < 0:
        return {}
    block = text[start:]
    nxt = block.find("Compiling entry function", 10)
    block = block if nxt < 0 else block[:nxt]
    def grab(p):
        m = re.search(p, block)
        return int(m.group(1)) if m else 0
    return {"registers": grab(r"Used (\d+) registers"), "spill_stores": grab(r"(\d+) bytes spill stores"),
            "spill_loads": grab(r"(\d+) bytes spill loads"), "stack": grab(r"(\d+) bytes stack frame"),
            "smem": grab(r"(\d+) bytes smem")}


def nvdisasm_path() -> str | None:
    for cand in (shutil.which("nvdisasm"), "/usr/local/cuda/bin/nvdisasm"):
        if cand and os.path.exists(cand):
            return cand
    import site
    for sp in site.getsitepackages() + [str(Path(sys.prefix) / "lib")]:
        for p in Path(sp).glob("nvidia/cu13/bin/nvdisasm"):
            return str(p)
    return None


def sass(code) -> tuple[str, dict]:
    """Disassemble the cubin; returns (text, {opcode-class: count})."""
    tool = nvdisasm_path()
    if tool is None:
        return "", {"error": "no nvdisasm"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(bytes(code.code))
        out = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True).stdout
    hist = collections.Counter()
    for line in out.splitlines():
        if "@!PT" in line:  # never-executed padding (e.g. @!PT LDS RZ, [RZ])
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]+)?", line)
        if m:
            hist[m.group(1)] += 1
    return out, dict(sorted(hist.items()))


INSTANCES = [
    ("tma_bf16.cu", "gemm_tma_wgmma<128, 4>", "90a"),
    ("tma_bf16.cu", "gemm_tma_wgmma<64, 4>", "90a"),
    ("splitk.cu", "gemm_splitk_partial<64, 64, 16, 8, 2>", "90"),
    ("splitk.cu", "gemm_splitk_reduce", "90"),
    ("cluster_tiled.cu", "gemm_cluster_tiled<64, 64, 16, 8, 2>", "90"),
    ("mma_tf32.cu", "gemm_mma_tf32<128, 128, 32, 64, 32, 3, false, true>", "90"),
    ("mma_tf32.cu", "gemm_mma_tf32<128, 128, 32, 64, 32, 3, true, true>", "90"),
    ("mma_tf32.cu", "gemm_mma_tf32<128, 128, 16, 64, 32, 4, false, true>", "90"),
    ("mma_tf32.cu", "gemm_mma_tf32<128, 128, 32, 64, 32, 3, false, false>", "90"),
    ("mma_bf16.cu", "gemm_mma16<__nv_bfloat16, 128, 128, 32, 64, 32, 4, false, true>", "90"),
    ("mma_bf16.cu", "gemm_mma16<__nv_bfloat16, 128, 128, 32, 64, 32, 4, true, true>", "90"),
    ("mma_bf16.cu", "gemm_mma16<__half, 128, 128, 32, 64, 32, 4, false, true>", "90"),
    ("mma_bf16.cu", "gemm_mma16<__nv_bfloat16, 128, 128, 32, 64, 32, 4, false, false>", "90"),
    ("mma_bf16.cu", "gemm_mma16<__nv_bfloat16, 128, 256, 32, 64, 64, 3, false, true>", "90"),
]

if __name__ == "__main__":
    only = sys.argv[1:] 
    for src, name, arch in INSTANCES:
        if only and not any(o in src for o in only):
            continue
        try:
            code, log, lowered, res = compile_instance(src, name, arch)
        except Exception as exc:
            print(f"FAIL {src} {name}: {str(exc)[:3000]}")
            continue
        text, hist = sass(code)
        keys = {k: v for k, v in hist.items() if k in ("HMMA", "HGMMA", "LDSM", "LDGSTS", "UTMALDG", "LDL", "STL", "UBLKCP", "SYNCS",
                                                        "FFMA", "LDS", "STS", "LDG", "STG", "SYNCS", "BAR")}
        print(f"{name} [{arch}]: {res} {keys}")
