"""The native MuJoCo tabletop driver, on real MuJoCo physics and rendering and real
Pinocchio kinematics built from the driver's own description."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pinocchio as pin
import pytest
from _panda_kinematics import PandaKinematics, rot_z, stream_line, wait

from captain_backends.core import (
    HEAD_CAMERA,
    WRIST_CAMERA,
    DriverStateError,
    ForceGuard,
    JointCommand,
    LifecycleState,
    SimSnapshot,
)
from captain_backends.core.errors import BackendError
from captain_backends.core.tabletop import panda_model as pm
from captain_backends.core.tabletop.driver import TabletopDriver
from captain_backends.core.tabletop.tasks import UnknownTaskError

pytestmark = pytest.mark.sim

TABLE_TOP_Z_WORLD_M = 0.8


@pytest.fixture(scope="module")
def driver():
    drv = TabletopDriver(task="pick_cube", seed=0)
    drv.configure()
    drv.activate()
    yield drv
    drv.shutdown()


@pytest.fixture(scope="module")
def kin(driver):
    return PandaKinematics(driver.description())


@pytest.fixture
def fresh(driver):
    """The driver reset to a known layout, ACTIVE, holding home."""
    driver.reset(seed=7)
    driver.hold()
    return driver


def world_to_base(driver, p_world) -> np.ndarray:
    T = np.linalg.inv(driver.description().T_world_base)
    return T[:3, :3] @ np.asarray(p_world) + T[:3, 3]


def test_pinocchio_fk_of_description_matches_mujoco_tcp(driver, kin):
    """Pinocchio FK of flange + T_flange_tcp (from the description's MJCF) equals the
    MuJoCo grip site of the scene model, in the base frame, for random configurations."""
    d = driver.description()
    assert d.model_format == "mjcf" and d.arm_joint_names == pm.ARM_JOINT_NAMES
    m = mujoco.MjModel.from_xml_string(driver.scene_xml)
    data = mujoco.MjData(m)
    qadr = [m.joint(n).qposadr[0] for n in d.arm_joint_names]
    site = m.site(pm.TCP_SITE).id
    T_base_world = np.linalg.inv(d.T_world_base)
    rng = np.random.default_rng(1)
    for _ in range(25):
        q = rng.uniform(d.joint_lower_rad, d.joint_upper_rad)
        data.qpos[qadr] = q
        mujoco.mj_kinematics(m, data)
        T_world_tcp = np.eye(4)
        T_world_tcp[:3, :3] = data.site_xmat[site].reshape(3, 3)
        T_world_tcp[:3, 3] = data.site_xpos[site]
        T_mj = T_base_world @ T_world_tcp
        T_pin = kin.tcp(q)
        assert np.linalg.norm(T_pin[:3, 3] - T_mj[:3, 3]) < 1e-3
        assert np.linalg.norm(pin.log3(T_pin[:3, :3].T @ T_mj[:3, :3])) < 1e-3


def test_srdf_leaves_home_free_of_self_collision(driver, kin):
    """The generated SRDF loads in Pinocchio, removes pairs, and the home pose is
    collision-free among the remaining pairs (adjacent links overlap, so a missing
    'Adjacent' entry would show up here)."""
    d = driver.description()
    geom = pin.buildGeomFromMJCF(kin.model, str(d.model_path), pin.GeometryType.COLLISION)
    geom.addAllCollisionPairs()
    all_pairs = len(geom.collisionPairs)
    pin.removeCollisionPairs(kin.model, geom, str(d.srdf_path))
    assert 0 < len(geom.collisionPairs) < all_pairs
    q = pin.neutral(kin.model)
    q[kin.q_index] = d.home_joint_positions_rad
    q[-2:] = (0.04, -0.04)
    geom_data = pin.GeometryData(geom)
    assert not pin.computeCollisions(kin.model, kin.data, geom, geom_data, q, False)


def test_joint_targets_move_the_arm_and_track(fresh, kin):
    """A smooth joint trajectory is tracked within a few mrad and settles to < 1 mrad
    without oscillation; the TCP moves accordingly."""
    drv = fresh
    q0 = drv.read_state().joint_positions_rad
    tcp0 = drv.T_base_tcp()[:3, 3]
    delta = np.array([0.4, 0.25, -0.3, 0.35, 0.3, -0.3, 0.6])
    steps = 120
    lag = []
    for k in range(1, steps + 1):
        s = k / steps
        target = q0 + delta * (10 * s**3 - 15 * s**4 + 6 * s**5)
        sent = drv.send_command(JointCommand(target))
        np.testing.assert_allclose(sent.joint_positions_rad, target)
        drv.advance()
        state = drv.read_state()
        lag.append(np.abs(state.joint_positions_rad - target).max())
        if k == steps // 2:
            # Mid-motion, the poses the driver reports belong to the joints it reports.
            np.testing.assert_allclose(kin.tcp(state.joint_positions_rad), drv.T_base_tcp(), atol=1e-9)
            ee_world = drv.description().T_world_base @ np.append(drv.T_base_tcp()[:3, 3], 1.0)
            np.testing.assert_allclose(drv.snapshot().ee_position_m, ee_world[:3], atol=1e-9)
    assert max(lag) < 0.01
    errors = []
    for _ in range(40):
        drv.advance()
        errors.append(drv.read_state().joint_positions_rad - (q0 + delta))
    errors = np.array(errors)
    assert np.abs(errors[-1]).max() < 1e-3
    assert np.abs(drv.read_state().joint_velocities_rad_s).max() < 1e-2
    # No oscillation: the error of each joint changes sign at most once while settling.
    significant = np.where(np.abs(errors) > 1e-5, np.sign(errors), 0)
    for j in range(7):
        signs = significant[:, j][significant[:, j] != 0]
        assert np.count_nonzero(np.diff(signs)) <= 1
    assert np.linalg.norm(drv.T_base_tcp()[:3, 3] - tcp0) > 0.05


def test_send_command_clips_to_limits_and_velocity(fresh):
    drv = fresh
    d = drv.description()
    q0 = drv.read_state().joint_positions_rad
    far = d.joint_upper_rad + 1.0
    sent = drv.send_command(JointCommand(far, 2.0))
    step = d.joint_velocity_limit_rad_s * drv.control_period_s
    np.testing.assert_allclose(np.abs(sent.joint_positions_rad - q0),
                               np.minimum(step, d.joint_upper_rad - q0), atol=1e-9)
    assert sent.gripper_target_fraction == 1.0
    for _ in range(400):
        sent = drv.send_command(JointCommand(far))
        drv.advance()
        if np.allclose(sent.joint_positions_rad, d.joint_upper_rad):
            break
    np.testing.assert_allclose(sent.joint_positions_rad, d.joint_upper_rad)
    with pytest.raises(BackendError, match="7 finite values"):
        drv.send_command(JointCommand(np.full(7, np.nan)))
    drv.reset(seed=7)


def test_touching_the_table_raises_contact_force_and_trips_the_guard(fresh, kin):
    drv = fresh
    q = drv.read_state().joint_positions_rad
    T = kin.tcp(q)
    table_z = TABLE_TOP_Z_WORLD_M - drv.description().T_world_base[2, 3]
    above = T.copy()
    above[:3, 3] = world_to_base(drv, (-0.22, 0.30, 0.0))[:3]
    above[2, 3] = table_z + 0.03
    q, reports = stream_line(drv, kin, q, above, speed_mps=0.25)
    wait(drv, 0.2)
    state = drv.read_state()
    assert state.contact_force_n == 0.0 and not any(r.guard_tripped for r in reports)
    below = above.copy()
    below[2, 3] = table_z - 0.02
    guard = ForceGuard(max_contact_force_n=15.0)
    q, reports = stream_line(drv, kin, q, below, speed_mps=0.03, guard=guard)
    assert reports[-1].guard_tripped, "the descent must stop at the table"
    assert reports[-1].peak_contact_force_n > 15.0
    assert reports[-1].guard_tripped_at_s is not None
    tcp_at_trip = drv.T_base_tcp()[:3, 3]
    # The finger tips are ~4-10 mm below the TCP: it stops just above the table.
    assert table_z < tcp_at_trip[2] < table_z + 0.02
    # Holding: the arm stays where the guard stopped it and the force stays bounded.
    later = wait(drv, 0.3)
    assert np.linalg.norm(drv.T_base_tcp()[:3, 3] - tcp_at_trip) < 3e-3
    assert np.abs(drv.read_state().joint_velocities_rad_s).max() < 0.02
    assert max(r.peak_contact_force_n for r in later) < 60.0
    force_at_hold = drv.read_state().contact_force_n
    # Pressing 1 cm further in (no guard) raises the reading; the table pushes the hand up.
    pressed = kin.tcp(drv.read_state().joint_positions_rad)
    pressed[2, 3] -= 0.01
    stream_line(drv, kin, drv.read_state().joint_positions_rad, pressed, speed_mps=0.02)
    wait(drv, 0.2)
    state = drv.read_state()
    assert state.contact_force_n > force_at_hold + 5.0
    assert state.wrench_base[2] > 5.0
    assert abs(state.wrench_base[2]) > 0.8 * np.linalg.norm(state.wrench_base[:3])


def test_gripper_opening_follows_the_target_fraction(fresh):
    drv = fresh
    d = drv.description()
    q = drv.read_state().joint_positions_rad
    assert drv.read_state().gripper_opening_m == pytest.approx(d.gripper_max_opening_m, abs=1e-3)
    for fraction in (0.5, 0.0, 1.0):
        drv.send_command(JointCommand(q, fraction))
        wait(drv, 0.6)
        state = drv.read_state()
        # robosuite's finger joints have 1 N friction against 1000 N/m actuators: up to
        # 1 mm of dead band per finger.
        assert state.gripper_opening_m == pytest.approx(fraction * d.gripper_max_opening_m, abs=2.5e-3)
        assert state.gripper_open_fraction == pytest.approx(fraction, abs=0.035)


def test_grasp_and_lift_the_red_cube(fresh, kin):
    """Top-down grasp: the fingers squeeze the cube, the snapshot marks it held, and
    the pick task succeeds once it is lifted."""
    drv = fresh
    snap = drv.snapshot()
    cube = snap.object_poses["red_cube"]
    cube_base = world_to_base(drv, cube.position_m)
    w, x, y, z = cube.quaternion_wxyz
    cube_yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    m, data = drv.mj_model, drv.mj_data
    closing_axis = data.xaxis[m.joint(pm.FINGER_JOINT_NAMES[0]).id]
    delta = (cube_yaw - np.arctan2(closing_axis[1], closing_axis[0]) + np.pi / 4) % (np.pi / 2) - np.pi / 4
    q = drv.read_state().joint_positions_rad
    T = kin.tcp(q)
    goal = np.eye(4)
    goal[:3, :3] = rot_z(delta) @ T[:3, :3]
    lift = np.array([0.0, 0.0, 0.10])
    goal[:3, 3] = cube_base + lift
    q, _ = stream_line(drv, kin, q, goal, speed_mps=0.3, gripper=1.0)
    goal[:3, 3] = cube_base
    q, _ = stream_line(drv, kin, q, goal, speed_mps=0.15)
    assert not drv.snapshot().held["red_cube"]
    drv.send_command(JointCommand(q, 0.0))
    wait(drv, 0.5)
    state = drv.read_state()
    assert state.gripper_opening_m == pytest.approx(0.04, abs=3e-3), "jaw stops at the cube's width"
    assert np.all(state.finger_forces_n > 1.0)
    # The squeeze alone exceeds the 30 N guard used for the lift below, which must
    # therefore ignore the fingers' contacts with the cube to carry it.
    assert state.contact_force_n > 30.0
    assert drv.snapshot().held["red_cube"]
    goal[:3, 3] = cube_base + lift
    q, reports = stream_line(drv, kin, q, goal, speed_mps=0.15,
                             guard=ForceGuard(30.0, ignore_finger_contacts=True))
    assert not any(r.guard_tripped for r in reports)
    wait(drv, 0.2)
    snap = drv.snapshot()
    assert snap.held["red_cube"] and snap.ever_held["red_cube"]
    assert not snap.ever_held["blue_cube"]
    assert snap.object_poses["red_cube"].position_m[2] > cube.position_m[2] + 0.08
    assert drv.check_success() and snap.success
    assert snap.goals[0].predicate == "lifted" and snap.goals[0].satisfied


@pytest.mark.parametrize("task", ["cube_on_plate", "stack_cubes"])
def test_on_predicate(task):
    """``On`` holds for a cube resting on its destination, not next to it."""
    drv = TabletopDriver(task=task, seed=3)
    drv.configure()
    try:
        assert not drv.check_success()
        info = drv.task_info()
        snap = drv.snapshot()
        dest = snap.destination
        assert info.task_id == f"tabletop/{task}" and info.goals == (f"On(red_cube, {dest})",)
        m, data = drv.mj_model, drv.mj_data
        adr = m.joint("red_cube_joint").qposadr[0]
        dest_pos = snap.position(dest)
        dest_top = dest_pos[2] + (0.006 if dest == "plate" else 0.02)
        data.qpos[adr:adr + 7] = (*dest_pos[:2], dest_top + 0.021, 1, 0, 0, 0)
        data.qvel[:] = 0.0
        wait(drv, 0.3)
        assert drv.check_success()
        snap = drv.snapshot()
        assert snap.success and snap.goals[0].satisfied and snap.goals[0].args == ("red_cube", dest)
        np.testing.assert_allclose(snap.goal_position_m, drv.snapshot().position(dest))
        data.qpos[adr:adr + 3] = (dest_pos[0], dest_pos[1] + 0.12, TABLE_TOP_Z_WORLD_M + 0.02)
        wait(drv, 0.2)
        assert not drv.check_success()
    finally:
        drv.shutdown()


def _backprojection_errors(frame, driver, pixels, T_world_base) -> np.ndarray:
    """For each pixel, cast MuJoCo's own ray from the camera and compare the hit point
    with the back-projection of the rendered depth through K and T_base_camera (and
    check that the depth is 0 where the ray hits nothing). Returns the errors, m."""
    m, data = driver.mj_model, driver.mj_data
    K_inv = np.linalg.inv(frame.K)
    T = frame.T_base_camera
    origin_world = (T_world_base @ T)[:3, 3]
    visible_groups = np.array([0, 1, 1, 0, 0, 0], np.uint8)
    errors = []
    for u, v in pixels:
        ray_cam = K_inv @ np.array([u, v, 1.0])
        direction_world = T_world_base[:3, :3] @ T[:3, :3] @ ray_cam
        geomid = np.zeros(1, dtype=np.int32)
        dist = mujoco.mj_ray(m, data, origin_world, direction_world, visible_groups, 1, -1, geomid)
        z = float(frame.depth_m[v, u])
        if dist < 0:
            assert z == 0.0, (u, v)
            continue
        p_base = T[:3, :3] @ (z * ray_cam) + T[:3, 3]
        hit_base = np.linalg.inv(T_world_base) @ np.append(origin_world + dist * direction_world, 1.0)
        errors.append(np.linalg.norm(p_base - hit_base[:3]))
    return np.array(errors)


def test_cameras_are_metric_and_calibrated(fresh):
    drv = fresh
    frames = drv.capture()
    assert set(frames) == {HEAD_CAMERA, WRIST_CAMERA}
    T_world_base = drv.description().T_world_base
    for frame in frames.values():
        assert frame.rgb.shape == (512, 512, 3) and frame.rgb.dtype == np.uint8
        assert frame.depth_m.shape == (512, 512) and frame.depth_m.dtype == np.float32
        # Optical frame is right-handed and orthonormal.
        R = frame.T_base_camera[:3, :3]
        np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-9)
        assert np.linalg.det(R) == pytest.approx(1.0)
        grid = [(u, v) for u in range(5, 512, 29) for v in range(7, 512, 31)]
        errors = _backprojection_errors(frame, drv, grid, T_world_base)
        assert len(errors) >= 0.75 * len(grid)
        # Sub-millimetre everywhere but on depth edges (a pixel straddling two surfaces).
        assert np.median(errors) < 1e-4 and np.percentile(errors, 95) < 1e-3
    # The head camera looks down at the table: the optical axis points down.
    assert frames[HEAD_CAMERA].T_base_camera[2, 2] < -0.3
    # A known object point: the centre of the red cube's top face, seen by the head camera.
    head = frames[HEAD_CAMERA]
    cube_top_world = drv.snapshot().position("red_cube") + np.array([0.0, 0.0, 0.02])
    cube_top = world_to_base(drv, cube_top_world)
    p_cam = np.linalg.inv(head.T_base_camera) @ np.append(cube_top, 1.0)
    uvw = head.K @ p_cam[:3]
    u, v = (round(float(c)) for c in uvw[:2] / uvw[2])
    z = float(head.depth_m[v, u])
    ray = np.linalg.inv(head.K) @ np.array([u, v, 1.0])
    p = head.T_base_camera[:3, :3] @ (z * ray) + head.T_base_camera[:3, 3]
    assert np.linalg.norm(p - cube_top) < 0.01
    # The cube's pixel is red in the image.
    r, g, b = (int(c) for c in head.rgb[v, u])
    assert r > 120 and g < 90 and b < 90


def test_reset_is_seeded_and_init_states_are_numbered(driver):
    a = driver.reset(seed=11) and driver.snapshot().object_poses
    b = driver.reset(seed=11) and driver.snapshot().object_poses
    c = driver.reset(seed=12) and driver.snapshot().object_poses
    assert a == b and a != c
    info = driver.reset(init_state=4)
    assert info.init_state == 4
    d1 = driver.snapshot().object_poses
    driver.reset(init_state=4)
    assert driver.snapshot().object_poses == d1
    assert driver.read_state().time_s == 0.0
    np.testing.assert_allclose(driver.read_state().joint_positions_rad,
                               driver.description().home_joint_positions_rad, atol=1e-3)
    driver.reset(seed=7)


def test_snapshot_round_trips_through_json(fresh):
    snap = fresh.snapshot()
    data = json.loads(json.dumps(snap.to_dict()))
    assert SimSnapshot.from_dict(data) == snap
    assert set(snap.object_poses) == {"red_cube", "blue_cube", "green_cube", "plate"}
    assert snap.initial_object_poses.keys() == snap.object_poses.keys()


def test_lifecycle_and_errors():
    drv = TabletopDriver(seed=0)
    with pytest.raises(DriverStateError):
        drv.read_state()
    drv.configure()
    assert drv.lifecycle_state is LifecycleState.INACTIVE
    drv.read_state()
    with pytest.raises(DriverStateError, match="needs state active"):
        drv.send_command(JointCommand(np.zeros(7)))
    drv.advance()  # time may pass while inactive: the arm holds
    drv.activate()
    drv.hold()
    drv.deactivate()
    drv.shutdown()
    drv.shutdown()
    assert drv.lifecycle_state is LifecycleState.FINALIZED
    with pytest.raises(DriverStateError):
        drv.read_state()
    with pytest.raises(UnknownTaskError, match="valid tasks"):
        TabletopDriver(task="juggle")


def test_registered_by_name():
    from captain_backends.core import available_drivers, make_driver

    if "tabletop" not in available_drivers():
        pytest.skip("captain_backends is not installed with its entry points yet")
    assert isinstance(make_driver("tabletop", seed=1), TabletopDriver)
