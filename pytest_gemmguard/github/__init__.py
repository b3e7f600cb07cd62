"""GitHub Actions glue: annotations, the step summary, the sticky pull-request comment, the GPU check and the
base-versus-head benchmark gate.

Torch-free and standard-library only: it reads pytest's JUnit XML and gemmguard's JSON reports and runs pytest
in subprocesses, so it runs from a checkout before anything is installed (`python3 -m pytest_gemmguard.github
check-gpu` in the repository root) and on a runner that only posts the comment.

    python -m pytest_gemmguard.github check-gpu
    python -m pytest_gemmguard.github gate --title T --backends aten,cpp --tests "tests examples" \
        [--bench-tests PATHS --baseline base-commit|none|FILE --base-ref SHA --rounds 2] [--out DIR]
    python -m pytest_gemmguard.github report --junit A.xml [B.xml ...] [--bench DIR/bench/verdict.json]
    python -m pytest_gemmguard.github comment --parts DIR --repo OWNER/NAME --pr N
    python -m pytest_gemmguard.github backends --required aten,triton,cutedsl --optional cutlass

`gate` is what the reusable action (.github/actions/gemmguard) runs: the correctness tests with JUnit XML, then
the benchmarks (against the base commit measured in a git worktree on the same runner, base and head
alternately; or against a stored baseline file), then one `::error file=,line=,title=::` annotation per failure,
the Markdown summary (appended to $GITHUB_STEP_SUMMARY), the comment part and the step outputs. Its exit
status is the verdict.

Modules, one job each: `commands` (workflow commands and their escaping, the runner's summary and output
files), `junit` (test results out of JUnit XML), `compare` (benchmark rounds judged), `rounds` (running the
benchmarks: the base in a worktree, base and head alternately), `annotate` (the failures' annotations),
`summary` (Markdown), `comment` (the sticky comment through GitHub's REST API), `gpu` (the GPU check, usable
backends), `gate` (the action's one command) and `cli`.
"""

from .annotate import annotations
from .cli import main
from .commands import escape_data, escape_property, workflow_command
from .comment import MARKER, comment_body, upsert_comment
from .compare import BenchRow, judge_rounds
from .junit import TestResult, read_junit
from .rounds import bench_gate
from .summary import passed, summary_markdown

__all__ = ["MARKER", "BenchRow", "TestResult", "annotations", "bench_gate", "comment_body", "escape_data",
           "escape_property", "judge_rounds", "main", "passed", "read_junit", "summary_markdown",
           "upsert_comment", "workflow_command"]  # fmt: skip
