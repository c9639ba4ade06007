"""`captain model build`: model directories by name, families read from config, the text template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from captain_training.models.build import MODELS, build_model
from captain_training.models.family import CAUSAL_LM, QWEN3_5_VLM, ModelError, family_of, load_processor
from captain_training.models.text_template import IMAGE_TEXT, text_chat_template

ROW_MESSAGES = [
    {"role": "system", "content": "You are a robot agent."},
    {"role": "user", "content": [{"type": "text", "text": "Put the red cube on the plate."},
                                 {"type": "image", "image": "obs_000_head.png"}]},
    {"role": "assistant", "content": "", "reasoning_content": "Look first.",
     "tool_calls": [{"id": "c1", "type": "function", "function": {
         "name": "python", "arguments": {"input": "v = robot.observe()['value']\nprint(v['robot_state'])"}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "Cell 1 completed in 0.1 s"},
                                                        {"type": "image", "image": "obs_001_head.png"}]},
]
TOOLS = [{"type": "function", "function": {"name": "python", "description": "Run Python.",
                                           "parameters": {"type": "object", "properties": {
                                               "input": {"type": "string"}}, "required": ["input"]}}}]


def test_unknown_name_lists_the_models(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="smollm2-135m"):
        build_model("gpt-5", tmp_path / "m")
    assert {"smollm2-135m", "tiny-smollm2", "tiny-qwen3.5"} <= set(MODELS)


def test_existing_directory_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "keep.txt").write_text("mine")
    with pytest.raises(ModelError, match="not empty"):
        build_model("tiny-qwen3.5", tmp_path / "m")
    assert (tmp_path / "m" / "keep.txt").read_text() == "mine"


def test_families_come_from_config(tiny_smollm2_dir: Path, tiny_qwen_dir: Path) -> None:
    assert family_of(tiny_smollm2_dir).name == CAUSAL_LM
    assert not family_of(tiny_smollm2_dir).multimodal
    assert family_of(tiny_qwen_dir).name == QWEN3_5_VLM
    card = json.loads((tiny_smollm2_dir / "captain_model.json").read_text())
    assert card["family"] == CAUSAL_LM and card["image_text"] == IMAGE_TEXT


def test_not_a_model_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"config\.json"):
        family_of(tmp_path)


def test_text_template_is_the_qwen_format_with_text_images(tiny_smollm2_dir: Path, tiny_qwen_dir: Path) -> None:
    text_proc = load_processor(tiny_smollm2_dir)
    qwen_proc = load_processor(tiny_qwen_dir)
    text = text_proc.apply_chat_template(ROW_MESSAGES, tools=TOOLS)
    qwen = qwen_proc.apply_chat_template(ROW_MESSAGES, tools=TOOLS, tokenize=False)
    assert text.count(IMAGE_TEXT) == 2 and "<|image_pad|>" not in text
    assert text == qwen.replace("<|vision_start|><|image_pad|><|vision_end|>", IMAGE_TEXT)
    assert "'[image]'" in text_chat_template()
    assert "'<|vision_start|><|image_pad|><|vision_end|>'" not in text_chat_template()


def test_harness_parses_the_text_models_tool_calls(tiny_smollm2_dir: Path) -> None:
    """The assistant turn as the template writes it is what the harness's completion parser reads."""
    from captain_harness.core.episode.policy.openai_client import parse_completion

    proc = load_processor(tiny_smollm2_dir)
    messages = [*ROW_MESSAGES[:3]]
    rendered = proc.apply_chat_template(messages, tools=TOOLS)
    completion = rendered.rsplit("<|im_start|>assistant\n", 1)[1].removesuffix("<|im_end|>\n")
    reply = parse_completion({"choices": [{"message": {"content": completion}, "finish_reason": "stop"}]})
    assert [c.code for c in reply.tool_calls] == ["v = robot.observe()['value']\nprint(v['robot_state'])"]
    assert reply.reasoning == "Look first."
    ids = proc(text=[rendered])["input_ids"][0].tolist()
    assert ids[0] == proc.tokenizer.convert_tokens_to_ids("<|im_start|>")


@pytest.mark.slow
def test_smollm2_from_the_packaged_gguf(tmp_path: Path) -> None:
    """The real conversion (~1-3 min on 2 cores): a 134.5M-parameter fp32 Llama that knows text."""
    import torch

    from captain_training.models.family import load_model

    out = build_model("smollm2-135m", tmp_path / "smollm2")
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    model = load_model(out)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    tokenizer = load_processor(out).tokenizer
    sensible = tokenizer("The capital of France is Paris.", return_tensors="pt")["input_ids"]
    scrambled = tokenizer("Paris capital is The France of.", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        good = float(model(input_ids=sensible, labels=sensible).loss)
        bad = float(model(input_ids=scrambled, labels=scrambled).loss)
    assert good < 4.0 and good < bad - 1.0
