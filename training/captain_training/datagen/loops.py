"""The w_t = 0 detector: requests that repeat execution failures or loop on recovery.

The paper masks from the SFT loss "turns with repeated execution failures or recovery loops"
(w_t = 0, about 3.6 % of requests). This detector finds them in the records of any policy
(teacher, model, human), from what the harness wrote into the conversation, not from labels
a particular teacher sets:

* **repeated execution failure**: the request's reply ran cells that failed (a Python error,
  ``Cell N failed``, or a robot call whose receipt says ``FAILED``) and the reply before it
  failed as well; the first failed attempt stays supervised, every further one in the streak
  is masked;
* **recovery loop**: the reply calls ``recover(`` again within ``RECOVER_WINDOW`` requests of
  an earlier ``recover(`` call, or re-sends (whitespace aside) the exact code of an earlier
  reply whose cells failed.

A reply's outcome is read from the tool messages that answer its tool-call ids, found in any
later record of the episode; the episode's last reply has no recorded outcome and is judged on
its code only. Requests already carrying a ``nosup_reason`` keep theirs.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from captain_training.datagen.records import RequestRecord

REPEATED_FAILURE = "repeated_execution_failure"
RECOVERY_LOOP = "recovery_loop"
#: A second recover() within this many requests of the previous one is a loop.
RECOVER_WINDOW = 3

_CELL_FAILED = re.compile(r"^Cell \d+ failed in", re.M)
_RECEIPT_FAILED = re.compile(r"^\w+: FAILED\b", re.M)
_RECOVER = re.compile(r"\brecover\s*\(")


@dataclass(frozen=True)
class Reply:
    """The last assistant reply of one request record."""

    request_index: int
    call_ids: tuple[str, ...]
    code: str


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _code(call: dict[str, Any]) -> str:
    args = (call.get("function") or {}).get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return args
    if isinstance(args, dict):
        return str(args.get("input", args.get("code", "")))
    return ""


def last_reply(record: RequestRecord) -> Reply:
    """The reply a request record supervises (its last assistant message)."""
    for message in reversed(record.messages):
        if message.get("role") == "assistant":
            calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
            return Reply(record.request_index, tuple(str(c.get("id", "")) for c in calls),
                         "\n".join(_code(c) for c in calls))
    return Reply(record.request_index, (), "")


def tool_outputs(records: Sequence[RequestRecord]) -> dict[str, str]:
    """Tool-call id -> the text of the tool message answering it, over all records of an episode."""
    out: dict[str, str] = {}
    for record in records:
        for message in record.messages:
            if message.get("role") == "tool" and message.get("tool_call_id"):
                out[str(message["tool_call_id"])] = _text(message.get("content"))
    return out


def failed(reply: Reply, outputs: dict[str, str]) -> bool | None:
    """Whether the reply's cells failed (None: no recorded outcome)."""
    texts = [outputs[i] for i in reply.call_ids if i in outputs]
    if not texts:
        return None
    return any(_CELL_FAILED.search(t) or _RECEIPT_FAILED.search(t) for t in texts)


def _normalised(code: str) -> str:
    return re.sub(r"\s+", " ", code).strip()


def loop_reasons(records: Sequence[RequestRecord]) -> dict[int, str]:
    """request_index -> ``repeated_execution_failure`` | ``recovery_loop`` for the requests to mask
    (records of one episode, any order)."""
    ordered = sorted(records, key=lambda r: r.request_index)
    outputs = tool_outputs(ordered)
    replies = [last_reply(r) for r in ordered]
    outcome = [failed(r, outputs) for r in replies]
    reasons: dict[int, str] = {}
    last_recover: int | None = None
    failed_code: set[str] = set()
    for k, reply in enumerate(replies):
        code = _normalised(reply.code)
        if k > 0 and outcome[k] and outcome[k - 1]:
            reasons[reply.request_index] = REPEATED_FAILURE
        else:
            retry = bool(code) and code in failed_code
            recover_again = bool(_RECOVER.search(reply.code)) and last_recover is not None and (
                reply.request_index - last_recover <= RECOVER_WINDOW)
            if retry or recover_again:
                reasons[reply.request_index] = RECOVERY_LOOP
        if _RECOVER.search(reply.code):
            last_recover = reply.request_index
        if outcome[k] and code:
            failed_code.add(code)
    return reasons


def mask_loops(records: list[RequestRecord]) -> tuple[list[RequestRecord], dict[str, int]]:
    """Records with ``nosup_reason`` set on the detected requests (others unchanged), and counts
    by reason of the requests newly masked."""
    reasons = loop_reasons(records)
    counts = {REPEATED_FAILURE: 0, RECOVERY_LOOP: 0}
    out = []
    for record in records:
        reason = reasons.get(record.request_index)
        if reason is not None and record.meta.get("nosup_reason") is None:
            new = dict(record.record)
            new["meta"] = {**record.meta, "nosup_reason": reason}
            record = dataclasses.replace(record, record=new)
            counts[reason] += 1
        out.append(record)
    return out, counts
