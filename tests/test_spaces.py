"""Declared parameter spaces and their candidates (issue 41, item 1), on the CPU: the typed domains,
restrictions and their enumeration; declarations checked when a plugin loads (one line naming the
plugin and the field); every built-in default inside its space; gemmlab.dispatch.candidates'
enumeration (restrictions, check_problem, the core's value rule, stable names); a drop-in plugin
that declares a space offers candidates with no core change; the README's kernel table is the one
gemmlab.contract.kernel_table prints from the registry (precisions, layouts, defaults,
description), every built-in's conf/kernel/<name>.yaml holds its declared defaults, and the user
guide's detailed table lists every registered kernel."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from gemmlab.dispatch import suite_candidates
from gemmlab.contract.hookspecs import KernelBase, Problem, Shape
from gemmlab.contract import kernel_table as ktable
from gemmlab.contract.registry import load_registry
from gemmlab.contract.space import (Choice, PowerOfTwo, Range, Restriction, Space, derived_space, ordered_points,
                                    space_problem)
from gemmlab.dispatch import candidates as cands
from gemmlab.errors import ConfigError
from gemmlab.gpu.device import offline_facts

REGISTRY = load_registry(entry_points=False)
FACTS = offline_facts("90")
README = Path(__file__).resolve().parents[1] / "README.md"


# --- the declarations ----------------------------------------------------------------------------

def test_domains_enumerate_in_order_and_refuse_bad_bounds():
    assert Choice((64, 128, 32)).domain() == (64, 128, 32)
    assert PowerOfTwo(16, 128).domain() == (16, 32, 64, 128)
    assert Range(2, 8, 3).domain() == (2, 5, 8) and Range(4, 4).domain() == (4,)
    for make in (lambda: Choice(()), lambda: Choice((1, 1)), lambda: Choice((1.5,)), lambda: PowerOfTwo(3, 8),
                 lambda: PowerOfTwo(8, 4), lambda: Range(5, 1), lambda: Range(1, 4, 0), lambda: Choice((True,))):
        with pytest.raises(ValueError):
            make()


def test_points_apply_restrictions_keep_fixed_params_and_prune():
    seen = []

    def small(p):
        seen.append(dict(p))
        return p["BM"] * p["BN"] <= 32 * 64

    space = Space({"BM": PowerOfTwo(16, 64), "BN": Choice((64, 16))},
                  (Restriction("area", small, "at most 32x64", over=("BM", "BN")),
                   Restriction("late", lambda p: p["BK"] == 8 or p["BM"] != 16, "no over: judged on full dicts")))
    pts = list(space.points({"BM": 32, "BN": 64, "BK": 8}))
    assert pts == [{"BM": 16, "BN": 64, "BK": 8}, {"BM": 16, "BN": 16, "BK": 8}, {"BM": 32, "BN": 64, "BK": 8},
                   {"BM": 32, "BN": 16, "BK": 8}, {"BM": 64, "BN": 16, "BK": 8}]
    assert [p for p in seen if len(p) == 2] == []  # checked once BM and BN are set (BK fixed from the start)
    assert len(seen) == 6 + 5  # each (BM, BN) pair once set (the refused one pruned), the 5 kept again when complete
    four = list(space.points({"BM": 32, "BN": 64, "BK": 4}))  # the late one, on the fixed BK: no BM = 16
    assert four == [{**p, "BK": 4} for p in pts[2:]]
    assert space.size() == 6 and space.contains({"BM": 32, "BN": 64, "BK": 8})
    assert not space.contains({"BM": 64, "BN": 64, "BK": 8})
    assert space.violations({"BM": 48, "BN": 16, "BK": 8}) == ["BM=48 not in 2^k in 16..64"]
    assert space.violations({"BM": 64, "BN": 64, "BK": 8}) == ["restriction area: at most 32x64"]
    # defaults first, then one change away, ...
    assert ordered_points(space, {"BM": 32, "BN": 16, "BK": 8})[0] == {"BM": 32, "BN": 16, "BK": 8}


def test_derived_space_lists_param_values_and_fixes_the_rest():
    space = derived_space({"MT": 1, "KW": 4}, {"MT": (1, 2, 4)})
    assert list(space.points({"MT": 1, "KW": 4})) == [{"MT": 1, "KW": 4}, {"MT": 2, "KW": 4}, {"MT": 4, "KW": 4}]
    assert list(derived_space({"BX": 16}).points({"BX": 16})) == [{"BX": 16}]


@pytest.mark.parametrize("space, field, words", [
    ("Space({'BX': Choice((64, 128)), 'NOPE': Choice((1,))})", "space.params['NOPE']", "has no parameter 'NOPE'"),
    ("Space({'BX': Choice((64, 256))})", "space.params['BX']", "the default BX=128 is outside its declared domain 64|256"),
    ("Space({'BX': Range(0, 128, 64)})", "space.params['BX']",
     "0..128 step 64 includes 0; a parameter value must be an int 1..4096"),
    ("Space({'TN': Choice((1, 4))})", "space.params['TN']", "param_values do not list"),
    ("Space({'BX': 128})", "space.params['BX']", "is not a Choice, PowerOfTwo or Range"),
    ("Space({}, (Restriction('r', 'BX * TN <= 1024', 'threads'),))", "space.restrictions['r']", "is not callable"),
    ("Space({}, (Restriction('r', lambda p: True, over=('BK',)),))", "space.restrictions['r']", "over names 'BK'"),
    ("Space({}, (Restriction('r', lambda p: p['BX'] < 64, 'small blocks'),))", "space.restrictions['r']",
     "the kernel's defaults break it (small blocks)"),
    ("Space({}, (Restriction('r', lambda p: p['BK'] > 1),))", "space.restrictions['r']", "raised KeyError"),
    ("{'BX': Choice((128,))}", "space", "must be a gemmlab.contract.space.Space"),
])
def test_a_bad_declaration_is_one_line_naming_the_plugin_and_field(tmp_path, space, field, words):
    plugin = tmp_path / "bad.py"
    plugin.write_text(DROPIN.replace("\n\n\nclass Strip", f"\nSPACE = {space}\n\n\nclass Strip").replace(
        'defaults={"BX": 128, "TN": 4}', 'defaults={"BX": 128, "TN": 4}, param_values={"TN": (2, 4, 8)}'))
    with pytest.raises(ConfigError) as exc:
        load_registry([tmp_path], entry_points=False)
    text = str(exc.value)
    assert "\n" not in text and exc.value.field == "plugin_dirs", text
    assert text.startswith(f"plugin_dirs: {plugin}: kernel 'strip' declares {field}: "), text
    assert words in text, text


@pytest.mark.parametrize("name", sorted(REGISTRY.kernels))
def test_every_builtin_default_lies_in_its_space(name):
    spec = REGISTRY.kernels[name]
    space = spec.param_space()
    assert space_problem(space, spec.defaults, spec.param_values) is None
    assert space.contains(spec.defaults), space.violations(spec.defaults)
    assert spec.defaults in list(space.points(spec.defaults))


def test_the_tunable_builtins_declare_spaces():
    declared = {n for n, s in REGISTRY.kernels.items() if s.space is not None}
    assert {"sgemm_block2d", "sgemm_warptile", "sgemm_pipelined", "mma_tf32", "mma_bf16", "wgmma_bf16", "wgmma_tf32",
            "decode_bf16", "splitk", "splitk_warptile", "streamk"} <= declared
    for name in declared:
        assert REGISTRY.kernels[name].param_space().size() > 1


# --- enumeration ---------------------------------------------------------------------------------

PROBLEMS = [Problem(Shape(512, 4096, 4096)), Problem(Shape(16, 4096, 4096)), Problem(Shape(35, 79, 19)),
            Problem(Shape(64, 4096, 4096), "bf16", "row", "col"), Problem(Shape(4095, 4097, 1023), "bf16"),
            Problem(Shape(256, 256, 65536), "tf32", "row", "col"), Problem(Shape(1, 4096, 4096), "fp16", "row", "col")]


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.precision}-{p.layout_b}-{p.M}x{p.N}x{p.K}")
def test_enumeration_respects_restrictions_check_problem_and_the_value_rule(problem):
    rejected = []
    found = cands.enumerate(REGISTRY, problem, FACTS, rejected=rejected)
    assert found and len({c.name for c in found}) == len(found)
    per_kernel = {}
    for c in found:
        spec = REGISTRY.kernels[c.kernel]
        assert c.kernel != "cublas" and cands.supports(spec, problem) is None
        assert list(c.params) == list(spec.defaults)  # full, in the defaults' order
        spec.check_problem(problem, dict(c.params), FACTS)  # raises if the core let a refused one through
        assert all(cands.value_problem(spec, k, v) is None for k, v in c.params.items())
        if c.source == "declared":
            assert spec.param_space().contains(c.params), (c.name, spec.param_space().violations(c.params))
        per_kernel[c.kernel] = per_kernel.get(c.kernel, 0) + 1
    assert max(per_kernel.values()) <= cands.CANDIDATE_LIMIT
    assert all(isinstance(r, cands.Rejected) and r.why for r in rejected)
    assert {c.source for c in found} <= set(cands.SOURCES)


def test_declared_candidates_start_at_the_defaults_and_stay_in_the_space():
    spec = REGISTRY.kernels["sgemm_pipelined"]
    found = cands.kernel_candidates(spec, Problem(Shape(1024, 1024, 1024)), FACTS)
    assert found[0].params == spec.defaults and found[0].source == "declared"
    assert all(spec.param_space().contains(c.params) for c in found)
    dist = [sum(c.params[k] != v for k, v in spec.defaults.items()) for c in found]
    assert dist == sorted(dist)


def test_offered_shortlists_are_sized_to_the_problem():
    wg = cands.enumerate(REGISTRY, Problem(Shape(16, 4096, 14336), "bf16", "row", "col"), FACTS, kernels=["wgmma_bf16"])
    first = wg[0].params
    assert wg[0].source == "offered" and (first["BM"], first["BN"], first["SCHED"], first["REDUCE"]) == (64, 128, 2, 2)
    assert first["SPLIT_K"] > 1
    sk = cands.enumerate(REGISTRY, Problem(Shape(256, 256, 65536)), FACTS, kernels=["splitk_warptile"])
    assert sk[0].params["SPLITS"] > 4  # one wave of blocks, not the default 4
    dec = cands.enumerate(REGISTRY, Problem(Shape(64, 4096, 4096), "bf16"), FACTS, kernels=["decode_bf16"])
    assert dec[0].params["MT"] == 4


def test_candidate_names_are_stable_and_parse_back():
    spec = REGISTRY.kernels["wgmma_bf16"]
    name = cands.candidate_name("wgmma_bf16", spec.defaults)
    assert name == "wgmma_bf16[BM=128,BN=256,STAGES=4,CLUSTER=1,GROUP_M=16,SCHED=1,SPLIT_K=1,TAIL=1,REDUCE=1,EPI=7]"
    assert cands.parse_name(name) == ("wgmma_bf16", dict(spec.defaults))
    assert cands.candidate_name("k", {}) == "k[]" and cands.parse_name("k[]") == ("k", {})
    with pytest.raises(ValueError):
        cands.parse_name("wgmma_bf16(BM=1)")
    problem = Problem(Shape(512, 4096, 4096), "bf16", "row", "col")
    again = [c.name for c in cands.enumerate(load_registry(entry_points=False), problem, FACTS)]
    assert [c.name for c in cands.enumerate(REGISTRY, problem, FACTS)] == again
    c = cands.Candidate("tiled", {"BM": 64}, "declared")
    assert c.as_dict() == {"kernel": "tiled", "params": {"BM": 64}, "source": "declared", "name": "tiled[BM=64]"}


def test_library_kernels_only_on_request():
    problem = Problem(Shape(64, 64, 64))
    assert "cublas" not in {c.kernel for c in cands.enumerate(REGISTRY, problem, FACTS)}
    assert "cublas" in {c.kernel for c in cands.enumerate(REGISTRY, problem, FACTS, library=True)}


# --- a drop-in plugin that declares a space (issue 41's "Done means") ------------------------------

DROPIN = textwrap.dedent('''
    from gemmlab.contract.hookspecs import KernelSpec, Launch, ParamError, hookimpl
    from gemmlab.contract.space import Choice, PowerOfTwo, Range, Restriction, Space

    SPACE = Space({"BX": PowerOfTwo(32, 256), "TN": Choice((1, 2, 4, 8))},
                  (Restriction("threads_x_columns", lambda p: p["BX"] * p["TN"] <= 1024,
                               "a block covers at most 1024 columns", over=("BX", "TN")),))


    class Strip(KernelSpec):
        def check(self, shape, params, device):
            if shape.N % params["TN"]:
                raise ParamError("kernel.TN", f"TN={params['TN']} must divide N={shape.N}")

        def entry(self, params):
            return f"gemm_naive<{params['BX']}, 1>"

        def launch(self, shape, params, device):
            return Launch(grid=(-(-shape.N // (params["BX"] * params["TN"])), shape.M, 1), block=(params["BX"], 1, 1))


    @hookimpl
    def gemmlab_kernels():
        return [Strip(name="strip", source="naive.cu", defaults={"BX": 128, "TN": 4}, space=SPACE,
                      description="a drop-in with a declared space")]
''')


def test_a_dropin_plugin_declaring_a_space_takes_part_with_no_core_change(tmp_path):
    (tmp_path / "strip.py").write_text(DROPIN)
    registry = load_registry([tmp_path], entry_points=False)
    rejected = []
    found = cands.enumerate(registry, Problem(Shape(64, 6, 256)), FACTS, rejected=rejected)
    mine = [c for c in found if c.kernel == "strip"]
    # TN must divide N = 6 (the plugin's check) and BX * TN <= 1024 (its restriction): TN 1 or 2, BX 32..256
    assert sorted((c.params["BX"], c.params["TN"]) for c in mine) == [(bx, tn) for bx in (32, 64, 128, 256)
                                                                        for tn in (1, 2)]
    assert all(c.source == "declared" for c in mine) and mine[0].name.startswith("strip[BX=128,TN=")
    wide = [c for c in cands.enumerate(registry, Problem(Shape(64, 4096, 256)), FACTS) if c.kernel == "strip"]
    assert wide[0].params == {"BX": 128, "TN": 4} and len(wide) == 15  # 16 points, (256, 8) restricted away
    # gemmlab-tune sweeps it with no change there either
    tuned = [p for k, p in suite_candidates.candidates(Shape(64, 4096, 256), "medium", registry) if k == "strip"]
    assert tuned and tuned[0] == {"BX": 128, "TN": 4} and len(tuned) == suite_candidates.PLUGIN_CANDIDATES
    assert not [k for k, _ in suite_candidates.candidates(Shape(64, 4096, 256), "medium", REGISTRY) if k == "strip"]
    # the listing shows its space
    lines = cands.describe_space(registry.kernels["strip"])
    assert lines[0] == "strip: space declared; 16 combinations, 15 pass the restrictions"
    assert "  restriction threads_x_columns: a block covers at most 1024 columns" in lines


OFFERING = DROPIN.replace('''    def entry(self, params):''', '''    def candidates(self, problem, device):
        if problem.K == 7:
            raise RuntimeError("no idea")
        return [{"BX": 64}, {"BX": 64}, {"NOPE": 1}, {"BX": 0}, {"BX": 64, "TN": 8}, {"TN": 5}, [1]]

    def entry(self, params):''')


def test_offered_candidates_are_checked_by_the_core(tmp_path):
    (tmp_path / "strip.py").write_text(OFFERING)
    registry = load_registry([tmp_path], entry_points=False)
    rejected = []
    found = cands.enumerate(registry, Problem(Shape(64, 8, 256)), FACTS, kernels=["strip"], rejected=rejected)
    assert [(c.name, c.source) for c in found] == [("strip[BX=64,TN=4]", "offered"), ("strip[BX=64,TN=8]", "offered")]
    why = [r.why for r in rejected]
    assert any("has no parameter NOPE" in w for w in why) and any("BX=0 is outside 1..4096" in w for w in why)
    assert any("TN=5 must divide N=8" in w for w in why) and any("not a dict" in w for w in why)
    fallback = []
    found = cands.enumerate(registry, Problem(Shape(64, 8, 7)), FACTS, kernels=["strip"], rejected=fallback)
    assert found and all(c.source == "declared" for c in found)
    assert "candidates() raised RuntimeError: no idea" in fallback[0].why


def test_the_default_candidates_method_is_the_space_enumeration():
    spec = REGISTRY.kernels["tiled"]
    assert type(spec).candidates is KernelBase.candidates
    assert spec.candidates(Problem(Shape(64, 64, 64)), FACTS) == [dict(spec.defaults)]


# --- listings, the README and the user guide ---------------------------------------------------------------------

def test_list_prints_every_kernel_space(capsys):
    assert cands.main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in REGISTRY.kernels:
        assert re.search(rf"^{name}: space (declared|derived)", out, re.M), name
    assert "restriction m64_blocks:" in out and "  STAGES: 2..8 (default 4)" in out
    assert cands.main(["64", "4096", "4096", "--precision", "bf16", "--kernels", "decode_bf16", "--limit", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "2 candidates for 64x4096x4096 bf16 row/row" and out[0].startswith("decode_bf16[MT=4,")
    assert cands.main(["1", "2"]) == 2
    assert capsys.readouterr().err.strip().startswith("python -m gemmlab.dispatch.candidates: error: shape: ")


USER_GUIDE = README.parent / "docs" / "user-guide.md"


def kernel_table(path: Path, heading: str) -> list[list[str]]:
    """The rows of the kernel table under ``heading`` in ``path``, in order, as lists of cells."""
    section = path.read_text().split(heading, 1)[1]
    table_end = section.index("\n\n", section.index("| kernel |"))
    rows = [line for line in section[:table_end].splitlines() if line.startswith("| `")]
    return [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in rows]


def readme_kernel_table() -> list[str]:
    """The kernel names of the README's "Built-in kernels" table, in order."""
    return [re.fullmatch(r"`([a-z][a-z0-9_]*)`", row[0]).group(1)
            for row in kernel_table(README, "## Built-in kernels")]


def test_readme_kernel_table_lists_exactly_the_registered_kernels():
    listed = readme_kernel_table()
    assert len(listed) == len(set(listed)), "a kernel listed twice"
    registered = set(REGISTRY.kernels)
    assert set(listed) == registered, (f"README's kernel table lacks {sorted(registered - set(listed))}, "
                                       f"lists unregistered {sorted(set(listed) - registered)}")


def test_readme_kernel_table_is_the_generated_one(capsys):
    """The README's table is, line for line, what ``python -m gemmlab.contract.kernel_table --table``
    prints from the plugins' declarations (precisions, layouts, defaults, description): a changed
    declaration is one pasted table. The differing rows are named, generated row first."""
    assert ktable.main(["--table"]) == 0
    generated = capsys.readouterr().out.rstrip("\n").splitlines()
    text = README.read_text()
    start = text.index(ktable.HEADER[0])
    readme = text[start:text.index("\n\n", start)].splitlines()
    wrong = [f"{g}\n  README: {r}" for g, r in zip(generated, readme) if g != r]
    assert wrong == [] and len(readme) == len(generated), "\n".join(wrong)


def test_the_generated_table_row_says_what_the_plugin_declares():
    """A row's cells are the declaration's, in its order (so the comparison above can fail)."""
    spec = REGISTRY.kernels["wgmma_tf32"]
    row = ktable.table_row(spec).strip("|").split(" | ")
    assert [c.strip() for c in row[:4]] == ["`wgmma_tf32`", "tf32", "row/col row/row col/col col/row",
                                            "BM=128 BN=256 STAGES=4 CLUSTER=1 GROUP_M=16 SCHED=1 SPLIT_K=1 "
                                            "TAIL=1 REDUCE=1 EPI=7"]
    assert ktable.table_row(REGISTRY.kernels["cublas_grouped"]).split(" | ")[3] == "none"
    fake = KernelBase(name="pipe_test", source="x.cu", defaults={"BM": 64}, description="a | b")
    assert ktable.table_row(fake) == "| `pipe_test` | fp32 | row/row | BM=64 | a \\| b |"
    names = [line.split("`")[1] for line in ktable.kernel_table(REGISTRY.kernels)[2:]]
    assert names.index("wgmma_tf32") < names.index("triton_matmul") < names.index("cublas")


def test_user_guide_describes_every_registered_kernel():
    """The user guide's detailed table (moved from the README) lists exactly the registered kernels too."""
    listed = [re.fullmatch(r"`([a-z][a-z0-9_]*)`", row[0]).group(1)
              for row in kernel_table(USER_GUIDE, "## Built-in kernels in detail")]
    assert len(listed) == len(set(listed)) and set(listed) == set(REGISTRY.kernels), sorted(
        set(listed) ^ set(REGISTRY.kernels))


def test_kernel_config_yamls_match_the_registry():
    """Every built-in kernel has conf/kernel/<name>.yaml holding exactly ``name`` and its declared
    defaults (``python -m gemmlab.contract.kernel_table --check``; ``--write-yamls`` writes them),
    and every file but auto's names a registered kernel: the registry is the source."""
    conf = README.parent / "conf" / "kernel"
    problems = [p for name, spec in REGISTRY.kernels.items()
                if (p := ktable.yaml_problem(conf / f"{name}.yaml", spec))]
    assert problems == []
    assert {p.stem for p in conf.glob("*.yaml")} == {*REGISTRY.kernels, "auto"}


def test_kernel_yaml_writer_keeps_the_comments_and_fixes_the_values(tmp_path):
    """--check names a missing file and a stale value; --write-yamls writes the first from the
    declaration and replaces the second's values under its own comments (a YAML 1.1 boolean word
    such as ``ON`` quoted, so PyYAML and OmegaConf read the same key)."""
    import yaml
    (tmp_path / "kernel").mkdir()
    stale = tmp_path / "kernel" / "tiled.yaml"
    stale.write_text("# my notes on tiled\n\n# more notes\nname: tiled\nBM: 32\nBN: 64\n")
    spec = REGISTRY.kernels["tiled"]
    assert "BM: 32 -> 64" in ktable.yaml_problem(stale, spec) and "BK: (absent) -> 16" in ktable.yaml_problem(stale, spec)
    ktable.write_yaml(stale, spec)
    assert stale.read_text().startswith("# my notes on tiled\n\n# more notes\nname: tiled\nBM: 64\n")
    assert ktable.yaml_problem(stale, spec) is None
    dot = REGISTRY.kernels["splitk_dot"]
    missing = tmp_path / "kernel" / "splitk_dot.yaml"
    assert ktable.yaml_problem(missing, dot).endswith("is missing")
    ktable.write_yaml(missing, dot)
    assert '"ON": 2' in missing.read_text() and yaml.safe_load(missing.read_text())["ON"] == 2
    assert ktable.yaml_problem(missing, dot) is None
