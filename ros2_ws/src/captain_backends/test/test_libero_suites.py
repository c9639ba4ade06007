"""The driver across LIBERO's scene types (floor, tabletop, kitchen, living room, study)
and LIBERO-PRO suites: official and wide-layout resets, cameras, goals, articulated
fixtures. One driver switches tasks (each builds its LIBERO environment: seconds)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from _libero_helpers import hold, stream

from captain_backends.core.libero import LiberoDriver, catalogue

pytestmark = [pytest.mark.sim, pytest.mark.slow]

TASKS = ("libero_object/0", "libero_goal/0", "libero_10/5", "libero_10/9", "libero_spatial_swap/0",
         "libero_goal_lan/7")


@pytest.fixture(scope="module")
def driver():
    drv = LiberoDriver(task=TASKS[0], init_state=11, random_layout=True)
    drv.configure()
    drv.activate()
    yield drv
    drv.shutdown()


@pytest.mark.parametrize("task_id", TASKS)
def test_task_loads_resets_renders_and_moves(driver, task_id):
    info = driver.load_task(task_id, init_state=11)
    task = catalogue.get_task(task_id)
    assert info.instruction == task.instruction and info.suite == task.suite
    assert not driver.check_success()
    snap = driver.snapshot()
    assert len(snap.goals) == len(info.goals) >= 1
    assert not snap.success
    for goal in snap.goals:
        assert goal.involves_joint == (goal.predicate in ("open", "close", "turnon", "turnoff"))
    if any(g.involves_joint for g in snap.goals):
        assert snap.articulated_joints, "articulated goal without articulated joints"
    frames = driver.capture()
    for frame in frames.values():
        assert frame.rgb.std() > 10
        assert (frame.depth_m > 0).mean() > 0.9

    wide = driver.reset(seed=5)
    assert wide.init_state == -1 and wide.extra["layout"] == "wide"
    moved = wide.extra["moved_objects"]
    assert moved, "no object was re-placed"
    base = catalogue.init_state(task, wide.extra["base_init_state"])
    snap = driver.snapshot()
    shifts = []
    for name in moved:
        adr = driver.scene.layout.qpos_adr[name]
        shifts.append(np.linalg.norm(snap.position(name)[:2] - base[1 + adr:3 + adr]))
    assert max(shifts) > 0.02 and max(shifts) < 0.15 + 0.02
    assert not driver.check_success()

    q0 = driver.read_state().joint_positions_rad
    target = q0 + np.array([0.15, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3])
    stream(driver, q0, target, 0.6)
    hold(driver, 0.2)
    assert np.max(np.abs(driver.read_state().joint_positions_rad - target)) < 1e-3


def test_goal_predicates_of_an_articulated_task(driver):
    driver.load_task("libero_goal/0", init_state=11)
    snap = driver.snapshot()
    assert [g.predicate for g in snap.goals] == ["open"]
    goal = snap.goals[0]
    assert goal.involves_joint and not goal.satisfied
    assert snap.target_object == goal.args[0] and snap.destination == ""
    assert snap.goal_position_m is not None
    # open the middle drawer by its joint: LIBERO's predicate and success follow
    s = driver.scene
    adr = s.articulated["wooden_cabinet_1_middle_level"]
    lo = s.model.jnt_range[s.model.joint("wooden_cabinet_1_middle_level").id][0]
    s.data.qpos[adr] = lo  # fully out
    mujoco.mj_forward(s.model, s.data)
    hold(driver, 0.1)
    opened = driver.snapshot()
    assert opened.goals[0].satisfied and opened.success and driver.check_success()
    assert opened.articulated_joints["wooden_cabinet_1_middle_level"] != snap.articulated_joints[
        "wooden_cabinet_1_middle_level"]


@pytest.mark.parametrize("task_id", ["libero_goal/0", "libero_goal/7", "libero_10/3", "libero_10/9"])
def test_joint_goal_positions_satisfy_liberos_own_predicate(driver, task_id):
    """The snapshot's ``articulated_joint_goals`` name the joint of every joint predicate
    and a position LIBERO accepts: setting the joint there makes that predicate hold."""
    driver.load_task(task_id, init_state=11)
    snap = driver.snapshot()
    joint_goals = [(i, g) for i, g in enumerate(snap.goals) if g.involves_joint]
    assert joint_goals and snap.articulated_joint_goals
    assert set(snap.articulated_joint_goals) <= set(snap.articulated_joints)
    assert not any(snap.goals[i].satisfied for i, _ in joint_goals)
    s = driver.scene
    for name, value in snap.articulated_joint_goals.items():
        s.data.qpos[s.articulated[name]] = value
        s.data.qvel[s.model.jnt_dofadr[s.model.joint(name).id]] = 0.0
    mujoco.mj_forward(s.model, s.data)
    after = driver.snapshot()
    for i, goal in joint_goals:
        assert after.goals[i].satisfied, f"{goal.predicate}{goal.args} not satisfied at {snap.articulated_joint_goals}"


@pytest.mark.parametrize(("task_id", "region", "obj"), [
    ("libero_goal/5", "main_table_stove_front_region", "plate_1"),
    ("libero_10/6", "living_room_table_plate_right_region", "chocolate_pudding_1"),
])
def test_table_regions_are_the_rectangles_liberos_own_predicate_checks(driver, task_id, region, obj):
    """``extra["table_regions"]`` states a goal's region of the table in the base frame:
    the object's origin moved to the stated centre meets LIBERO's predicate, 1 cm beyond
    an edge does not. Tasks without one state none."""
    info = driver.load_task(task_id, init_state=11)
    regions = info.extra["table_regions"]
    assert set(regions) == {region}
    stated = regions[region]
    assert stated["yaw_rad"] == 0.0 and min(stated["half_xy_m"]) >= 0.03
    s = driver.scene
    index = next(i for i, g in enumerate(driver.snapshot().goals) if g.args == (obj, region))
    T_world_base = driver.description().T_world_base
    adr = s.layout.qpos_adr[obj]
    z = float(s.data.qpos[adr + 2])
    for dx, expected in ((0.0, True), (stated["half_xy_m"][0] - 0.005, True), (stated["half_xy_m"][0] + 0.01, False)):
        base = np.array([stated["center_xy_m"][0] + dx, stated["center_xy_m"][1], 0.0, 1.0])
        s.data.qpos[adr:adr + 2] = (T_world_base @ base)[:2]
        s.data.qpos[adr + 2] = z
        mujoco.mj_forward(s.model, s.data)
        assert driver.snapshot().goals[index].satisfied is expected, (dx, stated)
    assert "table_regions" not in driver.load_task("libero_goal/0", init_state=11).extra
