"""Rewrite old flat-layout module paths (``gemmlab.pipeline``, ``from gemmlab import tma``, ...) to
the layered layout (``gemmlab.run.pipeline``, ``from gemmlab.gpu import tma``; README "Layout").

For branches and scripts written before the regroup: ``python .ci/relayout.py FILE...`` (run from
the repository root) rewrites the files in place (``import``/``from`` lines, dotted names in
strings and docstrings, ``gemmlab/<module>.py`` paths) and prints each file it changed. It is
idempotent and leaves new-layout text alone (a bare ``gemmlab.results`` is the new package; the
files in :data:`KEEP` and README's Layout section name the old contract paths on purpose), so it
can run over the whole tree after a merge. ``gemmlab-tune``'s commands moved from ``gemmlab.dispatch`` to ``gemmlab.cli.tune``:
``python -m gemmlab.dispatch sweep|build|show|choose`` becomes ``python -m gemmlab.cli.tune ...``.
Delete this file once every branch of the old layout has merged.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MOVED = {
    "hookspecs": "contract.hookspecs", "plugin_utils": "contract.plugin_utils", "registry": "contract.registry",
    "device": "gpu.device", "monitor": "gpu.monitor", "tma": "gpu.tma", "compile": "gpu.compile",
    "cache": "gpu.cache", "sass": "gpu.sass", "guards": "gpu.guards", "backends": "gpu.backends",
    "config": "stages.config", "inputs": "stages.inputs", "verify": "stages.verify", "timing": "stages.timing",
    "hostmem": "stages.hostmem", "roofline": "stages.roofline", "sanitizer": "stages.sanitizer",
    "record": "stages.record", "results": "stages.record_model",
    "shapes": "dispatch.shapes", "dispatch": "dispatch.auto",
    "pipeline": "run.pipeline", "isolation": "run.isolation",
    "report": "results.report", "report_html": "results.report_html", "report_plots": "results.report_plots",
    "report_tables": "results.report_tables", "compare": "results.compare", "compare_match": "results.compare_match",
    "compare_render": "results.compare_render", "compare_stats": "results.compare_stats",
    "families": "results.families", "cli": "cli.app", "sweep": "cli.sweep", "tune": "cli.tune",
}
_NAMES = "|".join(sorted(MOVED, key=len, reverse=True))
# Three old modules are now layer folders (results, dispatch, cli). A bare ``gemmlab.results`` is
# the new package and stays; so does a path into the folder (``gemmlab.results.report``,
# ``from gemmlab.cli import sweep``). Only an old attribute path (``gemmlab.results.find_records``,
# ``from gemmlab.dispatch import choose``) is rewritten.
_FOLDERS: dict[str, list[str]] = {}
for _new in MOVED.values():
    _FOLDERS.setdefault(_new.split(".")[0], []).append(_new.split(".")[1])
_AMBIGUOUS = sorted(set(_FOLDERS) & set(MOVED))
_KEEP_NEW = "|".join(f"{folder}(?:\\.| import )(?:{'|'.join(_FOLDERS[folder])})\\b" for folder in _AMBIGUOUS)
_BARE = "|".join(f"{folder}\\b(?!\\.\\w| import \\w)" for folder in _AMBIGUOUS)
_DOTTED = re.compile(r"\bgemmlab\.(?!" + _KEEP_NEW + "|" + _BARE + r")(" + _NAMES + r")\b(?![/\w])")
# ``import gemmlab.cli`` as a statement is the old module (the new package alone is never imported so)
_IMPORT = re.compile(r"^(\s*)import gemmlab\.(" + "|".join(_AMBIGUOUS) + r")\b(?!\.)", re.M)
_FILE = re.compile(r"\bgemmlab/(" + _NAMES + r")\.py\b")
_FROM = re.compile(r"^(\s*)from gemmlab import ([A-Za-z_][\w ,]*?)(\s*#.*)?$", re.M)
_TUNE = re.compile(r"(-m[\"', ]+)gemmlab\.dispatch\b(?!\.)")
# Files that name the plugin contract's old import paths on purpose (they stay valid: gemmlab/__init__)
KEEP = {"gemmlab/__init__.py", "tests/test_layout.py", ".ci/relayout.py"}
LAYOUT_SECTION = re.compile(r"^## Layout\n.*?(?=^## )", re.M | re.S)  # README's picture of the layers


def _from_line(m: re.Match) -> str:
    indent, names, comment = m.group(1), m.group(2), m.group(3) or ""
    keep, groups = [], {}
    for part in (p.strip() for p in names.split(",") if p.strip()):
        name, _, local = (x.strip() for x in part.partition(" as "))
        if name in MOVED:
            pkg, mod = MOVED[name].split(".")
            local = local or name
            groups.setdefault(pkg, []).append(mod if mod == local else f"{mod} as {local}")
        else:
            keep.append(part)
    if not groups:
        return m.group(0)
    lines = [f"{indent}from gemmlab import {', '.join(keep)}"] if keep else []
    lines += [f"{indent}from gemmlab.{pkg} import {', '.join(items)}" for pkg, items in groups.items()]
    lines[0] += comment
    return "\n".join(lines)


def relayout(text: str) -> str:
    """The text with every old module path replaced by its new one (README's Layout section kept)."""
    section = LAYOUT_SECTION.search(text)
    if section:
        return relayout(text[:section.start()]) + section.group(0) + relayout(text[section.end():])
    text = _TUNE.sub(r"\1gemmlab.cli.tune", text)
    text = _IMPORT.sub(lambda m: f"{m.group(1)}import gemmlab.{MOVED[m.group(2)]}", text)
    text = _DOTTED.sub(lambda m: "gemmlab." + MOVED[m.group(1)], text)
    text = _FROM.sub(_from_line, text)
    return _FILE.sub(lambda m: "gemmlab/" + MOVED[m.group(1)].replace(".", "/") + ".py", text)


def main(paths: list[str]) -> int:
    for name in paths:
        path = Path(name)
        if any(path.resolve() == (Path.cwd() / keep).resolve() for keep in KEEP):
            continue  # run from the repository root
        old = path.read_text()
        new = relayout(old)
        if new != old:
            path.write_text(new)
            print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
