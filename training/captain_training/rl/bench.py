"""``captain bench rl`` figures that need no rollout runner.

* ``critic_train_s``: warm-start training time of the 5 x (3 x 256) critic on synthetic
  request states (``synthetic_episodes``), ``critic_states`` of them, ``critic_epochs`` epochs;
* ``critic_auc_heldout`` / ``critic_brier_heldout`` / ``critic_ece_heldout``: ranking and
  calibration on episodes from layouts it never saw;
* ``critic_value_us_per_state``: inference cost per request state;
* ``policy_loss_step_ms``: one Eq. 8 forward + backward + AdamW step on a tiny random
  Qwen3 causal LM (2 layers, hidden 64), ``policy_tokens`` completion tokens.

* ``teacher_episodes_per_hour`` / ``teacher_host_success``: RL episodes (``rollout.collect_episode``:
  hidden snapshots, features, hooks) of the teacher policy on the tabletop, one process;
* ``endpoint_episodes_per_hour`` / ``endpoint_s_per_request``: the same with the tiny random
  Qwen3.5 behind the local endpoint (sampling ``endpoint_tokens`` tokens per request,
  ``endpoint_requests`` requests per episode).

Option ``rollouts=False`` skips the two throughput figures.
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


def _episodes_per_hour(jobs: list[Any]) -> tuple[float, list[dict[str, Any]]]:
    from captain_training.rl.workers import make_pool

    pool = make_pool("inline")
    t0 = time.perf_counter()
    out = pool.run(jobs)
    wall = time.perf_counter() - t0
    return 3600.0 * len(jobs) / wall, out


def _rollout_figures(episodes: int, tokens: int, requests: int, seed: int) -> dict[str, float]:
    import tempfile

    from captain_training.qwen.tiny_model import cached_tiny_model_dir
    from captain_training.rl.endpoint import EndpointConfig, LocalPolicyServer
    from captain_training.rl.rollout import RolloutJob
    from captain_training.rl.start_states import StartState

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="captain-bench-rl-") as tmp:
        def jobs(name: str, options: dict[str, Any], max_requests: int) -> list[RolloutJob]:
            return [RolloutJob(episode_key=f"{name}-{i}", group_key=f"{name}-{i}",
                               start=StartState("tabletop/cube_on_plate", seed + i), policy_name=name,
                               policy_options=options, out_dir=f"{tmp}/{name.replace(':', '-')}",
                               max_requests=max_requests, critic_cut_allowed=False)
                    for i in range(episodes)]

        rate, out = _episodes_per_hour(jobs("captain_harness.core.teacher.policy:make_teacher", {"seed": seed}, 60))
        figures["teacher_episodes_per_hour"] = rate
        figures["teacher_host_success"] = sum(bool(o.get("host_success")) for o in out) / max(len(out), 1)
        figures["teacher_requests_mean"] = sum(int(o.get("requests", 0)) for o in out) / max(len(out), 1)
        cfg = EndpointConfig(model_dir=str(cached_tiny_model_dir()), max_new_tokens=tokens, seed=seed)
        with LocalPolicyServer(cfg) as server:
            options = {"base_url": server.base_url, "model": cfg.served_model_name, "max_tokens": tokens}
            rate, out = _episodes_per_hour(jobs("captain_training.rl.policy_client:make_rollout_policy", options,
                                                requests))
            n_requests = sum(int(o.get("requests", 0)) for o in out)
            served = server.requests_served
        figures["endpoint_episodes_per_hour"] = rate
        figures["endpoint_requests_served"] = float(served)
        figures["endpoint_s_per_episode"] = 3600.0 / rate if rate else float("nan")
        figures["endpoint_tokens_per_request"] = float(tokens)
        figures["endpoint_requests_mean"] = n_requests / max(len(out), 1)
    return figures


def run(**options: Any) -> dict[str, float]:
    """Measure. Options: ``start_states`` (120), ``epochs`` (3), ``tokens`` (512), ``repeats`` (5),
    ``seed`` (0), ``threads`` (torch intra-op threads; default: torch's choice), ``rollouts`` (True),
    ``episodes`` (3 per policy), ``endpoint_tokens`` (16), ``endpoint_requests`` (3)."""
    seed = int(options.get("seed", 0))
    if "threads" in options:
        import torch

        torch.set_num_threads(int(options["threads"]))
    figures = _critic_figures(int(options.get("start_states", 120)), int(options.get("epochs", 3)), seed)
    figures.update(_policy_figures(int(options.get("tokens", 512)), int(options.get("repeats", 5)), seed))
    import torch

    figures["torch_threads"] = float(torch.get_num_threads())
    if options.get("rollouts", True) not in (False, "0", "false", "False"):
        figures.update(_rollout_figures(int(options.get("episodes", 3)), int(options.get("endpoint_tokens", 16)),
                                        int(options.get("endpoint_requests", 3)), seed))
    return figures
