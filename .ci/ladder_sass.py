"""SASS instruction mix of ladder kernels, without a GPU (NVRTC cubin + nvdisasm):

    python .ci/ladder_sass.py KERNEL [P=V ...] [--arch 90] [--dump FILE]

Prints ptxas resources and, for the whole kernel and for its hottest loop (the backward branch
whose body holds the most FFMA), the count of each instruction class: FFMA, LDS / LDS.128,
STS, LDG / LDG.E.128, LDGSTS (cp.async), STG, BAR, LDL/STL (local memory: spills), other.
nvdisasm comes from the nvidia-cuda-nvdisasm wheel or $PATH.
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gemmlab.gpu.compile import CompileOptions, compile_kernel
from gemmlab.contract.registry import load_registry


def nvdisasm() -> str:
    found = shutil.which("nvdisasm")
    if found:
        return found
    import nvidia
    for root in nvidia.__path__:
        for cand in Path(root).rglob("nvdisasm"):
            return str(cand)
    raise SystemExit("nvdisasm not found (pip install nvidia-cuda-nvdisasm)")


def classify(op: str) -> str:
    base = op.split(".")[0]
    if base == "FFMA":
        return "FFMA"
    if base == "LDS":
        return "LDS.128" if ".128" in op else "LDS"
    if base == "LDG":
        return "LDG.128" if ".128" in op else "LDG"
    if base in ("LDGSTS", "STS", "STG", "BAR", "LDL", "STL"):
        return base + (".128" if base in ("STS", "STG") and ".128" in op else "")
    return "other"


def parse(text: str):
    """[(label or None, opcode, target label or None)] in program order."""
    rows = []
    label = None
    for line in text.splitlines():
        m = re.match(r"^\s*\.?(L_x_\d+):", line)
        if m:
            label = m.group(1)
            continue
        m = re.match(r"^\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);", line)
        if m and "@!PT" not in line:  # @!PT: never executed (padding after LDGSTS)
            target = re.search(r"`\(\.?(L_x_\d+)\)", m.group(3))
            rows.append((label, m.group(2), target.group(1) if target else None))
            label = None
    return rows


def mix(ops) -> dict:
    c = collections.Counter(classify(op) for op in ops)
    c["total"] = len(ops)
    return dict(c)


def analyse(text: str) -> tuple[dict, list[dict]]:
    """(mix of the whole kernel, mixes of its hot loops: every backward-branch body holding the
    largest FFMA count; kernels with two main-loop copies, e.g. sgemm_pipelined's 16-byte and
    4-byte B paths, have two)."""
    rows = parse(text)
    labels = {lab: i for i, (lab, _, _) in enumerate(rows) if lab}
    loops = []
    for i, (_, op, target) in enumerate(rows):
        if op.startswith("BRA") and target in labels and labels[target] <= i:
            loops.append([o for _, o, _ in rows[labels[target]:i + 1]])
    most = max((sum(o.startswith("FFMA") for o in body) for body in loops), default=0)
    hot = [mix(body) for body in loops if most and sum(o.startswith("FFMA") for o in body) == most]
    return mix([op for _, op, _ in rows]), hot


def main(argv: list[str]) -> None:
    args = [a for a in argv if not a.startswith("--")]
    arch = "90"
    dump = None
    for a in argv:
        if a.startswith("--arch="):
            arch = a.split("=", 1)[1]
        if a.startswith("--dump="):
            dump = a.split("=", 1)[1]
    registry = load_registry(entry_points=False)
    spec = registry.get(args[0])
    params = dict(spec.defaults)
    for kv in args[1:]:
        k, v = kv.split("=")
        params[k] = int(v)
    compiled = compile_kernel(registry.source_path(spec), spec.entry(params), CompileOptions(arch=arch))
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(bytes(compiled.object_code.code))
        text = subprocess.run([nvdisasm(), "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    if dump:
        Path(dump).write_text(text)
    whole, loops = analyse(text)
    print(spec.entry(params), "NVRTC", compiled.nvrtc_version, compiled.resources)
    for name, m in [("kernel", whole)] + [(f"hot loop {i + 1}", m) for i, m in enumerate(loops)]:
        share = m.get("FFMA", 0) / max(m.get("total", 1), 1)
        print(f"  {name:10s} FFMA share {share:.3f} " + " ".join(f"{k}={v}" for k, v in sorted(m.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
