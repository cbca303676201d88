"""The output folder of a command (gemmlab.run.folders; gemmlab.cli.folders claims it for gemmlab): one command at a time, and a folder that
cannot be used said in one line; in a sweep such a point costs only itself."""

from __future__ import annotations

import errno
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import command_env
from gemmlab.run import folders


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gemmlab: error: ")]


#: a process holding the lock of the folder given as its argument (as a running command does,
#: fcntl.lockf) until its standard input closes; says "held" once it holds it
LOCK_HOLDER = """import fcntl, sys
with open(sys.argv[1], "a+") as held:
    fcntl.lockf(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_folder_in_use_by_another_command_is_refused_before_anything_is_written(tmp_path, cli):
    """The folder's lock held by another process (a running command's: fcntl.lockf locks are a
    process's, so one held by this process would not refuse a command run in it): a run and a
    sweep into it are refused in one line, exit 2, nothing written; once the holder ends, a run
    there works. The commands run in this process (``cli``'s default; two gemmlab processes cost
    about 1 CPU s each), the holder is a small Python process."""
    folder = tmp_path / "runs" / "race"
    folder.mkdir(parents=True)
    (folder / "kernel.sass").write_text("the first command's SASS\n")
    holder = subprocess.Popen([sys.executable, "-I", "-c", LOCK_HOLDER, str(folder / folders.LOCK_NAME)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:  # another command holds the folder
        assert holder.stdout.readline() == "held\n"
        r = cli(["kernel=naive", "mode=compile", "hydra.run.dir=runs/race"], tmp_path)
        s = cli(["-m", "kernel=naive,tiled", "mode=compile", "hydra.sweep.dir=runs/race"], tmp_path)
    finally:
        holder.communicate(timeout=60)  # its stdin closed: it ends, and its lock with it
    assert holder.returncode == 0
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert _error_lines(r.stderr) == [r.stderr.strip()]
    assert r.stderr.startswith("gemmlab: error: hydra.run.dir: runs/race is in use by another gemmlab command")
    assert s.returncode == 2 and s.stderr.startswith("gemmlab: error: hydra.sweep.dir: runs/race is in use"), s.stderr
    assert sorted(p.name for p in folder.iterdir()) == [folders.LOCK_NAME, "kernel.sass"]  # nothing written
    assert (folder / "kernel.sass").read_text() == "the first command's SASS\n"
    # released (the holder ended): the folder is usable again
    ok = cli(["kernel=naive", "mode=compile", "hydra.run.dir=runs/race"], tmp_path)
    assert ok.returncode == 0, ok.stderr


def test_two_commands_at_once_into_one_folder_leave_one_consistent_record(tmp_path):
    """The tester's race: both exited 0 and the record said tiled over gemm_naive's SASS. (Each
    point runs in its command's process, ``isolation.process=false``: the folder is claimed and the
    record written by the command either way, and a point worker per command adds only an
    interpreter start.)"""
    procs = [subprocess.Popen([sys.executable, "-m", "gemmlab", f"kernel={k}", "mode=compile", "isolation.process=false",
                               "hydra.run.dir=runs/race2"], cwd=tmp_path, env=command_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in ("tiled", "naive")]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    loser = outs[[p.returncode for p in procs].index(2)]
    assert "Traceback" not in loser[1] and len(_error_lines(loser[1])) == 1, loser
    record = json.loads((tmp_path / "runs/race2/result.json").read_text())
    sass = (tmp_path / "runs/race2/kernel.sass").read_text()
    name = record["kernel"]["name"]
    assert f"gemm_{name}" in sass and f"gemm_{'naive' if name == 'tiled' else 'tiled'}" not in sass


def test_a_file_where_the_run_folder_goes_is_one_line(tmp_path, cli):
    (tmp_path / "afile").write_text("x\n")
    for value, says in (("afile", "afile is a file, not a folder"), ("afile/x", "[Errno 20] Not a directory")):
        r = cli(["mode=compile", f"hydra.run.dir={value}"], tmp_path)
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr and _error_lines(r.stderr) == [r.stderr.strip()]
        assert r.stderr.startswith("gemmlab: error: hydra.run.dir: ") and says in r.stderr, r.stderr
    assert (tmp_path / "afile").read_text() == "x\n"


def test_a_full_disk_while_hydra_writes_the_run_folder_names_the_folder(tmp_path, cli, monkeypatch):
    from hydra.core import utils as hydra_utils

    def full(cfg, filename, output_dir):
        raise OSError(errno.ENOSPC, "No space left on device", str(Path(output_dir) / filename))
    monkeypatch.setattr(hydra_utils, "_save_config", full)
    r = cli(["mode=compile", "hydra.run.dir=runs/full"], tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and _error_lines(r.stderr) == [r.stderr.strip()], r.stderr
    assert r.stderr.startswith("gemmlab: error: hydra.run.dir: cannot create or write ") and "[Errno 28]" in r.stderr


def test_a_sweep_point_whose_folder_cannot_be_made_costs_only_that_point(tmp_path, cli):
    sweep = tmp_path / "runs" / "fz"
    sweep.mkdir(parents=True)
    (sweep / "1").write_text("x\n")
    r = cli(["-m", "kernel=tiled,naive,small_tile", "mode=compile", "hydra.sweep.dir=runs/fz"], tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert (sweep / "0" / "result.json").is_file() and (sweep / "2" / "result.json").is_file()
    assert (sweep / "1").read_text() == "x\n"
    lines = _error_lines(r.stderr)
    assert lines and all(line.startswith("gemmlab: error: hydra.sweep.dir: point #1: runs/fz/1 is a file") for line in lines)
    assert (sweep / "summary.md").is_file()
    progress = [line.split("]")[0] + "]" for line in r.stderr.splitlines() if re.match(r"\[\d+/", line)]
    assert progress == ["[1/3]", "[2/3]", "[3/3]"], r.stderr  # the point without a folder is counted (was [2/3] last)
    assert "] no record: " in r.stderr


def test_a_sweep_into_a_runs_folder_and_a_run_into_a_sweeps_folder_are_refused(tmp_path, cli):
    """A sweep's points inside one run's folder are that run's children, which the sweep's summary
    does not list (new-user trial: '1 point' for a sweep that ran 2); a run into a sweep's folder
    would adopt the sweep's points. Both refused in one line before anything is written; a resume
    into either is refused the same way; the records there are untouched."""
    run = cli(["kernel=naive", "mode=compile", "shape=[8,8,8]", "hydra.run.dir=runs/one"], tmp_path)
    sweep = cli(["-m", "kernel=naive,tiled", "mode=compile", "shape=[8,8,8]", "hydra.sweep.dir=runs/sw"], tmp_path)
    assert run.returncode == 0 and sweep.returncode == 0, run.stderr + sweep.stderr
    before = {p: p.read_bytes() for p in (tmp_path / "runs").rglob("*") if p.is_file() and p.name != ".gemmlab.lock"}
    for args, says in (
            (["-m", "kernel=naive,tiled", "hydra.sweep.dir=runs/one"], "hydra.sweep.dir: runs/one is one run's folder "
             "(it holds result.json); give the sweep a folder of its own"),
            (["-m", "kernel=naive,tiled", "hydra.sweep.dir=runs/one", "resume=true"], "hydra.sweep.dir: runs/one is one run's"),
            (["kernel=naive", "hydra.run.dir=runs/sw"], "hydra.run.dir: runs/sw is a sweep's folder (its points hold "
             "result.json files); give the run a folder of its own"),
            (["kernel=naive", "hydra.run.dir=runs/sw", "resume=true"], "hydra.run.dir: runs/sw is a sweep's folder")):
        r = cli(args + ["mode=compile", "shape=[8,8,8]"], tmp_path)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "Traceback" not in r.stderr and _error_lines(r.stderr) == [r.stderr.strip()], r.stderr
        assert r.stderr.startswith(f"gemmlab: error: {says}"), r.stderr
    after = {p: p.read_bytes() for p in (tmp_path / "runs").rglob("*") if p.is_file() and p.name != ".gemmlab.lock"}
    assert after == before


def test_a_sweep_inside_another_commands_folder_is_refused(tmp_path, cli):
    """A new-user trial: a sweep into sw/newsweep (inside another sweep), r1/sub (inside a run),
    tune/newsw (inside a tuning sweep) and gemmlab-tune sweep --out tune/tiny ran, and the outer
    sweep's resume then summarised 8 points instead of 6; a run straight into a tuning sweep's
    folder (its points 3 levels down) ran too, and the tuning tools no longer saw the sweep. Each is
    one line, exit 2, before anything is written; the earlier records are untouched."""
    from gemmlab.cli import tune
    made = [cli(["kernel=naive", "mode=compile", "shape=[8,8,8]", "hydra.run.dir=runs/r1"], tmp_path),
            cli(["-m", "kernel=naive,tiled", "mode=compile", "shape=[8,8,8]", "hydra.sweep.dir=runs/sw"], tmp_path)]
    assert [r.returncode for r in made] == [0, 0], [r.stderr for r in made]
    suite = tmp_path / "suite.yaml"
    suite.write_text("families:\n  tiny: [[16, 16, 16]]\n")
    tune_argv = ["sweep", "--suite", str(suite), "--mode", "compile", "--baseline", "none", "--kernels", "tiled"]
    assert tune.main([*tune_argv, "--out", str(tmp_path / "runs" / "tune")]) == 0
    snapshot = lambda: {p: p.read_bytes() for p in (tmp_path / "runs").rglob("*")  # noqa: E731
                        if p.is_file() and p.name != ".gemmlab.lock"}
    before = snapshot()
    for args, says in (
            (["-m", "kernel=naive,tiled", "hydra.sweep.dir=runs/sw/newsweep"],
             "hydra.sweep.dir: runs/sw/newsweep lies inside {root}/runs/sw, the folder of another command's sweep"),
            (["-m", "kernel=naive,tiled", "hydra.sweep.dir=runs/r1/sub"],
             "hydra.sweep.dir: runs/r1/sub lies inside {root}/runs/r1, the folder of another command's run"),
            (["-m", "kernel=naive,tiled", "hydra.sweep.dir=runs/tune/newsw"],
             "hydra.sweep.dir: runs/tune/newsw lies inside {root}/runs/tune, the folder of another command's tuning sweep"),
            (["kernel=naive", "hydra.run.dir=runs/tune"], "hydra.run.dir: runs/tune is a sweep's folder"),
            (["-m", "kernel=naive,tiled", "hydra.sweep.dir=runs/tune", "resume=true"],  # took over the tuning sweep
             "hydra.sweep.dir: runs/tune is a tuning sweep's folder (gemmlab-tune sweep --out)"),
            (["kernel=naive", "hydra.run.dir=runs/tune/tiny/16x16x16/x", "resume=true"],
             "hydra.run.dir: runs/tune/tiny/16x16x16/x lies inside {root}/runs/tune, the folder of another command's "
             "tuning sweep"),
            (["kernel=naive", "hydra.run.dir=runs/r1/x"],
             "hydra.run.dir: runs/r1/x lies inside {root}/runs/r1, the folder of another command's run")):
        r = cli(args + ["mode=compile", "shape=[8,8,8]"], tmp_path)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "Traceback" not in r.stderr and _error_lines(r.stderr) == [r.stderr.strip()], r.stderr
        assert r.stderr.startswith(f"gemmlab: error: {says.format(root=tmp_path)}"), r.stderr
    assert tune.main([*tune_argv, "--out", str(tmp_path / "runs" / "tune" / "tiny")]) == 2
    assert snapshot() == before
    assert not (tmp_path / "runs" / "sw" / "newsweep").exists() and not (tmp_path / "runs" / "r1" / "sub").exists()


def test_refused_commands_write_nothing_into_earlier_results(tmp_path, cli):
    """Second new-user trial: a run into a run's folder or a sweep into a sweep's, both without
    resume=true, a run into a sweep whose points lie 3 folders deep or into one point's folder,
    were refused only after Hydra had moved the earlier .hydra aside and rewritten it (and
    multirun.yaml): each is now one line, exit 2, every file byte-identical."""
    deep = "hydra.sweep.subdir=a/b/${hydra.job.num}"
    made = [cli(["kernel=naive", "mode=compile", "shape=[8,8,8]", "hydra.run.dir=runs/one"], tmp_path),
            cli(["-m", "kernel=naive,tiled", "mode=compile", "shape=[8,8,8]", "hydra.sweep.dir=runs/sw"], tmp_path),
            cli(["-m", "kernel=naive", "mode=compile", "shape=[8,8,8]", "hydra.sweep.dir=runs/deep", deep], tmp_path)]
    assert [r.returncode for r in made] == [0, 0, 0], [r.stderr for r in made]
    snapshot = lambda: {p: p.read_bytes() for p in (tmp_path / "runs").rglob("*")  # noqa: E731
                        if p.is_file() and p.name != ".gemmlab.lock"}
    before = snapshot()
    for args, says in (
            (["kernel=tiled", "hydra.run.dir=runs/one"], "hydra.run.dir: runs/one already holds a result.json; gemmlab "
             "never overwrites a result: add resume=true"),
            (["-m", "kernel=tiled,naive", "hydra.sweep.dir=runs/sw"], "hydra.sweep.dir: runs/sw already holds a "
             "result.json of an earlier sweep; gemmlab never overwrites a result: add resume=true"),
            (["kernel=naive", "hydra.run.dir=runs/deep"], "hydra.run.dir: runs/deep is a sweep's folder"),
            (["kernel=naive", "hydra.run.dir=runs/sw/7"], "hydra.run.dir: runs/sw/7 is inside the sweep folder ")):
        r = cli(args + ["mode=compile", "shape=[8,8,8]"], tmp_path)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "Traceback" not in r.stderr and _error_lines(r.stderr) == [r.stderr.strip()], r.stderr
        assert r.stderr.startswith(f"gemmlab: error: {says}"), r.stderr
    assert snapshot() == before and not (tmp_path / "runs" / "sw" / "7").exists()
    again = cli(["-m", "kernel=naive,tiled", "mode=compile", "shape=[8,8,8]", "hydra.sweep.dir=runs/sw", "resume=true"],
                tmp_path)
    assert again.returncode == 0 and again.stdout.count("skipped, it already holds a valid result") == 2, again.stdout


def test_a_runs_own_sanitizer_record_does_not_make_its_folder_a_sweeps():
    """A run folder whose record was set aside but whose sanitizer child run's record is there
    (``sanitizer-<tool>/run/result.json``) is still a run's folder."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        run = Path(d)
        (run / "sanitizer-racecheck" / "run").mkdir(parents=True)
        (run / "sanitizer-racecheck" / "run" / "result.json").write_text("{}")
        assert folders.other_kind_of_folder(run, "run") is None
        (run / "0").mkdir()
        (run / "0" / "result.json").write_text("{}")
        assert "is a sweep's folder" in folders.other_kind_of_folder(run, "run")


def test_a_run_folder_under_a_missing_system_folder_is_bad_input(tmp_path):
    """ENOENT while making the folder (its parent cannot be made, e.g. under /proc) is the user's
    choice of folder, exit 2, not 'free some space'."""
    err = folders.folder_error("hydra.run.dir", "/proc/nope/x", FileNotFoundError(errno.ENOENT, "No such file", "/proc/nope"))
    assert err.code == 2 and err.message.endswith("give a folder gemmlab can create and write"), err.message


@pytest.mark.parametrize("code,exit_status", [(errno.EROFS, 2), (errno.EACCES, 2), (errno.ENOSPC, 1)])
def test_folder_error_names_the_field_and_the_os_reason(tmp_path, code, exit_status):
    import os
    err = folders.folder_error("hydra.sweep.dir", tmp_path / "x", OSError(code, os.strerror(code), str(tmp_path / "x")))
    assert err.code == exit_status
    assert err.message.startswith(f"hydra.sweep.dir: cannot create or write {tmp_path / 'x'}: [Errno {code}] ")


def test_a_record_that_cannot_be_written_costs_only_its_point(tmp_path, cli, monkeypatch):
    """The tester's full disk: the worker's write_record raised (a traceback) and the sweep died at
    the next point. Now the point's record says why it is not kept and the next point runs."""
    from gemmlab.stages import record as record_stage
    own = record_stage.write_record

    def full_for_point_0(record, out_dir):
        if out_dir.name == "0":
            raise OSError(errno.ENOSPC, "No space left on device", str(out_dir / ".result.json.tmp"))
        return own(record, out_dir)
    monkeypatch.setattr(record_stage, "write_record", full_for_point_0)
    r = cli(["-m", "kernel=naive,tiled", "mode=compile", "shape=[8,8,8]", "isolation.process=false",
             "hydra.sweep.dir=runs/full"], tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "runs/full/0/result.json").exists()
    assert json.loads((tmp_path / "runs/full/1/result.json").read_text())["status"] == "compiled"
    lines = _error_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith("gemmlab: error: out_dir: cannot write ") and "[Errno 28]" in lines[0]
    assert "this point's record is not kept (was: compiled)" in lines[0]


def test_a_read_only_sweep_point_folder_costs_only_that_point(tmp_path, cli, monkeypatch):
    """The tester's read-only point folder: Hydra's log file handler failed ('ValueError: Unable to
    configure handler' from OSError errno 30) and the sweep died with a traceback."""
    from hydra.core import utils as hydra_utils
    own = hydra_utils.configure_log

    def read_only_point_1(log_config, verbose_config=False):
        from hydra.core.hydra_config import HydraConfig
        if HydraConfig.initialized() and HydraConfig.get().job.get("num") == 1:
            try:
                raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "runs/ro/1/app.log"))
            except OSError as exc:
                raise ValueError("Unable to configure handler 'file'") from exc
        return own(log_config, verbose_config)
    monkeypatch.setattr(hydra_utils, "configure_log", read_only_point_1)
    r = cli(["-m", "kernel=tiled,naive,small_tile", "mode=compile", "hydra.sweep.dir=runs/ro"], tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert (tmp_path / "runs/ro/0/result.json").is_file() and (tmp_path / "runs/ro/2/result.json").is_file()
    lines = _error_lines(r.stderr)
    assert lines and all(line.startswith("gemmlab: error: hydra.sweep.dir: point #1: cannot create or write ")
                         and "[Errno 30] Read-only file system" in line for line in lines), lines


@pytest.mark.parametrize("where", ["the-folder", "above-it", "link-to-nowhere"])
def test_a_file_in_a_points_place_is_said_as_such(tmp_path, where):
    """A point whose folder is a regular file (or lies under one; a link to nowhere) cannot keep a
    record: run_point said it "received a result.json from another process while this point ran",
    a wrong cause (a tuning sweep's points come straight here). Now one line saying the file is in
    the way, nothing run, the file untouched."""
    from gemmlab.run.pipeline import run_point
    plain = tmp_path / "p"
    if where == "link-to-nowhere":
        plain.symlink_to(tmp_path / "nowhere")
    else:
        plain.write_text("mine")
    out = plain if where != "above-it" else plain / "a" / "0"
    rec = run_point({"kernel": {"name": "naive"}, "shape": [8, 8, 8], "mode": "compile"}, out)
    assert rec["status"] == "invalid" and not rec["valid"]
    assert rec["error"].startswith(f"out_dir: {plain} is a file, not a folder") and "another process" not in rec["error"]
    assert "\n" not in rec["error"] and "compile" not in rec
    assert plain.is_symlink() if where == "link-to-nowhere" else plain.read_text() == "mine"


def test_a_point_folder_that_becomes_a_file_as_it_runs_costs_only_that_point(tmp_path, cli, monkeypatch):
    """Point 0's folder replaced by a regular file while it ran: its record could not be written and
    the line blamed "a result.json from another process". Now the line says the folder is a file;
    the next point runs and keeps its record."""
    import shutil

    from gemmlab.run import pipeline
    own = pipeline.Run.execute

    def folder_becomes_a_file(self):
        own(self)
        if self.out_dir.name == "0":
            shutil.rmtree(self.out_dir)
            self.out_dir.write_text("in the way")
    monkeypatch.setattr(pipeline.Run, "execute", folder_becomes_a_file)
    r = cli(["-m", "kernel=naive,tiled", "mode=compile", "shape=[8,8,8]", "isolation.process=false",
             "hydra.sweep.dir=runs/f"], tmp_path)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    lines = _error_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"gemmlab: error: out_dir: {tmp_path / 'runs/f/0'} is a file, not a "
                                                   "folder"), lines
    assert (tmp_path / "runs/f/0").read_text() == "in the way"
    assert json.loads((tmp_path / "runs/f/1/result.json").read_text())["status"] == "compiled"


def test_a_run_into_a_big_folder_walks_only_as_deep_as_a_tuning_sweeps_points(tmp_path, monkeypatch):
    """A run's folder without a record of its own is a sweep's when records lie below it (a tuning
    sweep's 3 levels down). The check walked the whole tree (rglob): on a huge unrelated folder
    that was start-up work. Now nothing deeper than 3 levels is listed, and a record there still
    makes the folder a sweep's."""
    import os
    big = tmp_path / "big"
    deep = big / "a" / "b" / "c" / "d" / "e"
    deep.mkdir(parents=True)
    (deep / "result.json").write_text("{}")  # 5 levels down: no tuning sweep's point
    listed = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path=".": listed.append(os.path.abspath(path)) or real(path))
    assert folders.other_kind_of_folder(big, "run") is None
    assert listed and max(len(Path(p).relative_to(big).parts) for p in listed) <= 3, listed
    assert str(big / "a" / "b" / "c" / "d") not in listed
    point = big / "fam" / "8x8x8" / "tiled"  # a tuning sweep's point, 3 levels down
    point.mkdir(parents=True)
    (point / "result.json").write_text("{}")
    assert "is a sweep's folder" in folders.other_kind_of_folder(big, "run")
    assert [p.relative_to(big).as_posix() for p in folders.records_below(big, 3)] == ["fam/8x8x8/tiled/result.json"]


def test_an_optuna_searchs_folder_is_no_tuning_sweeps(tmp_path):
    """A new-user trial: an Optuna search (Hydra's Optuna sweeper writes no multirun.yaml) stopped
    with Ctrl-C said to re-run with hydra.sweep.dir=... resume=true, and that was refused as "a
    tuning sweep's folder (gemmlab-tune sweep --out)" (claimed, records below, no multirun.yaml);
    its points' .hydra folders, or its summary, tell it from a tuning sweep's, which has neither."""
    from gemmlab.run.folders import other_kind_of_folder
    search = tmp_path / "search"
    (search / "0" / ".hydra").mkdir(parents=True)
    (search / "0" / "result.json").write_text("{}")
    (search / ".gemmlab.lock").write_text("")
    assert other_kind_of_folder(search, "sweep", resume=True) is None  # interrupted: no summary yet
    (search / "summary.md").write_text("")
    assert other_kind_of_folder(search, "sweep", resume=True) is None
    tuning = tmp_path / "tune"
    (tuning / "tiny" / "16x16x16" / "tiled-BM64").mkdir(parents=True)
    (tuning / "tiny" / "16x16x16" / "tiled-BM64" / "result.json").write_text("{}")
    (tuning / ".gemmlab.lock").write_text("")
    assert "is a tuning sweep's folder" in other_kind_of_folder(tuning, "sweep", resume=True)
