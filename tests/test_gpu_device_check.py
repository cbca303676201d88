"""GPU tests of the after-timing verification on the device (kernels/device_check.cu,
gemmlab.stages.device_check; issue 40's cost target), marker ``gpu``: the fill kernel against its
numpy twin, the device check's verdict against the host's (gemmlab.stages.verify.check on the same
inputs, downloaded) on right and wrong outputs at 512^3 and 4096^3 in fp32, tf32 and bf16, whole
points through the device path, and the after-timing exploits of the corpus refused there too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from gemmlab.contract.hookspecs import Problem, Shape
from gemmlab.gpu import guards
from gemmlab.stages import device_check as dc
from gemmlab.stages import inputs as inputs_stage
from gemmlab.stages import verify
from test_device_check import same_verdict

sys.path.insert(0, str(Path(__file__).resolve().parent / "adversarial"))
import corpus  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu():
    from gemmlab.gpu.device import open_gpu
    return open_gpu(0)


class OnDevice:
    """A problem's fresh inputs drawn on the GPU, downloaded for the host's check, and a C buffer."""

    def __init__(self, gpu, shape, precision, layout_a, layout_b, distribution="normal", declared=None, seed=4242):
        M, N, K = shape
        self.gpu, self.seed, self.distribution, self.declared = gpu, seed, distribution, declared
        self.p = Problem(shape=Shape(M, N, K), precision=precision, layout_a=layout_a, layout_b=layout_b)
        dt = inputs_stage.storage_dtype(precision)
        self.d_a = guards.allocate(gpu, "A", (M, K) if layout_a == "row" else (K, M), dtype=dt)
        self.d_b = guards.allocate(gpu, "B", (K, N) if layout_b == "row" else (N, K), dtype=dt)
        self.c = guards.allocate(gpu, "C", (M, N))
        self.checker = dc.DeviceCheck(gpu, self.p, dc.roundings_for(precision, [declared]), distribution)
        self.fresh = self.checker.draw(self.d_a, self.d_b, seed, distribution)
        self.a_stored, self.b_stored = guards.read(gpu, self.d_a), guards.read(gpu, self.d_b)
        self.a = inputs_stage.logical(self.a_stored, layout_a)
        self.b = inputs_stage.logical(self.b_stored, layout_b)

    def right(self, rounding="none") -> np.ndarray:
        """A float32 product (BLAS): within the bound of every rule but exact's."""
        a, b = (verify.round_tf32(np.ascontiguousarray(x), rounding) for x in (self.a, self.b))
        return a @ b

    def both(self, c, options):
        self.gpu.upload(self.c.address, np.ascontiguousarray(c, dtype=np.float32))
        device = self.checker.check(self.c, self.fresh, options, self.distribution, self.seed,
                                    tf32_rounding=self.declared)
        host = verify.check(c, self.a, self.b, options, self.distribution, self.p.precision, self.seed,
                            tf32_rounding=self.declared)
        return device, host

    def release(self):
        guards.release(self.d_a, self.d_b, self.c, *self.fresh.owned)


@pytest.mark.parametrize("precision, layout_a, layout_b, distribution", [
    ("fp32", "row", "row", "normal"), ("tf32", "col", "row", "normal"), ("bf16", "row", "col", "uniform"),
    ("bf16", "col", "col", "normal"), ("fp16", "row", "col", "integers"), ("fp16", "col", "row", "normal")])
def test_the_fill_kernel_draws_what_its_twin_draws(gpu, precision, layout_a, layout_b, distribution):
    d = OnDevice(gpu, (384, 320, 520), precision, layout_a, layout_b, distribution)
    try:
        host = dc.host_inputs(d.p, d.seed, distribution)
        for got, want in ((d.a_stored, host.a_stored), (d.b_stored, host.b_stored)):
            same = got.view(f"u{got.dtype.itemsize}") == want.view(f"u{want.dtype.itemsize}")
            if distribution != "normal":
                assert same.all()  # integer arithmetic only: bit for bit
            else:  # float64 log/cos of the device and of numpy may differ in the last bit
                assert same.mean() > 0.9999, same.mean()
                g, w = got.astype(np.float64), want.astype(np.float64)
                assert np.all(np.abs(g - w) <= np.abs(w) * 2.0**-7)  # one step of the storage type at most
        assert np.all(d.a != 0) and np.all(d.b != 0)
        assert d.fresh.changed() == (0, 0)
    finally:
        d.release()


CASES = [((512, 512, 512), "fp32", "row", "row", None), ((512, 512, 512), "tf32", "row", "col", None),
         ((512, 512, 512), "tf32", "col", "row", "rz"), ((512, 512, 512), "bf16", "row", "col", None),
         ((4096, 4096, 4096), "fp32", "row", "row", None), ((4096, 4096, 4096), "tf32", "row", "col", None),
         ((4096, 4096, 4096), "bf16", "row", "col", None)]


@pytest.mark.parametrize("shape, precision, layout_a, layout_b, declared", CASES,
                         ids=[f"{s[0]}-{p}-{la}{lb}-{d}" for s, p, la, lb, d in CASES])
def test_device_and_host_verdicts_agree(gpu, shape, precision, layout_a, layout_b, declared):
    d = OnDevice(gpu, shape, precision, layout_a, layout_b, declared=declared)
    try:
        M, N, _ = shape
        options = verify.VerifyOptions(method="sampled")  # 256 rows and columns, 2 Freivalds vectors
        rows, cols, _ = verify.draw_sample(d.seed, M, N, options)
        r_out = int(np.setdiff1d(np.arange(M), rows)[7])
        c_out = int(np.setdiff1d(np.arange(N), cols)[11])
        right = d.right((declared or "rn") if precision == "tf32" else "none")
        outputs = {"right": (right, True), "doubled": (2 * right, False)}
        wrong_row = right.copy()
        wrong_row[rows[5]] *= -1
        outputs["sign of a sampled row"] = (wrong_row, False)
        big = right.copy()
        big[r_out, c_out] += 1000.0
        outputs["one element outside the sample"] = (big, False)
        for name, (c, passes) in outputs.items():
            device, host = d.both(c, options)
            assert host.passed is passes, name
            same_verdict(device, host)
            if name == "one element outside the sample":
                assert device.mismatches == 0 and device.freivalds["passed"] is False
        if shape[0] <= 512:  # every element, on the device and on the host
            same_verdict(*d.both(right, verify.VerifyOptions(method="full")))
            same_verdict(*d.both(big, verify.VerifyOptions(method="full")))
    finally:
        d.release()


def _point(shape, precision, layout_b="row", **cfg):
    from gemmlab.run.pipeline import run_point
    return {"kernel": {"name": "auto"}, "shape": list(shape), "mode": "run", "precision": precision,
            "layout": {"a": "row", "b": layout_b}, "timing": {"mode": "graph", "warmup": 2, "repeat": 5, "batch": 4},
            "verify": {"after_timing": "auto"}, **cfg}, run_point


@pytest.mark.parametrize("shape, precision, layout_b", [((2048, 2048, 1024), "fp32", "row"),
                                                        ((4096, 4096, 4096), "bf16", "col"),
                                                        ((4096, 4096, 4096), "tf32", "col")])
def test_a_point_is_verified_after_timing_on_the_device(tmp_path, shape, precision, layout_b):
    cfg, run_point = _point(shape, precision, layout_b)
    rec = run_point(cfg, tmp_path / "point")
    assert rec["status"] == "ok", rec.get("error")
    after = rec["verification_after_timing"]
    assert after["passed"] and after["where"] == "device" and after["inputs_seed"] != rec["inputs"]["seed"]
    assert after["method"].startswith("full" if shape[0] * shape[1] * shape[2] <= 2**33 else "sampled")
    parts = rec["phase_s"]["after_timing_parts"]
    assert "upload" not in parts and {"compile", "draw", "replay_verify", "fresh_input_timing"} <= set(parts)
    print(precision, shape, rec["phase_s"]["after_timing"], parts)


@pytest.mark.parametrize("name", ["lazy_once", "lazy_graph", "stash_ptr", "stash_values"])
def test_after_timing_exploits_are_refused_by_the_device_check(tmp_path, monkeypatch, name):
    from gemmlab.run.pipeline import run_point
    monkeypatch.setattr(dc, "DEVICE_MIN_MNK", 0)
    case = corpus.BY_NAME[name]
    rec = run_point(corpus.config(case, isolation={"process": False}, verify={"after_timing": "auto"}),
                    tmp_path / name)
    wrong = corpus.problems(case, rec)
    assert not wrong, f"{case.kernel} ({case.idea}): {wrong}"
    assert rec["verification_after_timing"]["where"] == "device"


@pytest.mark.parametrize("shape, precision, layout_b", [((2048, 2048, 1024), "fp32", "row"),
                                                        ((4096, 4096, 4096), "bf16", "col"),
                                                        ((4096, 4096, 4096), "tf32", "col"),
                                                        ((16, 4096, 4096), "bf16", "col")])
def test_a_point_drawn_and_first_verified_on_the_device(tmp_path, shape, precision, layout_b):
    """inputs.draw=device: kernel=auto's choice and cuBLAS (where installed) verified on the device on
    the generator's inputs, timed, verified again after timing; allocate and correctness cost less
    than the host path's on the same point (printed: the phases of both)."""
    from gemmlab.contract.registry import load_registry
    baseline = None if load_registry().get("cublas").available() else "cublas"
    cfg, run_point = _point(shape, precision, layout_b, inputs={"draw": "device"}, baseline=baseline)
    rec = run_point(cfg, tmp_path / "device")
    assert rec["status"] == "ok", rec.get("error")
    assert rec["inputs"]["drawn"] == "device"
    for part in [rec] + ([rec["baseline"]] if baseline else []):
        assert part["verification"]["passed"] and part["verification"]["where"] == "device"
    assert rec["verification_after_timing"]["passed"] and rec["inputs_unchanged"] is True
    host = run_point({**cfg, "inputs": {"draw": "host"}}, tmp_path / "host")
    assert host["status"] == "ok", host.get("error")
    print(precision, shape, {k: rec["phase_s"].get(k) for k in ("allocate", "correctness")},
          {k: host["phase_s"].get(k) for k in ("allocate", "correctness")})


@pytest.mark.parametrize("name", ["lazy_once", "lazy_graph", "stash_ptr", "stash_values"])
def test_exploits_are_refused_with_inputs_drawn_on_the_device(tmp_path, name):
    """The after-timing exploit corpus with the point's own inputs drawn on the device: still refused."""
    from gemmlab.run.pipeline import run_point
    case = corpus.BY_NAME[name]
    rec = run_point(corpus.config(case, isolation={"process": False}, verify={"after_timing": "device"},
                                  inputs={"draw": "device"}), tmp_path / name)
    wrong = corpus.problems(case, rec)
    assert not wrong, f"{case.kernel} ({case.idea}): {wrong}"
    assert rec["inputs"]["drawn"] == "device"
