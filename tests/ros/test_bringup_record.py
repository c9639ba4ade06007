"""`captain bringup sim --record PATH` records the running stack as a rosbag2 bag that
rosbags reads back: the standard topics and an episode's /captain/requests, cells and
receipts, bag times in the stack's simulated time (the /clock it publishes), strictly
increasing, joint_states stamped in that time.

The bringup supervises its node groups: a killed child whose description says
``respawn`` is started again and becomes ready; a killed one without respawn is reported
and fails the exit code while the rest keeps running."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
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

    from captain_harness.core.episode.policy.scripted_server import ScriptedChatServer, completion
    from captain_interfaces.action import MoveTo, RunEpisode

    bag = tmp_path / "stack_bag"
    code_cell = "state = robot.get_robot_state()\nprint('gripper', state['value']['gripper_open_fraction'])"
    with isolated_domain(), ScriptedChatServer([completion(code_cell)]) as server:
        stack = Stack("sim", "--param", "harness.driver=mock", "--param", "harness.sim_speed=5.0",
                      "--param", f"episode_runner.records_dir={tmp_path / 'records'}",
                      "--record", str(bag), ready_timeout_s=120.0)
        client = Client()
        try:
            # one episode through the episode runner: a scripted model's one request, then it stops
            episode = client.action(RunEpisode, "run_episode")
            handle = client.wait(episode.send_goal_async(RunEpisode.Goal(
                task="mock/empty", init_state=-1, policy="openai", base_url=server.base_url, model="scripted",
                settings_json=json.dumps({"max_requests": 3}))))
            assert handle.accepted
            done = client.wait(handle.get_result_async(), timeout_s=120.0)
            assert done.result.requests == 2, done.result.summary_json
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

    # the episode's request, cell and receipt, as the in-process episode bag writes them
    for topic in ("/captain/requests", "/captain/cells", "/captain/receipts"):
        assert types[topic] == "std_msgs/msg/String", topic
    requests = [json.loads(m.data) for _, m in messages["/captain/requests"]]
    assert [r["request_index"] for r in requests] == [1, 2] and requests[0]["code"] == [code_cell]
    assert requests[1]["code"] == []  # the scripted model's reply without a tool call
    (cell,) = [json.loads(m.data) for _, m in messages["/captain/cells"]]
    assert cell["code"] == code_cell and "gripper 1" in cell["output"], cell
    receipts = [json.loads(m.data)["receipt"] for _, m in messages["/captain/receipts"]]
    assert receipts and receipts[0].startswith("get_robot_state: ok"), receipts
    assert all(t / 1e9 < 1e6 for t, _ in messages["/captain/requests"])  # simulated time


def _pids(stack: Stack) -> dict[str, int]:
    """The latest pid of each node group, from the supervisor's "started" lines."""
    pids = {}
    for line in list(stack.lines):
        m = re.match(r"\[captain bringup\] started (\S+)(?: again)? \(pid (\d+)\)", line)
        if m:
            pids[m.group(1)] = int(m.group(2))
    return pids


def _wait_line(stack: Stack, text: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not any(text in line for line in list(stack.lines)):
        assert time.monotonic() < deadline, f"no line with {text!r}:\n" + "\n".join(stack.lines[-30:])
        time.sleep(0.05)


def test_a_killed_child_is_respawned_or_reported(tmp_path: Path) -> None:
    with isolated_domain():
        stack = Stack("sim", "--param", "harness.driver=mock", "--param", "harness.camera_rate_hz=0.0",
                      "--param", f"episode_runner.records_dir={tmp_path}", ready_timeout_s=120.0)
        try:
            first = _pids(stack)
            assert set(first) == {"harness", "perception", "episode_runner"}, first
            os.kill(first["episode_runner"], signal.SIGKILL)  # respawn: true in the stack description
            _wait_line(stack, "episode_runner exited with code -9; respawning")
            _wait_line(stack, "episode_runner ready again")
            again = _pids(stack)
            assert again["episode_runner"] != first["episode_runner"]
            assert again["harness"] == first["harness"]  # nothing else was restarted
            os.kill(first["harness"], signal.SIGKILL)  # no respawn: reported, the rest keeps running
            _wait_line(stack, "harness exited with code -9 (no respawn)")
            time.sleep(0.5)
            assert stack.proc.poll() is None
            assert "started harness again" not in "\n".join(stack.lines)
        finally:
            code = stack.stop()
    assert code == 1, "a crashed child without respawn must fail the exit code:\n" + "\n".join(stack.lines[-20:])
