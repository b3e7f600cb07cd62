"""pytest_gemmguard.github on real runs: JUnit XML from real pytest runs with a planted wrong kernel (a real
Inductor graph pass), a planted slowdown measured against the base commit in a real git worktree, GitHub's
escaping rules, the GPU check, and the sticky comment against a loopback stand-in of GitHub's REST API (GitHub
itself cannot be reached from here: tests/actrun/fake_github.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from actrun import fake_github, plants

from pytest_gemmguard import github

REPO = Path(__file__).resolve().parent.parent

# A real Inductor post-grad pass that adds 0.01 to every GEMM's output, on a real backend: what a broken
# compiler does to a user's GEMMs.
WRONG_KERNEL = plants.planted_backend(
    "wrong-kernel", plants.shift_gemms("OffByAHundredth", 0.01, ops=("mm", "addmm")), once=True
)

CASE_TEST = """
from pytest_gemmguard import gemm_case


def test_plain():
    assert True


@gemm_case(ops=["mm"], dtypes=["float32"], epilogues=["none"], layouts=["contiguous"], max_examples=10)
def test_gemms(gemm):
    gemm.check()  # the line the annotation must point at
"""


def _gate(tmp: Path, *args: str) -> tuple[int, dict[str, str], str]:
    """`gate` as the action runs it, with GitHub's output and summary files; returns its status and outputs."""
    outputs, summary = tmp / "github-output", tmp / "step-summary.md"
    summary.write_text("earlier step's summary\n")
    env = {**os.environ, "GITHUB_OUTPUT": str(outputs), "GITHUB_STEP_SUMMARY": str(summary)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_gemmguard.github", "gate", f"--root={tmp}", f"--out={tmp / 'report'}", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=600,
    )
    values = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line)
    return proc.returncode, values, proc.stdout + proc.stderr


def test_escaping_follows_githubs_rules():
    assert github.escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    # % first: a literal "%0A" must stay text, not become a newline when GitHub decodes the message.
    assert github.escape_data("%0A") == "%250A"
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = github.workflow_command("error", "one\ntwo: 5%", file="tests/t, 1.py", line=7, title="x: y, z")
    assert line == "::error file=tests/t%2C 1.py,line=7,title=x%3A y%2C z::one%0Atwo: 5%25"
    assert github.workflow_command("warning", "m", file=None) == "::warning::m"
    # Decoding what was encoded, as the runner does, gives back every string exactly.
    decode = {"%25": "%", "%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ","}
    for text in ("50%", "%0A", "a:b,c", "line1\r\nline2", "%%3A,:"):
        encoded = github.escape_property(text)
        assert ":" not in encoded and "," not in encoded and "\n" not in encoded
        out, i = [], 0
        while i < len(encoded):
            if encoded[i] == "%" and encoded[i : i + 3] in decode:
                out.append(decode[encoded[i : i + 3]])
                i += 3
            else:
                out.append(encoded[i])
                i += 1
        assert "".join(out) == text


def test_a_planted_wrong_kernel_fails_the_gate_with_an_annotation_at_the_test_line(pytester):
    pytester.makeconftest(WRONG_KERNEL)
    path = pytester.makepyfile(test_cases=CASE_TEST)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "gemm.check()" in text)
    rc, outputs, out = _gate(pytester.path, "--title=planted", "--backends=wrong-kernel", "--tests=test_cases.py")
    assert rc == 1, out
    assert outputs["verdict"] == "fail" and Path(outputs["junit"]).is_file()
    errors = [x for x in out.splitlines() if x.startswith("::error ")]
    assert len(errors) == 1, out
    head, _, message = errors[0][len("::error ") :].partition("::")
    assert head == f"file=test_cases.py,line={line},title=gemmguard%3A wrong-kernel produced a wrong result"
    decoded = message.replace("%0A", "\n").replace("%25", "%")
    assert decoded.startswith("test_cases.py::test_gemms[wrong-kernel]\n")
    # The case Hypothesis shrank to (toward 1x1x1; the smallest shapes Inductor rewrites into pointwise code, so
    # they are unsupported, not failed), the worst element and the replay line.
    shrunk = re.search(r"case:     mm (\d+)×(\d+)×(\d+) float32 contiguous epilogue=none", decoded)
    assert shrunk and sum(map(int, shrunk.groups())) <= 6 and "explicit example" not in decoded, decoded
    assert "worst:    element (0, 0): got" in decoded and "reproduce: pytest " in decoded
    # The whole report, through its last line (repro), the flags gemmguard set for the case included.
    assert "\n  flags:    " in decoded and "\n  repro:    python " in decoded, decoded
    summary = (pytester.path / "step-summary.md").read_text()
    assert summary.startswith("earlier step's summary\n")  # appended, never replaced
    assert "## gemmguard: planted: **failed**" in summary
    assert "| wrong-kernel | 0 | **1** |" in summary and "| (other tests) | 1 | 0 |" in summary
    assert "`test_cases.py::test_gemms[wrong-kernel]` at `test_cases.py:" in summary
    assert (pytester.path / "report" / "comment.md").read_text() in summary
    assert list((pytester.path / "report" / "repro").glob("repro_*.py"))


def test_a_clean_run_passes_the_gate_without_annotations(pytester):
    pytester.makepyfile(test_cases=CASE_TEST)
    rc, outputs, out = _gate(pytester.path, "--title=clean", "--backends=aten", "--tests=test_cases.py")
    assert rc == 0, out
    assert outputs["verdict"] == "pass"
    assert not [x for x in out.splitlines() if x.startswith(("::error", "::warning"))]
    summary = (pytester.path / "step-summary.md").read_text()
    assert "## gemmguard: clean: passed" in summary and "| aten | 1 | 0 |" in summary
    # A test run that collects nothing is no pass.
    rc, outputs, out = _gate(pytester.path, "--title=empty", "--backends=aten", "--tests=test_cases.py -k nothing")
    assert rc == 1 and outputs["verdict"] == "fail"
    assert "::error title=gemmguard%3A run failed::gemmguard: pytest collected no tests" in out


GEMMLIB = """
import torch


def matmul_relu(a, b):
    return torch.relu(a @ b)
"""

# The planted slowdown: a real Inductor graph pass, added by the pull request's conftest.py, that runs every
# compiled GEMM in float64 (the same result, about 5x slower at 192³ on the 2-core CPU). It slows the compiled
# code only, as an Inductor regression does: gemmguard times the compiled callable against eager in the same
# loop, so a change that slowed eager as much (say, upcasting in the user's own function) would not count.
SLOW_COMPILE = plants.UPCAST_GEMMS_CONFTEST

BENCH = """
import gemmlib


def test_matmul_relu(gemm_benchmark):
    gemm_benchmark(gemmlib.matmul_relu, op="mm", shape=(192, 192, 192))
"""

# On a shared 2-core CPU the noise is several percent (docs/validation/benchmarks.md): a CPU gate uses a wide threshold.
BENCH_PYPROJECT = """
[tool.gemmguard]
runtime_regression = "20%"
max_time_s = 0.3
cpu_threads = 1
cold_compile = false
"""


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t.invalid")
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()


# Both sides log each autotuning of their mm with the process and the side's kernel cache
# (plants.AUTOTUNE_LOG_CONFTEST), to show that every round autotunes afresh.
AUTOTUNE_LOG = plants.AUTOTUNE_LOG_CONFTEST


@pytest.mark.timing
def test_a_planted_slowdown_fails_every_round_against_the_base_commit(pytester, monkeypatch, no_kernel_cache):
    repo = pytester.path
    (repo / "pyproject.toml").write_text(BENCH_PYPROJECT)
    (repo / "gemmlib.py").write_text(GEMMLIB)
    (repo / "test_bench.py").write_text(BENCH)
    (repo / "conftest.py").write_text(AUTOTUNE_LOG)
    log = repo.parent / "autotune.log"
    monkeypatch.setenv("GG_AUTOTUNE_LOG", str(log))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "conftest.py").write_text(AUTOTUNE_LOG + SLOW_COMPILE)
    _git(repo, "add", "conftest.py")
    _git(repo, "commit", "-qm", "head: compiled GEMMs slower")
    out = repo / "report"
    # Without confirmation rounds (tests/test_bench_gate.py runs them): this is about the three rounds.
    verdict = github.bench_gate(str(repo), ["test_bench.py"], "aten", "base-commit", str(out), base, rounds=3,
                                confirm=0)  # fmt: skip
    (row,) = verdict["rows"]
    assert row["statuses"] == ["failed"] * 3 and row["verdict"] == "failed", verdict
    assert all(c is not None and c > 0.2 for c in row["changes"]), row  # each round against its own base
    assert any("runtime regression" in b for b in row["broken"])
    assert row["base_ms"] and row["head_ms"] > row["base_ms"]
    assert verdict["against"].startswith(f"head against the base {base[:12]}, measured here, 3 interleaved rounds")
    assert _git(repo, "worktree", "list").count("\n") == 0  # the base's worktree is gone
    # The base's baselines were written by the base's run, the head's reports by the head's.
    # Every round autotunes afresh: a cache that kept one side's autotune pick across its rounds would let one
    # unlucky pick repeat in every round and fail the gate on unchanged code. Each side keeps its kernels only
    # (GEMMGUARD_KERNEL_CACHE, tests/test_kernel_cache.py), its own, and each of its rounds' processes
    # autotuned: two sides, three rounds each.
    tuned = [line.split() for line in log.read_text().splitlines()]
    sides = {cache for cache, _ in tuned}
    assert len(sides) == 2 and all(cache != "None" for cache in sides), tuned
    assert {os.path.basename(c) for c in sides} == {"base", "head"}
    for side in sides:
        assert len({pid for cache, pid in tuned if cache == side}) == 3, tuned  # every round autotuned
    assert not any(os.path.exists(c) for c in sides)  # the caches go with the gate
    assert sorted(p.name for p in (out / "bench").glob("*.json")) == [
        "base-1.json",
        "base-2.json",
        "base-3.json",
        "head-1.json",
        "head-2.json",
        "head-3.json",
        "verdict.json",
    ]
    results = github.read_junit(str(out / "bench" / "junit-head.xml"), str(repo))
    lines = github.annotations([], verdict, results)
    assert len(lines) == 1 and lines[0].startswith("::error file=test_bench.py,line=6,title=gemmguard%3A aten mm-")
    assert "slower than the base::" in lines[0] and "failed in 3 of 3 rounds" in lines[0].replace("%0A", "\n")
    summary = github.summary_markdown("GPU", [], verdict)
    assert "**failed**" in summary.splitlines()[0] and "| **regression** |" in summary
    # A case that failed in one round only is shown but does not fail the gate.
    first = json.loads((out / "bench" / "head-1.json").read_text())
    calm = json.loads(json.dumps(first))
    for m in calm["measurements"]:
        m["status"], m["broken"] = "ok", []
    (mixed,) = github.judge_rounds([first, calm])
    assert mixed.verdict == "unstable" and not mixed.failed
    assert github.passed([], {"rows": [vars(mixed)]})
    assert github.annotations([], {"rows": [vars(mixed)]})[0].startswith("::warning ")


def test_a_base_that_crashes_fails_the_gate_instead_of_comparing_nothing(pytester):
    """Seen on the H200: the base's benchmark run ended in INTERNALERROR and the gate still passed, having
    compared nothing. A base run that fails (not one that has no benchmarks) now fails the gate."""
    repo = pytester.path
    (repo / "pyproject.toml").write_text(BENCH_PYPROJECT)
    (repo / "gemmlib.py").write_text(GEMMLIB)
    (repo / "test_bench.py").write_text(BENCH)
    (repo / "conftest.py").write_text("raise RuntimeError('the base cannot even load its conftest')\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base: broken")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "conftest.py").unlink()
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "head: fixed")
    verdict = github.bench_gate(str(repo), ["test_bench.py"], "aten", "base-commit", str(repo / "out"), base, rounds=1)
    assert "the base's benchmark run ended with exit status" in verdict["error"], verdict
    assert not github.passed([], verdict)


def test_a_required_baseline_that_is_missing_fails_the_gate_with_the_plugins_line(pytester):
    """--require-baseline is the plugin's --gemm-require-baseline: a missing stored baseline ends the benchmark
    run with its one line (no benchmark is measured first), and the gate fails on it."""
    (pytester.path / "test_bench.py").write_text(BENCH)
    gate = ("--title=required", "--backends=aten", "--tests=", "--bench-tests=test_bench.py", "--require-baseline")
    rc, outputs, out = _gate(pytester.path, *gate, "--baseline=baselines/missing.json")
    assert rc == 1 and outputs["verdict"] == "fail", out
    assert "--gemm-require-baseline" in out and "does not exist and --gemm-require-baseline is set" in out
    summary = (pytester.path / "step-summary.md").read_text()
    assert "does not exist and --gemm-require-baseline is set" in summary and "**failed**" in summary
    # Without a baseline to require, the option is a mistake: one line, exit status 2.
    rc, _, out = _gate(pytester.path, *gate, "--baseline=none")
    assert rc == 2 and "::error title=gemmguard::gemmguard: --require-baseline needs a baseline" in out


@pytest.fixture
def fake_api():
    with fake_github.serve() as served:
        yield served


def test_the_sticky_comment_is_created_once_then_edited(fake_api, tmp_path, monkeypatch, capsys):
    url, api = fake_api
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "comment.md").write_text("## gemmguard: CPU: passed\n")
    args = ["comment", "--parts", str(tmp_path), "--repo", "o/r", "--pr", "7", "--api-url", url]
    monkeypatch.setenv("GITHUB_TOKEN", fake_github.TOKEN)
    assert github.main([*args, "--jobs", "cpu=success gpu=failure"]) == 0
    assert capsys.readouterr().out.startswith("gemmguard: created pull request comment ")
    (tmp_path / "cpu" / "comment.md").write_text("## gemmguard: CPU: **failed**\n")
    assert github.main(args) == 0
    assert capsys.readouterr().out.startswith("gemmguard: updated pull request comment ")
    ours = [c for c in api.comments if c["body"].startswith(github.MARKER)]
    assert len(ours) == 1 and len(api.comments) == 121  # found on the second page, not posted again
    assert "CPU: **failed**" in ours[0]["body"] and "passed" not in ours[0]["body"]
    assert [c.split("?")[0] for c in api.calls].count("POST /repos/o/r/issues/7/comments") == 1
    assert f"PATCH /repos/o/r/issues/comments/{ours[0]['id']}" in api.calls
    # The jobs line keeps a job that failed before writing a part.
    assert "jobs: cpu success, gpu failure" in github.comment_body(["x"], "cpu=success gpu=failure")
    # No token, a refused token: one line each, exit status 2.
    monkeypatch.delenv("GITHUB_TOKEN")
    assert github.main(args) == 2
    assert capsys.readouterr().out.strip().endswith("GITHUB_TOKEN is not set: cannot post the pull request comment")
    monkeypatch.setenv("GITHUB_TOKEN", "wrong")
    assert github.main(args) == 2
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert "HTTP 401 Unauthorized" in line


def test_check_gpu_fails_at_once_where_there_is_no_gpu(tmp_path):
    """Run as the GPU job runs it: from the checkout's root, before anything is installed (-S: no
    site-packages, so neither torch nor an installed gemmguard can be imported; the package is the tree's)."""
    command = [sys.executable, "-S", "-m", "pytest_gemmguard.github", "check-gpu"]
    run = dict(capture_output=True, text=True, timeout=60, cwd=REPO)
    proc = subprocess.run(command, env={"PATH": str(tmp_path)}, **run)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.strip().splitlines() == [
        "::error title=gemmguard%3A no GPU::gemmguard: no GPU on this machine: nvidia-smi is not on PATH; "
        "the GPU job needs a runner with an NVIDIA GPU and its driver"
    ]
    # A driver that does not answer, as nvidia-smi reports it on a runner whose driver broke.
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        textwrap.dedent(
            """\
            #!/bin/sh
            echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
            exit 9
            """
        )
    )
    smi.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "RUNNER_NAME": "gpu-runner-1"}
    proc = subprocess.run(command, env=env, **run)
    assert proc.returncode == 1
    assert proc.stdout.strip() == (
        "::error title=gemmguard%3A no GPU::gemmguard: no GPU on gpu-runner-1: nvidia-smi failed: "
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    )


def test_unreadable_junit_is_one_line(tmp_path, capsys):
    broken = tmp_path / "junit.xml"
    broken.write_text("<testsuites><testcase")
    assert github.main(["report", "--junit", str(broken), "--summary", ""]) == 2
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.startswith("::error title=gemmguard::gemmguard: cannot read JUnit XML ")


def _report(status: str, policy: str = "fail") -> dict:
    """A head report as the plugin writes it (--gemm-report-json), one measurement with `status`."""
    m = {"key": "t | case | mm", "test": "test_bench.py::test_mm[aten]", "backend": "aten", "op": "mm",
         "shape": [256, 256, 256], "dtype": "float32", "layout": "contiguous", "epilogue": "none", "fn": "case",
         "median_s": 1e-3, "status": status, "broken": [], "compared": {"runtime": {"ratio": 1.3}}}  # fmt: skip
    return {"format": "gemmguard-report", "inconclusive": policy, "measurements": [m]}


@pytest.mark.parametrize("policy", ["fail", "warn"])
def test_an_inconclusive_benchmark_has_its_own_column_and_fails_the_gate_unless_warn(policy):
    heads = [_report("inconclusive", policy), _report("inconclusive", policy)]
    (row,) = github.judge_rounds(heads)
    assert row.verdict == "inconclusive" and not row.failed  # never counted as a regression
    bench = {"rows": [vars(row)], "inconclusive": github.compare.inconclusive_policy(heads)}
    summary = github.summary_markdown("CPU", [], bench)
    assert "| backend | ok | failed | unstable | inconclusive | no baseline |" in summary
    assert "| aten | 0 | 0 | 0 | **1** | 0 |" in summary and "**inconclusive** (too noisy to tell" in summary
    assert "**regression**" not in summary
    assert github.passed([], bench) == (policy == "warn")
    (note,) = github.annotations([], bench)
    assert note.startswith("::error " if policy == "fail" else "::warning ") and "inconclusive" in note
    # One round that could tell (ok) outweighs rounds that could not.
    (mixed,) = github.judge_rounds([_report("inconclusive"), _report("ok")])
    assert mixed.verdict == "ok"


def test_round_counts_count_only_the_rounds_that_measured_the_case():
    """Seen in the issue: "inconclusive in 2 of 2 rounds" where one round measured the case. A head round that
    measured nothing (its report has no such case) neither counts as inconclusive nor as a failure."""
    nothing = {"format": "gemmguard-report", "inconclusive": "fail", "measurements": []}
    (row,) = github.judge_rounds([_report("inconclusive"), nothing])
    assert row.statuses == ["inconclusive", "missing"] and row.verdict == "inconclusive"
    (note,) = github.annotations([], {"rows": [vars(row)]})
    assert "%0Ainconclusive in 1 of 1 round that measured it (1 of 2 did not)" in note, note
    # A failure in the only round that measured it is a failure in every round that did.
    (row,) = github.judge_rounds([nothing, _report("failed")])
    assert row.verdict == "failed" and not github.passed([], {"rows": [vars(row)]})
    (note,) = github.annotations([], {"rows": [vars(row)]})
    assert note.startswith("::error ") and "failed in 1 of 1 round that measured it (1 of 2 did not)" in note
    (row,) = github.judge_rounds([_report("failed"), _report("failed")])
    assert "failed in 2 of 2 rounds" in github.annotations([], {"rows": [vars(row)]})[0]


# ---------------------------------------------------------------- failures judged on the change

# torch's real CPP offset-weight bug stands for an upstream bug nobody in a pull request can act on (the shipped
# entries switched off, so it shows as a failure on both sides).
OFFSET_TEST = """
from pytest_gemmguard import gemm_case


@gemm_case(ops=["linear"], dtypes=["float32"], layouts=["offset", "contiguous"], epilogues=["none"],
           shapes=[(5, 6, 130)])
def test_linear(gemm):
    gemm.check()
"""


@pytest.mark.slow
def test_the_gate_judges_failures_against_the_base_commit(pytester):
    repo = pytester.path
    (repo / "test_lin.py").write_text(OFFSET_TEST)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "README.md").write_text("a change that touches no GEMM\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "head: unchanged GEMMs")
    common = ("--tests=test_lin.py", "--backends=aten,cpp", "--verdicts=base-commit", f"--base-ref={base}",
              "--pytest-args=--gemm-known-shipped=off --gemm-compile-workers=0")  # fmt: skip
    rc, outputs, out = _gate(repo, "--title=unchanged", *common)
    assert rc == 0 and outputs["verdict"] == "pass", out[-4000:]
    summary = (repo / "step-summary.md").read_text()
    assert f"Verdicts: failures judged against the base {base[:12]}, run here first." in summary, summary
    assert "0 new, 0 coverage lost, 1 pre-existing, 0 fixed" in summary, summary
    assert (repo / "report" / "base-verdicts.json").is_file() and (repo / "report" / "verdicts.json").is_file()
    assert _git(repo, "worktree", "list").count("\n") == 0  # the base's worktree is gone

    (repo / "conftest.py").write_text(plants.WRONG_ATEN)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "head: a new wrong result")
    rc, outputs, out = _gate(repo, "--title=broken", *common)
    assert rc == 1 and outputs["verdict"] == "fail", out[-4000:]
    summary = (repo / "step-summary.md").read_text()
    assert "new failure: test_lin.py::test_linear[aten]: linear 5×6×130 float32" in summary, summary
    assert "pre-existing (not blocking): test_lin.py::test_linear[cpp]" in summary, summary
    errors = [x for x in out.splitlines() if x.startswith("::error ")]
    assert errors and all("test_linear[aten]" in x for x in errors), out[-4000:]

    # A stored record of main, made in another environment (an upgrade pull request's base: its torch differs):
    # the same verdicts, said in the job's log and the summary, with the version that moved.
    stored = json.loads((repo / "report" / "base-verdicts.json").read_text())
    stored["facts"]["torch"] = "2.12.0+cpu"
    (repo / "main-verdicts.json").write_text(json.dumps(stored))
    rc, outputs, out = _gate(repo, "--title=upgrade", *common[:2], "--verdicts=main-verdicts.json", *common[4:])
    assert rc == 1 and outputs["verdict"] == "fail", out[-4000:]
    summary = (repo / "step-summary.md").read_text()
    torch_here = json.loads((repo / "report" / "verdicts.json").read_text())["facts"]["torch"]
    for text in (out, summary):
        assert "Verdicts: failures judged against main-verdicts.json." in text, text[-3000:]
        assert f"gemmguard verdicts: torch 2.12.0+cpu -> {torch_here}" in text, text[-3000:]
        assert "new failure: test_lin.py::test_linear[aten]: linear 5×6×130 float32" in text, text[-3000:]
        assert "pre-existing (not blocking): test_lin.py::test_linear[cpp]" in text, text[-3000:]

    rc, _, out = _gate(repo, "--title=bad", "--tests=test_lin.py", "--verdicts=nowhere.json")
    assert rc == 2 and "--verdicts=nowhere.json: no such verdict record" in out, out[-2000:]


def test_the_gate_draws_plots_only_where_matplotlib_is_installed(tmp_path, monkeypatch):
    # An A/A pull request once failed on "--gemm-plots needs matplotlib": a picture must not fail the gate.
    from pytest_gemmguard.github import rounds

    seen: list[list[str]] = []
    monkeypatch.setattr(rounds, "run_pytest", lambda args, *a, **k: seen.append(list(args)) or (0, ""))
    for available in (True, False):
        monkeypatch.setattr(rounds, "plots_available", lambda available=available: available)
        runs = rounds._Runs(str(tmp_path), ["t.py"], str(tmp_path), str(tmp_path / "plots"), [], False)
        runs.head(1, None, last=True)
        plotted = any(a.startswith("--gemm-plots=") for a in seen[-1])
        assert plotted is available and (available or "pytest-gemmguard[plots]" in runs.notes[-1]), runs.notes


def _paired_round(key: str, head_ratio: float, base_ratio: float, status: str = "failed") -> tuple[dict, dict]:
    """One round of the gate: the head's report and the base's entry for one case, each run with a tight
    interval of its own (1%) on its ratio to eager, as the plugin writes them; the times themselves unchanged."""

    def sides(ratio: float) -> dict:
        return {"ratio": ratio, "ratio_low": ratio * 0.99, "ratio_high": ratio * 1.01, "ratio_n": 40,
                "median_s": 1e-3, "ci_low_s": 0.99e-3, "ci_high_s": 1.01e-3, "n": 40}  # fmt: skip

    report = _report(status)
    m = report["measurements"][0]
    m.update(key=key, **sides(head_ratio))
    m["compared"] = {"runtime": {"ratio": head_ratio / base_ratio, "threshold": 0.05, "alpha": 0.01}}
    return report, {key: {"key": key, "test": m["test"], "backend": "aten", **sides(base_ratio)}}


def test_a_ratio_change_within_how_much_the_ratio_moves_between_runs_is_not_a_regression():
    """The A/A pull request of a shared 2-core runner: each round's change of the ratio to eager is far outside
    its runs' own intervals (the plugin fails both rounds), but the ratio moves as much between runs of one
    side: inconclusive, not a regression. A real 5x slowdown beside it still fails every round."""
    key = "t | case | mm"
    rounds = [_paired_round(key, 1.09, 1.00), _paired_round(key, 1.27, 1.12), _paired_round(key, 1.15, 1.05)]
    (row,) = github.judge_rounds([r for r, _ in rounds], [b for _, b in rounds])
    assert row.verdict == "inconclusive" and not row.failed, (row.statuses, row.broken)
    assert any("not beyond the threshold plus how far the base moved between its own runs" in line
               for line in row.broken), row.broken  # fmt: skip
    slow = [_paired_round(key, 5.0, 1.00), _paired_round(key, 5.6, 1.12), _paired_round(key, 5.3, 1.05)]
    (row,) = github.judge_rounds([r for r, _ in slow], [b for _, b in slow])
    assert row.verdict == "failed" and row.statuses == ["failed"] * 3, row.broken
    # Two rounds: two base runs say little of how far the runner drifts, so the same 5x is only inconclusive
    # beside a base that moved 12% (bench/verdict.DRIFT_RANGES): an A/A case must not fail 10% of the time.
    (row,) = github.judge_rounds([r for r, _ in slow[:2]], [b for _, b in slow[:2]])
    assert row.verdict == "inconclusive" and not row.failed, (row.statuses, row.broken)
    # A change that makes the head erratic (2x in one round, 2.4x in the next) is not hidden by its own spread.
    erratic = [_paired_round(key, 1.96, 1.00), _paired_round(key, 2.45, 1.02), _paired_round(key, 2.2, 1.01)]
    (row,) = github.judge_rounds([r for r, _ in erratic], [b for _, b in erratic])
    assert row.verdict == "failed", row.broken
    # Steady runs (the ratio moves 0.5% between runs): a +9% change is the regression the plugin saw.
    steady = [_paired_round(key, 1.09, 1.00), _paired_round(key, 1.0955, 1.005), _paired_round(key, 1.093, 1.0025)]
    (row,) = github.judge_rounds([r for r, _ in steady], [b for _, b in steady])
    assert row.verdict == "failed", row.broken


def test_a_passing_test_is_placed_at_its_def_so_a_benchmark_verdict_against_the_base_has_a_line(tmp_path):
    """A benchmark whose own run passed can fail the gate against the base (its compiled time, every round): its
    annotation needs the test's line, which JUnit gives only for a failure."""
    (tmp_path / "test_bench.py").write_text("import gemmlib\n\n\ndef test_mm(gemm_benchmark):\n    pass\n")
    xml = tmp_path / "junit.xml"
    xml.write_text('<testsuites><testsuite><testcase classname="test_bench" name="test_mm[aten]" time="1"/>'
                   "</testsuite></testsuites>")  # fmt: skip
    (result,) = github.read_junit(str(xml), str(tmp_path))
    assert result.outcome == "passed" and (result.file, result.line) == ("test_bench.py", 4)


@pytest.mark.parametrize("flag", ["--rounds=0", "--confirm-rounds=-1"])
def test_a_bad_round_count_is_one_line(flag, capsys, tmp_path):
    assert github.main(["gate", "--bench-tests=x", f"--out={tmp_path}", flag]) == 2
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert f"{flag}: must be >= " in line, line
