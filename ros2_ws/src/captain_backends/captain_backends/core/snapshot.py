"""Privileged simulator state, for the host success check and the RL critic.

A ``SimSnapshot`` is taken by the host before every request. It never enters the
policy's session. All positions are in the simulator world frame, metres; quaternions
are ``[w, x, y, z]``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ObjectPose:
    """Pose of one body: ``position_m`` (3,) and ``quaternion_wxyz`` (4,)."""

    position_m: tuple[float, float, float]
    quaternion_wxyz: tuple[float, float, float, float]


@dataclass(frozen=True)
class GoalPredicate:
    """One goal predicate of the task, e.g. ``On(akita_black_bowl_1, plate_1)``.

    Attributes:
        predicate: lower-case predicate name (``on``, ``in``, ``open``, ``close``,
            ``turnon``, ``turnoff``, ...).
        args: the object / region names it relates.
        satisfied: whether the benchmark's own check holds now.
        involves_joint: True for predicates on articulated parts (doors, drawers,
            knobs).
        involves_contact: True for relational predicates (on, in, stack).
    """

    predicate: str
    args: tuple[str, ...]
    satisfied: bool
    involves_joint: bool = False
    involves_contact: bool = False


@dataclass(frozen=True)
class SimSnapshot:
    """Everything privileged about one instant of a simulated episode.

    Attributes:
        time_s: simulated time.
        ee_position_m: tool centre point in the world frame.
        gripper_open_fraction: jaw opening, 0..1.
        object_poses: movable objects and fixture parts by name.
        initial_object_poses: the same objects at reset (for displacements).
        goals: the task's goal predicates with their satisfied flags.
        target_object: name of the object the active goal moves ("" if none).
        destination: name of the destination object/region of the active goal.
        goal_position_m: world position of the active goal's destination (or None).
        articulated_joints: joint positions of articulated fixtures by name (rad or m).
        initial_articulated_joints: the same at reset.
        articulated_joint_goals: for joints the task's goals drive (open/close a door or
            drawer, turn a knob), the position that satisfies the goal (rad or m).
        held: per object, whether it is held between the fingers now.
        ever_held: per object, whether it has been held since reset.
        success: the benchmark's success predicate now.
    """

    time_s: float
    ee_position_m: tuple[float, float, float]
    gripper_open_fraction: float
    object_poses: dict[str, ObjectPose]
    initial_object_poses: dict[str, ObjectPose]
    goals: tuple[GoalPredicate, ...]
    target_object: str
    destination: str
    goal_position_m: tuple[float, float, float] | None
    articulated_joints: dict[str, float] = field(default_factory=dict)
    initial_articulated_joints: dict[str, float] = field(default_factory=dict)
    articulated_joint_goals: dict[str, float] = field(default_factory=dict)
    held: dict[str, bool] = field(default_factory=dict)
    ever_held: dict[str, bool] = field(default_factory=dict)
    success: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (tuples become lists)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimSnapshot:
        """Inverse of ``to_dict``."""
        poses = {k: ObjectPose(tuple(v["position_m"]), tuple(v["quaternion_wxyz"]))
                 for k, v in data["object_poses"].items()}
        init = {k: ObjectPose(tuple(v["position_m"]), tuple(v["quaternion_wxyz"]))
                for k, v in data["initial_object_poses"].items()}
        goals = tuple(GoalPredicate(g["predicate"], tuple(g["args"]), bool(g["satisfied"]),
                                    bool(g.get("involves_joint", False)),
                                    bool(g.get("involves_contact", False)))
                      for g in data["goals"])
        gp = data.get("goal_position_m")
        return cls(
            time_s=float(data["time_s"]),
            ee_position_m=tuple(data["ee_position_m"]),
            gripper_open_fraction=float(data["gripper_open_fraction"]),
            object_poses=poses,
            initial_object_poses=init,
            goals=goals,
            target_object=data.get("target_object", ""),
            destination=data.get("destination", ""),
            goal_position_m=tuple(gp) if gp is not None else None,
            articulated_joints=dict(data.get("articulated_joints", {})),
            initial_articulated_joints=dict(data.get("initial_articulated_joints", {})),
            articulated_joint_goals=dict(data.get("articulated_joint_goals", {})),
            held=dict(data.get("held", {})),
            ever_held=dict(data.get("ever_held", {})),
            success=bool(data.get("success", False)),
        )

    def position(self, name: str) -> np.ndarray:
        """World position of an object, metres."""
        return np.asarray(self.object_poses[name].position_m, dtype=float)
