"""``captain bench rl`` figures that need no rollout runner.

* ``critic_train_s``: warm-start training time of the 5 x (3 x 256) critic on synthetic
  request states (``synthetic_episodes``), ``critic_states`` of them, ``critic_epochs`` epochs;
* ``critic_auc_heldout`` / ``critic_brier_heldout`` / ``critic_ece_heldout``: ranking and
  calibration on episodes from layouts it never saw;
* ``critic_value_us_per_state``: inference cost per request state;
* ``policy_loss_step_ms``: one Eq. 8 forward + backward + AdamW step on a tiny random
  Qwen3 causal LM (2 layers, hidden 64), ``policy_tokens`` completion tokens.

Rollout throughput (``teacher_episodes_per_hour``) needs the episode runner and is not
measured here.
"""

from __future__ import annotations

import time
from typing import Any


def _critic_figures(start_states: int, epochs: int, seed: int) -> dict[str, float]:
    from captain_training.rl.critic import CriticConfig, SimulatorCritic, evaluate_critic, train_critic
    from captain_training.rl.synthetic_episodes import DEFAULT_TASKS, episode_dataset, generate_episodes

    train = episode_dataset(generate_episodes(start_states, seed=seed))
    held = episode_dataset(generate_episodes(max(start_states // 2, 1), seed=seed + 1000))  # unseen layouts
    critic = SimulatorCritic(CriticConfig(task_ids=tuple(t.task_id for t in DEFAULT_TASKS), seed=seed))
    _, result = train_critic(critic, train, epochs=epochs, seed=seed)
    report = evaluate_critic(critic, held)
    t0 = time.perf_counter()
    critic.value(held.features, held.request_index, held.task)
    infer_s = time.perf_counter() - t0
    return {
        "critic_train_s": result.duration_s,
        "critic_states": float(len(train)),
        "critic_epochs": float(epochs),
        "critic_auc_heldout": report["auc"],
        "critic_brier_heldout": report["brier"],
        "critic_ece_heldout": report["ece"],
        "critic_value_us_per_state": 1e6 * infer_s / max(len(held), 1),
    }


def tiny_causal_lm(vocab_size: int = 512, seed: int = 0) -> Any:
    """A random 2-layer, hidden-64 Qwen3 causal LM built from a config (no download)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                      tie_word_embeddings=False)
    return Qwen3ForCausalLM(cfg)


def _policy_figures(tokens: int, repeats: int, seed: int) -> dict[str, float]:
    import copy

    import torch

    from captain_training.rl.logprobs import completion_logprobs
    from captain_training.rl.policy_loss import policy_loss

    model = tiny_causal_lm(seed=seed)
    reference = copy.deepcopy(model).eval()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, 512, (256,), generator=gen).tolist()
    completion = torch.randint(0, 512, (tokens,), generator=gen).tolist()
    with torch.no_grad():
        old = completion_logprobs(model, prompt, completion)
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        logp = completion_logprobs(model, prompt, completion)
        with torch.no_grad():
            ref = completion_logprobs(reference, prompt, completion)
        out = policy_loss(logp, old, ref, torch.ones_like(logp))
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    times = sorted(times[1:])  # the first call warms up
    return {"policy_loss_step_ms": 1e3 * times[len(times) // 2], "policy_tokens": float(tokens)}


def run(**options: Any) -> dict[str, float]:
    """Measure. Options: ``start_states`` (120), ``epochs`` (3), ``tokens`` (512), ``repeats`` (5),
    ``seed`` (0), ``threads`` (torch intra-op threads; default: torch's choice)."""
    seed = int(options.get("seed", 0))
    if "threads" in options:
        import torch

        torch.set_num_threads(int(options["threads"]))
    figures = _critic_figures(int(options.get("start_states", 120)), int(options.get("epochs", 3)), seed)
    figures.update(_policy_figures(int(options.get("tokens", 512)), int(options.get("repeats", 5)), seed))
    import torch

    figures["torch_threads"] = float(torch.get_num_threads())
    return figures
