"""The 36 critic features on hand-built snapshots (values computed by hand)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from captain_backends.core.snapshot import GoalPredicate, ObjectPose, SimSnapshot
from captain_training.rl.errors import FeatureError
from captain_training.rl.features import (
    FEATURE_NAMES,
    FEATURE_SPECS,
    N_FEATURES,
    episode_features,
    extract_features,
    feature_index,
)

UP = (1.0, 0.0, 0.0, 0.0)
TILT_90_X = (math.sqrt(0.5), math.sqrt(0.5), 0.0, 0.0)


def _snapshot(first_goal_satisfied: bool = False, **changes) -> SimSnapshot:
    snap = SimSnapshot(
        time_s=12.5,
        ee_position_m=(0.1, 0.2, 1.0),
        gripper_open_fraction=0.02,
        object_poses={
            "akita_black_bowl_1": ObjectPose((0.1, 0.0, 0.95), TILT_90_X),
            "plate_1": ObjectPose((0.3, 0.0, 0.90), UP),
            "cookies_1": ObjectPose((0.1, 0.1, 0.92), UP),
        },
        initial_object_poses={
            "akita_black_bowl_1": ObjectPose((0.0, 0.0, 0.90), UP),
            "plate_1": ObjectPose((0.3, 0.0, 0.90), UP),
            "cookies_1": ObjectPose((0.1, 0.1, 0.90), UP),
        },
        goals=(
            GoalPredicate("on", ("akita_black_bowl_1", "plate_1"), first_goal_satisfied,
                          involves_contact=True),
            GoalPredicate("open", ("wooden_cabinet_1_top_region",), True, involves_joint=True),
        ),
        target_object="akita_black_bowl_1",
        destination="plate_1",
        goal_position_m=(0.3, 0.0, 0.92),
        articulated_joints={"wooden_cabinet_1_top_joint": 0.08},
        initial_articulated_joints={"wooden_cabinet_1_top_joint": 0.0},
        held={"akita_black_bowl_1": True, "plate_1": False, "cookies_1": False},
        ever_held={"akita_black_bowl_1": True, "plate_1": False, "cookies_1": False},
        success=False,
    )
    return dataclasses.replace(snap, **changes)


def _f(x: np.ndarray, name: str) -> float:
    return float(x[feature_index(name)])


def test_names_are_36_distinct_documented_and_free_of_behaviour_counters():
    assert N_FEATURES == 36 == len(set(FEATURE_NAMES))
    assert all(spec.unit and spec.description for spec in FEATURE_SPECS)
    forbidden = ("count_", "calls", "request", "time", "perception", "failed", "step", "tokens")
    for name in FEATURE_NAMES:
        assert not any(word in name for word in forbidden), name
    with pytest.raises(FeatureError, match="valid names"):
        feature_index("n_perception_calls")


def test_hand_computed_values():
    x = extract_features(_snapshot(), reset=_snapshot())
    assert x.shape == (36,)
    expected = {
        "ee_x_m": 0.1, "ee_y_m": 0.2, "ee_z_m": 1.0,
        "gripper_open_fraction": 0.02, "gripper_closed": 1.0,
        "n_goals": 2, "n_goals_satisfied": 1, "fraction_goals_satisfied": 0.5,
        "active_goal_index": 0, "active_goal_involves_joint": 0.0, "active_goal_involves_contact": 1.0,
        "all_goals_satisfied": 0.0, "has_target": 1.0, "has_goal_position": 1.0,
        # bowl (0.1, 0, 0.95) -> goal (0.3, 0, 0.92): (0.2, 0, -0.03)
        "target_goal_distance_m": math.sqrt(0.0409),
        # at reset: bowl (0, 0, 0.90) -> goal: (0.3, 0, 0.02)
        "target_goal_distance_normalized": math.sqrt(0.0409) / math.sqrt(0.0904),
        "target_to_goal_dx_m": 0.2, "target_to_goal_dy_m": 0.0, "target_to_goal_dz_m": -0.03,
        # bowl - ee = (0, -0.2, -0.05)
        "ee_target_distance_m": math.sqrt(0.0425),
        "ee_to_target_dx_m": 0.0, "ee_to_target_dy_m": -0.2, "ee_to_target_dz_m": -0.05,
        # plate body (0.3, 0, 0.90) - bowl = (0.2, 0, -0.05)
        "target_destination_distance_m": math.sqrt(0.0425),
        "target_lift_m": 0.05,
        "target_displacement_m": math.sqrt(0.0125),
        "target_tilt_rad": math.pi / 2,
        "max_object_displacement_m": math.sqrt(0.0125),
        "max_other_object_displacement_m": 0.02,
        # cookies - bowl = (0, 0.1, -0.03) is nearer than the plate
        "nearest_other_object_distance_m": math.sqrt(0.0109),
        # active goal is On(bowl, plate): no articulated joint belongs to it
        "joint_position": 0.0, "joint_change": 0.0, "joint_abs_change": 0.0,
        "target_held": 1.0, "target_ever_held": 1.0, "any_object_held": 1.0,
    }
    assert set(expected) == set(FEATURE_NAMES)
    for name, value in expected.items():
        assert _f(x, name) == pytest.approx(value, abs=1e-9), name


def test_joint_features_follow_the_active_goal():
    snap = _snapshot(first_goal_satisfied=True, target_object="", destination="")
    x = extract_features(snap)
    # first goal now holds, so the active goal is open(wooden_cabinet_1_top_region)
    assert _f(x, "active_goal_index") == 2  # all goals hold: index n_goals
    assert _f(x, "n_goals_satisfied") == 2
    assert _f(x, "active_goal_involves_joint") == 1.0
    assert _f(x, "joint_position") == pytest.approx(0.08)
    assert _f(x, "joint_change") == pytest.approx(0.08)
    assert _f(x, "joint_abs_change") == pytest.approx(0.08)
    # without a target every target quantity is 0 and flagged
    assert _f(x, "has_target") == 0.0
    for name in ("ee_target_distance_m", "target_goal_distance_m", "target_lift_m", "target_held"):
        assert _f(x, name) == 0.0
    # other objects still report their displacement
    assert _f(x, "max_object_displacement_m") == pytest.approx(math.sqrt(0.0125))


def test_only_physical_state_matters():
    base = extract_features(_snapshot())
    later = extract_features(_snapshot(time_s=600.0))
    assert np.array_equal(base, later), "the simulated clock must not leak into the features"
    roundtrip = extract_features(SimSnapshot.from_dict(_snapshot().to_dict()))
    assert np.allclose(base, roundtrip)
    moved = extract_features(_snapshot(ee_position_m=(0.1, 0.0, 0.97)))
    assert _f(moved, "ee_target_distance_m") == pytest.approx(0.02)
    assert _f(base, "ee_target_distance_m") > _f(moved, "ee_target_distance_m")


def test_reset_goal_is_used_for_the_normalised_distance():
    reset = _snapshot(goal_position_m=(0.6, 0.0, 0.90))  # destination has moved since reset
    x = extract_features(_snapshot(), reset=reset)
    assert _f(x, "target_goal_distance_normalized") == pytest.approx(math.sqrt(0.0409) / 0.6)
    # a goal at the bowl's reset position: reset distance 0, floored at 2 cm, ratio clipped at 5
    near = extract_features(_snapshot(), reset=_snapshot(goal_position_m=(0.0, 0.0, 0.90)))
    assert _f(near, "target_goal_distance_normalized") == 5.0


def test_no_goal_position_and_episode_stacking():
    snap = _snapshot(goal_position_m=None, destination="")
    x = extract_features(snap)
    assert _f(x, "has_goal_position") == 0.0
    assert _f(x, "target_goal_distance_m") == 0.0
    assert _f(x, "target_destination_distance_m") == 0.0
    stack = episode_features([_snapshot(), snap])
    assert stack.shape == (2, 36)
    assert np.array_equal(stack[1], extract_features(snap, _snapshot()))


def test_bad_snapshot_is_reported():
    with pytest.raises(FeatureError, match="3 components"):
        extract_features(_snapshot(ee_position_m=(0.1, 0.2)))
    bad = _snapshot()
    poses = dict(bad.object_poses)
    poses["akita_black_bowl_1"] = ObjectPose((0.1, 0.0, 0.95), (0.0, 0.0, 0.0, 0.0))
    with pytest.raises(FeatureError, match="quaternion"):
        extract_features(dataclasses.replace(bad, object_poses=poses))
