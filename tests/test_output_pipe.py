"""Issue 11.4: output into a pipe whose reader is gone (``gemmlab ... | head -3``, ``gemmlab --help
| true``) must not print a BrokenPipe traceback, and the results must be complete. Subprocesses:
the broken pipe has to be the real standard output of the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import REPO_ROOT, command_env  # noqa: E402  (the checkout, defined once)


def run_into_closed_pipe(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run gemmlab with stdout a pipe whose read end is already closed (every write: EPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = command_env()
    try:
        proc = subprocess.run([sys.executable, "-m", "gemmlab", *args], cwd=cwd, env=env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    return proc


def test_sweep_into_a_closed_pipe_completes(tmp_path):
    sweep = tmp_path / "sw"
    proc = run_into_closed_pipe(["-m", "mode=compile", "kernel=naive,tiled", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert [json.loads((sweep / i / "result.json").read_text())["status"] for i in "01"] == ["compiled"] * 2
    assert "| 1 | tiled |" in (sweep / "summary.md").read_text()
    assert (sweep / "summary.csv").is_file()


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_help_into_a_closed_pipe(tmp_path, args):
    proc = run_into_closed_pipe(args, tmp_path)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr


def _module_into_closed_pipe(module: str, args: list, cwd: Path) -> subprocess.CompletedProcess:
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = command_env()  # matplotlib on Agg
    try:
        return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)


H200 = REPO_ROOT / "tests" / "data" / "h200"
#: the report's input: one record, a failed point (its table and notes go to the closed pipe as the
#: 13 records' do; no plot to draw: matplotlib's 4 plots of the 13 records were ~1.8 of its 2.3 CPU s)
REPORTED = H200 / "broken-tiled_drop_last_chunk"


@pytest.mark.parametrize("module, args, code", [
    ("gemmlab.cli.tune", ["show"], 0),
    ("gemmlab.cli.tune", ["choose", "1", "4096", "4096"], 0),
    ("gemmlab.results.families", [H200], 0),
    ("gemmlab.results.report", [REPORTED, "--out", "{tmp}/rep"], 0),
    ("gemmlab.results.compare", [H200 / "naive-256", H200 / "naive-256"], 0),
], ids=["tune-show", "tune-choose", "families", "report", "compare"])
def test_every_command_into_a_closed_pipe(tmp_path, module, args, code):
    """``gemmlab-tune show | head -1`` and friends: no traceback, the command's own exit status
    (for gemmlab-compare 1 would mean a regression)."""
    proc = _module_into_closed_pipe(module, [str(a).replace("{tmp}", str(tmp_path)) for a in args], tmp_path)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == code, proc.stderr


# --- a standard stream closed (>&-, 2>&-) or on a full device (> /dev/full) --------------------------

def test_closed_stderr_runs_the_command(tmp_path):
    """``gemmlab ... 2>&-``: Python starts with ``sys.stderr`` None; every command exited 1 with
    nothing said (its first ``sys.stderr.isatty()``). Now the point runs and the exit status says
    how it went: 0 for a good run (its record written), 2 for bad input."""
    def run(*args):
        return subprocess.run([sys.executable, "-m", "gemmlab", *args], cwd=tmp_path, env=command_env(),
                              stdout=subprocess.PIPE, text=True, timeout=300, preexec_fn=lambda: os.close(2))
    proc = run("kernel=tiled", "mode=compile", "shape=[63,65,33]", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 0, proc.stdout
    assert json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "compiled"
    assert run("kernel=nosuch", "mode=compile").returncode == 2


def test_output_onto_a_full_device_is_one_warning(tmp_path):
    """``gemmlab ... > /dev/full`` (or a full disk under a redirected file): one warning line on
    stderr instead of an ``OSError: [Errno 28]`` traceback; the point still runs and keeps its
    record, the exit status is the command's own."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "gemmlab", "kernel=tiled", "mode=compile", "shape=[63,65,33]",
                               f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, env=command_env(), stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    assert "Traceback" not in proc.stderr and proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "standard output" in line]
    assert warnings == ["gemmlab: warning: standard output: No space left on device; the rest of it is dropped "
                        "(records and report files are written as usual)"], proc.stderr
    assert json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "compiled"


def test_guard_streams_gives_a_missing_stream_a_sink_and_says_a_write_error_once(monkeypatch, capsys):
    """In-process: a stream Python started without (None) becomes /dev/null; a stdout write that
    fails with anything but EPIPE is said once on stderr, then dropped (EPIPE stays silent)."""
    import errno

    from gemmlab.console import PipeSafeStream, guard_streams
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "stderr", None)
    guard_streams("gemmlab-report")
    assert isinstance(sys.stdout, PipeSafeStream)
    print("dropped")
    print("dropped too", file=sys.stderr)

    class Failing:
        def __init__(self, code):
            self.code = code

        def write(self, text):
            raise (BrokenPipeError if self.code == errno.EPIPE else OSError)(self.code, os.strerror(self.code))

        def flush(self):
            self.write("")

        def fileno(self):
            raise ValueError("no descriptor")

    monkeypatch.undo()
    for code, said in ((errno.ENOSPC, 1), (errno.EPIPE, 0), (errno.EIO, 1)):
        stream = PipeSafeStream(Failing(code), "gemmlab-report")
        assert stream.write("a line\n") == 7 and stream.write("another\n") == 8
        stream.flush()
        err = capsys.readouterr().err.splitlines()
        assert len(err) == said and all(line.startswith("gemmlab-report: warning: standard output: ") for line in err), err


@pytest.mark.parametrize("module, args", [
    ("gemmlab", ["kernel=nope", "mode=compile"]),
    ("gemmlab.results.report", ["/nonexistent", "--out", "R"]),
])
def test_bad_input_with_stderr_on_a_full_device_still_exits_2(tmp_path, module, args):
    """``2>/dev/full``: the one-line error cannot be written; Python's attempt to print the failure
    made the exit status 1 (a second trial). The status stays 2, bad input."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", module, *args], cwd=tmp_path, env=command_env(),
                              stdout=subprocess.PIPE, stderr=full, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout
