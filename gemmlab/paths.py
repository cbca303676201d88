"""Where gemmlab's shipped files live: ``conf/``, ``kernels/``, the built-in ``plugins/`` and ``gemmlab/data``.

In a source checkout they are top-level folders beside ``gemmlab/``; in an installed wheel they
are ``gemmlab/conf``, ``gemmlab/kernels`` and the package ``gemmlab_plugins`` (see
pyproject.toml's package-dir mapping).
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _first(*candidates: Path) -> Path:
    for c in candidates:
        if c.is_dir():
            return c
    return candidates[-1]


CONF_DIR = _first(_PKG / "conf", _PKG.parent / "conf")
KERNELS_DIR = _first(_PKG / "kernels", _PKG.parent / "kernels")
PLUGINS_DIR = _first(_PKG.parent / "gemmlab_plugins", _PKG.parent / "plugins")
DATA_DIR = _PKG / "data"  # package data: the shape suite and the tuning tables
SOURCE_ROOT = _PKG.parent if (_PKG.parent / "pyproject.toml").is_file() else None
