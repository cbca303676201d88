"""Fault isolation (gemmlab.run.isolation) and per-point GPU locks (gemmlab.gpu.device.lease_scope).

A CUDA fault is sticky for the process, a crash ends it, a hung kernel never returns: each must
cost only its own point. Without a GPU these are simulated from a plugin's ``check()``
(tests/plugins_faulty/faulty_sim.py): a sticky error that poisons every later point of the same
process, ``os._exit``, SIGSEGV and a sleep. The real kernels (misaligned float4 loads at N = 65,
an illegal address, a spinning kernel) run in the gpu-marked tests (and ran in .ci/fault-evidence,
removed in 1511331).
"""

from __future__ import annotations

import fcntl
import json
import time
from pathlib import Path

import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.run import isolation
from gemmlab.stages.config import IsolationOptions
from gemmlab.errors import ConfigError, NoGPUError

FAULTY = str(Path(__file__).resolve().parent / "plugins_faulty")


def sim(mode: int, **extra) -> dict:
    return {"kernel": {"name": "sim_fault", "MODE": mode}, "shape": [8, 8, 8], "mode": "compile",
            "plugin_dirs": [FAULTY], **extra}


@pytest.fixture
def runner():
    r = isolation.PointRunner()
    yield r
    r.close()


def wait_for(path: Path, timeout_s: float = 60) -> None:
    """Return once ``path`` exists (a MODE=5 point creates its GEMMLAB_TEST_HANG_MARKER file just
    before it hangs, tests/plugins_faulty/faulty_sim.py); fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} not created within {timeout_s} s"
        time.sleep(0.02)


def statuses(sweep: Path) -> list[str]:
    return [json.loads((sweep / str(i) / "result.json").read_text())["status"]
            for i in range(len(list(sweep.glob("*/result.json"))))]


# --- a sticky fault, a crash, a hang: only their own point ------------------------------------------

def test_sticky_fault_costs_only_its_point_in_a_sweep(cli, tmp_path):
    """Issue 11.1: the point after a (simulated) misaligned-address fault must not inherit it."""
    sweep = tmp_path / "sw"
    proc = cli(["-m", "kernel=sim_fault", "kernel.MODE=2,1,1", "mode=compile", "shape=[8,8,8]",
                    f"plugin_dirs=[{FAULTY}]", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert statuses(sweep) == ["cuda_error", "compiled", "compiled"], proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "3 points: 0 verified and timed, 2 compiled only, 1 failed" in proc.stdout
    assert "CUDA_ERROR_MISALIGNED_ADDRESS" in (sweep / "summary.md").read_text()


def test_without_isolation_the_fault_poisons_the_process(cli, tmp_path):
    """The simulation is faithful: in one process the second, correct point fails too."""
    sweep = tmp_path / "sw"
    cli(["-m", "kernel=sim_fault", "kernel.MODE=2,1", "mode=compile", "shape=[8,8,8]", "isolation.process=false",
             f"plugin_dirs=[{FAULTY}]", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert statuses(sweep) == ["cuda_error", "cuda_error"]


@pytest.mark.parametrize("mode, how", [(3, {"exit_code": 3}), (4, {"signal": "SIGSEGV"})])
def test_dead_worker_is_recorded_and_replaced(runner, tmp_path, mode, how):
    rec = runner.run(sim(mode), tmp_path / "a", IsolationOptions())
    assert rec["status"] == "crashed" and rec["valid"] is False
    assert how.items() <= rec["isolation"].items()
    assert "worker process" in rec["error"] and "\n" not in rec["error"]
    assert json.loads((tmp_path / "a" / "result.json").read_text())["status"] == "crashed"
    assert runner.run(sim(1), tmp_path / "b", IsolationOptions())["status"] == "compiled"
    assert runner.started == 2


@pytest.mark.parametrize("mode, status, options", [(4, "crashed", IsolationOptions()),
                                                   (5, "timeout", IsolationOptions(timeout_s=0.5))])
def test_a_lost_worker_after_resume_set_the_earlier_record_aside_names_it(runner, tmp_path, mode, status, options):
    """resume=true re-runs a failed point: its worker moves the earlier record aside, then dies
    (or hangs) before writing the new one. The record the parent writes names the earlier one in
    ``previous``, as a record the worker wrote would (new-user trial: it said nothing)."""
    first = runner.run(sim(mode), tmp_path / "a", options)
    assert first["status"] == status and "previous" not in first
    earlier = (tmp_path / "a" / "result.json").read_bytes()
    again = runner.run(sim(mode, resume=True), tmp_path / "a", options)
    assert again["status"] == status
    [entry] = again["previous"]
    assert (tmp_path / "a" / entry["record"]).read_bytes() == earlier
    assert json.loads((tmp_path / "a" / "result.json").read_text())["previous"] == again["previous"]


def test_watchdog_kills_a_hung_point(runner, tmp_path):
    started = time.monotonic()
    rec = runner.run(sim(5), tmp_path / "a", IsolationOptions(timeout_s=0.5))  # a hang: any limit ends it
    assert time.monotonic() - started < 30
    assert rec["status"] == "timeout" and rec["valid"] is False
    assert "isolation.timeout_s" in rec["error"] and rec["isolation"]["timeout_s"] == 0.5
    assert rec["config"]["kernel"]["MODE"] == 5
    assert runner.run(sim(1), tmp_path / "b", IsolationOptions(timeout_s=60))["status"] == "compiled"


def test_a_worker_killed_while_disassembling_leaves_no_temporary_folder(runner, tmp_path, monkeypatch):
    """A point's worker holds a temporary folder while nvdisasm reads the cubin from it
    (gemmlab.gpu.sass.disassemble); killed there (the watchdog, Ctrl-C: SIGKILL) it cleans nothing
    up, so the runner removes what that worker left once it has ended (a new-user trial found
    $TMPDIR/gemmlab-sass-* folders after Ctrl-C)."""
    import tempfile
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    rec = runner.run(sim(6), tmp_path / "a", IsolationOptions(timeout_s=1.0))
    assert rec["status"] == "timeout", rec
    assert list(temp.iterdir()) == [], list(temp.iterdir())
    other = temp / "gemmlab-sass-1-kept"  # another process's folder is not this worker's to remove
    other.mkdir()
    assert runner.run(sim(6), tmp_path / "b", IsolationOptions(timeout_s=1.0))["status"] == "timeout"
    assert list(temp.iterdir()) == [other]


def test_a_keyboardinterrupt_raised_by_a_plugin_is_its_points_error(runner, tmp_path):
    """A point's worker ignores Ctrl-C (the parent handles it), so a KeyboardInterrupt there comes
    from the plugin's own code: the point's error naming the plugin method, like any exception of
    it (a second trial saw the worker's traceback and 'killed by SIGINT'); the next point runs."""
    rec = runner.run(sim(7), tmp_path / "a", IsolationOptions(timeout_s=60))
    assert rec["status"] == "error" and rec["valid"] is False, rec
    assert rec["error"].startswith("plugin error: kernel 'sim_fault' raised KeyboardInterrupt in SimFault.check() ("), rec
    assert "KeyboardInterrupt" in (tmp_path / "a" / "traceback.txt").read_text()
    assert runner.run(sim(1), tmp_path / "b", IsolationOptions(timeout_s=60))["status"] == "compiled"


def test_hung_point_in_a_cli_sweep(cli, tmp_path):
    sweep = tmp_path / "sw"
    proc = cli(["-m", "kernel=sim_fault", "kernel.MODE=5,1", "mode=compile", "shape=[8,8,8]",
                    "isolation.timeout_s=3", f"plugin_dirs=[{FAULTY}]", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert statuses(sweep) == ["timeout", "compiled"], proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr


def test_healthy_points_share_one_worker(runner, tmp_path):
    pids = set()
    for i in range(3):
        assert runner.run(sim(1), tmp_path / str(i), IsolationOptions())["status"] == "compiled"
        pids.add(runner.worker.pid)
    assert runner.started == 1 and len(pids) == 1


def test_worker_is_renewed_for_the_next_command(runner, tmp_path, monkeypatch):
    """isolation.end_command (a process that runs several commands, e.g. tests/clirun.py): the
    next point renews the healthy worker, no new interpreter, as a new one would be for that
    command: its working directory (a relative out_dir lands there), its environment (another
    GEMMLAB_CACHE_DIR: a disk miss written there) and nothing memoised (the same kernel is no
    in-process cache hit); without end_command the same worker keeps its memo."""
    for d in ("a", "b", "cache_a", "cache_b"):
        (tmp_path / d).mkdir()
    monkeypatch.chdir(tmp_path / "a")
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path / "cache_a"))
    first = runner.run(sim(1), Path("p"), IsolationOptions())
    assert first["status"] == "compiled" and (tmp_path / "a" / "p" / "result.json").exists()
    assert first["compile"]["cache_hit_in_process"] is False
    pid = runner.worker.pid
    again = runner.run(sim(1), Path("q"), IsolationOptions())  # same command: the memo holds it
    assert again["compile"]["cache_hit_in_process"] is True
    runner.end_command()
    monkeypatch.chdir(tmp_path / "b")
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path / "cache_b"))
    second = runner.run(sim(1), Path("p"), IsolationOptions())
    assert second["status"] == "compiled" and (tmp_path / "b" / "p" / "result.json").exists()
    assert second["compile"]["cache_hit_in_process"] is False and second["compile"]["disk_cache"] == "miss"
    assert list((tmp_path / "cache_b").iterdir())
    assert runner.worker.pid == pid and (runner.started, runner.renewed) == (1, 1)


def test_worker_with_another_cuda_environment_is_replaced(runner, tmp_path, monkeypatch):
    """A variable read when the worker started (CUDA_*, LD_*, PYTHON*) cannot be renewed: the
    next command gets a fresh worker."""
    assert runner.run(sim(1), tmp_path / "a", IsolationOptions())["status"] == "compiled"
    pid = runner.worker.pid
    runner.end_command()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert runner.run(sim(1), tmp_path / "b", IsolationOptions())["status"] == "compiled"
    assert runner.worker.pid != pid and (runner.started, runner.renewed) == (2, 0)


def test_invalid_point_does_not_replace_the_worker(runner, tmp_path):
    rec = runner.run(sim(1, shape=[0, 8, 8]), tmp_path / "a", IsolationOptions())
    assert rec["status"] == "invalid"
    runner.run(sim(1), tmp_path / "b", IsolationOptions())
    assert runner.started == 1


def test_isolation_options_are_validated(tmp_path):
    from gemmlab.stages.config import parse_isolation
    assert parse_isolation(None) == IsolationOptions()
    for bad, field in (({"timeout_s": 0}, "isolation.timeout_s"), ({"process": "yes"}, "isolation.process"),
                       ({"watchdog": 1}, "isolation.watchdog"), (3, "isolation")):
        with pytest.raises(ConfigError) as info:
            parse_isolation(bad)
        assert info.value.field == field
    rec = isolation.run_point(sim(1, isolation={"timeout_s": -1}), tmp_path / "p")
    assert rec["status"] == "invalid" and rec["error"].startswith("isolation.timeout_s:")


# --- GPU locks: held per point, released on every exit path -----------------------------------------

def locked(folder: Path, index: int) -> bool:
    with open(folder / f"gpu{index}.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        return False


@pytest.fixture
def one_gpu(monkeypatch, tmp_path):
    gemmlab.gpu.device.release_held_locks()
    monkeypatch.setattr(gemmlab.gpu.device, "gpu_count", lambda: 1)
    monkeypatch.setenv("GEMMLAB_LOCK_DIR", str(tmp_path / "locks"))
    yield tmp_path / "locks"
    gemmlab.gpu.device.release_held_locks()


def test_lease_scope_releases_on_return_and_on_error(one_gpu):
    with gemmlab.gpu.device.lease_scope():
        assert gemmlab.gpu.device.pick_device() == 0
        assert gemmlab.gpu.device.pick_device() == 0  # same point: same GPU
        assert locked(one_gpu, 0)
    assert not locked(one_gpu, 0)
    with pytest.raises(RuntimeError):
        with gemmlab.gpu.device.lease_scope():
            gemmlab.gpu.device.pick_device()
            raise RuntimeError("point failed")
    assert not locked(one_gpu, 0)


def test_busy_gpu_is_waited_for_then_taken(one_gpu):
    one_gpu.mkdir()
    other = open(one_gpu / "gpu0.lock", "w")  # another process's point
    fcntl.flock(other, fcntl.LOCK_EX)
    with gemmlab.gpu.device.lease_scope(), pytest.raises(NoGPUError, match="no GPU became free"):
        gemmlab.gpu.device.pick_device(wait_s=0.2)
    other.close()
    with gemmlab.gpu.device.lease_scope():
        assert gemmlab.gpu.device.pick_device(wait_s=5) == 0


@pytest.mark.parametrize("shape, status", [([16, 16, 16], "ok"), ([16, 16, 0], "invalid")])
def test_device_auto_lock_ends_with_the_point(one_gpu, monkeypatch, tmp_path, shape, status):
    """Issue 11.2: an idle worker process must not keep its GPU locked after its point."""
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: HostGpu())
    cfg = {"kernel": {"name": "naive"}, "shape": shape, "device": "auto", "isolation": {"process": False},
           "timing": {"warmup": 1, "repeat": 2, "batch": 1}}
    rec = isolation.run_point(cfg, tmp_path / "p")
    assert rec["status"] == status, rec["error"]
    assert not locked(one_gpu, 0) if one_gpu.exists() else True
    if status == "ok":
        assert rec["device"]["index"] == 0


# --- GPU: the real faulty kernels (the lead runs these on the H200) -------------------------------

@pytest.mark.gpu
@pytest.mark.xdist_group("gpu_isolation")  # one xdist worker runs both, one after the other (timing, GPU locks)
def test_real_faults_cost_only_their_point(cli, tmp_path):
    sweep = tmp_path / "sw"
    proc = cli(["-m", "kernel=misaligned,illegal,trap,hang,tiled,naive", "shape=[64,65,33]", "isolation.timeout_s=15",
                f"plugin_dirs=[{FAULTY}]", f"hydra.sweep.dir={sweep}", "timing.repeat=3", "timing.warmup=1"], tmp_path)
    recs = [json.loads((sweep / str(i) / "result.json").read_text()) for i in range(6)]
    out = proc.stdout + proc.stderr
    assert [r["status"] for r in recs] == ["cuda_error", "cuda_error", "cuda_error", "timeout", "ok", "ok"], out
    assert "MISALIGNED_ADDRESS" in recs[0]["error"] and "ILLEGAL_ADDRESS" in recs[1]["error"]


@pytest.mark.gpu
@pytest.mark.xdist_group("gpu_isolation")  # one xdist worker runs both, one after the other (timing, GPU locks)
def test_idle_joblib_worker_does_not_keep_the_gpu(tmp_path):
    """Issue 11.2 on a real GPU: one more worker than GPUs, 4 tiny points; before the fix the
    second worker waited for the first's process to end (about 300 s)."""
    import subprocess
    import sys
    n = gemmlab.gpu.device.gpu_count()
    sweep = tmp_path / "sw"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "gemmlab", "-m", "hydra/launcher=gemmlab_gpus",
                           f"hydra.launcher.n_jobs={n + 1}", "device=auto", "kernel=naive,tiled",
                           "shape=[64,64,64],[96,96,96]", f"hydra.sweep.dir={sweep}", "timing.repeat=3"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "GEMMLAB_LOCK_DIR": str(tmp_path / "locks")})
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert statuses(sweep) == ["ok"] * 4
    assert elapsed < 150, f"4 tiny points took {elapsed:.0f} s: a GPU lock outlived its point"


def test_worker_ends_quietly_when_the_parent_is_gone(monkeypatch, tmp_path):
    """A parent killed while its point runs (Ctrl-C, a timeout around the sweep): the worker's
    reply has nowhere to go; it ends without a traceback (the record is already on disk)."""
    import socket
    from multiprocessing.connection import Connection
    ours, theirs = socket.socketpair()
    parent = Connection(ours.detach())
    parent.send(({"shape": [1, 1, 1]}, str(tmp_path)))
    ran = []

    def point_then_parent_dies(cfg, out_dir):
        ran.append(out_dir)
        parent.close()
        return {"status": "ok"}

    monkeypatch.setattr(isolation, "run_in_scope", point_then_parent_dies)
    monkeypatch.setattr(isolation.signal, "signal", lambda *args: None)  # keep this process's Ctrl-C
    monkeypatch.setattr(isolation, "_watch_parent", lambda parent: None)  # this process is no worker
    isolation._serve(theirs.detach())  # before the fix: BrokenPipeError out of conn.send
    assert ran == [tmp_path]


def test_a_worker_whose_parent_is_killed_ends_during_its_point(tmp_path):
    """kill -9 of the command while its worker runs a point (here one that hangs): the worker must
    not run on for nobody (holding the GPU); it ends within a few seconds (new-user finding 6)."""
    import os
    import signal
    import subprocess
    import sys
    script = (f"import sys; sys.path[:0] = {sys.path!r}\n"
              "from pathlib import Path\n"
              "from gemmlab.run import isolation\n"
              "from gemmlab.stages.config import IsolationOptions\n"
              "r = isolation.PointRunner(); r._start(); print(r.worker.pid, flush=True)\n"
              f"r.run({sim(5)!r}, Path({str(tmp_path / 'p')!r}), IsolationOptions(timeout_s=600))\n")
    hanging = tmp_path / "hanging"
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, GEMMLAB_TEST_HANG_MARKER=str(hanging)))
    worker = int(parent.stdout.readline())
    wait_for(hanging)  # the worker is inside its (hanging) point
    parent.send_signal(signal.SIGKILL)
    parent.wait()

    def running(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state not in ("Z", "X")  # an exited orphan nobody reaps yet is a zombie

    deadline = time.monotonic() + 10
    while running(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = running(worker)
    if alive:
        os.killpg(worker, signal.SIGKILL)
    assert not alive, "the worker ran on after its parent was killed"


def test_sigterm_stops_a_sweep_like_ctrl_c_with_the_resume_line(tmp_path):
    """SIGTERM (a batch system's time limit) during a hanging point: exit 143, one line naming the
    sweep folder and resume=true, the worker killed, no traceback (new-user finding 6)."""
    import signal
    import subprocess
    import sys
    sweep = tmp_path / "sw"
    from clirun import command_env
    env = command_env()  # the checkout first on PYTHONPATH, the environment's own entries kept
    hanging = tmp_path / "hanging"
    env["GEMMLAB_TEST_HANG_MARKER"] = str(hanging)
    proc = subprocess.Popen([sys.executable, "-m", "gemmlab", "-m", "kernel=sim_fault", "kernel.MODE=1,5",
                             "mode=compile", "shape=[8,8,8]", "isolation.timeout_s=600", f"plugin_dirs=[{FAULTY}]",
                             f"hydra.sweep.dir={sweep}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(hanging)  # point 1 (the hanging one) is running
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    last = err.strip().splitlines()[-1]
    assert last.startswith("gemmlab: terminated (SIGTERM); ") and f"hydra.sweep.dir={sweep} resume=true" in last, err
    assert "Traceback" not in out + err
    assert json.loads((sweep / "0" / "result.json").read_text())["status"] == "compiled"


def test_ctrl_c_between_points_names_the_sweep_folder(cli, tmp_path, monkeypatch):
    """Ctrl-C after one point ended and before the next began (no job's config is set then) still
    names the sweep's folder in the resume line (new-user trial: 1 of 4 tries printed 'DIR')."""
    from hydra.core import utils as core_utils
    real, calls = core_utils.run_job, []

    def run_job(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt()
        return real(*args, **kwargs)
    monkeypatch.setattr(core_utils, "run_job", run_job)  # what gemmlab's launcher calls (hydra_plugins/gemmlab_launcher)
    sweep = tmp_path / "sw"
    proc = cli(["-m", "kernel=naive,tiled", "mode=compile", "shape=[8,8,8]", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 130, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (f"gemmlab: interrupted; finished points keep their result.json; to finish the sweep, re-run the "
                    f"same command with hydra.sweep.dir={sweep} resume=true; the summary of the 1 points so far: "
                    f"{sweep / 'summary.md'}"), proc.stderr  # the same line as an interrupt inside a point
    assert json.loads((sweep / "0" / "result.json").read_text())["status"] == "compiled"
    assert not (sweep / "1").exists()


def test_the_resume_line_quotes_a_folder_with_a_space():
    """The resume line can be pasted: a folder with a space is quoted for the shell and for
    Hydra's override grammar (second new-user trial)."""
    from gemmlab.cli.app import sweep_resume_advice
    assert sweep_resume_advice("/tmp/a/b").endswith(" hydra.sweep.dir=/tmp/a/b resume=true")
    assert sweep_resume_advice("/tmp/with space/x").endswith(" \"hydra.sweep.dir='/tmp/with space/x'\" resume=true")


def test_ctrl_c_while_the_worker_is_closed_at_exit_is_quiet(runner, tmp_path, monkeypatch):
    """A Ctrl-C that lands in the atexit close (just after the last point): the worker is still
    killed, and no KeyboardInterrupt escapes ("Exception ignored in atexit callback" before)."""
    assert runner.run(sim(1), tmp_path / "a", IsolationOptions(timeout_s=60))["status"] == "compiled"
    worker = runner.worker
    real_wait = worker.proc.wait
    calls = []

    def wait(timeout=None):
        calls.append(timeout)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real_wait(timeout=timeout)

    monkeypatch.setattr(worker.proc, "wait", wait)
    try:
        runner.close()
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt escaped PointRunner.close")
    assert runner.worker is None and worker.proc.poll() is not None and len(calls) >= 2
