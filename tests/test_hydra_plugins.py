"""gemmlab's Hydra plugins (hydra_plugins/): found where Hydra's plugin scan cannot see them, and
written on Hydra's public API alone (issue 45: no private Hydra import, no run-time replacement of a
Hydra or OmegaConf function)."""

from __future__ import annotations

import re

from clirun import REPO_ROOT


def test_a_sweep_runs_where_hydras_plugin_scan_cannot_see_gemmlabs_plugins(tmp_path):
    """A setuptools editable install maps ``hydra_plugins.gemmlab_sweeper`` and
    ``hydra_plugins.gemmlab_launcher`` with an import hook that Hydra's plugin scan
    (``pkgutil.walk_packages`` over the ``hydra_plugins`` folders) does not see: there ``gemmlab -m
    ...`` outside the checkout stopped with "Unknown plugin class"
    (gemmlab.cli.app.register_plugins). Emulated in a fresh process by a walk that skips both, with
    the modules imported before Hydra's scan. The point runs in that process
    (``isolation.process=false``): what is checked is Hydra finding the plugins, which happens there,
    and a point's worker process would add only an interpreter start and its imports."""
    import subprocess
    import sys
    script = (
        "import pkgutil, sys\n"
        "real = pkgutil.walk_packages\n"
        "ours = ('hydra_plugins.gemmlab_sweeper', 'hydra_plugins.gemmlab_launcher')\n"
        "pkgutil.walk_packages = lambda *a, **k: (i for i in real(*a, **k) if i.name not in ours)\n"
        "import hydra_plugins.gemmlab_sweeper, hydra_plugins.gemmlab_launcher\n"
        "from gemmlab.cli.app import main\n"
        f"sys.argv = ['gemmlab', '-m', 'kernel=naive', 'shape=[8,8,8]', 'mode=compile', 'isolation.process=false', "
        f"'hydra.sweep.dir={tmp_path / 'sw'}']\n"
        "main()\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "sw" / "0" / "result.json").exists()
    hydra = (tmp_path / "sw" / "0" / ".hydra" / "hydra.yaml").read_text()
    assert "_target_: hydra_plugins.gemmlab_launcher.GemmlabLauncher" in hydra  # the default launcher ran it


#: what no file of gemmlab's command or plugins may hold: a private Hydra or OmegaConf import
PRIVATE = re.compile(r"^\s*(from|import)\s+(hydra\._internal|omegaconf\._utils)", re.MULTILINE)


def test_no_private_hydra_or_omegaconf_import():
    """gemmlab and its Hydra plugins use Hydra's and OmegaConf's public API only (issue 45); the
    check itself finds such an import."""
    files = [*(REPO_ROOT / "gemmlab").rglob("*.py"), *(REPO_ROOT / "hydra_plugins").rglob("*.py")]
    found = [f"{p.relative_to(REPO_ROOT)}" for p in files if PRIVATE.search(p.read_text(encoding="utf-8"))]
    assert not found, found
    assert PRIVATE.search("    from hydra._internal.core_plugins import basic_launcher\n")
    assert PRIVATE.search("from omegaconf._utils import x\n") and not PRIVATE.search("from hydra.core import utils\n")


def test_gemmlabs_launcher_refuses_a_batch_whose_points_share_a_folder_before_any_runs(tmp_path):
    """gemmlab's launcher composes every job of a batch and checks its folder before running any:
    two points in one folder refuse the batch in one line for ``hydra.sweep.subdir`` (a later batch,
    after points ran, says the sweep stopped there); nothing is run either way."""
    import pytest
    from omegaconf import OmegaConf

    from gemmlab.errors import ConfigError
    from hydra_plugins.gemmlab_launcher import GemmlabLauncher

    class Loader:  # Hydra's config loader: each job's config, its folder the same for every job
        def load_sweep_config(self, master, overrides):
            return OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path), "subdir": "same"},
                                               "job": {"id": "???", "num": "???"}}})

    launcher = GemmlabLauncher()
    launcher.hydra_context = type("Context", (), {"config_loader": Loader()})()
    launcher.run = lambda config: pytest.fail("a job ran")
    with pytest.raises(ConfigError) as first:
        launcher.compose_batch([["kernel.BX=8"], ["kernel.BX=16"]], 0)
    assert str(first.value).startswith("hydra.sweep.subdir: 'same' gives point #0 and point #1 the same folder")
    assert "the sweep stopped" not in str(first.value)
    launcher.folders.clear()
    launcher.jobs_started = 2  # an earlier batch ran
    with pytest.raises(ConfigError, match=r"the sweep stopped before point #3 \(the points before it keep"):
        launcher.compose_batch([["kernel.BX=8"], ["kernel.BX=16"]], 2)
    assert not list(tmp_path.iterdir())
