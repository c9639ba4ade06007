"""`captain bringup xr1_real`: the real-robot stack keeps trying while the robot's topics are
absent (and says so), and comes up against ros2_control-style fake hardware, where a
MoveTo goal moves the mirrored joints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import ROOT, Client, Stack, isolated_domain, tolerant_xr1_overlay

pytestmark = [pytest.mark.ros, pytest.mark.e2e]


def test_without_a_robot_the_stack_is_not_ready_and_says_why() -> None:
    with isolated_domain():
        out = subprocess.run(
            [sys.executable, "-m", "captain_bringup.cli.main", "bringup", "xr1_real", "--ready-timeout-s", "8",
             "--param", "harness.driver_retry_period_s=1.0"],
            capture_output=True, text=True, timeout=120, cwd=str(ROOT), env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert out.returncode == 1, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert "FAILED: not ready after 8 s: harness" in text
    assert "driver 'xr1' failed to start" in text and "retrying in 1 s" in text


def test_xr1_real_drives_fake_hardware(tmp_path: Path) -> None:
    from action_msgs.msg import GoalStatus

    from captain_interfaces.action import MoveTo

    with isolated_domain():
        hardware = subprocess.Popen([sys.executable, "-m", "captain_backends.nodes.xr1_fake_hardware"],
                                    stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
        try:
            assert hardware.stdout is not None and hardware.stdout.readline().strip() == "READY"
            overlay = tolerant_xr1_overlay(tmp_path)
            stack = Stack("xr1_real", "--params-file", str(overlay), ready_timeout_s=120.0)
            client = Client()
            try:
                start = np.asarray(client.robot_call("get_robot_state")["value"]["end_effector_position_m"])
                action = client.action(MoveTo, "move_to")
                target = start + np.array([0.03, 0.0, -0.03])
                handle = client.wait(action.send_goal_async(MoveTo.Goal(position_m=target.tolist(),
                                                                        speed_m_s=0.05)))
                res = client.wait(handle.get_result_async(), timeout_s=120.0)
                result = json.loads(res.result.result.result_json)
                assert res.status == GoalStatus.STATUS_SUCCEEDED, result["message"]
                end = np.asarray(client.robot_call("get_robot_state")["value"]["end_effector_position_m"])
                assert np.linalg.norm(end - target) < 0.01
            finally:
                client.close()
                code = stack.stop()
            assert code == 0, "\n".join(stack.lines[-30:])
        finally:
            hardware.send_signal(signal.SIGINT)
            hardware.wait(timeout=30)
