"""The JSON payloads of one request event on the episode record topics.

One definition for both places that write them: the in-process episode bag
(``mcap_log.McapLog.write_event``) and the episode runner's live topics
(``nodes/episode_topics.py``). Topic names are relative (``captain/...``); each payload
is carried as one std_msgs/String holding a JSON object:

* ``captain/requests``: ``request_index``, ``reasoning``, ``content``, ``code`` (one string
  per cell), ``policy_s`` and ``harness_s`` (s);
* ``captain/cells``: ``request_index``, ``cell``, ``code``, ``output``, ``receipts``;
* ``captain/receipts``: ``request_index``, ``cell``, ``index``, ``receipt``.
"""

from __future__ import annotations

from typing import Any

REQUESTS, CELLS, RECEIPTS = "captain/requests", "captain/cells", "captain/receipts"
TOPICS = (REQUESTS, CELLS, RECEIPTS)


def event_payloads(event: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(topic, payload)`` of one request event of the episode loop, in publishing order."""
    cells = event.get("cells") or []
    index = event.get("request_index")
    out: list[tuple[str, dict[str, Any]]] = [(REQUESTS, {
        "request_index": index, "reasoning": event.get("reasoning", ""), "content": event.get("content", ""),
        "code": [c.get("code", "") for c in cells], "policy_s": event.get("policy_s"),
        "harness_s": event.get("harness_s")})]
    for cell in cells:
        out.append((CELLS, {"request_index": index, "cell": cell.get("index"), "code": cell.get("code", ""),
                            "output": cell.get("output", ""), "receipts": cell.get("receipts", [])}))
        out += [(RECEIPTS, {"request_index": index, "cell": cell.get("index"), "index": k, "receipt": receipt})
                for k, receipt in enumerate(cell.get("receipts") or [])]
    return out
