"""The annotations of a run: one error per failing test at its file and line, with the first lines of
gemmguard's report; a benchmark that failed in every round is an error, one that failed in some rounds only
a warning."""

from __future__ import annotations

from collections.abc import Sequence

from .commands import workflow_command
from .compare import BenchRow
from .junit import TestResult

MAX_ANNOTATIONS = 10  # GitHub shows at most 10 error annotations per step; the rest go to the summary only


def _test_annotations(results: Sequence[TestResult]) -> list[str]:
    out = []
    failures = [r for r in results if r.outcome in ("failed", "error")]
    for r in failures[:MAX_ANNOTATIONS]:
        body = "\n".join([r.nodeid, *r.report, *([f"reproduce: {r.replay}"] if r.replay else [])])
        out.append(workflow_command("error", body, file=r.file or None, line=r.line or None, title=r.title))
    if len(failures) > MAX_ANNOTATIONS:
        left = len(failures) - MAX_ANNOTATIONS
        out.append(workflow_command("warning", f"gemmguard: {left} more failures, listed in the job summary"))
    return out


def _bench_annotation(row: BenchRow, where: TestResult | None, policy: str = "fail") -> str:
    failing = row.verdict == "failed" or (row.verdict == "inconclusive" and policy == "fail")
    kind = "error" if failing else "warning"
    if row.verdict == "inconclusive":
        title = f"gemmguard: {row.backend} {row.case}: inconclusive (too noisy to tell; not a regression)"
        body = "\n".join([row.test, f"inconclusive in {len(row.statuses)} of {len(row.statuses)} rounds"])
    else:
        rounds = f"{row.statuses.count('failed')} of {len(row.statuses)} rounds"
        title = f"gemmguard: {row.backend} {row.case}: " + (
            "slower than the base" if row.verdict == "failed" else "slower in some rounds only"
        )
        body = "\n".join([row.test, *row.broken, f"failed in {rounds}"])
    return workflow_command(
        kind, body, file=(where.file if where else None) or None, line=(where.line if where else None) or None,
        title=title,
    )  # fmt: skip


def annotations(
    results: Sequence[TestResult], bench: dict | None = None, bench_results: Sequence[TestResult] = ()
) -> list[str]:
    """The workflow commands for the failures (at most MAX_ANNOTATIONS errors for the tests: GitHub shows no
    more per step). `bench_results` (the benchmark run's JUnit XML) place a benchmark's annotation."""
    out = _test_annotations(results)
    by_test = {r.nodeid: r for r in bench_results}
    policy = (bench or {}).get("inconclusive", "fail")
    for row in (BenchRow(**x) for x in (bench or {}).get("rows", [])):
        if row.verdict in ("failed", "unstable", "inconclusive"):
            out.append(_bench_annotation(row, by_test.get(row.test), policy))
    return out
