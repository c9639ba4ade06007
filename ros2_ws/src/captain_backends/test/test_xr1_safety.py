"""The XR1 driver's ROS-free pieces: command limiting, fault conditions, the gripper map,
image decoding (ROS encodings, padding, byte order) and the fake hardware's lag."""

from __future__ import annotations

import numpy as np
import pytest

from captain_backends.core.xr1.errors import CameraUnavailableError
from captain_backends.core.xr1.fake_hardware import FirstOrderMirror, synthetic_rgbd
from captain_backends.core.xr1.gripper import GripperMap
from captain_backends.core.xr1.images import RawImage, decode_depth_m, decode_rgb, encode_depth, encode_rgb
from captain_backends.core.xr1.safety import (
    CommandLimiter,
    emergency_wrench_fault,
    stale_state_fault,
    stale_wrench_fault,
)
from captain_backends.core.xr1.state_buffer import StateBuffer


def _limiter() -> CommandLimiter:
    # joint 0: velocity 1 rad/s -> 0.01 rad per 10 ms; joint 1: 10 rad/s, capped by max_step 0.05
    return CommandLimiter([-1.0, -1.0], [1.0, 1.0], [1.0, 10.0], period_s=0.01, max_step_rad=0.05)


def test_commands_are_clipped_and_step_limited_per_period() -> None:
    lim = _limiter()
    assert lim.max_step_rad == pytest.approx([0.01, 0.05])
    lim.reset(np.array([0.0, 0.0]))
    assert lim.limit(np.array([0.5, 0.5])) == pytest.approx([0.01, 0.05])
    # A second command in the same period is limited against the same reference: no accumulation.
    assert lim.limit(np.array([0.5, -0.5])) == pytest.approx([0.01, -0.05])
    lim.next_period()
    assert lim.limit(np.array([0.5, -0.5])) == pytest.approx([0.02, -0.10])
    lim.next_period()
    # Targets beyond the joint limits are clipped before the step limit.
    lim.reset(np.array([0.99, 0.0]))
    assert lim.limit(np.array([5.0, 0.0])) == pytest.approx([1.0, 0.0])


def test_a_reference_outside_the_limits_walks_back_at_the_step_rate() -> None:
    lim = _limiter()
    lim.reset(np.array([1.2, 0.0]))
    assert lim.limit(np.array([1.2, 0.0])) == pytest.approx([1.19, 0.0])


def test_stale_state_names_the_oldest_joint() -> None:
    names = ["j1", "j2", "j3"]
    assert stale_state_fault(names, [10.0, 9.96, 10.0], now_s=10.05, timeout_s=0.1) == ""
    message = stale_state_fault(names, [10.0, 9.85, 9.99], now_s=10.0, timeout_s=0.1)
    assert "j2 not updated for 150 ms (limit 100 ms)" in message and "commanding stopped" in message
    assert "no value of j3" in stale_state_fault(names, [10.0, 10.0, None], now_s=10.0, timeout_s=0.1)
    assert stale_wrench_fault(9.0, 10.0, 0.5).startswith("stale wrench")
    assert stale_wrench_fault(9.8, 10.0, 0.5) == ""


def test_emergency_limits_on_force_and_torque_norms() -> None:
    assert emergency_wrench_fault(np.array([60.0, 60.0, 60.0]), np.zeros(3), 100.0, 20.0).startswith(
        "emergency force: 103.9 N exceeds 100.0 N")
    assert emergency_wrench_fault(np.zeros(3), np.array([0.0, 0.0, 25.0]), 100.0, 20.0).startswith(
        "emergency torque")
    assert emergency_wrench_fault(np.array([0.0, 0.0, 99.0]), np.zeros(3), 100.0, 20.0) == ""


def test_gripper_fraction_round_trip() -> None:
    g = GripperMap([0.0, 0.0], [0.04, -0.04], 0.08)
    assert g.positions(0.25) == pytest.approx([0.01, -0.01])
    assert g.fraction(np.array([0.01, -0.01])) == pytest.approx(0.25)
    assert g.opening_m(np.array([0.04, -0.04])) == pytest.approx(0.08)
    assert g.fraction(np.array([0.05, -0.05])) == 1.0 and g.positions(-1.0) == pytest.approx([0.0, 0.0])


def test_images_decode_ros_encodings() -> None:
    rgb, depth, K = synthetic_rgbd(40, 30, fovy_deg=60.0, plane_distance_m=1.2345)
    assert K[1, 1] == pytest.approx(15.0 / np.tan(np.radians(30.0))) and K[0, 2] == pytest.approx(19.5)
    assert np.array_equal(decode_rgb(encode_rgb(rgb)), rgb)
    bgr = RawImage("bgr8", 30, 40, 40 * 3, False, np.ascontiguousarray(rgb[:, :, ::-1]).tobytes())
    assert np.array_equal(decode_rgb(bgr), rgb)
    # rows padded to 128 bytes
    padded = np.zeros((30, 128), np.uint8)
    padded[:, :120] = rgb.reshape(30, 120)
    assert np.array_equal(decode_rgb(RawImage("rgb8", 30, 40, 128, False, padded.tobytes())), rgb)
    # 16UC1 in millimetres (quantised), 32FC1 in metres; NaN becomes 0 (invalid)
    assert np.allclose(decode_depth_m(encode_depth(depth, "16UC1")), 1.235, atol=1e-6)
    depth[0, 0] = np.nan
    out = decode_depth_m(encode_depth(depth, "32FC1"))
    assert out[0, 0] == 0.0 and out[1, 1] == pytest.approx(1.2345)
    big = RawImage("16UC1", 1, 2, 4, True, np.array([1500, 2], dtype=">u2").tobytes())
    assert decode_depth_m(big) == pytest.approx(np.array([[1.5, 0.002]]))
    with pytest.raises(CameraUnavailableError, match="supported: rgb8, bgr8"):
        decode_rgb(RawImage("yuv422", 1, 1, 2, False, b"\0\0"))
    with pytest.raises(CameraUnavailableError, match="malformed"):
        decode_depth_m(RawImage("32FC1", 2, 2, 8, False, b"\0" * 8))


def test_state_buffer_merges_partial_joint_states_and_differentiates() -> None:
    clock = iter([1.0, 1.5, 2.0])
    buf = StateBuffer(["a", "b"], clock=lambda: next(clock))
    buf.push_joint_state(["a", "x"], [0.1, 9.0], [])
    buf.push_joint_state(["b"], [0.2], [0.7])
    q, v, t = buf.joints(["a", "b"])
    assert q == pytest.approx([0.1, 0.2]) and v == pytest.approx([0.0, 0.7]) and t == [1.0, 1.5]
    buf.push_joint_state(["a"], [0.3], [])
    q, v, t = buf.joints(["a", "b"])
    assert v[0] == pytest.approx(0.2) and t[0] == 2.0  # (0.3 - 0.1) / (2.0 - 1.0)


def test_state_buffer_stamps_readings_with_their_reception_time() -> None:
    """A reading that waited in this process is as old as when the middleware received it
    (never younger, never in the future); the timing of the newest joint state says so."""
    now = [10.0]
    buf = StateBuffer(["a"], clock=lambda: now[0])
    buf.push_joint_state(["a"], [0.1], [], received_s=9.85, sent_s=9.84)
    _, _, t = buf.joints(["a"])
    assert t == [9.85]
    timing = buf.joint_state_timing()
    assert (timing.sent_s, timing.received_s, timing.stored_s) == (9.84, 9.85, 10.0)
    buf.push_joint_state(["a"], [0.2], [], received_s=10.5)  # a stamp ahead of the clock is clipped
    assert buf.joints(["a"])[2] == [10.0]
    buf.push_wrench([0, 0, 1], [0, 0, 0], "base", received_s=9.9)
    assert buf.latest_wrench().time_s == 9.9
    buf.push_joint_state(["a"], [0.3], [])  # no reception time: the push is the receipt
    now[0] = 10.2
    buf.push_joint_state(["a"], [0.4], [])
    assert buf.joints(["a"])[2] == [10.2] and buf.joint_state_timing().sent_s is None


def test_fake_hardware_lag_is_first_order() -> None:
    m = FirstOrderMirror(np.zeros(2), time_constant_s=0.05)
    m.set_target(np.array([1.0, -1.0]))
    for _ in range(5):
        m.step(0.01)
    assert m.positions == pytest.approx([1 - np.exp(-1.0), -(1 - np.exp(-1.0))])
    assert m.velocities[0] > 0
    with pytest.raises(ValueError):
        m.set_target(np.zeros(3))
