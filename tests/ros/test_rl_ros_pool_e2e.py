"""The RL rollout pool on a running sim stack (`rollout.pool: ros`): an RL episode of the
scripted tabletop policy collected against `captain bringup sim --namespace robot1`, its
privileged snapshots (the critic's features) read from the stack's episode/host_state
service, matches the same episode collected in process; a namespace without a stack ends
the episode unusable (after trying every stack) instead of hanging the round."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import Stack, isolated_domain

pytestmark = [pytest.mark.ros, pytest.mark.e2e, pytest.mark.sim, pytest.mark.slow]

TASK = "tabletop/cube_on_plate"


def _job(tmp_path: Path, key: str) -> object:
    from captain_training.rl.rollout import RolloutJob
    from captain_training.rl.start_states import StartState

    return RolloutJob(episode_key=key, group_key="g", start=StartState(TASK, 3), critic_cut_allowed=False,
                      policy_name="captain_training.rl.scripted_tabletop:make_scripted_tabletop",
                      policy_options={"grasp_error_rate": 0.0, "place_error_rate": 0.0, "max_extra_looks": 0},
                      out_dir=str(tmp_path / key), max_wall_time_s=300.0)


def test_ros_pool_collects_the_same_episode_as_in_process(tmp_path: Path) -> None:
    from captain_training.rl.features import feature_index
    from captain_training.rl.rollout import collect_episode, to_rollout_episode
    from captain_training.rl.workers import make_pool

    with isolated_domain():
        stack = Stack("sim", "--namespace", "robot1", "--param", f"episode_runner.records_dir={tmp_path / 'stack'}",
                      "--param", "harness.camera_rate_hz=0.0", ready_timeout_s=180.0)
        pool = make_pool("ros", namespaces=["/robot1"])
        try:
            handle = pool.submit([_job(tmp_path, "ros")])  # streaming: runs beside this thread
            (over_ros,) = pool.wait(handle)
        finally:
            pool.close()
            code = stack.stop(timeout_s=60.0)
    local = collect_episode(_job(tmp_path, "local"))

    assert over_ros.get("usable"), over_ros.get("error") or over_ros.get("outcome")
    assert over_ros["stack"] == "/robot1"
    assert local["usable"] and over_ros["host_success"] == local["host_success"] is True
    ros_features, local_features = np.asarray(over_ros["features"]), np.asarray(local["features"])
    assert ros_features.shape[0] == over_ros["requests"] >= 3
    np.testing.assert_allclose(ros_features[0], local_features[0], atol=1e-4)  # the reset state's snapshot
    held = feature_index("target_held")
    assert ros_features[:, held].max() == 1.0, "the snapshots over ROS follow the grasp"
    episode = to_rollout_episode(over_ros)
    assert episode.host_success and len(episode.requests) == over_ros["requests"]
    assert code == 0, "\n".join(stack.lines[-30:])


def test_ros_pool_without_a_live_stack_returns_unusable_episodes(tmp_path: Path) -> None:
    from captain_training.rl.ros_pool import RosPool

    with isolated_domain():
        pool = RosPool(["/nobody", "/nobody2"], connect_timeout_s=3.0)
        try:
            (result,) = pool.run([_job(tmp_path, "none")])
        finally:
            pool.close()
    assert result["usable"] is False and result["end_reason"] == "harness_error"
    assert sorted(a["stack"] for a in result["stack_attempts"]) == ["/nobody", "/nobody2"]
    assert "not reachable" in str(result.get("error")), result.get("error")
