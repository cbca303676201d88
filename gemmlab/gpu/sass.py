"""SASS of every compiled cubin: disassemble it and count the instruction classes that tell at a
glance whether a kernel uses the instructions it was meant to.

Disassembler: ``nvdisasm`` (pip ``nvidia-cuda-nvdisasm``), else ``cuobjdump -sass`` (pip
``nvidia-cuda-cuobjdump``), located with cuda.pathfinder (which also finds a CUDA Toolkit's
``bin``), else ``/usr/local/cuda/bin``. Works without a GPU. When none is found, the summary's
``error`` says why and the run goes on.

nvdisasm runs without its dataflow analysis (``-ndf``) first: on sm_70 and newer that analysis
only annotates local-memory spills and refills (nvdisasm 13.5 writes ``(*"SpillRefill"*)`` after
such an ``LDL``/``STL``; 13.0's listings are the same either way), yet it takes ~30% of nvdisasm's
time (0.70 -> 0.50 s on a wgmma cubin, 0.59 -> 0.33 s on a small one; of the test suite's 78
disassemblies, the 75 without ``LDL``/``STL`` are byte-identical both ways). A listing with
``LDL``/``STL``, or for a target older than sm_70 (where the analysis also infers branch-stack
targets), or a failed quick run, is disassembled again with the analysis: the text is always
nvdisasm's full listing. A cubin whose ELF gives a function a local-memory frame (``.nv.info``'s
``EIATTR_FRAME_SIZE`` above 0: where spills and stack arrays live, so its listing has the
``LDL``/``STL`` that need the analysis) is disassembled with the analysis at once, without the
quick run its listing would be thrown away after (:func:`_has_local_frame`).

Classes (opcode mnemonics, predicates stripped; a class counts every variant of its opcode unless
it names a width): FFMA (float32 FMA), HMMA (warp-level tensor core mma.sync), HGMMA (Hopper
warpgroup wgmma of 16-bit and TF32 operands), QGMMA (Hopper wgmma of FP8 operands, E4M3/E5M2), LDS / LDS.128 (shared loads / 128-bit ones), LDG / LDG.128 (global loads),
LDGSTS (cp.async), LDSM (ldmatrix), UTMALDG / UTMASTG / UTMAREDG (TMA loads / stores / reductions
into global memory), BAR (barriers), LDL / STL (local
memory: spills or stack arrays). ``total`` counts every instruction; an instruction predicated on
``@!PT`` (never executes: padding the compiler leaves) counts in ``total`` but in no class.

Serialized wgmma (:func:`wgmma_check`): a kernel whose every ``HGMMA`` (or FP8 ``QGMMA``) carries the ``gsb0`` scoreboard
and is followed by ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` before the next one runs each wgmma only after
the previous has finished (no accumulation overlaps the next issue). ptxas does this to a whole
function when it cannot prove the wgmma pipeline safe — its warning C7510 ("wgmma.mma_async
instructions are serialized due to ...", e.g. a function call such as ``printf`` in the kernel,
or accumulator registers touched between wgmmas) — and the warning is only in the ptxas log, which
NVRTC does not return on every installation; the SASS shows it everywhere. gemmlab's own phase
trace of the wgmma kernel printed from inside the kernel and was serialized this way for three
sessions before the pattern was noticed (docs/results/tc-ladder-h200.md, "Session 11").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CLASSES = ("FFMA", "HMMA", "HGMMA", "QGMMA", "LDS", "LDS.128", "LDG", "LDG.128", "LDGSTS", "LDSM", "UTMALDG", "UTMASTG", "UTMAREDG",
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


_HGMMA_OR_WAIT = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([HQ]GMMA\S*[^;]*|WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*(0x[0-9a-f]+))\s*;")


def wgmma_check(sass: str) -> dict | None:
    """Whether the wgmmas of a SASS listing are serialized (module docstring); None without HGMMA
    (FP8 ``QGMMA`` counts as HGMMA here: the same warpgroup pipeline).

    Returns ``{"hgmma": n, "serialized": k, "all_serialized": bool}``: ``k`` counts the HGMMA that
    carry ``gsb0`` and are followed by ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` before the next HGMMA;
    ``all_serialized`` is true when there are at least two HGMMA and every one is such (the pattern
    of ptxas warning C7510; a kernel that keeps a wgmma group in flight has ``gsb0`` only on each
    group's last HGMMA and waits with ``0x1`` or more).
    """
    hgmma = serialized = 0
    pending = False  # the last HGMMA carried gsb0 and no HGMMA came since
    for match in _HGMMA_OR_WAIT.finditer(sass):
        text, level = match.group(1), match.group(2)
        if text.startswith(("HGMMA", "QGMMA")):  # QGMMA: the FP8 form (counted as hgmma here)
            hgmma += 1
            pending = "gsb0" in text
        elif pending:
            serialized += int(level, 16) == 0
            pending = False
    if not hgmma:
        return None
    return {"hgmma": hgmma, "serialized": serialized, "all_serialized": hgmma >= 2 and serialized == hgmma}


def serialization_note(summary: dict) -> str | None:
    """The one-line warning for a :func:`disassemble` summary whose wgmmas are all serialized."""
    w = (summary or {}).get("wgmma")
    if not w or not w.get("all_serialized"):
        return None
    return (f"wgmma serialized: each of the {w['hgmma']} HGMMA waits for the one before "
            "(WARPGROUP.DEPBAR.LE gsb0, 0x0 after every one; ptxas warning C7510: a function call such as printf "
            "in the kernel, or accumulators touched between wgmmas)")


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
        return _with_wgmma(dict(entry["summary"]), entry["text"]), entry["text"]
    if folder is None:
        return disassemble(cubin)
    from gemmlab.gpu import cache
    shared = cache.load_sass(Path(folder), cubin)
    if _usable(shared):
        return _with_wgmma(dict(shared["summary"]), shared["text"]), shared["text"]
    summary, text = disassemble(cubin)
    kept = stored(summary, text)
    if kept is not None:
        cache.store_sass(Path(folder), cubin, kept)
    return summary, text


def _with_wgmma(summary: dict, text: str) -> dict:
    """``summary`` with its ``wgmma`` entry (:func:`wgmma_check`; added to a stored summary written
    before the check existed)."""
    if "wgmma" not in summary:
        summary["wgmma"] = wgmma_check(text)
        summary["warning"] = serialization_note(summary)
    return summary


_TARGET = re.compile(r"^\s*\.target\s+sm_(\d+)", re.M)


def _needs_dataflow(listing: str) -> bool:
    """Whether an ``nvdisasm -ndf`` listing could differ from the full one (module docstring): it
    has local-memory instructions (:func:`histogram`'s LDL/STL), or a target older than sm_70 (or
    none it can read)."""
    target = _TARGET.search(listing)
    if target is None or int(target.group(1)) < 70:
        return True
    counts = histogram(listing)
    return counts["LDL"] + counts["STL"] > 0


#: ``.nv.info`` attribute of a function's local-memory frame in bytes (``EIATTR_FRAME_SIZE``)
_EIATTR_FRAME_SIZE = 0x11


def _has_local_frame(cubin: bytes) -> bool:
    """Whether the cubin's ELF gives any function a local-memory frame (the ``.nv.info`` section's
    ``EIATTR_FRAME_SIZE`` entries: symbol index, frame bytes). False where it cannot tell (not a
    64-bit little-endian ELF, an attribute format it does not know): then :func:`disassemble`
    takes the quick run first, as it does without a frame. Never raises."""
    import struct
    try:
        for name, offset, size in elf_sections(cubin):
            if name != ".nv.info":
                continue
            data, i = cubin[offset:offset + size], 0
            while i + 4 <= len(data):
                fmt, attr = data[i], data[i + 1]
                if fmt == 4:  # EIFMT_SVAL: a 16-bit size, then the value
                    (n,) = struct.unpack_from("<H", data, i + 2)
                    if attr == _EIATTR_FRAME_SIZE and n >= 8 and struct.unpack_from("<I", data, i + 8)[0] > 0:
                        return True
                    i += 4 + n
                elif fmt == 3:  # EIFMT_HVAL: a 16-bit value
                    i += 4
                else:
                    break
    except (struct.error, ValueError, IndexError):
        return False
    return False


def elf_sections(cubin: bytes) -> list[tuple[str, int, int]]:
    """``(name, file offset, size in bytes)`` of each section of a 64-bit little-endian ELF cubin,
    in its section-header order (the ELF-64 section header table; names from ``.shstrtab``).

    Raises:
        ValueError: bytes that are not such an ELF, or a truncated one.
    """
    import struct
    if cubin[:6] != b"\x7fELF\x02\x01":
        raise ValueError("not a 64-bit little-endian ELF")
    try:
        (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
        names = headers[shstrndx][4]
        return [(cubin[names + name:cubin.index(b"\0", names + name)].decode("ascii", "replace"), offset, size)
                for name, _, _, _, offset, size in headers]
    except (struct.error, IndexError) as exc:
        raise ValueError(f"truncated ELF: {exc}") from None


#: name prefix of the temporary folder holding a cubin while it is disassembled (``<prefix><pid>-...``)
TEMP_PREFIX = "gemmlab-sass-"


def remove_temporary_files_of(pid: int) -> int:
    """Remove the temporary folders :func:`disassemble` left in process ``pid`` (one killed while
    nvdisasm ran: a point worker the watchdog or Ctrl-C killed with SIGKILL cleans nothing up);
    call once that process has ended. Returns how many were removed; never raises."""
    removed = 0
    for folder in Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}{pid}-*"):
        shutil.rmtree(folder, ignore_errors=True)
        removed += not folder.exists()
    return removed


def disassemble(cubin: bytes) -> tuple[dict, str]:
    """Disassemble ``cubin``; return ``(summary, sass_text)``.

    ``summary`` = ``{"file": "kernel.sass", "histogram": {class: n, "total": n}, "wgmma":
    wgmma_check(...), "warning": serialization_note(...) or None, "disassembler": str, "error": None}``; on failure ``histogram`` is None, ``error`` the
    one-line reason and ``sass_text`` empty. Never raises.
    """
    argv, described = find_disassembler()
    if argv is None:
        return {"file": None, "histogram": None, "disassembler": None, "error": described}, ""
    # module docstring: -ndf first, the full listing where it differs (at once for a cubin with a local frame)
    quick = described.startswith("nvdisasm") and not _has_local_frame(cubin)
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            proc = subprocess.run([*argv, *(["-ndf"] if quick else []), str(path)], capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
            if quick and (proc.returncode != 0 or _needs_dataflow(proc.stdout)):
                proc = subprocess.run([*argv, str(path)], capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            return {"file": None, "histogram": None, "disassembler": described,
                    "error": f"{described} failed: {type(exc).__name__}: {exc}"}, ""
    if proc.returncode != 0 or not proc.stdout.strip():
        first = (proc.stderr.strip().splitlines() or ["no output"])[0]
        return {"file": None, "histogram": None, "disassembler": described,
                "error": f"{described} exited {proc.returncode}: {first}"}, ""
    return summarize(proc.stdout, described), proc.stdout


def summarize(listing: str, described: str) -> dict:
    """The summary :func:`disassemble` gives for a successful run of the disassembler
    ``described`` (:func:`find_disassembler`'s description) that printed ``listing``: the
    instruction classes (:func:`histogram`), the wgmma check (:func:`wgmma_check`) and its
    warning (:func:`serialization_note`). Pure: the same listing gives the same summary."""
    summary = {"file": "kernel.sass", "histogram": histogram(listing), "wgmma": wgmma_check(listing),
               "disassembler": described, "error": None}
    summary["warning"] = serialization_note(summary)
    return summary
