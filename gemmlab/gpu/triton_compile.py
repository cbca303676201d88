"""Triton kernels (issue 46): load a plugin's ``@triton.jit`` function, compile it with Triton for
an explicit target (no GPU needed: ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90,
32))``), and read what the record needs from the result: the cubin (disassembled by gemmlab's own
:mod:`gemmlab.gpu.sass`), ptxas's resource report (registers, spills, stack), Triton's shared
memory and its version. Triton is optional (``pip install 'gemmlab[triton]'``); nothing here is
imported by the core unless a Triton kernel runs.

Specialisation follows Triton's JIT (``triton.runtime.jit``): a pointer or an int argument that is a
multiple of 16 gets ``tt.divisibility=16`` (gemmlab's buffers are 256-byte aligned,
:mod:`gemmlab.gpu.guards`), an int equal to 1 becomes a constant; the values are the problem's, so
the compile belongs to the point (and the in-process cache keys on them).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import io
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from gemmlab.errors import CompileError, ConfigError

INSTALL_HINT = "install the optional extra: pip install 'gemmlab[triton]'"

#: Triton signature type of a :class:`~gemmlab.contract.hookspecs.Value` ctype
VALUE_TYPES = {"int32": "i32", "uint32": "u32", "int64": "i64", "float32": "fp32"}
#: Triton pointer type per storage dtype
POINTER_TYPES = {"float32": "*fp32", "bfloat16": "*bf16", "float16": "*fp16"}

def clear_cache() -> None:
    """Forget the Triton compiles of the active session (tests; :class:`gemmlab.gpu.compile.CompileMemo`)."""
    from gemmlab.gpu.compile import memo
    memo().triton.clear()


def unavailable() -> str | None:
    """None when Triton can be imported here, else the one-line reason with the install hint."""
    try:
        import triton  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install
        return f"Triton is not installed or cannot be imported ({type(exc).__name__}: {exc}); {INSTALL_HINT}"
    return None


def version() -> str:
    import triton
    return str(getattr(triton, "__version__", "unknown"))


def load_function(spec, source: Path | None):
    """The spec's ``@triton.jit`` function: ``spec.kernel``, else ``spec.function`` of the ``.py``
    file ``source``, imported by path (keyed by path and content, so an edited file is imported afresh);
    an ``@triton.autotune`` / ``@triton.heuristics`` wrapper gives the function it wraps (gemmlab
    compiles one config at a time: the point's parameters).

    Raises:
        ConfigError: field ``kernel``: the file is missing, fails to import, or has no such jit function.
    """
    from gemmlab.contract.registry import triton_jit
    if spec.kernel is not None:
        return triton_jit(spec.kernel)  # the function itself, or the one an @triton.autotune wraps
    if source is None or not source.is_file():
        raise ConfigError("kernel", f"{spec.name}: Triton source {source} is not a file (TritonKernelSpec.source: a .py "
                          "file beside the plugin's file or in gemmlab's kernels/ folder, or an absolute path)")
    digest = hashlib.sha1(str(source).encode() + b"\0" + source.read_bytes()).hexdigest()[:12]
    name = f"gemmlab_triton_{digest}_{source.stem}"
    module = sys.modules.get(name)
    if module is None:
        loader = importlib.util.spec_from_file_location(name, source)
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        try:
            loader.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise ConfigError("kernel", f"{spec.name}: could not import the Triton source {source}: "
                              f"{type(exc).__name__}: {exc}") from None
    fn = triton_jit(getattr(module, spec.function, None))  # an @triton.autotune wrapper: its function
    if fn is None:
        raise ConfigError("kernel", f"{spec.name}: {source} has no @triton.jit function {spec.function!r}")
    return fn


@dataclass
class Specialised:
    """What :func:`specialise` makes of a jit function and the point's arguments: Triton's
    ``signature`` (name -> type or ``"constexpr"``), ``constexprs`` (name -> value), ``attrs``
    (divisibility hints by argument index), and ``order``: for each parameter, ``("arg", i)`` (the
    i-th runtime argument) or ``("const", value)``: the values the launcher is called with."""

    signature: dict
    constexprs: dict
    attrs: dict
    order: list
    names: list


def specialise(fn, spec_name: str, arguments: tuple, values: list, constants: dict, problem) -> Specialised:
    """Pair the jit function's parameters with the runtime ``arguments`` (their resolved ``values``:
    ints for dims and values, None for pointers) and the ``constants``.

    Raises:
        ConfigError: field ``kernel``: the argument count does not match the function's
            non-constexpr parameters, or a constexpr has no value.
    """
    from gemmlab.contract.hookspecs import Dim, Matrix, Value
    params = list(fn.params)
    runtime = [p for p in params if not p.is_constexpr]
    if len(runtime) != len(arguments):
        raise ConfigError("kernel", f"{spec_name}: the Triton function {fn.__name__} takes {len(runtime)} runtime "
                          f"arguments ({', '.join(p.name for p in runtime)}), but arguments() gives {len(arguments)}")
    signature, constexprs, attrs, order, names = {}, {}, {}, [], []
    it = iter(zip(arguments, values))
    for index, p in enumerate(params):
        names.append(p.name)
        if p.is_constexpr:
            if p.name in constants:
                value = constants[p.name]
            elif getattr(p, "default", None) is not None and p.default is not inspect.Parameter.empty:
                value = p.default
            else:
                raise ConfigError("kernel", f"{spec_name}: the Triton function {fn.__name__}'s constexpr {p.name} has no "
                                  "value; declare it in defaults or return it from constants()")
            signature[p.name] = "constexpr"
            constexprs[p.name] = value
            order.append(("const", value))
            continue
        arg, value = next(it)
        if isinstance(arg, Matrix):
            signature[p.name] = "*fp32" if arg.name == "C" else POINTER_TYPES[problem.ab_dtype]
            attrs[(index,)] = [["tt.divisibility", 16]]  # gemmlab's buffers are 256-byte aligned
        elif isinstance(arg, (Dim, Value)):
            kind = "i32" if isinstance(arg, Dim) else VALUE_TYPES[arg.ctype]
            if kind.startswith(("i", "u")) and value == 1:  # Triton's JIT: an int equal to 1 is a constant
                signature[p.name] = "constexpr"
                constexprs[p.name] = 1
            else:
                signature[p.name] = kind
                if kind.startswith(("i", "u")) and value % 16 == 0:
                    attrs[(index,)] = [["tt.divisibility", 16]]
        order.append(("arg", len([o for o in order if o[0] == "arg"])))
    return Specialised(signature, constexprs, attrs, order, names)


@dataclass
class TritonCompiled:
    """One Triton compile: the ``CompiledKernel`` and the record's fields; ``sass`` is
    :func:`gemmlab.gpu.sass.disassemble` of the cubin, ``(summary, listing)``, made once per compile and
    kept with it in the session's memo (nvdisasm took 0.4-0.9 s of every Triton point's compile phase,
    in-process hits included: H100 session 35, issue 46's split)."""

    compiled: object = field(repr=False)
    name: str
    target: str
    triton_version: str
    compile_ms: float
    resources: object  # gemmlab.gpu.compile.Resources, or None
    shared_bytes: int
    num_warps: int
    cubin: bytes = field(repr=False, default=b"")
    log: str = ""
    cache_hit: bool = False
    sass: tuple = ()


def _cubin_registers(cubin: bytes, symbol: str) -> int | None:
    """The register count the cubin's ``.nv.info.<symbol>`` section gives (``EIATTR_REGCOUNT``), or None."""
    import struct
    from gemmlab.gpu.sass import elf_sections
    try:
        for name, offset, size in elf_sections(cubin):
            if name not in (".nv.info", f".nv.info.{symbol}"):
                continue
            data, i = cubin[offset:offset + size], 0
            while i + 4 <= len(data):
                fmt, attr = data[i], data[i + 1]
                if fmt == 4:
                    (n,) = struct.unpack_from("<H", data, i + 2)
                    if attr == 0x2F and n >= 8:  # EIATTR_REGCOUNT: symbol index, registers
                        return struct.unpack_from("<I", data, i + 8)[0]
                    i += 4 + n
                elif fmt == 3:
                    i += 4
                else:
                    break
    except (struct.error, ValueError, IndexError):
        return None
    return None


def triton_error_text(exc: BaseException, function: str) -> str:
    """One line of a Triton compile failure ``exc`` of the JIT function named ``function``.

    Triton's ``CompilationError`` reads "at L:C:", the source excerpt, a caret line, then the
    reason (e.g. "arange's range must be a power of 2"): the reason comes first, then where
    ("at 14:31 of matmul_kernel"), so a cut line still says why; any other error is its text with
    whitespace collapsed (the full text stays in the point's compile.log). Never raises."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if type(exc).__name__ == "CompilationError" and len(lines) > 1 and lines[0].startswith("at "):
        return f"{lines[-1]} ({lines[0].rstrip(':')} of {function})"
    return " ".join(str(exc).split()) or type(exc).__name__


def compile_kernel(fn, spec_name: str, spec: Specialised, options: dict, arch: str) -> TritonCompiled:
    """Compile ``fn`` specialised as ``spec`` with Triton ``options`` for ``sm_<arch>`` (Triton picks
    ``sm_90a`` for 90 itself). Works without a GPU. Triton's own cache is bypassed
    (``always_compile``) so ptxas runs and its ``-v`` report (``dump_ptxas_log``) is read; repeats
    in this process come from gemmlab's in-process cache.

    Raises:
        CompileError: Triton or ptxas failed (first line of its message).
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from gemmlab.gpu.compile import parse_ptxas
    capability = int(str(arch).rstrip("af"))
    key = (getattr(fn, "cache_key", id(fn)), tuple(sorted(spec.signature.items())),
           tuple(sorted((k, repr(v)) for k, v in spec.constexprs.items())), repr(sorted(spec.attrs.items())),
           tuple(sorted(options.items())), capability)
    from gemmlab.gpu.compile import memo
    if key in memo().triton:  # the active session's compiles (gemmlab.gpu.compile.CompileMemo)
        cached = memo().triton[key]
        return TritonCompiled(**{**cached.__dict__, "cache_hit": True})
    knobs = getattr(triton, "knobs", None)
    saved = []
    for group, name in (("nvidia", "dump_ptxas_log"), ("compilation", "always_compile")):
        obj = getattr(knobs, group, None) if knobs is not None else None
        if obj is not None and hasattr(obj, name):
            saved.append((obj, name, getattr(obj, name)))
            setattr(obj, name, True)
    out = io.StringIO()
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
            compiled = triton.compile(ASTSource(fn, spec.signature, spec.constexprs, spec.attrs),
                                      target=GPUTarget("cuda", capability, 32), options=dict(options))
    except Exception as exc:
        text = triton_error_text(exc, fn.__name__)
        raise CompileError(f"Triton failed to compile {spec_name} ({fn.__name__}) for sm_{capability}: "
                           f"{type(exc).__name__}: {text[:400]}", str(exc)) from None
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)
    compile_ms = (time.perf_counter() - started) * 1e3
    log = out.getvalue()
    meta = compiled.metadata
    cubin = bytes(compiled.asm.get("cubin", b"")) if hasattr(compiled.asm, "get") else bytes(compiled.asm["cubin"])
    try:
        resources = parse_ptxas(log, meta.name)
    except CompileError:  # no report (an older Triton without the knob): the cubin's own register count
        regs = _cubin_registers(cubin, meta.name)
        resources = None
        if regs is not None:
            from gemmlab.gpu.compile import Resources
            resources = Resources(registers=regs, spill_store_bytes=-1, spill_load_bytes=-1, stack_frame_bytes=-1,
                                  static_shared_bytes=0)
    target = f"sm_{capability}a" if capability == 90 else f"sm_{capability}"
    m = re.search(r"for '(sm_\w+)'", log)
    if m:
        target = m.group(1)
    from gemmlab.gpu import sass
    listing = sass.disassemble(cubin) if cubin else ({"file": None, "histogram": None,
                                                      "error": "Triton returned no cubin"}, "")
    result = TritonCompiled(compiled=compiled, name=meta.name, target=target, triton_version=version(),
                            compile_ms=compile_ms, resources=resources, shared_bytes=int(meta.shared),
                            num_warps=int(meta.num_warps), cubin=cubin, log=log, sass=listing)
    memo().triton[key] = result
    return result
