"""The CaPtain-SFT-Data row format: structure checks and accessors.

One row is one JSON object (see ``/work/shared/reference/captain_sft_data_card.md``)::

    {"id": str, "images": [relative path, ...], "tools": [python tool schema] (agent rows),
     "messages": [{"role": "system"|"user"|"assistant"|"tool", "content": str | [part, ...], ...}],
     "meta": {"source": "agent"|"qapack", "turn_index" | "supervise_turns", "loss_weight", ...}}

A content part is ``{"type": "text", "text": str}`` or ``{"type": "image", "image": path}``.
Assistant messages may carry ``reasoning_content`` (the thinking) and ``tool_calls``
(``{"type": "function", "function": {"name": "python", "arguments": {"input": source}}}``).

Assistant turns are numbered by *ordinal*: 0 for the first assistant message of the row,
1 for the next, and so on. ``meta.turn_index`` (per-request rows) is the ordinal of the last
assistant turn; ``meta.supervise_turns`` (prefix-packed rows) lists the supervised ordinals.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from typing import Any

VALID_ROLES = ("system", "user", "assistant", "tool")
VALID_SOURCES = ("agent", "qapack")
VALID_PART_TYPES = ("text", "image")


def content_parts(content: Any) -> list[dict[str, Any]]:
    """The content of a message as a list of parts (a string becomes one text part)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def iter_image_parts(messages: list[dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(message index, image part) for every image of the messages, in order of appearance."""
    for index, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "image":
                    yield index, part


def image_refs(messages: list[dict[str, Any]]) -> list[str]:
    """Image paths of the messages in order of appearance."""
    return [str(part.get("image")) for _, part in iter_image_parts(messages)]


def assistant_message_indices(messages: list[dict[str, Any]]) -> list[int]:
    """Message indices of the assistant turns; position in this list is the turn ordinal."""
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant"]


def text_of(content: Any) -> str:
    """The concatenated text parts of a message content."""
    return "".join(str(p.get("text", "")) for p in content_parts(content) if p.get("type") == "text")


def normalize_row(row: dict[str, Any]) -> dict[str, Any]:
    """Return the row with tool-call arguments given as JSON strings decoded to objects.

    The chat template needs ``arguments`` as an object (one ``<parameter=...>`` per key);
    OpenAI-style rows store it as a JSON string. Other fields are returned unchanged.
    """
    changed = False
    messages = []
    for message in row.get("messages", []):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(calls, list) and any(
            isinstance(c, dict) and isinstance(c.get("function"), dict)
            and isinstance(c["function"].get("arguments"), str) for c in calls
        ):
            new_calls = []
            for call in calls:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    try:
                        arguments = json.loads(function["arguments"])
                    except json.JSONDecodeError:
                        arguments = function["arguments"]  # reported by row_problems
                    call = {**call, "function": {**function, "arguments": arguments}}
                new_calls.append(call)
            message = {**message, "tool_calls": new_calls}
            changed = True
        messages.append(message)
    return {**row, "messages": messages} if changed else row


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_parts(where: str, content: Any, allow_images: bool, problems: list[str]) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        problems.append(f"{where}.content must be a string or a list of parts, got {type(content).__name__}")
        return
    for j, part in enumerate(content):
        here = f"{where}.content[{j}]"
        if not isinstance(part, dict):
            problems.append(f"{here} must be an object like {{\"type\": \"text\", \"text\": ...}}")
            continue
        kind = part.get("type")
        if kind not in VALID_PART_TYPES:
            problems.append(f"{here}.type {kind!r} is not one of: {', '.join(VALID_PART_TYPES)}")
        elif kind == "text" and not isinstance(part.get("text"), str):
            problems.append(f"{here} is a text part without a string 'text'")
        elif kind == "image":
            if not allow_images:
                problems.append(f"{here}: images are allowed in user and tool messages only")
            if not isinstance(part.get("image"), str) or not part.get("image"):
                problems.append(f"{here} is an image part without an 'image' path")


def _declared_tools(tools: Any, problems: list[str]) -> dict[str, dict[str, Any]]:
    declared: dict[str, dict[str, Any]] = {}
    if tools is None:
        return declared
    if not isinstance(tools, list):
        problems.append(f"tools must be a list of function schemas or absent, got {type(tools).__name__}")
        return declared
    for k, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            problems.append(f"tools[{k}] must be {{\"type\": \"function\", \"function\": {{\"name\": ..., "
                            "\"parameters\": ...}}}")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"tools[{k}].function.name must be a non-empty string")
            continue
        parameters = function.get("parameters", {})
        if not isinstance(parameters, dict):
            problems.append(f"tools[{k}].function.parameters must be a JSON schema object")
            parameters = {}
        declared[name] = parameters
    return declared


def _check_tool_calls(where: str, calls: Any, declared: dict[str, dict[str, Any]], problems: list[str]) -> None:
    if calls is None:
        return
    if not isinstance(calls, list):
        problems.append(f"{where}.tool_calls must be a list")
        return
    for k, call in enumerate(calls):
        here = f"{where}.tool_calls[{k}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            problems.append(f"{here} must be {{\"type\": \"function\", \"function\": {{\"name\", \"arguments\"}}}}")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"{here}.function.name must be a non-empty string")
            continue
        if name not in declared:
            choices = ", ".join(sorted(declared)) or "none (the row has no tools)"
            problems.append(f"{here} calls {name!r}, which the row's tools do not declare (declared: {choices})")
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                problems.append(f"{here}.function.arguments is a string but not JSON ({exc.msg})")
                continue
        if not isinstance(arguments, dict):
            problems.append(f"{here}.function.arguments must be an object (or a JSON string of one)")
            continue
        required = declared.get(name, {}).get("required", [])
        missing = [r for r in required if isinstance(r, str) and r not in arguments]
        if missing:
            problems.append(f"{here} lacks required argument(s) {', '.join(missing)} of tool {name!r}")


def _check_messages(messages: Any, declared: dict[str, dict[str, Any]], problems: list[str]) -> int:
    """Check the messages; return the number of assistant turns."""
    if not isinstance(messages, list) or not messages:
        problems.append("messages must be a non-empty list")
        return 0
    n_assistant = 0
    has_query = False
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            problems.append(f"{where} must be an object with 'role' and 'content'")
            continue
        role = message.get("role")
        if role not in VALID_ROLES:
            problems.append(f"{where}.role {role!r} is not one of: {', '.join(VALID_ROLES)}")
            continue
        where = f"messages[{i}] ({role})"
        content = message.get("content")
        if role == "system" and i != 0:
            problems.append(f"{where}: a system message may only be the first message")
        if role == "assistant":
            n_assistant += 1
            if content is not None:
                _check_parts(where, content, allow_images=False, problems=problems)
            reasoning = message.get("reasoning_content")
            if reasoning is not None and not isinstance(reasoning, str):
                problems.append(f"{where}.reasoning_content must be a string or absent")
            _check_tool_calls(where, message.get("tool_calls"), declared, problems)
            continue
        if content is None:
            problems.append(f"{where} has no content")
            continue
        _check_parts(where, content, allow_images=role in ("user", "tool"), problems=problems)
        if role == "user" and isinstance(content, (str, list)):
            text = text_of(content).strip()
            if not (text.startswith("<tool_response>") and text.endswith("</tool_response>")):
                has_query = True
    if not has_query:
        problems.append("messages have no user query (a user message that is not only tool responses); "
                        "the chat template needs one")
    if n_assistant == 0:
        problems.append("messages have no assistant turn, so nothing can be supervised")
    return n_assistant


def _check_meta(meta: Any, n_assistant: int, problems: list[str]) -> None:
    if not isinstance(meta, dict):
        problems.append("meta must be an object with at least 'source'")
        return
    source = meta.get("source")
    if source not in VALID_SOURCES:
        problems.append(f"meta.source {source!r} is not one of: {', '.join(VALID_SOURCES)}")
    turns = meta.get("supervise_turns")
    if turns is not None:
        if not isinstance(turns, list) or not all(_is_int(t) for t in turns):
            problems.append("meta.supervise_turns must be a list of assistant-turn ordinals (integers)")
        else:
            if any(b <= a for a, b in itertools.pairwise(turns)):
                problems.append(f"meta.supervise_turns {turns} must be strictly increasing")
            bad = [t for t in turns if t < 0 or t >= n_assistant]
            if bad:
                problems.append(f"meta.supervise_turns {bad} name no assistant turn; the row has {n_assistant} "
                                f"(ordinals 0..{n_assistant - 1})")
    turn_index = meta.get("turn_index")
    if turn_index is not None and turns is None:
        if not _is_int(turn_index):
            problems.append(f"meta.turn_index must be an integer, got {turn_index!r}")
        elif turn_index != n_assistant - 1:
            problems.append(f"meta.turn_index {turn_index} must be the ordinal of the last assistant turn, "
                            f"{n_assistant - 1} (the row has {n_assistant} assistant turns)")
    if source == "agent" and turns is None and turn_index is None and meta.get("nosup_reason") is None:
        problems.append("agent rows need meta.turn_index (per-request rows) or meta.supervise_turns "
                        "(prefix-packed rows), or meta.nosup_reason if unsupervised")
    weight = meta.get("loss_weight")
    if weight is not None and (not _is_number(weight) or weight < 0):
        problems.append(f"meta.loss_weight must be a finite number >= 0, got {weight!r}")
    total_tokens = meta.get("total_tokens")
    if total_tokens is not None and (not _is_int(total_tokens) or total_tokens < 0):
        problems.append(f"meta.total_tokens must be a non-negative integer, got {total_tokens!r}")
    if meta.get("nosup_reason") is not None and not isinstance(meta["nosup_reason"], str):
        problems.append("meta.nosup_reason must be a string when present")


def row_problems(row: Any) -> list[str]:
    """Every structural problem of one row (empty when the row is well-formed)."""
    if not isinstance(row, dict):
        return [f"a row must be a JSON object, got {type(row).__name__}"]
    problems: list[str] = []
    if "id" in row and not isinstance(row["id"], str):
        problems.append("id must be a string")
    declared = _declared_tools(row.get("tools"), problems)
    messages = row.get("messages")
    n_assistant = _check_messages(messages, declared, problems)
    if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
        refs = image_refs(messages)
        images = row.get("images")
        if images is None:
            if refs:
                problems.append(f"images is missing; the messages reference {len(refs)} image(s) and 'images' "
                                "must list them in order of appearance")
        elif not isinstance(images, list) or not all(isinstance(p, str) for p in images):
            problems.append("images must be a list of image paths")
        elif images != refs:
            first = next((k for k, (a, b) in enumerate(zip(images, refs, strict=False)) if a != b),
                         min(len(images), len(refs)))
            problems.append(f"images ({len(images)}) must equal the image parts of the messages in order of "
                            f"appearance ({len(refs)}); first difference at position {first}")
    _check_meta(row.get("meta"), n_assistant, problems)
    return problems
