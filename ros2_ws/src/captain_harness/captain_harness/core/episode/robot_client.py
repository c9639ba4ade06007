"""The ``robot`` module of the sandboxed session.

Inside the session this file is importable as ``robot`` and is pre-imported. Every
policy-facing call (``robot.observe()``, ``robot.move_to(...)``, ``robot.finish()``)
is sent as one JSON message over the session's narrow channel to the harness host,
which runs it through the ``RobotAPI`` (or the completion gate for ``finish``) and
answers with the result dict; the receipt line is added to the cell output by the
host. Calls never raise: a lost host is reported as a failed result dict.

Arguments must be JSON-like: numbers, strings, lists, dicts, ``None``; numpy arrays
and numpy scalars are converted to lists and numbers.

The file uses only the standard library (it is loaded in the sandbox, where the
harness package is not importable).
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

try:  # inside the sandbox the channel module is installed next to this file
    from _captain_channel import ChannelClosedError, ProtocolViolationError, to_jsonable  # type: ignore
except ImportError:  # on the host (tests, in-process use)
    from captain_harness.core.episode.channel import ChannelClosedError, ProtocolViolationError, to_jsonable

_RESULT_KEYS = ("success", "executed", "failure_category", "message", "value", "diagnostics", "budget")

_state: dict[str, Any] = {"channel": None, "next_id": 0, "names": [], "wait_s": 0.0}
_lock = threading.Lock()


def _failure(message: str, category: str = "internal_error") -> dict[str, Any]:
    return {"success": False, "executed": False, "failure_category": category, "message": message,
            "value": None, "diagnostics": {}, "budget": {}}


def _call(name: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Send one call and wait for its result (SIGINT is held back while the call is in flight,
    so an interrupt never cuts a message in half; it is delivered when the call returns)."""
    channel = _state["channel"]
    if channel is None:
        return _failure("the robot client is not connected to the harness")
    try:
        payload = {"op": "call", "name": name, "args": to_jsonable(list(args)), "kwargs": to_jsonable(kwargs)}
    except (ValueError, TypeError, RecursionError) as exc:
        return _failure(f"{name}(): arguments are not JSON-like ({exc}); pass numbers, strings, lists, dicts",
                        "invalid_argument")
    with _lock:
        _state["next_id"] += 1
        call_id = _state["next_id"]
        payload["id"] = call_id
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        started = time.perf_counter()
        try:
            channel.send(payload)
            while True:
                message = channel.recv()
                if message is None:
                    continue
                if message.get("op") == "result" and message.get("id") == call_id:
                    break
        except (ChannelClosedError, ProtocolViolationError, OSError) as exc:
            return _failure(f"the harness host is not reachable ({exc}); the session cannot reach the robot")
        finally:
            _state["wait_s"] += time.perf_counter() - started
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    result = message.get("result")
    if not isinstance(result, dict):
        return _failure(f"the harness returned no result dict for {name}")
    for key in _RESULT_KEYS:
        result.setdefault(key, None)
    return result


def _make(name: str, signature: str = "(*args, **kwargs)", doc: str = "") -> Any:
    """A module-level function that forwards to the host, with the primitive's signature and
    docstring (so ``help(robot.move_to)`` shows the API reference)."""

    def call(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return _call(name, args, kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = doc or None
    call.__module__ = __name__
    try:  # give the function the primitive's signature for help() and inspect
        import inspect

        scope: dict[str, Any] = {}
        exec(f"def _sig{signature}: pass", {}, scope)
        call.__signature__ = inspect.signature(scope["_sig"])  # type: ignore[attr-defined]
    except Exception:  # a signature that does not parse keeps (*args, **kwargs)
        pass
    return call


def _install(channel: Any, specs: list[dict[str, Any]]) -> None:
    """Connect the module to the channel and define one function per robot call.

    ``specs`` items have ``name``, ``signature`` (text such as ``"(duration_s=1.0)"``) and
    ``doc``.
    """
    _state["channel"] = channel
    names = []
    for spec in specs:
        name = str(spec["name"])
        if not name.isidentifier() or name.startswith("_"):
            continue
        globals()[name] = _make(
            name, str(spec.get("signature") or "(*args, **kwargs)"), str(spec.get("doc") or "")
        )
        names.append(name)
    _state["names"] = sorted(names)


def __getattr__(name: str) -> Any:
    """Unknown public names are forwarded too; the host answers with the list of valid calls."""
    if name.startswith("_"):
        raise AttributeError(name)
    return _make(name)


def __dir__() -> list[str]:
    return list(_state["names"])
