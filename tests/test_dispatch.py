"""kernel=auto (gemmlab.dispatch.auto) and the shape suite (gemmlab.dispatch.shapes), on the CPU: the suite's
families, table validation (one-line errors), table lookup, the fallback rules, the table builder
on real H200 records, and kernel=auto resolved through run_point in mode=compile."""

from __future__ import annotations

import json
import shutil

import pytest

from gemmlab.dispatch import auto as dispatch
from gemmlab.errors import ConfigError
from gemmlab.contract.hookspecs import Problem, KernelSpec, Launch, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.dispatch.shapes import TINY_FLOPS_LIMIT, load_suite, parse_suite

from clirun import REPO_ROOT as REPO  # noqa: E402  (the checkout, defined once)
DATA = REPO / "tests" / "data" / "h200"
# The rules are tested against a fixed set of kernels (this branch's built-ins), so the expected
# choices do not change when other branches add kernels the rules prefer (sgemm_*, splitk).
BASE_KERNELS = ("naive", "tiled", "ladder_starter", "ladder_strip", "cublas", "gemv_rows", "small_tile", "slicedk")


class SubsetRegistry:
    """The part of a Registry the dispatch rules read (``kernels``), limited to ``names`` plus
    extra specs."""

    def __init__(self, names=BASE_KERNELS, extra=()):
        full = load_registry(entry_points=False).kernels
        self.kernels = {n: full[n] for n in names if n in full}
        self.kernels.update({spec.name: spec for spec in extra})

    def get(self, name):
        return self.kernels[name]


REGISTRY = SubsetRegistry()


def table_with(*entries, device=None) -> dispatch.Table:
    data = {"schema": dispatch.TABLE_SCHEMA, "device": device or {"name": "NVIDIA H200", "sm_count": 132},
            "entries": list(entries)}
    return dispatch.parse_table(data, "t.json")


def entry(shape, kernel="tiled", **params):
    return {"precision": "fp32", "layout": ["row", "row"], "shape": list(shape), "kernel": kernel, "params": params}


# --- the suite --------------------------------------------------------------------------------------

def test_suite_has_the_families_and_at_least_40_shapes():
    suite = load_suite()
    assert len(suite.shapes) >= 40
    assert set(suite.families) == {"decode", "prefill", "tall_skinny", "short_wide", "k_heavy", "k_light", "odd",
                                   "tiny", "square"}
    assert suite.family_of((1, 4096, 4096)) == "decode"
    assert suite.family_of(Shape(256, 256, 65536)) == "k_heavy"
    assert suite.family_of((3, 3, 3)) is None
    assert {s.M for s in suite.families["decode"]} == {1, 8, 16, 64}
    assert {s.M for s in suite.families["prefill"]} == {512, 2048, 8192}
    assert all(s.M * s.N * s.K <= TINY_FLOPS_LIMIT for s in suite.families["tiny"])
    assert (4095, 4097, 1023) in suite.families["odd"] and (35, 79, 19) in suite.families["odd"]


def test_suite_sweep_value_round_trips():
    suite = load_suite()
    assert suite.sweep_value(["tiny"]).startswith("[1,1,1],[16,16,16]")
    assert suite.sweep_value().count("],[") == len(suite.shapes) - 1
    with pytest.raises(ConfigError, match="unknown family 'huge'"):
        suite.select(["huge"])


@pytest.mark.parametrize("data, match", [
    ({"families": {"a": [[1, 2, 3]], "b": [[1, 2, 3]]}}, "in both a and b"),
    ({"families": {"a": [[1, 2]]}}, "not \\[M, N, K\\]"),
    ({"families": {"a": [[1, 0, 3]]}}, "not \\[M, N, K\\]"),
    ({"families": {"Bad": [[1, 2, 3]]}}, "must match"),
    ({"families": {}}, "non-empty"),
    ({"schema": "other", "families": {"a": [[1, 2, 3]]}}, "schema"),
])
def test_bad_suite_is_one_line(data, match):
    with pytest.raises(ConfigError, match=match) as exc:
        parse_suite(data, "s.yaml")
    assert "\n" not in str(exc.value) and str(exc.value).startswith("shapes: s.yaml: ")


# --- table validation ---------------------------------------------------------------------------------

def test_shipped_table_loads():
    table = dispatch.load_table()
    assert table.device["name"] == "NVIDIA H200" and table.sm_count == 132
    full = load_registry(entry_points=False).kernels
    # the H200 shapes evidence: 34 of the 45 suite shapes have a measured fp32 candidate; the BF16
    # pass (docs/results/shapes-h200.jsonl.xz/bf16-pass1) 26 of its 26 swept shapes
    assert [e.precision for e in table.entries].count("fp32") == 34
    assert [e.precision for e in table.entries].count("bf16") == 26 and len(table.entries) == 60
    for e in table.entries:  # each entry names a registered NVRTC kernel, never a library one
        assert e.kernel in full and isinstance(full[e.kernel], KernelSpec), e.kernel


def test_shipped_table_entries_are_their_records():
    """Each shipped entry points at its raw record under ``records_dir`` (the archive
    docs/results/shapes-h200.jsonl.xz, each ``record`` a member path inside it; the BF16 entries'
    records under its bf16-pass1/tune and bf16-pass2/tune),
    a valid timed record of exactly that kernel, parameters and shape, with the entry's median and
    ratio; and building the table again from those records gives the same entries."""
    from gemmlab.stages.record_model import read_record
    table = dispatch.load_table()
    root = REPO / table.meta["records_dir"]
    assert root == REPO / "docs" / "results" / "shapes-h200.jsonl.xz" and root.is_file()
    for e in table.entries:
        rec = read_record(root / e.extra["record"])
        assert rec.category == "timed" and rec.is_valid and rec.device == "NVIDIA H200", e.extra["record"]
        assert (rec.kernel, rec.params, rec.shape) == (e.kernel, dict(e.params), tuple(e.shape))
        assert rec.median_ms == pytest.approx(e.extra["median_ms"])
        assert rec.ratio_to_baseline == pytest.approx(e.extra["ratio_to_baseline"]) and rec.baseline == "cublas"
    rebuilt, stats = dispatch.build_table([root / "tune", root / "bf16-pass1" / "tune", root / "bf16-pass2" / "tune"],
                                          records_dir=root)
    # every sweep record is valid and timed: 69 fp32 (34 shapes win) and 69 + 57 bf16 (26 shapes)
    assert stats["used"] == stats["records"] == 69 + 69 + 57
    assert sum(e.extra["candidates"] for e in table.entries) == 69 + 69 + 57
    assert ([(e.key, e.kernel, dict(e.params), e.extra["record"]) for e in rebuilt.entries]
            == [(e.key, e.kernel, dict(e.params), e.extra["record"]) for e in table.entries])
    assert rebuilt.meta["records_dir"] == str(root)


def test_build_records_dir_is_checked(tmp_path):
    """``gemmlab-tune build --records-dir``: a record outside that folder is a one-line error
    naming the field (the relative path could not point at it)."""
    from gemmlab.cli import tune
    root = REPO / "docs" / "results" / "shapes-h200.jsonl.xz"
    with pytest.raises(ConfigError) as info:
        dispatch.build_table([root / "tune"], records_dir=tmp_path)
    assert info.value.field == "records_dir" and "\n" not in str(info.value)
    assert tune.main(["build", str(root / "tune"), "-o", str(tmp_path / "t.json"), "--records-dir", str(tmp_path)]) == 2


@pytest.mark.parametrize("text, match", [
    ("{not json", "not valid JSON"),
    ("[]", "must be a JSON object"),
    ('{"schema": "x", "entries": []}', "schema must be 'gemmlab.tuning/1'"),
    ('{"schema": "gemmlab.tuning/1"}', "entries must be a list"),
    ('{"schema": "gemmlab.tuning/1", "entries": [{"precision": "fp32"}]}', "lacks 'layout'"),
    ('{"schema": "gemmlab.tuning/1", "entries": [{"precision": "fp4", "layout": ["row","row"], "shape": [1,1,1], '
     '"kernel": "tiled", "params": {}}]}', "precision must be one of"),
    ('{"schema": "gemmlab.tuning/1", "entries": [{"precision": "fp32", "layout": ["row"], "shape": [1,1,1], '
     '"kernel": "tiled", "params": {}}]}', "layout must be"),
    ('{"schema": "gemmlab.tuning/1", "entries": [{"precision": "fp32", "layout": ["row","row"], "shape": [1,-1,1], '
     '"kernel": "tiled", "params": {}}]}', "shape must be"),
    ('{"schema": "gemmlab.tuning/1", "entries": [{"precision": "fp32", "layout": ["row","row"], "shape": [1,1,1], '
     '"kernel": "auto", "params": {}}]}', "kernel must be a kernel name"),
    ('{"schema": "gemmlab.tuning/1", "entries": [{"precision": "fp32", "layout": ["row","row"], "shape": [1,1,1], '
     '"kernel": "tiled", "params": {"BM": "64"}}]}', "params must map"),
    ('{"schema": "gemmlab.tuning/1", "device": {"sm_count": 0}, "entries": []}', "sm_count"),
])
def test_bad_table_file_is_one_line(tmp_path, text, match):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as exc:
        dispatch.load_table(path)
    assert exc.value.field == "kernel.table" and "\n" not in str(exc.value) and str(path) in str(exc.value)


def test_missing_table_and_duplicate_entry(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        dispatch.load_table(tmp_path / "none.json")
    with pytest.raises(ConfigError, match="a second entry"):
        table_with(entry((1, 2, 3)), entry((1, 2, 3), kernel="naive"))


# --- lookup and rules ----------------------------------------------------------------------------------

def test_table_entry_wins_with_its_params():
    table = table_with(entry((512, 512, 512), "tiled", BM=32, BN=32, BK=16, TM=4, TN=1))
    choice = dispatch.choose(Shape(512, 512, 512), REGISTRY, table)
    assert (choice.kernel, choice.source) == ("tiled", "table")
    assert choice.params == {"BM": 32, "BN": 32, "BK": 16, "TM": 4, "TN": 1}
    rec = choice.record()
    assert rec["entry"]["shape"] == [512, 512, 512] and rec["requested"] == "auto" and "rule" not in rec


def test_table_is_exact_per_precision_layout_and_shape():
    table = table_with(entry((512, 512, 512), "naive", BX=8, BY=8))
    assert dispatch.choose(Shape(512, 512, 512), REGISTRY, table).match == "exact"
    assert dispatch.choose(Shape(512, 512, 511), REGISTRY, table).match == "nearest"
    assert dispatch.choose(Shape(512, 512, 1024), REGISTRY, table).source == "rule"
    assert table.lookup(Shape(512, 512, 512), "tf32") is None
    assert table.lookup(Shape(512, 512, 512), "fp32", ("col", "row")) is None


def test_table_entry_of_unknown_kernel_falls_back_to_rules():
    table = table_with(entry((4096, 4096, 4096), "no_such_kernel"))
    choice = dispatch.choose(Shape(4096, 4096, 4096), REGISTRY, table)
    assert choice.source == "rule" and any("no_such_kernel: not registered" in s for s in choice.skipped)


def test_table_entry_the_kernel_rejects_falls_back(tmp_path):
    table = table_with(entry((1000, 1000, 1000), "ladder_strip", TM=16, BK=8))  # square multiples of 64 only
    choice = dispatch.choose(Shape(1000, 1000, 1000), REGISTRY, table)
    assert choice.source == "rule" and "ladder_strip" in choice.skipped[0]


@pytest.mark.parametrize("shape, kernel, rule", [
    ((1, 4096, 4096), "gemv_rows", "decode-like"),
    ((16, 11008, 4096), "gemv_rows", "decode-like"),
    ((64, 4096, 14336), "slicedk", "decode-like"),
    ((256, 256, 256), "slicedk", "tiny"),
    ((1, 1, 1), "small_tile", "tiny"),
    ((35, 79, 19), "slicedk", "tiny"),
    ((8, 8, 4), "small_tile", "tiny"),
    ((256, 256, 65536), "slicedk", "K-heavy"),  # split-K first when a splitk kernel is registered
    ((4096, 4096, 4096), "tiled", "large"),
    ((65536, 64, 64), "tiled", "medium"),
    ((300, 300, 300), "slicedk", "small"),
])
def test_rules_pick_by_shape(shape, kernel, rule):
    choice = dispatch.choose(Shape(*shape), REGISTRY)
    assert choice.kernel == kernel and choice.source == "rule" and choice.reason.startswith(rule)
    REGISTRY.get(kernel).check(Shape(*shape), choice.params, dispatch_facts())


def dispatch_facts():
    from gemmlab.gpu.device import offline_facts
    return offline_facts("90")


def test_rule_params_follow_the_shape():
    p1 = dispatch.choose(Shape(1, 4096, 4096), REGISTRY).params
    p16 = dispatch.choose(Shape(16, 11008, 4096), REGISTRY).params
    assert p1["MT"] == 1 and p16["MT"] == 16
    assert p1["NT"] == 16  # 4096/32 = 128 blocks < 2 x 132 SMs: narrower blocks
    assert p16["NT"] == 32  # 344 blocks
    assert dispatch.choose(Shape(4096, 4096, 4096), REGISTRY).params["BM"] == 128
    assert dispatch.choose(Shape(32, 32, 16), REGISTRY).params["KS"] == 2  # one BK = 8 chunk per slice
    assert dispatch.choose(Shape(16, 16, 7), REGISTRY).params["KS"] == 1  # small_tile: K < 8
    assert dispatch.choose(Shape(64, 4096, 14336), REGISTRY).kernel == "slicedk"  # M > 16: register tiles first
    assert dispatch.choose(Shape(512, 512, 16384), REGISTRY).params == (
        {"BM": 32, "BN": 32, "BK": 16, "TM": 4, "TN": 4, "KS": 4})  # 256 blocks: one wave of 32x32 tiles
    # fewer SMs in the table's GPU: wider gemv blocks already give 2 blocks per SM
    few = table_with(device={"name": "small GPU", "sm_count": 16})
    assert dispatch.choose(Shape(1, 4096, 4096), REGISTRY, few).params["NT"] == 128


class FakeSpec(KernelSpec):
    """A kernel the rules may prefer; ``tile`` = (BM, BN) gives its launch geometry."""

    tile = (64, 64)

    def entry(self, params):
        return "x"

    def launch(self, shape, params, device):
        return Launch((-(-shape.N // self.tile[1]), -(-shape.M // self.tile[0]), 1), (256, 1, 1))


class PreferringSpec(FakeSpec):
    """A kernel of another plugin that states preferences (issue 41): ``wants`` maps a regime to
    (rank, params) pairs; SPLITS=-1 asks for splits sized like the built-in split-K (2 blocks per SM)."""

    wants = {}

    def preferences(self, problem, device, regime):
        from gemmlab.contract.regimes import Preference
        out = []
        for rank, params in self.wants.get(regime, ()):
            if params.get("SPLITS") == -1:
                tiles = -(-problem.M // 64) * -(-problem.N // 64)
                params = {**params, "SPLITS": max(1, min(-(-2 * device.sm_count // tiles), problem.K // 512))}
            out.append(Preference(rank, params, "a test's preference"))
        return out


def test_preferred_kernels_from_other_plugins_are_used_when_registered():
    """A registered kernel that states a K-heavy preference ahead of the built-ins takes the K-heavy
    shapes with the parameters it sized (its check decides what it accepts); no core change."""
    fake = PreferringSpec(name="split_fake", source="x.cu", defaults={"SPLITS": 4})
    fake.wants = {"k_heavy": ((-1, {"SPLITS": -1}),)}
    reg = SubsetRegistry(extra=[fake])
    choice = dispatch.choose(Shape(256, 256, 65536), reg)
    assert choice.kernel == "split_fake" and choice.params == {"SPLITS": 17}  # 16 tiles x 17 >= 2 x 132 SMs
    assert "a test's preference" in choice.reason
    assert dispatch.choose(Shape(512, 512, 16384), reg).params == {"SPLITS": 5}
    assert dispatch.choose(Shape(4096, 4096, 4096), reg).kernel != "split_fake"  # not K-heavy: it states nothing


def test_unsupported_problem_is_a_clear_error():
    with pytest.raises(ConfigError) as exc:
        dispatch.choose(Shape(64, 64, 64), REGISTRY, precision="fp8")
    msg = str(exc.value)
    assert msg.startswith("kernel: auto: no registered kernel supports fp8 row/row 64x64x64 (") and "\n" not in msg


def test_a_layout_no_kernel_of_the_precision_runs_names_the_ones_that_do():
    from gemmlab.contract.registry import load_registry
    with pytest.raises(ConfigError) as exc:
        dispatch.choose(Shape(64, 7168, 2048), load_registry(entry_points=False), precision="fp8")
    assert str(exc.value).startswith("kernel: auto: no registered kernel supports fp8 row/row 64x7168x2048; fp8 runs "
                                     "layouts row/col (layout.a/layout.b) (")


def test_library_kernels_are_never_chosen():
    table = table_with(entry((64, 64, 64), "cublas"))
    choice = dispatch.choose(Shape(64, 64, 64), REGISTRY, table)
    assert choice.kernel != "cublas" and "library kernel" in choice.skipped[0]


# --- resolve_config ---------------------------------------------------------------------------------------

def test_resolve_leaves_other_kernels_alone():
    cfg = {"kernel": {"name": "tiled", "BM": 32}, "shape": [1, 2, 3]}
    assert dispatch.resolve_config(cfg, REGISTRY) == (cfg, None)


def test_resolve_auto(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(table_with(entry((63, 65, 33), "naive", BX=8, BY=4)).as_json()))
    cfg, rec = dispatch.resolve_config({"kernel": {"name": "auto", "table": str(path)}, "shape": [63, 65, 33]},
                                       REGISTRY)
    assert cfg["kernel"] == {"name": "naive", "BX": 8, "BY": 4}
    assert rec["source"] == "table" and rec["table"] == str(path) and rec["chosen"] == "naive"


@pytest.mark.parametrize("kernel, field", [({"name": "auto", "BM": 64}, "kernel.BM"),
                                           ({"name": "auto", "table": 3}, "kernel.table"),
                                           ({"name": "auto", "table": "/nonexistent.json"}, "kernel.table")])
def test_resolve_auto_bad_input(kernel, field):
    with pytest.raises(ConfigError) as exc:
        dispatch.resolve_config({"kernel": kernel, "shape": [8, 8, 8]}, REGISTRY)
    assert exc.value.field == field


def test_run_point_auto_compile_records_dispatch(tmp_path, sass_not_read):
    from gemmlab.run.pipeline import run_point
    # 4x4096x4096: no entry of the shipped H200 table within 1.5x in M (1, 8), so the rules choose
    rec = run_point({"kernel": {"name": "auto"}, "shape": [4, 4096, 4096], "mode": "compile"}, tmp_path / "a")
    assert rec["status"] == "compiled", rec["error"]
    assert rec["kernel"]["name"] == "gemv_rows" and rec["dispatch"]["chosen"] == "gemv_rows"
    assert rec["dispatch"]["source"] == "rule" and rec["config"]["kernel"]["name"] == "auto"
    assert rec["kernel"]["params"] == rec["dispatch"]["params"]
    assert rec["compile"]["resources"] is None or rec["compile"]["resources"]["spill_store_bytes"] == 0
    # 8x4096x4096 is in the shipped table: its entry's kernel and parameters are used
    rec = run_point({"kernel": {"name": "auto"}, "shape": [8, 4096, 4096], "mode": "compile"}, tmp_path / "t")
    assert rec["status"] == "compiled", rec["error"]
    assert rec["dispatch"]["source"] == "table" and rec["dispatch"]["match"] == "exact"
    assert rec["kernel"]["name"] == "gemv_rows" and rec["kernel"]["params"] == {"MT": 8, "NT": 16, "KW": 8, "U": 8}
    (tmp_path / "bad.json").write_text("[]")
    bad = run_point({"kernel": {"name": "auto", "table": str(tmp_path / "bad.json")}, "shape": [8, 8, 8],
                     "mode": "compile"}, tmp_path / "b")
    assert bad["status"] == "invalid" and bad["valid"] is False
    assert bad["error"] == f"kernel.table: {tmp_path / 'bad.json'}: must be a JSON object with schema gemmlab.tuning/1"


# --- the table builder --------------------------------------------------------------------------------------

def test_build_from_real_h200_records(tmp_path):
    """tests/data/h200 holds real records (naive, tiled, ladder_strip, cublas at 256, 1024, 4096 and a
    failed one): per shape the smallest ratio to cuBLAS wins; cuBLAS and the failed point never enter."""
    table, stats = dispatch.build_table([DATA])
    assert stats["records"] == 13 and stats["used"] == 9
    assert stats["skipped"] == {"library kernel": 3, "not a valid timed record": 1}
    best = {tuple(e.shape): (e.kernel, e.extra["ranked_by"]) for e in table.entries}
    assert best == {(256, 256, 256): ("naive", "ratio_to_baseline"), (1024, 1024, 1024): ("tiled", "ratio_to_baseline"),
                    (4096, 4096, 4096): ("tiled", "ratio_to_baseline")}
    assert table.device == {"name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(table.as_json()))
    again = dispatch.load_table(path)  # what build writes, load accepts
    assert again.lookup(Shape(256, 256, 256)).params == {"BX": 16, "BY": 16}


def test_build_ranks_by_median_without_a_common_baseline(tmp_path):
    for name in ("naive-256", "tiled-256"):
        rec = json.loads((DATA / name / "result.json").read_text())
        rec.pop("ratio_to_baseline")
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps(rec))
    table, _ = dispatch.build_table([tmp_path])
    assert table.entries[0].kernel == "naive" and table.entries[0].extra["ranked_by"] == "median_ms"


def test_build_refuses_mixed_gpus_and_empty_input(tmp_path):
    shutil.copytree(DATA / "naive-256", tmp_path / "a")
    rec = json.loads((DATA / "tiled-256" / "result.json").read_text())
    rec["device"]["name"] = "NVIDIA H100"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "result.json").write_text(json.dumps(rec))
    with pytest.raises(ConfigError, match="several GPUs"):
        dispatch.build_table([tmp_path])
    assert dispatch.build_table([tmp_path], device="NVIDIA H100")[0].entries[0].kernel == "tiled"
    with pytest.raises(ConfigError, match="no valid timed record"):
        dispatch.build_table([DATA / "cublas-256"])


def test_tune_cli_build_show_choose_and_bad_table(cli, tmp_path):
    def run_tune(*args, cwd):
        return cli(args, cwd, module="gemmlab.cli.tune")
    out = tmp_path / "t.json"
    proc = run_tune("build", str(DATA), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "3 entries from 9 of 13 records" in proc.stdout
    assert run_tune("build", str(DATA), "-o", str(out), cwd=tmp_path).returncode == 2  # never overwrites
    show = run_tune("show", str(out), cwd=tmp_path)
    assert show.returncode == 0 and "256x256x256: naive BX=16 BY=16" in show.stdout
    choose = run_tune("choose", "256", "256", "256", "--table", str(out), cwd=tmp_path)
    assert choose.returncode == 0 and json.loads(choose.stdout)["source"] == "table"
    (tmp_path / "bad.json").write_text("{oops")
    bad = run_tune("choose", "1", "1", "1", "--table", str(tmp_path / "bad.json"), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("gemmlab-tune: error: table: ")


def test_cli_auto_bad_input_is_one_line(cli, tmp_path):
    proc = cli(["kernel=auto", "kernel.BM=64", "mode=compile"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("gemmlab: error: kernel.BM: kernel=auto chooses")
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "outputs").exists()
    (tmp_path / "bad.json").write_text('{"schema": "gemmlab.tuning/1", "entries": 3}')
    proc = cli(["kernel=auto", f"kernel.table={tmp_path / 'bad.json'}", "mode=compile"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"gemmlab: error: kernel.table: {tmp_path / 'bad.json'}: entries must be a list")
    assert "Traceback" not in proc.stderr


def test_cli_experiment_shapes_one_family_compile(cli, tmp_path, sass_not_read):
    """experiment=shapes sweeps the suite (here: the tiny family) with kernel=auto and records the choice."""
    table = tmp_path / "t.json"
    table.write_text(json.dumps(table_with(entry((16, 16, 16), "naive", BX=8, BY=8)).as_json()))
    # baseline=null: the experiment's cublas baseline needs the optional cublas extra (absent in CI);
    # that the experiment sets baseline=cublas is checked from its file below.
    # The points run in this process (isolation.process=false) with sass_not_read: the choice and the
    # record are the command's whatever process compiles, and no SASS is read here (each of the four
    # kernels' nvdisasm run, about 0.4 s, skipped)
    proc = cli(["experiment=shapes", "mode=compile", "hydra.sweeper.params.shape=${gemmlab_suite:tiny}",
                "hydra.sweep.dir=sweep", f"kernel.table={table}", "baseline=null", "isolation.process=false"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    recs = [json.loads(p.read_text()) for p in sorted((tmp_path / "sweep").glob("*/result.json"))]
    assert len(recs) == len(load_suite().families["tiny"])
    by_shape = {tuple(r["shape"].values()): r for r in recs}
    assert by_shape[(16, 16, 16)]["dispatch"]["source"] == "table" and by_shape[(16, 16, 16)]["kernel"] == (
        {"name": "naive", "params": {"BX": 8, "BY": 8}, "plugin": "gemmlab_plugins.naive", "backend": "nvrtc"})
    for shape, rec in by_shape.items():
        assert rec["status"] == "compiled" and rec["config"]["kernel"] == {  # conf/kernel/auto.yaml's defaults
            "name": "auto", "table": str(table), "rank": "rules", "tune": "off", "tune_k": 4, "tune_budget_s": 60,
            "tune_cache": None, "model": None}
        assert rec["config"]["baseline"] is None and rec["config"]["timing"]["mode"] == "both"
        if shape != (16, 16, 16):
            assert rec["dispatch"]["source"] == "rule" and rec["kernel"]["name"] in ("small_tile", "slicedk")


def test_experiment_shapes_measures_against_cublas_with_graph_timing():
    from omegaconf import OmegaConf
    from gemmlab.paths import CONF_DIR
    conf = OmegaConf.load(CONF_DIR / "experiment" / "shapes.yaml")
    assert conf.baseline == "cublas"
    assert {"override /timing": "graph"} in OmegaConf.to_container(conf)["defaults"]


def test_nearest_entry_within_factor_and_same_regime():
    table = table_with(entry((1, 4096, 4096), "gemv_rows", MT=1, NT=64, KW=8, U=4),
                       entry((4096, 4096, 4096), "tiled", BM=64, BN=64, BK=16, TM=8, TN=2))
    near = dispatch.choose(Shape(1, 4096, 5120), REGISTRY, table)
    assert near.source == "table" and near.match == "nearest" and near.params["NT"] == 64
    assert near.record()["entry"]["shape"] == [1, 4096, 4096] and near.record()["match"] == "nearest"
    assert dispatch.choose(Shape(3000, 3000, 3000), REGISTRY, table).params["BM"] == 64  # 4096^3's entry
    assert dispatch.choose(Shape(2, 4096, 4096), REGISTRY, table).source == "rule"  # M 2x away: too far
    assert dispatch.choose(Shape(1, 4096, 8192), REGISTRY, table).source == "rule"  # K 2x away
    # a 4096x4096x2800 shape is within 1.5x of 4096^3 but both are "large": allowed; a decode shape
    # never takes a large entry even when close in log space
    assert dispatch.nearest_entry(table, Shape(1, 4096, 4096)).kernel == "gemv_rows"
    small = table_with(entry((16, 64, 64), "naive", BX=8, BY=8))
    assert dispatch.nearest_entry(small, Shape(12, 64, 64)) is not None
    assert dispatch.nearest_entry(small, Shape(16, 64, 64), precision="tf32") is None


def test_sanitizer_child_records_are_not_points(tmp_path):
    shutil.copytree(DATA / "naive-256", tmp_path / "run")
    shutil.copytree(DATA / "tiled-256", tmp_path / "run" / "sanitizer-racecheck" / "run")
    assert dispatch.find_records([tmp_path]) == [tmp_path / "run" / "result.json"]


def test_large_candidates_need_a_full_wave_of_their_own_blocks():
    """A 128x256-tile kernel is preferred for large shapes, but skipped where its launch would have
    fewer blocks than SMs (1000x3000: 8 x 12 = 96 < 132)."""
    big = PreferringSpec(name="big_fake", source="x.cu", defaults={"BM": 128})
    big.tile = (128, 256)
    big.wants = {"large": ((-1, {}),)}
    reg = SubsetRegistry(extra=[big])
    assert dispatch.choose(Shape(4096, 4096, 4096), reg).kernel == "big_fake"
    odd = dispatch.choose(Shape(1000, 3000, 777), reg)
    assert odd.kernel == "tiled" and any("96 blocks < 132 SMs" in s for s in odd.skipped)


def test_dispatch_defaults_come_from_the_contract():
    """kernel=auto's defaults (precision, layouts, names, what a kernel supports when it declares
    nothing) are the plugin contract's (gemmlab.contract.hookspecs.Problem / KernelBase / PRECISIONS /
    LAYOUTS), not copies: no default argument, ``.get`` fallback or option default in
    gemmlab/dispatch/auto.py is a literal precision or layout."""
    import ast
    import inspect

    from gemmlab.dispatch import auto as dispatch

    from gemmlab.contract import hookspecs
    assert dispatch.PRECISION_NAMES is hookspecs.PRECISIONS and dispatch.LAYOUT_NAMES is hookspecs.LAYOUTS
    problem = hookspecs.Problem(hookspecs.Shape(1, 1, 1))
    assert dispatch.DEFAULT_PRECISION == problem.precision
    assert dispatch.DEFAULT_LAYOUT == (problem.layout_a, problem.layout_b)
    literal = set(hookspecs.PRECISIONS) | set(hookspecs.LAYOUTS)

    def is_literal(node) -> bool:
        return isinstance(node, ast.Constant) and node.value in literal or (
            isinstance(node, ast.Tuple) and any(is_literal(e) for e in node.elts))

    tree = ast.parse(inspect.getsource(dispatch))
    found = []
    for node in ast.walk(tree):
        defaults = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("get", "getattr") and len(node.args) == 2:
                defaults = [node.args[1]]
            defaults += [k.value for k in node.keywords if k.arg == "default"]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            defaults = node.args[2:]
        elif isinstance(node, ast.IfExp):  # x if ok else <default>
            defaults = [node.orelse]
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            defaults = [node.value] if any(t.id.isupper() for t in node.targets) else []
        found += [ast.unparse(d) for d in defaults if is_literal(d)]
    assert not found, found
    from gemmlab.stages.config import LayoutOptions, RunConfig
    assert RunConfig.precision == problem.precision and (LayoutOptions.a, LayoutOptions.b) == dispatch.DEFAULT_LAYOUT
# --- the rules with every built-in kernel (issue 10, second pass: streamk, splitk_warptile) ----------

FULL = load_registry(entry_points=False)


@pytest.mark.parametrize("shape, kernel, params", [
    ((256, 256, 65536), "splitk_warptile", {"BM": 128, "SPLITS": 66}),   # 4 tiles x 66 = one wave of 264
    ((512, 512, 16384), "splitk_warptile", {"BM": 128, "SPLITS": 16}),   # 16 x 16 = 256 <= 264, 17 would spill
    ((64, 4096, 4096), "splitk_warptile", {"BM": 64, "BN": 128, "SPLITS": 16}),  # decode M = 64
    ((16, 4096, 14336), "streamk", {"BM": 16, "BN": 128, "WPS": 4}),    # decode 8 < M <= 16
    ((8, 4096, 4096), "gemv_rows", {"MT": 8}),                           # decode M <= 8
    ((512, 4096, 4096), "streamk", {"BM": 128, "BN": 128, "WPS": 2}),    # medium: no full wave of 128x128
    ((512, 11008, 4096), "streamk", {"BM": 128}),                        # 172 128x256 tiles: 65% of 2 waves
    ((32768, 128, 256), "streamk", {"BN": 128}),                         # a 128x256 tile half past N
    ((65536, 64, 64), "streamk", {"BM": 128, "BN": 64, "WPS": 4}),       # N = 64: half-width tile
    ((4096, 4096, 4096), "sgemm_pipelined", {}),                          # 512 128x256 tiles, 97% of 4 waves
    ((35, 79, 19), "slicedk", {"BM": 16, "BK": 8, "KS": 3}),              # tiny, K < 64: one chunk per slice
])
def test_rules_with_all_builtins(shape, kernel, params):
    choice = dispatch.choose(Shape(*shape), FULL, dispatch.Table(device={"sm_count": 132}))
    assert choice.kernel == kernel and choice.source == "rule", choice.reason
    assert {k: choice.params[k] for k in params} == params
    FULL.get(kernel).check(Shape(*shape), choice.params, dispatch_facts())


def test_splitk_warptile_splits_fill_one_wave():
    from gemmlab_plugins.streamk import wave_splits
    """tiles x SPLITS never exceeds WPS x SMs (no partial second wave) and each slice keeps >= 256 of K."""
    for shape in (Shape(256, 256, 65536), Shape(512, 512, 16384), Shape(128, 1024, 32768), Shape(64, 4096, 700)):
        p = wave_splits(shape, 132)
        tiles = -(-shape.M // p["BM"]) * -(-shape.N // p["BN"])
        per_sm = 2 if p["BM"] == 128 == p["BN"] else 4
        assert tiles * p["SPLITS"] <= per_sm * 132 and (p["SPLITS"] == 1 or shape.K // p["SPLITS"] >= 256)
    assert wave_splits(Shape(64, 4096, 700), 132)["SPLITS"] == 2


@pytest.mark.parametrize("shape, layout, params", [
    ((4096, 4096, 4096), ("row", "row"), {"BM": 128, "BN": 256}),
    ((2048, 2048, 2048), ("row", "col"), {"BM": 128, "BN": 128}),   # 128x256 tiles: 128 blocks, no full wave
    ((1000, 1000, 777), ("row", "row"), {"BM": 64, "BN": 64}),      # 64 128x128 tiles < 132 SMs
])
def test_bf16_rule_sizes_the_tensor_core_tile(shape, layout, params):
    """mma_bf16's tile by waves, where no wgmma kernel is registered."""
    reg = SubsetRegistry(names=("mma_bf16", "tma_bf16"), extra=[])
    choice = dispatch.choose(Shape(*shape), reg, dispatch.Table(device={"sm_count": 132}), "bf16", layout)
    assert choice.kernel == "mma_bf16" and choice.reason.startswith("tensor cores")
    assert {k: choice.params[k] for k in params} == params


def test_bf16_rule_picks_the_builtin_wgmma_kernel():
    """With every built-in registered, a large BF16 problem TMA can describe goes to wgmma_bf16."""
    choice = dispatch.choose(Shape(4096, 4096, 4096), FULL, dispatch.Table(device={"sm_count": 132}), "bf16")
    assert choice.kernel == "wgmma_bf16" and choice.reason.startswith("tensor cores")


def test_bf16_rule_prefers_a_registered_kernel_by_its_stated_rank():
    """A tensor-core kernel of another plugin ranked 100 goes before mma_bf16 (102 with a full wave);
    ranked 101.5 it follows mma_bf16's 64x64 tile (101) below a wave of 128x128 tiles."""
    wg = PreferringSpec(name="tc_fake", source="x.cu", defaults={"BN": 128}, precisions=("bf16",),
                        layouts=(("row", "row"), ("row", "col")))
    wg.wants = {"tensor_core": ((100, {}),)}
    reg = SubsetRegistry(names=("mma_bf16", "tma_bf16"), extra=[wg])
    assert dispatch.choose(Shape(4096, 4096, 4096), reg, precision="bf16").kernel == "tc_fake"
    wg.wants = {"tensor_core": ((101.5, {}),)}
    assert dispatch.choose(Shape(1000, 1000, 777), reg, precision="bf16").kernel == "mma_bf16"  # 64x64 first


def test_tf32_rule_picks_the_builtin_wgmma_kernel_for_either_layout_of_b():
    """tf32, a wave of 128x128 tiles: wgmma_tf32 for layout.b=col and, through its transpose into
    the workspace, for row-major B (89-97% of cuBLAS TF32 on the H200 against mma_tf32's ~30%)."""
    table = dispatch.Table(device={"sm_count": 132})
    choice = dispatch.choose(Shape(4096, 4096, 4096), FULL, table, "tf32", ("row", "col"))
    assert choice.kernel == "wgmma_tf32" and choice.reason.startswith("tensor cores"), choice.reason
    FULL.get("wgmma_tf32").check(Shape(4096, 4096, 4096), choice.params, dispatch_facts())
    row = dispatch.choose(Shape(4096, 4096, 4096), FULL, table, "tf32", ("row", "row"))
    assert row.kernel == "wgmma_tf32" and "transposed first" in row.reason, row.reason
    # fewer than a wave of 128x128 tiles with row-major B: mma_tf32 reads B as stored, now with 64x64
    # tiles (16 of 128x128 on 132 SMs; issue 41 item 3: its 128x256 default ran at 1-35% of cuBLAS there)
    small = dispatch.choose(Shape(512, 512, 512), FULL, table, "tf32", ("row", "row"))
    assert small.kernel == "mma_tf32" and (small.params["BM"], small.params["BN"]) == (64, 64), small.reason
    assert "mma_tf32 64x64 (B read as stored, no transpose)" in small.reason, small.reason


def test_tf32_rule_falls_back_to_mma_when_wgmma_refuses_or_is_absent():
    table = dispatch.Table(device={"sm_count": 132})
    # K % 4 != 0: TMA cannot describe the rows as stored; wgmma_tf32 pad-copies A and B first (relayout)
    assert dispatch.choose(Shape(4096, 4096, 4094), FULL, table, "tf32", ("row", "col")).kernel == "wgmma_tf32"
    reg = SubsetRegistry(names=("mma_tf32",), extra=[])
    assert dispatch.choose(Shape(4096, 4096, 4096), reg, table, "tf32", ("row", "col")).kernel == "mma_tf32"


# --- BF16 rules (issue 10, BF16 pass: decode_bf16, wgmma tiles by waves, split K) ------------------

def _bf16(shape, registry=FULL, table=None, layout=("row", "row")):
    return dispatch.choose(Shape(*shape), registry, table or dispatch.Table(device={"sm_count": 132}), "bf16", layout)


@pytest.mark.parametrize("layout", [("row", "row"), ("row", "col")])
@pytest.mark.parametrize("shape, params", [
    # 16-row blocks (plugins/decode_bf16.py: fill, DECODE_FILL): B col 16 warps U=2 for 7 warps a SM (924),
    # B row 8 warps U=1 for 5 a SM (660), the fewest splits that reach it
    ((1, 4096, 4096), {"col": {"MT": 1, "KW": 16, "U": 2, "SPLITS": 1},    # 64 column blocks x 16 = 1024
                       "row": {"MT": 1, "KW": 8, "U": 1, "SPLITS": 2}}),   # 64 x 8 = 512 < 660: 2 splits
    ((16, 11008, 4096), {"col": {"MT": 1, "KW": 16, "SPLITS": 1}, "row": {"MT": 1, "KW": 8, "SPLITS": 1}}),  # 172 blocks
    ((16, 256, 4096), {"col": {"MT": 1, "KW": 16, "SPLITS": 4},           # 4 x 16 x 4 = 256 warps: the most
                       "row": {"MT": 1, "KW": 8, "SPLITS": 8}}),          # with a full round each (128 chunks)
    ((32, 4096, 4096), {"MT": 2, "SPLITS": 8}),
    ((64, 4096, 4096), {"MT": 4, "KW": 8, "U": 1, "SPLITS": 2}),  # 64-row blocks of 8 warps, 1 per SM: 64 x 2
])
def test_bf16_decode_rule_picks_decode_bf16(shape, params, layout):
    params = params.get(layout[1], params)
    choice = _bf16(shape, layout=layout)
    assert choice.kernel == "decode_bf16" and choice.reason.startswith("decode-like"), choice.reason
    assert {k: choice.params[k] for k in params} == params
    FULL.get("decode_bf16").check_problem(Problem(Shape(*shape), "bf16", *layout), choice.params, dispatch_facts())


def test_bf16_decode_splits_fit_one_wave_and_keep_k_per_warp():
    for shape in (Shape(1, 4096, 4096), Shape(64, 11008, 4096), Shape(16, 256, 65536), Shape(1, 100000, 2048),
                  Shape(32, 4096, 4096), Shape(8, 64, 256)):
        for layout in ("row", "col"):
            p = FULL.get("decode_bf16").sized(Problem(shape, "bf16", "row", layout), dispatch_facts())
            blocks = -(-shape.N // 64) * -(-shape.M // (16 * p["MT"]))
            chunks = -(-shape.K // 32)
            assert 1 <= p["SPLITS"] <= 8
            if p["MT"] == 1:  # fill: every warp a full round of U chunks (or one split, one round at most)
                assert chunks >= p["SPLITS"] * p["KW"] * p["U"] or (p["SPLITS"] == 1 and p["KW"] == 4), (shape, p)
                # the fewest splits that bring the wanted warps: one split fewer would not
                per_sm, most = (7, 16) if layout == "col" else (5, 8)
                assert p["SPLITS"] == 1 or blocks * (p["SPLITS"] // 2) * most < per_sm * 132, (shape, p)
            else:
                per_sm = 1 if p["MT"] == 4 else 4
                assert p["SPLITS"] == 1 or blocks * p["SPLITS"] <= per_sm * 132
                assert p["SPLITS"] == 1 or chunks // p["SPLITS"] >= 2 * p["KW"] * p["U"]


@pytest.mark.parametrize("shape, params", [
    ((512, 4096, 4096), {"BM": 128, "BN": 128, "SCHED": 1}),    # 64 128x256 tiles on 132 SMs: 128x128 (128 tiles)
    ((1024, 1024, 1024), {"BM": 128, "BN": 64, "SCHED": 1}),    # 128 tiles of 128x64 in one wave
    ((65536, 64, 64), {"BM": 128, "BN": 64, "SCHED": 1}),       # N = 64: no tile past N
    ((64, 65536, 64), {"BM": 64, "BN": 256, "SCHED": 2}),       # M = 64: the ping-pong 64-row tile; K < 1024: no decode
    ((4096, 4096, 4096), {"BM": 128, "BN": 256, "SCHED": 1}),
])
def test_bf16_rule_sizes_the_wgmma_tile_by_waves(shape, params):
    choice = _bf16(shape)
    assert choice.kernel == "wgmma_bf16" and choice.reason.startswith("tensor cores"), choice.reason
    assert {k: choice.params[k] for k in params} == params
    FULL.get("wgmma_bf16").check_problem(Problem(Shape(*shape), "bf16"), choice.params, dispatch_facts())


@pytest.mark.parametrize("shape, tail", [
    ((4096, 4096, 4096), 1),      # 512 128x256 tiles = 3.9 waves on 132 SMs: the tail loses (measured)
    ((8192, 4096, 4096), 1),      # 1024 tiles = 7.8 waves: just under WGMMA_TAIL_MIN_WAVES
    ((6144, 6144, 6144), 2),      # 1152 tiles = 8.7 waves
    ((8192, 8192, 2048), 1),      # K < WGMMA_TAIL_MIN_K: the EPI=7 default gains more than the tail (measured)
    ((8192, 8192, 4096), 1),
    ((8192, 8192, 5120), 2),      # K = WGMMA_TAIL_MIN_K
    ((8192, 8192, 8192), 2),
    ((8192, 4224, 8192), 2),      # 1088 tiles, 89% of their waves: the rule's second branch says why too
    ((8192, 4224, 4096), 1),
])
def test_bf16_rule_adds_the_stream_k_tail_from_eight_waves(shape, tail):
    choice = _bf16(shape)
    assert choice.kernel == "wgmma_bf16" and (choice.params["BM"], choice.params["BN"]) == (128, 256), choice
    assert choice.params.get("TAIL", 1) == tail, choice.params
    assert ("stream-K tail (TAIL=2)" in choice.reason) == (tail == 2), choice.reason  # the record says why
    assert ("but K < 5120: no tail" in choice.reason) == (tail == 1 and shape[0] * shape[1] >= 8 * 132 * 128 * 256), choice.reason
    FULL.get("wgmma_bf16").check_problem(Problem(Shape(*shape), "bf16"), choice.params, dispatch_facts())


@pytest.mark.parametrize("shape", [(256, 256, 65536), (512, 512, 16384), (128, 1024, 32768)])
def test_bf16_k_heavy_splits_k(shape):
    """wgmma_bf16 64x128 ping-pong with SPLIT_K slices filling one wave of items, reduced through
    the workspace (REDUCE=2; measured on the H200, branch wsplit: 16, 4, 8 slices here, 73-86% of
    cuBLAS) where the kernel has those parameters, else decode_bf16's split K with 64-row blocks
    (never the unsplit mma_bf16 64x64: 5-14%)."""
    choice = _bf16(shape)
    assert choice.reason.startswith("K-heavy"), choice.reason
    if "REDUCE" in FULL.get("wgmma_bf16").defaults:
        assert choice.kernel == "wgmma_bf16" and choice.params["REDUCE"] == 2
        assert choice.params["SPLIT_K"] == {(256, 256, 65536): 16, (512, 512, 16384): 4, (128, 1024, 32768): 8}[shape]
        assert (choice.params["BM"], choice.params["BN"], choice.params["SCHED"]) == (64, 128, 2)
    else:
        assert choice.kernel == "decode_bf16" and choice.params["MT"] == 4 and choice.params["SPLITS"] > 1
        assert any("wgmma_bf16" in s and "SPLIT_K" in s for s in choice.skipped)


def test_bf16_rules_fall_back_without_the_new_kernels():
    """Without decode_bf16 and wgmma_bf16 the same shapes go to mma_bf16 (the tensor-core rule's
    candidates follow each new rule's first choice); odd K (no 16-byte rows) never reaches them."""
    reg = SubsetRegistry(names=("mma_bf16", "tma_bf16"), extra=[])
    for shape in ((1, 4096, 4096), (64, 4096, 4096), (256, 256, 65536), (512, 4096, 4096)):
        assert _bf16(shape, reg).kernel == "mma_bf16"
    assert _bf16((1, 4096, 4095)).kernel == "mma_bf16"  # K % 8 != 0: decode_bf16 and wgmma refuse
    assert any(s.startswith("rule decode: decode_bf16") and "multiple of 8" in s
               for s in _bf16((1, 4096, 4095)).skipped)


def test_bf16_table_entry_exact_and_nearest_stay_in_precision_and_regime():
    e = {**entry((8, 4096, 4096), "decode_bf16", MT=1, KW=8, U=2, SPLITS=4), "precision": "bf16"}
    table = table_with(e)
    exact = _bf16((8, 4096, 4096), table=table)
    assert (exact.source, exact.match, exact.params["KW"]) == ("table", "exact", 8)
    near = _bf16((6, 4096, 4096), table=table)
    assert (near.kernel, near.match, near.params["SPLITS"]) == ("decode_bf16", "nearest", 4)
    assert _bf16((8, 4096, 4096), table=table, layout=("row", "col")).source == "rule"  # other layout
    assert dispatch.choose(Shape(8, 4096, 4096), FULL, table).kernel != "decode_bf16"  # fp32: not this entry
    assert _bf16((64, 4096, 4096), table=table).source == "rule"  # M 8x apart


def test_a_rule_whose_first_candidates_do_not_fit_says_why_it_took_another():
    """fp16 at 1x4096x4095 (B column-major; decode): only kernels that take fp16 are candidates (tma_bf16,
    bf16 only, is never named), the reason names the candidate that did not fit (decode_bf16: K % 8 != 0)
    and what was taken, and each skip reason is listed once (new-user finding 15: the explanation
    contradicted the choice, the skip was listed twice). The shape was 4095x4097x1023 until wgmma_bf16
    served fp16 (issue 41 item 3): it takes that shape now, through pad copies, as it does in bf16."""
    table = dispatch.Table(device={"sm_count": 132})
    choice = dispatch.choose(Shape(1, 4096, 4095), FULL, table, "fp16", ("row", "col"))
    assert choice.kernel == "mma_bf16", choice
    assert "tma_bf16" not in choice.reason and choice.reason.endswith(
        "-> mma_bf16 " + " ".join(f"{k}={v}" for k, v in choice.params.items())), choice.reason
    assert "(not taken: decode_bf16 " in choice.reason and "multiple of 8" in choice.reason, choice.reason
    assert len(choice.skipped) == len(set(choice.skipped)) == 1, choice.skipped
    assert not any("tma_bf16" in s for s in choice.skipped), choice.skipped


def test_ctrl_c_inside_the_suite_load_is_the_interrupt_not_a_bad_file(tmp_path, monkeypatch):
    """Ctrl-C inside OmegaConf while the shape suite loads left its state half-built, and the error
    that followed was reported as ``shape_suite.yaml: not valid YAML`` (a new-user trial, in
    gemmlab-report and gemmlab-tune): it is the interrupt."""
    from omegaconf import OmegaConf

    from gemmlab.dispatch import shapes

    def broken(path):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")

    monkeypatch.setattr(OmegaConf, "load", broken)
    with pytest.raises(KeyboardInterrupt):
        shapes._load(str(tmp_path / "suite.yaml"))
    monkeypatch.setattr(OmegaConf, "load", lambda path: (_ for _ in ()).throw(ValueError("bad: line 3")))
    with pytest.raises(ConfigError, match="not valid YAML: bad: line 3"):
        shapes._load(str(tmp_path / "other.yaml"))


def test_sigterm_inside_the_suite_load_stays_sigterm(tmp_path, monkeypatch):
    """SIGTERM (gemmlab.errors.Terminated) inside OmegaConf while the shape suite loads: the
    half-built state's error was turned into a plain KeyboardInterrupt, so ``python -m
    gemmlab.results.families`` said "interrupted" and exited 130 for a SIGTERM (seen 4 times in 25
    under load, tests/test_families.py's SIGTERM test): the interrupt raised is the one that came."""
    from omegaconf import OmegaConf

    from gemmlab.dispatch import shapes
    from gemmlab.errors import Terminated

    def broken(path):
        try:
            raise Terminated()
        except KeyboardInterrupt:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")

    monkeypatch.setattr(OmegaConf, "load", broken)
    with pytest.raises(KeyboardInterrupt) as stopped:  # (a plain one escaping would stop pytest itself)
        shapes._load(str(tmp_path / "suite.yaml"))
    assert type(stopped.value) is Terminated


def test_auto_sizes_strided_batches_for_one_batchs_share_of_the_sms():
    """kernel=auto with batch.count = B sees ceil(SMs / B) SMs (the other batches fill the rest): 64
    batches of a 1x1024x4096 decode need no K split, one batch takes 4; the rule's text says so."""
    from gemmlab.contract.epilogue import Epilogue
    from gemmlab.contract.hookspecs import Problem, Shape
    from gemmlab.contract.registry import load_registry
    from gemmlab.dispatch import auto as auto_mod
    reg = load_registry(entry_points=False)
    picks = {}
    for batch in (1, 64):
        ep = Epilogue(batch=batch) if batch > 1 else None
        problem = Problem(Shape(1, 1024, 4096), "bf16", "row", "col", out="bf16", epilogue=ep or Epilogue())
        picks[batch] = auto_mod.choose(Shape(1, 1024, 4096), reg, precision="bf16", layout=("row", "col"),
                                       problem=problem, last_resort="model")
    assert picks[1].kernel == picks[64].kernel == "decode_bf16"
    assert picks[1].params["SPLITS"] == 4 and picks[64].params["SPLITS"] == 1
    assert "batch.count=64: each batch's share, 3 of 132 SMs" in picks[64].reason and "share" not in picks[1].reason
