"""gemmlab.stages.sanitizer without compute-sanitizer: the summary parser, and ``run`` with the tool
missing or replaced by a small fake script that writes a log as the real tool does."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from gemmlab.stages import sanitizer
from gemmlab.stages.sanitizer import ERROR_EXIT, parse_summary


@pytest.mark.parametrize("text, expected", [
    ("========= ERROR SUMMARY: 0 errors", 0),
    ("========= ERROR SUMMARY: 3 errors", 3),
    ("========= ERROR SUMMARY: 1 error", 1),
    ("========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)", 2),
    ("========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)", 0),
    ("========= COMPUTE-SANITIZER\n========= Program hit cudaErrorLaunchFailure\n========= ERROR SUMMARY: 12 errors\n",
     12),
    ("", None),
    ("========= COMPUTE-SANITIZER\nsome program output\n", None),
])
def test_parse_summary(text, expected):
    assert parse_summary(text) == expected


def test_racecheck_summary_wins_over_error_summary():
    text = "========= RACECHECK SUMMARY: 4 hazards displayed (4 errors, 0 warnings)\n========= ERROR SUMMARY: 0 errors\n"
    assert parse_summary(text) == 4


def test_run_without_tool_is_unavailable(monkeypatch, tmp_path):
    monkeypatch.setattr(sanitizer, "find_tool", lambda: None)
    result = sanitizer.run("memcheck", {"kernel": {"name": "tiled"}}, tmp_path)
    assert result["verdict"] == "unavailable"
    assert result["tool"] == "memcheck"
    assert result["errors"] is None
    assert "compute-sanitizer" in result["message"]
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written
    json.dumps(result, allow_nan=False)


def test_find_tool_prefers_path(monkeypatch, tmp_path):
    exe = tmp_path / "compute-sanitizer"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert sanitizer.find_tool() == str(exe)


def fake_tool(tmp_path: Path, summary: str, exit_code: int, child_status: str | None = "checked") -> str:
    """A stand-in for compute-sanitizer: records its argv, writes ``summary`` to --log-file and,
    like the real child, a result.json with ``child_status`` in the child's run folder."""
    script = tmp_path / "fake-compute-sanitizer"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys
        argv = sys.argv[1:]
        log = argv[argv.index("--log-file") + 1]
        open(log, "w").write({summary!r})
        open({str(tmp_path / "argv.json")!r}, "w").write(json.dumps(argv))
        import os
        if {child_status!r} is not None:
            os.makedirs(argv[-1], exist_ok=True)
            open(os.path.join(argv[-1], "result.json"), "w").write(json.dumps({{"status": {child_status!r}}}))
        sys.exit({exit_code})
        """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.mark.parametrize("summary, exit_code, verdict, errors", [
    ("========= ERROR SUMMARY: 0 errors\n", 0, "clean", 0),
    ("========= ERROR SUMMARY: 3 errors\n", ERROR_EXIT, "errors", 3),
    ("========= ERROR SUMMARY: 0 errors\n", ERROR_EXIT, "errors", 0),  # the exit status says errors
    ("no summary at all\n", 1, "failed", None),
])
def test_run_verdicts_with_fake_tool(monkeypatch, tmp_path, summary, exit_code, verdict, errors):
    tool_dir = tmp_path / "tool"
    tool_dir.mkdir()
    monkeypatch.setattr(sanitizer, "find_tool", lambda: fake_tool(tool_dir, summary, exit_code))
    out = tmp_path / "run"
    out.mkdir()
    cfg = {"kernel": {"name": "tiled"}, "shape": [8, 8, 8], "sanitizer": "memcheck", "baseline": "cublas",
           "mode": "run", "inputs": {"seed": 3, "draw": "device"}}
    result = sanitizer.run("memcheck", cfg, out)
    assert result["verdict"] == verdict
    assert result["errors"] == errors
    assert result["exit_status"] == exit_code
    assert result["report"] == str(out / "sanitizer-memcheck.log")
    argv = json.loads((tool_dir / "argv.json").read_text())
    assert argv[:4] == ["--tool", "memcheck", "--error-exitcode", str(ERROR_EXIT)]
    assert argv[-4:-2] == ["-m", "gemmlab.run.sanitizer_child"]
    child_cfg = json.loads(Path(argv[-2]).read_text())
    assert child_cfg["sanitizer"] is None and child_cfg["baseline"] is None  # no recursion, kernel only
    assert child_cfg["kernel"] == {"name": "tiled"} and child_cfg["mode"] == "run"
    # the inputs drawn on the host: the device check's kernels stay out of the tool's report
    assert child_cfg["inputs"] == {"seed": 3, "draw": "host"}
    json.dumps(result, allow_nan=False)


def test_racecheck_reports_all_hazards(monkeypatch, tmp_path):
    monkeypatch.setattr(sanitizer, "find_tool", lambda: fake_tool(tmp_path, "RACECHECK SUMMARY: 0 hazards displayed "
                                                                           "(0 errors, 0 warnings)\n", 0))
    result = sanitizer.run("racecheck", {"kernel": {"name": "tiled"}}, tmp_path)
    assert result["verdict"] == "clean"
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[:4] == ["--tool", "racecheck", "--racecheck-report", "all"]


def test_clean_summary_without_a_checked_child_is_failed(monkeypatch, tmp_path):
    """A tool that prints "0 errors" but whose child never checked the kernel (no GPU, a stale
    folder...) must not count as clean."""
    for status in (None, "no_gpu"):
        tool_dir = tmp_path / f"tool-{status}"
        tool_dir.mkdir()
        monkeypatch.setattr(sanitizer, "find_tool",
                            lambda: fake_tool(tool_dir, "========= ERROR SUMMARY: 0 errors\n", 0, child_status=status))
        out = tmp_path / f"run-{status}"
        out.mkdir()
        result = sanitizer.run("memcheck", {"kernel": {"name": "tiled"}, "shape": [8, 8, 8]}, out, device=3)
        assert result["verdict"] == "failed" and result["child_status"] == status
        argv = json.loads((tool_dir / "argv.json").read_text())
        child_cfg = json.loads(Path(argv[-2]).read_text())
        assert child_cfg["device"] == 3 and child_cfg["resume"] is False


def test_racecheck_hazards_and_warnings_are_counted(monkeypatch, tmp_path):
    """Issue 11.8: hazards that are warnings were reported as "errors (0 errors)"."""
    from gemmlab.stages import record as record_stage
    from gemmlab.stages.sanitizer import parse_counts
    summary = "========= RACECHECK SUMMARY: 3 hazards displayed (0 errors, 3 warnings)\n"
    assert parse_counts(summary) == {"errors": 0, "hazards": 3, "warnings": 3,
                                     "text": "3 hazards (0 errors, 3 warnings)"}
    assert parse_counts("========= ERROR SUMMARY: 1 error\n")["text"] == "1 error"
    monkeypatch.setattr(sanitizer, "find_tool", lambda: fake_tool(tmp_path, summary, ERROR_EXIT))
    result = sanitizer.run("racecheck", {"kernel": {"name": "tiled"}}, tmp_path)
    assert result["verdict"] == "errors" and result["hazards"] == 3 and result["warnings"] == 3
    text = record_stage.summary({"status": "sanitizer_errors", "sanitizer": result})
    assert "racecheck: errors (3 hazards (0 errors, 3 warnings))" in text


def test_a_sanitizer_in_mode_compile_is_noted_as_skipped(cli, tmp_path):
    """sanitizer=racecheck mode=compile was accepted silently: compute-sanitizer runs the kernel,
    so the record and the summary say it needs mode=run (as the baseline's compile-mode note does)."""
    proc = cli(["kernel=naive", "mode=compile", "sanitizer=racecheck", "shape=[8,8,8]",
                f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads((tmp_path / "run" / "result.json").read_text())
    assert rec["status"] == "compiled"
    assert rec["sanitizer"] == {"tool": "racecheck",
                                "skipped": "it runs the kernel, so it needs mode=run; not run for mode=compile"}
    assert "  sanitizer racecheck: skipped, it runs the kernel, so it needs mode=run" in proc.stdout
