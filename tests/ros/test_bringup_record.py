"""`captain bringup sim --record PATH` records the running stack as a rosbag2 bag that
rosbags reads back: the standard topics, bag times in the stack's simulated time (the
/clock it publishes), strictly increasing, joint_states stamped in that time."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import Client, Stack, isolated_domain

pytestmark = [pytest.mark.ros, pytest.mark.e2e]

TOP_DOWN = [0.0, 2**-0.5, 2**-0.5, 0.0]


def test_record_a_running_stack(tmp_path: Path) -> None:
    from action_msgs.msg import GoalStatus
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    from captain_interfaces.action import MoveTo

    bag = tmp_path / "stack_bag"
    with isolated_domain():
        stack = Stack("sim", "--param", "harness.driver=mock", "--param", "harness.sim_speed=5.0",
                      "--record", str(bag), ready_timeout_s=120.0)
        client = Client()
        try:
            start = np.asarray(client.robot_call("get_robot_state")["value"]["end_effector_position_m"])
            action = client.action(MoveTo, "move_to")
            handle = client.wait(action.send_goal_async(MoveTo.Goal(
                position_m=(start + np.array([0.0, 0.05, -0.03])).tolist(), quaternion_wxyz=TOP_DOWN, speed_m_s=0.1)))
            assert handle.accepted
            assert client.wait(handle.get_result_async()).status == GoalStatus.STATUS_SUCCEEDED
            time.sleep(0.5)
        finally:
            client.close()
            code = stack.stop()
        assert code == 0, "\n".join(stack.lines[-30:])

    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_KILTED)) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        messages: dict[str, list] = {}
        order = []
        for connection, t_ns, raw in reader.messages():
            messages.setdefault(connection.topic, []).append((t_ns, reader.deserialize(raw, connection.msgtype)))
            order.append(t_ns)
    assert types["/tf"] == "tf2_msgs/msg/TFMessage" and types["/clock"] == "rosgraph_msgs/msg/Clock"
    assert types["/joint_states"] == "sensor_msgs/msg/JointState"
    assert types["/robot_description"] == "std_msgs/msg/String"
    assert "captain_tcp" in messages["/robot_description"][0][1].data
    assert order == sorted(order) and len(set(order)) == len(order)
    clock = [m.clock.sec + m.clock.nanosec * 1e-9 for _, m in messages["/clock"]]
    assert max(clock) > 0.3 and max(clock) < 1e6  # simulated seconds, not the epoch
    assert order[-1] / 1e9 < 1e6  # bag times are simulated time too
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in messages["/joint_states"]]
    assert all(b >= a for a, b in itertools.pairwise(stamps)) and stamps[-1] == pytest.approx(
        max(clock), abs=0.1)
    positions = np.array([m.position[:7] for _, m in messages["/joint_states"]])
    assert np.ptp(positions, axis=0).max() > 0.02  # the motion is in the recording
