"""Recorded NVRTC compilations for the test suite (not a test module; tests/conftest.py uses it).

What NVRTC returns for a source (the cubin, each name expression's lowered name, the program log
with ptxas's ``-v`` report) is a function of the source text, every header it includes, the
options, the name expressions and the NVRTC library. The suite compiles ~100 distinct kernel
instances, 0.2-1.9 CPU s each (~30 CPU s a run on the 2-core CI machine). So their outputs are
kept here, in ``tests/data/nvrtc_memo/``: packed in its ``packed.tar.xz``, or one xz file each where
recorded since (tests/sass_memo.py's ``read_entry`` and ``--pack``), named by the SHA-256 of
:func:`inputs`: the SHA-256 of each ``libnvrtc*`` file beside the NVRTC library loaded (the
library and its builtins), of the source, of every header :func:`gemmlab.gpu.compile.scan_includes`
finds (the source's own folder's and gemmlab's shared ones; CUDA's by their pip wheels' versions),
the program name, every field of cuda.core's ``ProgramOptions`` for the options and the flags
cuda.core gives NVRTC for them, cuda.core's version, the include folders by role, the name
expressions, and the SHA-256 of the code of :func:`gemmlab.gpu.compile.run_nvrtc` (the one NVRTC
call). Only the same inputs read a recording; anything else compiles (a miss costs time). Where the
inputs cannot be told (:func:`inputs`: e.g. ``#include NAME`` or ``__has_include`` in the source
or a header, CUDA headers not from their wheels) NVRTC always runs. Everything after NVRTC (lowered
names, ptxas report parsing, the disassembly and its analysis, loading on a GPU) runs on a recorded
output as on a fresh one.

A recorded file is used only when it holds what its name says (:func:`lookup`): its first line
repeats the inputs (a file copied over another name is refused), the cubin's SHA-256 is the one
recorded beside it, the symbols are for the name expressions asked, and each lowered name holds its
function's name and has a code section in the cubin and ptxas's report in the log. Anything else,
or an xz file that fails its CRC, is a miss. Not recorded: failed compilations, an empty log (NVRTC
13.0 returns one for a repeat), outputs that mention a folder of this machine (an include folder or
the source's path in the log or the cubin, e.g. a header's ``__FILE__``).

``GEMMLAB_TEST_NVRTC_VERIFY=1`` also compiles each hit and fails the test where the cubin, symbols
or log differ (the log's ``Compile time`` lines apart: :func:`timeless`; tests/conftest.py);
tests/test_nvrtc_memo.py checks one entry that way in every run. An edit that keeps all the checks
above (e.g. another register count in the log) is trusted otherwise: the files are reviewed like
tests/data/sass_memo.

Recording: ``GEMMLAB_TEST_NVRTC_RECORD=1 python -m pytest`` records each miss and adds the
toolchain to ``RECORDED.json``; ``python tests/sass_memo.py --pack`` then moves them into the pack.
To drop entries no test reads any more: ``--pack --prune`` (:func:`stale`: a source or header the
checkout tracks, recorded in a version it no longer has), or record into an empty folder (``rm -r
tests/data/nvrtc_memo`` first) on a machine without a GPU, then pack, as for tests/sass_memo.py. The
recordings save CI's time only if made with the NVRTC and CUDA header wheels CI installs (those
RECORDED.json names; pyproject.toml allows a range): with others every kernel compiles there, which
is slower, never wrong. A test that patches cuda.core's ``Program`` (an emulated NVRTC) always gets
its patch, never a recording.
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

from sass_memo import MANIFEST, add_to_manifest, entry_names, file_digest, read_entry, read_manifest, write_atomically

#: the folder of recorded compilations (``<name>.nvrtc.xz``, :func:`name_of`) and RECORDED.json
MEMO_DIR = Path(__file__).resolve().parent / "data" / "nvrtc_memo"
#: set to 1 to record each miss into :data:`MEMO_DIR`
RECORD_ENV = "GEMMLAB_TEST_NVRTC_RECORD"
#: set to 1 to compile each hit as well and fail where the output differs
VERIFY_ENV = "GEMMLAB_TEST_NVRTC_VERIFY"
#: the first line of a recorded file: this prefix, then the JSON of its :func:`inputs`
HEADER = "// gemmlab recorded NVRTC output "


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
    docstring), as plain JSON data, or None where it cannot be told here: NVRTC not found, CUDA's
    headers not from their pip wheels, an include folder of another role, a header outside the
    allowed folders, an include the scan does not follow (a macro's name, ``__has_include``) in
    the source or one of its headers, a cuda.core without ``ProgramOptions.as_bytes``. Then nothing
    is read or recorded."""
    import cuda.core
    from gemmlab.errors import ConfigError
    from gemmlab.gpu import compile as nvrtc
    libraries, roles = nvrtc_files(), _roles(source_path, include_dirs)
    cuda_headers = nvrtc.cuda_include_dirs()[1]
    if libraries is None or roles is None or "absent" in cuda_headers:
        return None
    try:
        scanned = nvrtc.scan_includes(Path(source_path), source)
    except (ConfigError, OSError):
        return None
    if nvrtc.has_unfollowed_include(source, scanned):
        return None
    program = Path(source_path).name
    program_options = options.program_options(program, [])
    try:
        flags = [flag.decode() for flag in program_options.as_bytes("nvrtc", "cubin")]
    except AttributeError:
        return None
    found = {"nvrtc": libraries, "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
             "headers": [[i["name"], i["sha256"]] for i in scanned], "cuda_headers": cuda_headers,
             "program": program, "program_options": dataclasses.asdict(program_options), "nvrtc_flags": flags,
             "cuda_core": cuda.core.__version__, "include_dirs": roles, "names": list(names),
             "run_nvrtc_sha256": hashlib.sha256(inspect.getsource(nvrtc.run_nvrtc).encode()).hexdigest()}
    return json.loads(json.dumps(found))  # as a recorded first line reads back (tuples become lists)


def name_of(found: dict) -> str:
    """The file name (without ``.nvrtc.xz``) of a compilation with these :func:`inputs`."""
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()


def _consistent(cubin: bytes, symbols: dict[str, str], log: str) -> bool:
    """Whether the cubin has a code section, and the log ptxas's report, for each lowered name, and
    each lowered name holds its name expression's function name (``ns::f<1>``: ``f``)."""
    from gemmlab.gpu.sass import elf_sections
    try:
        sections = {name for name, _, size in elf_sections(cubin) if size > 0}
    except ValueError:
        return False
    return all(f".text.{lowered}" in sections and f"Compiling entry function '{lowered}'" in log
               and name.split("<")[0].split("::")[-1].strip() in lowered for name, lowered in symbols.items())


def lookup(found: dict | None, folder: Path | None = None) -> tuple[bytes, dict[str, str], str] | None:
    """``(cubin, {name expression: lowered name}, log)`` recorded for the :func:`inputs`
    ``found``, or None: none recorded, an xz file that fails its check, a first line that is not
    these inputs, a cubin whose SHA-256 is not the one recorded, symbols for other name expressions,
    a lowered name without a code section in the cubin or a report in the log, or that does not hold
    its function's name (module docstring)."""
    if found is None:
        return None
    try:
        data = read_entry(Path(folder or MEMO_DIR), f"{name_of(found)}.nvrtc.xz")
        if data is None:
            return None
        first, meta, cubin = data.split(b"\n", 2)
        first, meta = first.decode("utf-8"), json.loads(meta)
        if not first.startswith(HEADER) or json.loads(first[len(HEADER):]) != found:
            return None
        symbols, log = dict(meta["symbols"]), str(meta["log"])
        if hashlib.sha256(cubin).hexdigest() != meta["cubin_sha256"] or set(symbols) != set(found["names"]):
            return None
    except (OSError, lzma.LZMAError, ValueError, KeyError, TypeError):
        return None
    return (cubin, symbols, log) if _consistent(cubin, symbols, log) else None


_COMPILE_TIME = re.compile(r"^ptxas info\s*: Compile time = [0-9.]+ ms$", re.M)


def timeless(log: str) -> str:
    """``log`` without ptxas's ``Compile time = <t> ms`` lines (the one part of NVRTC's output that
    differs from run to run): what verify mode compares."""
    return _COMPILE_TIME.sub("", log)


def symbols_of(code) -> dict[str, str]:
    """``{name expression: lowered name}`` of a cuda.core ``ObjectCode`` (its ``symbol_mapping``
    holds bytes)."""
    return {n: (v.decode() if isinstance(v, bytes) else v) for n, v in code.symbol_mapping.items()}


def recording() -> bool:
    """Whether misses are recorded (``GEMMLAB_TEST_NVRTC_RECORD=1``)."""
    return os.environ.get(RECORD_ENV) == "1"


def verifying() -> bool:
    """Whether each hit is compiled as well and compared (``GEMMLAB_TEST_NVRTC_VERIFY=1``)."""
    return os.environ.get(VERIFY_ENV) == "1"


def recorded_with(folder: Path | None = None) -> list[dict]:
    """The toolchains (:func:`toolchain`) the folder's compilations were recorded with ([] if none)."""
    return read_manifest(folder or MEMO_DIR)


def local(source_path: Path, include_dirs: list[str], cubin: bytes, log: str) -> bool:
    """Whether the output names a folder of this machine (an include folder or the source's path)."""
    paths = {str(Path(source_path).resolve()), *include_dirs, *(os.path.realpath(d) for d in include_dirs)}
    return any(p in log or p.encode() in cubin for p in paths)


def toolchain(found: dict) -> dict:
    """The toolchain of the :func:`inputs` ``found`` (an entry of :data:`MANIFEST`): NVRTC's version
    and files, the CUDA header wheels, cuda.core's version."""
    from gemmlab.gpu.compile import nvrtc_version
    return {"nvrtc_version": nvrtc_version(), **{k: found[k] for k in ("nvrtc", "cuda_headers", "cuda_core")}}


def record(found: dict | None, cubin: bytes, symbols: dict[str, str], log: str,
           folder: Path | None = None) -> bool:
    """Write a compilation with the :func:`inputs` ``found`` (to a temporary name, then renamed:
    the xdist workers may record the same one at once) and add the toolchain to
    :data:`MANIFEST`. Nothing for no inputs or an empty log. Never raises; True when written."""
    if found is None or not log.strip():
        return False
    folder = Path(folder or MEMO_DIR)
    meta = {"cubin_sha256": hashlib.sha256(cubin).hexdigest(), "symbols": symbols, "log": log}
    data = (HEADER + json.dumps(found, sort_keys=True) + "\n" + json.dumps(meta, sort_keys=True) + "\n").encode()
    chain = toolchain(found)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(folder / f"{name_of(found)}.nvrtc.xz", lzma.compress(data + cubin, preset=9))
        add_to_manifest(folder, chain)
    except OSError:
        return False
    return True


def stale(folder: Path, known) -> tuple[list[str], set[str], set[str]]:
    """Which recordings of ``folder`` (packed or not) no lookup can read any more, for ``python
    tests/sass_memo.py --prune``: ``(their file names, their cubins' SHA-256, the other
    recordings' cubins' SHA-256)``. ``known`` is ``{file name: the SHA-256 of each version a lookup
    can meet}`` (the checkout's tracked sources and headers). A recording is stale where its
    program (the source's file name) is in ``known`` and its source's SHA-256 is none of those, or
    where a header it included is in ``known`` by file name and its SHA-256 is none of those.
    Sources and headers of other names (a test's own ``k.cu`` in a temporary folder) are kept. An
    entry that cannot be read is stale too."""
    names, stale_cubins, kept_cubins = [], set(), set()
    for name in entry_names(Path(folder), ".nvrtc.xz"):
        try:
            first, meta, _ = read_entry(Path(folder), name).split(b"\n", 2)
            found, cubin = json.loads(first.decode()[len(HEADER):]), json.loads(meta)["cubin_sha256"]
            program = found["program"]
            ok = program not in known or found["source_sha256"] in known[program]
            for header, digest in found["headers"]:
                base = header.split("/")[-1]
                ok = ok and (base not in known or digest in known[base])
        except (AttributeError, ValueError, KeyError, TypeError):
            names.append(name)
            continue
        (kept_cubins if ok else stale_cubins).add(cubin)
        if not ok:
            names.append(name)
    return names, stale_cubins, kept_cubins
