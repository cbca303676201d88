"""``kernel=auto``: pick a kernel and its parameters per (precision, layout, shape).

Two sources, in this order:

1. **The tuning table** (``source: "table"``): a JSON file that ``gemmlab-tune build`` makes from
   sweep records. Each entry names, for one (precision, layout, M, N, K) on one GPU, the fastest
   valid record's kernel and parameters. An exact entry is used first (``match: "exact"``), else
   the nearest entry whose M, N, K are each within 1.5x and that falls under the same rule
   (``match: "nearest"``). The H200's table ships as package data
   (``gemmlab/data/tuning/h200.json``); ``kernel.table=<file>`` uses another.
2. **The rules** (``source: "rule"``), for shapes the table has not seen: the ordered heuristic of
   :func:`rules`, based on how many output tiles a kernel would launch against the GPU's SM count
   (``sm_count`` of the table's GPU, else the sm_90 class's 132), the reduction length K and the
   alignment the kernel's own ``check`` demands. Each rule lists candidates in preference order;
   a candidate that is not registered, or whose ``check`` rejects the shape (alignment, limits),
   is skipped and the reason kept in the record.

The chosen kernel is resolved before anything compiles (:func:`resolve_config`, called by the
pipeline), and the record gains ``dispatch``: ``{"requested": "auto", "chosen", "params",
"source", "rule" | "entry", "table", "skipped"}``. A shape no registered kernel supports is an
``invalid`` record naming every rejection, never a crash. Library kernels (cuBLAS) are never
candidates: auto is measured against them.

Table file (``schema: gemmlab.tuning/1``)::

    {"schema": "gemmlab.tuning/1",
     "device": {"name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132},
     "made_by": "gemmlab-tune build ...", "created_utc": "...", "metric": "...",
     "entries": [{"precision": "fp32", "layout": ["row", "row"], "shape": [M, N, K],
                  "kernel": "tiled", "params": {"BM": 64, ...}, "median_ms": 0.09,
                  "ratio_to_baseline": 1.21, "baseline": "cublas", "candidates": 5,
                  "record": "sweep/3/result.json"}, ...]}

A malformed file is one line: ``gemmlab: error: kernel.table: <file>: <rule broken>``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from gemmlab.stages import record_model as results
from gemmlab.errors import ConfigError
from gemmlab.paths import DATA_DIR, not_a_regular_file
from gemmlab.contract.hookspecs import (LAYOUTS, PRECISIONS, DeviceFacts, KernelBase, LibraryKernelSpec, ParamError,
                                        Problem, Shape)

AUTO = "auto"
TABLE_SCHEMA = "gemmlab.tuning/1"
TABLE_DIR = DATA_DIR / "tuning"
DEFAULT_TABLE = TABLE_DIR / "h200.json"
DEFAULT_SM_COUNT = 132  # the sm_90 class (H100/H200 SXM) when the table names no GPU
AUTO_KEYS = ("name", "table", "rank", "tune", "tune_k", "tune_budget_s", "tune_cache", "model")  # kernel=auto's keys
RANK_KEYS = AUTO_KEYS[2:]  # the ranking path's (gemmlab.dispatch.tuning)
PRECISION_NAMES = PRECISIONS  # the plugin contract's (gemmlab.contract.hookspecs), one source
LAYOUT_NAMES = LAYOUTS
DEFAULT_PRECISION = Problem.precision  # fp32: the contract's default problem, as the config schema's
DEFAULT_LAYOUT = (Problem.layout_a, Problem.layout_b)  # row/row (also what a record without layout stands for)
TINY = 256 ** 3
# The ``tiny_output`` rule (splitk_dot: K split over the whole GPU, issue 41 item 3): at most this many outputs,
# so the other kernels' smallest output tiles (16x16: slicedk, small_tile; 1x16: gemv_rows; decode_bf16 16x64)
# number at most ceil(M/16)*ceil(N/16) <= 16, fewer than a quarter of the 132 SMs: they fill the GPU only by
# splitting K ...
TINY_OUTPUT_MAX_MN = 256
# ... and at least this K: below it the tiny rule's single-block slicedk walks at most 16 chunks of 8 per thread (16
# slices, so K / 128 dependent round trips), comparable to splitk_dot's fixed cost (a workspace memset, one launch and
# the ticketed final sum); from it on the chain grows with K while splitk_dot's stays one load round per thread. Not
# measured yet: a GPU run of tests/test_gpu_splitk_dot.py and the 2x2x100000 point vs cuBLAS is the check.
TINY_OUTPUT_MIN_K = 4096
PROG = "gemmlab-tune"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --- the table ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One table entry: the kernel and parameters to use for one (precision, layout, shape)."""

    precision: str
    layout: tuple[str, str]
    shape: Shape
    kernel: str
    params: Mapping[str, int]
    extra: Mapping[str, Any] = field(default_factory=dict)  # median_ms, ratio, record path, ...

    @property
    def key(self) -> tuple:
        return (self.precision, self.layout, tuple(self.shape))

    def as_json(self) -> dict:
        """The entry as stored in the table file."""
        return {"precision": self.precision, "layout": list(self.layout), "shape": list(self.shape),
                "kernel": self.kernel, "params": dict(self.params), **dict(self.extra)}


@dataclass(frozen=True)
class Table:
    """A validated tuning table. ``device`` is the GPU its records came from (may be empty)."""

    entries: tuple[Entry, ...] = ()
    device: Mapping[str, Any] = field(default_factory=dict)
    path: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    def lookup(self, shape: Shape, precision: str = DEFAULT_PRECISION,
               layout: tuple[str, str] = DEFAULT_LAYOUT) -> Entry | None:
        """The entry for exactly this (precision, layout, shape), or None."""
        key = (precision, tuple(layout), tuple(shape))
        return next((e for e in self.entries if e.key == key), None)

    @property
    def sm_count(self) -> int:
        """The SM count the rules use: the table's GPU's, else 132 (sm_90 class)."""
        n = self.device.get("sm_count") if isinstance(self.device, Mapping) else None
        return n if isinstance(n, int) and n > 0 else DEFAULT_SM_COUNT

    def as_json(self) -> dict:
        """The table as stored on disk."""
        return {"schema": TABLE_SCHEMA, "device": dict(self.device), **dict(self.meta),
                "entries": [e.as_json() for e in self.entries]}


def parse_table(data: Any, source: str = "<table>", field_name: str = "kernel.table") -> Table:
    """Validate the parsed JSON of a table file.

    Raises:
        ConfigError: ``field_name``: ``<source>: <the first rule broken>`` (one line).
    """
    def bad(what: str) -> ConfigError:
        return ConfigError(field_name, f"{source}: {what}")

    if not isinstance(data, Mapping):
        raise bad(f"must be a JSON object with schema {TABLE_SCHEMA}")
    if data.get("schema") != TABLE_SCHEMA:
        raise bad(f"schema must be {TABLE_SCHEMA!r}, got {data.get('schema')!r}")
    device = data.get("device", {})
    if not isinstance(device, Mapping):
        raise bad("device must be an object (name, arch, sm_count)")
    if "sm_count" in device and (not isinstance(device["sm_count"], int) or isinstance(device["sm_count"], bool)
                                 or device["sm_count"] < 1):
        raise bad(f"device.sm_count must be a positive integer, got {device['sm_count']!r}")
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise bad("entries must be a list")
    out, seen = [], set()
    for i, e in enumerate(entries):
        where = f"entries[{i}]"
        if not isinstance(e, Mapping):
            raise bad(f"{where} must be an object")
        for key in ("precision", "layout", "shape", "kernel", "params"):
            if key not in e:
                raise bad(f"{where} lacks {key!r} (each entry needs precision, layout, shape, kernel, params)")
        if e["precision"] not in PRECISION_NAMES:
            raise bad(f"{where}.precision must be one of {', '.join(PRECISION_NAMES)}, got {e['precision']!r}")
        lay = e["layout"]
        if not isinstance(lay, list) or len(lay) != 2 or not all(x in LAYOUT_NAMES for x in lay):
            raise bad(f"{where}.layout must be [a, b] with each row or col, got {lay!r}")
        s = e["shape"]
        if (not isinstance(s, list) or len(s) != 3
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in s)):
            raise bad(f"{where}.shape must be [M, N, K] of three positive integers, got {s!r}")
        if not isinstance(e["kernel"], str) or not e["kernel"] or e["kernel"] == AUTO:
            raise bad(f"{where}.kernel must be a kernel name (not auto), got {e['kernel']!r}")
        p = e["params"]
        if not isinstance(p, Mapping) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                                 for k, v in p.items()):
            raise bad(f"{where}.params must map parameter names to integers, got {p!r}")
        entry = Entry(precision=e["precision"], layout=(lay[0], lay[1]), shape=Shape(*s), kernel=e["kernel"],
                      params=dict(p), extra={k: v for k, v in e.items()
                                             if k not in ("precision", "layout", "shape", "kernel", "params")})
        if entry.key in seen:
            raise bad(f"{where}: a second entry for {e['precision']} {'/'.join(lay)} {s}")
        seen.add(entry.key)
        out.append(entry)
    meta = {k: v for k, v in data.items() if k not in ("schema", "device", "entries")}
    return Table(entries=tuple(out), device=dict(device), path=source, meta=meta)


def load_table(path: str | os.PathLike | None = None, field_name: str = "kernel.table") -> Table:
    """Read and validate a table file (``None``: the shipped H200 table).

    Raises:
        ConfigError: ``field_name``: missing or unreadable file, invalid JSON, or a broken rule.
    """
    p = Path(path).expanduser() if path is not None else DEFAULT_TABLE
    odd = not_a_regular_file(p)
    if odd:  # a fifo would block the reader
        raise ConfigError(field_name, f"{p}: {odd}; give a table file (JSON)")
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError(field_name, f"{p}: no such file") from None
    except OSError as exc:
        raise ConfigError(field_name, f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(field_name, f"{p}: not valid JSON: {exc}") from None
    return parse_table(data, str(p), field_name)


# --- the rules ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    """One heuristic rule: ``text`` says when it applies and why; ``candidates`` are
    ``(kernel, params)`` pairs in preference order (params override the kernel's defaults)."""

    name: str
    text: str
    candidates: tuple[tuple[str, Mapping[str, int]], ...]
    min_blocks: int = 0  # a candidate whose launch has fewer blocks (a partial first wave) is skipped


# Large-tile candidates, best first. The sgemm_* rungs are other branches' kernels, used with their
# defaults when registered. tiled 128x128x32 (TM=16, TN=4) is the Optuna search's best tile at
# 2048^3 on the H200 (28.95 TFLOP/s vs 25.9 for the seed tile: docs/results/sweeps-h200.md).
_LARGE = (("sgemm_pipelined", {}), ("sgemm_warptile", {}), ("sgemm_block2d", {}),
          ("tiled", {"BM": 128, "BN": 128, "BK": 32, "TM": 16, "TN": 4}))
_MEDIUM = (("sgemm_warptile", {}), ("sgemm_block2d", {}), ("tiled", {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 2}))
_TILED32 = ("tiled", {"BM": 32, "BN": 32, "BK": 16, "TM": 4, "TN": 1})


# (BM, BN, KS, BK), largest tile first; BK = 8 for the many-slice tiles keeps them at <= 128
# registers (2 blocks per SM; ptxas report, NVRTC 13.5)
_SLICEDK_TILES = ((64, 64, 2, 16), (32, 64, 4, 16), (32, 32, 4, 16), (16, 32, 8, 8), (16, 16, 16, 8))


def _slicedk_params(shape: Shape, sms: int) -> dict[str, int]:
    """slicedk parameters: the largest tile of 64x64 (KS=2), 32x64 (4), 32x32 (4), 16x32 (8),
    16x16 (16) that still gives at least one block per SM (else the smallest); 4x4 per thread."""
    pick = _SLICEDK_TILES[-1]
    for tile in _SLICEDK_TILES:
        if _cdiv(shape.M, tile[0]) * _cdiv(shape.N, tile[1]) >= sms:
            pick = tile
            break
    return {"BM": pick[0], "BN": pick[1], "BK": pick[3], "TM": 4, "TN": 4, "KS": pick[2]}


def _splitk_params(shape: Shape, sms: int) -> dict[str, int]:
    """``splitk`` (the tensor-core branch's fp32 split-K: 64x64 partial tiles into a workspace plus
    a reduction launch) with SPLITS = enough K slices for two blocks per SM, each slice >= 512 long;
    its other parameters keep their defaults. An unknown parameter name makes auto skip it."""
    tiles = _cdiv(shape.M, 64) * _cdiv(shape.N, 64)
    return {"SPLITS": max(1, min(_cdiv(2 * sms, tiles), shape.K // 512))}


# streamk / splitk_warptile tiles by (BM, BN): warp tiles of 32x64 with 8x8 per thread (sgemm_warptile's
# mapping); WPS = MINB = the blocks of that many threads that fit one SM at <= 128 registers
_STREAMK_TILES = MappingProxyType({(128, 128): 2, (64, 128): 4, (128, 64): 4, (64, 64): 8})


def _streamk_params(shape: Shape, sms: int) -> dict[str, int]:
    """streamk (or splitk_warptile without WPS) parameters: a 128x128 warp-tiled tile, halved to 64
    along M or N when that side is at most 64 (a skinny output wastes no half tile)."""
    bm = 64 if shape.M <= 64 else 128
    bn = 64 if shape.N <= 64 else 128
    per_sm = _STREAMK_TILES[(bm, bn)]
    return {"BM": bm, "BN": bn, "BK": 8, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "MINB": per_sm, "WPS": per_sm}


def _splitk_wt_params(shape: Shape, sms: int) -> dict[str, int]:
    """splitk_warptile parameters: streamk's tile, SPLITS = the most K slices whose blocks still fit
    one wave (tiles x SPLITS <= WPS x SMs: no second, partial wave), each slice at least 256 long.
    On the H200 at 512x512x16384: 16 splits (256 blocks) ran in 0.219 ms with 8 splits and 0.305 ms
    with 17 (272 blocks, 8 in a second wave); at 256x256x65536 66 splits (264 blocks) 0.201 ms."""
    p = _streamk_params(shape, sms)
    tiles = _cdiv(shape.M, p["BM"]) * _cdiv(shape.N, p["BN"])
    p["SPLITS"] = max(1, min(p.pop("WPS") * sms // tiles, shape.K // 256))
    return p


# streamk over 16 x 128 warp tiles (2 warps of 16 x 64, 4 x 8 per thread, BK = 16): decode with
# 8 < M <= 16 (16x4096x4096 on the H200: 0.0439 ms, 178.8% of cuBLAS; gemv_rows 151.7%)
STREAMK_16 = MappingProxyType({"BM": 16, "BN": 128, "BK": 16, "WM": 16, "WN": 64, "TM": 4, "TN": 8, "MINB": 4,
                               "WPS": 4})


# The 128x256 output tile of the wave tests: wgmma_bf16's default tile (one CTA per SM) and the
# fp32 "large" rule's test, whose thresholds were measured with it (sgemm_pipelined's default block
# tile was 128x256 then; it is 64x128 with 4 blocks per SM since MINB=4, the rule is unchanged)
PIPELINED_TILE = (128, 256)
FULL_WAVES = 0.9  # sgemm_pipelined first only when its tiles use at least this share of their waves


def _wave_efficiency(shape: Shape, tile: tuple[int, int], sms: int) -> float:
    """Useful share of the block slots of a one-block-per-SM kernel with this output tile: M*N over
    (whole waves x SMs x tile area); 1.0 when the last wave is full and no tile hangs past M or N."""
    blocks = _cdiv(shape.M, tile[0]) * _cdiv(shape.N, tile[1])
    return shape.M * shape.N / (_cdiv(blocks, sms) * sms * tile[0] * tile[1])


def _tiny_slicedk_params(k: int) -> dict[str, int]:
    """slicedk for tiny shapes with short K (16^3 <= M*N*K < 64^3 or K < 64): 16x16 tiles, BK = 8,
    one chunk per slice (KS = ceil(K/8), at most 16), so each thread waits for one load round trip
    instead of K dependent ones (16x16x16 on the H200: KS=2 2.14 us, 104.8% of cuBLAS; small_tile
    KS=1 3.57 us, 61.6%)."""
    return {"BM": 16, "BN": 16, "BK": 8, "TM": 4, "TN": 4, "KS": min(16, _cdiv(k, 8))}


def _slices(k: int) -> int:
    """small_tile's KS: K split in up to 4 slices of at least 32 (1 below K = 64)."""
    return 1 if k < 64 else 2 if k < 128 else 4


def _gemv_params(shape: Shape, sms: int) -> dict[str, int]:
    """gemv_rows parameters: MT rows per block (the next power of two >= min(M, 16)), NT columns
    per block as wide as still gives at least 2 blocks per SM (128, 64, 32, else 16), 8 warps over K
    (4 with NT = 128, so the cross-warp partials fit the 48 KiB of static shared memory)."""
    mt = 1
    while mt < min(shape.M, 16):
        mt *= 2
    nt = 16
    for cand in (128, 64, 32):
        if _cdiv(shape.N, cand) * _cdiv(shape.M, mt) >= 2 * sms:
            nt = cand
            break
    return {"MT": mt, "NT": nt, "KW": 4 if nt == 128 else 8}  # KW*MT*NT partials fit 48 KiB


def rules(shape: Shape, precision: str, layout: tuple[str, str], sms: int) -> list[Rule]:
    """The heuristic rules that apply to ``shape``, in the order auto tries them.

    Inputs: the shape, precision, layout and the GPU's SM count ``sms``. The rules (documented in
    docs/user-guide.md, "How kernel=auto decides"):

    - ``tiny_output`` (every precision and layout, first): M*N <= :data:`TINY_OUTPUT_MAX_MN` and
      K >= :data:`TINY_OUTPUT_MIN_K` (2x2x100000): splitk_dot with its plugin's first candidate
      (:data:`OFFERED`: OM x ON tile, K split over enough blocks to fill the GPU); the rules below
      follow when it is not registered or refuses the problem.
    - ``decode``: M <= 16 with N*K >= 2^20, or M <= 64 with N*K >= 2^22 (rows times a weight
      matrix): M <= 8: gemv_rows (B streamed once with float4 loads, K split over 8 warps);
      8 < M <= 16: streamk over 16x128 warp tiles (16x4096x4096 on the H200: 214.5% of cuBLAS
      vs gemv_rows' 151.7%); 16 < M <= 64: splitk_warptile over 64x128 tiles (70-74% vs
      slicedk's 43-50%), then streamk; then slicedk, gemv_rows, split-K.
    - ``tiny``: M*N*K <= 256^3. Launch-bound: the fewest dependent memory round trips per thread
      win. slicedk (register tiles, K sliced in the block) 16x16 with KS = 16 when K >= 64 and
      M*N*K >= 64^3, else (K >= 8, M*N*K >= 16^3) one BK = 8 chunk per slice (16^3: 2.16 us vs
      small_tile's 3.57 and cuBLAS's 2.30); then small_tile (naive's mapping with K split in KS
      slices; 1^3: 1.25 us, cuBLAS 3.18), then naive.
    - ``k_heavy``: fewer 64x64 output tiles than SMs and K >= 16 * max(M, N): splitk_warptile
      (SPLITS filling exactly one wave: 87.9-89.1% of cuBLAS), streamk, the 64x64 split-K, then
      slicedk (K sliced inside the block), then small_tile.
    - ``large``: at least one wave of 128x128 tiles and min(M, N) >= 128: sgemm_pipelined first
      only where its 128x256 tiles use >= 90% of their waves' block slots (else a partial wave
      or a tile past N costs it 15-45 points: docs/results/shapes-h200.md), otherwise streamk
      first (data-parallel at whole waves, stream-K for the last one); each candidate only if its
      own launch has at least one block per SM.
    - ``medium``: at least one wave of 64x64 tiles and min(M, N) >= 64: streamk, then 64x64 kernels.
    - ``small``: anything else: slicedk, streamk, small_tile, 32x32 tiled, the seed tile.
    - ``tensor_core`` (bf16, fp16): :func:`_tensor_core_rule`; tf32: :func:`_tf32_rules` (decode, tiny,
      K-heavy on FP32 CUDA cores or split-K wgmma, then the tensor cores with a tile sized to the shape).
    - ``any``: every other registered NVRTC kernel with its defaults (e.g. a shape whose alignment
      the preferred kernels reject).

    Layouts other than row/row in fp32 go straight to ``any``: the first registered kernel that
    declares support (v2 contract ``precisions``/``layouts``).
    """
    m, n, k = shape
    out: list[Rule] = []
    if m * n <= TINY_OUTPUT_MAX_MN and k >= TINY_OUTPUT_MIN_K:  # every precision and layout
        out.append(Rule("tiny_output", f"tiny output, huge K: M*N = {m * n} <= {TINY_OUTPUT_MAX_MN} (at most 16 output "
                        f"tiles of 16x16 or 1x16 for the other kernels: < 1/4 of the SMs) and K = {k} >= "
                        f"{TINY_OUTPUT_MIN_K}: K split over the whole GPU (splitk_dot, sized by its plugin)",
                        (("splitk_dot", OFFERED),)))
    if precision == "fp32" and tuple(layout) == ("row", "row"):
        if (m <= 16 and n * k >= 2 ** 20) or (m <= 64 and n * k >= 2 ** 22):
            gemv = ("gemv_rows", _gemv_params(shape, sms))
            sliced = ("slicedk", _slicedk_params(shape, sms))
            out.append(Rule("decode", f"decode-like: M = {m} <= {16 if m <= 16 else 64} rows against a {k}x{n} "
                            "weight matrix: " + ("stream B once (gemv_rows), K split over warps" if m <= 8 else
                                                 "stream-K over 16-row warp tiles (streamk)" if m <= 16 else
                                                 "split-K over 64-row warp tiles (splitk_warptile)"),
                            (gemv, ("streamk", dict(STREAMK_16)), sliced, ("splitk", _splitk_params(shape, sms)))
                            if m <= 8 else
                            (("streamk", dict(STREAMK_16)), gemv, sliced, ("splitk", _splitk_params(shape, sms)))
                            if m <= 16 else
                            (("splitk_warptile", _splitk_wt_params(shape, sms)), ("streamk", _streamk_params(shape, sms)),
                             sliced, gemv, ("splitk", _splitk_params(shape, sms)))))
        if m * n * k <= TINY:
            out.append(Rule("tiny", f"tiny: M*N*K = {m * n * k} <= 256^3: launch-bound; K sliced inside the block to "
                            "shorten each thread's serial chain",
                            ((("slicedk", _slicedk_params(shape, sms)),) if k >= 64 and m * n * k >= 64 ** 3 else
                             (("slicedk", _tiny_slicedk_params(k)),) if k >= 8 and m * n * k >= 16 ** 3 else ())
                            + (("small_tile", {"BX": 16, "BY": 16, "KS": _slices(k)}), ("naive", {"BX": 16, "BY": 16}))))
        tiles64 = _cdiv(m, 64) * _cdiv(n, 64)
        if tiles64 < sms and k >= 16 * max(m, n):
            out.append(Rule("k_heavy", f"K-heavy: {tiles64} 64x64 output tiles < {sms} SMs and K = {k} >= 16*max(M, N): "
                            "split K (across blocks, else inside the block)",
                            (("splitk_warptile", _splitk_wt_params(shape, sms)), ("streamk", _streamk_params(shape, sms)),
                             ("splitk", _splitk_params(shape, sms)), ("slicedk", _slicedk_params(shape, sms)),
                             ("small_tile", {"BX": 16, "BY": 8, "KS": 8}), _TILED32)))
        tiles128 = _cdiv(m, 128) * _cdiv(n, 128)
        streamk = ("streamk", _streamk_params(shape, sms))
        if tiles128 >= sms and min(m, n) >= 128:
            big = _cdiv(m, PIPELINED_TILE[0]) * _cdiv(n, PIPELINED_TILE[1])
            eff = _wave_efficiency(shape, PIPELINED_TILE, sms)
            if big >= sms and eff >= FULL_WAVES:
                out.append(Rule("large", f"large: {tiles128} 128x128 output tiles >= {sms} SMs; {big} 128x256 "
                                f"tiles use {eff:.0%} of their waves' block slots (>= {FULL_WAVES:.0%})",
                                _LARGE + (streamk,), min_blocks=sms))
            else:
                out.append(Rule("large", f"large: {tiles128} 128x128 output tiles >= {sms} SMs, but {big} 128x256 "
                                f"tiles use only {eff:.0%} of their waves' block slots: stream-K hybrid (full waves)",
                                (streamk,) + _LARGE, min_blocks=sms))
        elif tiles64 >= sms and min(m, n) >= 64:
            out.append(Rule("medium", f"medium: {tiles64} 64x64 output tiles >= {sms} SMs, no full wave of "
                            "128x128 tiles or min(M, N) < 128: stream-K hybrid first", (streamk,) + _MEDIUM,
                            min_blocks=sms))
        else:
            out.append(Rule("small", f"small: {tiles64} 64x64 output tiles < {sms} SMs or min(M, N) < 64: "
                            "smaller tiles fill more SMs",
                            (("slicedk", _slicedk_params(shape, sms)), streamk,
                             ("small_tile", {"BX": 16, "BY": 16, "KS": _slices(k)}), _TILED32, ("tiled", {}))))
    elif precision in ("bf16", "fp16"):
        out += _bf16_rules(shape, sms)
    elif precision == "tf32":
        out += _tf32_rules(shape, sms, tuple(layout))
    out.append(Rule("any", "any: the first registered kernel that supports this precision, layout and shape", ()))
    return out


_MMA16_128 = ("mma_bf16", {"BM": 128, "BN": 128, "WN": 32, "STAGES": 4})
_MMA16_64 = ("mma_bf16", {"BM": 64, "BN": 64, "WM": 32, "WN": 32, "BK": 64})


# wgmma_bf16 tiles (BM, BN, SCHED) and a guessed relative efficiency per output element (bigger
# tiles reuse more of each staged byte; a 64-row tile needs the ping-pong schedule, SCHED=2)
_WGMMA_TILES = ((128, 256, 1, 1.0), (128, 128, 1, 0.85), (64, 256, 2, 0.8), (128, 64, 1, 0.65),
                (64, 128, 2, 0.6), (64, 64, 2, 0.45))


WGMMA_TAIL_MIN_WAVES = 8  # the stream-K tail (TAIL=2) from this many waves of 128x256 tiles on, measured on
# the H200 (docs/results/tc-ladder-h200.md "Session 7", % of cuBLAS BF16 row/col, graph timing, TAIL=2 vs
# TAIL=1 in the same call): 6144^3 (8.7 waves) 101.2 vs 99.8, 8192x8192x2048 (15.5) 102.0 vs 101.8,
# 8192x8192x4096 103.7 vs 101.7, 10240x10240x4096 (24.2) 101.8 vs 100.5, 8192^3 104.0-105.3 vs
# 101.6-103.4 (4 calls); below: 4096^3 (3.9 waves) 95.6-96.1 vs 98.3-99.7, 4096x4096x2048 96.5 vs 99.6 (the
# tail's ~12-16 us of fixed cost outweighs the ~3% of a short launch it saves)
WGMMA_TAIL_MIN_K = 5120  # ... and only from this K on: with TAIL=2 the EPI=7 default runs as EPI=2 (its deferred
# right half needs whole tiles), and EPI=7 saves a fixed epilogue per tile, a larger share at small K. Measured on
# the H200 (docs/results/tc-ladder-h200.md "Sessions 12-13", calls 5-6, EPI=7 / TAIL=2 in the same run, % of cuBLAS
# BF16 row/col): K = 4096 EPI=7 ahead in 8 of 8 pairs (8192x8192x4096 104.0 / 103.2, 104.1 / 103.6, 104.1 / 103.4,
# 103.9 / 103.4; 10240x10240x4096 102.8 / 100.6, 101.9 / 101.0, 102.2 / 100.9; 16384x4096x4096 103.8 / 103.2);
# K = 6144 the tail ahead or even (8192x8192x6144 103.5 / 104.2, 103.7 / 104.4; 6144^3 101.2 / 101.9, 101.5 / 101.3);
# 8192^3 the tail ahead in 4 of 4 (+0.1 to +2.3); K = 5120 lies between, not measured


def _wgmma_params(shape: Shape, sms: int) -> dict[str, int]:
    """wgmma_bf16's tile for this shape: the (BM, BN, SCHED) of :data:`_WGMMA_TILES` with the least
    estimated time, whole waves of the persistent grid (ceil(tiles / SMs)) times the tile area over
    its efficiency, so a shape with too few 128x256 tiles (512x4096: 64 tiles on 132 SMs) takes
    128x128, and a 64-wide side a 64-wide tile (65536x64: 128x64; 64x65536: 64x256 ping-pong).
    With the 128x256 tile, at least :data:`WGMMA_TAIL_MIN_WAVES` waves of it and K >=
    :data:`WGMMA_TAIL_MIN_K`, also ``TAIL=2`` (the stream-K tail over the last partial wave; below
    that K the default ``EPI=7`` epilogue gains more than the tail)."""
    best, best_cost = _WGMMA_TILES[0], math.inf
    for tile in _WGMMA_TILES:
        bm, bn, _, eff = tile
        tiles = _cdiv(shape.M, bm) * _cdiv(shape.N, bn)
        cost = _cdiv(tiles, sms) * bm * bn / eff
        if cost < best_cost:
            best, best_cost = tile, cost
    params = {"BM": best[0], "BN": best[1], "SCHED": best[2]}
    if _tail_waves(shape, params, sms) and shape.K >= WGMMA_TAIL_MIN_K:
        params["TAIL"] = 2
    return params


def _tail_waves(shape: Shape, params: Mapping[str, int], sms: int) -> bool:
    """Whether ``params`` (wgmma_bf16's cooperative 128x256 tile) fill at least
    :data:`WGMMA_TAIL_MIN_WAVES` waves of the ``sms`` SMs at ``shape``: where the tail is considered."""
    return ((params["BM"], params["BN"], params.get("SCHED", 1)) == (128, 256, 1)
            and _cdiv(shape.M, 128) * _cdiv(shape.N, 256) >= WGMMA_TAIL_MIN_WAVES * sms)


WGMMA_MAX_SPLIT_K = 32  # wgmma_bf16 REDUCE=2 (workspace slabs + a parallel reduce step), measured on the
# H200 (branch wsplit, 64x128 ping-pong STAGES=6, one wave of items): 256x256x65536 SPLIT_K=16 81.8% of
# cuBLAS, 128x1024x32768 8: 85.8%, 512x512x16384 4: 73.4%; more slices than one wave lose (S=64: 50%)


def _wgmma_split_params(shape: Shape, sms: int, tile: tuple[int, int, int] = (64, 128, 2),
                        k_tile: int = 64) -> dict[str, int]:
    """wgmma_bf16 with split K for few tiles and long K: a 64x128 ping-pong tile (``tile`` = BM,
    BN, SCHED; 6 stages) and SPLIT_K = the most K slices whose work units still fit one CTA per SM,
    each slice at least 8 k-tiles of ``k_tile`` elements (64 for 2-byte inputs, 32 for wgmma_tf32:
    a stage holds 128 bytes of K per row), at most :data:`WGMMA_MAX_SPLIT_K`; split tiles reduced
    through the workspace (REDUCE=2) whenever SPLIT_K > 1."""
    bm, bn, sched = tile
    tiles = _cdiv(shape.M, bm) * _cdiv(shape.N, bn)
    split = max(1, min(WGMMA_MAX_SPLIT_K, sms // tiles, _cdiv(shape.K, k_tile) // 8))
    return {"BM": bm, "BN": bn, "SCHED": sched, "STAGES": 6, "SPLIT_K": split, **({"REDUCE": 2} if split > 1 else {})}


DECODE16_WARPS = 4  # decode_bf16's KW: 4 warps per block
DECODE16_MAX_SPLITS = 8  # a tile's splits are one thread-block cluster (portable size <= 8)
DECODE16_MIN_K = 1024  # bf16 decode rule: a K long enough to split (64x65536x64 writes C, it streams no B)


def _decode16_params(shape: Shape, sms: int) -> dict[str, int]:
    """decode_bf16 parameters: MT = the m16 tiles covering M (1, 2 or 4: 16, 32 or 64 rows),
    4 warps (8 with MT = 4), U = 2 chunks per load round (1 with MT = 4: 230 registers, NVRTC
    13.5), SPLITS = the most K splits (at most 8: one cluster per tile) whose blocks still fit one
    wave of 4 blocks per SM (1 with MT = 4) while each warp keeps at least 2 load rounds of K.
    Measured on the H200 (bf16-pass1): 1x4096x4096 KW=4 SPLITS=8 14.9 us, KW=8 SPLITS=4 19.6 us;
    64x4096x4096 KW=8 SPLITS=2 23.5 us, KW=4 SPLITS=4 35.1 us, KW=4 SPLITS=8 43.1 us."""
    mt = 1 if shape.M <= 16 else 2 if shape.M <= 32 else 4
    u = 1 if mt == 4 else 2
    kw = 8 if mt == 4 else DECODE16_WARPS
    per_sm = 1 if mt == 4 else 4
    blocks = _cdiv(shape.N, 64) * _cdiv(shape.M, 16 * mt)
    chunks = _cdiv(shape.K, 32)
    splits = max(1, min(DECODE16_MAX_SPLITS, per_sm * sms // blocks, chunks // (2 * kw * u)))
    return {"MT": mt, "KW": kw, "U": u, "SPLITS": splits}


def _bf16_rules(shape: Shape, sms: int) -> list[Rule]:
    """bf16/fp16 rules: ``decode`` (the fp32 rule's condition and K >= 1024: decode_bf16, B streamed through
    registers, K split across blocks), ``k_heavy`` (fewer 64x64 tiles than SMs and K >= 16*max(M, N):
    wgmma_bf16 64x128 ping-pong with SPLIT_K <= 4 (:func:`_wgmma_split_params`) where it has that
    parameter, decode_bf16's split K with 64-row blocks of 8 warps,
    then the tensor-core rule), then ``tensor_core`` (:func:`_tensor_core_rule`)."""
    m, n, k = shape
    out: list[Rule] = []
    tc = _tensor_core_rule(shape, sms)
    if ((m <= 16 and n * k >= 2 ** 20) or (m <= 64 and n * k >= 2 ** 22)) and k >= DECODE16_MIN_K:
        out.append(Rule("decode", f"decode-like: M = {m} <= 64 rows against a {k}x{n} weight matrix: B streamed by "
                        "16-byte loads into mma.sync fragments, K split over warps and blocks (decode_bf16)",
                        (("decode_bf16", _decode16_params(shape, sms)),) + tc.candidates))
    tiles64 = _cdiv(m, 64) * _cdiv(n, 64)
    if tiles64 < sms and k >= 16 * max(m, n) and m * n * k > TINY:
        wg = _wgmma_split_params(shape, sms)
        dec = {"MT": 4, "KW": 8, "U": 1,  # 512x512x16384: KW=8 SPLITS=2 30.3%, KW=4 SPLITS=8 18.8% (bf16-pass1)
               "SPLITS": max(1, min(DECODE16_MAX_SPLITS, sms // (_cdiv(n, 64) * _cdiv(m, 64)), _cdiv(k, 32) // 16))}
        out.append(Rule("k_heavy", f"K-heavy: {tiles64} 64x64 output tiles < {sms} SMs and K = {k} >= 16*max(M, N): "
                        "split K across blocks",
                        (("wgmma_bf16", wg),
                         ("decode_bf16", dec)) + tc.candidates))
    out.append(tc)
    return out


def _tensor_core_rule(shape: Shape, sms: int) -> Rule:
    """bf16/fp16 (2-byte A and B, float32 C): the tensor-core kernels that declare the precision and
    layout, largest tile that still fills the GPU first. ``wgmma_bf16`` (another branch's kernel) is
    tried with its defaults where registered; ``tma_bf16`` (wgmma fed by TMA, B column-major, K % 8
    == 0) where its layout and check allow; ``mma_bf16`` (mma.sync) with the 128x256 tile when
    its tiles use >= 90% of their waves' block slots, the 128x128 tile when there is a wave of them,
    else 64x64. Outside tiny shapes, ``wgmma_bf16`` with the tile of :func:`_wgmma_params` comes
    first (its defaults, 128x256, where that tile is not accepted)."""
    eff = _wave_efficiency(shape, PIPELINED_TILE, sms)
    tiles128 = _cdiv(shape.M, 128) * _cdiv(shape.N, 128)
    wg = ("wgmma_bf16", _wgmma_params(shape, sms))
    big = shape.M * shape.N * shape.K > TINY and min(shape.M, shape.N) >= 64
    tiles256 = _cdiv(shape.M, 128) * _cdiv(shape.N, 256)
    tail = ""  # the record says why wherever _wgmma_params added the tail, or left it out for K alone
    if _tail_waves(shape, wg[1], sms):
        tail = (f"; {tiles256} tiles >= {WGMMA_TAIL_MIN_WAVES} waves and K >= {WGMMA_TAIL_MIN_K}: stream-K tail (TAIL=2)"
                if wg[1].get("TAIL") == 2 else
                f"; {tiles256} tiles >= {WGMMA_TAIL_MIN_WAVES} waves but K < {WGMMA_TAIL_MIN_K}: no tail, "
                "the EPI=7 epilogue gains more")
    if tiles256 >= sms and eff >= FULL_WAVES:
        return Rule("tensor_core", f"tensor cores: 128x256 tiles use {eff:.0%} of their waves' block slots{tail}",
                    (wg, ("wgmma_bf16", {}), ("mma_bf16", {}), ("tma_bf16", {}), _MMA16_128))
    if tiles128 >= sms:
        return Rule("tensor_core", f"tensor cores: {tiles128} 128x128 tiles >= {sms} SMs, 128x256 tiles would use "
                    f"{eff:.0%} of their waves: wgmma {wg[1]['BM']}x{wg[1]['BN']}{tail}",
                    (wg, ("wgmma_bf16", {}), _MMA16_128, ("tma_bf16", {}), _MMA16_64))
    return Rule("tensor_core", f"tensor cores: {tiles128} 128x128 tiles < {sms} SMs: "
                + (f"wgmma {wg[1]['BM']}x{wg[1]['BN']} tiles, else " if big else "") + "64x64 tiles fill more SMs",
                ((wg,) if big else ()) + (_MMA16_64, ("tma_bf16", {"BN": 64}), ("wgmma_bf16", {}), _MMA16_128))


#: a kernel's own first offered candidate (:meth:`KernelBase.candidates`, sized by its plugin) as a rule's
#: parameters: :func:`_try` asks the plugin for the problem, so the sizing knowledge stays in the plugin
OFFERED = MappingProxyType({})

TF32_K_TILE = 32  # wgmma_tf32's k-tile: a 128-byte stage row of float32 (wgmma_bf16: 64 two-byte elements)
TF32_FFMA_DECODE_M = 32  # tf32 decode on FP32 CUDA cores up to this M (B column-major: gemv_cols)
#: the FP32 CUDA-core kernels that declare tf32 (``tf32_rounding="none"``): the fp32 rules' candidates a tf32 rule borrows
TF32_FFMA = frozenset({"gemv_rows", "streamk", "splitk_warptile", "slicedk", "splitk", "small_tile"})
_MMA32_64 = ("mma_tf32", {"BM": 64, "BN": 64, "WM": 32, "WN": 32})
_MMA32_128 = ("mma_tf32", {"BM": 128, "BN": 128, "WM": 64, "WN": 64})


def _wgmma_tf32_params(shape: Shape, sms: int) -> tuple[dict[str, int], str]:
    """wgmma_tf32's parameters for a shape and why: the tile of :func:`_wgmma_params` (the same
    WgmmaKernel class, whose check accepts every tile of :data:`_WGMMA_TILES` for tf32: 128x256,
    128x128, 128x64 cooperative; 64x256, 64x128, 64x64 ping-pong) without the stream-K tail (its
    thresholds were measured for bf16 only); when even the 64x128 ping-pong tiles leave more than
    half the SMs idle and K holds at least 2 slices of 8 k-tiles of 32, split K instead
    (:func:`_wgmma_split_params` with tf32's k-tile of 32)."""
    split = _wgmma_split_params(shape, sms, k_tile=TF32_K_TILE)
    tiles = _cdiv(shape.M, 64) * _cdiv(shape.N, 128)
    if split["SPLIT_K"] > 1 and 2 * tiles <= sms:
        return split, (f"split K: {tiles} tiles of 64x128 fill at most half of {sms} SMs, so SPLIT_K="
                       f"{split['SPLIT_K']} (ping-pong 64x128, slabs reduced in the workspace)")
    p = _wgmma_params(shape, sms)
    p.pop("TAIL", None)
    return p, f"tile {p['BM']}x{p['BN']} (fewest waves x tile area / efficiency)"


def _tf32_rules(shape: Shape, sms: int, layout: tuple[str, str]) -> list[Rule]:
    """tf32 rules (float32 storage; TF32 allowed, not required: the FP32 CUDA-core kernels serve it
    with no input rounding, issue 41), like :func:`_bf16_rules`:

    - ``decode`` (the fp32/bf16 condition): B row-major: the fp32 decode rule's candidates
      (gemv_rows, streamk 16-row, splitk_warptile: B read as stored; wgmma_tf32 would transpose all
      of B first, 3x its bytes); B column-major: M <= :data:`TF32_FFMA_DECODE_M` gemv_cols (B
      streamed once, K-contiguous float4 loads), larger M the split-K wgmma_tf32 tile first (TF32
      tensor cores: M*N*K FLOPs stop hiding under B's bytes on CUDA cores); then the tensor-core
      rule's candidates.
    - ``tiny`` (M*N*K <= 256^3): launch-bound: B row-major the fp32 tiny rule's kernels (slicedk,
      small_tile); B column-major gemv_cols (any M: row blocks), then mma_tf32 64x64.
    - ``k_heavy`` (fewer 64x64 tiles than SMs, K >= 16*max(M, N)): split-K wgmma_tf32
      (:func:`_wgmma_split_params`, k-tile 32; B row-major transposed first) when min(M, N) >= 64,
      then the FP32 split-K kernels (B row: splitk_warptile, streamk, splitk, slicedk; B col:
      gemv_cols).
    - ``tensor_core``: :func:`_tf32_tensor_core_rule`.
    """
    m, n, k = shape
    out: list[Rule] = []
    b_col = layout[1] == "col"
    tc = _tf32_tensor_core_rule(shape, sms, layout)
    fp32 = {r.name: Rule(r.name, r.text, tuple(c for c in r.candidates if c[0] in TF32_FFMA))
            for r in rules(shape, "fp32", ("row", "row"), sms) if r.name != "any"}  # their kernels that serve tf32
    wg_split = ("wgmma_tf32", _wgmma_split_params(shape, sms, k_tile=TF32_K_TILE))
    if "decode" in fp32:
        if not b_col:
            out.append(Rule("decode", f"decode-like tf32, B row-major: M = {m} rows against a {k}x{n} weight matrix: "
                            "FP32 CUDA cores, B read as stored (the fp32 decode rule: "
                            + fp32["decode"].text.split(": ", 2)[-1] + ")",
                            fp32["decode"].candidates + tc.candidates))
        elif m <= TF32_FFMA_DECODE_M:
            out.append(Rule("decode", f"decode-like tf32, B column-major: M = {m} <= {TF32_FFMA_DECODE_M} rows against "
                            f"a {k}x{n} weight matrix: B streamed once by K-contiguous float4 loads on FP32 CUDA cores "
                            "(gemv_cols, sized by its plugin)", (("gemv_cols", OFFERED), wg_split) + tc.candidates))
        else:
            out.append(Rule("decode", f"decode-like tf32, B column-major: M = {m} > {TF32_FFMA_DECODE_M} rows against "
                            f"a {k}x{n} weight matrix: TF32 tensor cores, split-K 64x128 wgmma tiles "
                            f"(SPLIT_K={wg_split[1]['SPLIT_K']}), then gemv_cols",
                            (wg_split, ("gemv_cols", OFFERED)) + tc.candidates))
    if "tiny" in fp32:
        out.append(Rule("tiny", f"tiny tf32: M*N*K = {m * n * k} <= 256^3: launch-bound; "
                        + ("B column-major: gemv_cols (lanes along K), then mma_tf32 64x64" if b_col else
                           "B row-major: the fp32 tiny rule's kernels on CUDA cores (K sliced inside the block)"),
                        (("gemv_cols", OFFERED), _MMA32_64) if b_col else fp32["tiny"].candidates))
    if "k_heavy" in fp32:
        big = min(m, n) >= 64
        ffma = (("gemv_cols", OFFERED),) if b_col else fp32["k_heavy"].candidates
        out.append(Rule("k_heavy", f"K-heavy tf32: fewer 64x64 output tiles than {sms} SMs and K = {k} >= 16*max(M, N): "
                        + (f"split-K wgmma_tf32 64x128 (SPLIT_K={wg_split[1]['SPLIT_K']}"
                           + ("" if b_col else ", B transposed first") + "), then split K on CUDA cores" if big else
                           "min(M, N) < 64: split K on CUDA cores first, then split-K wgmma_tf32"),
                        ((wg_split,) + ffma if big else ffma + (wg_split,)) + tc.candidates))
    out.append(tc)
    return out


def _tf32_tensor_core_rule(shape: Shape, sms: int, layout: tuple[str, str]) -> Rule:
    """tf32 on tensor cores. B column-major: ``wgmma_tf32`` with the tile of
    :func:`_wgmma_tf32_params` (split K where 64x128 tiles leave half the SMs idle), its defaults,
    then ``mma_tf32`` (mma.sync) with 64x64 tiles when there is less than a wave of 128x128 tiles,
    else 128x128 and its 128x256 default. B row-major: with a wave of 128x128 tiles the same
    (``wgmma_tf32`` transposes B into the workspace first, counted in the time: 89.2% / 97.2% of
    cuBLAS TF32 at 4096^3 / 8192^3 on the H200, docs/results/tc-ladder-h200.md "Relayout");
    without one, ``mma_tf32`` first (B read as stored: transposing all of B would cost about as
    much as the product) with 64x64 tiles, then the wgmma tile."""
    m, n, k = shape
    tiles128 = _cdiv(m, 128) * _cdiv(n, 128)
    wg_params, why = _wgmma_tf32_params(shape, sms)
    wg = ("wgmma_tf32", wg_params)
    mma = (_MMA32_64, _MMA32_128, ("mma_tf32", {})) if tiles128 < sms else (("mma_tf32", {}), _MMA32_128, _MMA32_64)
    mma_why = (f"mma_tf32 64x64 ({tiles128} 128x128 tiles < {sms} SMs)" if tiles128 < sms else "mma_tf32")
    if layout[1] == "col":
        return Rule("tensor_core", f"tensor cores (tf32, B column-major, read as stored): wgmma_tf32 {why}, "
                    f"then {mma_why}", (wg, ("wgmma_tf32", {})) + mma)
    if tiles128 >= sms:
        return Rule("tensor_core", f"tensor cores (tf32, B row-major, transposed first): {tiles128} 128x128 tiles >= "
                    f"{sms} SMs: wgmma_tf32 {why}, then {mma_why}", (wg, ("wgmma_tf32", {})) + mma)
    return Rule("tensor_core", f"tensor cores (tf32, B row-major): {tiles128} 128x128 tiles < {sms} SMs: mma_tf32 "
                f"64x64 first (B read as stored, no transpose), then wgmma_tf32 {why} (B transposed first)",
                mma + (wg, ("wgmma_tf32", {})))


# --- choosing -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    """What auto chose: kernel, full parameters, and why (``source`` "table" or "rule")."""

    kernel: str
    params: Mapping[str, int]
    source: str
    reason: str
    entry: Mapping[str, Any] | None = None
    table: str | None = None
    skipped: tuple[str, ...] = ()
    match: str | None = None  # table choices: "exact" or "nearest"

    def record(self) -> dict:
        """The record's ``dispatch`` field."""
        out = {"requested": AUTO, "chosen": self.kernel, "params": dict(self.params), "source": self.source,
               "table": self.table}
        if self.source == "table":
            out["entry"] = dict(self.entry or {})
            out["match"] = self.match
            out["reason"] = self.reason
        else:
            out["rule"] = self.reason
        out["skipped"] = list(self.skipped)
        return out


def _supports(spec, precision: str, layout: tuple[str, str]) -> str | None:
    """None if ``spec`` declares support for precision and layout, else why not."""
    precisions = tuple(getattr(spec, "precisions", KernelBase.precisions))
    if precision not in precisions:
        return f"supports {', '.join(precisions)}, not {precision}"
    layouts = tuple(tuple(x) for x in getattr(spec, "layouts", KernelBase.layouts))
    if tuple(layout) not in layouts:
        return f"supports layouts {', '.join('/'.join(x) for x in layouts)}, not {'/'.join(layout)}"
    return None


def _try(registry, name: str, params: Mapping[str, int], shape: Shape, precision: str,
         layout: tuple[str, str], facts: DeviceFacts) -> tuple[dict | None, str | None]:
    """Full parameters if kernel ``name`` with ``params`` can run this problem, else (None, why)."""
    spec = registry.kernels.get(name)
    if spec is None:
        return None, f"{name}: not registered"
    if isinstance(spec, LibraryKernelSpec):
        return None, f"{name}: a library kernel (auto picks gemmlab's own kernels)"
    why = _supports(spec, precision, layout)
    if why:
        return None, f"{name}: {why}"
    if params is OFFERED:  # the plugin's own first candidate that its check accepts (:meth:`KernelBase.candidates`)
        return _first_offered(spec, name, shape, precision, layout, facts)
    unknown = sorted(set(params) - set(spec.defaults))
    if unknown:
        return None, f"{name}: has no parameter {unknown[0]}"
    full = {**dict(spec.defaults), **dict(params)}
    try:
        check_problem = getattr(spec, "check_problem", None)
        problem_cls = _problem_class()
        if check_problem is not None and problem_cls is not None:
            check_problem(problem_cls(shape=shape, precision=precision, layout_a=layout[0], layout_b=layout[1]),
                          full, facts)
        else:
            spec.check(shape, full, facts)
    except ParamError as exc:
        return None, f"{name} {_ptext(full)}: {exc}"
    return full, None


def _first_offered(spec, name: str, shape: Shape, precision: str, layout: tuple[str, str],
                   facts: DeviceFacts) -> tuple[dict | None, str | None]:
    """The first parameter dict ``spec.candidates`` offers for the problem that its
    ``check_problem`` accepts (full parameters), else (None, why): the rules' :data:`OFFERED`."""
    problem = Problem(shape=shape, precision=precision, layout_a=layout[0], layout_b=layout[1])
    try:
        offered = list(spec.candidates(problem, facts))
    except ParamError as exc:
        return None, f"{name} (offered): {exc}"
    why = "offers no candidate"
    for params in offered:
        full = {**dict(spec.defaults), **dict(params)}
        if set(full) != set(spec.defaults):
            why = f"offered an unknown parameter {sorted(set(full) - set(spec.defaults))[0]}"
            continue
        try:
            spec.check_problem(problem, full, facts)
        except ParamError as exc:
            why = f"{_ptext(full)}: {exc}"
            continue
        return full, None
    return None, f"{name} (offered): {why}"


def _blocks(spec, shape: Shape, params: Mapping[str, int], precision: str, layout: tuple[str, str],
            facts: DeviceFacts) -> int | None:
    """Blocks in the kernel's launch for this problem (its ``geometry`` under contract v2, else
    ``launch``), or None when it cannot say."""
    try:
        geometry, problem_cls = getattr(spec, "geometry", None), _problem_class()
        if geometry is not None and problem_cls is not None:
            launch = geometry(problem_cls(shape=shape, precision=precision, layout_a=layout[0], layout_b=layout[1]),
                              params, facts)
        else:
            launch = spec.launch(shape, params, facts)
        return int(launch.blocks)
    except Exception:
        return None


def _problem_class():
    """The v2 contract's ``Problem`` class when this gemmlab has it (None before contract v2)."""
    from gemmlab.contract import hookspecs
    return getattr(hookspecs, "Problem", None)


def _ptext(params: Mapping[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "(no parameters)"


def ratio_text(ratio: float, baseline: str | None) -> str:
    """A table entry's ``ratio_to_baseline`` (kernel median time / baseline median time, > 1:
    slower) in words that cannot be read as a speed-up: ``ratio_text(1.369, "cublas")`` is
    ``"time / cublas 1.369 = 73.0% of cublas's speed"``."""
    base = baseline or "baseline"
    speed = f" = {100 / ratio:.1f}% of {base}'s speed" if ratio > 0 else ""
    return f"time / {base} {ratio:.3f}{speed}"


NEAREST_FACTOR = 1.5  # a table entry stands in for a shape whose M, N and K are each within this factor


def _regime(shape: Shape, precision: str, layout: tuple[str, str], sms: int) -> str:
    """The name of the first rule that applies to ``shape`` (decode, tiny, k_heavy, large, ...)."""
    return rules(shape, precision, layout, sms)[0].name


def nearest_entry(table: Table, shape: Shape, precision: str = DEFAULT_PRECISION,
                  layout: tuple[str, str] = DEFAULT_LAYOUT) -> Entry | None:
    """The table entry nearest to ``shape`` (smallest sum of |log2| ratios of M, N, K) among the
    entries of the same precision and layout whose M, N and K are each within ``NEAREST_FACTOR``
    of the shape's and that fall under the same first rule (so a decode shape never borrows a
    prefill tile); None if there is none."""
    limit = math.log2(NEAREST_FACTOR)
    regime = _regime(shape, precision, layout, table.sm_count)
    best, best_d = None, math.inf
    for e in table.entries:
        if e.precision != precision or e.layout != tuple(layout):
            continue
        logs = [abs(math.log2(a / b)) for a, b in zip(e.shape, shape)]
        if max(logs) > limit or sum(logs) >= best_d:
            continue
        if _regime(e.shape, precision, layout, table.sm_count) != regime:
            continue
        best, best_d = e, sum(logs)
    return best


def choose(shape: Shape, registry, table: Table | None = None, precision: str = DEFAULT_PRECISION,
           layout: tuple[str, str] = DEFAULT_LAYOUT, facts: DeviceFacts | None = None) -> Choice:
    """Pick the kernel and parameters for one problem (pure: no GPU, no files).

    Order: the table's exact entry (when its kernel is registered and accepts the problem), the
    nearest entry (:func:`nearest_entry`), then :func:`rules`. ``facts`` is what kernel ``check`` sees (default: the sm_90 class with the
    table's SM count).

    Raises:
        ConfigError: field ``kernel``: no registered kernel supports the problem (every rejection
            named).
    """
    table = table or Table()
    sms = table.sm_count
    if facts is None:
        from gemmlab.gpu.device import offline_facts
        base = offline_facts("90")
        facts = DeviceFacts(name=base.name, arch=base.arch, sm_count=sms, l2_bytes=base.l2_bytes)
    layout = (layout[0], layout[1])
    skipped: list[str] = []
    entry = table.lookup(shape, precision, layout)
    if entry is not None:
        full, why = _try(registry, entry.kernel, entry.params, shape, precision, layout, facts)
        if full is not None:
            return Choice(entry.kernel, full, "table", f"table entry {list(shape)}", entry=entry.as_json(),
                          table=table.path or None, match="exact")
        skipped.append(f"table entry: {why}")
    near = nearest_entry(table, shape, precision, layout)
    if near is not None:
        full, why = _try(registry, near.kernel, near.params, shape, precision, layout, facts)
        if full is not None:
            return Choice(near.kernel, full, "table",
                          f"nearest table entry {list(near.shape)}: each of M, N, K within {NEAREST_FACTOR:g}x, "
                          f"same rule regime ({_regime(shape, precision, layout, sms)})", entry=near.as_json(),
                          table=table.path or None, skipped=tuple(skipped), match="nearest")
        skipped.append(f"nearest table entry {list(near.shape)}: {why}")
    tried: set[str] = set()
    for rule in rules(shape, precision, layout, sms):
        rule_skips: list[tuple[str, str]] = []  # (candidate, why) this rule passed over
        candidates = rule.candidates
        if rule.name == "any":
            candidates = tuple((name, {}) for name in registry.kernels)
        for name, params in candidates:
            full, why = _try(registry, name, params, shape, precision, layout, facts)
            blocks = (_blocks(registry.kernels[name], shape, full, precision, layout, facts)
                      if full is not None and rule.min_blocks else None)
            if blocks is not None and blocks < rule.min_blocks:
                full, why = None, f"{name} {_ptext(full)}: {blocks} blocks < {rule.min_blocks} SMs (a partial wave)"
            if full is not None:
                passed = [w for n, w in rule_skips if n != name]  # the rule's text names its first candidates
                note = f" (not taken: {passed[0]})" if passed and rule.name != "any" else ""
                return Choice(name, full, "rule", f"{rule.text}{note} -> {name} {_ptext(full)}",
                              table=table.path or None, skipped=tuple(skipped))
            line = f"rule {rule.name}: {why}"
            if (rule.name != "any" or name not in tried) and line not in skipped:  # one line per distinct reason
                skipped.append(line)
                rule_skips.append((name, why))
            tried.add(name)
    raise ConfigError("kernel", f"auto: no registered kernel supports {precision} {'/'.join(layout)} "
                      f"{shape.M}x{shape.N}x{shape.K} ({'; '.join(skipped[-6:])})")


def table_choice(problem: Problem, registry, table: Table, facts: DeviceFacts) -> Choice | None:
    """The table's exact entry, else its nearest (:func:`nearest_entry`), for ``problem`` when its
    kernel is registered and accepts the problem (as :func:`choose` takes them), else None."""
    layout = (problem.layout_a, problem.layout_b)
    for entry, match in ((table.lookup(problem.shape, problem.precision, layout), "exact"),
                         (nearest_entry(table, problem.shape, problem.precision, layout), "nearest")):
        if entry is None:
            continue
        full, _ = _try(registry, entry.kernel, entry.params, problem.shape, problem.precision, layout, facts)
        if full is not None:
            return Choice(entry.kernel, full, "table", f"{match} table entry {list(entry.shape)}",
                          entry=entry.as_json(), table=table.path or None, match=match)
    return None


def resolve_config(cfg: Mapping[str, Any], registry, out_dir: str | os.PathLike | None = None,
                   runner=None) -> tuple[dict, dict | None]:
    """Turn ``kernel=auto`` in a composed config into the chosen kernel and parameters.

    Returns ``(config, dispatch)``: for any other kernel the config unchanged (as a plain dict)
    and ``None``; for auto the config with ``kernel`` replaced by ``{"name": chosen, **params}``
    and the record's ``dispatch`` field. Called by the pipeline before validation.

    With ``kernel.rank=model`` or ``kernel.tune=first_use`` the ranking path of
    :mod:`gemmlab.dispatch.tuning` chooses (the table, the per-device cache, first-use tuning of
    the model's top candidates under ``out_dir/tuning/``, the model); ``out_dir`` is the point's
    folder and ``runner`` the pipeline's ``run_point`` (either None: no first-use tuning).

    Raises:
        ConfigError: ``kernel.<key>`` other than :data:`AUTO_KEYS`; ``kernel.table`` bad file; ``shape``;
            ``kernel`` when no kernel supports the problem.
    """
    from gemmlab.stages.config import _plain, check_field, parse_shape
    plain = _plain(cfg)
    kernel = plain.get("kernel") if isinstance(plain, Mapping) else None
    if not isinstance(kernel, Mapping) or kernel.get("name") != AUTO:
        return plain, None
    extra = sorted(set(kernel) - set(AUTO_KEYS))
    if extra:
        raise ConfigError(f"kernel.{extra[0]}", "kernel=auto chooses the parameters itself; it accepts only "
                          "kernel.table=<tuning table file> and the ranking path's kernel.rank, kernel.tune, "
                          "kernel.tune_k, kernel.tune_budget_s, kernel.tune_cache, kernel.model "
                          "(pick a kernel by name to set parameters)")
    table_path = check_field("kernel.table", kernel.get("table"))  # a file name or null, never blank
    table = load_table(table_path)
    shape = parse_shape(plain.get("shape"))
    precision = plain.get("precision", DEFAULT_PRECISION)
    layout_cfg = plain.get("layout") or {}
    layout = ((layout_cfg.get("a", DEFAULT_LAYOUT[0]), layout_cfg.get("b", DEFAULT_LAYOUT[1]))
              if isinstance(layout_cfg, Mapping) else DEFAULT_LAYOUT)
    from gemmlab.dispatch import tuning
    opts = tuning.settings(kernel)
    precision = precision if isinstance(precision, str) else DEFAULT_PRECISION
    resolved = dict(plain)
    if opts["rank"] == "model" or opts["tune"] == "first_use":
        problem = Problem(shape, precision, *layout)
        name, params, record = tuning.choose_ranked(plain, registry, problem, table, opts, out_dir, runner,
                                                    lambda facts: table_choice(problem, registry, table, facts))
        resolved["kernel"] = {"name": name, **params}
        return resolved, record
    choice = choose(shape, registry, table, precision, layout)
    resolved["kernel"] = {"name": choice.kernel, **dict(choice.params)}
    return resolved, choice.record()


# --- building a table from records ----------------------------------------------------------------

def find_records(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Every ``result.json`` under the given files or folders (:func:`gemmlab.stages.record_model.find_records`;
    a record inside another run's folder, e.g. a sanitizer child's, belongs to that run and is
    left out).

    Raises:
        ConfigError: field ``paths``: a path that does not exist or holds no records (a device, a
            fifo), in find_records' words (``<path>: <why>``).
    """
    try:
        return results.find_records(list(paths), children=False)
    except FileNotFoundError as exc:
        raise ConfigError("paths", str(exc)) from None


def _layout_of(rec: Mapping[str, Any]) -> tuple[str, str]:
    lay = rec.get("layout")
    if not isinstance(lay, Mapping):
        cfg = rec.get("config") if isinstance(rec.get("config"), Mapping) else {}
        lay = cfg.get("layout") if isinstance(cfg.get("layout"), Mapping) else {}
    return (lay.get("a", DEFAULT_LAYOUT[0]), lay.get("b", DEFAULT_LAYOUT[1]))


def build_table(paths: Iterable[str | os.PathLike], device: str | None = None,
                records_dir: str | os.PathLike | None = None) -> tuple[Table, dict]:
    """Build a tuning table from the records under ``paths`` (folders, record files, record
    archives or folders inside one: :mod:`gemmlab.stages.archive`).

    Per (precision, layout, shape) the fastest **valid, timed** record of an NVRTC kernel wins
    (library kernels and failed points never enter). "Fastest" is the smallest kernel/baseline
    time ratio when every candidate of that problem was timed against the same baseline in its
    own run (ratios measured in one process are robust to drift between runs), else the smallest
    median time. Records from several GPUs need ``device`` (a name) to pick one.

    ``records_dir``: each entry's ``record`` is written relative to it and the table's meta names
    it (``records_dir``, as given), so a table shipped with its records (e.g. under docs/results)
    points at them wherever the build ran; without it the paths are as found. ``records_dir`` may be
    an archive: each ``record`` is then a member's path inside it (``records_dir/record`` is read as
    a path through the archive, as the shipped table's ``docs/results/shapes-h200.jsonl.xz``).

    Returns:
        ``(table, stats)``: stats counts records read, used and skipped (by reason).

    Raises:
        ConfigError: field ``paths`` (missing path, no usable record), ``device`` (mixed GPUs),
            ``records_dir`` (a record outside it).
    """
    files = find_records(paths)
    stats = {"records": len(files), "used": 0, "skipped": {}}

    def skip(why: str) -> None:
        stats["skipped"][why] = stats["skipped"].get(why, 0) + 1

    groups: dict[tuple, list[dict]] = {}
    devices: dict[str, dict] = {}
    for f in files:
        rec = results.read_record(f)  # the one record model (gemmlab.stages.record_model)
        raw = rec.raw if isinstance(rec.raw, dict) else None
        if raw is None:
            skip("unreadable")
            continue
        if not rec.is_valid or rec.status != "ok":
            skip("not a valid timed record")
            continue
        kern = raw.get("kernel")
        if (not isinstance(kern, Mapping) or rec.kernel is None or rec.shape is None or rec.shape_from != "shape"
                or rec.median_ms is None):
            skip("no kernel, shape or timing")
            continue
        if kern.get("backend") != "nvrtc":
            skip("library kernel")
            continue
        dname = rec.device or "unknown"
        if device is not None and dname != device:
            skip(f"other device ({dname})")
            continue
        dev = raw.get("device") if isinstance(raw.get("device"), Mapping) else {}
        devices.setdefault(dname, {"name": dname, "arch": rec.arch, "sm_count": dev.get("sm_count")})
        key = (rec.precision if rec.precision in PRECISION_NAMES else DEFAULT_PRECISION, _layout_of(raw), rec.shape)
        has_ratio = rec.ratio_to_baseline is not None
        groups.setdefault(key, []).append({
            "kernel": rec.kernel, "params": dict(rec.params), "median_ms": rec.median_ms, "protocol": rec.protocol,
            "ratio_to_baseline": rec.ratio_to_baseline, "baseline": rec.baseline if has_ratio else None,
            "record": _record_path(f, records_dir)})
        stats["used"] += 1
    if len(devices) > 1:
        raise ConfigError("device", f"records from several GPUs ({', '.join(sorted(devices))}); pass --device NAME")
    if not groups:
        raise ConfigError("paths", f"no valid timed record of an NVRTC kernel among {len(files)} result.json file(s)")
    entries = []
    for (precision, layout, shape), cands in sorted(groups.items()):
        same_base = (all(c["ratio_to_baseline"] is not None for c in cands)
                     and len({c["baseline"] for c in cands}) == 1)
        metric = "ratio_to_baseline" if same_base else "median_ms"
        best = min(cands, key=lambda c: (c[metric], c["median_ms"]))
        extra = {"median_ms": best["median_ms"], "ratio_to_baseline": best["ratio_to_baseline"],
                 "baseline": best["baseline"], "ranked_by": metric, "candidates": len(cands),
                 "protocol": best["protocol"], "record": best["record"]}
        entries.append(Entry(precision, layout, Shape(*shape), best["kernel"], best["params"], extra))
    dev = next(iter(devices.values()))
    meta = {"created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "made_by": f"{PROG} build " + " ".join(str(p) for p in paths),
            "rule": "per (precision, layout, shape): the fastest valid timed record of an NVRTC kernel "
                    "(smallest kernel/baseline time ratio when all share a baseline, else smallest median)"}
    if records_dir is not None:
        meta["records_dir"] = str(records_dir)
    return Table(entries=tuple(entries), device=dev, meta=meta), stats


def _record_path(path: str | os.PathLike, records_dir: str | os.PathLike | None) -> str:
    """``path`` as a table entry's ``record``: relative to ``records_dir`` when given (POSIX
    separators), else as found. Raises ConfigError (field ``records_dir``) for a record outside it."""
    if records_dir is None:
        return str(path)
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(records_dir)).as_posix()
    except ValueError:
        raise ConfigError("records_dir", f"{path} is not under {records_dir}") from None
