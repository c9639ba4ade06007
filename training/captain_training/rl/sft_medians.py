"""Per-task median physical-action counts of SFT episodes (the RL cost of Appendix E:
−0.008 for each action beyond 1.5× the task's SFT median).

The count of an episode is read from its rows the way the harness recorded it: every
robot call appends one receipt line to its cell's output (``move_to: ok; ...``,
``hold: ok``, ``move_to: FAILED controller_rejected; ...``), and the physical calls are
``move_to``, ``hold``, ``recover`` and ``release``. Rows repeat earlier tool outputs as
history (possibly compacted), so each tool output is counted once, by its
``tool_call_id``, in its longest recorded form. The last request's own outputs are in no
row (a row ends with the assistant turn); it is normally the ``finish()`` request.

Only agent rows of successful episodes count (``meta.source == "agent"``,
``meta.host_final_success`` not false). Tasks are named ``<suite>/<task_id>``.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: Receipt-line prefixes of the physical primitives.
PHYSICAL_CALLS = ("move_to", "hold", "recover", "release")
_RECEIPT = re.compile(r"^(?:" + "|".join(PHYSICAL_CALLS) + r"): (?:ok|FAILED)\b", re.MULTILINE)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def physical_receipts(text: str) -> int:
    """How many receipt lines of physical calls a tool output holds."""
    return len(_RECEIPT.findall(text))


def episode_action_counts(rows: Iterable[dict[str, Any]]) -> dict[str, tuple[str, int]]:
    """``episode -> (task, physical actions)`` over the agent rows of successful episodes."""
    outputs: dict[str, dict[str, str]] = defaultdict(dict)
    tasks: dict[str, str] = {}
    for row in rows:
        meta = row.get("meta") or {}
        if meta.get("source", "agent") != "agent" or meta.get("host_final_success") is False:
            continue
        episode = str(meta.get("episode") or str(row.get("id", "")).split("#")[0])
        if not episode or meta.get("suite") is None or meta.get("task_id") is None:
            continue
        tasks[episode] = f"{meta['suite']}/{meta['task_id']}"
        seen = outputs[episode]
        for message in row.get("messages") or []:
            if message.get("role") != "tool":
                continue
            call_id = str(message.get("tool_call_id", ""))
            text = _text(message.get("content"))
            if len(text) > len(seen.get(call_id, "")):
                seen[call_id] = text
    return {ep: (tasks[ep], sum(physical_receipts(t) for t in outputs[ep].values())) for ep in tasks}


def task_medians(counts: dict[str, tuple[str, int]]) -> dict[str, float]:
    """Median physical-action count per task."""
    per_task: dict[str, list[int]] = defaultdict(list)
    for task, n in counts.values():
        per_task[task].append(n)
    return {task: float(statistics.median(v)) for task, v in sorted(per_task.items())}


def sft_median_actions(paths: Iterable[str | Path]) -> tuple[dict[str, float], dict[str, int]]:
    """Per-task medians and per-task episode counts from SFT row files (JSONL).

    Raises:
        RowFormatError (``captain_training.sft.errors``): a line that is not JSON, with its
            file and line number.
    """
    from captain_training.sft.reader import iter_rows

    def rows() -> Iterable[dict[str, Any]]:
        for path in paths:
            for record in iter_rows(path, validate=False):
                yield record.row

    counts = episode_action_counts(rows())
    episodes: dict[str, int] = defaultdict(int)
    for task, _ in counts.values():
        episodes[task] += 1
    return task_medians(counts), dict(sorted(episodes.items()))
