"""The sticky pull-request comment: one per pull request, found again by its hidden marker and edited, never
posted twice. Each job of the gate writes its own section of it (`upsert_section`, from the action's last
step), or a separate job writes the whole body from every job's part (`comment_body`, the `workflow_run` path
of a fork's pull request)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from ..errors import GemmguardError

MARKER = "<!-- gemmguard-report -->"  # first line of the sticky comment: how the commenter finds its own
MAX_COMMENT_CHARS = 60000  # GitHub refuses comment bodies over 65536 characters


def comment_body(parts: Sequence[str], jobs: str = "") -> str:
    """The marker the commenter searches for, each job's result ('cpu=success gpu=failure': a job that failed
    before writing its summary still shows), then each job's summary."""
    head = [MARKER]
    if jobs.strip():
        results = [pair.partition("=") for pair in jobs.split()]
        head.append("**gemmguard** jobs: " + ", ".join(f"{name} {result or '?'}" for name, _, result in results))
    body = "\n".join(head) + "\n\n" + "\n\n".join(p.strip() for p in parts if p.strip()) + "\n"
    if len(body) > MAX_COMMENT_CHARS:
        body = body[: MAX_COMMENT_CHARS - 200] + "\n\n… (cut: the full report is in the job summary and artifacts)\n"
    return body


def read_parts(paths: Sequence[str]) -> list[str]:
    """The Markdown parts: each file named, and every .md file under each directory named, in name order."""
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            for dirpath, _dirs, names in sorted(os.walk(path)):
                files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".md")]
        elif os.path.isfile(path):
            files.append(path)
    texts = []
    for name in files:
        with open(name, encoding="utf-8") as fh:
            texts.append(fh.read())
    return texts


def _api(method: str, url: str, token: str, body: dict | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Accept", "application/vnd.github+json")
    request.add_header("X-GitHub-Api-Version", "2022-11-28")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise GemmguardError(f"gemmguard: GitHub API {method} {url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise GemmguardError(f"gemmguard: GitHub API {method} {url}: {exc.reason}") from None


def upsert_comment(api_url: str, repo: str, pr: int, body: str, token: str) -> tuple[str, int]:
    """Edit the pull request's gemmguard comment (the first one whose body starts with the marker), or create it
    when there is none: one comment per pull request, however many runs. Returns ('updated'|'created', id)."""
    return _write(api_url, repo, pr, _find(api_url, repo, pr, token), body, token)


def _write(api_url: str, repo: str, pr: int, found: dict | None, body: str, token: str) -> tuple[str, int]:
    """Edit the comment `found`, or create one when it is None. Returns ('updated'|'created', id)."""
    base = f"{api_url.rstrip('/')}/repos/{repo}"
    if found is not None:
        _api("PATCH", f"{base}/issues/comments/{found['id']}", token, {"body": body})
        return "updated", int(found["id"])
    created = _api("POST", f"{base}/issues/{pr}/comments", token, {"body": body})
    return "created", int(created["id"])


# A job's section: `<!-- gemmguard-section KEY run=N sha=SHA -->` ... `<!-- /gemmguard-section KEY -->`. The run
# number orders writers: a section is never replaced by an older run's (a cancelled or slow run finishing late).
_SECTION = re.compile(
    r"<!-- gemmguard-section (?P<key>[\w.-]+) run=(?P<run>\d+) sha=(?P<sha>\w*) -->\n(?P<text>.*?)"
    r"\n<!-- /gemmguard-section (?P=key) -->",
    re.S,
)


@dataclasses.dataclass
class Section:
    key: str
    run: int
    sha: str
    text: str


def section_key(title: str) -> str:
    return re.sub(r"[^\w.-]+", "-", title).strip("-").lower() or "gemmguard"


def parse_sections(body: str) -> list[Section]:
    return [Section(m["key"], int(m["run"]), m["sha"], m["text"]) for m in _SECTION.finditer(body)]


def sections_body(sections: Sequence[Section]) -> str:
    """The comment: the marker, then each section; a section of an older commit than the newest says so."""
    newest = max(sections, key=lambda s: s.run).sha if sections else ""
    out = [MARKER]
    for s in sections:
        stale = f"\n\n_(results of an earlier commit, {s.sha[:10]}: this job has not reported on {newest[:10]} yet)_"
        text = s.text.strip() + (stale if s.sha and newest and s.sha != newest else "")
        head = f"<!-- gemmguard-section {s.key} run={s.run} sha={s.sha} -->"
        out.append(f"{head}\n{text}\n<!-- /gemmguard-section {s.key} -->")
    body = "\n\n".join(out) + "\n"
    if len(body) > MAX_COMMENT_CHARS:
        body = body[: MAX_COMMENT_CHARS - 200] + "\n\n… (cut: the full report is in the job summary and artifacts)\n"
    return body


def _find(api_url: str, repo: str, pr: int, token: str) -> dict | None:
    base = f"{api_url.rstrip('/')}/repos/{repo}"
    page = 1
    while True:
        comments = _api("GET", f"{base}/issues/{pr}/comments?per_page=100&page={page}", token)
        for comment in comments or []:
            if (comment.get("body") or "").startswith(MARKER):
                return comment
        if not comments or len(comments) < 100:
            return None
        page += 1


def upsert_section(
    api_url: str, repo: str, pr: int, new: Section, token: str, *, alert_only: bool, alarming: bool
) -> str:
    """Put one job's section into the pull request's gemmguard comment. alert_only: create the comment only
    when `alarming` (something failed), but always update one that exists, so a red comment turns green.
    Returns what was done, one line."""
    found = _find(api_url, repo, pr, token)
    if found is None and alert_only and not alarming:
        return "no comment: this job passed and there is none to update (comment: alert)"
    sections = parse_sections(found["body"]) if found else []
    for i, old in enumerate(sections):
        if old.key == new.key:
            if old.run > new.run:
                return f"comment left as it is: run {old.run} wrote this section, after this run ({new.run})"
            sections[i] = new
            break
    else:
        sections.append(new)
    how, number = _write(api_url, repo, pr, found, sections_body(sections), token)
    return f"{how} pull request comment {number}"
