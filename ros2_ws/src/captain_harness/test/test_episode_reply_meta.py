"""Flags a policy attaches to a reply (``reply.meta``: an injected mistake, why a request
must not be supervised) reach that request's row and event, and only that request's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from episode_support import SOLVE, toy_backend

from captain_harness.core.episode.loop import reply_meta
from captain_harness.core.episode.policy.base import PolicyReply
from captain_harness.core.episode.policy.replay import ReplayPolicy
from captain_harness.core.episode.runner import run_episode

FLAGS = {"injected_mistake": "release_off_target", "nosup_reason": "injected_mistake"}


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_reply_meta_lands_in_the_row_and_event_of_its_request_only(tmp_path: Path) -> None:
    policy = ReplayPolicy.from_cells(SOLVE)
    flagged = 2
    policy.replies[flagged - 1].meta = {**FLAGS, "request_index": 99}  # type: ignore[attr-defined]
    outcome = run_episode("toy/0", policy=policy, out_dir=tmp_path, backend_factory=toy_backend)
    assert outcome.strict_success
    record = Path(outcome.record_dir)
    rows = _lines(record / "rows.jsonl")
    events = _lines(record / "events.jsonl")
    assert len(rows) == len(SOLVE) == len(events)
    for row, event in zip(rows, events, strict=True):
        index = row["meta"]["request_index"]
        # the recorder's own fields win over a policy's keys of the same name
        assert index == event["request_index"]
        if index == flagged:
            assert {k: row["meta"][k] for k in FLAGS} == FLAGS
            assert event["meta"]["injected_mistake"] == FLAGS["injected_mistake"]
        else:
            assert "injected_mistake" not in row["meta"] and "meta" not in event
        # the episode's fields stay on every row, and the final outcome is still filled in
        assert row["meta"]["episode"] == outcome.episode_id and row["meta"]["host_final_success"] is True


def test_reply_meta_keeps_json_values_and_drops_what_is_not_a_flag() -> None:
    reply = PolicyReply()
    assert reply_meta(reply) == {}
    reply.meta = {"nosup_reason": "x", 3: "dropped", "where": Path("/a")}  # type: ignore[attr-defined]
    assert reply_meta(reply) == {"nosup_reason": "x", "where": "/a"}
    reply.meta = ["not", "a", "dict"]  # type: ignore[attr-defined]
    assert reply_meta(reply) == {}
