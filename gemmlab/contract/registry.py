"""Plugin discovery: built-in plugins, entry points and drop-in folders, through pluggy.

The core never imports a plugin by name: it asks the plugin manager for ``gemmlab_kernels``
and indexes the returned :class:`~gemmlab.contract.hookspecs.KernelSpec` objects by ``name``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
import types
from pathlib import Path
from typing import Iterable, Mapping

import pluggy

from gemmlab.contract import hookspecs
from gemmlab.errors import ConfigError
from gemmlab.contract.hookspecs import KernelBase, KernelSpec
from gemmlab.contract.epilogue import check_support
from gemmlab.contract.session_slot import SessionSlot
from gemmlab.contract.space import space_problem
from gemmlab.paths import KERNELS_DIR, PLUGINS_DIR

ENTRY_POINT_GROUP = hookspecs.PROJECT
BUILTIN_PACKAGE = "gemmlab_plugins"
NAME_RULE = re.compile(r"[a-z][a-z0-9_]*")


#: the end of the unknown-kernel message (:meth:`Registry.get`): ``kernel=auto`` is a kernel choice too
AUTO_HINT = "; or auto (gemmlab chooses one per shape)"


class Registry:
    """The kernels known to this process, with the plugin that provided each.

    Attributes:
        pm: the ``pluggy.PluginManager`` (project ``gemmlab``).
        kernels: ``{name: KernelSpec}``, sorted by name.
        origins: ``{name: plugin name}`` (module name, entry point or file path).
        plugin_dirs: ``{folder: [kernel names its drop-ins registered]}`` for each ``plugin_dirs``
            folder (resolved), in the order given (for the unknown-kernel message's hint).

    Each spec's declaration is checked here (:func:`check_declaration`), and a relative ``source``
    of a drop-in or entry-point plugin is resolved beside the plugin's file (:func:`resolve_source`).
    """

    def __init__(self, pm: pluggy.PluginManager, plugin_dirs: Iterable[Path] = ()):
        self.pm = pm
        self.kernels: dict[str, KernelSpec] = {}
        self.origins: dict[str, str] = {}
        for impl in pm.hook.gemmlab_kernels.get_hookimpls():
            try:
                specs = list(impl.function() or [])
            except Exception as exc:
                raise ConfigError("plugin", f"{impl.plugin_name}: gemmlab_kernels failed: "
                                  f"{type(exc).__name__}: {exc}") from None
            for spec in specs:
                if not isinstance(spec, KernelBase):
                    raise ConfigError("plugin", f"{impl.plugin_name} returned {type(spec).__name__}, "
                                      "expected gemmlab.KernelSpec or LibraryKernelSpec")
                if not isinstance(spec.name, str) or not NAME_RULE.fullmatch(spec.name):
                    raise ConfigError("plugin", f"{impl.plugin_name}: kernel name {spec.name!r} is not "
                                      "allowed; use lowercase letters, digits and '_' (starting with a letter)")
                if spec.name in self.kernels:
                    raise ConfigError("plugin", f"kernel '{spec.name}' is provided twice: by "
                                      f"{self.origins[spec.name]} and by {impl.plugin_name}")
                check_declaration(spec, impl.plugin_name)
                if not impl.plugin_name.startswith(f"{BUILTIN_PACKAGE}."):
                    resolve_source(spec, getattr(impl.plugin, "__file__", None))
                self.kernels[spec.name] = spec
                self.origins[spec.name] = impl.plugin_name
        self.kernels = dict(sorted(self.kernels.items()))
        self.plugin_dirs: dict[Path, list[str]] = {
            Path(folder): [n for n, origin in self.origins.items() if Path(origin).parent == Path(folder)]
            for folder in plugin_dirs}

    def get(self, name: str) -> KernelSpec:
        """Return the spec of kernel ``name``.

        Raises:
            ConfigError: ``kernel.name`` is not registered (:meth:`unknown`).
        """
        try:
            return self.kernels[name]
        except KeyError:
            raise self.unknown(name) from None

    def unknown(self, name: str, where: str = "") -> ConfigError:
        """The one error for a kernel name that is not registered, wherever it was named (``where``:
        e.g. ``" in hydra.sweeper.params.kernel"``): the registered kernels, and a hint about
        drop-ins: without ``plugin_dirs`` that a drop-in needs it, else what each folder registered.
        """
        if not self.plugin_dirs:
            hint = "; no plugin_dirs: a drop-in kernel needs plugin_dirs=[the folder of its .py file]"
        else:
            hint = "".join(f"; plugin_dirs folder {folder} registered " + (", ".join(names) if names else "no kernel")
                           for folder, names in self.plugin_dirs.items())
        return ConfigError("kernel", f"unknown kernel '{name}'{where}; registered kernels: "
                           f"{', '.join(self.kernels) or 'none'}{AUTO_HINT}{hint}")

    def source_path(self, spec: KernelSpec) -> Path:
        """The ``.cu`` file of ``spec`` (:func:`source_path`)."""
        return source_path(spec)


def source_path(spec: KernelSpec) -> Path:
    """The ``.cu`` file of ``spec``: an absolute path as given, else under ``kernels/`` (a drop-in's
    or entry point's relative source found beside its plugin file was made absolute when the
    registry was built, :func:`resolve_source`)."""
    p = Path(spec.source)
    return p if p.is_absolute() else KERNELS_DIR / p


def builtin_plugin_files() -> list[str]:
    """The files of the built-in plugin modules (``gemmlab_plugins.*``) imported in this process,
    sorted: what a point's run used of ``plugins/`` (the registry, ``kernel=auto``'s rules, the
    kernel's own class), for the edit->run check (:func:`gemmlab.paths.stale_checkout_source`)."""
    return sorted({f for name, module in list(sys.modules.items())
                   if name.startswith(f"{BUILTIN_PACKAGE}.") and (f := getattr(module, "__file__", None))})


def resolve_source(spec: KernelBase, plugin_file: str | None) -> None:
    """Make a relative ``spec.source`` of a drop-in or entry-point plugin absolute when that file
    exists beside ``plugin_file`` (the plugin's module): a plugin copied from a built-in together
    with its ``.cu`` compiles its own copy. Where no such file exists the name is left as it is and
    stays gemmlab's ``kernels/<source>`` (a drop-in that reuses a built-in's source on purpose).
    """
    source = spec.source
    if not plugin_file or not isinstance(source, (str, os.PathLike)) or not str(source).strip():
        return
    if Path(source).is_absolute():
        return
    beside = Path(plugin_file).resolve().parent / source
    if beside.is_file():
        spec.source = str(beside)


#: parameter names a kernel may not declare: ``name`` is its config node's own key (``kernel=<name>``)
RESERVED_PARAMS = ("name",)
PARAM_RULE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def check_declaration(spec: KernelBase, where: str) -> None:
    """Check what a plugin declares for ``spec`` (``source``, ``precisions``, ``layouts``,
    ``defaults``, ``space`` (:func:`gemmlab.contract.space.space_problem`), ``sass_classes``), when the registry is built: a mistake there is the plugin's, not the command
    line's.

    Raises:
        ConfigError: one line naming the plugin (``where``: its file, entry point or module),
            the kernel, the field and what is allowed (field ``plugin_dirs`` for a drop-in file,
            else ``plugin``).
    """
    def bad(field: str, value, allowed: str) -> ConfigError:
        return _form_error(where, f"kernel '{spec.name}' declares {field}={value!r}; {allowed}")

    source = spec.source
    if not isinstance(source, (str, os.PathLike)):
        raise bad("source", source, "give the .cu file as a str: a file name (beside the plugin file, else in "
                  "gemmlab's kernels/ folder) or an absolute path")
    precisions = spec.precisions
    if (not isinstance(precisions, (tuple, list)) or not precisions
            or not all(isinstance(p, str) and p in hookspecs.PRECISIONS for p in precisions)):
        raise bad("precisions", precisions, f"it must be a tuple of one or more of {', '.join(hookspecs.PRECISIONS)}, "
                  "e.g. precisions=(\"fp32\",)")
    layouts = spec.layouts
    if (not isinstance(layouts, (tuple, list)) or not layouts
            or not all(isinstance(pair, (tuple, list)) and len(pair) == 2
                       and all(isinstance(x, str) and x in hookspecs.LAYOUTS for x in pair) for pair in layouts)):
        one_pair = (isinstance(layouts, (tuple, list)) and len(layouts) == 2
                    and all(isinstance(x, str) and x in hookspecs.LAYOUTS for x in layouts))
        raise bad("layouts", layouts, "it must be a tuple of (layout.a, layout.b) pairs, each "
                  f"{' or '.join(hookspecs.LAYOUTS)}, e.g. layouts=((\"row\", \"row\"), (\"row\", \"col\"))"
                  + (f"; one pair is written layouts=({tuple(layouts)!r},)" if one_pair else ""))
    rounding = getattr(spec, "tf32_rounding", None)
    if rounding is not None and rounding not in hookspecs.TF32_ROUNDINGS:
        raise bad("tf32_rounding", rounding, f"it must be None (undeclared) or one of {', '.join(hookspecs.TF32_ROUNDINGS)}")
    accumulation = getattr(spec, "fp8_accumulation", None)
    if accumulation is not None and accumulation != "float32" and not (
            isinstance(accumulation, int) and not isinstance(accumulation, bool) and accumulation >= hookspecs.FP8_MMA_K
            and accumulation % hookspecs.FP8_MMA_K == 0):
        raise bad("fp8_accumulation", accumulation, "it must be None (undeclared), \"float32\", or the promotion "
                  f"interval in K elements, a multiple of {hookspecs.FP8_MMA_K} (FP8 wgmma's K), e.g. 128")
    kinds = getattr(spec, "grouped_kinds", ())
    if not isinstance(kinds, (tuple, list)) or not all(isinstance(k, str) and k in hookspecs.GROUPED_KINDS for k in kinds):
        raise bad("grouped_kinds", kinds, f"it must be a tuple of {', '.join(hookspecs.GROUPED_KINDS)} (issue 44), or () "
                  "for a plain GEMM kernel, e.g. grouped_kinds=(\"contiguous\", \"masked\")")
    why = check_support(getattr(spec, "epilogue", hookspecs.PLAIN))
    if why:
        raise bad("epilogue", getattr(spec, "epilogue", None), why + " (issue 43)")
    defaults = spec.defaults
    if not isinstance(defaults, Mapping):
        raise bad("defaults", defaults, "it must be a dict of parameter names and int defaults, e.g. {\"BM\": 64}")
    for key in defaults:
        if not isinstance(key, str) or not PARAM_RULE.fullmatch(key):
            raise bad("defaults", dict(defaults), f"parameter name {key!r} is not allowed; use letters, digits, "
                      "'_' and '-' (starting with a letter or '_')")
        if key in RESERVED_PARAMS:
            raise bad("defaults", dict(defaults), f"a parameter may not be called {key!r} (the kernel config's "
                      f"own key: kernel=<name>); rename it")
    space = getattr(spec, "space", None)
    if space is not None:  # issue 41: the declared tuning space (None: derived from defaults and param_values)
        wrong = space_problem(space, defaults, getattr(spec, "param_values", None))
        if wrong is not None:
            raise _form_error(where, f"kernel '{spec.name}' declares {wrong[0]}: {wrong[1]}")
    classes = getattr(spec, "sass_classes", ())
    why = sass_classes_problem(classes)
    if why is None and classes and isinstance(spec, hookspecs.LibraryKernelSpec):
        why = "a library kernel has no SASS gemmlab compiles: leave sass_classes out"
    if why is not None:
        raise bad("sass_classes", classes, why)
    if isinstance(spec, hookspecs.TritonKernelSpec):
        wrong = triton_problem(spec)
        if wrong is not None:
            raise bad(*wrong)


def triton_problem(spec) -> tuple | None:
    """``(field, value, what is allowed)`` for what is wrong in a
    :class:`~gemmlab.contract.hookspecs.TritonKernelSpec`'s declaration (None when nothing is):
    the function (``kernel``, a ``@triton.jit`` object, or ``source`` a ``.py`` file and
    ``function`` its name), :meth:`grid` overridden, the option parameters' values. Imports no Triton."""
    kernel, function, source = spec.kernel, spec.function, spec.source
    if kernel is not None:
        if triton_jit(kernel) is None:
            return ("kernel", kernel, "give the @triton.jit function itself (or its @triton.autotune wrapper), or "
                    "leave kernel out and name it with source='file.py' and function='name'")
        for hook in ("reset_to_zero", "restore_value"):
            if getattr(kernel, hook, None):
                return ("kernel", kernel, f"its @triton.autotune sets {hook}={list(getattr(kernel, hook))}; gemmlab "
                        "owns the buffers (C is NaN-filled before each verified launch) and runs no autotune hook: "
                        "a kernel that needs C zeroed must zero it itself")
        if getattr(kernel, "user_defined_pre_hook", False) or getattr(kernel, "user_defined_post_hook", False):
            return ("kernel", kernel, "its @triton.autotune sets a pre_hook or post_hook, which gemmlab does not run "
                    "(it owns the buffers and the launch): leave them out")
    else:
        if not isinstance(function, str) or not function.isidentifier():
            return ("function", function, "name the @triton.jit function in source (a Python identifier), e.g. "
                    "function='matmul_kernel'")
        if not isinstance(source, (str, os.PathLike)) or not str(source).endswith(".py"):
            return ("source", source, "a Triton kernel's source is the .py file that defines its @triton.jit function "
                    "(beside the plugin file, else in gemmlab's kernels/ folder, or an absolute path)")
    configs = spec.configs or (getattr(kernel, "configs", None) if kernel is not None and spec.space is None else None)
    if configs:
        if spec.space is not None and spec.configs and not _space_is_configs(spec):
            return ("configs", f"{len(spec.configs)} configs", "give the autotune configs or a space, not both")
        try:
            hookspecs.configs_space(configs, hookspecs.TRITON_OPTIONS)
        except ValueError as exc:
            return ("configs", f"<{len(configs)} configs>" if isinstance(configs, (list, tuple)) else configs, str(exc))
    if (type(spec).grid is hookspecs.TritonKernelSpec.grid
            and type(spec).launch_grid is hookspecs.TritonKernelSpec.launch_grid):
        return ("grid", None, "override grid(self, problem, params) to return the blocks along x, y, z (or "
                "launch_grid(self, problem, params, device) where they depend on the device)")
    for name in hookspecs.TRITON_OPTIONS:
        value = spec.defaults.get(name) if isinstance(spec.defaults, Mapping) else None
        if name == "num_warps" and value is not None and value not in (1, 2, 4, 8, 16, 32):
            return ("defaults", dict(spec.defaults), f"num_warps must be a power of two 1..32, got {value!r}")
    return None


def triton_jit(obj, depth: int = 4):
    """The ``@triton.jit`` function inside ``obj`` (itself, or the ``.fn`` of an ``@triton.autotune``
    / ``@triton.heuristics`` wrapper, up to ``depth`` wrappers), or None: anything with ``params``
    and a callable ``run``. Imports no Triton."""
    for _ in range(depth + 1):
        if obj is None:
            return None
        if hasattr(obj, "params") and callable(getattr(obj, "run", None)):
            return obj
        obj = getattr(obj, "fn", None)
    return None


def _space_is_configs(spec) -> bool:
    """Whether ``spec.space`` is the one :class:`TritonKernelSpec` made from its configs."""
    return any(getattr(r, "name", None) == "autotune_configs" for r in getattr(spec.space, "restrictions", ()))


def sass_classes_problem(classes) -> str | None:
    """Why ``classes`` is not a valid ``sass_classes`` declaration (a tuple of distinct names from
    :data:`~gemmlab.contract.hookspecs.SASS_CLASSES`), or None when it is."""
    allowed = hookspecs.SASS_CLASSES
    hint = f"it must be a tuple of SASS instruction classes, each one of {', '.join(allowed)}, e.g. sass_classes=(\"HGMMA\",)"
    if isinstance(classes, str):
        return hint + (f"; one class is written sass_classes=({classes!r},)" if classes in allowed else "")
    if not isinstance(classes, (tuple, list)):
        return hint
    for name in classes:
        if not isinstance(name, str) or name not in allowed:
            close = [a for a in allowed if isinstance(name, str) and a.upper() == name.upper()]
            return hint + (f"; {name!r} is not one" + (f" (did you mean {close[0]!r}?)" if close else ""))
    if len(set(classes)) != len(classes):
        return hint + "; each class once"
    return None


#: the KernelSpec methods the core calls (a plugin's code runs inside them): v1, the v2 problem-level
#: ones and the library kernels'
PLUGIN_METHODS = ("check", "entry", "launch", "ownership", "check_problem", "geometry", "instance", "options",
                  "arguments", "workspace_bytes", "plan", "sass_classes_for", "available", "library_version", "types",
                  "enqueue_function", "enqueue_problem", "grid", "constants", "compile_options", "launch_grid")


HOOKSPECS_FILE = Path(hookspecs.__file__).resolve()


def describe_exception(exc: BaseException, traceback_path: Path) -> str:
    """One line for an unexpected exception: when it came from a plugin's code, name the kernel,
    the method the core called (``check``, ``launch``, ...), the plugin's file and line, and where
    the full traceback was written.
    """
    import traceback as _tb
    first = (str(exc).strip().splitlines() or [""])[0]
    what = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    for frame, lineno in _tb.walk_tb(exc.__traceback__):  # the outermost plugin frame: the call the core made
        spec = frame.f_locals.get("self")
        if (frame.f_code.co_name in PLUGIN_METHODS and isinstance(spec, KernelBase)
                and Path(frame.f_code.co_filename).resolve() != HOOKSPECS_FILE):  # not a default calling a v1 method
            return (f"plugin error: kernel '{spec.name}' raised {what} in {type(spec).__name__}."
                    f"{frame.f_code.co_name}() ({frame.f_code.co_filename}:{lineno}); traceback: {traceback_path}")
    return f"{what} (traceback: {traceback_path})"


def _import_builtin_package():
    try:
        return importlib.import_module(BUILTIN_PACKAGE)
    except ModuleNotFoundError:
        # Source checkout: the folder is called plugins/, give it its unambiguous import name.
        spec = importlib.util.spec_from_file_location(
            BUILTIN_PACKAGE, PLUGINS_DIR / "__init__.py", submodule_search_locations=[str(PLUGINS_DIR)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[BUILTIN_PACKAGE] = module
        spec.loader.exec_module(module)
        return module


def _load_file(path: Path):
    # keyed by path and content: an edited file is imported afresh, an unchanged one only once
    digest = hashlib.sha1(str(path).encode() + b"\0" + path.read_bytes()).hexdigest()[:12]
    name = f"gemmlab_dropin_{digest}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError("plugin_dirs", f"could not import {path}: {type(exc).__name__}: {exc}") from None
    return module


HOOK_NAMES = tuple(n for n in vars(hookspecs.KernelHooks) if n.startswith(f"{hookspecs.PROJECT}_"))


def _form_error(where: str, message: str) -> ConfigError:
    return ConfigError("plugin_dirs" if where.endswith(".py") else "plugin", f"{where}: {message}")


def _validation_message(exc: Exception) -> str:
    """pluggy's PluginValidationError as one line (what is wrong, not the internals)."""
    text = " ".join(str(exc).split())
    if "are declared in the hookimpl but can not be found in the hookspec" in text:
        import re as _re
        args = _re.search(r"Argument\(s\) (\{[^}]*\})", text)
        return (f"hook gemmlab_kernels() takes no arguments, but the plugin's takes {args.group(1) if args else 'some'} "
                "(a module-level hook has no self: write def gemmlab_kernels():)")
    return text


def _check_form(module, where: str) -> None:
    """A drop-in module's hooks must be real ``@hookimpl`` functions named like a hookspec.

    Raises:
        ConfigError: naming the file and what is wrong.
    """
    import difflib
    marker = f"{hookspecs.PROJECT}_impl"
    for attr, value in vars(module).items():
        if not callable(value) or isinstance(value, type):
            continue
        if attr in HOOK_NAMES and not hasattr(value, marker):
            raise _form_error(where, f"{attr} is not marked @hookimpl (from gemmlab.contract.hookspecs import "
                                     f"hookimpl, then put @hookimpl on the line above def {attr})")
        if hasattr(value, marker) and attr not in HOOK_NAMES:
            close = difflib.get_close_matches(attr, HOOK_NAMES, n=1)
            raise _form_error(where, f"@hookimpl {attr} is not a gemmlab hook"
                                     + (f"; did you mean {close[0]}?" if close else f"; hooks: {', '.join(HOOK_NAMES)}"))


class _PluginManager(pluggy.PluginManager):
    """pluggy's ``PluginManager`` that reads a plain module's attributes from its ``__dict__``.

    ``register`` asks :meth:`parse_hookimpl_opts` about every name in ``dir(plugin)``; pluggy
    answers each through ``inspect.getattr_static``, about 0.1 ms a name: most of the 7.5 ms of CPU
    a :func:`load_registry` took for the 17 built-in modules (about 30 names each), once in a
    command and once in each point worker's point. For a module of type ``ModuleType`` and a name
    in its ``__dict__`` that is not one of ``ModuleType``'s own attributes, ``getattr_static``
    returns that ``__dict__`` entry, so pluggy's answer is read from it here, by pluggy's own tests
    in pluggy's order: a plain function gives its marker's options (``gemmlab_impl``, a dict, else
    None; a function carrying a ``__func__`` attribute is left to pluggy), a value that is not a
    function, ``staticmethod``, ``classmethod`` or bound method gives None, and everything else
    (those three, another type of plugin, a name not in the ``__dict__``) is pluggy's own method:
    the hookimpls found are pluggy's."""

    def parse_hookimpl_opts(self, plugin, name: str):
        if type(plugin) is _MODULE and name not in _MODULE_ATTRS:
            value = plugin.__dict__.get(name, _ABSENT)
            if type(value) is _FUNCTION:
                if "__func__" not in value.__dict__:
                    opts = getattr(value, self.project_name + "_impl", None)
                    return opts if isinstance(opts, dict) else None
            elif value is not _ABSENT and not isinstance(value, _HOOKABLE):
                return None
        return super().parse_hookimpl_opts(plugin, name)


_MODULE, _FUNCTION, _ABSENT = type(sys), type(lambda: None), object()
_MODULE_ATTRS = frozenset(vars(_MODULE))
#: what pluggy's lookup can take a hook from (``pluggy._manager._static_hook_attr``)
_HOOKABLE = (staticmethod, classmethod, types.MethodType, _FUNCTION)


def load_registry(plugin_dirs: Iterable[str | Path] = (), entry_points: bool = True) -> Registry:
    """Build the registry: built-in plugins, then entry points (group ``gemmlab``), then every
    ``*.py`` file (not starting with ``_``) in each folder of ``plugin_dirs``.

    Raises:
        ConfigError: a plugin folder is empty or blank, is missing, or a plugin file fails to import
            (field ``plugin_dirs``); an entry point fails to load, a hook raises, a kernel name
            breaks the rule ``[a-z][a-z0-9_]*`` or is provided twice (field ``plugin``).
    """
    plugin_dirs = list(plugin_dirs)
    pm = _PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs.KernelHooks)
    package = _import_builtin_package()
    for name in sorted(getattr(package, "BUILTIN_MODULES", ())):
        module = importlib.import_module(f"{BUILTIN_PACKAGE}.{name}")
        pm.register(module, name=f"{BUILTIN_PACKAGE}.{name}")
    if entry_points:
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        except Exception as exc:  # an installed package's plugin that fails to import
            raise ConfigError("plugin", f"an entry point in group '{ENTRY_POINT_GROUP}' failed to load: "
                              f"{type(exc).__name__}: {exc}") from None
    for folder in plugin_dirs:
        if not str(folder).strip():  # '' resolved to the working directory, which was loaded as a plugin folder
            raise ConfigError("plugin_dirs", f"{str(folder)!r} is {'blank' if folder else 'empty'}; each entry must be a folder of drop-in "
                              "plugins (*.py), e.g. plugin_dirs=[./myplugins]; leave plugin_dirs out for none")
        folder = Path(folder).expanduser().resolve()
        if not folder.is_dir():
            raise ConfigError("plugin_dirs", f"{folder} is not a directory")
        for path in sorted(folder.glob("*.py")):
            if path.name.startswith("_"):
                continue
            module = _load_file(path)
            if pm.is_registered(module):
                continue
            _check_form(module, str(path))
            try:
                pm.register(module, name=str(path))
            except pluggy.PluginValidationError as exc:
                raise _form_error(str(path), _validation_message(exc)) from None
    try:
        pm.check_pending()  # hookimpls that match no hookspec (entry points, built-ins)
    except pluggy.PluginValidationError as exc:
        raise _form_error(str(getattr(exc, "plugin", "plugin")), _validation_message(exc)) from None
    return Registry(pm, [Path(f).expanduser().resolve() for f in plugin_dirs])


class Registries:
    """The kernel registries one session has loaded, one per list of plugin folders (the session,
    :class:`gemmlab.run.session.Session`, owns one: ``Session.registries``; the pipeline reaches the
    active session's through :func:`registries`), so a command loads its plugins once however many
    points it runs.

    Attributes:
        loaded: the folders as given (a tuple of strings) -> the :class:`Registry` loaded from them.
    """

    def __init__(self):
        self.loaded: dict[tuple[str, ...], Registry] = {}

    def get(self, plugin_dirs: tuple[str, ...]) -> Registry:
        """The registry of ``plugin_dirs`` (:func:`load_registry`, once a session).

        Raises:
            ConfigError: as :func:`load_registry` (a failed load is not kept: the next call tries again).
        """
        key = tuple(plugin_dirs)
        if key not in self.loaded:
            self.loaded[key] = load_registry(key)
        return self.loaded[key]

    def clear(self) -> None:
        """Forget the loaded registries (a plugin folder edited since is loaded again)."""
        self.loaded.clear()


#: the default session's registries (:func:`gemmlab.run.session.default`: points run outside any
#: session and the worker process's points use them) and the registries of the session whose point
#: runs now (:meth:`gemmlab.run.session.Session.active`)
_REGISTRIES: SessionSlot[Registries] = SessionSlot("gemmlab.contract.registry.registries", default=Registries())


def registries() -> Registries:
    """The registries of the active session (the default session's when none is active)."""
    return _REGISTRIES.get()


def default_registries() -> Registries:
    """The default session's registries (one a process)."""
    return _REGISTRIES.default()


def using(held: Registries):
    """Inside the block, :func:`registries` is ``held`` (a session's; :meth:`gemmlab.run.session.Session.active`)."""
    return _REGISTRIES.using(held)
