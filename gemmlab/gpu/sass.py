"""SASS of every compiled cubin: disassemble it and count the instruction classes that tell at a
glance whether a kernel uses the instructions it was meant to.

Disassembler: ``nvdisasm`` (pip ``nvidia-cuda-nvdisasm``), else ``cuobjdump -sass`` (pip
``nvidia-cuda-cuobjdump``), located with cuda.pathfinder (which also finds a CUDA Toolkit's
``bin``), else ``/usr/local/cuda/bin``. Works without a GPU. When none is found, the summary's
``error`` says why and the run goes on.

Classes (opcode mnemonics, predicates stripped; a class counts every variant of its opcode unless
it names a width): FFMA (float32 FMA), HMMA (warp-level tensor core mma.sync), HGMMA (Hopper
warpgroup wgmma), LDS / LDS.128 (shared loads / 128-bit ones), LDG / LDG.128 (global loads),
LDGSTS (cp.async), LDSM (ldmatrix), UTMALDG / UTMASTG / UTMAREDG (TMA loads / stores / reductions
into global memory), BAR (barriers), LDL / STL (local
memory: spills or stack arrays). ``total`` counts every instruction; an instruction predicated on
``@!PT`` (never executes: padding the compiler leaves) counts in ``total`` but in no class.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CLASSES = ("FFMA", "HMMA", "HGMMA", "LDS", "LDS.128", "LDG", "LDG.128", "LDGSTS", "LDSM", "UTMALDG", "UTMASTG", "UTMAREDG",
           "BAR", "LDL", "STL")
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")
TIMEOUT_S = 120


def histogram(sass: str) -> dict[str, int]:
    """Instruction-class counts of a SASS listing (nvdisasm or cuobjdump format)."""
    counts = dict.fromkeys(CLASSES, 0)
    total = 0
    for match in _INSTRUCTION.finditer(sass):
        predicate, opcode = (match.group(1) or "").strip(), match.group(2)
        parts = opcode.split(".")
        base = parts[0]
        total += 1
        if predicate == "@!PT":  # never executes
            continue
        if base in counts:
            counts[base] += 1
        if base in ("LDS", "LDG") and "128" in parts[1:]:
            counts[f"{base}.128"] += 1
    counts["total"] = total
    return counts


def find_disassembler() -> tuple[list[str] | None, str]:
    """``(argv prefix, description)`` of a disassembler, or ``(None, reason)``."""
    tried = []
    for tool, args in (("nvdisasm", ["-c"]), ("cuobjdump", ["-sass"])):
        path = None
        try:
            from cuda import pathfinder
            path = pathfinder.find_nvidia_binary_utility(tool)
        except Exception:
            path = None
        path = path or shutil.which(tool)
        if not path and os.path.isfile(f"/usr/local/cuda/bin/{tool}"):
            path = f"/usr/local/cuda/bin/{tool}"
        if path:
            return [str(path), *args], f"{tool} ({path})"
        tried.append(tool)
    return None, ("no disassembler found (tried " + ", ".join(tried) +
                  "); install it: pip install nvidia-cuda-nvdisasm")


def tool_id() -> str | None:
    """The disassembler :func:`disassemble` runs, as ``description|size|mtime_ns`` of its binary
    (None when none is found): the same id and the same cubin give the same SASS, so a stored
    disassembly (the compile cache's, :func:`reuse`) stands for a new one."""
    argv, described = find_disassembler()
    if argv is None:
        return None
    try:
        st = os.stat(argv[0])
    except OSError:
        return None
    return f"{described}|{st.st_size}|{st.st_mtime_ns}"


def stored(summary: dict, text: str) -> dict | None:
    """What the compile cache keeps of a successful :func:`disassemble` (None for a failed one)."""
    tool = tool_id()
    if summary.get("error") or not text or tool is None:
        return None
    return {"tool": tool, "summary": summary, "text": text}


def _usable(entry) -> bool:
    """``entry`` is a :func:`stored` disassembly made by the disassembler binary found now."""
    return (isinstance(entry, dict) and isinstance(entry.get("summary"), dict) and isinstance(entry.get("text"), str)
            and entry.get("tool") is not None and entry.get("tool") == tool_id())


def reuse(cubin: bytes, entry, folder: Path | str | None = None) -> tuple[dict, str]:
    """``(summary, sass_text)`` of ``cubin``: a stored disassembly (:func:`stored`) when it was
    made by the same disassembler binary (:func:`tool_id`), else :func:`disassemble`. Never raises.

    With ``folder`` (a compile cache folder, :mod:`gemmlab.gpu.cache`), the disassembly that
    folder keeps for these cubin bytes (:func:`gemmlab.gpu.cache.load_sass`) is the next choice
    before the disassembler, and a new disassembly is kept there (:func:`gemmlab.gpu.cache.store_sass`)."""
    if _usable(entry):
        return dict(entry["summary"]), entry["text"]
    if folder is None:
        return disassemble(cubin)
    from gemmlab.gpu import cache
    shared = cache.load_sass(Path(folder), cubin)
    if _usable(shared):
        return dict(shared["summary"]), shared["text"]
    summary, text = disassemble(cubin)
    kept = stored(summary, text)
    if kept is not None:
        cache.store_sass(Path(folder), cubin, kept)
    return summary, text


def disassemble(cubin: bytes) -> tuple[dict, str]:
    """Disassemble ``cubin``; return ``(summary, sass_text)``.

    ``summary`` = ``{"file": "kernel.sass", "histogram": {class: n, "total": n},
    "disassembler": str, "error": None}``; on failure ``histogram`` is None, ``error`` the
    one-line reason and ``sass_text`` empty. Never raises.
    """
    argv, described = find_disassembler()
    if argv is None:
        return {"file": None, "histogram": None, "disassembler": None, "error": described}, ""
    with tempfile.TemporaryDirectory(prefix="gemmlab-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            proc = subprocess.run([*argv, str(path)], capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            return {"file": None, "histogram": None, "disassembler": described,
                    "error": f"{described} failed: {type(exc).__name__}: {exc}"}, ""
    if proc.returncode != 0 or not proc.stdout.strip():
        first = (proc.stderr.strip().splitlines() or ["no output"])[0]
        return {"file": None, "histogram": None, "disassembler": described,
                "error": f"{described} exited {proc.returncode}: {first}"}, ""
    return {"file": "kernel.sass", "histogram": histogram(proc.stdout), "disassembler": described,
            "error": None}, proc.stdout
