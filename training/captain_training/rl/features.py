"""The 36 privileged features x(s_t) of the simulator critic (paper §3.3, Appendix A.2).

The features are computed from the hidden ``SimSnapshot`` taken before a request and,
for quantities measured against the start of the episode, from the snapshot at reset.
They describe physical state only. Counters of the policy's own behaviour (number of
perception calls, failed calls, requests so far) and the simulated clock are excluded on
purpose: they act as proxies for elapsed time and leak credit onto perception requests
(paper §4.5). ``time_s`` of the snapshot is therefore never read.

Frames and units: positions and distances are in the simulator world frame, metres;
angles in radians; articulated joints in their native unit (rad for hinges, m for
slides). Flags are 0.0 / 1.0. Missing quantities (no target object, no goal position,
no articulated joint for the active goal) are 0.0, and the ``has_*`` flags say so.

The *active goal* is the first goal predicate, in task order, that is not satisfied; when
every goal holds it is the last goal. ``target_object`` and ``destination`` of the snapshot
name the objects of that goal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from captain_backends.core.snapshot import GoalPredicate, SimSnapshot
from captain_training.rl.errors import FeatureError

#: A jaw opening below this fraction of the maximum counts as closed.
GRIPPER_CLOSED_FRACTION = 0.05
#: Floor of the reset distance used to normalise the target-to-goal distance, metres.
MIN_RESET_DISTANCE_M = 0.02
#: Upper clip of the normalised target-to-goal distance.
MAX_NORMALIZED_DISTANCE = 5.0
#: Cap (and value when there is no other object) of the nearest-other-object distance, metres.
MAX_NEAREST_OBJECT_DISTANCE_M = 1.0


@dataclass(frozen=True)
class FeatureSpec:
    """One critic feature: its name, unit and meaning."""

    name: str
    unit: str
    description: str


#: The ordered list of the 36 features. The index of a spec is its column in the vector.
FEATURE_SPECS: tuple[FeatureSpec, ...] = (
    # --- end-effector and jaw (5)
    FeatureSpec("ee_x_m", "m", "tool centre point x, world frame"),
    FeatureSpec("ee_y_m", "m", "tool centre point y, world frame"),
    FeatureSpec("ee_z_m", "m", "tool centre point z, world frame"),
    FeatureSpec("gripper_open_fraction", "1", "jaw opening, 0 closed .. 1 fully open"),
    FeatureSpec("gripper_closed", "flag", f"1 when the jaw opening is below {GRIPPER_CLOSED_FRACTION}"),
    # --- goal bookkeeping (9)
    FeatureSpec("n_goals", "count", "number of goal predicates of the task"),
    FeatureSpec("n_goals_satisfied", "count", "number of goal predicates that hold now"),
    FeatureSpec("fraction_goals_satisfied", "1", "n_goals_satisfied / n_goals (0 without goals)"),
    FeatureSpec("active_goal_index", "index",
                "0-based index of the first unsatisfied goal; n_goals when all hold"),
    FeatureSpec("active_goal_involves_joint", "flag", "the active goal is on an articulated part"),
    FeatureSpec("active_goal_involves_contact", "flag", "the active goal is relational (on, in, stack)"),
    FeatureSpec("all_goals_satisfied", "flag", "the benchmark's success predicate now"),
    FeatureSpec("has_target", "flag", "the active goal names a target object present in the scene"),
    FeatureSpec("has_goal_position", "flag", "the active goal has a destination position"),
    # --- distances (10)
    FeatureSpec("target_goal_distance_m", "m", "target object to the goal position"),
    FeatureSpec("target_goal_distance_normalized", "1",
                "target_goal_distance_m / its value at reset, clipped to [0, 5]"),
    FeatureSpec("target_to_goal_dx_m", "m", "goal position minus target position, x"),
    FeatureSpec("target_to_goal_dy_m", "m", "goal position minus target position, y"),
    FeatureSpec("target_to_goal_dz_m", "m", "goal position minus target position, z"),
    FeatureSpec("ee_target_distance_m", "m", "tool centre point to the target object"),
    FeatureSpec("ee_to_target_dx_m", "m", "target position minus tool centre point, x"),
    FeatureSpec("ee_to_target_dy_m", "m", "target position minus tool centre point, y"),
    FeatureSpec("ee_to_target_dz_m", "m", "target position minus tool centre point, z"),
    FeatureSpec("target_destination_distance_m", "m",
                "target object to the destination body (the goal position if the body is unknown)"),
    # --- lift and displacement (6)
    FeatureSpec("target_lift_m", "m", "target height minus its height at reset"),
    FeatureSpec("target_displacement_m", "m", "target distance from its position at reset"),
    FeatureSpec("target_tilt_rad", "rad", "angle between the target's body z axis and world z"),
    FeatureSpec("max_object_displacement_m", "m", "largest displacement from reset of any object"),
    FeatureSpec("max_other_object_displacement_m", "m",
                "largest displacement from reset of any object other than the target"),
    FeatureSpec("nearest_other_object_distance_m", "m",
                f"target to the nearest other object, centre to centre, capped at "
                f"{MAX_NEAREST_OBJECT_DISTANCE_M}"),
    # --- articulated joint and held flags (6)
    FeatureSpec("joint_position", "rad or m", "articulated joint of the active goal, now"),
    FeatureSpec("joint_change", "rad or m", "that joint minus its value at reset"),
    FeatureSpec("joint_abs_change", "rad or m", "absolute value of joint_change"),
    FeatureSpec("target_held", "flag", "the target is held between the fingers now"),
    FeatureSpec("target_ever_held", "flag", "the target has been held since reset"),
    FeatureSpec("any_object_held", "flag", "some object is held between the fingers now"),
)

#: Feature names in column order.
FEATURE_NAMES: tuple[str, ...] = tuple(spec.name for spec in FEATURE_SPECS)
#: Width of the feature vector.
N_FEATURES = len(FEATURE_SPECS)
assert N_FEATURES == 36, "the critic's feature vector has 36 columns (paper Appendix A.2)"

_INDEX = {name: i for i, name in enumerate(FEATURE_NAMES)}


def feature_index(name: str) -> int:
    """Column of a feature by name; raises ``FeatureError`` listing the valid names."""
    try:
        return _INDEX[name]
    except KeyError:
        raise FeatureError(f"unknown feature {name!r}; valid names: {', '.join(FEATURE_NAMES)}") from None


def active_goal_index(goals: Sequence[GoalPredicate]) -> int:
    """Index of the first unsatisfied goal; the last goal when all hold; 0 without goals."""
    for i, goal in enumerate(goals):
        if not goal.satisfied:
            return i
    return max(len(goals) - 1, 0)


def _tilt_rad(quaternion_wxyz: Sequence[float]) -> float:
    """Angle between a body's z axis and the world z axis, rad."""
    w, x, y, z = (float(v) for v in quaternion_wxyz)
    norm2 = w * w + x * x + y * y + z * z
    if norm2 <= 0.0:
        raise FeatureError("an object quaternion has zero norm; snapshots must carry unit quaternions "
                           "[w, x, y, z]")
    zz = 1.0 - 2.0 * (x * x + y * y) / norm2
    return float(np.arccos(np.clip(zz, -1.0, 1.0)))


def _name_key(name: str) -> str:
    key = name.lower()
    for suffix in ("_region", "_joint"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    return key


def joint_for_goal(goal: GoalPredicate, joint_names: Sequence[str]) -> str | None:
    """The articulated joint a goal predicate refers to, or None.

    A joint matches when its name contains (or is contained in) an argument of the goal,
    ignoring ``_region`` / ``_joint`` suffixes; otherwise, for a goal that involves a joint
    in a scene with exactly one articulated joint, that joint.
    """
    arg_keys = [_name_key(a) for a in goal.args]
    for joint in sorted(joint_names):
        jkey = _name_key(joint)
        if any(a and (a in jkey or jkey in a) for a in arg_keys):
            return joint
    if goal.involves_joint and len(joint_names) == 1:
        return next(iter(joint_names))
    return None


def goal_joint_name(snapshot: SimSnapshot) -> str | None:
    """The articulated joint that belongs to the active goal, or None.

    A joint named like the snapshot's ``target_object`` wins; otherwise ``joint_for_goal``
    on the active goal.
    """
    joints = snapshot.articulated_joints
    if not joints:
        return None
    if snapshot.target_object and snapshot.target_object in joints:
        return snapshot.target_object
    if snapshot.goals:
        return joint_for_goal(snapshot.goals[active_goal_index(snapshot.goals)], list(joints))
    return None


def _pos(poses: dict, name: str) -> np.ndarray:
    return np.asarray(poses[name].position_m, dtype=float)


def extract_features(snapshot: SimSnapshot, reset: SimSnapshot | None = None) -> np.ndarray:
    """The 36-feature vector x(s) of one snapshot, ordered as ``FEATURE_NAMES``.

    Args:
        snapshot: the hidden snapshot taken before a request.
        reset: the snapshot at reset of the same episode. It supplies the goal position at
            reset for the normalised target-to-goal distance; without it the snapshot's
            current goal position is used. Object and joint positions at reset come from
            the snapshot's own ``initial_*`` fields.

    Returns:
        float64 array of shape (36,).
    """
    x = np.zeros(N_FEATURES, dtype=float)

    def put(name: str, value: float) -> None:
        x[_INDEX[name]] = float(value)

    ee = np.asarray(snapshot.ee_position_m, dtype=float)
    if ee.shape != (3,):
        raise FeatureError(f"ee_position_m must have 3 components, got shape {ee.shape}")
    put("ee_x_m", ee[0])
    put("ee_y_m", ee[1])
    put("ee_z_m", ee[2])
    jaw = float(np.clip(snapshot.gripper_open_fraction, 0.0, 1.0))
    put("gripper_open_fraction", jaw)
    put("gripper_closed", jaw < GRIPPER_CLOSED_FRACTION)

    goals = snapshot.goals
    n_goals = len(goals)
    n_sat = sum(1 for g in goals if g.satisfied)
    put("n_goals", n_goals)
    put("n_goals_satisfied", n_sat)
    put("fraction_goals_satisfied", n_sat / n_goals if n_goals else 0.0)
    if n_goals:
        active_i = active_goal_index(goals) if n_sat < n_goals else n_goals
        active = goals[min(active_i, n_goals - 1)]
        put("active_goal_index", active_i)
        put("active_goal_involves_joint", active.involves_joint)
        put("active_goal_involves_contact", active.involves_contact)
    put("all_goals_satisfied", snapshot.success)

    poses = snapshot.object_poses
    initial = snapshot.initial_object_poses
    target = snapshot.target_object
    has_target = bool(target) and target in poses
    goal = np.asarray(snapshot.goal_position_m, dtype=float) if snapshot.goal_position_m is not None else None
    put("has_target", has_target)
    put("has_goal_position", goal is not None)

    displacements: dict[str, float] = {
        name: float(np.linalg.norm(_pos(poses, name) - _pos(initial, name)))
        for name in poses if name in initial
    }
    put("max_object_displacement_m", max(displacements.values(), default=0.0))
    put("max_other_object_displacement_m",
        max((d for n, d in displacements.items() if n != target), default=0.0))

    if has_target:
        p = _pos(poses, target)
        p0 = _pos(initial, target) if target in initial else p
        d_ee = p - ee
        put("ee_target_distance_m", np.linalg.norm(d_ee))
        put("ee_to_target_dx_m", d_ee[0])
        put("ee_to_target_dy_m", d_ee[1])
        put("ee_to_target_dz_m", d_ee[2])
        put("target_lift_m", p[2] - p0[2])
        put("target_displacement_m", np.linalg.norm(p - p0))
        put("target_tilt_rad", _tilt_rad(poses[target].quaternion_wxyz))
        others = [np.linalg.norm(_pos(poses, n) - p) for n in poses if n != target]
        put("nearest_other_object_distance_m", min(min(others, default=MAX_NEAREST_OBJECT_DISTANCE_M),
                                                   MAX_NEAREST_OBJECT_DISTANCE_M))
        put("target_held", snapshot.held.get(target, False))
        put("target_ever_held", snapshot.ever_held.get(target, False))
        if goal is not None:
            d_goal = goal - p
            dist = float(np.linalg.norm(d_goal))
            goal0 = goal
            if reset is not None and reset.goal_position_m is not None:
                goal0 = np.asarray(reset.goal_position_m, dtype=float)
            dist0 = max(float(np.linalg.norm(goal0 - p0)), MIN_RESET_DISTANCE_M)
            put("target_goal_distance_m", dist)
            put("target_goal_distance_normalized", min(dist / dist0, MAX_NORMALIZED_DISTANCE))
            put("target_to_goal_dx_m", d_goal[0])
            put("target_to_goal_dy_m", d_goal[1])
            put("target_to_goal_dz_m", d_goal[2])
        dest = snapshot.destination
        if dest and dest in poses and dest != target:
            put("target_destination_distance_m", np.linalg.norm(_pos(poses, dest) - p))
        elif goal is not None:
            put("target_destination_distance_m", np.linalg.norm(goal - p))
    put("any_object_held", any(snapshot.held.values()))

    joint = goal_joint_name(snapshot)
    if joint is not None:
        q = float(snapshot.articulated_joints[joint])
        q0 = float(snapshot.initial_articulated_joints.get(joint, q))
        put("joint_position", q)
        put("joint_change", q - q0)
        put("joint_abs_change", abs(q - q0))
    if not np.all(np.isfinite(x)):
        bad = [FEATURE_NAMES[i] for i in np.flatnonzero(~np.isfinite(x))]
        raise FeatureError(f"non-finite features {bad}; check the snapshot's positions and joints")
    return x


def episode_features(snapshots: Sequence[SimSnapshot], reset: SimSnapshot | None = None) -> np.ndarray:
    """Features of every snapshot of an episode, shape (len(snapshots), 36).

    ``reset`` defaults to the first snapshot of the sequence.
    """
    if not snapshots:
        return np.zeros((0, N_FEATURES), dtype=float)
    ref = reset if reset is not None else snapshots[0]
    return np.stack([extract_features(s, ref) for s in snapshots])
