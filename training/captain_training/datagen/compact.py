"""Rows that fit a small context: a compact system message, with nothing supervised cut.

The harness's system message is its prompt plus the whole TASK.md (with the API reference,
about 5,400 SmolLM2 tokens); a row of a short episode is then ~7k tokens, a long one far more.
Three ways keep rows inside a small model's context (8,192 tokens for SmolLM2-135M), none of
which truncates a supervised token:

* ``captain datagen --mode per-request`` rows end at their own request, so a row is never
  longer than the prompt the model saw at that request plus its reply;
* the harness compacts older turns into a notice of the commands they ran once the prompt
  passes ``HistoryConfig.compact_at_tokens`` (``EpisodeConfig.history``; 60k by default; set
  it below the model's context when recording episodes for such a model);
* :func:`compact_row` replaces the system message by the harness prompt plus only the TASK.md
  sections named in ``keep_sections`` (default: the task and its success standard). A model
  trained on compacted rows must also be prompted with the compacted message; the evaluation
  commands send the full one, so use compacted rows for loss measurements and quick checks,
  full rows for a model that ``captain eval run`` evaluates.

``captain sft prepare --drop-too-long`` then drops (and counts) whatever is still longer than
``--max-length`` instead of stopping; without it such rows are an error.
"""

from __future__ import annotations

import copy
import re
from typing import Any

TASK_MD_HEADING = "# TASK.md"
DEFAULT_KEEP_SECTIONS = ("Task", "Success standard")


def compact_system_text(text: str, keep_sections: tuple[str, ...] = DEFAULT_KEEP_SECTIONS) -> str:
    """The system message with only the ``## <name>`` sections of TASK.md in ``keep_sections``.

    Raises:
        ValueError: the text has no ``# TASK.md`` part, or a kept section is missing.
    """
    if TASK_MD_HEADING not in text:
        raise ValueError("the system message has no '# TASK.md' part to compact")
    head, _, task_md = text.partition(TASK_MD_HEADING)
    parts = re.split(r"^(?=## )", task_md, flags=re.M)
    sections = {p.splitlines()[0][3:].strip(): p for p in parts if p.startswith("## ")}
    missing = [name for name in keep_sections if name not in sections]
    if missing:
        raise ValueError(f"TASK.md has no section(s) {missing}; it has: {', '.join(sections)}")
    kept = "".join(sections[name].rstrip() + "\n\n" for name in keep_sections)
    return f"{head.rstrip()}\n\n{TASK_MD_HEADING}\n\n{kept}".rstrip() + "\n"


def compact_row(row: dict[str, Any], keep_sections: tuple[str, ...] = DEFAULT_KEEP_SECTIONS) -> dict[str, Any]:
    """A copy of ``row`` whose system message is compacted (``meta.compact_system`` records it);
    every other message, and so every supervised token, is unchanged."""
    out = copy.deepcopy(row)
    messages = out["messages"]
    if not messages or messages[0].get("role") != "system" or not isinstance(messages[0].get("content"), str):
        raise ValueError(f"row {row.get('id')!r} has no text system message to compact")
    messages[0]["content"] = compact_system_text(messages[0]["content"], keep_sections)
    out.setdefault("meta", {})["compact_system"] = list(keep_sections)
    return out
