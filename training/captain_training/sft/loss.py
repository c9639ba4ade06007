"""The SFT objective with logits computed only at supervised positions.

For a row with supervised token positions ``p`` (weight ``w_p``), the model's hidden state at
``p - 1`` predicts token ``p``. Only those hidden states go through the output layer, in
chunks (each chunk recomputed in backward), so a 65k-token row with a 248k vocabulary never
materialises a full ``[L, V]`` logits tensor. The row's contribution is
``sum_p w_p * NLL_p``; the trainer divides by the loss constant (see ``ordering.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional
from torch.utils.checkpoint import checkpoint

from captain_training.models.family import decoder, output_layer

#: Supervised positions per output-layer chunk.
DEFAULT_LOSS_CHUNK_TOKENS = 4096


@dataclass
class RowLoss:
    """Loss terms of one row.

    Attributes:
        weighted_nll_sum: ``sum_p w_p * NLL_p`` (differentiable).
        nll_sum: ``sum_p NLL_p`` (detached).
        n_supervised: number of supervised positions.
    """

    weighted_nll_sum: torch.Tensor
    nll_sum: torch.Tensor
    n_supervised: int


def _chunk_nll(lm_head: nn.Module, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = lm_head(hidden).float()
    return functional.cross_entropy(logits, targets, reduction="none")


def prediction_inputs(input_ids: torch.Tensor, token_weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``(positions, targets, weights)``: hidden-state positions ``p - 1``, target ids ``p``, weights ``w_p``."""
    supervised = torch.nonzero(token_weights > 0, as_tuple=False).flatten()
    supervised = supervised[supervised > 0]
    return supervised - 1, input_ids[supervised], token_weights[supervised]


class SupervisedLM(nn.Module):
    """A causal LM (any family) plus the supervised-position loss.

    Keeping the output layer and the loss inside one ``forward`` lets FSDP2 manage the
    output layer's parameters like any other root parameter. The decoder (the model's
    ``base_model_prefix`` module: a Qwen3.5 VLM's multimodal model, a Llama's ``LlamaModel``)
    gives the last hidden states; only those at supervised positions reach the output layer.

    Args:
        model: a transformers causal LM or Qwen3.5 VLM.
        loss_chunk_tokens: supervised positions per output-layer chunk.
    """

    def __init__(self, model: nn.Module, loss_chunk_tokens: int = DEFAULT_LOSS_CHUNK_TOKENS) -> None:
        super().__init__()
        self.model = model
        self.loss_chunk_tokens = int(loss_chunk_tokens)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        targets: torch.Tensor,
        weights: torch.Tensor,
        mm_token_type_ids: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        image_grid_thw: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(sum_p w_p * NLL_p, sum_p NLL_p)`` for one row (``input_ids`` of shape ``[1, L]``)."""
        kwargs: dict[str, Any] = {"input_ids": input_ids, "use_cache": False}
        if pixel_values is not None:
            kwargs.update(pixel_values=pixel_values, image_grid_thw=image_grid_thw,
                          mm_token_type_ids=mm_token_type_ids)
        hidden = decoder(self.model)(**kwargs).last_hidden_state[0]
        head = output_layer(self.model)
        if positions.numel() == 0:
            zero = hidden.sum() * 0.0
            return zero, zero.detach()
        selected = hidden.index_select(0, positions)
        chunk = self.loss_chunk_tokens
        if selected.shape[0] <= chunk:
            nll = _chunk_nll(head, selected, targets)
        else:
            pieces = []
            for start in range(0, selected.shape[0], chunk):
                part_hidden = selected[start:start + chunk]
                part_targets = targets[start:start + chunk]
                if torch.is_grad_enabled():
                    pieces.append(checkpoint(_chunk_nll, head, part_hidden, part_targets, use_reentrant=False))
                else:
                    pieces.append(_chunk_nll(head, part_hidden, part_targets))
            nll = torch.cat(pieces)
        return (nll * weights.to(nll.dtype)).sum(), nll.detach().sum()


def row_loss(module: nn.Module, rendered: Any, device: torch.device) -> RowLoss:
    """Run one rendered row (``RenderedRow``) through a :class:`SupervisedLM` on ``device``."""
    positions, targets, weights = prediction_inputs(rendered.input_ids, rendered.token_weights)
    pixel_values = rendered.pixel_values
    weighted, nll = module(
        input_ids=rendered.input_ids.unsqueeze(0).to(device),
        positions=positions.to(device),
        targets=targets.to(device),
        weights=weights.to(device),
        mm_token_type_ids=rendered.mm_token_type_ids.unsqueeze(0).to(device),
        pixel_values=pixel_values.to(device) if pixel_values is not None else None,
        image_grid_thw=rendered.image_grid_thw.to(device) if rendered.image_grid_thw is not None else None,
    )
    return RowLoss(weighted_nll_sum=weighted, nll_sum=nll, n_supervised=int(positions.numel()))
