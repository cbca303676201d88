"""Imported by Python at the start of every interpreter whose ``sys.path`` holds tests/ (the
``site`` module's ``sitecustomize`` hook): in the suite, the point workers a test process starts
(gemmlab.run.isolation passes the parent's ``sys.path`` on as ``PYTHONPATH``, and pytest put tests/
on it). Where ``GEMMLAB_TEST_WORKER_MEMO`` is ``1`` (tests/conftest.py sets it for the session),
such a worker reads the suite's recorded NVRTC compilations and disassemblies as the test
processes do (tests/memo_hooks.py): a point worker compiled its kernels with NVRTC and nvdisasm
(~0.4 and ~0.5 CPU s a kernel; ~12 CPU s a suite run, tune and isolation sweeps mostly) where the
test process replays them. Nothing of gemmlab is imported here: the hooks go in right after the
worker itself imports ``gemmlab.gpu.sass`` or ``gemmlab.gpu.compile`` (whichever gemmlab its
``sys.path`` gives), so what a worker imports and from where is unchanged. Elsewhere (the variable
unset or ``0``, a Python without tests/ on its path) it does nothing; another ``sitecustomize``
later on ``sys.path`` runs as it would have."""

from __future__ import annotations

import os
import sys


def _chain() -> None:
    """Run the ``sitecustomize`` this file hides (the first one after tests/ on ``sys.path``)."""
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.origin and os.path.abspath(spec.origin) != os.path.abspath(__file__):
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _after_import(installs: dict) -> None:
    """Call ``installs[name]()`` right after the module ``name`` is first executed."""
    import importlib.abc

    class AfterImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in installs:
                return None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                installs.pop(name)()
                if not installs:
                    sys.meta_path.remove(self)
            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, AfterImport())


def _install() -> None:
    if os.environ.get("GEMMLAB_TEST_WORKER_MEMO") != "1":
        return

    def sass() -> None:
        import memo_hooks
        memo_hooks.memoize_disassembly()

    def nvrtc() -> None:
        import memo_hooks
        memo_hooks.memoize_nvrtc()
    _after_import({"gemmlab.gpu.sass": sass, "gemmlab.gpu.compile": nvrtc})


_chain()
_install()
