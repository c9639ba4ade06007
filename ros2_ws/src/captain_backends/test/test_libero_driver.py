"""LiberoDriver on a real LIBERO task (libero_spatial/0): official states, cameras,
joint tracking, force guard, grasp bookkeeping, LIBERO's success and the snapshot.

One environment is built for the whole module (LIBERO construction takes seconds)."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest
from _libero_helpers import Ik, hold, reprojection_error_m, stream, visible_point

from captain_backends.core.driver import ForceGuard, JointCommand
from captain_backends.core.errors import BackendError, DriverStateError
from captain_backends.core.libero import LiberoDriver, catalogue
from captain_backends.core.libero.appearance import AppearanceFlags
from captain_backends.core.libero.errors import InvalidInitStateError
from captain_backends.core.snapshot import SimSnapshot

pytestmark = pytest.mark.sim

TASK = "libero_spatial/0"


@pytest.fixture(scope="module")
def driver():
    drv = LiberoDriver(task=TASK, init_state=11, random_layout=True, seed=7)
    drv.configure()
    drv.activate()
    yield drv
    drv.shutdown()


@pytest.fixture()
def official(driver):
    """The driver reset to the held-out official state 11."""
    driver.reset(init_state=11)
    return driver


# -------------------------------------------------------------------- tests
def test_reset_loads_the_official_held_out_state(official):
    info = official.task_info()
    assert info.task_id == TASK and info.suite == "libero_spatial" and info.init_state == 11
    assert info.instruction == catalogue.get_task(TASK).instruction
    assert info.goals == ("On(akita_black_bowl_1, plate_1)",)
    assert "plate_1" in info.objects and "wooden_cabinet_1" in info.objects
    s = official.scene
    official_state = catalogue.init_state(TASK, 11)
    q_official = official_state[1:1 + s.model.nq]
    state = official.read_state()
    # the arm holds its official configuration while the objects land (LIBERO's wait)
    assert np.max(np.abs(state.joint_positions_rad - q_official[s.arm_qpos])) < 2e-3
    snap = official.snapshot()
    for name in ("akita_black_bowl_1", "plate_1", "cookies_1"):
        adr = s.layout.qpos_adr[name]
        assert np.linalg.norm(snap.position(name)[:2] - q_official[adr:adr + 2]) < 0.01
    assert state.time_s == 0.0
    assert not official.check_success()
    with pytest.raises(InvalidInitStateError, match=r"0\.\.49"):
        official.reset(init_state=50)
    assert official.reset(init_state=49).init_state == 49


def test_cameras_render_rgbd_with_calibration_that_reprojects_within_1cm(official):
    frames = official.capture()
    assert set(frames) == {"agentview", "robot0_eye_in_hand"}
    T_world_base = official.description().T_world_base
    for name, frame in frames.items():
        assert frame.rgb.shape == (512, 512, 3) and frame.rgb.dtype == np.uint8
        assert frame.depth_m.shape == (512, 512) and frame.depth_m.dtype == np.float32
        assert frame.rgb.std() > 10, f"{name} image is blank"
        valid = frame.depth_m[frame.depth_m > 0]
        assert valid.size > 0.9 * frame.depth_m.size
        assert valid.min() > 0.02 and valid.max() < 6.0, "depth is not in metres"
        R = frame.T_base_camera[:3, :3]
        assert np.allclose(R.T @ R, np.eye(3), atol=1e-6)
    snap = official.snapshot()
    head = frames["agentview"]
    # the head camera looks down at the table from the front: the optical axis points
    # down and back towards the robot, image rows grow towards the viewer
    assert head.T_base_camera[2, 2] < -0.3 and head.T_base_camera[0, 2] < 0
    for obj in ("akita_black_bowl_1", "plate_1", "cookies_1"):
        hit, body = visible_point(official, head, snap.position(obj) + np.array([0, 0, 0.01]))
        assert official.scene.model.body(body).name.startswith(obj)
        assert reprojection_error_m(head, T_world_base, hit) < 0.01
    wrist = frames["robot0_eye_in_hand"]
    T_world_wrist = T_world_base @ wrist.T_base_camera
    ahead = T_world_wrist[:3, 3] + 0.3 * T_world_wrist[:3, 2]
    hit, _ = visible_point(official, wrist, ahead)
    assert reprojection_error_m(wrist, T_world_base, hit) < 0.01
    # the wrist camera rides on the hand: it is above the TCP, looking down
    tcp_world = official.T_world_tcp()[:3, 3]
    assert 0.0 < T_world_wrist[2, 3] - tcp_world[2] < 0.2 and T_world_wrist[2, 2] < -0.8


def test_joint_targets_move_the_arm_and_are_tracked_without_oscillation(official):
    q0 = official.read_state().joint_positions_rad
    q1 = q0 + np.array([0.25, -0.15, 0.2, 0.2, -0.2, 0.15, 0.4])
    stream(official, q0, q1, 1.5)
    after = hold(official, 0.5)
    errors = after - q1
    assert np.max(np.abs(errors[-1])) < 1e-3, "steady-state error above 1 mrad"
    assert np.max(np.abs(errors[-20:])) < 1e-3
    # no oscillation: the error decays without sign flips of significant size
    assert np.max(np.abs(errors)) < 0.02
    assert np.max(np.abs(official.read_state().joint_velocities_rad_s)) < 1e-3
    state = official.read_state()
    assert state.time_s == pytest.approx(2.0, abs=1e-6)
    assert not official.check_success()


def test_commands_are_clipped_to_limits_and_rate(official):
    d = official.description()
    q = official.read_state().joint_positions_rad
    sent = official.send_command(JointCommand(q + 1.0, 7.0))
    step = d.joint_velocity_limit_rad_s * official.control_period_s
    assert np.allclose(sent.joint_positions_rad - q, step, atol=1e-9)
    assert sent.gripper_target_fraction == 1.0
    far = q.copy()
    far[6] = d.joint_upper_rad[6] + 0.5
    for _ in range(120):
        sent = official.send_command(JointCommand(far))
        official.advance()
    assert sent.joint_positions_rad[6] == pytest.approx(d.joint_upper_rad[6])
    assert np.allclose(sent.joint_positions_rad[:6], q[:6])
    with pytest.raises(BackendError, match="7 finite values"):
        official.send_command(JointCommand(np.zeros(6)))
    official.deactivate()
    try:
        with pytest.raises(DriverStateError):
            official.send_command(JointCommand(q))
        official.advance()  # time passes while inactive; the arm holds
    finally:
        official.activate()


def test_description_kinematics_match_the_simulator(official):
    d = official.description()
    assert d.model_format == "mjcf" and d.model_path.is_file()
    assert d.arm_joint_names == tuple(f"robot0_joint{i}" for i in range(1, 8))
    assert d.base_frame == "robot0_base" and d.flange_frame == "robot0_right_hand"
    assert d.gripper_max_opening_m == pytest.approx(0.08, abs=0.002)
    assert d.srdf_path is not None and "disable_collisions" in d.srdf_path.read_text()
    ik = Ik(d)
    q = official.read_state().joint_positions_rad
    T_base_tcp_sim = np.linalg.inv(d.T_world_base) @ official.T_world_tcp()
    assert np.allclose(ik.fk(q), T_base_tcp_sim, atol=1e-6)
    assert np.allclose(ik.fk(q, ik.flange) @ d.T_flange_tcp, T_base_tcp_sim, atol=1e-6)
    # TCP = flange * T_flange_tcp, between the finger pads
    s = official.scene
    flange = s.model.body("robot0_right_hand").id
    T_world_flange = np.eye(4)
    T_world_flange[:3, :3] = s.data.xmat[flange].reshape(3, 3)
    T_world_flange[:3, 3] = s.data.xpos[flange]
    assert np.allclose(T_world_flange @ d.T_flange_tcp, official.T_world_tcp(), atol=1e-9)
    pads = [s.data.geom_xpos[s.model.geom(n).id] for n in ("gripper0_finger1_pad_collision",
                                                             "gripper0_finger2_pad_collision")]
    assert np.linalg.norm((pads[0] + pads[1]) / 2 - official.T_world_tcp()[:3, 3]) < 0.006


def test_force_guard_stops_the_arm_on_contact(official):
    d = official.description()
    ik = Ik(d)
    q0 = official.read_state().joint_positions_rad
    T = np.linalg.inv(d.T_world_base) @ official.T_world_tcp()
    T_low = T.copy()
    T_low[2, 3] -= 0.35  # below the table top: the hand must hit something
    q_low = ik.solve(T_low, q0)
    guard = ForceGuard(max_contact_force_n=10.0)
    reports = stream(official, q0, q_low, 3.0, guard=guard)
    assert reports[-1].guard_tripped, "the guard never fired"
    trip = reports[-1]
    assert trip.guard_tripped_at_s is not None and trip.peak_contact_force_n > 10.0
    assert trip.duration_s == pytest.approx(official.control_period_s)
    q_trip = official.read_state().joint_positions_rad
    held = hold(official, 0.3)
    assert np.max(np.abs(held - q_trip)) < 0.02, "the arm kept pushing after the guard fired"
    assert official.read_state().contact_force_n < 50.0


def test_grasp_sets_held_and_ever_held_and_the_wrench_sees_the_load(official):
    d = official.description()
    s = official.scene
    ik = Ik(d)
    T_base_world = np.linalg.inv(d.T_world_base)
    box = s.model.body("cookies_1_main").id
    box_pos = s.data.xpos[box].copy()
    box_x = s.data.xmat[box].reshape(3, 3)[:, 0]  # the box's short side (6 cm)
    q0 = official.read_state().joint_positions_rad
    R_tcp = official.T_world_tcp()[:3, :3]
    finger_axis = s.data.xaxis[s.model.joint("gripper0_finger_joint1").id]
    c_tcp = R_tcp.T @ finger_axis  # closing axis in TCP coordinates
    c_world = np.array([box_x[0], box_x[1], 0.0]) / np.linalg.norm(box_x[:2])
    if np.dot(c_world, finger_axis) < 0:
        c_world = -c_world  # the smaller wrist turn
    a_world = np.array([0.0, 0.0, -1.0])  # approach straight down
    e_a = np.array([0.0, 0.0, 1.0])
    world_axes = np.column_stack([c_world, a_world, np.cross(c_world, a_world)])
    tcp_axes = np.column_stack([c_tcp, e_a, np.cross(c_tcp, e_a)])
    R_grasp = world_axes @ tcp_axes.T
    table_z = box_pos[2] - 0.0095  # the box's origin is at its centre, 19 mm tall
    T_grasp = np.eye(4)
    T_grasp[:3, :3] = R_grasp
    T_grasp[:3, 3] = [box_pos[0], box_pos[1], table_z + 0.010]
    T_above = T_grasp.copy()
    T_above[2, 3] += 0.12
    q_above = ik.solve(T_base_world @ T_above, q0)
    q_grasp = ik.solve(T_base_world @ T_grasp, q_above)
    stream(official, q0, q_above, 1.5, gripper=1.0)
    stream(official, q_above, q_grasp, 1.0, gripper=1.0)
    assert not official.snapshot().ever_held["cookies_1"]
    hold(official, 0.6, gripper=0.0)
    snap = official.snapshot()
    assert snap.held["cookies_1"] and snap.ever_held["cookies_1"]
    assert not snap.held["plate_1"]
    state = official.read_state()
    assert np.all(state.finger_forces_n > 1.0), state.finger_forces_n
    stream(official, q_grasp, q_above, 1.0, gripper=0.0)
    lifted = official.snapshot()
    assert lifted.held["cookies_1"]
    assert lifted.position("cookies_1")[2] > table_z + 0.08, "the box was not lifted"
    # carrying the box: its weight pulls the tool down (base z is world z here)
    weight_n = float(s.model.body_subtreemass[box]) * 9.81
    assert official.read_state().wrench_base[2] == pytest.approx(-weight_n, abs=0.5 * weight_n + 0.02)
    hold(official, 0.5, gripper=1.0)
    released = official.snapshot()
    assert not released.held["cookies_1"] and released.ever_held["cookies_1"]


def test_snapshot_goals_follow_libero_success(official):
    s = official.scene
    snap = official.snapshot()
    assert [g.predicate for g in snap.goals] == ["on"]
    assert snap.goals[0].args == ("akita_black_bowl_1", "plate_1") and snap.goals[0].involves_contact
    assert not snap.goals[0].satisfied and not snap.success
    assert snap.target_object == "akita_black_bowl_1" and snap.destination == "plate_1"
    assert np.allclose(snap.goal_position_m, snap.position("plate_1"))
    assert set(snap.articulated_joints) >= {"wooden_cabinet_1_top_level", "flat_stove_1_button"}
    assert snap.initial_object_poses.keys() == snap.object_poses.keys()
    # put the bowl on the plate: LIBERO's own predicate and success agree
    bowl = s.layout.qpos_adr["akita_black_bowl_1"]
    plate = snap.position("plate_1")
    s.data.qpos[bowl:bowl + 3] = plate + np.array([0.0, 0.0, 0.03])
    s.data.qvel[s.layout.qvel_adr["akita_black_bowl_1"]:][:6] = 0.0
    mujoco.mj_forward(s.model, s.data)
    hold(official, 0.6)
    done = official.snapshot()
    assert done.goals[0].satisfied and done.success and official.check_success()
    # the snapshot survives JSON
    back = SimSnapshot.from_dict(json.loads(json.dumps(done.to_dict())))
    assert back.goals == done.goals and back.success


def test_wide_layout_random_starts_are_seeded_spread_and_collision_free(driver):
    a = driver.reset(seed=101)
    assert a.init_state == -1 and a.extra["layout"] == "wide"
    base_state = catalogue.init_state(TASK, a.extra["base_init_state"])
    assert a.extra["base_init_state"] not in catalogue.HELD_OUT_INIT_STATES
    snap_a = driver.snapshot()
    s = driver.scene
    shifts = []
    base_xy = driver.description().T_world_base[:2, 3]
    for name in ("akita_black_bowl_1", "akita_black_bowl_2", "cookies_1", "plate_1",
                 "glazed_rim_porcelain_ramekin_1"):
        adr = s.layout.qpos_adr[name]
        shift = np.linalg.norm(snap_a.position(name)[:2] - base_state[1 + adr:3 + adr])
        shifts.append(shift)
        assert shift < 0.15 + 0.02
        assert 0.3 <= np.linalg.norm(snap_a.position(name)[:2] - base_xy) <= 0.8
    assert max(shifts) > 0.03, "nothing moved"
    # at rest on the table, touching neither each other nor the fixtures or the robot
    owner = s.layout.geom_owner
    for i in range(s.data.ncon):
        c = s.data.contact[i]
        o1, o2 = owner[c.geom1], owner[c.geom2]
        if o1 >= 0 and o2 >= 0 and o1 != o2:
            pytest.fail("two objects touch after a random reset")
        fixture = s.layout.fixture_geom_mask
        if (o1 >= 0 and fixture[c.geom2]) or (o2 >= 0 and fixture[c.geom1]):
            pytest.fail("an object touches a fixture after a random reset")
    assert not driver.check_success()
    driver.reset(seed=202)
    other = driver.snapshot()
    driver.reset(seed=101)
    again = driver.snapshot()
    for name in snap_a.object_poses:
        assert np.allclose(again.position(name), snap_a.position(name), atol=1e-9)
    assert any(not np.allclose(other.position(n), snap_a.position(n), atol=1e-3) for n in snap_a.object_poses)


def test_appearance_randomisation_changes_images_only_and_restores(official):
    s = official.scene
    nominal = official.capture(("agentview",))["agentview"]
    rng = np.random.default_rng(3)
    flags = AppearanceFlags(lighting=True, camera_pose=True, materials=True)
    applied = s.appearance.apply(s.model, flags, rng)
    assert applied["camera_rotation_rad"] <= flags.rotation_rad
    mujoco.mj_forward(s.model, s.data)
    perturbed = official.capture(("agentview",))["agentview"]
    moved = np.linalg.norm(perturbed.T_base_camera[:3, 3] - nominal.T_base_camera[:3, 3])
    assert 0 < moved <= np.sqrt(3) * flags.translation_m
    assert np.mean(np.abs(perturbed.rgb.astype(float) - nominal.rgb)) > 2.0
    s.appearance.restore(s.model)
    mujoco.mj_forward(s.model, s.data)
    restored = official.capture(("agentview",))["agentview"]
    assert np.array_equal(restored.rgb, nominal.rgb)
    assert np.allclose(restored.T_base_camera, nominal.T_base_camera)
