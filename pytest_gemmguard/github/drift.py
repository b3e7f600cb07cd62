"""Drift in the trend history (`trend`, trend.py): per case, the median of the first `--window` entries against
the median of the last `--window` ones. A case drifted when they differ by more than `--threshold` and the U
test calls the two windows different (alpha 5%); trend.py reads and writes the history, trend_plot.py draws it.
Torch-free, standard library only."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..bench.stats import mann_whitney_greater, median

ALPHA = 0.05  # of the U test between the two windows; the threshold does most of the work
METRICS = {"ratio": "compiled / eager reference", "time": "median time, ms"}


@dataclass(frozen=True)
class Drift:
    key: str
    label: str
    first: float  # median of the first window
    last: float  # median of the last window
    p_value: float
    n: int  # entries holding the case

    @property
    def change(self) -> float:
        return self.last / self.first - 1

    @property
    def slower(self) -> bool:
        return self.last > self.first


def _value(case: dict, metric: str) -> float | None:
    value = case.get("ratio") if metric == "ratio" else case.get("median_ms")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def drift(history: dict, window: int, threshold: float, metric: str = "ratio") -> tuple[list[Drift], int]:
    """The cases of the latest entry that drifted (see the module doc), and how many cases had enough entries
    (2 * window) to be judged."""
    entries = history["entries"]
    if not entries:
        return [], 0
    found, judged = [], 0
    for key, case in entries[-1]["cases"].items():
        values = [v for e in entries if key in e["cases"] for v in [_value(e["cases"][key], metric)] if v is not None]
        if len(values) < 2 * window:
            continue
        judged += 1
        first, last = values[:window], values[-window:]
        a, b = median(first), median(last)
        # The U test in the direction of the change: a window that merely differs by a lucky draw is not drift.
        p = mann_whitney_greater(last, first) if b > a else mann_whitney_greater(first, last)
        if abs(math.log(b / a)) > math.log1p(threshold) and p < ALPHA:
            found.append(Drift(key, case.get("label", key), a, b, p, len(values)))
    return found, judged


def describe(d: Drift, window: int, metric: str) -> str:
    what = "ratio to the reference" if metric == "ratio" else "median time (ms)"
    way = "slower" if d.slower else "faster"
    return (
        f"gemmguard trend: {d.label}: {what} {d.first:.4g} -> {d.last:.4g} ({d.change * 100:+.1f}%, {way}), median "
        f"of the first {window} against the last {window} of its {d.n} entries (U test p={d.p_value:.2g})"
    )


def summary_markdown(drifts: list[Drift], window: int, metric: str, n_entries: int, judged: int) -> str:
    lines = ["## gemmguard trend", ""]
    if not drifts:
        lines.append(f"No case drifted: {judged} case(s) judged over {n_entries} entries (first {window} against "
                     f"last {window}).")  # fmt: skip
        return "\n".join(lines) + "\n"
    lines += [f"| case | first {window} | last {window} | change | p |", "|---|---:|---:|---:|---:|"]
    lines += [f"| `{d.label}` | {d.first:.4g} | {d.last:.4g} | {d.change * 100:+.1f}% | {d.p_value:.2g} |"
              for d in drifts]  # fmt: skip
    lines += ["", f"_{METRICS[metric]}; +: slower; medians over {n_entries} entries of main._"]
    return "\n".join(lines) + "\n"
