"""The ``robot`` module of the sandboxed session.

Inside the session this file is importable as ``robot`` and is pre-imported. Every
policy-facing call (``robot.observe()``, ``robot.move_to(...)``, ``robot.finish()``)
is sent as one JSON message over the session's narrow channel to the harness host,
which runs it through the ``RobotAPI`` (or the completion gate for ``finish``) and
answers with the result dict; the receipt line is added to the cell output by the
host. Calls never raise: a lost host is reported as a failed result dict.

Arguments must be JSON-like: numbers, strings, lists, dicts, ``None``; numpy arrays
and numpy scalars are converted to lists and numbers. Arguments past the channel's
bounds (nesting, integer size, encoded size) give an ``invalid_argument`` result dict.
Calls are answered only while a cell runs: a thread an earlier cell left running gets a
refusal, never another cell's messages.

The file uses only the standard library (it is loaded in the sandbox, where the
harness package is not importable).
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

try:  # inside the sandbox the channel module is installed next to this file
    from _captain_channel import ArgumentBoundError, encode_call_arguments  # type: ignore
except ImportError:  # on the host (tests, in-process use)
    from captain_harness.core.episode.channel import ArgumentBoundError, encode_call_arguments

_RESULT_KEYS = ("success", "executed", "failure_category", "message", "value", "diagnostics", "budget")

#: link: the kernel's channel end (``request(message)``); cell: the running cell's number
#: (None between cells); publish: the kernel's copier of host-published files.
_state: dict[str, Any] = {"link": None, "next_id": 0, "names": [], "wait_s": 0.0, "cell": None,
                          "publish": None}
_id_lock = threading.Lock()


def _failure(message: str, category: str = "internal_error") -> dict[str, Any]:
    return {"success": False, "executed": False, "failure_category": category, "message": message,
            "value": None, "diagnostics": {}, "budget": {}}


def _call(name: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Send one call and wait for its result (SIGINT is held back while the call is in flight,
    so an interrupt never cuts a message in half; it is delivered when the call returns)."""
    link = _state["link"]
    if link is None:
        return _failure("the robot client is not connected to the harness")
    cell = _state["cell"]
    if cell is None:
        time.sleep(0.05)  # a thread calling in a loop between cells does not spin
        return _failure(f"{name}(): robot calls are answered only while a cell runs (this call came from a "
                        "thread an earlier cell left running)", "cancelled")
    try:
        plain_args, plain_kwargs = encode_call_arguments(args, kwargs)
    except ArgumentBoundError as exc:
        return _failure(f"{name}(): {exc}; pass numbers, strings, lists and dicts", "invalid_argument")
    with _id_lock:
        _state["next_id"] += 1
        call_id = _state["next_id"]
    payload = {"op": "call", "id": call_id, "cell": cell, "name": name, "args": plain_args,
               "kwargs": plain_kwargs}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    started = time.perf_counter()
    try:
        message = link.request(payload)
        if message is not None and _state["publish"] is not None and message.get("publish"):
            _state["publish"](message.get("publish"))
    finally:
        _state["wait_s"] += time.perf_counter() - started
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    if message is None:
        return _failure("the harness host is not reachable; the session cannot reach the robot")
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


def _install(link: Any, specs: list[dict[str, Any]]) -> None:
    """Connect the module to the kernel's channel end and define one function per robot call.

    ``specs`` items have ``name``, ``signature`` (text such as ``"(duration_s=1.0)"``) and
    ``doc``.
    """
    _state["link"] = link
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
