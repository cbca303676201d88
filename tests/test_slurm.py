"""Issue 11.9: the SLURM launcher against a real single-node Slurm (munged + slurmctld + slurmd
started by the test as root, tests/slurmcluster.py), not only submitit's local executor: a
compile-mode sweep of 4 points through hydra/launcher=gemmlab_slurm (sbatch), every record valid
but the one invalid point, which the sweep reports. Skipped, with the reason, where Slurm cannot
start (not root, slurm-wlm/munge not installed: apt-get install -y slurm-wlm munge)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys

import pytest

from slurmcluster import SlurmUnavailable, single_node_slurm

from clirun import REPO_ROOT  # noqa: E402  (the checkout, defined once)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    try:
        with single_node_slurm(tmp_path_factory.mktemp("slurm")) as env:
            yield env
    except SlurmUnavailable as exc:
        pytest.skip(f"no single-node Slurm: {exc}")


def test_compile_sweep_through_real_slurm(slurm, tmp_path):
    sweep = tmp_path / "sw"
    env = dict(slurm, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "gemmlab", "-m", "hydra/launcher=gemmlab_slurm", "kernel=tiled", "kernel.TM=2,4,8,3",
         "mode=compile", "hydra.launcher.gpus_per_node=null", "hydra.launcher.cpus_per_task=1",
         "hydra.launcher.mem_gb=null", "hydra.launcher.timeout_min=10", f"hydra.sweep.dir={sweep}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    assert proc.returncode == 1, out  # one invalid point fails the sweep
    recs = {i: json.loads((sweep / str(i) / "result.json").read_text()) for i in range(4)}
    assert [recs[i]["status"] for i in range(4)] == ["compiled", "compiled", "compiled", "invalid"], out
    assert all(recs[i]["valid"] for i in range(3)) and recs[3]["valid"] is False
    assert recs[3]["error"].startswith("kernel.TM:") or "TM" in recs[3]["error"]
    assert [recs[i]["kernel"]["params"]["TM"] for i in range(3)] == [2, 4, 8]
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [r["status"] for r in rows] == ["compiled", "compiled", "compiled", "invalid"]
    assert "4 points: 0 verified and timed, 3 compiled only, 1 failed" in proc.stdout
    scripts = list((sweep / ".submitit").rglob("*_submission.sh"))
    assert scripts and "#SBATCH" in scripts[0].read_text()  # really submitted with sbatch
    jobs = subprocess.run(["scontrol", "show", "job", "--oneliner"], env=slurm, capture_output=True, text=True).stdout
    assert len(set(re.findall(r"ArrayTaskId=(\d+)", jobs))) == 4, jobs  # slurmctld ran the 4 array tasks
