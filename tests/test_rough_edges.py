"""Issue 11.8, the smaller rough edges: the interrupt message names the real sweep folder, the
progress label uses the point's job number, the summary table fits an 80-column terminal and a
zero launch-floor median divides nothing by zero (racecheck counts: test_sanitizer.py; +kernel.FOO:
test_cli_acceptance.py)."""

from __future__ import annotations

import io
import json

from omegaconf import OmegaConf
from rich.console import Console

import gemmlab.gpu.device
from fakegpu import HostGpu
from gemmlab.run import isolation
from gemmlab.cli import sweep
from gemmlab.run.pipeline import run_point


def test_interrupt_message_names_the_sweep_folder(cli, tmp_path, monkeypatch):
    real = isolation.run_point
    calls = []

    def interrupt_second(cfg, out_dir):
        calls.append(out_dir)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(cfg, out_dir)

    monkeypatch.setattr(isolation, "run_point", interrupt_second)
    sweep_dir = tmp_path / "sw"
    proc = cli(["-m", "mode=compile", "kernel=naive,tiled", f"hydra.sweep.dir={sweep_dir}"], tmp_path)
    assert proc.returncode == 130
    last = proc.stderr.strip().splitlines()[-1]
    assert "<its directory>" not in last
    assert f"hydra.sweep.dir={sweep_dir} resume=true" in last, last
    assert json.loads((sweep_dir / "0" / "result.json").read_text())["status"] == "compiled"


class FakeBar:
    def __init__(self):
        self.descriptions = []

    def update(self, task, description):
        self.descriptions.append(description)


def test_progress_label_is_the_job_number():
    progress = sweep.SweepProgress()
    progress.bar, progress.task, progress.done = FakeBar(), 0, 0
    for num in (0, 1):
        cfg = OmegaConf.create({"hydra": {"job": {"num": num}, "overrides": {"task": [f"kernel={['naive', 'tiled'][num]}"]}}})
        progress.on_job_start(cfg)
        progress.done += 1
    assert progress.bar.descriptions == ["point #0: kernel=naive", "point #1: kernel=tiled"]


def make_sweep(root, n=3):
    for i in range(n):
        (root / str(i)).mkdir(parents=True)
        rec = {"status": "wrong_result" if i == 1 else "ok", "kernel": {"name": "ladder_strip", "params":
               {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}}, "shape": {"M": 4096, "N": 4096, "K": 4096},
               "timing": {"median_ms": 1.23456, "gflops": 40000.0},
               "ratio_to_baseline": {"median_time": 1.5, "baseline": "cublas"},
               "verification": {"max_abs_error": 0.001},
               "error": "wrong result from ladder_strip: FAIL (bound): max abs err 3, 17 mismatches" if i == 1 else None}
        (root / str(i) / "result.json").write_text(json.dumps(rec))


def test_summary_table_fits_an_80_column_terminal(tmp_path):
    make_sweep(tmp_path)
    out = io.StringIO()
    rows = sweep.write_summary(tmp_path, console=Console(file=out, width=80, force_terminal=True, color_system=None))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert sum("ladder_strip" in line for line in lines) == len(rows) == 3  # one line per point
    assert any("wrong_result" in line for line in lines)
    assert "BM=128 BN=128 BK=8 TM=8 TN=8" in (tmp_path / "summary.md").read_text()  # every column kept there


def test_summary_table_is_whole_in_a_log_file(tmp_path):
    make_sweep(tmp_path)
    out = io.StringIO()
    sweep.write_summary(tmp_path, console=Console(file=out, width=80))
    assert "vs_baseline" in out.getvalue() and "1.500x cublas" in out.getvalue()


def test_zero_launch_floor_median(tmp_path, monkeypatch):
    gpu = HostGpu(durations={"gemmlab_empty": 0.0})
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    rec = run_point({"kernel": {"name": "naive"}, "shape": [16, 16, 16], "mode": "run",
                     "timing": {"warmup": 1, "repeat": 3, "batch": 2}}, tmp_path / "p")
    assert rec["status"] == "ok", rec["error"]
    assert rec["launch_floor"]["events"]["median_ms"] == 0.0 and rec["launch_floor"]["events"]["gflops"] is None
    assert "median_over_floor" not in rec["timing"] and "launch_bound" not in rec["timing"]
