"""prepare + train on the tiny random Qwen3.5: the loss falls, and a resumed run continues exactly."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from sft_rows import PYTHON_TOOL, agent_turn, image, tool, user, write_png, write_rows

from captain_training.sft.errors import PreparedDataError
from captain_training.sft.prepare import prepare
from captain_training.sft.trainer import TrainConfig, train


def rows(root) -> list[dict]:
    write_png(root / "img" / "head.png", 32, 32, seed=3)
    write_png(root / "img" / "crop.png", 64, 32, seed=4)
    turns = [("Look.", "obs = robot.observe()"),
             ("Mark the mug.", "m = robot.mark_point(h, 'agentview', 0.31, 0.72)"),
             ("Grasp.", "robot.move_to(gripper='close')")]
    messages = [{"role": "system", "content": "You control a robot arm."},
                user("Put the mug in the basket.", image("img/head.png"))]
    for k, (reasoning, code) in enumerate(turns):
        messages.append(agent_turn(reasoning, code, call_id=f"c{k}"))
        messages.append(tool(f"Cell {k + 1} completed.", call_id=f"c{k}"))
    messages[-1] = tool("Cell 3 completed.", image("img/crop.png"), call_id="c2")
    messages.append(agent_turn("Done.", "robot.finish()", call_id="c3"))
    agent = {"id": "ep#req-000-003", "images": ["img/head.png", "img/crop.png"], "tools": [PYTHON_TOOL],
             "messages": messages, "meta": {"source": "agent", "supervise_turns": [2, 3], "packed_n": 2}}
    qa = {"id": "qapack:general:0", "images": ["img/head.png"],
          "messages": [user(image("img/head.png"), "What is in the image?"),
                       {"role": "assistant", "content": "A mug next to a basket on a wooden table."}],
          "meta": {"source": "qapack"}}
    return [agent, qa]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, processor, tiny_model_dir):
    root = tmp_path_factory.mktemp("sft_train")
    source = write_rows(root / "rows.jsonl", rows(root))
    data = prepare(source, root / "prepared", processor_path=tiny_model_dir, image_root=root, processor=processor)
    return root, data


def config(root, data, tiny_model_dir, out: str, **overrides) -> TrainConfig:
    options = dict(data=data.path, model=tiny_model_dir, output_dir=root / out, max_steps=6, learning_rate=2e-3,
                   precision="fp32", device="cpu", strategy="single", hint_mask_probability=0.5, save_every_steps=0,
                   log_every_steps=1, resume="auto")
    options.update(overrides)
    return TrainConfig(**options)


def test_prepare_manifest(prepared):
    _, data = prepared
    m = data.manifest
    assert m["n_rows"] == 2 and m["world_size"] == 1 and data.rows_per_rank == 2
    assert data.n_supervised.tolist()[0] > data.n_supervised.tolist()[1] > 0
    assert data.loss_constant.per_row == pytest.approx(sum(data.n_supervised.tolist()) / 2)


def test_suite_cap_keeps_the_first_rows_of_each_suite(tmp_path, prepared, tiny_model_dir, processor):
    root, _ = prepared
    agent, qa = rows(root)
    suites = ["libero_10", "libero_goal", "libero_10", "libero_10"]
    source = write_rows(tmp_path / "rows.jsonl", [{**agent, "id": f"a{k}", "meta": {**agent["meta"], "suite": s}}
                                                  for k, s in enumerate(suites)] + [qa])
    data = prepare(source, tmp_path / "capped", processor_path=tiny_model_dir, image_root=root, suite_cap=1,
                   processor=processor)
    assert data.manifest["n_rows"] == 3 and data.manifest["n_capped_by_suite"] == {"libero_10": 2}
    assert data.source_lines.tolist() == [1, 2, 5]


def test_training_lowers_the_loss_and_resume_continues_exactly(prepared, processor, tiny_model_dir):
    root, data = prepared
    full = train(config(root, data, tiny_model_dir, "full"), processor=processor)
    losses = [m.loss for m in full.metrics]
    assert full.steps_done == 6 and len(losses) == 6
    assert all(m.rows == 1 and m.supervised_tokens > 0 for m in full.metrics)
    # rows alternate (one row per step): each row's loss falls on its later visits
    assert losses[4] < losses[2] < losses[0]
    assert losses[5] < losses[3] < losses[1]
    assert full.final_model is not None and (full.final_model / "chat_template.jinja").is_file()

    first = train(config(root, data, tiny_model_dir, "resumed", stop_after_steps=3), processor=processor)
    assert first.steps_done == 3 and first.final_model is None
    assert first.last_checkpoint is not None and first.last_checkpoint.name == "step-00000003"
    second = train(config(root, data, tiny_model_dir, "resumed"), processor=processor)
    assert second.resumed_from == first.last_checkpoint
    assert [m.step for m in second.metrics] == [4, 5, 6]
    assert [m.loss for m in first.metrics + second.metrics] == losses
    assert [m.hint_masked_calls for m in first.metrics + second.metrics] == [m.hint_masked_calls
                                                                            for m in full.metrics]
    lines = (root / "resumed" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4, 5, 6]

    a = load_file(str(full.final_model / "model.safetensors"))
    b = load_file(str(second.final_model / "model.safetensors"))
    start = load_file(str(tiny_model_dir / "model.safetensors"))
    assert a.keys() == b.keys() == start.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
        if name.startswith("model.visual."):
            assert torch.equal(a[name], start[name]), f"vision tower changed: {name}"
    assert not torch.equal(a["lm_head.weight"], start["lm_head.weight"])
    assert not torch.equal(a["model.language_model.layers.0.mlp.up_proj.weight"],
                           start["model.language_model.layers.0.mlp.up_proj.weight"])


def test_fsdp2_in_one_process_matches_the_single_device_step(prepared, processor, tiny_model_dir):
    root, data = prepared
    single = train(config(root, data, tiny_model_dir, "single2", max_steps=2, export_final=False,
                          checkpoint_at_end=False), processor=processor)
    sharded = train(config(root, data, tiny_model_dir, "fsdp2", max_steps=2, strategy="fsdp2"), processor=processor)
    assert sharded.metrics[0].loss == pytest.approx(single.metrics[0].loss, rel=1e-6)
    assert sharded.metrics[1].loss == pytest.approx(single.metrics[1].loss, rel=1e-5)
    assert sharded.last_checkpoint is not None and (sharded.last_checkpoint / "trainer_state.json").is_file()
    exported = load_file(str(sharded.final_model / "model.safetensors"))
    assert "lm_head.weight" in exported and exported["lm_head.weight"].shape[0] == 248320


def test_train_refuses_data_prepared_for_another_world_size(tmp_path, prepared, tiny_model_dir, processor):
    root, _ = prepared
    other = prepare(root / "rows.jsonl", tmp_path / "w2", processor_path=tiny_model_dir, image_root=root,
                    world_size=2, processor=processor)
    assert other.rows_per_rank == 1
    with pytest.raises(PreparedDataError, match="prepared for 2 rank"):
        train(config(tmp_path, other, tiny_model_dir, "run"), processor=processor)


def test_prepare_lists_every_problem_and_writes_nothing(tmp_path, prepared, tiny_model_dir, processor):
    root, _ = prepared
    good = rows(root)
    missing = json.loads(json.dumps(good[1]))
    missing["images"] = ["img/nope.png"]
    missing["messages"][0]["content"][0]["image"] = "img/nope.png"
    source = write_rows(tmp_path / "rows.jsonl", [good[0], "{oops", missing, good[1], good[0]])
    with pytest.raises(PreparedDataError) as err:
        prepare(source, tmp_path / "out", processor_path=tiny_model_dir, image_root=root, max_length=100,
                processor=processor)
    message = str(err.value)
    assert "4 of 5 rows have problems" in message
    for line in ("line 1:", "line 2:", "line 3:", "line 5:"):
        assert line in message
    assert "line 4:" not in message
    assert "more than --max-length 100" in message and "img/nope.png" in message and "not valid JSON" in message
    assert not (tmp_path / "out" / "manifest.json").exists()
