"""The GitHub Actions side, proven without GitHub: every workflow and action is linted (GitHub's JSON schemas
through check-jsonschema, offline, and actionlint), the hardening rules are checked on the YAML, and the
workflows run with act in host mode (no Docker; remote actions replaced by tests/actrun/standins): the CPU job
passes on a clean change and fails with the annotation on a planted wrong kernel, the GPU job ends in its one
"no GPU" line here, a fork's pull request never reaches it, and the README's adoption example passes a clean
change and fails a planted slowdown. act skips jobs it cannot place and still exits 0, so every act test asserts
which jobs ran and what they printed. The act runs are marked `act` (`-m "not act"` leaves them out).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import actrun
import pytest
from actrun import fake_github, plants

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".github" / "workflows" / "ci.yml"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONS = sorted((ROOT / ".github" / "actions").glob("*/action.yml"))
STANDINS = sorted(actrun.STANDINS.glob("*/action.yml"))
UNDER_ACT = bool(os.environ.get("ACT"))  # inside a job that act runs: no act inside act


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("```yaml\nname: gemm\n") + len("```yaml\n")
    return text[start : text.index("```", start)]


# ---------------------------------------------------------------- lint


def test_the_shared_plants_pass_the_lint_a_ci_job_runs_on_them(tmp_path):
    """A plant is a pull request's conftest: the CPU job lints it before the gate runs, so a plant ruff refuses
    fails the job at Lint, not at the gate the act tests mean to see fail (an unused import did once)."""
    samples = {
        "wrong_aten.py": plants.WRONG_ATEN,
        "upcast.py": plants.UPCAST_GEMMS_CONFTEST,
        "planted.py": plants.planted_backend("planted-wrong", plants.shift_gemms("Skew", 1.0), once=True),
    }
    for name, text in samples.items():
        (tmp_path / name).write_text(text)
    ruff = [sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml")]
    proc = actrun.run_tool(*ruff, str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tmp_path / "unused.py").write_text("import os\n")  # the check can fail
    assert actrun.run_tool(*ruff, str(tmp_path)).returncode == 1


def test_every_workflow_and_action_matches_githubs_schemas(tmp_path):
    tool = actrun.tool("check-jsonschema")
    example = tmp_path / "adopt.yml"
    example.write_text(_readme_example())
    workflows = [str(p) for p in [*WORKFLOWS, example]]
    assert WORKFLOWS and ACTIONS and len(STANDINS) >= 4
    for schema, files in (
        ("vendor.github-workflows", workflows),
        ("custom.github-workflows-require-timeout", workflows),  # a timeout on every job
        ("vendor.github-actions", [str(p) for p in [*ACTIONS, *STANDINS]]),
    ):
        proc = actrun.run_tool(tool, "--builtin-schema", schema, *files)
        assert proc.returncode == 0, f"{schema}: {proc.stdout}{proc.stderr}"
    # The checks can fail: a job without its timeout, an action whose runner is misspelled.
    ci = CI.read_text()
    untimed = tmp_path / "untimed.yml"
    untimed.write_text(ci.replace("    timeout-minutes: 5\n", "", 1))
    proc = actrun.run_tool(tool, "--builtin-schema", "custom.github-workflows-require-timeout", str(untimed))
    assert proc.returncode == 1 and "timeout-minutes" in proc.stdout
    broken = tmp_path / "action.yml"
    broken.write_text(ACTIONS[0].read_text().replace("using: composite", "using: composit"))
    assert actrun.run_tool(tool, "--builtin-schema", "vendor.github-actions", str(broken)).returncode == 1


def test_actionlint_passes_and_catches_planted_mistakes(tmp_path):
    tool = actrun.tool("actionlint")
    example = tmp_path / "adopt.yml"
    example.write_text(_readme_example())
    config = str(ROOT / ".github" / "actionlint.yaml")
    proc = actrun.run_tool(tool, "-no-color", "-config-file", config, *map(str, WORKFLOWS), str(example))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # A copy of the repository's .github with two mistakes: an input the gemmguard action does not have, and a
    # runner label that is not configured. actionlint reads the local action's inputs and the label config.
    shutil.copytree(ROOT / ".github", tmp_path / ".github")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # actionlint finds local actions from .git
    planted = tmp_path / ".github" / "workflows" / "ci.yml"
    text = planted.read_text().replace("          bench-args:", "          bench-arguments:", 1)
    planted.write_text(text.replace("[self-hosted, linux, gpu]", "[self-hosted, linux, gpux]"))
    proc = actrun.run_tool(tool, "-no-color", ".github/workflows/ci.yml", cwd=tmp_path)
    assert proc.returncode == 1
    assert 'input "bench-arguments" is not defined in action' in proc.stdout, proc.stdout
    assert 'label "gpux" is unknown' in proc.stdout, proc.stdout


def test_the_workflow_follows_the_hardening_rules():
    for path in WORKFLOWS:
        doc = actrun.load_yaml(path)
        assert doc["permissions"] == {"contents": "read"}, path
        assert "pull_request_target" not in doc["on"], path
        group = doc["concurrency"]
        # A release is never cancelled halfway (a publish stopped between its two files); every other run is.
        assert group["cancel-in-progress"] is (path.name != "release.yml"), path
        if "pull_request" in doc["on"]:  # one run per pull request
            assert "pull_request.number" in group["group"], path
        for name, job in doc["jobs"].items():
            assert job.get("timeout-minutes"), f"{path.name}: job {name} has no timeout"
            writes = {k: v for k, v in job.get("permissions", {}).items() if v == "write"}
            assert writes in ({}, {"pull-requests": "write"}, {"id-token": "write"}), (name, writes)
            uses = [step.get("uses", "") for step in job["steps"]]
            if "pull-requests" in writes:  # only a job that writes gemmguard's comment
                assert "./.github/actions/gemmguard" in uses or name == "comment", f"job {name} may write"
            if "id-token" in writes:  # only the release's publishing job, behind its environment
                assert job.get("environment"), f"job {name} publishes outside an environment"
            for step in job["steps"]:
                uses = step.get("uses", "")
                if uses.startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, (name, step)
    # Every remote action is pinned by a full commit with its version beside it.
    for path in [*WORKFLOWS, *ACTIONS]:
        for line in path.read_text().splitlines():
            m = re.search(r"uses:\s*([^\s#]+)", line)
            if m and not m.group(1).startswith("./"):
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", m.group(1)), line
                assert re.search(r"# v\d+\.\d+\.\d+$", line), line
    jobs = actrun.load_yaml(CI)["jobs"]
    gpu = jobs["gpu"]
    assert gpu["runs-on"] == ["self-hosted", "linux", "gpu"] and gpu["needs"] == "cpu"
    assert "head.repo.full_name == github.repository" in gpu["if"] and "'gpu-ci'" in gpu["if"]
    assert gpu["steps"][1]["run"].endswith("check-gpu")  # the GPU first, right after the checkout
    # A labelled fork runs the commit the label was given to, not whatever the branch holds when the job starts.
    assert gpu["steps"][0]["with"]["ref"] == "${{ github.event.pull_request.head.sha || github.sha }}"
    # The required check: after both jobs, unless cancelled, red unless both succeeded (a skip is not a pass).
    for doc in (jobs, actrun.load_yaml(_readme_example())["jobs"]):
        (gate,) = [job for job in doc.values() if set(job.get("needs", [])) == {"cpu", "gpu"}]
        assert "!cancelled()" in gate["if"] and "always()" not in gate["if"]
        checks = " ".join(step["run"] for step in gate["steps"])
        assert "needs.cpu.result" in checks or "RESULTS" in checks
        assert "success success" in checks or "cpu=success gpu=success" in checks
    assert "::error title=gemmguard::not every job ran green: $RESULTS" in jobs["gate"]["steps"][0]["run"]


def test_gpu_job_local_runs_the_workflows_commands():
    """scripts/gpu_job_local.sh is how the GPU job is recorded off GitHub: it must run the job's commands."""
    script = (ROOT / "scripts" / "gpu_job_local.sh").read_text()
    gpu = actrun.load_yaml(CI)["jobs"]["gpu"]
    runs = [line.strip() for step in gpu["steps"] if "run" in step for line in step["run"].splitlines()]
    assert runs and [r for r in runs if r not in script] == []
    (gate,) = [s for s in gpu["steps"] if s.get("uses") == "./.github/actions/gemmguard"]
    for key, value in gate["with"].items():
        if key in ("setup", "comment", "artifact"):  # the action's own install, comment and upload steps
            continue
        if key == "backends":
            assert '--backends="$list"' in script
        else:
            assert f"--{key}=" in script and str(value) in script, (key, value)


# ---------------------------------------------------------------- act


# The CPU job's selection under act (GEMMGUARD_CI_TESTS): one example test on aten, few examples.
QUICK = "examples/test_example_gemms.py::test_user_function -k aten --gemm-max-examples=4"
TINY = "tests/test_github.py -k escaping"  # no compile: for runs whose CPU job only has to pass


def _event(repo: Path, *, fork: bool = False, action: str = "synchronize", label: str | None = None) -> dict:
    head = actrun.git(repo, "rev-parse", "HEAD")
    base = actrun.git(repo, "rev-parse", "HEAD~1") if actrun.git(repo, "rev-list", "--count", "HEAD") != "1" else head
    event = {
        "action": action,
        "number": 12,
        "pull_request": {
            "number": 12,
            "head": {"sha": head, "ref": "change", "repo": {"full_name": "someone/gemmguard" if fork else OURS}},
            "base": {"sha": base, "ref": "main", "repo": {"full_name": OURS}},
            "labels": [{"name": label}] if label else [],
        },
        "repository": {"full_name": OURS},
    }
    if label:
        event["label"] = {"name": label}
    return event


OURS = "gemmguard/gemmguard"  # what act reads from the snapshot's origin


@pytest.fixture(scope="module")
def act_venv(tmp_path_factory):
    return actrun.make_venv(tmp_path_factory.mktemp("act") / "venv")


def _snapshot(tmp: Path) -> Path:
    repo = actrun.snapshot(tmp / "repo")
    actrun.git(repo, "commit", "-q", "--allow-empty", "-m", "the pull request")
    return repo


def _no_gpu_line(job: actrun.Job) -> bool:
    return any("::error title=gemmguard%3A no GPU::gemmguard: no GPU on " in line for line in job.lines)


@pytest.mark.act
@pytest.mark.skipif(UNDER_ACT, reason="act does not run inside a job that act runs")
def test_a_clean_pull_request_passes_cpu_the_gpu_job_says_no_gpu_and_the_check_stays_red(tmp_path, act_venv):
    repo = _snapshot(tmp_path)
    with fake_github.serve(existing=3) as (url, api):
        run = actrun.run_act(
            repo,
            "pull_request",
            _event(repo),
            tmp_path / "work",
            venv=act_venv,
            env={"GEMMGUARD_CI_TESTS": QUICK, "GITHUB_API_URL": url},
            secrets={"GITHUB_TOKEN": fake_github.TOKEN},
        )
        comments = [c for c in api.comments if c["body"].startswith("<!-- gemmguard-report -->")]
    assert not run.dryrun and run.rc == 1, run.tail()  # act exits 1: the GPU job failed, as it must here
    cpu, gpu, gate = run.jobs["cpu"], run.jobs["gpu"], run.jobs["gate"]
    assert cpu.result == "success", cpu.text[-3000:]
    for step in ("Install, as the README says", "Lint", "Tests and the example suite on the CPU backends"):
        assert cpu.steps.get(step) == "success", (step, cpu.steps)
    assert "gemmguard: verdict pass (CPU (aten, cpp))" in cpu.text and "1 passed" in cpu.text
    assert gpu.result == "failure" and gpu.steps.get("Check the GPU") == "failure"
    assert _no_gpu_line(gpu) and not gpu.ran_step("Install gemmguard")
    # The required check is red: the GPU job did not run green.
    # The job's summary says why. act in host mode may lose the log lines of a step that exits at once (here, all
    # of them, now and then), so the ::error annotation is checked in the workflow's text instead
    # (test_the_workflow_follows_the_hardening_rules) and the reason here in the summary act reads after the step.
    assert gate.result == "failure" and "Summary - gemmguard: cpu=success gpu=failure" in gate.text, gate.lines
    # The CPU job wrote its section of the one comment (the GPU job stopped before its gate step).
    assert "gemmguard: created pull request comment" in cpu.text
    (posted,) = comments
    assert "## gemmguard: CPU (aten, cpp): passed" in posted["body"] and "| aten | 1 | 0 |" in posted["body"]
    assert "<!-- gemmguard-section cpu-aten-cpp run=" in posted["body"]
    reports = tmp_path / "work" / "artifacts" / "gemmguard-cpu-reports"
    assert (reports / "comment.md").is_file() and (reports / "junit-tests.xml").is_file()
    assert (reports / "pull-request").read_text().strip() == "12"  # for a workflow_run comment (docs/gate.md)


@pytest.mark.act
@pytest.mark.skipif(UNDER_ACT, reason="act does not run inside a job that act runs")
def test_a_planted_wrong_kernel_fails_the_cpu_job_with_the_annotation_and_summary(tmp_path, act_venv):
    repo = actrun.snapshot(tmp_path / "repo")
    (repo / "conftest.py").write_text(plants.WRONG_ATEN)
    actrun.commit(repo, "the pull request: a graph pass that breaks GEMMs")
    examples = (ROOT / "examples" / "test_example_gemms.py").read_text().splitlines()
    line = next(i for i, text in enumerate(examples, 1) if "gemm.check(lambda a, b: torch.tanh(a @ b))" in text)
    quick = {"GEMMGUARD_CI_TESTS": QUICK}
    run = actrun.run_act(repo, "pull_request", _event(repo), tmp_path / "work", job="cpu", venv=act_venv, env=quick)
    cpu = run.jobs["cpu"]
    assert not run.dryrun and run.rc == 1 and cpu.result == "failure", run.tail()
    assert cpu.steps.get("Lint") == "success"  # the plant is clean code: the gate failed, not ruff
    assert cpu.steps.get("Tests and the example suite on the CPU backends") == "failure"
    where = f"file=examples/test_example_gemms.py,line={line}"
    prefix = f"::error {where},title=gemmguard%3A aten produced a wrong result::"
    (annotation,) = [x.split("❗", 1)[-1].strip() for x in cpu.lines if prefix in x]
    message = annotation[annotation.index("::", 2) + 2 :].replace("%0A", "\n")
    assert message.startswith("examples/test_example_gemms.py::test_user_function[aten]\n")
    assert re.search(r"case:     mm \d+×\d+×\d+ (bfloat16|float16) ", message) and "worst:    element" in message
    assert "## gemmguard: CPU (aten, cpp): **failed**" in cpu.text  # the job summary, as act shows it
    reports = tmp_path / "work" / "artifacts" / "gemmguard-cpu-reports"
    assert (reports / "junit-tests.xml").is_file() and list((reports / "repro").glob("repro_*.py"))
    assert "gpu" not in run.jobs  # it needs the CPU job


@pytest.mark.act
@pytest.mark.skipif(UNDER_ACT, reason="act does not run inside a job that act runs")
def test_a_forks_pull_request_reaches_the_gpu_job_only_with_the_maintainers_label(tmp_path, act_venv):
    repo = _snapshot(tmp_path)
    common = dict(venv=act_venv, env={"GEMMGUARD_CI_TESTS": TINY}, job="gate")
    fork = actrun.run_act(repo, "pull_request", _event(repo, fork=True, action="opened"), tmp_path / "w1", **common)
    assert not fork.dryrun, fork.tail()
    assert fork.jobs["cpu"].result == "success"  # the workflow did run: its CPU job
    assert "gpu" not in fork.jobs, fork.jobs["gpu"].text  # and the GPU job never started
    # A skipped GPU job is not a pass: the required check is red, saying why.
    gate = fork.jobs["gate"]
    assert gate.result == "failure" and "Summary - gemmguard: cpu=success gpu=skipped" in gate.text, gate.lines
    # The same pull request once a maintainer labels it gpu-ci: the GPU job runs (and says there is no GPU).
    labeled = _event(repo, fork=True, action="labeled", label="gpu-ci")
    run = actrun.run_act(repo, "pull_request", labeled, tmp_path / "w2", **common)
    assert run.jobs["cpu"].result == "success" and run.jobs["gpu"].result == "failure", run.tail()
    assert _no_gpu_line(run.jobs["gpu"]) and run.jobs["gate"].result == "failure"
    # The GPU job ran the commit the label was given to (the event's head), not the branch's newest.
    assert f"act stand-in checkout - commit {labeled['pull_request']['head']['sha']}" in run.jobs["gpu"].text
    # Any other label runs nothing, not even the check (and cancels nothing: its concurrency group is its own).
    other = actrun.run_act(
        repo, "pull_request", _event(repo, fork=True, action="labeled", label="docs"), tmp_path / "w3", **common
    )
    assert other.rc == 0 and other.jobs == {}, other.tail()


# The README's workflow, as printed, on a small project of GEMM code: the CPU job passes a clean change (an A/A
# pull request, on this shared 2-core machine) and fails a planted slowdown of the user's own function on its
# benchmark, with the annotation at the benchmark's line; the GPU job meets no GPU here, so the required check
# stays red; a fork's pull request never reaches the GPU job and leaves the check red.
GEMMLIB = '''"""A user's GEMM code."""

import torch


def matmul_relu(a, b):
    return torch.relu(a @ b)
'''

# Nothing about noise: the action's defaults must keep an A/A pull request green. Only the time a case may take.
USER_PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "gemmlib"
version = "0.1.0"
dependencies = ["torch>=2.11"]

[tool.setuptools]
py-modules = ["gemmlib"]

[tool.gemmguard]
max_time_s = 0.3
cold_compile = false
"""

USER_TEST = """from pytest_gemmguard import gemm_case

import gemmlib


@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], shapes=[(8, 12, 16), (5, 7, 9)], max_examples=2)
def test_matmul_relu(gemm):
    gemm.check(gemmlib.matmul_relu)
"""

USER_BENCH = """import gemmlib


def test_matmul_relu(gemm_benchmark):
    gemm_benchmark(gemmlib.matmul_relu, op="mm", shape=(192, 192, 192))
"""

# Every compiled GEMM in float64: the same result, about 5x slower, eager untouched (an Inductor regression).
# The pull request of issue 38's user: a 20 ms sleep in their own benchmarked function. Eager slows as much as the
# compiled code, so the ratio to eager cannot see it; the gate's compiled time against the base's must.
SLOWER_FUNCTION = '''"""A user's GEMM code."""

import time

import torch


def matmul_relu(a, b):
    time.sleep(0.02)
    return torch.relu(a @ b)
'''


@pytest.mark.timing
@pytest.mark.act
@pytest.mark.skipif(UNDER_ACT, reason="act does not run inside a job that act runs")
def test_the_readme_workflow_passes_a_clean_change_and_fails_a_planted_slowdown(tmp_path_factory, act_venv):
    tmp = tmp_path_factory.mktemp("adopt")
    repo = tmp / "user-repo"
    actrun.init(repo, origin="https://github.com/someone/gemmlib.git")
    files = {
        ".github/workflows/gemm.yml": _readme_example(),  # exactly as printed
        "pyproject.toml": USER_PYPROJECT,
        "gemmlib.py": GEMMLIB,
        "tests/test_gemms.py": USER_TEST,
        "benchmarks/test_bench.py": USER_BENCH,
        "README.md": "gemmlib\n",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    actrun.commit(repo, "base")
    # The job's python: a fresh venv that sees torch and pytest, not gemmguard: the action installs it, at its
    # own version, into a venv of the job (and the project with it), never into the test run's environment.
    venv = actrun.make_venv(tmp / "venv")
    # The action under test is this checkout's, as GitHub serves a repository: its files, not the checkout's venvs
    # and build outputs. act copies the action's whole tree into each run's cache: mapped to the checkout itself, a
    # CI clone's two venvs made that 2.4 GB a run, and the disk ran out.
    mapped = {"gemmguard/gemmguard@main": actrun.snapshot(tmp / "action")}

    # The suite's kernel cache goes into the jobs, the one setting a user's workflow does not have: every pytest
    # process of the three runs (correctness, each benchmark round of base and head) still lowers and autotunes
    # afresh and measures as a user's would (cold compiles are off in USER_PYPROJECT), but loads the C++ kernels
    # an earlier process built instead of building them again (523 s for the test here, 595 s without).
    kernels = {"GEMMGUARD_KERNEL_CACHE": os.environ["GEMMGUARD_KERNEL_CACHE"]}

    def run_pr(name: str, fork: bool = False) -> actrun.ActRun:
        event = _event(repo, fork=fork)
        event["repository"]["full_name"] = event["pull_request"]["base"]["repo"]["full_name"] = "someone/gemmlib"
        if not fork:
            event["pull_request"]["head"]["repo"]["full_name"] = "someone/gemmlib"
        with fake_github.serve(existing=2) as (url, api):
            run = actrun.run_act(
                repo, "pull_request", event, tmp / name, workflow=".github/workflows/gemm.yml", venv=venv,
                local=mapped, env={"GITHUB_API_URL": url, **kernels}, secrets={"GITHUB_TOKEN": fake_github.TOKEN},
            )  # fmt: skip
            run.comments = [c["body"] for c in api.comments if c["body"].startswith("<!-- gemmguard-report -->")]
        assert not run.dryrun and "cpu" in run.jobs and "gemmguard" in run.jobs, run.tail()
        return run

    (repo / "README.md").write_text("gemmlib: GEMMs\n")
    actrun.commit(repo, "a clean change")
    clean = run_pr("clean")
    cpu = clean.jobs["cpu"]
    assert cpu.result == "success", cpu.text[-4000:]
    assert "gemmguard: install pytest-gemmguard" in cpu.text and "gemmguard: install the project" in cpu.text
    assert "gemmguard: verdict pass (cpu)" in cpu.text
    assert "| aten | 1 | 0 |" in cpu.text and "| cpp | 1 | 0 |" in cpu.text  # the correctness run
    # A/A on a shared runner: every benchmarked case ok, or noisy and said so (inconclusive warns by default).
    rows = re.findall(r"\| (aten|cpp) \| `mm-192x192x192-\w+-contiguous-none-matmul_relu` \|[^\n]*", cpu.text)
    assert {r for r in rows} == {"aten", "cpp"}, cpu.text[-3000:]
    assert "| **regression** |" not in cpu.text
    # The GPU job meets no GPU here: one line, and the required check is red, not silently green.
    assert clean.jobs["gpu"].result == "failure" and _no_gpu_line(clean.jobs["gpu"])
    check = clean.jobs["gemmguard"]
    assert check.result == "failure" and "failure" in check.text, check.text[-2000:]
    # comment: alert. The CPU job passed: no comment of its own; the GPU job's failure opened one.
    assert "no comment: this job passed and there is none to update (comment: alert)" in cpu.text
    (posted,) = clean.comments
    assert "## gemmguard: gpu: **failed** before it could report" in posted and "cpu" not in posted.split("-->", 1)[1]

    # A fork's pull request: no GPU job at all, and the check is still red.
    fork = run_pr("fork", fork=True)
    assert fork.jobs["cpu"].result == "success" and "gpu" not in fork.jobs, fork.tail()
    assert fork.jobs["gemmguard"].result == "failure"
    assert "a fork's pull request gets a read-only token: no comment" in fork.jobs["cpu"].text and not fork.comments

    (repo / "gemmlib.py").write_text(SLOWER_FUNCTION)
    actrun.commit(repo, "matmul_relu waits for something")
    slow_run = run_pr("slow")
    slow = slow_run.jobs["cpu"]
    assert slow.result == "failure", slow.text[-4000:]
    assert "gemmguard: verdict fail (cpu)" in slow.text
    prefix = "::error file=benchmarks/test_bench.py,line=4,title=gemmguard%3A aten mm-192x192x192-"  # its def
    (annotation,) = [x for x in slow.lines if prefix in x]
    assert "slower than the base::benchmarks/test_bench.py::test_matmul_relu[aten]%0A" in annotation
    assert "runtime regression in absolute time: " in annotation
    assert "the function itself is slower, eager too" in annotation
    assert "failed in 5 of 5 rounds" in annotation  # the action's default 3 rounds, confirmed in 2 more
    assert "| **regression** |" in slow.text and "### Benchmarks: head against the base " in slow.text
    assert "| aten | 1 | 0 |" in slow.text  # the correctness tests still pass: only the speed changed
    (posted,) = slow_run.comments  # the CPU job's failure is in the comment, beside the GPU job's
    assert "<!-- gemmguard-section cpu run=" in posted and "| **regression** |" in posted
