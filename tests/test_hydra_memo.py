"""tests/hydra_memo.py (Hydra/OmegaConf's pure work done once a test process) gives what the
functions it replaces give: the same loaded configs and errors, the same parse trees, and the same
composed configs and ``--help`` with the ``ConfigStore`` shared as with Hydra's own copies."""

from __future__ import annotations

import io
import os
from pathlib import Path

import hydra
import pytest
from omegaconf import OmegaConf, grammar_parser
from omegaconf.errors import GrammarParseError

import hydra_memo
from clirun import REPO_ROOT

#: every YAML file gemmlab composes from: its config folder and Hydra's own
YAMLS = sorted((REPO_ROOT / "conf").rglob("*.yaml")) + sorted((Path(hydra.__file__).parent / "conf").rglob("*.yaml"))


def _memo_installed():
    if not getattr(OmegaConf.load, "memoized", False):
        pytest.skip(f"tests/hydra_memo.py is off here (${hydra_memo.PLAIN_ENV})")


def test_yaml_memo_loads_what_omegaconf_loads():
    _memo_installed()
    real = OmegaConf.load.__wrapped__
    assert len(YAMLS) > 50
    for path in YAMLS:
        want = real(path)
        for got in (OmegaConf.load(path), OmegaConf.load(str(path)), OmegaConf.load(io.StringIO(path.read_text()))):
            assert type(got) is type(want), path
            assert OmegaConf.to_container(got) == OmegaConf.to_container(want), path
            assert _facts(got) == _facts(want), path  # every node's type, flags and parent too
    first = OmegaConf.load(REPO_ROOT / "conf" / "config.yaml")
    first.clear()  # a load is a new config: changing it changes no later load
    again = OmegaConf.to_container(OmegaConf.load(REPO_ROOT / "conf" / "config.yaml"))
    assert again == OmegaConf.to_container(real(REPO_ROOT / "conf" / "config.yaml")) != {}


@pytest.mark.parametrize("text", ["a: [1, 2\n", "a: 1\na: 2\n", "- just\n- a list\n", "12\n", ""])
def test_yaml_memo_gives_omegaconfs_result_or_error(tmp_path, text):
    _memo_installed()
    path = tmp_path / "c.yaml"
    path.write_text(text)

    def outcome(load, source):
        try:
            return "ok", type(cfg := load(source)).__name__, OmegaConf.to_container(cfg)
        except Exception as exc:  # the error's type and message are what a user sees
            return "error", type(exc).__name__, str(exc)
    real = OmegaConf.load.__wrapped__
    for _ in range(2):  # the second load of a text is the memo's
        assert outcome(OmegaConf.load, path) == outcome(real, path)
        assert outcome(OmegaConf.load, io.StringIO(text)) == outcome(real, io.StringIO(text))


def _tree(node) -> tuple:
    """A parse tree as nested (node class, text) tuples."""
    children = tuple(_tree(node.getChild(i)) for i in range(node.getChildCount()))
    return type(node).__name__, node.getText(), children


@pytest.mark.parametrize("text", ["${hydra.job.name}", "${gemmlab_unique:}", "a_${x}_b", "${oc.env:X,default}",
                                  "\\${not.one}", "${oc.select:a.b,[1,2]}", "plain"])
def test_grammar_memo_gives_omegaconfs_tree(text):
    _memo_installed()
    parse = grammar_parser.parse
    assert parse.memoized
    for _ in range(2):
        assert _tree(parse(text)) == _tree(parse.real(text))


def test_grammar_memo_raises_each_time():
    _memo_installed()
    for _ in range(2):
        with pytest.raises(GrammarParseError):
            grammar_parser.parse("${oops")


@pytest.mark.parametrize("args", [
    ["--cfg", "all", "kernel=naive", "mode=compile", "shape=[64,64,64]"],
    ["--cfg", "all", "experiment=seed_lab", "hydra/launcher=joblib"],
    ["--cfg", "hydra", "kernel=tiled", "hydra/sweeper=optuna", "hydra/launcher=submitit_local"],
    ["--help"],
])
def test_shared_config_store_composes_what_hydras_copies_compose(cli, tmp_path, args):
    """The configs a command composes and its help (every config group's options) with the store
    shared are those with Hydra's own copies of it."""
    from hydra.core.config_store import ConfigStore
    if "__deepcopy__" not in ConfigStore.__dict__:
        pytest.skip(f"tests/hydra_memo.py is off here (${hydra_memo.PLAIN_ENV})")
    shared = cli(args, tmp_path)
    with hydra_memo.unshared_config_store():
        assert "__deepcopy__" not in ConfigStore.__dict__
        copied = cli(args, tmp_path)
    assert "__deepcopy__" in ConfigStore.__dict__
    assert shared.returncode == copied.returncode == 0, (shared.stderr, copied.stderr)
    assert len(shared.stdout) > 500 and (shared.stdout, shared.stderr) == (copied.stdout, copied.stderr)


def _compose_memo_installed():
    from hydra._internal import config_loader_impl
    if not getattr(config_loader_impl.create_defaults_list, "memoized", False):
        pytest.skip(f"tests/hydra_memo.py is off here (${hydra_memo.PLAIN_ENV})")


def _facts(node, path: str = "<root>", parent=None) -> list:
    """Every node of a config, depth first: its path, class, metadata (type, object type,
    optional, key, flags) and whether its parent is the node above it; a leaf's unresolved value."""
    from omegaconf import DictConfig, ListConfig
    meta = node._metadata
    out = [(path, type(node).__name__, repr(meta.ref_type), repr(getattr(meta, "object_type", None)), meta.optional,
            repr(meta.key), sorted((meta.flags or {}).items()), meta.flags_root, node._get_parent() is parent)]
    content = node._content if isinstance(node, (DictConfig, ListConfig)) else node._value()
    if isinstance(content, dict):
        for key, child in content.items():
            out += _facts(child, f"{path}.{key}", node)
    elif isinstance(content, list):
        for index, child in enumerate(content):
            out += _facts(child, f"{path}[{index}]", node)
    else:
        out.append((path, "value", repr(content)))
    return out


@pytest.fixture
def loader():
    """Hydra's config loader for gemmlab's config folder (its schema and resolvers registered)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from gemmlab.cli.app import CONF_DIR, register_resolvers
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        yield GlobalHydra.instance().config_loader()


def test_compose_memo_composes_what_hydra_composes(loader):
    """Each command line's config, composed twice through the memo (the second from what it kept)
    and once more after the first was changed, is Hydra's own: every node's value, type, flags and
    parent. One test for all, in one order, so a key that misses any input gives a case another
    case's config."""
    _compose_memo_installed()
    from hydra.types import RunMode
    cases = [([], RunMode.RUN), (["experiment=seed_lab"], RunMode.MULTIRUN), (["experiment=optuna_tiled"], RunMode.MULTIRUN),
             (["kernel=tiled", "hydra/launcher=joblib", "hydra/sweeper=optuna"], RunMode.RUN),
             (["kernel=naive", "shape=[64,64,64]", "hydra.run.dir=out"], RunMode.RUN),
             (["kernel=naive", "shape=[64,64,128]", "hydra.run.dir=elsewhere"], RunMode.RUN)]
    for overrides, mode in cases:
        def load():
            return loader.load_configuration("config", list(overrides), run_mode=mode)
        with hydra_memo.plain_compose():
            want = _facts(load())
        hits = hydra_memo.compose_memo_counts()[0]
        first, second = load(), load()
        assert hydra_memo.compose_memo_counts()[0] >= hits + 2, overrides  # the second's two steps were kept
        assert _facts(first) == want, overrides
        assert _facts(second) == want, overrides
        OmegaConf.set_struct(first, False)
        first.hydra.job.name = "changed"
        first.extra = 1  # a composed config is the caller's: changing it changes no later compose
        assert _facts(load()) == want, overrides


def _write(folder: Path, files: dict) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def _compose(folder: Path, overrides=()):
    from hydra import compose, initialize_config_dir
    with initialize_config_dir(config_dir=str(folder), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_compose_memo_reads_the_sources_again_when_they_change(tmp_path, monkeypatch):
    """A file rewritten in place (same length), a new file, a removed file, a node stored in the
    ``ConfigStore`` and stored again: each compose after the change has it (Hydra's own result), a
    missing config is Hydra's error each time."""
    _compose_memo_installed()
    from hydra.core.config_store import ConfigStore
    from hydra.errors import MissingConfigException
    _write(tmp_path, {"config.yaml": "defaults:\n  - db: a\n  - _self_\nx: 1\n", "db/a.yaml": "host: aaaa\n"})
    assert [_compose(tmp_path).db.host for _ in range(2)] == ["aaaa", "aaaa"]
    _write(tmp_path, {"db/a.yaml": "host: bbbb\n"})
    assert _compose(tmp_path).db.host == "bbbb"
    _write(tmp_path, {"db/c.yaml": "host: cccc\n"})
    assert _compose(tmp_path, ["db=c"]).db.host == "cccc"
    (tmp_path / "db" / "c.yaml").unlink()
    for _ in range(2):
        with pytest.raises(MissingConfigException, match="db/c"):
            _compose(tmp_path, ["db=c"])
    store = ConfigStore.instance()
    try:
        store.store(group="memo_test_db", name="s", node={"host": "stored"})
        _write(tmp_path, {"config.yaml": "defaults:\n  - memo_test_db: s\n  - _self_\nx: 1\n"})
        assert [_compose(tmp_path).memo_test_db.host for _ in range(2)] == ["stored", "stored"]
        store.store(group="memo_test_db", name="s", node={"host": "again"})
        assert _compose(tmp_path).memo_test_db.host == "again"
    finally:
        store.repo.pop("memo_test_db", None)


def test_compose_memo_keeps_no_compose_that_warned_or_interpolated_its_defaults(tmp_path, monkeypatch):
    """Hydra's warning for a primary config without ``_self_`` comes with every compose, and a
    defaults list interpolated through a resolver (here the environment) follows it each time."""
    _compose_memo_installed()
    _write(tmp_path, {"config.yaml": "defaults:\n  - db: a\nx: 1\n", "db/a.yaml": "host: a\n", "db/b.yaml": "host: b\n"})
    for _ in range(3):
        with pytest.warns(UserWarning, match="Defaults list is missing `_self_`"):
            assert _compose(tmp_path).db.host == "a"
    _write(tmp_path, {"config.yaml": "defaults:\n  - db: ${oc.env:MEMO_TEST_DB}\n  - _self_\nx: 1\n"})
    for name in ("a", "b", "a", "b"):
        monkeypatch.setenv("MEMO_TEST_DB", name)
        assert _compose(tmp_path).db.host == name


def test_a_file_changed_within_its_clock_tick_is_read_again(tmp_path, monkeypatch):
    """A config file rewritten with the same size in the same tick of the file system's clock has
    the inode, size and times it had: :func:`hydra_memo._file_digest` reads it again all the same
    (a recent file's digest is never kept by its times)."""
    path = tmp_path / "a.yaml"
    path.write_text("host: aaaa\n")
    first, st = hydra_memo._file_digest(str(path)), os.stat(path)
    path.write_text("host: bbbb\n")
    monkeypatch.setattr(os, "stat", lambda *args, **kwargs: st)  # what a same-tick rewrite shows
    again = hydra_memo._file_digest(str(path))
    monkeypatch.undo()
    assert again != first


def test_store_memo_loads_what_hydras_store_loads():
    """Every node in Hydra's ``ConfigStore`` (gemmlab's schema, Hydra's and its plugins' structured
    configs) loads as Hydra's own load gives it, node for node, each load a config of its own; a
    node stored again under the same name is the new one."""
    from hydra.core.config_store import ConfigStore

    from gemmlab.cli.app import register_plugins, register_resolvers
    store = ConfigStore.instance()
    if not getattr(ConfigStore.load, "memoized", False):
        pytest.skip(f"tests/hydra_memo.py is off here (${hydra_memo.PLAIN_ENV})")
    register_resolvers()
    register_plugins()
    real = ConfigStore.load.__wrapped__
    paths, todo = [], [("", store.repo)]
    while todo:
        prefix, group = todo.pop()
        for name, value in group.items():
            (todo.append((f"{prefix}{name}/", value)) if isinstance(value, dict) else paths.append(prefix + name))
    assert {"base_config.yaml", "hydra/config.yaml"} <= set(paths) and len(paths) > 10
    for path in paths:
        want = real(store, path)
        first, second = store.load(path), store.load(path)
        for got in (first, second):
            assert (got.name, got.group, got.package, got.provider) == (want.name, want.group, want.package, want.provider)
            assert _facts(got.node) == _facts(want.node), path
        assert first.node is not second.node and first.node is not store._load(path).node
    try:
        store.store(group="memo_test_node", name="n", node={"a": 1})
        assert store.load("memo_test_node/n.yaml").node.a == 1
        store.store(group="memo_test_node", name="n", node={"a": 2})
        assert store.load("memo_test_node/n.yaml").node.a == 2
        store._load("memo_test_node/n.yaml").node = OmegaConf.create({"a": 3})  # the node's config replaced
        assert store.load("memo_test_node/n.yaml").node.a == 3
    finally:
        store.repo.pop("memo_test_node", None)
