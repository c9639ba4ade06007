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
  trained on compacted rows must also be prompted with the compacted message: ``captain eval
  run --task-md-sections 'Task,Success standard'`` sends it (:func:`compact_system_policy`
  wraps the policy and compacts the system message of every request the same way; the
  episode's records keep the full one).

* :func:`first_requests` keeps a packed row's first ``k`` requests (the row of request ``k``
  as the model saw it, with every earlier turn of the pack still supervised): shorter rows
  for quick checks, again with nothing inside a kept turn cut.

``captain sft prepare --drop-too-long`` then drops (and counts) whatever is still longer than
``--max-length`` instead of stopping; without it such rows are an error.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from captain_harness.core.episode.errors import PolicyError
from captain_harness.core.episode.policy.base import PolicyClient, PolicyReply, PolicyRequest

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


def first_requests(row: dict[str, Any], k: int) -> dict[str, Any]:
    """A copy of ``row`` ending at its ``k``-th assistant turn (all of it when it has fewer).

    The kept messages are unchanged (every supervised token of a kept turn stays); later
    turns go, with them from ``meta.supervise_turns``; ``meta.first_requests`` records ``k``
    and ``meta.packed_n`` shrinks to the turns kept.

    Raises:
        ValueError: ``k`` < 1, or the row has no ``messages`` list.
    """
    if k < 1:
        raise ValueError(f"first_requests needs k >= 1, got {k}")
    messages = row.get("messages")
    if not isinstance(messages, list):
        raise ValueError(f"row {row.get('id')!r} has no messages list")
    assistant = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]
    if len(assistant) <= k:
        return copy.deepcopy(row)
    out = copy.deepcopy(row)
    out["messages"] = out["messages"][: assistant[k - 1] + 1]
    meta = out.setdefault("meta", {})
    meta["first_requests"] = k
    if meta.get("supervise_turns") is not None:
        meta["supervise_turns"] = [t for t in meta["supervise_turns"] if int(t) < k]
        if not meta["supervise_turns"]:
            meta.pop("supervise_turns")
            meta["nosup_reason"] = meta.get("nosup_reason") or f"no supervised turn among the first {k}"
    if meta.get("packed_n") is not None:
        meta["packed_n"] = min(int(meta["packed_n"]), k)
    return out


class CompactSystemPolicy(PolicyClient):
    """A policy whose requests carry the compacted system message (see :func:`compact_system_text`).

    Everything else of the request, and the reply, pass through unchanged.
    """

    def __init__(self, inner: PolicyClient, keep_sections: tuple[str, ...] = DEFAULT_KEEP_SECTIONS) -> None:
        self.inner = inner
        self.keep_sections = tuple(keep_sections)
        self.name = getattr(inner, "name", "policy")
        self.wants_host_context = bool(getattr(inner, "wants_host_context", False))

    def act(self, request: PolicyRequest) -> PolicyReply:
        """The inner policy's reply to ``request`` with its system message compacted.

        Raises:
            PolicyError: the request has no text system message with the kept TASK.md sections.
        """
        import dataclasses

        messages = list(request.messages)
        first = messages[0] if messages else {}
        if first.get("role") != "system" or not isinstance(first.get("content"), str):
            raise PolicyError("compact system message: the request has no text system message first")
        try:
            messages[0] = {**first, "content": compact_system_text(first["content"], self.keep_sections)}
        except ValueError as exc:
            raise PolicyError(f"compact system message: {exc}") from None
        return self.inner.act(dataclasses.replace(request, messages=messages))

    def close(self) -> None:
        """Close the inner policy."""
        self.inner.close()


def compact_system_policy(inner: str = "openai", keep_sections: list[str] | str | None = None,
                          **inner_options: Any) -> PolicyClient:
    """Policy factory (``module:factory`` form): policy ``inner`` built with ``inner_options``,
    prompted with the system message compacted to ``keep_sections`` (names, or one
    comma-separated string; default: the task and its success standard)."""
    from captain_harness.core.episode.policy.registry import make_policy

    if isinstance(keep_sections, str):
        keep_sections = [s.strip() for s in keep_sections.split(",") if s.strip()]
    sections = tuple(keep_sections) if keep_sections else DEFAULT_KEEP_SECTIONS
    return CompactSystemPolicy(make_policy(inner, **inner_options), sections)
