"""resume=true (gemmlab/run/store.py ``_resume``): a directory that already holds a result is never
overwritten; with resume=true a valid result is returned as it is (``resumed``) and a failed one
is moved aside as ``result.previous-<time>.json`` and the point re-runs. Everything in mode=compile
(no GPU needed); the CLI part re-runs a sweep into its own directory.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from gemmlab.run.pipeline import run_point

BASE = {"kernel": {"name": "naive"}, "shape": [8, 8, 8], "mode": "compile"}
FAILED = {"schema": "gemmlab.result/1", "status": "wrong_result", "valid": False,
          "error": "wrong result from naive: 3 mismatches", "config": BASE}


def _previous(folder: Path) -> list[Path]:
    return sorted(folder.glob("result.previous-*.json"))


@pytest.fixture
def valid_point(tmp_path) -> Path:
    """A directory holding a valid (compiled) result.json."""
    out = tmp_path / "point"
    rec = run_point(BASE, out)
    assert rec["status"] == "compiled" and rec["valid"], rec["error"]
    return out


def test_a_set_aside_record_says_why(tmp_path, sass_not_read):
    """resume=true says in the new record's last ``previous`` entry why the earlier record was set
    aside (``not valid``; ``other config`` for a valid record of another config), from its one read
    of it, so gemmlab-tune sweep counts a re-run without reading the record again."""
    # sass_not_read: the records' ``previous`` entries are read here, never the SASS (the nvdisasm run
    # of naive<8, 16>, compiled by no other test, skipped)
    out = tmp_path / "p"
    out.mkdir()
    (out / "result.json").write_text(json.dumps(FAILED))
    first = run_point({**BASE, "resume": True}, out)
    assert first["valid"] and [e["why"] for e in first["previous"]] == ["not valid"], first.get("previous")
    again = run_point({**BASE, "resume": True, "kernel": {"name": "naive", "BX": 8}}, out)
    assert [e["why"] for e in again["previous"]] == ["not valid", "other config"], again.get("previous")
    assert json.loads((out / "result.json").read_text())["previous"] == again["previous"]


def test_existing_result_without_resume_is_refused_and_untouched(valid_point):
    path = valid_point / "result.json"
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    rec = run_point(BASE, valid_point)
    assert rec["status"] == "invalid" and rec["valid"] is False
    assert "resume" in rec["error"] and "result.json" in rec["error"]
    assert rec["error"].startswith("out_dir:")
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    assert not _previous(valid_point)
    assert not rec.get("resumed")


def test_existing_failed_result_without_resume_is_untouched(tmp_path):
    out = tmp_path / "p"
    out.mkdir()
    (out / "result.json").write_text(json.dumps(FAILED))
    before = (out / "result.json").read_bytes()
    rec = run_point({**BASE, "resume": False}, out)
    assert rec["status"] == "invalid" and "resume" in rec["error"]
    assert (out / "result.json").read_bytes() == before
    assert not _previous(out)


def test_resume_returns_valid_record_unchanged(valid_point):
    path = valid_point / "result.json"
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    rec = run_point({**BASE, "resume": True}, valid_point)
    assert rec["resumed"] is True
    assert rec["status"] == "compiled" and rec["valid"] is True
    old = json.loads(before)
    assert {k: v for k, v in rec.items() if k != "resumed"} == old
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    assert not _previous(valid_point)
    assert "resumed" not in json.loads(path.read_text())


def test_resume_reruns_failed_record_and_keeps_it(tmp_path):
    out = tmp_path / "p"
    out.mkdir()
    (out / "result.json").write_text(json.dumps(FAILED))
    before = (out / "result.json").read_bytes()
    rec = run_point({**BASE, "resume": True}, out)
    assert rec["status"] == "compiled" and rec["valid"] is True, rec["error"]
    assert not rec.get("resumed")
    prev = _previous(out)
    assert len(prev) == 1
    assert re.fullmatch(r"result\.previous-.+\.json", prev[0].name)
    assert prev[0].read_bytes() == before
    now = json.loads((out / "result.json").read_text())
    assert now["status"] == "compiled" and now["valid"] is True and now["compile"]["name_expression"]
    from gemmlab.stages.record import summary  # the point's lines say where the earlier record went
    assert any(line.startswith(f"  earlier result.json kept as {prev[0].name} (resume=true: ")
               for line in summary(rec).splitlines())


def test_resume_keeps_the_previous_records_artifacts(tmp_path):
    """A re-run point writes kernel.sass / compile.log again: the kept record's own files are
    moved aside with its tag first (nothing of the old point overwritten), the new record names
    them, and a second re-run chains the list."""
    out = tmp_path / "p"
    out.mkdir()
    old_files = {"result.json": json.dumps(FAILED), "kernel.sass": "OLD SASS\n", "compile.log": "OLD LOG\n",
                 "kernel-baseline.sass": "OLD BASE SASS\n", "traceback.txt": "Traceback (old)\n",
                 "sanitizer-memcheck.log": "OLD SANITIZER\n", "sanitizer-memcheck/run/result.json": "{}",
                 "cli.log": "hydra's job log\n", ".hydra/config.yaml": "a: 1\n", "notes.txt": "user's\n"}
    for name, text in old_files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    rec = run_point({**BASE, "resume": True}, out)
    assert rec["status"] == "compiled" and rec["valid"], rec["error"]
    [prev] = rec["previous"]
    tag = prev["record"][len("result."):-len(".json")]
    assert re.fullmatch(r"previous-\d{8}T\d{6}-\d+", tag)
    assert prev["artifacts"] == {"kernel.sass": f"kernel.{tag}.sass", "compile.log": f"compile.{tag}.log",
                                 "kernel-baseline.sass": f"kernel-baseline.{tag}.sass",
                                 "traceback.txt": f"traceback.{tag}.txt",
                                 "sanitizer-memcheck.log": f"sanitizer-memcheck.{tag}.log",
                                 "sanitizer-memcheck": f"sanitizer-memcheck.{tag}"}
    kept = {"result.json": prev["record"], **prev["artifacts"], "sanitizer-memcheck/run/result.json":
            f"sanitizer-memcheck.{tag}/run/result.json"}
    for name, text in old_files.items():  # every old byte is still there, under its kept name
        assert (out / kept.get(name, name)).read_text() == text, name
    assert (out / "kernel.sass").read_text() != "OLD SASS\n"  # the new point's own files
    assert "OLD" not in (out / "compile.log").read_text()
    assert not (out / "kernel-baseline.sass").exists() and not (out / "traceback.txt").exists()
    assert json.loads((out / "result.json").read_text())["previous"] == [prev]

    # the config changes: the valid record is kept aside in turn, and both earlier records are listed
    second = run_point({**BASE, "resume": True, "kernel": {"name": "naive", "BX": 8}}, out)
    assert second["status"] == "compiled", second["error"]
    first, again = second["previous"]
    assert first == prev and again["record"] != prev["record"]
    assert again["artifacts"] == {"kernel.sass": again["record"].replace("result.", "kernel.").replace(".json", ".sass"),
                                  "compile.log": again["record"].replace("result.", "compile.").replace(".json", ".log")}
    assert json.loads((out / again["record"]).read_text())["previous"] == [prev]
    for name, text in old_files.items():
        assert (out / kept.get(name, name)).read_text() == text, name


@pytest.mark.parametrize("old", [
    {"status": "compiled", "valid": False},  # inconsistent: not valid
    {"status": "wrong_result", "valid": True},  # inconsistent: not a valid status
    {"status": "invalid", "valid": False, "error": "kernel.BX: ..."},
])
def test_resume_reruns_records_that_are_not_valid(tmp_path, old):
    out = tmp_path / "p"
    out.mkdir()
    (out / "result.json").write_text(json.dumps(old))
    rec = run_point({**BASE, "resume": True}, out)
    assert rec["status"] == "compiled" and not rec.get("resumed")
    assert len(_previous(out)) == 1


@pytest.mark.parametrize("text", ["{not json", "", "\x00\x01"])
def test_resume_reruns_unreadable_record(tmp_path, text):
    out = tmp_path / "p"
    out.mkdir()
    (out / "result.json").write_text(text)
    rec = run_point({**BASE, "resume": True}, out)
    assert rec["status"] == "compiled", rec["error"]
    [prev] = _previous(out)
    assert prev.read_text() == text


def test_resume_twice_keeps_valid_result(tmp_path):
    out = tmp_path / "p"
    out.mkdir()
    (out / "result.json").write_text(json.dumps(FAILED))
    first = run_point({**BASE, "resume": True}, out)
    assert first["status"] == "compiled"
    written = (out / "result.json").read_bytes()
    second = run_point({**BASE, "resume": True}, out)
    assert second["resumed"] is True
    assert (out / "result.json").read_bytes() == written
    assert len(_previous(out)) == 1


def test_resume_with_non_object_json_does_not_raise(tmp_path):
    out = tmp_path / "p"
    out.mkdir()
    (out / "result.json").write_text("[]")
    rec = run_point({**BASE, "resume": True}, out)
    assert rec["status"] == "compiled"


def test_invalid_resume_value_leaves_result_untouched(tmp_path):
    out = tmp_path / "p"
    out.mkdir()
    (out / "result.json").write_text(json.dumps(FAILED))
    before = (out / "result.json").read_bytes()
    rec = run_point({**BASE, "resume": "false"}, out)
    assert rec["status"] == "invalid"
    assert (out / "result.json").read_bytes() == before
    assert not _previous(out)


@pytest.mark.parametrize("value, says", [("maybe", "'maybe'"), ("null", "null"), ("1", "1"), ("[true]", "[True]")])
def test_a_resume_value_that_is_not_a_boolean_is_one_line(cli, tmp_path, value, says):
    """resume=null says null (the command line's spelling), not Python's None."""
    proc = cli(["kernel=naive", "mode=compile", "shape=[8,8,8]", f"resume={value}"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == f"gemmlab: error: resume: must be true or false, got {says}", proc.stderr


# --- CLI: re-run a sweep into its own directory ------------------------------------------------

def test_cli_resume_skips_valid_points_and_reruns_failed(cli, tmp_path):
    sweep = tmp_path / "sw"
    args = ["-m", "kernel=naive,tiled", "shape=[8,8,8]", "mode=compile", f"hydra.sweep.dir={sweep}"]
    first = cli(args, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    p0, p1 = sweep / "0" / "result.json", sweep / "1" / "result.json"
    assert json.loads(p0.read_text())["status"] == "compiled"
    p0_before = p0.read_bytes()

    failed = json.loads(p1.read_text())
    failed.update(status="compile_error", valid=False, error="NVRTC failed (simulated)")
    failed.pop("compile", None)
    p1.unlink()
    p1.write_text(json.dumps(failed))
    failed_bytes = p1.read_bytes()

    again = cli(args + ["resume=true"], tmp_path)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out
    assert "Traceback" not in out and "holds no earlier result.json" not in out
    # point 0 skipped, point 1 re-run
    assert re.search(rf"{re.escape(str(sweep / '0'))}: skipped", again.stdout), again.stdout
    assert "skipped" not in "".join(l for l in again.stdout.splitlines() if str(sweep / "1") in l)
    assert p0.read_bytes() == p0_before
    now = json.loads(p1.read_text())
    assert now["status"] == "compiled" and now["valid"] is True
    assert now["kernel"]["name"] == "tiled"
    [prev] = sorted((sweep / "1").glob("result.previous-*.json"))
    assert prev.read_bytes() == failed_bytes
    assert not list((sweep / "0").glob("result.previous-*.json"))

    with open(sweep / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["point"], r["kernel"], r["status"]) for r in rows] == [("0", "naive", "compiled"),
                                                                       ("1", "tiled", "compiled")]
    # the earlier sweep's definition is kept beside the new one (Hydra rewrites multirun.yaml)
    [kept] = sweep.glob("multirun.previous-*.yaml")
    assert "resume=true" not in kept.read_text() and "resume=true" in (sweep / "multirun.yaml").read_text()
    assert "2 compiled only, 0 failed" in again.stdout


@pytest.mark.parametrize("args, mode", [(["-m", "kernel=naive,tiled"], "sweep"), (["kernel=naive"], "run")])
def test_cli_resume_into_a_new_folder_says_there_is_nothing_to_resume(cli, tmp_path, args, mode):
    """resume=true without the earlier folder (hydra.sweep.dir / hydra.run.dir: a new timestamped
    one) runs every point, as asked, and says once why nothing was skipped and what to give."""
    proc = cli(args + ["shape=[8,8,8]", "mode=compile", "resume=true"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("resume=true: ")]
    assert len(lines) == 1 and lines[0].endswith(f"holds no earlier result.json, so every point runs; to resume, "
                                                  f"name the earlier folder: hydra.{mode}.dir=DIR resume=true"), lines
    assert str(tmp_path / "outputs") in lines[0] or lines[0].startswith("resume=true: outputs/"), lines
    assert "skipped" not in proc.stdout


def test_cli_resume_after_reordering_the_sweep_reuses_each_points_own_record(cli, tmp_path):
    """Points are folders numbered by Hydra's job order; a re-run with a kernel added at the front
    shifts them. resume=true finds each config's valid record in another folder (current or moved
    aside) and copies it in instead of measuring again (new-user finding 5); nothing is lost."""
    sweep = tmp_path / "sw"
    common = ["shape=[8,8,8]", "mode=compile", f"hydra.sweep.dir={sweep}"]
    first = cli(["-m", "kernel=naive,tiled", *common], tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    made = {json.loads((sweep / n / "result.json").read_text())["kernel"]["name"]: (sweep / n / "result.json").read_bytes()
            for n in ("0", "1")}
    again = cli(["-m", "kernel=small_tile,naive,tiled", *common, "resume=true"], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    recs = [json.loads((sweep / n / "result.json").read_text()) for n in ("0", "1", "2")]
    assert [r["kernel"]["name"] for r in recs] == ["small_tile", "naive", "tiled"]
    assert not recs[0].get("resumed")  # new: measured
    for rec, name in ((recs[1], "naive"), (recs[2], "tiled")):
        assert rec.get("resumed") and rec["resumed_from"].endswith(".json"), again.stdout
        assert json.loads((sweep / rec["resumed_from"]).read_text()) == json.loads(made[name])
    assert re.search(rf"{re.escape(str(sweep / '1'))}: skipped, took the same point's valid result from ", again.stdout)
    # the records that were in folders 0 and 1 are kept, moved aside, not overwritten
    kept = sorted(json.loads(p.read_text())["kernel"]["name"] for p in sweep.glob("*/result.previous-*.json"))
    assert kept == ["naive", "tiled"]
    assert (sweep / "2" / "kernel.sass").exists()  # the record's artifacts came with it
    # "previous" lists what was set aside in the folder itself, and is absent where nothing was (not [])
    assert [e["record"] for e in recs[1]["previous"]] == [p.name for p in (sweep / "1").glob("result.previous-*.json")]
    assert "previous" not in recs[2], recs[2].get("previous")
    assert "skipped, took the same point's valid result from " in (sweep / "1" / "app.log").read_text()
    third = cli(["-m", "kernel=small_tile,naive,tiled", *common, "resume=true"], tmp_path)
    assert third.returncode == 0, third.stdout + third.stderr
    for n in ("0", "1", "2"):  # each record is its own folder's now: the line does not name where it came from
        assert f"{sweep / n}: skipped, it already holds a valid result (resume=true)" in third.stdout, third.stdout


def test_cli_rerun_without_resume_refuses_and_keeps_results(cli, tmp_path):
    sweep = tmp_path / "sw"
    args = ["-m", "kernel=naive", "shape=[8,8,8]", "mode=compile", f"hydra.sweep.dir={sweep}"]
    assert cli(args, tmp_path).returncode == 0
    before = (sweep / "0" / "result.json").read_bytes()
    again = cli(args, tmp_path)
    assert again.returncode == 2, again.stdout + again.stderr
    assert "resume" in again.stderr
    assert (sweep / "0" / "result.json").read_bytes() == before


def test_resume_ignores_cache_settings(tmp_path):
    from gemmlab.run.pipeline import run_point
    cfg = {"kernel": {"name": "naive"}, "shape": [8, 8, 8], "mode": "compile", "cache": {"enabled": True, "dir": None}}
    first = run_point(cfg, tmp_path / "p")
    assert first["status"] == "compiled"
    again = run_point(dict(cfg, resume=True, cache={"enabled": False, "dir": str(tmp_path / "c")}), tmp_path / "p")
    assert again.get("resumed") is True
    assert not list((tmp_path / "p").glob("result.previous-*"))


def test_a_command_run_again_into_its_folders_keeps_the_earlier_hydra_files(cli, tmp_path):
    """Hydra rewrites <job>/.hydra (config.yaml, hydra.yaml, overrides.yaml) at the start of every
    job: run again into the same folders (a refused re-run, resume=true), the earlier command's
    are kept aside as .hydra.previous-<...>, a run's and a sweep's points' alike."""
    run = tmp_path / "run"
    first = cli(["kernel=naive", "shape=[8,8,8]", "mode=compile", f"hydra.run.dir={run}"], tmp_path)
    assert first.returncode == 0, first.stderr
    before = (run / ".hydra" / "overrides.yaml").read_text()
    again = cli(["kernel=naive", "shape=[8,8,8]", "mode=compile", "resume=true", f"hydra.run.dir={run}"], tmp_path)
    assert again.returncode == 0, again.stderr
    [kept] = run.glob(".hydra.previous-*")
    assert (kept / "overrides.yaml").read_text() == before and "resume=true" not in before
    assert "resume=true" in (run / ".hydra" / "overrides.yaml").read_text()

    sweep = tmp_path / "sweep"
    args = ["-m", "kernel=naive,tiled", "shape=[8,8,8]", "mode=compile", f"hydra.sweep.dir={sweep}"]
    assert cli(args, tmp_path).returncode == 0
    olds = {p: (sweep / p / ".hydra" / "overrides.yaml").read_text() for p in ("0", "1")}
    assert cli([*args, "resume=true"], tmp_path).returncode == 0
    for point, text in olds.items():
        [kept] = (sweep / point).glob(".hydra.previous-*")
        assert (kept / "overrides.yaml").read_text() == text
        assert "resume=true" in (sweep / point / ".hydra" / "overrides.yaml").read_text().lower()


def test_resume_reads_each_record_of_the_sweep_once_per_process(tmp_path, monkeypatch):
    """A point without a valid record of its own looks through the sweep's other folders for the
    same config (reordered sweeps). Each record file is parsed once a process: a second look reads
    none, a record written since is read alone; invalid records, other configs and the point's own
    folder never match; a record moved aside is still found."""
    from gemmlab.run import pipeline, store
    sweep = tmp_path / "sw"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("hydra: {}\n")

    def config(i: int) -> dict:
        return {**BASE, "kernel": {"name": "tiled", "TM": i}}

    for i in range(40):
        (sweep / str(i)).mkdir()
        rec = {"schema": "gemmlab.result/2", "status": "compiled", "valid": i != 7, "config": config(i)}
        (sweep / str(i) / "result.json").write_text(json.dumps(rec))
    parsed = []
    real = json.loads
    monkeypatch.setattr(store.json, "loads", lambda text, *a, **k: parsed.append(1) or real(text, *a, **k))
    pipeline.clear_cache()
    me = sweep / "new"
    me.mkdir()
    assert store._matching_sibling(me, store._comparable(config(99))) is None and len(parsed) == 40
    found = store._matching_sibling(me, store._comparable(config(23)))
    assert found == sweep / "23" / "result.json" and len(parsed) == 40  # read no record again
    assert store._matching_sibling(me, store._comparable(config(7))) is None  # not valid
    assert store._matching_sibling(sweep / "23", store._comparable(config(23))) is None  # its own folder
    (sweep / "40").mkdir()
    (sweep / "40" / "result.previous-x.json").write_text(json.dumps(
        {"status": "ok", "valid": True, "config": config(99)}))
    assert store._matching_sibling(me, store._comparable(config(99))) == sweep / "40" / "result.previous-x.json"
    assert len(parsed) == 41


@pytest.mark.parametrize("same_config", [True, False])
def test_a_resume_interrupted_after_it_set_the_record_aside(tmp_path, same_config):
    """Ctrl-C after resume=true moved a point's record aside and before a new one was written (the
    hanging point of the second new-user trial) leaves the folder without result.json. The next
    resume takes the same config's valid record back from there (resumed_from) instead of measuring
    again; with another config the point runs and its record names the set-aside one in previous."""
    from gemmlab.run import pipeline, store
    sweep = tmp_path / "sw"
    (sweep / "0").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    first = run_point(BASE, sweep / "0")
    assert first["status"] == "compiled"
    entry = store.keep_previous(sweep / "0")  # what the interrupted resume did before it was stopped
    pipeline.clear_cache()
    cfg = BASE if same_config else {**BASE, "kernel": {"name": "naive", "BX": 8}}
    rec = run_point({**cfg, "resume": True}, sweep / "0")
    kept = json.loads((sweep / "0" / entry["record"]).read_text())
    if same_config:
        assert rec["resumed_from"] == f"0/{entry['record']}" and kept == first, rec
        assert json.loads((sweep / "0" / "result.json").read_text())["config"] == first["config"]
    else:
        assert rec["status"] == "compiled" and not rec.get("resumed_from")
        assert rec["previous"] == [entry], rec.get("previous")


def test_a_result_json_linked_to_nowhere_is_a_result(tmp_path):
    """A ``result.json`` that is a symbolic link to a missing file is still a file in the point's
    folder: without resume the point is refused (nothing overwritten); with resume=true it is moved
    aside like any record that cannot be read, and the point runs (it crashed the point's worker
    with a traceback before: the link looked like no record, and the exclusive create failed)."""
    out = tmp_path / "point"
    out.mkdir()
    (out / "result.json").symlink_to(tmp_path / "nowhere.json")
    refused = run_point(BASE, out)
    assert refused["status"] == "invalid" and "already holds a result.json" in refused["error"]
    assert (out / "result.json").is_symlink()
    rec = run_point({**BASE, "resume": True}, out)
    assert rec["status"] == "compiled" and rec["valid"], rec["error"]
    moved = _previous(out)
    assert len(moved) == 1 and moved[0].is_symlink() and rec["previous"][0]["record"] == moved[0].name
    assert not (out / "result.json").is_symlink() and json.loads((out / "result.json").read_text())["valid"]


def test_previous_tag_pattern_matches_the_tags_previous_tag_makes(tmp_path):
    """previous_kept_by finds set-aside records by :func:`previous_tag_pattern`: it must match what
    :func:`previous_tag` makes, also with the suffix of a second move in the same second."""
    import os
    import re

    from gemmlab.run.store import previous_tag, previous_tag_pattern
    first = previous_tag(tmp_path)
    (tmp_path / f"result.{first}.json").write_text("{}")
    second = previous_tag(tmp_path)
    assert second != first
    for tag in (first, second):
        assert re.fullmatch(previous_tag_pattern(os.getpid()), tag) and re.fullmatch(previous_tag_pattern(), tag)
    assert not re.fullmatch(previous_tag_pattern(os.getpid() + 1), first)


def test_resume_finds_folders_named_by_their_overrides(cli, tmp_path):
    """``hydra.sweep.subdir=${hydra.job.override_dirname}`` names each point folder by its
    overrides; resume=true (and the cache and isolation settings) change no measurement and are
    left out of the name, so the resumed sweep finds the same folders (a new-user trial got new
    folders named ``...,resume=True`` and every point measured again)."""
    sweep = tmp_path / "sw"
    common = ["-m", "kernel=naive", "kernel.BX=16,32", "shape=[8,8,8]", "mode=compile", f"hydra.sweep.dir={sweep}",
              "hydra.sweep.subdir=${hydra.job.override_dirname}"]
    first = cli(common, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    folders = sorted(p.parent.name for p in sweep.glob("*/result.json"))
    assert folders == ["kernel.BX=16,kernel=naive,mode=compile,shape=[8,8,8]",
                       "kernel.BX=32,kernel=naive,mode=compile,shape=[8,8,8]"], folders
    again = cli([*common, "resume=true", "cache.enabled=false", "isolation.timeout_s=600"], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(p.parent.name for p in sweep.glob("*/result.json")) == folders
    assert again.stdout.count("skipped, it already holds a valid result (resume=true)") == 2, again.stdout


def test_cli_resume_after_reordering_finds_records_of_points_nested_deeper(cli, tmp_path):
    """``hydra.sweep.subdir=a/b/${hydra.job.num}`` puts the points two levels below the sweep
    folder: a reordered resume still finds each config's record there (``resumed_from`` relative
    to the sweep folder) instead of measuring again (a new-user trial)."""
    sweep = tmp_path / "sw"
    common = ["shape=[8,8,8]", "mode=compile", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=a/b/${hydra.job.num}"]
    first = cli(["-m", "kernel=naive,tiled", *common], tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    again = cli(["-m", "kernel=small_tile,naive,tiled", *common, "resume=true"], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    recs = [json.loads((sweep / "a" / "b" / n / "result.json").read_text()) for n in ("0", "1", "2")]
    assert [r["kernel"]["name"] for r in recs] == ["small_tile", "naive", "tiled"]
    assert not recs[0].get("resumed")
    for rec, n in ((recs[1], "0"), (recs[2], "1")):
        assert rec.get("resumed") and rec["resumed_from"].startswith(f"a/b/{n}/result.previous-"), rec.get("resumed_from")
        assert (sweep / rec["resumed_from"]).is_file()


def test_a_sweep_whose_subdir_names_one_folder_for_every_point_is_refused(cli, tmp_path):
    """``hydra.sweep.subdir=.`` (or any name without an interpolation) puts every point into one
    folder: the second point found the first's result and the sweep ended half-done; now one line
    before anything is written."""
    proc = cli(["-m", "kernel=naive,tiled", "mode=compile", f"hydra.sweep.dir={tmp_path / 'sw'}", "hydra.sweep.subdir=."],
               tmp_path)
    assert proc.returncode == 2 and not (tmp_path / "sw").exists(), proc.stdout + proc.stderr
    assert proc.stderr.strip().startswith("gemmlab: error: hydra.sweep.subdir: '.' names the same folder for every "
                                          "point"), proc.stderr


@pytest.mark.parametrize("meanwhile", ["rewritten", "moved"])
def test_a_reordered_resume_with_points_running_at_once_adopts_only_its_own_config(tmp_path, monkeypatch, meanwhile):
    """A swapped sweep resumed with points running at once (hydra/launcher=joblib): point 1 found
    its config's record in folder 0, and before it copied it, point 0 set that record aside and
    adopted point 1's old one there ("rewritten"), or only set it aside ("moved"). Point 1 then
    copied the other config's record (the summary listed it twice and dropped a point) or failed
    with FileNotFoundError and wrote no record (a point dropped). Now an adopted record is checked
    to be of the point's own config as read, and the search is made again: each folder holds its
    own config's record, the summary lists each point once, in the sweep's order."""
    from gemmlab.results.summary import collect
    from gemmlab.run import pipeline, store
    sweep = tmp_path / "sw"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    a, b = BASE, {**BASE, "shape": [9, 9, 9]}
    assert run_point(a, sweep / "0")["valid"] and run_point(b, sweep / "1")["valid"]
    pipeline.clear_cache()
    real = store._matching_sibling
    interleaved = []

    def matching_sibling(out_dir, wanted):
        found = real(out_dir, wanted)
        if out_dir.name == "1" and found is not None and not interleaved:  # point 0 runs right now
            interleaved.append(found)
            if meanwhile == "rewritten":
                assert run_point({**b, "resume": True}, sweep / "0")["resumed_from"].startswith("1/result.previous-")
            else:
                store.keep_previous(sweep / "0")
        return found

    monkeypatch.setattr(store, "_matching_sibling", matching_sibling)
    rec = run_point({**a, "resume": True}, sweep / "1")
    assert interleaved == [sweep / "0" / "result.json"]
    assert rec["valid"] and rec["config"]["shape"] == [8, 8, 8], rec.get("error")
    assert json.loads((sweep / "1" / "result.json").read_text())["config"]["shape"] == [8, 8, 8]
    if meanwhile == "rewritten":
        assert [r["shape"] for r in collect(sweep)] == ["9x9x9", "8x8x8"]
