"""Rendering rows into model inputs and per-token loss weights.

A row is rendered exactly as the harness renders a request:
``processor.apply_chat_template(messages, tools=row["tools"])``, then the processor binds the
row's images, in order of appearance, to the ``<|image_pad|>`` placeholders.

Supervision is found on the token ids: each assistant turn starts with the tokens of
``<|im_start|>assistant\\n``; its supervised span runs from the next token up to and
including the following ``<|im_end|>``. The k-th such header is assistant ordinal k. Only
the ordinals :func:`select_supervision` picks get the row's weight; every other token has
weight 0. A row longer than ``max_length`` tokens raises :class:`RowTooLongError`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from captain_training.qwen.special_tokens import IM_END_ID
from captain_training.sft.errors import ImageError, RenderError, RowTooLongError
from captain_training.sft.hint_mask import (
    DEFAULT_HINT_MASK_PROBABILITY,
    apply_text_hint_mask,
    history_turns,
    mark_point_coordinate_spans,
    row_rng,
)
from captain_training.sft.reader import RowRecord
from captain_training.sft.rows import assistant_message_indices, image_refs
from captain_training.sft.supervision import RowSupervision, SupervisionPolicy, select_supervision

#: Longest row of the released data; the paper trains at this length.
DEFAULT_MAX_LENGTH = 65536


@dataclass
class RenderedRow:
    """Model inputs and loss weights of one row.

    Attributes:
        line_number: line of the row in the file it was read from.
        row_id: the row's id.
        input_ids: token ids, shape ``[L]`` (int64 tensor).
        token_weights: loss weight of each token as a prediction target, shape ``[L]``
            (float32); 0 outside supervised assistant spans.
        mm_token_type_ids: 1 at image tokens, 0 elsewhere, shape ``[L]``.
        pixel_values, image_grid_thw: the processor's image tensors (``None`` without images).
        supervision: the turns and weight chosen for the row.
        n_hint_masked: ``mark_point`` calls whose coordinates the text-hint mask replaced.
    """

    line_number: int
    row_id: str
    input_ids: Any
    token_weights: Any
    mm_token_type_ids: Any
    pixel_values: Any
    image_grid_thw: Any
    supervision: RowSupervision
    n_hint_masked: int = 0

    @property
    def n_tokens(self) -> int:
        """Length of the row in tokens (images included)."""
        return int(self.input_ids.shape[0])

    @property
    def n_supervised(self) -> int:
        """Number of tokens that carry loss."""
        return int((self.token_weights > 0).sum())


@dataclass(frozen=True)
class RowMeasure:
    """Token counts of a row, computed without decoding its images.

    Attributes:
        n_tokens: rendered length in tokens, images included (the larger of the plain rendering
            and the rendering with every history ``mark_point`` coordinate masked).
        n_supervised: tokens that carry loss.
        weight: loss weight of each supervised token.
    """

    n_tokens: int
    n_supervised: int
    weight: float


def assistant_spans(input_ids: Any, header_ids: tuple[int, ...], im_end_id: int = IM_END_ID) -> list[tuple[int, int]]:
    """``(first, last)`` token positions (inclusive) of every assistant reply, in order.

    A reply starts right after the header tokens (``<|im_start|>assistant\\n``) and ends
    at the next ``<|im_end|>``, which is included.
    """
    ids = np.asarray(input_ids)
    n_header = len(header_ids)
    starts = np.flatnonzero(ids == header_ids[0])
    ends = np.flatnonzero(ids == im_end_id)
    spans = []
    for start in starts:
        if start + n_header > len(ids) or tuple(ids[start:start + n_header].tolist()) != header_ids:
            continue
        first = int(start) + n_header
        following = ends[np.searchsorted(ends, first):]
        if following.size == 0:
            raise RenderError(f"assistant turn at token {first} has no closing <|im_end|>")
        spans.append((first, int(following[0])))
    return spans


class RowRenderer:
    """Turns rows into :class:`RenderedRow` with the model's processor.

    Works for every model family (``captain_training.models.family``): with a Qwen3.5
    processor images are bound to their ``<|image_pad|>`` tokens; with a text-only model's
    processor (``text_only``) each image is the template's placeholder text and no pixels
    are read. The turn markers ``<|im_start|>`` / ``<|im_end|>`` are looked up in the
    tokenizer, so any ChatML tokenizer works.

    Args:
        processor: ``captain_training.models.family.load_processor(model_dir)``.
        image_root: directory the rows' image paths are relative to.
        max_length: longest allowed row in tokens (never truncated: longer rows raise).
        policy: supervision settings (QA loss weight).
        hint_mask_probability: probability of masking each history ``mark_point`` call.
        seed: seed of the text-hint mask (combined with epoch and row).
    """

    def __init__(
        self,
        processor: Any,
        *,
        image_root: Path | str | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        policy: SupervisionPolicy | None = None,
        hint_mask_probability: float = DEFAULT_HINT_MASK_PROBABILITY,
        seed: int = 0,
    ) -> None:
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.image_root = Path(image_root) if image_root is not None else None
        self.max_length = int(max_length)
        self.policy = policy or SupervisionPolicy()
        self.hint_mask_probability = float(hint_mask_probability)
        self.seed = int(seed)
        self.text_only = bool(getattr(processor, "text_only", False))
        self.im_start_id = self._single_token_id("<|im_start|>")
        self.im_end_id = self._single_token_id("<|im_end|>")
        header = self.tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
        self.header_ids = tuple(int(t) for t in header)
        if self.header_ids[0] != self.im_start_id:
            raise RenderError(f"the tokenizer splits <|im_start|>assistant into {self.header_ids}, not starting with "
                              f"the <|im_start|> token {self.im_start_id}")
        self.merge_size = int(getattr(processor.image_processor, "merge_size", 2))

    def _single_token_id(self, token: str) -> int:
        ids = self.tokenizer(token, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise RenderError(f"the tokenizer has no single token {token}: it encodes to {ids}; rows use the ChatML "
                              "turn format (<|im_start|>role ... <|im_end|>)")
        return int(ids[0])

    # -- text -------------------------------------------------------------------------------
    def chat_text(self, row: dict[str, Any], messages: list[dict[str, Any]] | None = None) -> str:
        """The row rendered by the chat template (one ``<|image_pad|>`` per image)."""
        return self.processor.apply_chat_template(
            messages if messages is not None else row["messages"], tools=row.get("tools"), tokenize=False
        )

    def masked_messages(self, record: RowRecord, supervision: RowSupervision, epoch: int) -> tuple[list, int]:
        """The row's messages after the text-hint mask for this epoch, and the calls masked."""
        if not supervision.supervised or self.hint_mask_probability <= 0:
            return record.row["messages"], 0
        rng = row_rng(self.seed, epoch, f"{record.line_number}:{record.row_id}")
        return apply_text_hint_mask(record.row["messages"], supervision.turns, rng, self.hint_mask_probability)

    # -- images -----------------------------------------------------------------------------
    def image_path(self, ref: str, line_number: int) -> Path:
        """Absolute path of an image reference of a row."""
        path = Path(ref)
        if not path.is_absolute():
            if self.image_root is None:
                raise ImageError(f"line {line_number}: image {ref!r} is relative but no image root was given; "
                                 "pass --image-root (the dataset root)")
            path = self.image_root / path
        return path

    def load_images(self, row: dict[str, Any], line_number: int) -> list[Any]:
        """The row's images as RGB PIL images, in order of appearance."""
        from PIL import Image

        images = []
        for ref in image_refs(row["messages"]):
            path = self.image_path(ref, line_number)
            try:
                with Image.open(path) as image:
                    images.append(image.convert("RGB"))
            except (FileNotFoundError, OSError) as exc:
                raise ImageError(f"line {line_number}: cannot read image {ref!r} at {path}: {exc}") from None
        return images

    def image_token_count(self, ref: str, line_number: int) -> int:
        """Tokens one image takes, from its header only (no pixel decoding)."""
        from PIL import Image

        path = self.image_path(ref, line_number)
        try:
            with Image.open(path) as image:
                width, height = image.size
        except (FileNotFoundError, OSError) as exc:
            raise ImageError(f"line {line_number}: cannot read image {ref!r} at {path}: {exc}") from None
        patches = self.processor.image_processor.get_number_of_image_patches(height, width, {})
        return int(patches) // (self.merge_size ** 2)

    # -- supervision ------------------------------------------------------------------------
    def token_weights(self, input_ids: Any, row: dict[str, Any], supervision: RowSupervision,
                      line_number: int) -> np.ndarray:
        """Per-token loss weights of a rendered row (float32, same length as ``input_ids``)."""
        spans = assistant_spans(input_ids, self.header_ids, self.im_end_id)
        n_turns = len(assistant_message_indices(row["messages"]))
        if len(spans) != n_turns:
            raise RenderError(
                f"line {line_number}: found {len(spans)} assistant headers in the tokens but the row has "
                f"{n_turns} assistant turns; the chat template does not write ChatML turns, or a "
                "message contains the text <|im_start|>assistant"
            )
        weights = np.zeros(len(np.asarray(input_ids)), dtype=np.float32)
        if supervision.supervised:
            for ordinal in supervision.turns:
                first, last = spans[ordinal]
                weights[first:last + 1] = supervision.weight
        return weights

    # -- whole rows -------------------------------------------------------------------------
    def render(self, record: RowRecord, *, epoch: int = 0) -> RenderedRow:
        """Render one row: text, images, token weights, with the text-hint mask of ``epoch``."""
        import torch

        row = record.row
        supervision = select_supervision(row, self.policy)
        messages, n_masked = self.masked_messages(record, supervision, epoch)
        text = self.chat_text(row, messages)
        images = [] if self.text_only else self.load_images(row, record.line_number)
        encoded = self.processor(text=[text], images=images or None, return_tensors="pt")
        input_ids = encoded["input_ids"][0]
        if input_ids.shape[0] > self.max_length:
            raise RowTooLongError(record.line_number, record.row_id, int(input_ids.shape[0]), self.max_length)
        weights = self.token_weights(input_ids.numpy(), row, supervision, record.line_number)
        mm_types = encoded.get("mm_token_type_ids")
        return RenderedRow(
            line_number=record.line_number,
            row_id=record.row_id,
            input_ids=input_ids,
            token_weights=torch.from_numpy(weights),
            mm_token_type_ids=mm_types[0] if mm_types is not None else torch.zeros_like(input_ids),
            pixel_values=encoded.get("pixel_values"),
            image_grid_thw=encoded.get("image_grid_thw"),
            supervision=supervision,
            n_hint_masked=n_masked,
        )

    def measure(self, record: RowRecord) -> RowMeasure:
        """Length and supervised-token count of a row, reading only image headers."""
        row = record.row
        supervision = select_supervision(row, self.policy)
        text = self.chat_text(row)
        input_ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        weights = self.token_weights(input_ids, row, supervision, record.line_number)
        extra = 0 if self.text_only else sum(self.image_token_count(ref, record.line_number) - 1
                                             for ref in image_refs(row["messages"]))
        n_tokens = len(input_ids) + extra
        if supervision.supervised and self.hint_mask_probability > 0 and self._has_history_coordinates(
                row, supervision):
            masked, _ = apply_text_hint_mask(row["messages"], supervision.turns, _AlwaysMask(), 1.0)
            masked_ids = self.tokenizer(self.chat_text(row, masked), add_special_tokens=False)["input_ids"]
            n_tokens = max(n_tokens, len(masked_ids) + extra)
        return RowMeasure(n_tokens=n_tokens, n_supervised=int((weights > 0).sum()), weight=supervision.weight)

    @staticmethod
    def _has_history_coordinates(row: dict[str, Any], supervision: RowSupervision) -> bool:
        indices = assistant_message_indices(row["messages"])
        for turn in history_turns(len(indices), supervision.turns):
            for call in row["messages"][indices[turn]].get("tool_calls") or []:
                arguments = (call.get("function") or {}).get("arguments") or {}
                for value in arguments.values() if isinstance(arguments, dict) else ():
                    if isinstance(value, str) and "mark_point" in value and mark_point_coordinate_spans(value):
                        return True
        return False


class _AlwaysMask(random.Random):
    """A random stream whose draws always fall under the mask probability (worst-case length)."""

    def random(self) -> float:
        return 0.0
