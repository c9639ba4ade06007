"""Laying a held object down in a groove: the wine rack holds a bottle lying along its
top shelf (tilted 31 deg, with a lip at its low edge), not standing on it.

The bottle is grasped top-down by the neck as usual, so it hangs along the tool's z
axis. Above the rack the hand turns to point along the groove, away from the robot (the
bottle then lies along the groove, its bottom end foremost), descends guarded until the
bottle touches the shelf, opens, and backs off upward. The arm cannot point the hand level
this close to its base (the elbow would pass its limit), so the hand points 35 deg below
level: the bottle's bottom lands first, lightly, and the bottle falls flat (at 20 deg the
fingers reach the shelf first and the bottle is knocked off the lip). The bottle is grasped
lower than for standing placements (4.5 cm below its top) to bring the hand farther out. The bottle rolls down the shelf
against the lip, which is where LIBERO's region test wants its body origin (the centre
of its bottom face).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from captain_teacher.boxes import rot_z
from captain_teacher.cells import num, vec
from captain_teacher.context import Step, TeacherContext
from captain_teacher.objects import label_of
from captain_teacher.planners.destinations import Destination


@dataclass(frozen=True)
class Groove:
    """A groove that holds objects lying down, in its parent's body frame.

    Attributes:
        axis_local: the groove's direction (unit, parent frame).
        bottom_local_m: where the held object's bottom centre is released, parent frame, m:
            a little above where it comes to rest, so it settles against the lip.
        bottom_ahead_m: how far past the groove's middle the bottom end is put, along the
            pointing direction, m (the farther, the farther the hand from the arm's base;
            LIBERO's region ends 0.1 m past the middle).
        tilt_rad: how far below level the hand points.
        grasp_depth_m: grasp depth below the object's top, m.
    """

    axis_local: tuple[float, float, float]
    bottom_local_m: tuple[float, float, float]
    bottom_ahead_m: float = 0.08
    tilt_rad: float = math.radians(35.0)
    grasp_depth_m: float = 0.045


#: Regions whose objects lie in a groove (region key as in ``destinations.REGION_OFFSETS_M``).
GROOVES: dict[str, Groove] = {
    # the top shelf rises toward the rack's -y; the region's site sits at (0, -0.08, 0.217)
    "wine_rack_top_region": Groove((1.0, 0.0, 0.0), (0.0, -0.045, 0.262)),
}
#: Height of the turn above the destination's measured top, for the hanging object's bottom, m.
TURN_CLEARANCE_M = 0.04
#: How far below the release point the guarded descent may go before it counts as missed, m.
DESCENT_BELOW_M = 0.03


def groove_for(dest: Destination) -> Groove | None:
    """The groove of a destination, or None when objects stand on it."""
    if not dest.region or not dest.click:
        return None
    return GROOVES.get(dest.region_key())


def pointing(ctx: TeacherContext, dest: Destination, groove: Groove) -> np.ndarray:
    """The horizontal direction (unit, base frame) the hand points while laying: along the
    groove, the way that leads away from the robot."""
    axis = (rot_z(ctx.scene.yaw(dest.click)) @ np.asarray(groove.axis_local, dtype=float))[:2]
    axis = axis / float(np.linalg.norm(axis))
    center = ctx.scene.position(dest.click)[:2]
    return axis if float(axis @ center) >= 0.0 else -axis


def lay_quaternion(direction_xy: np.ndarray, tilt_rad: float) -> np.ndarray:
    """Tool quaternion [w, x, y, z] with the tool z axis along the horizontal ``direction_xy``
    tilted ``tilt_rad`` below level, the jaws horizontal across it: the top-down grasp
    ``[0, 2**-0.5, 2**-0.5, 0]`` turned about the base y axis, then about the vertical."""
    b = math.pi / 2.0 - tilt_rad
    a = np.array([math.sin(b / 2.0), math.cos(b / 2.0), math.cos(b / 2.0), math.sin(b / 2.0)]) * 2**-0.5
    phi = math.atan2(float(direction_xy[1]), float(direction_xy[0]))
    c, s = math.cos(phi / 2.0), math.sin(phi / 2.0)
    return np.array([c * a[0] - s * a[3], c * a[1] - s * a[2], c * a[2] + s * a[1], c * a[3] + s * a[0]])


def lay_step(ctx: TeacherContext, obj: str, dest: Destination, groove: Groove, measured: dict | None,
             done_quaternion: np.ndarray) -> Step:
    """The request that lays the held ``obj`` in the destination's groove (see the module
    docstring). The session holds ``o`` / ``d`` (measurements), ``q`` (the grasp's tool
    quaternion), ``hang`` (tool to the object's bottom, m) and ``home``.

    Args:
        measured: the destination's last printed measurement (``center``, ``top``), which
            the code's aim is written relative to; None writes the aim as numbers.
        done_quaternion: the tool quaternion the request ends with (recorded in ``ctx``).
    """
    scene = ctx.scene
    st = ctx.style
    olab, dlab = label_of(obj), dest.label
    direction = pointing(ctx, dest, groove)
    yaw = scene.yaw(dest.click)
    bottom = (scene.position(dest.click) + rot_z(yaw) @ np.asarray(groove.bottom_local_m, dtype=float)
              + np.append(direction * groove.bottom_ahead_m, 0.0))
    if measured is not None and "top" in measured:
        corr = bottom - np.array([*np.asarray(measured["center"], dtype=float)[:2], float(measured["top"])])
        lines = [f'bottom = np.array([*d["center_xy_m"], d["top_z_m"]]) + {vec(corr)}'
                 f"  # where the {olab}'s bottom goes: on the shelf, above its lip"]
    else:
        lines = [f"bottom = np.array({vec(bottom)})  # where the {olab}'s bottom goes: on the shelf, above its lip"]
    q_lay = lay_quaternion(direction, groove.tilt_rad)
    tilt = groove.tilt_rad
    along = np.array([direction[0] * math.cos(tilt), direction[1] * math.cos(tilt), -math.sin(tilt)])
    lines += [
        f"along = np.array({vec(along)})  # along the groove away from me, {round(math.degrees(tilt))} deg "
        "below level (level is past the elbow's limit here)",
        f"lay_q = {vec(q_lay)}  # tool z (and the {olab}) along it, the jaws horizontal",
        "lay = bottom - along * hang",
        f'turn = np.array([lay[0], lay[1], d["top_z_m"] + hang + {num(TURN_CLEARANCE_M)}])',
        f'r = go(turn, q, speed={num(st.carry_speed_m_s)}, mode="manipulation")  # still top-down, above the rack',
        'if r["success"]:\n    r = go(turn, lay_q, speed=0.05, mode="manipulation")  # turn the '
        f'{olab} to lie along the groove',
        'if r["success"]:\n    r = go(lay + [0, 0, 0.03], lay_q, speed=0.05, mode="manipulation")',
        f'if r["success"]:\n    r = go(lay - [0, 0, {num(DESCENT_BELOW_M)}], lay_q, speed=0.02)'
        "  # guarded: the shelf stops it\n"
        '    print("laid:", (r.get("value") or {}).get("stopped_reason"))',
        'opened = robot.move_to(gripper="open")',
        "robot.hold(duration_s=0.5)",
        'here = np.array(val(robot.get_robot_state(), "end_effector_position_m"))',
        f"r = go(here + [0, 0, 0.08], lay_q, speed={num(st.approach_speed_m_s)})",
        f"r = go(home, downq(0.0), speed={num(st.approach_speed_m_s)})  # out of the head camera's view",
    ]
    if st.notes:
        lines.append(f'with open("NOTES.md", "a") as f:\n    f.write("- laid the {olab} in the {dlab}\\n")')
    ctx.tcp_quaternion = np.asarray(done_quaternion, dtype=float).copy()
    reasoning = (f"The {olab} is held by its neck. The {dlab} holds bottles lying along its top shelf, not standing, "
                 f"so above the {dlab} I'll turn the hand to point along the groove: the {olab} then lies along it. "
                 "Then I lower it slowly until the shelf stops it, open, and back off upward.")
    return Step(reasoning, ["\n".join(lines)])

