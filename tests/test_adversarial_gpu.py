"""The exploit corpus (tests/adversarial, issue 40 item 8) on the GPU: every exploit point of
``corpus.CASES`` runs its real kernel (or library plugin) through the whole pipeline and must be
refused with the corpus's status, its net named in ``nets_fired``, no timing figure left outside
``withheld`` and a one-line error (``corpus.problems``). A sticky fault costs only its own point.

Each point runs in an isolated worker process (``gemmlab.run.isolation.run_point``, as the command
line does), renewed before every case (``isolation.end_command``): no exploit finds another's loaded
module or ``__device__`` state, and a sticky CUDA fault ends only that worker. The same cases run
from ``python tests/adversarial/run_corpus.py OUTDIR`` (one table, one archive of the records).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gemmlab.run import isolation

sys.path.insert(0, str(Path(__file__).resolve().parent / "adversarial"))
import corpus  # noqa: E402

import os  # noqa: E402

#: the corpus must have the GPU to itself (a timing-aware exploit computes in the gaps other processes
#: open; as xdist workers these points were refused shared_gpu or, with allow, clock_aware passed):
#: run it with -n 0, as .ci/gpu-call does
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(os.environ.get("PYTEST_XDIST_WORKER")),
                                                  reason="the exploit corpus runs alone on the GPU: pytest -n 0")]

#: cases refused with the right status and net whose record still breaks a rule of corpus.problems: none
#: (the figures of every refusal after the samples are withheld, and a fault at a stop event is a CudaError)
KNOWN_GAPS: dict[str, str] = {}


def marked(case: corpus.Case):
    gap = KNOWN_GAPS.get(case.name)
    return pytest.param(case, id=case.name, marks=pytest.mark.xfail(strict=False, reason=gap) if gap else ())


def run(case: corpus.Case, out_dir: Path) -> dict:
    isolation.end_command()  # a renewed worker: fresh modules, no exploit state left behind
    return isolation.run_point(corpus.config(case), out_dir)


@pytest.mark.parametrize("case", [marked(c) for c in corpus.CASES])
def test_exploit_is_refused(case, tmp_path):
    rec = run(case, tmp_path / case.name)
    wrong = corpus.problems(case, rec)
    assert not wrong, f"{case.kernel} ({case.idea}): {wrong}"


def test_sticky_fault_costs_only_its_point(tmp_path):
    """The 7th launch's illegal address poisons its worker's CUDA context; the next point (the same
    process, the same runner) gets a fresh worker and is measured."""
    rec = isolation.run_point(corpus.config(corpus.BY_NAME["sticky7"]), tmp_path / "sticky")
    assert rec["status"] == "cuda_error" and "ILLEGAL_ADDRESS" in rec["error"], rec.get("error")
    healthy = {"kernel": {"name": "naive"}, "shape": [256, 256, 256], "mode": "run",
               "timing": dict(corpus.EVENTS), "isolation": dict(corpus.ISOLATION)}
    after = isolation.run_point(healthy, tmp_path / "after")
    assert after["status"] == "ok", after.get("error")


def test_the_exploits_own_contrasts_pass(tmp_path):
    """What the exploits are built from is sound where it does not cheat: a kernel of the lazy family
    kept right on every launch (COMPUTED larger than the run's launches) and the wgmma kernel built for
    sm_90a (its HGMMA present) are both verified, timed and ok: the refusals above are the cheats'."""
    lazy = corpus.Case("lazy_never", "x_lazy_warmup", "right on every launch", "ok", "", params={"W": 4000})
    rec = run(lazy, tmp_path / "lazy")
    assert rec["status"] == "ok", rec.get("error")
    wgmma = corpus.Case("wgmma_sm90a", "x_wgmma_out", "built for sm_90a", "ok", "", params={"SM90A": 2},
                        overrides={"precision": "bf16"})
    rec = run(wgmma, tmp_path / "wgmma")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["sass_check"]["verdict"] != "missing"
