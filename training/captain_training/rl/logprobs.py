"""Log-probabilities of completion tokens under a causal language model, with the prompt's images.

The policy is trained on the token ids and log-probabilities the rollout server returned,
never on re-rendered text: the input is exactly ``prompt_token_ids + completion_token_ids``
as sampled, and the log-probabilities are read at the completion positions only (the
output layer is evaluated there alone, which matters with a 248k-token vocabulary).
Sampling is at temperature 1, so no temperature is applied here.

Multimodal prompts (a Qwen3.5 VLM): the server's prompt ids already hold one
``<|image_pad|>`` per merged image patch. The trainer needs the same pixel inputs the
server used, so the rollout records each request's images (files, in prompt order) and
:func:`multimodal_inputs` runs them through the model's image processor exactly as the
server's processor did: ``pixel_values`` and ``image_grid_thw`` from the images,
``mm_token_type_ids`` from the ids (1 at image tokens), and the count of image tokens is
checked against the grids. ``completion_logprobs(..., mm_inputs=...)`` then evaluates the
model on exactly ``(input_ids, pixel_values, image_grid_thw, mm_token_type_ids)``, which is
what the server's first forward saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from captain_training.rl.errors import RLError


def load_images(paths: Sequence[str | Path]) -> list[Any]:
    """RGB PIL images of image files, in order (``RLError`` naming a missing or unreadable file)."""
    from PIL import Image

    images = []
    for p in paths:
        try:
            with Image.open(p) as im:
                images.append(im.convert("RGB"))
        except (OSError, ValueError) as exc:
            raise RLError(f"cannot read the prompt image {p}: {exc}") from None
    return images


def multimodal_inputs(processor: Any, prompt_token_ids: Sequence[int], images: Sequence[Any]
                      ) -> dict[str, torch.Tensor]:
    """``pixel_values``, ``image_grid_thw`` and ``mm_token_type_ids`` of a prompt and its images.

    Args:
        processor: the model's processor (``captain_training.models.family.load_processor``).
        prompt_token_ids: the prompt ids as the server rendered them (image tokens expanded).
        images: PIL images (or paths) in the order they appear in the prompt.
    """
    pil = load_images(images) if images and isinstance(images[0], (str, Path)) else list(images)
    ids = [int(i) for i in prompt_token_ids]
    types = torch.tensor(processor.create_mm_token_type_ids([ids])[0], dtype=torch.long)[None, :]
    n_image_tokens = int((types == 1).sum())
    if not pil:
        if n_image_tokens:
            raise RLError(f"the prompt holds {n_image_tokens} image tokens but no image was recorded for it")
        return {}
    encoded = processor.image_processor(images=pil, return_tensors="pt")
    grid = encoded["image_grid_thw"]
    merge = int(getattr(processor.image_processor, "merge_size", 2))
    expected = int((grid.prod(dim=-1) // (merge * merge)).sum())
    if expected != n_image_tokens:
        raise RLError(f"{len(pil)} image(s) make {expected} image tokens but the prompt holds {n_image_tokens}; "
                      "the recorded images are not the ones the server saw")
    return {"pixel_values": encoded["pixel_values"], "image_grid_thw": grid, "mm_token_type_ids": types}


def completion_logprobs(model: torch.nn.Module, prompt_token_ids: Sequence[int],
                        completion_token_ids: Sequence[int], mm_inputs: dict[str, torch.Tensor] | None = None
                        ) -> torch.Tensor:
    """log pi(completion_j | prompt, completion_<j) for every completion token, shape (C,).

    Works with any Hugging Face causal LM that accepts ``logits_to_keep``; the gradient
    flows when the model is in a grad-enabled context. ``mm_inputs`` (from
    :func:`multimodal_inputs`) adds the prompt's pixels; its ``mm_token_type_ids`` covers the
    prompt and is extended with zeros over the completion.
    """
    n_prompt, n_completion = len(prompt_token_ids), len(completion_token_ids)
    if n_prompt < 1 or n_completion < 1:
        raise RLError(f"need at least one prompt and one completion token, got {n_prompt} and {n_completion}")
    device = next(model.parameters()).device
    ids = torch.tensor([list(prompt_token_ids) + list(completion_token_ids)], dtype=torch.long, device=device)
    extra: dict[str, torch.Tensor] = {}
    if mm_inputs:
        types = mm_inputs["mm_token_type_ids"].to(device)
        if types.shape[-1] == n_prompt:
            types = torch.cat([types, torch.zeros((1, n_completion), dtype=types.dtype, device=device)], dim=-1)
        visual = getattr(getattr(model, "model", None), "visual", None)
        dtype = next(visual.parameters()).dtype if visual is not None else torch.float32
        extra = {"pixel_values": mm_inputs["pixel_values"].to(device=device, dtype=dtype),
                 "image_grid_thw": mm_inputs["image_grid_thw"].to(device), "mm_token_type_ids": types}
    out = model(input_ids=ids, logits_to_keep=n_completion + 1, use_cache=False, **extra)
    logits = out.logits[0, :-1, :]  # positions P-1 .. P+C-2 predict the C completion tokens
    if logits.shape[0] != n_completion:
        raise RLError(f"model returned {logits.shape[0]} logit rows for {n_completion} completion tokens; "
                      "it must support logits_to_keep")
    targets = ids[0, n_prompt:]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, targets[:, None]).squeeze(-1)
