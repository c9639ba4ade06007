"""The mock driver: state mirrors commands, synthetic but calibrated cameras, and the
tabletop's Panda description (checked with real Pinocchio kinematics)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from _panda_kinematics import PandaKinematics

from captain_backends.core import (
    HEAD_CAMERA,
    WRIST_CAMERA,
    DriverStateError,
    ForceGuard,
    JointCommand,
    LifecycleState,
    SimulatedDriver,
)
from captain_backends.core.errors import BackendError
from captain_backends.core.mock import MockDriver
from captain_backends.core.tabletop.scene import ROBOT_BASE_POSITION_M, TABLE_HALF_SIZE_M, TABLE_TOP_Z_M


@pytest.fixture(scope="module")
def mock():
    drv = MockDriver()
    drv.configure()
    drv.activate()
    yield drv
    drv.shutdown()


@pytest.fixture
def fresh(mock):
    mock.reset()
    return mock


def test_state_mirrors_commands_at_once(fresh):
    drv = fresh
    d = drv.description()
    q0 = drv.read_state().joint_positions_rad
    np.testing.assert_allclose(q0, d.home_joint_positions_rad)
    target = q0 + np.array([0.01, -0.02, 0.0, 0.015, 0.0, -0.01, 0.02])
    sent = drv.send_command(JointCommand(target, 0.25))
    np.testing.assert_allclose(sent.joint_positions_rad, target)
    state = drv.read_state()
    np.testing.assert_allclose(state.joint_positions_rad, target)
    np.testing.assert_allclose(state.joint_velocities_rad_s, (target - q0) / drv.control_period_s)
    assert state.gripper_open_fraction == 0.25
    assert state.gripper_opening_m == pytest.approx(0.25 * d.gripper_max_opening_m)
    assert state.contact_force_n == 0.0 and not state.fault
    report = drv.advance(ForceGuard(0.1))
    assert report.duration_s == drv.control_period_s and not report.guard_tripped
    np.testing.assert_allclose(drv.read_state().joint_velocities_rad_s, (target - q0) / drv.control_period_s)
    drv.advance()
    assert not np.any(drv.read_state().joint_velocities_rad_s)
    # None keeps the jaw target.
    drv.send_command(JointCommand(target))
    assert drv.read_state().gripper_open_fraction == 0.25


def test_time_advances_by_the_control_period(fresh):
    drv = fresh
    for _ in range(1000):
        drv.advance()
    assert drv.read_state().time_s == pytest.approx(1000 * drv.control_period_s, abs=1e-12)
    drv.reset()
    assert drv.read_state().time_s == 0.0


def test_commands_are_clipped_like_a_real_driver(fresh):
    drv = fresh
    d = drv.description()
    q0 = drv.read_state().joint_positions_rad
    sent = drv.send_command(JointCommand(q0 + 1.0, 3.0))
    np.testing.assert_allclose(sent.joint_positions_rad - q0,
                               np.minimum(d.joint_velocity_limit_rad_s * drv.control_period_s,
                                          d.joint_upper_rad - q0))
    assert sent.gripper_target_fraction == 1.0
    for _ in range(300):
        drv.send_command(JointCommand(d.joint_upper_rad + 1.0))
    np.testing.assert_allclose(drv.read_state().joint_positions_rad, d.joint_upper_rad)
    with pytest.raises(BackendError, match="7 finite values"):
        drv.send_command(JointCommand(np.zeros(6)))


def _backproject(frame) -> np.ndarray:
    """Points (N, 3) in the base frame of every pixel with valid depth."""
    h, w = frame.depth_m.shape
    u, v = np.meshgrid(np.arange(w), np.arange(h))
    valid = frame.depth_m > 0
    pix = np.stack([u[valid], v[valid], np.ones(valid.sum())])
    p_cam = np.linalg.solve(frame.K, pix) * frame.depth_m[valid]
    return (frame.T_base_camera[:3, :3] @ p_cam + frame.T_base_camera[:3, 3:]).T


def test_cameras_back_project_onto_the_table_and_floor(fresh):
    drv = fresh
    frames = drv.capture()
    assert set(frames) == {HEAD_CAMERA, WRIST_CAMERA}
    table_z = TABLE_TOP_Z_M - ROBOT_BASE_POSITION_M[2]
    floor_z = -ROBOT_BASE_POSITION_M[2]
    for frame in frames.values():
        assert frame.size_px == (512, 512) and frame.rgb.dtype == np.uint8
        assert frame.depth_m.dtype == np.float32
        points = _backproject(frame)
        assert len(points) > 0.5 * 512 * 512
        on_table = np.abs(points[:, 2] - table_z) < 1e-3
        on_floor = np.abs(points[:, 2] - floor_z) < 1e-3
        assert np.all(on_table | on_floor)
        # Table points lie within the table top.
        xy = points[on_table, :2] + np.asarray(ROBOT_BASE_POSITION_M[:2])
        assert np.all(np.abs(xy) <= np.asarray(TABLE_HALF_SIZE_M[:2]) + 1e-3)
    # The wrist camera at home looks down at the table.
    assert np.mean(np.abs(_backproject(frames[WRIST_CAMERA])[:, 2] - table_z) < 1e-3) > 0.99


def test_wrist_camera_rides_on_the_hand(fresh):
    """The wrist camera's pose relative to the TCP (Pinocchio FK of the description)
    is the same in every configuration."""
    drv = fresh
    kin = PandaKinematics(drv.description())
    relative = []
    for delta in (np.zeros(7), np.array([0.02, 0.02, -0.02, 0.02, 0.02, -0.02, 0.02])):
        q = drv.read_state().joint_positions_rad + delta
        drv.send_command(JointCommand(q))
        frame = drv.capture((WRIST_CAMERA,))[WRIST_CAMERA]
        relative.append(np.linalg.inv(kin.tcp(drv.read_state().joint_positions_rad)) @ frame.T_base_camera)
    np.testing.assert_allclose(relative[0], relative[1], atol=1e-9)


def test_snapshot_and_task(fresh):
    drv = fresh
    assert isinstance(drv, SimulatedDriver)
    info = drv.reset(seed=3)
    assert info.task_id == "mock/empty" and not drv.check_success()
    d = drv.description()
    kin = PandaKinematics(d)
    snap = drv.snapshot()
    tcp_world = d.T_world_base @ kin.tcp(d.home_joint_positions_rad)[:, 3]
    np.testing.assert_allclose(snap.ee_position_m, tcp_world[:3], atol=1e-9)
    assert snap.object_poses == {} and not snap.success


def test_description_is_the_tabletop_panda(fresh):
    d = fresh.description()
    assert d.model_path.is_file() and d.srdf_path.is_file()
    model = pin.buildModelFromMJCF(str(d.model_path))
    for name in d.arm_joint_names:
        assert model.existJointName(name)
    assert model.existFrame(d.base_frame) and model.existFrame(d.flange_frame)
    np.testing.assert_allclose(d.T_world_base[:3, 3], ROBOT_BASE_POSITION_M)


def test_lifecycle():
    drv = MockDriver()
    with pytest.raises(DriverStateError):
        drv.read_state()
    drv.configure()
    with pytest.raises(DriverStateError, match="needs state active"):
        drv.send_command(JointCommand(np.zeros(7)))
    drv.advance()
    drv.activate()
    drv.hold()
    drv.shutdown()
    assert drv.lifecycle_state is LifecycleState.FINALIZED


@pytest.mark.sim
def test_cameras_match_the_tabletop_scene():
    """Same K and T_base_camera as the MuJoCo tabletop's cameras."""
    from captain_backends.core.tabletop.driver import TabletopDriver

    mock, sim = MockDriver(), TabletopDriver(seed=0)
    mock.configure()
    sim.configure()
    try:
        a = mock.capture((HEAD_CAMERA, WRIST_CAMERA))
        b = sim.capture((HEAD_CAMERA, WRIST_CAMERA))
        for name in (HEAD_CAMERA, WRIST_CAMERA):
            np.testing.assert_allclose(a[name].K, b[name].K)
        np.testing.assert_allclose(a[HEAD_CAMERA].T_base_camera, b[HEAD_CAMERA].T_base_camera, atol=1e-6)
        # The simulated arm holds home within its tracking error.
        np.testing.assert_allclose(a[WRIST_CAMERA].T_base_camera, b[WRIST_CAMERA].T_base_camera, atol=2e-3)
        # Where both see the bare table, the depths agree.
        da, db = a[HEAD_CAMERA].depth_m, b[HEAD_CAMERA].depth_m
        corner = (slice(400, 512), slice(0, 40))
        np.testing.assert_allclose(da[corner], db[corner], atol=2e-3)
    finally:
        mock.shutdown()
        sim.shutdown()


def test_registered_by_name():
    from captain_backends.core import available_drivers, make_driver

    if "mock" not in available_drivers():
        pytest.skip("captain_backends is not installed with its entry points yet")
    assert isinstance(make_driver("mock"), MockDriver)
