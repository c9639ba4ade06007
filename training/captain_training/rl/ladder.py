"""The staged subgoal ladder of the hard tasks (paper Appendices A.2 and E).

A ladder is an ordered list of rungs (grasp, place, joint opened, ...), judged from the
hidden snapshots of an episode. It is one-shot and monotone: rung k counts only once rungs
1..k-1 have been reached, each rung is rewarded once, and rungs marked ``must_hold_at_end``
(place rungs, rungs for moving an object toward its goal) must still hold on the final
snapshot, or neither they nor the rungs above them count. A failed episode that reaches
rung d of an n-rung ladder receives ``0.15 d / (n + 1)``.

Rung thresholds (Appendix E): a grasp rung needs the object lifted by at least 5 cm with
the end-effector within 13 cm of it; a joint rung needs the articulated part to cover at
least 20 % of its distance at reset to the goal position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from captain_backends.core.snapshot import SimSnapshot
from captain_training.rl.errors import CreditError
from captain_training.rl.features import joint_for_goal

#: The eight hard tasks that get the ladder (libero_10 3/6/8/9; libero_goal 0/3/5/7).
HARD_TASK_IDS: frozenset[str] = frozenset(
    [f"libero_10/{i}" for i in (3, 6, 8, 9)] + [f"libero_goal/{i}" for i in (0, 3, 5, 7)]
)
#: The ladder applies from this RL round onward (0-based round index).
LADDER_FROM_ROUND = 9
#: Scale of the ladder reward: 0.15 d / (n + 1).
LADDER_SCALE = 0.15


@dataclass(frozen=True)
class GraspRung:
    """The object is lifted >= ``min_lift_m`` above its reset height with the end-effector near it."""

    object_name: str
    min_lift_m: float = 0.05
    max_ee_distance_m: float = 0.13
    must_hold_at_end: bool = False

    @property
    def name(self) -> str:
        return f"grasp({self.object_name})"

    def reached(self, snap: SimSnapshot) -> bool:
        if self.object_name not in snap.object_poses or self.object_name not in snap.initial_object_poses:
            return False
        p = np.asarray(snap.object_poses[self.object_name].position_m, dtype=float)
        p0 = np.asarray(snap.initial_object_poses[self.object_name].position_m, dtype=float)
        ee = np.asarray(snap.ee_position_m, dtype=float)
        return bool(p[2] - p0[2] >= self.min_lift_m and np.linalg.norm(ee - p) <= self.max_ee_distance_m)


@dataclass(frozen=True)
class GoalRung:
    """Goal predicate ``goal_index`` of the task is satisfied (a place rung: must hold at the end)."""

    goal_index: int
    must_hold_at_end: bool = True

    @property
    def name(self) -> str:
        return f"goal[{self.goal_index}]"

    def reached(self, snap: SimSnapshot) -> bool:
        if not 0 <= self.goal_index < len(snap.goals):
            raise CreditError(f"GoalRung index {self.goal_index} is out of range: the task has "
                              f"{len(snap.goals)} goals")
        return bool(snap.goals[self.goal_index].satisfied)


@dataclass(frozen=True)
class TowardGoalRung:
    """The object's distance to ``goal_position_m`` shrank by >= ``min_fraction`` of its reset value."""

    object_name: str
    goal_position_m: tuple[float, float, float]
    min_fraction: float = 0.5
    must_hold_at_end: bool = True

    @property
    def name(self) -> str:
        return f"toward_goal({self.object_name})"

    def reached(self, snap: SimSnapshot) -> bool:
        if self.object_name not in snap.object_poses or self.object_name not in snap.initial_object_poses:
            return False
        g = np.asarray(self.goal_position_m, dtype=float)
        d = np.linalg.norm(np.asarray(snap.object_poses[self.object_name].position_m) - g)
        d0 = np.linalg.norm(np.asarray(snap.initial_object_poses[self.object_name].position_m) - g)
        return bool(d0 > 0 and (d0 - d) >= self.min_fraction * d0)


@dataclass(frozen=True)
class JointRung:
    """An articulated joint covered >= ``min_fraction`` of its reset distance to ``goal_position``."""

    joint_name: str
    goal_position: float
    min_fraction: float = 0.2
    must_hold_at_end: bool = False

    @property
    def name(self) -> str:
        return f"joint({self.joint_name})"

    def reached(self, snap: SimSnapshot) -> bool:
        if self.joint_name not in snap.articulated_joints:
            return False
        q = float(snap.articulated_joints[self.joint_name])
        q0 = float(snap.initial_articulated_joints.get(self.joint_name, q))
        span = self.goal_position - q0
        if span == 0.0:
            return True
        return bool((q - q0) / span >= self.min_fraction)


Rung = GraspRung | GoalRung | TowardGoalRung | JointRung


def ladder_progress(rungs: Sequence[Rung], snapshots: Sequence[SimSnapshot]) -> int:
    """The rung d reached by an episode, 0..len(rungs) (see the module docstring).

    Args:
        rungs: the ladder, lowest rung first.
        snapshots: the episode's hidden snapshots in time order; the last one is the final state.
    """
    if not snapshots:
        return 0
    d = 0
    for snap in snapshots:
        while d < len(rungs) and rungs[d].reached(snap):
            d += 1
    final = snapshots[-1]
    for k in range(d):
        if rungs[k].must_hold_at_end and not rungs[k].reached(final):
            return k
    return d


def ladder_reward(reached: int, n_rungs: int, scale: float = LADDER_SCALE) -> float:
    """``scale * d / (n + 1)``: the one-shot reward of reaching rung d of an n-rung ladder."""
    if n_rungs < 0 or not 0 <= reached <= n_rungs:
        raise CreditError(f"rung {reached} of a {n_rungs}-rung ladder is not valid")
    return scale * reached / (n_rungs + 1)


def ladder_applies(task_id: str, round_index: int, hard_tasks: frozenset[str] = HARD_TASK_IDS,
                   from_round: int = LADDER_FROM_ROUND) -> bool:
    """Whether a task's failed episodes get the ladder reward in a given round (0-based)."""
    return task_id in hard_tasks and round_index >= from_round


def default_ladder(reset: SimSnapshot, joint_goals: Mapping[str, float] | None = None) -> list[Rung]:
    """A ladder from the task's goal predicates, in task order.

    Per goal: a joint goal gives a ``JointRung`` when the goal position of its joint is
    known in ``joint_goals`` (joint name to goal value, rad or m) and a ``GoalRung``
    otherwise; any other goal gives a ``GraspRung`` on its first argument (when that is a
    movable object of the scene), then, for the task's target object whose goal position
    the snapshot knows, a ``TowardGoalRung`` (the object moved half-way to its goal and still
    there at the end: the paper's rung for moving an object toward its goal), then a
    ``GoalRung`` (the place rung). A one-object pick-and-place ladder is grasp, toward goal,
    place: n = 3, so its top reward is 0.15 * 3 / 4 = 0.1125, the paper's bound.
    """
    rungs: list[Rung] = []
    joint_goals = dict(joint_goals or {})
    for i, goal in enumerate(reset.goals):
        if goal.involves_joint:
            joint = joint_for_goal(goal, list(reset.articulated_joints))
            if joint is not None and joint in joint_goals:
                rungs.append(JointRung(joint, float(joint_goals[joint])))
            else:
                rungs.append(GoalRung(i))
            continue
        if goal.args and goal.args[0] in reset.object_poses:
            rungs.append(GraspRung(goal.args[0]))
            if goal.args[0] == reset.target_object and reset.goal_position_m is not None:
                goal_at = tuple(float(v) for v in reset.goal_position_m)
                rungs.append(TowardGoalRung(goal.args[0], goal_at))  # type: ignore[arg-type]
        rungs.append(GoalRung(i))
    return rungs
