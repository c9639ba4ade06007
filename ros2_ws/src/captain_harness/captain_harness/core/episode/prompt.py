"""The fixed parts of every request: the system prompt (with TASK.md inlined at its end),
the ``<environment_context>`` block, the task request and the ``python`` tool schema.

These texts are model-visible and define the input format shared by SFT rows, RL
rollouts and test-time requests: change them only together with the training data.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

PYTHON_TOOL_DESCRIPTION = (
    "Run Python in a persistent Python 3 session that controls the robot. `robot` (the robot API), "
    "`np`, `math` and `image()` are pre-imported; variables and functions persist across calls. "
    "Returns the cell output followed by one receipt line per robot call, and the images attached "
    "with image()."
)

#: The single tool of the harness, exactly as declared in every request and SFT row.
PYTHON_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "python",
        "description": PYTHON_TOOL_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "input": {"type": "string", "description": "Python source to run in the session."}
            },
            "required": ["input"],
        },
    },
}

SYSTEM_PROMPT = """You are a robot agent. You control a robot arm by writing Python in a persistent session \
through the `python` tool, against the low-level robot API described in TASK.md below.

How to work:
- Think about the scene and your plan, then call the `python` tool. You may call it several times in one \
reply; the calls run in order.
- Look before you act: observe, ground objects in the images, measure them, and check every result's \
`success`, `failure_category` and the receipts before the next step.
- There are no grasp or place skills: you choose every pose, approach direction and jaw command.
- Keep useful values and helper functions in session variables; write short notes to NOTES.md.
- When your own fresh measurements show the task is done, call `robot.finish()`. Reply without a tool call \
only when you are done or cannot continue.
"""


TASK_MD_HEADING = "# TASK.md"


def load_system_prompt(path: str | Path) -> str:
    """The harness prompt to put before TASK.md, read from ``path``.

    A released model was trained on the exact system prompt of its data: pass one of its
    SFT rows (``.jsonl``: the first row; ``.json``: one row) and the text of its system
    message before ``# TASK.md`` is used, or a text file holding the prompt itself (cut at
    ``# TASK.md`` when it contains one).

    Raises:
        EpisodeError: a missing file, a row without a system message, or an empty prompt.
    """
    from captain_harness.core.episode.errors import EpisodeError

    file = Path(path)
    try:
        raw = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise EpisodeError(f"cannot read the system prompt file {file}: {exc}") from exc
    text = raw
    if file.suffix in (".jsonl", ".json"):
        line = raw.strip().splitlines()[0] if file.suffix == ".jsonl" and raw.strip() else raw
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EpisodeError(f"{file}: not a JSON row ({exc}); pass an SFT row or a text file") from exc
        messages = row.get("messages") if isinstance(row, dict) else None
        system = [m for m in messages or [] if isinstance(m, dict) and m.get("role") == "system"]
        if not system or not isinstance(system[0].get("content"), str):
            raise EpisodeError(f"{file}: the row has no system message with text content")
        text = system[0]["content"]
    cut = text.find(TASK_MD_HEADING)
    if cut >= 0:
        text = text[:cut]
    text = text.rstrip()
    if not text:
        raise EpisodeError(f"{file}: the system prompt before {TASK_MD_HEADING!r} is empty")
    return text + "\n"


def system_message_text(task_md: str, system_prompt: str = SYSTEM_PROMPT) -> str:
    """The system message: the harness prompt followed by ``# TASK.md`` and its text."""
    body = task_md.strip()
    if body.startswith(TASK_MD_HEADING):
        body = body[len(TASK_MD_HEADING) :].lstrip("\n")
    return f"{system_prompt.rstrip()}\n\n{TASK_MD_HEADING}\n\n{body}\n"


def environment_context_text(
    cwd: str,
    date: str | None = None,
    shell: str = "python",
    writable_roots: tuple[str, ...] | None = None,
    network: str = "restricted",
) -> str:
    """The ``<environment_context>`` block of the second message."""
    date = date or _dt.date.today().isoformat()
    roots = writable_roots if writable_roots is not None else (cwd,)
    lines = [
        "<environment_context>",
        f"  <cwd>{cwd}</cwd>",
        f"  <shell>{shell}</shell>",
        f"  <current_date>{date}</current_date>",
        "  <sandbox_mode>workspace-write</sandbox_mode>",
        f"  <network_access>{network}</network_access>",
        "  <writable_roots>",
    ]
    lines += [f"    <root>{r}</root>" for r in roots]
    lines += ["  </writable_roots>", "</environment_context>"]
    return "\n".join(lines)


#: What precedes the instruction in the task request.
TASK_REQUEST_MARKER = "complete the robot task:"


def task_request_text(instruction: str) -> str:
    """The text of the task request (the initial head and wrist images follow it)."""
    return (
        f"Read TASK.md and {TASK_REQUEST_MARKER} {instruction.strip()}\n"
        "The current head and wrist camera images are attached."
    )


def instruction_of(messages: list[dict[str, Any]]) -> str:
    """The instruction of the first user message that carries a task request (the inverse
    of ``task_request_text``); '' when none does."""
    for m in messages:
        if m.get("role") != "user":
            continue
        content = m.get("content")
        texts = [content] if isinstance(content, str) else [
            p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text"]
        for text in texts:
            if TASK_REQUEST_MARKER in text:
                return text.split(TASK_REQUEST_MARKER, 1)[1].split("\n", 1)[0].strip()
    return ""
