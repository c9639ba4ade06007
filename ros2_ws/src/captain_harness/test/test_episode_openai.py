"""A scripted OpenAI-compatible endpoint drives whole episodes through the chat-completions
client: tool calls, images, thinking, truncation, compaction, budgets, gate rejections,
strict vs host outcomes, retries and infrastructure failures."""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from episode_support import SOLVE, FakeChatServer, completion, tool_texts, toy_backend

from captain_harness.core.budget import BudgetLimits
from captain_harness.core.episode.history import HistoryConfig
from captain_harness.core.episode.loop import LoopConfig
from captain_harness.core.episode.policy.registry import PolicySpec
from captain_harness.core.episode.records import read_rows
from captain_harness.core.episode.runner import EpisodeConfig, run_episode

PLACE_OFF = (
    "q = [0, 2**-0.5, 2**-0.5, 0]\nobs = robot.observe(); h = obs['value']['observation_handle']\n"
    "b = robot.mark_point(h, 'agentview', .5, .5, label='bowl')\n"
    "p = robot.mark_point(h, 'agentview', .5, .5, label='plate')\n"
    "g = robot.measure_object_geometry(b['value']['detection_id'], p['value']['detection_id'])['value']\n"
    "robot.move_to(g['object']['center_m'], q); robot.move_to(gripper='close')\n"
    "robot.move_to(np.array(g['destination']['center_m']) + [0.05, 0, 0.03], q)\n"
    "robot.move_to(gripper='open')"
)


def episode(tmp_path: Path, script: Any, config: EpisodeConfig | None = None, **options: Any):
    with FakeChatServer(script) as server:
        opts = {
            "base_url": server.base_url,
            "model": "scripted",
            "max_retries": 1,
            "backoff_s": 0.01,
            **options,
        }
        outcome = run_episode(
            "toy/0",
            policy=PolicySpec("openai", opts),
            out_dir=tmp_path,
            backend_factory=toy_backend,
            init_state=2,
            config=config,
        )
    rows = read_rows(Path(outcome.record_dir) / "rows.jsonl")
    events = [
        json.loads(line) for line in (Path(outcome.record_dir) / "events.jsonl").read_text().splitlines()
    ]
    return outcome, server, rows, events


def test_solved_and_finished_episode_is_a_strict_success(tmp_path: Path) -> None:
    script = [completion(c, reasoning=f"plan {i}") for i, c in enumerate(SOLVE)]
    outcome, server, rows, events = episode(tmp_path, script, temperature=0.7, top_p=0.9)
    assert (outcome.outcome, outcome.end_reason, outcome.requests) == ("strict_success", "finished", 4)
    assert outcome.host_success and outcome.strict_success and outcome.gate_accepted_on_evidence
    first, second = server.requests[0], server.requests[1]
    assert first["tools"][0]["function"]["name"] == "python"
    assert first["tools"][0]["function"]["parameters"]["required"] == ["input"]
    assert first["chat_template_kwargs"] == {"enable_thinking": True}
    assert (first["temperature"], first["top_p"], first["max_tokens"]) == (0.7, 0.9, 4096)
    task_parts = first["messages"][2]["content"]
    assert [p["type"] for p in task_parts] == ["text", "image_url", "image_url"]
    assert task_parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assistant = second["messages"][3]
    assert assistant["reasoning_content"] == "plan 0"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"input": SOLVE[0]}
    tool = second["messages"][4]
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert tool["content"][0]["text"].startswith("Cell 1 completed in ")
    assert "measure_object_geometry: ok; object=bowl xy_distance_m=0.3606" in tool["content"][0]["text"]
    assert [p["type"] for p in tool["content"][1:]] == ["image_url", "image_url"]  # image(obs images)
    assert len(rows) == 4 and all(r["meta"]["host_final_success"] is True for r in rows)
    assert [e["cells"][0]["receipts"][-1] for e in events][-1].startswith("finish: ok; accepted")


def test_several_tool_calls_run_in_order_in_one_request(tmp_path: Path) -> None:
    script = [completion(["a = 2", "b = a * 21\nprint(b)", "print(a + b)"]), completion(None, content="stop")]
    outcome, server, _rows, events = episode(tmp_path, script)
    assert [c["index"] for c in events[0]["cells"]] == [1, 2, 3]
    texts = tool_texts(server.requests[1])
    assert texts[1].endswith("Output:\n42") and texts[2].endswith("Output:\n44")
    assert (outcome.outcome, outcome.end_reason) == ("stopped", "no_tool_call")


def test_gate_rejects_twice_then_accepts_a_false_finish(tmp_path: Path) -> None:
    script = [
        completion(PLACE_OFF),
        completion("robot.finish()"),
        completion("robot.finish()"),
        completion("robot.finish()"),
    ]
    outcome, server, _rows, _events = episode(tmp_path, script)
    assert outcome.gate_rejections == 2 and outcome.finished and outcome.requests == 4
    assert (outcome.outcome, outcome.host_success, outcome.false_finish) == ("false_finish", False, True)
    rejected = tool_texts(server.requests[2])[-1]
    assert "finish: FAILED finish_rejected; no measure_object_geometry(object, destination) after" in rejected


def test_success_without_finish_is_a_missed_finish(tmp_path: Path) -> None:
    script = [completion(c) for c in SOLVE[:3]] + [completion(None, content="The bowl is on the plate.")]
    outcome, _, rows, _ = episode(tmp_path, script)
    assert (outcome.outcome, outcome.host_success, outcome.finished) == ("missed_finish", True, False)
    assert rows[-1]["messages"][-1] == {
        "role": "assistant",
        "content": "The bowl is on the plate.",
        "reasoning_content": "thinking",
    }


def test_request_and_action_budgets_end_the_episode(tmp_path: Path) -> None:
    cfg = EpisodeConfig(limits=BudgetLimits(max_requests=3, max_physical_actions=150, max_wall_time_s=600))
    outcome, server, _, _ = episode(tmp_path / "r", lambda body, n: completion("robot.observe()"), config=cfg)
    assert (outcome.outcome, outcome.end_reason, outcome.requests, len(server.requests)) == (
        "budget_exhausted",
        "budget_requests",
        3,
        3,
    )
    cfg = EpisodeConfig(limits=BudgetLimits(max_requests=10, max_physical_actions=2, max_wall_time_s=600))
    moves = "for z in (0.3, 0.2, 0.1):\n    print(robot.move_to([0, 0, z])['failure_category'])"
    outcome, server, _, events = episode(tmp_path / "a", [completion(moves)], config=cfg)
    assert outcome.end_reason == "budget_physical_actions" and outcome.physical_actions == 2
    assert events[0]["cells"][0]["receipts"][-1].startswith("move_to: FAILED budget_exhausted")


def test_wall_time_bounds_cells_and_ends_the_episode(tmp_path: Path) -> None:
    cfg = EpisodeConfig(limits=BudgetLimits(max_requests=10, max_physical_actions=10, max_wall_time_s=1.5))
    outcome, _, _, events = episode(tmp_path, [completion("import time\ntime.sleep(20)")], config=cfg)
    assert outcome.end_reason == "budget_wall_time" and outcome.wall_time_s < 10
    assert events[0]["cells"][0]["timed_out"]


def test_long_output_is_truncated_and_old_turns_compacted(tmp_path: Path) -> None:
    cfg = EpisodeConfig(loop=LoopConfig(max_output_tokens=400), history=HistoryConfig(compact_at_tokens=7000))
    loud = "obs = robot.observe(); image(obs['value']['images'])\nprint('z' * 100_000)"
    outcome, server, rows, _ = episode(
        tmp_path, [completion(loud, prompt_tokens=None) for _ in range(9)], config=cfg
    )
    assert outcome.requests == 10
    texts = tool_texts(server.requests[1])
    assert "characters truncated" in texts[0] and len(texts[0]) < 3000
    last = server.requests[-1]["messages"]
    notice = [m for m in last if m["role"] == "user" and "<context_compaction>" in str(m["content"])]
    assert len(notice) == 1 and "request 1: observe ok" in notice[0]["content"]
    assert sum(1 for m in last if m["role"] == "assistant") < 9
    last_row = rows[-1]
    assert (
        any(
            isinstance(p, dict) and p.get("text", "").startswith("[image omitted: obs_")
            for m in last_row["messages"]
            if isinstance(m["content"], list)
            for p in m["content"]
        )
        or len(last_row["images"]) <= 12
    )
    assert len(last_row["images"]) <= 12 and last_row["meta"]["turn_index"] < 9


def test_thinking_in_content_token_ids_and_logprobs_are_kept(tmp_path: Path) -> None:
    raw = completion(None, content="<think>I should look first</think>\nDone.", reasoning="", token_ids=True)
    raw["choices"][0]["message"].pop("reasoning_content")
    _outcome, _, rows, events = episode(tmp_path, [raw], return_token_ids=True, logprobs=True)
    reply = rows[0]["messages"][-1]
    assert reply["reasoning_content"] == "I should look first" and reply["content"] == "Done."
    assert events[0]["prompt_token_ids"] == list(range(7)) and events[0]["completion_token_ids"] == [
        11,
        12,
        13,
    ]
    assert events[0]["logprobs"] == [-0.5, -0.25, -1.0]


def test_tool_calls_written_in_the_content_are_recovered(tmp_path: Path) -> None:
    content = (
        "Let me look.\n<tool_call>\n<function=python>\n<parameter=input>\nprint(6 * 7)\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    _outcome, server, _, _ = episode(tmp_path, [completion(None, content=content)])
    assert tool_texts(server.requests[1])[0].endswith("Output:\n42")


def test_malformed_tool_arguments_are_answered_not_run(tmp_path: Path) -> None:
    bad = completion("x")
    bad["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"code": "print(1)"}'
    _outcome, server, _, _ = episode(tmp_path, [bad])
    assert tool_texts(server.requests[1])[0].startswith('Error: the python tool takes one argument, {"input"')


def test_retries_then_unreachable_server_is_an_infrastructure_failure(tmp_path: Path) -> None:
    flaky = [(503, {"error": "busy"}), (503, {"error": "busy"}), completion(None, content="ok")]
    outcome, server, _, _ = episode(tmp_path / "flaky", flaky, max_retries=3)
    assert len(server.requests) == 3 and outcome.outcome == "stopped"
    outcome, _, _, _ = episode(tmp_path / "bad", [(400, {"error": "context too long"})])
    assert (outcome.outcome, outcome.end_reason) == ("infrastructure_failure", "policy_error")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    outcome = run_episode(
        "toy/0",
        policy=PolicySpec(
            "openai",
            {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "max_retries": 2, "backoff_s": 0.01},
        ),
        out_dir=tmp_path / "down",
        backend_factory=toy_backend,
    )
    assert (outcome.outcome, outcome.end_reason, outcome.host_success) == (
        "infrastructure_failure",
        "policy_unavailable",
        False,
    )
    assert "could not be reached after 3 attempts" in outcome.error
    assert replace(outcome, error=None).requests == 1
