"""What ``.ci/`` holds (issue 45, items 2 and 4): ``run`` (CI), the GPU checks and what they call,
what tests read, the recurring evidence runs and two CPU table generators and a source generator;
one-off session scripts are not kept (git history has them: docs/results/README.md). Every
evidence run's points go through gemmlab's one point runner
(:meth:`gemmlab.run.session.Session.run_point`), never :func:`gemmlab.run.pipeline.run_point`
directly, and one that runs them in its own process (``isolation.process: false``) says why."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci"

#: every entry of .ci/ and why it is kept
KEPT = {
    "run": "CI's entry (tests/test_readme.py pins its last line)",
    "gpu-check": "the GPU check",
    "gpu-call": "the GPU check of a device call",
    "gpu-plan": "a device call as ordered named steps within the call's time (the open issues' GPU runs)",
    "ncu_points.py": "called by gpu-call (NCU=) and imported by evidence.py",
    "wgmma_evidence.py": "called by gpu-call (SET=)",
    "tc_evidence.py": "imported by wgmma_evidence.py (its harness)",
    "heldout_bench.py": "recurring: kernel=auto on the held-out split (tests/test_shapeset.py, test_auto_rank.py)",
    "ladder_v1": "read by tests/test_ladder.py (the first pass's sgemm_pipelined)",
    "evidence.py": "recurring: the protocol, ncu and broken-variant pages (docs/results/README.md)",
    "relayout_evidence.py": "recurring: the relayout figure (docs/results/README.md)",
    "trust_probe.py": "recurring: issue 40's trust figures (docs/trust.md)",
    "fp8_bench.py": "recurring: wgmma_fp8 vs cuBLASLt (issue 42)",
    "fp8_probe.py": "recurring: the fp8 bound against cuBLASLt's FP8 paths (docs/trust.md)",
    "fp8_probe": "fp8_probe.py's plugin folder",
    "triton_agreement.py": "recurring: gemmlab's timing vs Triton's timers (issue 46)",
    "decode_sweep.py": "recurring: the decode kernels' space on train-split shapes, the data of their sized() (issue 41)",
    "tune_exhaustive.py": "recurring: first-use tuning against an exhaustive search on held-out shapes (issue 41)",
    "bound_table.py": "CPU: docs/trust.md's verification-rule table",
    "fp8_bound_table.py": "CPU: docs/trust.md's fp8 bound table",
    "gen_wgmma_fp8.py": "CPU: writes kernels/include/gemmlab/wgmma_fp8.cuh",
}
#: the scripts that run gemmlab points in Python (the others call the gemmlab command or none)
RUNS_POINTS = ("evidence.py", "tc_evidence.py", "heldout_bench.py", "relayout_evidence.py", "trust_probe.py",
               "fp8_bench.py", "fp8_probe.py", "triton_agreement.py", "decode_sweep.py", "tune_exhaustive.py")


def _entries() -> set[str]:
    """The top-level entries of .ci/ that git tracks (a checkout without git: every entry but caches)."""
    import subprocess
    try:
        proc = subprocess.run(["git", "ls-files", "--", ".ci"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except OSError:
        proc = None
    if proc is not None and proc.returncode == 0 and proc.stdout.strip():
        return {line.split("/")[1] for line in proc.stdout.splitlines() if line.startswith(".ci/")}
    return {p.name for p in CI.iterdir() if p.name != "__pycache__"}


def test_ci_holds_only_what_is_classified():
    entries = _entries()
    assert entries - set(KEPT) == set(), (".ci/ entries not classified in tests/test_ci_scripts.py KEPT (one-off "
                                          "session scripts belong in git history, not in .ci/)")
    assert set(KEPT) - entries == set(), "KEPT names entries .ci/ no longer holds"


def _calls_pipeline_run_point(path: Path) -> list[str]:
    """Where ``path`` imports or calls :func:`gemmlab.run.pipeline.run_point` (``line: text``)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "gemmlab.run.pipeline" and any(
                a.name == "run_point" for a in node.names):
            found.append(f"{node.lineno}: from gemmlab.run.pipeline import run_point")
        if (isinstance(node, ast.Attribute) and node.attr == "run_point" and isinstance(node.value, ast.Name)
                and node.value.id == "pipeline"):
            found.append(f"{node.lineno}: pipeline.run_point")
    return found


@pytest.mark.parametrize("name", RUNS_POINTS)
def test_evidence_runs_use_the_one_point_runner(name):
    path = CI / name
    text = path.read_text()
    assert _calls_pipeline_run_point(path) == [], f".ci/{name} calls pipeline.run_point directly"
    assert "Session" in text, f".ci/{name} runs no point through gemmlab.run.session.Session"


def test_the_checker_finds_a_direct_call(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from gemmlab.run.pipeline import run_point\nfrom gemmlab.run import pipeline\n"
                   "pipeline.run_point({}, 'x')\n")
    assert _calls_pipeline_run_point(bad) == ["1: from gemmlab.run.pipeline import run_point", "3: pipeline.run_point"]


def test_triton_agreement_module_uses_the_one_point_runner():
    path = ROOT / "gemmlab" / "run" / "triton_agreement.py"
    assert _calls_pipeline_run_point(path) == []
    from gemmlab.run.triton_agreement import ISOLATION, point_config
    cfg = point_config("triton_matmul", "bf16", "col", (64, 64, 64), {"mode": "graph"})
    assert cfg["isolation"] == {"process": False} == dict(ISOLATION)


@pytest.mark.parametrize("name", ("tc_evidence.py", "relayout_evidence.py"))
def test_in_process_points_say_why(name):
    """A script that runs its points in its own process holds the GPU there: its ISOLATION's comment
    says so (a point in a worker would be refused shared_gpu)."""
    text = (CI / name).read_text()
    match = re.search(r"((?:#.*\n)+)ISOLATION = \{\"process\": False\}", text)
    assert match, f".ci/{name}: no ISOLATION = {{'process': False}} with a comment above it"
    assert "shared" in match.group(1) and "GPU" in match.group(1)


@pytest.mark.parametrize("value", ["", "decode_fp8", "decode_bf16,nope"])
def test_decode_sweep_refuses_a_bad_kernels_list_in_one_line(tmp_path, capsys, value):
    spec = importlib.util.spec_from_file_location("ci_decode_sweep", CI / "decode_sweep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as exc:
        module.main([str(tmp_path / "o"), "--kernels", value])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "\n" not in err and f"--kernels: {value!r}: allowed decode_bf16, decode_tf32" in err
    assert not (tmp_path / "o").exists()
