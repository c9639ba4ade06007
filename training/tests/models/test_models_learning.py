"""`captain bench learning`'s full mode end to end on the tiny model (plumbing, not the result):
real teacher episodes, rows, SFT, held-out loss, then `captain eval run` of base and SFT through
the local server with the trained (compacted) prompt, and the paired comparison."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from captain_training.sft.learning import run


@pytest.mark.sim
@pytest.mark.e2e
@pytest.mark.slow
def test_full_mode_runs_end_to_end_on_the_tiny_model(tmp_path: Path, tiny_smollm2_dir: Path) -> None:
    figures = run(quick=False, model=str(tiny_smollm2_dir), train_states="0", heldout_states="100", steps=1,
                  prompts=1, max_new_tokens=4, eval_max_tokens=8, eval_max_requests=2, out=str(tmp_path))
    assert figures["mode"] == "full" and figures["teacher_train_episodes"] == 2
    assert figures["train_rows"] >= 1 and figures["sft_steps"] == 1
    assert math.isfinite(figures["loss_before"]) and math.isfinite(figures["loss_after"])
    assert figures["valid_tool_call_rate_before"] == 0.0 and figures["heldout_prompts"] == 1
    assert figures["host_success_pairs"] == 2 and figures["strict_success_pairs"] == 2
    assert figures["host_success_base"] == 0.0 and figures["host_success_sft"] == 0.0
    assert figures["host_success_mcnemar_p"] == 1.0
    for name in ("eval_base.jsonl", "eval_sft.jsonl"):
        lines = [json.loads(x) for x in (tmp_path / name).read_text().splitlines()]
        assert sorted((r["task_id"], r["init_state"]) for r in lines) == [
            ("tabletop/cube_on_plate", 100), ("tabletop/stack_cubes", 100)]
        assert all(r["requests"] >= 1 for r in lines)
