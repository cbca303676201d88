"""Hydra 1.3 / OmegaConf 2.3 made cheaper in the test processes only (conftest.py installs it; not a
test module). gemmlab itself replaces no Hydra or OmegaConf function (issue 45): a user's command
composes with Hydra as released. The suite runs ~460 commands in its own processes (tests/clirun.py),
each composing its config at least twice (Hydra's ``get_mode``, then the run), and about a third of
a compose's CPU time goes to work whose result is fixed by its inputs:

- :func:`share_config_store`: Hydra's config loader deep-copies its config repository for every
  compose and for every config group ``--help`` lists (``CachingConfigRepository``); the copy holds
  the ``ConfigStore`` and copied every stored node (gemmlab's ``base_config`` schema, Hydra's own,
  the launcher and sweeper plugins'): ~11 ms a copy, ~170 copies for ``--help``. Here a copy reads
  the one live store, as Hydra's main branch does (facebookresearch/hydra pull request 2928, which
  reads the singleton instead of keeping it in the source). What is composed is unchanged: the
  store is only read while composing (``ConfigStore.load`` returns a copy of the node), and every
  node is stored before Hydra composes.
- :func:`memoize_yaml`: ``OmegaConf.load`` parses a YAML text once a process (PyYAML's pure-Python
  parser; Hydra reads each selected file again for every compose). The parsed data (plain dicts,
  lists and scalars) is kept, keyed by the text itself, and each load builds a new config from a
  copy of it, as ``OmegaConf.load`` builds one from freshly parsed data. A text that does not
  parse, or parses to something ``OmegaConf.load`` refuses, goes to OmegaConf's own ``load`` from
  the same stream or path, so its error is OmegaConf's; nothing is kept for it.
- :func:`memoize_grammar`: OmegaConf parses an interpolation string with its ANTLR grammar each
  time it checks or resolves one (``omegaconf.grammar_parser.parse``), the same few strings of
  Hydra's defaults lists for every compose. The parse tree is a function of the string, the rule
  and the lexer mode, and OmegaConf only reads it (its ``GrammarVisitor`` walks it), so trees are
  kept (``functools.lru_cache``, 4096 strings) in each module that imported ``parse``; a string
  that does not parse raises each time (an exception is never kept).

On test_cli_acceptance.py alone (-p no:xdist, 2 cores): 24.7 -> 17.3 CPU s, the store's share
~6 s of it. tests/test_hydra_memo.py checks each against the function it replaces (the same
configs, group options, trees and errors). ``GEMMLAB_TEST_PLAIN_HYDRA=1`` runs the suite without
any of this (Hydra and OmegaConf as released).
"""

from __future__ import annotations

import copy
import functools
import io
import os
from pathlib import Path

#: environment variable that turns this module off (any non-empty value but ``0``)
PLAIN_ENV = "GEMMLAB_TEST_PLAIN_HYDRA"


def install() -> None:
    """The three speed-ups of the module docstring, each idempotent; none where
    ``$GEMMLAB_TEST_PLAIN_HYDRA`` is set (not ``0``)."""
    if os.environ.get(PLAIN_ENV, "0") not in ("", "0"):
        return
    share_config_store()
    memoize_yaml()
    memoize_grammar()


def share_config_store() -> None:
    """A deep copy of Hydra's ``ConfigStore`` singleton is the singleton itself (see the module
    docstring). :func:`unshared_config_store` undoes it inside a block."""
    from hydra.core.config_store import ConfigStore
    if "__deepcopy__" not in ConfigStore.__dict__:
        ConfigStore.__deepcopy__ = _store_itself


def _store_itself(self, memo):
    return self


class unshared_config_store:
    """Context manager: Hydra's own copying of the ``ConfigStore`` inside the block (for the test
    that compares both); the sharing, where it was installed, after it."""

    def __enter__(self):
        from hydra.core.config_store import ConfigStore
        self.was = ConfigStore.__dict__.get("__deepcopy__")
        if self.was is not None:
            del ConfigStore.__deepcopy__
        return self

    def __exit__(self, *exc):
        from hydra.core.config_store import ConfigStore
        if self.was is not None:
            ConfigStore.__deepcopy__ = self.was
        return False


def memoize_yaml() -> None:
    """``OmegaConf.load`` parses each YAML text once a process (see the module docstring); the
    replaced function is ``OmegaConf.load.__wrapped__``."""
    from omegaconf import OmegaConf
    if getattr(OmegaConf.load, "memoized", False):
        return
    import yaml
    from omegaconf._utils import get_yaml_loader
    real = OmegaConf.load
    parsed: dict[str, object] = {}  # YAML text -> what PyYAML made of it (only read; copied per load)

    def load(file_):
        if isinstance(file_, (str, Path)):
            with io.open(os.path.abspath(file_), "r", encoding="utf-8") as f:
                text = f.read()
            again = file_
        elif getattr(file_, "read", None) and getattr(file_, "seek", None):
            start = file_.tell()
            text = file_.read()
            if isinstance(text, bytes):
                text = text.decode("utf-8")
            again = None
        else:
            return real(file_)
        if text not in parsed:
            try:
                obj = yaml.load(text, Loader=get_yaml_loader())
            except yaml.YAMLError:
                obj = ...
            if obj is ... or (obj is not None and not isinstance(obj, (list, dict, str))):
                if again is None:
                    file_.seek(start)
                return real(file_ if again is None else again)  # OmegaConf's own result or error
            parsed[text] = obj
        obj = parsed[text]
        return OmegaConf.create() if obj is None else OmegaConf.create(copy.deepcopy(obj))

    load.memoized = True
    load.__wrapped__ = real
    load.__doc__ = real.__doc__
    OmegaConf.load = staticmethod(load)


def memoize_grammar() -> None:
    """``omegaconf.grammar_parser.parse`` keeps its parse trees (see the module docstring) in each
    module that imported it; the replaced function is ``parse.real``."""
    import omegaconf._utils
    import omegaconf.base
    import omegaconf.grammar_parser
    import omegaconf.resolvers.oc
    real = omegaconf.grammar_parser.parse
    if getattr(real, "memoized", False):
        return
    parse = functools.lru_cache(maxsize=4096)(real)
    parse.memoized = True
    parse.real = real
    for module in (omegaconf.grammar_parser, omegaconf.base, omegaconf._utils, omegaconf.resolvers.oc):
        if getattr(module, "parse", None) is real:
            module.parse = parse
