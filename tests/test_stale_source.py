"""The edit->run loop (issue 45, item 6): a run that compiles the installed copy of a kernel source
(``pip install .``) while the current folder is a gemmlab checkout holding another version of that
file says so in one line (the summary's WARNING, ``compile.stale_checkout_source`` in the record),
never an error. CPU only: a fake checkout in tmp_path (chdir) and a fake installed ``kernels/``
(KERNELS_DIR monkeypatched); ``mode=compile`` in this process."""

from __future__ import annotations

import shutil

import pytest

import gemmlab.contract.registry as registry
import gemmlab.paths as paths
from clirun import REPO_ROOT
from gemmlab.run.pipeline import run_point
from gemmlab.stages import record as record_stage

NAIVE = REPO_ROOT / "kernels" / "naive.cu"


def _checkout(root, name="gemmlab", edit=True):
    """A folder that looks like a gemmlab checkout: pyproject.toml naming ``name``, kernels/naive.cu
    (edited unless ``edit`` is false)."""
    (root / "kernels").mkdir(parents=True)
    (root / "pyproject.toml").write_text(f'[build-system]\nrequires = ["setuptools"]\n\n[project]\nname = "{name}"\n'
                                         'version = "0.1.0"\n')
    text = NAIVE.read_text()
    (root / "kernels" / "naive.cu").write_text(text + ("// edited in the checkout\n" if edit else ""))
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
