"""The XR1 driver drives ``xr1_twin`` (the MuJoCo tabletop in real time, another process)
over DDS: joint targets move the simulated arm and come back in joint_states, the jaw
follows, the rendered RGB-D frames back-project onto the simulated table with the
driver's camera calibration, and stale state stops commanding."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from _xr1_ros import RobotProcess, Spy

from captain_backends.core.driver import CameraFrame, JointCommand
from captain_backends.core.errors import DriverFault
from captain_backends.core.xr1.driver import XR1Driver

pytestmark = [pytest.mark.ros, pytest.mark.sim]

CMD = "forward_position_controller/commands"
#: The tabletop's table top and floor in the robot base frame (base at z = 0.912 m, table at 0.8 m).
TABLE_Z_M = 0.8 - 0.912
FLOOR_Z_M = -0.912


def _base_points(frame: CameraFrame) -> np.ndarray:
    """Valid depth pixels back-projected into the base frame with the frame's K and pose."""
    h, w = frame.depth_m.shape
    v, u = np.mgrid[0:h, 0:w]
    z = frame.depth_m
    ok = z > 0
    x = (u - frame.K[0, 2]) / frame.K[0, 0] * z
    y = (v - frame.K[1, 2]) / frame.K[1, 1] * z
    return (np.stack([x, y, z, np.ones_like(z)], -1)[ok] @ frame.T_base_camera.T)[:, :3]


def _on_plane(points: np.ndarray, z_m: float, tol_m: float = 0.003) -> float:
    return float(np.mean(np.abs(points[:, 2] - z_m) < tol_m))


def test_driver_drives_the_twin_and_stops_on_stale_state(ros_domain) -> None:
    from std_msgs.msg import Float64MultiArray

    from captain_backends.nodes.xr1_messages import RELIABLE_QOS

    twin = RobotProcess("captain_backends.nodes.xr1_twin", {"image_size_px": 128, "camera_rate_hz": 5.0})
    spy = Spy()
    spy.record(Float64MultiArray, CMD, RELIABLE_QOS)
    driver = XR1Driver()  # the packaged limits: 100 ms joint state, 0.5 s wrench
    try:
        driver.configure()
        driver.activate()
        home = np.asarray(driver.config.arm.home_rad)
        state = driver.read_state()
        assert state.fault == "" and state.joint_positions_rad == pytest.approx(home, abs=0.01)
        assert state.gripper_open_fraction == pytest.approx(1.0, abs=0.02)

        # Both cameras at home see the table where the driver's calibration says it is.
        frames = driver.capture()
        for name in ("agentview", "robot0_eye_in_hand"):
            f = frames[name]
            assert f.rgb.shape == (128, 128, 3) and f.rgb.std() > 10
            assert _on_plane(_base_points(f), TABLE_Z_M) > 0.4, name

        # A joint-space move is tracked by the simulated arm and read back over DDS.
        target = home + np.array([0.4, 0.1, 0.0, 0.25, 0.0, 0.15, 0.3])
        deadline = time.monotonic() + 10.0
        while np.abs(driver.read_state().joint_positions_rad - target).max() > 2e-3:
            assert time.monotonic() < deadline, f"twin did not reach the target: {driver.read_state()}"
            driver.send_command(JointCommand(target, 0.5))
            driver.advance()
        time.sleep(0.5)
        state = driver.read_state()
        assert state.joint_positions_rad == pytest.approx(target, abs=2e-3)
        assert state.gripper_open_fraction == pytest.approx(0.5, abs=0.03)
        assert np.abs(state.joint_velocities_rad_s).max() < 0.05
        # The wrist camera moved with the arm and still sees table and floor where they are.
        wrist = _base_points(driver.capture(("robot0_eye_in_hand",))["robot0_eye_in_hand"])
        assert _on_plane(wrist, TABLE_Z_M) + _on_plane(wrist, FLOOR_Z_M) > 0.6

        # The twin stops publishing joint states: the driver faults and stops commanding.
        deadline = time.monotonic() + 10.0
        while driver.command_subscriber_count() < 2:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        spy.set_parameters("xr1_twin", {"publish_joint_states": False})
        message = ""
        deadline = time.monotonic() + 3.0
        while not message:
            assert time.monotonic() < deadline, "no fault although the twin stopped publishing joint states"
            try:
                driver.send_command(JointCommand(target))
                driver.advance()
            except DriverFault as exc:
                message, t_fault = str(exc), time.monotonic()
        age_ms = float(re.search(r"not updated for (\d+) ms", message).group(1))
        assert 100 <= age_ms <= 200, message  # the 100 ms limit, caught within a period or two
        published = driver.commands_published
        for _ in range(10):
            with pytest.raises(DriverFault):
                driver.send_command(JointCommand(home))
            time.sleep(0.01)
        time.sleep(0.1)
        assert driver.commands_published == published
        assert spy.messages(CMD, after_s=t_fault + 0.01) == []
        assert "stale joint state" in driver.read_state().fault
    finally:
        driver.shutdown()
        spy.close()
        twin.stop()
