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
    "ParamError", "Shape", "hookimpl", "__version__",
]
