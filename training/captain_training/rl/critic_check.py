"""The critic check on real simulator rollouts with injected failures.

Rolls out the scripted tabletop policy (``scripted_tabletop``: perturbed grasps and
placements injected at random) through the RL rollout path (hidden snapshot before every
request, 36 features), trains the simulator critic on the request states of some start
states and evaluates it on start states it never saw:

* ``critic_auc_heldout_real``: ranking of host success on held-out start states;
* ``grasp_value_change``: mean V(s_{t+1}, t) - V(s_t, t) (the critic difference of delta_t,
  request index held fixed) over requests that grasped the cube (the target is held on the
  next snapshot and was not before);
* ``perception_value_change_abs``: mean |V(s_{t+1}, t) - V(s_t, t)| over perception-only
  requests (no physical action);
* the episode count, success rate and collection time.

``run(**options)`` returns the figures; ``captain bench rl-critic`` style callers print them.
Options: ``start_states`` (40), ``group_size`` (2), ``workers`` (1), ``seed`` (0),
``grasp_error_rate`` (0.35), ``place_error_rate`` (0.35), ``epochs`` (30), ``heldout_fraction``
(0.3), ``out`` (a folder to keep records and the request-state JSONL; default: temporary).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

TASK = "tabletop/cube_on_plate"
POLICY = "captain_training.rl.scripted_tabletop:make_scripted_tabletop"


def run(**options: Any) -> dict[str, float]:
    """Collect, train, evaluate (see the module docstring)."""
    from captain_training.rl.critic import CriticConfig, SimulatorCritic, evaluate_critic, train_critic
    from captain_training.rl.critic_data import CriticDataset, episode_rows, write_jsonl
    from captain_training.rl.features import feature_index
    from captain_training.rl.rollout import RolloutJob
    from captain_training.rl.start_states import StartState
    from captain_training.rl.workers import make_pool

    n_starts = int(options.get("start_states", 40))
    group = int(options.get("group_size", 2))
    seed = int(options.get("seed", 0))
    tmp = None
    out = options.get("out")
    if out is None:
        tmp = tempfile.TemporaryDirectory(prefix="captain-critic-check-")
        out = tmp.name
    out = Path(out)
    policy_options = {"seed": seed, "grasp_error_rate": float(options.get("grasp_error_rate", 0.35)),
                      "place_error_rate": float(options.get("place_error_rate", 0.35))}
    starts = [s for s in range(n_starts + 6) if s not in range(11, 17)][:n_starts]
    jobs = [RolloutJob(episode_key=f"cc-s{s:03d}-g{g}", group_key=f"cc-s{s:03d}", start=StartState(TASK, s),
                       policy_name=POLICY, policy_options=policy_options, out_dir=str(out / "records"),
                       max_requests=40, critic_cut_allowed=False)
            for s in starts for g in range(group)]
    pool = make_pool("process" if int(options.get("workers", 1)) > 1 else "inline", int(options.get("workers", 1)))
    t0 = time.perf_counter()
    try:
        collected = [c for c in pool.run(jobs) if c.get("usable")]
    finally:
        pool.close()
    collect_s = time.perf_counter() - t0

    rng = np.random.default_rng(seed)
    groups = sorted({c["job"]["group_key"] for c in collected})
    held = set(rng.choice(groups, size=max(1, round(float(options.get("heldout_fraction", 0.3)) * len(groups))),
                          replace=False).tolist())
    parts_train, parts_held = [], []
    for c in collected:
        rows = episode_rows(c["job"]["episode_key"], TASK, np.asarray(c["features"]), bool(c["host_success"]),
                            c["job"]["group_key"])
        (parts_held if c["job"]["group_key"] in held else parts_train).append(rows)
    train, heldout = CriticDataset.concatenate(parts_train), CriticDataset.concatenate(parts_held)
    write_jsonl(CriticDataset.concatenate(parts_train + parts_held), out / "request_states.jsonl")
    critic = SimulatorCritic(CriticConfig(task_ids=(TASK,), seed=seed))
    _, fit = train_critic(critic, train, epochs=int(options.get("epochs", 30)), seed=seed)
    report = evaluate_critic(critic, heldout)

    held_index, grasp, look = feature_index("target_held"), [], []
    for c in collected:
        if c["job"]["group_key"] not in held:
            continue
        x = np.asarray(c["features"])
        t_index = np.arange(1, len(x))
        v_now = critic.value(x[:-1], t_index, TASK)
        v_next = critic.value(x[1:], t_index, TASK)  # the same index t on both sides, as in delta_t
        for t, rec in enumerate(c["request_records"][:-1]):
            dv = float(v_next[t] - v_now[t])
            if rec["physical_actions"] == 0 and not rec["python_error_only"]:
                look.append(abs(dv))
            elif x[t, held_index] < 0.5 <= x[t + 1, held_index]:
                grasp.append(dv)
    figures = {
        "critic_auc_heldout_real": float(report["auc"]),
        "critic_brier_heldout_real": float(report["brier"]),
        "grasp_value_change": float(np.mean(grasp)) if grasp else float("nan"),
        "perception_value_change_abs": float(np.mean(look)) if look else float("nan"),
        "grasps_heldout": float(len(grasp)),
        "perception_requests_heldout": float(len(look)),
        "episodes": float(len(collected)),
        "host_success_rate": float(np.mean([c["host_success"] for c in collected])) if collected else float("nan"),
        "collect_s": collect_s,
        "critic_train_s": float(fit.duration_s),
        "train_states": float(len(train)),
        "heldout_states": float(len(heldout)),
    }
    if tmp is not None:
        tmp.cleanup()
    return figures


if __name__ == "__main__":
    import json
    import sys

    opts = dict(arg.split("=", 1) for arg in sys.argv[1:])
    print(json.dumps(run(**{k: (v if k == "out" else float(v) if "." in v else int(v)) for k, v in opts.items()})))
