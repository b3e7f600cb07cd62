"""The terminal table of the measuring half: one row per measured case, and one line per backend."""

from __future__ import annotations

from collections import defaultdict


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _change(m) -> str:
    rt = m.compared.get("runtime")
    return "-" if not rt else f"{(rt['ratio'] - 1) * 100:+.1f}%"


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
    per-backend totals."""
    head = (
        f"{'backend':8s} {'case':34s} {'compile s':>9s} {'cold s':>7s} {'warm s':>7s} {'median':>11s} "
        f"{'±CI':>6s} {'TFLOP/s':>8s} {'%peak':>6s} {'vs ref':>7s} {'vs base':>8s} {'compile vs base':>15s} verdict"
    )
    lines = [head, "-" * len(head)]
    for m in results:
        med = f"{m.median_s * 1e3:.4g} ms"
        ci = f"{100 * (m.ci_high_s - m.ci_low_s) / (2 * m.median_s):.1f}%" if m.median_s else "-"
        case = m.case_id if len(m.case_id) <= 34 else m.case_id[:33] + "…"
        lines.append(
            f"{m.backend:8s} {case:34s} {m.compile_s:9.2f} {_num(m.cold_compile_s, '7.2f'):>7s} "
            f"{_num(m.warm_compile_s, '7.2f'):>7s} {med:>11s} {ci:>6s} {m.tflops:8.3g} "
            f"{_num(m.pct_peak, '6.1f'):>6s} {_num(m.ref_ratio, '7.3f'):>7s} {_change(m):>8s} "
            f"{compile_change(m):>15s} {m.status}"
        )
    per = defaultdict(lambda: {"n": 0, "failed": 0, "compile": 0.0})
    for m in results:
        p = per[m.backend]
        p["n"] += 1
        p["failed"] += m.status == "failed"
        p["compile"] += m.cold_compile_s if m.cold_compile_s is not None else m.compile_s
    for name, p in per.items():
        lines.append(f"{name}: {p['n']} measured, {p['failed']} over budget, compile {p['compile']:.1f} s in all")
    return lines
