"""The motion and state primitives through the policy boundary, over the mock driver
(commands mirrored into the state, no contacts)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from captain_backends.core.mock import MockDriver
from captain_harness.core.api import RobotAPI
from captain_harness.core.budget import Budget, BudgetLimits
from captain_harness.core.geometry import quat_to_matrix
from captain_harness.core.motion import MotionPrimitives
from captain_harness.core.results import RESULT_KEYS

DOWN = [0.0, 2**-0.5, 2**-0.5, 0.0]
NUMBER = r"-?[0-9.]+(?:e-?\d+)?"


@pytest.fixture(scope="module")
def driver():
    d = MockDriver(image_size_px=64)
    d.configure()
    d.activate()
    yield d
    d.shutdown()


@pytest.fixture(scope="module")
def primitives(driver) -> MotionPrimitives:
    return MotionPrimitives(driver)


@pytest.fixture
def setup(driver, primitives):
    driver.reset()
    primitives.reset()
    api = RobotAPI(budget=Budget(BudgetLimits(max_physical_actions=40)))
    primitives.register(api)
    return api, primitives, driver


def tcp_world_from_snapshot(driver) -> np.ndarray:
    """The mock's own MuJoCo forward kinematics of the grip site, in the base frame."""
    p = np.append(np.array(driver.snapshot().ee_position_m), 1.0)
    return (np.linalg.inv(driver.description().T_world_base) @ p)[:3]


def test_registered_names_and_physical_flags(setup) -> None:
    api, _, _ = setup
    assert set(api.names()) == {
        "move_to",
        "hold",
        "recover",
        "release",
        "check_motion",
        "preview_motion",
        "get_robot_state",
        "gripper_state",
        "robot_geometry",
        "read_motion_trajectory",
        "transform_pose",
    }
    physical = {n for n, s in api.specs.items() if s.physical}
    assert physical == {"move_to", "hold", "recover", "release"}


def test_move_to_reaches_the_pose_with_the_fixed_receipt(setup) -> None:
    api, _, driver = setup
    start = api.call("get_robot_state").result["value"]["end_effector_position_m"]
    target = [0.5, 0.12, 0.05]
    out = api.call("move_to", (target, DOWN), {"speed": 0.1})
    r = out.result
    assert tuple(r) == RESULT_KEYS
    assert r["success"] and r["executed"] and r["failure_category"] is None
    assert re.fullmatch(
        rf"move_to: ok; stopped_reason=target_reached executed_distance_m={NUMBER} "
        rf"max_observed_force_n=0",
        out.receipt,
    ), out.receipt
    v = r["value"]
    assert v["executed_distance_m"] == pytest.approx(np.linalg.norm(np.subtract(target, start)), rel=0.02)
    assert np.linalg.norm(tcp_world_from_snapshot(driver) - target) < 0.001
    R = quat_to_matrix(v["end_effector_quaternion_wxyz"])
    assert math.degrees(math.acos(np.clip((np.trace(R.T @ quat_to_matrix(DOWN)) - 1) / 2, -1, 1))) < 0.5
    assert r["budget"]["physical_actions_used"] == 1


def test_jaw_commands_report_the_opening_before_and_after(setup) -> None:
    api, _, _ = setup
    closed = api.call("move_to", (), {"gripper": "close"})
    assert re.fullmatch(rf"move_to: ok; gripper_open_fraction=1->{NUMBER} held=false", closed.receipt), closed.receipt
    assert closed.result["value"]["gripper_open_fraction_after"] < 0.01
    opened = api.call("move_to", (), {"gripper": "open"})
    assert re.fullmatch(rf"move_to: ok; gripper_open_fraction={NUMBER}->1", opened.receipt), opened.receipt
    state = api.call("gripper_state").result["value"]
    assert state["last_command"] == "open" and state["held"] is False


def test_hold_receipt_and_time(setup) -> None:
    api, _, driver = setup
    t0 = driver.read_state().time_s
    out = api.call("hold", (), {"duration_s": 0.5})
    assert out.receipt == "hold: ok"
    assert driver.read_state().time_s - t0 == pytest.approx(0.5, abs=0.011)
    assert out.result["value"]["drift_m"] < 1e-9


BAD_CALLS = [
    ("move_to", (), {}),
    ("move_to", ("abc", DOWN), {}),
    ("move_to", ([0.5, 0.0, float("nan")], DOWN), {}),
    ("move_to", ([0.5, 0.0, float("inf")], DOWN), {}),
    ("move_to", ([0.5, 0.0], DOWN), {}),
    ("move_to", ({"x": 0.5}, DOWN), {}),
    ("move_to", ([0.5, 0.0, 0.1], [0, 0, 0, 0]), {}),
    ("move_to", ([0.5, 0.0, 0.1], [0, 1, 1, 0]), {}),
    ("move_to", ([0.5, 0.0, 0.1], [0, 0.7, 0.7]), {}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN), {"mode": "fast"}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN), {"mode": 3}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN), {"speed": -0.1}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN), {"speed": "slow"}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN), {"speed": True}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN), {"speed": 5.0}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN), {"duration": 0.0}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN), {"angular": float("nan")}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN), {"velocity": 0.1}),
    ("move_to", (), {"gripper": "half"}),
    ("move_to", (), {"gripper": 1}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN), {"gripper": "open"}),
    ("move_to", ([0.5, 0.0, 0.1], DOWN, 0.1, 5.0, 0.5, "guarded", "open", "extra"), {}),
    ("hold", (), {"duration_s": -1.0}),
    ("hold", (), {"duration_s": "1"}),
    ("hold", (), {"duration_s": 1e6}),
    ("recover", (), {"max_distance_m": -0.1}),
    ("recover", (), {"max_distance_m": float("nan")}),
    ("recover", (), {"max_duration_s": 0.0}),
    ("release", (), {"retreat_m": -1}),
    ("check_motion", (), {}),
    ("check_motion", ([0.5, 0.0, 0.1], "down"), {}),
    ("preview_motion", ("fly", {}), {}),
    ("preview_motion", ("move_to", "position=[0.5,0,0.1]"), {}),
    ("preview_motion", ("move_to", {"bogus": 1}), {}),
    ("preview_motion", ("move_to", {"position": [0.5, 0.0, None], "quaternion": DOWN}), {}),
    ("preview_motion", (None, None), {}),
    ("transform_pose", ([0.0, 0.0],), {}),
    ("transform_pose", ([0.0, 0.0, 0.1],), {"from_frame": "camera"}),
    ("read_motion_trajectory", (), {"max_samples": 1}),
    ("read_motion_trajectory", (), {"max_samples": 2.5}),
    ("get_robot_state", (1,), {}),
    ("no_such_call", (), {}),
]


@pytest.mark.parametrize(("name", "args", "kwargs"), BAD_CALLS)
def test_bad_arguments_never_raise_and_say_what_to_change(setup, name, args, kwargs) -> None:
    api, _, driver = setup
    before = driver.read_state().joint_positions_rad.copy()
    out = api.call(name, args, kwargs)
    r = out.result
    assert r["success"] is False and r["executed"] is False
    assert r["failure_category"] == "invalid_argument", (r["failure_category"], r["message"])
    assert len(r["message"]) > 20
    assert out.receipt.startswith(f"{name}: FAILED invalid_argument") and len(out.receipt) <= 300
    assert r["budget"]["physical_actions_used"] == 0
    assert np.allclose(driver.read_state().joint_positions_rad, before)


@pytest.mark.parametrize(
    ("target", "category"),
    [
        ([0.5, 0.0, -0.6], "workspace_limit"),
        ([2.0, 0.0, 0.3], "workspace_limit"),
        ([0.95, 0.6, 0.9], "ik_failed"),
        ([0.05, 0.0, 0.3], "joint_limit"),
    ],
)
def test_unreachable_targets_are_refused_before_moving(setup, target, category) -> None:
    api, _, driver = setup
    before = driver.read_state().joint_positions_rad.copy()
    preview = api.call("preview_motion", ("move_to", {"position": target, "quaternion": DOWN}))
    out = api.call("move_to", (target, DOWN))
    for r in (preview.result, out.result):
        assert not r["success"] and r["failure_category"] == category and not r["executed"]
    assert re.fullmatch(rf"move_to: FAILED {category}(; path_fraction={NUMBER})?", out.receipt), out.receipt
    assert np.allclose(driver.read_state().joint_positions_rad, before)


def test_preview_predicts_move_to(setup) -> None:
    api, _, _ = setup
    args = {
        "position": [0.42, -0.15, 0.12],
        "quaternion": [0, math.cos(math.pi / 8), math.sin(math.pi / 8), 0],
        "speed": 0.06,
    }
    pr = api.call("preview_motion", ("move_to", args)).result
    assert pr["success"] and not pr["executed"]
    out = api.call("move_to", (), args).result
    assert out["value"]["stopped_reason"] == pr["value"]["stopped_reason"] == "target_reached"
    assert (
        np.linalg.norm(np.subtract(out["value"]["end_effector_position_m"], pr["value"]["predicted_position_m"]))
        < 0.001
    )
    assert out["value"]["duration_s"] == pytest.approx(pr["value"]["duration_s"], abs=0.05)
    assert pr["budget"]["physical_actions_used"] == 0


def test_recover_retraces_and_continues_backwards(setup) -> None:
    api, _, _ = setup
    nothing = api.call("recover", (), {"max_distance_m": 0.02}).result
    assert nothing["failure_category"] == "nothing_to_recover" and not nothing["executed"]
    p0 = np.array([0.45, 0.0, 0.15])
    api.call("move_to", (list(p0), DOWN))
    api.call("move_to", (list(p0 + np.array([0, 0, -0.1])), DOWN), {"speed": 0.05})
    api.call("move_to", (), {"gripper": "close"})  # jaw commands do not replace the path
    args = {"max_distance_m": 0.04, "max_duration_s": 8.0}
    pr = api.call("preview_motion", ("recover", args))
    assert pr.result["success"]
    out = api.call("recover", (), args)
    assert re.fullmatch(
        rf"recover: ok; stopped_reason=target_reached executed_distance_m={NUMBER} "
        rf"max_observed_force_n=0",
        out.receipt,
    )
    v = out.result["value"]
    assert np.allclose(v["end_effector_position_m"], p0 + np.array([0, 0, -0.06]), atol=0.001)
    assert np.allclose(v["end_effector_position_m"], pr.result["value"]["predicted_position_m"], atol=0.001)
    assert v["remaining_path_m"] == pytest.approx(0.06, abs=0.002)
    again = api.call("recover", (), {"max_distance_m": 0.2}).result
    assert np.allclose(again["value"]["end_effector_position_m"], p0, atol=0.001)
    empty = api.call("recover", (), {"max_distance_m": 0.01}).result
    assert empty["failure_category"] == "nothing_to_recover"


def test_cancel_stops_the_sweep_and_holds(setup) -> None:
    api, prims, driver = setup
    polls = {"n": 0}

    def cancel_after_50_periods() -> bool:
        polls["n"] += 1
        return polls["n"] > 50

    with prims.cancel_scope(cancel_after_50_periods):
        out = api.call("move_to", ([0.45, -0.2, 0.1], DOWN), {"speed": 0.05})
    r = out.result
    assert not r["success"] and r["executed"] and r["failure_category"] == "cancelled"
    assert r["value"]["stopped_reason"] == "cancelled" and 0.0 < r["value"]["progress"] < 0.5
    assert re.fullmatch(
        rf"move_to: FAILED cancelled; executed_distance_m={NUMBER} max_observed_force_n=0", out.receipt
    ), out.receipt
    held = driver.read_state().joint_positions_rad.copy()
    for _ in range(20):
        driver.advance()
    assert np.allclose(driver.read_state().joint_positions_rad, held)
    assert prims.request_cancel() is False  # nothing running now


def test_budget_exhaustion_refuses_motion(driver, primitives) -> None:
    driver.reset()
    prims = primitives
    prims.reset()
    api = RobotAPI(budget=Budget(BudgetLimits(max_physical_actions=1)))
    prims.register(api)
    assert api.call("hold", (), {"duration_s": 0.1}).result["success"]
    before = driver.read_state().joint_positions_rad.copy()
    out = api.call("move_to", ([0.5, 0.0, 0.1], DOWN))
    assert out.result["failure_category"] == "budget_exhausted" and not out.result["executed"]
    assert np.allclose(driver.read_state().joint_positions_rad, before)
    assert api.call("get_robot_state").result["success"]  # read-only calls still work


def test_state_calls(setup) -> None:
    api, _, driver = setup
    api.call("move_to", ([0.5, 0.1, 0.1], DOWN))
    state = api.call("get_robot_state")
    v = state.result["value"]
    assert np.linalg.norm(np.subtract(v["end_effector_position_m"], tcp_world_from_snapshot(driver))) < 1e-6
    assert state.receipt.startswith("get_robot_state: ok; end_effector_position_m=[0.5,0.1,0.1]")
    traj = api.call("read_motion_trajectory", (), {"max_samples": 10}).result["value"]
    assert traj["call"] == "move_to" and len(traj["samples"]["time_s"]) == 10
    assert np.allclose(traj["end_position_m"], [0.5, 0.1, 0.1], atol=0.001)
    geo = api.call("robot_geometry").result["value"]
    assert geo["tcp_frame"]["top_down_quaternion_wxyz"] == pytest.approx(DOWN)
    assert geo["approximate_reach_m"] > 0.8 and geo["control_period_s"] == 0.01
    ahead = api.call("transform_pose", ([0.0, 0.0, 0.05],), {"from_frame": "tcp", "to_frame": "base"})
    assert np.allclose(ahead.result["value"]["position_m"], [0.5, 0.1, 0.05], atol=0.001)  # TCP z points down
    back = api.call("transform_pose", (ahead.result["value"]["position_m"],), {"from_frame": "base", "to_frame": "tcp"})
    assert np.allclose(back.result["value"]["position_m"], [0, 0, 0.05], atol=1e-9)
    check = api.call("check_motion", ([0.4, -0.2, 0.2], DOWN), {"speed": 0.1}).result
    assert check["success"] and check["value"]["reachable"] and check["value"]["path_ok"]


class StallingDriver(MockDriver):
    """The mock arm whose ``advance`` fails with a plain exception after a few periods (a
    driver bug, not a ``BackendError``); it records every command it accepts."""

    def __init__(self, fail_after: int) -> None:
        super().__init__(image_size_px=64)
        self.fail_after = fail_after
        self.sent: list[np.ndarray] = []
        self.sent_before_fault: int | None = None

    def send_command(self, command):
        out = super().send_command(command)
        self.sent.append(np.asarray(out.joint_positions_rad, float))
        return out

    def advance(self, guard=None):
        self.fail_after -= 1
        if self.fail_after < 0:
            self.sent_before_fault = len(self.sent)
            raise RuntimeError("encoder overflow")
        return super().advance(guard)


def test_a_fault_inside_a_motion_holds_the_arm_and_the_message_says_so() -> None:
    driver = StallingDriver(fail_after=5)
    driver.configure()
    driver.activate()
    try:
        prims = MotionPrimitives(driver)
        api = RobotAPI()
        prims.register(api)
        start = np.asarray(driver.read_state().joint_positions_rad, float)
        out = api.call("move_to", (), {"position": [0.4, 0.1, 0.3], "quaternion": [0, 2**-0.5, 2**-0.5, 0]})
        assert out.result["failure_category"] == "internal_error"
        assert "RuntimeError: encoder overflow" in out.result["message"]
        assert "the arm was commanded to hold where it is" in out.result["message"]
        # one command followed the fault, the hold: the joints where the arm stopped, after it had moved
        here = np.asarray(driver.read_state().joint_positions_rad, float)
        assert driver.sent_before_fault is not None and len(driver.sent) == driver.sent_before_fault + 1
        assert np.allclose(driver.sent[-1], here) and not np.allclose(here, start)
        # with the driver inactive nothing is commanded, and the message says that instead
        n = len(driver.sent)
        driver.deactivate()
        assert prims.hold_after_fault() == "the driver is inactive, so no hold was commanded"
        assert len(driver.sent) == n
    finally:
        driver.shutdown()
