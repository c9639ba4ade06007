"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests,
benchmarks and debugging the client path without a model.

``script`` is a list of responses (dicts) or of ``(status, body)`` tuples (errors),
served in order (past its end the server replies without tool calls), or a callable
``(request_body, n) -> response``. Received request bodies are kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(code: str | list[str] | None = None, reasoning: str = "thinking", content: str = "",
               prompt_tokens: int | None = 1000, token_ids: bool = False,
               finish_reason: str | None = None) -> dict[str, Any]:
    """A chat-completions response with one python tool call per code string; ``prompt_tokens``
    None leaves out the usage block; ``token_ids`` adds token ids and logprobs as vLLM returns them."""
    cells = [] if code is None else [code] if isinstance(code, str) else list(code)
    message: dict[str, Any] = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    if cells:
        message["tool_calls"] = [{"id": f"call_{i}_{abs(hash(c)) % 10**8}", "type": "function",
                                  "function": {"name": "python", "arguments": json.dumps({"input": c})}}
                                 for i, c in enumerate(cells)]
    choice: dict[str, Any] = {"index": 0, "message": message,
                              "finish_reason": finish_reason or ("tool_calls" if cells else "stop")}
    data: dict[str, Any] = {
        "id": "cmpl-1",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [choice],
    }
    if prompt_tokens is not None:
        data["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 50,
            "total_tokens": prompt_tokens + 50,
        }
    if token_ids:
        data["prompt_token_ids"] = list(range(7))
        choice["token_ids"] = [11, 12, 13]
        choice["logprobs"] = {
            "content": [
                {"token": "a", "logprob": -0.5},
                {"token": "b", "logprob": -0.25},
                {"token": "c", "logprob": -1.0},
            ]
        }
    return data


class ScriptedChatServer:
    """The scripted server (a context manager). See the module docstring."""

    def __init__(
        self, script: list[Any] | Callable[[dict[str, Any], int], Any], keep_requests: bool = True
    ) -> None:
        self.script = script
        self.keep_requests = keep_requests
        self.requests: list[dict[str, Any]] = []
        self.n = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                n = server.n
                server.n += 1
                if server.keep_requests:
                    server.requests.append(body)
                if callable(server.script):
                    reply = server.script(body, n)
                else:
                    reply = server.script[n] if n < len(server.script) else completion(None, content="done")
                status, payload = reply if isinstance(reply, tuple) else (200, reply)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
