"""The tuning table as ``gemmlab-tune build|show|choose`` write and say it: the ``build -o`` file
checked before any record is read and written atomically, a table's entries as lines, and what
kernel=auto picks for one shape as JSON.

The table itself (its schema, building it from records, the choice) is
:mod:`gemmlab.dispatch.auto`'s; :mod:`gemmlab.cli.tune` parses the command line and prints.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from gemmlab.dispatch import auto as dispatch
from gemmlab.errors import ConfigError
from gemmlab.paths import file_in_the_way, not_a_regular_file


def table_out(text: str, force: bool) -> Path:
    """The ``build -o`` path checked before any record is read: a regular file it may write (an
    existing one only with ``--force``), never a folder, a device, a pipe or a socket (``--force``
    turned /dev/null into a table, a folder into a traceback).

    Raises:
        ConfigError: ``out``, naming what is wrong and what is allowed."""
    out = Path(text)  # an empty one is refused by the parser (gemmlab.console.output_path)
    if out.is_dir():
        raise ConfigError("out", f"{out} is a folder; give a table file, e.g. -o {out / 'table.json'}")
    odd = "a broken link" if out.is_symlink() and not out.exists() else not_a_regular_file(out)
    if odd:
        raise ConfigError("out", f"{out} is {odd}; give a table file")
    if out.exists() and not force:
        raise ConfigError("out", f"{out} exists; pass --force to replace it")
    return out


def build(paths: Sequence[str], out: Path, device: str | None, records_dir: str | None) -> str:
    """``gemmlab-tune build``: the table of the records under ``paths`` (:func:`gemmlab.dispatch.auto.build_table`)
    written to ``out`` (a temporary file in the same folder, then ``os.replace``); returns the line
    that says what it holds (entries, records used and skipped, the device).

    Raises:
        ConfigError: ``out`` cannot be written (naming why), or the records cannot make a table."""
    table, stats = dispatch.build_table(paths, device, records_dir)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(table.as_json(), indent=1) + "\n")
        os.replace(tmp, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        blocking = file_in_the_way(out)
        why = f"{blocking} is a file, not a folder" if blocking is not None else exc.strerror or str(exc)
        raise ConfigError("out", f"cannot write {out} ({why}); give a table file in a folder that can be "
                          "written") from None
    skipped = ", ".join(f"{v} {k}" for k, v in stats["skipped"].items()) or "none"
    return (f"{out}: {len(table.entries)} entries from {stats['used']} of {stats['records']} records "
            f"(skipped: {skipped}); device {table.device.get('name')}")


def show_lines(path: str | None) -> list[str]:
    """``gemmlab-tune show``: the table at ``path`` (None: the shipped one) as lines, its device and
    entry count first, then one line per entry (precision, layout, shape, kernel, parameters, and the
    time ratio to the baseline in words where the entry has one).

    Raises:
        ConfigError: ``table``: the file is not a tuning table."""
    table = dispatch.load_table(path, field_name="table")
    lines = [f"{table.path}: device {table.device.get('name', '?')}, {len(table.entries)} entries"]
    for e in table.entries:
        ratio = e.extra.get("ratio_to_baseline")
        lines.append(f"  {e.precision} {'/'.join(e.layout)} {e.shape.M}x{e.shape.N}x{e.shape.K}: {e.kernel} "
                     f"{dispatch._ptext(e.params)}" + (f"  ({dispatch.ratio_text(ratio, e.extra.get('baseline'))})"
                                                       if isinstance(ratio, (int, float)) else ""))
    return lines


def choice(shape: Sequence[int], path: str | None, precision: str, layout_text: str,
           plugin_dirs: Sequence[str]) -> Mapping[str, Any]:
    """``gemmlab-tune choose M N K``: what kernel=auto picks for ``shape`` ([M, N, K]) from the table
    at ``path`` (None: the shipped one), as the record's ``dispatch`` section; a table entry's time
    ratio to the baseline is also said in words (``ratio_to_baseline_means``).

    Raises:
        ConfigError: ``layout`` is not ``a,b`` of row/col, the shape or table is invalid, or no kernel fits."""
    from gemmlab.contract.registry import load_registry
    from gemmlab.stages.config import parse_shape
    layout = tuple(layout_text.split(","))
    if len(layout) != 2 or not all(x in dispatch.LAYOUT_NAMES for x in layout):
        raise ConfigError("layout", f"must be a,b with each row or col, got {layout_text!r}")
    table = dispatch.load_table(path, field_name="table")
    picked = dispatch.choose(parse_shape(list(shape)), load_registry(list(plugin_dirs)), table, precision, layout)
    shown = picked.record()
    entry = shown.get("entry") or {}
    if isinstance(entry.get("ratio_to_baseline"), (int, float)):  # a time ratio, not a speed-up: say so
        entry["ratio_to_baseline_means"] = dispatch.ratio_text(entry["ratio_to_baseline"], entry.get("baseline"))
    return shown
