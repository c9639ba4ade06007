"""SFT on a text-only causal LM (tiny random Llama with the real SmolLM2 tokenizer): the same
reader, renderer, loss and trainer as for Qwen3.5, chosen from the model's config."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from sft_rows import PYTHON_TOOL, agent_turn, expected_agent_reply, image, tool, user, write_png, write_rows

from captain_training.models.family import family_of, load_model, load_processor
from captain_training.sft.loss import SupervisedLM, row_loss
from captain_training.sft.prepare import prepare
from captain_training.sft.reader import RowRecord
from captain_training.sft.render import RowRenderer
from captain_training.sft.trainer import TrainConfig, train

TURNS = [("Look.", "obs = robot.observe()"), ("Find the cube.", "d = robot.segment(h, 'agentview', 'red cube')"),
         ("Grasp.", "robot.move_to(gripper='close')"), ("Done.", "robot.finish()")]


def agent_row(root: Path) -> dict:
    write_png(root / "img" / "head.png", 32, 32, seed=3)
    messages = [{"role": "system", "content": "You control a robot arm."},
                user("Put the red cube on the plate.", image("img/head.png"))]
    for k, (reasoning, code) in enumerate(TURNS):
        messages.append(agent_turn(reasoning, code, call_id=f"c{k}"))
        if k < len(TURNS) - 1:
            messages.append(tool(f"Cell {k + 1} completed.", image("img/head.png"), call_id=f"c{k}"))
    return {"id": "ep#req-000-004", "images": ["img/head.png"] * 4, "tools": [PYTHON_TOOL], "messages": messages,
            "meta": {"source": "agent", "supervise_turns": [2, 3]}}


@pytest.fixture(scope="module")
def text_processor(tiny_smollm2_dir: Path):
    return load_processor(tiny_smollm2_dir)


def test_supervised_tokens_are_the_chosen_replies_and_images_are_text(tmp_path: Path, text_processor) -> None:
    renderer = RowRenderer(text_processor, image_root=tmp_path, hint_mask_probability=0.0)
    rendered = renderer.render(RowRecord(1, 0, agent_row(tmp_path)))
    ids = rendered.input_ids
    weights = rendered.token_weights
    text = text_processor.tokenizer.decode(ids[weights > 0].tolist(), skip_special_tokens=False)
    assert text == "".join(expected_agent_reply(r, c) for r, c in TURNS[2:])
    full = text_processor.tokenizer.decode(ids.tolist(), skip_special_tokens=False)
    assert full.count("[image]") == 4 and rendered.pixel_values is None
    assert renderer.measure(RowRecord(1, 0, agent_row(tmp_path))).n_tokens == rendered.n_tokens


def test_supervised_position_loss_equals_the_full_logits_loss(tmp_path: Path, text_processor,
                                                               tiny_smollm2_dir: Path) -> None:
    renderer = RowRenderer(text_processor, image_root=tmp_path, hint_mask_probability=0.0)
    rendered = renderer.render(RowRecord(1, 0, agent_row(tmp_path)))
    model = load_model(tiny_smollm2_dir)
    with torch.no_grad():
        ours = row_loss(SupervisedLM(model, loss_chunk_tokens=7), rendered, torch.device("cpu"))
        labels = torch.where(rendered.token_weights > 0, rendered.input_ids, torch.tensor(-100))
        reference = model(input_ids=rendered.input_ids[None], labels=labels[None]).loss
    assert model.config._attn_implementation == "sdpa"
    assert float(ours.nll_sum) / ours.n_supervised == pytest.approx(float(reference), rel=1e-4)


def test_training_a_text_model_lowers_the_loss_and_exports_it(tmp_path: Path, text_processor,
                                                               tiny_smollm2_dir: Path) -> None:
    source = write_rows(tmp_path / "rows.jsonl", [agent_row(tmp_path)] * 2)
    data = prepare(source, tmp_path / "prepared", processor_path=tiny_smollm2_dir, image_root=tmp_path,
                   processor=text_processor)
    config = TrainConfig(data=data.path, model=tiny_smollm2_dir, output_dir=tmp_path / "run", max_steps=6,
                         learning_rate=3e-3, precision="fp32", device="cpu", strategy="single", save_every_steps=0)
    result = train(config, processor=text_processor)
    losses = [m.nll_per_token for m in result.metrics]
    assert losses[-1] < losses[0] - 0.5
    assert result.final_model is not None and family_of(result.final_model).name == "causal_lm"
    reloaded = load_model(result.final_model)
    assert (result.final_model / "chat_template.jinja").is_file()
    assert reloaded.config.tie_word_embeddings
