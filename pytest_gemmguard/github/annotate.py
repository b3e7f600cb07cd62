"""The annotations of a run: one error per failing test at its file and line, with the first lines of
gemmguard's report; a benchmark that failed in every round that measured it is an error, one that failed in
some rounds only a warning; a case the base measured and the head did not is an error (coverage lost) or,
where the benchmark itself changed, a warning."""

from __future__ import annotations

from collections.abc import Sequence

from .commands import workflow_command
from .compare import GONE, LOST, BenchRow
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
    failing = row.failed or (row.verdict == "inconclusive" and policy == "fail")
    kind = "error" if failing else "warning"
    head = f"gemmguard: {row.backend} {row.case}: "
    if row.verdict == "inconclusive":
        title = head + "inconclusive (too noisy to tell; not a regression)"
        body = "\n".join([row.test, row.rounds("inconclusive")])
    elif row.verdict in (LOST, GONE):
        title = head + ("coverage lost: " if row.verdict == LOST else "") + "measured on the base, not on the head"
        body = "\n".join([row.test, *row.broken])
    else:
        title = head + ("slower than the base" if row.verdict == "failed" else "slower in some rounds only")
        body = "\n".join([row.test, *row.broken, row.rounds("failed")])
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
        where = by_test.get(row.test)
        if row.verdict in (LOST, GONE) and where is not None and where.outcome in ("failed", "error"):
            continue  # the test's own failure is annotated, with its report
        if row.verdict in ("failed", "unstable", "inconclusive", LOST, GONE):
            out.append(_bench_annotation(row, where, policy))
    return out
