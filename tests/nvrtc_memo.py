"""Recorded NVRTC compilations for the test suite (not a test module; tests/conftest.py uses it).

What NVRTC returns for a source (the cubin, each name expression's lowered name, the program log
with ptxas's ``-v`` report) is a function of the source text, every header it includes, the
options, the name expressions and the NVRTC library. The suite compiles ~130 distinct kernel
instances, 0.2-1.9 CPU s each (~30 CPU s a run on the 2-core CI machine). So their outputs are
kept here, one xz file each in ``tests/data/nvrtc_memo/``, named by the SHA-256 of
:func:`inputs`: the SHA-256 of each ``libnvrtc*`` file beside the NVRTC library loaded, of the
source, of every header :func:`gemmlab.gpu.compile.scan_includes` finds (gemmlab's and the
source's own), the CUDA header wheels' versions, the program name, every field of cuda.core's
``ProgramOptions`` for the options, the include folders by role, the name expressions, and the SHA-256 of the code of
:func:`gemmlab.gpu.compile.run_nvrtc` (the one NVRTC call). Only the same inputs read a recording;
anything else compiles (a miss costs time). Everything after NVRTC (lowered names, ptxas report
parsing, the disassembly and its analysis, loading on a GPU) runs on a recorded output as on a
fresh one.

A recorded file is used only when it holds what its name says (:func:`lookup`): its first line
repeats the inputs (a file copied over another name is refused), the cubin's SHA-256 is the one
recorded beside it, and the cubin is an ELF with a code section for each lowered name. Anything
else, or an xz file that fails its CRC, is a miss. Not recorded: failed compilations, an empty log
(NVRTC 13.0 returns one for a repeat), outputs that mention a folder of this machine (an absolute
include folder or the source's path in the log or the cubin), sources with an include folder other
than the source's own, gemmlab's shared headers and CUDA's.

``GEMMLAB_TEST_NVRTC_VERIFY=1`` also compiles each hit and fails the test where the cubin, symbols
or log differ (the log's ``Compile time`` lines apart: :func:`timeless`; tests/conftest.py); tests/test_nvrtc_memo.py checks one entry that way in every
run. ``GEMMLAB_TEST_NVRTC_RECORD=1 python -m pytest`` records each miss and adds the toolchain to
``RECORDED.json``; to drop entries no test reads any more, record into an empty folder (``rm -r
tests/data/nvrtc_memo`` first) on a machine without a GPU, as for tests/sass_memo.py. A test that
patches cuda.core's ``Program`` (an emulated NVRTC) always gets its patch, never a recording.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import lzma
import os
import re
from pathlib import Path

from sass_memo import file_digest, write_atomically

#: the folder of recorded compilations (``<name>.nvrtc.xz``, :func:`name_of`) and RECORDED.json
MEMO_DIR = Path(__file__).resolve().parent / "data" / "nvrtc_memo"
#: set to 1 to record each miss into :data:`MEMO_DIR`
RECORD_ENV = "GEMMLAB_TEST_NVRTC_RECORD"
#: set to 1 to compile each hit as well and fail where the output differs
VERIFY_ENV = "GEMMLAB_TEST_NVRTC_VERIFY"
#: the first line of a recorded file: this prefix, then the JSON of its :func:`inputs`
HEADER = "// gemmlab recorded NVRTC output "
#: the toolchains the folder was recorded with (:func:`recorded_with`)
MANIFEST = "RECORDED.json"


def nvrtc_files() -> dict[str, str] | None:
    """``{file name: SHA-256}`` of the ``libnvrtc*`` files beside the NVRTC library cuda.pathfinder
    loads (the library and its builtins, which NVRTC loads itself), or None where none is found."""
    try:
        from cuda import pathfinder
        lib = Path(pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path)
    except Exception:
        return None
    found = {p.name: file_digest(p) for p in sorted(lib.parent.glob("libnvrtc*"))}
    return found if found and None not in found.values() else None


def _roles(source_path: Path, include_dirs: list[str]) -> list[str] | None:
    """The include folders as roles (``source``, ``shared``, ``cuda:<i>``), or None for any other."""
    from gemmlab.gpu.compile import cuda_include_dirs, shared_include_dir
    cuda = [os.path.realpath(d) for d in cuda_include_dirs()[0]]
    known = {os.path.realpath(Path(source_path).resolve().parent): "source",
             os.path.realpath(shared_include_dir()): "shared",
             **{d: f"cuda:{i}" for i, d in enumerate(cuda)}}
    roles = [known.get(os.path.realpath(d)) for d in include_dirs]
    return None if None in roles else roles


def inputs(source_path: Path, source: str, options, include_dirs: list[str],
           names: tuple[str, ...]) -> dict | None:
    """What :func:`gemmlab.gpu.compile.run_nvrtc` returns for these arguments depends on (module
    docstring), or None where it cannot be told here (NVRTC not found, an include folder of
    another role, a header outside the allowed folders): then nothing is read or recorded."""
    from gemmlab.errors import ConfigError
    from gemmlab.gpu import compile as nvrtc
    libraries, roles = nvrtc_files(), _roles(source_path, include_dirs)
    if libraries is None or roles is None:
        return None
    try:
        headers = [[i["name"], i["sha256"]] for i in nvrtc.scan_includes(Path(source_path), source)]
    except (ConfigError, OSError):
        return None
    program = Path(source_path).name
    return {"nvrtc": libraries, "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
            "headers": headers, "cuda_headers": nvrtc.cuda_include_dirs()[1], "program": program,
            "program_options": dataclasses.asdict(options.program_options(program, [])), "include_dirs": roles,
            "names": list(names),
            "run_nvrtc_sha256": hashlib.sha256(inspect.getsource(nvrtc.run_nvrtc).encode()).hexdigest()}


def name_of(found: dict) -> str:
    """The file name (without ``.nvrtc.xz``) of a compilation with these :func:`inputs`."""
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()


def _holds_code_for(cubin: bytes, symbols: dict[str, str]) -> bool:
    from gemmlab.gpu.sass import elf_sections
    try:
        sections = {name for name, _, size in elf_sections(cubin) if size > 0}
    except ValueError:
        return False
    return all(f".text.{lowered}" in sections for lowered in symbols.values())


def lookup(found: dict | None, folder: Path | None = None) -> tuple[bytes, dict[str, str], str] | None:
    """``(cubin, {name expression: lowered name}, log)`` recorded for the :func:`inputs`
    ``found``, or None: none recorded, an xz file that fails its check, a first line that is not
    these inputs, a cubin whose SHA-256 is not the one recorded or that lacks a code section for a
    lowered name (module docstring)."""
    if found is None:
        return None
    try:
        data = lzma.decompress((Path(folder or MEMO_DIR) / f"{name_of(found)}.nvrtc.xz").read_bytes())
        first, meta, cubin = data.split(b"\n", 2)
        first, meta = first.decode("utf-8"), json.loads(meta)
        if not first.startswith(HEADER) or json.loads(first[len(HEADER):]) != found:
            return None
        symbols, log = dict(meta["symbols"]), str(meta["log"])
        if hashlib.sha256(cubin).hexdigest() != meta["cubin_sha256"] or set(symbols) != set(found["names"]):
            return None
    except (OSError, lzma.LZMAError, ValueError, KeyError, TypeError):
        return None
    return (cubin, symbols, log) if _holds_code_for(cubin, symbols) else None


_COMPILE_TIME = re.compile(r"^ptxas info\s*: Compile time = [0-9.]+ ms$", re.M)


def timeless(log: str) -> str:
    """``log`` without ptxas's ``Compile time = <t> ms`` lines (the one part of NVRTC's output that
    differs from run to run): what verify mode compares."""
    return _COMPILE_TIME.sub("", log)


def recording() -> bool:
    """Whether misses are recorded (``GEMMLAB_TEST_NVRTC_RECORD=1``)."""
    return os.environ.get(RECORD_ENV) == "1"


def verifying() -> bool:
    """Whether each hit is compiled as well and compared (``GEMMLAB_TEST_NVRTC_VERIFY=1``)."""
    return os.environ.get(VERIFY_ENV) == "1"


def recorded_with(folder: Path | None = None) -> list[dict]:
    """The toolchains (NVRTC version, its files' SHA-256, CUDA header wheels) the folder's
    compilations were recorded with ([] if none)."""
    try:
        found = json.loads((Path(folder or MEMO_DIR) / MANIFEST).read_text())
        return found if isinstance(found, list) else []
    except (OSError, ValueError):
        return []


def local(source_path: Path, include_dirs: list[str], cubin: bytes, log: str) -> bool:
    """Whether the output names a folder of this machine (an include folder or the source's path)."""
    paths = {str(Path(source_path).resolve()), *include_dirs, *(os.path.realpath(d) for d in include_dirs)}
    return any(p in log or p.encode() in cubin for p in paths)


def record(found: dict | None, cubin: bytes, symbols: dict[str, str], log: str,
           folder: Path | None = None) -> bool:
    """Write a compilation with the :func:`inputs` ``found`` (to a temporary name, then renamed:
    the xdist workers may record the same one at once) and add the toolchain to
    :data:`MANIFEST`. Nothing for no inputs or an empty log. Never raises; True when written."""
    if found is None or not log.strip():
        return False
    from gemmlab.gpu.compile import nvrtc_version
    folder = Path(folder or MEMO_DIR)
    meta = {"cubin_sha256": hashlib.sha256(cubin).hexdigest(), "symbols": symbols, "log": log}
    data = (HEADER + json.dumps(found, sort_keys=True) + "\n" + json.dumps(meta, sort_keys=True) + "\n").encode()
    chain = {"nvrtc_version": nvrtc_version(), "nvrtc": found["nvrtc"], "cuda_headers": found["cuda_headers"]}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(folder / f"{name_of(found)}.nvrtc.xz", lzma.compress(data + cubin, preset=9))
        chains = recorded_with(folder)
        if chain not in chains:
            chains = sorted([*chains, chain], key=lambda c: json.dumps(c, sort_keys=True))
            write_atomically(folder / MANIFEST, (json.dumps(chains, indent=1, sort_keys=True) + "\n").encode())
    except OSError:
        return False
    return True
