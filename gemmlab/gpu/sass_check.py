"""Declared instruction classes (issue 40 item 6): a kernel names the SASS instruction classes it is
built around (``KernelBase.sass_classes`` / ``sass_classes_for``: HGMMA, HMMA, FFMA, UTMALDG, ...,
:data:`gemmlab.contract.hookspecs.SASS_CLASSES`), and after each compile the core counts them in
the SASS of the main kernel.

Why: a compile can succeed without the instructions the kernel exists for. The shared wgmma
helpers (``kernels/include/gemmlab/wgmma.cuh``) are empty unless ``__CUDA_ARCH_FEAT_SM90_ALL`` is
defined, so a wgmma kernel built for plain ``sm_90`` instead of ``sm_90a`` compiles to 0 HGMMA,
and its record said "compiled", valid. The check makes that visible in ``mode=compile`` and
refuses it in ``mode=run`` before anything is launched.

What is counted: the main kernel's own function in the listing (nvdisasm's
``.text.<lowered name>`` section; cuobjdump's ``Function : <lowered name>``) together with every
function of the cubin that is not another entry point of the plan (non-inlined ``__device__``
functions the main kernel may call); the plan's :class:`~gemmlab.contract.hookspecs.Extra`
kernels (a split-K reduction, a relayout copy) are left out, so their instructions never stand in
for the main kernel's. Classes are counted as :func:`gemmlab.gpu.sass.histogram` counts them
(opcode mnemonics, every variant, an ``@!PT`` instruction in no class). Where the main kernel's
section cannot be found the whole listing is counted and ``scope`` says so.

The record's ``sass_check`` (:func:`check`)::

    {"declared": ["HGMMA", "UTMALDG"], "verdict": "present" | "missing" | "not checked" | "none declared",
     "counts": {"HGMMA": 8, "UTMALDG": 2}, "missing": [], "scope": "...", "message": None | "one line",
     "reason": None | "why it was not checked"}

``missing``: the point is refused in ``mode=run`` (:class:`~gemmlab.errors.SafetyNetError`,
status ``missing_instructions``, net ``instruction classes``); in ``mode=compile`` the status stays
``compiled`` and the record's ``sass_check`` and the summary's WARNING line say it. ``not
checked``: no SASS (no disassembler, or it failed): recorded with the reason and shown in the
summary, never taken for a pass; the point is not refused for it (the disassembler ships with
gemmlab's pip install: ``nvidia-cuda-nvdisasm``).
"""

from __future__ import annotations

import re

from gemmlab.gpu import sass

#: the safety net's name in a record's ``nets_fired``
NET = "instruction classes"
#: the status of a point refused by it
STATUS = "missing_instructions"

_NVDISASM_SECTION = re.compile(r"^//-+ \.text\.(\S+) -+\s*$", re.M)
_CUOBJDUMP_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$", re.M)


def functions(listing: str) -> dict[str, str]:
    """``{function name: its part of the listing}`` of a SASS listing: nvdisasm's per-function
    ``.text.<name>`` sections, else cuobjdump's ``Function : <name>`` blocks; ``{}`` when the
    listing has neither."""
    for pattern in (_NVDISASM_SECTION, _CUOBJDUMP_FUNCTION):
        marks = list(pattern.finditer(listing))
        if marks:
            return {m.group(1): listing[m.end():(marks[i + 1].start() if i + 1 < len(marks) else len(listing))]
                    for i, m in enumerate(marks)}
    return {}


def main_listing(listing: str, main_symbol: str, other_entries=()) -> tuple[str, str]:
    """``(text, scope)``: the part of ``listing`` that belongs to the main kernel (module
    docstring) and a few words saying what it is."""
    parts = functions(listing)
    if main_symbol not in parts:
        return listing, "whole cubin (the main kernel's function was not found in the listing)"
    others = set(other_entries) - {main_symbol}
    helpers = [name for name in parts if name != main_symbol and name not in others]
    text = "".join(parts[name] for name in [main_symbol, *helpers])
    scope = "main kernel" + (f" and {len(helpers)} device function(s)" if helpers else "")
    if others & set(parts):
        scope += f" (not the plan's {len(others & set(parts))} other kernel(s))"
    return text, scope


def check(declared, summary: dict | None, listing: str, main_symbol: str, other_entries=(),
          kernel: str = "?", target: str = "?", name_expression: str = "") -> dict:
    """The record's ``sass_check`` for the classes ``declared`` by kernel ``kernel`` against the
    disassembly ``summary``/``listing`` (:func:`gemmlab.gpu.sass.disassemble`) of its cubin, built
    for ``target``; ``main_symbol`` is the main kernel's lowered name, ``other_entries`` those of
    the plan's other kernels."""
    declared = list(declared)
    out = {"declared": declared, "verdict": "none declared", "counts": None, "missing": None, "scope": None,
           "message": None, "reason": None}
    if not declared:
        return out
    if not listing or not isinstance(summary, dict) or summary.get("histogram") is None:
        why = (summary or {}).get("error") if isinstance(summary, dict) else None
        out.update(verdict="not checked", reason=f"no SASS listing ({why or 'not disassembled'}); the declared "
                   f"classes {', '.join(declared)} were not counted")
        return out
    text, scope = main_listing(listing, main_symbol, other_entries)
    hist = sass.histogram(text)
    counts = {c: int(hist.get(c, 0)) for c in declared}
    missing = [c for c in declared if counts[c] == 0]
    out.update(counts=counts, missing=missing, scope=scope, verdict="missing" if missing else "present")
    if missing:
        out["message"] = message(kernel, declared, counts, missing, target, name_expression)
    return out


def message(kernel: str, declared, counts: dict, missing, target: str, name_expression: str = "") -> str:
    """The net's one line: the kernel, what it declares and what its SASS has."""
    what = f" ({name_expression} built for {target})" if name_expression else f" (built for {target})"
    text = (f"{NET}: kernel {kernel} declares {', '.join(declared)} but its SASS has "
            f"{', '.join(f'{counts[c]} {c}' for c in missing)} in the main kernel{what}")
    if "HGMMA" in missing and not str(target).endswith("a"):
        text += "; wgmma needs an arch-specific target (sm_90a: KernelOptions(arch_specific=True))"
    return text

