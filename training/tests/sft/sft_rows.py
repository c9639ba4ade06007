"""Small helpers for hand-written rows and for checking masks against the Qwen3.5 format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run Python in a persistent Python 3 session.",
        "parameters": {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]},
    },
}


def user(*parts: Any) -> dict[str, Any]:
    """A user message; a single string part becomes string content."""
    if len(parts) == 1 and isinstance(parts[0], str):
        return {"role": "user", "content": parts[0]}
    return {"role": "user", "content": [_part(p) for p in parts]}


def tool(*parts: Any, call_id: str = "call_0") -> dict[str, Any]:
    """A tool message with text/image parts."""
    return {"role": "tool", "tool_call_id": call_id, "content": [_part(p) for p in parts]}


def _part(p: Any) -> dict[str, Any]:
    if isinstance(p, dict):
        return p
    return {"type": "text", "text": p}


def image(ref: str) -> dict[str, Any]:
    """An image content part."""
    return {"type": "image", "image": ref}


def agent_turn(reasoning: str, code: str, content: str = "", call_id: str = "call_0") -> dict[str, Any]:
    """An assistant turn with reasoning and one python call."""
    return {"role": "assistant", "content": content, "reasoning_content": reasoning,
            "tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": "python", "arguments": {"input": code}}}]}


def expected_agent_reply(reasoning: str, code: str, content: str = "") -> str:
    """What the Qwen3.5 format renders for an :func:`agent_turn` after the last user query."""
    lead = f"<think>\n{reasoning.strip()}\n</think>\n\n{content.strip()}"
    sep = "\n\n" if content.strip() else ""
    return (f"{lead}{sep}<tool_call>\n<function=python>\n<parameter=input>\n{code}\n</parameter>\n</function>\n"
            "</tool_call><|im_end|>")


def write_png(path: Path, width: int, height: int, seed: int = 0) -> Path:
    """A random RGB PNG of the given size."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


def write_rows(path: Path, rows: list[Any]) -> Path:
    """Write rows (objects or raw strings) one per line."""
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def supervised_runs(weights: Any) -> list[tuple[int, int]]:
    """Maximal runs ``(first, last)`` of positions with weight > 0."""
    w = np.asarray(weights) > 0
    runs = []
    start = None
    for i, on in enumerate(w):
        if on and start is None:
            start = i
        if not on and start is not None:
            runs.append((start, i - 1))
            start = None
    if start is not None:
        runs.append((start, len(w) - 1))
    return runs


def check_mask(rendered: Any, tokenizer: Any, expected_replies: list[str], weight: float) -> None:
    """Token-by-token check of a rendered row's weights against the expected supervised replies.

    Every supervised run must decode exactly to the next expected reply, be preceded by the
    tokens of ``<|im_start|>assistant\\n``, carry ``weight`` on every token, and every token
    outside the runs must have weight 0.
    """
    ids = rendered.input_ids.tolist()
    weights = rendered.token_weights.numpy()
    runs = supervised_runs(weights)
    assert len(runs) == len(expected_replies), (runs, expected_replies)
    header = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    for (first, last), expected in zip(runs, expected_replies, strict=True):
        assert tokenizer.decode(ids[first:last + 1]) == expected
        assert ids[first - len(header):first] == header
        assert np.all(weights[first:last + 1] == np.float32(weight))
    outside = np.ones(len(ids), dtype=bool)
    for first, last in runs:
        outside[first:last + 1] = False
    assert np.all(weights[outside] == 0)
