"""The pull request's one gemmguard comment, a section per job, through the CLI the action runs against a
loopback stand-in of GitHub's REST API: alert creates it only on a failure and keeps updating it once it
exists, a section is never replaced by an older run's, a section of an earlier commit says so, a fork gets a
notice, and a refused token is a warning that leaves the job's verdict alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from actrun import fake_github

from pytest_gemmguard.github.comment import MARKER, parse_sections

ROOT = Path(__file__).resolve().parent.parent


def _comment(url: str, part: Path, *args: str, token: str = fake_github.TOKEN) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(PYTHONPATH=str(ROOT), GITHUB_TOKEN=token, GITHUB_REPOSITORY="someone/gemmlib")
    command = [sys.executable, "-m", "pytest_gemmguard.github", "comment", "--api-url", url, "--pr", "7",
               "--parts", str(part), *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)


def _part(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.md"
    path.write_text(text)
    return path


def _ours(api) -> list[dict]:
    return [c for c in api.comments if c["body"].startswith(MARKER)]


def test_alert_comments_only_on_a_failure_then_keeps_the_comment_current(tmp_path):
    green = _part(tmp_path, "green", "## gemmguard: CPU: passed\n")
    red = _part(tmp_path, "red", "## gemmguard: CPU: **failed**\n")
    with fake_github.serve(existing=3) as (url, api):
        quiet = _comment(url, green, "--section=CPU", "--run=1", "--sha=aaa", "--mode=alert", "--verdict=pass")
        assert quiet.returncode == 0 and "no comment: this job passed" in quiet.stdout, quiet.stdout + quiet.stderr
        assert _ours(api) == [] and not any(c.startswith(("POST", "PATCH")) for c in api.calls)
        made = _comment(url, red, "--section=CPU", "--run=2", "--sha=bbb", "--mode=alert", "--verdict=fail")
        assert made.returncode == 0 and "created pull request comment" in made.stdout, made.stdout + made.stderr
        # The fix: the comment exists, so alert updates it and it turns green; still one comment.
        fixed = _comment(url, green, "--section=CPU", "--run=3", "--sha=ccc", "--mode=alert", "--verdict=pass")
        assert fixed.returncode == 0 and "updated pull request comment" in fixed.stdout
        (comment,) = _ours(api)
        assert "CPU: passed" in comment["body"] and "failed" not in comment["body"]


def test_each_job_keeps_its_section_and_an_older_run_never_overwrites_a_newer_one(tmp_path):
    with fake_github.serve(existing=0) as (url, api):
        cpu = _part(tmp_path, "cpu", "## gemmguard: CPU: passed\n")
        gpu = _part(tmp_path, "gpu", "## gemmguard: GPU: **failed**\n")
        assert _comment(url, cpu, "--section=CPU (aten, cpp)", "--run=5", "--sha=new").returncode == 0
        assert _comment(url, gpu, "--section=GPU", "--run=4", "--sha=old").returncode == 0
        (comment,) = _ours(api)
        sections = parse_sections(comment["body"])
        assert [(s.key, s.run, s.sha) for s in sections] == [("cpu-aten-cpp", 5, "new"), ("gpu", 4, "old")]
        assert "_(results of an earlier commit, old: this job has not reported on new yet)_" in comment["body"]
        # Run 4's CPU job finishing late (it was slow, not cancelled) must not undo run 5's section.
        late = _part(tmp_path, "late", "## gemmguard: CPU: **failed** (stale)\n")
        proc = _comment(url, late, "--section=CPU (aten, cpp)", "--run=4", "--sha=old")
        assert "comment left as it is: run 5 wrote this section, after this run (4)" in proc.stdout
        (comment,) = _ours(api)
        assert "stale" not in comment["body"] and "CPU: passed" in comment["body"]


def test_a_fork_gets_a_notice_and_a_refused_token_a_warning_never_a_failed_job(tmp_path):
    part = _part(tmp_path, "cpu", "## gemmguard: CPU: **failed**\n")
    with fake_github.serve(existing=0) as (url, api):
        fork = _comment(url, part, "--section=CPU", "--run=1", "--head-repo=stranger/gemmlib")
        assert fork.returncode == 0 and fork.stdout.startswith("::notice title=gemmguard::gemmguard: a fork's pull")
        assert api.calls == []  # not even a read: the token of a fork's run is read-only
        refused = _comment(url, part, "--section=CPU", "--run=1", token="wrong-token")
        assert refused.returncode == 0, refused.stdout + refused.stderr
        assert refused.stdout.startswith("::warning title=gemmguard%3A no comment::gemmguard: GitHub API GET ")
        assert "HTTP 401" in refused.stdout and _ours(api) == []
