"""A throw-away single-node Slurm cluster for tests/test_slurm.py: munged, slurmctld and slurmd
(Debian's ``munge`` and ``slurm-wlm``) started as root with a generated ``slurm.conf`` in a
temporary folder; the Slurm client commands find it through ``SLURM_CONF``. Not a test module.

Start: ``with single_node_slurm(folder) as env: ...`` (env: the variables sbatch/sacct/submitit
need); raises :class:`SlurmUnavailable` with the reason where it cannot start (not root, the
packages are missing, a daemon does not come up).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
INSTALL_HINT = "apt-get install -y slurm-wlm munge (Debian/Ubuntu), as root"


class SlurmUnavailable(RuntimeError):
    """Why a single-node Slurm cannot be started here."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _find(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)


def _memory_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 1024


SLURM_CONF = """\
ClusterName=gemmlabtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""


@contextlib.contextmanager
def single_node_slurm(folder: Path, timeout_s: float = 60.0):
    """Start munged + slurmctld + slurmd in ``folder``; yield the environment for the clients;
    stop the daemons (by the pids they wrote) on exit.

    Raises:
        SlurmUnavailable: with the reason.
    """
    if os.geteuid() != 0:
        raise SlurmUnavailable("needs root to start munged, slurmctld and slurmd")
    exes = {name: _find(name) for name in (*DAEMONS, "sbatch", "sinfo", "sacct", "scontrol")}
    missing = [n for n, p in exes.items() if p is None]
    exes["scancel"] = _find("scancel")  # optional: without it, the jobs end with the processes killed below
    if missing:
        raise SlurmUnavailable(f"{', '.join(missing)} not installed ({INSTALL_HINT})")
    folder = Path(folder)
    for sub in ("state", "spool", "munge"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(folder / "munge", 0o700)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    munge_socket = folder / "munge" / "munge.socket"
    conf = folder / "slurm.conf"
    conf.write_text(SLURM_CONF.format(ctld_port=_free_port(), slurmd_port=_free_port(), munge_socket=munge_socket,
                                      folder=folder, cpus=os.cpu_count() or 1, memory_mb=_memory_mb()))
    env = dict(os.environ, SLURM_CONF=str(conf))
    pids: list[Path] = []
    started: list[subprocess.Popen] = []

    def run(cmd: list[str]) -> None:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started.append(proc)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable(f"{cmd[0]} did not start within {timeout_s:.0f} s") from None
        if proc.returncode != 0:
            raise SlurmUnavailable(f"{Path(cmd[0]).name} failed to start: {' '.join(out.split())[:300]}")

    try:
        pids.append(folder / "munge" / "munged.pid")
        run([exes["munged"], "--force", f"--socket={munge_socket}", f"--key-file={key}",
             f"--pid-file={pids[-1]}", f"--log-file={folder / 'munge' / 'munged.log'}",
             f"--seed-file={folder / 'munge' / 'munged.seed'}"])
        pids.append(folder / "slurmctld.pid")
        run([exes["slurmctld"], "-f", str(conf)])
        pids.append(folder / "slurmd.pid")
        run([exes["slurmd"], "-f", str(conf), "-N", "localhost"])
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            probe = subprocess.run([exes["sinfo"], "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True)
            state = (probe.stdout + probe.stderr).strip()
            if probe.returncode == 0 and state.split() and state.split()[0].rstrip("*~#") in ("idle", "mixed", "allocated"):
                break
            time.sleep(0.5)
        else:
            log = (folder / "slurmd.log").read_text(errors="replace")[-300:] if (folder / "slurmd.log").exists() else ""
            raise SlurmUnavailable(f"the node did not become idle within {timeout_s:.0f} s (sinfo: {state!r}; "
                                   f"slurmd log: {' '.join(log.split())})")
        yield env
    finally:  # cancel the cluster's jobs, stop the daemons we started (by the pids they wrote: all at
        # once, then by force), then whatever of the cluster is left (slurmd does not end running
        # job steps when it stops: a step left in srun outlived the test session before)
        if exes.get("scancel") and started:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run([exes["scancel"], "--quiet", f"--user={os.geteuid()}"], env=env, timeout=10,
                               capture_output=True)
        running = []
        for pid_file in reversed(pids):
            try:
                pid = int(pid_file.read_text().split()[0])
                os.kill(pid, signal.SIGTERM)
                running.append(pid)
            except (OSError, ValueError, IndexError):
                pass
        deadline = time.monotonic() + 5
        while running and time.monotonic() < deadline:
            running = [pid for pid in running if _alive(pid)]
            time.sleep(0.1)
        for pid in set(running) | _processes_of(conf):  # daemons still up, and everything they started
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _processes_of(conf: Path) -> set[int]:
    """Process ids whose environment names this cluster's ``SLURM_CONF`` (its daemons, job steps,
    batch scripts and their sruns: everything the cluster started), other than this process."""
    marker = f"SLURM_CONF={conf}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
