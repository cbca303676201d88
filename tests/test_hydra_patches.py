"""gemmlab.cli.hydra_patches: gemmlab's sweeper is found where Hydra's plugin scan cannot see it.

(The parse-once patches of Hydra and OmegaConf this file checked were removed with issue 45: no
Hydra or OmegaConf function is replaced at run time any more.)"""

from __future__ import annotations


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
