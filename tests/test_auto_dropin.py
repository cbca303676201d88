"""A drop-in plugin (a ``*.py`` file in a ``plugin_dirs`` folder, the path users take) that declares a
space and states a preference takes part in ``kernel=auto`` with no core change (issue 41, "Done
means"): it is among the candidates :func:`gemmlab.dispatch.candidates.enumerate` offers (the
``rank=model`` path), the rules (``rank=rules``) choose it in the regime it claims, with the
parameters it sized, through ``resolve_config`` as a config with ``plugin_dirs`` does; without its
preference it is only the rules' last resort."""

from __future__ import annotations

import textwrap

from gemmlab.contract.hookspecs import Problem, Shape
from gemmlab.contract.registry import load_registry
from gemmlab.dispatch import auto
from gemmlab.dispatch import candidates as cands
from gemmlab.gpu.device import offline_facts

from test_spaces import DROPIN

FACTS = offline_facts("90")
#: the drop-in of tests/test_spaces.py, stating: in the decode regime, first (rank -1), BX sized to N
PREFERRING = DROPIN.replace("@hookimpl", textwrap.dedent('''
    def _preferences(self, problem, device, regime):
        from gemmlab.contract.regimes import Preference
        if regime != "decode":
            return []
        return [Preference(-1, {"BX": 64 if problem.N < 8192 else 256, "TN": 2}, "a drop-in's decode tile")]


    Strip.preferences = _preferences


    ''') + "@hookimpl")
assert PREFERRING != DROPIN


def test_a_dropin_plugin_takes_part_in_kernel_auto_with_no_core_change(tmp_path):
    (tmp_path / "strip.py").write_text(PREFERRING)
    registry = load_registry([tmp_path], entry_points=False)
    assert "strip" in registry.kernels
    problem = Problem(Shape(4, 4096, 4096))
    found = cands.enumerate(registry, problem, FACTS)
    assert any(c.kernel == "strip" for c in found)  # the model path's candidates
    cfg = {"kernel": {"name": "auto"}, "shape": [4, 4096, 4096], "precision": "fp32", "plugin_dirs": [str(tmp_path)]}
    resolved, record = auto.resolve_config(cfg, registry)
    assert resolved["kernel"] == {"name": "strip", "BX": 64, "TN": 2}, record
    assert record["source"] == "rule" and "a drop-in's decode tile" in record["rule"], record
    big = auto.choose(Shape(4, 16384, 4096), registry, auto.Table(device={"sm_count": 132}))
    assert (big.kernel, dict(big.params)) == ("strip", {"BX": 256, "TN": 2})
    # outside the regime it claims, the built-ins' preferences decide (4096^3 is 'large')
    assert auto.choose(Shape(4096, 4096, 4096), registry, auto.Table(device={"sm_count": 132})).kernel != "strip"


def test_without_a_preference_a_dropin_is_only_the_last_resort(tmp_path):
    (tmp_path / "strip.py").write_text(DROPIN)
    registry = load_registry([tmp_path], entry_points=False)
    c = auto.choose(Shape(4, 4096, 4096), registry, auto.Table(device={"sm_count": 132}))
    assert c.kernel != "strip" and c.source == "rule"
