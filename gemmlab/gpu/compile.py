"""Stage 1: compile a kernel source with NVRTC (cuda.core ``Program``) to a cubin.

Always cubin for one concrete SM target (the device's own in ``mode=run``): PTX made by an
NVRTC newer than the driver fails to load (``CUDA_ERROR_UNSUPPORTED_PTX_VERSION``). Works without
a GPU.
Compiled objects are kept in the compile memo of the session that runs the point
(:class:`CompileMemo`; key: source SHA-256, options, name expression and the disk-cache settings),
so a sweep compiles each distinct instance once; with ``persistent=True``
they also go to the on-disk cache of :mod:`gemmlab.gpu.cache` (across processes).
"""

from __future__ import annotations

import functools
import hashlib
import io
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gemmlab.contract.session_slot import SessionSlot
from gemmlab.errors import CompileError, ConfigError
from gemmlab.paths import KERNELS_DIR

class CompileMemo:
    """What one session's compiles keep in memory (the session, :class:`gemmlab.run.session.Session`,
    owns one: ``Session.compiles``; the lower layers reach the active session's through :func:`memo`).

    Attributes:
        modules: NVRTC compiles by every compile input (source SHA-256, options, name expressions,
            include hashes, CUDA header versions, disk-cache settings, driver, disassembly): a hit is
            returned as a copy marked ``cache_hit``.
        triton: Triton compiles by every compile input (:func:`gemmlab.gpu.triton_compile.compile_triton`).
        ptxas_logs: ptxas's report (the NVRTC program log) of each cubin compiled in this *process*,
            keyed by the cubin's SHA-256: NVRTC 13.0 (the H200's toolkit) returns an empty log when it
            compiles again what it compiled before in the process (seen there: the same source,
            options and name expressions give a 327-character log, then ''; a source that differs only
            by a comment, too; NVRTC 13.5 logs every time). The report (registers, spills, shared and
            stack bytes of each function) is a property of the cubin, so such a repeat takes it from
            here. NVRTC's state is the process's, so every memo of the process shares the default
            session's dict, and :meth:`clear` keeps it (a renewed worker still runs in the process
            that compiled before).
    """

    def __init__(self, ptxas_logs: dict | None = None):
        self.modules: dict[tuple, CompiledKernel] = {}
        self.triton: dict[tuple, Any] = {}
        self.ptxas_logs: dict[str, str] = ptxas_logs if ptxas_logs is not None else _MEMO.default().ptxas_logs

    def clear(self) -> None:
        """Forget the compiled modules (NVRTC and Triton); ptxas's reports stay (see the class)."""
        self.modules.clear()
        self.triton.clear()


#: the default session's memo (:func:`gemmlab.run.session.default`: a point run outside any
#: session, a plugin test, a notebook, and the worker process's points use it) and the memo of the
#: session whose point runs now (:meth:`gemmlab.run.session.Session.active`)
_MEMO: SessionSlot[CompileMemo] = SessionSlot("gemmlab.gpu.compile.memo", default=CompileMemo(ptxas_logs={}))


def memo() -> CompileMemo:
    """The compile memo of the active session (the default session's when none is active)."""
    return _MEMO.get()


def default_memo() -> CompileMemo:
    """The default session's compile memo (one a process)."""
    return _MEMO.default()


def using(compiles: CompileMemo):
    """Inside the block, :func:`compile_kernel` and the Triton compiles keep their modules in
    ``compiles`` (a session's; :meth:`gemmlab.run.session.Session.active`)."""
    return _MEMO.using(compiles)


def clear_cache() -> None:
    """Empty the active session's compile memo (and the remembered CUDA header folders): the next
    :func:`compile_kernel` compiles, or loads from the on-disk cache, as a new process would. For
    tests and long-lived processes (see :func:`gemmlab.clear_caches`)."""
    memo().clear()
    cuda_include_dirs.cache_clear()


@dataclass(frozen=True)
class CompileOptions:
    """NVRTC options gemmlab uses (model: cuda.core ``ProgramOptions``).

    Attributes:
        arch: SM target without prefix, e.g. ``"90"`` (or ``"90a"``); the cubin is built for
            :attr:`target`.
        std: C++ dialect (None: NVRTC's default).
        fma: allow fused multiply-add contraction (NVRTC default: on).
        use_fast_math: NVRTC ``--use_fast_math`` (default off: IEEE float32 arithmetic).
        arch_specific: build for ``sm_<arch>a`` (wgmma, setmaxnreg; plugin's ``KernelOptions``).
        max_registers: ``-maxrregcount``, or None.
        defines: ``(name, value)`` macro pairs, sorted.
        lineinfo: ``-lineinfo``.
        ptxas: further ptxas options (``-Xptxas=...``).
        default_device: ``-default-device`` (functions without execution space are device
            functions, so plain ``constexpr`` helpers compile); always on in gemmlab.
    """

    arch: str = "90"
    std: str | None = "c++17"
    fma: bool = True
    use_fast_math: bool = False
    arch_specific: bool = False
    max_registers: int | None = None
    defines: tuple[tuple[str, str], ...] = ()
    lineinfo: bool = False
    ptxas: tuple[str, ...] = ()
    default_device: bool = True

    @property
    def target(self) -> str:
        """The SM target actually compiled for, e.g. ``sm_90`` or ``sm_90a``."""
        suffix = "a" if self.arch_specific and self.arch[-1].isdigit() else ""
        return f"sm_{self.arch}{suffix}"

    def flags(self) -> list[str]:
        """The NVRTC command-line equivalent, for the record."""
        return [f"-arch={self.target}", *([f"-std={self.std}"] if self.std else []),
                f"-fmad={'true' if self.fma else 'false'}",
                *(["-use_fast_math"] if self.use_fast_math else []),
                *(["-default-device"] if self.default_device else []),
                *([f"-maxrregcount={self.max_registers}"] if self.max_registers else []),
                *(f"-D{k}={v}" for k, v in self.defines), *(["-lineinfo"] if self.lineinfo else []),
                *(f"-Xptxas={o}" for o in self.ptxas), "-Xptxas=-v"]

    @classmethod
    def for_kernel(cls, arch: str, options) -> "CompileOptions":
        """Turn a plugin's :class:`~gemmlab.contract.hookspecs.KernelOptions` into compile options for
        ``arch``.

        ``KernelOptions.extra`` accepts ``-lineinfo``, ``-use_fast_math``, ``-fmad=true|false``
        and ``-Xptxas=<option>`` (the flags cuda.core's ``ProgramOptions`` can express).

        Raises:
            ConfigError: field ``kernel.options``: a bad define name, register cap or flag.
        """
        defines = []
        for name, value in dict(options.defines).items():
            if (not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
                    or isinstance(value, bool) or not isinstance(value, (int, str)) or "\n" in str(value)):
                raise ConfigError("kernel.options", f"define {name!r}={value!r}: names are C identifiers, values "
                                  "ints or one-line strings")
            defines.append((name, str(value)))
        cap = options.max_registers
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or not 16 <= cap <= 255):
            raise ConfigError("kernel.options", f"max_registers must be an int in 16..255 or None, got {cap!r}")
        fma, fast, lineinfo, ptxas = True, False, False, []
        for flag in options.extra:
            if flag == "-lineinfo":
                lineinfo = True
            elif flag == "-use_fast_math":
                fast = True
            elif flag in ("-fmad=true", "-fmad=false"):
                fma = flag.endswith("true")
            elif isinstance(flag, str) and flag.startswith("-Xptxas=") and len(flag) > 8 and flag != "-Xptxas=-v":
                ptxas.append(flag[8:])
            else:
                raise ConfigError("kernel.options", f"extra flag {flag!r} is not supported; allowed: -lineinfo, "
                                  "-use_fast_math, -fmad=true|false, -Xptxas=<option>")
        return cls(arch=arch, std=options.std, fma=fma, use_fast_math=fast, arch_specific=bool(options.arch_specific),
                   max_registers=cap, defines=tuple(sorted(defines)), lineinfo=lineinfo, ptxas=tuple(ptxas))

    def program_options(self, name: str, include_dirs: list[str]):
        """The cuda.core ``ProgramOptions`` for these options."""
        from cuda.core import ProgramOptions
        return ProgramOptions(name=name, arch=self.target, std=self.std, fma=self.fma,
                              use_fast_math=self.use_fast_math, ptxas_options=["-v", *self.ptxas],
                              device_as_default_execution_space=self.default_device or None,
                              max_register_count=self.max_registers, lineinfo=self.lineinfo or None,
                              define_macro=list(self.defines) or None, include_path=include_dirs or None)


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
    """The outcome of one NVRTC compilation (plain data plus the cuda.core ``ObjectCode``).

    ``name_expressions`` holds every instance emitted (the main kernel first, then a launch
    plan's extra kernels); ``symbols`` maps each to its lowered (mangled) name. ``includes``
    lists the files the source includes, with their SHA-256 (part of every cache key). ``sass``
    is the disassembly summary (:func:`gemmlab.gpu.sass.disassemble`) and ``sass_text`` its text.
    """

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
    disk_cache_error: str | None = None  # why a compiled entry could not be stored (the cache folder unusable)
    original_compile_ms: float | None = None
    name_expressions: tuple[str, ...] = ()
    symbols: dict = field(default_factory=dict)
    includes: list = field(default_factory=list)
    sass: dict | None = None
    sass_text: str = field(repr=False, default="")

    def record(self) -> dict:
        """JSON-ready fields for ``result.json`` (no binary)."""
        out = {"source_file": self.source_file, "source_sha256": self.source_sha256,
               "name_expression": self.name_expression, "lowered_name": self.lowered_name,
               "nvrtc_version": self.nvrtc_version, "options": self.options.flags(),
               "arch": self.options.target, "includes": self.includes,
               "compile_ms": round(self.compile_ms, 3), "cache_hit_in_process": self.cache_hit,
               "disk_cache": self.disk_cache, "disk_cache_error": self.disk_cache_error,
               "original_compile_ms": self.original_compile_ms,
               "resources": asdict(self.resources) if self.resources else None, "sass": self.sass}
        if len(self.name_expressions) > 1:
            out["extra_name_expressions"] = list(self.name_expressions[1:])
        return out


# --- includes ------------------------------------------------------------------------------------

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_COMMENTS = re.compile(r'//[^\n]*|/\*.*?\*/', re.S)


def shared_include_dir() -> Path:
    """gemmlab's shared kernel headers: ``kernels/include`` (files included as ``"gemmlab/x.cuh"``)."""
    return KERNELS_DIR / "include"


@functools.lru_cache(maxsize=1)
def cuda_include_dirs() -> tuple[tuple[str, ...], str]:
    """CUDA's header folders from the pip wheels (nvidia-cuda-cccl before nvidia-cuda-runtime),
    located with cuda.pathfinder, and a version string of those wheels for cache keys. Empty
    when not installed (then ``#include <cuda/...>`` fails at compile time)."""
    dirs = []
    try:
        from cuda import pathfinder
        for lib in ("cccl", "cudart"):
            try:
                found = pathfinder.find_nvidia_header_directory(lib)
            except Exception:
                found = None
            if found and str(found) not in dirs:
                dirs.append(str(found))
    except ImportError:
        pass
    versions = []
    from importlib import metadata
    for dist in ("nvidia-cuda-cccl", "nvidia-cuda-runtime"):
        try:
            versions.append(f"{dist}=={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist}: absent")
    return tuple(dirs), ", ".join(versions)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


_CONDITIONAL = re.compile(r'^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b[ \t]*([^\n]*)', re.M)


def _live_text(body: str) -> str:
    """``body`` without comments and without the lines of ``#if 0`` groups (nested groups inside
    them too; an ``#else`` of such a group is kept, an ``#elif`` is kept as possibly live). Every
    other conditional is kept whole: the scan cannot know which branch NVRTC takes."""
    out, dead_at = [], None  # dead_at: nesting depth of the #if 0 being skipped
    depth = 0
    for line in _COMMENTS.sub("", body).splitlines():
        m = _CONDITIONAL.match(line)
        if m:
            word, rest = m.group(1), m.group(2).strip()
            if word in ("if", "ifdef", "ifndef"):
                depth += 1
                if dead_at is None and word == "if" and re.fullmatch(r"0+[uUlL]*|\(\s*0+\s*\)", rest):
                    dead_at = depth
                continue
            if word == "endif":
                if dead_at == depth:
                    dead_at = None
                depth = max(depth - 1, 0)
                continue
            if dead_at == depth:  # #else / #elif of the #if 0 itself: possibly live
                dead_at = None
            continue
        if dead_at is None:
            out.append(line)
    return "\n".join(out)


def scan_includes(source_path: Path, text: str | None = None) -> list[dict]:
    """Every file ``source_path`` includes, recursively through gemmlab's and the source's own
    headers, as ``{"name": as written, "file": resolved path, "sha256": hex}``.

    Allowed folders: the source's own folder (and below), gemmlab's shared headers
    (:func:`shared_include_dir`) and CUDA's pip-wheel headers (:func:`cuda_include_dirs`; not
    scanned further: their wheel versions are part of the cache key). Quoted includes are looked
    up where NVRTC looks first (beside the including file; for the source itself, whose program
    name has no folder, that is the current folder), then in those folders in :func:`compile_kernel`'s
    ``-I`` order (the source's folder, shared, CUDA); angle includes in those folders in that order
    (a header beside the source shadows a shared or CUDA one of the same name, as in NVRTC).
    Includes in comments and in ``#if 0`` groups are ignored; an include whose name a macro gives
    (``#include NAME``) and ``__has_include`` are not followed (:func:`has_unfollowed_include`
    tells; :func:`compile_kernel` then caches nothing).

    The scan never refuses what NVRTC would compile: a header found nowhere is left out (it may sit
    in a branch NVRTC skips, e.g. ``#ifndef __CUDACC_RTC__``, or be one of NVRTC's built-in headers;
    if NVRTC really needs it, its own error names it). Every header found is hashed (the cache key).

    Raises:
        ConfigError: field ``include``: a header found resolves outside the allowed folders.
    """
    source_path = Path(source_path).resolve()
    own = source_path.parent
    shared = shared_include_dir().resolve()
    cuda_dirs = [Path(d).resolve() for d in cuda_include_dirs()[0]]
    roots = [own, shared, *cuda_dirs]
    found: dict[Path, dict] = {}
    order: list[dict] = []
    pending = [(source_path, text if text is not None else source_path.read_text(encoding="utf-8"))]
    while pending:
        current, body = pending.pop(0)
        for match in _INCLUDE.finditer(_live_text(body)):
            kind, name = match.group(1), match.group(2).strip()
            where = f"{name!r} (included by {current.name})"
            beside = Path.cwd() if current == source_path else current.parent  # NVRTC's "beside"
            candidates = ([beside] if kind == '"' else []) + [own, shared, *cuda_dirs]  # then NVRTC's -I order
            resolved = None
            for base in candidates:
                path = (base / name).resolve()
                if path.is_file():
                    resolved = path
                    break
            if resolved is None:
                continue  # NVRTC's built-in header, a skipped branch, or NVRTC's own error names it
            if not any(_inside(resolved, r) for r in roots):
                raise ConfigError("include", f"{where} resolves to {resolved}, outside the allowed folders (the "
                                  f"source's folder, {shared}, CUDA's pip-wheel headers)")
            if resolved in found:
                continue
            entry = {"name": name, "file": str(resolved),
                     "sha256": hashlib.sha256(resolved.read_bytes()).hexdigest()}
            found[resolved] = entry
            order.append(entry)
            if not any(_inside(resolved, d) for d in cuda_dirs):
                pending.append((resolved, resolved.read_text(encoding="utf-8", errors="replace")))
    return order


#: what :func:`scan_includes` cannot follow: an include whose name a macro gives, ``__has_include``
_UNFOLLOWED = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[^ \t<"\n]|__has_include', re.M)


def has_unfollowed_include(source: str, includes: list[dict]) -> bool:
    """Whether ``source`` or one of the headers :func:`scan_includes` found for it (CUDA's apart)
    has an include the scan cannot follow, outside comments: ``#include NAME`` (a macro's) or
    ``__has_include``. The files NVRTC reads are then not all hashed, so no cache keyed by them can
    be trusted (:func:`compile_kernel` caches nothing for such a source). A header that cannot be
    read counts as one."""
    cuda_dirs = [Path(d).resolve() for d in cuda_include_dirs()[0]]
    return (_unfollowed_in(source)
            or any(_header_has_unfollowed(entry["file"], entry["sha256"]) for entry in includes
                   if not any(_inside(Path(entry["file"]), d) for d in cuda_dirs)))


def _unfollowed_in(text: str) -> bool:
    return bool(_UNFOLLOWED.search(_COMMENTS.sub("", text)))


@functools.lru_cache(maxsize=1024)
def _header_has_unfollowed(file: str, sha256: str) -> bool:
    """:func:`_unfollowed_in` of a header, read once per content (``sha256``, the scan's hash: a
    sweep's compiles after the first read nothing)."""
    try:
        return _unfollowed_in(Path(file).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return True


def _first_error(text: str) -> str:
    """The first diagnostic line naming a file and line (``file(line): error: ...``)."""
    for line in text.splitlines():
        if re.search(r"\(\d+\): (catastrophic )?error", line):
            return line.strip()
    return next((ln.strip() for ln in text.splitlines() if "error" in ln and "(" in ln),
                text.splitlines()[0] if text else "NVRTC error")


def compile_error_line(source_path, name_expression: str, options: CompileOptions, log: str) -> str:
    """The one-line message of a failed compile: the source (its path as the plugin gave it, the same
    in the record whatever folder the command ran from), the name
    expression, the options and the log's first error (:func:`_first_error`; a line naming the
    source by its program name names it by that path), plus a hint where NVRTC's words point
    at the plugin's ``entry()`` rather than at the source."""
    first = _first_error(log)
    shown = str(source_path)
    program = Path(source_path).name
    if first.startswith(program + "("):
        first = shown + first[len(program):]
    line = (f"NVRTC failed on {shown} for {name_expression} (options: {' '.join(options.flags())}): {first}")
    if "cannot open source file" in first:
        line += (f"; headers are looked up in the source's folder {Path(source_path).resolve().parent}, gemmlab's "
                 f"shared headers {shared_include_dir()} (as \"gemmlab/<file>.cuh\") and CUDA's pip-wheel headers")
    elif first.startswith("__nv_name_map"):
        if "cannot determine which instance of function template" in first:
            line += (f"; hint: the kernel's entry() names {name_expression}, which matches no instance of the "
                     "template: it gives the template more or fewer arguments than it takes (or of other kinds)")
        else:
            line += f"; hint: the kernel's entry() names {name_expression}, which the source does not declare so"
    return line


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


def run_nvrtc(source_path: Path, source: str, options: CompileOptions, include_dirs: list[str],
              names: tuple[str, ...]) -> tuple[object, str]:
    """One NVRTC compilation of ``source`` (the text of ``source_path``, which names the program)
    to a cubin holding the template instances ``names``: cuda.core's
    ``Program(source, "c++", options.program_options(...)).compile("cubin", name_expressions=names)``.
    The one place gemmlab calls NVRTC (:func:`compile_kernel` does the keying, caching and errors).

    Args:
        include_dirs: the folders NVRTC searches for headers, in order.

    Returns:
        ``(object_code, log)``: cuda.core's ``ObjectCode`` (the cubin bytes in ``.code``, each name
        expression's lowered name in ``.symbol_mapping``) and NVRTC's program log as it returns it
        (ptxas's ``-v`` report; parts may end in NUL bytes).

    Raises:
        Whatever cuda.core raises for a failed compilation (``NVRTCError``, a RuntimeError with the
        log in its message); :func:`compile_kernel` turns it into a CompileError.
    """
    from cuda.core import Program
    log = io.StringIO()
    code = Program(source, "c++", options.program_options(Path(source_path).name, include_dirs)).compile(
        "cubin", name_expressions=names, logs=log)
    return code, log.getvalue()


def compile_kernel(source_path: Path, name_expression: str, options: CompileOptions,
                   persistent: bool = False, cache_folder: str | None = None,
                   driver_version: str = "none", extra_names: tuple[str, ...] = (),
                   disassemble: bool = True) -> CompiledKernel:
    """Compile the template instance ``name_expression`` (and ``extra_names``) of ``source_path``
    to one cubin.

    Args:
        source_path: the ``.cu`` file (read as UTF-8; its SHA-256 and those of every file it
            includes are recorded and keyed, see :func:`scan_includes`).
        name_expression: C++ instance to emit, e.g. ``"gemm_tiled<64, 64, 16, 8, 2>"``.
        options: target and flags.
        persistent: also use the on-disk cache (:mod:`gemmlab.gpu.cache`) in ``cache_folder``.
        driver_version: part of the on-disk key ("none" without a driver).
        extra_names: further instances of the same source (a launch plan's extra kernels).
        disassemble: disassemble the cubin (:mod:`gemmlab.gpu.sass`) into ``sass``/``sass_text``;
            with ``persistent``, a disassembly the cache folder keeps for the same cubin bytes is
            reused (:func:`gemmlab.gpu.sass.reuse`).

    Returns:
        CompiledKernel; ``cache_hit`` is true when this process compiled the same inputs before
        (then ``compile_ms`` is that earlier call's time: the NVRTC time, or the load time of a
        disk hit); ``disk_cache`` is ``hit``, ``miss`` or ``off`` (also for a source with an include
        the scan cannot follow, :func:`has_unfollowed_include`: never cached, in this process or on
        disk; ``disk_cache_error`` says why when the disk cache was asked for); ``original_compile_ms`` is
        the NVRTC time recorded with a disk entry.

    Raises:
        CompileError: NVRTC or ptxas failed; the message names the file (an included header's
            name when the error is there), line and options; ``log`` holds the full NVRTC log.
        ConfigError: field ``include``: a header found outside the allowed folders (:func:`scan_includes`).
    """
    source = Path(source_path).read_text(encoding="utf-8")
    sha = hashlib.sha256(source.encode()).hexdigest()
    includes = scan_includes(Path(source_path), source)
    cuda_dirs, cuda_versions = cuda_include_dirs()
    names = (name_expression, *[n for n in extra_names if n != name_expression])
    include_key = tuple((i["name"], i["sha256"]) for i in includes)
    key = (sha, options, names, include_key, cuda_versions, persistent, cache_folder, driver_version, disassemble)
    uncached, disk_asked = has_unfollowed_include(source, includes), persistent  # uncached: the key misses a file
    if uncached:
        persistent = False
    elif key in memo().modules:
        cached = memo().modules[key]
        return CompiledKernel(**{**cached.__dict__, "cache_hit": True})
    include_dirs = [str(Path(source_path).resolve().parent), str(shared_include_dir()), *cuda_dirs]
    disk_key = folder = None
    if persistent:
        from gemmlab.gpu import cache
        folder = cache.cache_dir(cache_folder)
        disk_key = cache.make_key(sha, options.flags(), name_expression, options.target, nvrtc_version(),
                                  driver_version, extra={"names": list(names), "includes": [list(i) for i in include_key],
                                                         "cuda_headers": cuda_versions} if (includes or len(names) > 1)
                                  else None)
        started = time.perf_counter()
        entry = cache.load(folder, disk_key)
        try:
            res_fields = entry[1].get("resources") if entry else None
            cached_resources = Resources(**res_fields) if res_fields else None
            symbols = dict(entry[1].get("symbols") or {name_expression: entry[1]["lowered_name"]}) if entry else {}
            if entry is not None and set(symbols) != set(names):
                entry = None
        except (TypeError, ValueError, AttributeError):  # fields that are not ours: a damaged entry, i.e. a miss
            entry = None
        if entry is not None:
            from cuda.core import ObjectCode
            cubin, meta = entry
            # the same symbol mapping Program.compile produces: name expression -> mangled name (bytes)
            code = ObjectCode.from_cubin(cubin, name=Path(source_path).name,
                                         symbol_mapping={n: str(v).encode() for n, v in symbols.items()})
            compiled = CompiledKernel(
                name_expression=name_expression, lowered_name=meta["lowered_name"], source_file=str(source_path),
                source_sha256=sha, options=options, nvrtc_version=meta["nvrtc_version"],
                compile_ms=(time.perf_counter() - started) * 1e3, resources=cached_resources,
                log=meta.get("log", ""), object_code=code, disk_cache="hit",
                original_compile_ms=meta.get("compile_ms"), name_expressions=names, symbols=symbols,
                includes=includes)
            if disassemble:  # the entry's own disassembly when the same disassembler made it, else the folder's
                from gemmlab.gpu import sass
                compiled.sass, compiled.sass_text = sass.reuse(cubin, meta.get("sass"), folder)
            memo().modules[key] = compiled
            return compiled

    started = time.perf_counter()
    try:
        code, nvrtc_log = run_nvrtc(source_path, source, options, include_dirs, names)
    except Exception as exc:  # cuda.core raises NVRTCError (a RuntimeError) with the log inside
        text = str(exc).replace("\x00", "")  # NVRTC ends its log parts with NUL bytes
        raise CompileError(compile_error_line(source_path, name_expression, options, text)
                           if text else f"NVRTC failed on {source_path} for {name_expression}: "
                           f"{type(exc).__name__}", text) from None
    compile_ms = (time.perf_counter() - started) * 1e3
    symbols = {}
    for n in names:
        low = code.symbol_mapping.get(n, n)
        symbols[n] = low.decode() if isinstance(low, bytes) else low
    lowered = symbols[name_expression]
    text = nvrtc_log.replace("\x00", "")
    cubin_sha = hashlib.sha256(bytes(code.code)).hexdigest()
    ptxas_logs = memo().ptxas_logs
    if not text.strip() and cubin_sha in ptxas_logs:
        # NVRTC 13.0 returns an empty program log for a cubin this process made before (session 16 on
        # the H200: a repeat, a comment-only change); compiling again gives no report either
        text = ptxas_logs[cubin_sha]
    try:
        resources = parse_ptxas(text, lowered)
        ptxas_logs[cubin_sha] = text
    except CompileError:
        resources = None  # the record says the report is missing; the disk cache keeps nothing
    compiled = CompiledKernel(name_expression=name_expression, lowered_name=lowered,
                              source_file=str(source_path), source_sha256=sha, options=options,
                              nvrtc_version=nvrtc_version(), compile_ms=compile_ms,
                              resources=resources, log=text, object_code=code, name_expressions=names,
                              symbols=symbols, includes=includes)
    if disassemble:  # with the disk cache: its folder's disassembly of the same cubin bytes, if any
        from gemmlab.gpu import sass
        compiled.sass, compiled.sass_text = (sass.reuse(bytes(code.code), None, folder) if persistent
                                             else sass.disassemble(bytes(code.code)))
    if uncached and disk_asked:
        compiled.disk_cache_error = ("the source or a header has an include the scan cannot follow (#include NAME "
                                     "or __has_include): a cache key would miss a file NVRTC reads")
    if persistent:
        compiled.disk_cache = "miss"
    if persistent and resources is not None:  # never make a missing ptxas report permanent
        from gemmlab.gpu import cache, sass
        compiled.disk_cache_error = cache.store(folder, disk_key, bytes(code.code), {
            "lowered_name": lowered, "nvrtc_version": compiled.nvrtc_version, "compile_ms": compile_ms,
            "resources": asdict(resources) if resources else None, "log": text, "name_expression": name_expression,
            "source_file": str(source_path), "flags": options.flags(), "symbols": symbols, "includes": includes,
            "sass": sass.stored(compiled.sass, compiled.sass_text) if disassemble else None})
    if not uncached:
        memo().modules[key] = compiled
    return compiled
