"""The exploit corpus (tests/adversarial, issue 40 item 8) on the host-memory fake GPU (tests/fakegpu.py):
every corpus plugin kernel compiles (real NVRTC, ``mode=compile``), and each exploit whose idea a host
function can play runs the whole ``run_point`` pipeline with its kernel compiled for real and its launch
simulated by a host twin of the CUDA source (launch counters, stashes, NaN sniffing, the sampled rows,
rounding, writes outside C and into A, a fault on the 7th launch ...), asserting the corpus's status,
net and withheld figure (``corpus.problems``). Not simulated here: timing-aware behaviour (the fake
clock has no host gaps), the racecheck hazard (no compute-sanitizer) and the library plugins (they
drive a real CUDA stream); the gpu tests (tests/test_adversarial_gpu.py) run those.
"""

from __future__ import annotations

import inspect

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import gemmlab.gpu.device
from fakegpu import HostGpu, host_gemm, unpack
from gemmlab.errors import CudaError
from gemmlab.run.pipeline import run_point

sys.path.insert(0, str(Path(__file__).resolve().parent / "adversarial"))
import corpus  # noqa: E402

#: the fake's shape for the cases the GPU runs at 1024^3 (a host GEMM per launch)
SMALL = [128, 128, 128]
#: the kernel template a plugin kernel launches, where its name differs (the fake matches launches by it)
TEMPLATE = {"x_lazy_once": "x_lazy", "x_lazy_warmup": "x_lazy", "x_lazy_graph": "x_lazy",
            "x_bf16_inputs": "x_low_precision", "x_tf32_trunc": "x_low_precision", "x_skip_k8": "x_skip_k"}


@pytest.fixture(autouse=True)
def draw(request, monkeypatch):
    """Where the point's own inputs are drawn (``inputs.draw``): every exploit below runs twice, with
    the host's inputs and with the device's (the first verification then on the device too)
    (:func:`pytest_generate_tests`); other tests keep the host's."""
    where = getattr(request, "param", "host")
    if where != "host":
        real = corpus.config

        def config(case, plugin_dirs=None, **sections):
            sections["inputs"] = {**sections.get("inputs", {}), "draw": where}
            return real(case, plugin_dirs, **sections)
        monkeypatch.setattr(corpus, "config", config)
    return where


def pytest_generate_tests(metafunc):
    """The exploit tests (those that take ``monkeypatch`` themselves: they run a corpus case on the
    fake GPU) run with the inputs drawn on the host and on the device."""
    if "monkeypatch" in inspect.signature(metafunc.function).parameters:
        metafunc.parametrize("draw", ["host", "device"], indirect=True)


def run_case(tmp_path, monkeypatch, name: str, behaviour, gpu: HostGpu | None = None, **sections):
    """Run corpus case ``name`` in this process on a fake GPU whose launches of the case's kernel run
    ``behaviour(gpu, args)``; returns ``(case, record)``."""
    case = corpus.BY_NAME[name]
    gpu = gpu or HostGpu()
    gpu.behaviour = {TEMPLATE.get(case.kernel, case.kernel): behaviour}
    monkeypatch.setattr(gemmlab.gpu.device, "open_gpu", lambda index=0: gpu)
    timing = {"repeat": 3, **sections.pop("timing", {})}
    cfg = corpus.config(case, isolation={"process": False}, timing=timing, **sections)
    rec = run_point(cfg, tmp_path / name)
    assert not (tmp_path / name / "traceback.txt").exists(), (tmp_path / name / "traceback.txt").read_text()
    if "inputs" in rec:  # drawn where the config said (every corpus case is a plain problem the device handles)
        assert rec["inputs"].get("drawn", "host") == (cfg.get("inputs") or {}).get("draw", "host"), rec["inputs"]
    return case, rec


def refused(case, rec) -> None:
    wrong = corpus.problems(case, rec)
    assert not wrong, f"{case.name}: {wrong}"


# --- twins of the CUDA sources -----------------------------------------------------------------------

def gemm_of(gpu, args, transform=None) -> np.ndarray:
    """The float32 C of the GEMM ABI's inputs (A, B optionally transformed first), product in float64."""
    a, b, c, m, n, k = unpack(args)
    A = gpu.floats(a, m * k).reshape(m, k).copy()
    B = gpu.floats(b, k * n).reshape(k, n).copy()
    if transform is not None:
        A, B = transform(A), transform(B)
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)


def lazy(computed: int):
    """x_lazy.cu: right for ``computed`` launches, then idle."""
    count = [0]

    def behaviour(gpu, args):
        count[0] += 1
        if count[0] <= computed:
            host_gemm(gpu, args)

    return behaviour


def stash(key_of, miss_ms: float = 0.0):
    """x_stash_ptr.cu / x_stash_values.cu: a private copy of C under ``key_of(gpu, args)``; a miss
    (computing) takes ``miss_ms`` more on the fake clock than a hit (copying)."""
    state = {}

    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        key = key_of(gpu, args)
        if state.get("key") != key:
            host_gemm(gpu, args)
            gpu.clock_ms += miss_ms
            state.update(key=key, c=gpu.floats(c, m * n).copy())
        gpu.floats(c, m * n)[:] = state["c"]

    return behaviour


def pointers(gpu, args):
    return unpack(args)[:3]


def first_last_values(gpu, args):
    a, b, c, m, n, k = unpack(args)
    return tuple(float(x) for x in (gpu.floats(a, 1)[0], gpu.floats(b, 1)[0], gpu.floats(a, m * k)[-1],
                                    gpu.floats(b, k * n)[-1]))


def round_bf16(x: np.ndarray) -> np.ndarray:
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def truncate_tf32(x: np.ndarray) -> np.ndarray:
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def plugin_module(name: str):
    """A corpus plugin's module, imported by path (for the helpers it defines)."""
    spec = importlib.util.spec_from_file_location(f"adversarial_{name}", corpus.PLUGINS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def at_peak_clock(gpu: HostGpu) -> HostGpu:
    """The fake reports the H100/H200 SM clock, so the plausibility gate has a compute floor."""
    gpu.record = lambda: {"index": 0, "name": gpu.facts.name, "arch": "sm_90", "sm_count": 132, "max_sm_mhz": 1980}
    return gpu


# --- every corpus kernel compiles -------------------------------------------------------------------

NVRTC_CASES = [c for c in corpus.CASES if c.kernel not in ("x_graph_detect", "x_side_stream", "x_host_compute",
                                                            "x_host_callback", "x_timer_patch", "x_spin_worker")]


@pytest.mark.parametrize("case", NVRTC_CASES, ids=lambda c: c.name)
def test_every_corpus_kernel_compiles(case, tmp_path):
    rec = run_point(corpus.config(case, mode="compile", isolation={"process": False}), tmp_path / case.name)
    assert rec["status"] == "compiled", rec.get("error")
    if case.name == "wgmma_out":  # compiled, and flagged: the declared HGMMA is not in its SASS
        assert rec["sass_check"]["verdict"] == "missing" and rec["sass_check"]["missing"] == ["HGMMA"]


def test_library_cases_are_library_kernels(tmp_path):
    for name in ("graph_detect", "side_stream", "host_compute", "host_callback", "timer_patch", "spin_worker"):
        case = corpus.BY_NAME[name]
        rec = run_point(corpus.config(case, mode="compile", isolation={"process": False}), tmp_path / name)
        assert rec["status"] == "compiled" and rec["kernel"]["backend"] == "library", rec.get("error")


def test_the_corpus_is_complete():
    assert len({c.kernel for c in corpus.CASES}) >= 20 and len(corpus.BY_NAME) == len(corpus.CASES)
    from gemmlab.run.pipeline import NETS
    for case in corpus.CASES:
        for status, net in ((case.status, case.net),) + case.also:
            assert NETS[status] == net, case.name
        assert (corpus.PLUGINS / f"{case.kernel}.py").is_file()
    table = (corpus.PLUGINS.parent / "README.md").read_text()
    for case in corpus.CASES:
        assert f"| `{case.name}` |" in table, f"README table lacks {case.name}"


# --- exploits on the fake GPU -----------------------------------------------------------------------

def test_lazy_once(tmp_path, monkeypatch):
    case, rec = run_case(tmp_path, monkeypatch, "lazy_once", lazy(1))
    refused(case, rec)
    assert rec["verification"]["passed"] and rec["repeat_stable"] is True


def test_lazy_after_the_warmup(tmp_path, monkeypatch):
    case, rec = run_case(tmp_path, monkeypatch, "lazy_warmup", lazy(1 + corpus.EVENTS["warmup"]))
    refused(case, rec)


def test_lazy_after_graph_replays(tmp_path, monkeypatch):
    p = corpus.BY_NAME["lazy_graph"].params
    case, rec = run_case(tmp_path, monkeypatch, "lazy_graph", lazy(1 + p["W"] + p["B"] * p["G"]))
    refused(case, rec)
    assert rec["verification_after_timing"]["path"] == "the graph of one timed batch, replayed"


def test_stash_keyed_by_pointers(tmp_path, monkeypatch):
    case, rec = run_case(tmp_path, monkeypatch, "stash_ptr", stash(pointers))
    refused(case, rec)


def test_stash_keyed_by_values_is_right_but_a_cached_result(tmp_path, monkeypatch):
    # as on the H100 (GPU call 2): a hit (copy) 0.0425 ms, plausible; a miss computes, ~1 ms more
    gpu = at_peak_clock(HostGpu(durations={"x_stash_values": 0.0425}))
    case, rec = run_case(tmp_path, monkeypatch, "stash_values", stash(first_last_values, miss_ms=1.0), gpu,
                         shape=SMALL)
    refused(case, rec)
    assert rec["verification_after_timing"]["passed"] is True  # new values: computed once, then copied
    assert [round(f / s) for f, s in rec["fresh_input_timing_ms"]] == [25, 25]


def test_nan_sniffing_is_right_but_implausible(tmp_path, monkeypatch):
    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        out = gpu.floats(c, m * n)
        where = np.isnan(out)
        out[where] = gemm_of(gpu, args).ravel()[where]

    gpu = at_peak_clock(HostGpu(durations={"x_nan_sniff": 1e-9}))
    case, rec = run_case(tmp_path, monkeypatch, "nan_sniff", behaviour, gpu, shape=SMALL)
    refused(case, rec)
    assert rec["verification_after_timing"]["passed"] is True


def test_sampled_rows_fail_freivalds(tmp_path, monkeypatch):
    case = corpus.BY_NAME["sampled_rows"]
    rows, cols = plugin_module("x_sampled_rows").sampled(*case.shape[:2], case.params["SEED1"], case.params["SAMPLE"])

    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        full = gemm_of(gpu, args)
        keep = np.zeros((m, n), bool)
        keep[rows, :] = True
        keep[:, cols] = True
        gpu.floats(c, m * n)[:] = np.where(keep, full, np.float32(0)).ravel()

    case, rec = run_case(tmp_path, monkeypatch, "sampled_rows", behaviour)
    refused(case, rec)
    v = rec["verification"]
    assert v["method"].startswith("sampled") and v["mismatches"] == 0 and v["nan_outputs"] == 0
    assert v["freivalds"]["passed"] is False  # only the whole-product check sees it


def test_last_row_unwritten(tmp_path, monkeypatch):
    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        gpu.floats(c, (m - 1) * n)[:] = gemm_of(gpu, args)[:-1].ravel()

    case, rec = run_case(tmp_path, monkeypatch, "nan_some", behaviour)
    refused(case, rec)
    assert rec["verification"]["nan_outputs"] == case.shape[1]


def test_noop(tmp_path, monkeypatch):
    case, rec = run_case(tmp_path, monkeypatch, "noop", lambda gpu, args: None)
    refused(case, rec)


@pytest.mark.parametrize("name, rounding", [("bf16_inputs", round_bf16), ("tf32_trunc", truncate_tf32)])
def test_lower_precision_than_declared(tmp_path, monkeypatch, name, rounding):
    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        gpu.floats(c, m * n)[:] = gemm_of(gpu, args, rounding).ravel()

    case, rec = run_case(tmp_path, monkeypatch, name, behaviour)
    refused(case, rec)


def test_writing_the_input(tmp_path, monkeypatch):
    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        gpu.floats(c, m * n)[:] = _masked_gemm(gpu, args).ravel()
        gpu.words(a, 16 * k)[:] |= np.uint32(1)  # block (0, 0)'s rows of A: lowest mantissa bit set

    case, rec = run_case(tmp_path, monkeypatch, "write_input", behaviour)
    refused(case, rec)
    assert rec["verification"]["passed"] and "A" in rec["error"]


def _masked_gemm(gpu, args) -> np.ndarray:
    """x_write_input.cu's product: A read with its lowest mantissa bit masked off."""
    a, b, c, m, n, k = unpack(args)
    A = (gpu.words(a, m * k) & np.uint32(0xFFFFFFFE)).view(np.float32).reshape(m, k)
    B = gpu.floats(b, k * n).reshape(k, n)
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)


def test_writing_past_c(tmp_path, monkeypatch):
    def behaviour(gpu, args):
        host_gemm(gpu, args)
        a, b, c, m, n, k = unpack(args)
        gpu.floats(c + 4 * m * n, 1)[0] = 0.0

    case, rec = run_case(tmp_path, monkeypatch, "write_past_c", behaviour)
    refused(case, rec)


@pytest.mark.parametrize("name", ["skip_k8_normal", "skip_k8_integers"])
def test_skipping_k(tmp_path, monkeypatch, name):
    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        A = gpu.floats(a, m * k).reshape(m, k)[:, ::8].astype(np.float64)
        B = gpu.floats(b, k * n).reshape(k, n)[::8].astype(np.float64)
        gpu.floats(c, m * n)[:] = ((A @ B) * 8).astype(np.float32).ravel()

    case, rec = run_case(tmp_path, monkeypatch, name, behaviour)
    refused(case, rec)


def test_partial_k_with_integer_inputs(tmp_path, monkeypatch):
    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        A = gpu.floats(a, m * k).reshape(m, k)[:, :-1].astype(np.float64)
        B = gpu.floats(b, k * n).reshape(k, n)[:-1].astype(np.float64)
        gpu.floats(c, m * n)[:] = (A @ B).astype(np.float32).ravel()

    case, rec = run_case(tmp_path, monkeypatch, "partial_k_integers", behaviour)
    refused(case, rec)
    assert rec["verification"]["rule"] == "exact"


@pytest.mark.parametrize("name", ["sticky7", "sticky_in_sample"])
def test_fault_on_a_later_launch(tmp_path, monkeypatch, name):
    fault_at = corpus.BY_NAME[name].params["FAULT_AT"]
    count = [0]

    def behaviour(gpu, args):
        count[0] += 1
        if count[0] == fault_at:
            raise CudaError("kernel failed: CUDA_ERROR_ILLEGAL_ADDRESS (fake GPU)")
        host_gemm(gpu, args)

    case, rec = run_case(tmp_path, monkeypatch, name, behaviour, timing={"batch": 20})
    refused(case, rec)
    assert count[0] == fault_at and "ILLEGAL_ADDRESS" in rec["error"]


def test_tf32_zeros(tmp_path, monkeypatch):
    def behaviour(gpu, args):
        a, b, c, m, n, k = unpack(args)
        gpu.floats(c, m * n)[:] = 0.0

    case, rec = run_case(tmp_path, monkeypatch, "tf32_zeros", behaviour)
    refused(case, rec)


def test_wgmma_compiled_out(tmp_path, monkeypatch):
    launched = []
    case, rec = run_case(tmp_path, monkeypatch, "wgmma_out", lambda gpu, args: launched.append(1))
    refused(case, rec)
    assert launched == []  # refused before any launch


def test_drift_after_the_first_launch(tmp_path, monkeypatch):
    count = [0]

    def behaviour(gpu, args):
        count[0] += 1
        host_gemm(gpu, args)
        if count[0] > 1:
            a, b, c, m, n, k = unpack(args)
            x = gpu.floats(c, 1)
            x[0] = np.nextafter(x[0], np.float32(np.inf))

    case, rec = run_case(tmp_path, monkeypatch, "drift", behaviour)
    refused(case, rec)


def test_the_readme_lists_each_exploit_with_its_net():
    import re
    readme = (corpus.PLUGINS.parents[2] / "README.md").read_text()
    section = " ".join(readme[readme.index("## What a published figure guarantees"):readme.index("## Documentation")].split())
    for case in corpus.CASES:
        found = re.search(rf"\b{case.name}\b[^→]*→ ([a-z -]+)", section)
        assert found and found.group(1).strip().startswith(case.net), f"README: {case.name} → {case.net}"


# --- the after-timing nets' exploits through the device check (issue 40's cost) ----------------------

def _device_cases():
    p = corpus.BY_NAME["lazy_graph"].params
    return {"lazy_once": (lambda: lazy(1), {}), "lazy_warmup": (lambda: lazy(1 + corpus.EVENTS["warmup"]), {}),
            "lazy_graph": (lambda: lazy(1 + p["W"] + p["B"] * p["G"]), {}),
            "stash_ptr": (lambda: stash(pointers), {}),
            "stash_values": (lambda: stash(first_last_values, miss_ms=1.0), {"shape": SMALL})}


@pytest.mark.parametrize("name", list(_device_cases()))
def test_after_timing_exploits_are_refused_by_the_device_check(tmp_path, monkeypatch, name):
    """The corpus's cases the after-timing nets refuse, with those nets on the device (fresh inputs
    drawn there, C checked there, the fresh-input timing's -A, 2A, -B scaled there): the same status."""
    from gemmlab.stages import device_check
    monkeypatch.setattr(device_check, "DEVICE_MIN_MNK", 0)
    make, sections = _device_cases()[name]
    gpu = at_peak_clock(HostGpu(durations={"x_stash_values": 0.0425})) if name == "stash_values" else None
    case, rec = run_case(tmp_path, monkeypatch, name, make(), gpu, verify={"after_timing": "auto"}, **sections)
    refused(case, rec)
    assert rec["verification_after_timing"]["where"] == "device"
