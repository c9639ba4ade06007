"""Rollout collection: start-state pools, the before-request monitors, one real tabletop episode
cut by the critic, and the rollout pools (inline, Ray)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from captain_harness.core.episode.policy.scripted_server import ScriptedChatServer, completion
from captain_training.rl.critic import CriticConfig, SimulatorCritic, save_critic
from captain_training.rl.errors import ConfigError
from captain_training.rl.rollout import RolloutJob, _EpisodeMonitor, collect_episode, to_rollout_episode
from captain_training.rl.start_states import HELDOUT_EVAL_STATES, StartState, StartStatePool
from captain_training.rl.synthetic_episodes import DEFAULT_TASKS, generate_episodes
from captain_training.rl.workers import make_pool, ray_available

TASK = "tabletop/cube_on_plate"


def test_pool_never_draws_heldout_states_and_repeats_per_round():
    pool = StartStatePool(tasks=("libero_goal/0", "libero_goal/1"), wide_layout_fraction=0.3)
    drawn = [s for r in range(20) for s in pool.draw(16, seed=5, round_index=r)]
    official = [s.init_state for s in drawn if not s.wide_layout]
    assert official and not set(official) & set(HELDOUT_EVAL_STATES)
    assert set(official) <= set(range(50))
    wide = [s for s in drawn if s.wide_layout]
    assert 0.2 < len(wide) / len(drawn) < 0.4 and all(s.randomize_appearance and s.seed is not None for s in wide)
    assert pool.draw(16, 5, 3) == pool.draw(16, 5, 3) and pool.draw(16, 5, 3) != pool.draw(16, 5, 4)
    assert {s.task for s in drawn} == {"libero_goal/0", "libero_goal/1"}
    with pytest.raises(ConfigError, match="no official state is left"):
        StartStatePool(tasks=("t/0",), official_states=(11, 12), wide_layout_fraction=0.0)
    assert StartState(TASK, 3).key == f"{TASK}@official-3"


def _job(tmp_path, **kw) -> RolloutJob:
    base = dict(episode_key="ep-a", group_key="g", start=StartState(TASK, 2), policy_name="x", policy_options={},
                out_dir=str(tmp_path))
    base.update(kw)
    return RolloutJob(**base)


def _flat_critic(tmp_path, bias: float) -> str:
    critic = SimulatorCritic(CriticConfig(task_ids=(TASK, *[t.task_id for t in DEFAULT_TASKS]), hidden_units=8,
                                          n_members=2))
    with torch.no_grad():
        critic.layers[-1].weight.zero_()
        critic.layers[-1].bias.fill_(bias)
    return str(save_critic(critic, tmp_path / "critic.pt"))


def test_missed_finish_stop_fires_after_goals_held_15_requests(tmp_path):
    snap = next(s for ep in generate_episodes(8, group_size=2, seed=0) for s in ep.snapshots if s.success)
    monitor = _EpisodeMonitor(_job(tmp_path), DEFAULT_TASKS[0].task_id)
    stops = [monitor.before_request(t, snap) for t in range(1, 17)]
    assert stops[:15] == [None] * 15 and stops[15] == "missed_finish_stop"  # held on s_1..s_15, stop before 16
    assert len(monitor.features) == 16 and monitor.features[0].shape == (36,)


def test_critic_cut_waits_for_request_5_and_spares_the_control_slice(tmp_path):
    ep = generate_episodes(1, group_size=1, seed=0)[0]
    snap = ep.snapshots[0]
    task = DEFAULT_TASKS[0].task_id
    low = _flat_critic(tmp_path, -12.0)
    monitor = _EpisodeMonitor(_job(tmp_path, critic_path=low), task)
    stops = [monitor.before_request(t, snap) for t in range(1, 12)]
    assert stops.index("critic_cut") == 9  # V < 0.02 on requests 6..10: cut before request 10
    assert max(monitor.values) < 0.02
    spared = _EpisodeMonitor(_job(tmp_path, critic_path=low, critic_cut_allowed=False), task)
    assert all(spared.before_request(t, snap) is None for t in range(1, 12))
    high = _EpisodeMonitor(_job(tmp_path, critic_path=_flat_critic(tmp_path / "h", 3.0)), task)
    assert all(high.before_request(t, snap) is None for t in range(1, 12))


@pytest.mark.sim
def test_tabletop_episode_records_snapshots_tokens_and_is_cut_by_the_critic(tmp_path):
    def reply(body, n):
        return completion("1 / 0" if n % 3 == 2 else "print(robot.get_robot_state()['success'])", token_ids=True)

    with ScriptedChatServer(reply) as server:
        job = _job(tmp_path, policy_name="captain_training.rl.policy_client:make_rollout_policy",
                   policy_options={"base_url": server.base_url, "model": "scripted", "policy_version": 3},
                   critic_path=_flat_critic(tmp_path, -12.0), max_requests=20)
        got = collect_episode(job)
        sent = list(server.requests)
    assert got["usable"] and got["end_reason"] == "critic_cut" and got["requests"] == 9
    assert all(b.get("return_token_ids") and b.get("logprobs") for b in sent)
    ep = to_rollout_episode(got)
    assert ep.features.shape == (9, 36) and ep.termination.value == "critic_cut"
    assert [r.python_error_only for r in ep.requests] == [False, False, True] * 3
    assert ep.tokens[0].completion_token_ids == (11, 12, 13) and ep.tokens[0].policy_version == 3
    assert ep.tokens[0].completion_logprobs == (-0.5, -0.25, -1.0)
    # the hidden features are the tabletop's physical state: the cube and plate never moved
    assert np.allclose(ep.features[:, 24], 0.0, atol=1e-3)  # target_lift_m
    text = "".join(str(b["messages"]) for b in sent)
    assert "object_poses" not in text and "ever_held" not in text


def test_inline_pool_returns_unusable_episodes_instead_of_raising(tmp_path):
    pool = make_pool("inline")
    bad = _job(tmp_path, policy_name="no_such_policy")
    (out,) = pool.run([bad])
    assert out["usable"] is False and "no_such_policy" in out["error"]
    with pytest.raises(ConfigError, match="not one of"):
        make_pool("threads")


@pytest.mark.slow
@pytest.mark.skipif(not ray_available(), reason="ray is not installed")
def test_ray_pool_runs_jobs_on_actors(tmp_path):
    pool = make_pool("ray", workers=2)
    try:
        out = pool.run([_job(tmp_path, episode_key=f"e{i}", policy_name="no_such_policy") for i in range(3)])
    finally:
        pool.close()
    assert [o["job"]["episode_key"] for o in out] == ["e0", "e1", "e2"]
    assert all(o["usable"] is False and "no_such_policy" in o["error"] for o in out)


@pytest.mark.sim
def test_scripted_tabletop_policy_solves_clean_and_fails_a_perturbed_grasp(tmp_path):
    from captain_training.rl.features import feature_index

    def episode(key: str, grasp_error: float) -> dict:
        return collect_episode(_job(tmp_path, episode_key=key, start=StartState(TASK, 3), critic_cut_allowed=False,
                                    policy_name="captain_training.rl.scripted_tabletop:make_scripted_tabletop",
                                    policy_options={"grasp_error_rate": grasp_error, "place_error_rate": 0.0,
                                                    "max_extra_looks": 0}))

    clean, missed = episode("clean", 0.0), episode("missed", 1.0)
    held = feature_index("target_held")
    assert clean["host_success"] and clean["termination"] == "no_tool_call"
    assert max(row[held] for row in clean["features"]) == 1.0
    assert not missed["host_success"] and max(row[held] for row in missed["features"]) == 0.0
    assert [r["physical_actions"] for r in clean["request_records"]][:4] == [0, 1, 2, 1]


@pytest.mark.sim
def test_wide_layout_backend_starts_a_randomised_libero_scene(tmp_path) -> None:
    from captain_harness.core.episode.backend import BackendRequest
    from captain_training.rl.backends import factory_for, wide_layout_backend

    assert factory_for(True).endswith(":wide_layout_backend")
    request = BackendRequest("libero_goal/0", init_state=12, seed=7, workspace=tmp_path,
                             session_workspace=str(tmp_path), episode_id="wide")
    backend = wide_layout_backend(request)
    try:
        assert backend.task.init_state == -1 and backend.task.extra["layout"] == "wide"
        assert backend.task.extra["moved_objects"] and backend.task.extra["appearance"]
        assert {"move_to", "observe", "mark_point"} <= set(backend.api.specs)
        assert not backend.check_success()
        from captain_training.rl.start_states import degenerate_reason

        assert degenerate_reason(backend.host_context()) is None  # a sound wide layout is not screened out
    finally:
        backend.close()


@pytest.mark.sim
def test_degenerate_starts_are_recognised_at_reset_and_excluded_from_the_pool():
    import dataclasses
    import math

    from captain_backends.core.snapshot import ObjectPose
    from captain_backends.core.tabletop.driver import TabletopDriver
    from captain_training.rl.start_states import degenerate_reason

    driver = TabletopDriver(task="cube_on_plate")
    driver.configure()
    driver.reset(seed=3)
    snap = driver.snapshot()
    driver.shutdown()
    assert degenerate_reason(snap) is None  # a real layout stands on the table
    x, y, z = snap.object_poses["blue_cube"].position_m
    fallen = dataclasses.replace(snap, object_poses={
        **snap.object_poses, "blue_cube": ObjectPose((x, y, z - 0.3), snap.object_poses["blue_cube"].quaternion_wxyz)})
    assert degenerate_reason(fallen) == "off_table:blue_cube"
    c, s = math.cos(math.pi / 4), math.sin(math.pi / 4)  # 90 deg about x: lying on its side
    target = snap.object_poses[snap.target_object]
    tilted = dataclasses.replace(snap, object_poses={
        **snap.object_poses, snap.target_object: ObjectPose(target.position_m, (c, s, 0.0, 0.0))})
    assert degenerate_reason(tilted) == f"tilted:{snap.target_object}"

    pool = StartStatePool(tasks=("tabletop/cube_on_plate",), wide_layout_fraction=1.0)
    first = pool.draw(4, seed=0, round_index=0)
    excluded = frozenset({first[1].key, first[2].key})
    again = pool.draw(4, seed=0, round_index=0, exclude=excluded)
    assert len(again) == 4 and not excluded & {s.key for s in again}
