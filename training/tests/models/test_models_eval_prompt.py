"""`captain eval run` prompts a model as it was trained: its harness prompt, compacted TASK.md
and history compaction threshold reach the policy server (a real episode, a real HTTP server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from captain_harness.core.episode.errors import PolicyError
from captain_harness.core.episode.policy.base import PolicyRequest
from captain_harness.core.episode.policy.scripted_server import ScriptedChatServer, completion
from captain_training.datagen.compact import compact_system_policy

SYSTEM = ("You are a robot agent.\n\n# TASK.md\n\n## Task\n\nput the red cube on the plate\n\n"
          "## Success standard\n\n- xy_distance_m <= 0.02\n\n## API reference\n\nrobot.observe() -> dict\n")


def test_compact_policy_sends_the_kept_sections_and_rejects_missing_ones() -> None:
    with ScriptedChatServer([completion("print(1)")]) as server:
        policy = compact_system_policy("openai", "Task", base_url=server.base_url, model="m")
        request = PolicyRequest("ep", 1, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "go"}])
        reply = policy.act(request)
        assert [c.code for c in reply.tool_calls] == ["print(1)"]
        sent = server.requests[0]["messages"]
        assert sent[0]["content"].startswith("You are a robot agent.") and "## Task" in sent[0]["content"]
        assert "Success standard" not in sent[0]["content"] and "API reference" not in sent[0]["content"]
        assert sent[1]["content"] == "go" and request.messages[0]["content"] == SYSTEM
        bad = compact_system_policy("openai", ["Budgets"], base_url=server.base_url, model="m")
        with pytest.raises(PolicyError, match="no section"):
            bad.act(request)
        assert len(server.requests) == 1
        policy.close()
        bad.close()


@pytest.mark.sim
def test_eval_run_sends_the_trained_prompt(tmp_path: Path) -> None:
    from captain_training.eval.runner import EvalSpec, run_evaluation

    script = [completion("print(1)"), completion("print(2)"), completion("print(3)"), completion(None, content="done")]
    with ScriptedChatServer(script) as server:
        spec = EvalSpec(suite="tabletop", tasks="cube_on_plate", states="100", policy="openai",
                        policy_options={"base_url": server.base_url, "model": "m"}, records=str(tmp_path / "rec"),
                        max_requests=4, system_prompt="You are a test agent.", compact_at_tokens=1,
                        task_md_sections=("Task", "Success standard"))
        summary = run_evaluation(spec, tmp_path / "results.jsonl")
        requests = list(server.requests)
    assert summary["result_lines"] == 1 and len(requests) == 4
    system = requests[0]["messages"][0]["content"]
    assert system.startswith("You are a test agent.\n\n# TASK.md\n\n## Task\n\nput the red cube on the plate")
    assert "## Success standard" in system and "## API" not in system and len(system) < 2000
    assert all(r["messages"][0]["content"] == system for r in requests)
    assert not any("<context_compaction>" in json.dumps(m) for m in requests[1]["messages"])
    assert any("<context_compaction>" in json.dumps(m) for m in requests[3]["messages"])
    rows = [json.loads(x) for f in (tmp_path / "rec").rglob("rows.jsonl") for x in f.read_text().splitlines()]
    assert rows and "## API" in rows[0]["messages"][0]["content"], "the records keep the full system message"


@pytest.mark.parametrize(("args", "message"), [
    (["--compact-at-tokens", "0"], "must be > 0"),
    (["--task-md-sections", " , "], "at least one section"),
    (["--system-prompt", "/nonexistent/prompt.txt"], "cannot read the system prompt file"),
])
def test_eval_run_refuses_bad_prompt_options(args: list[str], message: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from captain_training.eval.cli import app

    result = CliRunner().invoke(app, ["run", "--suite", "tabletop", "--tasks", "cube_on_plate", "--states", "100",
                                      "--out", str(tmp_path / "r.jsonl"), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "r.jsonl").exists()
