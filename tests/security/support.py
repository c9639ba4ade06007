"""Support for the containment battery: the real sandbox, real episodes on the mock driver
with the real perception ``observe()``, and a raw chat-completions endpoint."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from captain_harness.core.episode.isolation import bwrap_available

HAS_BWRAP = bwrap_available()
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap cannot create namespaces here")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the session's own uid needs a root host")


def digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def make_canary(folder: Path, name: str = "canary.txt") -> tuple[Path, str]:
    """A file outside every sandbox, and its digest."""
    path = Path(folder) / name
    path.write_bytes(b"host file that no cell may change\n" * 64)
    return path, digest(path)


def plant(path: Path, kind: str, target: Path | None = None) -> bool:
    """Put a ``kind`` entry at ``path`` (as the host, which can do more than a cell):
    symlink, hardlink, fifo, device, directory. False when the machine does not allow it."""
    path = Path(path)
    if path.is_symlink() or path.exists():
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()
    try:
        if kind == "symlink":
            os.symlink(target, path)
        elif kind == "hardlink":
            os.link(target, path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "device":
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null
        elif kind == "directory":
            path.mkdir()
        else:
            raise ValueError(kind)
    except PermissionError:
        return False
    return True


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file, parsed (raises on a broken record)."""
    with Path(path).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def check_records(record_dir: Path) -> dict[str, Any]:
    """The outcome of an episode folder, after checking that rows and events parse and
    rows carry the final success field; returns the outcome dict."""
    record_dir = Path(record_dir)
    outcome = json.loads((record_dir / "outcome.json").read_text(encoding="utf-8"))
    rows = read_jsonl(record_dir / "rows.jsonl")
    events = read_jsonl(record_dir / "events.jsonl")
    assert len(rows) == len(events) <= outcome["requests"]  # a request the policy failed has no row
    for row in rows:
        assert row["messages"][-1]["role"] == "assistant"
        assert "host_final_success" in row["meta"]
    return outcome


class RawChatServer:
    """An OpenAI-compatible endpoint that answers every request with fixed raw bytes."""

    def __init__(self, body: bytes) -> None:
        payload = body

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> RawChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
