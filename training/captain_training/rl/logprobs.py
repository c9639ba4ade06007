"""Log-probabilities of completion tokens under a causal language model.

The policy is trained on the token ids and log-probabilities the rollout server returned,
never on re-rendered text: the input is exactly ``prompt_token_ids + completion_token_ids``
as sampled, and the log-probabilities are read at the completion positions only (the
output layer is evaluated there alone, which matters with a 248k-token vocabulary).
Sampling is at temperature 1, so no temperature is applied here.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from captain_training.rl.errors import RLError


def completion_logprobs(model: torch.nn.Module, prompt_token_ids: Sequence[int],
                        completion_token_ids: Sequence[int]) -> torch.Tensor:
    """log pi(completion_j | prompt, completion_<j) for every completion token, shape (C,).

    Works with any Hugging Face causal LM that accepts ``logits_to_keep``; the gradient
    flows when the model is in a grad-enabled context.
    """
    n_prompt, n_completion = len(prompt_token_ids), len(completion_token_ids)
    if n_prompt < 1 or n_completion < 1:
        raise RLError(f"need at least one prompt and one completion token, got {n_prompt} and {n_completion}")
    device = next(model.parameters()).device
    ids = torch.tensor([list(prompt_token_ids) + list(completion_token_ids)], dtype=torch.long, device=device)
    out = model(input_ids=ids, logits_to_keep=n_completion + 1, use_cache=False)
    logits = out.logits[0, :-1, :]  # positions P-1 .. P+C-2 predict the C completion tokens
    if logits.shape[0] != n_completion:
        raise RLError(f"model returned {logits.shape[0]} logit rows for {n_completion} completion tokens; "
                      "it must support logits_to_keep")
    targets = ids[0, n_prompt:]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, targets[:, None]).squeeze(-1)
