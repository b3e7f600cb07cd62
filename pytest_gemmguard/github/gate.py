"""`gate`: what the reusable action runs. The correctness tests (JUnit XML), then the benchmarks judged over
base/head rounds, then the annotations, the summary (appended to $GITHUB_STEP_SUMMARY), the comment part and
the step outputs. Its exit status is the verdict: 0 pass, 1 fail."""

from __future__ import annotations

import argparse
import os
import shlex

from ..errors import GemmUsageError
from ..files import write_text_atomic
from .annotate import annotations
from .commands import append_summary, set_outputs, workflow_command
from .compare import GONE, LOST
from .junit import TestResult, read_junit
from .rounds import base_tree, bench_gate, no_base, remove_tree, run_pytest, tree_env
from .summary import passed, summary_markdown


def _test_args(opts: argparse.Namespace, junit: str, repro: str) -> list[str]:
    tests = shlex.split(opts.tests or "")
    args = [*tests, "-p", "no:cacheprovider", f"--junitxml={junit}", f"--gemm-repro-dir={repro}"]
    if opts.backends.strip():
        args.append(f"--gemm-backends={opts.backends.strip()}")
    if opts.known_failures:
        args.append(f"--gemm-known={opts.known_failures}")
    if opts.bench_tests.strip():
        args.append("--gemm-no-bench")  # measured afterwards, against the baseline
    return [*args, *shlex.split(opts.pytest_args or "")]


def _base_verdicts(opts: argparse.Namespace, root: str, out: str) -> tuple[list[str], str, str]:
    """What the head's test run adds to judge its failures on the change (known/verdicts.py), the line saying
    against what, and the base's record ("" where there is none): `none`, `record` (the head's verdicts written,
    for a later run to compare against: a push to main), `base-commit` (the base's tests run here first, in a
    worktree, recording theirs) or a stored record (main's, made in main's environment: an upgrade's base)."""
    mode = (opts.verdicts or "none").strip()
    if mode == "none":
        return [], "", ""
    own = [f"--gemm-verdicts={os.path.join(out, 'verdicts.json')}"]
    if mode == "record":
        return own, "this run's verdicts recorded in verdicts.json", ""
    if mode != "base-commit":
        stored = os.path.join(root, mode)
        if not os.path.isfile(stored):
            raise GemmUsageError(f"gemmguard: --verdicts={mode}: no such verdict record; use none, record, "
                                 "base-commit or the path of a record (--gemm-verdicts)")  # fmt: skip
        return [*own, f"--gemm-base-verdicts={stored}"], f"failures judged against {mode}", stored
    record = os.path.join(out, "base-verdicts.json")
    if os.path.exists(record):
        os.unlink(record)
    missing = no_base(opts.base_ref)
    if missing:
        return own, f"{missing}: every failure is judged as new", ""
    tree, sha = base_tree(root, opts.base_ref)
    try:
        base_out = os.path.join(out, "base")
        args = _test_args(opts, os.path.join(base_out, "junit-tests.xml"), os.path.join(base_out, "repro"))
        rc, said = run_pytest([*args, f"--gemm-verdicts={record}"], tree, tree_env(tree), label="tests, base")
    finally:
        remove_tree(root, tree)
    if not os.path.exists(record):
        why = said or f"exit status {rc}"
        return own, f"the base {sha[:12]} wrote no verdict record ({why}): every failure is judged as new", ""
    against = f"failures judged against the base {sha[:12]}, run here first"
    return [*own, f"--gemm-base-verdicts={record}"], against, record


def _test_run(opts: argparse.Namespace, root: str, out: str, junit: str) -> tuple[list[TestResult], list[str], str]:
    """The correctness run: its results, the lines saying what its failures were judged against and what changed,
    and, when it did not happen as asked, the one line saying so."""
    extra, against, base_record = _base_verdicts(opts, root, out)
    head_record = os.path.join(out, "verdicts.json")
    for stale in (junit, head_record):  # a reused report folder's: never read as this run's
        if os.path.exists(stale):
            os.unlink(stale)
    rc, said = run_pytest([*_test_args(opts, junit, os.path.join(out, "repro")), *extra], root, label="tests")
    results = read_junit(junit, root) if os.path.exists(junit) else []
    changes = _changes(head_record, against, base_record)
    if rc == 5:
        return results, changes, f"gemmguard: pytest collected no tests in {opts.tests}"
    if rc not in (0, 1):
        why = f"gemmguard: the test run ended with exit status {rc}: " + (said or "see its log above")
        return results, changes, why
    if not os.path.exists(junit):
        return results, changes, "gemmguard: the test run wrote no JUnit XML"
    if rc == 1 and not any(r.outcome in ("failed", "error") for r in results):
        # gemmguard fails a run in which GEMM tests were selected but no backend ran anything.
        why = "gemmguard: the test run failed without a failing test: no backend ran anything (see its log)"
        return results, changes, why
    return results, changes, ""


def _changes(head: str, against: str, base: str) -> list[str]:
    """The lines on the change, for the job's log and its summary: what the failures were judged against, then
    what moved between the base's record and this run's (an upgrade's package versions first)."""
    from ..known import verdicts

    lines = [f"Verdicts: {against}."] if against else []
    if base and os.path.exists(base) and os.path.exists(head):
        lines += verdicts.report(verdicts.load(base), verdicts.load(head))[1]
    for line in lines:
        print(line)
    return lines


def gate(opts: argparse.Namespace) -> int:
    root = os.path.abspath(opts.root)
    out = os.path.abspath(opts.out)
    os.makedirs(out, exist_ok=True)
    results: list[TestResult] = []
    failed_run = ""
    junit = os.path.join(out, "junit-tests.xml")
    changes: list[str] = []
    if shlex.split(opts.tests or ""):
        results, changes, failed_run = _test_run(opts, root, out, junit)
    bench = None
    bench_results: list[TestResult] = []
    bench_tests = shlex.split(opts.bench_tests or "")
    if bench_tests:
        bench = bench_gate(
            root, bench_tests, opts.backends.strip(), opts.baseline, out, opts.base_ref, opts.rounds,
            shlex.split(opts.bench_args or ""), require_baseline=opts.require_baseline, confirm=opts.confirm_rounds,
        )  # fmt: skip
        head_junit = os.path.join(out, "bench", "junit-head.xml")
        if os.path.exists(head_junit):
            bench_results = read_junit(head_junit, root)
        # A benchmark test that failed without a measurement (its oracle check failed, or it raised) is a
        # plain failure; one with a measurement is judged over the rounds, by its row.
        measured = {r["test"] for r in bench["rows"] if r["verdict"] not in (LOST, GONE)}
        results += [r for r in bench_results if r.outcome in ("failed", "error") and r.nodeid not in measured]
    if failed_run:
        print(workflow_command("error", failed_run, title="gemmguard: run failed"))
    for line in annotations(results, bench, bench_results):
        print(line)
    text = summary_markdown(opts.title, results, bench, run_error=failed_run)
    if changes:  # the counts and each failure on a line of its own (indented: Markdown keeps them as they are)
        text = text.rstrip("\n") + "\n\n" + "\n".join([changes[0], *(f"    {x}" for x in changes[1:])]) + "\n"
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
