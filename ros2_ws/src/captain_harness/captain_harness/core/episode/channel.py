"""The narrow channel between the sandboxed session and the harness host.

Length-prefixed JSON messages over a stream socket (a unix socket pair whose session
end is inherited by the sandboxed process). This is the only way from the session to
the host: the session sends ``call`` messages (a robot call by name with JSON
arguments) and reads back ``result`` messages (the result dict and its receipt); the
host sends ``init``/``exec`` messages and reads ``ready``/``done``. No object, file or
handle of the host crosses it.

Frame: a 4-byte big-endian length, then that many bytes of UTF-8 JSON (one object).

Text is sanitised here, once, at the boundary: a lone surrogate (which UTF-8 cannot
hold) is replaced by U+FFFD on the way out and on the way in, so no string with one ever
reaches the other side, the records or the policy.

This module uses only the standard library: the same file runs inside the sandbox.
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import struct
import time
from typing import Any

_HEADER = struct.Struct(">I")

#: Largest accepted message, bytes. Larger frames are a protocol violation.
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: Largest JSON encoding of one robot call's arguments, bytes.
MAX_CALL_ARGUMENT_BYTES = 1024 * 1024
#: Deepest nesting of robot-call arguments.
MAX_ARGUMENT_DEPTH = 32
#: Integers must be smaller than this in magnitude (larger ones overflow a float).
MAX_ARGUMENT_INT = 2**1024

_SURROGATE = re.compile("[\ud800-\udfff]")


class ChannelClosedError(Exception):
    """The other end closed the channel (or the process behind it died)."""


class ProtocolViolationError(Exception):
    """A frame was malformed: too long, not JSON, or not a JSON object."""


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (UTF-8 cannot encode them)."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)


def clean(value: Any, _depth: int = 0) -> Any:
    """``value`` (JSON-like) with every string, dict keys included, passed through ``clean_text``."""
    if isinstance(value, str):
        return clean_text(value)
    if _depth > 200:
        return value
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v, _depth + 1) for v in value]
    return value


class ArgumentBoundError(ValueError):
    """A robot-call argument outside what the channel carries (one-line reason)."""


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """Plain JSON types for robot-call arguments: numpy arrays and scalars become lists
    and numbers, tuples become lists, other objects their ``str``. Non-finite floats are
    kept (the host validates them and answers with a precise failure).

    Raises:
        ArgumentBoundError: nesting deeper than ``MAX_ARGUMENT_DEPTH`` or an integer of
            magnitude ``MAX_ARGUMENT_INT`` or more.
    """
    if _depth > MAX_ARGUMENT_DEPTH:
        raise ArgumentBoundError(f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not -MAX_ARGUMENT_INT < value < MAX_ARGUMENT_INT:
            raise ArgumentBoundError("an integer argument is 2**1024 or more in magnitude; pass a number a "
                                     "float can hold")
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, dict):
        return {_key(k): to_jsonable(v, _depth + 1) for k, v in value.items()}
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


def _key(key: Any) -> str:
    if isinstance(key, int) and not isinstance(key, bool) and not -MAX_ARGUMENT_INT < key < MAX_ARGUMENT_INT:
        raise ArgumentBoundError("a dict key is an integer of 2**1024 or more in magnitude")
    try:
        return str(key)
    except ValueError as exc:  # e.g. an int too long to print
        raise ArgumentBoundError(f"a dict key cannot be turned into text ({exc})") from exc


def encode_call_arguments(args: Any, kwargs: Any) -> tuple[Any, Any]:
    """``(args, kwargs)`` as plain JSON values within the channel's bounds (depth, integer
    size, ``MAX_CALL_ARGUMENT_BYTES`` encoded).

    Raises:
        ArgumentBoundError: with a one-line reason.
    """
    try:
        plain = (to_jsonable(list(args)), to_jsonable(dict(kwargs)))
        size = len(json.dumps(plain, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))
    except ArgumentBoundError:
        raise
    except RecursionError as exc:
        raise ArgumentBoundError("arguments nest too deeply") from exc
    except (ValueError, TypeError, OverflowError) as exc:
        raise ArgumentBoundError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    if size > MAX_CALL_ARGUMENT_BYTES:
        raise ArgumentBoundError(f"arguments take {size} bytes as JSON, more than {MAX_CALL_ARGUMENT_BYTES}")
    return plain


def _encode(message: dict[str, Any]) -> bytes:
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=str)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate somewhere: replace it, never fail the send
        return clean_text(text).encode("utf-8")


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
        try:
            data = _encode(message)
        except (ValueError, TypeError, RecursionError) as exc:
            raise ProtocolViolationError(f"message cannot be encoded as JSON: {exc}") from exc
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
        return clean(message)

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
