"""The edit->run loop (issue 45, item 6): a run that uses the installed copy of a kernel source or a
built-in plugin module (``pip install .``) while the current folder is inside a gemmlab checkout
(its top folder or a subfolder) holding another version of that file says so in one line (the
summary's WARNING, ``compile.stale_checkout_source`` in the record), never an error. CPU only: a
fake checkout in tmp_path (chdir) and a fake installed ``kernels/`` and ``gemmlab_plugins/``
(KERNELS_DIR, PLUGINS_DIR monkeypatched); ``mode=compile`` in this process."""

from __future__ import annotations

import shutil

import pytest

import gemmlab.contract.registry as registry
import gemmlab.paths as paths
from clirun import REPO_ROOT
from gemmlab.run.pipeline import run_point
from gemmlab.stages import record as record_stage

NAIVE = REPO_ROOT / "kernels" / "naive.cu"


NAIVE_PY = REPO_ROOT / "plugins" / "naive.py"


def _checkout(root, name="gemmlab", edit=True, plugin=False):
    """A folder that looks like a gemmlab checkout: pyproject.toml naming ``name``, kernels/naive.cu
    (edited unless ``edit`` is false), and plugins/naive.py where ``plugin`` (edited likewise)."""
    (root / "kernels").mkdir(parents=True)
    (root / "pyproject.toml").write_text(f'[build-system]\nrequires = ["setuptools"]\n\n[project]\nname = "{name}"\n'
                                         'version = "0.1.0"\n')
    text = NAIVE.read_text()
    (root / "kernels" / "naive.cu").write_text(text + ("// edited in the checkout\n" if edit else ""))
    if plugin:
        (root / "plugins").mkdir()
        (root / "plugins" / "naive.py").write_text(NAIVE_PY.read_text() + ("# edited in the checkout\n" if edit else ""))
    return root


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A fake installed kernels/ (site-packages/gemmlab/kernels) holding the shipped naive.cu."""
    kernels = tmp_path / "site-packages" / "gemmlab" / "kernels"
    kernels.mkdir(parents=True)
    shutil.copy(NAIVE, kernels / "naive.cu")
    monkeypatch.setattr(paths, "KERNELS_DIR", kernels)
    monkeypatch.setattr(registry, "KERNELS_DIR", kernels)
    return kernels


@pytest.fixture
def installed_plugins(tmp_path, monkeypatch):
    """A fake installed gemmlab_plugins/ (site-packages) holding the shipped naive.py."""
    plugins = tmp_path / "site-packages" / "gemmlab_plugins"
    plugins.mkdir(parents=True)
    shutil.copy(NAIVE_PY, plugins / "naive.py")
    monkeypatch.setattr(paths, "PLUGINS_DIR", plugins)
    return plugins


def test_checkout_is_recognised_by_its_pyproject(tmp_path):
    assert paths.gemmlab_checkout(_checkout(tmp_path / "a")) == tmp_path / "a"
    assert paths.gemmlab_checkout(_checkout(tmp_path / "b", name="other")) is None
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "pyproject.toml").write_text('[project]\nname = "gemmlab"\n')
    assert paths.gemmlab_checkout(tmp_path / "c") is None  # no kernels/ folder
    assert paths.gemmlab_checkout(REPO_ROOT) == REPO_ROOT


def test_differing_checkout_copy_is_named(tmp_path, installed):
    checkout = _checkout(tmp_path / "checkout")
    stale = paths.stale_checkout_source([installed / "naive.cu"], cwd=checkout)
    assert stale["files"] == ["kernels/naive.cu"] and stale["checkout"] == str(checkout.resolve())
    assert "\n" not in stale["message"] and "pip install -e ." in stale["message"]
    # the same file, another project, the checkout's own kernels/ (editable), a drop-in's own source
    assert paths.stale_checkout_source([installed / "naive.cu"], cwd=_checkout(tmp_path / "same", edit=False)) is None
    assert paths.stale_checkout_source([installed / "naive.cu"], cwd=_checkout(tmp_path / "o", name="x")) is None
    assert paths.stale_checkout_source([checkout / "kernels" / "naive.cu"], cwd=checkout) is None
    assert paths.stale_checkout_source([tmp_path / "mine.cu"], cwd=checkout) is None
    assert paths.stale_checkout_source([installed / "naive.cu"], cwd=tmp_path) is None  # not a checkout


def test_editable_install_says_nothing(tmp_path, monkeypatch):
    """The checkout's own kernels/ compiled (pip install -e ., or PYTHONPATH): nothing to say."""
    checkout = _checkout(tmp_path / "checkout")
    monkeypatch.setattr(paths, "KERNELS_DIR", checkout / "kernels")
    assert paths.stale_checkout_source([checkout / "kernels" / "naive.cu"], cwd=checkout) is None


def test_run_from_a_checkout_warns_in_one_line(tmp_path, installed, monkeypatch):
    checkout = _checkout(tmp_path / "checkout")
    monkeypatch.chdir(checkout)
    cfg = {"kernel": {"name": "naive"}, "shape": [31, 33, 17], "mode": "compile", "isolation": {"process": False}}
    rec = run_point(cfg, tmp_path / "run")
    assert rec["status"] == "compiled", rec.get("error")  # a warning, never an error
    assert rec["compile"]["source_file"] == str(installed / "naive.cu")
    assert rec["compile"]["stale_checkout_source"]["files"] == ["kernels/naive.cu"]
    warnings = [line for line in record_stage.summary(rec).splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "kernels/naive.cu" in warnings[0] and "differs from this checkout" in warnings[0]
    # the checkout's copy made equal again: no field, no line
    shutil.copy(NAIVE, checkout / "kernels" / "naive.cu")
    rec = run_point(cfg, tmp_path / "run2")
    assert rec["status"] == "compiled" and "stale_checkout_source" not in rec["compile"]
    assert "WARNING" not in record_stage.summary(rec)


def test_worker_imports_the_commands_gemmlab_not_the_checkouts(tmp_path, monkeypatch):
    """The point's worker process (``python -c``, whose sys.path starts with the current folder)
    imports the gemmlab the command runs, not a checkout's in the current folder: a user's plain
    install run from the checkout compiled the checkout's kernels in the worker while the command
    itself was the installed copy. Here the fake checkout's gemmlab cannot be imported at all, and
    the command's (this checkout, another folder) compiles its own naive.cu and says that the
    current folder's differs."""
    from gemmlab.run import isolation
    checkout = _checkout(tmp_path / "checkout")
    (checkout / "gemmlab").mkdir()
    (checkout / "gemmlab" / "__init__.py").write_text('raise ImportError("the checkout\'s gemmlab was imported")\n')
    monkeypatch.chdir(checkout)
    cfg = {"kernel": {"name": "naive"}, "shape": [31, 33, 17], "mode": "compile"}
    try:
        rec = isolation.run_point(cfg, tmp_path / "run")
    finally:
        isolation.stop_worker()
    assert rec["status"] == "compiled", rec.get("error")
    assert rec["compile"]["source_file"] == str(paths.KERNELS_DIR / "naive.cu")
    assert rec["compile"]["stale_checkout_source"]["checkout"] == str(checkout.resolve())


def test_a_checkouts_subfolder_is_the_checkout(tmp_path, installed):
    """Run from any folder inside a checkout (kernels/, outputs/...), the checkout is found above it;
    the nearest one wins; a folder outside any checkout finds none."""
    checkout = _checkout(tmp_path / "checkout")
    deep = checkout / "outputs" / "2026-12-07" / "run"
    deep.mkdir(parents=True)
    assert paths.checkout_around(deep) == checkout and paths.checkout_around(checkout / "kernels") == checkout
    inner = _checkout(checkout / "vendor" / "copy", edit=False)
    assert paths.checkout_around(inner / "kernels") == inner
    assert paths.checkout_around(tmp_path) is None
    stale = paths.stale_checkout_source([installed / "naive.cu"], cwd=deep)
    assert stale["files"] == ["kernels/naive.cu"] and stale["checkout"] == str(checkout.resolve())
    assert paths.stale_checkout_source([installed / "naive.cu"], cwd=inner / "kernels") is None  # its copy is the same


def test_an_edited_plugin_is_named_too(tmp_path, installed, installed_plugins):
    """A built-in plugin module from the installed gemmlab_plugins/ whose checkout copy
    (plugins/naive.py) differs is named like a kernel source, in the same one line; the same
    file, or the checkout's own plugins/ (editable), says nothing."""
    checkout = _checkout(tmp_path / "checkout", plugin=True)
    stale = paths.stale_checkout_source([installed / "naive.cu", installed_plugins / "naive.py"], cwd=checkout / "kernels")
    assert stale["files"] == ["kernels/naive.cu", "plugins/naive.py"] and "\n" not in stale["message"]
    assert str(installed_plugins.resolve()) in stale["message"] and "pip install -e ." in stale["message"]
    same = _checkout(tmp_path / "same", edit=False, plugin=True)
    assert paths.stale_checkout_source([installed / "naive.cu", installed_plugins / "naive.py"], cwd=same) is None
    assert paths.stale_checkout_source([checkout / "plugins" / "naive.py"], cwd=checkout) is None
    # this process's built-in plugin modules are the ones compared: naive.py among them
    import gemmlab_plugins.naive as naive_module  # wherever it is installed: the checkout (editable) or site-packages
    assert naive_module.__file__ in registry.builtin_plugin_files()


def test_run_from_a_subfolder_names_the_edited_plugin_once(tmp_path, installed, installed_plugins, monkeypatch):
    """A compile-mode run from a checkout's subfolder, whose naive.cu and plugins/naive.py both
    differ from the installed copies it used, says so in one WARNING line naming both."""
    checkout = _checkout(tmp_path / "checkout", plugin=True)
    (checkout / "outputs").mkdir()
    monkeypatch.chdir(checkout / "outputs")
    monkeypatch.setattr(registry, "builtin_plugin_files", lambda: [str(installed_plugins / "naive.py")])
    cfg = {"kernel": {"name": "naive"}, "shape": [31, 33, 17], "mode": "compile", "isolation": {"process": False}}
    rec = run_point(cfg, tmp_path / "run")
    assert rec["status"] == "compiled", rec.get("error")
    assert rec["compile"]["stale_checkout_source"]["files"] == ["kernels/naive.cu", "plugins/naive.py"]
    warnings = [line for line in record_stage.summary(rec).splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "kernels/naive.cu, plugins/naive.py" in warnings[0]
