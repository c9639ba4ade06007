"""Quaternion/pose helpers and the validation of policy arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from captain_harness.core import arguments
from captain_harness.core.errors import ArgumentError
from captain_harness.core.geometry import (
    matrix_to_quat,
    pose_inverse,
    pose_matrix,
    quat_angle_rad,
    quat_multiply,
    quat_to_matrix,
    rotation_about_axis,
    slerp,
)


def _random_quats(n: int, seed: int = 0) -> np.ndarray:
    q = np.random.default_rng(seed).normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def test_quaternion_matrix_round_trip_and_hamilton_product() -> None:
    for q in _random_quats(200):
        R = quat_to_matrix(q)
        assert np.allclose(R @ R.T, np.eye(3), atol=1e-12) and np.isclose(np.linalg.det(R), 1.0)
        back = matrix_to_quat(R)
        assert back[0] >= 0.0
        assert np.allclose(back, q if q[0] >= 0 else -q, atol=1e-9)
    a, b = _random_quats(2, seed=1)
    assert np.allclose(quat_to_matrix(quat_multiply(a, b)), quat_to_matrix(a) @ quat_to_matrix(b), atol=1e-12)


def test_published_grasp_quaternions_mean_top_down() -> None:
    down = quat_to_matrix([0, 2**-0.5, 2**-0.5, 0])
    assert np.allclose(down[:, 2], [0, 0, -1])  # TCP z (approach) points down
    assert np.allclose(np.abs(down[:, 0]), [0, 1, 0])  # TCP x (jaw axis) along base y
    turned = quat_to_matrix([0, math.cos(math.pi / 8), math.sin(math.pi / 8), 0])
    assert np.allclose(turned[:, 2], [0, 0, -1])
    yaw = math.degrees(math.acos(abs(float(turned[:, 0] @ down[:, 0]))))
    assert yaw == pytest.approx(45.0, abs=1e-9)


def test_slerp_is_geodesic_with_constant_rate() -> None:
    a = np.array([1.0, 0, 0, 0])
    b = rotation_about_axis([0, 0, 1], 1.2)
    for s in np.linspace(0, 1, 7):
        q = slerp(a, b, s)
        assert quat_angle_rad(a, q) == pytest.approx(1.2 * s, abs=1e-9)
    # shortest arc even when the target is given with the opposite sign
    assert quat_angle_rad(slerp(a, -b, 0.5), rotation_about_axis([0, 0, 1], 0.6)) < 1e-9


def test_pose_inverse() -> None:
    T = pose_matrix([0.3, -0.2, 0.5], _random_quats(1, seed=3)[0])
    assert np.allclose(pose_inverse(T) @ T, np.eye(4), atol=1e-12)


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "0.5",
        0.5,
        True,
        [0.1, 0.2],
        [0.1, 0.2, 0.3, 0.4],
        [0.1, "a", 0.2],
        [0.1, float("nan"), 0.2],
        [0.1, float("inf"), 0.2],
        np.zeros((3, 1)),
        {"x": 1},
        [True, 0.0, 0.0],
        [[0.1], [0.2], [0.3]],
    ],
)
def test_bad_positions_raise_argument_errors_that_say_what_to_pass(bad: object) -> None:
    with pytest.raises(ArgumentError) as err:
        arguments.as_position("position", bad)
    assert "position" in str(err.value)


def test_positions_accept_lists_tuples_arrays_and_numpy_scalars() -> None:
    for ok in ([0.1, 0, 0.3], (0.1, 0, 0.3), np.array([0.1, 0, 0.3]), [np.float32(0.1), np.int64(0), 0.3]):
        assert np.allclose(arguments.as_position("p", ok), [0.1, 0, 0.3])


def test_quaternions_zero_norm_and_non_unit() -> None:
    with pytest.raises(ArgumentError, match="zero norm"):
        arguments.as_quaternion("quaternion", [0, 0, 0, 0])
    with pytest.raises(ArgumentError, match="norm"):
        arguments.as_quaternion("quaternion", [0, 1, 1, 0])
    q = arguments.as_quaternion("quaternion", [0, 0.7, 0.7, 0])  # 1% off: normalised
    assert np.isclose(np.linalg.norm(q), 1.0)
    assert arguments.as_quaternion("q", [-1.0, 0, 0, 0])[0] == 1.0


def test_numbers_and_choices() -> None:
    assert arguments.as_float("speed", 0.05, minimum=0.0, maximum=0.25, exclusive_minimum=True) == 0.05
    for bad in (0.0, -1.0, 1.0, float("nan"), "fast", None, True):
        with pytest.raises(ArgumentError):
            arguments.as_float("speed", bad, minimum=0.0, maximum=0.25, exclusive_minimum=True)
    with pytest.raises(ArgumentError, match="'guarded', 'manipulation'"):
        arguments.as_choice("mode", "gentle", ("guarded", "manipulation"))
    with pytest.raises(ArgumentError):
        arguments.as_mapping("args", [("max_distance_m", 0.1)])


def test_motion_config_schema_and_validation() -> None:
    from captain_harness.core.motion_config import MotionConfig

    schema = {p["name"]: p for p in MotionConfig.schema()}
    assert schema["contact_threshold_n"]["unit"] == "N" and schema["contact_threshold_n"]["default"] == 12.0
    assert all(p["doc"] for p in schema.values())
    cfg = MotionConfig.from_dict({"emergency_force_n": 100.0, "workspace_min_m": [-0.2, -0.5, -0.2]})
    assert cfg.emergency_force_n == 100.0 and cfg.workspace_min_m == (-0.2, -0.5, -0.2)
    with pytest.raises(ArgumentError, match="unknown motion parameters"):
        MotionConfig.from_dict({"emergency_force": 100.0})
    with pytest.raises(ArgumentError, match="out of range"):
        MotionConfig(contact_threshold_n=0.0)
    with pytest.raises(ArgumentError, match="below"):
        MotionConfig(workspace_min_m=(0.0, 0.0, 2.0))
