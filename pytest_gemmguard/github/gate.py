"""`gate`: what the reusable action runs. The correctness tests (JUnit XML), then the benchmarks judged over
base/head rounds, then the annotations, the summary (appended to $GITHUB_STEP_SUMMARY), the comment part and
the step outputs. Its exit status is the verdict: 0 pass, 1 fail."""

from __future__ import annotations

import argparse
import os
import shlex

from ..files import write_text_atomic
from .annotate import annotations
from .commands import append_summary, set_outputs, workflow_command
from .junit import TestResult, read_junit
from .rounds import bench_gate, run_pytest
from .summary import passed, summary_markdown


def _test_run(opts: argparse.Namespace, root: str, out: str, junit: str) -> tuple[list[TestResult], str]:
    """The correctness run: its results and, when it did not happen as asked, the one line saying so."""
    tests = shlex.split(opts.tests or "")
    args = [*tests, "-p", "no:cacheprovider", f"--junitxml={junit}", f"--gemm-repro-dir={os.path.join(out, 'repro')}"]
    if opts.backends.strip():
        args.append(f"--gemm-backends={opts.backends.strip()}")
    if opts.known_failures:
        args.append(f"--gemm-known={opts.known_failures}")
    if opts.bench_tests.strip():
        args.append("--gemm-no-bench")  # measured afterwards, against the baseline
    if os.path.exists(junit):
        os.unlink(junit)
    rc, said = run_pytest([*args, *shlex.split(opts.pytest_args or "")], root, label="tests")
    results = read_junit(junit, root) if os.path.exists(junit) else []
    if rc == 5:
        return results, f"gemmguard: pytest collected no tests in {opts.tests}"
    if rc not in (0, 1):
        return results, f"gemmguard: the test run ended with exit status {rc}: " + (said or "see its log above")
    if not os.path.exists(junit):
        return results, "gemmguard: the test run wrote no JUnit XML"
    if rc == 1 and not any(r.outcome in ("failed", "error") for r in results):
        # gemmguard fails a run in which GEMM tests were selected but no backend ran anything.
        return results, "gemmguard: the test run failed without a failing test: no backend ran anything (see its log)"
    return results, ""


def gate(opts: argparse.Namespace) -> int:
    root = os.path.abspath(opts.root)
    out = os.path.abspath(opts.out)
    os.makedirs(out, exist_ok=True)
    results: list[TestResult] = []
    failed_run = ""
    junit = os.path.join(out, "junit-tests.xml")
    if shlex.split(opts.tests or ""):
        results, failed_run = _test_run(opts, root, out, junit)
    bench = None
    bench_results: list[TestResult] = []
    bench_tests = shlex.split(opts.bench_tests or "")
    if bench_tests:
        bench = bench_gate(
            root, bench_tests, opts.backends.strip(), opts.baseline, out, opts.base_ref, opts.rounds,
            shlex.split(opts.bench_args or ""), require_baseline=opts.require_baseline,
        )  # fmt: skip
        head_junit = os.path.join(out, "bench", "junit-head.xml")
        if os.path.exists(head_junit):
            bench_results = read_junit(head_junit, root)
        # A benchmark test that failed without a measurement (its oracle check failed, or it raised) is a
        # plain failure; one with a measurement is judged over the rounds, by its row.
        measured = {r["test"] for r in bench["rows"]}
        results += [r for r in bench_results if r.outcome in ("failed", "error") and r.nodeid not in measured]
    if failed_run:
        print(workflow_command("error", failed_run, title="gemmguard: run failed"))
    for line in annotations(results, bench, bench_results):
        print(line)
    text = summary_markdown(opts.title, results, bench, run_error=failed_run)
    write_text_atomic(os.path.join(out, "summary.md"), text)
    write_text_atomic(os.path.join(out, "comment.md"), text)
    append_summary(os.environ.get("GITHUB_STEP_SUMMARY"), text)
    ok = passed(results, bench, failed_run)
    set_outputs(
        {
            "verdict": "pass" if ok else "fail",
            "report-dir": out,
            "summary": os.path.join(out, "summary.md"),
            "junit": junit if results else "",
            "bench": os.path.join(out, "bench", "verdict.json") if bench is not None else "",
        }
    )
    print(f"gemmguard: verdict {'pass' if ok else 'fail'} ({opts.title}); reports in {out}")
    return 0 if ok else 1
