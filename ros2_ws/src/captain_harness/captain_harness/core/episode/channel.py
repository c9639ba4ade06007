"""The narrow channel between the sandboxed session and the harness host.

Length-prefixed JSON messages over a stream socket (a unix socket pair whose session
end is inherited by the sandboxed process). This is the only way from the session to
the host: the session sends ``call`` messages (a robot call by name with JSON
arguments) and reads back ``result`` messages (the result dict and its receipt); the
host sends ``init``/``exec`` messages and reads ``ready``/``done``. No object, file or
handle of the host crosses it.

Frame: a 4-byte big-endian length, then that many bytes of UTF-8 JSON (one object).

This module uses only the standard library: the same file runs inside the sandbox.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import time
from typing import Any

_HEADER = struct.Struct(">I")

#: Largest accepted message, bytes. Larger frames are a protocol violation.
MAX_MESSAGE_BYTES = 32 * 1024 * 1024


class ChannelClosedError(Exception):
    """The other end closed the channel (or the process behind it died)."""


class ProtocolViolationError(Exception):
    """A frame was malformed: too long, not JSON, or not a JSON object."""


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """Plain JSON types for robot-call arguments: numpy arrays and scalars become lists
    and numbers, tuples become lists, other objects their ``str``. Non-finite floats are
    kept (the host validates them and answers with a precise failure)."""
    if _depth > 32:
        raise ValueError("argument nests deeper than 32 levels")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, _depth + 1) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy arrays and numpy scalars
    if callable(tolist):
        return to_jsonable(tolist(), _depth + 1)
    if hasattr(value, "__fspath__"):
        return str(value.__fspath__())
    if hasattr(value, "__float__"):
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    return str(value)


class Channel:
    """One end of the channel. Not thread-safe: callers serialise sends and receives."""

    def __init__(self, sock: socket.socket, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.sock = sock
        self.sock.setblocking(True)
        self.max_message_bytes = max_message_bytes
        self._buffer = bytearray()

    def fileno(self) -> int:
        """The socket's file descriptor (for select)."""
        return self.sock.fileno()

    def send(self, message: dict[str, Any]) -> None:
        """Send one message. Raises ChannelClosedError if the other end is gone."""
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")
        if len(data) > self.max_message_bytes:
            raise ProtocolViolationError(f"message of {len(data)} bytes exceeds {self.max_message_bytes}")
        try:
            self.sock.sendall(_HEADER.pack(len(data)) + data)
        except (BrokenPipeError, ConnectionResetError, OSError) as exc:
            raise ChannelClosedError(str(exc)) from exc

    def recv(self, timeout_s: float | None = None) -> dict[str, Any] | None:
        """The next message, or None when ``timeout_s`` passes first (None: wait forever).

        Raises:
            ChannelClosedError: the other end closed the channel.
            ProtocolViolationError: a malformed frame.
        """
        deadline = None if timeout_s is None else time.monotonic() + max(0.0, timeout_s)
        if not self._fill(_HEADER.size, deadline):
            return None
        (length,) = _HEADER.unpack(bytes(self._buffer[: _HEADER.size]))
        if length > self.max_message_bytes:
            raise ProtocolViolationError(f"frame of {length} bytes exceeds {self.max_message_bytes}")
        if not self._fill(_HEADER.size + length, deadline):
            return None
        payload = bytes(self._buffer[_HEADER.size: _HEADER.size + length])
        del self._buffer[: _HEADER.size + length]
        try:
            message = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ProtocolViolationError(f"frame is not UTF-8 JSON: {exc}") from exc
        if not isinstance(message, dict):
            raise ProtocolViolationError(f"frame is a JSON {type(message).__name__}, not an object")
        return message

    def _fill(self, n: int, deadline: float | None) -> bool:
        """Read until the buffer holds ``n`` bytes; False on timeout (buffer kept)."""
        while len(self._buffer) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                ready, _, _ = select.select([self.sock], [], [], left)
                if not ready:
                    return False
            try:
                chunk = self.sock.recv(max(65536, n - len(self._buffer)))
            except (ConnectionResetError, OSError) as exc:
                raise ChannelClosedError(str(exc)) from exc
            if not chunk:
                raise ChannelClosedError("the other end closed the channel")
            self._buffer.extend(chunk)
        return True

    def close(self) -> None:
        """Close this end."""
        with contextlib.suppress(OSError):
            self.sock.close()
