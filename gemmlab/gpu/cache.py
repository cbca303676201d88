"""Persistent on-disk compile cache: cubins and their compile metadata, shared across processes.

Key: SHA-256 of the exact source text's SHA-256, the SHA-256 of every included file, the NVRTC options, the name expression, the
target arch, the NVRTC version and the CUDA driver version ("none" without a driver), so a change
to any of them recompiles. An entry is two files, ``<key>.cubin`` and ``<key>.json``; the JSON
holds the cubin's SHA-256, the symbol mapping, the ptxas resources, the original compile time and
the SASS of the cubin (reused on a hit when the same disassembler binary made it,
:func:`gemmlab.gpu.sass.reuse`).
Beside the entries, ``sass/<cubin SHA-256>.json`` keeps each cubin's disassembly by the cubin's
bytes alone (:func:`load_sass`, :func:`store_sass`): a compile whose key is new but whose cubin is
not (another driver version, a source edit that leaves the code alone, an entry written without
SASS or by another disassembler) reads it instead of running the disassembler again.
Both are written to a temporary name and renamed into place (atomic for readers). A missing,
truncated or corrupt entry (unreadable JSON, wrong schema, cubin digest mismatch) is a miss, never
a crash. Location: ``cache.dir``, else ``$GEMMLAB_CACHE_DIR``, else ``~/.cache/gemmlab/compile``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

SCHEMA = "gemmlab.gpu.compile-cache/1"


def cache_dir(configured: str | None = None) -> Path:
    """The cache folder (created on first write)."""
    if configured:
        return Path(configured).expanduser()
    env = os.environ.get("GEMMLAB_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gemmlab" / "compile"


def make_key(source_sha256: str, flags: list[str], name_expression: str, arch: str, nvrtc_version: str,
             driver_version: str, extra: dict | None = None) -> str:
    """Hex SHA-256 over every input that can change the cubin. ``extra`` (JSON-ready) holds the
    included files' digests, the CUDA header wheels' versions and the further instances of a
    launch plan; None (no includes, one instance) keeps the keys of earlier entries valid."""
    fields = {"source": source_sha256, "flags": list(flags), "name": name_expression, "arch": arch,
              "nvrtc": nvrtc_version, "driver": driver_version}
    if extra is not None:
        fields["extra"] = extra
    material = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


def load(folder: Path, key: str) -> tuple[bytes, dict] | None:
    """``(cubin, metadata)`` for ``key``, or None on a miss (absent or damaged entry)."""
    try:
        meta = json.loads((folder / f"{key}.json").read_text())
        cubin = (folder / f"{key}.cubin").read_bytes()
    except (OSError, ValueError):
        return None
    if (not isinstance(meta, dict) or meta.get("schema") != SCHEMA or meta.get("key") != key
            or meta.get("cubin_sha256") != hashlib.sha256(cubin).hexdigest()
            or not all(isinstance(meta.get(f), str) for f in ("lowered_name", "nvrtc_version"))
            or not (meta.get("resources") is None or isinstance(meta.get("resources"), dict))):
        return None
    return cubin, meta


def store(folder: Path, key: str, cubin: bytes, metadata: dict) -> str | None:
    """Write an entry atomically; errors (read-only disk, a file where the folder should be, ...) only
    cost the cache, never the run: returns None when stored, else the one-line reason (the record
    keeps it as ``compile.disk_cache_error`` and the summary says it)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        meta = dict(metadata, schema=SCHEMA, key=key, cubin_sha256=hashlib.sha256(cubin).hexdigest())
        for suffix, data in ((".cubin", cubin), (".json", json.dumps(meta).encode())):
            tmp = folder / f".{key}{suffix}.{os.getpid()}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, folder / f"{key}{suffix}")
    except OSError as exc:
        if folder.exists() and not folder.is_dir():
            return f"{folder} is not a folder"
        return f"{folder}: {exc.strerror or exc}"
    return None


def _sass_path(folder: Path, cubin: bytes) -> Path:
    return folder / "sass" / f"{hashlib.sha256(cubin).hexdigest()}.json"


def load_sass(folder: Path, cubin: bytes) -> dict | None:
    """The stored disassembly of ``cubin`` (what :func:`gemmlab.gpu.sass.stored` keeps), or None
    (absent, unreadable, not a JSON object). The caller checks its disassembler
    (:func:`gemmlab.gpu.sass.reuse`)."""
    try:
        entry = json.loads(_sass_path(Path(folder), cubin).read_text())
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def store_sass(folder: Path, cubin: bytes, entry: dict) -> None:
    """Keep ``entry`` (:func:`gemmlab.gpu.sass.stored`) as the disassembly of ``cubin``, atomically;
    errors only cost the cache."""
    path = _sass_path(Path(folder), cubin)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, path)
    except OSError:
        pass
