"""Two FSDP2 ranks under torchrun (gloo, CPU) train exactly like one rank accumulating two rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from sft_rows import PYTHON_TOOL, agent_turn, tool, user, write_rows

import captain_training
from captain_training.sft.prepare import prepare
from captain_training.sft.trainer import TrainConfig, train


def rows() -> list[dict]:
    out = []
    for k in range(5):
        messages = [{"role": "system", "content": "sys"}, user(f"Task {k}: stack the blocks.")]
        for t in range(2):
            messages.append(agent_turn(f"Step {t} of task {k}.", f"r{t} = robot.move_to([0.{k}, 0.{t}, 0.2], q)",
                                       call_id=f"c{t}"))
            messages.append(tool(f"Cell {t + 1} completed.", call_id=f"c{t}"))
        messages.pop()
        out.append({"id": f"ep{k}#req-001", "images": [], "tools": [PYTHON_TOOL], "messages": messages,
                    "meta": {"source": "agent", "supervise_turns": [0, 1] if k % 2 else [1]}})
    return out


@pytest.mark.slow
def test_two_ranks_match_one_rank_with_accumulation(tmp_path, processor, tiny_model_dir):
    source = write_rows(tmp_path / "rows.jsonl", rows())
    two_ranks = prepare(source, tmp_path / "w2", processor_path=tiny_model_dir, world_size=2, processor=processor)
    one_rank = prepare(source, tmp_path / "w1", processor_path=tiny_model_dir, world_size=1, grad_accum=2,
                       processor=processor)
    assert two_ranks.manifest["n_rows"] == one_rank.manifest["n_rows"] == 4  # row 5 cannot fill a step
    assert two_ranks.loss_constant.per_step == one_rank.loss_constant.per_step

    reference = train(TrainConfig(data=one_rank.path, model=tiny_model_dir, output_dir=tmp_path / "single",
                                  max_steps=2, learning_rate=1e-3, precision="fp32", device="cpu", strategy="single",
                                  save_every_steps=0, checkpoint_at_end=False), processor=processor)

    env = {**os.environ, "PYTHONPATH": str(Path(captain_training.__file__).resolve().parents[1])}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "captain_training.sft",
               "train", "--data", str(two_ranks.path), "--model", str(tiny_model_dir), "--out", str(tmp_path / "fsdp"),
               "--max-steps", "2", "--lr", "1e-3", "--device", "cpu", "--precision", "fp32"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    metrics = [json.loads(line) for line in (tmp_path / "fsdp" / "metrics.jsonl").read_text().splitlines()]
    assert [m["rows"] for m in metrics] == [2, 2]
    for ours, theirs in zip(metrics, reference.metrics, strict=True):
        assert ours["loss"] == pytest.approx(theirs.loss, rel=1e-5)
        assert ours["supervised_tokens"] == theirs.supervised_tokens
    sharded = load_file(str(tmp_path / "fsdp" / "final" / "model.safetensors"))
    single = load_file(str(reference.final_model / "model.safetensors"))
    for name, tensor in single.items():
        assert torch.allclose(sharded[name], tensor, atol=1e-6), name
    assert (tmp_path / "fsdp" / "checkpoints" / "step-00000002" / "trainer_state.json").is_file()
