"""gemmlab: verified and timed GPU GEMM kernels, one experiment per Hydra config.

Public API (import from the modules):
    gemmlab.pipeline.run_point(cfg, out_dir) -> dict   one experiment point (compile/verify/time/record)
    gemmlab.registry.load_registry(plugin_dirs) -> Registry
"""

__version__ = "0.1.0"

from gemmlab.errors import ConfigError, GemmlabError, NoGPUError  # noqa: E402
from gemmlab.hookspecs import DeviceFacts, KernelSpec, Launch, ParamError, Shape, hookimpl  # noqa: E402

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

    for name, hook in (("gemmlab.compile", "clear_cache"), ("gemmlab.pipeline", "clear_cache"),
                       ("gemmlab.shapes", "clear_cache"), ("gemmlab.record", "clear_cache")):
        module = sys.modules.get(name)
        if module is not None:
            getattr(module, hook)()
