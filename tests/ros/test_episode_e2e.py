"""A whole teacher episode through the episode action of `captain bringup sim`: the harness
node resets its robot to LIBERO-Spatial task 0 (official initial state 0), the privileged
teacher writes code against the `robot` API, every robot call travels over ROS to the
harness node, and the episode ends in strict success (host success and an accepted
finish())."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import Client, Stack, isolated_domain

pytestmark = [pytest.mark.ros, pytest.mark.e2e, pytest.mark.sim, pytest.mark.slow]


def _teacher() -> str:
    from captain_harness.core.episode.policy.registry import available_policies

    if "teacher" in available_policies():
        return "teacher"
    if importlib.util.find_spec("captain_teacher.policy") is not None:
        return "captain_teacher.policy:make_teacher"
    pytest.skip("no teacher policy on this install")


def test_teacher_episode_over_ros_reaches_strict_success(tmp_path: Path) -> None:
    from action_msgs.msg import GoalStatus

    from captain_interfaces.action import RunEpisode
    from captain_interfaces.srv import DescribeRobot

    policy = _teacher()
    with isolated_domain():
        stack = Stack("sim", "--param", f"episode_runner.records_dir={tmp_path}",
                      "--param", "harness.camera_rate_hz=0.0", ready_timeout_s=180.0)
        client = Client()
        try:
            names = client.call(DescribeRobot, "describe_robot", DescribeRobot.Request()).names
            if "observe" not in names:
                pytest.skip("the harness's robot API has no perception calls on this install "
                            "(captain_perception is not registered with the episode backend)")
            action = client.action(RunEpisode, "run_episode")
            stream = client.feedback_tap(RunEpisode, "run_episode")  # the whole stream, see feedback_tap
            handle = client.wait(action.send_goal_async(
                RunEpisode.Goal(task="libero_spatial/0", init_state=0, policy=policy)))
            assert handle.accepted
            res = client.wait(handle.get_result_async(), timeout_s=600.0)
            feedback = stream(handle, until=lambda f: f.request_index >= res.result.requests)
        finally:
            client.close()
            code = stack.stop(timeout_s=60.0)
    summary = json.loads(res.result.summary_json)
    assert res.status == GoalStatus.STATUS_SUCCEEDED, summary
    assert summary["error"] is None, summary["error"]
    assert res.result.outcome == "strict_success", [f.last_receipts for f in feedback]
    assert res.result.strict_success and res.result.host_success
    assert res.result.physical_actions >= 4
    record = Path(res.result.record_path)
    assert record.is_file() and record.parent.parent.parent == tmp_path
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(rows) == res.result.requests == len(feedback)
    assert [f.request_index for f in feedback] == list(range(1, res.result.requests + 1))
    assert "observe: ok" in feedback[0].last_receipts
    assert "finish: ok" in feedback[-1].last_receipts.splitlines()[-1]
    assert code == 0, "\n".join(stack.lines[-30:])
