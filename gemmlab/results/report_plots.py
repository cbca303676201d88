"""The four plots of ``gemmlab-report`` (matplotlib on Agg canvases, never pyplot; no display).

This module owns the figures: ``gflops_vs_size`` (GFLOP/s against (M·N·K)^(1/3), one series per
kernel and parameters), ``ratio_to_baseline`` (kernel GFLOP/s / baseline GFLOP/s against size),
``roofline`` (arithmetic intensity against GFLOP/s with each device's roofline min(FP32 peak,
AI × DRAM bandwidth)) and ``timing_distribution`` (each point's raw samples as % deviation from
its median). :func:`draw` writes them; a plot without data is skipped with the reason.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Sequence

from gemmlab.stages.record_model import Record as Row

PLOTS = ("gflops_vs_size", "ratio_to_baseline", "roofline", "timing_distribution")
TITLES = {"gflops_vs_size": "GFLOP/s vs problem size", "ratio_to_baseline": "ratio to the baseline",
          "roofline": "roofline", "timing_distribution": "timing distribution"}


def draw(rows: Sequence[Row], out: Path) -> tuple[dict[str, Path], dict[str, str], dict[str, str]]:
    """Draw every plot of :data:`PLOTS` for ``rows`` as ``out/<name>.png``.

    Returns:
        ``(written, notes, text)``: the files written by name; for each plot skipped, why; for each
        plot written, a one-line description of what it shows.
    """
    written: dict[str, Path] = {}
    plot_notes: dict[str, str] = {}
    plot_text: dict[str, str] = {}
    try:
        import matplotlib  # noqa: F401  (figures are drawn on Agg canvases directly, never pyplot)
    except ImportError as exc:
        for p in PLOTS:
            plot_notes[p] = f"skipped: matplotlib is not installed ({exc})"
        return written, plot_notes, plot_text
    styles = _series_styles(rows)
    for p in PLOTS:
        try:
            result = _PLOTTERS[p](rows, styles, out / f"{p}.png")
        except Exception as exc:  # one bad plot must not lose the table
            plot_notes[p] = f"skipped: plotting failed ({type(exc).__name__}: {exc})"
            continue
        if isinstance(result, str):
            plot_notes[p] = result
        else:
            written[p] = out / f"{p}.png"
            plot_text[p] = "; ".join(result)
    return written, plot_notes, plot_text


def _series_key(row: Row, varying: set[str]) -> str:
    label = row.kernel or "?"
    if row.params:
        label += f" [{row.params_text}]"
    extra = [getattr(row, a) for a in ("precision", "protocol", "l2", "device") if a in varying and getattr(row, a)]
    if extra:
        label += " (" + ", ".join(str(e) for e in extra) + ")"
    return label


def _varying(rows: Sequence[Row]) -> set[str]:
    return {a for a in ("precision", "protocol", "l2", "device") if len({getattr(r, a) for r in rows}) > 1}


#: at most this many series are named in a legend: those with the highest peak GFLOP/s; the others
#: are drawn thin and grey under one entry (a tuning sweep is one series per parameter set: 300 of
#: them made the GFLOP/s plot 66 inches tall for a legend of colours repeated 15 times)
LEGEND_MAX = 40
OTHERS = MappingProxyType({"color": "0.72", "marker": ".", "named": False})


def _series_styles(rows: Sequence[Row]) -> dict[str, Any]:
    """A fixed colour and marker per series label, shared by all plots; beyond :data:`LEGEND_MAX`
    series, the ones with the lower peak GFLOP/s share the style :data:`OTHERS` (``named`` false)."""
    from matplotlib import colormaps
    timed = [r for r in rows if r.category == "timed"]
    varying = _varying(timed)
    peak: dict[str, float] = {}
    for r in timed:
        key = _series_key(r, varying)
        peak[key] = max(peak.get(key, 0.0), r.gflops or 0.0)
    named = set(sorted(peak, key=lambda label: (-peak[label], label))[:LEGEND_MAX])
    labels = sorted(named)
    cmap = colormaps["tab10" if len(labels) <= 10 else "tab20"]
    markers = "osD^vP*Xh<>p"
    styles = {lab: {"color": cmap(i % cmap.N), "marker": markers[i % len(markers)], "named": True}
              for i, lab in enumerate(labels)}
    styles.update({lab: dict(OTHERS) for lab in peak if lab not in named})
    return {"varying": varying, "styles": styles}


def _draw_series(ax, groups: dict[str, list[Row]], st, draw) -> None:
    """Call ``draw(label, rows, style kwargs)`` for each series (named ones with their label and
    style, the others thin, grey and unlabelled, below them) and add one legend entry for the
    others (:func:`_entries` counts the entries this makes)."""
    others = 0
    for label, g in sorted(groups.items()):
        s = st["styles"].get(label, OTHERS)
        if s.get("named", True):
            draw(label, g, {"label": label, "color": s["color"], "marker": s["marker"]})
        else:
            others += 1
            draw(label, g, {"label": "_nolegend_", "color": s["color"], "marker": s["marker"], "zorder": 1})
    if others:
        ax.plot([], [], color=OTHERS["color"], marker=OTHERS["marker"],
                label=f"{others} more series, grey (the {LEGEND_MAX} with the highest peak GFLOP/s are named)")


def _entries(groups: dict[str, list[Row]], st) -> int:
    """The legend entries :func:`_draw_series` will make for ``groups``."""
    named = sum(st["styles"].get(label, OTHERS).get("named", True) for label in groups)
    return named + (1 if named < len(groups) else 0)


def _new_figure(width: float = 8.0, height: float = 5.5):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


#: the settings of ``Figure.savefig`` that ``FigureCanvasAgg.print_png`` does not read (the figure's
#: own dpi, colours and extent are what savefig takes while these are matplotlib's defaults)
SAVEFIG_RC = ("savefig.dpi", "savefig.facecolor", "savefig.edgecolor", "savefig.transparent", "savefig.bbox")


def _save(fig, path) -> None:
    """Write ``fig`` as the PNG ``fig.savefig(path)`` writes, byte for byte, in one draw instead of
    two: savefig draws a figure with a layout engine once without rendering (its constrained
    layout) and again to render it (layout off); ``print_png`` lays it out and renders it in one
    draw (about 15% fewer Python calls a plot; the report's plots are most of its time). Where a
    setting of :data:`SAVEFIG_RC` is not matplotlib's default (a user's matplotlibrc), savefig
    itself, which reads them."""
    import matplotlib as mpl
    if any(mpl.rcParams[key] != mpl.rcParamsDefault[key] for key in SAVEFIG_RC):
        fig.savefig(path)
    else:
        fig.canvas.print_png(path)


def _group(rows: Iterable[Row], varying: set[str]) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(_series_key(r, varying), []).append(r)
    for g in groups.values():
        g.sort(key=lambda r: r.size)
    return groups


#: legend entries kept inside the axes; with more, the legend goes below them and the figure grows
#: (:func:`_legend_height`): inside, 32 entries collapsed the axes (matplotlib's constrained layout
#: gave up and warned; the 114 records of docs/results/shapes-h200.jsonl.xz have 31 series)
LEGEND_INSIDE_MAX = 10


def _legend_height(n: int, height: float = 5.5) -> float:
    """Figure height (inches) for ``n`` legend entries: ``height`` while they fit inside the axes,
    else room below the axes for the outside legend (as the roofline plot sizes its figure)."""
    return height if n <= LEGEND_INSIDE_MAX else 6.0 + 0.2 * n


def _legend(ax, n: int, outside: bool = False) -> None:
    """The legend inside the axes (best place), or below them when it would hide points."""
    size = "small" if n <= 8 else "x-small"
    if outside:  # two columns only where the labels fit side by side (kernel parameters make them long)
        longest = max((len(label) for label in ax.get_legend_handles_labels()[1]), default=0)
        ax.figure.legend(fontsize=size, loc="outside lower center", ncols=1 if n <= 6 or longest > 48 else 2)
    else:
        ax.legend(fontsize=size, loc="best", ncols=1 if n <= 10 else 2)


def _plot_gflops(rows, st, path):
    pts = [r for r in rows if r.category == "timed" and r.gflops and r.gflops > 0 and r.size]
    if not pts:
        return "skipped: no valid timed point"
    groups = _group(pts, st["varying"])
    entries = _entries(groups, st)
    fig, ax = _new_figure(height=_legend_height(entries))
    _draw_series(ax, groups, st, lambda label, g, kw: ax.plot([r.size for r in g], [r.gflops for r in g], **kw))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("problem size (M·N·K)^(1/3)  (= N for N³)")
    ax.set_ylabel("GFLOP/s  (2·M·N·K / median time)")
    ax.set_title(f"GFLOP/s vs size: {len(pts)} valid timed points")
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax, entries, outside=entries > LEGEND_INSIDE_MAX)
    _save(fig, path)
    return [f"{len(pts)} points, {len(groups)} series"]


def _plot_ratio(rows, st, path):
    pts = [r for r in rows if r.category == "timed" and r.ratio_to_baseline_gflops and r.size]
    if not pts:
        return "skipped: no point has a baseline ratio recorded (run with `baseline=cublas`)"
    groups = _group(pts, st["varying"])
    entries = _entries(groups, st) + 1
    fig, ax = _new_figure(height=_legend_height(entries))

    def draw(label, g, kw):
        if kw["label"] != "_nolegend_":
            kw["label"] = f"{label} vs {', '.join(sorted({r.baseline or '?' for r in g}))}"
        ax.plot([r.size for r in g], [r.ratio_to_baseline_gflops for r in g], **kw)
    _draw_series(ax, groups, st, draw)
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="parity with the baseline")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("problem size (M·N·K)^(1/3)")
    ax.set_ylabel("kernel GFLOP/s / baseline GFLOP/s  (> 1: faster)")
    ax.set_title("throughput relative to the baseline, same run and protocol")
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax, entries, outside=entries > LEGEND_INSIDE_MAX)
    _save(fig, path)
    return [f"{len(pts)} points vs {', '.join(sorted({r.baseline or '?' for r in pts}))}"]


def _plot_roofline(rows, st, path):
    import numpy as np
    pts = [r for r in rows if r.category == "timed" and r.gflops and r.gflops > 0
           and r.arithmetic_intensity and r.arithmetic_intensity > 0]
    if not pts:
        return "skipped: no valid timed point with an arithmetic intensity"
    groups = _group(pts, st["varying"])
    entries = _entries(groups, st)
    fig, ax = _new_figure(height=6.0 + 0.2 * entries)
    notes = []
    devices: dict[str, list[Row]] = {}
    for r in pts:
        devices.setdefault(r.device or "unknown device", []).append(r)
    ai_lo = min(r.arithmetic_intensity for r in pts) / 4
    ai_hi = max(r.arithmetic_intensity for r in pts) * 4
    roofs = []
    for dev, g in devices.items():
        peaks = [r.fp32_peak_gflops for r in g if r.fp32_peak_gflops]
        bws = [r.dram_peak_bytes_per_s for r in g if r.dram_peak_bytes_per_s]
        peak, bw = (max(peaks) if peaks else None), (max(bws) if bws else None)
        if peaks and max(peaks) > 1.001 * min(peaks):
            notes.append(f"{dev}: FP32 peak varies {min(peaks):.0f}..{max(peaks):.0f} GFLOP/s with the SM clock "
                         f"read during each run; the line uses the highest")
        if peak is None and bw is None:
            notes.append(f"{dev}: no FP32 peak or DRAM bandwidth recorded; no roofline drawn")
            continue
        if peak and bw:
            ridge = peak * 1e9 / bw
            ai_lo, ai_hi = min(ai_lo, ridge / 4), max(ai_hi, ridge * 4)
        roofs.append((dev, peak, bw))
    ai = np.geomspace(ai_lo, ai_hi, 400)
    for i, (dev, peak, bw) in enumerate(roofs):
        y = np.minimum(peak if peak else np.inf, ai * bw / 1e9 if bw else np.inf)
        parts = ([f"FP32 peak {peak:,.0f} GFLOP/s"] if peak else []) + ([f"DRAM {bw / 1e12:.2f} TB/s"] if bw else [])
        ax.plot(ai, y, color="black" if i == 0 else f"C{i}", lw=1.5, ls="-" if i == 0 else "--",
                label=f"roofline {dev}: " + ", ".join(parts))
        if not peak:
            notes.append(f"{dev}: no FP32 peak recorded; bandwidth line only")
        if not bw:
            notes.append(f"{dev}: no DRAM bandwidth recorded; FP32 peak line only")
    tensor = sorted({r.precision for r in pts if r.precision and r.precision != "fp32"})
    if tensor:  # the record's roofline.note says the same of each point
        notes.append(f"{', '.join(tensor)} points run on tensor cores: the FP32 peak line (CUDA cores) is not "
                     "their ceiling")
    _draw_series(ax, groups, st, lambda label, g, kw: ax.scatter(
        [r.arithmetic_intensity for r in g], [r.gflops for r in g], **{"zorder": 3, **kw}))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of minimum DRAM traffic: A, B read once, C written once)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofline: min(FP32 peak, intensity × DRAM bandwidth)")
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax, entries + len(roofs), outside=True)
    _save(fig, path)
    return [f"{len(pts)} points"] + notes


def _plot_distribution(rows, st, path):
    import numpy as np
    pts = [r for r in rows if r.category == "timed" and r.samples_ms]
    if not pts:
        return "skipped: no valid timed point with raw samples"
    pts.sort(key=lambda r: (r.kernel or "", r.size or 0, r.index))
    data, labels, colors = [], [], []
    for r in pts:
        med = float(np.median(r.samples_ms))
        data.append([100 * (s / med - 1) for s in r.samples_ms] if med > 0 else [0.0] * len(r.samples_ms))
        labels.append(f"#{r.index} {r.kernel} {r.shape_text}")
        colors.append(st["styles"].get(_series_key(r, st["varying"]), {}).get("color", "grey"))
    fig, ax = _new_figure(width=min(40.0, max(8.0, 0.45 * len(pts) + 2)), height=6.5)
    box = ax.boxplot(data, patch_artist=True, widths=0.6, showfliers=False, whis=(0, 100))
    ax.set_xticks(range(1, len(labels) + 1), labels, rotation=60, ha="right", fontsize="small")
    throttled = 0
    for patch, color, r in zip(box["boxes"], colors, pts):
        patch.set_facecolor(color)
        patch.set_alpha(0.45)
        if r.throttled_samples:
            throttled += 1
            patch.set_edgecolor("red")
            patch.set_linewidth(2)
    # every sample, over its box; the first one ringed (one scatter for all dots, one for all rings)
    xs = [np.full(len(d), float(i)) + np.linspace(-0.15, 0.15, len(d)) for i, d in enumerate(data, 1)]
    ax.scatter(np.concatenate(xs), np.concatenate(data), s=7, color="black", alpha=0.6, zorder=3)
    ax.scatter([x[0] for x in xs], [d[0] for d in data], s=30, facecolors="none", edgecolors="black", zorder=3)
    ax.axhline(0.0, color="black", lw=0.6, ls=":")
    lin = 0.1
    ax.set_yscale("symlog", linthresh=lin, linscale=1.0)
    lo, hi = min(min(d) for d in data), max(max(d) for d in data)
    ax.set_ylim(min(-lin, lo * 1.6), max(lin, hi * 1.6))  # room above the largest outlier
    ax.set_ylabel(f"sample vs the point's median sample (%)\nsymlog: linear within ±{lin}%")
    protocols = sorted({r.protocol or "?" for r in pts})
    ax.set_title("raw timing samples per point as % deviation from that point's median "
                 f"(protocol: {', '.join(protocols)})\nbox: quartiles, whiskers: min..max, dots: samples "
                 "(ringed: the first)" + ("; red box: throttled samples" if throttled else ""), fontsize="medium")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    _save(fig, path)
    return [f"{len(pts)} points; x labels are the table's #; y: % deviation from each point's median, symlog"]


_PLOTTERS = {"gflops_vs_size": _plot_gflops, "ratio_to_baseline": _plot_ratio, "roofline": _plot_roofline,
             "timing_distribution": _plot_distribution}
