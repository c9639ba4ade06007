"""The robot calls a harness serves, as plain data, and proxies rebuilt from that data.

``describe_calls(api)`` turns a ``RobotAPI``'s registered primitives into JSON-able
entries (name, physical, group, docstring and each parameter's name, kind, annotation
text and default ``repr``). ``proxy_function(entry, send)`` rebuilds a function with the
same signature and docstring that forwards ``(name, args, kwargs)`` to ``send``, so a
remote ``RobotAPI`` binds arguments, renders TASK.md and the session's ``robot`` module
exactly as the in-process one does. Defaults are restored with ``ast.literal_eval``
(primitive defaults are literals); nothing is executed. ROS-free.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

from captain_harness.core.api import RobotAPI
from captain_harness.core.results import CallOutcome

#: ``send(name, args, kwargs) -> CallOutcome``
Sender = Callable[[str, tuple, dict], CallOutcome]

_KINDS = {k.name: k for k in inspect._ParameterKind}


def describe_calls(api: RobotAPI) -> list[dict[str, Any]]:
    """One JSON-able entry per registered call, sorted by name."""
    entries = []
    for name in api.names():
        spec = api.specs[name]
        params = []
        for p in spec.signature.parameters.values():
            item: dict[str, Any] = {"name": p.name, "kind": p.kind.name}
            if p.annotation is not inspect.Parameter.empty:
                item["annotation"] = (p.annotation if isinstance(p.annotation, str)
                                      else inspect.formatannotation(p.annotation))
            if p.default is not inspect.Parameter.empty:
                item["default"] = repr(p.default)
            params.append(item)
        entries.append({"name": name, "physical": spec.physical, "group": spec.group, "doc": spec.doc,
                        "parameters": params})
    return entries


def signature_of(entry: dict[str, Any]) -> inspect.Signature:
    """The call signature described by an entry of ``describe_calls``."""
    params = []
    for item in entry.get("parameters", []):
        kind = _KINDS.get(str(item.get("kind")), inspect.Parameter.POSITIONAL_OR_KEYWORD)
        default = inspect.Parameter.empty
        if "default" in item:
            try:
                default = ast.literal_eval(item["default"])
            except (ValueError, SyntaxError):
                default = None
        annotation = item.get("annotation", inspect.Parameter.empty)
        params.append(inspect.Parameter(item["name"], kind, default=default, annotation=annotation))
    return inspect.Signature(params)


def proxy_function(entry: dict[str, Any], send: Sender) -> Callable[..., CallOutcome]:
    """A function with the entry's name, signature and docstring that forwards its bound
    positional and keyword arguments to ``send``."""
    name = str(entry["name"])
    signature = signature_of(entry)

    def call(*args: Any, **kwargs: Any) -> CallOutcome:
        return send(name, args, kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = entry.get("doc") or None
    call.__signature__ = signature  # type: ignore[attr-defined]
    return call


def register_proxies(api: RobotAPI, entries: list[dict[str, Any]], send: Sender) -> list[str]:
    """Register one proxy per entry with ``api`` (physical flag and group kept)."""
    for entry in entries:
        api.register(entry["name"], proxy_function(entry, send), physical=bool(entry.get("physical")),
                     group=str(entry.get("group", "")))
    return [e["name"] for e in entries]
