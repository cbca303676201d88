"""``kernel=auto rank=rules`` chooses what it chose before the per-kernel rules moved into the plugins
(issue 41, item 1): a golden file of (kernel, parameters) per (precision, layout, shape).

``tests/data/auto_rules_golden.json.xz`` was recorded from the rules of ``gemmlab/dispatch/auto.py``
as they were at commit caf0c63 (before the move): for every shape of the 45-shape suite and of the
public shape set (``gemmlab/data/shapeset.yaml``, both splits), every precision (fp32, tf32, bf16,
fp16, fp8) and every (layout.a, layout.b), what :func:`gemmlab.dispatch.auto.choose` picked

- ``rules@132``: with no table entry (the rules alone; a table that only names 132 SMs),
- ``table``: with the shipped tuning table (``gemmlab/data/tuning/h200.json``: its exact and
  nearest entries, the rules elsewhere),
- ``rules@114`` and ``rules@78``: the rules alone on GPUs of 114 and 78 SMs, for the suite's shapes
  in fp32, tf32 and bf16 (row/row and row/col): the plugins' sizing reads the SM count.

Each value is ``source:kernel[P=v,...]`` (every parameter, the kernel's ``defaults`` order), or
``null`` where no registered kernel supported the problem (a kernel declaring a new layout may
serve it since: that is no change of a choice). The built-in plugins only (no entry points). Re-record (only when a kernel's declared support, a plugin's sizing or the shipped table
changes on purpose, and say so in the commit)::

    GEMMLAB_GOLDEN_RECORD=1 .venv/bin/python -m pytest -q -p no:xdist tests/test_auto_golden.py
"""

from __future__ import annotations

import json
import lzma
import os
from pathlib import Path

import pytest

from gemmlab.contract.hookspecs import Shape
from gemmlab.contract.registry import load_registry
from gemmlab.dispatch import auto
from gemmlab.dispatch.candidates import candidate_name
from gemmlab.dispatch.shapes import load_suite
from gemmlab.dispatch.shapeset import load_shapes
from gemmlab.errors import ConfigError

GOLDEN = Path(__file__).parent / "data" / "auto_rules_golden.json.xz"
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
LAYOUTS = (("row", "row"), ("row", "col"), ("col", "row"), ("col", "col"))
REGISTRY = load_registry(entry_points=False)
SUITE = tuple(load_suite().shapes)
SHAPES = tuple(dict.fromkeys(SUITE + tuple(e.shape for e in load_shapes())))
#: other GPUs' SM counts, on the suite's shapes (H100 PCIe: 114; a smaller sm_90 part: 78)
OTHER_SMS = ((114, ("fp32", "tf32", "bf16")), (78, ("fp32", "tf32", "bf16")))


def key(precision: str, layout: tuple[str, str], shape) -> str:
    return f"{precision} {'/'.join(layout)} {'x'.join(map(str, shape))}"


def pick(shape, precision, layout, table) -> str | None:
    try:
        c = auto.choose(Shape(*shape), REGISTRY, table, precision, layout)
    except ConfigError:
        return None
    return f"{c.source}:{candidate_name(c.kernel, c.params)}"


def cases():
    """(section, table, precision, layout, shape) for every recorded choice."""
    rules = auto.Table(device={"sm_count": 132})
    shipped = auto.load_table()
    for p in PRECISIONS:
        for lay in LAYOUTS:
            for s in SHAPES:
                yield "rules@132", rules, p, lay, s
                yield "table", shipped, p, lay, s
    for sms, precisions in OTHER_SMS:
        t = auto.Table(device={"sm_count": sms})
        for p in precisions:
            for lay in LAYOUTS[:2]:
                for s in SUITE:
                    yield f"rules@{sms}", t, p, lay, s


def record() -> dict:
    out: dict = {}
    for section, table, p, lay, s in cases():
        out.setdefault(section, {})[key(p, lay, s)] = pick(s, p, lay, table)
    return out


def test_rules_choose_what_they_chose_before_the_move():
    """Every recorded (section, precision, layout, shape) gets the same source, kernel and parameters."""
    if os.environ.get("GEMMLAB_GOLDEN_RECORD") == "1":
        GOLDEN.write_bytes(lzma.compress(json.dumps(record(), indent=0, sort_keys=True).encode()))
        pytest.skip(f"recorded {GOLDEN}")
    golden = json.loads(lzma.decompress(GOLDEN.read_bytes()))
    now = record()
    assert set(now) == set(golden)
    # a problem no kernel supported then may have a kernel now (a plugin declaring a new layout, issue 43):
    # that is new support, not a changed choice; every choice made then must be made now
    diffs = [f"{section} {k}: was {golden[section].get(k)}, now {v}"
             for section, picks in now.items() for k, v in picks.items()
             if golden[section].get(k, "absent") != v and golden[section].get(k, "absent") is not None]
    assert not diffs, f"{len(diffs)} choices changed ({sorted(set(d.split()[1] for d in diffs))}), e.g.:\n" + "\n".join(diffs[:12])
    assert sum(len(v) for v in golden.values()) == sum(len(v) for v in now.values())


def test_the_golden_file_is_no_empty_record():
    """The golden file holds choices of many kernels in every section (a file of nulls would pass anything)."""
    golden = json.loads(lzma.decompress(GOLDEN.read_bytes()))
    for section, picks in golden.items():
        kernels = {v.split(":", 1)[1].split("[", 1)[0] for v in picks.values() if v}
        assert len(kernels) >= 5, (section, kernels)
    assert len(golden["rules@132"]) == len(PRECISIONS) * len(LAYOUTS) * len(SHAPES) >= 9000
    assert any(v and v.startswith("table:") for v in golden["table"].values())
