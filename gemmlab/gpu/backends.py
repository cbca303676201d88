"""One interface for every kernel under measurement, NVRTC-compiled or library-backed.

The pipeline (``gemmlab.run.pipeline``) drives a :class:`Backend` through the same steps for a kernel
and for its baseline, with no branches on the kind of kernel:

1. :meth:`Backend.validate` — plain-data checks before anything compiles or opens the GPU
   (precision, layouts, the plugin's own rules, launch geometry, cluster, arguments, TMA rules,
   the launch plan); one :class:`~gemmlab.errors.ConfigError` line on bad input.
2. :meth:`Backend.unavailable` — a missing optional library, as a one-line reason.
3. :meth:`Backend.compile` — NVRTC for compiled kernels (cubin, ptxas report, SASS and the check
   of the kernel's declared SASS classes, ``record["sass_check"]``: :mod:`gemmlab.gpu.sass_check`;
   :meth:`Backend.missing_instructions` is the refusal ``mode=run`` raises), nothing for libraries.
4. :meth:`Backend.prepare` — on the GPU: load, resolve arguments (device pointers, tensor maps,
   workspace), build the launch plan; then :meth:`Backend.enqueue` issues ONE launch (every step
   of the plan: memsets, the kernel, extra kernels) without synchronising, so the timing loop
   and graph capture count all of it.
5. :meth:`Backend.close` — release library handles and the workspace.

``Backend.record`` collects the fields this kernel adds to ``result.json``.
"""

from __future__ import annotations

import numbers
import re

from dataclasses import asdict as dataclasses_asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from gemmlab.gpu import compile as compile_stage
from gemmlab.gpu import guards
from gemmlab.gpu import sass_check
from gemmlab.gpu import tma
from gemmlab.contract import tma_rules
from gemmlab.contract.grouped import GROUP_ARRAYS
from gemmlab.errors import ConfigError
from gemmlab.paths import stale_checkout_source
from gemmlab.contract.epilogue import PLAIN, refusal as epilogue_refusal
from gemmlab.contract.hookspecs import (SCALE_MATRICES, VALUE_CTYPES, DeviceFacts, DevicePointers, Dim, Extra, KernelBase, KernelSpec,
                                        Launch, LibraryKernelSpec, Main, Matrix, Memset, ParamError, Problem,
                                        TensorMap, TritonKernelSpec, Value, Workspace)

GRID_LIMITS = (2**31 - 1, 65535, 65535)  # CUDA: max grid dimensions (x, y, z)
BLOCK_LIMITS = (1024, 1024, 64)  # CUDA: max block dimensions (x, y, z)
DIMS = ("M", "N", "K", "lda", "ldb", "ldc")
#: the dims an epilogue problem adds (issue 43): the batch count and the batch strides in elements
EPILOGUE_DIMS = ("batch", "stride_a", "stride_b", "stride_c")
#: the dims a grouped problem adds (issue 44): G (groups) and M_max (``Grouped.slot_rows``: masked
#: rows per expert slot; contiguous the largest padded M_g; general the largest M_g)
GROUPED_DIMS = ("G", "M_max")
NUMPY_CTYPES = {"int32": np.int32, "uint32": np.uint32, "float32": np.float32, "int64": np.int64}


@dataclass
class Buffers:
    """The device matrices of one point (guard-banded, see :mod:`gemmlab.gpu.guards`): A and B
    (and for precision=fp8 their float32 scale buffers) shared by all candidates, C the candidate's own."""

    a: guards.GuardedMatrix
    b: guards.GuardedMatrix
    c: guards.GuardedMatrix
    a_scale: guards.GuardedMatrix | None = None
    b_scale: guards.GuardedMatrix | None = None
    groups: dict = field(default_factory=dict)
    c0: guards.GuardedMatrix | None = None
    bias: guards.GuardedMatrix | None = None

    def matrix(self, name: str) -> guards.GuardedMatrix:
        """The buffer a :class:`Matrix` / :class:`TensorMap` name points at ("A" | "B" | "C" |
        "A_scale" | "B_scale"; the scales exist for precision=fp8 only; a grouped problem's group
        arrays by name, ``groups``; an epilogue problem's "C0" and "bias", issue 43)."""
        found = {"A": self.a, "B": self.b, "C": self.c, "A_scale": self.a_scale, "B_scale": self.b_scale,
                 "C0": self.c0, "bias": self.bias, **self.groups}.get(name)
        if found is None:
            raise ConfigError("kernel", f"argument names matrix {name!r}, which this point has no buffer for")
        return found


#: ``compute`` of a ``precision=tf32`` point whose kernel declares ``tf32_rounding="none"`` (issue 41)
TF32_ON_CUDA_CORES = "float32 FMA on CUDA cores (TF32 allowed, not used: inputs unrounded), float32 accumulate"


def precision_detail(problem: Problem, types: dict | None = None, tf32_rounding: str | None = None) -> dict:
    """The record's precision fields: ``{"name", "a_dtype", "b_dtype", "c_dtype", "compute"}``;
    a tf32 kernel that declares ``tf32_rounding="none"`` computes :data:`TF32_ON_CUDA_CORES`."""
    compute = (TF32_ON_CUDA_CORES if problem.precision == "tf32" and tf32_rounding == "none" else problem.compute)
    t = types or {"a_dtype": problem.a_dtype, "b_dtype": problem.b_dtype, "c_dtype": problem.c_dtype,
                  "compute": compute}
    out = {"name": problem.precision, **t}
    if problem.precision == "fp8":  # issue 42: how the FP8 operands are scaled
        out.setdefault("scaling", problem.scaling)
    return out


def blamed_field(field_name: str, message: str, params: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
    """The field a parameter check's error names: the check's own (``kernel.WM`` in "BM=7 must be
    a multiple of WM=32"), unless that parameter is at its default and exactly one parameter the
    message names (``BM=``) is not: then that one, the parameter the user set."""
    name = field_name.removeprefix("kernel.")
    if not field_name.startswith("kernel.") or name not in defaults or params.get(name) != defaults.get(name):
        return field_name
    changed = [k for k in params if k != name and params.get(k) != defaults.get(k)
               and re.search(rf"\b{re.escape(k)}=", message)]
    return f"kernel.{changed[0]}" if len(changed) == 1 else field_name


@dataclass
class Backend:
    """A kernel under measurement (``role`` kernel or baseline); subclasses implement the steps."""

    role: str
    name: str
    spec: KernelBase
    params: dict
    record: dict = field(default_factory=dict)
    kind: str = "abstract"
    buffers: Buffers | None = None

    # --- 1. validation --------------------------------------------------------------------------
    def validate(self, problem: Problem, facts: DeviceFacts) -> None:
        """Refuse an unsupported precision or layout, then apply the plugin's own checks.

        Raises:
            ConfigError: ``precision``, ``layout.a``/``layout.b`` or the plugin's field.
        """
        spec = self.spec
        if problem.precision not in spec.precisions:
            raise ConfigError("precision", f"kernel {self.name} supports {', '.join(spec.precisions)}; "
                              f"got {problem.precision}")
        pair = (problem.layout_a, problem.layout_b)
        supported = [tuple(p) for p in spec.layouts]
        if pair not in supported:
            field_name = "layout.a" if all(a != problem.layout_a for a, _ in supported) else "layout.b"
            raise ConfigError(field_name, f"kernel {self.name} supports layout.a/layout.b "
                              f"{', '.join('/'.join(p) for p in supported)}; got {'/'.join(pair)}")
        kinds = tuple(getattr(spec, "grouped_kinds", ()) or ())
        if problem.grouped is not None and problem.grouped.kind not in kinds:
            runs = (f"grouped.kind {', '.join(kinds)}" if kinds else "plain GEMMs only (grouped.kind=null)")
            raise ConfigError("grouped.kind", f"kernel {self.name} runs {runs}; got grouped.kind={problem.grouped.kind}")
        if problem.grouped is None and kinds:
            raise ConfigError("grouped.kind", f"kernel {self.name} is a grouped GEMM kernel (grouped.kind "
                              f"{', '.join(kinds)}); got a plain GEMM (grouped.kind=null)")
        refused = epilogue_refusal(getattr(spec, "epilogue", PLAIN), problem, self.name)  # issue 43
        if refused is not None:
            raise ConfigError(*refused)
        try:
            spec.check_problem(problem, self.params, facts)
        except ParamError as exc:
            raise ConfigError(blamed_field(exc.field, exc.message, self.params, spec.defaults), exc.message) from None
        for key, listed in (getattr(spec, "param_values", None) or {}).items():  # the values allowed (hookspecs):
            if key in self.params and self.params[key] not in listed:  # a check that let another one pass
                own = " (the kernel's own default: fix the plugin)" if self.params[key] == spec.defaults.get(key) else ""
                raise ConfigError(f"kernel.{key}", f"must be one of {', '.join(map(str, listed))} "
                                  f"(kernel {self.name}'s param_values), got {self.params[key]}{own}")
        self.record["precision_detail"] = precision_detail(problem, tf32_rounding=getattr(spec, "tf32_rounding", None))

    def unavailable(self) -> str | None:
        """A one-line reason this kernel cannot run here (missing library), or None."""
        return None

    def compile(self, problem: Problem, facts: DeviceFacts, arch: str, out_dir: Path, cache_enabled: bool,
                cache_dir: str | None, driver_version: str = "none") -> None:
        """Build what the kernel needs (nothing for libraries); ``record["compile"]``."""
        self.record["compile"] = None

    def note_stale_copies(self, sources) -> None:
        """The edit->run check (issue 45, item 6), after ``record["compile"]`` is made: where the
        kernel's ``sources`` (its source and headers) or the built-in plugin modules this process
        imported are gemmlab's installed copies while the current folder is inside a checkout with
        other versions of them, ``record["compile"]["stale_checkout_source"]``
        (:func:`gemmlab.paths.stale_checkout_source`; one WARNING line in the summary), never an error."""
        from gemmlab.contract.registry import builtin_plugin_files
        stale = stale_checkout_source([*sources, *builtin_plugin_files()])
        if stale:
            self.record["compile"]["stale_checkout_source"] = stale

    def estimate_occupancy(self, facts: DeviceFacts) -> None:
        """``mode=compile``: record an occupancy estimate where one can be made."""

    def missing_instructions(self) -> str | None:
        """After :meth:`compile`: the one-line refusal when a declared SASS class is absent from the
        main kernel (``record["sass_check"]``, :mod:`gemmlab.gpu.sass_check`), else None."""
        check = self.record.get("sass_check")
        return check.get("message") if isinstance(check, dict) and check.get("verdict") == "missing" else None

    def prepare(self, gpu, problem: Problem, buffers: Buffers) -> None:
        """Make :meth:`enqueue` ready on ``gpu`` for ``buffers``."""
        raise NotImplementedError

    def enqueue(self) -> None:
        """Issue one launch (the whole plan) on the run's stream, without synchronising."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what :meth:`prepare` acquired (idempotent)."""

    def guarded(self) -> list:
        """Extra guard-banded buffers this backend owns (checked by the safety nets)."""
        return []


def backend_for(role: str, name: str, spec: KernelBase, params: dict) -> Backend:
    """The backend for ``spec``: :class:`LibraryBackend` for a :class:`LibraryKernelSpec`,
    :class:`NvrtcBackend` for a :class:`KernelSpec`, :class:`TritonBackend` for a :class:`TritonKernelSpec`.

    Raises:
        ConfigError: the spec is neither.
    """
    if isinstance(spec, LibraryKernelSpec):
        return LibraryBackend(role, name, spec, params, kind="library")
    if isinstance(spec, KernelSpec):
        return NvrtcBackend(role, name, spec, params, kind="nvrtc")
    if isinstance(spec, TritonKernelSpec):
        return TritonBackend(role, name, spec, params, kind="triton")
    raise ConfigError("plugin", f"kernel {name}: {type(spec).__name__} is neither a KernelSpec, a LibraryKernelSpec "
                      "nor a TritonKernelSpec")


# --- library kernels -----------------------------------------------------------------------------

@dataclass
class LibraryBackend(Backend):
    """A vendor library kernel (:class:`LibraryKernelSpec`): the plugin returns the enqueue."""

    _enqueue: Callable[[], None] | None = None
    _close: Callable[[], None] | None = None

    def validate(self, problem: Problem, facts: DeviceFacts) -> None:
        super().validate(problem, facts)
        self.record["precision_detail"] = precision_detail(problem, self.spec.types(problem))

    def unavailable(self) -> str | None:
        return self.spec.available()

    def prepare(self, gpu, problem: Problem, buffers: Buffers) -> None:
        ptrs = DevicePointers(a=buffers.a.address, b=buffers.b.address, c=buffers.c.address,
                              stream=int(gpu.stream.handle),
                              a_scale=buffers.a_scale.address if buffers.a_scale is not None else 0,
                              b_scale=buffers.b_scale.address if buffers.b_scale is not None else 0,
                              groups={name: g.address for name, g in buffers.groups.items()},
                              c0=buffers.c0.address if buffers.c0 is not None else 0,
                              bias=buffers.bias.address if buffers.bias is not None else 0)
        self.record["library"] = self.spec.library_version()
        try:
            self._enqueue, self._close = self.spec.enqueue_problem(problem, self.params, ptrs)
        except ParamError as exc:
            raise ConfigError(exc.field, exc.message) from None

    def enqueue(self) -> None:
        self._enqueue()

    def close(self) -> None:
        if self._close is not None:
            self._close()
            self._close = None


# --- NVRTC kernels -------------------------------------------------------------------------------

def dim_value(problem: Problem, name: str) -> int:
    """The int a :class:`Dim` argument passes: a :data:`DIMS` attribute of ``problem``, or for a
    grouped problem G and M_max (:data:`GROUPED_DIMS`)."""
    if name == "G":
        return problem.grouped.G
    if name == "M_max":
        return problem.grouped.slot_rows
    if name.startswith("stride_"):
        return problem.batch_stride(name[-1].upper())
    return getattr(problem, name)


def check_launch(launch: Launch, facts: DeviceFacts, what: str) -> None:
    """CUDA's grid/block limits, the device's thread and shared-memory limits, and the cluster
    rules (each grid dimension a multiple of the cluster's; at most ``facts.max_cluster_size``).

    Raises:
        ConfigError: field ``shape`` (grid too large) or ``kernel``.
    """
    for axis, (count, limit) in enumerate(zip(launch.grid, GRID_LIMITS)):
        if not 1 <= count <= limit:
            raise ConfigError("shape", f"{what} needs grid {tuple(launch.grid)}: grid dimension {'xyz'[axis]} must be "
                              f"1..{limit} (CUDA limit); use a smaller shape or a kernel with larger tiles")
    for axis, (count, limit) in enumerate(zip(launch.block, BLOCK_LIMITS)):
        if not 1 <= count <= limit:
            raise ConfigError("kernel", f"{what}: block {tuple(launch.block)}: dimension {'xyz'[axis]} must be 1..{limit}")
    if launch.threads_per_block > facts.max_threads_per_block or launch.shared_bytes > facts.max_shared_per_block_optin:
        raise ConfigError("kernel", f"{what}: launch needs {launch.threads_per_block} threads and {launch.shared_bytes} B "
                          f"dynamic shared memory per block; the device allows {facts.max_threads_per_block} "
                          f"and {facts.max_shared_per_block_optin} B")
    if launch.cluster is not None:
        cluster = tuple(launch.cluster)
        if len(cluster) != 3 or not all(isinstance(c, int) and c >= 1 for c in cluster):
            raise ConfigError("kernel", f"{what}: cluster must be three positive ints (x, y, z), got {launch.cluster!r}")
        if facts.max_cluster_size <= 1:
            raise ConfigError("kernel", f"{what}: thread-block clusters need sm_90 or newer; target sm_{facts.arch}")
        if launch.cluster_size > facts.max_cluster_size:
            raise ConfigError("kernel", f"{what}: cluster {cluster} has {launch.cluster_size} blocks; the device allows "
                              f"at most {facts.max_cluster_size} (portable cluster size)")
        for axis, (g, c) in enumerate(zip(launch.grid, cluster)):
            if g % c:
                raise ConfigError("kernel", f"{what}: grid {tuple(launch.grid)} is not a multiple of cluster {cluster} "
                                  f"in {'xyz'[axis]}; grid counts blocks and each dimension must be a multiple")


def launch_record(launch: Launch) -> dict:
    """The record's ``launch`` fields."""
    out = {"grid": list(launch.grid), "block": list(launch.block), "shared_bytes": launch.shared_bytes,
           "threads_per_block": launch.threads_per_block, "blocks": launch.blocks}
    if launch.cluster is not None:
        out["cluster"] = list(launch.cluster)
    return out


def describe_argument(arg) -> str:
    """One short text per kernel argument, for the record."""
    if isinstance(arg, Matrix):
        return f"{arg.name} pointer"
    if isinstance(arg, Dim):
        return f"{arg.name} (int32)"
    if isinstance(arg, Workspace):
        return "workspace pointer" + (f" + {arg.offset} B" if arg.offset else "")
    if isinstance(arg, Value):
        return f"{arg.value} ({arg.ctype})"
    if isinstance(arg, TensorMap):
        where = arg.matrix
        if arg.region is not None:
            r = arg.region
            where = f"workspace + {r.offset} B ({r.rows} x {r.cols} {r.dtype}, row stride {r.row_stride})"
        if arg.per_group:
            where += " per group (3-D: G slabs)"
        if arg.each_group:
            return (f"pointer to G TMA tensor maps, one per group's {arg.matrix}_g (built on the host once per point), "
                    f"box {tuple(arg.box)}, swizzle {arg.swizzle}")
        return f"TMA tensor map over {where}, box {tuple(arg.box)}, swizzle {arg.swizzle}"
    return repr(arg)


def describe_step(step) -> str:
    """One short text per launch-plan step, for the record."""
    if isinstance(step, Main):
        return f"main kernel ({step.note})" if step.note else "main kernel"
    if isinstance(step, Memset):
        return f"memset {step.target} to 0x{step.value & 0xFFFFFFFF:08x}"
    if isinstance(step, Extra):
        text = f"extra kernel {step.entry} grid {tuple(step.launch.grid)} block {tuple(step.launch.block)}"
        if step.entry.startswith("gemmlab::relayout_"):  # the shared header's copies (gemmlab/relayout.cuh)
            src = next((a.name for a in step.arguments if isinstance(a, Matrix)), "?")
            dst = next((a.offset for a in step.arguments if isinstance(a, Workspace)), "?")
            kind = step.entry.removeprefix("gemmlab::relayout_").split("<")[0]
            text = f"relayout ({kind}) of {src} into workspace + {dst} B: {text}"
        return text
    return repr(step)


def check_arguments(args, problem: Problem, workspace: int, what: str) -> list[dict]:
    """Validate an argument list; return the tensor maps' descriptions.

    Raises:
        ConfigError: field ``kernel`` (unknown argument, a workspace pointer without a
            workspace or with an offset outside it, a tensor map's workspace region outside the
            workspace or misaligned), or a TMA rule (see :func:`gemmlab.contract.tma_rules.check`).
    """
    maps = []
    names = ("A", "B", "C") + (SCALE_MATRICES if problem.precision == "fp8" else ())
    dims = DIMS
    dims += EPILOGUE_DIMS  # issue 43: batch 1 and tight strides for a plain problem
    if problem.extended:  # issue 43: C0 (beta != 0) and the bias vector where the problem has them
        ep = problem.epilogue
        names += (("C0",) if ep is not None and ep.beta != 0.0 else ()) + (("bias",) if problem.bias_dtype else ())
    if problem.grouped is not None:
        names += GROUP_ARRAYS[problem.grouped.kind]
        dims += GROUPED_DIMS
    for arg in args:
        if isinstance(arg, Matrix):
            ok = arg.name in names
        elif isinstance(arg, Dim):
            ok = arg.name in dims
        elif isinstance(arg, Workspace):
            if workspace <= 0:
                raise ConfigError("kernel", f"{what}: a Workspace() argument needs workspace_bytes > 0")
            tma_rules.check_workspace_offset(arg, workspace, what)
            ok = True
        elif isinstance(arg, Value):
            ok = arg.ctype in VALUE_CTYPES and isinstance(arg.value, (int, float)) and not isinstance(arg.value, bool)
        elif isinstance(arg, TensorMap):
            if arg.matrix == "workspace" and workspace <= 0:
                raise ConfigError("kernel", f"{what}: a TensorMap over the workspace needs workspace_bytes > 0")
            maps.append(tma.check(arg, problem, workspace_bytes=workspace))
            ok = True
        else:
            ok = False
        if not ok:
            raise ConfigError("kernel", f"{what}: argument {arg!r} is not allowed; use Matrix({'|'.join(map(repr, names))}), "
                              f"Dim({'|'.join(dims)}), Workspace(), Value(v, {'|'.join(VALUE_CTYPES)}) or TensorMap(...)")
    return maps


def declared_classes(spec: KernelBase, value: Any) -> tuple:
    """``value``, what ``spec.sass_classes_for()`` returned, checked as the registry checks the
    ``sass_classes`` field (:func:`gemmlab.contract.registry.sass_classes_problem`).

    Raises:
        ConfigError: field ``plugin``, naming the kernel, the method and what is allowed.
    """
    from gemmlab.contract.registry import sass_classes_problem
    why = sass_classes_problem(value)
    if why is not None:
        raise ConfigError("plugin", f"kernel '{spec.name}': {type(spec).__name__}.sass_classes_for() returned "
                          f"{value!r}; {why}")
    return tuple(value)


def returned_tuple(spec: KernelBase, method: str, value: Any, example: str) -> tuple:
    """``value``, what ``spec.<method>()`` returned, as a tuple; it must be a tuple or list (a bare
    ``Matrix('A')`` or a generator is a plugin bug).

    Raises:
        ConfigError: field ``plugin``, naming the kernel, the method, its file and line, and an example.
    """
    if isinstance(value, (tuple, list)):
        return tuple(value)
    code = getattr(getattr(type(spec), method, None), "__code__", None)
    at = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    raise ConfigError("plugin", f"kernel '{spec.name}': {type(spec).__name__}.{method}(){at} returned "
                      f"{type(value).__name__} {value!r}; it must return a tuple, e.g. {example}")


@dataclass
class NvrtcBackend(Backend):
    """An NVRTC-compiled kernel (:class:`KernelSpec`): compile, load, launch its plan."""

    launch: Launch | None = None
    arguments: tuple = ()
    steps: tuple = ()
    workspace_bytes: int = 0
    compiled: compile_stage.CompiledKernel | None = None
    options: object = None
    sass_classes: tuple = ()
    _workspace: guards.GuardedMatrix | None = None
    _calls: list = field(default_factory=list)
    _map_buffers: list = field(default_factory=list)  # each_group tensor maps in device memory (issue 44)

    def validate(self, problem: Problem, facts: DeviceFacts) -> None:
        super().validate(problem, facts)
        spec, params = self.spec, self.params
        try:
            launch = spec.geometry(problem, params, facts)
            arguments = spec.arguments(problem, params, facts)
            self.workspace_bytes = int(spec.workspace_bytes(problem, params, facts))
            steps = spec.plan(problem, params, facts)
            self.options = spec.options(problem, params, facts)
            classes = spec.sass_classes_for(problem, params)
        except ParamError as exc:
            raise ConfigError(exc.field, exc.message) from None
        self.sass_classes = declared_classes(spec, classes)
        self.arguments = returned_tuple(spec, "arguments", arguments, "(Matrix('A'), Matrix('B'), Matrix('C'), "
                                        "Dim('M'), Dim('N'), Dim('K'))")
        self.steps = returned_tuple(spec, "plan", steps, "(Main(),)")
        if not all(isinstance(n, numbers.Integral) and n >= 1 for n in (*launch.grid, *launch.block)):
            method = "geometry" if type(spec).geometry is not KernelSpec.geometry else "launch"
            raise ConfigError("plugin", f"kernel {self.name}: {type(spec).__name__}.{method}() returned grid "
                              f"{tuple(launch.grid)} block {tuple(launch.block)} for shape {tuple(problem.shape)}; every "
                              "dimension must be an int >= 1 (a rounded-down division?)")  # a plugin bug, not the shape
        check_launch(launch, facts, self.name)
        if self.workspace_bytes < 0:
            raise ConfigError("kernel", f"{self.name}: workspace_bytes must be >= 0, got {self.workspace_bytes}")
        maps = check_arguments(self.arguments, problem, self.workspace_bytes, self.name)
        mains = sum(isinstance(s, Main) for s in self.steps)
        if mains != 1:
            raise ConfigError("kernel", f"{self.name}: the launch plan must hold exactly one Main(), got {mains}")
        for step in self.steps:
            if isinstance(step, Memset):
                if step.target not in ("C", "workspace") or not isinstance(step.value, int):
                    raise ConfigError("kernel", f"{self.name}: Memset target must be 'C' or 'workspace' with an int "
                                      f"value, got {step!r}")
                if step.target == "workspace" and self.workspace_bytes <= 0:
                    raise ConfigError("kernel", f"{self.name}: Memset('workspace') needs workspace_bytes > 0")
            elif isinstance(step, Extra):
                check_launch(step.launch, facts, f"{self.name} extra kernel {step.entry}")
                maps += check_arguments(step.arguments, problem, self.workspace_bytes, f"{self.name} {step.entry}")
            elif not isinstance(step, Main):
                raise ConfigError("kernel", f"{self.name}: plan step {step!r} is not Main(), Memset(...) or Extra(...)")
        compile_stage.CompileOptions.for_kernel(facts.arch, self.options)  # bad options fail here, before compiling
        from gemmlab.contract.registry import source_path
        if not source_path(spec).is_file():
            raise ConfigError("kernel", f"{self.name}: source {source_path(spec)} is not a file (KernelSpec.source: "
                              "a file name beside the plugin's file or in gemmlab's kernels/ folder, or an absolute path)")
        self.launch = launch
        self.record["launch"] = launch_record(launch)
        self.record["arguments"] = [describe_argument(a) for a in self.arguments]
        self.record["workspace_bytes"] = self.workspace_bytes
        self.record["plan"] = [describe_step(s) for s in self.steps]
        if maps:
            self.record["tensor_maps"] = maps

    def compile(self, problem: Problem, facts: DeviceFacts, arch: str, out_dir: Path, cache_enabled: bool,
                cache_dir: str | None, driver_version: str = "none") -> None:
        from gemmlab.contract.registry import source_path
        options = compile_stage.CompileOptions.for_kernel(arch, self.options)
        extra = tuple(dict.fromkeys(s.entry for s in self.steps if isinstance(s, Extra)))  # once per name
        source = source_path(self.spec)
        self.compiled = compile_stage.compile_kernel(
            source, self.spec.instance(problem, self.params), options, persistent=cache_enabled,
            cache_folder=cache_dir, driver_version=driver_version, extra_names=extra)
        # the file this point compiled: a cache entry found by content may have been made from an
        # identical copy elsewhere (a drop-in's copy of a built-in source)
        self.record["compile"] = dict(self.compiled.record(), source_file=str(source))
        self.note_stale_copies([source, *(inc.get("file") for inc in self.compiled.includes
                                          if isinstance(inc, dict) and inc.get("file"))])
        out_dir.mkdir(parents=True, exist_ok=True)
        suffix = "" if self.role == "kernel" else f"-{self.role}"
        (out_dir / f"compile{suffix}.log").write_text(self.compiled.log)
        if self.compiled.sass_text:
            sass_file = f"kernel{suffix}.sass"
            (out_dir / sass_file).write_text(self.compiled.sass_text)
            self.record["compile"]["sass"] = dict(self.compiled.sass, file=sass_file)
        c = self.compiled
        self.record["sass_check"] = sass_check.check(
            self.sass_classes, c.sass, c.sass_text, c.lowered_name,
            [c.symbols.get(n, n) for n in c.name_expressions if n != c.name_expression],
            kernel=self.name, target=c.options.target, name_expression=c.name_expression)

    def estimate_occupancy(self, facts: DeviceFacts) -> None:
        from gemmlab.gpu.device import estimate_occupancy
        res = self.compiled.resources if self.compiled else None
        if res is not None and facts.arch == "90":
            self.record["occupancy"] = estimate_occupancy(res.registers, res.static_shared_bytes, self.launch,
                                                          facts.sm_count)

    def _resolve(self, gpu, problem: Problem, buffers: Buffers, args) -> tuple:
        out = []
        for arg in args:
            if isinstance(arg, Matrix):
                out.append(np.uint64(buffers.matrix(arg.name).address))
            elif isinstance(arg, Dim):
                out.append(np.int32(dim_value(problem, arg.name)))
            elif isinstance(arg, Workspace):
                out.append(np.uint64(self._workspace.address + arg.offset))
            elif isinstance(arg, Value):
                out.append(NUMPY_CTYPES[arg.ctype](arg.value))
            elif isinstance(arg, TensorMap):
                if arg.matrix == "workspace":
                    address = self._workspace.address + arg.region.offset
                else:
                    address = buffers.matrix(arg.matrix).address
                if arg.each_group:  # issue 44: G maps encoded on the host, copied once, passed by pointer
                    maps = gpu.group_tensor_maps(arg, problem, address)
                    held = guards.allocate(gpu, f"tensor maps of {arg.matrix}_g ({self.name})", (1, maps.size // 4),
                                           maps.view(np.uint32).reshape(1, -1))
                    self._map_buffers.append(held)
                    out.append(np.uint64(held.address))
                else:
                    out.append(gpu.tensor_map(arg, problem, address))
        return tuple(out)

    def _load(self, gpu, name: str, launch: Launch):
        loaded = gpu.load(self.compiled.object_code, name, launch.shared_bytes)
        if launch.threads_per_block > loaded.max_threads_per_block:
            raise ConfigError("kernel", f"{self.name} ({name}) needs {launch.threads_per_block} threads per block, but "
                              f"with {loaded.registers} registers per thread at most {loaded.max_threads_per_block} "
                              "fit (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES otherwise); use a larger thread tile")
        if launch.cluster is not None:
            active = gpu.max_active_clusters(loaded, launch)
            if active < 1:
                raise ConfigError("kernel", f"{self.name}: the device refuses cluster {tuple(launch.cluster)} with "
                                  f"{launch.threads_per_block} threads and {launch.shared_bytes} B dynamic shared "
                                  "memory per block (cuOccupancyMaxActiveClusters = 0); use a smaller cluster or "
                                  "less shared memory")
            self.record.setdefault("occupancy_clusters", {})[name] = active
        return loaded

    def prepare(self, gpu, problem: Problem, buffers: Buffers) -> None:
        if self.workspace_bytes > 0:
            words = -(-self.workspace_bytes // 4)
            self._workspace = guards.allocate(gpu, f"workspace ({self.name})", (1, words))
        loaded = self._load(gpu, self.compiled.name_expression, self.launch)
        self.record["compile"]["driver_attributes"] = {"registers": loaded.registers, "local_bytes": loaded.local_bytes,
                                                       "static_shared_bytes": loaded.static_shared_bytes}
        self.record["occupancy"] = gpu.occupancy(loaded, self.launch)
        calls = []
        for step in self.steps:
            if isinstance(step, Main):
                calls.append(gpu.launcher(loaded, self.launch, self._resolve(gpu, problem, buffers, self.arguments)))
            elif isinstance(step, Memset):
                address, words = ((buffers.c.address, -(-buffers.c.nbytes // 4)) if step.target == "C"
                                  else (self._workspace.address, -(-self.workspace_bytes // 4)))
                value = step.value & 0xFFFFFFFF
                calls.append(lambda address=address, words=words, value=value: gpu.fill32(address, value, words))
            elif isinstance(step, Extra):
                extra = self._load(gpu, step.entry, step.launch)
                calls.append(gpu.launcher(extra, step.launch, self._resolve(gpu, problem, buffers, step.arguments)))
        self._calls = calls

    def enqueue(self) -> None:
        for call in self._calls:
            call()

    def guarded(self) -> list:
        # not the each_group tensor maps: guarded buffers are scratch the after-timing check refills
        return [self._workspace] if self._workspace is not None else []

    def close(self) -> None:
        if self._workspace is not None:
            guards.release(self._workspace)
            self._workspace = None
        if self._map_buffers:
            guards.release(*self._map_buffers)
            self._map_buffers = []


# --- Triton kernels (issue 46) -------------------------------------------------------------------

@dataclass
class TritonBackend(Backend):
    """A Triton kernel (:class:`TritonKernelSpec`): Triton compiles it (for an explicit target, so
    ``mode=compile`` needs no GPU), gemmlab disassembles the cubin and checks the declared SASS
    classes, and :meth:`enqueue` issues ONE launch of the compiled kernel on the run's stream with the
    core's buffers (raw device addresses): NaN fill, verification, timing (events, graph capture),
    guard bands and the after-timing checks are the core's, unchanged. Triton's own timer and
    autotuner are never used. Module :mod:`gemmlab.gpu.triton_compile` holds the Triton calls."""

    launch: Launch | None = None
    arguments: tuple = ()
    constants: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    sass_classes: tuple = ()
    compiled: Any = None
    special: Any = None
    _call: Callable[[], None] | None = None
    _scratch: guards.GuardedMatrix | None = None

    def validate(self, problem: Problem, facts: DeviceFacts) -> None:
        super().validate(problem, facts)
        spec, params = self.spec, self.params
        try:
            grid = spec.launch_grid(problem, params, facts)
            arguments = spec.arguments(problem, params, facts)
            constants = spec.constants(problem, params)
            options = spec.compile_options(problem, params)
            classes = spec.sass_classes_for(problem, params)
        except ParamError as exc:
            raise ConfigError(exc.field, exc.message) from None
        self.sass_classes = declared_classes(spec, classes)
        grid = returned_tuple(spec, "grid", grid, "(cdiv(problem.M, params['BLOCK_M']) * cdiv(problem.N, params['BLOCK_N']),)")
        if not 1 <= len(grid) <= 3 or not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1
                                              for n in grid):
            raise ConfigError("plugin", f"kernel {self.name}: {type(spec).__name__}.grid() returned {grid} for shape "
                              f"{tuple(problem.shape)}; it must be 1 to 3 ints >= 1 (a rounded-down division?)")
        if not isinstance(constants, Mapping) or not isinstance(options, Mapping):
            raise ConfigError("plugin", f"kernel {self.name}: constants() and compile_options() must return dicts")
        warps = options.get("num_warps", 4)
        if not isinstance(warps, int) or warps not in (1, 2, 4, 8, 16, 32):
            raise ConfigError("kernel.num_warps", f"must be a power of two 1..32, got {warps}")
        launch = Launch(grid=tuple(int(n) for n in (*grid, 1, 1)[:3]), block=(32 * warps, 1, 1))
        check_launch(launch, facts, self.name)
        self.arguments = returned_tuple(spec, "arguments", arguments, "(Matrix('A'), Matrix('B'), Matrix('C'), "
                                        "Dim('M'), Dim('N'), Dim('K'))")
        for arg in self.arguments:
            if not isinstance(arg, (Matrix, Dim, Value)):
                raise ConfigError("kernel", f"{self.name}: argument {arg!r} is not allowed for a Triton kernel; use "
                                  "Matrix('A'|'B'|'C'), Dim(...) or Value(...)")
        check_arguments(self.arguments, problem, 0, self.name)
        if spec.kernel is None:
            from gemmlab.contract.registry import source_path
            if not source_path(spec).is_file():
                raise ConfigError("kernel", f"{self.name}: Triton source {source_path(spec)} is not a file "
                                  "(TritonKernelSpec.source: a .py file beside the plugin's file or in gemmlab's "
                                  "kernels/ folder, or an absolute path)")
        self.constants, self.options, self.launch = dict(constants), dict(options), launch
        self.record["launch"] = launch_record(launch)
        self.record["arguments"] = [describe_argument(a) for a in self.arguments]
        self.record["workspace_bytes"] = 0
        self.record["plan"] = ["main kernel (Triton)"]

    def unavailable(self) -> str | None:
        from gemmlab.gpu import triton_compile
        why = triton_compile.unavailable()
        return None if why is None else f"kernel {self.name} is a Triton kernel: {why}"

    def _values(self, problem: Problem, buffers: Buffers | None) -> list:
        out = []
        for arg in self.arguments:
            if isinstance(arg, Matrix):
                out.append(None if buffers is None else int(buffers.matrix(arg.name).address))
            elif isinstance(arg, Dim):
                out.append(int(getattr(problem, arg.name)))
            else:
                out.append(arg.value)
        return out

    def compile(self, problem: Problem, facts: DeviceFacts, arch: str, out_dir: Path, cache_enabled: bool,
                cache_dir: str | None, driver_version: str = "none") -> None:
        from gemmlab.contract.registry import source_path
        from gemmlab.gpu import triton_compile
        spec = self.spec
        source = None if spec.kernel is not None else source_path(spec)
        fn = triton_compile.load_function(spec, source)
        self.special = triton_compile.specialise(fn, self.name, self.arguments, self._values(problem, None),
                                                 self.constants, problem)
        tc = self.compiled = triton_compile.compile_kernel(fn, self.name, self.special, self.options, arch)
        self.launch = Launch(grid=self.launch.grid, block=(32 * tc.num_warps, 1, 1), shared_bytes=tc.shared_bytes)
        self.record["launch"] = launch_record(self.launch)
        summary, text = dict(tc.sass[0]), tc.sass[1]  # the compile's disassembly (kept with it in the memo)
        res = tc.resources
        self.record["compile"] = {
            "backend": "triton", "triton_version": tc.triton_version,
            "source_file": str(source) if source is not None else _function_file(fn),
            "function": fn.__name__, "name_expression": tc.name, "lowered_name": tc.name, "arch": tc.target,
            "options": [f"{k}={v}" for k, v in sorted(self.options.items())],
            "signature": dict(self.special.signature),
            "constexprs": {k: v if isinstance(v, (int, float, str, bool)) else repr(v)
                           for k, v in self.special.constexprs.items()},
            "compile_ms": round(tc.compile_ms, 3), "cache_hit_in_process": tc.cache_hit, "disk_cache": "off",
            "resources": dataclasses_asdict(res) if res is not None else None,
            "shared_bytes": tc.shared_bytes, "num_warps": tc.num_warps,
            "global_scratch_bytes_per_program": int(getattr(tc.compiled.metadata, "global_scratch_size", 0) or 0)}
        self.note_stale_copies([source] if source is not None else [])
        out_dir.mkdir(parents=True, exist_ok=True)
        suffix = "" if self.role == "kernel" else f"-{self.role}"
        (out_dir / f"compile{suffix}.log").write_text(tc.log)
        if text:
            sass_file = f"kernel{suffix}.sass"
            (out_dir / sass_file).write_text(text)
            self.record["compile"]["sass"] = dict(summary, file=sass_file)
        else:
            self.record["compile"]["sass"] = summary
        if tc.shared_bytes > facts.max_shared_per_block_optin:
            raise ConfigError("kernel", f"{self.name}: Triton's kernel needs {tc.shared_bytes} B shared memory per "
                              f"block; the device allows {facts.max_shared_per_block_optin} B; use smaller blocks "
                              "or fewer num_stages")
        self.record["sass_check"] = sass_check.check(self.sass_classes, summary, text, tc.name, (), kernel=self.name,
                                                     target=tc.target, name_expression=tc.name)

    def estimate_occupancy(self, facts: DeviceFacts) -> None:
        from gemmlab.gpu.device import estimate_occupancy
        res = self.compiled.resources if self.compiled else None
        if res is not None and facts.arch == "90":
            self.record["occupancy"] = estimate_occupancy(res.registers, res.static_shared_bytes, self.launch,
                                                          facts.sm_count)

    def prepare(self, gpu, problem: Problem, buffers: Buffers) -> None:
        kernel = self.compiled.compiled
        meta = kernel.metadata
        if int(getattr(meta, "profile_scratch_size", 0) or 0) > 0:
            raise ConfigError("kernel", f"{self.name}: the Triton kernel needs profile_scratch "
                              f"({meta.profile_scratch_size} B per program: a profiling build), which gemmlab does "
                              "not allocate; compile it without instrumentation")
        values = self._values(problem, buffers)
        args = tuple(values[ref] if how == "arg" else ref for how, ref in self.special.order)
        stream = int(gpu.stream.handle)
        allocator = self._scratch_allocator(gpu, meta)
        runner = kernel[tuple(self.launch.grid)]  # loads the cubin into the current (primary) context now
        self.record["compile"]["driver_attributes"] = {
            "registers": getattr(kernel, "n_regs", None), "spills": getattr(kernel, "n_spills", None),
            "max_threads": getattr(kernel, "n_max_threads", None), "dynamic_shared_bytes": int(meta.shared)}

        if allocator is None:
            def call(runner=runner, args=args, stream=stream):
                runner(*args, stream=stream)
        else:
            from triton.runtime import _allocation  # the launcher reads its allocator from this ContextVar

            def call(runner=runner, args=args, stream=stream, allocator=allocator, var=_allocation._allocator):
                token = var.set(allocator)  # this thread's context only; restored after the launch
                try:
                    runner(*args, stream=stream)
                finally:
                    var.reset(token)

        self._call = call

    def _scratch_allocator(self, gpu, meta):
        """The allocator Triton's launcher calls for the kernel's global scratch (device-side TMA
        descriptors write their CUtensorMaps there), or None when the kernel needs none: one
        guard-banded buffer (``guards.allocate``, a :meth:`guarded` buffer the safety nets check) of
        ``global_scratch_size`` x programs x ``num_ctas`` bytes, allocated here, before any timing;
        each launch gets the same buffer (a request larger than it, or misaligned, raises)."""
        per_program = int(getattr(meta, "global_scratch_size", 0) or 0)
        if per_program <= 0:
            return None
        align = max(1, int(getattr(meta, "global_scratch_align", 1) or 1))
        size = per_program * self.launch.blocks * max(1, int(getattr(meta, "num_ctas", 1) or 1))
        self._scratch = guards.allocate(gpu, f"Triton global scratch ({self.name})", (1, -(-size // 4)))
        address = int(self._scratch.address)
        if address % align:
            raise ConfigError("kernel", f"{self.name}: the global scratch buffer at {address:#x} is not "
                              f"{align}-byte aligned as the Triton kernel asks")
        self.record["workspace_bytes"] = size
        self.record["plan"] = ["main kernel (Triton)", f"global scratch: {size} B ({per_program} B per program, "
                                                         "allocated by gemmlab before timing)"]
        name = self.name

        class Scratch:
            """What Triton's launcher takes from an allocator: ``data_ptr()``."""

            def data_ptr(self) -> int:
                return address

        buffer = Scratch()

        def allocator(nbytes: int, alignment: int, stream) -> Scratch:
            if nbytes > size or address % max(1, int(alignment)):
                raise RuntimeError(f"{name}: Triton asked for {nbytes} B of global scratch aligned to {alignment}; "
                                   f"gemmlab allocated {size} B at {address:#x}")
            return buffer

        return allocator

    def enqueue(self) -> None:
        self._call()

    def guarded(self) -> list:
        return [self._scratch] if self._scratch is not None else []

    def close(self) -> None:
        self._call = None
        if self._scratch is not None:
            guards.release(self._scratch)
            self._scratch = None


def _function_file(fn) -> str | None:
    """The file defining a ``@triton.jit`` function (its wrapped Python function's code object)."""
    code = getattr(getattr(fn, "fn", None), "__code__", None)
    return code.co_filename if code is not None else None
