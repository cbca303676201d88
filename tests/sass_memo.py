"""Recorded disassemblies for the test suite (not a test module; tests/conftest.py uses it).

What the disassembler prints for a cubin is a function of the cubin's bytes, the disassembler
binary, and how gemmlab runs it (:func:`gemmlab.gpu.sass.disassemble`: its flags, and the ``-ndf``
run it decides from the cubin and the listing). Each run costs about 0.3 CPU s of fixed start-up
(nvdisasm 13.x on the 2-core CI machine) however small the cubin, and the suite disassembles some
80 distinct cubins: about 30 CPU s a run. So the listings are kept here, one xz file each in
``tests/data/sass_memo/``, named by :func:`key`: the SHA-256 of the disassembler's file name and
flags, the SHA-256 of the disassembler binary's bytes, the SHA-256 of ``gemmlab/gpu/sass.py``
(the code that decides the runs) and the SHA-256 of the cubin. A test still compiles every cubin
it checks with NVRTC; only a byte-identical cubin, disassembled by a byte-identical binary through
an unchanged ``sass.py``, reads the recorded listing, and gemmlab's own analysis
(:func:`gemmlab.gpu.sass.summarize`) runs on it as on a fresh one. Any other change gives another
name: the disassembler runs (a miss costs time).

A recorded file is used only when it holds what its name says (:func:`lookup`): its first line
repeats the key and the inputs behind it (a file copied over another name is refused), and the
listing's code sections are the cubin's, by name and size (its ELF ``.text.*`` sections, the
listing's last instruction address in each). Anything else, or an xz file that fails its CRC, is
a miss. ``GEMMLAB_TEST_SASS_VERIFY=1`` also runs the disassembler for each hit and fails the test
where the recorded listing differs (tests/conftest.py); tests/test_sass_memo.py checks one entry
that way in every run.

Recording: ``GEMMLAB_TEST_SASS_RECORD=1 python -m pytest`` writes the listing of each miss here and
adds the toolchain to ``RECORDED.json`` (:func:`recorded_with`). To drop entries no test reads any
more, record into an empty folder: ``rm -r tests/data/sass_memo && GEMMLAB_TEST_SASS_RECORD=1
python -m pytest`` on a machine without a GPU (the CI's; gpu tests there skip, so their cubins are
left to the disassembler). An unchanged listing gives the same file, byte for byte, with the same
xz library, so git sees only the kernels that changed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import lzma
import os
import re
from pathlib import Path

#: the folder of recorded listings (``<key>.sass.xz``, :func:`key`) and of RECORDED.json (read when
#: called: a test may point it elsewhere)
MEMO_DIR = Path(__file__).resolve().parent / "data" / "sass_memo"
#: set to 1 to write the listing of each miss into :data:`MEMO_DIR`
RECORD_ENV = "GEMMLAB_TEST_SASS_RECORD"
#: set to 1 to run the disassembler for each hit as well and fail where the listing differs
VERIFY_ENV = "GEMMLAB_TEST_SASS_VERIFY"
#: the first line of a recorded file: this prefix, then the JSON of its :func:`inputs`
HEADER = "// gemmlab recorded disassembly "
#: the toolchains the folder was recorded with (:func:`recorded_with`)
MANIFEST = "RECORDED.json"


@functools.lru_cache(maxsize=16)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digest(path: str | Path) -> str | None:
    """SHA-256 of the file at ``path`` (hashed once a process while its size and mtime stay), or
    None where it cannot be read."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        return _file_digest(real, st.st_size, st.st_mtime_ns)
    except OSError:
        return None


def _digests(argv: list[str]) -> dict | None:
    """SHA-256 of the disassembler binary ``argv[0]`` and of ``gemmlab/gpu/sass.py`` (None where
    either cannot be read)."""
    from gemmlab.gpu import sass
    tool, procedure = file_digest(argv[0]), file_digest(sass.__file__)
    return None if tool is None or procedure is None else {"tool_sha256": tool, "sass_py_sha256": procedure}


def inputs(argv: list[str], cubin: bytes) -> dict | None:
    """What a listing of ``cubin`` by the disassembler command ``argv`` (path, then flags;
    :func:`gemmlab.gpu.sass.find_disassembler`) depends on, or None where a file cannot be read."""
    digests = _digests(argv)
    if digests is None:
        return None
    return {"tool": os.path.basename(argv[0]), "flags": list(argv[1:]), **digests,
            "cubin_sha256": hashlib.sha256(cubin).hexdigest()}


def name_of(found: dict) -> str:
    """The file name (without ``.sass.xz``) of a listing with these :func:`inputs`: their SHA-256."""
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()


def key(argv: list[str], cubin: bytes) -> str | None:
    """The name (without ``.sass.xz``) of ``cubin``'s listing by ``argv`` (:func:`name_of`)."""
    found = inputs(argv, cubin)
    return None if found is None else name_of(found)


_SECTION = re.compile(r"^\s*\.section\s+(\.text\.[^,\s]+)")
_ADDRESS = re.compile(r"/\*([0-9a-f]{4,})\*/")


def code_sections(cubin: bytes) -> dict[str, int] | None:
    """``{".text.<function>": bytes}`` of a cubin (:func:`gemmlab.gpu.sass.elf_sections`), or None
    (not an ELF it reads)."""
    from gemmlab.gpu.sass import elf_sections
    try:
        return {name: size for name, _, size in elf_sections(cubin) if name.startswith(".text.")}
    except ValueError:
        return None


def listed_sections(listing: str) -> dict[str, int]:
    """``{".text.<function>": bytes}`` of an nvdisasm listing: each code section's last instruction
    address plus 16 (one sm_70+ instruction)."""
    found, current = {}, None
    for line in listing.splitlines():
        section = _SECTION.match(line)
        if section:
            current = section.group(1)
            found[current] = 0
        elif current is not None:
            address = _ADDRESS.search(line)
            if address:
                found[current] = int(address.group(1), 16) + 16
    return found


def lookup(argv: list[str], cubin: bytes, folder: Path | None = None) -> str | None:
    """The recorded listing of ``cubin`` by ``argv``, or None: none recorded, an xz file that fails
    its check, a first line that is not this key's (a file copied over another name), or code
    sections other than the cubin's (module docstring)."""
    found = inputs(argv, cubin)
    if found is None:
        return None
    name = name_of(found)
    try:
        text = lzma.decompress((Path(folder or MEMO_DIR) / f"{name}.sass.xz").read_bytes()).decode("utf-8")
    except (OSError, lzma.LZMAError, UnicodeDecodeError):
        return None
    first, _, listing = text.partition("\n")
    try:
        if not first.startswith(HEADER) or json.loads(first[len(HEADER):]) != found:
            return None
    except ValueError:
        return None
    sections = code_sections(cubin)
    if sections is not None and listed_sections(listing) != sections:
        return None
    return listing


def recording() -> bool:
    """Whether misses are written into the memo (``GEMMLAB_TEST_SASS_RECORD=1``)."""
    return os.environ.get(RECORD_ENV) == "1"


def verifying() -> bool:
    """Whether each hit is checked against the disassembler (``GEMMLAB_TEST_SASS_VERIFY=1``)."""
    return os.environ.get(VERIFY_ENV) == "1"


def toolchain(argv: list[str]) -> dict | None:
    """The disassembler binary, NVRTC version and ``sass.py`` in use (an entry of :data:`MANIFEST`)."""
    from gemmlab.gpu.compile import nvrtc_version
    digests = _digests(argv)
    return None if digests is None else {**digests, "nvrtc": nvrtc_version()}


def read_manifest(folder: Path) -> list[dict]:
    """The toolchains listed in ``folder``'s :data:`MANIFEST` ([] if none or unreadable)."""
    try:
        found = json.loads((Path(folder) / MANIFEST).read_text())
        return found if isinstance(found, list) else []
    except (OSError, ValueError):
        return []


def add_to_manifest(folder: Path, chain: dict | None) -> None:
    """Add the toolchain ``chain`` to ``folder``'s :data:`MANIFEST` (kept sorted; written
    atomically). Raises OSError where it cannot be written."""
    chains = read_manifest(folder)
    if chain is not None and chain not in chains:
        chains = sorted([*chains, chain], key=lambda c: json.dumps(c, sort_keys=True))
        write_atomically(Path(folder) / MANIFEST, (json.dumps(chains, indent=1, sort_keys=True) + "\n").encode())


def misnamed_entries(folder: Path, suffix: str, header: str, name_of) -> list[str] | None:
    """The files ``*<suffix>`` of ``folder`` whose first line is not ``header`` followed by the JSON
    of inputs whose name (``name_of``) is the file's, or None where the folder holds none."""
    files = sorted(Path(folder).glob(f"*{suffix}"))
    if not files:
        return None
    wrong = []
    for path in files:
        first = lzma.LZMADecompressor().decompress(path.read_bytes(), max_length=1 << 16).partition(b"\n")[0]
        try:
            text = first.decode("utf-8")
            if not text.startswith(header) or name_of(json.loads(text[len(header):])) + suffix != path.name:
                wrong.append(path.name)
        except ValueError:
            wrong.append(path.name)
    return wrong


def missing_entry(folder: Path, entry: str, chain: dict, record_env: str, toolchain_words: str) -> None:
    """For a test whose committed entry ``entry`` (a file name) of ``folder`` reads nothing: fail
    where the folder was recorded with this very toolchain ``chain`` (the entry should be there),
    else skip and name what differs from the toolchains it was recorded with."""
    import pytest
    chains = read_manifest(folder)
    shown = f"tests/data/{Path(folder).name}"
    assert chain not in chains, (f"{shown} was recorded with this toolchain ({chain}) but has no readable entry "
                                 f"{entry} for naive.cu: record it again ({record_env}=1)")
    differs = sorted({k for c in chains for k in c if c.get(k) != chain.get(k)}) or ["no recordings"]
    pytest.skip(f"{shown} holds no recording of this toolchain ({toolchain_words}; differs in: "
                f"{', '.join(differs)}); record with {record_env}=1")


def recorded_with(folder: Path | None = None) -> list[dict]:
    """The toolchains (:func:`toolchain`) the folder's listings were recorded with ([] if none)."""
    return read_manifest(folder or MEMO_DIR)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary name in the same folder, then rename (a
    reader in another process sees the old file or the new one, never a part)."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, path)


def record(argv: list[str], cubin: bytes, listing: str, folder: Path | None = None) -> None:
    """Write ``listing`` as the recorded listing of ``cubin`` by ``argv`` (its first line the key's
    inputs; to a temporary name, then renamed: the xdist workers may record the same cubin at
    once) and add the toolchain to :data:`MANIFEST`. Never raises."""
    found, chain = inputs(argv, cubin), toolchain(argv)
    if found is None or not listing:
        return
    name = name_of(found)
    folder = Path(folder or MEMO_DIR)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        text = HEADER + json.dumps(found, sort_keys=True) + "\n" + listing
        write_atomically(folder / f"{name}.sass.xz", lzma.compress(text.encode("utf-8"), preset=9))
        add_to_manifest(folder, chain)
    except OSError:
        pass
