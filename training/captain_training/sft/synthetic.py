"""Synthetic rows in the CaPtain-SFT-Data format, for benchmarks and smoke runs.

Rows look like the released ones (system prompt, environment context, task request with
head and wrist images, assistant turns with reasoning and a python call that uses
``mark_point``, tool turns with cell output and an image), at a configurable size. The
content is random but deterministic for a seed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run Python in a persistent Python 3 session with the robot API pre-imported.",
        "parameters": {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]},
    },
}

_WORDS = (
    "bowl", "plate", "gripper", "approach", "lift", "lower", "align", "measure", "observe",
    "receipt", "force", "jaw", "offset", "target", "height", "camera", "wrist", "head", "drawer",
    "handle", "mug", "basket", "cabinet", "close", "open", "rotate",
)


def _sentence(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words)).capitalize() + "."


def write_images(image_root: Path, episode: str, n_images: int, size_px: int, seed: int) -> list[str]:
    """Write ``n_images`` random RGB PNGs for an episode; return their relative paths."""
    import numpy as np
    from PIL import Image

    folder = image_root / "images" / "episodes" / episode
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    refs = []
    for k in range(n_images):
        name = f"obs_{k // 2:03d}_{'head' if k % 2 == 0 else 'wrist'}.png"
        pixels = rng.integers(0, 256, size=(size_px, size_px, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / name)
        refs.append(f"images/episodes/{episode}/{name}")
    return refs


def agent_row(rng: random.Random, episode: str, image_refs: list[str], n_turns: int, words_per_turn: int,
              packed: bool) -> dict[str, Any]:
    """One agent row with ``n_turns`` assistant turns; images are spread over the tool turns."""
    images = iter(image_refs)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent controlling a robot arm. " + _sentence(rng, 60)},
        {"role": "user", "content": f"<environment_context>\n<cwd>/data/captain/episodes/{episode}/workspace</cwd>\n"
                                    "</environment_context>"},
        {"role": "user", "content": [{"type": "text", "text": "Read TASK.md and complete the robot task."},
                                     {"type": "image", "image": next(images)},
                                     {"type": "image", "image": next(images)}]},
    ]
    for turn in range(n_turns):
        u, v = rng.random(), rng.random()
        code = (f"obs = robot.observe()\np = robot.mark_point(obs['value']['observation_handle'], 'agentview', "
                f"{u:.3f}, {v:.3f}, label='target')\nprint(p['success'])")
        messages.append({"role": "assistant", "content": "",
                         "reasoning_content": _sentence(rng, words_per_turn),
                         "tool_calls": [{"id": f"call_{turn}", "type": "function",
                                         "function": {"name": "python", "arguments": {"input": code}}}]})
        content: list[dict[str, Any]] = [{"type": "text", "text": f"Cell {turn + 1} completed in 1.2 s\nOutput:\n"
                                                                  f"True\nmark_point: ok; {_sentence(rng, 12)}"}]
        ref = next(images, None)
        if ref is not None:
            content.append({"type": "image", "image": ref})
        messages.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": content})
    messages.pop()  # a request ends with the model's reply
    meta: dict[str, Any] = {"episode": episode, "source": "agent", "subset": "synthetic", "suite": "libero_10",
                            "request_index": n_turns, "n_images": len(image_refs)}
    if packed:
        meta["supervise_turns"] = list(range(max(0, n_turns - 3), n_turns))
        meta["packed_n"] = len(meta["supervise_turns"])
    else:
        meta["turn_index"] = n_turns - 1
    used = [p["image"] for m in messages if isinstance(m.get("content"), list) for p in m["content"]
            if p.get("type") == "image"]
    return {"id": f"{episode}#req-{n_turns:03d}", "images": used, "tools": [PYTHON_TOOL], "messages": messages,
            "meta": meta}


def qa_row(rng: random.Random, index: int, image_ref: str, n_items: int) -> dict[str, Any]:
    """One packed visual-QA row with ``n_items`` question/answer pairs about one image."""
    messages: list[dict[str, Any]] = []
    for item in range(n_items):
        question: list[dict[str, Any]] = [{"type": "text", "text": _sentence(rng, 10).rstrip(".") + "?"}]
        if item == 0:
            question.insert(0, {"type": "image", "image": image_ref})
        messages.append({"role": "user", "content": question})
        messages.append({"role": "assistant", "content": _sentence(rng, 8)})
    return {"id": f"qapack:general:{index}", "images": [image_ref], "messages": messages,
            "meta": {"source": "qapack", "subset": "visual_qa", "n_items": n_items}}


def write_synthetic_rows(path: Path, image_root: Path, *, n_rows: int = 64, turns_per_row: int = 4,
                         words_per_turn: int = 40, image_size_px: int = 64, qa_fraction: float = 0.25,
                         seed: int = 0) -> Path:
    """Write ``n_rows`` synthetic rows to ``path`` with their images under ``image_root``."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(n_rows):
            if rng.random() < qa_fraction:
                refs = write_images(image_root, f"qa_{index:05d}", 1, image_size_px, seed + index)
                row = qa_row(rng, index, refs[0], n_items=3)
            else:
                episode = f"libero_10_{index % 10}_seed-{seed}-{index:05d}"
                refs = write_images(image_root, episode, 2 + turns_per_row, image_size_px, seed + index)
                row = agent_row(rng, episode, refs, turns_per_row, words_per_turn, packed=index % 2 == 1)
            handle.write(json.dumps(row) + "\n")
    return path
