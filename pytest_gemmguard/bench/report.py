"""The terminal table of the measuring half: one row per measured case, then the verdicts per backend, with
inconclusive comparisons in their own column (issue 13: never folded into the passes or the regressions)."""

from __future__ import annotations

from collections import defaultdict


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _change(m) -> str:
    rt = m.compared.get("runtime")
    return "-" if not rt else f"{(rt['ratio'] - 1) * 100:+.1f}%"


def noise(m) -> str:
    """The measurement's noise (about +-relative, of the median paired ratio) and, against the baseline, the
    smallest change the comparison could have detected (else against a baseline as quiet as this run)."""
    rt = m.compared.get("runtime") or {}
    detect = rt.get("detect", m.detect) if rt else m.detect
    if m.noise is None:
        return "-"
    shown = "inf" if detect is None or detect == float("inf") else f"{100 * detect:.0f}%"
    return f"{100 * m.noise:.1f}%/{shown}"


COUNTED = ("ok", "failed", "inconclusive", "no baseline")  # the verdict columns, per backend


def verdict_counts(results: list) -> dict[str, dict[str, int]]:
    """backend -> verdict (COUNTED, and 'measured' for all) -> how many measurements."""
    per: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(("measured", *COUNTED), 0))
    for m in results:
        per[m.backend]["measured"] += 1
        if m.status in COUNTED:
            per[m.backend][m.status] += 1
    return dict(per)


def compile_change(m) -> str:
    """Compile time against the baseline; '(untested)' marks too few samples for the significance test, and
    '(possible)' a slowdown beyond the threshold that therefore did not fail."""
    c = m.compared.get("compile")
    if not c:
        return "-"
    mark = "" if c.get("tested") else (" (possible)" if c.get("possible") else " (untested)")
    return f"{(c['ratio'] - 1) * 100:+.0f}%" + mark


def bench_table(results: list) -> list[str]:
    """Rows: backend, case, compile (session / cold median / warm median), median runtime with its CI, TFLOP/s,
    % of peak, ratio to the in-run reference, runtime and compile change against baseline, verdict. Then
    per-backend totals. Where a GPU timed any row, a gpu column says which (index in nvidia-smi -L, model):
    under --gemm-gpus the rows come from several."""
    from ..gpus import short

    on_gpu = any(getattr(m, "gpu", None) for m in results)
    head = (
        f"{'backend':8s} {'case':34s} {'compile s':>9s} {'cold s':>7s} {'warm s':>7s} {'median':>11s} "
        f"{'±CI':>6s} {'TFLOP/s':>8s} {'%peak':>6s} {'vs ref':>7s} {'noise/detects':>13s} {'vs base':>8s} "
        f"{'compile vs base':>15s} " + (f"{'verdict':12s} gpu" if on_gpu else "verdict")
    )
    lines = [head, "-" * len(head)]
    for m in results:
        med = f"{m.median_s * 1e3:.4g} ms"
        ci = f"{100 * (m.ci_high_s - m.ci_low_s) / (2 * m.median_s):.1f}%" if m.median_s else "-"
        case = m.case_id if len(m.case_id) <= 34 else m.case_id[:33] + "…"
        lines.append(
            f"{m.backend:8s} {case:34s} {m.compile_s:9.2f} {_num(m.cold_compile_s, '7.2f'):>7s} "
            f"{_num(m.warm_compile_s, '7.2f'):>7s} {med:>11s} {ci:>6s} {m.tflops:8.3g} "
            f"{_num(m.pct_peak, '6.1f'):>6s} {_num(m.ref_ratio, '7.3f'):>7s} {noise(m):>13s} {_change(m):>8s} "
            f"{compile_change(m):>15s} " + (f"{m.status:12s} {short(m.gpu)}" if on_gpu else m.status)
        )
    compile_s: dict[str, float] = defaultdict(float)
    for m in results:
        compile_s[m.backend] += m.cold_compile_s if m.cold_compile_s is not None else m.compile_s
    lines += ["", f"{'backend':8s} {'measured':>8s} {'ok':>4s} {'failed':>6s} {'inconclusive':>12s} "
              f"{'no baseline':>11s} {'compile s':>9s}"]  # fmt: skip
    for name, c in verdict_counts(results).items():
        lines.append(
            f"{name:8s} {c['measured']:8d} {c['ok']:4d} {c['failed']:6d} {c['inconclusive']:12d} "
            f"{c['no baseline']:11d} {compile_s[name]:9.1f}"
        )
    return [*lines, "", *LEGEND]


# What each column's number means, and which way is better: printed under the table (and the Markdown report).
LEGEND = (
    "±CI: half-width of the 95% confidence interval of this run's median; noise/detects: the spread of the "
    "paired ratio the verdict assumes, and the smallest slowdown it can tell from that noise",
    "%peak: of the plain library GEMM's best in this run for the dtype (above 100: the compiled kernel beat it, "
    "a fused epilogue saving a pass say); vs ref: compiled time / eager time, timed side by side (below 1: faster "
    "than eager); vs base and compile vs base: change against the baseline (+: slower)",
)
