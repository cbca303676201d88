"""Stage 1: compile a kernel source with NVRTC (cuda.core ``Program``) to a cubin.

Always cubin for one concrete SM target (the device's own in ``mode=run``): PTX made by an
NVRTC newer than the driver fails to load (shared/notes/cuda-core.md). Works without a GPU.
Compiled objects are cached in-process (key: source SHA-256, options, name expression and the
disk-cache settings), so a sweep compiles each distinct instance once; with ``persistent=True``
they also go to the on-disk cache of :mod:`gemmlab.cache` (across processes).
"""

from __future__ import annotations

import hashlib
import io
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gemmlab.errors import CompileError

_CACHE: dict[tuple, "CompiledKernel"] = {}


@dataclass(frozen=True)
class CompileOptions:
    """NVRTC options gemmlab uses (model: cuda.core ``ProgramOptions``).

    Attributes:
        arch: SM target without prefix, e.g. ``"90"``; the cubin is built for ``sm_<arch>``.
        std: C++ dialect.
        fma: allow fused multiply-add contraction (NVRTC default: on).
        use_fast_math: NVRTC ``--use_fast_math`` (default off: IEEE float32 arithmetic).
    """

    arch: str = "90"
    std: str = "c++17"
    fma: bool = True
    use_fast_math: bool = False

    def flags(self) -> list[str]:
        """The NVRTC command-line equivalent, for the record."""
        return [f"-arch=sm_{self.arch}", f"-std={self.std}", f"-fmad={'true' if self.fma else 'false'}",
                *(["-use_fast_math"] if self.use_fast_math else []), "-Xptxas=-v"]


@dataclass(frozen=True)
class Resources:
    """Per-thread and per-block resources ptxas reports for the entry function.

    Units: registers per thread; bytes for spills, stack frame and static shared memory.
    """

    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_frame_bytes: int
    static_shared_bytes: int


@dataclass
class CompiledKernel:
    """The outcome of one NVRTC compilation (plain data plus the cuda.core ``ObjectCode``)."""

    name_expression: str
    lowered_name: str
    source_file: str
    source_sha256: str
    options: CompileOptions
    nvrtc_version: str
    compile_ms: float
    resources: Resources | None  # None: NVRTC returned no ptxas report (see ``log``)
    log: str
    object_code: object = field(repr=False, default=None)
    cache_hit: bool = False
    disk_cache: str = "off"
    original_compile_ms: float | None = None

    def record(self) -> dict:
        """JSON-ready fields for ``result.json`` (no binary)."""
        return {"source_file": self.source_file, "source_sha256": self.source_sha256,
                "name_expression": self.name_expression, "lowered_name": self.lowered_name,
                "nvrtc_version": self.nvrtc_version, "options": self.options.flags(),
                "compile_ms": round(self.compile_ms, 3), "cache_hit_in_process": self.cache_hit,
                "disk_cache": self.disk_cache, "original_compile_ms": self.original_compile_ms,
                "resources": asdict(self.resources) if self.resources else None}


def nvrtc_version() -> str:
    """NVRTC's version as ``"major.minor"`` (cuda.bindings ``nvrtcVersion``)."""
    from cuda.bindings import nvrtc
    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def parse_ptxas(log: str, lowered_name: str) -> Resources:
    """Extract the resource report of ``lowered_name`` from ``ptxas -v`` output.

    Raises:
        CompileError: the log has no report for that function.
    """
    text = log.replace("\x00", "")
    start = text.find(f"Compiling entry function '{lowered_name}'")
    if start < 0:
        raise CompileError(f"ptxas printed no resource report for {lowered_name}", log)
    block = text[start:]
    nxt = block.find("Compiling entry function", 10)
    block = block if nxt < 0 else block[:nxt]

    def grab(pattern: str) -> int:
        m = re.search(pattern, block)
        return int(m.group(1)) if m else 0

    return Resources(registers=grab(r"Used (\d+) registers"),
                     spill_store_bytes=grab(r"(\d+) bytes spill stores"),
                     spill_load_bytes=grab(r"(\d+) bytes spill loads"),
                     stack_frame_bytes=grab(r"(\d+) bytes stack frame"),
                     static_shared_bytes=grab(r"(\d+) bytes smem"))


def compile_kernel(source_path: Path, name_expression: str, options: CompileOptions,
                   persistent: bool = False, cache_folder: str | None = None,
                   driver_version: str = "none") -> CompiledKernel:
    """Compile the template instance ``name_expression`` of ``source_path`` to a cubin.

    Args:
        source_path: the ``.cu`` file (read as UTF-8; its SHA-256 is recorded).
        name_expression: C++ instance to emit, e.g. ``"gemm_tiled<64, 64, 16, 8, 2>"``.
        options: target and flags.

    Args (continued):
        persistent: also use the on-disk cache (:mod:`gemmlab.cache`) in ``cache_folder``.
        driver_version: part of the on-disk key ("none" without a driver).

    Returns:
        CompiledKernel; ``cache_hit`` is true when this process compiled the same inputs before
        (then ``compile_ms`` is that earlier call's time: the NVRTC time, or the load time of a
        disk hit); ``disk_cache`` is ``hit``, ``miss`` or ``off``; ``original_compile_ms`` is
        the NVRTC time recorded with a disk entry.

    Raises:
        CompileError: NVRTC or ptxas failed; the message names the file and options, ``log``
            holds the full NVRTC log with line numbers.
    """
    from cuda.core import Program, ProgramOptions

    source = Path(source_path).read_text(encoding="utf-8")
    sha = hashlib.sha256(source.encode()).hexdigest()
    key = (sha, options, name_expression, persistent, cache_folder, driver_version)
    if key in _CACHE:
        cached = _CACHE[key]
        return CompiledKernel(**{**cached.__dict__, "cache_hit": True})
    disk_key = folder = None
    if persistent:
        from gemmlab import cache
        folder = cache.cache_dir(cache_folder)
        disk_key = cache.make_key(sha, options.flags(), name_expression, options.arch, nvrtc_version(),
                                  driver_version)
        started = time.perf_counter()
        entry = cache.load(folder, disk_key)
        try:
            res_fields = entry[1].get("resources") if entry else None
            cached_resources = Resources(**res_fields) if res_fields else None
        except TypeError:  # fields that are not Resources' fields: a damaged entry, i.e. a miss
            entry = None
        if entry is not None:
            from cuda.core import ObjectCode
            cubin, meta = entry
            # the same symbol mapping Program.compile produces: name expression -> mangled name (bytes)
            code = ObjectCode.from_cubin(cubin, name=Path(source_path).name,
                                         symbol_mapping={name_expression: meta["lowered_name"].encode()})
            compiled = CompiledKernel(
                name_expression=name_expression, lowered_name=meta["lowered_name"], source_file=str(source_path),
                source_sha256=sha, options=options, nvrtc_version=meta["nvrtc_version"],
                compile_ms=(time.perf_counter() - started) * 1e3, resources=cached_resources,
                log=meta.get("log", ""), object_code=code, disk_cache="hit",
                original_compile_ms=meta.get("compile_ms"))
            _CACHE[key] = compiled
            return compiled

    program_options = ProgramOptions(name=Path(source_path).name, arch=f"sm_{options.arch}", std=options.std,
                                     fma=options.fma, use_fast_math=options.use_fast_math, ptxas_options=["-v"])
    resources = None
    for _attempt in range(3):  # NVRTC 13.0 on the H200 sometimes returns an empty program log
        log = io.StringIO()
        started = time.perf_counter()
        try:
            code = Program(source, "c++", program_options).compile(
                "cubin", name_expressions=(name_expression,), logs=log)
        except Exception as exc:  # cuda.core raises NVRTCError (a RuntimeError) with the log inside
            text = str(exc)
            first = next((ln.strip() for ln in text.splitlines() if "error" in ln and "(" in ln),
                         text.splitlines()[0] if text else type(exc).__name__)
            raise CompileError(f"NVRTC failed on {Path(source_path).name} for {name_expression} "
                               f"(options: {' '.join(options.flags())}): {first}", text) from None
        compile_ms = (time.perf_counter() - started) * 1e3
        lowered = code.symbol_mapping.get(name_expression, name_expression)
        lowered = lowered.decode() if isinstance(lowered, bytes) else lowered
        text = log.getvalue().replace("\x00", "")
        try:
            resources = parse_ptxas(text, lowered)
            break
        except CompileError:
            continue
    compiled = CompiledKernel(name_expression=name_expression, lowered_name=lowered,
                              source_file=str(source_path), source_sha256=sha, options=options,
                              nvrtc_version=nvrtc_version(), compile_ms=compile_ms,
                              resources=resources, log=text, object_code=code)
    if persistent:
        compiled.disk_cache = "miss"
    if persistent and resources is not None:  # never make a missing ptxas report permanent
        from gemmlab import cache
        cache.store(folder, disk_key, bytes(code.code), {
            "lowered_name": lowered, "nvrtc_version": compiled.nvrtc_version, "compile_ms": compile_ms,
            "resources": asdict(resources) if resources else None, "log": text, "name_expression": name_expression,
            "source_file": str(source_path), "flags": options.flags()})
    _CACHE[key] = compiled
    return compiled
