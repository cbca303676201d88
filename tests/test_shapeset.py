"""The public shape set and its fixed train/test split (gemmlab/data/shapeset.yaml, made by
gemmlab/dispatch/make_shapeset.py, read by gemmlab.dispatch.shapeset), experiment=heldout / train, and the
held-out benchmark .ci/heldout_bench.py (its loop on the CPU: a fake point runner, and mode=compile)."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import math
import subprocess
import sys

import pytest
import yaml

from gemmlab.contract.hookspecs import Shape
from gemmlab.dispatch import shapeset as ss_mod
from gemmlab.dispatch.shapes import parse_suite
from gemmlab.dispatch.shapeset import (REGIONS, SHAPESET_FILE, SPLITS, load_shapes, load_shapeset, parse_shapeset,
                                       region_of, shapeset_resolver, suite_family, suite_yaml)
from gemmlab.errors import ConfigError
from gemmlab.stages.config import parse_shape

from clirun import REPO_ROOT as REPO  # noqa: E402

# The split is fixed: any edit of the test split (a shape added, removed or moved between the parts)
# changes this hash and fails test_split_is_fixed. Change it only with a documented reason (issue 41:
# "a documented train/test split fixed before tuning"); the train split's hash is kept beside it.
TEST_SPLIT_SHA256 = "a4b9fb834f4d2d4ffebab73baa0444da1c55acea3bba6fd79b5f03ae95f7148c"
TRAIN_SPLIT_SHA256 = "fbc1c1b81560c54caeb073c563b4f6af6c01f0edc5fa5c5c7d98e706eac9fe50"
MIN_PER_REGION = 10  # each region (decode, medium, large, odd) has at least this many shapes in each part


def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def make_shapes():
    from gemmlab.dispatch import make_shapeset
    return make_shapeset


@pytest.fixture(scope="module")
def bench():
    return _module(REPO / ".ci" / "heldout_bench.py", "gemmlab_heldout_bench")


@pytest.fixture(scope="module")
def shapeset():
    return load_shapeset()


# --- the set ---------------------------------------------------------------------------------------

def test_committed_file_is_the_generators_output(make_shapes):
    """shapeset.yaml is exactly what make_shapeset.py writes (no hand edits), and the generator is
    deterministic (two builds, same text)."""
    text = make_shapes.build()
    assert text == make_shapes.build()
    assert SHAPESET_FILE.read_text() == text, "run: python -m gemmlab.dispatch.make_shapeset (and review the split)"


def test_at_least_200_unique_valid_shapes(shapeset, make_shapes):
    shapes = shapeset.shapes()
    assert len(shapes) >= 200
    assert len(set(shapes)) == len(shapes)
    for s in shapes:  # gemmlab's own shape check (what a point's config goes through)
        assert parse_shape(list(s)) == s
        assert make_shapes.fits(*s), s  # within the benchmark caps (M·N·K <= 2^38, operands <= 2.5 GiB fp32)
    raw = yaml.safe_load(SHAPESET_FILE.read_text())
    assert raw["schema"] == "gemmlab.shapeset/1"
    for e in raw["shapes"]:
        assert e["model"] in raw["sources"], e  # every shape's model names its source
    assert all(raw["sources"][m].startswith(("http", "adversarial")) for m in raw["sources"])


def test_split_is_fixed(shapeset):
    assert shapeset.split_digest("test") == TEST_SPLIT_SHA256
    assert shapeset.split_digest("train") == TRAIN_SPLIT_SHA256


def test_split_is_roughly_balanced_and_covers_every_region(shapeset):
    n = len(shapeset.entries)
    test = shapeset.select("test")
    assert 0.35 <= len(test) / n <= 0.6
    for split in SPLITS:
        sel = shapeset.select(split)
        for region in REGIONS:
            assert sum(e.region == region for e in sel) >= MIN_PER_REGION, (split, region)
        decode = [e for e in sel if e.region == "decode"]
        assert {1, 64} & {e.shape.M for e in decode}
        assert max(e.shape.M for e in sel if e.region == "large") >= 8192
        cats = {shapeset.families[e.family]["category"] for e in sel}
        assert cats == {"dense_llm", "moe_llm", "vision", "recsys", "odd"}, (split, cats)


def test_test_split_holds_only_unseen_weights(shapeset, make_shapes):
    """Whole families are held out, and no test shape's weight matrix (N, K) occurs in train or in the
    45-shape suite kernel=auto was tuned on; every adversarial kind is in both parts."""
    train = shapeset.select("train")
    test = shapeset.select("test")
    seen = {(e.shape.N, e.shape.K) for e in train} | make_shapes.SUITE_WEIGHTS
    assert not [e for e in test if (e.shape.N, e.shape.K) in seen]
    suite = yaml.safe_load((REPO / "gemmlab" / "data" / "shape_suite.yaml").read_text())
    suite_weights = {(n, k) for shapes in suite["families"].values() for _, n, k in shapes}
    assert suite_weights <= make_shapes.SUITE_WEIGHTS | {(e.shape.N, e.shape.K) for e in train}
    fam = make_shapes.family_splits()
    for e in test:
        assert e.family == "odd" or fam[e.family] == "test", e
    kinds = {e.layer for e in shapeset.entries if e.family == "odd"}
    for split in SPLITS:
        assert {e.layer for e in shapeset.select(split) if e.family == "odd"} == kinds, split


def test_regions():
    assert [region_of(m) for m in (1, 64, 65, 1024, 1025, 16384)] == ["decode", "decode", "medium", "medium",
                                                                      "large", "large"]
    assert region_of(2, "odd") == "odd"


# --- the loader --------------------------------------------------------------------------------------

def test_select_and_sweep_value(shapeset):
    test = load_shapes("test")
    assert test == shapeset.select("test") and len(test) + len(load_shapes("train")) == len(shapeset.entries)
    odd = shapeset.select("test", ["odd"])
    assert odd and all(e.region == "odd" and e.split == "test" for e in odd)
    assert shapeset.select("all") == shapeset.entries == shapeset.select(None)
    value = shapeset_resolver("test", "odd")
    assert value == ",".join(f"[{e.shape.M},{e.shape.N},{e.shape.K}]" for e in odd)
    assert shapeset_resolver("test").count("[") == len(test)
    e = test[0]
    assert shapeset.entry_of(tuple(e.shape)) == e and shapeset.entry_of((7, 7, 7)) is None
    for bad, word in ((("nope",), "unknown split"), (("test", "huge"), "unknown region")):
        with pytest.raises(ConfigError, match=word):
            shapeset.select(bad[0], bad[1:])


def test_parse_rejects_a_broken_file():
    ok = {"M": 1, "N": 2, "K": 3, "split": "test", "region": "decode", "family": "x", "model": "m", "layer": "l"}

    def data(*entries):
        return {"schema": "gemmlab.shapeset/1", "shapes": list(entries)}
    assert parse_shapeset(data(ok)).entries[0].shape == Shape(1, 2, 3)
    cases = [(data(ok, ok), "appears twice"), (data({**ok, "split": "dev"}), "split must be"),
             (data({**ok, "region": "large"}), "region 'large'"), (data({**ok, "M": 0}), "M must be"),
             (data({**ok, "colour": 1}), "unknown key"), ({"shapes": [ok]}, "schema"), ({"schema": "x"}, "non-empty"),
             (data({**ok, "N": 2 ** 31}), "elements")]
    for bad, word in cases:
        with pytest.raises(ConfigError, match=word):
            parse_shapeset(bad, "f.yaml")


def test_split_as_a_shape_suite(shapeset):
    """A split exported as a gemmlab.shapes/1 suite (for gemmlab-tune sweep --suite) is a valid suite
    holding exactly the split's shapes."""
    suite = shapeset.to_suite("train")
    text = suite_yaml(suite, "header")
    parsed = parse_suite(yaml.safe_load(text), "train.yaml")
    assert sorted(parsed.shapes) == sorted(shapeset.shapes("train"))
    assert set(parsed.families) <= {"tiny", "decode", "k_heavy", "k_light", "tall_skinny", "short_wide", "odd",
                                    "square", "prefill"}
    assert suite_family(Shape(2, 2, 100000)) == "tiny" and suite_family(Shape(4096, 4096, 4096)) == "square"
    assert suite_family(Shape(8, 4096, 4096)) == "decode" and suite_family(Shape(4095, 4097, 1023)) == "odd"
    assert ss_mod.main(["suite", "--split", "test", "--regions", "odd", "-o", "/dev/null"]) == 0
    assert ss_mod.main(["list", "--split", "bogus"]) == 2


def test_shape_file_ships_as_package_data():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = conf["package-data"]["gemmlab"]
    assert any(fnmatch.fnmatch("data/shapeset.yaml", g) for g in globs)
    assert "gemmlab.dispatch" in conf["packages"]


# --- the experiments ---------------------------------------------------------------------------------

def test_experiments_sweep_the_splits():
    """experiment=heldout sweeps the test split and experiment=train the train split, with kernel=auto,
    cuBLAS as the baseline and graph timing; a precision is a command-line override."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import gemmlab.cli.app
    from gemmlab.paths import CONF_DIR
    gemmlab.cli.app.register_resolvers()
    shapeset = load_shapeset()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for name, split in (("heldout", "test"), ("train", "train")):
            cfg = compose("config", overrides=[f"experiment={name}", "precision=bf16", "layout.b=col"],
                          return_hydra_config=True)
            assert cfg.kernel.name == "auto" and cfg.baseline == "cublas" and cfg.timing.mode == "both"
            assert cfg.precision == "bf16" and cfg.layout.b == "col"
            assert OmegaConf.select(cfg, "hydra.mode").name == "MULTIRUN"
            assert OmegaConf.to_container(cfg.hydra.sweeper.params, resolve=True)["shape"] == shapeset.sweep_value(split)


def test_precheck_names_an_unknown_split_or_region():
    from gemmlab.run import config_check
    config_check.check_shapeset_selection(["shape=${gemmlab_shapeset:test,decode}", "mode=compile"])
    for arg, word in (("shape=${gemmlab_shapeset:bogus}", "unknown split 'bogus'"),
                      ("hydra.sweeper.params.shape=${gemmlab_shapeset:train,nope}", "unknown region 'nope'")):
        with pytest.raises(ConfigError, match=word) as info:
            config_check.check_shapeset_selection([arg])
        assert str(info.value).startswith("shape: ${gemmlab_shapeset:")


# --- the benchmark ---------------------------------------------------------------------------------

def test_bench_precision_items(bench):
    assert bench.parse_precisions("fp32,tf32:col,bf16", "row") == [("fp32", "row"), ("tf32", "col"), ("bf16", "row")]
    assert bench.parse_precisions("bf16,bf16:col", "col") == [("bf16", "col")]
    for bad in ("fp64", "bf16:diag", ","):
        with pytest.raises(ValueError):
            bench.parse_precisions(bad, "row")


def test_bench_order_interleaves_regions(bench, shapeset):
    order = bench.interleave(shapeset.select("test"))
    assert sorted(order, key=lambda e: tuple(e.shape)) == sorted(shapeset.select("test"), key=lambda e: tuple(e.shape))
    assert [e.region for e in order[:4]] == list(bench.REGION_ORDER)
    assert order == bench.interleave(list(reversed(shapeset.select("test"))))  # a fixed order


class FakeRun:
    """A stand-in for gemmlab.run.isolation.run_point: writes result.json, fails some points."""

    def __init__(self, fail_at=(), raise_at=()):
        self.calls, self.fail_at, self.raise_at = [], set(fail_at), set(raise_at)

    def __call__(self, cfg, out_dir):
        i = len(self.calls)
        self.calls.append(cfg)
        out_dir.mkdir(parents=True)
        if i in self.raise_at:
            raise RuntimeError("worker exploded\nsecond line")
        M, N, K = cfg["shape"]
        ratio = 0.5 + 0.1 * (i % 7)
        rec = {"status": "wrong_result" if i in self.fail_at else "ok", "shape": cfg["shape"],
               "precision": cfg["precision"], "error": "max error 3e-2" if i in self.fail_at else None,
               "dispatch": {"requested": "auto", "chosen": "tiled", "params": {"BM": 64}, "source": "rule"},
               "ratio_to_baseline": {"baseline": "cublas", "gflops": ratio, "median_time": 1 / ratio}}
        (out_dir / "result.json").write_text(json.dumps(rec))
        return rec


def _records(path):
    """The records of a gemmlab record archive (gemmlab.stages.archive), in order."""
    from gemmlab.stages import archive
    members = list(archive.read_archive(path))
    assert archive.load(path).header["records"] == len(members)
    assert all(m.path.endswith("/result.json") for m in members)
    return [m.record for m in members]


def test_bench_loop_archive_and_table(bench, tmp_path, capsys):
    """Several precisions per call; a point that raises or fails is recorded and the run goes on;
    one records.jsonl.xz with every point (the record plus the heldout key); point folders removed;
    the table names geomean, min and the worst shapes with auto's choice."""
    run = FakeRun(fail_at={2}, raise_at={4})
    rc = bench.main([str(tmp_path / "o"), "--precision", "fp32,bf16:col,tf32", "--limit", "3", "--mode", "compile"],
                    run=run)
    assert rc == 0 and len(run.calls) == 9
    assert [c["precision"] for c in run.calls[:3]] == ["fp32", "bf16", "tf32"]  # precisions per shape
    assert run.calls[1]["layout"] == {"a": "row", "b": "col"} and run.calls[0]["layout"]["b"] == "row"
    cfg = run.calls[0]
    assert cfg["kernel"] == {"name": "auto", "table": None} and cfg["baseline"] == "cublas"
    assert cfg["timing"]["mode"] == "graph" and cfg["isolation"]["process"] is True
    recs = _records(tmp_path / "o" / "records.jsonl.xz")
    assert len(recs) == 9 and not (tmp_path / "o" / "records.jsonl").exists()
    assert not (tmp_path / "o" / "points").exists()
    assert recs[4]["status"] == "error" and recs[4]["error"].endswith("raised RuntimeError: worker exploded")
    assert recs[2]["status"] == "wrong_result"
    assert {r["heldout"]["split"] for r in recs} == {"test"}
    assert recs[0]["heldout"]["model"] and recs[0]["heldout"]["precision"] == "fp32"
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    fp32 = summary["summary"][0]
    assert (fp32["precision"], fp32["points"], fp32["timed"]) == ("fp32", 3, 3)
    bf16 = summary["summary"][1]
    assert bf16["points"] == 3 and bf16["timed"] == 2 and bf16["failed"] == 1  # point 4 raised
    out = capsys.readouterr().out
    table = out[out.index("precision | layout"):]
    assert "fp32 | row/row | 3 | 3 | 0 |" in table and "worst 3, fp32 row/row" in table and "tiled BM=64 [rule]" in table
    # an existing archive is never overwritten
    assert bench.main([str(tmp_path / "o"), "--limit", "1"], run=FakeRun()) == 2


def test_bench_times_another_kernel_than_auto(bench, tmp_path, capsys):
    """``--kernel NAME``: that kernel at its defaults on the split (issue 46's Triton figures), the
    rest of the point as for kernel=auto; kernel=auto's own keys with it are refused in one line."""
    run = FakeRun()
    assert bench.main([str(tmp_path / "o"), "--kernel", "triton_matmul", "--precision", "bf16:col", "--limit", "2",
                       "--mode", "compile"], run=run) == 0
    assert [c["kernel"] for c in run.calls] == [{"name": "triton_matmul"}] * 2
    assert run.calls[0]["baseline"] == "cublas" and run.calls[0]["layout"]["b"] == "col"
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["kernel"] == "triton_matmul" and summary["table"] is None
    assert (bench.chosen_of({"config": {"kernel": {"name": "triton_matmul"}}, "params": {"BLOCK_M": 128}})
            == "triton_matmul BLOCK_M=128")
    assert "region | triton_matmul and its parameters" in capsys.readouterr().out
    assert bench.main([str(tmp_path / "p"), "--kernel", "triton_matmul", "--auto", "rank=model"], run=run) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.endswith("--auto and --table are kernel=auto's; --kernel is 'triton_matmul'")
    # a misspelt name is refused in one line before any point runs
    calls = len(run.calls)
    assert bench.main([str(tmp_path / "q"), "--kernel", "triton_matmu", "--limit", "1"], run=run) == 2
    err = capsys.readouterr().err.strip()
    assert len(run.calls) == calls and "\n" not in err and "--kernel: kernel: unknown kernel 'triton_matmu'" in err
    assert not (tmp_path / "q").exists()


def test_bench_times_several_kernels_in_turn(bench, tmp_path, capsys):
    """``--kernel a,b``: both kernels at every shape and precision, one after the other; the archive's
    members and the table's rows are per kernel; an unknown name among them is refused before any point."""
    run = FakeRun(fail_at={1})
    assert bench.main([str(tmp_path / "o"), "--kernel", "triton_matmul,triton_tma_persistent", "--precision",
                       "bf16:col", "--limit", "2", "--mode", "compile"], run=run) == 0
    assert [c["kernel"]["name"] for c in run.calls] == ["triton_matmul", "triton_tma_persistent"] * 2
    assert run.calls[0]["shape"] == run.calls[1]["shape"] != run.calls[2]["shape"]
    recs = _records(tmp_path / "o" / "records.jsonl.xz")
    assert [r["heldout"]["kernel"] for r in recs] == ["triton_matmul", "triton_tma_persistent"] * 2
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    rows = {s["kernel"]: s for s in summary["summary"]}
    assert summary["kernel"] == "triton_matmul,triton_tma_persistent"
    assert (rows["triton_matmul"]["timed"], rows["triton_tma_persistent"]["timed"]) == (2, 1)
    assert rows["triton_tma_persistent"]["failed"] == 1
    out = capsys.readouterr().out
    assert "triton_tma_persistent | bf16 | row/col | 2 | 1 | 1 |" in out
    assert "region | triton_tma_persistent and its parameters" in out
    assert bench.main([str(tmp_path / "q"), "--kernel", "triton_matmul,nope", "--limit", "1"], run=run) == 2
    assert len(run.calls) == 4 and not (tmp_path / "q").exists()
    assert summary["shapes_done"] == 2 and summary["start"] == 0
    # a second call continues after the shapes the first one ran
    assert bench.main([str(tmp_path / "r"), "--kernel", "triton_matmul,triton_tma_persistent", "--precision", "bf16:col",
                       "--start", "2", "--limit", "1", "--mode", "compile"], run=run) == 0
    order = bench.interleave(__import__("gemmlab.dispatch.shapeset", fromlist=["x"]).load_shapeset().select("test"))
    assert run.calls[4]["shape"] == list(order[2].shape) == run.calls[5]["shape"] != run.calls[0]["shape"]
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["shapes_done"] == 3
    assert bench.main([str(tmp_path / "s"), "--start", "-1"], run=run) == 2


def test_bench_draw_sets_inputs_draw(bench, tmp_path):
    """``--draw device``: every point's inputs drawn and first verified on the device (inputs.draw);
    the default keeps the host's; summary.json says which; a bad value is refused before any point."""
    run = FakeRun()
    assert bench.main([str(tmp_path / "h"), "--limit", "1", "--mode", "compile"], run=run) == 0
    assert bench.main([str(tmp_path / "d"), "--limit", "1", "--mode", "compile", "--draw", "device"], run=run) == 0
    assert [c["inputs"] for c in run.calls] == [{"draw": "host"}, {"draw": "device"}]
    assert json.loads((tmp_path / "d" / "summary.json").read_text())["inputs_draw"] == "device"
    with pytest.raises(SystemExit) as exc:
        bench.main([str(tmp_path / "x"), "--draw", "gpu"], run=run)
    assert exc.value.code == 2 and len(run.calls) == 2


def test_bench_merge_joins_parts_of_a_split(bench, tmp_path, capsys):
    """``--merge A,B``: one table and summary.json over two runs' archives, nothing run; a point the
    second part ran again (the same kernel, precision, layout and shape) replaces the first's; an
    existing summary.json, a missing archive or a record without the heldout key is refused in one line."""
    run = FakeRun(fail_at={3})
    args = ["--kernel", "triton_matmul,triton_tma_persistent", "--precision", "bf16:col", "--mode", "compile"]
    assert bench.main([str(tmp_path / "a"), *args, "--limit", "2"], run=run) == 0  # shapes 0, 1: point 3 fails
    assert bench.main([str(tmp_path / "b"), *args, "--start", "1", "--limit", "2"], run=run) == 0  # shapes 1, 2
    calls = len(run.calls)
    parts = f"{tmp_path / 'a' / 'records.jsonl.xz'},{tmp_path / 'b' / 'records.jsonl.xz'}"
    capsys.readouterr()
    assert bench.main([str(tmp_path / "m"), "--merge", parts], run=run) == 0
    assert len(run.calls) == calls  # nothing run
    summary = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert (summary["points"], summary["shapes"]) == (6, 3)
    rows = {s["kernel"]: s for s in summary["summary"]}
    # shape 1's tma point failed in part a (call 3) and passed in part b (call 5): part b's counts
    assert (rows["triton_tma_persistent"]["points"], rows["triton_tma_persistent"]["timed"]) == (3, 3)
    assert rows["triton_matmul"]["failed"] == 0 and rows["triton_matmul"]["timed"] == 3
    expect = [0.5 + 0.1 * (i % 7) for i in (0, 4, 6)]  # triton_matmul: calls 0 (a), 4 and 6 (b; call 2 replaced)
    gm = math.exp(sum(math.log(x) for x in expect) / 3)
    assert rows["triton_matmul"]["geomean_pct"] == round(100 * gm, 1)
    out = capsys.readouterr().out
    assert "6 points (3 shapes) from 2 archive(s)" in out and "triton_tma_persistent | bf16 | row/col | 3 | 3 | 0 |" in out
    assert bench.main([str(tmp_path / "m"), "--merge", parts]) == 2  # summary.json exists: refused
    assert "exists; give a new OUTDIR" in capsys.readouterr().err
    assert bench.main([str(tmp_path / "e"), "--merge", ""], run=run) == 2  # an empty list, not "no --merge"
    assert "--merge: no such archive: (empty list)" in capsys.readouterr().err and len(run.calls) == calls
    assert bench.main([str(tmp_path / "n"), "--merge", str(tmp_path / "nope.jsonl.xz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.endswith("--merge: no such archive: " + str(tmp_path / "nope.jsonl.xz"))
    from gemmlab.stages.archive import Member, write_members
    write_members([Member("x/result.json", {"status": "ok"})], tmp_path / "other.jsonl.xz")
    assert bench.main([str(tmp_path / "n"), "--merge", str(tmp_path / "other.jsonl.xz")]) == 2
    assert "has no heldout key" in capsys.readouterr().err and not (tmp_path / "n" / "summary.json").exists()


def test_bench_cold_l2_decode_floor(bench, tmp_path, capsys):
    """``--l2 cold --max-m 16 --regions decode``: only decode shapes with M <= 16, each point timed with a
    cold L2 (one launch a sample after a flush), and the table gives the share of B's DRAM floor."""
    class Timed(FakeRun):
        def __call__(self, cfg, out_dir):
            rec = super().__call__(cfg, out_dir)
            M, N, K = cfg["shape"]
            # B's bfloat16 bytes at half the DRAM peak: 50% of the floor
            return {**rec, "timing": {"median_ms": 2 * 1000 * N * K * 2 / 2e12},
                    "device": {"dram_peak_bytes_per_s": 2e12}}
    run = Timed()
    assert bench.main([str(tmp_path / "o"), "--precision", "bf16:col", "--regions", "decode", "--max-m", "16",
                       "--l2", "cold", "--limit", "3", "--mode", "compile"], run=run) == 0
    assert len(run.calls) == 3 and all(c["shape"][0] <= 16 for c in run.calls)
    assert all(c["timing"]["l2"] == "cold" and c["timing"]["batch"] == 1 for c in run.calls)
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["max_m"] == 16 and summary["timing"]["l2"] == "cold"
    assert summary["summary"][0]["dram_floor"] == {"geomean_pct": 50.0, "min_pct": 50.0}
    assert "bf16 row/col: 50.0, 50.0" in capsys.readouterr().out
    assert bench.main([str(tmp_path / "p"), "--max-m", "0"], run=run) == 2


def test_bench_budget_stops_before_the_limit(bench, tmp_path):
    """With a budget, no point starts once the time left is under twice the longest recent point
    plus the archive's reserve; the points not run are listed and the archive is still written."""
    now = [0.0]

    def clock():
        return now[0]

    class Slow(FakeRun):
        def __call__(self, cfg, out_dir):
            now[0] += 10.0
            return super().__call__(cfg, out_dir)
    run = Slow()
    rc = bench.main([str(tmp_path / "o"), "--precision", "fp32,bf16", "--limit", "10", "--budget-s", "100"],
                    run=run, clock=clock)
    assert rc == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    # a 30 s guess before the first point, then 2 x 10 s, plus the archive's reserve: points start while
    # the time left exceeds that
    expect = sum(1 for k in range(20) if 100 - 10 * k > (30 if k == 0 else 20) + bench.FINAL_RESERVE_S)
    assert 0 < expect < 20
    assert len(run.calls) == expect and summary["points_run"] == expect and len(summary["not_run"]) == 20 - expect
    assert summary["stopped"].startswith("budget")
    assert len(_records(tmp_path / "o" / "records.jsonl.xz")) == expect


def test_bench_compile_mode_runs_real_points(tmp_path):
    """The script as the lead runs it, without a GPU: mode=compile, two precisions, in gemmlab's
    worker process; kernel=auto's choice is in each record."""
    proc = subprocess.run([sys.executable, str(REPO / ".ci" / "heldout_bench.py"), str(tmp_path / "o"),
                           "--precision", "fp32,bf16:col", "--regions", "odd", "--limit", "1", "--mode", "compile"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    recs = _records(tmp_path / "o" / "records.jsonl.xz")
    assert [r["heldout"]["precision"] for r in recs] == ["fp32", "bf16"]
    for r in recs:
        assert r["status"] == "compiled", r.get("error")
        assert r["dispatch"]["requested"] == "auto" and r["dispatch"]["chosen"]
        assert r["heldout"]["region"] == "odd" and r["heldout"]["split"] == "test"
    assert "precision | layout | points" in proc.stdout
    # gemmlab's readers take the archive as they take a sweep folder
    from gemmlab.stages import record_model as rm
    found = [rm.view(rec) for rec in recs]
    assert [r.status for r in found] == ["compiled", "compiled"]


def test_bench_precompiles_the_other_points_after_the_first(bench, tmp_path, monkeypatch):
    """mode=run: once the first point's record names the GPU's driver, the other points' configs go to
    gemmlab.run.precompile with that driver, once, before the second point runs; --precompile 0 and
    mode=compile skip it, and a failing precompile costs only the head start."""
    from gemmlab.run import precompile
    calls = []

    class Gpu(FakeRun):
        def __call__(self, cfg, out_dir):
            rec = super().__call__(cfg, out_dir)
            return {**rec, "device": {"name": "fake", "driver_version": "13.0"}}

    def fake(cfgs, driver, workers):
        calls.append((len(run.calls), [(c["shape"], c["precision"], c["layout"]["b"]) for c in cfgs], driver, workers))
        return {"points": len(cfgs), "instances": len(cfgs), "errors": 0, "first_errors": [], "seconds": 0.1,
                "workers": workers}

    monkeypatch.setattr(precompile, "precompile", fake)
    run = Gpu()
    assert bench.main([str(tmp_path / "o"), "--precision", "fp32,bf16:col", "--limit", "2", "--precompile", "3"],
                      run=run) == 0
    assert len(calls) == 1 and calls[0][0] == 1 and calls[0][2:] == ("13.0", 3)
    assert calls[0][1] == [(c["shape"], c["precision"], c["layout"]["b"]) for c in run.calls[1:]]
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["precompile"]["points"] == 3
    for args in (["--precompile", "0"], ["--mode", "compile"]):
        run = Gpu()
        assert bench.main([str(tmp_path / args[-1]), "--limit", "2", *args], run=run) == 0 and len(calls) == 1

    def broken(cfgs, driver, workers):
        raise RuntimeError("pool died\nmore")
    monkeypatch.setattr(precompile, "precompile", broken)
    run = Gpu()
    assert bench.main([str(tmp_path / "b"), "--limit", "2"], run=run) == 0 and len(run.calls) == 2
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["precompile"]["error"] == "RuntimeError: pool died"

    # a first point refused before the GPU opened (no driver in its record): the next one that names it starts
    # the precompile, of the points after it; once only
    class FirstRefused(Gpu):
        def __call__(self, cfg, out_dir):
            rec = super().__call__(cfg, out_dir)
            return {**rec, "device": {}} if len(self.calls) == 1 else rec
    monkeypatch.setattr(precompile, "precompile", fake)
    calls.clear()
    run = FirstRefused()
    assert bench.main([str(tmp_path / "r"), "--precision", "fp32,bf16:col", "--limit", "2"], run=run) == 0
    assert len(calls) == 1 and calls[0][0] == 2 and len(calls[0][1]) == 2


def test_bench_phase_means(bench, tmp_path):
    """Each archived point's heldout key holds outside_s (its wall beyond the record's phase_s.run_point);
    summary.json's phase_means_s averages every phase for the points under 2^30 FLOP and the rest."""
    now = [0.0]

    class Timed(FakeRun):
        def __call__(self, cfg, out_dir):
            now[0] += 2.0
            rec = super().__call__(cfg, out_dir)
            return {**rec, "phase_s": {"validate": 0.25, "timing": 1.0, "run_point": 1.5, "after_timing_parts": {}}}

    assert bench.main([str(tmp_path / "o"), "--regions", "decode,large", "--limit", "2"], run=Timed(),
                      clock=lambda: now[0]) == 0
    recs = _records(tmp_path / "o" / "records.jsonl.xz")
    assert [r["heldout"]["outside_s"] for r in recs] == [0.5, 0.5]
    means = json.loads((tmp_path / "o" / "summary.json").read_text())["phase_means_s"]
    small = [r for r in recs if 2 * r["heldout"]["shape"][0] * r["heldout"]["shape"][1] * r["heldout"]["shape"][2] < 2**30]
    assert 0 < len(small) < 2 and set(means) == {"small", "rest"}
    for m in means.values():
        assert m["points"] == 1 and m["wall"] == 2.0 and m["validate"] == 0.25 and m["timing"] == 1.0
        assert m["outside"] == 0.5 and m["compile"] == 0.0
