"""The trend picture (`trend --plot`): each case's ratio to the reference (or median time) per commit on a
log axis, with its 95% interval as a band; the two windows drift is judged on shaded; drifted cases drawn
thick and named in the legend with their change. matplotlib's Figure, never pyplot (nothing global)."""

from __future__ import annotations

import math
import textwrap
from typing import Any

from ..bench.plots import COLOURS, log_ticks
from .drift import METRICS, Drift


def _series(history: dict, key: str, metric: str) -> tuple[list[float], list[float], list[float]]:
    """Values and interval per entry (NaN where the entry lacks the case: the line breaks there)."""
    values, lows, highs = [], [], []
    nan = float("nan")
    for e in history["entries"]:
        case = e["cases"].get(key) or {}
        if metric == "ratio":
            v, lo, hi = case.get("ratio"), case.get("ratio_low"), case.get("ratio_high")
        else:
            v, (lo, hi) = case.get("median_ms"), (case.get("ci_ms") or (None, None))
        values.append(float(v) if v else nan)
        lows.append(float(lo) if lo else (float(v) if v else nan))
        highs.append(float(hi) if hi else (float(v) if v else nan))
    return values, lows, highs


def figure(history: dict, drifts: list[Drift], window: int, metric: str = "ratio", threshold: float = 0.1) -> Any:
    """The trend of every case in `history` (gemmguard-trend); the cases in `drifts` drawn thick."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    entries = history["entries"]
    keys = list(dict.fromkeys(k for e in entries for k in e["cases"]))
    labels = {k: e["cases"][k].get("label", k) for e in entries for k in e["cases"]}
    drifted = {d.key: d for d in drifts}
    fig = Figure(figsize=(max(8.0, 0.32 * len(entries) + 3.0), 5.6 + 0.12 * len(keys)), layout="constrained")
    ax = fig.subplots()
    ax.set_yscale("log")
    n = len(entries)
    xs = list(range(n))
    if n >= 2 * window:  # the windows drift is judged on
        for start, name in ((0, "first"), (n - window, "last")):
            ax.axvspan(start - 0.5, start + window - 0.5, color="#eeeeee", lw=0, zorder=0)
            ax.text(start + window / 2 - 0.5, 1.0, f"{name} {window}", transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize=7, color="#666666")  # fmt: skip
    if metric == "ratio":
        ax.axhline(1.0, color="#333333", lw=0.9, zorder=1)
    # Red and green mean drift here (slower, faster): the other cases take colours that say nothing.
    palette = [COLOURS["ok"], COLOURS["inconclusive"], "#7b3294", "#008080", "#b8860b", "#4d4d4d", "#c51b7d"]
    seen: list[float] = []
    for i, key in enumerate(keys):
        values, lows, highs = _series(history, key, metric)
        seen += [v for v in lows + highs if v == v and v > 0]
        d = drifted.get(key)
        colour = (COLOURS["regression"] if d.slower else COLOURS["improved"]) if d else palette[i % len(palette)]
        name = "\n".join(textwrap.wrap(labels[key], 48)) + (f"\ndrift {d.change * 100:+.1f}%" if d else "")
        ax.fill_between(xs, lows, highs, color=colour, alpha=0.13, lw=0, zorder=2)
        if d:  # the two medians drift is judged on, across their windows
            for start, level in ((0, d.first), (n - window, d.last)):
                ax.hlines(level, start - 0.4, start + window - 0.6, colors=colour, linestyles="--", lw=1, zorder=3)
        ax.plot(xs, values, marker="o", ms=3.5 if d else 2.5, lw=2.4 if d else 1.0, color=colour, label=name,
                zorder=4 if d else 3, gid=f"{'drift' if d else 'case'}:{key}")  # fmt: skip
    if seen:
        lo, hi = min(seen + ([1.0] if metric == "ratio" else [])), max(seen + ([1.0] if metric == "ratio" else []))
        if hi / lo < 1.5:
            mid = math.sqrt(lo * hi)
            lo, hi = mid / 1.25, mid * 1.25
        ax.set_ylim(lo / 1.1, hi * 1.1)
        ax.yaxis.set_major_locator(FixedLocator(log_ticks(lo / 1.1, hi * 1.1)))
        ax.yaxis.set_minor_locator(NullLocator())
        unit = "×" if metric == "ratio" else " ms"
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{unit}"))
    step = max(1, math.ceil(n / 30))  # at most about 30 commit labels
    ax.set_xticks(xs[::step], [f"{e['commit'][:7]}\n{str(e.get('date', ''))[:10]}" for e in entries][::step],
                  rotation=90, fontsize=6.5)  # fmt: skip
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_xlabel("commit on main (oldest left)", fontsize=8)
    ax.set_ylabel(METRICS[metric] + (" (below 1: faster than eager)" if metric == "ratio" else ""), fontsize=8)
    ax.grid(axis="y", color="#dddddd", lw=0.6, zorder=0)
    fig.legend(loc="outside lower center", ncols=2 if len(keys) > 1 else 1, fontsize=6.5, frameon=False)
    title = (
        f"gemmguard trend: {METRICS[metric]} per case over the commits on main (log scale; lower = faster); "
        f"bands: 95% intervals; thick: drifted beyond ±{threshold * 100:g}% between the shaded windows"
    )
    fig.suptitle("\n".join(textwrap.wrap(title, int(fig.get_figwidth() * 14))), fontsize=8.5)
    return fig
