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
- :func:`memoize_store_load`: ``ConfigStore.load`` deep-copies the stored node for every load
  (gemmlab's ``base_config`` schema: 2.7 ms; Hydra's and its plugins' structured configs: ~3,000
  loads a suite run). Each stored node is pickled once and each load unpickles a copy (0.35 ms
  for the schema). A node is kept by identity: ``ConfigStore.store`` makes a new node each time
  (gemmlab's pre-check stores and deletes kernel nodes that way); a stored node is never changed
  in place, by gemmlab or the tests. One that cannot be pickled is deep-copied, as by Hydra.
- :func:`memoize_yaml`: ``OmegaConf.load`` parses a YAML text once a process (PyYAML's pure-Python
  parser; Hydra reads each selected file again for every compose). The config OmegaConf makes of
  the parsed data (``OmegaConf.create``, as ``OmegaConf.load`` does) is kept pickled, keyed by the
  text itself, and each load unpickles a new one (conf/config.yaml: 3.8 ms to create, 0.25 ms to
  unpickle). A text that does not parse, or parses to something ``OmegaConf.load`` refuses, goes
  to OmegaConf's own ``load`` from the same stream or path, so its error is OmegaConf's; nothing
  is kept for it.
- :func:`memoize_grammar`: OmegaConf parses an interpolation string with its ANTLR grammar each
  time it checks or resolves one (``omegaconf.grammar_parser.parse``), the same few strings of
  Hydra's defaults lists for every compose. The parse tree is a function of the string, the rule
  and the lexer mode, and OmegaConf only reads it (its ``GrammarVisitor`` walks it), so trees are
  kept (``functools.lru_cache``, 4096 strings) in each module that imported ``parse``; a string
  that does not parse raises each time (an exception is never kept).

- :func:`memoize_compose`: the two steps of a compose that read only the config sources, Hydra's
  defaults list (``create_defaults_list``: which config of which group, in which package) and the
  merge of the configs it lists (``ConfigLoaderImpl._compose_config_from_defaults_list``), are
  ~40 of a compose's ~50 ms, and the suite's commands compose the same few configs again and
  again. Each result is kept, keyed by the step's arguments and the contents of every config
  source the compose searches (each ``.yaml`` file and folder of its file and package folders,
  the ``ConfigStore``'s nodes), and each use gets a copy of its own (unpickled). Nothing is kept for a step that
  raised, warned, or resolved an interpolation in a defaults list (a resolver may read anything);
  what Hydra does with the result (the command line's values, ``hydra.runtime``, ``hydra.job``,
  the working folder) runs each time.

On test_cli_acceptance.py alone (-p no:xdist, 2 cores): 24.7 -> 17.3 CPU s, the store's share
~6 s of it (before the compose memo). tests/test_hydra_memo.py checks each against the function it replaces (the same
configs, group options, trees and errors). ``GEMMLAB_TEST_PLAIN_HYDRA=1`` runs the suite without
any of this (Hydra and OmegaConf as released).
"""

from __future__ import annotations

import copy
import functools
import io
import os
import pickle
from pathlib import Path

#: environment variable that turns this module off (any non-empty value but ``0``)
PLAIN_ENV = "GEMMLAB_TEST_PLAIN_HYDRA"


def install() -> None:
    """The five speed-ups of the module docstring, each idempotent; none where
    ``$GEMMLAB_TEST_PLAIN_HYDRA`` is set (not ``0``)."""
    if os.environ.get(PLAIN_ENV, "0") not in ("", "0"):
        return
    share_config_store()
    memoize_store_load()
    memoize_yaml()
    memoize_grammar()
    memoize_compose()


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


def memoize_store_load() -> None:
    """``ConfigStore.load`` copies a stored node by unpickling it (see the module docstring); the
    replaced method is ``ConfigStore.load.__wrapped__``."""
    from hydra.core.config_store import ConfigStore
    if getattr(ConfigStore.load, "memoized", False):
        return
    real = ConfigStore.load
    pickled: dict[int, tuple] = {}  # id(stored ConfigNode) -> (that node, its config, the config pickled or None)

    def load(self, config_path: str):
        stored = self._load(config_path)
        held = pickled.get(id(stored))
        if held is None or held[0] is not stored or held[1] is not stored.node:
            try:
                blob = pickle.dumps(stored.node, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # not picklable: Hydra's deep copy
                blob = None
            pickled[id(stored)] = held = (stored, stored.node, blob)
        ret = copy.copy(stored)
        ret.node = pickle.loads(held[2]) if held[2] is not None else copy.deepcopy(stored.node)
        return ret

    load.memoized = True
    load.__wrapped__ = real
    load.__doc__ = real.__doc__
    ConfigStore.load = load


def memoize_yaml() -> None:
    """``OmegaConf.load`` parses each YAML text once a process (see the module docstring); the
    replaced function is ``OmegaConf.load.__wrapped__``."""
    from omegaconf import OmegaConf
    if getattr(OmegaConf.load, "memoized", False):
        return
    import yaml
    from omegaconf._utils import get_yaml_loader
    real = OmegaConf.load
    parsed: dict[str, bytes] = {}  # YAML text -> the config OmegaConf makes of it, pickled (unpickled per load)

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
                if obj is not None and not isinstance(obj, (list, dict, str)):
                    raise ValueError(obj)
                made = OmegaConf.create() if obj is None else OmegaConf.create(obj)
                parsed[text] = pickle.dumps(made, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # a YAML error, a value or a config OmegaConf refuses, not picklable
                if again is None:
                    file_.seek(start)
                return real(file_ if again is None else again)  # OmegaConf's own result or error
        return pickle.loads(parsed[text])

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


#: the most results :func:`memoize_compose` keeps per step (the oldest goes first)
COMPOSE_MEMO_SIZE = 512
#: the most files and folders a config source may hold for :func:`sources_fingerprint` to read it
FINGERPRINT_MAX_ENTRIES = 2000


class _Counts:
    """How many ``warnings.warn`` calls, defaults-list interpolations and ``ConfigStore.store``
    calls this process has made (read before and after a step: a change means do not keep it)."""

    warned = 0
    interpolated = 0
    stored = 0
    #: steps :func:`memoize_compose` answered from what it kept, and steps it computed
    hits = 0
    misses = 0


def _count_calls(owner, name: str, counter: str, stack_arg: bool = False) -> None:
    """Replace ``owner.name`` by a wrapper that adds 1 to ``_Counts.counter`` and calls it;
    ``stack_arg``: the wrapper is ``warnings.warn``'s, which passes one more ``stacklevel`` so the
    warning names the same caller."""
    real = getattr(owner, name)
    if getattr(real, "counted", False):
        return
    if stack_arg:
        def wrapper(message, category=None, stacklevel=1, source=None, **kwargs):
            _Counts.warned += 1
            return real(message, category, stacklevel + 1, source, **kwargs)
    else:
        def wrapper(*args, **kwargs):
            setattr(_Counts, counter, getattr(_Counts, counter) + 1)
            return real(*args, **kwargs)
    wrapper.counted = True
    wrapper.__wrapped__ = real
    wrapper.__doc__ = real.__doc__
    setattr(owner, name, wrapper)


#: a file changed less than this long ago (ns) is read again by :func:`_file_digest` (a later
#: write in the same tick of the file system's clock could keep its size and time)
RECENT_NS = 2_000_000_000


def _file_digest(path: str, held: dict = {}) -> bytes:  # noqa: B006 (the process's digests, by path)
    """A hash of the bytes of the file ``path``: read again unless its inode, size, modification
    and change times are those of the last read and it was last changed :data:`RECENT_NS` or more
    before that read (so a file rewritten since, even with the same size in the same clock tick,
    is read again)."""
    import hashlib
    import time
    st = os.stat(path)
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    got = held.get(path)
    if got is not None and got[0] == stamp:
        return got[1]
    with open(path, "rb") as f:
        digest = hashlib.blake2b(f.read(), digest_size=16).digest()
    if max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - RECENT_NS:
        held[path] = (stamp, digest)
    else:
        held.pop(path, None)
    return digest


def _tree_fingerprint(root) -> tuple | None:
    """Every folder and ``.yaml`` file under ``root`` (a ``pathlib.Path`` or an importlib
    ``Traversable``) with a hash of each file's bytes, sorted; ``("missing",)`` where ``root`` is
    no folder; None where it cannot be read or holds more than :data:`FINGERPRINT_MAX_ENTRIES`."""
    import hashlib
    entries = []
    try:
        if not root.is_dir():
            return ("missing",)
        todo = [("", root)]
        while todo:
            rel, folder = todo.pop()
            if isinstance(folder, Path):  # os.scandir: a third of pathlib's time for a config folder
                with os.scandir(folder) as listing:
                    children = [(c.name, c.is_dir(), c.path) for c in listing]
                children = [(name, is_dir, Path(path) if is_dir else path) for name, is_dir, path in children]
            else:
                children = [(c.name, c.is_dir(), c) for c in folder.iterdir()]
            for name, is_dir, child in children:
                name = f"{rel}/{name}"
                if is_dir:
                    todo.append((name, child))
                    entries.append((name, "/"))
                elif name.endswith(".yaml"):
                    entries.append((name, _file_digest(child) if isinstance(child, str)
                                    else hashlib.blake2b(child.read_bytes(), digest_size=16).digest()))
                if len(entries) > FINGERPRINT_MAX_ENTRIES:
                    return None
    except (OSError, ValueError, TypeError):
        return None
    return tuple(sorted(entries))


def _store_fingerprint() -> tuple:
    """The ``ConfigStore``'s nodes by path and identity, and how many ``store`` calls were made."""
    from hydra.core.config_store import ConfigStore
    nodes = []
    todo = [("", ConfigStore.instance().repo)]
    while todo:
        path, group = todo.pop()
        for name, value in group.items():
            if isinstance(value, dict):
                todo.append((f"{path}/{name}", value))
            else:
                nodes.append((f"{path}/{name}", id(value), id(getattr(value, "node", None)),
                              getattr(value, "package", None), getattr(value, "provider", None)))
    return _Counts.stored, tuple(sorted(nodes))


def sources_fingerprint(repo) -> tuple | None:
    """What a compose through the config repository ``repo`` can read: for each of its sources in
    order, its class, provider and path and the contents it serves (:func:`_tree_fingerprint` of a
    file or package folder, :func:`_store_fingerprint` for the ``ConfigStore``); None where a
    source is of another kind or cannot be read (then nothing is memoized). Read once for the
    defaults list and the merge of one compose (Hydra makes a new repository for each compose;
    the fingerprint is kept on it while its sources are the same objects)."""
    sources = tuple(repo.get_sources())
    held = getattr(repo, "_memo_fingerprint", None)
    if held is not None and held[0] == tuple(map(id, sources)) and held[1] is sources[0]:
        return held[2]
    found = _read_fingerprint(sources)
    try:
        repo._memo_fingerprint = (tuple(map(id, sources)), sources[0] if sources else None, found)
    except AttributeError:
        pass
    return found


def _read_fingerprint(sources) -> tuple | None:
    """:func:`sources_fingerprint` of these sources, read now."""
    from hydra._internal.core_plugins.file_config_source import FileConfigSource
    from hydra._internal.core_plugins.importlib_resources_config_source import ImportlibResourcesConfigSource
    from hydra._internal.core_plugins.structured_config_source import StructuredConfigSource
    from importlib import resources
    parts = []
    for source in sources:
        kind = type(source)
        if kind is FileConfigSource:
            contents = _tree_fingerprint(Path(source.path))
        elif kind is ImportlibResourcesConfigSource:
            try:
                contents = _tree_fingerprint(resources.files(source.path))
            except (ImportError, ValueError, TypeError):
                contents = ("missing",)
        elif kind is StructuredConfigSource:
            contents = _store_fingerprint()
        else:
            return None
        if contents is None:
            return None
        parts.append((kind.__name__, source.provider, source.path, contents))
    return tuple(parts)


def memoize_compose() -> None:
    """Hydra's defaults list and the merge of its configs kept per config sources' contents (see
    the module docstring); the replaced functions are the ``__wrapped__`` of
    ``hydra._internal.config_loader_impl.create_defaults_list`` and of
    ``ConfigLoaderImpl._compose_config_from_defaults_list``."""
    import warnings

    from hydra._internal import config_loader_impl
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.config_store import ConfigStore
    from hydra.core.default_element import InputDefault
    if getattr(config_loader_impl.create_defaults_list, "memoized", False):
        return
    _count_calls(warnings, "warn", "warned", stack_arg=True)
    _count_calls(InputDefault, "_resolve_interpolation_impl", "interpolated")
    _count_calls(ConfigStore, "store", "stored")
    real_defaults = config_loader_impl.create_defaults_list
    real_compose = ConfigLoaderImpl._compose_config_from_defaults_list
    kept: dict = {}

    def counts() -> tuple:
        return _Counts.warned, _Counts.interpolated, _Counts.stored

    def remember(key, value) -> None:
        """Keep a copy of ``value``: pickled (a use unpickles it: about half the time of a deep copy
        of a composed config), else deep-copied (a use copies it again)."""
        if len(kept) >= COMPOSE_MEMO_SIZE:
            kept.pop(next(iter(kept)))
        try:
            kept[key] = (pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), None)
        except Exception:  # not picklable: deep copies
            kept[key] = (None, copy.deepcopy(value))

    def use(key):
        _Counts.hits += 1
        blob, value = kept[key]
        return pickle.loads(blob) if blob is not None else copy.deepcopy(value)

    def memoized(key, compute):
        if key is not None and key in kept:
            return use(key)
        _Counts.misses += 1
        before = counts()
        result = compute()
        if key is not None and counts() == before:
            remember(key, result)
        return result

    def create_defaults_list(repo, config_name, overrides_list, prepend_hydra, skip_missing):
        def compute():
            return real_defaults(repo=repo, config_name=config_name, overrides_list=overrides_list,
                                 prepend_hydra=prepend_hydra, skip_missing=skip_missing)
        lines = [getattr(o, "input_line", None) for o in overrides_list]
        found = None if None in lines else sources_fingerprint(repo)
        if found is None:
            return compute()
        # Hydra's Overrides: a sweep is skipped, a value override (a dict, or a key that is no config
        # group) is only passed through (config_overrides); the list depends on the others alone
        try:
            passed = [o for o in overrides_list if not o.is_sweep_override()
                      and (isinstance(o.value(), dict) or not repo.group_exists(o.key_or_group))]
        except Exception:  # Hydra's own call says what is wrong
            return compute()
        choices = tuple(line for o, line in zip(overrides_list, lines)
                        if not o.is_sweep_override() and not any(o is p for p in passed))
        key = ("defaults", config_name, choices, bool(prepend_hydra), bool(skip_missing), found)
        if key in kept:
            result = use(key)
            result.config_overrides = result.overrides.config_overrides = passed
            return result
        _Counts.misses += 1
        before = counts()
        result = compute()
        if (counts() == before and result.config_overrides is result.overrides.config_overrides
                and len(result.config_overrides) == len(passed)
                and all(a is b for a, b in zip(result.config_overrides, passed))):
            keep = copy.copy(result)
            keep.overrides = copy.copy(result.overrides)
            keep.config_overrides = keep.overrides.config_overrides = []
            remember(key, keep)
        return result

    def compose(self, defaults, repo):
        found = sources_fingerprint(repo)
        key = None if found is None else ("compose", repr(list(defaults)), found)
        return memoized(key, lambda: real_compose(self, defaults=defaults, repo=repo))

    create_defaults_list.memoized = True
    create_defaults_list.__wrapped__ = real_defaults
    create_defaults_list.__doc__ = real_defaults.__doc__
    compose.memoized = True
    compose.__wrapped__ = real_compose
    compose.__doc__ = real_compose.__doc__
    config_loader_impl.create_defaults_list = create_defaults_list
    ConfigLoaderImpl._compose_config_from_defaults_list = compose


def compose_memo_counts() -> tuple[int, int]:
    """``(hits, misses)`` of :func:`memoize_compose`'s steps so far in this process."""
    return _Counts.hits, _Counts.misses


class plain_compose:
    """Context manager: Hydra's own defaults list and merge inside the block (for the tests that
    compare both); :func:`memoize_compose`'s, where it was installed, after it."""

    def __enter__(self):
        from hydra._internal import config_loader_impl
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        self.was = (config_loader_impl.create_defaults_list, ConfigLoaderImpl.__dict__["_compose_config_from_defaults_list"])
        config_loader_impl.create_defaults_list = getattr(self.was[0], "__wrapped__", self.was[0])
        ConfigLoaderImpl._compose_config_from_defaults_list = getattr(self.was[1], "__wrapped__", self.was[1])
        return self

    def __exit__(self, *exc):
        from hydra._internal import config_loader_impl
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        config_loader_impl.create_defaults_list, ConfigLoaderImpl._compose_config_from_defaults_list = self.was
        return False
