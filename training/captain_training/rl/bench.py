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

* ``logprob_parity_max_abs``: the tiny Qwen3.5 VLM behind the local endpoint samples a reply to a
  prompt with two images; the largest per-token difference between the sampler's
  log-probabilities and the trainer's recomputation from the recorded ids and image files
  (``logprobs.multimodal_inputs``); ``logprob_image_change_max_abs``: how far they move when
  one image is replaced (it must be far above the parity);
* ``learning_success_first_round`` / ``learning_success_last_round`` (and ``learning_p_solve_*``):
  the learning check (``learning.py``: real tabletop episodes, the model choosing among three
  candidate cells, Eq. 8 updates); ``control_success_*``: the same with advantages zeroed.

* ``sync_episodes_per_hour`` / ``streaming_episodes_per_hour`` and ``*_learner_idle_fraction``:
  ``captain rl train`` rounds (tiny Qwen3.5 on the local endpoint, scripted candidate cells,
  tabletop episodes on ``streaming_pool`` = ``ray`` actors) in synchronous and streaming mode;
  episodes per hour of the learner's rounds (waiting + updating), rounds after the first.

Options ``rollouts=False`` skips the throughput figures, ``learning=False`` the learning check,
``parity=False`` the parity figure, ``streaming=False`` the sync/streaming comparison.
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

        rate, out = _episodes_per_hour(jobs("captain_teacher.policy:make_teacher", {"seed": seed}, 60))
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


def logprob_parity(seed: int = 0, max_tokens: int = 16) -> dict[str, float]:
    """Sampler vs trainer log-probabilities of a two-image request on the tiny Qwen3.5 VLM."""
    import tempfile
    from pathlib import Path

    import numpy as np
    import torch
    from PIL import Image

    from captain_harness.core.episode.policy.base import PolicyRequest
    from captain_harness.core.episode.prompt import PYTHON_TOOL
    from captain_training.qwen.tiny_model import cached_tiny_model_dir
    from captain_training.rl.endpoint import EndpointConfig, LocalPolicyServer, load_causal_model
    from captain_training.rl.logprobs import completion_logprobs, multimodal_inputs
    from captain_training.rl.policy_client import make_rollout_policy

    model_dir = cached_tiny_model_dir()
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="captain-bench-parity-") as tmp:
        root = Path(tmp)
        for name in ("head.png", "wrist.png", "other.png"):
            Image.fromarray(rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)).save(root / name)
        request = PolicyRequest(episode_id="e", request_index=1, tools=[PYTHON_TOOL], image_root=root, messages=[
            {"role": "system", "content": "You control a robot arm with Python."},
            {"role": "user", "content": [{"type": "text", "text": "Put the red cube on the plate."},
                                         {"type": "image", "image": "head.png"},
                                         {"type": "image", "image": "wrist.png"}]}])
        with LocalPolicyServer(EndpointConfig(model_dir=str(model_dir), max_new_tokens=max_tokens,
                                              seed=seed)) as server:
            client = make_rollout_policy(base_url=server.base_url, model="captain-policy", max_tokens=max_tokens)
            reply = client.act(request)
            processor = server.processor
        trainer = load_causal_model(model_dir)
        images = client.images[1]
        with torch.no_grad():
            again = completion_logprobs(trainer, reply.prompt_token_ids, reply.completion_token_ids,
                                        multimodal_inputs(processor, reply.prompt_token_ids, images))
            moved = completion_logprobs(trainer, reply.prompt_token_ids, reply.completion_token_ids,
                                        multimodal_inputs(processor, reply.prompt_token_ids,
                                                          [images[0], str(root / "other.png")]))
    sampled = torch.tensor(reply.logprobs)
    return {"logprob_parity_max_abs": float((again - sampled).abs().max()),
            "logprob_image_change_max_abs": float((moved - again).abs().max()),
            "logprob_parity_tokens": float(len(reply.logprobs)), "logprob_parity_images": float(len(images))}


def _learning_figures(seed: int) -> dict[str, float]:
    from captain_training.rl.learning import LearningConfig, run_learning_check

    learn = run_learning_check(LearningConfig(layouts=(101, 102), group_size=3, rounds=3, seed=seed))
    control = run_learning_check(LearningConfig(layouts=(101,), group_size=3, rounds=2, advantage_scale=0.0,
                                                seed=seed))
    return {
        "learning_success_first_round": learn.success[0], "learning_success_last_round": learn.success[-1],
        "learning_p_solve_first_round": learn.p_solve[0], "learning_p_solve_last_round": learn.p_solve[-1],
        "learning_rounds": float(len(learn.success)), "learning_policy_steps": float(learn.policy_version[-1]),
        "learning_advantage_signs_ok": float(learn.advantage_signs_agree()),
        "learning_s_per_round": sum(learn.round_wall_s) / len(learn.round_wall_s),
        "control_success_first_round": control.success[0], "control_success_last_round": control.success[-1],
        "control_policy_steps": float(control.policy_version[-1]),
    }


def _streaming_figures(pool: str, workers: int, rounds: int, seed: int) -> dict[str, float]:
    import tempfile

    from captain_training.qwen.tiny_model import cached_tiny_model_dir
    from captain_training.rl.config import config_from_dict
    from captain_training.rl.trainer import train

    task = "tabletop/cube_on_plate"
    out: dict[str, float] = {}
    for mode in ("sync", "streaming"):
        with tempfile.TemporaryDirectory(prefix=f"captain-bench-rl-{mode}-") as tmp:
            cfg = config_from_dict({
                "seed": seed, "output_dir": tmp, "sft_model": str(cached_tiny_model_dir()),
                "start_states_per_round": 2, "group_size": 2, "rounds_per_step": 1, "policy_learning_rate": 1e-3,
                "max_requests": 2, "monitor_every": 0, "total_rounds": rounds,
                "rollout": {"tasks": [task], "pool": pool, "workers": workers, "mode": mode},
                "endpoint": {"scripted_completions": ["robot.move_to(gripper='close')", "print(1)"]},
                "critic": {"hidden_units": 32, "n_members": 2}})
            metrics = train(cfg).metrics[1:]  # the first round has nothing to overlap with
        episodes = sum(m["episodes_collected"] for m in metrics)
        busy = sum(m["learner_idle_s"] + m["update_wall_s"] for m in metrics)
        out[f"{mode}_episodes_per_hour"] = 3600.0 * episodes / busy if busy > 0 else 0.0
        out[f"{mode}_learner_idle_fraction"] = sum(m["learner_idle_s"] for m in metrics) / busy if busy else 0.0
        out[f"{mode}_stale_dropped"] = float(sum(m.get("policy_stale_dropped", 0.0) for m in metrics))
    out["streaming_rounds_measured"] = float(rounds - 1)
    return out


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
    def on(name: str) -> bool:
        return options.get(name, True) not in (False, "0", "false", "False")

    if on("parity"):
        figures.update(logprob_parity(seed))
    if on("rollouts"):
        figures.update(_rollout_figures(int(options.get("episodes", 3)), int(options.get("endpoint_tokens", 16)),
                                        int(options.get("endpoint_requests", 3)), seed))
    if on("learning"):
        figures.update(_learning_figures(seed))
    if on("streaming"):
        figures.update(_streaming_figures(str(options.get("streaming_pool", "ray")),
                                          int(options.get("streaming_workers", 2)),
                                          int(options.get("streaming_rounds", 4)), seed))
    return figures
