"""The session (gemmlab/run/session.py, issue 45 item 2): the one point runner owns what was module
state (the registries, the compile memo, the GPUs and their locks, the worker process), the lower
layers reach the active session's through their accessors, and module-level state is only the
default session's. And every record a point returns is the typed :class:`gemmlab.stages.record.Result`,
its status (success or failure) set through the Result's own methods (issue 45 item 3).

Everything in ``mode=compile`` (``naive`` at 8x8x8, a compile the suite records) in this process.
"""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest

from gemmlab.contract import registry as registry_mod
from gemmlab.gpu import compile as compile_mod
from gemmlab.gpu import device as device_mod
from gemmlab.run import isolation, session as session_mod
from gemmlab.run.pipeline import run_point
from gemmlab.run.session import Session
from gemmlab.stages.record import Result

BASE = {"kernel": {"name": "naive"}, "shape": [8, 8, 8], "mode": "compile", "isolation": {"process": False}}
RUN = Path(__file__).resolve().parents[1] / "gemmlab" / "run"


def own_session() -> Session:
    """A session with resources of its own (not the process's)."""
    return Session(compiles=compile_mod.CompileMemo(), devices=device_mod.Devices(), worker=isolation.PointRunner())


def test_the_default_session_holds_the_module_defaults():
    default = session_mod.default()
    assert default is session_mod.default()
    assert default.registries is registry_mod.default_registries()
    assert default.compiles is compile_mod.default_memo()
    assert default.devices is device_mod.default_devices()
    assert default.worker is isolation.default_runner()
    fresh = Session()  # a new command's session: its own registries, the process's CUDA and worker
    assert fresh.registries is not default.registries
    assert (fresh.compiles, fresh.devices, fresh.worker) == (default.compiles, default.devices, default.worker)


def test_an_active_session_is_what_the_lower_layers_use_and_the_default_comes_back():
    s = own_session()
    with s.active():
        assert registry_mod.registries() is s.registries
        assert compile_mod.memo() is s.compiles
        assert device_mod.devices() is s.devices
        assert isolation.runner() is s.worker
        with pytest.raises(RuntimeError):  # an exception inside: the defaults still come back
            with own_session().active():
                raise RuntimeError("x")
        assert compile_mod.memo() is s.compiles
    assert compile_mod.memo() is compile_mod.default_memo()
    assert device_mod.devices() is device_mod.default_devices()
    assert registry_mod.registries() is registry_mod.default_registries()
    assert isolation.runner() is isolation.default_runner()
    # NVRTC's per-process memo of ptxas reports is shared by every session's compile memo
    assert s.compiles.ptxas_logs is compile_mod.default_memo().ptxas_logs


def test_a_point_run_by_a_session_compiles_and_loads_into_that_session_only(tmp_path):
    s = own_session()
    before = dict(compile_mod.default_memo().modules)
    rec = s.run_point(BASE, tmp_path / "p")
    assert isinstance(rec, Result) and rec.status == "compiled" and rec.valid, rec.error
    assert s.statuses == [0] and s.point_dirs == [tmp_path / "p"]
    assert len(s.compiles.modules) == 1 and set(s.registries.loaded) == {()}
    assert compile_mod.default_memo().modules == before  # nothing of this session's leaked into the default's
    again = s.run_point(BASE, tmp_path / "q")  # the session's memo: compiled once
    assert again["compile"]["cache_hit_in_process"] is True, again["compile"]
    s.forget()
    assert s.compiles.modules == {} and s.registries.loaded == {}


def test_a_session_sent_to_another_process_takes_that_process_s_resources():
    s = own_session()
    s.plugin_dirs.append("/nowhere")
    s.statuses.append(1)
    back = pickle.loads(pickle.dumps(s))
    assert back.plugin_dirs == ["/nowhere"] and back.statuses == [1]
    assert back.compiles is compile_mod.default_memo() and back.devices is device_mod.default_devices()
    assert back.worker is isolation.default_runner() and back.registries.loaded == {}


class SessionGpu(device_mod.Devices):
    """A session's devices whose GPU 0 is the host-memory fake (tests/fakegpu.py); notes each open."""

    def __init__(self, gpu):
        super().__init__()
        self.gpu, self.asked = gpu, []

    def open_gpu(self, index: int = 0):
        self.asked.append(index)
        self.opened[index] = self.gpu
        return self.gpu


def test_first_use_tuning_goes_through_the_session_that_runs_its_point(tmp_path):
    """kernel=auto with first-use tuning, run by a session: the model's candidates come from the
    session's registry, compile into the session's memo and are timed on the GPU of the session's
    devices (the tuning's device look-up and the point's open both ask them), and the point is a
    Result of the first-use choice."""
    from fakegpu import HostGpu
    s = Session(compiles=compile_mod.CompileMemo(), devices=SessionGpu(HostGpu()), worker=isolation.PointRunner())
    before = dict(compile_mod.default_memo().modules)
    cfg = {"kernel": {"name": "auto", "rank": "model", "tune": "first_use", "tune_k": 3,
                      "tune_cache": str(tmp_path / "cache")}, "shape": [63, 65, 33], "mode": "run",
           "timing": {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events"}, "isolation": {"process": False}}
    rec = s.run_point(cfg, tmp_path / "a")
    assert isinstance(rec, Result) and rec.status == "ok", rec.error
    tried = rec["dispatch"]["tuning"]["tried"]
    assert rec["dispatch"]["source"] == "first_use" and [t["status"] for t in tried] == ["ok"] * 3
    assert s.devices.asked and set(s.devices.asked) == {0}
    assert len(s.compiles.modules) >= 3 and set(s.registries.loaded) == {()}
    assert compile_mod.default_memo().modules == before


# --- the typed result of every status ---------------------------------------------------------------

def test_success_is_set_through_the_result_and_only_for_a_valid_status():
    rec = Result(schema="gemmlab.result/1", status="running", valid=False, error="x")
    assert rec.succeed("ok") is rec and (rec.status, rec.valid, rec.error) == ("ok", True, None)
    with pytest.raises(ValueError, match="status: a success is one of ok, compiled, checked, not 'wrong_result'"):
        rec.succeed("wrong_result")
    rec.fail("implausible", "too fast")
    assert rec.finish().valid is False


def test_every_record_a_point_returns_is_a_result(tmp_path):
    """Run (``compiled``), refused (a folder holding a result), resumed (its own folder's valid
    record) and adopted from a sibling folder of a resumed sweep: a :class:`Result` each."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "multirun.yaml").write_text("{}\n")  # a sweep's folder (gemmlab.run.store.sweep_root)
    ran = run_point(BASE, tmp_path / "s" / "a")
    refused = run_point(BASE, tmp_path / "s" / "a")
    resumed = run_point({**BASE, "resume": True}, tmp_path / "s" / "a")
    (tmp_path / "s" / "b").mkdir()  # Hydra makes a job's folder before its point runs
    adopted = run_point({**BASE, "resume": True}, tmp_path / "s" / "b")
    kinds = [(type(r).__name__, r.status) for r in (ran, refused, resumed, adopted)]
    assert kinds == [("Result", "compiled"), ("Result", "invalid"), ("Result", "compiled"), ("Result", "compiled")]
    assert resumed["resumed"] is True and "resumed_from" not in resumed
    assert adopted["resumed"] is True and adopted["resumed_from"] == "a/result.json", adopted.get("resumed_from")
    assert json.loads((tmp_path / "s" / "b" / "result.json").read_text())["resumed_from"] == "a/result.json"


def test_the_runner_sets_no_status_by_hand():
    """No ``record["status"] = ...`` (nor ``nets_fired``) in gemmlab/run/: the pipeline sets every
    status through :class:`Result` (succeed, fail, fire, looked, resumed, finish)."""
    bad = []
    for path in sorted(RUN.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for t in targets:
                if (isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)
                        and t.slice.value in ("status", "valid", "nets_fired")
                        and ast.unparse(t.value) in ("record", "self.record", "rec", "old")):
                    bad.append(f"{path.name}:{node.lineno} {ast.unparse(t)}")
    assert bad == []
