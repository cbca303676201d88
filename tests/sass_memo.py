"""Recorded disassemblies for the test suite (not a test module; tests/conftest.py uses it).

What the disassembler prints for a cubin is a function of three things only: the cubin's bytes,
the disassembler binary, and the flags gemmlab passes it (:func:`gemmlab.gpu.sass.disassemble`
decides its ``-ndf`` run from the cubin and the listing alone). Each run costs about 0.3 CPU s
of fixed start-up (nvdisasm 13.x on the 2-core CI machine) however small the cubin, and the suite
disassembles some 80 distinct cubins: about 30 CPU s a run. So the listings are kept here,
content-addressed, one xz file each in ``tests/data/sass_memo/``, named by the SHA-256 of
(disassembler file name, its flags, the SHA-256 of the disassembler binary's bytes, the SHA-256 of
the cubin). A test still compiles every cubin it checks with NVRTC; only a byte-identical cubin
disassembled by a byte-identical binary reads the recorded listing, and gemmlab's own analysis
(:func:`gemmlab.gpu.sass.summarize`) runs on it as on a fresh one. Any change to a kernel, a
header, an option, NVRTC or the disassembler gives another name: the disassembler runs (a miss
costs time, never a wrong answer).

Recording: ``GEMMLAB_TEST_SASS_RECORD=1 python -m pytest`` writes the listing of each miss here.
To drop entries no test reads any more, record into an empty folder:
``rm -r tests/data/sass_memo && GEMMLAB_TEST_SASS_RECORD=1 python -m pytest`` (an unchanged
listing gives the same file, byte for byte, so git sees only the kernels that changed).
tests/test_sass_memo.py checks a recorded listing against the disassembler itself.
"""

from __future__ import annotations

import functools
import hashlib
import lzma
import os
from pathlib import Path

#: the folder of recorded listings (``<key>.sass.xz``, :func:`key`)
MEMO_DIR = Path(__file__).resolve().parent / "data" / "sass_memo"
#: set to 1 to write the listing of each miss into :data:`MEMO_DIR`
RECORD_ENV = "GEMMLAB_TEST_SASS_RECORD"


@functools.lru_cache(maxsize=8)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tool_digest(path: str) -> str | None:
    """SHA-256 of the disassembler binary at ``path`` (hashed once a process while its size and
    mtime stay), or None where it cannot be read."""
    try:
        st = os.stat(path)
        return _file_digest(os.path.realpath(path), st.st_size, st.st_mtime_ns)
    except OSError:
        return None


def key(argv: list[str], cubin: bytes) -> str | None:
    """The name of ``cubin``'s listing by the disassembler command ``argv`` (path, then flags;
    :func:`gemmlab.gpu.sass.find_disassembler`), or None where the binary cannot be read."""
    tool = tool_digest(argv[0])
    if tool is None:
        return None
    parts = [os.path.basename(argv[0]), *argv[1:], tool, hashlib.sha256(cubin).hexdigest()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def lookup(argv: list[str], cubin: bytes, folder: Path = MEMO_DIR) -> str | None:
    """The recorded listing of ``cubin`` by ``argv``, or None (none recorded, unreadable)."""
    name = key(argv, cubin)
    if name is None:
        return None
    try:
        return lzma.decompress((folder / f"{name}.sass.xz").read_bytes()).decode("utf-8")
    except (OSError, lzma.LZMAError, UnicodeDecodeError):
        return None


def recording() -> bool:
    """Whether misses are written into the memo (``GEMMLAB_TEST_SASS_RECORD=1``)."""
    return os.environ.get(RECORD_ENV) == "1"


def record(argv: list[str], cubin: bytes, listing: str, folder: Path = MEMO_DIR) -> None:
    """Write ``listing`` as the recorded listing of ``cubin`` by ``argv`` (to a temporary name,
    then renamed: the xdist workers may record the same cubin at once). Never raises."""
    name = key(argv, cubin)
    if name is None or not listing:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        tmp.write_bytes(lzma.compress(listing.encode("utf-8"), preset=9))
        os.replace(tmp, folder / f"{name}.sass.xz")
    except OSError:
        pass
