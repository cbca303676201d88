"""Rewrite old flat-layout module paths (``gemmlab.pipeline``, ``from gemmlab import tma``, ...) to
the layered layout (``gemmlab.run.pipeline``, ``from gemmlab.gpu import tma``; README "Layout").

For branches and scripts written before the regroup: ``python .ci/relayout.py FILE...`` rewrites
the files in place (``import``/``from`` lines, dotted names in strings and docstrings, and
``gemmlab/<module>.py`` paths) and prints each file it changed. Running it twice changes nothing
more. ``gemmlab-tune``'s commands moved from ``gemmlab.dispatch`` to ``gemmlab.cli.tune``:
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
# old module names that are now layer folders (results, dispatch, cli): a path into the folder
# (``gemmlab.results.report``, ``from gemmlab.cli import sweep``) is already new and stays
_FOLDERS = {}
for _new in MOVED.values():
    _FOLDERS.setdefault(_new.split(".")[0], []).append(_new.split(".")[1])
_NEW = "|".join(f"{folder}(?:\\.| import ){'(?:' + '|'.join(mods) + ')'}\\b" for folder, mods in _FOLDERS.items()
                if folder in MOVED)
_DOTTED = re.compile(r"\bgemmlab\.(?!" + _NEW + r")(" + _NAMES + r")\b(?![/\w])")
_FILE = re.compile(r"\bgemmlab/(" + _NAMES + r")\.py\b")
_FROM = re.compile(r"^(\s*)from gemmlab import ([A-Za-z_][\w ,]*?)(\s*#.*)?$", re.M)
_TUNE = re.compile(r"(-m[\"', ]+)gemmlab\.dispatch\.auto\b")


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
    """The text with every old module path replaced by its new one."""
    text = _DOTTED.sub(lambda m: "gemmlab." + MOVED[m.group(1)], text)
    text = _FROM.sub(_from_line, text)
    text = _FILE.sub(lambda m: "gemmlab/" + MOVED[m.group(1)].replace(".", "/") + ".py", text)
    return _TUNE.sub(r"\1gemmlab.cli.tune", text)


def main(paths: list[str]) -> int:
    for name in paths:
        path = Path(name)
        old = path.read_text()
        new = relayout(old)
        if new != old:
            path.write_text(new)
            print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
