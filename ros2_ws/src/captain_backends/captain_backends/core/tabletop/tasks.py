"""Tabletop tasks: instruction, goal predicate, and the seeded object layout.

Predicates (evaluated on world-frame positions and the current contacts):

* ``On(a, b)``: ``a`` touches ``b``, ``a``'s centre is above ``b``'s top surface, its
  centre lies over ``b``'s support (within the plate's radius, or within a cube's half
  size in x and y), and ``a`` is not held by the gripper (it rests there).
* ``Lifted(a)``: ``a`` is held and its centre is at least ``LIFT_HEIGHT_M`` above
  its height at reset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from captain_backends.core.errors import BackendError
from captain_backends.core.tabletop.scene import (
    OBJECTS,
    PLACEMENT_X_RANGE_M,
    PLACEMENT_Y_RANGE_M,
    SceneObject,
)

LIFT_HEIGHT_M = 0.05


class UnknownTaskError(BackendError):
    """The requested tabletop task does not exist."""


@dataclass(frozen=True)
class TabletopTask:
    """One tabletop task.

    Attributes:
        name: short name; the task id is ``"tabletop/<name>"``.
        instruction: the natural-language instruction.
        predicate: ``"on"`` or ``"lifted"``.
        target: the object the task moves.
        destination: the object it goes onto ("" for ``lifted``).
    """

    name: str
    instruction: str
    predicate: str
    target: str
    destination: str = ""

    @property
    def task_id(self) -> str:
        """``"tabletop/<name>"``."""
        return f"tabletop/{self.name}"

    @property
    def goal_text(self) -> str:
        """The goal as a predicate string, e.g. ``On(red_cube, plate)``."""
        if self.predicate == "on":
            return f"On({self.target}, {self.destination})"
        return f"Lifted({self.target})"


TASKS: dict[str, TabletopTask] = {
    t.name: t for t in (
        TabletopTask("cube_on_plate", "put the red cube on the plate", "on", "red_cube", "plate"),
        TabletopTask("stack_cubes", "put the red cube on the blue cube", "on", "red_cube", "blue_cube"),
        TabletopTask("pick_cube", "pick up the red cube", "lifted", "red_cube"),
    )
}


def get_task(name: str) -> TabletopTask:
    """The task called ``name`` (with or without the ``tabletop/`` prefix)."""
    key = name.removeprefix("tabletop/")
    if key not in TASKS:
        raise UnknownTaskError(f"unknown tabletop task {name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    return TASKS[key]


def object_by_name(name: str) -> SceneObject:
    """The scene object called ``name``."""
    for obj in OBJECTS:
        if obj.name == name:
            return obj
    raise UnknownTaskError(f"unknown object {name!r}; objects: {', '.join(o.name for o in OBJECTS)}")


def sample_layout(rng: np.random.Generator, objects: tuple[SceneObject, ...] = OBJECTS,
                  max_tries: int = 2000) -> dict[str, tuple[float, float, float]]:
    """Seeded, non-overlapping ``(x, y, yaw)`` for every object (world frame, m, rad).

    Objects are placed in ``PLACEMENT_X/Y_RANGE_M`` with centres at least the sum of
    their clearances apart; larger objects are placed first.
    """
    placed: dict[str, tuple[float, float, float]] = {}
    clearance = {o.name: o.min_clearance_m for o in objects}
    for obj in sorted(objects, key=lambda o: -o.min_clearance_m):
        for _ in range(max_tries):
            x = rng.uniform(PLACEMENT_X_RANGE_M[0] + obj.min_clearance_m * 0.5,
                            PLACEMENT_X_RANGE_M[1] - obj.min_clearance_m * 0.5)
            y = rng.uniform(PLACEMENT_Y_RANGE_M[0] + obj.min_clearance_m * 0.5,
                            PLACEMENT_Y_RANGE_M[1] - obj.min_clearance_m * 0.5)
            ok = all(np.hypot(x - px, y - py) >= obj.min_clearance_m + clearance[n]
                     for n, (px, py, _) in placed.items())
            if ok:
                placed[obj.name] = (float(x), float(y), float(rng.uniform(-np.pi / 4, np.pi / 4)))
                break
        else:
            raise BackendError(f"could not place {obj.name} without overlap after {max_tries} tries")
    return {o.name: placed[o.name] for o in objects}


def on_support(top: SceneObject, top_pos: np.ndarray, bottom: SceneObject, bottom_pos: np.ndarray,
               bottom_yaw_rad: float) -> bool:
    """Geometric part of ``On``: ``top``'s centre above ``bottom``'s top face and over
    its support area (positions in the world frame)."""
    if top_pos[2] <= bottom_pos[2] + bottom.half_size_m[2]:
        return False
    d = top_pos[:2] - bottom_pos[:2]
    if bottom.shape == "plate":
        return bool(np.hypot(*d) <= bottom.half_size_m[0])
    c, s = np.cos(bottom_yaw_rad), np.sin(bottom_yaw_rad)
    local = np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1]])
    return bool(np.all(np.abs(local) <= np.asarray(bottom.half_size_m[:2])))
