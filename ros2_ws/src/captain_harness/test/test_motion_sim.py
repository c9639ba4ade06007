"""Guarded motion in the MuJoCo tabletop: accuracy, contact stops, carrying, recovery,
preview and cancellation. Poses are checked against the simulator's own grip site."""

from __future__ import annotations

import math
import re
import threading

import mujoco
import numpy as np
import pytest

from captain_backends.core.tabletop.driver import TabletopDriver
from captain_harness.core.api import RobotAPI
from captain_harness.core.budget import Budget, BudgetLimits
from captain_harness.core.episode.gate import GateConfig, scene_changes
from captain_harness.core.geometry import (
    quat_multiply,
    quat_to_matrix,
    rotation_about_axis,
    rotation_angle_rad,
)
from captain_harness.core.motion import MotionPrimitives

pytestmark = pytest.mark.sim

DOWN = np.array([0.0, 2**-0.5, 2**-0.5, 0.0])
NUMBER = r"-?[0-9.]+(?:e-?\d+)?"


@pytest.fixture(scope="module")
def driver():
    d = TabletopDriver(task="pick_cube", seed=3, image_size_px=64)
    d.configure()
    d.activate()
    yield d
    d.shutdown()


@pytest.fixture(scope="module")
def primitives(driver) -> MotionPrimitives:
    return MotionPrimitives(driver)


@pytest.fixture
def sim(driver, primitives):
    driver.reset(seed=3)
    primitives.reset()
    api = RobotAPI(budget=Budget(BudgetLimits(max_physical_actions=100)))
    primitives.register(api)
    return api, primitives, driver


def table_z(driver) -> float:
    return float(driver.task_info().extra["table_top_z_m"])


def object_base(driver, name: str) -> tuple[np.ndarray, float]:
    """(position in the base frame, yaw) of an object, from privileged state (test only)."""
    pose = driver.snapshot().object_poses[name]
    T_base_world = np.linalg.inv(driver.description().T_world_base)
    p = T_base_world[:3, :3] @ np.array(pose.position_m) + T_base_world[:3, 3]
    w, x, y, z = pose.quaternion_wxyz
    return p, math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def robot_table_gap_m(driver) -> float:
    """Signed distance between the robot's collision geoms and the table (MuJoCo, test only)."""
    model, data = driver.mj_model, driver.mj_data
    base = model.body("robot0_base").id

    def robot(g: int) -> bool:
        b = int(model.geom_bodyid[g])
        while b:
            if b == base:
                return True
            b = int(model.body_parentid[b])
        return False

    table = [g for g in range(model.ngeom) if model.body(model.geom_bodyid[g]).name == "table"]
    hand = [g for g in range(model.ngeom) if robot(g) and (model.geom_contype[g] or model.geom_conaffinity[g])]
    return min(mujoco.mj_geomDistance(model, data, a, b, 0.1, None) for a in hand for b in table)


def free_spot(driver) -> np.ndarray:
    """An (x, y) on the table at least 12 cm from every object."""
    objs = [object_base(driver, n)[0][:2] for n in driver.snapshot().object_poses]
    for x in np.linspace(0.35, 0.65, 7):
        for y in np.linspace(-0.3, 0.3, 13):
            if all(np.linalg.norm(np.array([x, y]) - o) > 0.12 for o in objs):
                return np.array([x, y])
    raise AssertionError("no free spot on the table")


def test_sweeps_reach_random_poses_within_5mm_and_3deg(sim) -> None:
    api, _, driver = sim
    rng = np.random.default_rng(0)
    tz = table_z(driver)
    for _ in range(6):
        p = rng.uniform([0.35, -0.25, tz + 0.12], [0.65, 0.25, tz + 0.35])
        q = quat_multiply(rotation_about_axis([0, 0, 1], rng.uniform(-1.2, 1.2)), DOWN)
        q = quat_multiply(rotation_about_axis(np.append(rng.normal(size=2), 0.0), rng.uniform(0, 0.3)), q)
        out = api.call("move_to", (list(p), list(q)), {"speed": 0.15, "angular": 1.0})
        assert out.result["success"], out.result["message"]
        T = driver.T_base_tcp()
        assert np.linalg.norm(T[:3, 3] - p) < 0.005
        assert math.degrees(rotation_angle_rad(T[:3, :3], quat_to_matrix(q))) < 3.0


def test_guarded_descent_stops_at_first_contact_with_the_table(sim) -> None:
    api, prims, driver = sim
    tz = table_z(driver)
    xy = free_spot(driver)
    assert api.call("move_to", ([*xy, tz + 0.08], list(DOWN)), {"speed": 0.15}).result["success"]
    out = api.call("move_to", ([*xy, tz - 0.05], list(DOWN)), {"speed": 0.04})
    r = out.result
    assert r["failure_category"] == "contact" and r["executed"]
    assert re.fullmatch(
        rf"move_to: FAILED contact; executed_distance_m={NUMBER} max_observed_force_n={NUMBER}", out.receipt
    ), out.receipt
    v = r["value"]
    assert v["stopped_reason"] == "contact"
    assert prims.config.contact_threshold_n < v["max_observed_force_n"] < prims.config.emergency_force_n
    # The descent is vertical onto a rigid table: how far the hand went past its first
    # contact is how deep it is in the table now (or how far above it, after a rebound).
    gap = robot_table_gap_m(driver)
    assert abs(gap) < 0.01
    stop = driver.T_base_tcp()[:3, 3]
    traj = api.call("read_motion_trajectory", (), {"max_samples": 1000}).result["value"]
    assert traj["stopped_reason"] == "contact"
    assert np.linalg.norm(np.asarray(traj["end_position_m"]) - stop) < 0.002
    # the arm is held there: time passes, nothing moves
    for _ in range(30):
        driver.advance()
    assert np.linalg.norm(driver.T_base_tcp()[:3, 3] - stop) < 0.002


def test_manipulation_push_into_the_table_trips_the_emergency_limit(sim) -> None:
    api, prims, driver = sim
    tz = table_z(driver)
    xy = free_spot(driver)
    api.call("move_to", ([*xy, tz + 0.05], list(DOWN)), {"speed": 0.15})
    out = api.call("move_to", ([*xy, tz - 0.10], list(DOWN)), {"speed": 0.05, "mode": "manipulation"})
    assert out.result["failure_category"] == "controller_rejected"
    assert re.fullmatch(
        rf"move_to: FAILED controller_rejected; emergency_limit; max_observed_force_n={NUMBER}", out.receipt
    ), out.receipt
    assert out.result["value"]["max_observed_force_n"] > prims.config.emergency_force_n
    # recover backs off along the descent
    stop = driver.T_base_tcp()[:3, 3]
    args = {"max_distance_m": 0.03, "max_duration_s": 8.0}
    assert api.call("preview_motion", ("recover", args)).result["success"]
    rec = api.call("recover", (), args)
    assert rec.result["success"], rec.result["message"]
    back = driver.T_base_tcp()[:3, 3]
    assert np.linalg.norm(back[:2] - stop[:2]) < 0.003  # straight back up the same line
    assert back[2] - stop[2] == pytest.approx(0.03, abs=0.005)


def test_manipulation_lift_carries_a_grasped_cube(sim) -> None:
    api, _, driver = sim
    cube, yaw = object_base(driver, "red_cube")
    q = quat_multiply(rotation_about_axis([0, 0, 1], yaw), DOWN)
    assert api.call("move_to", (list(cube + np.array([0, 0, 0.10])), list(q)), {"speed": 0.15}).result["success"]
    descent = api.call("move_to", (list(cube + np.array([0, 0, 0.005])), list(q)), {"speed": 0.05})
    assert descent.result["success"], descent.receipt
    closed = api.call("move_to", (), {"gripper": "close"})
    assert closed.result["value"]["held"] is True, closed.receipt
    z0 = object_base(driver, "red_cube")[0][2]
    squeeze_n = driver.read_state().contact_force_n
    lift = api.call("move_to", (list(cube + np.array([0, 0, 0.12])), list(q)), {"speed": 0.05, "mode": "manipulation"})
    assert lift.result["success"], lift.receipt
    # the fingers' squeeze on the held cube is not an external force: the guard saw none of it
    assert squeeze_n > 10.0
    assert lift.result["value"]["max_observed_force_n"] < 1.0, lift.receipt
    assert object_base(driver, "red_cube")[0][2] - z0 > 0.10
    assert driver.snapshot().held["red_cube"]
    assert api.call("gripper_state").result["value"]["held"] is True
    # release: open, back away; the cube falls back to the table
    released = api.call("release", (), {"retreat_m": 0.05})
    assert released.result["success"], released.receipt
    assert re.fullmatch(
        rf"release: ok; gripper_open_fraction={NUMBER}->{NUMBER} executed_distance_m={NUMBER} "
        rf"max_observed_force_n={NUMBER}",
        released.receipt,
    ), released.receipt
    assert not driver.snapshot().held["red_cube"]


def test_preview_predicts_move_to_in_free_space(sim) -> None:
    api, _, driver = sim
    tz = table_z(driver)
    for target, q in [
        ((0.55, 0.2, tz + 0.2), DOWN),
        ((0.4, -0.15, tz + 0.15), np.array([0, math.cos(math.pi / 8), math.sin(math.pi / 8), 0])),
    ]:
        args = {"position": list(target), "quaternion": list(q), "speed": 0.1}
        pr = api.call("preview_motion", ("move_to", args)).result
        out = api.call("move_to", (), args).result
        assert pr["value"]["stopped_reason"] == out["value"]["stopped_reason"] == "target_reached"
        assert np.linalg.norm(np.subtract(pr["value"]["predicted_position_m"], driver.T_base_tcp()[:3, 3])) < 0.005
        assert out["value"]["duration_s"] == pytest.approx(pr["value"]["duration_s"], abs=0.3)


def test_cancel_from_another_thread_leaves_the_arm_holding(sim) -> None:
    api, prims, driver = sim
    tz = table_z(driver)
    api.call("move_to", ([0.4, -0.25, tz + 0.2],), {"speed": 0.15})
    result: dict = {}

    def run() -> None:
        result["out"] = api.call("move_to", ([0.4, 0.25, tz + 0.2],), {"speed": 0.05})

    worker = threading.Thread(target=run)
    worker.start()
    sent = False
    for _ in range(400):  # wait until the sweep is under way, then cancel
        worker.join(timeout=0.01)
        if (
            driver.read_state().joint_velocities_rad_s.any()
            and np.abs(driver.read_state().joint_velocities_rad_s).max() > 0.02
        ):
            sent = prims.request_cancel()
            break
    worker.join(timeout=60)
    assert sent and not worker.is_alive()
    r = result["out"].result
    assert r["value"]["stopped_reason"] == "cancelled" and r["failure_category"] == "cancelled"
    assert r["value"]["progress"] < 1.0
    here = driver.T_base_tcp()[:3, 3]
    for _ in range(50):
        driver.advance()
    assert np.linalg.norm(driver.T_base_tcp()[:3, 3] - here) < 0.002


def test_guarded_lift_off_after_pressing_and_an_empty_close(sim) -> None:
    """A guarded motion that starts pressing on the table may leave it (its guard starts
    above the pressing force and tightens as the force drops); closing on nothing is
    not a grasp."""
    api, prims, driver = sim
    tz = table_z(driver)
    xy = free_spot(driver)
    api.call("move_to", ([*xy, tz + 0.05], list(DOWN)), {"speed": 0.15})
    assert api.call("move_to", ([*xy, tz - 0.05], list(DOWN)), {"speed": 0.02}).result["failure_category"] == "contact"
    z_contact = driver.T_base_tcp()[2, 3]
    pressed = api.call("move_to", ([*xy, z_contact - 0.003], list(DOWN)), {"speed": 0.01, "mode": "manipulation"})
    assert pressed.result["value"]["max_observed_force_n"] > 2 * prims.config.contact_threshold_n
    lift = api.call("move_to", ([*xy, tz + 0.05], list(DOWN)), {"speed": 0.05})
    assert lift.result["success"], lift.receipt
    closed = api.call("move_to", (), {"gripper": "close"})
    assert closed.result["success"] and closed.result["value"]["held"] is False
    assert closed.result["value"]["gripper_open_fraction_after"] < prims.config.held_min_open_fraction


def test_the_gate_tells_a_free_move_of_the_empty_hand_from_moves_that_change_the_scene(sim) -> None:
    """The completion gate keeps measurements across a move of the empty hand that touched
    nothing (``gate.scene_changes``); it reads that from these results, so a contact stop, a
    grasp and a carry in the simulator must each count as a change, the free move not."""
    api, _, driver = sim
    tz = table_z(driver)
    xy = free_spot(driver)
    cube, yaw = object_base(driver, "red_cube")
    q = list(quat_multiply(rotation_about_axis([0, 0, 1], yaw), DOWN))
    calls = [
        api.call("move_to", ([*xy, tz + 0.08], list(DOWN)), {"speed": 0.15}),  # free
        api.call("move_to", ([*xy, tz - 0.05], list(DOWN)), {"speed": 0.04}),  # onto the table
        api.call("recover", (), {"max_distance_m": 0.03, "max_duration_s": 8.0}),
        api.call("move_to", (list(cube + np.array([0, 0, 0.10])), q), {"speed": 0.15}),  # free
        api.call("move_to", (list(cube + np.array([0, 0, 0.005])), q), {"speed": 0.05}),  # free, around the cube
        api.call("move_to", (), {"gripper": "close"}),
        api.call("move_to", (list(cube + np.array([0, 0, 0.12])), q), {"speed": 0.05, "mode": "manipulation"}),
    ]
    assert calls[1].result["value"]["stopped_reason"] == "contact" and calls[5].result["value"]["held"] is True
    free = [r.result["value"]["max_observed_force_n"] for r in (calls[0], calls[3], calls[4])]
    changes = [r.index for r in scene_changes(api.log, GateConfig().free_motion_max_force_n)]
    physical = [r.index for r in api.log if r.physical and r.result.get("executed")]
    assert changes == [physical[i] for i in (1, 2, 5, 6)], (changes, free)
