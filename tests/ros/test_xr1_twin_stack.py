"""`captain bringup xr1_twin`: the XR1 driver inside the harness node drives the MuJoCo twin
(a process of its own) over the XR1's ros2_control topics, in real time, with the real arm's
staleness limits (100 ms joint state, 0.5 s wrench), and a MoveTo goal moves the arm.
``scripts/twin_loop.sh`` runs this test 20 times in a row under a concurrent CPU load."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import Client, Stack, isolated_domain

pytestmark = [pytest.mark.ros, pytest.mark.e2e, pytest.mark.sim, pytest.mark.slow]


def test_xr1_driver_moves_the_twin_arm(tmp_path: Path) -> None:
    from action_msgs.msg import GoalStatus
    from sensor_msgs.msg import JointState

    from captain_interfaces.action import MoveTo
    from captain_interfaces.srv import DescribeRobot

    with isolated_domain():
        stack = Stack("xr1_twin", "--namespace", "robot1", "--param", "xr1_twin.camera_rate_hz=0.0",
                      ready_timeout_s=240.0)
        client = Client(namespace="/robot1")
        states: list = []
        client.node.create_subscription(JointState, "joint_states", states.append, 50)
        try:
            assert stack.ready_line.startswith("READY captain bringup xr1_twin in /robot1: xr1_twin, harness")
            # one process per node group: the twin never shares the harness's interpreter
            pids = {line.split()[3]: line.split("pid ")[1].rstrip(")") for line in stack.lines
                    if line.startswith("[captain bringup] started ")}
            assert set(pids) == {"xr1_twin", "harness", "perception", "episode_runner"}
            assert len(set(pids.values())) == 4
            described = client.call(DescribeRobot, "describe_robot", DescribeRobot.Request())
            assert described.driver == "xr1" and "move_to" in described.names
            start = np.asarray(client.robot_call("get_robot_state")["value"]["end_effector_position_m"])
            action = client.action(MoveTo, "move_to")
            # the twin's joint_states reach this client before the arm moves (discovery of a
            # new subscription can take seconds on a loaded machine)
            deadline = time.monotonic() + 60.0
            while len(states) < 10:
                assert time.monotonic() < deadline, "no joint_states from the twin"
                time.sleep(0.05)
            del states[:-1]
            target = start + np.array([0.0, 0.05, 0.03])
            stream = client.feedback_tap(MoveTo, "move_to")  # the whole stream, see feedback_tap
            handle = client.wait(action.send_goal_async(MoveTo.Goal(position_m=target.tolist(), speed_m_s=0.05)))
            assert handle.accepted
            res = client.wait(handle.get_result_async(), timeout_s=120.0)
            result = json.loads(res.result.result.result_json)
            stamps = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in states])
            gaps_ms = 1000 * np.diff(stamps) if len(stamps) > 1 else np.zeros(1)
            seen = f"\nthe twin's joint_states here: {len(stamps)}, largest stamp gap {gaps_ms.max():.0f} ms"
            assert res.status == GoalStatus.STATUS_SUCCEEDED, result["message"] + stack.overruns() + seen
            assert res.result.stopped_reason == "target_reached"
            assert res.result.executed_distance_m == pytest.approx(np.linalg.norm(target - start), abs=0.01)
            feedback = [f.progress for f in stream(handle, until=lambda f: f.progress == pytest.approx(1.0, abs=0.05))]
            assert feedback and feedback[-1] == pytest.approx(1.0, abs=0.05)
            # wall-clock driver: a ~1.2 s sweep takes about that long
            assert result["value"]["duration_s"] > 0.8
            end = np.asarray(client.robot_call("get_robot_state")["value"]["end_effector_position_m"])
            assert np.linalg.norm(end - target) < 0.01
            time.sleep(0.3)
            # the twin's own joint_states (published in the namespace) show the arm moved
            assert len(states) > 50
            names = list(states[-1].name)
            assert names[:7] == [f"robot0_joint{i}" for i in range(1, 8)]
            first, last = np.array(states[0].position[:7]), np.array(states[-1].position[:7])
            assert np.max(np.abs(last - first)) > 0.02
        finally:
            client.close()
            code = stack.stop()
        assert code == 0, "\n".join(stack.lines[-30:])
