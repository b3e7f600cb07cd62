"""The sticky pull-request comment: one per pull request, found again by its hidden marker and edited, never
posted twice; its body is each job's summary part."""

from __future__ import annotations

import json
import os
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
    base = f"{api_url.rstrip('/')}/repos/{repo}"
    page = 1
    while True:
        comments = _api("GET", f"{base}/issues/{pr}/comments?per_page=100&page={page}", token)
        for comment in comments or []:
            if (comment.get("body") or "").startswith(MARKER):
                _api("PATCH", f"{base}/issues/comments/{comment['id']}", token, {"body": body})
                return "updated", int(comment["id"])
        if not comments or len(comments) < 100:
            break
        page += 1
    created = _api("POST", f"{base}/issues/{pr}/comments", token, {"body": body})
    return "created", int(created["id"])
