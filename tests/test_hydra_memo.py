"""tests/hydra_memo.py (Hydra/OmegaConf's pure work done once a test process) gives what the
functions it replaces give: the same loaded configs and errors, the same parse trees, and the same
composed configs and ``--help`` with the ``ConfigStore`` shared as with Hydra's own copies."""

from __future__ import annotations

import io
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
