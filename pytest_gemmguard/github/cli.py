"""The command line, `python -m pytest_gemmguard.github {install,gate,report,comment,trend,check-gpu,backends}`. A
misconfiguration or a run that could not be judged is one `::error` line and exit status 2."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import GemmguardError, GemmUsageError
from ..files import write_text_atomic
from .annotate import annotations
from .commands import append_summary, workflow_command
from .comment import Section, comment_body, read_parts, section_key, upsert_comment, upsert_section
from .compare import read_report
from .gate import gate
from .gpu import check_gpu, usable_backends
from .install import CPU_INDEX
from .install import run as install
from .junit import read_junit
from .summary import summary_markdown
from .trend import add_arguments as trend_arguments
from .trend import run as trend


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gemmguard.github",
        description="gemmguard on GitHub Actions: the gate, annotations, job summary and pull-request comment",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check-gpu", help="fail with one clear line where there is no working NVIDIA GPU")
    p = sub.add_parser("backends", help="print the required backends plus the optional ones usable here")
    p.add_argument("--required", default="aten")
    p.add_argument("--optional", default="")
    p = sub.add_parser("install", help="torch where none is, the project, and gemmguard at the action's version")
    p.add_argument("--source", required=True, help="the gemmguard source tree the action runs from")
    p.add_argument("--torch", default="2.13.0", help="the CPU build's version where torch is missing (latest: newest)")
    p.add_argument("--torch-index", default=os.environ.get("GEMMGUARD_TORCH_INDEX") or CPU_INDEX)
    p.add_argument("--project", default="auto", help="auto (pip install -e . where there is a pyproject.toml or "
                   "setup.py), a shell command, or empty for nothing")  # fmt: skip
    p.add_argument("--extras", default="plots", help="gemmguard's extras")
    runner_temp = os.environ.get("RUNNER_TEMP") or tempfile.gettempdir()
    p.add_argument("--venv", default=os.path.join(runner_temp, "gemmguard-venv"),
                   help="install into this venv, made if missing (empty: into this python)")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="print the steps, install nothing")
    p = sub.add_parser("gate", help="tests, benchmarks, annotations, summary, comment part, outputs")
    p.add_argument("--title", default="gemmguard")
    p.add_argument("--backends", default="")
    p.add_argument("--tests", default="", help="test paths (one string, split like a shell)")
    p.add_argument("--bench-tests", default="", help="benchmark test paths (run with --gemm-bench-only)")
    p.add_argument("--baseline", default="base-commit", help="base-commit, none, or the path of a baseline file")
    p.add_argument("--base-ref", default="", help="the base commit (base-commit mode)")
    p.add_argument("--rounds", type=int, default=3, help="base/head rounds, interleaved (base-commit mode)")
    p.add_argument("--confirm-rounds", type=int, default=2, help="more base/head rounds for the tests of cases that "
                   "failed every round, which must fail these too (base-commit mode; 0: none)")  # fmt: skip
    p.add_argument("--known-failures", default="", help="known-failures TOML, passed as --gemm-known")
    p.add_argument("--verdicts", default="none", help="judge the tests' failures on the change: none, record "
                   "(write this run's verdicts), base-commit (the base's tests run here first) or a stored "
                   "verdict record")  # fmt: skip
    p.add_argument("--require-baseline", action="store_true", help="a missing baseline is an error (passes "
                   "--gemm-require-baseline to the benchmark runs)")  # fmt: skip
    p.add_argument("--pytest-args", default="", help="extra arguments of the test run")
    p.add_argument("--bench-args", default="", help="extra arguments of every benchmark run")
    p.add_argument("--out", default="gemmguard-report")
    p.add_argument("--root", default=".")
    p = sub.add_parser("report", help="annotations and summary from JUnit XML (and a gate's benchmark verdict)")
    p.add_argument("--junit", nargs="*", default=[])
    p.add_argument("--bench", default="")
    p.add_argument("--title", default="gemmguard")
    p.add_argument("--root", default=".")
    p.add_argument("--summary", default=os.environ.get("GITHUB_STEP_SUMMARY", ""))
    p.add_argument("--comment", default="", help="also write the comment part here")
    p = sub.add_parser("comment", help="create or edit the pull request's one gemmguard comment")
    p.add_argument("--parts", nargs="+", required=True, help="Markdown files or directories of them")
    p.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY", ""))
    p.add_argument("--pr", type=int, required=True)
    p.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL", "https://api.github.com"))
    p.add_argument("--jobs", default="", help="'name=result ...' of the jobs whose parts these are")
    p.add_argument("--section", default="", help="write only this job's section (the action's comment step)")
    p.add_argument("--run", type=int, default=int(os.environ.get("GITHUB_RUN_NUMBER") or 0),
                   help="the run's number: a section is never replaced by an older run's")  # fmt: skip
    p.add_argument("--sha", default="", help="the commit the section reports on")
    p.add_argument("--mode", choices=("alert", "always"), default="always",
                   help="alert: create the comment only when this job failed (one that exists is updated)")  # fmt: skip
    p.add_argument("--verdict", choices=("pass", "fail"), default="fail")
    p.add_argument("--head-repo", default="", help="the pull request's head repository (a fork cannot comment)")
    trend_arguments(sub.add_parser("trend", help="keep the benchmark results of main in a history; report drift"))
    return parser


def _split(names: str) -> list[str]:
    return [b.strip() for b in names.split(",") if b.strip()]


def _report(opts: argparse.Namespace) -> int:
    results = [r for path in opts.junit for r in read_junit(path, opts.root)]
    bench = read_report(opts.bench) if opts.bench else None
    for line in annotations(results, bench):
        print(line)
    text = summary_markdown(opts.title, results, bench)
    append_summary(opts.summary, text)
    if opts.comment:
        write_text_atomic(opts.comment, text)
    return 0


def _comment(opts: argparse.Namespace) -> int:
    if opts.head_repo and opts.repo and opts.head_repo != opts.repo:
        print(workflow_command("notice", "gemmguard: a fork's pull request gets a read-only token: no comment; the "
              "results are in the job summary and the uploaded report (a workflow_run workflow can post them: "
              "docs/gate.md)", title="gemmguard"))  # fmt: skip
        return 0
    token = os.environ.get("GITHUB_TOKEN", "")
    if not token and opts.section:  # the action's step: a courtesy, never the job's verdict
        print(workflow_command("warning", "gemmguard: no token (github-token is empty): no pull request comment",
                               title="gemmguard: no comment"))  # fmt: skip
        return 0
    if not token:
        raise GemmUsageError("gemmguard: GITHUB_TOKEN is not set: cannot post the pull request comment")
    if not opts.repo:
        raise GemmUsageError("gemmguard: --repo (or GITHUB_REPOSITORY) is needed to post the comment")
    parts = read_parts(opts.parts)
    if not parts and not opts.jobs:
        raise GemmUsageError(f"gemmguard: no comment parts in {' '.join(opts.parts)}: nothing to post")
    if not opts.section:
        how, number = upsert_comment(opts.api_url, opts.repo, opts.pr, comment_body(parts, opts.jobs), token)
        print(f"gemmguard: {how} pull request comment {number}")
        return 0
    section = Section(section_key(opts.section), opts.run, opts.sha, "\n\n".join(parts))
    try:
        done = upsert_section(opts.api_url, opts.repo, opts.pr, section, token, alert_only=opts.mode == "alert",
                              alarming=opts.verdict == "fail")  # fmt: skip
    except GemmguardError as exc:  # the comment is a courtesy: the job's verdict is the gate's, not the API's
        hint = " (the job needs `permissions: pull-requests: write`)" if "HTTP 403" in str(exc) else ""
        print(workflow_command("warning", f"{exc}{hint}", title="gemmguard: no comment"))
        return 0
    print(f"gemmguard: {done}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    try:
        if opts.command == "check-gpu":
            return check_gpu()
        if opts.command == "backends":
            print(",".join(usable_backends(_split(opts.required), _split(opts.optional))))
            return 0
        if opts.command == "install":
            return install(source=Path(opts.source), torch=opts.torch, torch_index=opts.torch_index,
                           project=opts.project, extras=opts.extras, venv=Path(opts.venv) if opts.venv else None,
                           dry_run=opts.dry_run)  # fmt: skip
        if opts.command == "gate":
            if opts.rounds < 1:
                raise GemmUsageError(f"gemmguard: --rounds={opts.rounds}: must be >= 1")
            if opts.confirm_rounds < 0:
                raise GemmUsageError(f"gemmguard: --confirm-rounds={opts.confirm_rounds}: must be >= 0")
            return gate(opts)
        if opts.command == "report":
            return _report(opts)
        if opts.command == "trend":
            return trend(opts)
        return _comment(opts)
    except GemmguardError as exc:
        print(workflow_command("error", str(exc), title="gemmguard"))
        return 2
