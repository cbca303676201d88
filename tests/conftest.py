"""Shared test setup: the ``gpu`` marker skips (with the reason) where no CUDA GPU is usable; the
``cli`` fixture that runs gemmlab's commands against this checkout (in this process, or as a
subprocess where that is the point; tests/clirun.py)."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest

# the gpu tests run as several xdist workers on one GPU on purpose (they assert correctness, never
# speed): timing.shared's default there is allow, so their points are not refused shared_gpu. A test
# of the refusal sets timing.shared=refuse itself (tests/test_pipeline_fake.py).
os.environ.setdefault("GEMMLAB_TIMING_SHARED", "allow")

# the built-in plugins under their import name (gemmlab_plugins) where gemmlab is not installed but on
# PYTHONPATH (the GPU machine's copy of the tree): test modules import them at collection
from gemmlab.contract.registry import load_registry  # noqa: E402

load_registry(entry_points=False)


@functools.lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    """None when a CUDA driver and at least one GPU are usable, else why not."""
    try:
        from cuda.core import Device
        if not Device.get_all_devices():
            return "no CUDA GPU visible"
    except Exception as exc:  # no driver library, driver too old, ...
        return f"no CUDA driver/GPU ({type(exc).__name__}: {str(exc)[:80]})"
    return None


def pytest_configure(config):
    """Keep the persistent compile cache of the test session out of the user's home (one folder
    for the session: pytest-xdist's workers inherit the variable); memoize the disassembler's
    output for the session's test processes (:func:`memoize_disassembly`, its folder
    ``GEMMLAB_TEST_SASS_MEMO`` is inherited the same way); read NVRTC's recorded outputs
    (:func:`memoize_nvrtc`; the packed recordings are unpacked once a session into the shared folder
    ``GEMMLAB_TEST_MEMO_UNPACKED``); both in the point workers these processes start too
    (tests/sitecustomize.py, :data:`WORKER_MEMO_ENV`); let Hydra and OmegaConf do their pure work once a process
    (tests/hydra_memo.py: the ``ConfigStore`` shared by repository copies, YAML and interpolation
    parses kept, a compose's defaults list and merge kept per config sources' contents;
    ``GEMMLAB_TEST_PLAIN_HYDRA=1`` turns it off). The folders this process made are
    removed when it ends (:func:`pytest_unconfigure`: the xdist controller, after its workers).

    Bytecode is left as the environment has it. Where its writing is off
    (``PYTHONDONTWRITEBYTECODE``), a session folder for it (``PYTHONPYCACHEPREFIX``) would cost
    more than it saves: Python then reads bytecode from that folder only, so the first processes
    (both xdist workers at once) compile the standard library and every installed package they
    import (Hydra, Optuna, matplotlib, ...) from source again (a compile-mode command took 3.2-3.4
    CPU s instead of 1.6). What it would share, the checkout's own modules (~0.17 CPU s a command),
    ``python3 -m compileall`` writes beside them before the run instead (.ci/run does; the user guide
    says so for other machines where writing is off)."""
    import tempfile
    made = []
    if not os.environ.get("GEMMLAB_CACHE_DIR"):
        os.environ["GEMMLAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="gemmlab-test-cache-")
        made.append(os.environ["GEMMLAB_CACHE_DIR"])
    if not os.environ.get(SASS_MEMO_ENV):
        os.environ[SASS_MEMO_ENV] = tempfile.mkdtemp(prefix="gemmlab-test-sass-")
        made.append(os.environ[SASS_MEMO_ENV])
    if not os.environ.get(UNPACKED_ENV):  # the recordings' packs, unpacked once a session (tests/sass_memo.py)
        os.environ[UNPACKED_ENV] = tempfile.mkdtemp(prefix="gemmlab-test-memo-")
        made.append(os.environ[UNPACKED_ENV])
    config.stash[MADE_FOLDERS] = made
    os.environ.setdefault(WORKER_MEMO_ENV, "1")  # the point workers too (tests/sitecustomize.py)
    memoize_disassembly()
    memoize_nvrtc()
    import hydra_memo
    hydra_memo.install()  # Hydra/OmegaConf's pure work done once a test process (tests/hydra_memo.py)
    rewrite_test_modules_shared(config)


def rewrite_test_modules_shared(config) -> None:
    """In a pytest-xdist worker where bytecode writing is off (``PYTHONDONTWRITEBYTECODE``, as on
    CI): share pytest's assert rewriting of the test modules between the workers. pytest rewrites
    each test module's asserts (parse, AST rewrite, compile) before importing it and caches the
    result as ``tests/__pycache__/NAME.cpython-3X-pytest-V.pyc`` only where it may write bytecode;
    otherwise every worker rewrites all ~85 test modules again while collecting (about 4.5 CPU s
    of a worker's ~6 s collection, measured with cProfile and ``--collect-only``), both at the
    same time. Here, before collection, worker i of n writes those files (pytest's own functions,
    atomically, in pytest's format: a source changed since is rewritten again) starting at the
    i-th n-th of the sorted test modules and going round, skipping any file already valid: each
    worker rewrites about 1/n of them and reads the others' files, and collection then reads them
    all (``_read_pyc`` checks the source's mtime and size). Only ``tests/__pycache__`` (ignored by
    git) is written; the bytecode of every other module is left as the environment has it. Any
    failure (pytest's private functions changed, a read-only checkout) leaves pytest to rewrite
    the rest itself, as before."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not sys.dont_write_bytecode or not worker.startswith("gw"):
        return  # pytest writes (or shares) them itself
    try:
        from _pytest.assertion import rewrite
        state = config.stash[rewrite.assertstate_key]
        index, count = int(worker[2:]), max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
        files = sorted(Path(__file__).resolve().parent.glob("test_*.py"))
        start = len(files) * (index % count) // count
        for source in files[start:] + files[:start]:
            cache_dir = rewrite.get_cache_dir(source)
            pyc = cache_dir / (source.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(source, pyc) is not None:
                continue
            if not rewrite.try_makedirs(cache_dir):
                return
            stat, code = rewrite._rewrite_test(source, config)
            rewrite._write_pyc(state, code, stat, pyc)
    except Exception:  # pytest rewrites what is left while collecting, as without this
        return


def pytest_unconfigure(config):
    """Remove the session folders :func:`pytest_configure` made in this process."""
    import shutil
    for folder in config.stash.get(MADE_FOLDERS, []):
        shutil.rmtree(folder, ignore_errors=True)


#: folder of the session's disassembly memo, shared by the xdist workers (:func:`memoize_disassembly`)
SASS_MEMO_ENV = "GEMMLAB_TEST_SASS_MEMO"
#: folder where the session's processes share the unpacked recordings (tests/sass_memo.py's ``UNPACKED_ENV``)
UNPACKED_ENV = "GEMMLAB_TEST_MEMO_UNPACKED"
#: ``1`` (set for the session, inherited): point workers started by the test processes install the
#: memos too (tests/sitecustomize.py); set ``0`` beforehand for real NVRTC and disassembler runs there
WORKER_MEMO_ENV = "GEMMLAB_TEST_WORKER_MEMO"
#: the session folders this process made (removed at its end)
MADE_FOLDERS = pytest.StashKey[list]()


def memoize_disassembly() -> None:
    """tests/memo_hooks.py's :func:`~memo_hooks.memoize_disassembly` in this process (the point
    workers it starts install it too: tests/sitecustomize.py)."""
    import memo_hooks
    memo_hooks.memoize_disassembly()


def memoize_nvrtc() -> None:
    """tests/memo_hooks.py's :func:`~memo_hooks.memoize_nvrtc` in this process (the point workers
    it starts install it too: tests/sitecustomize.py)."""
    import memo_hooks
    memo_hooks.memoize_nvrtc()


#: allocations between two young-generation collections of the test processes (Python's default: 700)
GC_THRESHOLD = 50_000


def pytest_collection_finish(session):
    """Once the tests are collected (in each xdist worker), move everything alive to the garbage
    collector's permanent generation (``gc.freeze``: the collected items, imported modules and
    fixtures' definitions are never scanned again) and collect the young generation every
    :data:`GC_THRESHOLD` allocations instead of 700. Hydra composes each command's config by
    deep-copying OmegaConf trees (hundreds of thousands of small objects a command), which
    otherwise runs a collection every few milliseconds over the whole session's heap: about 6% of
    a worker's time. What a test runs is unchanged; garbage cycles are still collected, later."""
    import gc
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 10, 10)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the group markers
def pytest_collection_modifyitems(config, items):
    """Skip gpu tests (with the reason) where no GPU is usable. For pytest-xdist (``-n``, ``--dist
    loadgroup`` in pyproject.toml) put the tests sharing a module-scoped fixture in one group per
    fixture, which one worker runs (its setup, e.g. an Optuna search, runs once); this hook runs
    before xdist's own (``tryfirst``), which turns the markers into groups. The gpu tests assert
    correctness, never speed, and may share the GPU (.ci/gpu-call runs them on 12 workers), so
    they are not grouped here; the isolation gpu tests, which time a sweep, are one group by their
    own marker (tests/test_isolation.py). The tests of several modules reading one session
    fixture of :data:`SHARED_RUNS` are one group too (the fixture's command runs once)."""
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            reason = reason or gpu_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"gpu test skipped: {reason}"))
            continue  # not grouped: distributed one by one on a GPU machine (.ci/gpu-call)
        info = getattr(item, "_fixtureinfo", None)
        shared = [name for name in SHARED_RUNS if name in getattr(info, "names_closure", ())]
        if shared:
            item.add_marker(pytest.mark.xdist_group(f"session::{shared[0]}"))
            continue
        for name, defs in (getattr(info, "name2fixturedefs", None) or {}).items():
            if defs and defs[-1].scope == "module":
                item.add_marker(pytest.mark.xdist_group(f"{item.module.__name__}::{name}"))
                break


@pytest.fixture(scope="session")
def cli():
    """``cli(args, cwd, module="gemmlab", in_process=True, env=None, timeout=300)``: run
    ``python -m <module> *args`` (``gemmlab``, ``gemmlab.results.report``, ``gemmlab.results.compare``,
    ``gemmlab.dispatch``, ...) in ``cwd`` against this checkout; returns a
    :class:`clirun.Result` (``returncode``, ``stdout``, ``stderr``). In this process by default
    (a fresh command each call, see tests/clirun.py); ``in_process=False`` for a real subprocess
    where that is the point (exit status of a process, pipes, several commands at once)."""
    import clirun

    def run(args, cwd, module: str = "gemmlab", in_process: bool = True, env: dict | None = None,
            timeout: float = 300):
        return clirun.run(module, *args, cwd=cwd, in_process=in_process, env=env, timeout=timeout)
    return run


#: session fixtures holding a command's run that tests of several modules read (one xdist group each)
SHARED_RUNS = ("seed_lab_sweep",)


@pytest.fixture(scope="session")
def seed_lab_sweep(tmp_path_factory, cli):
    """``(proc, root, sweep)``: ``gemmlab experiment=seed_lab mode=compile`` (6 points: naive and
    tiled on 3 shapes) run once for the session, in this process, in the new folder ``root`` with
    Hydra's default output layout; ``sweep`` is the one folder under ``root/outputs/multirun``
    (None when there is not exactly one). Read by tests/test_cli.py (the points and the summary)
    and tests/test_sweep.py (the progress lines)."""
    root = tmp_path_factory.mktemp("seedlab")
    proc = cli(["experiment=seed_lab", "mode=compile"], root)
    base = root / "outputs" / "multirun"
    sweeps = sorted(p for p in base.glob("*/*") if p.is_dir()) if base.exists() else []
    return proc, root, sweeps[0] if len(sweeps) == 1 else None


#: the disassembly summary :func:`sass_not_read` gives every cubin
NOT_DISASSEMBLED = {"file": None, "histogram": None, "disassembler": None,
                    "error": "not disassembled: a test that never reads the SASS"}


@pytest.fixture
def sass_not_read(monkeypatch):
    """For a test that compiles kernels but never reads their SASS (the pipeline on the fake GPU:
    the launch plan, the copies, the timed launches; a cubin's ELF header, the ptxas report, the
    in-process compile cache): compiled kernels are not disassembled (about 0.5 CPU s of nvdisasm
    per kernel). A disassembly cannot change such a test's outcome: a failed one is a note in the
    record, never a failed point or a failed compile (``gemmlab.gpu.sass.disassemble`` never
    raises). The record's
    ``compile.sass`` then holds :data:`NOT_DISASSEMBLED`; the compile caches of this process are
    cleared after the test, so no later test gets a kernel without its SASS (the on-disk cache
    keeps no failed disassembly: ``gemmlab.gpu.sass.stored``)."""
    import gemmlab
    from gemmlab.gpu import sass
    monkeypatch.setattr(sass, "disassemble", lambda cubin: (dict(NOT_DISASSEMBLED), ""))
    yield
    gemmlab.clear_caches()


@pytest.fixture
def plots_not_drawn(monkeypatch):
    """For a test of ``write_report`` (or of gemmlab-report run in the test process) that reads
    only its tables (report.csv, the Markdown and HTML tables): the plots are not drawn
    (matplotlib: about 1 CPU s a report), each noted as skipped. A plot cannot change such a
    test's outcome: ``report_plots.draw`` never raises (a failed plot is a note) and the tables
    are written from the rows alone (tests/test_report.py, tests/test_archive.py)."""
    from gemmlab.results import report_plots
    monkeypatch.setattr(report_plots, "draw", lambda rows, out: (
        {}, {p: "skipped: not drawn (a test that reads only the tables)" for p in report_plots.PLOTS}, {}))


@pytest.fixture
def cli_env():
    """Environment for running ``python -m gemmlab`` as a subprocess from any directory against
    this checkout (tests/clirun.py's :func:`~clirun.command_env`)."""
    from clirun import command_env
    return command_env()


@pytest.fixture
def gemmlab_cmd():
    """argv prefix of the gemmlab command for subprocess tests."""
    return [sys.executable, "-m", "gemmlab"]


@pytest.fixture
def run_module(cli):
    """``run_module(module, *args, cwd=..., timeout=240)``: ``cli`` with ``module`` first (kept
    for tests written against it)."""
    def run(module: str, *args, cwd, timeout: float = 240, in_process: bool = True):
        return cli(args, cwd, module=module, timeout=timeout, in_process=in_process)
    return run


@pytest.fixture
def odd_result_entries():
    """``odd_result_entries(root)``: puts under ``root`` a folder named result.json and a
    result.json that is a link to nowhere (a new-user trial put both in a results folder) and
    returns their paths, ``{"folder": ..., "link": ...}`` (the target is ``root/nowhere.json``).
    The finder, the report and compare are tested on the same entries."""
    def make(root):
        root = Path(root)
        folder = root / "odd-folder" / "result.json"
        folder.mkdir(parents=True)
        link = root / "dangling" / "result.json"
        link.parent.mkdir(parents=True)
        link.symlink_to(root / "nowhere.json")
        return {"folder": folder, "link": link}
    return make
