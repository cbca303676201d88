"""The shape suite (issue 10): real GEMM shapes grouped by family, read from a YAML file.

The shipped suite is ``gemmlab/data/shape_suite.yaml`` (decode-like, prefill-like, tall-skinny,
short-wide, K-heavy, K-light, odd, tiny, square). ``gemmlab experiment=shapes`` sweeps it through
the OmegaConf resolver ``${gemmlab_suite:}`` (registered by the CLI), so the experiment file and
the family table never disagree; the report groups records by :func:`Suite.family_of`.

File format (``schema: gemmlab.shapes/1``)::

    families:
      decode: [[1, 4096, 4096], [8, 4096, 4096], ...]
      tiny:   [[1, 1, 1], ...]

Family names follow ``[a-z][a-z0-9_]*``; every shape is three positive integers and belongs to
exactly one family. Any violation is a :class:`~gemmlab.errors.ConfigError` (one line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

from gemmlab.errors import ConfigError, in_chain, was_interrupted
from gemmlab.paths import DATA_DIR, not_a_regular_file
from gemmlab.contract.hookspecs import Shape

SUITE_FILE = DATA_DIR / "shape_suite.yaml"
SCHEMA = "gemmlab.shapes/1"
TINY_FLOPS_LIMIT = 256 ** 3  # "tiny": M*N*K <= 256^3 (issue 10's target: time <= 1.5x cuBLAS's)
_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Suite:
    """Families of shapes, in file order. ``families`` maps name -> tuple of :class:`Shape`."""

    families: Mapping[str, tuple[Shape, ...]]
    source: str = ""

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """Every shape of the suite, family by family."""
        return tuple(s for shapes in self.families.values() for s in shapes)

    def family_of(self, shape: Iterable[int]) -> str | None:
        """The family of ``shape`` ((M, N, K) or a Shape), or None if the suite does not list it."""
        key = tuple(int(d) for d in shape)
        for name, shapes in self.families.items():
            if key in shapes:
                return name
        return None

    def select(self, names: Iterable[str] = ()) -> tuple[Shape, ...]:
        """The shapes of the named families (all when ``names`` is empty).

        Raises:
            ConfigError: field ``shapes`` for an unknown family name.
        """
        names = [n for n in names if n]
        for n in names:
            if n not in self.families:
                raise ConfigError("shapes", f"unknown family {n!r}; the suite has {', '.join(self.families)}")
        return tuple(s for n, shapes in self.families.items() if not names or n in names for s in shapes)

    def sweep_value(self, names: Iterable[str] = ()) -> str:
        """The Hydra sweep string of the selected shapes: ``"[1,4096,4096],[8,4096,4096],..."``."""
        return ",".join(f"[{s.M},{s.N},{s.K}]" for s in self.select(names))


def parse_suite(data: object, source: str = "<suite>") -> Suite:
    """Validate the parsed YAML/JSON ``data`` of a suite file.

    Raises:
        ConfigError: field ``shapes``: the first rule broken, with the file and family named.
    """
    def bad(what: str) -> ConfigError:
        return ConfigError("shapes", f"{source}: {what}")

    if not isinstance(data, Mapping) or not isinstance(data.get("families"), Mapping) or not data["families"]:
        raise bad("must be a mapping with a non-empty 'families' mapping (family name -> list of [M, N, K])")
    if data.get("schema", SCHEMA) != SCHEMA:
        raise bad(f"schema must be {SCHEMA}, got {data.get('schema')!r}")
    families: dict[str, tuple[Shape, ...]] = {}
    seen: dict[tuple, str] = {}
    for name, shapes in data["families"].items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise bad(f"family name {name!r} must match [a-z][a-z0-9_]*")
        if not isinstance(shapes, (list, tuple)) or not shapes:
            raise bad(f"family {name}: must be a non-empty list of [M, N, K]")
        out = []
        for s in shapes:
            if (not isinstance(s, (list, tuple)) or len(s) != 3
                    or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in s)):
                raise bad(f"family {name}: {s!r} is not [M, N, K] of three positive integers")
            key = tuple(s)
            if key in seen:
                raise bad(f"shape {list(key)} is in both {seen[key]} and {name}; a shape belongs to one family")
            seen[key] = name
            out.append(Shape(*key))
        families[name] = tuple(out)
    return Suite(families=families, source=source)


def load_suite(path: str | Path | None = None) -> Suite:
    """Read and validate a suite file (default: the shipped ``shape_suite.yaml``).

    Raises:
        ConfigError: field ``shapes``: unreadable file, invalid YAML, or a rule of :func:`parse_suite`.
    """
    return _load(str(Path(path).resolve()) if path is not None else str(SUITE_FILE))


def clear_cache() -> None:
    """Forget the shape suites read so far (an edited suite file is read again). For tests and
    long-lived processes (see :func:`gemmlab.clear_caches`)."""
    _load.cache_clear()


@lru_cache(maxsize=8)
def _load(path: str) -> Suite:
    from omegaconf import OmegaConf
    odd = not_a_regular_file(path)
    if odd:  # a fifo would block the reader
        raise ConfigError("shapes", f"{path}: {odd}; give a suite file (YAML)")
    try:
        data = OmegaConf.to_container(OmegaConf.load(path))
    except FileNotFoundError:
        raise ConfigError("shapes", f"{path}: no such file") from None
    except Exception as exc:
        if was_interrupted(exc):  # Ctrl-C or SIGTERM inside OmegaConf: the interrupt itself, not a bad file
            raise in_chain(exc, KeyboardInterrupt) from None  # (SIGTERM stays Terminated: exit 143, not 130)
        raise ConfigError("shapes", f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    return parse_suite(data, path)


def suite_resolver(*families: str) -> str:
    """OmegaConf resolver ``${gemmlab_suite:}`` / ``${gemmlab_suite:decode,tiny}``: the sweep string
    of the shipped suite's shapes (all, or the named families)."""
    return load_suite().sweep_value(families)
