"""Adjustments of Hydra 1.3 and OmegaConf 2.3 for one process, each small, with the same result:
the ``ConfigStore`` shared by Hydra's copies of its config repository, each YAML text and each
interpolation string parsed once a process, a job's config copied without the ``hydra`` node that
Hydra's ``run_job`` deletes from the copy, a defaults list's interpolation map made only where it is
read (speed-ups, measured in the functions' docstrings), and
gemmlab's sweeper registered with Hydra by class (:func:`register_gemmlab_sweeper`: an editable
install hides it from Hydra's plugin scan). :func:`gemmlab.cli.app.register_resolvers` installs
the speed-ups before Hydra composes anything, :func:`gemmlab.cli.app.main` the registration before
Hydra runs (each is idempotent); ``tests/test_hydra_patches.py`` checks that what is composed is
unchanged and that a sweep runs where Hydra's scan cannot see the sweeper,
``tests/test_config_compose.py`` that a job's task config is the copy Hydra made before.
"""

from __future__ import annotations

import os
from pathlib import Path


def config_store_is_not_copied() -> None:
    """Let a deep copy of Hydra's ``ConfigStore`` singleton be the singleton itself (idempotent).

    Hydra 1.3's config loader deep-copies its config repository for every compose and for every
    group listing (``CachingConfigRepository``); the repository's structured-config source holds
    the ``ConfigStore``, so each copy also copied every stored config node (Hydra's own, the
    launcher and sweeper plugins', gemmlab's schema): about 10 ms a copy, some 70 copies for
    ``--help``, which lists every config group. Hydra's main branch no longer keeps the store in
    the source and reads the live singleton instead (facebookresearch/hydra pull request 2928);
    this gives Hydra 1.3 the same: a copied repository reads the one live store. What is composed
    is unchanged: the store is only read while composing (``ConfigStore.load`` returns a copy of
    the node), and gemmlab stores its nodes before Hydra composes."""
    from hydra.core.config_store import ConfigStore
    if "__deepcopy__" not in ConfigStore.__dict__:
        ConfigStore.__deepcopy__ = lambda self, memo: self


def config_files_parsed_once() -> None:
    """Let ``OmegaConf.load`` parse a YAML text once per process (idempotent).

    Hydra 1.3 reads every config file a command line selects again for each compose (its cache
    lives for one compose): ``conf/config.yaml``, the kernel, timing and experiment files, Hydra's
    own ``hydra/*`` files; a sweep composes once per job. PyYAML's pure-Python parser is about a
    tenth of a compose. Here the config OmegaConf builds from a text (``OmegaConf.create`` of the
    parsed data, as ``OmegaConf.load`` does) is kept, keyed by the text itself, and each load
    returns a deep copy of it (about half the time of building it again): an edited file is a new
    text, so what is composed is unchanged. A text that does not parse is loaded by OmegaConf's
    own ``load`` from the same stream or path, so its error (file name, line) is OmegaConf's, and
    nothing is kept."""
    from omegaconf import OmegaConf
    if getattr(OmegaConf.load, "parsed_once", False):
        return
    import copy
    import io

    import yaml
    from omegaconf._utils import get_yaml_loader
    real = OmegaConf.load
    parsed: dict[str, object] = {}  # text -> the DictConfig / ListConfig OmegaConf.load would return

    def load(file_):
        if isinstance(file_, (str, Path)):
            with io.open(os.path.abspath(file_), "r", encoding="utf-8") as f:
                text = f.read()
        elif getattr(file_, "read", None) and getattr(file_, "seek", None):
            start = file_.tell()
            text = file_.read()
            text = text.decode("utf-8") if isinstance(text, bytes) else text
        else:
            return real(file_)
        if text not in parsed:
            try:
                obj = yaml.load(text, Loader=get_yaml_loader())
            except yaml.YAMLError:
                if not isinstance(file_, (str, Path)):
                    file_.seek(start)
                return real(file_)  # OmegaConf's own error, naming the file
            if obj is not None and not isinstance(obj, (list, dict, str)):
                return real(io.StringIO(text))
            parsed[text] = OmegaConf.create() if obj is None else OmegaConf.create(obj)
        return copy.deepcopy(parsed[text])

    load.parsed_once = True
    load.__doc__ = real.__doc__
    OmegaConf.load = staticmethod(load)


def interpolations_parsed_once() -> None:
    """Let OmegaConf parse an interpolation string once per process (idempotent).

    OmegaConf 2.3 parses a string with its ANTLR grammar (``omegaconf.grammar_parser.parse``) each
    time it checks or resolves an interpolation, and Hydra's compose checks and resolves the same
    few strings of its defaults lists again for every config it composes (``${hydra.job...}``,
    ``${gemmlab_unique:}``, ...): about a sixth of a compose's time. The parse tree is a function of
    the string, the parser rule and the lexer mode only, and OmegaConf only reads it (its
    ``GrammarVisitor`` walks it; a token's text is kept with the token), so the trees are memoized
    (``functools.lru_cache``, 4096 strings) in every module that imported ``parse``. A string that
    does not parse raises OmegaConf's own ``GrammarParseError`` each time (an exception is not
    memoized)."""
    import functools

    import omegaconf._utils
    import omegaconf.base
    import omegaconf.grammar_parser
    import omegaconf.resolvers.oc
    real = omegaconf.grammar_parser.parse
    if getattr(real, "parsed_once", False):
        return
    parse = functools.lru_cache(maxsize=4096)(real)
    parse.parsed_once = True
    for module in (omegaconf.grammar_parser, omegaconf.base, omegaconf._utils, omegaconf.resolvers.oc):
        if getattr(module, "parse", None) is real:
            module.parse = parse


def register_gemmlab_sweeper() -> None:
    """Register gemmlab's sweeper (``hydra_plugins.gemmlab_sweeper.GemmlabSweeper``, the default
    of ``-m``) with Hydra by class, through Hydra's own ``Plugins.instance().register`` (idempotent).

    Hydra finds plugins by walking the folders of the ``hydra_plugins`` namespace package
    (``pkgutil.walk_packages``). A setuptools editable install (``pip install -e .``) maps
    ``hydra_plugins.gemmlab_sweeper`` with an import hook that the walk does not see, so outside
    the checkout ``gemmlab -m ...`` stopped with "Unknown plugin class :
    'hydra_plugins.gemmlab_sweeper.GemmlabSweeper'"; a plain ``pip install .`` was not affected.

    Hydra's scan executes every module it walks again, in place (``exec_module`` on the module in
    ``sys.modules``), so Hydra's own ``BasicSweeper`` is a new class after it: the sweeper module is
    imported after the scan, and imported again when it was imported before it (its class would
    derive from the replaced ``BasicSweeper``: "super(type, obj): obj must be an instance or
    subtype of type")."""
    import importlib

    from hydra._internal.core_plugins import basic_sweeper
    from hydra.core.plugins import Plugins
    plugins = Plugins.instance()  # the scan (once a process), before the sweeper module is imported
    module = importlib.import_module("hydra_plugins.gemmlab_sweeper")
    if not issubclass(module.GemmlabSweeper, basic_sweeper.BasicSweeper):
        module = importlib.reload(module)
    plugins.register(module.GemmlabSweeper)


def job_config_copied_without_hydra() -> None:
    """Let Hydra's ``run_job`` copy a job's config without its ``hydra`` node (idempotent).

    Hydra 1.3's ``run_job`` (``hydra.core.utils``) deep-copies the job's whole config, then
    deletes the copy's ``hydra`` node (the task function's config has none), and deep-copies the
    ``hydra`` node once more for ``ret.hydra_cfg``: the first copy of the ``hydra`` node (Hydra's
    help texts, logging configs, launcher and sweeper settings: about four fifths of the config's
    nodes) is thrown away unread. Here that module's ``copy.deepcopy``, given a config holding a
    ``hydra`` node that is not ``HydraConfig``'s own (``run_job``'s first copy), copies the config
    with an empty placeholder in the ``hydra`` node's place (deepcopy's memo; OmegaConf's copy
    restores the original node's parent), which ``run_job`` then deletes: the task's config is the
    same copy as before, node for node. Every other copy there (the ``hydra`` node's own, for
    ``hydra.yaml``) is ``copy.deepcopy`` itself. The two copies took about 13 ms of CPU a job, now
    about 6 ms (of some 125 ms an in-process command takes; tests/clirun.py, 60 jobs)."""
    import copy
    import types

    import hydra.core.utils as core_utils
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig
    if getattr(core_utils.copy, "without_hydra", False):
        return
    real = copy.deepcopy

    def deepcopy(x, memo=None, _nil=[]):
        if memo is None and type(x) is DictConfig and x is not HydraConfig.instance().cfg:
            content = x.__dict__["_content"]
            node = content.get("hydra") if isinstance(content, dict) else None
            if node is not None and len(content) > 1:
                return real(x, {id(node): DictConfig({})})
        return real(x, memo, _nil)

    shim = types.ModuleType("copy", "the copy module, with run_job's deepcopy (gemmlab.cli.hydra_patches)")
    shim.__dict__.update({k: v for k, v in copy.__dict__.items() if not k.startswith("__")})
    shim.deepcopy = deepcopy
    shim.without_hydra = True
    core_utils.copy = shim


def interpolation_map_made_when_used() -> None:
    """Let Hydra make a defaults list's interpolation map only where the list has an
    interpolation (idempotent).

    Hydra 1.3's ``_create_defaults_tree_impl`` (``hydra._internal.defaults_list``) makes, for every
    config of the defaults tree that has a defaults list, the map that resolves the list's
    interpolated entries (``_create_interpolation_map``: an ``OmegaConf.create`` of every known
    choice plus the list), then reads it only for the entries that are interpolations
    (``d.is_interpolation()``, each an entry of that list): some 23 maps a command, about 0.6 ms
    each, for gemmlab's files, whose defaults lists hold no interpolation. Here the map is made,
    as before, when any entry of the list says it is an interpolation (or cannot tell: an error),
    and is None otherwise, where nothing reads it; what is composed is unchanged."""
    import hydra._internal.defaults_list as defaults_list
    real = defaults_list._create_interpolation_map
    if getattr(real, "made_when_used", False):
        return

    def _create_interpolation_map(overrides, defaults, self_added):
        for d in defaults:
            try:
                if d.is_interpolation():
                    break
            except Exception:
                break
        else:
            return None  # no entry is an interpolation: the map is never read
        return real(overrides, defaults, self_added)

    _create_interpolation_map.made_when_used = True
    _create_interpolation_map.__wrapped__ = real
    defaults_list._create_interpolation_map = _create_interpolation_map
