"""Recorded disassemblies for the test suite (not a test module; tests/conftest.py uses it).

What the disassembler prints for a cubin is a function of the cubin's bytes, the disassembler
binary, and how gemmlab runs it (:func:`gemmlab.gpu.sass.disassemble`: its flags, and the ``-ndf``
run it decides from the cubin and the listing). Each run costs about 0.3 CPU s of fixed start-up
(nvdisasm 13.x on the 2-core CI machine) however small the cubin, and the suite disassembles some
80 distinct cubins: about 30 CPU s a run. So the listings are kept here, in
``tests/data/sass_memo/`` (packed, or one xz file each where recorded since: below), named by :func:`key`: the SHA-256 of the disassembler's file name and
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
left to the disassembler), then pack. An unchanged listing gives the same file, byte for byte, with
the same xz library, and the same entries the same pack.

Packing (this folder's and tests/data/nvrtc_memo's): ``python tests/sass_memo.py --pack`` moves
the recordings of each folder into its :data:`PACK` (``--committed``: only those git tracks;
``--prune``: leaves out the NVRTC recordings of a source or header the checkout tracks only in
other versions and the listings of only their cubins, :data:`USAGE`), one solid xz tar of their plain text (the
listings of one kernel's instances are much alike: 4.0 MB of one xz file each became 2.2 MB, the
NVRTC outputs 2.3 MB became 1.0 MB; issue 45's checkout size). A lookup reads the entry's own xz
file where there is one (what recording writes), else the pack's member (:func:`read_entry`). In
the suite each pack is unpacked once a session into a folder its processes share
(:data:`UNPACKED_ENV`; ~0.4 CPU s for both), so a process, a point worker included, reads one
plain file a hit.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import lzma
import os
import re
import sys
import tarfile
from pathlib import Path
from types import MappingProxyType

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
#: a folder's packed recordings: one xz tar of the entries' plain text, member ``<name>.sass`` for
#: the file ``<name>.sass.xz`` (:func:`pack`, :func:`read_entry`)
PACK = "packed.tar.xz"
#: a folder the session's processes share, where each pack is unpacked once (tests/conftest.py
#: sets it; unset, a process unpacks a pack in memory)
UNPACKED_ENV = "GEMMLAB_TEST_MEMO_UNPACKED"


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
    data = read_entry(Path(folder or MEMO_DIR), f"{name_of(found)}.sass.xz")
    try:
        text = data.decode("utf-8")
    except (AttributeError, UnicodeDecodeError):
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
    """The entries ``*<suffix>`` of ``folder`` (its files and its pack's: :func:`entry_names`) whose first line is not ``header`` followed by the JSON
    of inputs whose name (``name_of``) is the file's, or None where the folder holds none."""
    names = entry_names(Path(folder), suffix)
    if not names:
        return None
    wrong = []
    for name in names:
        first = (read_entry(Path(folder), name) or b"").partition(b"\n")[0]
        try:
            text = first.decode("utf-8")
            if not text.startswith(header) or name_of(json.loads(text[len(header):])) + suffix != name:
                wrong.append(name)
        except ValueError:
            wrong.append(name)
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


def _member(name: str) -> str:
    """The pack's member name of the entry file ``name`` (``<name>.sass.xz``: ``<name>.sass``)."""
    return name[:-len(".xz")] if name.endswith(".xz") else name


def _members(pack: Path) -> dict[str, bytes]:
    """``{member name: plain bytes}`` of a :data:`PACK` (regular files named without a folder;
    anything else in it is left out). Raises OSError, tarfile.TarError or lzma.LZMAError."""
    found = {}
    with tarfile.open(pack, "r:xz") as tar:
        for member in tar:
            if member.isfile() and "/" not in member.name and not member.name.startswith("."):
                found[member.name] = tar.extractfile(member).read()
    return found


@functools.lru_cache(maxsize=4)
def _in_memory(pack: str, digest: str) -> MappingProxyType:
    """The members of the pack at ``pack`` (SHA-256 ``digest``), unpacked once a process; empty
    where it cannot be read."""
    try:
        return MappingProxyType(_members(Path(pack)))
    except (OSError, tarfile.TarError, lzma.LZMAError, EOFError):
        return MappingProxyType({})


def _unpacked(shared: Path, pack: Path, digest: str) -> Path:
    """The folder ``shared/<digest>`` holding the pack's members as plain files: unpacked by the
    first process that asks (under a lock, to a temporary name, then renamed), read by the
    others. Raises OSError, tarfile.TarError or lzma.LZMAError."""
    target = shared / digest
    if target.is_dir():
        return target
    shared.mkdir(parents=True, exist_ok=True)
    with open(shared / f".{digest}.lock", "w") as lock:
        try:
            import fcntl
            fcntl.flock(lock, fcntl.LOCK_EX)
        except (ImportError, OSError):
            pass  # no lock: two processes may both unpack; the first rename wins
        if not target.is_dir():
            tmp = shared / f".{digest}.{os.getpid()}"
            tmp.mkdir(exist_ok=True)
            for name, data in _members(pack).items():
                (tmp / name).write_bytes(data)
            try:
                os.rename(tmp, target)
            except OSError:
                if not target.is_dir():
                    raise
    return target


def read_entry(folder: Path, name: str) -> bytes | None:
    """The plain bytes of the recording ``name`` (``<key>.sass.xz`` or ``<key>.nvrtc.xz``) of
    ``folder``: its own xz file where there is one, else its member in the folder's :data:`PACK`
    (unpacked once a session into ``$GEMMLAB_TEST_MEMO_UNPACKED``, else once a process in
    memory), or None: neither there, or an xz file or pack that fails its check."""
    try:
        return lzma.decompress((Path(folder) / name).read_bytes())
    except FileNotFoundError:
        pass
    except (OSError, lzma.LZMAError):
        return None
    pack = Path(folder) / PACK
    digest = file_digest(pack)
    if digest is None:
        return None
    shared = os.environ.get(UNPACKED_ENV)
    if not shared:
        return _in_memory(str(pack), digest).get(_member(name))
    try:
        return (_unpacked(Path(shared), pack, digest) / _member(name)).read_bytes()
    except (OSError, tarfile.TarError, lzma.LZMAError, EOFError):
        return None


def entry_names(folder: Path, suffix: str) -> list[str]:
    """The recordings of ``folder`` by file name (``<key><suffix>``), sorted: its own files and the
    members of its :data:`PACK` (as the file names they were packed from)."""
    names = {p.name for p in Path(folder).glob(f"*{suffix}")}
    pack = Path(folder) / PACK
    digest = file_digest(pack)
    if digest is not None:
        shared = os.environ.get(UNPACKED_ENV)
        try:
            members = os.listdir(_unpacked(Path(shared), pack, digest)) if shared else _in_memory(str(pack), digest)
        except (OSError, tarfile.TarError, lzma.LZMAError, EOFError):
            members = []
        names |= {m + ".xz" for m in members if (m + ".xz").endswith(suffix)}
    return sorted(names)


def pack(folder: Path, suffix: str, only=None, drop=()) -> tuple[int, int]:
    """Move the recordings ``*<suffix>`` of ``folder`` (those named in ``only``, file names, where
    given: e.g. only the committed ones while others record beside) into its :data:`PACK` (merged
    with the members already there; a file replaces the member of its name), leave out the entries
    named in ``drop`` (file names: recordings no test can read any more), then remove the files
    packed: ``(entries in the pack, its bytes)``. Deterministic: members sorted by name, no time
    stamps or owners, xz preset 9 (the same entries and xz library give the same bytes). A file
    that fails its xz check stops it (ValueError naming the file) before anything is written."""
    folder = Path(folder)
    target = folder / PACK
    members = dict(_members(target)) if target.exists() else {}
    files = sorted(p for p in folder.glob(f"*{suffix}") if only is None or p.name in set(only))
    for path in files:
        try:
            members[_member(path.name)] = lzma.decompress(path.read_bytes())
        except lzma.LZMAError as exc:
            raise ValueError(f"{path}: not a readable xz file ({exc}); record it again or remove it") from exc
    for name in drop:
        members.pop(_member(name), None)
    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(members[name]))
    data = lzma.compress(plain.getvalue(), preset=9)
    write_atomically(target, data)
    for path in files:
        path.unlink()
    return len(members), len(data)


def stale_listings(folder: Path, stale_cubins: set[str], kept_cubins: set[str]) -> list[str]:
    """The listings of ``folder`` (packed or not) of a cubin only stale NVRTC recordings made
    (in ``stale_cubins``, not in ``kept_cubins``: tests/nvrtc_memo.py's ``stale``), by file name."""
    found = []
    for name in entry_names(Path(folder), ".sass.xz"):
        first = (read_entry(Path(folder), name) or b"").partition(b"\n")[0].decode("utf-8", "replace")
        try:
            cubin = json.loads(first[len(HEADER):])["cubin_sha256"]
        except (ValueError, KeyError, TypeError):
            continue
        if cubin in stale_cubins and cubin not in kept_cubins:
            found.append(name)
    return found


def _checkout_versions(root: Path) -> dict[str, set[str]]:
    """``{file name: SHA-256 of its working-tree and HEAD versions}`` of the git checkout's tracked
    ``.cu``/``.cuh``/``.h`` files (what a recording's source or header can be). Raises
    subprocess.CalledProcessError where git cannot list them."""
    import subprocess
    tracked = subprocess.run(["git", "ls-files", "*.cu", "*.cuh", "*.h"], cwd=root, check=True,
                             capture_output=True, text=True).stdout.split()
    versions: dict[str, set[str]] = {}
    for rel in tracked:
        mine = versions.setdefault(Path(rel).name, set())
        if (root / rel).is_file():
            mine.add(hashlib.sha256((root / rel).read_bytes()).hexdigest())
        head = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=root, capture_output=True)
        if head.returncode == 0:
            mine.add(hashlib.sha256(head.stdout).hexdigest())
    return versions


USAGE = ("usage: python tests/sass_memo.py --pack [--committed] [--prune]\n"
         "  --pack       move tests/data/sass_memo's and nvrtc_memo's recordings into their packs\n"
         "  --committed  only the recordings git tracks (others may be recording beside you)\n"
         "  --prune      leave out the recordings no lookup can read any more (their source or a\n"
         "               header matches no tracked file's working-tree or HEAD version)")


if __name__ == "__main__":
    flags = set(sys.argv[1:])
    if "--pack" not in flags or not flags <= {"--pack", "--committed", "--prune"}:
        sys.exit(USAGE)
    import subprocess
    import nvrtc_memo
    root = MEMO_DIR.parents[2]
    folders = ((MEMO_DIR.parent / "nvrtc_memo", ".nvrtc.xz"), (MEMO_DIR, ".sass.xz"))
    drops = {folder: [] for folder, _ in folders}
    if "--prune" in flags:
        names, gone, kept = nvrtc_memo.stale(folders[0][0], _checkout_versions(root))
        drops[folders[0][0]] = names
        drops[MEMO_DIR] = stale_listings(MEMO_DIR, gone, kept)
    for memo, ending in folders:
        only = None
        if "--committed" in flags:
            only = {Path(t).name for t in subprocess.run(["git", "ls-files", str(memo.relative_to(root))], cwd=root,
                                                         check=True, capture_output=True, text=True).stdout.split()}
        count, size = pack(memo, ending, only=only, drop=drops[memo])
        for name in drops[memo]:
            (memo / name).unlink(missing_ok=True)
        print(f"{memo}: {count} entries, {size} bytes ({len(drops[memo])} dropped)")
