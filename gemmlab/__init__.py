"""gemmlab: verified and timed GPU GEMM kernels, one experiment per Hydra config.

The package is grouped in layers, one folder each, imports flowing downward only (README
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

from gemmlab.errors import ConfigError, GemmlabError, NoGPUError  # noqa: E402
from gemmlab.contract.hookspecs import DeviceFacts, KernelSpec, Launch, ParamError, Shape, hookimpl  # noqa: E402


def _alias_plugin_contract() -> None:
    """Name the contract's modules by their old paths too (``sys.modules``: one module object each)."""
    import sys

    from gemmlab.contract import hookspecs, plugin_utils
    for old, module in (("hookspecs", hookspecs), ("plugin_utils", plugin_utils)):
        sys.modules.setdefault(f"{__name__}.{old}", module)
        globals().setdefault(old, module)


_alias_plugin_contract()

__all__ = [
    "ConfigError", "GemmlabError", "NoGPUError", "DeviceFacts", "KernelSpec", "Launch",
    "ParamError", "Shape", "hookimpl", "__version__", "clear_caches",
]


def clear_caches() -> None:
    """Forget what this process has memoised, so the next command starts as a new process would:
    compiled kernels (the in-process compile cache; the on-disk one stays), loaded plugin
    registries, shape suites, the CUDA header folders and the git commit of the checkout.

    For tests and long-lived processes that run several commands (a plugin folder edited in
    between, an environment variable changed); a plain ``gemmlab`` command never needs it. Modules
    not imported yet hold nothing and are not imported.
    """
    import sys

    for name in ("gemmlab.gpu.compile", "gemmlab.run.pipeline", "gemmlab.dispatch.shapes", "gemmlab.stages.record"):
        module = sys.modules.get(name)
        if module is not None:
            module.clear_cache()
