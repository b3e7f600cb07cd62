"""The Markdown summary of a run (the job summary and the comment part): the verdict, tests per backend, each
failure with its report, the benchmarks against the base."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from .compare import GONE, LOST, BenchRow
from .junit import TestResult

_COLUMNS = ("passed", "failed", "unsupported", "unavailable", "skipped", "xfailed")


def passed(results: Sequence[TestResult], bench: dict | None, run_error: str = "") -> bool:
    """The verdict: no test failed, no benchmark failed in every round, none the base measured went unmeasured
    on the head (coverage lost), none was inconclusive in every round (unless the run said
    --gemm-inconclusive=warn), and every run happened as asked."""
    if run_error or any(r.outcome in ("failed", "error") for r in results):
        return False
    if not bench:
        return True
    failing = {"failed", LOST} | ({"inconclusive"} if bench.get("inconclusive", "fail") == "fail" else set())
    return not (bench.get("error") or any(r.get("verdict") in failing for r in bench.get("rows", [])))


def _outcome_table(results: Iterable[TestResult]) -> list[str]:
    counts: Counter = Counter()
    backends: list[str] = []
    for r in results:
        backend = r.backend or "(other tests)"
        if backend not in backends:
            backends.append(backend)
        counts[(backend, "failed" if r.outcome == "error" else r.outcome)] += 1
    shown = [c for c in _COLUMNS if c in ("passed", "failed") or any(counts[(b, c)] for b in backends)]
    lines = ["| backend | " + " | ".join(shown) + " |", "|---|" + "---:|" * len(shown)]
    backends.sort(key=lambda b: (b == "(other tests)", b))
    for b in backends:
        cells = [f"**{counts[(b, c)]}**" if c == "failed" and counts[(b, c)] else str(counts[(b, c)]) for c in shown]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return lines


def _fmt(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def _label(row: BenchRow) -> str:
    if row.verdict == "failed":
        return "**regression**" if any("regression" in b for b in row.broken) else "**over budget**"
    if row.verdict == "unstable":
        return "failed in some rounds only (not failed)"
    if row.verdict == "inconclusive":
        return "**inconclusive** (too noisy to tell; not a regression)"
    if row.verdict == LOST:
        return "**coverage lost** (measured on the base, not on the head)"
    if row.verdict == GONE:
        return "not on the head (the benchmark changed; not failed)"
    return row.verdict


_BENCH_COLUMNS = ("ok", "failed", "unstable", "inconclusive", "no baseline", LOST, GONE)
_LOUD = ("failed", "inconclusive", LOST)


def _bench_counts(rows: Sequence[BenchRow]) -> list[str]:
    """Benchmarks per backend and verdict: inconclusive has its own column, apart from passes and failures;
    the columns of cases missing on the head only when there are some."""
    counts: Counter = Counter((r.backend, r.verdict) for r in rows)
    shown = [c for c in _BENCH_COLUMNS if c not in (LOST, GONE) or any(r.verdict == c for r in rows)]
    lines = ["| backend | " + " | ".join(shown) + " |", "|---|" + "---:|" * len(shown)]
    for b in sorted({r.backend for r in rows}):
        cells = [f"**{counts[(b, c)]}**" if c in _LOUD and counts[(b, c)] else str(counts[(b, c)])
                 for c in shown]  # fmt: skip
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return lines


def _per_round(changes: Sequence[float | None]) -> str:
    return ", ".join("–" if c is None else f"{c * 100:+.1f}%" for c in changes) or "–"


def _bench_table(verdict: dict) -> list[str]:
    rows = [BenchRow(**r) for r in verdict.get("rows", [])]
    lines = [f"### Benchmarks: {verdict.get('against', 'no baseline')}", ""]
    if rows:
        lines += [*_bench_counts(rows), ""]
        lines += [
            "| backend | case | base ms | head ms | vs base, ratio to eager, per round | time vs base, per round "
            "| verdict |",
            "|---|---|---:|---:|---|---|---|",
        ]
        for r in rows:
            change, times = _per_round(r.changes), _per_round(r.times)
            base, head = _fmt(r.base_ms, ".4g"), _fmt(r.head_ms, ".4g")
            lines.append(f"| {r.backend} | `{r.case}` | {base} | {head} | {change} | {times} | {_label(r)} |")
        told = [r for r in rows if r.failed or r.verdict == GONE]
        if told:
            lines += ["", *[f"- {r.backend} `{r.case}`: {b}" for r in told for b in r.broken]]
        unclear = [r for r in rows if r.verdict == "inconclusive"]
        if unclear:
            warn = verdict.get("inconclusive", "fail") == "warn"
            how = "a warning (--gemm-inconclusive=warn)" if warn else "fails the gate"
            lines += [
                "",
                f"Inconclusive ({how}): the noise of the measurements hid the threshold; rerun on a quieter machine "
                "or with more time. The run's report has each one's noise and smallest detectable change.",
            ]
    else:
        lines.append("Nothing was measured.")
    notes = verdict.get("notes") or []
    if notes:
        lines += ["", *[f"> {n}" for n in notes]]
    return lines


def _failures(failures: Sequence[TestResult]) -> list[str]:
    lines = ["", "### Failures", ""]
    for r in failures:
        where = f"{r.file}:{r.line}" if r.file else r.nodeid
        lines += [f"- `{r.nodeid}` at `{where}`", "", "  ```text", f"  {r.title}"]
        lines += [f"  {x}" for x in r.report]
        if r.replay:
            lines.append(f"  reproduce: {r.replay}")
        lines += ["  ```", ""]
    return lines


def summary_markdown(
    title: str, results: Sequence[TestResult], bench: dict | None, notes: Sequence[str] = (), run_error: str = ""
) -> str:
    """The summary of one gate (or report) run, ending in a newline."""
    failures = [r for r in results if r.outcome in ("failed", "error")]
    ok = passed(results, bench, run_error)
    lines = [f"## gemmguard: {title}: {'passed' if ok else '**failed**'}", ""]
    if run_error:
        lines += [f"**{run_error}**", ""]
    lines += _outcome_table(results) if results else ["No test results."]
    if failures:
        lines += _failures(failures)
    if bench is not None:
        lines += ["", *_bench_table(bench)]
        if bench.get("error"):
            lines += ["", f"**{bench['error']}**"]
    if notes:
        lines += ["", *[f"> {n}" for n in notes]]
    return "\n".join(lines).rstrip() + "\n"
