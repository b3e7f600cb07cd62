"""A loopback stand-in for the three GitHub REST endpoints the sticky comment uses (GitHub cannot be reached
from here): list a pull request's comments (paginated), create one, edit one. It checks the token and keeps
the comments, so a test can count them.
"""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

TOKEN = "secret-token"


class _FakeGitHub(BaseHTTPRequestHandler):
    """A loopback stand-in for the three REST endpoints the commenter uses (GitHub cannot be reached here)."""

    comments: ClassVar[list[dict]] = []
    calls: ClassVar[list[str]] = []

    def _reply(self, code: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._reply(401, {"message": "Bad credentials"})
            return False
        return True

    def do_GET(self):
        self.calls.append(f"GET {self.path}")
        if not self._authorized():
            return
        query = dict(p.split("=") for p in self.path.split("?", 1)[1].split("&"))
        per, page = int(query["per_page"]), int(query["page"])
        self._reply(200, self.comments[(page - 1) * per : page * per])

    def do_POST(self):
        self.calls.append(f"POST {self.path}")
        if self._authorized():
            comment = {"id": 1000 + len(self.comments), "body": self._body()["body"]}
            self.comments.append(comment)
            self._reply(201, comment)

    def do_PATCH(self):
        self.calls.append(f"PATCH {self.path}")
        if self._authorized():
            number = int(self.path.rsplit("/", 1)[1])
            comment = next(c for c in self.comments if c["id"] == number)
            comment["body"] = self._body()["body"]
            self._reply(200, comment)

    def log_message(self, *args):  # keep the test output clean
        pass


@contextlib.contextmanager
def serve(existing: int = 120):
    """Serve on 127.0.0.1 with `existing` unrelated comments (120: two pages); yields (url, the handler class)."""
    _FakeGitHub.comments = [{"id": i, "body": f"an unrelated comment {i}"} for i in range(existing)]
    _FakeGitHub.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeGitHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _FakeGitHub
    finally:
        server.shutdown()
        server.server_close()
