"""gemmlab.cli.hydra_patches: each parse-once patch leaves what Hydra and OmegaConf compose unchanged."""

from __future__ import annotations

import copy

import hydra
import pytest
from omegaconf import OmegaConf

import gemmlab.cli.app
import gemmlab.paths


def test_a_copied_config_repository_reads_the_live_config_store():
    """Hydra's per-compose copy of its config repository shares the one ConfigStore
    (gemmlab.cli.hydra_patches.config_store_is_not_copied): a node stored after the copy was made is found
    through the copy, and what a copy loads is still a copy of the stored node."""
    from hydra._internal.config_repository import CachingConfigRepository
    from hydra.core.config_store import ConfigStore
    from hydra.core.global_hydra import GlobalHydra
    gemmlab.cli.app.register_resolvers()
    store = ConfigStore.instance()
    assert copy.deepcopy(store) is store
    with hydra.initialize_config_dir(config_dir=str(gemmlab.paths.CONF_DIR), version_base="1.3"):
        repo = CachingConfigRepository(GlobalHydra.instance().config_loader().repository)
        name = "gemmlab_test_stored_after_the_copy"
        store.store(group="timing", name=name, node={"warmup": 3})
        try:
            assert repo.config_exists(f"timing/{name}")
            loaded = repo.load_config(f"timing/{name}").config
            assert OmegaConf.to_container(loaded) == {"warmup": 3}
            loaded.warmup = 4
            assert store.load(f"timing/{name}.yaml").node.warmup == 3
        finally:
            del store.repo["timing"][f"{name}.yaml"]


def test_a_config_text_is_parsed_once_and_loads_as_omegaconf_loads_it(tmp_path, monkeypatch):
    """``OmegaConf.load`` parses a YAML text once per process (gemmlab.cli.hydra_patches.config_files_parsed_once):
    every config file of conf/ loads (from a path and from an open file, as Hydra reads them) into
    what OmegaConf's own parse gives; a loaded config is the caller's to change; loading the same
    text again parses nothing; an edited file is parsed again; a text that does not parse raises
    OmegaConf's own error naming the file."""
    import io

    import yaml
    from omegaconf._utils import get_yaml_loader
    gemmlab.cli.app.register_resolvers()
    assert getattr(OmegaConf.load, "parsed_once", False)

    def own(path):  # OmegaConf.load's parse, without the memo
        obj = yaml.load(path.read_text(encoding="utf-8"), Loader=get_yaml_loader())
        return OmegaConf.create() if obj is None else OmegaConf.create(obj)

    files = sorted(gemmlab.paths.CONF_DIR.rglob("*.yaml"))
    assert len(files) > 40
    for path in files:
        with open(path, encoding="utf-8") as f:
            from_stream = OmegaConf.load(f)
        assert (OmegaConf.to_container(OmegaConf.load(path)) == OmegaConf.to_container(from_stream)
                == OmegaConf.to_container(own(path))), path
    mine = tmp_path / "mine.yaml"
    mine.write_text("a: 1\nb: [1, 2]\n")
    first = OmegaConf.load(mine)
    first.b.append(3)
    parses = []
    real_load = yaml.load
    monkeypatch.setattr(yaml, "load", lambda *a, **k: parses.append(a) or real_load(*a, **k))
    assert OmegaConf.to_container(OmegaConf.load(mine)) == {"a": 1, "b": [1, 2]} and parses == []
    mine.write_text("a: 2\n")
    assert OmegaConf.to_container(OmegaConf.load(mine)) == {"a": 2} and len(parses) == 1
    mine.write_text("a: [1\n")
    with pytest.raises(yaml.YAMLError, match="mine.yaml"):
        OmegaConf.load(mine)
    with open(mine, encoding="utf-8") as f, pytest.raises(yaml.YAMLError, match="mine.yaml"):
        OmegaConf.load(f)
    assert OmegaConf.to_container(OmegaConf.load(io.StringIO("x: 3\n"))) == {"x": 3}


def test_an_interpolation_is_parsed_once_and_resolves_as_omegaconf_resolves_it(monkeypatch):
    """OmegaConf's grammar parse is memoized per process (gemmlab.cli.hydra_patches.interpolations_parsed_once)
    in every module that imported it: a whole composed config (Hydra's part included) is the same
    with OmegaConf's own parse; interpolations resolve as before, the second time from the memo; a
    string that does not parse raises OmegaConf's own error every time."""
    import omegaconf._utils
    import omegaconf.base
    import omegaconf.grammar_parser
    import omegaconf.resolvers.oc
    from omegaconf.errors import GrammarParseError
    gemmlab.cli.app.register_resolvers()
    modules = (omegaconf.grammar_parser, omegaconf.base, omegaconf._utils, omegaconf.resolvers.oc)
    parse = omegaconf.grammar_parser.parse
    assert getattr(parse, "parsed_once", False) and all(m.parse is parse for m in modules)
    line = ("kernel=wgmma_bf16", "experiment=shapes")

    def composed():
        with hydra.initialize_config_dir(config_dir=str(gemmlab.paths.CONF_DIR), version_base="1.3"):
            cfg = hydra.compose("config", overrides=list(line), return_hydra_config=True)
        return OmegaConf.to_container(cfg, resolve=False)
    with monkeypatch.context() as m:
        for module in modules:
            m.setattr(module, "parse", parse.__wrapped__)
        own = composed()
    hits = parse.cache_info().hits
    assert composed() == own and parse.cache_info().hits > hits
    monkeypatch.setenv("GEMMLAB_TEST_VALUE", "v")
    cfg = OmegaConf.create({"a": 1, "b": "x_${a}_${oc.env:GEMMLAB_TEST_VALUE}", "c": "${oc.decode:'[1, 2]'}"})
    for _ in range(2):
        assert OmegaConf.to_container(cfg, resolve=True) == {"a": 1, "b": "x_1_v", "c": [1, 2]}
    for _ in range(2):
        with pytest.raises(GrammarParseError):
            OmegaConf.create({"e": "${foo"}).e


def test_a_sweep_runs_where_hydras_plugin_scan_cannot_see_the_sweeper(tmp_path):
    """A setuptools editable install maps ``hydra_plugins.gemmlab_sweeper`` with an import hook
    that Hydra's plugin scan (``pkgutil.walk_packages`` over the ``hydra_plugins`` folders) does
    not see: there ``gemmlab -m ...`` outside the checkout stopped with "Unknown plugin class"
    (gemmlab.cli.hydra_patches.register_gemmlab_sweeper). Emulated in a fresh process by a walk that
    skips the sweeper, with the module imported before Hydra's scan re-executes its base class. The
    point runs in that process (``isolation.process=false``): what is checked is Hydra finding the
    sweeper, which happens there, and a point's worker process would add only an interpreter start
    and its imports (about 0.45 CPU s)."""
    import subprocess
    import sys
    script = (
        "import pkgutil, sys\n"
        "real = pkgutil.walk_packages\n"
        "pkgutil.walk_packages = lambda *a, **k: (i for i in real(*a, **k) if i.name != 'hydra_plugins.gemmlab_sweeper')\n"
        "import hydra_plugins.gemmlab_sweeper\n"
        "from gemmlab.cli.app import main\n"
        f"sys.argv = ['gemmlab', '-m', 'kernel=naive', 'shape=[8,8,8]', 'mode=compile', 'isolation.process=false', "
        f"'hydra.sweep.dir={tmp_path / 'sw'}']\n"
        "main()\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "sw" / "0" / "result.json").exists()
