"""kernel=auto's ranking path (issue 41, item 2): the fitted model (gemmlab/dispatch/model.py), the
opt-in settings, first-use tuning through the pipeline on the host-memory fake GPU (tests/fakegpu.py)
and the per-device cache (gemmlab/dispatch/tuning.py)."""

from __future__ import annotations

import json
import multiprocessing

import numpy as np
import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.contract.hookspecs import DeviceFacts, Problem, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.dispatch import candidates as cands, model as mdl, tuning
from gemmlab.dispatch.auto import resolve_config
from gemmlab.errors import ConfigError
from gemmlab.run.pipeline import run_point

SHAPE = [63, 65, 33]
FAST = {"warmup": 1, "repeat": 3, "batch": 2, "mode": "events"}
REGISTRY = load_registry([])


def auto_cfg(cache, **kernel):
    return {"kernel": {"name": "auto", "rank": "model", "tune": "first_use", "tune_k": 3, "tune_cache": str(cache),
                       **kernel}, "shape": SHAPE, "mode": "run", "timing": dict(FAST)}


def top(k=3, name="fake H200"):
    """The model's first k candidates for SHAPE fp32 on the fake GPU, and their launch names."""
    problem = Problem(Shape(*SHAPE))
    facts = HostGpu().facts
    model, _ = mdl.model_for(name)
    ranked = mdl.rank(cands.enumerate(REGISTRY, problem, facts), REGISTRY, problem, facts, model)[:k]
    return [(r.candidate, REGISTRY.kernels[r.candidate.kernel].entry(dict(r.candidate.params))) for r in ranked]


@pytest.fixture
def fake(monkeypatch):
    def use(gpu):
        monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
        return gpu
    return use


def test_top_candidates_have_distinct_launch_names():
    names = [entry for _, entry in top(6)]
    assert len(set(names)) == 6 and all(not a.startswith(b) for a in names for b in names if a != b)


# --- first-use tuning -----------------------------------------------------------------------------

def zeros(gpu, args):
    """A kernel behaviour: fast and wrong, C written with zeros."""
    gpu.floats(int(args[2]), int(args[3]) * int(args[4]))[:] = 0.0


@pytest.fixture
def spy(monkeypatch):
    """How often the point drew inputs, and each verification's shared float64 products (whether
    the reference was already there when a backend's output was checked)."""
    from gemmlab.run import pipeline
    seen = {"draws": 0, "refs": []}
    draw, check = pipeline.inputs_stage.make_problem_inputs, pipeline.verify_stage.check

    def counted_draw(*a, **k):
        seen["draws"] += 1
        return draw(*a, **k)

    def shared_check(c, a, b, options, distribution, precision, seed, products=None, **k):
        seen["refs"].append((id(products), products is not None and "ref" in products))
        return check(c, a, b, options, distribution, precision, seed, products=products, **k)

    monkeypatch.setattr(pipeline.inputs_stage, "make_problem_inputs", counted_draw)
    monkeypatch.setattr(pipeline.verify_stage, "check", shared_check)
    return seen


def test_first_use_times_its_candidates_in_one_run_and_the_second_run_hits_the_cache(tmp_path, fake, spy):
    """k = 4 candidates as backends of ONE point: the inputs drawn once (and again for the
    after-timing check and the fresh-input net), one float64 reference for every candidate's verification, the samples
    taken alternately; the wrong one (fastest of all) is dropped and never chosen, the slow one
    loses, the fastest verified one is the point's kernel, measured by this very run."""
    (c0, e0), (c1, e1), (c2, e2), (c3, e3) = top(4)
    gpu = fake(HostGpu(durations={e0: 3.0, e1: 1.0, e2: 0.1, e3: 2.0}, behaviour={e2: zeros}))
    rec = run_point(auto_cfg(tmp_path / "cache", tune_k=4), tmp_path / "a")
    assert rec["status"] == "ok", rec["error"]
    d = rec["dispatch"]
    assert d["path"] == d["source"] == "first_use" and d["chosen"] == c1.kernel and d["params"] == dict(c1.params)
    assert rec["kernel"]["name"] == c1.kernel and rec["kernel"]["params"] == {**REGISTRY.kernels[c1.kernel].defaults,
                                                                           **dict(c1.params)}
    assert rec["timing"]["median_ms"] == 1.0 == d["measured_ms"] and rec["verification"]["passed"]
    tried = d["tuning"]["tried"]
    assert [t["name"] for t in tried] == [c0.name, c1.name, c2.name, c3.name]
    assert [t["median_ms"] for t in tried] == [3.0, 1.0, None, 2.0]
    assert [t["status"] for t in tried] == ["ok", "ok", "wrong_result", "ok"]
    assert [t["verified"] for t in tried] == [True, True, False, True]
    assert "wrong result" in tried[2]["error"] and tried[2]["nets_fired"] == ["verification"]
    assert all(t["predicted_ms"] > 0 and t["probe_ms"] > 0 for t in tried if t["status"] == "ok")
    assert d["tuning"]["cache"]["hit"] is False and d["tuning"]["cache"]["stored"] is True and "state" not in d["tuning"]
    assert d["tuning"]["model_error"]["model_first_rank_of_best"] == 2 and d["predicted_ms"] > 0
    assert d["model"]["gpu"] == "NVIDIA H200" and len(d["top"]) >= 4
    assert not (tmp_path / "a" / "tuning").exists() and rec["nets_fired"] == []
    # one point: inputs drawn once (+ the after-timing check's fresh ones and the fresh-input net's one
    # round of new ones: no candidate flagged, no second round), one shared reference
    assert spy["draws"] == 3 and rec["fresh_input_timing_inputs"]["how"] == "drawn"
    assert len(rec["fresh_input_timing_inputs"]["seeds"]) == 1
    correct, after = spy["refs"][:4], spy["refs"][4:]  # candidates 0..3 (no baseline here), then the 3 left
    assert len({i for i, _ in correct}) == 1 and [had for _, had in correct] == [False, True, True, True]
    assert len({i for i, _ in after}) == 1 and [had for _, had in after] == [False, True, True]
    # the samples alternate: one batch (2 launches) of each survivor in turn, 3 times (FAST)
    alternating = [e0, e0, e1, e1, e3, e3] * 3
    assert any(gpu.launches[i:i + 18] == alternating for i in range(len(gpu.launches)))
    cache_file = d["tuning"]["cache"]["file"]
    data = json.loads(open(cache_file).read())
    assert data["schema"] == tuning.CACHE_SCHEMA and data["key"]["gpu"] == "fake H200"
    assert set(data["key"]) == {"gpu", "sm_count", "driver_version", "gemmlab_version", "kernel_sources_sha256"}
    entry = data["entries"]["fp32 row/row 63x65x33"]
    assert entry["name"] == c1.name and [t["status"] for t in entry["tried"]] == ["ok", "ok", "wrong_result", "ok"]
    # the second run: the cache answers, no candidate is timed again
    gpu = fake(HostGpu(durations={e0: 3.0, e1: 1.0, e2: 0.1, e3: 2.0}))
    rec2 = run_point(auto_cfg(tmp_path / "cache", tune_k=4), tmp_path / "b")
    assert rec2["status"] == "ok", rec2["error"]
    d2 = rec2["dispatch"]
    assert d2["path"] == "cache" and d2["tuning"]["cache"]["hit"] is True and d2["chosen"] == c1.kernel
    assert "cache hit" in d2["reason"] and "tried" not in d2["tuning"]
    assert not any(n.startswith(e0) or n.startswith(e2) or n.startswith(e3) for n in gpu.launches)


def test_the_baseline_is_timed_beside_the_candidates(tmp_path, fake):
    """With a baseline the point's backends are the candidates and the baseline, sampled in turn;
    the winner's ratio to the baseline is this run's."""
    (c0, e0), (c1, e1), (c2, e2) = top()
    tiled = REGISTRY.kernels["tiled"].entry(dict(REGISTRY.kernels["tiled"].defaults))
    gpu = fake(HostGpu(durations={e0: 3.0, e1: 1.0, e2: 2.0, tiled: 1.5}))
    rec = run_point({**auto_cfg(tmp_path / "cache"), "baseline": "tiled"}, tmp_path / "a")
    assert rec["status"] == "ok", rec["error"]
    assert rec["dispatch"]["chosen"] == c1.kernel and rec["baseline"]["name"] == "tiled"
    assert rec["baseline"]["timing"]["median_ms"] == 1.5 and rec["ratio_to_baseline"]["median_time"] == 1.0 / 1.5
    assert any(gpu.launches[i:i + 8] == [e0, e0, e1, e1, e2, e2, tiled, tiled] for i in range(len(gpu.launches)))
    assert rec["precision"].startswith("fp32") and rec["kernel"]["plugin"]


def test_a_candidate_wrong_after_timing_never_wins(tmp_path, fake):
    """Right on the point's inputs, wrong on the fresh ones of the after-timing check: the fastest
    candidate is dropped (wrong_after_timing) and the next fastest wins; the point is ok."""
    from fakegpu import right_on_first_inputs_only
    (c0, e0), (c1, e1), (c2, e2) = top()
    fake(HostGpu(durations={e0: 0.1, e1: 2.0, e2: 1.0}, behaviour={e0: right_on_first_inputs_only()}))
    rec = run_point(auto_cfg(tmp_path / "cache"), tmp_path / "a")
    assert rec["status"] == "ok", rec["error"]
    d = rec["dispatch"]
    assert d["chosen"] == c2.kernel and d["params"] == dict(c2.params) and rec["timing"]["median_ms"] == 1.0
    first = d["tuning"]["tried"][0]
    assert first["status"] == "wrong_after_timing" and first["median_ms"] is None and first["verified"] is False
    assert "verification after timing" in first["error"] and "withheld" not in rec
    entry = json.loads(open(d["tuning"]["cache"]["file"]).read())["entries"]["fp32 row/row 63x65x33"]
    assert entry["name"] == c2.name


@pytest.mark.parametrize("draw", ["host", "device"])
def test_a_candidate_that_writes_the_shared_inputs_is_dropped_and_the_others_judged_on_clean_ones(tmp_path, fake,
                                                                                                   draw):
    """The candidates share A and B: one writing A's guard band (out_of_bounds) and one writing A
    itself after its product (inputs_modified) are dropped; the one verified after them, whose first
    verdict was on the written A, is judged again on inputs uploaded again (drawn on the device:
    written again from its snapshots there) and wins."""
    from fakegpu import host_gemm
    (c0, e0), (c1, e1), (c2, e2), (c3, e3) = top(4)

    def band(gpu, args):  # right, and one word before A
        host_gemm(gpu, args)
        gpu.floats(int(args[0]) - 4, 1)[:] = 1.0

    def writes_a(gpu, args):  # right, then A's first element changed
        host_gemm(gpu, args)
        gpu.floats(int(args[0]), 1)[:] += 1.0

    fake(HostGpu(durations={e0: 3.0, e1: 0.5, e2: 0.1, e3: 2.0}, behaviour={e1: band, e2: writes_a}))
    rec = run_point({**auto_cfg(tmp_path / "cache", tune_k=4), "inputs": {"draw": draw}}, tmp_path / "a")
    assert rec["status"] == "ok", rec["error"]
    assert rec["inputs"].get("drawn", "host") == draw and rec["verification"].get("where", "host") == draw
    tried = rec["dispatch"]["tuning"]["tried"]
    assert [t["status"] for t in tried] == ["ok", "out_of_bounds", "inputs_modified", "ok"], tried
    assert "guard bands around A" in tried[1]["error"] and "wrote its input A" in tried[2]["error"]
    assert rec["dispatch"]["chosen"] == c3.kernel and rec["dispatch"]["params"] == dict(c3.params)
    assert rec["inputs_unchanged"] is True and rec["guard_bands"] == "intact" and rec["nets_fired"] == []


def test_no_verified_candidate_fails_with_the_models_first(tmp_path, fake):
    names = [e for _, e in top()]
    fake(HostGpu(behaviour={e: zeros for e in names}))
    rec = run_point(auto_cfg(tmp_path / "cache"), tmp_path / "a")
    d = rec["dispatch"]
    assert d["path"] == "model" and "no candidate passed" in d["tuning"]["result"]
    assert rec["status"] == "wrong_result" and "wrong result" in rec["error"]  # the model's first, as measured
    assert [t["status"] for t in d["tuning"]["tried"]] == ["wrong_result"] * 3
    assert not list((tmp_path / "cache").glob("*.json"))  # nothing stored


def test_the_budget_stops_between_candidates(tmp_path, fake):
    """tune_budget_s=0: the model's first candidate alone is compiled and timed; the others are
    recorded as not reached."""
    fake(HostGpu())
    rec = run_point(auto_cfg(tmp_path / "cache", tune_budget_s=0), tmp_path / "a")
    assert rec["status"] == "ok", rec["error"]
    t = rec["dispatch"]["tuning"]
    assert [e["status"] for e in t["tried"]] == ["ok", "not_reached", "not_reached"] and t["stopped_by"].startswith("budget")
    assert rec["dispatch"]["chosen"] == t["tried"][0]["kernel"]


def test_the_budget_bounds_the_sampling(tmp_path, fake):
    """A candidate whose probe launch says its samples would pass the budget's time left is not
    timed (not_reached); the ones that fit are."""
    (c0, e0), (c1, e1), (c2, e2) = top()
    fake(HostGpu(durations={e0: 2.0, e1: 30_000.0, e2: 1.0}))  # candidate 1: 7 launches x 30 s > 60 s
    rec = run_point(auto_cfg(tmp_path / "cache"), tmp_path / "a")
    assert rec["status"] == "ok", rec["error"]
    d = rec["dispatch"]
    assert [e["status"] for e in d["tuning"]["tried"]] == ["ok", "not_reached", "ok"]
    assert d["tuning"]["tried"][1]["probe_ms"] == 30_000.0 and "budget: sampling" in d["tuning"]["stopped_by"]
    assert d["chosen"] == c2.kernel and d["tuning"]["elapsed_s"] < 60


def test_an_unknown_gpu_falls_back_to_the_default_fit(tmp_path, fake):
    gpu = HostGpu()
    gpu.facts = DeviceFacts(name="NVIDIA H999", arch="90", sm_count=144, l2_bytes=gpu.facts.l2_bytes)
    fake(gpu)
    rec = run_point(auto_cfg(tmp_path / "cache"), tmp_path / "a")
    assert rec["status"] == "ok", rec["error"]
    d = rec["dispatch"]
    assert "no fit for NVIDIA H999" in d["model"]["why"] and d["model"]["gpu"] == "NVIDIA H200"
    assert d["device"] == {"name": "NVIDIA H999", "sm_count": 144} and d["path"] == "first_use"
    assert d["tuning"]["cache"]["key"]["gpu"] == "NVIDIA H999"
    model, why = mdl.model_for("NVIDIA H999")
    assert model.gpu == "NVIDIA H200" and "no fit" in why


def test_a_table_made_on_another_gpu_is_not_used(tmp_path, fake):
    gpu = HostGpu()
    fake(gpu)
    rec = run_point({**auto_cfg(tmp_path / "cache"), "shape": [64, 64, 64]}, tmp_path / "a")
    assert rec["status"] == "ok", rec["error"]
    assert rec["dispatch"]["path"] == "first_use"
    assert "made on NVIDIA H200, this GPU is fake H200" in rec["dispatch"]["table_skipped"]
    assert rec["dispatch"]["table"] is None and "no shipped table for fake H200" in rec["dispatch"]["table_note"]


def test_a_gpu_with_a_shipped_table_of_its_own_uses_it(tmp_path, fake, monkeypatch):
    """With no kernel.table given, the GPU's own shipped table (by device name) answers first, and
    the record names that file; a kernel.table given by name is used only on its own GPU."""
    from gemmlab.dispatch import auto
    (c0, _), (c1, _), _ = top()
    folder = tmp_path / "tables"
    folder.mkdir()
    shipped = json.loads(auto.DEFAULT_TABLE.read_text())
    (folder / "h200.json").write_text(json.dumps(shipped))
    mine = {**shipped, "device": {"name": "fake H200", "arch": "sm_90", "sm_count": HostGpu().facts.sm_count},
            "entries": [{"precision": "fp32", "layout": ["row", "row"], "shape": SHAPE, "kernel": c1.kernel,
                         "params": dict(c1.params), "median_ms": 1.0}]}
    (folder / "fake.json").write_text(json.dumps(mine))
    monkeypatch.setattr(auto, "TABLE_DIR", folder)
    fake(HostGpu())
    rec = run_point(auto_cfg(tmp_path / "cache"), tmp_path / "a")
    assert rec["status"] == "ok", rec["error"]
    d = rec["dispatch"]
    assert d["path"] == "table" and d["table"] == str(folder / "fake.json") and d["chosen"] == c1.kernel
    assert "table_skipped" not in d and not (tmp_path / "a" / "tuning").exists()
    given = run_point(auto_cfg(tmp_path / "cache", table=str(folder / "h200.json")), tmp_path / "b")
    assert given["dispatch"]["path"] == "first_use" and "made on NVIDIA H200" in given["dispatch"]["table_skipped"]


def _fit_file(folder, name, sm_count=None, dram=None):
    data = json.loads(mdl.DEFAULT_MODEL.read_text())
    data["device"] = {"name": name, "arch": "sm_90", **({"sm_count": sm_count} if sm_count else {}),
                      **({"dram_peak_bytes_per_s": dram} if dram else {})}
    path = folder / f"{name.split()[1].lower()}.json"
    path.write_text(json.dumps(data))
    return path


def test_a_gpu_without_a_fit_gets_the_nearest_sm90_fit(tmp_path, monkeypatch):
    """The exact name first; else the shipped fit nearest in SM count and DRAM bandwidth (an H100
    PCIe: 114 SMs, 2.0 TB/s -> the H100 SXM fit, not the H200's); a GPU that says neither gets the
    default (the H200 fit, whose file says neither: the SXM class's 132 SMs, 4.8 TB/s)."""
    h200 = _fit_file(tmp_path, "NVIDIA H200")
    h100 = _fit_file(tmp_path, "NVIDIA H100 80GB HBM3", 132, 3.35e12)
    monkeypatch.setattr(mdl, "MODEL_DIR", tmp_path)
    monkeypatch.setattr(mdl, "DEFAULT_MODEL", h200)
    m, why = mdl.model_for("NVIDIA H100 80GB HBM3")
    assert m.path == str(h100.resolve()) and why.startswith("shipped fit for NVIDIA H100 80GB HBM3")
    m, why = mdl.model_for("NVIDIA H100 PCIe", device={"sm_count": 114, "dram_peak_bytes_per_s": 2.0e12})
    assert m.gpu == "NVIDIA H100 80GB HBM3" and "no fit for NVIDIA H100 PCIe" in why and "nearest" in why
    m, why = mdl.model_for("NVIDIA H200 NVL", device={"sm_count": 132, "dram_peak_bytes_per_s": 4.8e12})
    assert m.gpu == "NVIDIA H200"
    m, _ = mdl.model_for("NVIDIA H999", device={})
    assert m.gpu == "NVIDIA H200"
    assert mdl.gpu_distance({"sm_count": 114}, {"sm_count": 132}) == pytest.approx(np.log(132 / 114))


def test_first_use_records_feed_the_fit(tmp_path, fake):
    """A kernel=auto record with first-use tuning gives the fit every verified candidate it timed
    (the tuning list's medians) plus its own measurement, once each: the chosen candidate's tuning
    entry is not counted beside the point's own figure, a candidate that failed verification not at
    all, and a candidate's own record under tuning/<i>/ is not read a second time from a folder."""
    from gemmlab.stages import archive
    (c0, e0), (c1, e1), (c2, e2) = top()

    def wrong(gpu, args):
        gpu.floats(int(args[2]), int(args[3]) * int(args[4]))[:] = 0.0

    fake(HostGpu(durations={e0: 0.1, e1: 2.0, e2: 1.0}, behaviour={e0: wrong}))
    rec = run_point(auto_cfg(tmp_path / "cache"), tmp_path / "pts" / "a")
    assert rec["status"] == "ok" and rec["dispatch"]["chosen"] == c2.kernel
    assert mdl.tried_candidates(rec) == [{"kernel": c1.kernel, "params": dict(c1.params), "median_ms": 2.0},
                                         {"kernel": c2.kernel, "params": dict(c2.params), "median_ms": 1.0}]
    arc = tmp_path / "r.jsonl.xz"
    archive.write_members([archive.Member("a/result.json", rec)], arc)
    for source in (arc, tmp_path / "pts"):  # the archive heldout_bench writes, and the point folders
        counts = {}
        samples = mdl.read_samples([source], "fake H200", REGISTRY, set(), counts)
        got = sorted((s.kernel, s.median_ms) for s in samples)
        assert got == sorted([(c2.kernel, rec["timing"]["median_ms"]), (c1.kernel, 2.0)]), source
        assert counts[str(source)] == {"records": 1, "used": 2, "from_tuning": 1, "test_split": 0, "other_gpu": 0,
                                       "unusable": 0}
        assert {s.params == {**REGISTRY.kernels[s.kernel].defaults, **s.params} for s in samples} == {True}
    model = mdl.fit_model([arc], "fake H200", REGISTRY, excluded=set())
    assert model.meta["records_used"] == 2 and model.meta["from_tuning"] == 1
    assert model.device["sm_count"] == HostGpu().facts.sm_count


def test_the_train_command_composes_on_the_fake_gpu(tmp_path, fake, monkeypatch):
    """.ci/heldout_bench.py as the lead runs the train split (``--auto rank=model,tune=first_use,
    tune_k=6``, numbers given on the command line as text), through its main in this process on the
    fake GPU (no baseline: cuBLAS is not here): each point's record lists the 6 candidates it timed in
    its one run with their medians, and ``python -m gemmlab.dispatch.model fit`` fits the archive."""
    import importlib.util
    import sys
    from clirun import REPO_ROOT
    spec = importlib.util.spec_from_file_location("gemmlab_heldout_bench_rank", REPO_ROOT / ".ci" / "heldout_bench.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    import dataclasses
    from gemmlab.dispatch import shapeset
    real = shapeset.load_shapeset()
    first = real.select("train", ["odd"])[0]  # a train shape's entry, at the size of the other tests (compiles memoised)
    small = dataclasses.replace(real, entries=(dataclasses.replace(first, shape=Shape(*SHAPE)),))
    monkeypatch.setattr(shapeset, "load_shapeset", lambda *a, **k: small)
    fake(HostGpu())
    seen = []

    def runner(cfg, out_dir):
        seen.append(cfg)
        return run_point({**cfg, "baseline": None, "timing": dict(FAST)}, out_dir)

    out = tmp_path / "train"
    assert bench.main([str(out), "--split", "train", "--regions", "odd", "--limit", "1", "--precision", "fp32",
                       "--auto", f"rank=model,tune=first_use,tune_k=6,tune_budget_s=30,tune_cache={tmp_path / 'c'}",
                       "--no-isolation"], run=runner) == 0
    assert len(seen) == 1 and seen[0]["kernel"]["tune_k"] == 6 and seen[0]["kernel"]["tune_budget_s"] == 30
    assert seen[0]["verify"]["after_timing"] == "device"  # the device check at every size (issue 41 throughput)
    from gemmlab.stages import record_model
    (_, rec), = record_model.records_of(out / "records.jsonl.xz")  # one record: no tuning/<i> points
    d = rec.raw["dispatch"]
    assert rec.status == "ok", rec.raw.get("error")
    assert d["path"] == "first_use" and len(d["tuning"]["tried"]) == 6
    assert all(isinstance(t["median_ms"], float) and t["status"] == "ok" for t in d["tuning"]["tried"])
    assert rec.raw["timing"]["median_ms"] == min(t["median_ms"] for t in d["tuning"]["tried"])
    assert d["model"]["file"] and d["model"]["why"] and "table" in d
    phases = rec.raw["phase_s"]  # where the point's seconds went: the candidates ran in the point's own phases
    assert {"validate", "open_device", "compile", "allocate", "correctness", "launch_paths", "timing", "safety_nets",
            "after_timing"} <= set(phases) and 0 < d["tuning"]["elapsed_s"] <= sum(
                v for v in phases.values() if isinstance(v, (int, float)))
    counts = {}
    samples = mdl.read_samples([out / "records.jsonl.xz"], "fake H200", REGISTRY, set(), counts)
    assert len(samples) == 6 and counts[str(out / "records.jsonl.xz")]["from_tuning"] == 5
    model_file = tmp_path / "fit.json"
    assert mdl.main(["fit", str(out / "records.jsonl.xz"), "--gpu", "fake H200", "-o", str(model_file)]) == 0
    fitted = mdl.load_model(model_file)
    assert fitted.gpu == "fake H200" and fitted.meta["records_used"] == 6 and fitted.meta["from_tuning"] == 5
    assert bench.main([str(tmp_path / "x"), "--auto", "tune_k"]) == 2  # refused in one line, nothing run
    assert not (tmp_path / "x").exists()


# --- the ranking without tuning -------------------------------------------------------------------

def test_rank_model_in_compile_mode_uses_the_model(tmp_path):
    cfg, d = resolve_config({"kernel": {"name": "auto", "rank": "model", "table": None}, "shape": [1, 2500, 7001],
                             "mode": "compile"}, REGISTRY)
    assert d["path"] == "model" and d["source"] == "model" and cfg["kernel"]["name"] == d["chosen"]
    assert d["predicted_ms"] == d["top"][0]["predicted_ms"] and len(d["top"]) == tuning.TOP_IN_RECORD
    assert [t["predicted_ms"] for t in d["top"]] == sorted(t["predicted_ms"] for t in d["top"])
    assert d["chosen"] in REGISTRY.kernels and d["chosen"] != "cublas"


def test_rank_model_takes_the_table_first(tmp_path):
    # 2048x4096x4096 has an exact entry in the shipped H200 table
    cfg, d = resolve_config({"kernel": {"name": "auto", "rank": "model"}, "shape": [2048, 4096, 4096],
                             "mode": "compile"}, REGISTRY)
    assert d["path"] == "table" and d["source"] == "table"


def test_first_use_in_compile_mode_is_skipped():
    _, d = resolve_config({"kernel": {"name": "auto", "tune": "first_use"}, "shape": [3, 5000, 3001],
                           "mode": "compile"}, REGISTRY, "/nonexistent")
    assert d["path"] == "model" and "needs mode=run" in d["tuning"]["skipped"]


def test_defaults_keep_the_rules():
    _, d = resolve_config({"kernel": {"name": "auto", "rank": "rules", "tune": False}, "shape": [4, 4096, 4096]},
                          REGISTRY)
    assert d["source"] == "rule"


@pytest.mark.parametrize("key, value", [("rank", "best"), ("tune", "always"), ("tune_k", 0), ("tune_budget_s", -1),
                                        ("tune_cache", ""), ("model", "/nonexistent/model.json"), ("bogus", 1)])
def test_bad_settings_are_one_line_naming_the_field(key, value):
    with pytest.raises(ConfigError) as info:
        resolve_config({"kernel": {"name": "auto", "rank": "model", key: value}, "shape": [8, 8, 8],
                        "mode": "compile"}, REGISTRY)
    assert info.value.field == f"kernel.{key}" and "\n" not in str(info.value)


# --- the cache under concurrent writers -----------------------------------------------------------

def _writer(args):
    path, key, who, n = args
    from pathlib import Path
    for i in range(n):
        tuning.store(Path(path), key, f"fp32 row/row {who}x{i}x1", {"kernel": "tiled", "params": {}, "who": who})
    return who


def test_concurrent_writers_leave_a_valid_file_with_every_entry(tmp_path):
    key = {"gpu": "fake", "sm_count": 1}
    path = tuning.cache_file(key, tmp_path)
    with multiprocessing.get_context("fork").Pool(4) as pool:
        assert sorted(pool.map(_writer, [(str(path), key, w, 25) for w in range(4)])) == [0, 1, 2, 3]
    entries, why = tuning.read_cache(path)
    assert why is None and len(entries) == 100
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_an_unreadable_cache_is_treated_as_empty_and_rewritten(tmp_path):
    key = {"gpu": "fake"}
    path = tuning.cache_file(key, tmp_path)
    path.write_text("{torn")
    entries, why = tuning.read_cache(path)
    assert entries == {} and "unreadable" in why
    tuning.store(path, key, "k", {"kernel": "tiled"})
    assert tuning.read_cache(path) == ({"k": {"kernel": "tiled"}}, None)


def test_the_device_key_follows_the_kernel_sources(tmp_path):
    dev = {"name": "NVIDIA H200", "sm_count": 132, "driver_version": "13.0"}
    k1 = tuning.device_key(dev, REGISTRY)
    assert k1 == tuning.device_key(dev, REGISTRY) and len(k1["kernel_sources_sha256"]) == 64
    assert tuning.cache_file(k1, tmp_path) != tuning.cache_file({**k1, "driver_version": "13.1"}, tmp_path)
    assert tuning.cache_file(k1, tmp_path).name.startswith("nvidia-h200-")


def test_the_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("GEMMLAB_TUNING_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tuning.default_cache_dir() == tmp_path / "gemmlab" / "tuning"
    monkeypatch.setenv("GEMMLAB_TUNING_CACHE", str(tmp_path / "x"))
    assert tuning.default_cache_dir() == tmp_path / "x"


# --- the model --------------------------------------------------------------------------------------

def test_the_fit_recovers_known_coefficients():
    rng = np.random.default_rng(0)
    truth = np.array([4.0, 1.3, 0.0, 0.9, 0.2, 1.0])
    samples = []
    for i in range(60):
        f = np.abs(rng.normal(size=6)) * [1e-3, 0.05, 0.05, 0.02, 0.01, 0.005]
        samples.append(mdl.Sample("k", "fp32", (i + 1, 8, 8), ("row", "row"), {}, float(truth @ f), f, "x"))
    pooled, kernels, errors = mdl.fit(samples)
    assert np.allclose(pooled["fp32"], truth, rtol=1e-3, atol=1e-3) and np.allclose(kernels[("k", "fp32")], truth, atol=1e-2)
    assert errors["all"]["median_abs_rel_error"] < 1e-3


def test_the_shipped_model_names_its_gpu_and_data():
    m = mdl.load_model()
    assert m.gpu == "NVIDIA H200" and m.meta["records_used"] > 1000
    assert "test split" in m.meta["excluded"] and m.meta["archives"]
    assert sum(a["used"] for a in m.meta["archives"].values()) == m.meta["records_used"]
    assert sum(a["test_split"] for a in m.meta["archives"].values()) > 0
    assert {"fp32", "tf32", "bf16"} <= set(m.pooled) and m.meta["fit_error"]["all"]["median_abs_rel_error"] < 0.5
    assert all(v >= 0 for c in m.kernels.values() for v in c.values())


def test_a_kernel_the_fit_never_saw_uses_its_precisions_pooled_fit():
    m = mdl.load_model()
    assert m.coefficients("dropin_kernel", "bf16")[1] == "pooled"
    assert m.coefficients("dropin_kernel", "fp16")[1] == "pooled"  # fp16 borrows bf16's
    assert m.coefficients("wgmma_bf16", "bf16")[1] == "kernel"


def test_a_kernel_the_fit_never_saw_in_a_precision_uses_its_sibling_precisions_fit_first():
    """Issue 41: fp16 <-> bf16 (same tensor-core rate and element size) borrow a kernel's own fit
    before the pooled one; fp32 and tf32 (other units) never do."""
    assert mdl.sibling_precisions("fp16") == ("bf16",) and mdl.sibling_precisions("bf16") == ("fp16",)
    assert mdl.sibling_precisions("fp32") == () and mdl.sibling_precisions("tf32") == () == mdl.sibling_precisions("x")
    own = {"launch": 2.0, "wave": 1.1, "dram": 0.7}
    pooled = {"launch": 9.0, "wave": 3.0, "fluid": 0.5}
    m = mdl.Model({("k", "bf16"): own, ("t", "tf32"): own}, {"fp16": pooled, "fp32": pooled})
    coef, how = m.coefficients("k", "fp16")
    assert how == "kernel bf16" and coef.tolist() == [own.get(t, 0.0) for t in mdl.TERMS]
    assert m.coefficients("other", "fp16")[1] == "pooled" and m.coefficients("t", "fp32")[1] == "pooled"
    assert m.coefficients("k", "bf16")[1] == "kernel"


def test_fp16_ranks_with_wgmma_bf16s_bf16_fit_as_bf16_does(capsys):
    """The shipped fit has wgmma_bf16 at bf16 only; since it serves fp16 (7effa16) fp16 at
    256x16384x2048 (B column-major) must rank it as bf16 does, not mma_bf16 first by the pooled fit."""
    facts = gemmlab.gpu.device.offline_facts("90")
    model = mdl.load_model()
    assert ("wgmma_bf16", "bf16") in model.kernels and ("wgmma_bf16", "fp16") not in model.kernels
    tops = {}
    for precision in ("bf16", "fp16"):
        problem = Problem(Shape(256, 16384, 2048), precision, "row", "col")
        tops[precision] = mdl.rank(cands.enumerate(REGISTRY, problem, facts), REGISTRY, problem, facts, model)[0]
    assert tops["bf16"].candidate.kernel == tops["fp16"].candidate.kernel == "wgmma_bf16", tops
    assert (tops["bf16"].fit, tops["fp16"].fit) == ("kernel", "kernel bf16")
    assert tops["fp16"].predicted_ms == pytest.approx(tops["bf16"].predicted_ms)
    assert tops["fp16"].as_dict(facts.sm_count)["fit"] == "kernel bf16"  # what the record's dispatch.top says
    assert mdl.main(["rank", "256", "16384", "2048", "--precision", "fp16", "--layout", "row,col", "--top", "1"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert "wgmma_bf16[" in line and line.endswith("; kernel bf16 fit)"), line


def test_read_samples_leaves_out_the_test_weights(tmp_path):
    from gemmlab.stages import archive
    test_nk = sorted(mdl.test_weights())[0]
    good = {"schema": "gemmlab.record/1", "status": "ok", "valid": True, "kernel": {"name": "tiled", "params": {}},
            "shape": {"M": 64, "N": 64, "K": 64}, "device": {"name": "G", "sm_count": 132},
            "timing": {"median_ms": 0.01, "samples_ms": [0.01]}, "config": {"precision": "fp32"}}
    held = json.loads(json.dumps(good))
    held["shape"] = {"M": 64, "N": test_nk[0], "K": test_nk[1]}
    other = json.loads(json.dumps(good))
    other["device"]["name"] = "H"
    arc = tmp_path / "r.jsonl.xz"
    archive.write_members([archive.Member("0/result.json", good), archive.Member("1/result.json", held),
                           archive.Member("2/result.json", other)], arc)
    counts = {}
    samples = mdl.read_samples([arc], "G", REGISTRY, mdl.test_weights(), counts)
    assert [s.shape for s in samples] == [(64, 64, 64)]
    assert counts[str(arc)] == {"records": 3, "used": 1, "from_tuning": 0, "test_split": 1, "other_gpu": 1,
                                "unusable": 0}


def test_the_cli_fits_and_ranks(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert mdl.main(["fit", "docs/results/shapes-bf16-h200.jsonl.xz", "docs/results/session3-gpu-h200.jsonl.xz",
                     "-o", str(out)]) == 0
    m = mdl.load_model(out)
    assert m.meta["records_used"] > 20 and m.gpu == "NVIDIA H200"
    assert mdl.main(["rank", "64", "4096", "4096", "--precision", "bf16", "--model", str(out), "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "records of NVIDIA H200" in text and "candidates" in text


@pytest.mark.parametrize("draw, copies, baseline", [("host", False, "naive"), ("device", False, "naive"),
                                                    ("device", True, "naive"), ("device", True, None)])
def test_a_candidate_writing_the_inputs_is_dropped_with_a_baseline_too(tmp_path, fake, draw, copies, baseline):
    """A candidate that writes A (and, ``copies``, every device copy of A's bytes: the device check's
    snapshot) is dropped as inputs_modified and the point goes on, with a baseline as without: the
    baseline is verified first, on the inputs as drawn (it was verified after the candidates, on the
    written A, and failed the point: a reviewer's repro)."""
    from fakegpu import host_gemm
    (c0, e0), (c1, e1), (c2, e2), (c3, e3) = top(4)

    def writes_a(gpu, args):
        host_gemm(gpu, args)
        a, m, k = int(args[0]), int(args[3]), int(args[5])
        if copies:
            want = gpu.view(a, 4 * m * k)
            for base, mem in list(gpu.memory.items()):
                if not base <= a < base + mem.size and mem.size >= 4 * m * k and np.array_equal(mem[:4 * m * k], want):
                    gpu.floats(base, 1)[:] += 1.0
        gpu.floats(a, 1)[:] += 1.0

    fake(HostGpu(durations={e0: 3.0, e1: 0.5, e2: 0.1, e3: 2.0}, behaviour={e2: writes_a}))
    cfg = {**auto_cfg(tmp_path / "cache", tune_k=4), "inputs": {"draw": draw}}
    if baseline:
        cfg["baseline"] = baseline
    rec = run_point(cfg, tmp_path / "a")
    assert rec["status"] == "ok", rec["error"]
    assert [t["status"] for t in rec["dispatch"]["tuning"]["tried"]] == ["ok", "ok", "inputs_modified", "ok"]
    assert rec["dispatch"]["chosen"] == c1.kernel and rec["inputs_unchanged"] is True
    if baseline:
        assert rec["baseline"]["verification"]["passed"]
