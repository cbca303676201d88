"""Shared test setup: the ``gpu`` marker skips (with the reason) where no CUDA GPU is usable; the
fixtures that run gemmlab's command lines in a subprocess against this checkout."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    """None when a CUDA driver and at least one GPU are usable, else why not."""
    try:
        from cuda.core import Device
        if not Device.get_all_devices():
            return "no CUDA GPU visible"
    except Exception as exc:  # no driver library, driver too old, ...
        return f"no CUDA driver/GPU ({type(exc).__name__}: {str(exc)[:80]})"
    return None


def pytest_configure(config):
    """Keep the persistent compile cache of the test session out of the user's home."""
    import tempfile
    os.environ.setdefault("GEMMLAB_CACHE_DIR", tempfile.mkdtemp(prefix="gemmlab-test-cache-"))


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            reason = reason or gpu_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"gpu test skipped: {reason}"))


@pytest.fixture
def cli_env():
    """Environment for running ``python -m gemmlab`` from any directory against this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("HYDRA_FULL_ERROR", None)
    return env


@pytest.fixture
def gemmlab_cmd():
    """argv prefix of the gemmlab command for subprocess tests."""
    return [sys.executable, "-m", "gemmlab"]


@pytest.fixture
def run_module(cli_env):
    """``run_module(module, *args, cwd=..., timeout=240)``: run ``python -m <module> ARGS`` (e.g.
    ``gemmlab``, ``gemmlab.results.report``, ``gemmlab.results.compare``) in ``cwd`` against this checkout, with
    matplotlib on Agg and rich at its default width; returns the ``CompletedProcess`` (text)."""
    env = dict(cli_env, MPLBACKEND="Agg")
    env.pop("COLUMNS", None)

    def run(module: str, *args, cwd, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
    return run
