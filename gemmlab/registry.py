"""Plugin discovery: built-in plugins, entry points and drop-in folders, through pluggy.

The core never imports a plugin by name: it asks the plugin manager for ``gemmlab_kernels``
and indexes the returned :class:`~gemmlab.hookspecs.KernelSpec` objects by ``name``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Iterable

import pluggy

from gemmlab import hookspecs
from gemmlab.errors import ConfigError
from gemmlab.hookspecs import KernelBase, KernelSpec
from gemmlab.paths import KERNELS_DIR, PLUGINS_DIR

ENTRY_POINT_GROUP = hookspecs.PROJECT
BUILTIN_PACKAGE = "gemmlab_plugins"
NAME_RULE = re.compile(r"[a-z][a-z0-9_]*")


class Registry:
    """The kernels known to this process, with the plugin that provided each.

    Attributes:
        pm: the ``pluggy.PluginManager`` (project ``gemmlab``).
        kernels: ``{name: KernelSpec}``, sorted by name.
        origins: ``{name: plugin name}`` (module name, entry point or file path).
    """

    def __init__(self, pm: pluggy.PluginManager):
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
                self.kernels[spec.name] = spec
                self.origins[spec.name] = impl.plugin_name
        self.kernels = dict(sorted(self.kernels.items()))

    def get(self, name: str) -> KernelSpec:
        """Return the spec of kernel ``name``.

        Raises:
            ConfigError: ``kernel.name`` is not registered (the message lists those that are).
        """
        try:
            return self.kernels[name]
        except KeyError:
            raise ConfigError("kernel", f"unknown kernel '{name}'; registered kernels: "
                              f"{', '.join(self.kernels) or 'none'}") from None

    def source_path(self, spec: KernelSpec) -> Path:
        """The ``.cu`` file of ``spec``: an absolute path as given, else under ``kernels/``."""
        return source_path(spec)


def source_path(spec: KernelSpec) -> Path:
    """The ``.cu`` file of ``spec``: an absolute path as given, else under ``kernels/``."""
    p = Path(spec.source)
    return p if p.is_absolute() else KERNELS_DIR / p


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


def load_registry(plugin_dirs: Iterable[str | Path] = (), entry_points: bool = True) -> Registry:
    """Build the registry: built-in plugins, then entry points (group ``gemmlab``), then every
    ``*.py`` file (not starting with ``_``) in each folder of ``plugin_dirs``.

    Raises:
        ConfigError: a plugin folder is missing or a plugin file fails to import
            (field ``plugin_dirs``); an entry point fails to load, a hook raises, a kernel name
            breaks the rule ``[a-z][a-z0-9_]*`` or is provided twice (field ``plugin``).
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
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
        folder = Path(folder).expanduser().resolve()
        if not folder.is_dir():
            raise ConfigError("plugin_dirs", f"{folder} is not a directory")
        for path in sorted(folder.glob("*.py")):
            if path.name.startswith("_"):
                continue
            module = _load_file(path)
            if pm.is_registered(module):
                continue
            pm.register(module, name=str(path))
    return Registry(pm)
