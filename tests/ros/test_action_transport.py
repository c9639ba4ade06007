"""The stack is real: a captain_interfaces action served and called across two
processes over Fast DDS, with feedback, result and cancel, on an isolated domain."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros

SERVER = Path(__file__).with_name("move_to_test_server.py")


@pytest.fixture
def server(ros_domain: int):
    proc = subprocess.Popen([sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "READY", f"server failed to start: {line!r}"
    yield proc
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=15) == 0, "the server did not exit cleanly on SIGINT"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait(node, future, timeout_s: float = 15.0):
    import rclpy

    deadline = time.monotonic() + timeout_s
    while not future.done():
        assert time.monotonic() < deadline, "timed out waiting on the action server"
        rclpy.spin_once(node, timeout_sec=0.05)
    return future.result()


def test_move_to_feedback_result_and_cancel(server) -> None:
    import rclpy
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient

    from captain_interfaces.action import MoveTo

    rclpy.init()
    node = rclpy.create_node("transport_test_client")
    try:
        client = ActionClient(node, MoveTo, "move_to")
        assert client.wait_for_server(timeout_sec=15.0), "MoveTo server not discovered"
        # The server may not have matched this client's reply reader yet (a reply it cannot
        # deliver is dropped): a goal it rejects is resent until it is answered.
        invalid = MoveTo.Goal(position_m=[float("nan"), 0.0, 0.0])
        for attempt in range(8):
            try:
                probe = _wait(node, client.send_goal_async(invalid), timeout_s=2.0)
                break
            except AssertionError:
                if attempt == 7:
                    raise
        assert not probe.accepted

        feedback: list[float] = []
        goal = MoveTo.Goal(position_m=[0.1, 0.0, 0.05])
        handle = _wait(node, client.send_goal_async(goal, feedback_callback=lambda m: feedback.append(
            m.feedback.progress)))
        assert handle.accepted
        res = _wait(node, handle.get_result_async())
        assert res.status == GoalStatus.STATUS_SUCCEEDED
        assert res.result.stopped_reason == "target_reached"
        assert res.result.executed_distance_m == pytest.approx(0.1118, abs=1e-3)
        assert json.loads(res.result.result.result_json)["success"] is True
        # feedback travels on its own topic, unordered with the result: the last may come after it
        deadline = time.monotonic() + 5.0
        while (not feedback or feedback[-1] != pytest.approx(1.0)) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        assert len(feedback) >= 3 and feedback == sorted(feedback) and feedback[-1] == pytest.approx(1.0)

        # A long sweep, cancelled midway: the server stops short and reports it.
        handle = _wait(node, client.send_goal_async(MoveTo.Goal(position_m=[2.1, 0.0, 0.05])))
        assert handle.accepted
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.5:
            rclpy.spin_once(node, timeout_sec=0.05)
        _wait(node, handle.cancel_goal_async())
        res = _wait(node, handle.get_result_async())
        assert res.status == GoalStatus.STATUS_CANCELED
        assert res.result.stopped_reason == "cancelled"
        assert 0.0 < res.result.executed_distance_m < 2.0

        # Invalid goals are rejected in the goal callback.
        handle = _wait(node, client.send_goal_async(MoveTo.Goal(position_m=[float("nan"), 0.0, 0.0])))
        assert not handle.accepted
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
