"""`captain bringup xr1_real`: the real-robot stack keeps trying while the robot's topics are
absent (and says so), and comes up against ros2_control-style fake hardware, where a
MoveTo goal moves the mirrored joints; the driver keeps the real arm's limits (100 ms joint
state, 0.5 s wrench), and a fault latched while a goal streams commands is recovered by a
foreign rclpy client over ROS (the recover_driver service), with no process restarted; the
harness is a managed node whose lifecycle_msgs transitions deactivate and activate the driver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import ROOT, Client, Stack, isolated_domain

pytestmark = [pytest.mark.ros, pytest.mark.e2e]


def _stop(hardware: subprocess.Popen) -> None:
    """SIGINT, then 30 s to exit; a process that does not is killed (never left running in
    the domain, where a later test could reuse it) and the test fails."""
    hardware.send_signal(signal.SIGINT)
    try:
        hardware.wait(timeout=30)
    except subprocess.TimeoutExpired:
        hardware.kill()
        hardware.wait(timeout=10)
        raise AssertionError("the fake hardware did not exit within 30 s of SIGINT (killed)") from None


def test_without_a_robot_the_stack_is_not_ready_and_says_why() -> None:
    with isolated_domain():
        out = subprocess.run(
            [sys.executable, "-m", "captain_bringup.cli.main", "bringup", "xr1_real", "--ready-timeout-s", "15",
             "--param", "harness.driver_retry_period_s=1.0"],
            capture_output=True, text=True, timeout=120, cwd=str(ROOT), env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert out.returncode == 1, out.stdout + out.stderr
    text = out.stdout + out.stderr
    # the harness (and the perception node, which waits for the harness's calls) are not
    # ready; the harness's own lines say why (each attempt waits 5 s for a first joint state)
    assert "FAILED: not ready after 15 s: harness, perception" in text
    assert "[harness] " in text and "driver 'xr1' failed to start" in text and "retrying in 1 s" in text
    assert "[captain bringup] started harness again" not in text  # no respawn: it keeps trying itself


def test_xr1_real_drives_fake_hardware(tmp_path: Path) -> None:
    from action_msgs.msg import GoalStatus

    from captain_interfaces.action import MoveTo

    with isolated_domain():
        hardware = subprocess.Popen([sys.executable, "-m", "captain_backends.nodes.xr1_fake_hardware"],
                                    stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
        try:
            assert hardware.stdout is not None and hardware.stdout.readline().strip() == "READY"
            stack = Stack("xr1_real", ready_timeout_s=120.0)
            client = Client()
            try:
                start = np.asarray(client.robot_call("get_robot_state")["value"]["end_effector_position_m"])
                action = client.action(MoveTo, "move_to")
                target = start + np.array([0.03, 0.0, -0.03])
                handle = client.wait(action.send_goal_async(MoveTo.Goal(position_m=target.tolist(),
                                                                        speed_m_s=0.05)))
                res = client.wait(handle.get_result_async(), timeout_s=120.0)
                result = json.loads(res.result.result.result_json)
                assert res.status == GoalStatus.STATUS_SUCCEEDED, result["message"] + stack.overruns()
                end = np.asarray(client.robot_call("get_robot_state")["value"]["end_effector_position_m"])
                assert np.linalg.norm(end - target) < 0.01
            finally:
                client.close()
                code = stack.stop()
            assert code == 0, "\n".join(stack.lines[-30:])
        finally:
            _stop(hardware)


def test_a_foreign_client_recovers_a_faulted_driver_over_ros() -> None:
    from action_msgs.msg import GoalStatus
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    from captain_interfaces.action import MoveTo
    from captain_interfaces.srv import RecoverDriver

    with isolated_domain():
        hardware = subprocess.Popen([sys.executable, "-m", "captain_backends.nodes.xr1_fake_hardware"],
                                    stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
        try:
            assert hardware.stdout is not None and hardware.stdout.readline().strip() == "READY"
            stack = Stack("xr1_real", ready_timeout_s=120.0)
            client = Client()
            try:
                def node_state() -> str:
                    return client.call(GetState, "harness/get_state", GetState.Request()).current_state.label

                def change_state(transition_id: int) -> bool:
                    request = ChangeState.Request(transition=Transition(id=transition_id))
                    return client.call(ChangeState, "harness/change_state", request, resend_s=30.0).success

                assert node_state() == "active"
                # prime the change_state client with a transition the active node refuses (a
                # reply can be lost until the server has matched a new client; resending a
                # transition that did happen would be refused)
                probe = ChangeState.Request(transition=Transition(id=Transition.TRANSITION_CONFIGURE))
                assert not client.call(ChangeState, "harness/change_state", probe).success
                nothing = client.call(RecoverDriver, "recover_driver", RecoverDriver.Request())
                assert nothing.success and "nothing to recover" in nothing.message
                start = np.asarray(client.robot_call("get_robot_state")["value"]["end_effector_position_m"])
                action = client.action(MoveTo, "move_to")

                def move(offset: list[float]) -> Any:
                    goal = MoveTo.Goal(position_m=(start + np.asarray(offset)).tolist(), speed_m_s=0.05)
                    handle = client.wait(action.send_goal_async(goal))
                    assert handle.accepted
                    return handle

                # the robot's joint_states stop while a goal streams commands: the driver faults
                # (the parameter client is discovered first, so the switch lands mid-motion)
                client.set_parameters("xr1_fake_hardware", {"publish_joint_states": True})
                handle = move([0.0, 0.08, 0.0])
                time.sleep(0.3)
                client.set_parameters("xr1_fake_hardware", {"publish_joint_states": False})
                res = client.wait(handle.get_result_async(), timeout_s=60.0)
                result = json.loads(res.result.result.result_json)
                assert res.status == GoalStatus.STATUS_ABORTED, result
                assert "stale joint state" in result["message"], result["message"]
                assert "stale joint state" in client.robot_call("get_robot_state")["value"]["fault"]

                assert node_state() == "active"  # a fault latches in the driver, not the node

                # recovery refused while the readings are still stale; the driver stays inactive
                time.sleep(0.3)  # the last joint state is now older than the 100 ms limit
                refused = client.call(RecoverDriver, "recover_driver", RecoverDriver.Request())
                assert not refused.success and refused.lifecycle_state == "inactive", refused.message
                assert "stale joint state" in refused.message and "recover_driver" in refused.message
                assert node_state() == "inactive"

                # readings back: recovered over ROS, and the arm moves again
                client.set_parameters("xr1_fake_hardware", {"publish_joint_states": True})
                time.sleep(0.2)
                recovered = client.call(RecoverDriver, "recover_driver", RecoverDriver.Request())
                assert recovered.success and recovered.lifecycle_state == "active", recovered.message
                assert "stale joint state" in recovered.cleared_fault
                assert client.robot_call("get_robot_state")["value"]["fault"] == ""
                assert node_state() == "active"
                handle = move([0.03, 0.0, -0.03])
                res = client.wait(handle.get_result_async(), timeout_s=60.0)
                result = json.loads(res.result.result.result_json)
                assert res.status == GoalStatus.STATUS_SUCCEEDED, result["message"] + stack.overruns()

                # the standard managed-node interface: deactivate refuses goals, activate resumes
                assert change_state(Transition.TRANSITION_DEACTIVATE) and node_state() == "inactive"
                goal = MoveTo.Goal(position_m=start.tolist(), speed_m_s=0.05)
                assert not client.wait(action.send_goal_async(goal)).accepted
                assert change_state(Transition.TRANSITION_ACTIVATE) and node_state() == "active"
                res = client.wait(move([0.0, 0.0, 0.0]).get_result_async(), timeout_s=60.0)
                assert res.status == GoalStatus.STATUS_SUCCEEDED
            finally:
                client.close()
                code = stack.stop()
            assert code == 0, "\n".join(stack.lines[-30:])
            # recovered in place: the harness process was started once and never again
            assert sum(line.startswith("[captain bringup] started harness") for line in stack.lines) == 1
        finally:
            _stop(hardware)
