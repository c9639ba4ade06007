"""The text-hint mask: hide earlier ``mark_point`` pixel coordinates from the history.

Many episodes share similar layouts, so a model can learn to copy the pixel coordinates of
earlier ``robot.mark_point(handle, camera, u, v, ...)`` calls instead of reading the image.
During SFT each such call in the *history* (assistant turns before the last supervised turn
that are not supervised themselves) has its numeric ``u, v`` arguments replaced by
``<masked>`` with probability ``p`` (0.2 in the paper). Supervised turns are never changed:
they are the targets.

Coordinates are found with Python's parser (calls named ``mark_point``, positional arguments
3 and 4 or keywords ``u``/``v``, numeric literals only); code that does not parse falls back
to a regular expression for the literal form ``mark_point(<handle>, <camera>, <u>, <v>``.
"""

from __future__ import annotations

import ast
import random
import re
from typing import Any

MASK_TEXT = "<masked>"
DEFAULT_HINT_MASK_PROBABILITY = 0.2

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_FALLBACK_CALL = re.compile(
    r"mark_point\s*\(\s*[^,()]+(?:\([^()]*\)[^,()]*)?\s*,\s*[^,()]+\s*,\s*"
    rf"(?P<u>{_NUMBER})\s*,\s*(?P<v>{_NUMBER})(?=\s*[,)])"
)


def _is_numeric_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        node = node.operand
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool))


def _is_mark_point(func: ast.AST) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "mark_point") or (
        isinstance(func, ast.Name) and func.id == "mark_point")


def mark_point_coordinate_spans(code: str) -> list[list[tuple[int, int]]]:
    """Character spans ``(start, end)`` of the numeric u/v arguments, one list per ``mark_point`` call.

    Calls are returned in source order; a call whose coordinates are not numeric literals
    (variables, expressions) has no spans and is left out.
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return [[m.span("u"), m.span("v")] for m in _FALLBACK_CALL.finditer(code)]
    encoded = code.encode("utf-8")
    line_starts = [0]
    for index, byte in enumerate(encoded):
        if byte == 0x0A:
            line_starts.append(index + 1)

    def char_offset(lineno: int, col_offset: int) -> int:
        return len(encoded[: line_starts[lineno - 1] + col_offset].decode("utf-8"))

    calls: list[tuple[int, list[tuple[int, int]]]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _is_mark_point(node.func):
            continue
        coordinates = list(node.args[2:4])
        coordinates += [k.value for k in node.keywords if k.arg in ("u", "v")]
        spans = [
            (char_offset(c.lineno, c.col_offset), char_offset(c.end_lineno, c.end_col_offset))
            for c in coordinates
            if _is_numeric_literal(c) and c.end_lineno is not None and c.end_col_offset is not None
        ]
        if spans:
            calls.append((char_offset(node.lineno, node.col_offset), sorted(spans)))
    calls.sort(key=lambda c: c[0])
    return [spans for _, spans in calls]


def mask_code(code: str, rng: random.Random, probability: float) -> tuple[str, int]:
    """Mask the coordinates of each ``mark_point`` call of ``code`` with ``probability``.

    Returns the new code and the number of calls masked.
    """
    calls = mark_point_coordinate_spans(code)
    chosen = [spans for spans in calls if rng.random() < probability]
    if not chosen:
        return code, 0
    spans = sorted((s for call in chosen for s in call), reverse=True)
    for start, end in spans:
        code = code[:start] + MASK_TEXT + code[end:]
    return code, len(chosen)


def history_turns(n_turns: int, supervised_turns: tuple[int, ...]) -> list[int]:
    """Assistant ordinals the mask may change: before the last supervised turn, not supervised."""
    if not supervised_turns:
        return []
    last = max(supervised_turns)
    keep = set(supervised_turns)
    return [t for t in range(min(last, n_turns)) if t not in keep]


def apply_text_hint_mask(
    messages: list[dict[str, Any]],
    supervised_turns: tuple[int, ...],
    rng: random.Random,
    probability: float = DEFAULT_HINT_MASK_PROBABILITY,
) -> tuple[list[dict[str, Any]], int]:
    """Return the messages with history ``mark_point`` coordinates masked, and how many calls were.

    Only string arguments of tool calls (the Python source) in history assistant turns
    change; the input list and its messages are not modified.
    """
    if probability <= 0 or not supervised_turns:
        return messages, 0
    assistant_indices = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    targets = {assistant_indices[t] for t in history_turns(len(assistant_indices), supervised_turns)}
    out = list(messages)
    total = 0
    for index in sorted(targets):
        message = messages[index]
        calls = message.get("tool_calls")
        if not isinstance(calls, list):
            continue
        new_calls = []
        changed = False
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if isinstance(arguments, dict):
                new_arguments = {}
                for name, value in arguments.items():
                    if isinstance(value, str) and "mark_point" in value:
                        value, n = mask_code(value, rng, probability)
                        total += n
                        changed = changed or n > 0
                    new_arguments[name] = value
                call = {**call, "function": {**function, "arguments": new_arguments}}
            new_calls.append(call)
        if changed:
            out[index] = {**message, "tool_calls": new_calls}
    return out, total


def row_rng(seed: int, epoch: int, row_key: str) -> random.Random:
    """The deterministic random stream of one row in one epoch (same on every run and rank)."""
    return random.Random(f"captain-hint-mask:{seed}:{epoch}:{row_key}")
