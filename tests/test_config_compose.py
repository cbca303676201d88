"""Config composition through Hydra's compose API (no subprocess, no GPU).

Checks that conf/ composes into the documented defaults, that group and field overrides land
where the pipeline reads them, that the shipped experiments are multiruns over the expected
lists, and that gemmlab.stages.config.parse_config turns composed configs into RunConfig values.
"""

from __future__ import annotations

import copy
import functools
import math
import re

import hydra
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from omegaconf import OmegaConf

import gemmlab.cli.app
import gemmlab.paths
from gemmlab.stages.config import InputOptions, RunConfig, parse_config, parse_params, typed
from gemmlab.stages.timing import TimingOptions
from gemmlab.stages.verify import VerifyOptions
from gemmlab.gpu.device import offline_facts
from gemmlab.errors import ConfigError
from gemmlab.contract.hookspecs import Shape
from gemmlab.contract.registry import load_registry


def compose(*overrides: str, return_hydra_config: bool = False):
    """The config Hydra composes for ``overrides``: composed once per distinct command line in this
    module (Hydra's compose is about 0.1 CPU s), a deep copy each call (a test may change it)."""
    return copy.deepcopy(_composed(overrides, return_hydra_config))


@functools.lru_cache(maxsize=None)
def _composed(overrides: tuple[str, ...], return_hydra_config: bool):
    gemmlab.cli.app.register_resolvers()
    with hydra.initialize_config_dir(config_dir=str(gemmlab.paths.CONF_DIR), version_base="1.3"):
        return hydra.compose("config", overrides=list(overrides), return_hydra_config=return_hydra_config)


@pytest.fixture(scope="module")
def registry():
    return load_registry(entry_points=False)


def defaults_of(registry):
    return lambda name: registry.get(name).defaults


# --- defaults -------------------------------------------------------------------------------------

def test_default_kernel_is_seed_tiled():
    cfg = compose()
    assert OmegaConf.to_container(cfg.kernel) == {"name": "tiled", "BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2}


def test_default_shape_mode_arch_device():
    cfg = compose()
    assert list(cfg.shape) == [256, 256, 256]
    assert cfg.mode == "run"
    assert cfg.arch is None
    assert cfg.device == 0
    assert list(cfg.plugin_dirs) == []


SEED_TIMING = {"mode": "events", "l2": "warm", "warmup": 5, "repeat": 10, "max_repeat": None,
               "target_rel_spread": None, "budget_s": None, "batch": 20, "floor": True, "flush": "read",
               "shared": "allow"}  # refuse outside the tests: tests/conftest.py sets GEMMLAB_TIMING_SHARED


def test_default_timing_is_seed_protocol():
    cfg = compose()
    assert OmegaConf.to_container(cfg.timing) == SEED_TIMING


def test_default_verify_tolerances():
    cfg = compose()
    assert cfg.verify.atol == pytest.approx(3e-4, rel=0, abs=1e-15)
    assert cfg.verify.rtol == pytest.approx(3e-4, rel=0, abs=1e-15)
    assert {k: cfg.verify[k] for k in ("tolerance", "safety", "method", "max_full", "sample", "trials")} == (
        {"tolerance": "auto", "safety": 8.0, "method": "auto", "max_full": 2**37, "sample": 256, "trials": 2})


def test_default_baseline_precision_sanitizer():
    cfg = compose()
    assert cfg.baseline is None
    assert cfg.precision == "fp32"
    assert cfg.sanitizer is None


def test_default_inputs():
    cfg = compose()
    assert OmegaConf.to_container(cfg.inputs) == {"seed": 0, "distribution": "normal", "draw": "host"}


def test_composed_task_config_has_no_hydra_node():
    # what the CLI task receives (and what run_point records) carries only gemmlab's keys
    cfg = compose()
    assert set(cfg.keys()) == {"kernel", "timing", "shape", "mode", "arch", "device", "inputs", "verify",
                               "plugin_dirs", "baseline", "precision", "layout", "fp8", "grouped", "epilogue", "batch", "sanitizer",
                               "cache", "resume", "isolation"}


# --- overrides ------------------------------------------------------------------------------------

def test_kernel_naive_group():
    cfg = compose("kernel=naive")
    assert OmegaConf.to_container(cfg.kernel) == {"name": "naive", "BX": 16, "BY": 16}


@pytest.mark.parametrize("name, expected", [
    ("ladder_starter", {"name": "ladder_starter", "BK": 8}),
    ("ladder_strip", {"name": "ladder_strip", "TM": 16, "BK": 8}),
])
def test_kernel_ladder_groups(name, expected):
    assert OmegaConf.to_container(compose(f"kernel={name}").kernel) == expected


def test_kernel_field_override_keeps_other_defaults():
    cfg = compose("kernel.BK=8")
    assert OmegaConf.to_container(cfg.kernel) == {"name": "tiled", "BM": 64, "BN": 64, "BK": 8, "TM": 8, "TN": 2}


def test_group_and_field_override_together():
    cfg = compose("kernel=naive", "kernel.BX=32", "shape=[31,33,17]", "mode=compile")
    assert OmegaConf.to_container(cfg.kernel) == {"name": "naive", "BX": 32, "BY": 16}
    assert list(cfg.shape) == [31, 33, 17]
    assert cfg.mode == "compile"


def test_timing_and_verify_overrides():
    cfg = compose("timing.repeat=3", "verify.atol=1e-3")
    assert OmegaConf.to_container(cfg.timing) == dict(SEED_TIMING, repeat=3)
    assert cfg.verify.atol == pytest.approx(1e-3)
    assert cfg.verify.rtol == pytest.approx(3e-4)


def test_unknown_kernel_group_does_not_compose():
    with pytest.raises(Exception, match="foo"):
        compose("kernel=foo")


# --- experiments ----------------------------------------------------------------------------------

def test_experiment_seed_lab_is_multirun_over_kernels_and_shapes():
    cfg = compose("experiment=seed_lab", return_hydra_config=True)
    assert cfg.hydra.mode == RunMode.MULTIRUN
    params = cfg.hydra.sweeper.params
    assert params.kernel.split(",") == ["naive", "tiled"]
    assert params.shape == "[256,256,256],[31,33,17],[63,65,33]"
    # the experiment does not change the single-run defaults
    assert cfg.kernel.name == "tiled"
    assert list(cfg.shape) == [256, 256, 256]


def test_experiment_ladder_is_multirun_over_ladder_kernels():
    cfg = compose("experiment=ladder", return_hydra_config=True)
    assert cfg.hydra.mode == RunMode.MULTIRUN
    params = cfg.hydra.sweeper.params
    assert params.kernel.split(",") == ["ladder_starter", "ladder_strip", "ladder_tile2d"]
    assert params.shape == "[1024,1024,1024],[2048,2048,2048],[4096,4096,4096]"


def test_plain_run_is_not_multirun():
    cfg = compose(return_hydra_config=True)
    assert cfg.hydra.mode in (None, RunMode.RUN)
    assert cfg.hydra.sweeper.params in (None, {})


def test_sweep_summary_callback_is_configured():
    cfg = compose(return_hydra_config=True)
    assert cfg.hydra.callbacks.gemmlab_summary._target_ == "gemmlab.cli.sweep.SweepSummary"
    assert cfg.hydra.job.chdir is False


def test_experiment_sweep_shapes_parse(registry):
    # every shape an experiment sweeps must be valid for every kernel it sweeps
    for experiment in ("seed_lab", "ladder"):
        hcfg = compose(f"experiment={experiment}", return_hydra_config=True)
        kernels = hcfg.hydra.sweeper.params.kernel.split(",")
        shapes = [s.strip("[]") for s in hcfg.hydra.sweeper.params.shape.split("],[")]
        for kernel in kernels:
            for s in shapes:  # the shape override applied as Hydra applies it to the composed config
                cfg = compose(f"kernel={kernel}")
                OmegaConf.update(cfg, "shape", OverridesParser.create().parse_override(f"shape=[{s}]").value(),
                                 merge=True)
                rc = parse_config(cfg, defaults_of=defaults_of(registry))
                registry.get(kernel).check(rc.shape, rc.params, offline_facts("90"))


# --- parse_config on composed configs -------------------------------------------------------------

def test_parse_default_config(registry):
    rc = parse_config(compose(), defaults_of=defaults_of(registry))
    assert isinstance(rc, RunConfig)
    assert rc.kernel == "tiled"
    assert rc.params == {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2}
    assert rc.shape == Shape(256, 256, 256)
    assert isinstance(rc.shape, Shape)
    assert rc.mode == "run"
    assert rc.arch is None
    assert rc.device == 0
    assert rc.timing == TimingOptions(mode="events", l2="warm", warmup=5, repeat=10, max_repeat=None,
                                      target_rel_spread=None, budget_s=None, batch=20, floor=True)
    assert rc.timing == TimingOptions()  # the dataclass defaults are the seed protocol too
    assert rc.verify == VerifyOptions(tolerance="auto", atol=3e-4, rtol=3e-4, safety=8.0, method="auto",
                                      max_full=2**37, sample=256, trials=2)
    assert rc.verify == VerifyOptions()
    assert rc.inputs == InputOptions(0, "normal")
    assert rc.plugin_dirs == ()
    assert (rc.baseline, rc.precision, rc.sanitizer) == (None, "fp32", None)
    assert rc.label() == "tiled 256x256x256 BM=64 BN=64 BK=16 TM=8 TN=2"


def test_parse_overridden_config(registry):
    cfg = compose("kernel=naive", "shape=[31,33,17]", "mode=compile", "arch=sm_90", "timing.batch=7")
    rc = parse_config(cfg, defaults_of=defaults_of(registry))
    assert rc.kernel == "naive"
    assert rc.params == {"BX": 16, "BY": 16}
    assert rc.shape == Shape(M=31, N=33, K=17)
    assert (rc.shape.M, rc.shape.N, rc.shape.K) == (31, 33, 17)
    assert rc.mode == "compile"
    assert rc.arch == "90"
    assert rc.timing.batch == 7


def test_parse_field_override(registry):
    rc = parse_config(compose("kernel=ladder_strip", "kernel.TM=8", "shape=[128,128,128]"),
                      defaults_of=defaults_of(registry))
    assert rc.params == {"TM": 8, "BK": 8}
    assert rc.shape == Shape(128, 128, 128)


@pytest.mark.parametrize("override, field", [
    ("shape=[1,2]", "shape"),
    ("shape=[0,1,1]", "shape"),
    ("kernel.BK=0", "kernel.BK"),
    ("+kernel.XX=3", "kernel.XX"),
    ("timing.repeat=0", "timing.repeat"),
    ("verify.rtol=nan", "verify.rtol"),
    ("mode=fast", "mode"),
    ("arch=sm_xx", "arch"),
    ("inputs.distribution=zeros", "inputs.distribution"),
    # the measurement-protocol fields
    ("timing.mode=foo", "timing.mode"),
    ("timing.l2=hot", "timing.l2"),
    ("timing.max_repeat=5", "timing.max_repeat"),  # < timing.repeat (10)
    ("timing.max_repeat=0", "timing.max_repeat"),
    ("timing.target_rel_spread=-1", "timing.target_rel_spread"),
    ("timing.target_rel_spread=2", "timing.target_rel_spread"),
    ("timing.budget_s=x", "timing.budget_s"),
    ("timing.budget_s=-1", "timing.budget_s"),
    ("timing.floor=maybe", "timing.floor"),
    ("timing.floor=1", "timing.floor"),
    ("verify.tolerance=loose", "verify.tolerance"),
    ("verify.method=x", "verify.method"),
    ("verify.safety=0", "verify.safety"),
    ("verify.safety=nan", "verify.safety"),
    ("verify.max_full=0", "verify.max_full"),
    ("verify.sample=0", "verify.sample"),
    ("verify.trials=0", "verify.trials"),
    ("verify.tolerance=exact", "verify.tolerance"),  # normal inputs round: exact is refused
    ("precision=fp64", "precision"),
    ("layout.a=diag", "layout.a"),
    ("layout.b=T", "layout.b"),
    ("sanitizer=foo", "sanitizer"),
    ("baseline=3", "baseline"),
])
def test_parse_rejects_composed_bad_values(registry, override, field):
    with pytest.raises(ConfigError) as info:
        parse_config(compose(override), defaults_of=defaults_of(registry))
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


@pytest.mark.parametrize("value", ["''", "' '", "'\t'"])
def test_a_blank_cache_dir_is_refused(registry, value):
    """``cache.dir=' '`` made a folder named blank, ``''`` silently meant the default: a blank path
    is refused as ``hydra.run.dir=''`` is, naming the key and what it takes."""
    with pytest.raises(ConfigError) as info:
        parse_config(compose(f"cache.dir={value}"), defaults_of=defaults_of(registry))
    assert info.value.field == "cache.dir"
    assert re.fullmatch(r"cache\.dir: is (empty|blank); give a folder for the compile cache, or null \(the default: "
                        r"\$GEMMLAB_CACHE_DIR, else ~/\.cache/gemmlab/compile\)", str(info.value)), str(info.value)
    assert parse_config(compose("cache.dir=/tmp/x"), defaults_of=defaults_of(registry)).cache_dir == "/tmp/x"


@pytest.mark.parametrize("value", ["", " "])
def test_a_blank_tuning_table_is_refused(registry, value):
    """``kernel=auto kernel.table=''`` read the working directory as the table (``kernel.table: .: a
    folder``): a blank path is refused naming kernel.table (the point's check: dispatch.auto)."""
    from gemmlab.dispatch.auto import resolve_config
    cfg = {"kernel": {"name": "auto", "table": value}, "shape": [64, 64, 64]}
    with pytest.raises(ConfigError) as info:
        resolve_config(cfg, registry)
    assert str(info.value) == (f"kernel.table: is {'blank' if value else 'empty'}; give a tuning table file (JSON), "
                               "or null (the shipped table)")


def test_parse_arch_forms(registry):
    for given in ("sm_90", "90", "sm_90a"):
        rc = parse_config(compose(f"arch={given}"), defaults_of=defaults_of(registry))
        assert rc.arch == given.removeprefix("sm_")


def test_verify_atol_is_finite_float(registry):
    rc = parse_config(compose("verify.atol=0"), defaults_of=defaults_of(registry))
    assert rc.verify.atol == 0.0 and math.isfinite(rc.verify.rtol)


@pytest.mark.parametrize("overrides, field", [
    (("inputs.distribution=integers", f"shape=[4,4,{2**19 + 1}]"), "inputs.distribution"),
    (("inputs.distribution=uniform", "verify.tolerance=exact"), "verify.tolerance"),
    (("timing=adaptive", "timing.max_repeat=5"), "timing.max_repeat"),
])
def test_parse_rejects_composed_combinations(registry, overrides, field):
    with pytest.raises(ConfigError) as info:
        parse_config(compose(*overrides), defaults_of=defaults_of(registry))
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_integers_at_the_exact_k_limit_and_exact_rule_parse(registry):
    rc = parse_config(compose("inputs.distribution=integers", f"shape=[4,4,{2**19}]", "verify.tolerance=exact"),
                      defaults_of=defaults_of(registry))
    assert rc.inputs == InputOptions(0, "integers")
    assert rc.verify.tolerance == "exact" and rc.shape.K == 2**19


@pytest.mark.parametrize("distribution", ["normal", "uniform", "integers"])
def test_distributions_parse(registry, distribution):
    rc = parse_config(compose(f"inputs.distribution={distribution}"), defaults_of=defaults_of(registry))
    assert rc.inputs.distribution == distribution


def test_new_fields_parse(registry):
    rc = parse_config(compose("baseline=cublas", "precision=tf32", "sanitizer=racecheck", "verify.tolerance=fixed",
                              "verify.method=sampled", "verify.sample=8", "verify.trials=3", "verify.safety=16",
                              "timing.max_repeat=10", "timing.budget_s=0.5", "timing.floor=false"),
                      defaults_of=defaults_of(registry))
    assert rc.baseline == "cublas" and rc.precision == "tf32" and rc.sanitizer == "racecheck"
    assert rc.verify == VerifyOptions(tolerance="fixed", method="sampled", sample=8, trials=3, safety=16.0)
    assert rc.timing.max_repeat == 10  # = repeat: allowed
    assert rc.timing.budget_s == 0.5 and rc.timing.floor is False


def test_unknown_baseline_names_the_baseline_field(registry):
    # regression: it used to be reported against field 'kernel' (the registry's own error)
    with pytest.raises(ConfigError) as info:
        parse_config(compose("baseline=nope"), defaults_of=defaults_of(registry))
    assert info.value.field == "baseline"
    assert str(info.value).startswith("baseline: ")
    assert "'nope'" in str(info.value) and "cublas" in str(info.value)  # lists the registered kernels
    assert str(info.value).endswith("; or null (no baseline)")  # not "or auto": kernel=auto picks per shape


# --- the timing configs (conf/timing/*.yaml) ------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("seed", TimingOptions()),
    ("graph", TimingOptions(mode="both", l2="warm", warmup=5, repeat=10, batch=20, floor=True)),
    ("adaptive", TimingOptions(mode="graph", l2="warm", warmup=5, repeat=10, max_repeat=1000,
                               target_rel_spread=0.005, budget_s=10.0, batch=20, floor=True)),
    ("cold", TimingOptions(mode="graph", l2="cold", warmup=5, repeat=30, batch=1, floor=True)),
])
def test_timing_configs_compose_and_parse(registry, name, expected):
    cfg = compose(f"timing={name}")
    assert set(cfg.timing.keys()) == set(SEED_TIMING)  # every option file sets every field
    rc = parse_config(cfg, defaults_of=defaults_of(registry))
    assert rc.timing == expected


def test_timing_config_and_field_override_together(registry):
    rc = parse_config(compose("timing=cold", "timing.repeat=3"), defaults_of=defaults_of(registry))
    assert rc.timing.l2 == "cold" and rc.timing.repeat == 3 and rc.timing.launches_per_sample == 1


def test_parse_plain_dict_uses_defaults_for_missing_sections(registry):
    rc = parse_config({"kernel": {"name": "naive"}, "shape": [2, 3, 4]}, defaults_of=defaults_of(registry))
    assert rc.timing == TimingOptions() and rc.verify == VerifyOptions() and rc.inputs == InputOptions()
    assert (rc.baseline, rc.precision, rc.sanitizer, rc.mode) == (None, "fp32", None, "run")


# --- the one config schema (gemmlab.stages.config.GemmlabConfig, Hydra's base_config) -------------------

def test_composed_config_has_exactly_the_schema_keys_and_defaults():
    import dataclasses
    from gemmlab.stages.config import SECTIONS, TOP_LEVEL, CacheOptions, IsolationOptions, LayoutOptions
    cfg = compose()
    assert tuple(cfg.keys()) == TOP_LEVEL
    for section, keys in SECTIONS.items():
        assert tuple(cfg[section].keys()) == keys, section
    for section, options in (("timing", TimingOptions), ("verify", VerifyOptions), ("inputs", InputOptions),
                             ("layout", LayoutOptions), ("cache", CacheOptions), ("isolation", IsolationOptions)):
        assert OmegaConf.to_container(cfg[section]) == dataclasses.asdict(options()), section
    # conf/config.yaml holds no field values any more: only the defaults list and Hydra's settings
    assert set(OmegaConf.load(gemmlab.paths.CONF_DIR / "config.yaml")) == {"defaults", "hydra"}


def test_hydra_itself_refuses_an_unknown_key_in_a_file_on_the_schema(tmp_path):
    (tmp_path / "bad.yaml").write_text("defaults:\n  - base_config\n  - _self_\nverify:\n  bogus: 1\n")
    (tmp_path / "good.yaml").write_text("defaults:\n  - base_config\n  - _self_\nverify:\n  atol: 1.0e-3\n")
    gemmlab.cli.app.register_resolvers()  # stores base_config
    with hydra.initialize_config_dir(config_dir=str(tmp_path), version_base="1.3"):
        with pytest.raises(Exception, match="bogus"):
            hydra.compose("bad")
        good = hydra.compose("good")
    assert good.verify.atol == 1e-3 and good.verify.rtol == VerifyOptions().rtol  # the rest: schema defaults


@pytest.mark.parametrize("text, package, field", [
    ("# @package _global_\nshape: [8, 8, 8]\nfoo: 1\n", "experiment", "foo"),
    ("# @package _global_\nverify:\n  bogus: 2\n", "experiment", "verify.bogus"),
    ("mode: graph\nwarmpu: 3\n", "timing", "timing.warmpu"),
])
def test_unknown_key_in_a_config_file_is_one_line(tmp_path, text, package, field):
    from gemmlab.stages.config import check_config_file
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        check_config_file(path, package)
    assert info.value.field == field and "unknown" in str(info.value) and "\n" not in str(info.value)


def test_shipped_config_files_match_the_schema():
    from gemmlab.stages.config import check_config_file
    for group in ("experiment", "timing"):
        for path in sorted((gemmlab.paths.CONF_DIR / group).glob("*.yaml")):
            check_config_file(path, group)  # raises ConfigError on a key the schema lacks


# --- the device field -------------------------------------------------------------------------

DEVICE_CFG = {"kernel": {"name": "naive"}, "shape": [8, 8, 8]}

def test_parse_config_device_values():
    assert parse_config({**DEVICE_CFG, "device": "auto"}).device == "auto"
    assert parse_config({**DEVICE_CFG, "device": 0}).device == 0
    assert parse_config({**DEVICE_CFG, "device": 3}).device == 3
    for bad in ("gpu0", -1, True, False, 1.0, None, "AUTO", [0]):
        with pytest.raises(ConfigError) as info:
            parse_config({**DEVICE_CFG, "device": bad})
        assert info.value.field == "device", bad
        assert "auto" in str(info.value)


@pytest.mark.parametrize("word", ["none", "None", "off"])
def test_baseline_none_says_null_is_the_spelling(registry, word):
    """``baseline=none`` is a kernel name to Hydra (only ``null`` is None): the one-line error says
    how to measure no baseline."""
    with pytest.raises(ConfigError) as info:
        parse_config(compose(f"baseline={word}"), defaults_of=defaults_of(registry))
    assert info.value.field == "baseline" and "baseline=null measures no baseline" in str(info.value)


# --- kernel parameters: listed values ----------------------------------------------------------------

@pytest.mark.parametrize("value", [0, -1, 5000, 2.5, "x", True])
def test_a_listed_parameter_outside_the_generic_range_names_its_values(value):
    """A value the core's 1..4096 rule refuses names the parameter's own values where the kernel
    lists them (``param_values``), not the generic range; without a list the generic message."""
    with pytest.raises(ConfigError) as info:
        parse_params({"EPI": 2}, {"EPI": value}, "k", {"EPI": (1, 2, 3, 4, 5)})
    assert str(info.value) == f"kernel.EPI: must be one of 1, 2, 3, 4, 5, got {typed(value)}"  # true, not True
    with pytest.raises(ConfigError) as info:
        parse_params({"EPI": 2}, {"EPI": value}, "k")
    assert str(info.value).startswith("kernel.EPI: must be an integer >= 1 and <= 4096")


def test_a_plugins_invalid_default_is_said_to_be_the_plugins():
    """A drop-in plugin declaring ``BX: 0`` got ``kernel.BX: must be ..., got 0``, as if the user had
    typed kernel.BX=0 (Hydra composes the default into the config as given). Now the line names the
    plugin and its default."""
    with pytest.raises(ConfigError) as info:
        parse_params({"BX": 0, "BY": 16}, {"BX": 0, "BY": 16}, "bad_default", origin="/p/bad.py")
    assert str(info.value) == ("kernel.BX: kernel 'bad_default' declares an invalid default BX=0 (plugin /p/bad.py): "
                               "must be an integer >= 1 and <= 4096; fix the plugin's defaults, or give "
                               "kernel.BX=<value>")
    with pytest.raises(ConfigError) as info:  # a listed parameter's default says its values
        parse_params({"EPI": 0}, {"EPI": 0}, "k", {"EPI": (1, 2)}, origin="pkg.mod")
    assert str(info.value) == ("kernel.EPI: kernel 'k' declares an invalid default EPI=0 (plugin pkg.mod): must be "
                               "one of 1, 2; fix the plugin's defaults, or give kernel.EPI=<value>")
    with pytest.raises(ConfigError) as info:  # a value the user gave is the user's
        parse_params({"BX": 0}, {"BX": 5000}, "bad_default", origin="/p/bad.py")
    assert str(info.value) == "kernel.BX: must be an integer >= 1 and <= 4096, got 5000"
    assert parse_params({"BX": 0, "BY": 16}, {"BX": 32}, "bad_default") == {"BX": 32, "BY": 16}


def test_a_listed_parameter_inside_the_range_is_left_to_the_kernels_check():
    """6 is inside 1..4096: parse_params passes it on, so the kernel's own message (what each value
    means) is the one the user sees (tests/test_wgmma.py checks that message)."""
    assert parse_params({"EPI": 2}, {"EPI": 6}, "k", {"EPI": (1, 2, 3, 4, 5)}) == {"EPI": 6}


def test_the_wgmma_kernels_list_their_code_parameters(registry):
    for name in ("wgmma_bf16", "wgmma_tf32"):
        values = registry.get(name).param_values
        assert values["EPI"] == (1, 2, 3, 4, 5, 7) and values["TAIL"] == (1, 2, 3) and values["SCHED"] == (1, 2)
        assert set(values) <= set(registry.get(name).defaults)
        assert all(registry.get(name).defaults[k] in v for k, v in values.items())


