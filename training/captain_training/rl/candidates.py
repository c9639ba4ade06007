"""Candidate cells for a policy whose choice is the model's: the learning check of RL.

A tiny random model cannot write a working pick-and-place cell, so RL could never show
that it improves anything with such a model. The learning check instead lets the model
*choose*: before each request the rollout client asks a host-side provider for K complete
assistant completions (reasoning + one python tool call), the local endpoint scores each
under the served model and samples one with probability proportional to its likelihood
(``p_k ∝ exp(sum_j log pi(token_kj))``), and returns the chosen completion's token ids and
per-token log-probabilities like any sampled reply. The harness executes the chosen cell on
the simulator and the host's success predicate gives the reward. The trainer's Eq. 8 update
on the chosen completion's tokens changes which candidate the model prefers, so the next
round's success rate depends on the update, and on nothing else.

``tabletop_pick_place(snapshot, request_index)`` is the provider for the tabletop's
``cube_on_plate`` and ``stack_cubes`` tasks: the same cell template (same token count up
to a few digits) filled in three ways,

* ``solve``: grasp the target cube and release it over the destination;
* ``wrong_object``: grasp the other cube and release it over the destination;
* ``no_grasp``: the same motions around the target cube with the jaw opened instead of closed.

Coordinates are in the robot base frame (m), from the hidden snapshot the provider reads on
the host side; the cell itself uses only the robot API.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from captain_training.rl.errors import RLError

#: Labels of the tabletop candidates, in the order the provider returns them.
TABLETOP_LABELS = ("solve", "wrong_object", "no_grasp")

_REASONING = {
    "solve": "Red cube to the {dest}.",
    "wrong_object": "Blue cube to the {dest}.",
    "no_grasp": "Red cube, jaw open.",
}


def _quat_down(yaw_rad: float) -> list[float]:
    a = math.pi / 4 + yaw_rad / 2
    return [0.0, math.cos(a), math.sin(a), 0.0]


def _yaw(q_wxyz: Any) -> float:
    w, x, y, z = (float(v) for v in q_wxyz)
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def _fmt(v: Any) -> str:
    return "[" + ",".join(f"{float(x):.3f}" for x in v) + "]"


def pick_place_cell(grasp_m: Any, yaw_rad: float, place_m: Any, jaw: str = "close") -> str:
    """One short cell that grasps at ``grasp_m`` (the cube's centre, base frame, m; jaw ``close``
    or ``open``) and releases ``0.041 m`` above ``place_m`` (the destination's top centre, base
    frame, m). Short on purpose: every completion token costs a 248k-way softmax in scoring
    and training."""
    q = ",".join(f"{v:.4f}" for v in _quat_down(yaw_rad % (math.pi / 2)))
    return (f"g={_fmt(grasp_m)};d={_fmt(place_m)};q=[{q}]\n"
            f"for p,z,j,m in[(g,.13,'',''),(g,.01,'{jaw}',''),(g,.16,'','manipulation'),(d,.16,'','manipulation'),"
            "(d,.041,'open','manipulation'),(d,.16,'','')]:\n"
            " robot.move_to([p[0],p[1],p[2]+z],q,speed=.2,**({'mode':m} if m else {}))\n"
            " if j:robot.move_to(gripper=j)")


def tabletop_pick_place(snapshot: Any, request_index: int) -> list[tuple[str, str]]:
    """``(label, completion text)`` of the three tabletop candidates (see the module docstring).

    Args:
        snapshot: the hidden ``SimSnapshot`` before the request (host side only).
        request_index: 1-based request number (the same candidates on every request).
    """
    from captain_backends.core.tabletop.scene import T_world_base
    from captain_training.rl.endpoint import tool_call_text

    target, dest = snapshot.target_object, snapshot.destination
    others = [n for n in snapshot.object_poses if n.endswith("_cube") and n not in (target, dest)]
    if not target or not dest or snapshot.goal_position_m is None or not others:
        raise RLError(f"tabletop_pick_place needs a pick-and-place task with a second cube (target {target!r}, "
                      f"destination {dest!r}, other cubes {others})")
    base = T_world_base()[:3, 3]

    def pose(name: str) -> tuple[np.ndarray, float]:
        p = snapshot.object_poses[name]
        return np.asarray(p.position_m, dtype=float) - base, _yaw(p.quaternion_wxyz)

    goal = np.asarray(snapshot.goal_position_m, dtype=float) - base
    red, red_yaw = pose(target)
    blue, blue_yaw = pose(others[0])
    dest_name = dest.replace("_", " ")
    cells = {
        "solve": pick_place_cell(red, red_yaw, goal, "close"),
        "wrong_object": pick_place_cell(blue, blue_yaw, goal, "close"),
        "no_grasp": pick_place_cell(red, red_yaw, goal, "open"),
    }
    return [(label, tool_call_text(cells[label], _REASONING[label].format(dest=dest_name)))
            for label in TABLETOP_LABELS]


def resolve_provider(ref: str) -> Callable[[Any, int], list[tuple[str, str]]]:
    """The provider function of a ``module:function`` reference."""
    module, _, name = ref.partition(":")
    if not module or not name:
        raise RLError(f"candidate provider {ref!r} must look like module:function")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise RLError(f"candidate provider {ref!r} does not resolve: {exc}") from None
    return fn
