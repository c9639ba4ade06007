"""History rendering: the image window, compaction into a notice, calibration."""

from __future__ import annotations

from captain_harness.core.episode.history import History, HistoryConfig, Turn, defined_names, row_images


def turn(
    k: int, images: int = 0, text: str = "x", commands: list[str] | None = None, code: str = "a = 1"
) -> Turn:
    assistant = {
        "role": "assistant",
        "content": "",
        "reasoning_content": f"step {k}",
        "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": "python", "arguments": {"input": code}}}
        ],
    }
    tool = {
        "role": "tool",
        "tool_call_id": f"c{k}",
        "content": [
            {"type": "text", "text": f"Cell {k} completed in 0.1 s\nOutput:\n{text}"},
            *({"type": "image", "image": f"images/episodes/e/obs_{k:03d}_{i}.png"} for i in range(images)),
        ],
    }
    return Turn(k, assistant, [tool], commands or ["observe ok"], defined_names(code))


def make(config: HistoryConfig | None = None) -> History:
    return History(
        "SYSTEM",
        "<environment_context/>",
        "Read TASK.md",
        ["images/episodes/e/obs_000_head.png", "images/episodes/e/obs_000_wrist.png"],
        config,
    )


def test_only_the_twelve_most_recent_images_are_kept() -> None:
    h = make()
    for k in range(1, 7):
        h.add(turn(k, images=2))
    messages = h.render()
    images = row_images(messages)
    assert len(images) == 12 and images[0].endswith("obs_001_0.png") and images[-1].endswith("obs_006_1.png")
    task = messages[2]["content"]
    assert task[1] == {"type": "text", "text": "[image omitted: obs_000_head.png]"}
    assert h.turns[0].tools[0]["content"][1]["type"] == "image"  # stored history unchanged
    h.add(turn(7, images=1))
    first_tool = h.render()[4]["content"]
    assert first_tool[1]["text"] == "[image omitted: obs_001_0.png]" and first_tool[2]["type"] == "image"


def test_old_turns_are_compacted_into_a_notice_past_the_threshold() -> None:
    h = make(HistoryConfig(compact_at_tokens=3000, keep_recent_turns=2))
    for k in range(1, 9):
        h.add(
            turn(k, text="y" * 2000, commands=[f"move_to ok #{k}", "observe ok"], code=f"def go{k}(): pass")
        )
    before = h.estimate_tokens()
    messages = h.render()
    assert h.estimate_tokens() <= 3000 < before
    assert [m["role"] for m in messages[:4]] == ["system", "user", "user", "user"]
    notice = messages[3]["content"]
    assert notice.startswith("<context_compaction>") and notice.endswith("</context_compaction>")
    assert "request 1: move_to ok #1; observe ok" in notice and "scene may have changed" in notice
    assert "go1" in notice
    kept = [m for m in messages if m["role"] == "assistant"]
    assert len(kept) == len(h.turns) >= 2 and kept[-1]["reasoning_content"] == "step 8"
    n = len(h.compacted)
    h.render()
    assert len(h.compacted) == n  # compaction is stable until the history grows again


def test_calibration_rescales_estimates_with_server_counts() -> None:
    h = make()
    h.add(turn(1))
    est = h.estimate_tokens()
    h.calibrate(est, 2 * est)
    assert abs(h.estimate_tokens() - 2 * est) <= 2


def test_defined_names_lists_functions_and_variables() -> None:
    assert defined_names("def go(q):\n    pass\nx, y = 1, 2\nclass A: pass\nprint(x)") == [
        "go",
        "x",
        "y",
        "A",
    ]
    assert defined_names("def (") == []
