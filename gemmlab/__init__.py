"""gemmlab: verified and timed GPU GEMM kernels, one experiment per Hydra config.

The package is grouped in layers, one folder each, imports flowing downward only (docs/plugin-guide.md,
"Layout", checked by tests/test_layout.py): ``cli`` > ``results`` > ``run`` > ``dispatch`` >
``stages`` > ``gpu`` > ``contract`` > the base (``errors``, ``paths``). This module re-exports the
plugin API (errors and the contract's main types) for ``from gemmlab import hookimpl, KernelSpec``.

The plugin contract's import paths from before the layers, ``gemmlab.hookspecs`` and
``gemmlab.plugin_utils`` (documented for plugin authors), stay valid: they name the very modules
``gemmlab.contract.hookspecs`` and ``gemmlab.contract.plugin_utils`` (not copies), so a plugin
written for them (entry point or drop-in folder) keeps working unchanged. New code imports
``gemmlab.contract``.

Public API (import from the modules):
    gemmlab.run.pipeline.run_point(cfg, out_dir) -> dict   one experiment point (compile/verify/time/record)
    gemmlab.contract.registry.load_registry(plugin_dirs) -> Registry
"""

__version__ = "0.1.0"

#: the names this module re-exports, and the module each comes from; imported when first used
#: (PEP 562 ``__getattr__``), so ``import gemmlab`` itself costs nothing: the console scripts
#: (gemmlab.cli.entry) then load the rest with Ctrl-C held back
_EXPORTS = (("gemmlab.errors", ("ConfigError", "GemmlabError", "NoGPUError")),
            ("gemmlab.contract.hookspecs", ("DeviceFacts", "KernelSpec", "Launch", "ParamError", "Shape", "hookimpl")))


def __getattr__(name: str):
    """The re-exported plugin API (:data:`_EXPORTS`) and the old module paths ``gemmlab.hookspecs``
    and ``gemmlab.plugin_utils`` (the contract's very modules: ``gemmlab/hookspecs.py`` and
    ``gemmlab/plugin_utils.py`` put them in their own place in ``sys.modules``)."""
    import importlib
    for module, names in _EXPORTS:
        if name in names:
            return getattr(importlib.import_module(module), name)
    if name in ("hookspecs", "plugin_utils"):
        return importlib.import_module(f"gemmlab.contract.{name}")
    raise AttributeError(f"module 'gemmlab' has no attribute {name!r}")

__all__ = [
    "ConfigError", "GemmlabError", "NoGPUError", "DeviceFacts", "KernelSpec", "Launch",
    "ParamError", "Shape", "hookimpl", "__version__", "clear_caches",
]


def clear_caches() -> None:
    """Forget what this process has memoised, so the next command starts as a new process would:
    compiled kernels (the in-process compile cache; the on-disk one stays), loaded plugin
    registries, shape suites and shape sets, the CUDA header folders, the git commit of the checkout
    and the last seeded input draw and its float64 products.

    For tests and long-lived processes that run several commands (a plugin folder edited in
    between, an environment variable changed); a plain ``gemmlab`` command never needs it. Modules
    not imported yet hold nothing and are not imported.
    """
    import sys

    for name in ("gemmlab.gpu.compile", "gemmlab.run.pipeline", "gemmlab.dispatch.shapes", "gemmlab.dispatch.shapeset",
                 "gemmlab.stages.record", "gemmlab.stages.inputs", "gemmlab.stages.verify"):
        module = sys.modules.get(name)
        if module is not None:
            module.clear_cache()
