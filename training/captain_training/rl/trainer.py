"""``captain rl train``: RL rounds end to end (paper Algorithm 1).

Each round:

1. draw ``start_states_per_round`` start states (``start_states.StartStatePool``; a
   deterministic function of (seed, round)) and roll each out ``group_size`` times on the
   rollout pool (``workers.make_pool``), every ``monitor_every``-th episode a monitor; the
   workers cut episodes with the critic saved for this round (``critic_rollout.pt``),
   except the control slice, hard tasks and monitors;
2. ``round.run_round``: credit with the critic before its update, critic co-training,
   Eq. 8 accumulated on the token ids and log-probabilities the server returned, and the
   optimiser step every ``rounds_per_step`` rounds;
3. after a step, synchronise the policy server's weights (local endpoint: copied in; an
   external server: ``policy_v<n>.pt`` written and ``POST {base_url}/load_weights``);
4. write the checkpoint atomically (after every ``checkpoint_every``-th round and after
   every step) and append the round's metrics to ``metrics.jsonl``.

A run resumes from ``latest.json`` in ``output_dir``: the next round is the one after the
checkpointed round, and the policy server starts from the checkpointed weights and version.
Trainer layout: one process (``distributed.strategy: single``), or under ``torchrun`` with
``fsdp2`` (``sharded.py``: rank 0 collects and broadcasts, every rank trains its share).
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from captain_training.rl.checkpoint import atomic_torch_save, atomic_write_json
from captain_training.rl.config import RLConfig
from captain_training.rl.errors import ConfigError, RLError
from captain_training.rl.rollout import EarlyStopSettings, RolloutJob, records_root, to_rollout_episode
from captain_training.rl.start_states import StartState, StartStatePool, check_not_heldout


@dataclass
class TrainSummary:
    """What a ``train`` call did."""

    first_round: int
    last_round: int
    rounds_run: int
    policy_version: int
    output_dir: str
    metrics: list[dict[str, Any]]


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def degenerate_starts(run_dir: Path) -> dict[str, str]:
    """Start keys found degenerate so far (key -> reason), from ``degenerate_starts.json``."""
    path = Path(run_dir) / "degenerate_starts.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def build_jobs(cfg: RLConfig, round_index: int, run_dir: Path, policy_name: str,
               policy_options: dict[str, Any], critic_path: str | None) -> list[RolloutJob]:
    """The round's rollout jobs: G episodes per drawn start state."""
    from captain_training.rl.ladder import ladder_applies
    from captain_training.rl.stopping import critic_cut_allowed

    ro = cfg.rollout
    pool = StartStatePool(tasks=ro.tasks, official_states=ro.official_states,
                          excluded_states=cfg.excluded_init_states, wide_layout_fraction=ro.wide_layout_fraction,
                          randomize_appearance=ro.randomize_appearance)
    starts = pool.draw(cfg.start_states_per_round, cfg.seed, round_index,
                       exclude=frozenset(degenerate_starts(run_dir)))
    check_not_heldout(starts, cfg.excluded_init_states)
    hard = frozenset(cfg.ladder.hard_tasks)
    out_dir = str(records_root(run_dir, round_index))
    es = EarlyStopSettings(cfg.early_stop.threshold, cfg.early_stop.consecutive, cfg.early_stop.after_request,
                           cfg.early_stop.missed_finish_hold_requests)
    jobs = []
    n = 0
    for s_index, start in enumerate(starts):
        group = f"r{round_index:06d}-s{s_index:03d}-{_safe(start.key)}"
        for g in range(cfg.group_size):
            key = f"{group}-g{g}"
            monitor = cfg.monitor_every > 0 and (n % cfg.monitor_every) == cfg.monitor_every - 1
            n += 1
            allowed = critic_cut_allowed(key, start.task, hard, cfg.early_stop.control_fraction) and not monitor
            ladder = ladder_applies(start.task, round_index, hard, cfg.ladder.from_round)
            jobs.append(RolloutJob(
                episode_key=key, group_key=group, start=start, policy_name=policy_name,
                policy_options=dict(policy_options), out_dir=out_dir, monitor=monitor,
                critic_cut_allowed=allowed, critic_path=critic_path, max_requests=cfg.max_requests,
                max_physical_actions=cfg.max_physical_actions, max_wall_time_s=ro.max_wall_time_s,
                cell_timeout_s=ro.cell_timeout_s, early_stop=es,
                sft_median_actions=ro.sft_median_actions.get(start.task),
                ladder_scale=cfg.ladder.scale if ladder else 0.0))
    return jobs


def collection_metrics(collected: list[dict[str, Any]], wall_s: float) -> dict[str, float]:
    """Rollout-side figures of a round (episodes, unusable ones, throughput, monitor success)."""
    usable = [c for c in collected if c.get("usable")]
    monitors = [c for c in usable if c["job"].get("monitor")]
    out = {
        "episodes_collected": float(len(collected)),
        "episodes_unusable": float(len(collected) - len(usable)),
        "rollout_wall_s": float(wall_s),
        "rollout_episodes_per_hour": 3600.0 * len(collected) / wall_s if wall_s > 0 else 0.0,
        "monitor_episodes": float(len(monitors)),
        "python_error_only_fraction": float(np.mean([r["python_error_only"] for c in usable
                                                     for r in c["request_records"]])) if usable else float("nan"),
    }
    if monitors:
        out["monitor_host_success"] = float(np.mean([c["host_success"] for c in monitors]))
        out["monitor_strict_success"] = float(np.mean([c["host_success"] and c["termination"] == "finish"
                                                      for c in monitors]))
    return out


class _PolicyServer:
    """The rollout policy endpoint and its weight synchronisation."""

    def __init__(self, cfg: RLConfig, served: torch.nn.Module | None, run_dir: Path, version: int) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.server = None
        ep = cfg.endpoint
        if ep.kind == "local":
            from captain_training.rl.endpoint import EndpointConfig, LocalPolicyServer, load_tokenizer, tool_call_text

            assert served is not None, "the local endpoint needs a copy of the policy to serve"
            served = served.eval()
            for p in served.parameters():
                p.requires_grad_(False)
            self.server = LocalPolicyServer(
                EndpointConfig(model_dir=cfg.sft_model, served_model_name=ep.model, max_new_tokens=ep.max_tokens,
                               seed=ep.seed, policy_version=version, threads=ep.threads,
                               scripted_completions=tuple(tool_call_text(c) for c in ep.scripted_completions)),
                model=served, tokenizer=load_tokenizer(cfg.sft_model)).start()
            self.base_url = self.server.base_url
        else:
            self.base_url = ep.base_url.rstrip("/")

    def options(self, version: int) -> dict[str, Any]:
        ep = self.cfg.endpoint
        return {"base_url": self.base_url, "model": ep.model, "max_tokens": ep.max_tokens,
                "temperature": ep.temperature, "top_p": ep.top_p, "enable_thinking": ep.enable_thinking,
                "request_timeout_s": ep.request_timeout_s, "max_retries": 2, "backoff_s": 0.5,
                "policy_version": version}

    def sync(self, state: dict[str, torch.Tensor], version: int) -> None:
        """Give the server the weights (full state dict) of policy ``version``."""
        if self.server is not None:
            self.server.set_state_dict(state, version)
            return
        from captain_training.rl.weight_sync import push_weights

        path = atomic_torch_save(self.run_dir / "sync" / f"policy_v{version}.pt", state)
        push_weights(self.base_url, path, version, self.cfg.endpoint.weight_sync)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def _critic(cfg: RLConfig, say: Callable[[str], None] | None = None) -> tuple[Any, torch.optim.Optimizer]:
    """The critic a fresh run starts from.

    ``critic.init_path``: a saved critic (its shape must match ``critic.hidden_units`` /
    ``hidden_layers`` / ``n_members``); ``critic.warm_start_data``: request states (JSONL,
    ``captain rl critic`` format) trained on for ``warm_start_epochs`` epochs before round 0,
    with the input normaliser fitted on them (continuing a loaded critic keeps its
    normaliser). With neither, a fresh critic whose normaliser is the identity.
    """
    from captain_training.rl.critic import (
        LIBERO_TASK_IDS,
        CriticConfig,
        SimulatorCritic,
        load_critic,
        load_optimizer,
        make_optimizer,
        train_critic,
    )
    from captain_training.rl.critic_data import read_jsonl

    c = cfg.critic
    data = None
    if c.warm_start_data:
        if not Path(c.warm_start_data).is_file():
            raise ConfigError(f"critic.warm_start_data {c.warm_start_data!r} is not a file (request-state JSONL)")
        data = read_jsonl(c.warm_start_data)
        if len(data) == 0:
            raise ConfigError(f"critic.warm_start_data {c.warm_start_data!r} holds no request state")
    if c.init_path:
        loaded = load_critic(c.init_path)
        critic = loaded.critic
        shape = {k: getattr(critic.config, k) for k in ("hidden_units", "hidden_layers", "n_members")}
        wanted = {k: getattr(c, k) for k in shape}
        if shape != wanted:
            raise ConfigError(f"critic {c.init_path} has {shape}, the config asks for {wanted}; set critic."
                              "hidden_units / hidden_layers / n_members to the saved critic's")
        missing = sorted(set(cfg.rollout.tasks) - set(critic.config.task_ids))
        if missing:
            raise ConfigError(f"critic {c.init_path} does not know tasks {missing}; train it with them "
                              "(captain rl critic) or drop them from rollout.tasks")
        opt = load_optimizer(critic, loaded.optimizer_state, c.learning_rate, c.weight_decay)
    else:
        extra = set(cfg.rollout.tasks) | (set(data.task.tolist()) if data is not None else set())
        tasks = tuple(LIBERO_TASK_IDS) + tuple(t for t in sorted(extra) if t not in LIBERO_TASK_IDS)
        critic = SimulatorCritic(CriticConfig(task_ids=tasks, hidden_units=c.hidden_units,
                                              hidden_layers=c.hidden_layers, n_members=c.n_members, seed=cfg.seed))
        opt = make_optimizer(critic, c.learning_rate, c.weight_decay)
    if data is not None:
        unknown = sorted(set(data.task.tolist()) - set(critic.config.task_ids))
        if unknown:
            raise ConfigError(f"critic.warm_start_data has tasks {unknown[:5]} the critic {c.init_path} does not know")
        opt, result = train_critic(critic, data, epochs=c.warm_start_epochs, batch_size=c.batch_size, optimizer=opt,
                                   seed=cfg.seed, fit_normalizer=not c.init_path)
        if say is not None:
            say(f"critic warm start: {len(data)} request states, {c.warm_start_epochs} epochs, "
                f"final loss {result.losses[-1]:.4f} ({result.duration_s:.1f} s)")
    return critic, opt


def train(cfg: RLConfig, *, max_rounds: int | None = None, resume: bool = True,
          log: Callable[[str], None] | None = None) -> TrainSummary:
    """Run RL rounds until ``cfg.total_rounds`` (or ``max_rounds`` more in this call)."""
    from captain_training.rl.critic import load_optimizer, save_critic
    from captain_training.rl.endpoint import load_causal_model, load_multimodal_processor
    from captain_training.rl.normalizer import RunningStd
    from captain_training.rl.round import RoundConfig, round_rng, run_round
    from captain_training.rl.trainer_state import append_metrics, latest_round, load_checkpoint, save_checkpoint
    from captain_training.rl.update import GradientAccumulator
    from captain_training.rl.workers import make_pool
    from captain_training.sft.distributed import setup_distributed

    say = log or (lambda _m: None)
    if not cfg.rollout.tasks:
        raise ConfigError("rollout.tasks is empty; list the tasks to train on, e.g. [libero_goal/3]")
    if not cfg.sft_model or not Path(cfg.sft_model, "config.json").is_file():
        raise ConfigError(f"sft_model {cfg.sft_model!r} is not a local model directory (config.json missing)")
    ctx = setup_distributed(cfg.distributed.strategy, cfg.distributed.device)
    sharded = ctx.distributed
    run_dir = Path(cfg.output_dir)
    if ctx.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(run_dir / "config.json", cfg.to_dict())

    torch.manual_seed(cfg.seed)
    model = load_causal_model(cfg.sft_model, "cpu" if sharded else str(ctx.device)).train()
    visual = getattr(getattr(model, "model", None), "visual", None)
    for p in visual.parameters() if visual is not None else ():
        p.requires_grad_(False)  # the vision tower stays frozen, as in SFT
    processor = load_multimodal_processor(cfg.sft_model, model)  # None for a text-only policy
    reference = copy.deepcopy(model).eval()
    for p in reference.parameters():
        p.requires_grad_(False)
    served = copy.deepcopy(model) if ctx.is_main and cfg.endpoint.kind == "local" else None
    if sharded:
        from captain_training.rl import sharded as sh

        policy = sh.shard(model, ctx, cfg.distributed.precision)
        reference = sh.shard(reference, ctx, cfg.distributed.precision)
    else:
        policy = model
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=cfg.policy_learning_rate)
    acc_kwargs = {"rounds_per_step": cfg.rounds_per_step, "max_grad_norm": cfg.max_grad_norm,
                  "warmup_steps": cfg.policy_warmup_steps}
    accumulator = (sh.ShardedAccumulator(list(policy.parameters()), optimizer, ctx=ctx, **acc_kwargs) if sharded
                   else GradientAccumulator.for_model(policy, optimizer, **acc_kwargs))
    normalizer = RunningStd()
    start = 0
    last = latest_round(run_dir) if resume else None
    if last is None:
        critic, critic_opt = _critic(cfg, say)
    else:
        state = (sh.load(run_dir, wrapper=policy, accumulator=accumulator) if sharded
                 else load_checkpoint(run_dir, policy=policy, accumulator=accumulator))
        critic = state.critic
        critic_opt = load_optimizer(critic, state.critic_optimizer_state, cfg.critic.learning_rate,
                                    cfg.critic.weight_decay)
        normalizer = state.normalizer
        start = state.round_index + 1
        say(f"resuming after round {state.round_index} at policy version {accumulator.policy_version}")
    end = cfg.total_rounds if max_rounds is None else min(cfg.total_rounds, start + int(max_rounds))
    round_cfg = RoundConfig(advantage=cfg.advantage, costs=cfg.costs, returns=cfg.returns, policy=cfg.policy_loss,
                            critic_steps=cfg.critic.steps_per_round, max_staleness=cfg.max_staleness)

    def policy_state() -> dict[str, torch.Tensor]:  # every rank calls this when sharded
        return sh.full_state(policy) if sharded else {k: v.detach().clone() for k, v in policy.state_dict().items()}

    server = pool = None
    current = policy_state() if sharded and last is not None else None
    if ctx.is_main:
        if served is not None and (current is not None or not sharded):  # resumed weights (fresh: a copy already)
            served.load_state_dict(current if current is not None else policy.state_dict())
        server = _PolicyServer(cfg, served, run_dir, accumulator.policy_version)
        pool = make_pool(cfg.rollout.pool, cfg.rollout.workers, cfg.rollout.ray_address, cfg.rollout.namespaces)
    rows: list[dict[str, Any]] = []
    streaming = cfg.rollout.mode == "streaming"
    if streaming and pool is not None and not getattr(pool, "streams", False):
        raise ConfigError(f"rollout.mode streaming needs a pool that runs episodes beside the trainer (process "
                          f"or ray), not {pool.kind}")

    def submit(round_index: int) -> tuple[Any, float]:
        critic_path = save_critic(critic, run_dir / "critic_rollout.pt")
        jobs = build_jobs(cfg, round_index, run_dir, "captain_training.rl.policy_client:make_rollout_policy",
                          server.options(accumulator.policy_version), str(critic_path))
        return pool.submit(jobs), time.monotonic()

    pending: tuple[Any, float] | None = None
    try:
        for r in range(start, end):
            collected, wall, idle = None, 0.0, 0.0
            degenerate_round = degenerate_total = 0
            if ctx.is_main:
                t_round = time.monotonic()
                if streaming:
                    if pending is None:
                        pending = submit(r)
                    collected = pool.wait(pending[0])
                    wall = time.monotonic() - pending[1]
                    idle = time.monotonic() - t_round  # the learner waited this long for the round
                    # the next round's episodes run while this round updates (staleness gated below)
                    pending = submit(r + 1) if r + 1 < end else None
                else:
                    critic_path = save_critic(critic, run_dir / "critic_rollout.pt")
                    jobs = build_jobs(cfg, r, run_dir, "captain_training.rl.policy_client:make_rollout_policy",
                                      server.options(accumulator.policy_version), str(critic_path))
                    collected = pool.run(jobs)
                    wall = idle = time.monotonic() - t_round
                _write_collected(records_root(run_dir, r) / "episodes.jsonl", collected)
                found = {StartState.from_dict(c["job"]["start"]).key: c["degenerate_start"]
                         for c in collected if c.get("degenerate_start")}
                known = degenerate_starts(run_dir)
                new_found = {k: v for k, v in found.items() if k not in known}
                if new_found:  # never drawn again (the pool skips them)
                    atomic_write_json(run_dir / "degenerate_starts.json", {**known, **new_found})
                degenerate_round, degenerate_total = len(new_found), len(known) + len(new_found)
            if sharded:
                collected, wall = sh.broadcast((collected, wall), ctx)
            episodes = [to_rollout_episode(c) for c in collected if c.get("usable")]
            if not episodes:
                errors = sorted({str(c.get("error") or c.get("end_reason")) for c in collected})[:3]
                raise RLError(f"round {r}: no usable episode out of {len(collected)} (e.g. {errors}); check the "
                              f"policy endpoint and the backend of {sorted(set(cfg.rollout.tasks))}")
            t1 = time.monotonic()
            result = run_round(episodes, critic=critic, critic_optimizer=critic_opt, policy=policy,
                               reference=reference, accumulator=accumulator, normalizer=normalizer,
                               rng=round_rng(cfg.seed, r), config=round_cfg,
                               policy_shard=(ctx.rank, ctx.world_size), processor=processor)
            update_s = time.monotonic() - t1
            metrics = {**collection_metrics(collected, wall), **result.metrics, "update_wall_s": update_s,
                       "rollout_mode_streaming": float(streaming), "learner_idle_s": idle,
                       "degenerate_starts_found": float(degenerate_round),
                       "degenerate_starts_total": float(degenerate_total),
                       "learner_idle_fraction": idle / (idle + update_s) if idle + update_s > 0 else 0.0,
                       # episodes trained per hour of the learner's round (waiting + updating)
                       "training_episodes_per_hour": 3600.0 * len(collected) / (idle + update_s)
                       if idle + update_s > 0 else 0.0}
            if sharded:
                for key in ("policy_requests_trained", "policy_episodes_trained", "policy_stale_dropped",
                            "policy_pg_loss", "policy_kl_loss"):
                    if key in metrics:
                        metrics[key] = ctx.sum([float(metrics[key])])[0]
            stepped = bool(metrics.get("policy_stepped"))
            if stepped:
                state_now = policy_state()
                if ctx.is_main:
                    server.sync(state_now, accumulator.policy_version)
            if stepped or (r + 1) % cfg.checkpoint_every == 0 or r == end - 1:
                extra = {"policy_version": accumulator.policy_version}
                if sharded:
                    sh.save(ctx, run_dir, r, wrapper=policy, accumulator=accumulator, critic=critic,
                            critic_optimizer=critic_opt, normalizer=normalizer, extra=extra)
                else:
                    save_checkpoint(run_dir, r, policy=policy, accumulator=accumulator, critic=critic,
                                    critic_optimizer=critic_opt, normalizer=normalizer, extra=extra)
            if ctx.is_main:
                append_metrics(run_dir, r, metrics)
                say(json.dumps({"round": r, **{k: metrics[k] for k in ("episodes_collected", "host_success",
                                                                        "strict_success", "requests_mean",
                                                                        "policy_stepped", "policy_step_skipped")
                                                  if k in metrics}}))
            rows.append({"round": r, **metrics})
    finally:
        if pool is not None:
            pool.close()  # a round still in flight after an error is dropped with the pool
        if server is not None:
            server.close()
        ctx.close()
    return TrainSummary(first_round=start, last_round=end - 1, rounds_run=max(end - start, 0),
                        policy_version=accumulator.policy_version, output_dir=str(run_dir), metrics=rows)


def _write_collected(path: Path, collected: list[dict[str, Any]]) -> None:
    """A round's episodes (outcomes, request records, critic values; no token ids), one JSON line each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for c in collected:
            row = {k: v for k, v in c.items() if k not in ("tokens", "features")}
            fh.write(json.dumps(row, default=str) + "\n")
