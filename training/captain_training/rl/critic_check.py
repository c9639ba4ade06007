"""The critic check on real simulator rollouts with injected failures.

Rolls out a privileged policy with injected, unrecovered failures (perturbed grasps and
placements) on a tabletop task through the RL rollout path (hidden snapshot before every
request, 36 features), trains the simulator critic on the request states of some start
states and evaluates it on start states it never saw:

* ``critic_auc_heldout_real``: ranking of host success on held-out start states;
* ``critic_auc_ceiling_heldout``: an optimistic bound on that AUC for these rollouts
  (``progress_auc_bound``): request states from before the outcome shows cannot be ranked;
* ``grasp_value_change``: mean V(s_{t+1}, t) - V(s_t, t) (the critic difference of delta_t,
  request index held fixed) over requests that grasped the cube (the target is held on the
  next snapshot and was not before);
* ``perception_value_change_abs``: mean |V(s_{t+1}, t) - V(s_t, t)| over perception-only
  requests (no physical action);
* the episode count, success rate and collection time.

Policies (option ``policy``):

* ``teacher`` (default): the scripted teacher (``captain_teacher``) as it
  writes SFT data, some of its episodes carrying one injected failure that it does not
  notice (``perturbed_grasp``: the jaws close beside the cube, or ``perturbed_place``: the
  cube is released off the plate). With ``balanced`` (default) every second rollout of a
  start state carries one (``group_size`` 4: two of four; the kinds take turns across
  start states, so even a small check trains on both), so a start
  layout alone says nothing about the outcome, as it should not when failures are
  injected regardless of the layout (a few rollouts drawn at random per layout would
  correlate layouts and outcomes by chance, and the critic would learn that); without it
  each episode carries one with probability ``failure_rate`` (0.5);
* ``scripted_tabletop``: the small scripted policy of ``scripted_tabletop.py``, with
  ``grasp_error_rate`` (0.35) and ``place_error_rate`` (0.35).

``run(**options)`` returns the figures; ``captain bench rl-critic`` style callers print them.
Options: ``policy`` (teacher), ``task`` (``tabletop/cube_on_plate``), ``start_states`` (20),
``group_size`` (4), ``workers`` (1), ``seed`` (0), ``balanced`` (1), ``failure_rate`` (0.5), ``failures``
(``perturbed_grasp,perturbed_place``), ``grasp_error_rate`` / ``place_error_rate`` (0.35,
``scripted_tabletop`` only), ``epochs`` (30), ``heldout_fraction`` (0.3), ``max_requests``
(40), ``out`` (a folder to keep records and the request-state JSONL; default: temporary).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

TASK = "tabletop/cube_on_plate"
#: Policy names of the ``policy`` option -> ``PolicySpec`` factory names.
POLICIES: dict[str, str] = {
    "teacher": "captain_teacher.policy:make_teacher",
    "scripted_tabletop": "captain_training.rl.scripted_tabletop:make_scripted_tabletop",
}
POLICY = POLICIES["scripted_tabletop"]


def policy_spec(options: dict[str, Any], member: int = 0, start: int = 0) -> tuple[str, dict[str, Any]]:
    """The factory name and options of the rollout policy named by ``options["policy"]``
    for rollout ``member`` (0-based) of the group of the ``start``-th start state."""
    name = str(options.get("policy", "teacher"))
    seed = int(options.get("seed", 0))
    if name == "teacher":
        failures = [f.strip() for f in str(options.get("failures", "perturbed_grasp,perturbed_place")).split(",")
                    if f.strip()]
        if bool(int(options.get("balanced", 1))):
            # every second rollout fails, the kinds of failure taking turns across start states
            failing = member % 2 == 1
            kind = failures[(member // 2 + start) % len(failures)] if failures else ""
            return POLICIES[name], {"seed": seed, "failure_rate": 1.0 if failing else 0.0,
                                    "failures": kind if failing else ",".join(failures)}
        return POLICIES[name], {"seed": seed, "failure_rate": float(options.get("failure_rate", 0.5)),
                                "failures": ",".join(failures)}
    if name == "scripted_tabletop":
        return POLICIES[name], {"seed": seed, "grasp_error_rate": float(options.get("grasp_error_rate", 0.35)),
                                "place_error_rate": float(options.get("place_error_rate", 0.35))}
    raise ValueError(f"unknown critic-check policy {name!r}; choose from {', '.join(POLICIES)}")


#: Features that say how far an episode has visibly got (with the request index).
PROGRESS_FEATURES = ("target_ever_held", "target_held", "gripper_closed", "all_goals_satisfied")


def progress_auc_bound(data: Any) -> float:
    """An optimistic bound on the AUC any critic can reach on ``data`` (a ``CriticDataset``):
    the AUC of the success rate of each row's progress class (request index and
    ``PROGRESS_FEATURES``), the rates taken from ``data`` itself. Request states before
    the outcome shows (before the grasp, or while carrying before a release) are alike in
    successes and failures, so no critic ranks them; the more of them, the lower the bound."""
    from captain_training.rl.critic_metrics import roc_auc
    from captain_training.rl.features import feature_index

    if len(data) == 0:
        return float("nan")
    columns = [feature_index(n) for n in PROGRESS_FEATURES]
    keys = [(int(t), *(round(float(v)) for v in row)) for t, row in
            zip(data.request_index, np.asarray(data.features)[:, columns], strict=True)]
    labels = np.asarray(data.host_success, dtype=float)
    rates: dict[tuple[int, ...], list[float]] = {}
    for key, y in zip(keys, labels, strict=True):
        rates.setdefault(key, []).append(float(y))
    score = np.array([np.mean(rates[k]) for k in keys])
    return float(roc_auc(labels, score))


def run(**options: Any) -> dict[str, float]:
    """Collect, train, evaluate (see the module docstring)."""
    from captain_training.rl.critic import CriticConfig, SimulatorCritic, evaluate_critic, train_critic
    from captain_training.rl.critic_data import CriticDataset, episode_rows, write_jsonl
    from captain_training.rl.features import feature_index
    from captain_training.rl.rollout import RolloutJob
    from captain_training.rl.start_states import StartState
    from captain_training.rl.workers import make_pool

    n_starts = int(options.get("start_states", 20))
    group = int(options.get("group_size", 4))
    seed = int(options.get("seed", 0))
    task = str(options.get("task", TASK))
    tmp = None
    out = options.get("out")
    if out is None:
        tmp = tempfile.TemporaryDirectory(prefix="captain-critic-check-")
        out = tmp.name
    out = Path(out)
    starts = [s for s in range(n_starts + 6) if s not in range(11, 17)][:n_starts]
    specs = {(i, g): policy_spec(options, g, i) for i in range(len(starts)) for g in range(group)}
    jobs = [RolloutJob(episode_key=f"cc-s{s:03d}-g{g}", group_key=f"cc-s{s:03d}", start=StartState(task, s),
                       policy_name=specs[i, g][0], policy_options=specs[i, g][1], out_dir=str(out / "records"),
                       max_requests=int(options.get("max_requests", 40)), critic_cut_allowed=False)
            for i, s in enumerate(starts) for g in range(group)]
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
        rows = episode_rows(c["job"]["episode_key"], task, np.asarray(c["features"]), bool(c["host_success"]),
                            c["job"]["group_key"])
        (parts_held if c["job"]["group_key"] in held else parts_train).append(rows)
    train, heldout = CriticDataset.concatenate(parts_train), CriticDataset.concatenate(parts_held)
    write_jsonl(CriticDataset.concatenate(parts_train + parts_held), out / "request_states.jsonl")
    critic = SimulatorCritic(CriticConfig(task_ids=(task,), seed=seed))
    _, fit = train_critic(critic, train, epochs=int(options.get("epochs", 30)), seed=seed)
    report = evaluate_critic(critic, heldout)

    held_index, grasp, look = feature_index("target_held"), [], []
    for c in collected:
        if c["job"]["group_key"] not in held:
            continue
        x = np.asarray(c["features"])
        t_index = np.arange(1, len(x))
        v_now = critic.value(x[:-1], t_index, task)
        v_next = critic.value(x[1:], t_index, task)  # the same index t on both sides, as in delta_t
        for t, rec in enumerate(c["request_records"][:-1]):
            dv = float(v_next[t] - v_now[t])
            if rec["physical_actions"] == 0 and not rec["python_error_only"]:
                look.append(abs(dv))
            elif x[t, held_index] < 0.5 <= x[t + 1, held_index]:
                grasp.append(dv)
    figures = {
        "critic_auc_heldout_real": float(report["auc"]),
        "critic_auc_ceiling_heldout": progress_auc_bound(heldout),
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


def _option_value(text: str) -> int | float | str:
    """A command-line option value: an int, a float, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


if __name__ == "__main__":
    import json
    import sys

    opts = dict(arg.split("=", 1) for arg in sys.argv[1:])
    print(json.dumps(run(**{k: (v if k == "out" else _option_value(v)) for k, v in opts.items()})))
