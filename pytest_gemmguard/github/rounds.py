"""Running the benchmarks: the head against the pull request's base commit measured here (the base checked
out in a git worktree, base and head measured alternately, `rounds` times each), against a stored baseline
file, or against budgets only. Each run is pytest in a subprocess; the rounds are judged by `compare`.

A case that failed every round is measured again, base and head alternately, in `confirm` more rounds of its
own test before it may fail the gate. The rounds' drift allowance holds a case's false alarms to 0.5% when the
runs of a job are independent of one another; a burst of load on a shared runner is not, and it can slow every
head run of a job and none of the base's: on an unchanged pull request in CI (2-core runner) one case measured
+12%, +24%, +30% against bases within 1.4% of one another, eager as slow. Such a burst has to last through the
confirmation rounds too, which a real slowdown always does."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from ..errors import GemmguardError, GemmUsageError
from ..files import write_text_atomic
from .compare import inconclusive_policy, judge_rounds, read_report
from .junit import read_junit

USAGE = (2, 3, 4)  # interrupted, internal error, usage error: the run itself did not happen as asked


def run_pytest(args: Sequence[str], cwd: str, env: dict[str, str] | None = None, label: str = "") -> tuple[int, str]:
    """pytest in a subprocess, its output in a collapsed group of the log; returns its exit status and the
    last `ERROR: ` line it printed on stderr (pytest's one line for a usage error), without the prefix."""
    command = [sys.executable, "-m", "pytest", *args]
    print(f"::group::{label or 'pytest'}: {shlex.join(command)}", flush=True)
    try:
        proc = subprocess.run(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True, errors="replace")
        sys.stderr.write(proc.stderr)
        sys.stderr.flush()
    finally:
        print("::endgroup::", flush=True)
    said = [x.removeprefix("ERROR: ").strip() for x in proc.stderr.splitlines() if x.startswith("ERROR: ")]
    return proc.returncode, said[-1] if said else ""


def plots_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _git(root: str, *args: str) -> str:
    proc = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["?"])[0]
        raise GemmguardError(f"gemmguard: git {' '.join(args)} failed: {first}")
    return proc.stdout.strip()


def tree_env(tree: str) -> dict[str, str]:
    """The environment of a run in `tree`: the tree's own code first on the import path (and its src/, for a
    src layout), ahead of any editable install of the head."""
    env = dict(os.environ)
    paths = [tree] + ([os.path.join(tree, "src")] if os.path.isdir(os.path.join(tree, "src")) else [])
    env["PYTHONPATH"] = os.pathsep.join([*paths, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def no_base(base_ref: str) -> str:
    """Why there is no base commit to compare with, or '' when `base_ref` names one. GitHub gives no base to a
    workflow_dispatch run (the action's base-ref is empty) and an all-zero `before` to a branch's first push."""
    ref = (base_ref or "").strip()
    if not ref:
        return "no base commit given (base-ref is empty, as on a workflow_dispatch run)"
    if set(ref) == {"0"}:
        return "no base commit: base-ref is all zeros, GitHub's `before` on a branch's first push"
    return ""


def base_tree(root: str, base_ref: str) -> tuple[str, str]:
    """A git worktree of the base commit (remove it with `remove_tree`): (its path, the commit)."""
    if not base_ref:
        raise GemmUsageError("gemmguard: base-commit needs --base-ref (the pull request's base commit)")
    try:
        sha = _git(root, "rev-parse", "--verify", "--quiet", f"{base_ref}^{{commit}}")
    except GemmguardError:
        raise GemmguardError(
            f"gemmguard: base commit {base_ref} is not in this clone (check out with fetch-depth: 0)"
        ) from None
    tree = tempfile.mkdtemp(prefix="gemmguard-base-")
    os.rmdir(tree)  # git worktree add wants to create it
    _git(root, "worktree", "add", "--detach", tree, sha)
    return tree, sha


def remove_tree(root: str, tree: str) -> None:
    subprocess.run(["git", "-C", root, "worktree", "remove", "--force", tree], capture_output=True)
    shutil.rmtree(tree, ignore_errors=True)


@dataclasses.dataclass
class _Runs:
    """What the rounds collect: the head's reports, the base's baseline entries, notes, the first error."""

    root: str
    tests: list[str]  # what each run collects: the benchmark paths; the suspects' node ids when confirming
    bench_dir: str
    plots: str
    common: list[str]
    require: bool
    caches: str = ""  # a temporary directory with each side's kernel cache (GEMMGUARD_KERNEL_CACHE)
    heads: list[dict | None] = dataclasses.field(default_factory=list)
    bases: list[dict] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    error: str = ""

    def env(self, side: str, base: dict[str, str] | None = None) -> dict[str, str] | None:
        """One side's environment: its own kernel cache, shared by its rounds. Its later rounds rebuild no
        kernel (on the H200 a CUTLASS benchmark spent 125 s of nvcc in every round) and still lower and
        autotune afresh (--gemm-kernel-cache keeps no decision), so one unlucky autotune pick cannot repeat
        in every round; base and head never share one. An environment variable, not a flag: a base commit
        from before the setting ignores it. A cache the caller chose wins."""
        env = dict(base if base is not None else os.environ)
        chosen = "GEMMGUARD_KERNEL_CACHE" in env or any(a.startswith(("--gemm-cache-dir", "--gemm-kernel-cache"))
                                                        for a in self.common)  # fmt: skip
        if not self.caches or chosen:
            return base
        env["GEMMGUARD_KERNEL_CACHE"] = os.path.join(self.caches, side)
        return env

    def repro(self, side: str) -> list[str]:
        """Where a benchmark's failed check writes its repro script: inside the report directory, which the
        action uploads (the run's working directory is not; the base's worktree is deleted). First, so that
        a --gemm-repro-dir in the user's bench-args wins."""
        return [f"--gemm-repro-dir={os.path.join(self.bench_dir, 'repro', side)}"]

    def head(self, round_no: int, against: str | None, last: bool, confirming: bool = False) -> None:
        report = os.path.join(self.bench_dir, f"head-{round_no}.json")
        if os.path.exists(report):
            os.unlink(report)  # an earlier gate's, in a reused report directory: never read as this round's
        extra = [f"--gemm-report-json={report}"]
        if not confirming:  # the head's JUnit list of every test tells lost coverage from a removed test; a
            # confirmation round runs a few tests and must not replace it
            extra.append(f"--junitxml={os.path.join(self.bench_dir, 'junit-head.xml')}")
        if against:
            extra.append(f"--gemm-baseline={against}")
            if self.require:
                extra.append("--gemm-require-baseline")  # a baseline that is not there is the plugin's error
        if last and plots_available():
            extra.append(f"--gemm-plots={self.plots}")
        elif last:  # a gate must not fail for a picture: the verdict never needs one
            self.notes.append("no plots: matplotlib is not installed (pip install 'pytest-gemmguard[plots]')")
        label = f"benchmarks, head, round {round_no}"
        label += " (confirming)" if confirming else ""
        rc, said = run_pytest([*self.repro("head"), *self.tests, *self.common, *extra], self.root, self.env("head"),
                              label)  # fmt: skip
        if rc in USAGE:
            self.error = f"gemmguard: the head's benchmark run ended with exit status {rc} (round {round_no}): " + (
                said or "see its log"
            )
        elif rc == 5:
            self.notes.append(f"no benchmark tests in {' '.join(self.tests)}")
        self.heads.append(read_report(report))

    def base_round(self, tree: str, r: int, last: bool, confirming: bool = False) -> None:
        """Round `r`: the base measured in its worktree (its baseline entries saved), then the head against it."""
        saved = os.path.join(self.bench_dir, f"base-{r}.json")
        if os.path.exists(saved):
            os.unlink(saved)  # a stale file would be updated, not replaced
        save = [*self.repro("base"), *self.tests, *self.common, f"--gemm-save-baseline={saved}"]
        label = f"benchmarks, base, round {r}" + (" (confirming)" if confirming else "")
        rc, _ = run_pytest(save, tree, self.env("base", tree_env(tree)), label)
        doc = read_report(saved)
        if doc is None and rc not in (0, 5):
            # The base crashed (seen on the H200: a base from before the two-plugin split, run with both
            # plugins named, ended in INTERNALERROR): nothing was compared, so nothing may pass.
            self.error = (
                f"gemmguard: the base's benchmark run ended with exit status {rc} (round {r}) and measured "
                "nothing: the head cannot be compared with it (see its log)"
            )
            return
        if doc is None and not confirming:
            self.notes.append(f"round {r}: the base measured nothing: no benchmark tests there")
        self.bases.append((doc or {}).get("entries", {}))
        self.head(r, saved, last, confirming)

    def suspects(self) -> tuple[list[str], int]:
        """What the confirmation rounds run: the tests (pytest node ids) of the cases that failed every round
        so far; and how many cases that is."""
        failed = [r for r in judge_rounds(self.heads, self.bases) if r.verdict == "failed"]
        tests = sorted({r.test for r in failed if r.test})
        # A node id is relative to pytest's rootdir; where that is not the root the runs start in (an ini file in
        # a subfolder), it names no file here, and the confirmation rounds run the benchmark paths whole.
        here = all(r.test and os.path.exists(os.path.join(self.root, r.test.split("::")[0])) for r in failed)
        if not here:
            tests = list(self.tests)
        return (tests if failed else []), len(failed)

    def base_commit(self, base_ref: str, rounds: int, confirm: int = 0) -> str:
        tree, sha = base_tree(self.root, base_ref)
        try:
            for r in range(1, rounds + 1):
                self.base_round(tree, r, r == rounds)
                if self.error:
                    break
            suspects, cases = self.suspects() if confirm and rounds >= 2 and not self.error else ([], 0)
            if suspects:
                paths, self.tests = self.tests, suspects
                print(f"gemmguard: {cases} benchmarked case(s) failed all {rounds} rounds; measuring their tests again "
                      f"in {confirm} more rounds before the verdict", flush=True)  # fmt: skip
                for r in range(rounds + 1, rounds + confirm + 1):
                    self.base_round(tree, r, False, confirming=True)
                    if self.error:
                        break
                self.tests = paths
                self.notes.append(
                    f"{cases} case{'s' * (cases != 1)} that failed all {rounds} rounds measured again in {confirm} "
                    "more rounds (confirmation): a case fails only when those regress too"
                )
        finally:
            remove_tree(self.root, tree)
        if rounds == 1:
            self.notes.append("one round: the compiled time itself is not judged (in one round a slower function and "
                              "a slower machine look alike); rounds >= 2 judge it")  # fmt: skip
        return f"head against the base {sha[:12]}, measured here, {rounds} interleaved rounds"


def bench_gate(
    root: str,
    tests: Sequence[str],
    backends: str,
    baseline: str,
    out: str,
    base_ref: str = "",
    rounds: int = 2,
    args: Sequence[str] = (),
    require_baseline: bool = False,
    confirm: int = 2,
) -> dict:
    """Measure the head's benchmarks and judge them; returns the verdict document (also written to
    OUT/bench/verdict.json). `baseline`: 'base-commit' (the base measured here, base and head alternately,
    `rounds` times each, and `confirm` more rounds for the tests of cases that failed all of them), 'none'
    (budgets only) or the path of a stored baseline file. base-commit without a
    base (`no_base`: a workflow_dispatch run, a branch's first push) measures the head on its budgets only and
    says so. `require_baseline` passes --gemm-require-baseline: a baseline that is missing (a base that
    measured nothing, no stored file, no base commit) ends the run as an error instead of a note."""
    if require_baseline and baseline in ("none", ""):
        raise GemmUsageError("gemmguard: --require-baseline needs a baseline: base-commit or a baseline file, not none")
    bench_dir = os.path.join(out, "bench")
    os.makedirs(bench_dir, exist_ok=True)
    junit = os.path.join(bench_dir, "junit-head.xml")
    if os.path.exists(junit):
        os.unlink(junit)  # the head's test list decides what a case missing on the head means: this run's only
    common = ["--gemm-bench-only", f"--gemm-backends={backends}", "-p", "no:cacheprovider", *args]
    runs = _Runs(root, list(tests), bench_dir, os.path.join(out, "plots"), common, require_baseline)
    missing = no_base(base_ref) if baseline == "base-commit" else ""
    if missing:
        against = f"{missing}: benchmarks judged on their budgets only"
        runs.head(1, None, True)
        if require_baseline and not runs.error:
            runs.error = f"gemmguard: {missing}, and --require-baseline is set"
    elif baseline == "base-commit":
        runs.caches = tempfile.mkdtemp(prefix="gemmguard-kernels-")  # not under out: reports are uploaded
        try:
            against = runs.base_commit(base_ref, rounds, confirm)
        finally:
            shutil.rmtree(runs.caches, ignore_errors=True)
    elif baseline in ("none", ""):
        against = "no baseline (budgets only)"
        runs.head(1, None, True)
    else:
        if not os.path.isfile(os.path.join(root, baseline)) and not require_baseline:
            runs.notes.append(f"no baseline file at {baseline}: regressions not checked")
        against = f"head against the stored baseline {baseline}"
        runs.head(1, baseline, True)
    head_tests = read_junit(junit, root) if os.path.exists(junit) else None
    main = rounds if baseline == "base-commit" and not missing else 1
    rows = judge_rounds(runs.heads, runs.bases, head_tests, main_rounds=main)
    verdict = {
        "format": "gemmguard-gate-bench",
        "version": 1,
        "mode": baseline or "none",
        "against": against,
        "base_ref": base_ref,
        "rounds": min(main, len(runs.heads)),
        "confirm_rounds": max(0, len(runs.heads) - main),
        "inconclusive": inconclusive_policy(runs.heads),
        "rows": [dataclasses.asdict(r) for r in rows],
        "notes": list(dict.fromkeys(runs.notes)),
        "error": runs.error,
    }
    write_text_atomic(os.path.join(bench_dir, "verdict.json"), json.dumps(verdict, indent=1))
    return verdict
