"""A real local OpenAI-compatible chat-completions endpoint for tests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    """A chat-completions endpoint that records requests and answers a fixed text."""

    def __init__(self, answer: str, status: int = 200, raw: bytes | None = None) -> None:
        """``raw``: send these bytes as the body instead of a chat completion (a broken server)."""
        self.answer, self.status, self.requests, self.raw = answer, status, [], raw
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, dict(self.headers), body))
                reply = {"choices": [{"message": {"role": "assistant", "content": outer.answer}}]}
                data = json.dumps(reply).encode() if outer.raw is None else outer.raw
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
