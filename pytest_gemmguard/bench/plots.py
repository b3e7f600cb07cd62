"""runtime.png and compile.png (--gemm-plots): one row per measured case, ratios on a log scale.

A plot of absolute medians on a linear axis let one noisy case's error bar flatten every other bar (issue 41),
and showed no verdict. Here every case is a point with its 95% interval, coloured by its verdict, on log axes
(a halving and a doubling are the same distance from 1): runtime.png shows the compiled kernel against the
eager reference timed in pairs in the same run and, where there is a baseline, this run against it with the
regression threshold drawn; compile.png the compile time and its ratio to the baseline's.

Two steps, so the picture can be checked without timing anything: `runtime_chart` / `compile_chart` turn
the measurements into a `Chart` (plain data: labels, points, verdicts, thresholds), and `figure` draws a
Chart with matplotlib (imported there: it is optional, the `plots` extra).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..files import write_atomic

# One colour per verdict (colour-blind safe: red/blue/green differ in lightness too); the legend shows the
# four always, so a reader learns the key once, and "no baseline" only where a case has none.
COLOURS = {
    "regression": "#c62828",
    "inconclusive": "#ef8a00",
    "ok": "#3465a4",
    "improved": "#2e8b3a",
    "no baseline": "#8a8a8a",
}
MEANING = {
    "regression": "regression (slower beyond the threshold, significant; or over its runtime budget)",
    "inconclusive": "inconclusive (too noisy to tell; not a regression)",
    "ok": "ok (could have seen the threshold, did not)",
    "improved": "improved (faster beyond the threshold, whole interval below 1)",
    "no baseline": "no baseline (nothing to compare with)",
}
LABEL_WIDTH = 40  # characters per label line: long case names wrap at their separators


@dataclass(frozen=True)
class Point:
    """A value with its 95% interval (None: not known; inf: unbounded, drawn to the axis' edge)."""

    value: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Panel:
    key: str
    xlabel: str
    threshold: bool = False  # draw each row's threshold (1 + t) and its mirror 1 / (1 + t)
    unit: str = "x"  # how values are written beside the points: "x" ratio, "%" change, "s" seconds


@dataclass(frozen=True)
class Row:
    label: str  # may hold line breaks
    verdict: str  # a key of COLOURS
    points: dict[str, Point]  # panel key -> this case's point there
    threshold: float | None = None
    base: dict[str, float] = field(default_factory=dict)  # panel key -> the baseline's own value, drawn grey


@dataclass(frozen=True)
class Chart:
    title: str
    panels: list[Panel]
    rows: list[Row]
    notes: list[str] = field(default_factory=list)  # printed under the legend
    meaning: dict[str, str] = field(default_factory=dict)  # legend text per verdict, where MEANING's does not fit


def _wrap(text: str, width: int = LABEL_WIDTH) -> list[str]:
    """Break `text` into lines of at most `width` characters after '-', '.', '_', ' ' or '/' where it can."""
    lines, line = [], ""
    for piece in re.findall(r"[^-._ /]+[-._ /]*|[-._ /]+", text):
        if line and len(line) + len(piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        while len(piece) > width:  # one piece longer than a line: cut it
            lines.append(piece[:width])
            piece = piece[width:]
        line += piece
    return [*lines, line.rstrip()] if line.strip() else lines


def label(m: Any, extra: str = "") -> str:
    """The test (with its parameters), the case in words, and `extra` (absolute numbers), wrapped."""
    test = (m.test or "").split("::")[-1] or m.backend
    if f"[{m.backend}" not in test and f"-{m.backend}" not in test:
        test = f"{m.backend} {test}"
    case = f"{m.op} {'x'.join(map(str, m.shape))} {m.dtype}"
    if m.layout != "contiguous":
        case += f" {m.layout}"
    if m.epilogue != "none":
        case += f" +{m.epilogue}"
    fn = (m.fn or "case").replace("<locals>.", "").split(".")[-1]
    if fn not in ("case", "<lambda>"):
        case += f" fn={fn}"
    lines = [*_wrap(test), *_wrap(case)] + ([extra] if extra else [])
    return "\n".join(lines)


def _ms(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds * 1e3:.3g} ms"


def _vs_ref(m: Any) -> Point | None:
    """Compiled / eager: the median paired ratio with its interval; older measurements, median over median."""
    if m.ratio is not None:
        return Point(m.ratio, m.ratio_low, m.ratio_high)
    if m.ref_median_s:
        return Point(m.median_s / m.ref_median_s, m.ci_low_s / m.ref_median_s, m.ci_high_s / m.ref_median_s)
    return None


def _runtime_verdict(m: Any, rt: dict | None, vs_base: Point | None) -> str:
    if (rt and rt.get("verdict") == "regression") or any(b.startswith("runtime ") for b in m.broken):
        return "regression"
    if not rt:
        return "no baseline"
    if rt.get("verdict") == "inconclusive":
        return "inconclusive"
    t = rt.get("threshold")
    if vs_base and t is not None and vs_base.value < 1 / (1 + t) and (vs_base.high or math.inf) < 1:
        return "improved"
    return "ok"


def runtime_chart(results: Sequence[Any], baseline: Any = None) -> Chart:
    """The runtime picture of `results` (Measurement objects); `baseline` (a loaded baseline) gives each
    compared case's baseline median for its label."""
    rows = []
    for m in results:
        rt = m.compared.get("runtime")
        points = {}
        ref = _vs_ref(m)
        if ref is not None:
            points["ref"] = ref
        vs_base = None
        if rt and rt.get("ratio"):
            # Each side's noise is the log half-width of its 95% interval: the ratio's is their hypotenuse.
            noise = rt.get("noise") or [math.inf, math.inf]
            half = math.hypot(*(n if n is not None else math.inf for n in noise))
            r = rt["ratio"]
            vs_base = Point(r, r * math.exp(-half), r * math.exp(half)) if math.isfinite(half) else Point(r)
            points["base"] = vs_base
        entry = baseline.entry(m.key, (m.gpu or {}).get("name")) if baseline is not None else None
        extra = _ms(m.median_s) + (f", baseline {_ms(entry['median_s'])}" if entry else "")
        rows.append(Row(label(m, extra), _runtime_verdict(m, rt, vs_base), points, rt.get("threshold") if rt else None))
    panels = [Panel("ref", "compiled / eager reference, timed in pairs in this run")]
    if any("base" in r.points for r in rows):
        panels.append(Panel("base", "this run / baseline (reference-normalised where both have one)", True, "%"))
    title = "gemmguard runtime per case: ratios on a log scale, below 1 = faster; bars: 95% intervals; " + (
        "dashed: regression threshold" if len(panels) > 1 else "no baseline compared in this run"
    )
    return Chart(
        title, panels, rows, [f"labels: test, case, this run's median{' and the baseline' if baseline else ''}"]
    )


def _compile_verdict(m: Any, c: dict | None) -> str:
    if (c and c.get("regression")) or any(b.startswith("compile time ") for b in m.broken):
        return "regression"
    if not c:
        return "no baseline"
    if not c.get("tested"):
        return "inconclusive"  # fewer than 5 compiles a side: no significance test, so no claim either way
    t = c.get("threshold")
    return "improved" if t is not None and c["ratio"] < 1 / (1 + t) else "ok"


def _interval(samples: Sequence[float]) -> Point | None:
    from .stats import summarize

    kept = [float(s) for s in samples if s]
    if not kept:
        return None
    s = summarize(kept)
    return Point(s.median, s.low, s.high) if len(kept) > 1 else Point(s.median)


def compile_chart(results: Sequence[Any], baseline: Any = None) -> Chart:
    """The compile-time picture: seconds (cold median over fresh processes when measured, else this
    session's), the baseline's beside it, and where compared the ratio with the compile threshold."""
    rows = []
    for m in results:
        now, kind = m.compile_for_budget()
        c = m.compared.get("compile")
        points: dict[str, Point] = {}
        seconds = _interval(m.cold_compile_samples) if kind == "cold" else None
        if now:
            points["s"] = seconds or Point(now)
        entry = baseline.entry(m.key, (m.gpu or {}).get("name")) if baseline is not None else None
        base_s = (entry.get("cold_compile_s") or entry.get("compile_s")) if entry else None
        if c and c.get("ratio"):
            points["base"] = Point(c["ratio"])
        extra = f"{kind} compile" if now else "compile reused: not timed"
        rows.append(
            Row(
                label(m, extra),
                _compile_verdict(m, c),
                points,
                c.get("threshold") if c else None,
                {"s": base_s} if base_s else {},
            )
        )
    panels = [Panel("s", "compile time, s (cold: median of fresh processes; grey diamond: baseline)", unit="s")]
    if any("base" in r.points for r in rows):
        panels.append(Panel("base", "this run / baseline", True, "%"))
    notes = ["inconclusive here: fewer than 5 cold compiles a side, not tested (--gemm-compile-samples=5)"]
    title = "gemmguard compile time per case: log scale, below 1 = faster"
    meaning = {
        "regression": "regression (slower beyond the threshold, significant; or over its compile budget)",
        "improved": "improved (faster beyond the threshold; 5 or more compiles a side)",
    }
    return Chart(title, panels, rows, notes if any(r.verdict == "inconclusive" for r in rows) else [], meaning)


def log_ticks(lo: float, hi: float) -> list[float]:
    """Round tick values between `lo` and `hi` on a log axis: the sparsest set that gives at least four
    (matplotlib's own log locator gives one tick, at 1, for a range like 0.9..1.3)."""
    levels = ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.1, 1.2, 1.3, 1.5, 1.7, 2, 2.5, 3, 4, 5, 6, 7, 8, 9))
    ticks: list[float] = []
    for mantissas in levels:
        ticks = [
            float(f"{m * 10.0**d:.6g}")
            for d in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
            for m in mantissas
            if lo <= m * 10.0**d <= hi
        ]
        if len(ticks) >= 4:
            break
    while len(ticks) > 9:  # every other one, keeping 1 where it is one
        ticks = ticks[(ticks.index(1.0) if 1.0 in ticks else 0) % 2 :: 2]
    return ticks


def _text(value: float, unit: str) -> str:
    if unit == "%":
        return f"{(value - 1) * 100:+.1f}%"
    return f"{value:.3g} s" if unit == "s" else f"{value:.3g}×"


def _limits(chart: Chart, panel: Panel) -> tuple[float, float]:
    seen = [1.0] if panel.unit != "s" else []
    for r in chart.rows:
        p = r.points.get(panel.key)
        if p is not None:
            seen += [v for v in (p.value, p.low, p.high) if v is not None and 0 < v < math.inf]
        if panel.key in r.base:
            seen.append(r.base[panel.key])
        if panel.threshold and r.threshold is not None and panel.key in r.points:
            seen += [1 + r.threshold, 1 / (1 + r.threshold)]
    lo, hi = (min(seen), max(seen)) if seen else (0.5, 2.0)
    if hi / lo < 1.5:  # too narrow a range reads as more precise than it is
        mid = math.sqrt(lo * hi)
        lo, hi = mid / 1.25, mid * 1.25
    return lo / 1.2, hi * 1.7  # room on the right for the value written beside each point


def figure(chart: Chart) -> Any:
    """Draw `chart`: one panel per `Panel` side by side, sharing the case axis; a matplotlib Figure (not
    pyplot's: nothing global is touched)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    heights = [0.15 * (r.label.count("\n") + 1) + 0.14 for r in chart.rows]
    centres, top = [], 0.0
    for h in heights:
        centres.append(-(top + h / 2))
        top += h
    longest = max((len(line) for r in chart.rows for line in r.label.split("\n")), default=10)
    fig = Figure(figsize=(0.065 * longest + 4.3 * len(chart.panels) + 0.5, top + 2.3), layout="constrained")
    axes = fig.subplots(1, len(chart.panels), sharey=True, squeeze=False)[0]
    band = False
    for ax, panel in zip(axes, chart.panels, strict=True):
        ax.set_xscale("log")
        lo, hi = _limits(chart, panel)
        for i, (y, h) in enumerate(zip(centres, heights, strict=True)):
            if i % 2 == 0:  # every other row shaded: the eye follows a row from its label to its points
                ax.axhspan(y - h / 2, y + h / 2, color="#f3f3f3", lw=0, zorder=0)
        if panel.unit != "s":
            ax.axvline(1.0, color="#333333", lw=0.9, zorder=1)
        if panel.threshold:
            band = _thresholds(ax, chart, panel, centres, heights) or band
        for verdict, colour in COLOURS.items():
            picked = [(r.points[panel.key], y) for r, y in zip(chart.rows, centres, strict=True)
                      if r.verdict == verdict and panel.key in r.points]  # fmt: skip
            if not picked:
                continue
            xs = [p.value for p, _ in picked]
            below = [p.value - min(max(p.low, lo), p.value) if p.low is not None else 0.0 for p, _ in picked]
            above = [min(p.high, hi) - p.value if p.high is not None else 0.0 for p, _ in picked]
            ax.errorbar(xs, [y for _, y in picked], xerr=[below, above], fmt="o", color=colour, ms=5, capsize=2.5,
                        elinewidth=1.3, label=verdict, zorder=3)  # fmt: skip
            for p, y in picked:
                right = min(p.high, hi) if p.high is not None else p.value
                ax.annotate(_text(p.value, panel.unit), (right, y), xytext=(4, 0), textcoords="offset points",
                            va="center", fontsize=6.5, color=colour, annotation_clip=True)  # fmt: skip
        for r, y in zip(chart.rows, centres, strict=True):
            if panel.key not in r.points:  # an empty row would read as a point lost off the axis
                ax.text(math.sqrt(lo * hi), y, "no baseline" if panel.threshold else "not measured", va="center",
                        ha="center", fontsize=6.5, style="italic", color=COLOURS["no baseline"])  # fmt: skip
        based = [(r.base[panel.key], y) for r, y in zip(chart.rows, centres, strict=True) if panel.key in r.base]
        if based:
            ax.plot([v for v, _ in based], [y for _, y in based], "D", mfc="none", mec="#555555", ms=5,
                    label="baseline", zorder=2)  # fmt: skip
        ax.set_xlim(lo, hi)
        ax.xaxis.set_major_locator(FixedLocator(log_ticks(lo, hi)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _, u=panel.unit: f"{v:g} s" if u == "s" else f"{v:g}×"))
        ax.tick_params(axis="x", labelsize=7.5)
        ax.set_xlabel("\n".join(_wrap(panel.xlabel, 58)), fontsize=8)
        ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
    axes[0].set_yticks(centres, [r.label for r in chart.rows], fontsize=7)
    axes[0].set_ylim(-top, 0)
    axes[0].tick_params(axis="y", length=0)
    shown = [v for v in COLOURS if v != "no baseline" or any(r.verdict == v for r in chart.rows)]
    handles: list[Any] = [
        Line2D([], [], marker="o", ls="", color=COLOURS[v], label=chart.meaning.get(v, MEANING[v])) for v in shown
    ]
    if band:
        handles.append(Line2D([], [], ls="--", color=COLOURS["regression"], label="regression threshold (1 + t)"))
        handles.append(Patch(color="#e6e6e6", label="within the threshold either way"))
    if any(r.base for r in chart.rows):
        handles.append(Line2D([], [], marker="D", ls="", mfc="none", mec="#555555", label="baseline"))
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=7, frameon=False,
               title="; ".join(chart.notes) or None, title_fontsize=7)  # fmt: skip
    fig.suptitle("\n".join(_wrap(chart.title, int(fig.get_figwidth() * 13))), fontsize=9.5)
    return fig


def _thresholds(ax: Any, chart: Chart, panel: Panel, centres: list[float], heights: list[float]) -> bool:
    """The regression threshold 1 + t and its mirror 1 / (1 + t), with the band between: one line across the
    panel when every compared case has the same threshold, else a segment on each row (budgets differ per
    test). The artists carry gid 'threshold' (a test finds them)."""
    own = [(r.threshold, y, h) for r, y, h in zip(chart.rows, centres, heights, strict=True)
           if r.threshold is not None and panel.key in r.points]  # fmt: skip
    if not own:
        return False
    if len({t for t, _, _ in own}) == 1:
        t = own[0][0]
        ax.axvspan(1 / (1 + t), 1 + t, color="#e6e6e6", lw=0, zorder=0.5, gid="threshold")
        ax.axvline(1 + t, color=COLOURS["regression"], ls="--", lw=1, zorder=1, gid="threshold")
        ax.axvline(1 / (1 + t), color=COLOURS["improved"], ls="--", lw=1, zorder=1, gid="threshold")
        return True
    for t, y, h in own:
        ax.vlines(1 + t, y - h / 2, y + h / 2, colors=COLOURS["regression"], linestyles="--", lw=1, gid="threshold")
        ax.vlines(1 / (1 + t), y - h / 2, y + h / 2, colors=COLOURS["improved"], linestyles="--", lw=1, gid="threshold")
    return True


def write(directory: str, results: Sequence[Any], baseline: Any = None) -> list[str]:
    """runtime.png and compile.png under `directory` (matplotlib must be importable); the paths written."""
    written = []
    for name, chart in (
        ("runtime.png", runtime_chart(results, baseline)),
        ("compile.png", compile_chart(results, baseline)),
    ):
        fig = figure(chart)
        # savefig needs the format: the temporary file's name ends in .tmp.
        written.append(
            write_atomic(os.path.join(directory, name), lambda tmp, f=fig: f.savefig(tmp, dpi=120, format="png"))
        )
    return written
